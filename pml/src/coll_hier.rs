//! Hierarchical collectives: for a communicator that spans several nodes with more than one
//! member on some node, barrier, bcast, reduce, allreduce, allgather, gather and scatter run
//! in three phases: among the members of each node (a node communicator, which the
//! shared-memory segment engine or shared-memory messages serve), among one leader per node
//! (a leader communicator, over the network), and on each node again.
//!
//! Owns the per-communicator choice (`Engine::coll_hier`) and the two sub-contexts it
//! creates; every phase is an ordinary collective on a sub-context, so this module never
//! moves bytes between processes itself (only copies that reorder node blocks into rank
//! order, and one point-to-point hand-over to a root that is not its node's leader).
//!
//! The choice is made on a communicator's first collective that can use it, by all members
//! alike: it depends only on the members' nodes (known to every process from the launch) and
//! on `coll_hierarchical`, which must be the same everywhere (like every algorithm choice).
//! Reductions keep MPI's rank order only for commutative operations, so non-commutative ones
//! stay flat. Nodes are ordered by their lowest member; a node's leader is its lowest member.

use std::sync::Arc;

use crate::engine::hier::{Hier, Layout};
use crate::engine::{Engine, PmlError};
use crate::op::{Dtype, Reduction};
use crate::params;

/// Point-to-point hand-over from a node leader to a root that is not a leader.
const TAG_HIER: i32 = -13;

impl Engine {
    /// The hierarchy of `ctx`, decided (and set up: a collective over `ctx`) on first use;
    /// `None`: flat algorithms.
    pub(crate) fn hierarchy(&mut self, ctx: u16) -> Result<Option<Arc<Hier>>, PmlError> {
        if let Some(Some(known)) = self.coll_hier.get(ctx as usize) {
            return Ok(known.clone());
        }
        let decided = self.decide_hierarchy(ctx)?.map(Arc::new);
        let idx = ctx as usize;
        if self.coll_hier.len() <= idx {
            self.coll_hier.resize_with(idx + 1, || None);
        }
        self.coll_hier[idx] = Some(decided.clone());
        Ok(decided)
    }

    fn decide_hierarchy(&mut self, ctx: u16) -> Result<Option<Hier>, PmlError> {
        if self.is_inter(ctx) || !params::HIERARCHICAL.get(self.params()) {
            return Ok(None);
        }
        let Some(group) = self.context_group(ctx).map(<[u32]>::to_vec) else {
            return Ok(None);
        };
        // Other jobs' members (DPM) keep the flat algorithms, which notice their failure.
        if group.iter().any(|&r| r >= self.size()) {
            return Ok(None);
        }
        let Some(Layout { place, members }) = Hier::layout(&group, |r| self.node_of(r).to_string())
        else {
            return Ok(None);
        };
        // Two ids free at every member. Node communicators of different nodes share the
        // first (their members are disjoint).
        let base = self.agree_contexts(ctx, 2)?;
        let me = group.iter().position(|&r| r == self.rank()).unwrap_or(0);
        let (my_node, my_local) = place[me];
        let node_group = members[my_node as usize]
            .iter()
            .map(|&r| group[r as usize])
            .collect();
        self.add_context(base, node_group);
        let leader_ctx = if my_local == 0 {
            let leaders = members.iter().map(|m| group[m[0] as usize]).collect();
            self.add_context(base + 1, leaders);
            Some(base + 1)
        } else {
            None
        };
        tracing::debug!(target: "coll", ctx, nodes = members.len(), node_ctx = base, ?leader_ctx, "hierarchical collectives");
        Ok(Some(Hier {
            node_ctx: base,
            leader_ctx,
            my_node,
            place,
            members,
        }))
    }

    /// Forgets `ctx`'s hierarchy and frees its sub-contexts (`MPI_Comm_free`).
    pub(crate) fn free_hierarchy(&mut self, ctx: u16) {
        let Some(Some(Some(h))) = self.coll_hier.get_mut(ctx as usize).map(Option::take) else {
            return;
        };
        self.free_context(h.node_ctx);
        if let Some(l) = h.leader_ctx {
            self.free_context(l);
        }
    }

    /// Hierarchical `MPI_Barrier`: the node, the leaders, the node again.
    pub(crate) fn hier_barrier(&mut self, h: &Hier) -> Result<(), PmlError> {
        self.coll_barrier(h.node_ctx)?;
        if let Some(l) = h.leader_ctx {
            self.coll_barrier(l)?;
        }
        self.coll_barrier(h.node_ctx)
    }

    /// Hierarchical `MPI_Bcast`: the root's node first (so its leader has the data), then
    /// among the leaders from the root's node, then every other node from its leader.
    pub(crate) fn hier_bcast(
        &mut self,
        h: &Hier,
        me: u32,
        root: u32,
        buf: &mut [u8],
    ) -> Result<(), PmlError> {
        let (root_node, root_local) = h.place[root as usize];
        let my_node = h.place[me as usize].0;
        if my_node == root_node && root_local != 0 {
            self.coll_bcast(h.node_ctx, root_local, buf)?;
        }
        if let Some(l) = h.leader_ctx {
            self.coll_bcast(l, root_node, buf)?;
        }
        if my_node != root_node || root_local == 0 {
            self.coll_bcast(h.node_ctx, 0, buf)?;
        }
        Ok(())
    }

    /// Hierarchical `MPI_Reduce` (commutative `op`): each node to its leader, the leaders to
    /// the root's leader, which hands the result to the root if it does not lead.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn hier_reduce(
        &mut self,
        h: &Hier,
        me: u32,
        root: u32,
        send: &[u8],
        recv: Option<&mut [u8]>,
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let (root_node, root_local) = h.place[root as usize];
        let (my_node, my_local) = h.place[me as usize];
        if me == root && root_local == 0 {
            let recv = recv.ok_or_else(|| root_buffer("reduce", "receive"))?;
            let mut partial = self.st.spares.take(send.len());
            self.coll_reduce(h.node_ctx, 0, send, Some(&mut partial), dtype, op)?;
            let l = h.leader_ctx.expect("a node's rank 0 leads");
            let done = self.coll_reduce(l, root_node, &partial, Some(recv), dtype, op);
            self.st.spares.keep(partial.into_vec());
            return done;
        }
        if let Some(l) = h.leader_ctx {
            let mut partial = self.st.spares.take(send.len());
            self.coll_reduce(h.node_ctx, 0, send, Some(&mut partial), dtype, op)?;
            let done = if my_node == root_node {
                // The root is another member of this node: reduce here, then hand it over.
                let mut total = self.st.spares.take(send.len());
                self.coll_reduce(l, root_node, &partial, Some(&mut total), dtype, op)?;
                let done = self.exchange(h.node_ctx, TAG_HIER, &[(root_local, &total)], &mut []);
                self.st.spares.keep(total.into_vec());
                done
            } else {
                self.coll_reduce(l, root_node, &partial, None, dtype, op)
            };
            self.st.spares.keep(partial.into_vec());
            return done;
        }
        debug_assert_ne!(my_local, 0);
        self.coll_reduce(h.node_ctx, 0, send, None, dtype, op)?;
        if me == root {
            let recv = recv.ok_or_else(|| root_buffer("reduce", "receive"))?;
            self.exchange(h.node_ctx, TAG_HIER, &[], &mut [(0, recv)])?;
        }
        Ok(())
    }

    /// Hierarchical `MPI_Allreduce` (commutative `op`): reduce to each node's leader,
    /// allreduce among the leaders, bcast on each node.
    pub(crate) fn hier_allreduce(
        &mut self,
        h: &Hier,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        if let Some(l) = h.leader_ctx {
            let mut partial = self.st.spares.take(send.len());
            self.coll_reduce(h.node_ctx, 0, send, Some(&mut partial), dtype, op)?;
            self.coll_allreduce(l, &partial, recv, dtype, op)?;
            self.st.spares.keep(partial.into_vec());
        } else {
            self.coll_reduce(h.node_ctx, 0, send, None, dtype, op)?;
        }
        self.coll_bcast(h.node_ctx, 0, recv)
    }

    /// Hierarchical `MPI_Allgather` of equal blocks: gather on each node, allgatherv of the
    /// node blocks among the leaders, rank order restored, bcast on each node.
    pub(crate) fn hier_allgather(
        &mut self,
        h: &Hier,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let len = send.len();
        if let Some(l) = h.leader_ctx {
            let mut node_blocks = self
                .st
                .spares
                .take(h.members[h.my_node as usize].len() * len);
            self.coll_gather(h.node_ctx, 0, send, Some(&mut node_blocks))?;
            let (counts, displs) = node_block_layout(h, len);
            if h.in_rank_order() {
                self.coll_allgatherv(l, &node_blocks, recv, &counts, &displs)?;
            } else {
                let mut by_node = self.st.spares.take(recv.len());
                self.coll_allgatherv(l, &node_blocks, &mut by_node, &counts, &displs)?;
                h.node_major_to_rank_order(&by_node, recv, len);
                self.st.spares.keep(by_node.into_vec());
            }
            self.st.spares.keep(node_blocks.into_vec());
        } else {
            self.coll_gather(h.node_ctx, 0, send, None)?;
        }
        self.coll_bcast(h.node_ctx, 0, recv)
    }

    /// Hierarchical `MPI_Gather` of equal blocks: gather on each node, gatherv of the node
    /// blocks to the root's leader, rank order restored there, handed to a non-leader root.
    pub(crate) fn hier_gather(
        &mut self,
        h: &Hier,
        me: u32,
        root: u32,
        send: &[u8],
        recv: Option<&mut [u8]>,
    ) -> Result<(), PmlError> {
        let len = send.len();
        let (root_node, root_local) = h.place[root as usize];
        let Some(l) = h.leader_ctx else {
            self.coll_gather(h.node_ctx, 0, send, None)?;
            if me == root {
                let recv = recv.ok_or_else(|| root_buffer("gather", "receive"))?;
                self.exchange(h.node_ctx, TAG_HIER, &[], &mut [(0, recv)])?;
            }
            return Ok(());
        };
        let my_node = h.my_node;
        let mut node_blocks = self.st.spares.take(h.members[my_node as usize].len() * len);
        self.coll_gather(h.node_ctx, 0, send, Some(&mut node_blocks))?;
        if my_node != root_node {
            let done = self.coll_gatherv(l, root_node, &node_blocks, None, &[], &[]);
            self.st.spares.keep(node_blocks.into_vec());
            return done;
        }
        let (counts, displs) = node_block_layout(h, len);
        let total = h.place.len() * len;
        if root_local == 0 && h.in_rank_order() {
            // The root leads and node-major order is rank order: gather straight into `recv`.
            let recv = recv.ok_or_else(|| root_buffer("gather", "receive"))?;
            if recv.len() != total {
                return Err(PmlError::Invalid(format!(
                    "gather: receive buffer of {} bytes where {total} are needed",
                    recv.len()
                )));
            }
            let done = self.coll_gatherv(l, root_node, &node_blocks, Some(recv), &counts, &displs);
            self.st.spares.keep(node_blocks.into_vec());
            return done;
        }
        let mut by_node = self.st.spares.take(total);
        self.coll_gatherv(
            l,
            root_node,
            &node_blocks,
            Some(&mut by_node),
            &counts,
            &displs,
        )?;
        self.st.spares.keep(node_blocks.into_vec());
        let done = if root_local == 0 {
            let recv = recv.ok_or_else(|| root_buffer("gather", "receive"))?;
            h.node_major_to_rank_order(&by_node, recv, len);
            Ok(())
        } else {
            let mut ordered = self.st.spares.take(total);
            h.node_major_to_rank_order(&by_node, &mut ordered, len);
            let done = self.exchange(h.node_ctx, TAG_HIER, &[(root_local, &ordered)], &mut []);
            self.st.spares.keep(ordered.into_vec());
            done
        };
        self.st.spares.keep(by_node.into_vec());
        done
    }

    /// Hierarchical `MPI_Scatter` of equal blocks: the root's blocks (handed to its leader
    /// if it does not lead) go by node to the leaders, and each leader scatters its node's.
    pub(crate) fn hier_scatter(
        &mut self,
        h: &Hier,
        me: u32,
        root: u32,
        send: Option<&[u8]>,
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let len = recv.len();
        let (root_node, root_local) = h.place[root as usize];
        let Some(l) = h.leader_ctx else {
            if me == root {
                let send = send.ok_or_else(|| root_buffer("scatter", "send"))?;
                self.exchange(h.node_ctx, TAG_HIER, &[(0, send)], &mut [])?;
            }
            return self.coll_scatter(h.node_ctx, 0, None, recv);
        };
        let my_node = h.my_node;
        let (counts, displs) = node_block_layout(h, len);
        let total = if my_node == root_node {
            h.place.len() * len
        } else {
            0
        };
        // A leading root's send buffer, in rank order.
        let leading_root = if my_node == root_node && root_local == 0 {
            let send = send.ok_or_else(|| root_buffer("scatter", "send"))?;
            if send.len() != total {
                return Err(PmlError::Invalid(format!(
                    "scatter: send buffer of {} bytes where {total} are needed",
                    send.len()
                )));
            }
            Some(send)
        } else {
            None
        };
        // Rank order is node-major order: the leading root sends from its own buffer.
        let direct = leading_root.is_some() && h.in_rank_order();
        let reorder = my_node == root_node && !direct;
        let mut by_node = self.st.spares.take(if reorder { total } else { 0 });
        if reorder {
            match leading_root {
                Some(send) => h.rank_order_to_node_major(send, &mut by_node, len),
                None => {
                    let mut ordered = self.st.spares.take(total);
                    self.exchange(h.node_ctx, TAG_HIER, &[], &mut [(root_local, &mut ordered)])?;
                    h.rank_order_to_node_major(&ordered, &mut by_node, len);
                    self.st.spares.keep(ordered.into_vec());
                }
            }
        }
        let mut node_blocks = self.st.spares.take(counts[my_node as usize]);
        let root_send = if direct {
            leading_root
        } else {
            reorder.then_some(&by_node[..])
        };
        self.coll_scatterv(l, root_node, root_send, &counts, &displs, &mut node_blocks)?;
        let done = self.coll_scatter(h.node_ctx, 0, Some(&node_blocks), recv);
        self.st.spares.keep(node_blocks.into_vec());
        self.st.spares.keep(by_node.into_vec());
        done
    }
}

/// The error of a root called without the buffer its role needs.
fn root_buffer(what: &str, which: &str) -> PmlError {
    PmlError::Invalid(format!("{what}: the root needs a {which} buffer"))
}

/// Byte counts and displacements of the node blocks (blocks of `len` bytes, node by node)
/// for the leaders' gatherv, scatterv and allgatherv.
fn node_block_layout(h: &Hier, len: usize) -> (Vec<usize>, Vec<usize>) {
    let counts: Vec<usize> = h.members.iter().map(|m| m.len() * len).collect();
    let displs = prefix_sums(&counts);
    (counts, displs)
}

fn prefix_sums(counts: &[usize]) -> Vec<usize> {
    let mut at = 0;
    counts
        .iter()
        .map(|&c| {
            let d = at;
            at += c;
            d
        })
        .collect()
}
