//! One-sided communication: window creation and attributes, operations, synchronization.
//! Errors go through the window's error handler (`MPI_ERRORS_ARE_FATAL` until the program
//! sets another), as MPI says.

use std::os::raw::{c_char, c_int, c_void};

use super::{region, win_direct};
use crate::api;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem::{self, Region};
use crate::requests::{ReqRec, ReqState};
use crate::state::{self, ErrFn, Locked};
use crate::win::{self, Start};

/// `MPI_Win_create` and its large-count twin.
unsafe fn create(
    name: &'static str,
    base: *mut c_void,
    size: i64,
    disp_unit: i64,
    info: c_int,
    comm: c_int,
    out: *mut c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let du = disp_unit_of(disp_unit)?;
        // SAFETY: the program exposes `size` bytes at `base` until MPI_Win_free (contract).
        let h = unsafe { win::create(l, comm, base, size, du, info, win::FLAVOR_CREATE) }?;
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(out, h, "win") }
    })
}

fn disp_unit_of(d: i64) -> MpiResult<c_int> {
    c_int::try_from(d).map_err(|_| {
        MpiError::new(
            error::ERR_DISP,
            format!("displacement unit {d} does not fit an int"),
        )
    })
}

mpi_fn! {
    /// `MPI_Win_create`.
    fn MPI_Win_create / PMPI_Win_create(base: *mut c_void, size: isize, disp_unit: c_int, info: c_int, comm: c_int, win: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        unsafe { create("MPI_Win_create", base, size as i64, disp_unit.into(), info, comm, win) }
    }
}

mpi_fn! {
    /// `MPI_Win_create_c`.
    fn MPI_Win_create_c / PMPI_Win_create_c(base: *mut c_void, size: isize, disp_unit: isize, info: c_int, comm: c_int, win: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        unsafe { create("MPI_Win_create_c", base, size as i64, disp_unit as i64, info, comm, win) }
    }
}

/// `MPI_Win_allocate` and `MPI_Win_allocate_shared` (`shared`), in both bindings.
#[allow(clippy::too_many_arguments)]
unsafe fn allocate(
    name: &'static str,
    shared: bool,
    size: i64,
    disp_unit: i64,
    info: c_int,
    comm: c_int,
    baseptr: *mut c_void,
    out: *mut c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let du = disp_unit_of(disp_unit)?;
        let (h, base) = win::allocate(l, comm, size, du, info, shared)?;
        // SAFETY: `baseptr` is a `void **` in disguise; out-parameters (contract).
        unsafe { mem::put(baseptr as *mut *mut c_void, base, "baseptr") }?;
        // SAFETY: as above.
        unsafe { mem::put(out, h, "win") }
    })
}

mpi_fn! {
    /// `MPI_Win_allocate`.
    fn MPI_Win_allocate / PMPI_Win_allocate(size: isize, disp_unit: c_int, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        unsafe { allocate("MPI_Win_allocate", false, size as i64, disp_unit.into(), info, comm, baseptr, win) }
    }
}

mpi_fn! {
    /// `MPI_Win_allocate_c`.
    fn MPI_Win_allocate_c / PMPI_Win_allocate_c(size: isize, disp_unit: isize, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        unsafe { allocate("MPI_Win_allocate_c", false, size as i64, disp_unit as i64, info, comm, baseptr, win) }
    }
}

mpi_fn! {
    /// `MPI_Win_create_dynamic`.
    fn MPI_Win_create_dynamic / PMPI_Win_create_dynamic(info: c_int, comm: c_int, win: *mut c_int) -> c_int {
        api::call("MPI_Win_create_dynamic", comm, |l| {
            // SAFETY: a dynamic window exposes only what MPI_Win_attach adds.
            let h = unsafe {
                win::create(l, comm, std::ptr::null_mut(), 0, 1, info, win::FLAVOR_DYNAMIC)
            }?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(win, h, "win") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_attach`.
    fn MPI_Win_attach / PMPI_Win_attach(win: c_int, base: *mut c_void, size: isize) -> c_int {
        api::call("MPI_Win_attach", win, |l| {
            let core = l.core()?;
            let w = core.win(win)?;
            if !w.dynamic() {
                return Err(MpiError::new(error::ERR_RMA_FLAVOR, "MPI_Win_attach needs a window made by MPI_Win_create_dynamic"));
            }
            let len = usize::try_from(size).map_err(|_| MpiError::new(error::ERR_SIZE, format!("size {size} is negative")))?;
            let id = w.id;
            // SAFETY: the program exposes the memory until MPI_Win_detach (contract).
            unsafe { core.engine.win_attach(id, base as *mut u8, len) }
                .map_err(error::pml(error::ERR_RMA_ATTACH))
        })
    }
}

mpi_fn! {
    /// `MPI_Win_detach`.
    fn MPI_Win_detach / PMPI_Win_detach(win: c_int, base: *const c_void) -> c_int {
        api::call("MPI_Win_detach", win, |l| {
            let core = l.core()?;
            let id = core.win(win)?.id;
            core.engine
                .win_detach(id, base as *mut u8)
                .map_err(error::pml(error::ERR_RMA_ATTACH))
        })
    }
}

mpi_fn! {
    /// `MPI_Win_free`.
    fn MPI_Win_free / PMPI_Win_free(win: *mut c_int) -> c_int {
        // SAFETY: in-out parameter (contract).
        let h = match unsafe { mem::get(win, "win") } {
            Ok(h) => h,
            Err(e) => return api::call("MPI_Win_free", handle::COMM_WORLD, |_| Err(e)),
        };
        api::call("MPI_Win_free", h, |l| {
            win::free(l, h)?;
            // SAFETY: as above.
            unsafe { mem::put(win, handle::WIN_NULL, "win") }
        })
    }
}

/// Turns (address, count, datatype) into a region, counting the call's elements.
unsafe fn origin(addr: *const c_void, count: i64, dt: c_int) -> MpiResult<Region> {
    // SAFETY: forwarded to the caller.
    unsafe { region(addr, count, dt) }
}

/// Starts an operation and, for the request-based forms, stores its request.
#[allow(clippy::too_many_arguments)]
fn rma(
    l: &mut Locked,
    win_h: c_int,
    target: c_int,
    disp: isize,
    target_count: i64,
    target_dt: c_int,
    what: Start<'_>,
    request: Option<*mut c_int>,
) -> MpiResult<()> {
    let count = mem::count(target_count)?;
    let ty = state::datatype(target_dt, true)?;
    let core = l.core()?;
    let started = win::start(core, win_h, target, disp as i64, count, &ty, what)?;
    if let Some(out) = request {
        let mut rec = ReqRec::done(win_h, 0, mem::St::empty(mem::ANY_SOURCE));
        if let Some((id, op)) = started {
            if op != kestrel_pml::rma::RMA_DONE {
                rec.state = ReqState::Rma { win: id, op };
            }
        }
        let h = core.insert_request(rec);
        // SAFETY: out-parameter (contract of the calling entry point).
        unsafe { mem::put(out, h, "request") }?;
    }
    Ok(())
}

mpi_fn_c! {
    /// `MPI_Put`.
    fn MPI_Put / PMPI_Put, MPI_Put_c / PMPI_Put_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int) -> c_int {
        if api::direct(|c| win_direct::put(c, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win)) {
            return error::SUCCESS;
        }
        api::call(NAME, win, |l| {
            // SAFETY: the origin buffer holds the data (contract); it is copied now.
            let r = unsafe { origin(origin_addr, origin_count.into(), origin_datatype) }?;
            rma(l, win, target_rank, target_disp, target_count.into(), target_datatype, Start::Put(&r), None)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Rput`.
    fn MPI_Rput / PMPI_Rput, MPI_Rput_c / PMPI_Rput_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int, request: *mut c_int) -> c_int {
        api::call(NAME, win, |l| {
            // SAFETY: as MPI_Put.
            let r = unsafe { origin(origin_addr, origin_count.into(), origin_datatype) }?;
            rma(l, win, target_rank, target_disp, target_count.into(), target_datatype, Start::Put(&r), Some(request))
        })
    }
}

mpi_fn_c! {
    /// `MPI_Get`.
    fn MPI_Get / PMPI_Get, MPI_Get_c / PMPI_Get_c(origin_addr: *mut c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int) -> c_int {
        if api::direct(|c| win_direct::get(c, origin_addr, origin_count.into(), origin_datatype, target_rank, target_disp, target_count.into(), target_datatype, win)) {
            return error::SUCCESS;
        }
        api::call(NAME, win, |l| {
            // SAFETY: the origin buffer stays valid until the epoch completes the get (MPI's
            // rules); the data is written there then.
            let r = unsafe { origin(origin_addr, origin_count.into(), origin_datatype) }?;
            rma(l, win, target_rank, target_disp, target_count.into(), target_datatype, Start::Get(r), None)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Rget`.
    fn MPI_Rget / PMPI_Rget, MPI_Rget_c / PMPI_Rget_c(origin_addr: *mut c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, win: c_int, request: *mut c_int) -> c_int {
        api::call(NAME, win, |l| {
            // SAFETY: as MPI_Get, until the request completes.
            let r = unsafe { origin(origin_addr, origin_count.into(), origin_datatype) }?;
            rma(l, win, target_rank, target_disp, target_count.into(), target_datatype, Start::Get(r), Some(request))
        })
    }
}

mpi_fn_c! {
    /// `MPI_Accumulate`.
    fn MPI_Accumulate / PMPI_Accumulate, MPI_Accumulate_c / PMPI_Accumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int) -> c_int {
        if i64::from(origin_count) == i64::from(target_count)
            && origin_datatype == target_datatype
            && api::direct(|c| win_direct::accumulate(c, origin_addr, std::ptr::null_mut(), false, origin_count.into(), origin_datatype, target_rank, target_disp, op, win))
        {
            return error::SUCCESS;
        }
        api::call(NAME, win, |l| {
            // SAFETY: as MPI_Put.
            let r = unsafe { origin(origin_addr, origin_count.into(), origin_datatype) }?;
            rma(l, win, target_rank, target_disp, target_count.into(), target_datatype, Start::Acc(&r, op), None)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Raccumulate`.
    fn MPI_Raccumulate / PMPI_Raccumulate, MPI_Raccumulate_c / PMPI_Raccumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int, request: *mut c_int) -> c_int {
        api::call(NAME, win, |l| {
            // SAFETY: as MPI_Put.
            let r = unsafe { origin(origin_addr, origin_count.into(), origin_datatype) }?;
            rma(l, win, target_rank, target_disp, target_count.into(), target_datatype, Start::Acc(&r, op), Some(request))
        })
    }
}

/// `MPI_Get_accumulate` and `MPI_Rget_accumulate` in both bindings.
#[allow(clippy::too_many_arguments)]
unsafe fn get_accumulate(
    l: &mut Locked,
    origin_addr: *const c_void,
    origin_count: i64,
    origin_dt: c_int,
    result_addr: *mut c_void,
    result_count: i64,
    result_dt: c_int,
    target: c_int,
    disp: isize,
    target_count: i64,
    target_dt: c_int,
    op: c_int,
    win_h: c_int,
    request: Option<*mut c_int>,
) -> MpiResult<()> {
    // MPI_NO_OP ignores the origin buffer, which may then be null.
    let o = if op == 0x5800_000e {
        None
    } else {
        // SAFETY: as MPI_Put.
        Some(unsafe { origin(origin_addr, origin_count, origin_dt) }?)
    };
    // SAFETY: as MPI_Get.
    let r = unsafe { origin(result_addr, result_count, result_dt) }?;
    rma(
        l,
        win_h,
        target,
        disp,
        target_count,
        target_dt,
        Start::GetAcc(o.as_ref(), r, op),
        request,
    )
}

mpi_fn_c! {
    /// `MPI_Get_accumulate`.
    fn MPI_Get_accumulate / PMPI_Get_accumulate, MPI_Get_accumulate_c / PMPI_Get_accumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, result_addr: *mut c_void, result_count: Count, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int) -> c_int {
        let same = i64::from(result_count) == i64::from(target_count) && result_datatype == target_datatype;
        let origin_same = op == 0x5800_000e || (i64::from(origin_count) == i64::from(target_count) && origin_datatype == target_datatype);
        if same && origin_same && api::direct(|c| win_direct::accumulate(c, origin_addr, result_addr, true, target_count.into(), target_datatype, target_rank, target_disp, op, win)) {
            return error::SUCCESS;
        }
        api::call(NAME, win, |l| {
            // SAFETY: forwarded contract.
            unsafe { get_accumulate(l, origin_addr, origin_count.into(), origin_datatype, result_addr, result_count.into(), result_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, None) }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Rget_accumulate`.
    fn MPI_Rget_accumulate / PMPI_Rget_accumulate, MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c(origin_addr: *const c_void, origin_count: Count, origin_datatype: c_int, result_addr: *mut c_void, result_count: Count, result_datatype: c_int, target_rank: c_int, target_disp: isize, target_count: Count, target_datatype: c_int, op: c_int, win: c_int, request: *mut c_int) -> c_int {
        api::call(NAME, win, |l| {
            // SAFETY: forwarded contract.
            unsafe { get_accumulate(l, origin_addr, origin_count.into(), origin_datatype, result_addr, result_count.into(), result_datatype, target_rank, target_disp, target_count.into(), target_datatype, op, win, Some(request)) }
        })
    }
}

mpi_fn! {
    /// `MPI_Fetch_and_op`: one element.
    fn MPI_Fetch_and_op / PMPI_Fetch_and_op(origin_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, op: c_int, win: c_int) -> c_int {
        if api::direct(|c| win_direct::fetch_and_op(c, origin_addr, result_addr, datatype, target_rank, target_disp, op, win)) {
            return error::SUCCESS;
        }
        api::call("MPI_Fetch_and_op", win, |l| {
            // SAFETY: forwarded contract.
            unsafe { get_accumulate(l, origin_addr, 1, datatype, result_addr, 1, datatype, target_rank, target_disp, 1, datatype, op, win, None) }
        })
    }
}

mpi_fn! {
    /// `MPI_Compare_and_swap`: one element.
    fn MPI_Compare_and_swap / PMPI_Compare_and_swap(origin_addr: *const c_void, compare_addr: *const c_void, result_addr: *mut c_void, datatype: c_int, target_rank: c_int, target_disp: isize, win: c_int) -> c_int {
        if api::direct(|c| win_direct::compare_and_swap(c, origin_addr, compare_addr, result_addr, datatype, target_rank, target_disp, win)) {
            return error::SUCCESS;
        }
        api::call("MPI_Compare_and_swap", win, |l| {
            // SAFETY: one element at each address (contract).
            let o = unsafe { origin(origin_addr, 1, datatype) }?;
            // SAFETY: as above.
            let c = unsafe { origin(compare_addr, 1, datatype) }?;
            // SAFETY: as above; written when the result arrives, within the epoch.
            let r = unsafe { origin(result_addr, 1, datatype) }?;
            rma(l, win, target_rank, target_disp, 1, datatype, Start::Cas(&o, &c, r), None)
        })
    }
}

/// A synchronization call on window `win`: `f` gets the engine and the window's id.
fn sync(
    name: &'static str,
    win: c_int,
    f: impl FnOnce(&mut kestrel_pml::Engine, u16) -> Result<(), kestrel_pml::PmlError>,
) -> c_int {
    api::call(name, win, |l| {
        let core = l.core()?;
        let id = win::id(core, win)?;
        f(&mut core.engine, id).map_err(win::sync_err)
    })
}

mpi_fn! {
    /// `MPI_Win_fence`.
    fn MPI_Win_fence / PMPI_Win_fence(assert: c_int, win: c_int) -> c_int {
        let _ = assert;
        sync("MPI_Win_fence", win, |e, id| e.win_fence(id))
    }
}

mpi_fn! {
    /// `MPI_Win_post`.
    fn MPI_Win_post / PMPI_Win_post(group: c_int, assert: c_int, win: c_int) -> c_int {
        let _ = assert;
        api::call("MPI_Win_post", win, |l| {
            let core = l.core()?;
            let ranks = win::group_ranks(core, win, group)?;
            let id = win::id(core, win)?;
            core.engine.win_post(id, &ranks).map_err(win::sync_err)
        })
    }
}

mpi_fn! {
    /// `MPI_Win_start`.
    fn MPI_Win_start / PMPI_Win_start(group: c_int, assert: c_int, win: c_int) -> c_int {
        let _ = assert;
        api::call("MPI_Win_start", win, |l| {
            let core = l.core()?;
            let ranks = win::group_ranks(core, win, group)?;
            let id = win::id(core, win)?;
            core.engine.win_start(id, &ranks).map_err(win::sync_err)
        })
    }
}

mpi_fn! {
    /// `MPI_Win_complete`.
    fn MPI_Win_complete / PMPI_Win_complete(win: c_int) -> c_int {
        sync("MPI_Win_complete", win, |e, id| e.win_complete(id))
    }
}

mpi_fn! {
    /// `MPI_Win_wait`.
    fn MPI_Win_wait / PMPI_Win_wait(win: c_int) -> c_int {
        sync("MPI_Win_wait", win, |e, id| e.win_wait(id))
    }
}

mpi_fn! {
    /// `MPI_Win_test`.
    fn MPI_Win_test / PMPI_Win_test(win: c_int, flag: *mut c_int) -> c_int {
        api::call("MPI_Win_test", win, |l| {
            let core = l.core()?;
            let id = win::id(core, win)?;
            let done = core.engine.win_test(id).map_err(win::sync_err)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(done), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_lock`.
    fn MPI_Win_lock / PMPI_Win_lock(lock_type: c_int, rank: c_int, assert: c_int, win: c_int) -> c_int {
        api::call("MPI_Win_lock", win, |l| {
            let exclusive = win::exclusive(lock_type)?;
            let core = l.core()?;
            let id = win::id(core, win)?;
            if rank == win::PROC_NULL {
                return Ok(());
            }
            core.engine
                .win_lock(id, rank_of(rank)?, exclusive, win::nocheck(assert))
                .map_err(win::sync_err)
        })
    }
}

/// A synchronization call on one target rank (`MPI_PROC_NULL`: nothing to do).
fn sync_rank(
    name: &'static str,
    win: c_int,
    rank: c_int,
    f: impl FnOnce(&mut kestrel_pml::Engine, u16, u32) -> Result<(), kestrel_pml::PmlError>,
) -> c_int {
    sync(name, win, |e, id| {
        if rank == win::PROC_NULL {
            return Ok(());
        }
        f(e, id, rank as u32)
    })
}

/// A flush: a memory fence when every member of the window is on this node
/// (`win_direct::flush`), the engine's flush `f` otherwise. `target` `None`: every rank.
fn flush(
    name: &'static str,
    win: c_int,
    target: Option<c_int>,
    f: impl FnOnce(&mut kestrel_pml::Engine, u16, u32) -> Result<(), kestrel_pml::PmlError>,
) -> c_int {
    if api::direct(|c| win_direct::flush(c, win, target)) {
        return error::SUCCESS;
    }
    api::call(name, win, |l| {
        let core = l.core()?;
        let id = win::id(core, win)?;
        match target {
            Some(win::PROC_NULL) => Ok(()),
            Some(t) => f(&mut core.engine, id, t as u32),
            None => f(&mut core.engine, id, u32::MAX),
        }
        .map_err(win::sync_err)
    })
}

fn rank_of(rank: c_int) -> MpiResult<u32> {
    u32::try_from(rank)
        .map_err(|_| MpiError::new(error::ERR_RANK, format!("rank {rank} is negative")))
}

mpi_fn! {
    /// `MPI_Win_unlock`.
    fn MPI_Win_unlock / PMPI_Win_unlock(rank: c_int, win: c_int) -> c_int {
        sync_rank("MPI_Win_unlock", win, rank, |e, id, t| e.win_unlock(id, t))
    }
}

mpi_fn! {
    /// `MPI_Win_lock_all`.
    fn MPI_Win_lock_all / PMPI_Win_lock_all(assert: c_int, win: c_int) -> c_int {
        sync("MPI_Win_lock_all", win, |e, id| e.win_lock_all(id, win::nocheck(assert)))
    }
}

mpi_fn! {
    /// `MPI_Win_unlock_all`.
    fn MPI_Win_unlock_all / PMPI_Win_unlock_all(win: c_int) -> c_int {
        sync("MPI_Win_unlock_all", win, |e, id| e.win_unlock_all(id))
    }
}

mpi_fn! {
    /// `MPI_Win_flush`.
    fn MPI_Win_flush / PMPI_Win_flush(rank: c_int, win: c_int) -> c_int {
        flush("MPI_Win_flush", win, Some(rank), |e, id, t| e.win_flush(id, t))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_all`.
    fn MPI_Win_flush_all / PMPI_Win_flush_all(win: c_int) -> c_int {
        flush("MPI_Win_flush_all", win, None, |e, id, _| e.win_flush_all(id))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local`.
    fn MPI_Win_flush_local / PMPI_Win_flush_local(rank: c_int, win: c_int) -> c_int {
        flush("MPI_Win_flush_local", win, Some(rank), |e, id, t| e.win_flush_local(id, t))
    }
}

mpi_fn! {
    /// `MPI_Win_flush_local_all`.
    fn MPI_Win_flush_local_all / PMPI_Win_flush_local_all(win: c_int) -> c_int {
        flush("MPI_Win_flush_local_all", win, None, |e, id, _| e.win_flush_local_all(id))
    }
}

mpi_fn! {
    /// `MPI_Win_sync`: a full memory barrier (the window's memory is the one copy: unified
    /// model), and a turn of progress so that operations from peers are applied.
    fn MPI_Win_sync / PMPI_Win_sync(win: c_int) -> c_int {
        api::call("MPI_Win_sync", win, |l| {
            let core = l.core()?;
            win::id(core, win)?;
            std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
            core.engine.progress();
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_group`.
    fn MPI_Win_get_group / PMPI_Win_get_group(win: c_int, group: *mut c_int) -> c_int {
        api::call("MPI_Win_get_group", win, |l| {
            let core = l.core()?;
            let members = core.win(win)?.members.clone();
            let g = core.new_group(kestrel_pml::Group::new(members));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(group, g, "group") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_set_name`.
    fn MPI_Win_set_name / PMPI_Win_set_name(win: c_int, name: *const c_char) -> c_int {
        api::call("MPI_Win_set_name", win, |l| {
            // SAFETY: NUL-terminated string (contract).
            let mut n = unsafe { mem::cstr(name, "win_name") }?;
            n.truncate(crate::comm::MAX_OBJECT_NAME - 1);
            l.core()?.win_mut(win)?.name = n;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_name`.
    fn MPI_Win_get_name / PMPI_Win_get_name(win: c_int, name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api::call("MPI_Win_get_name", win, |l| {
            let n = l.core()?.win(win)?.name.clone();
            // SAFETY: `name` holds MPI_MAX_OBJECT_NAME bytes (contract).
            unsafe { mem::put_cstr(name, crate::comm::MAX_OBJECT_NAME, &n, resultlen, "win_name") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_create_errhandler`.
    fn MPI_Win_create_errhandler / PMPI_Win_create_errhandler(f: Option<ErrFn>, errhandler: *mut c_int) -> c_int {
        api::call("MPI_Win_create_errhandler", handle::COMM_WORLD, |l| {
            let f = f.ok_or_else(|| MpiError::new(error::ERR_ARG, "the error handler function is null"))?;
            let core = l.core()?;
            let h = handle::make(Kind::Direct, Obj::Errhandler, core.errhandlers.insert(f));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errhandler, h, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_set_errhandler`.
    fn MPI_Win_set_errhandler / PMPI_Win_set_errhandler(win: c_int, errhandler: c_int) -> c_int {
        api::call("MPI_Win_set_errhandler", win, |l| {
            let core = l.core()?;
            crate::comm::check_errhandler(core, errhandler)?;
            core.win_mut(win)?.errhandler = errhandler;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_errhandler`.
    fn MPI_Win_get_errhandler / PMPI_Win_get_errhandler(win: c_int, errhandler: *mut c_int) -> c_int {
        api::call("MPI_Win_get_errhandler", win, |l| {
            let eh = l.core()?.win(win)?.errhandler;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errhandler, eh, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_call_errhandler`: runs the window's handler on `errorcode`.
    fn MPI_Win_call_errhandler / PMPI_Win_call_errhandler(win: c_int, errorcode: c_int) -> c_int {
        let Some(mut l) = Locked::acquire() else {
            return api::reentered("MPI_Win_call_errhandler");
        };
        let known = l.core().map(|c| c.win(win).is_ok()).unwrap_or(false);
        if !known {
            return api::raise(&mut l, "MPI_Win_call_errhandler", handle::COMM_WORLD, win::bad_win(win));
        }
        let e = MpiError::of_code(errorcode).on(win);
        // The handler returned (a fatal one does not): the call itself succeeded.
        let _ = api::raise(&mut l, "MPI_Win_call_errhandler", win, e);
        error::SUCCESS
    }
}

mpi_fn! {
    /// `MPI_Win_set_info`.
    fn MPI_Win_set_info / PMPI_Win_set_info(win: c_int, info: c_int) -> c_int {
        api::call("MPI_Win_set_info", win, |l| {
            let core = l.core()?;
            let pairs = if info == handle::INFO_NULL { Vec::new() } else { crate::comm::info_pairs(core, info)? };
            core.win_mut(win)?.info = pairs;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_get_info`: a new info object (the program frees it).
    fn MPI_Win_get_info / PMPI_Win_get_info(win: c_int, info_used: *mut c_int) -> c_int {
        api::call("MPI_Win_get_info", win, |l| {
            let core = l.core()?;
            let pairs = core.win(win)?.info.clone();
            let h = crate::comm::new_info(core, pairs);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(info_used, h, "info_used") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_create_keyval` (window keys share the communicators' key table).
    fn MPI_Win_create_keyval / PMPI_Win_create_keyval(copy: Option<state::CopyFn>, delete: Option<state::DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        api::call("MPI_Win_create_keyval", handle::COMM_WORLD, |l| {
            let h = crate::comm::create_keyval(l.core()?, state::KeyvalRec {
                copy,
                delete,
                extra: extra as usize,
                uses: 0,
                freed: false,
                proxy: None,
            });
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(keyval, h, "keyval") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_free_keyval`.
    fn MPI_Win_free_keyval / PMPI_Win_free_keyval(keyval: *mut c_int) -> c_int {
        api::call("MPI_Win_free_keyval", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let kv = unsafe { mem::get(keyval, "keyval") }?;
            crate::comm::free_keyval(l.core()?, kv)?;
            // SAFETY: as above.
            unsafe { mem::put(keyval, handle::KEYVAL_INVALID, "keyval") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_set_attr`.
    fn MPI_Win_set_attr / PMPI_Win_set_attr(win: c_int, keyval: c_int, value: *mut c_void) -> c_int {
        api::call("MPI_Win_set_attr", win, |l| win::set_attr(l, win, keyval, value as usize))
    }
}

mpi_fn! {
    /// `MPI_Win_get_attr`: predefined keys give the base address or the address of their
    /// value.
    fn MPI_Win_get_attr / PMPI_Win_get_attr(win: c_int, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
        api::call("MPI_Win_get_attr", win, |l| {
            let core = l.core()?;
            let w = core.win(win)?;
            let v = match win::predefined_attr(w, keyval) {
                Some(p) => Some(p as usize),
                None => {
                    crate::comm::keyval_slot(core, keyval)?;
                    w.attrs.iter().find(|a| a.0 == keyval).map(|a| a.1)
                }
            };
            if let Some(v) = v {
                // SAFETY: `value` is a `void **` in disguise (contract).
                unsafe { mem::put(value as *mut usize, v, "attribute_val") }?;
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(v.is_some()), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_delete_attr`.
    fn MPI_Win_delete_attr / PMPI_Win_delete_attr(win: c_int, keyval: c_int) -> c_int {
        api::call("MPI_Win_delete_attr", win, |l| {
            let core = l.core()?;
            crate::comm::keyval_slot(core, keyval)?;
            let Some(v) = core.win(win)?.attrs.iter().find(|a| a.0 == keyval).map(|a| a.1) else {
                return Ok(());
            };
            crate::comm::delete_one(l, win, keyval, v)?;
            l.core()?.win_mut(win)?.attrs.retain(|a| a.0 != keyval);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Win_allocate_shared`.
    fn MPI_Win_allocate_shared / PMPI_Win_allocate_shared(size: isize, disp_unit: c_int, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        unsafe { allocate("MPI_Win_allocate_shared", true, size as i64, disp_unit.into(), info, comm, baseptr, win) }
    }
}

mpi_fn! {
    /// `MPI_Win_allocate_shared_c`.
    fn MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c(size: isize, disp_unit: isize, info: c_int, comm: c_int, baseptr: *mut c_void, win: *mut c_int) -> c_int {
        // SAFETY: forwarded contract.
        unsafe { allocate("MPI_Win_allocate_shared_c", true, size as i64, disp_unit as i64, info, comm, baseptr, win) }
    }
}

mpi_fn! {
    /// `MPI_Win_shared_query`.
    fn MPI_Win_shared_query / PMPI_Win_shared_query(win: c_int, rank: c_int, size: *mut isize, disp_unit: *mut c_int, baseptr: *mut c_void) -> c_int {
        api::call("MPI_Win_shared_query", win, |l| {
            let (s, d, b) = win::shared_query(l.core()?, win, rank)?;
            // SAFETY: out-parameters (contract); `baseptr` is a `void **` in disguise.
            unsafe { mem::put(size, s as isize, "size") }?;
            // SAFETY: as above.
            unsafe { mem::put(disp_unit, d, "disp_unit") }?;
            // SAFETY: as above.
            unsafe { mem::put(baseptr as *mut *mut c_void, b, "baseptr") }
        })
    }
}

mpi_fn! {
    /// `MPI_Win_shared_query_c`.
    fn MPI_Win_shared_query_c / PMPI_Win_shared_query_c(win: c_int, rank: c_int, size: *mut isize, disp_unit: *mut isize, baseptr: *mut c_void) -> c_int {
        api::call("MPI_Win_shared_query_c", win, |l| {
            let (s, d, b) = win::shared_query(l.core()?, win, rank)?;
            // SAFETY: out-parameters (contract); `baseptr` is a `void **` in disguise.
            unsafe { mem::put(size, s as isize, "size") }?;
            // SAFETY: as above.
            unsafe { mem::put(disp_unit, d as isize, "disp_unit") }?;
            // SAFETY: as above.
            unsafe { mem::put(baseptr as *mut *mut c_void, b, "baseptr") }
        })
    }
}
