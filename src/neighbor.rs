//! Neighborhood collectives (MPI 7.6) on topology communicators: every process exchanges
//! blocks with the neighbors its topology names ([`TopologyCommunicator`]), blocking,
//! immediate (`MPI_Ineighbor_*`, a [`Request`] of a [`LocalScope`], as in
//! [`crate::immediate`]) and persistent (`MPI_Neighbor_*_init`, a [`PersistentCollective`]).
//! rsmpi has no neighborhood collectives; the names follow its collectives'
//! (`all_gather_into` becomes `neighbor_all_gather_into`).
//!
//! ```no_run
//! use kestrel::neighbor::NeighborCollectives;
//! use kestrel::topology::TopologyCommunicator;
//! use kestrel::Communicator;
//! # let universe = kestrel::initialize().unwrap();
//! let world = universe.world();
//! let ring = world
//!     .create_cartesian_communicator(&[world.size()], &[true], false)
//!     .unwrap();
//! // One block per neighbor: from the rank below, then from the rank above.
//! let mut got = vec![0i32; ring.in_degree()];
//! ring.neighbor_all_gather_into(&[ring.rank()], &mut got);
//! ```
//!
//! Receive block `i` comes from [`TopologyCommunicator::neighbor_sources`]`()[i]`, send
//! block `i` goes to [`TopologyCommunicator::neighbor_destinations`]`()[i]`; the blocks of
//! `MPI_PROC_NULL` neighbors (past the edge of a non-periodic grid) are neither sent nor
//! written. On a Cartesian grid blocks pair by direction (MPI-4.0 errata): the block sent to
//! the neighbor at -1 along dimension `d` (send block `2d`) arrives in that neighbor's
//! receive block `2d + 1`, the one from its +1 side, even where a periodic dimension of one
//! or two processes makes a process its own or its neighbor's neighbor twice. On graphs,
//! repeated edges pair in list order.
//!
//! It owns the checks of the buffer shapes against the neighbor counts (fatal, naming the
//! call, the sizes and the fix) and the hand-over to the engine's neighborhood schedules;
//! it never computes neighbors (the topology does) and holds no state.

use kestrel_pml::nbc::algorithms::Layout;
use kestrel_pml::nbc::neighbor::Neighbors;

use crate::immediate::{Bound, PersistentCollective};
use crate::request::{self, LocalScope, Request};
use crate::topology::TopologyCommunicator;
use crate::{Buffer, Equivalence, SimpleCommunicator};

/// Element counts and displacements as bytes.
fn bytes<T>(v: &[usize]) -> Vec<usize> {
    v.iter().map(|x| x * std::mem::size_of::<T>()).collect()
}

/// Fatal: a buffer shape does not fit the neighborhood.
fn shape(c: &SimpleCommunicator, call: &str, what: String) -> ! {
    c.inner.fatal(&format!("{call}: {what}"))
}

/// The engine's view of `comm`'s neighborhood.
fn neighbors<C: TopologyCommunicator + ?Sized>(comm: &C) -> Neighbors<'_> {
    let hood = comm.neighborhood();
    Neighbors {
        sources: &hood.sources,
        dests: &hood.dests,
        directional: comm.is_cartesian(),
    }
}

// The schedules of the neighborhood collectives, each built in one place (after checking
// the buffer shapes); the blocking forms start them in a scope of their own and wait, the
// immediate ones start them (`Bound::start`), the persistent ones keep them (`Bound::keep`).

/// `MPI_(I)neighbor_allgatherv(_init)`: `send` to every destination, `counts[i]` elements
/// from source `i` into `recv`, packed in source order.
fn all_gather<'c, 'a, C, T>(
    comm: &'c C,
    call: &str,
    send: &'a [T],
    recv: &'a mut [T],
    counts: &[usize],
) -> Bound<'c, 'a>
where
    C: TopologyCommunicator + ?Sized,
    T: Equivalence,
{
    let c = comm.handle();
    let hood = comm.neighborhood();
    if counts.len() != hood.sources.len() {
        let (n, k) = (counts.len(), hood.sources.len());
        shape(
            c,
            call,
            format!("{n} counts for {k} sources; pass one count per source (in_degree() of them)"),
        );
    }
    let total: usize = counts.iter().sum();
    if total > recv.len() {
        let n = recv.len();
        shape(c, call, format!("the counts add up to {total} elements but recv holds {n}; make recv at least as long as their sum"));
    }
    let rcounts = bytes::<T>(counts);
    let rdispls = kestrel_pml::nbc::algorithms::packed_displs(&rcounts);
    let layout = Layout {
        counts: &rcounts,
        displs: &rdispls,
    };
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which a scope of 'a starts and tracks or a persistent collective bound to
    // one keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build(c, Some(call), |e| {
        e.nbc_neighbor_allgatherv(c.ctx, neighbors(comm), s, r, layout)
    })
}

/// One side of a neighbor alltoall: the buffer, its block counts and displacements (in
/// elements).
type Side<'b, B> = (B, &'b [usize], &'b [usize]);

/// `MPI_(I)neighbor_alltoallv(_init)`: block `i` of `send` to destination `i`, block `i` of
/// `recv` from source `i`.
fn all_to_all<'c, 'a, C, T>(
    comm: &'c C,
    call: &str,
    (send, scounts, sdispls): Side<'_, &'a [T]>,
    (recv, rcounts, rdispls): Side<'_, &'a mut [T]>,
) -> Bound<'c, 'a>
where
    C: TopologyCommunicator + ?Sized,
    T: Equivalence,
{
    let c = comm.handle();
    let hood = comm.neighborhood();
    for (side, counts, displs, n) in [
        ("send", scounts, sdispls, hood.dests.len()),
        ("receive", rcounts, rdispls, hood.sources.len()),
    ] {
        if counts.len() != n || displs.len() != n {
            let (k, d) = (counts.len(), displs.len());
            let who = if side == "send" {
                "destination"
            } else {
                "source"
            };
            shape(c, call, format!("{k} {side} counts and {d} {side} displacements for {n} {who}s; pass one of each per {who}"));
        }
    }
    let (sc, sd, rc, rd) = (
        bytes::<T>(scounts),
        bytes::<T>(sdispls),
        bytes::<T>(rcounts),
        bytes::<T>(rdispls),
    );
    let (sl, rl) = (
        Layout {
            counts: &sc,
            displs: &sd,
        },
        Layout {
            counts: &rc,
            displs: &rd,
        },
    );
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which a scope of 'a starts and tracks or a persistent collective bound to
    // one keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build(c, Some(call), |e| {
        e.nbc_neighbor_alltoallv(c.ctx, neighbors(comm), s, sl, r, rl)
    })
}

/// `neighbor_all_gather` of uniform blocks: `recv` must hold one `send` per source.
fn uniform_gather<'c, 'a, C, T>(
    comm: &'c C,
    call: &str,
    send: &'a [T],
    recv: &'a mut [T],
) -> Bound<'c, 'a>
where
    C: TopologyCommunicator + ?Sized,
    T: Equivalence,
{
    let n = comm.in_degree();
    if recv.len() != n * send.len() {
        let (r, s) = (recv.len(), send.len());
        shape(comm.handle(), call, format!("recv holds {r} elements, but {n} sources send {s} each; make recv in_degree() x send.len() = {} long", n * s));
    }
    all_gather(comm, call, send, recv, &vec![send.len(); n])
}

/// `neighbor_all_to_all` of uniform blocks: `send` holds `out_degree()` blocks and `recv`
/// `in_degree()` blocks, all of one size.
fn uniform_all_to_all<'c, 'a, C, T>(
    comm: &'c C,
    call: &str,
    send: &'a [T],
    recv: &'a mut [T],
) -> Bound<'c, 'a>
where
    C: TopologyCommunicator + ?Sized,
    T: Equivalence,
{
    let (outs, ins) = (comm.out_degree(), comm.in_degree());
    let block = match (outs, ins) {
        (0, 0) => 0,
        (0, i) => recv.len() / i,
        (o, _) => send.len() / o,
    };
    if send.len() != outs * block || recv.len() != ins * block {
        let (s, r) = (send.len(), recv.len());
        shape(comm.handle(), call, format!("send holds {s} elements for {outs} destinations and recv {r} for {ins} sources; both need blocks of one size b: send out_degree() x b, recv in_degree() x b elements"));
    }
    let (sc, sd) = kestrel_pml::nbc::algorithms::uniform(outs as u32, block);
    let (rc, rd) = kestrel_pml::nbc::algorithms::uniform(ins as u32, block);
    all_to_all(comm, call, (send, &sc, &sd), (recv, &rc, &rd))
}

/// Neighborhood collectives on a communicator with a topology (Cartesian grid, graph or
/// distributed graph); every process of the communicator calls them. Element counts and
/// displacements are in elements of `T`.
pub trait NeighborCollectives: TopologyCommunicator {
    /// `MPI_Neighbor_allgather`: `send` goes to every destination; `recv` holds one block
    /// of `send.len()` elements per source, in source order.
    fn neighbor_all_gather_into<T: Equivalence>(&self, send: &[T], recv: &mut [T]) {
        const CALL: &str = "neighbor_all_gather_into (MPI_Neighbor_allgather)";
        request::scope(|s| uniform_gather(self, CALL, send, recv).start(s).wait());
    }

    /// `MPI_Neighbor_allgatherv`: `counts[i]` elements from source `i`, stored contiguously
    /// in source order.
    fn neighbor_all_gather_varcount_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) {
        const CALL: &str = "neighbor_all_gather_varcount_into (MPI_Neighbor_allgatherv)";
        request::scope(|s| all_gather(self, CALL, send, recv, counts).start(s).wait());
    }

    /// `MPI_Neighbor_alltoall`: block `i` of `send` goes to destination `i`, block `i` of
    /// `recv` comes from source `i`; blocks are of one size, `send.len() / out_degree()`.
    fn neighbor_all_to_all_into<T: Equivalence>(&self, send: &[T], recv: &mut [T]) {
        const CALL: &str = "neighbor_all_to_all_into (MPI_Neighbor_alltoall)";
        request::scope(|s| uniform_all_to_all(self, CALL, send, recv).start(s).wait());
    }

    /// `MPI_Neighbor_alltoallv`: `scounts[i]` elements at `sdispls[i]` of `send` go to
    /// destination `i`; `rcounts[i]` elements from source `i` land at `rdispls[i]` of `recv`.
    fn neighbor_all_to_all_varcount_into<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) {
        const CALL: &str = "neighbor_all_to_all_varcount_into (MPI_Neighbor_alltoallv)";
        let (sside, rside) = ((send, scounts, sdispls), (recv, rcounts, rdispls));
        request::scope(|s| all_to_all(self, CALL, sside, rside).start(s).wait());
    }

    /// `MPI_Ineighbor_allgather`: [`neighbor_all_gather_into`](Self::neighbor_all_gather_into)
    /// as a request of `scope`.
    fn immediate_neighbor_all_gather_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        const CALL: &str = "immediate_neighbor_all_gather_into (MPI_Ineighbor_allgather)";
        uniform_gather(self, CALL, send, recv).start(scope)
    }

    /// `MPI_Ineighbor_allgatherv`.
    fn immediate_neighbor_all_gather_varcount_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
    ) -> Request<'a> {
        const CALL: &str = "immediate_neighbor_all_gather_varcount_into (MPI_Ineighbor_allgatherv)";
        all_gather(self, CALL, send, recv, counts).start(scope)
    }

    /// `MPI_Ineighbor_alltoall`.
    fn immediate_neighbor_all_to_all_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        const CALL: &str = "immediate_neighbor_all_to_all_into (MPI_Ineighbor_alltoall)";
        uniform_all_to_all(self, CALL, send, recv).start(scope)
    }

    /// `MPI_Ineighbor_alltoallv`.
    #[allow(clippy::too_many_arguments)]
    fn immediate_neighbor_all_to_all_varcount_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &'a mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Request<'a> {
        const CALL: &str = "immediate_neighbor_all_to_all_varcount_into (MPI_Ineighbor_alltoallv)";
        let (sside, rside) = ((send, scounts, sdispls), (recv, rcounts, rdispls));
        all_to_all(self, CALL, sside, rside).start(scope)
    }

    /// `MPI_Neighbor_allgather_init`: a persistent
    /// [`neighbor_all_gather_into`](Self::neighbor_all_gather_into); every start sends the
    /// current contents of `send`.
    fn neighbor_all_gather_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        const CALL: &str = "neighbor_all_gather_init (MPI_Neighbor_allgather_init)";
        uniform_gather(self, CALL, send, recv).keep(scope)
    }

    /// `MPI_Neighbor_allgatherv_init`.
    fn neighbor_all_gather_varcount_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
    ) -> PersistentCollective<'a, 's> {
        const CALL: &str = "neighbor_all_gather_varcount_init (MPI_Neighbor_allgatherv_init)";
        all_gather(self, CALL, send, recv, counts).keep(scope)
    }

    /// `MPI_Neighbor_alltoall_init`.
    fn neighbor_all_to_all_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        const CALL: &str = "neighbor_all_to_all_init (MPI_Neighbor_alltoall_init)";
        uniform_all_to_all(self, CALL, send, recv).keep(scope)
    }

    /// `MPI_Neighbor_alltoallv_init`.
    #[allow(clippy::too_many_arguments)]
    fn neighbor_all_to_all_varcount_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &'a mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> PersistentCollective<'a, 's> {
        const CALL: &str = "neighbor_all_to_all_varcount_init (MPI_Neighbor_alltoallv_init)";
        let (sside, rside) = ((send, scounts, sdispls), (recv, rcounts, rdispls));
        all_to_all(self, CALL, sside, rside).keep(scope)
    }
}

impl<C: TopologyCommunicator + ?Sized> NeighborCollectives for C {}
