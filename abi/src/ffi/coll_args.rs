//! The C arguments of collectives as typed buffers: shared by the blocking, nonblocking
//! (`MPI_I*`) and persistent (`MPI_*_init`) entry points of each collective, in both
//! bindings (counts `int` or `MPI_Count`).
//!
//! This module owns the buffer rules of MPI's collectives (which ranks pass which buffer,
//! where `MPI_IN_PLACE` is allowed, how many blocks a root's buffer has on an intra- and an
//! inter-communicator) and nothing else: every function turns pointers into [`Region`]s and
//! [`VBuf`]s and leaves the operation to `coll` and `icoll`.

use std::os::raw::{c_int, c_void};

use super::coll::{
    bystander, equal_blocks, in_place, no_in_place, op_and_type, root_here, var_blocks,
};
use super::region;
use crate::coll::Red;
use crate::error::{self, MpiError, MpiResult};
use crate::mem::{self, Region, VBuf};
use crate::state::{self, Core};

/// How a buffer's per-rank blocks are given: `count` elements each, or count and
/// displacement arrays (`int` or `MPI_Count`/`MPI_Aint` entries).
#[derive(Clone, Copy)]
pub(super) enum Lay<T> {
    /// Equal blocks of this many elements.
    Equal(i64),
    /// Counts and displacements (in extents).
    Var(*const T, *const T),
}

/// The blocks of `n` ranks at `buf`.
///
/// # Safety
/// `buf` holds the blocks `lay` describes; arrays hold `n` entries.
pub(super) unsafe fn blocks<T: Copy + Into<i64>>(
    buf: *const c_void,
    lay: Lay<T>,
    dt: c_int,
    n: usize,
) -> MpiResult<VBuf> {
    // SAFETY: forwarded to the caller.
    unsafe {
        match lay {
            Lay::Equal(c) => equal_blocks(buf, c, dt, n),
            Lay::Var(counts, displs) => var_blocks(buf, counts, displs, dt, n),
        }
    }
}

/// A rooted collective's buffers: the send side and the root's per-rank side.
pub(super) struct Rooted {
    /// This process's data (`None`: `MPI_IN_PLACE` at the root, or not taking part).
    pub single: Option<Region>,
    /// The root's blocks.
    pub blocks: Option<VBuf>,
}

/// `MPI_Gather(v)`'s buffers.
///
/// # Safety
/// The C contract of the gather: buffers hold what the counts describe where MPI says
/// they matter.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gather<T: Copy + Into<i64>>(
    core: &Core,
    comm: c_int,
    root: c_int,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
) -> MpiResult<Rooted> {
    let (here, n) = root_here(core, comm, root)?;
    let inter = core.comm(comm)?.is_inter();
    let single = if (here && (inter || in_place(sendbuf))) || bystander(core, comm, root)? {
        None
    } else {
        no_in_place(sendbuf, "send buffer of a non-root rank")?;
        // SAFETY: `sendbuf` holds `sendcount` elements (caller).
        Some(unsafe { region(sendbuf, sendcount, sendtype) }?)
    };
    let blocks = if here {
        // SAFETY: the root's receive side (caller).
        Some(unsafe { blocks(recvbuf, lay, recvtype, n) }?)
    } else {
        None
    };
    Ok(Rooted { single, blocks })
}

/// `MPI_Scatter(v)`'s buffers (`single` is the receive side here).
///
/// # Safety
/// As [`gather`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn scatter<T: Copy + Into<i64>>(
    core: &Core,
    comm: c_int,
    root: c_int,
    sendbuf: *const c_void,
    lay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
) -> MpiResult<Rooted> {
    let (here, n) = root_here(core, comm, root)?;
    let inter = core.comm(comm)?.is_inter();
    let blocks = if here {
        // SAFETY: the root's send side (caller).
        Some(unsafe { blocks(sendbuf, lay, sendtype, n) }?)
    } else {
        None
    };
    let single = if (here && (inter || in_place(recvbuf))) || bystander(core, comm, root)? {
        None
    } else {
        no_in_place(recvbuf, "receive buffer of a non-root rank")?;
        // SAFETY: `recvbuf` holds `recvcount` elements (caller).
        Some(unsafe { region(recvbuf, recvcount, recvtype) }?)
    };
    Ok(Rooted { single, blocks })
}

/// `MPI_Allgather(v)`'s buffers: this process's data (`None`: in place) and every peer's
/// block.
///
/// # Safety
/// As [`gather`].
pub(super) unsafe fn allgather<T: Copy + Into<i64>>(
    core: &Core,
    comm: c_int,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    lay: Lay<T>,
    recvtype: c_int,
) -> MpiResult<(Option<Region>, VBuf)> {
    // One block per rank of the other group on an inter-communicator.
    let n = core.comm(comm)?.peer_count() as usize;
    let send = if in_place(sendbuf) {
        None
    } else {
        // SAFETY: `sendbuf` holds `sendcount` elements (caller).
        Some(unsafe { region(sendbuf, sendcount, sendtype) }?)
    };
    // SAFETY: `recvbuf` holds the blocks (caller).
    let recv = unsafe { blocks(recvbuf, lay, recvtype, n) }?;
    Ok((send, recv))
}

/// `MPI_Alltoall(v)`'s buffers (`None` send: in place).
///
/// # Safety
/// As [`gather`].
pub(super) unsafe fn alltoall<T: Copy + Into<i64>>(
    core: &Core,
    comm: c_int,
    sendbuf: *const c_void,
    slay: Lay<T>,
    sendtype: c_int,
    recvbuf: *mut c_void,
    rlay: Lay<T>,
    recvtype: c_int,
) -> MpiResult<(Option<VBuf>, VBuf)> {
    let n = core.comm(comm)?.peer_count() as usize;
    let send = if in_place(sendbuf) {
        None
    } else {
        // SAFETY: `sendbuf` holds the blocks (caller).
        Some(unsafe { blocks(sendbuf, slay, sendtype, n) }?)
    };
    // SAFETY: `recvbuf` holds the blocks (caller).
    let recv = unsafe { blocks(recvbuf, rlay, recvtype, n) }?;
    Ok((send, recv))
}

/// `MPI_Alltoallw`'s buffers: one region per peer, each of its own datatype, displaced in
/// bytes (`None` send: in place).
///
/// # Safety
/// The arrays hold one entry per peer; the buffers hold what they describe.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn alltoallw<T: Copy + Into<i64>>(
    core: &Core,
    comm: c_int,
    sendbuf: *const c_void,
    sendcounts: *const T,
    sdispls: *const T,
    sendtypes: *const c_int,
    recvbuf: *mut c_void,
    recvcounts: *const T,
    rdispls: *const T,
    recvtypes: *const c_int,
) -> MpiResult<(Option<Vec<Region>>, Vec<Region>)> {
    let n = core.comm(comm)?.peer_count() as usize;
    // SAFETY: one entry per peer in each array, blocks inside the buffers (caller).
    let side = |buf: *const c_void, counts: *const T, displs: *const T, types: *const c_int| unsafe {
        let cs = mem::counts(counts, n, "counts")?;
        let ds = mem::displs(displs, n, "displacements")?;
        let ts = mem::slice(types, n, "datatypes")?;
        (0..n)
            .map(|r| {
                let at = (buf as *const u8).wrapping_offset(ds[r]) as *const c_void;
                let t = state::datatype(ts[r], true)?;
                Region::new(at, cs[r], t)
            })
            .collect::<MpiResult<Vec<Region>>>()
    };
    let send = if in_place(sendbuf) {
        None
    } else {
        Some(side(sendbuf, sendcounts, sdispls, sendtypes)?)
    };
    let recv = side(recvbuf, recvcounts, rdispls, recvtypes)?;
    Ok((send, recv))
}

/// A reduction's resolved operation and the regions of `count` elements at its buffers
/// (`None` send: in place; `recv` only where `wants_recv`).
///
/// # Safety
/// Each buffer that is used holds `count` elements of `datatype`.
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn reduction(
    core: &Core,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    wants_recv: bool,
    wants_send: bool,
) -> MpiResult<(Option<Region>, Option<Region>, Red)> {
    let (n, dt, red) = op_and_type(core, op, datatype, count)?;
    let send = if in_place(sendbuf) || !wants_send {
        None
    } else {
        // SAFETY: `sendbuf` holds `count` elements (caller).
        Some(unsafe { Region::new(sendbuf, n, dt.clone()) }?)
    };
    let recv = if wants_recv {
        // SAFETY: `recvbuf` holds `count` elements (caller).
        Some(unsafe { Region::new(recvbuf, n, dt) }?)
    } else {
        None
    };
    Ok((send, recv, red))
}

/// `MPI_Reduce`'s buffers: the send side everywhere but at an in-place root (and the
/// bystanders and root of an inter-communicator), the receive side at the root.
///
/// # Safety
/// As [`reduction`].
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn reduce(
    core: &Core,
    comm: c_int,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    root: c_int,
) -> MpiResult<(Option<Region>, Option<Region>, Red)> {
    let (here, _) = root_here(core, comm, root)?;
    let inter = core.comm(comm)?.is_inter();
    if in_place(sendbuf) && !here {
        return Err(MpiError::new(
            error::ERR_BUFFER,
            "MPI_IN_PLACE is only the root's send buffer",
        ));
    }
    let wants_send = !(inter && (here || bystander(core, comm, root)?));
    // SAFETY: forwarded to the caller.
    unsafe {
        reduction(
            core, sendbuf, recvbuf, count, datatype, op, here, wants_send,
        )
    }
}

/// `MPI_Reduce_scatter`'s buffers: every rank's input (`in_place`: the receive buffer
/// holds it), this rank's share, the counts per rank, the operation.
pub(super) struct ReduceScatter {
    pub input: Region,
    pub in_place: bool,
    pub recv: Region,
    pub counts: Vec<usize>,
    pub red: Red,
}

/// # Safety
/// `counts_of(n)` reads a valid array; the buffers hold what the counts describe.
pub(super) unsafe fn reduce_scatter(
    core: &Core,
    comm: c_int,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    counts_of: impl FnOnce(usize) -> MpiResult<Vec<usize>>,
    datatype: c_int,
    op: c_int,
) -> MpiResult<ReduceScatter> {
    let c = core.comm(comm)?;
    let (me, n) = (c.rank as usize, c.members.len());
    let counts = counts_of(n)?;
    let total: usize = counts.iter().sum();
    let (_, dt, red) = op_and_type(core, op, datatype, 0)?;
    let in_place = in_place(sendbuf);
    let input = if in_place {
        // SAFETY: in place, `recvbuf` holds every rank's input (caller).
        unsafe { Region::new(recvbuf, total, dt.clone()) }?
    } else {
        // SAFETY: `sendbuf` holds every rank's input (caller).
        unsafe { Region::new(sendbuf, total, dt.clone()) }?
    };
    // SAFETY: `recvbuf` holds this rank's share (caller).
    let recv = unsafe { Region::new(recvbuf, counts[me], dt) }?;
    Ok(ReduceScatter {
        input,
        in_place,
        recv,
        counts,
        red,
    })
}
