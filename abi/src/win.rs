//! One-sided communication in the C library: window records, their handles and attributes,
//! and the translation of MPI's (address, count, datatype) arguments into the engine's
//! target byte ranges and packed origin bytes (`kestrel_pml::rma` does the rest).
//!
//! It owns the memory of `MPI_Win_allocate` windows (freed by `MPI_Win_free`) and the
//! values `MPI_Win_get_attr` points at. It never moves bytes to or from a window itself.

use std::os::raw::{c_int, c_void};

use kestrel_pml::op::Dtype;
use kestrel_pml::rma::{AccOp, Segment, WinMemory};

use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem::Region;
use crate::state::{Core, Locked};
use crate::types::{self, Dt};
pub use crate::win_rec::*;

/// The table slot of a window handle.
pub fn slot(h: c_int) -> Option<u32> {
    match handle::decode(h, Obj::Win) {
        Some((Kind::Direct, i)) => Some(i),
        _ => None,
    }
}

/// The error for a handle that names no window.
pub fn bad_win(h: c_int) -> MpiError {
    MpiError::new(
        error::ERR_WIN,
        if h == handle::WIN_NULL {
            "the window is MPI_WIN_NULL".to_string()
        } else {
            format!("{h:#x} is not a window (freed, or another kind of handle)")
        },
    )
}

impl Core {
    /// The window behind a handle.
    pub fn win(&self, h: c_int) -> MpiResult<&WinRec> {
        slot(h)
            .and_then(|i| self.wins.get(i))
            .ok_or_else(|| bad_win(h))
    }

    /// The window behind a handle, mutably.
    pub fn win_mut(&mut self, h: c_int) -> MpiResult<&mut WinRec> {
        slot(h)
            .and_then(|i| self.wins.get_mut(i))
            .ok_or_else(|| bad_win(h))
    }
}

fn engine_err(class: c_int) -> impl Fn(kestrel_pml::PmlError) -> MpiError {
    error::pml(class)
}

/// What every window creation checks first: the communicator's context and members, the
/// info's pairs, the size and displacement unit.
struct Setup {
    ctx: u16,
    members: Vec<u32>,
    info: Vec<(String, String)>,
}

fn setup(core: &Core, comm: c_int, size: i64, disp_unit: c_int, info: c_int) -> MpiResult<Setup> {
    let c = crate::comm::intra(core, comm, "a window")?;
    let (ctx, members) = (c.ctx, c.members.clone());
    let info = if info == handle::INFO_NULL {
        Vec::new()
    } else {
        crate::comm::info_pairs(core, info)?
    };
    if size < 0 {
        return Err(MpiError::new(
            error::ERR_SIZE,
            format!("window size {size} is negative"),
        ));
    }
    if disp_unit <= 0 {
        return Err(MpiError::new(
            error::ERR_DISP,
            format!("displacement unit {disp_unit} must be positive"),
        ));
    }
    Ok(Setup { ctx, members, info })
}

/// The record of a window the engine created as `id`.
fn record(
    core: &mut Core,
    s: Setup,
    id: u16,
    base: *mut c_void,
    size: i64,
    disp_unit: c_int,
    flavor: c_int,
) -> c_int {
    let rec = WinRec {
        id,
        members: s.members,
        base: base as usize,
        values: Box::new(AttrValues {
            size,
            disp_unit,
            flavor,
            model: MODEL_UNIFIED,
        }),
        direct: None,
        name: String::new(),
        errhandler: handle::ERRORS_ARE_FATAL,
        attrs: Vec::new(),
        info: s.info,
    };
    handle::make(Kind::Direct, Obj::Win, core.wins.insert(rec))
}

/// Creates a window over `comm` (collective) on the caller's memory (`MPI_Win_create`,
/// `flavor` [`FLAVOR_CREATE`]) or none yet ([`FLAVOR_DYNAMIC`]).
///
/// # Safety
/// `base..base + size` stays valid until `MPI_Win_free` (the caller's contract).
pub unsafe fn create(
    l: &mut Locked,
    comm: c_int,
    base: *mut c_void,
    size: i64,
    disp_unit: c_int,
    info: c_int,
    flavor: c_int,
) -> MpiResult<c_int> {
    let core = l.core()?;
    let s = setup(core, comm, size, disp_unit, info)?;
    let mem = if flavor == FLAVOR_DYNAMIC {
        WinMemory::dynamic()
    } else {
        // SAFETY: the caller's contract (see above).
        unsafe { WinMemory::fixed(base as *mut u8, size as usize) }
    };
    let id = core
        .engine
        .win_create(s.ctx, mem, size as u64, disp_unit as u32)
        .map_err(engine_err(error::ERR_WIN))?;
    Ok(record(core, s, id, base, size, disp_unit, flavor))
}

/// `MPI_Win_allocate` and (`shared`) `MPI_Win_allocate_shared` (collective): the engine
/// allocates the memory in a mapping every member on this node shares, so operations
/// between them are copies; `MPI_Win_allocate_shared` needs every member on this node.
/// Returns the window and this member's base.
pub fn allocate(
    l: &mut Locked,
    comm: c_int,
    size: i64,
    disp_unit: c_int,
    info: c_int,
    shared: bool,
) -> MpiResult<(c_int, *mut c_void)> {
    let core = l.core()?;
    let s = setup(core, comm, size, disp_unit, info)?;
    let class = if shared {
        error::ERR_RMA_SHARED
    } else {
        error::ERR_WIN
    };
    let a = core
        .engine
        .win_allocate(s.ctx, size as u64, disp_unit as u32, shared)
        .map_err(engine_err(class))?;
    let flavor = if shared {
        FLAVOR_SHARED
    } else {
        FLAVOR_ALLOCATE
    };
    let base = a.base as *mut c_void;
    let direct = core
        .engine
        .win_direct_view(a.win)
        .map_err(engine_err(class))?;
    let h = record(core, s, a.win, base, size, disp_unit, flavor);
    core.win_mut(h)?.direct = direct;
    Ok((h, base))
}

/// `MPI_Win_free`: completes every operation, deletes the attributes, forgets the window.
pub fn free(l: &mut Locked, win: c_int) -> MpiResult<()> {
    let id = l.core()?.win(win)?.id;
    // No direct operation once the window is going (the view would keep the memory mapped,
    // but an operation on a freed window must fail as the general path fails it).
    let direct = l.core()?.win_mut(win)?.direct.take();
    if let Err(e) = l.core()?.engine.win_free(id) {
        // Still a window (an epoch is open): its direct operations stay.
        l.core()?.win_mut(win)?.direct = direct;
        return Err(engine_err(error::ERR_RMA_SYNC)(e));
    }
    let attrs = l.core()?.win(win)?.attrs.clone();
    for (kv, value) in attrs.into_iter().rev() {
        crate::comm::delete_one(l, win, kv, value)?;
    }
    let core = l.core()?;
    if let Some(i) = slot(win) {
        core.wins.remove(i);
    }
    Ok(())
}

/// The window's id and this process's rank, checking `target` (`None` for
/// `MPI_PROC_NULL`: the operation does nothing).
fn target_of(core: &Core, win: c_int, target: c_int) -> MpiResult<Option<(u16, u32)>> {
    let w = core.win(win)?;
    if target == PROC_NULL {
        return Ok(None);
    }
    if target < 0 || target as usize >= w.members.len() {
        return Err(MpiError::new(
            error::ERR_RANK,
            format!(
                "target rank {target} is not in the window's group of {}",
                w.members.len()
            ),
        ));
    }
    Ok(Some((w.id, target as u32)))
}

/// The byte ranges `count` elements of `ty` at displacement `disp` of `target`'s window
/// cover (addresses in a dynamic window), merged where adjacent; checked against the
/// target's window size.
fn target_segments(
    core: &Core,
    win: c_int,
    target: u32,
    disp: i64,
    count: usize,
    ty: &Dt,
) -> MpiResult<Vec<Segment>> {
    let w = core.win(win)?;
    let member = core
        .engine
        .win_member(w.id, target)
        .map_err(engine_err(error::ERR_RANK))?;
    let range = |what: String| MpiError::new(error::ERR_RMA_RANGE, what);
    let base: i128 = if w.dynamic() {
        disp as i128
    } else {
        disp as i128 * member.disp_unit as i128
    };
    let mut segs: Vec<Segment> = Vec::new();
    let mut push = |off: i128, len: usize| -> MpiResult<()> {
        if len == 0 {
            return Ok(());
        }
        let off = u64::try_from(off).map_err(|_| {
            range(format!(
                "target displacement {disp} with this datatype reaches below the start of rank {target}'s window"
            ))
        })?;
        let mut off = off;
        let mut left = len;
        while left > 0 {
            let take = left.min(1 << 30);
            match segs.last_mut() {
                Some(s)
                    if s.offset + s.len as u64 == off && (s.len as usize + take) < (1 << 31) =>
                {
                    s.len += take as u32;
                }
                _ => segs.push(Segment {
                    offset: off,
                    len: take as u32,
                }),
            }
            off += take as u64;
            left -= take;
        }
        Ok(())
    };
    if ty.pair.is_some() {
        // Value/index pairs are reduced as whole C structs, padding included.
        push(base, count * ty.extent().max(0) as usize)?;
    } else if ty.is_contiguous() {
        push(base, count * ty.size)?;
    } else {
        let ext = ty.extent() as i128;
        for i in 0..count as i128 {
            for b in &ty.blocks {
                push(base + i * ext + b.disp as i128, b.len)?;
            }
        }
    }
    if !w.dynamic() {
        if let Some(s) = segs.iter().find(|s| s.offset + s.len as u64 > member.size) {
            return Err(range(format!(
                "{} bytes at byte {} of rank {target}'s window run past its {} bytes (target_disp {disp}, displacement unit {})",
                s.len, s.offset, member.size, member.disp_unit
            )));
        }
    }
    Ok(segs)
}

/// The origin's data as the target will see it: packed bytes, or the raw structs of a
/// value/index pair type.
fn origin_bytes(r: &Region) -> MpiResult<Vec<u8>> {
    if r.ty.pair.is_some() {
        // The span ends at the last element's data; its trailing padding is not the
        // program's memory, so it is sent as zeros (reductions ignore padding).
        let n = r.count * r.ty.extent().max(0) as usize;
        let mut v = r.bytes()[..n.min(r.bytes().len())].to_vec();
        v.resize(n, 0);
        return Ok(v);
    }
    r.pack()
}

/// Where fetched bytes go: unpacked into `r` (raw copy for pair types).
fn sink_into(r: Region) -> kestrel_pml::rma::Sink {
    Box::new(move |bytes: &[u8]| {
        if r.ty.pair.is_some() {
            let span = r.span;
            let _ = span.write_at(0, bytes);
        } else {
            let _ = r.unpack(bytes);
        }
    })
}

/// An accumulate's operation and element type for target type `ty`.
fn acc_op(op: c_int, ty: &Dt) -> MpiResult<(AccOp, Dtype)> {
    let acc = match op {
        0x5800_000d => AccOp::Replace,
        0x5800_000e => AccOp::NoOp,
        _ => match crate::coll::predefined_op(op) {
            Some(p) => AccOp::Reduce(p),
            None => {
                return Err(MpiError::new(
                    error::ERR_OP,
                    format!(
                        "{op:#x} is not a predefined operation: one-sided accumulates take only \
                         predefined operations, MPI_REPLACE and MPI_NO_OP"
                    ),
                ))
            }
        },
    };
    let basic = if let Some(p) = ty.pair {
        Some(p)
    } else {
        ty.uniform_basic()
            .and_then(|b| types::reduction_type(b.handle))
    };
    let dtype = match (acc, basic) {
        (AccOp::Reduce(p), Some(d)) if p.applies_to(d) => d,
        (AccOp::Reduce(p), _) => {
            return Err(MpiError::new(
                error::ERR_OP,
                format!(
                    "{} is not defined for the accumulate's datatype (elements of one \
                     integer, floating-point or value/index type are needed)",
                    p.name()
                ),
            ))
        }
        (_, Some(d)) => d,
        (_, None) => Dtype::Opaque(ty.uniform_basic().map(|b| b.size).unwrap_or(1).max(1) as u32),
    };
    Ok((acc, dtype))
}

/// What one-sided operation to start (the C arguments, already turned into regions).
pub enum Start<'a> {
    /// `MPI_Put`.
    Put(&'a Region),
    /// `MPI_Get` into the region.
    Get(Region),
    /// `MPI_Accumulate` with an operation.
    Acc(&'a Region, c_int),
    /// `MPI_Get_accumulate`: origin data (`None` for `MPI_NO_OP`), result, operation.
    GetAcc(Option<&'a Region>, Region, c_int),
    /// `MPI_Compare_and_swap`: origin, compare, result.
    Cas(&'a Region, &'a Region, Region),
}

/// Starts a one-sided operation on `count` elements of `ty` at `disp` of `target`'s window.
/// Returns the engine's handle of a fetching operation.
#[allow(clippy::too_many_arguments)]
pub fn start(
    core: &mut Core,
    win: c_int,
    target: c_int,
    disp: i64,
    count: usize,
    ty: &Dt,
    what: Start<'_>,
) -> MpiResult<Option<(u16, kestrel_pml::rma::RmaOp)>> {
    let Some((id, t)) = target_of(core, win, target)? else {
        return Ok(None);
    };
    let segs = target_segments(core, win, t, disp, count, ty)?;
    let e = &mut core.engine;
    let err = engine_err(error::ERR_ARG);
    let op = match what {
        Start::Put(r) => {
            e.rma_put(id, t, &segs, &origin_bytes(r)?).map_err(err)?;
            kestrel_pml::rma::RMA_DONE
        }
        Start::Get(r) => e.rma_get(id, t, &segs, sink_into(r)).map_err(err)?,
        Start::Acc(r, op) => {
            let (acc, d) = acc_op(op, ty)?;
            let data = if acc == AccOp::NoOp {
                Vec::new()
            } else {
                origin_bytes(r)?
            };
            if acc == AccOp::NoOp {
                return Ok(None);
            }
            e.rma_accumulate(id, t, &segs, &data, acc, d).map_err(err)?;
            kestrel_pml::rma::RMA_DONE
        }
        Start::GetAcc(origin, result, op) => {
            let (acc, d) = acc_op(op, ty)?;
            let data = match (acc, origin) {
                (AccOp::NoOp, _) | (_, None) => Vec::new(),
                (_, Some(r)) => origin_bytes(r)?,
            };
            e.rma_get_accumulate(id, t, &segs, &data, acc, d, sink_into(result))
                .map_err(err)?
        }
        Start::Cas(origin, compare, result) => {
            let disp_bytes = segs.first().map(|s| s.offset).unwrap_or(0);
            let o = origin_bytes(origin)?;
            let c = origin_bytes(compare)?;
            e.rma_compare_and_swap(id, t, disp_bytes, &c, &o, sink_into(result))
                .map_err(err)?
        }
    };
    Ok(Some((id, op)))
}

/// The engine id of a window.
pub fn id(core: &Core, win: c_int) -> MpiResult<u16> {
    Ok(core.win(win)?.id)
}

/// The lock type argument of `MPI_Win_lock`.
pub fn exclusive(lock_type: c_int) -> MpiResult<bool> {
    match lock_type {
        LOCK_EXCLUSIVE => Ok(true),
        LOCK_SHARED => Ok(false),
        t => Err(MpiError::new(
            error::ERR_LOCKTYPE,
            format!("lock type {t} is neither MPI_LOCK_EXCLUSIVE nor MPI_LOCK_SHARED"),
        )),
    }
}

/// `MPI_MODE_NOCHECK` (MPICH's value).
pub const MODE_NOCHECK: c_int = 1024;

/// Whether the assertion argument of `MPI_Win_lock`/`MPI_Win_lock_all` holds
/// `MPI_MODE_NOCHECK` (no conflicting lock: the engine takes none). Other assertion bits
/// are hints Kestrel does not use.
pub fn nocheck(assert: c_int) -> bool {
    assert & MODE_NOCHECK != 0
}

/// The window ranks of the members of group `g` (for post and start).
pub fn group_ranks(core: &Core, win: c_int, g: c_int) -> MpiResult<Vec<u32>> {
    let w = core.win(win)?;
    let group = core.group(g)?;
    group
        .members()
        .iter()
        .map(|p| {
            w.members
                .iter()
                .position(|m| m == p)
                .map(|r| r as u32)
                .ok_or_else(|| {
                    MpiError::new(
                        error::ERR_GROUP,
                        format!("process {p} of the group is not in the window"),
                    )
                })
        })
        .collect()
}

/// `MPI_Win_get_attr` of a predefined key: the value to store at `attribute_val`.
pub fn predefined_attr(w: &WinRec, kv: c_int) -> Option<*mut c_void> {
    let v = &*w.values;
    Some(match kv {
        ATTR_BASE => w.base as *mut c_void,
        ATTR_SIZE => &v.size as *const i64 as *mut c_void,
        ATTR_DISP_UNIT => &v.disp_unit as *const c_int as *mut c_void,
        ATTR_CREATE_FLAVOR => &v.flavor as *const c_int as *mut c_void,
        ATTR_MODEL => &v.model as *const c_int as *mut c_void,
        _ => return None,
    })
}

/// `MPI_Win_set_attr`: replaces (deleting) an existing value.
pub fn set_attr(l: &mut Locked, win: c_int, keyval: c_int, value: usize) -> MpiResult<()> {
    let core = l.core()?;
    let slot = crate::comm::keyval_slot(core, keyval)?;
    let old = core
        .win(win)?
        .attrs
        .iter()
        .find(|a| a.0 == keyval)
        .map(|a| a.1);
    if let Some(old) = old {
        crate::comm::delete_one(l, win, keyval, old)?;
    }
    let core = l.core()?;
    let w = core.win_mut(win)?;
    w.attrs.retain(|a| a.0 != keyval);
    w.attrs.push((keyval, value));
    if let Some(k) = core.keyvals.get_mut(slot) {
        k.uses += 1;
    }
    Ok(())
}

/// The value of a predefined attribute itself (what Fortran gets).
pub fn predefined_value(w: &WinRec, kv: c_int) -> Option<i64> {
    let v = &*w.values;
    Some(match kv {
        ATTR_BASE => w.base as i64,
        ATTR_SIZE => v.size,
        ATTR_DISP_UNIT => v.disp_unit.into(),
        ATTR_CREATE_FLAVOR => v.flavor.into(),
        ATTR_MODEL => v.model.into(),
        _ => return None,
    })
}

/// The sync-error class for a failed synchronization call.
pub fn sync_err(e: kestrel_pml::PmlError) -> MpiError {
    error::pml(error::ERR_RMA_SYNC)(e)
}

/// `MPI_Win_shared_query`: member `rank`'s size, displacement unit and base address in this
/// process (`MPI_PROC_NULL`: the lowest rank with memory).
pub fn shared_query(core: &Core, win: c_int, rank: c_int) -> MpiResult<(i64, c_int, *mut c_void)> {
    let w = core.win(win)?;
    if w.values.flavor != FLAVOR_SHARED {
        return Err(MpiError::new(
            error::ERR_RMA_FLAVOR,
            "MPI_Win_shared_query needs a window made by MPI_Win_allocate_shared",
        ));
    }
    let n = w.members.len();
    let info = |r: usize| core.engine.win_member(w.id, r as u32);
    let r = if rank == PROC_NULL {
        (0..n)
            .find(|&r| info(r).map(|i| i.size > 0).unwrap_or(false))
            .unwrap_or(0)
    } else {
        usize::try_from(rank)
            .ok()
            .filter(|&r| r < n)
            .ok_or_else(|| {
                MpiError::new(
                    error::ERR_RANK,
                    format!("rank {rank} is not in the window's group of {n}"),
                )
            })?
    };
    let i = info(r).map_err(error::pml(error::ERR_RANK))?;
    let base = core
        .engine
        .win_shared_base(w.id, r as u32)
        .map_err(error::pml(error::ERR_RANK))?
        .unwrap_or(std::ptr::null_mut()) as *mut c_void;
    Ok((i.size as i64, i.disp_unit as c_int, base))
}
