//! Nonblocking collectives (`MPI_I*`) and MPI-4's persistent collectives (`MPI_*_init`),
//! in both bindings: each pair shares one helper that turns the C arguments into typed
//! buffers (`coll_args`) and hands them to [`crate::icoll`] with the request's start mode.

use std::os::raw::{c_int, c_void};

use super::coll_args::{self as args, Lay};
use super::icoll_posted as posted;
use super::region;
use crate::api;
use crate::error::MpiResult;
use crate::icoll::{self, Start};
use crate::mem;
use crate::requests::ReqRec;
use crate::state::Core;

/// What becomes of a collective's request.
#[derive(Clone, Copy)]
pub(super) enum Out {
    /// Its handle is written here (the `MPI_I*` and `MPI_*_init` calls).
    Request(*mut c_int),
    /// The call waits for it, letting other threads in meanwhile: the blocking collectives
    /// under `MPI_THREAD_MULTIPLE`, where a blocking algorithm would hold the library for
    /// the whole collective and deadlock threads running collectives on other
    /// communicators.
    Blocking,
}

/// Builds a collective request with `body`; writes its handle, or waits for it.
fn nb(
    name: &'static str,
    comm: c_int,
    out: Out,
    body: impl FnOnce(&mut Core) -> MpiResult<ReqRec>,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        let blocking = matches!(out, Out::Blocking);
        if blocking {
            core.engine.set_blocking_sequence(true);
        }
        let rec = body(core);
        if blocking {
            core.engine.set_blocking_sequence(false);
        }
        let rec = rec?;
        match out {
            Out::Blocking => icoll::run_blocking(l, rec),
            Out::Request(request) => {
                let h = core.insert_request(rec);
                // SAFETY: out-parameter (contract of the entry points).
                unsafe { mem::put(request, h, "request") }
            }
        }
    })
}

/// `MPI_Ibarrier`, or `MPI_Barrier` run as a schedule.
pub(super) fn barrier(name: &'static str, comm: c_int, out: Out) -> c_int {
    nb(name, comm, out, |core| {
        if matches!(out, Out::Request(_)) {
            if let Some(rec) = posted::barrier(core, comm)? {
                return Ok(rec);
            }
        }
        icoll::barrier(core, comm, Start::Now)
    })
}

mpi_fn! {
    /// `MPI_Ibarrier`.
    fn MPI_Ibarrier / PMPI_Ibarrier(comm: c_int, request: *mut c_int) -> c_int {
        barrier("MPI_Ibarrier", comm, Out::Request(request))
    }
}

mpi_fn! {
    /// `MPI_Barrier_init`.
    fn MPI_Barrier_init / PMPI_Barrier_init(comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        nb("MPI_Barrier_init", comm, Out::Request(request), |core| icoll::barrier(core, comm, Start::Persistent))
    }
}

pub(super) fn bcast(
    name: &'static str,
    buffer: *mut c_void,
    count: i64,
    datatype: c_int,
    root: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        if start == Start::Now && matches!(out, Out::Request(_)) {
            // SAFETY: `buffer` holds `count` elements until the request completes (contract).
            if let Some(rec) = unsafe { posted::bcast(core, buffer, count, datatype, root, comm) }?
            {
                return Ok(rec);
            }
        }
        // SAFETY: `buffer` holds `count` elements until the request completes (contract).
        let r = unsafe { region(buffer, count, datatype) }?;
        icoll::bcast(core, comm, &r, root, start)
    })
}

mpi_fn_c! {
    /// `MPI_Ibcast`.
    fn MPI_Ibcast / PMPI_Ibcast, MPI_Ibcast_c / PMPI_Ibcast_c(buffer: *mut c_void, count: Count, datatype: c_int, root: c_int, comm: c_int, request: *mut c_int) -> c_int {
        bcast(NAME, buffer, count.into(), datatype, root, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Bcast_init`.
    fn MPI_Bcast_init / PMPI_Bcast_init, MPI_Bcast_init_c / PMPI_Bcast_init_c(buffer: *mut c_void, count: Count, datatype: c_int, root: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        bcast(NAME, buffer, count.into(), datatype, root, comm, Start::Persistent, Out::Request(request))
    }
}

pub(super) fn reduce(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: the buffers hold `count` elements where used, until completion (contract).
        let (send, recv, red) =
            unsafe { args::reduce(core, comm, sendbuf, recvbuf, count, datatype, op, root) }?;
        icoll::reduce(core, comm, send.as_ref(), recv.as_ref(), &red, root, start)
    })
}

mpi_fn_c! {
    /// `MPI_Ireduce`.
    fn MPI_Ireduce / PMPI_Ireduce, MPI_Ireduce_c / PMPI_Ireduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, root: c_int, comm: c_int, request: *mut c_int) -> c_int {
        reduce(NAME, sendbuf, recvbuf, count.into(), datatype, op, root, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_init`.
    fn MPI_Reduce_init / PMPI_Reduce_init, MPI_Reduce_init_c / PMPI_Reduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, root: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        reduce(NAME, sendbuf, recvbuf, count.into(), datatype, op, root, comm, Start::Persistent, Out::Request(request))
    }
}

pub(super) fn allreduce(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        if start == Start::Now && matches!(out, Out::Request(_)) {
            // SAFETY: both buffers hold `count` elements until completion (contract).
            let rec =
                unsafe { posted::allreduce(core, sendbuf, recvbuf, count, datatype, op, comm) }?;
            if let Some(rec) = rec {
                return Ok(rec);
            }
        }
        // SAFETY: both buffers hold `count` elements until completion (contract).
        let (send, recv, red) =
            unsafe { args::reduction(core, sendbuf, recvbuf, count, datatype, op, true, true) }?;
        let recv = recv.expect("asked for");
        icoll::allreduce(core, comm, send.as_ref(), &recv, &red, start)
    })
}

mpi_fn_c! {
    /// `MPI_Iallreduce`.
    fn MPI_Iallreduce / PMPI_Iallreduce, MPI_Iallreduce_c / PMPI_Iallreduce_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) -> c_int {
        allreduce(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Allreduce_init`.
    fn MPI_Allreduce_init / PMPI_Allreduce_init, MPI_Allreduce_init_c / PMPI_Allreduce_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        allreduce(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, Start::Persistent, Out::Request(request))
    }
}

pub(super) fn scan(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    exclusive: bool,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: both buffers hold `count` elements until completion (contract).
        let (send, recv, red) =
            unsafe { args::reduction(core, sendbuf, recvbuf, count, datatype, op, true, true) }?;
        let recv = recv.expect("asked for");
        icoll::scan(core, comm, send.as_ref(), &recv, &red, exclusive, start)
    })
}

mpi_fn_c! {
    /// `MPI_Iscan`.
    fn MPI_Iscan / PMPI_Iscan, MPI_Iscan_c / PMPI_Iscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) -> c_int {
        scan(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, false, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Scan_init`.
    fn MPI_Scan_init / PMPI_Scan_init, MPI_Scan_init_c / PMPI_Scan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        scan(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, false, Start::Persistent, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Iexscan`.
    fn MPI_Iexscan / PMPI_Iexscan, MPI_Iexscan_c / PMPI_Iexscan_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) -> c_int {
        scan(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, true, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Exscan_init`.
    fn MPI_Exscan_init / PMPI_Exscan_init, MPI_Exscan_init_c / PMPI_Exscan_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, count: Count, datatype: c_int, op: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        scan(NAME, sendbuf, recvbuf, count.into(), datatype, op, comm, true, Start::Persistent, Out::Request(request))
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn reduce_scatter(
    name: &'static str,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts_of: impl FnOnce(usize) -> MpiResult<Vec<usize>>,
    datatype: c_int,
    op: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: the buffers hold what the counts describe until completion (contract).
        let a =
            unsafe { args::reduce_scatter(core, comm, sendbuf, recvbuf, counts_of, datatype, op) }?;
        icoll::reduce_scatter(
            core, comm, &a.input, a.in_place, &a.recv, &a.counts, &a.red, start,
        )
    })
}

mpi_fn_c! {
    /// `MPI_Ireduce_scatter`.
    fn MPI_Ireduce_scatter / PMPI_Ireduce_scatter, MPI_Ireduce_scatter_c / PMPI_Ireduce_scatter_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) -> c_int {
        // SAFETY: `recvcounts` holds one count per rank (contract).
        let counts_of = |n: usize| unsafe { mem::counts(recvcounts, n, "recvcounts") };
        reduce_scatter(NAME, sendbuf, recvbuf, counts_of, datatype, op, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_scatter_init`.
    fn MPI_Reduce_scatter_init / PMPI_Reduce_scatter_init, MPI_Reduce_scatter_init_c / PMPI_Reduce_scatter_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcounts: *const Count, datatype: c_int, op: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        // SAFETY: `recvcounts` holds one count per rank (contract).
        let counts_of = |n: usize| unsafe { mem::counts(recvcounts, n, "recvcounts") };
        reduce_scatter(NAME, sendbuf, recvbuf, counts_of, datatype, op, comm, Start::Persistent, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Ireduce_scatter_block`.
    fn MPI_Ireduce_scatter_block / PMPI_Ireduce_scatter_block, MPI_Ireduce_scatter_block_c / PMPI_Ireduce_scatter_block_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: c_int, op: c_int, comm: c_int, request: *mut c_int) -> c_int {
        let counts_of = |n: usize| -> MpiResult<Vec<usize>> { Ok(vec![mem::count(recvcount)?; n]) };
        reduce_scatter(NAME, sendbuf, recvbuf, counts_of, datatype, op, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Reduce_scatter_block_init`.
    fn MPI_Reduce_scatter_block_init / PMPI_Reduce_scatter_block_init, MPI_Reduce_scatter_block_init_c / PMPI_Reduce_scatter_block_init_c(sendbuf: *const c_void, recvbuf: *mut c_void, recvcount: Count, datatype: c_int, op: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        let counts_of = |n: usize| -> MpiResult<Vec<usize>> { Ok(vec![mem::count(recvcount)?; n]) };
        reduce_scatter(NAME, sendbuf, recvbuf, counts_of, datatype, op, comm, Start::Persistent, Out::Request(request))
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn gather<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: buffers and arrays hold what the counts describe until completion (contract).
        let a = unsafe {
            args::gather(
                core, comm, root, sendbuf, sendcount, sendtype, recvbuf, lay, recvtype,
            )
        }?;
        icoll::gatherv(
            core,
            comm,
            a.single.as_ref(),
            a.blocks.as_ref(),
            root,
            start,
        )
    })
}

mpi_fn_c! {
    /// `MPI_Igather`.
    fn MPI_Igather / PMPI_Igather, MPI_Igather_c / PMPI_Igather_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) -> c_int {
        gather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, root, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Gather_init`.
    fn MPI_Gather_init / PMPI_Gather_init, MPI_Gather_init_c / PMPI_Gather_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        gather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, root, comm, Start::Persistent, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Igatherv`.
    fn MPI_Igatherv / PMPI_Igatherv, MPI_Igatherv_c / PMPI_Igatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) -> c_int {
        gather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, root, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Gatherv_init`.
    fn MPI_Gatherv_init / PMPI_Gatherv_init, MPI_Gatherv_init_c / PMPI_Gatherv_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, root: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        gather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, root, comm, Start::Persistent, Out::Request(request))
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn scatter<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    lay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: buffers and arrays hold what the counts describe until completion (contract).
        let a = unsafe {
            args::scatter(
                core, comm, root, sendbuf, lay, sendtype, recvbuf, recvcount, recvtype,
            )
        }?;
        icoll::scatterv(
            core,
            comm,
            a.blocks.as_ref(),
            a.single.as_ref(),
            root,
            start,
        )
    })
}

mpi_fn_c! {
    /// `MPI_Iscatter`.
    fn MPI_Iscatter / PMPI_Iscatter, MPI_Iscatter_c / PMPI_Iscatter_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) -> c_int {
        scatter::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Scatter_init`.
    fn MPI_Scatter_init / PMPI_Scatter_init, MPI_Scatter_init_c / PMPI_Scatter_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        scatter::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, Start::Persistent, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Iscatterv`.
    fn MPI_Iscatterv / PMPI_Iscatterv, MPI_Iscatterv_c / PMPI_Iscatterv_c(sendbuf: *const c_void, sendcounts: *const Count, displs: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, request: *mut c_int) -> c_int {
        scatter(NAME, sendbuf, Lay::Var(sendcounts, displs), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Scatterv_init`.
    fn MPI_Scatterv_init / PMPI_Scatterv_init, MPI_Scatterv_init_c / PMPI_Scatterv_init_c(sendbuf: *const c_void, sendcounts: *const Count, displs: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, root: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        scatter(NAME, sendbuf, Lay::Var(sendcounts, displs), sendtype, recvbuf, recvcount.into(), recvtype, root, comm, Start::Persistent, Out::Request(request))
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn allgather<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: buffers and arrays hold what the counts describe until completion (contract).
        let (send, recv) = unsafe {
            args::allgather(
                core, comm, sendbuf, sendcount, sendtype, recvbuf, lay, recvtype,
            )
        }?;
        icoll::allgatherv(core, comm, send.as_ref(), &recv, start)
    })
}

mpi_fn_c! {
    /// `MPI_Iallgather`.
    fn MPI_Iallgather / PMPI_Iallgather, MPI_Iallgather_c / PMPI_Iallgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        allgather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Allgather_init`.
    fn MPI_Allgather_init / PMPI_Allgather_init, MPI_Allgather_init_c / PMPI_Allgather_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        allgather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Start::Persistent, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Iallgatherv`.
    fn MPI_Iallgatherv / PMPI_Iallgatherv, MPI_Iallgatherv_c / PMPI_Iallgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        allgather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Allgatherv_init`.
    fn MPI_Allgatherv_init / PMPI_Allgatherv_init, MPI_Allgatherv_init_c / PMPI_Allgatherv_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        allgather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, comm, Start::Persistent, Out::Request(request))
    }
}

#[allow(clippy::too_many_arguments)]
pub(super) fn alltoall<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    slay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    rlay: Lay<T>,
    recvtype: c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: buffers and arrays hold what the counts describe until completion (contract).
        let (send, recv) = unsafe {
            args::alltoall(core, comm, sendbuf, slay, sendtype, recvbuf, rlay, recvtype)
        }?;
        icoll::alltoallv(core, comm, send.as_ref(), &recv, start)
    })
}

mpi_fn_c! {
    /// `MPI_Ialltoall`.
    fn MPI_Ialltoall / PMPI_Ialltoall, MPI_Ialltoall_c / PMPI_Ialltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        alltoall::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Alltoall_init`.
    fn MPI_Alltoall_init / PMPI_Alltoall_init, MPI_Alltoall_init_c / PMPI_Alltoall_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        alltoall::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Start::Persistent, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Ialltoallv`.
    fn MPI_Ialltoallv / PMPI_Ialltoallv, MPI_Ialltoallv_c / PMPI_Ialltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        alltoall(NAME, sendbuf, Lay::Var(sendcounts, sdispls), sendtype, recvbuf, Lay::Var(recvcounts, rdispls), recvtype, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Alltoallv_init`.
    fn MPI_Alltoallv_init / PMPI_Alltoallv_init, MPI_Alltoallv_init_c / PMPI_Alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        alltoall(NAME, sendbuf, Lay::Var(sendcounts, sdispls), sendtype, recvbuf, Lay::Var(recvcounts, rdispls), recvtype, comm, Start::Persistent, Out::Request(request))
    }
}

#[allow(clippy::too_many_arguments)]
fn alltoallw<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcounts: *const T,
    sdispls: *const T,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const T,
    rdispls: *const T,
    recvtypes: *const c_int,
    comm: c_int,
    start: Start,
    out: Out,
) -> c_int {
    nb(name, comm, out, |core| {
        // SAFETY: the arrays hold one entry per peer; the buffers what they describe (contract).
        let (send, recv) = unsafe {
            args::alltoallw(
                core, comm, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls,
                recvtypes,
            )
        }?;
        icoll::alltoallw(core, comm, send.as_deref(), &recv, start)
    })
}

mpi_fn_c! {
    /// `MPI_Ialltoallw`.
    fn MPI_Ialltoallw / PMPI_Ialltoallw, MPI_Ialltoallw_c / PMPI_Ialltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtypes: *const c_int, comm: c_int, request: *mut c_int) -> c_int {
        alltoallw(NAME, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Start::Now, Out::Request(request))
    }
}

mpi_fn_c! {
    /// `MPI_Alltoallw_init`.
    fn MPI_Alltoallw_init / PMPI_Alltoallw_init, MPI_Alltoallw_init_c / PMPI_Alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtypes: *const c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        alltoallw(NAME, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Start::Persistent, Out::Request(request))
    }
}
