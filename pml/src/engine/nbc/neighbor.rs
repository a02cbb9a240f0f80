//! Neighborhood collectives: every process exchanges with the neighbors its topology names,
//! in one round of direct messages.
//!
//! The caller (the C library or the Rust API, which own topologies) passes the neighbor
//! lists in the order MPI defines for the topology: for a Cartesian grid, per dimension the
//! negative then the positive neighbor (`MPI_PROC_NULL` neighbors are `None` and exchange
//! nothing, their blocks left alone); for a graph, the adjacency list; for a distributed
//! graph, the sources and destinations as given.
//!
//! A neighbor listed twice (a periodic dimension of one or two processes) gets two blocks
//! from the same rank. For a graph, they pair in list order (MPI's non-overtaking rule). For
//! a Cartesian grid, MPI 4.0's errata fix the pairing by direction: the block sent to the
//! negative neighbor of dimension `d` is the one that neighbor receives from its positive
//! side. A [`Neighbors::directional`] schedule therefore gives every list position its own
//! tag: the send to destination `i` uses tag `i`, the receive from source `j` the tag of the
//! opposite direction, `j ^ 1`. This module only describes rounds.

use crate::buf::UserBuf;
use crate::engine::nbc::Builder;
use crate::engine::{Engine, PmlError};

use super::algorithms::{check_layout, Layout};

/// A process's neighbors in a topology, in MPI's order (`None`: `MPI_PROC_NULL`).
#[derive(Debug, Clone, Copy)]
pub struct Neighbors<'a> {
    /// Where blocks come from.
    pub sources: &'a [Option<u32>],
    /// Where blocks go.
    pub dests: &'a [Option<u32>],
    /// A Cartesian neighborhood: positions `2d` and `2d + 1` are the negative and positive
    /// neighbors of dimension `d` in both lists, and blocks pair by direction.
    pub directional: bool,
}

impl Neighbors<'_> {
    /// A builder with the tags this neighborhood needs (every member of a Cartesian
    /// communicator has the same number of dimensions, so all draw the same number).
    fn builder(&self, engine: &mut Engine, ctx: u16) -> Result<Builder, PmlError> {
        if !self.directional {
            return engine.coll_builder(ctx);
        }
        let n = self.sources.len();
        if n != self.dests.len() || !n.is_multiple_of(2) || n > 254 {
            return Err(PmlError::Invalid(format!(
                "neighbor collective: a Cartesian neighborhood has a negative and a positive \
                 neighbor per dimension (got {n} sources, {} destinations)",
                self.dests.len()
            )));
        }
        engine.coll_builder_tags(ctx, n.max(1))
    }

    /// The tag numbers of the send to destination `i` and of the receive from source `i`.
    fn send_tag(&self, i: usize) -> u8 {
        if self.directional {
            i as u8
        } else {
            0
        }
    }

    fn recv_tag(&self, i: usize) -> u8 {
        if self.directional {
            (i ^ 1) as u8
        } else {
            0
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
        let mut b = nb.builder(self, ctx)?;
        let s = b.input(send);
        let o = b.output(recv);
        for (i, src) in sources.iter().enumerate() {
            if let Some(p) = src {
                b.recv_tagged(ctx, *p, rlayout.block(o, i as u32), nb.recv_tag(i));
            }
        }
        for (i, d) in dests.iter().enumerate() {
            if let Some(p) = d {
                b.send_tagged(ctx, *p, s, nb.send_tag(i));
            }
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
        let mut b = nb.builder(self, ctx)?;
        let s = b.input(send);
        let o = b.output(recv);
        for (i, src) in sources.iter().enumerate() {
            if let Some(p) = src {
                b.recv_tagged(ctx, *p, rlayout.block(o, i as u32), nb.recv_tag(i));
            }
        }
        for (i, d) in dests.iter().enumerate() {
            if let Some(p) = d {
                b.send_tagged(ctx, *p, slayout.block(s, i as u32), nb.send_tag(i));
            }
        }
        b.round();
        Ok(b.finish())
    }
}
