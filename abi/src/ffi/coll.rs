//! Collective calls and reduction operations.

use std::os::raw::{c_int, c_void};

use super::region;
use crate::api;
use crate::coll;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem::{self, Region, VBuf, IN_PLACE};
use crate::state::{self, Core, OpRec, UserFn};
use crate::types::Dt;

fn in_place(p: *const c_void) -> bool {
    p as usize == IN_PLACE
}

fn no_in_place(p: *const c_void, what: &str) -> MpiResult<()> {
    if in_place(p) {
        return Err(MpiError::new(
            error::ERR_BUFFER,
            format!("MPI_IN_PLACE is not allowed as the {what} here"),
        ));
    }
    Ok(())
}

/// Rank and size of `comm`.
fn me_n(core: &Core, comm: c_int) -> MpiResult<(c_int, usize)> {
    let c = core.comm(comm)?;
    Ok((c.rank, c.members.len()))
}

/// The blocks of `n` ranks' equal parts of `count` elements each.
///
/// # Safety
/// `buf` holds `n * count` elements of `dt` (the caller's contract).
unsafe fn equal_blocks(buf: *const c_void, count: c_int, dt: c_int, n: usize) -> MpiResult<VBuf> {
    let c = mem::count(count)?;
    let t = state::datatype(dt, true)?;
    let step = c as isize * t.extent();
    let displs: Vec<isize> = (0..n as isize).map(|r| r * step).collect();
    // SAFETY: forwarded to the caller.
    unsafe { VBuf::new(buf, &vec![c; n], &displs, t) }
}

/// The blocks given by count and displacement arrays of `n` entries.
///
/// # Safety
/// `counts` and `displs` hold `n` ints; `buf` holds the blocks they describe.
unsafe fn var_blocks(
    buf: *const c_void,
    counts: *const c_int,
    displs: *const c_int,
    dt: c_int,
    n: usize,
) -> MpiResult<VBuf> {
    // SAFETY: arrays of `n` ints (caller).
    let (cs, ds) = unsafe {
        (
            mem::slice(counts, n, "counts")?,
            mem::slice(displs, n, "displacements")?,
        )
    };
    let t = state::datatype(dt, true)?;
    let counts: Vec<usize> = cs
        .iter()
        .map(|&c| mem::count(c))
        .collect::<MpiResult<_>>()?;
    let ext = t.extent();
    let displs: Vec<isize> = ds.iter().map(|&d| d as isize * ext).collect();
    // SAFETY: forwarded to the caller.
    unsafe { VBuf::new(buf, &counts, &displs, t) }
}

mpi_fn! {
    /// `MPI_Barrier`.
    fn MPI_Barrier / PMPI_Barrier(comm: c_int) -> c_int {
        api::call("MPI_Barrier", comm, |l| coll::barrier(l.core()?, comm))
    }
}

mpi_fn! {
    /// `MPI_Bcast`.
    fn MPI_Bcast / PMPI_Bcast(buffer: *mut c_void, count: c_int, datatype: c_int, root: c_int, comm: c_int) -> c_int {
        api::call("MPI_Bcast", comm, |l| {
            let core = l.core()?;
            // SAFETY: `buffer` holds `count` elements (contract); blocking call.
            let mut r = unsafe { region(buffer, count, datatype) }?;
            coll::bcast(core, comm, &mut r, root)
        })
    }
}

fn op_and_type(
    core: &Core,
    op: c_int,
    datatype: c_int,
    count: c_int,
) -> MpiResult<(usize, Dt, coll::Red)> {
    let n = mem::count(count)?;
    let dt = state::datatype(datatype, true)?;
    let red = coll::resolve_op(core, op, datatype, &dt)?;
    Ok((n, dt, red))
}

mpi_fn! {
    /// `MPI_Reduce`.
    fn MPI_Reduce / PMPI_Reduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, root: c_int, comm: c_int) -> c_int {
        api::call("MPI_Reduce", comm, |l| {
            let core = l.core()?;
            let (me, _) = me_n(core, comm)?;
            let (n, dt, red) = op_and_type(core, op, datatype, count)?;
            let send = if in_place(sendbuf) {
                if me != root {
                    return Err(MpiError::new(error::ERR_BUFFER, "MPI_IN_PLACE is only the root's send buffer"));
                }
                None
            } else {
                // SAFETY: `sendbuf` holds `count` elements (contract); blocking call.
                Some(unsafe { Region::new(sendbuf, n, dt.clone()) }?)
            };
            let mut recv = if me == root {
                // SAFETY: `recvbuf` holds `count` elements at the root (contract).
                Some(unsafe { Region::new(recvbuf, n, dt) }?)
            } else {
                None
            };
            coll::reduce(core, comm, send.as_ref(), recv.as_mut(), &red, root)
        })
    }
}

mpi_fn! {
    /// `MPI_Allreduce`.
    fn MPI_Allreduce / PMPI_Allreduce(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        api::call("MPI_Allreduce", comm, |l| {
            let core = l.core()?;
            let (n, dt, red) = op_and_type(core, op, datatype, count)?;
            let send = if in_place(sendbuf) {
                None
            } else {
                // SAFETY: `sendbuf` holds `count` elements (contract); blocking call.
                Some(unsafe { Region::new(sendbuf, n, dt.clone()) }?)
            };
            // SAFETY: `recvbuf` holds `count` elements (contract).
            let mut recv = unsafe { Region::new(recvbuf, n, dt) }?;
            coll::allreduce(core, comm, send.as_ref(), &mut recv, &red)
        })
    }
}

fn scan(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: c_int,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    exclusive: bool,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        let (n, dt, red) = op_and_type(core, op, datatype, count)?;
        let send = if in_place(sendbuf) {
            None
        } else {
            // SAFETY: `sendbuf` holds `count` elements (contract); blocking call.
            Some(unsafe { Region::new(sendbuf, n, dt.clone()) }?)
        };
        // SAFETY: `recvbuf` holds `count` elements (contract).
        let mut recv = unsafe { Region::new(recvbuf, n, dt) }?;
        coll::scan(core, comm, send.as_ref(), &mut recv, &red, exclusive)
    })
}

mpi_fn! {
    /// `MPI_Scan`.
    fn MPI_Scan / PMPI_Scan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        scan("MPI_Scan", sendbuf, recvbuf, count, datatype, op, comm, false)
    }
}

mpi_fn! {
    /// `MPI_Exscan` (rank 0's receive buffer is left as it was).
    fn MPI_Exscan / PMPI_Exscan(sendbuf: *const c_void, recvbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        scan("MPI_Exscan", sendbuf, recvbuf, count, datatype, op, comm, true)
    }
}

fn reduce_scatter(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts_of: impl FnOnce(usize) -> MpiResult<Vec<usize>>,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        let (me, n) = me_n(core, comm)?;
        let counts = counts_of(n)?;
        let total: usize = counts.iter().sum();
        let (_, dt, red) = op_and_type(core, op, datatype, 0)?;
        let input = if in_place(sendbuf) {
            // SAFETY: in place, `recvbuf` holds every rank's input (contract).
            unsafe { Region::new(recvbuf, total, dt.clone()) }?
        } else {
            // SAFETY: `sendbuf` holds every rank's input (contract); blocking call.
            unsafe { Region::new(sendbuf, total, dt.clone()) }?
        };
        // SAFETY: `recvbuf` holds this rank's share (contract).
        let mut recv = unsafe { Region::new(recvbuf, counts[me as usize], dt) }?;
        coll::reduce_scatter(core, comm, &input, &mut recv, &counts, &red)
    })
}

mpi_fn! {
    /// `MPI_Reduce_scatter`.
    fn MPI_Reduce_scatter / PMPI_Reduce_scatter(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const c_int, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        let counts_of = |n: usize| -> MpiResult<Vec<usize>> {
            // SAFETY: `recvcounts` holds one count per rank (contract).
            let cs = unsafe { mem::slice(recvcounts, n, "recvcounts") }?;
            cs.iter().map(|&c| mem::count(c)).collect()
        };
        reduce_scatter("MPI_Reduce_scatter", sendbuf, recvbuf, counts_of, datatype, op, comm)
    }
}

mpi_fn! {
    /// `MPI_Reduce_scatter_block`.
    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: c_int, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        let counts_of = |n: usize| -> MpiResult<Vec<usize>> { Ok(vec![mem::count(recvcount)?; n]) };
        reduce_scatter("MPI_Reduce_scatter_block", sendbuf, recvbuf, counts_of, datatype, op, comm)
    }
}

mpi_fn! {
    /// `MPI_Gather`.
    fn MPI_Gather / PMPI_Gather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        api::call("MPI_Gather", comm, |l| {
            let core = l.core()?;
            let (me, n) = me_n(core, comm)?;
            let is_root = me == root;
            let send = if is_root && in_place(sendbuf) {
                None
            } else {
                no_in_place(sendbuf, "send buffer of a non-root rank")?;
                // SAFETY: `sendbuf` holds `sendcount` elements (contract); blocking call.
                Some(unsafe { region(sendbuf, sendcount, sendtype) }?)
            };
            let mut recv = if is_root {
                // SAFETY: the root's `recvbuf` holds `n * recvcount` elements (contract).
                Some(unsafe { equal_blocks(recvbuf, recvcount, recvtype, n) }?)
            } else {
                None
            };
            coll::gatherv(core, comm, send.as_ref(), recv.as_mut(), root)
        })
    }
}

mpi_fn! {
    /// `MPI_Gatherv`.
    fn MPI_Gatherv / PMPI_Gatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        api::call("MPI_Gatherv", comm, |l| {
            let core = l.core()?;
            let (me, n) = me_n(core, comm)?;
            let is_root = me == root;
            let send = if is_root && in_place(sendbuf) {
                None
            } else {
                no_in_place(sendbuf, "send buffer of a non-root rank")?;
                // SAFETY: `sendbuf` holds `sendcount` elements (contract); blocking call.
                Some(unsafe { region(sendbuf, sendcount, sendtype) }?)
            };
            let mut recv = if is_root {
                // SAFETY: at the root, the arrays have `n` entries and `recvbuf` holds the
                // blocks they describe (contract).
                Some(unsafe { var_blocks(recvbuf, recvcounts, displs, recvtype, n) }?)
            } else {
                None
            };
            coll::gatherv(core, comm, send.as_ref(), recv.as_mut(), root)
        })
    }
}

mpi_fn! {
    /// `MPI_Scatter`.
    fn MPI_Scatter / PMPI_Scatter(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        api::call("MPI_Scatter", comm, |l| {
            let core = l.core()?;
            let (me, n) = me_n(core, comm)?;
            let is_root = me == root;
            let send = if is_root {
                // SAFETY: the root's `sendbuf` holds `n * sendcount` elements (contract).
                Some(unsafe { equal_blocks(sendbuf, sendcount, sendtype, n) }?)
            } else {
                None
            };
            let mut recv = if is_root && in_place(recvbuf) {
                None
            } else {
                no_in_place(recvbuf, "receive buffer of a non-root rank")?;
                // SAFETY: `recvbuf` holds `recvcount` elements (contract).
                Some(unsafe { region(recvbuf, recvcount, recvtype) }?)
            };
            coll::scatterv(core, comm, send.as_ref(), recv.as_mut(), root)
        })
    }
}

mpi_fn! {
    /// `MPI_Scatterv`.
    fn MPI_Scatterv / PMPI_Scatterv(sendbuf: *const c_void, sendcounts: *const c_int, displs: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        api::call("MPI_Scatterv", comm, |l| {
            let core = l.core()?;
            let (me, n) = me_n(core, comm)?;
            let is_root = me == root;
            let send = if is_root {
                // SAFETY: at the root, the arrays have `n` entries and `sendbuf` holds the
                // blocks they describe (contract).
                Some(unsafe { var_blocks(sendbuf, sendcounts, displs, sendtype, n) }?)
            } else {
                None
            };
            let mut recv = if is_root && in_place(recvbuf) {
                None
            } else {
                no_in_place(recvbuf, "receive buffer of a non-root rank")?;
                // SAFETY: `recvbuf` holds `recvcount` elements (contract).
                Some(unsafe { region(recvbuf, recvcount, recvtype) }?)
            };
            coll::scatterv(core, comm, send.as_ref(), recv.as_mut(), root)
        })
    }
}

mpi_fn! {
    /// `MPI_Allgather`.
    fn MPI_Allgather / PMPI_Allgather(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) -> c_int {
        api::call("MPI_Allgather", comm, |l| {
            let core = l.core()?;
            // One block per rank of the other group on an inter-communicator.
            let n = core.comm(comm)?.peer_count() as usize;
            let send = if in_place(sendbuf) {
                None
            } else {
                // SAFETY: `sendbuf` holds `sendcount` elements (contract); blocking call.
                Some(unsafe { region(sendbuf, sendcount, sendtype) }?)
            };
            // SAFETY: `recvbuf` holds `n * recvcount` elements (contract).
            let mut recv = unsafe { equal_blocks(recvbuf, recvcount, recvtype, n) }?;
            coll::allgatherv(core, comm, send.as_ref(), &mut recv)
        })
    }
}

mpi_fn! {
    /// `MPI_Allgatherv`.
    fn MPI_Allgatherv / PMPI_Allgatherv(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, displs: *const c_int, recvtype: c_int, comm: c_int) -> c_int {
        api::call("MPI_Allgatherv", comm, |l| {
            let core = l.core()?;
            let n = core.comm(comm)?.peer_count() as usize;
            let send = if in_place(sendbuf) {
                None
            } else {
                // SAFETY: `sendbuf` holds `sendcount` elements (contract); blocking call.
                Some(unsafe { region(sendbuf, sendcount, sendtype) }?)
            };
            // SAFETY: the arrays have `n` entries; `recvbuf` holds their blocks (contract).
            let mut recv = unsafe { var_blocks(recvbuf, recvcounts, displs, recvtype, n) }?;
            coll::allgatherv(core, comm, send.as_ref(), &mut recv)
        })
    }
}

mpi_fn! {
    /// `MPI_Alltoall`.
    fn MPI_Alltoall / PMPI_Alltoall(sendbuf: *const c_void, sendcount: c_int, sendtype: c_int, recvbuf: *mut c_void, recvcount: c_int, recvtype: c_int, comm: c_int) -> c_int {
        api::call("MPI_Alltoall", comm, |l| {
            let core = l.core()?;
            let (_, n) = me_n(core, comm)?;
            let send = if in_place(sendbuf) {
                None
            } else {
                // SAFETY: `sendbuf` holds `n * sendcount` elements (contract).
                Some(unsafe { equal_blocks(sendbuf, sendcount, sendtype, n) }?)
            };
            // SAFETY: `recvbuf` holds `n * recvcount` elements (contract).
            let mut recv = unsafe { equal_blocks(recvbuf, recvcount, recvtype, n) }?;
            coll::alltoallv(core, comm, send.as_ref(), &mut recv)
        })
    }
}

mpi_fn! {
    /// `MPI_Alltoallv`.
    fn MPI_Alltoallv / PMPI_Alltoallv(sendbuf: *const c_void, sendcounts: *const c_int, sdispls: *const c_int, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const c_int, rdispls: *const c_int, recvtype: c_int, comm: c_int) -> c_int {
        api::call("MPI_Alltoallv", comm, |l| {
            let core = l.core()?;
            let (_, n) = me_n(core, comm)?;
            let send = if in_place(sendbuf) {
                None
            } else {
                // SAFETY: the arrays have `n` entries; `sendbuf` holds their blocks (contract).
                Some(unsafe { var_blocks(sendbuf, sendcounts, sdispls, sendtype, n) }?)
            };
            // SAFETY: as above for the receive side.
            let mut recv = unsafe { var_blocks(recvbuf, recvcounts, rdispls, recvtype, n) }?;
            coll::alltoallv(core, comm, send.as_ref(), &mut recv)
        })
    }
}

mpi_fn! {
    /// `MPI_Reduce_local`.
    fn MPI_Reduce_local / PMPI_Reduce_local(inbuf: *const c_void, inoutbuf: *mut c_void, count: c_int, datatype: c_int, op: c_int) -> c_int {
        api::call("MPI_Reduce_local", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let (n, dt, red) = op_and_type(core, op, datatype, count)?;
            // SAFETY: both buffers hold `count` elements (contract).
            let input = unsafe { Region::new(inbuf, n, dt.clone()) }?;
            // SAFETY: as above.
            let mut inout = unsafe { Region::new(inoutbuf, n, dt) }?;
            coll::reduce_local(&input, &mut inout, &red)
        })
    }
}

mpi_fn! {
    /// `MPI_Op_create`.
    fn MPI_Op_create / PMPI_Op_create(user_fn: Option<UserFn>, commute: c_int, op: *mut c_int) -> c_int {
        api::call("MPI_Op_create", handle::COMM_WORLD, |l| {
            let func = user_fn.ok_or_else(|| MpiError::new(error::ERR_ARG, "the operation's function is null"))?;
            let core = l.core()?;
            let h = handle::make(Kind::Direct, Obj::Op, core.ops.insert(OpRec { func, commute: commute != 0 }));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(op, h, "op") }
        })
    }
}

mpi_fn! {
    /// `MPI_Op_free`.
    fn MPI_Op_free / PMPI_Op_free(op: *mut c_int) -> c_int {
        api::call("MPI_Op_free", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let h = unsafe { mem::get(op, "op") }?;
            let core = l.core()?;
            match handle::decode(h, Obj::Op) {
                Some((Kind::Direct, i)) if core.ops.get(i).is_some() => {
                    core.ops.remove(i);
                }
                Some((Kind::Builtin, _)) => {
                    return Err(MpiError::new(error::ERR_OP, "predefined operations cannot be freed"))
                }
                _ => return Err(MpiError::new(error::ERR_OP, format!("{h:#x} is not an operation"))),
            }
            // SAFETY: as above.
            unsafe { mem::put(op, handle::OP_NULL, "op") }
        })
    }
}

mpi_fn! {
    /// `MPI_Op_commutative`.
    fn MPI_Op_commutative / PMPI_Op_commutative(op: c_int, commute: *mut c_int) -> c_int {
        api::call("MPI_Op_commutative", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let c = match handle::decode(op, Obj::Op) {
                Some((Kind::Builtin, 1..=14)) => true,
                Some((Kind::Direct, _)) => core
                    .user_op(op)
                    .map(|u| u.commute)
                    .ok_or_else(|| MpiError::new(error::ERR_OP, format!("{op:#x} is not an operation")))?,
                _ => return Err(MpiError::new(error::ERR_OP, format!("{op:#x} is not an operation"))),
            };
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(commute, c_int::from(c), "commute") }
        })
    }
}
