//! Neighborhood collectives on process topologies: `MPI_Neighbor_allgather(v)` and
//! `MPI_Neighbor_alltoall(v,w)`, blocking, nonblocking (`MPI_Ineighbor_*`) and persistent
//! (`MPI_Neighbor_*_init`), in both bindings.

use std::os::raw::{c_int, c_void};

use super::coll_args::{blocks, Lay};
use super::region;
use crate::api;
use crate::error::MpiResult;
use crate::icoll::neighbor::{self as nbr, Side};
use crate::icoll::{self, Start};
use crate::mem::{self, Region};
use crate::requests::ReqRec;
use crate::state::{self, Core};
use crate::topo;

/// How a neighborhood collective ends: run to completion, or a request.
#[derive(Clone, Copy)]
enum Mode {
    Blocking,
    Request(Start, *mut c_int),
}

fn run(
    name: &'static str,
    comm: c_int,
    mode: Mode,
    body: impl FnOnce(&mut Core, Start) -> MpiResult<ReqRec>,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        match mode {
            Mode::Blocking => {
                let rec = body(core, Start::Now)?;
                icoll::run_blocking(l, rec)
            }
            Mode::Request(start, request) => {
                let rec = body(core, start)?;
                let h = core.insert_request(rec);
                // SAFETY: out-parameter (contract of the entry points).
                unsafe { mem::put(request, h, "request") }
            }
        }
    })
}

/// Sources and destinations of `comm`'s topology.
fn degrees(core: &Core, comm: c_int) -> MpiResult<(usize, usize)> {
    let nb = topo::neighborhood(core, comm)?;
    Ok((nb.sources.len(), nb.dests.len()))
}

#[allow(clippy::too_many_arguments)]
fn allgather<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
    comm: c_int,
    mode: Mode,
) -> c_int {
    run(name, comm, mode, |core, start| {
        let (ins, _) = degrees(core, comm)?;
        // SAFETY: the buffers hold what the counts describe until completion (contract).
        let (s, r) = unsafe {
            (
                region(sendbuf, sendcount, sendtype)?,
                blocks(recvbuf, lay, recvtype, ins)?,
            )
        };
        nbr::allgatherv(core, comm, &s, &r, start)
    })
}

#[allow(clippy::too_many_arguments)]
fn alltoall<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    slay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    rlay: Lay<T>,
    recvtype: c_int,
    comm: c_int,
    mode: Mode,
) -> c_int {
    run(name, comm, mode, |core, start| {
        let (ins, outs) = degrees(core, comm)?;
        // SAFETY: the buffers hold what the counts describe until completion (contract).
        let (s, r) = unsafe {
            (
                blocks(sendbuf, slay, sendtype, outs)?,
                blocks(recvbuf, rlay, recvtype, ins)?,
            )
        };
        nbr::alltoall(core, comm, Side::Blocks(&s), Side::Blocks(&r), start)
    })
}

/// One region per neighbor at byte displacements (`MPI_Neighbor_alltoallw`).
///
/// # Safety
/// The arrays hold `n` entries; the buffer holds the blocks they describe.
unsafe fn regions<T: Copy + Into<i64>>(
    buf: *const c_void,
    counts: *const T,
    displs: *const isize,
    types: *const c_int,
    n: usize,
) -> MpiResult<Vec<Region>> {
    // SAFETY: forwarded to the caller.
    let (cs, ds, ts) = unsafe {
        (
            mem::counts(counts, n, "counts")?,
            mem::slice(displs, n, "displacements")?,
            mem::slice(types, n, "datatypes")?,
        )
    };
    (0..n)
        .map(|i| {
            let at = (buf as *const u8).wrapping_offset(ds[i]) as *const c_void;
            let t = state::datatype(ts[i], true)?;
            // SAFETY: block `i` lies in the buffer (caller).
            unsafe { Region::new(at, cs[i], t) }
        })
        .collect()
}

#[allow(clippy::too_many_arguments)]
fn alltoallw<T: Copy + Into<i64>>(
    name: &'static str,
    sendbuf: *const c_void,
    sendcounts: *const T,
    sdispls: *const isize,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const T,
    rdispls: *const isize,
    recvtypes: *const c_int,
    comm: c_int,
    mode: Mode,
) -> c_int {
    run(name, comm, mode, |core, start| {
        let (ins, outs) = degrees(core, comm)?;
        // SAFETY: the arrays hold one entry per neighbor; the buffers what they describe (contract).
        let (s, r) = unsafe {
            (
                regions(sendbuf, sendcounts, sdispls, sendtypes, outs)?,
                regions(recvbuf, recvcounts, rdispls, recvtypes, ins)?,
            )
        };
        nbr::alltoall(core, comm, Side::Regions(&s), Side::Regions(&r), start)
    })
}

mpi_fn_c! {
    /// `MPI_Neighbor_allgather`.
    fn MPI_Neighbor_allgather / PMPI_Neighbor_allgather, MPI_Neighbor_allgather_c / PMPI_Neighbor_allgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) -> c_int {
        allgather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Mode::Blocking)
    }
}

mpi_fn_c! {
    /// `MPI_Ineighbor_allgather`.
    fn MPI_Ineighbor_allgather / PMPI_Ineighbor_allgather, MPI_Ineighbor_allgather_c / PMPI_Ineighbor_allgather_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        allgather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Mode::Request(Start::Now, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_allgather_init`.
    fn MPI_Neighbor_allgather_init / PMPI_Neighbor_allgather_init, MPI_Neighbor_allgather_init_c / PMPI_Neighbor_allgather_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        allgather::<Count>(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Mode::Request(Start::Persistent, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_allgatherv`.
    fn MPI_Neighbor_allgatherv / PMPI_Neighbor_allgatherv, MPI_Neighbor_allgatherv_c / PMPI_Neighbor_allgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, comm: c_int) -> c_int {
        allgather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, comm, Mode::Blocking)
    }
}

mpi_fn_c! {
    /// `MPI_Ineighbor_allgatherv`.
    fn MPI_Ineighbor_allgatherv / PMPI_Ineighbor_allgatherv, MPI_Ineighbor_allgatherv_c / PMPI_Ineighbor_allgatherv_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        allgather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, comm, Mode::Request(Start::Now, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_allgatherv_init`.
    fn MPI_Neighbor_allgatherv_init / PMPI_Neighbor_allgatherv_init, MPI_Neighbor_allgatherv_init_c / PMPI_Neighbor_allgatherv_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, displs: *const Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        allgather(NAME, sendbuf, sendcount.into(), sendtype, recvbuf, Lay::Var(recvcounts, displs), recvtype, comm, Mode::Request(Start::Persistent, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_alltoall`.
    fn MPI_Neighbor_alltoall / PMPI_Neighbor_alltoall, MPI_Neighbor_alltoall_c / PMPI_Neighbor_alltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int) -> c_int {
        alltoall::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Mode::Blocking)
    }
}

mpi_fn_c! {
    /// `MPI_Ineighbor_alltoall`.
    fn MPI_Ineighbor_alltoall / PMPI_Ineighbor_alltoall, MPI_Ineighbor_alltoall_c / PMPI_Ineighbor_alltoall_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        alltoall::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Mode::Request(Start::Now, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_alltoall_init`.
    fn MPI_Neighbor_alltoall_init / PMPI_Neighbor_alltoall_init, MPI_Neighbor_alltoall_init_c / PMPI_Neighbor_alltoall_init_c(sendbuf: *const c_void, sendcount: Count, sendtype: c_int, recvbuf: *mut c_void, recvcount: Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        alltoall::<Count>(NAME, sendbuf, Lay::Equal(sendcount.into()), sendtype, recvbuf, Lay::Equal(recvcount.into()), recvtype, comm, Mode::Request(Start::Persistent, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_alltoallv`.
    fn MPI_Neighbor_alltoallv / PMPI_Neighbor_alltoallv, MPI_Neighbor_alltoallv_c / PMPI_Neighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtype: c_int, comm: c_int) -> c_int {
        alltoall(NAME, sendbuf, Lay::Var(sendcounts, sdispls), sendtype, recvbuf, Lay::Var(recvcounts, rdispls), recvtype, comm, Mode::Blocking)
    }
}

mpi_fn_c! {
    /// `MPI_Ineighbor_alltoallv`.
    fn MPI_Ineighbor_alltoallv / PMPI_Ineighbor_alltoallv, MPI_Ineighbor_alltoallv_c / PMPI_Ineighbor_alltoallv_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtype: c_int, comm: c_int, request: *mut c_int) -> c_int {
        alltoall(NAME, sendbuf, Lay::Var(sendcounts, sdispls), sendtype, recvbuf, Lay::Var(recvcounts, rdispls), recvtype, comm, Mode::Request(Start::Now, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_alltoallv_init`.
    fn MPI_Neighbor_alltoallv_init / PMPI_Neighbor_alltoallv_init, MPI_Neighbor_alltoallv_init_c / PMPI_Neighbor_alltoallv_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const Count, sendtype: c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const Count, recvtype: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        alltoall(NAME, sendbuf, Lay::Var(sendcounts, sdispls), sendtype, recvbuf, Lay::Var(recvcounts, rdispls), recvtype, comm, Mode::Request(Start::Persistent, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_alltoallw` (displacements in bytes, `MPI_Aint`).
    fn MPI_Neighbor_alltoallw / PMPI_Neighbor_alltoallw, MPI_Neighbor_alltoallw_c / PMPI_Neighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const isize, recvtypes: *const c_int, comm: c_int) -> c_int {
        alltoallw(NAME, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Blocking)
    }
}

mpi_fn_c! {
    /// `MPI_Ineighbor_alltoallw`.
    fn MPI_Ineighbor_alltoallw / PMPI_Ineighbor_alltoallw, MPI_Ineighbor_alltoallw_c / PMPI_Ineighbor_alltoallw_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const isize, recvtypes: *const c_int, comm: c_int, request: *mut c_int) -> c_int {
        alltoallw(NAME, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Request(Start::Now, request))
    }
}

mpi_fn_c! {
    /// `MPI_Neighbor_alltoallw_init`.
    fn MPI_Neighbor_alltoallw_init / PMPI_Neighbor_alltoallw_init, MPI_Neighbor_alltoallw_init_c / PMPI_Neighbor_alltoallw_init_c(sendbuf: *const c_void, sendcounts: *const Count, sdispls: *const isize, sendtypes: *const c_int, recvbuf: *mut c_void, recvcounts: *const Count, rdispls: *const isize, recvtypes: *const c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        alltoallw(NAME, sendbuf, sendcounts, sdispls, sendtypes, recvbuf, recvcounts, rdispls, recvtypes, comm, Mode::Request(Start::Persistent, request))
    }
}
