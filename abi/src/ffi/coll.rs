//! Collective calls and reduction operations.
//!
//! Under `MPI_THREAD_MULTIPLE` (`api::multithreaded`) every blocking collective here runs as
//! its schedule through [`super::icoll`] with `Out::Blocking`, waiting with the library lock
//! given to other threads; otherwise through the blocking algorithms of [`crate::coll`].

use std::os::raw::{c_int, c_void};

use super::coll_args::{self as args, Lay};
use super::coll_short as short;
use super::icoll::{self as nonblocking, Out};
use super::region;
use crate::api;
use crate::coll;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::icoll::{self, Start};
use crate::mem::{self, Region, VBuf, IN_PLACE};
use crate::state::{self, Core, OpFn, OpRec, UserFn, UserFnC};
use crate::types::Dt;

pub(super) fn in_place(p: *const c_void) -> bool {
    p as usize == IN_PLACE
}

pub(super) fn no_in_place(p: *const c_void, what: &str) -> MpiResult<()> {
    if in_place(p) {
        return Err(MpiError::new(
            error::ERR_BUFFER,
            format!("MPI_IN_PLACE is not allowed as the {what} here"),
        ));
    }
    Ok(())
}

/// Whether this process is a rooted collective's root (`root` names it in an
/// intra-communicator; `MPI_ROOT` does on an inter-communicator), and how many blocks the
/// root's buffer has (one per rank, or per member of the other group).
pub(super) fn root_here(core: &Core, comm: c_int, root: c_int) -> MpiResult<(bool, usize)> {
    let c = core.comm(comm)?;
    let here = if c.is_inter() {
        root == crate::coll::ROOT
    } else {
        c.rank == root
    };
    Ok((here, c.peer_count() as usize))
}

/// Whether this process takes part in a rooted collective on an inter-communicator as a
/// bystander (`MPI_PROC_NULL`: the root's group, not the root).
pub(super) fn bystander(core: &Core, comm: c_int, root: c_int) -> MpiResult<bool> {
    Ok(core.comm(comm)?.is_inter() && root == crate::p2p::PROC_NULL)
}

/// The blocks of `n` ranks' equal parts of `count` elements each.
///
/// # Safety
/// `buf` holds `n * count` elements of `dt` (the caller's contract).
pub(super) unsafe fn equal_blocks(
    buf: *const c_void,
    count: impl Into<i64>,
    dt: c_int,
    n: usize,
) -> MpiResult<VBuf> {
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
/// `counts` and `displs` hold `n` entries; `buf` holds the blocks they describe.
pub(super) unsafe fn var_blocks<T: Copy + Into<i64>>(
    buf: *const c_void,
    counts: *const T,
    displs: *const T,
    dt: c_int,
    n: usize,
) -> MpiResult<VBuf> {
    // SAFETY: arrays of `n` entries (caller).
    let (counts, ds) = unsafe {
        (
            mem::counts(counts, n, "counts")?,
            mem::displs(displs, n, "displacements")?,
        )
    };
    let t = state::datatype(dt, true)?;
    let ext = t.extent();
    let displs: Vec<isize> = ds.iter().map(|&d| d * ext).collect();
    // SAFETY: forwarded to the caller.
    unsafe { VBuf::new(buf, &counts, &displs, t) }
}

mpi_fn! {
    /// `MPI_Barrier`.
    fn MPI_Barrier / PMPI_Barrier(comm: c_int) -> c_int {
        if api::multithreaded() {
            return nonblocking::barrier("MPI_Barrier", comm, Out::Blocking);
        }
        api::call("MPI_Barrier", comm, |l| coll::barrier(l.core()?, comm))
    }
}

pub(super) fn op_and_type(
    core: &Core,
    op: c_int,
    datatype: c_int,
    count: impl Into<i64>,
) -> MpiResult<(usize, Dt, coll::Red)> {
    let n = mem::count(count)?;
    let dt = state::datatype(datatype, true)?;
    let red = coll::resolve_op(core, op, datatype, &dt)?;
    Ok((n, dt, red))
}

/// Runs a collective the blocking path has no inter-communicator algorithm for through its
/// schedule, to completion.
fn blocking(l: &mut state::Locked, rec: MpiResult<crate::requests::ReqRec>) -> MpiResult<()> {
    icoll::run_blocking(l, rec?)
}

fn is_inter(core: &Core, comm: c_int) -> MpiResult<bool> {
    Ok(core.comm(comm)?.is_inter())
}

mpi_fn_c! {
    /// `MPI_Bcast`.
    fn MPI_Bcast / PMPI_Bcast, MPI_Bcast_c / PMPI_Bcast_c(buffer: *mut c_void, count: Count, datatype: c_int, root: c_int, comm: c_int) -> c_int {
        if api::multithreaded() {
            return nonblocking::bcast(NAME, buffer, count.into(), datatype, root, comm, Start::Now, Out::Blocking);
        }
        api::call(NAME, comm, |l| {
            let core = l.core()?;
            // SAFETY: `buffer` holds `count` elements (contract); blocking call.
            if let Some(r) = unsafe { short::bcast(core, buffer, count.into(), datatype, root, comm) } {
                return r;
            }
            // SAFETY: `buffer` holds `count` elements (contract); blocking call.
            let mut r = unsafe { region(buffer, count, datatype) }?;
            coll::bcast(core, comm, &mut r, root)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Reduce`.
    fn MPI_Reduce / PMPI_Reduce, MPI_Reduce_c / PMPI_Reduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, root: c_int, comm: c_int) -> c_int {
        if api::multithreaded() {
            return nonblocking::reduce(NAME, sendbuf, recvbuf, count.into(), datatype, op, root, comm, Start::Now, Out::Blocking);
        }
        api::call(NAME, comm, |l| {
            let core = l.core()?;
            // SAFETY: the buffers hold `count` elements where MPI uses them (contract).
            if let Some(r) = unsafe { short::reduce(core, sendbuf, recvbuf, count.into(), datatype, op, root, comm) } {
                return r;
            }
            // SAFETY: the buffers hold `count` elements where MPI uses them (contract).
            let (send, mut recv, red) = unsafe { args::reduce(core, comm, sendbuf, recvbuf, count.into(), datatype, op, root) }?;
            if is_inter(core, comm)? {
                let rec = icoll::reduce(core, comm, send.as_ref(), recv.as_ref(), &red, root, Start::Now);
                return blocking(l, rec);
            }
            coll::reduce(core, comm, send.as_ref(), recv.as_mut(), &red, root)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Allreduce`.
    fn MPI_Allreduce / PMPI_Allreduce, MPI_Allreduce_c / PMPI_Allreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        if api::multithreaded() {
            return nonblocking::allreduce(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, Start::Now, Out::Blocking);
        }
        api::call(NAME, comm, |l| {
            let core = l.core()?;
            // SAFETY: both buffers hold `count` elements (contract); blocking call.
            if let Some(r) = unsafe { short::allreduce(core, sendbuf, recvbuf, count.into(), datatype, op, comm) } {
                return r;
            }
            // SAFETY: both buffers hold `count` elements (contract); blocking call.
            let (send, recv, red) = unsafe { args::reduction(core, sendbuf, recvbuf, count.into(), datatype, op, true, true) }?;
            let mut recv = recv.expect("asked for");
            coll::allreduce(core, comm, send.as_ref(), &mut recv, &red)
        })
    }
}

fn scan(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    exclusive: bool,
) -> c_int {
    if api::multithreaded() {
        return nonblocking::scan(
            name,
            sendbuf,
            recvbuf,
            count,
            datatype,
            op,
            comm,
            exclusive,
            Start::Now,
            Out::Blocking,
        );
    }
    api::call(name, comm, |l| {
        let core = l.core()?;
        // SAFETY: both buffers hold `count` elements (contract); blocking call.
        let (send, recv, red) =
            unsafe { args::reduction(core, sendbuf, recvbuf, count, datatype, op, true, true) }?;
        let mut recv = recv.expect("asked for");
        coll::scan(core, comm, send.as_ref(), &mut recv, &red, exclusive)
    })
}

mpi_fn_c! {
    /// `MPI_Scan`.
    fn MPI_Scan / PMPI_Scan, MPI_Scan_c / PMPI_Scan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        scan(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, false)
    }
}

mpi_fn_c! {
    /// `MPI_Exscan` (rank 0's receive buffer is left as it was).
    fn MPI_Exscan / PMPI_Exscan, MPI_Exscan_c / PMPI_Exscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        scan(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, true)
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
    if api::multithreaded() {
        return nonblocking::reduce_scatter(
            name,
            sendbuf,
            recvbuf,
            counts_of,
            datatype,
            op,
            comm,
            Start::Now,
            Out::Blocking,
        );
    }
    api::call(name, comm, |l| {
        let core = l.core()?;
        // SAFETY: the buffers hold what the counts describe (contract of the entry points).
        let mut a =
            unsafe { args::reduce_scatter(core, comm, sendbuf, recvbuf, counts_of, datatype, op) }?;
        if is_inter(core, comm)? {
            let rec = icoll::reduce_scatter(
                core,
                comm,
                &a.input,
                a.in_place,
                &a.recv,
                &a.counts,
                &a.red,
                Start::Now,
            );
            return blocking(l, rec);
        }
        coll::reduce_scatter(core, comm, &a.input, &mut a.recv, &a.counts, &a.red)
    })
}

mpi_fn_c! {
    /// `MPI_Reduce_scatter`.
    fn MPI_Reduce_scatter / PMPI_Reduce_scatter, MPI_Reduce_scatter_c / PMPI_Reduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        // SAFETY: `recvcounts` holds one count per rank (contract).
        let counts_of = |n: usize| unsafe { mem::counts(recvcounts, n, "recvcounts") };
        reduce_scatter(NAME, sendbuf, recvbuf, counts_of, datatype, op, comm)
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_scatter_block`.
    fn MPI_Reduce_scatter_block / PMPI_Reduce_scatter_block, MPI_Reduce_scatter_block_c / PMPI_Reduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: c_int, op: c_int, comm: c_int) -> c_int {
        let counts_of = |n: usize| -> MpiResult<Vec<usize>> { Ok(vec![mem::count(recvcount)?; n]) };
        reduce_scatter(NAME, sendbuf, recvbuf, counts_of, datatype, op, comm)
    }
}

fn gather<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> c_int {
    if api::multithreaded() {
        return nonblocking::gather(
            name,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            lay,
            recvtype,
            root,
            comm,
            Start::Now,
            Out::Blocking,
        );
    }
    api::call(name, comm, |l| {
        let core = l.core()?;
        if let Lay::Equal(rc) = lay {
            // SAFETY: the buffers hold what the counts describe (entry points' contract).
            let r = unsafe {
                short::gather(
                    core, sendbuf, sendcount, sendtype, recvbuf, rc, recvtype, root, comm,
                )
            };
            if let Some(r) = r {
                return r;
            }
        }
        // SAFETY: the buffers and arrays hold what the counts describe (entry points' contract).
        let mut a = unsafe {
            args::gather(
                core, comm, root, sendbuf, sendcount, sendtype, recvbuf, lay, recvtype,
            )
        }?;
        if is_inter(core, comm)? {
            let rec = icoll::gatherv(
                core,
                comm,
                a.single.as_ref(),
                a.blocks.as_ref(),
                root,
                Start::Now,
            );
            return blocking(l, rec);
        }
        let equal = matches!(lay, Lay::Equal(_));
        coll::gatherv(
            core,
            comm,
            a.single.as_ref(),
            a.blocks.as_mut(),
            root,
            equal,
        )
    })
}

mpi_fn_c! {
    /// `MPI_Gather`.
    fn MPI_Gather / PMPI_Gather, MPI_Gather_c / PMPI_Gather_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        gather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, root, comm)
    }
}

mpi_fn_c! {
    /// `MPI_Gatherv`.
    fn MPI_Gatherv / PMPI_Gatherv, MPI_Gatherv_c / PMPI_Gatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        gather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, root, comm)
    }
}

fn scatter<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    lay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> c_int {
    if api::multithreaded() {
        return nonblocking::scatter(
            name,
            sendbuf,
            lay,
            sendtype,
            recvbuf,
            recvcount,
            recvtype,
            root,
            comm,
            Start::Now,
            Out::Blocking,
        );
    }
    api::call(name, comm, |l| {
        let core = l.core()?;
        if let Lay::Equal(sc) = lay {
            // SAFETY: the buffers hold what the counts describe (entry points' contract).
            let r = unsafe {
                short::scatter(
                    core, sendbuf, sc, sendtype, recvbuf, recvcount, recvtype, root, comm,
                )
            };
            if let Some(r) = r {
                return r;
            }
        }
        // SAFETY: the buffers and arrays hold what the counts describe (entry points' contract).
        let mut a = unsafe {
            args::scatter(
                core, comm, root, sendbuf, lay, sendtype, recvbuf, recvcount, recvtype,
            )
        }?;
        if is_inter(core, comm)? {
            let rec = icoll::scatterv(
                core,
                comm,
                a.blocks.as_ref(),
                a.single.as_ref(),
                root,
                Start::Now,
            );
            return blocking(l, rec);
        }
        let equal = matches!(lay, Lay::Equal(_));
        coll::scatterv(
            core,
            comm,
            a.blocks.as_ref(),
            a.single.as_mut(),
            root,
            equal,
        )
    })
}

mpi_fn_c! {
    /// `MPI_Scatter`.
    fn MPI_Scatter / PMPI_Scatter, MPI_Scatter_c / PMPI_Scatter_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        scatter::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, recvcount.into(), recvtype, root, comm)
    }
}

mpi_fn_c! {
    /// `MPI_Scatterv`.
    fn MPI_Scatterv / PMPI_Scatterv, MPI_Scatterv_c / PMPI_Scatterv_c(sendbuf: *const c_void, sendcounts: *const Count, displs: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int) -> c_int {
        scatter(NAME, sendbuf, Lay::Var(sendcounts, displs), sendtype, recvbuf, recvcount.into(), recvtype, root, comm)
    }
}

fn allgather<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    if api::multithreaded() {
        return nonblocking::allgather(
            name,
            sendbuf,
            sendcount,
            sendtype,
            recvbuf,
            lay,
            recvtype,
            comm,
            Start::Now,
            Out::Blocking,
        );
    }
    let equal = matches!(lay, Lay::Equal(_));
    api::call(name, comm, |l| {
        let core = l.core()?;
        if let Lay::Equal(rc) = lay {
            // SAFETY: the buffers hold what the counts describe (entry points' contract).
            let r = unsafe {
                short::allgather(
                    core, sendbuf, sendcount, sendtype, recvbuf, rc, recvtype, comm,
                )
            };
            if let Some(r) = r {
                return r;
            }
        }
        // SAFETY: the buffers and arrays hold what the counts describe (entry points' contract).
        let (send, mut recv) = unsafe {
            args::allgather(
                core, comm, sendbuf, sendcount, sendtype, recvbuf, lay, recvtype,
            )
        }?;
        if is_inter(core, comm)? {
            // The two groups may send blocks of different lengths: direct messages.
            let rec = icoll::allgatherv(core, comm, send.as_ref(), &recv, Start::Now);
            return blocking(l, rec);
        }
        coll::allgatherv(core, comm, send.as_ref(), &mut recv, equal)
    })
}

mpi_fn_c! {
    /// `MPI_Allgather`.
    fn MPI_Allgather / PMPI_Allgather, MPI_Allgather_c / PMPI_Allgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) -> c_int {
        allgather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm)
    }
}

mpi_fn_c! {
    /// `MPI_Allgatherv`.
    fn MPI_Allgatherv / PMPI_Allgatherv, MPI_Allgatherv_c / PMPI_Allgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, comm: c_int) -> c_int {
        allgather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, comm)
    }
}

fn alltoall<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    slay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    rlay: Lay<T>,
    recvtype: c_int,
    comm: c_int,
) -> c_int {
    if api::multithreaded() {
        return nonblocking::alltoall(
            name,
            sendbuf,
            slay,
            sendtype,
            recvbuf,
            rlay,
            recvtype,
            comm,
            Start::Now,
            Out::Blocking,
        );
    }
    api::call(name, comm, |l| {
        let core = l.core()?;
        if let (Lay::Equal(sc), Lay::Equal(rc)) = (slay, rlay) {
            // SAFETY: the buffers hold what the counts describe (entry points' contract).
            let r = unsafe {
                short::alltoall(core, sendbuf, sc, sendtype, recvbuf, rc, recvtype, comm)
            };
            if let Some(r) = r {
                return r;
            }
        }
        // SAFETY: the buffers and arrays hold what the counts describe (entry points' contract).
        let (send, mut recv) = unsafe {
            args::alltoall(core, comm, sendbuf, slay, sendtype, recvbuf, rlay, recvtype)
        }?;
        if is_inter(core, comm)? {
            let rec = icoll::alltoallv(core, comm, send.as_ref(), &recv, Start::Now);
            return blocking(l, rec);
        }
        let equal = matches!((slay, rlay), (Lay::Equal(_), Lay::Equal(_)));
        coll::alltoallv(core, comm, send.as_ref(), &mut recv, equal)
    })
}

mpi_fn_c! {
    /// `MPI_Alltoall`.
    fn MPI_Alltoall / PMPI_Alltoall, MPI_Alltoall_c / PMPI_Alltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) -> c_int {
        alltoall::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm)
    }
}

mpi_fn_c! {
    /// `MPI_Alltoallv`.
    fn MPI_Alltoallv / PMPI_Alltoallv, MPI_Alltoallv_c / PMPI_Alltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtype: c_int, comm: c_int) -> c_int {
        alltoall(NAME, sendbuf, Lay::Var(sendcounts, sdispls), sendtype, recvbuf, Lay::Var(recvcounts, rdispls), recvtype, comm)
    }
}

mpi_fn_c! {
    /// `MPI_Alltoallw`: per-peer datatypes, displacements in bytes (run as a schedule).
    fn MPI_Alltoallw / PMPI_Alltoallw, MPI_Alltoallw_c / PMPI_Alltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtypes: *const c_int, comm: c_int) -> c_int {
        api::call(NAME, comm, |l| {
            let core = l.core()?;
            // SAFETY: the arrays hold one entry per peer; the buffers what they describe (contract).
            let (send, recv) = unsafe { args::alltoallw(core, comm, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes) }?;
            let rec = icoll::alltoallw(core, comm, send.as_deref(), &recv, Start::Now);
            blocking(l, rec)
        })
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_local`.
    fn MPI_Reduce_local / PMPI_Reduce_local, MPI_Reduce_local_c / PMPI_Reduce_local_c(inbuf: *const c_void, inoutbuf: *mut c_void, count: Count, datatype: c_int, op: c_int) -> c_int {
        api::call(NAME, handle::COMM_WORLD, |l| {
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

fn op_create(name: &'static str, func: Option<OpFn>, commute: c_int, op: *mut c_int) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        let func =
            func.ok_or_else(|| MpiError::new(error::ERR_ARG, "the operation's function is null"))?;
        let core = l.core()?;
        let h = handle::make(
            Kind::Direct,
            Obj::Op,
            core.ops.insert(OpRec {
                func,
                commute: commute != 0,
            }),
        );
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(op, h, "op") }
    })
}

mpi_fn! {
    /// `MPI_Op_create`.
    fn MPI_Op_create / PMPI_Op_create(user_fn: Option<UserFn>, commute: c_int, op: *mut c_int) -> c_int {
        op_create("MPI_Op_create", user_fn.map(OpFn::Int), commute, op)
    }
}

mpi_fn! {
    /// `MPI_Op_create_c`: a reduction function with an `MPI_Count` length.
    fn MPI_Op_create_c / PMPI_Op_create_c(user_fn: Option<UserFnC>, commute: c_int, op: *mut c_int) -> c_int {
        op_create("MPI_Op_create_c", user_fn.map(OpFn::Count), commute, op)
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
