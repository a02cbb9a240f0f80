//! Neighborhood collectives: every process exchanges with the neighbors its topology names,
//! in one round of direct messages.
//!
//! The caller (the C library or the Rust API, which own topologies) passes the neighbor
//! lists in the order MPI defines for the topology: for a Cartesian grid, per dimension the
//! negative then the positive neighbor (`MPI_PROC_NULL` neighbors are `None` and exchange
//! nothing, their blocks left alone); for a graph, the adjacency list; for a distributed
//! graph, the sources and destinations as given. Sends are posted in list order and
//! receives in list order or, for `MPI_Neighbor_alltoall`, in reverse ([`Neighbors`]),
//! which is how MPICH 4.0.2 pairs the blocks of a neighbor listed twice (a periodic
//! dimension of one or two processes). This module only describes rounds.

use crate::buf::UserBuf;
use crate::engine::{Engine, PmlError};

use super::algorithms::{check_layout, Layout};

/// A process's neighbors in a topology, in MPI's order (`None`: `MPI_PROC_NULL`).
#[derive(Debug, Clone, Copy)]
pub struct Neighbors<'a> {
    /// Where blocks come from.
    pub sources: &'a [Option<u32>],
    /// Where blocks go.
    pub dests: &'a [Option<u32>],
    /// Post the receives in reverse list order: MPICH's `MPI_Neighbor_alltoall` does, so
    /// a neighbor listed twice pairs its blocks the other way round (see
    /// [`crate::topo::RepeatOrder`]).
    pub reversed: bool,
}

impl Neighbors<'_> {
    /// The order receives are posted in.
    fn recv_order(&self) -> Box<dyn Iterator<Item = usize>> {
        let n = self.sources.len();
        if self.reversed {
            Box::new((0..n).rev())
        } else {
            Box::new(0..n)
        }
    }
}

impl Engine {
    /// `MPI_Ineighbor_allgatherv`: `send` to every destination, block `i`
    /// (`rcounts[i]` bytes at `rdispls[i]` of `recv`) from source `i`.
    pub fn nbc_neighbor_allgatherv(
        &mut self,
        ctx: u16,
        nb: Neighbors,
        send: UserBuf,
        recv: UserBuf,
        rlayout: Layout,
    ) -> Result<crate::engine::nbc::Schedule, PmlError> {
        let Neighbors { sources, dests, .. } = nb;
        check_layout(
            "neighbor allgather",
            recv.len(),
            rlayout.counts,
            rlayout.displs,
            sources.len() as u32,
        )?;
        let mut b = self.coll_builder(ctx)?;
        let s = b.input(send);
        let o = b.output(recv);
        for i in nb.recv_order() {
            if let Some(p) = sources[i] {
                b.recv(ctx, p, rlayout.block(o, i as u32));
            }
        }
        for d in dests.iter().flatten() {
            b.send(ctx, *d, s);
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Ineighbor_alltoallv` (and `w`, whose per-neighbor types the caller packed):
    /// block `i` of `send` to destination `i`, block `i` of `recv` from source `i`.
    pub fn nbc_neighbor_alltoallv(
        &mut self,
        ctx: u16,
        nb: Neighbors,
        send: UserBuf,
        slayout: Layout,
        recv: UserBuf,
        rlayout: Layout,
    ) -> Result<crate::engine::nbc::Schedule, PmlError> {
        let Neighbors { sources, dests, .. } = nb;
        check_layout(
            "neighbor alltoall (send)",
            send.len(),
            slayout.counts,
            slayout.displs,
            dests.len() as u32,
        )?;
        check_layout(
            "neighbor alltoall (receive)",
            recv.len(),
            rlayout.counts,
            rlayout.displs,
            sources.len() as u32,
        )?;
        let mut b = self.coll_builder(ctx)?;
        let s = b.input(send);
        let o = b.output(recv);
        for i in nb.recv_order() {
            if let Some(p) = sources[i] {
                b.recv(ctx, p, rlayout.block(o, i as u32));
            }
        }
        for (i, d) in dests.iter().enumerate() {
            if let Some(p) = d {
                b.send(ctx, *p, slayout.block(s, i as u32));
            }
        }
        b.round();
        Ok(b.finish())
    }
}
