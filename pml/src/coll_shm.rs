//! Selection and set-up of the shared-memory collective engine for node-local communicators.
//!
//! On a communicator's `coll_shm_setup_after`-th barrier, bcast, reduce, allreduce (or other
//! collective the segment serves; the ones before go by messages), if every member shares this
//! node (and `coll_shm` is on), the lowest rank creates the communicator's segment, sends its
//! name to the others over point-to-point, they attach, and the creator removes the name once
//! every member has attached. Other communicators (or when set-up fails, which is logged once)
//! use the point-to-point algorithms.

use kestrel_transport::node_coll::{NodeSegment, SegmentGeometry};

use crate::engine::{Engine, PmlError};
use crate::op::{Dtype, Reduction};
use crate::params;

const TAG_SETUP: i32 = -20;

impl Engine {
    /// Runs `op` on communicator `ctx`'s segment (set up at the `coll_shm_setup_after`-th
    /// call on it); `None` when the communicator has none (yet: the calls before go by
    /// messages; or ever: it spans nodes, or set-up failed). While the operation waits for
    /// other members, this process keeps serving its peers (`crate::segment_poll`): the
    /// segment is taken out of the table for the duration so that the poll owns the rest of
    /// the engine.
    fn with_segment<R>(
        &mut self,
        ctx: u16,
        what: &'static str,
        op: impl FnOnce(&mut dyn NodeSegment) -> R,
    ) -> Result<Option<R>, PmlError> {
        let idx = ctx as usize;
        let decided = matches!(self.coll_segments.get(idx), Some(Some(_)));
        if !decided {
            // The first collectives of a communicator go by messages: a short-lived one
            // (split, a reduction, free) would pay far more for the set-up than it saves.
            if self.coll_segment_calls.len() <= idx {
                self.coll_segment_calls.resize(idx + 1, 0);
            }
            let calls = &mut self.coll_segment_calls[idx];
            *calls = calls.saturating_add(1);
            if i64::from(*calls) < params::SHM_SETUP_AFTER.get(self.params()) {
                return Ok(None);
            }
        }
        // Named for the rank's wait record, should the segment wait long for a member.
        kestrel_runtime::wait_board::enter_node_collective(what, ctx);
        if !decided {
            let seg = self.setup_segment(ctx)?;
            if self.coll_segments.len() <= idx {
                self.coll_segments.resize_with(idx + 1, || None);
            }
            if let Some(s) = &seg {
                if self.coll_posted.len() <= idx {
                    self.coll_posted.resize_with(idx + 1, || None);
                }
                self.coll_posted[idx] = Some(s.posted_rounds());
            }
            self.coll_segments[idx] = Some(seg);
        }
        // The segment's spin polls only now and then: what is queued goes out first.
        self.flush_queued_sends();
        let Some(mut seg) = self.coll_segments[idx].as_mut().and_then(|s| s.take()) else {
            return Ok(None);
        };
        // The poll serves the peers and runs the schedules of nonblocking collectives: a peer
        // may wait, outside any blocking collective, for a round of one of them that this
        // process has yet to publish or post (MPI lets the program start a blocking
        // collective before it completes its nonblocking ones). Their posted rounds have a
        // handle of their own, so they go on on this communicator too.
        let r = crate::segment_poll::with(
            &mut || {
                self.progress();
            },
            || op(&mut *seg),
        );
        self.coll_segments[idx] = Some(Some(seg));
        Ok(Some(r))
    }

    fn setup_segment(&mut self, ctx: u16) -> Result<Option<Box<dyn NodeSegment>>, PmlError> {
        let group = self
            .context_group(ctx)
            .map(|g| g.to_vec())
            .unwrap_or_default();
        let n = group.len();
        let node_of = |r: u32| self.node_of(r).to_string();
        // Members of other jobs are left to point-to-point algorithms, which notice when such
        // a member fails; the segment engine would wait for it forever.
        let own_job = group.iter().all(|&r| r < self.size());
        let local = own_job && n >= 2 && group.iter().all(|&r| node_of(r) == node_of(group[0]));
        let Some(engine) = self
            .node_coll
            .filter(|_| local && params::SHM.get(self.params()))
        else {
            return Ok(None);
        };
        let (me, _) = self.comm_info(ctx)?;
        let sets = params::SHM_SETS.get(self.params()) as usize;
        let geo = SegmentGeometry {
            members: n,
            fragment: SegmentGeometry::fragment_within_budget(
                params::SHM_FRAGMENT.get(self.params()) as usize,
                n,
                sets,
            ),
            sets,
            degree: params::SHM_TREE_DEGREE.get(self.params()) as usize,
        };
        let spin_yield = self.yields_when_idle();
        // The creator's outcome (a path, or empty on failure) goes to everyone, so that all
        // members take the same path.
        let mut name = Vec::new();
        let mut created = None;
        if me == 0 {
            let file = format!("kestrel.{}.coll.{ctx}.{}", self.job_tag(), self.rank());
            match engine.create(self.params(), &file, geo, spin_yield) {
                Ok((rendezvous, seg)) => {
                    name = rendezvous.into_bytes();
                    created = Some(seg);
                }
                Err(e) => {
                    tracing::warn!(target: "coll", "shared-memory collectives off for this communicator: {e}")
                }
            }
        }
        let len = self.bcast_p2p_len(ctx, me, n as u32, name.len())?;
        name.resize(len, 0);
        self.bcast_p2p(ctx, me, n as u32, &mut name)?;
        if name.is_empty() {
            return Ok(None);
        }
        let rendezvous = String::from_utf8_lossy(&name).into_owned();
        let seg = if let Some(seg) = created {
            Some(seg)
        } else {
            match engine.attach(&rendezvous, n, me as usize, spin_yield) {
                Ok(s) => Some(s),
                Err(e) => {
                    tracing::warn!(target: "coll", "{e}");
                    None
                }
            }
        };
        // Everyone reports whether it attached; any failure turns the engine off for all.
        let ok = self
            .allgather_bytes(ctx, &[u8::from(seg.is_some())])?
            .iter()
            .all(|v| v == &[1]);
        if me == 0 {
            engine.unlink(&rendezvous);
        }
        let Some(mut seg) = seg.filter(|_| ok) else {
            return Ok(None);
        };
        // Single-copy reductions need every member to reach every other's memory.
        let cards = self.allgather_bytes(ctx, &engine.reach_card())?;
        let reachable = cards
            .iter()
            .enumerate()
            .all(|(r, c)| r == me as usize || engine.can_reach(c));
        let single_copy = engine.single_copy_allowed(self.params());
        let all = self
            .allgather_bytes(ctx, &[u8::from(reachable && single_copy)])?
            .iter()
            .all(|v| v == &[1]);
        seg.enable_single_copy(all);
        seg.set_stall_hook(kestrel_runtime::wait_board::node_collective_stalled);
        seg.set_poll_hook(crate::segment_poll::poll);
        Ok(Some(seg))
    }

    fn bcast_p2p_len(&mut self, ctx: u16, me: u32, n: u32, len: usize) -> Result<usize, PmlError> {
        let mut b = (len as u64).to_le_bytes();
        self.bcast_p2p(ctx, me, n, &mut b)?;
        Ok(u64::from_le_bytes(b) as usize)
    }

    fn bcast_p2p(&mut self, ctx: u16, me: u32, n: u32, buf: &mut [u8]) -> Result<(), PmlError> {
        if me == 0 {
            let sends: Vec<(u32, &[u8])> = (1..n).map(|r| (r, &buf[..])).collect();
            self.exchange(ctx, TAG_SETUP, &sends, &mut [])
        } else {
            self.exchange(ctx, TAG_SETUP, &[], &mut [(0, buf)])
        }
    }

    pub(crate) fn shm_barrier(&mut self, ctx: u16) -> Result<Option<()>, PmlError> {
        self.with_segment(ctx, "barrier", |s| s.barrier())
    }

    /// Alltoall of `block`-byte blocks through the node segment when `coll_alltoall` is
    /// `auto`: one round of inline lines when all of this rank's blocks fit one, the fragment
    /// slots when they fit a slot, single copy for larger send buffers (the same answer on
    /// every member: MPI makes the block size the same everywhere). False: not taken,
    /// nothing done (messages then).
    pub(crate) fn shm_alltoall(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<bool, PmlError> {
        let auto = match self.alltoall_auto {
            Some(auto) => auto,
            None => {
                let auto = self.algorithm(&params::ALLTOALL) == "auto";
                self.alltoall_auto = Some(auto);
                auto
            }
        };
        if block == 0 || !auto {
            return Ok(false);
        }
        let done = self.with_segment(ctx, "alltoall", |seg| {
            if seg.flat(send.len()) {
                seg.flat_alltoall(send, recv, block);
                return Ok(true);
            }
            // Between two members, single copy from 32 KiB in all (one copy, not two); else
            // all of a member's blocks in one fragment slot: a copy in, a barrier, a copy out
            // (4 ranks on 2 cores, 128 B blocks: pairwise messages took 6.2 us), or rounds of
            // such where they do not fit one.
            let pair = seg.pair_single_copy(send.len());
            if !pair && seg.fragment_alltoall(send, recv, block) {
                return Ok(true);
            }
            if !pair && !seg.single_copy(send.len()) {
                return Ok(false);
            }
            // Larger blocks where single copy would read them: through the fragment slots
            // in rounds in groups of up to 8 (4 ranks on 2 cores, 128 KiB 116-167 -> 54-85
            // us, 256 KiB 197-298 -> 124-203, Open MPI 115-134 and 226-252; 1 MiB level,
            // 1,345-1,677 against 1,550-1,772 and 1,367-1,475; 8 ranks 64 KiB 339-341 ->
            // 150-173, Open MPI 242-320).
            if !pair && seg.pipelined_alltoall(send, recv, block) {
                return Ok(true);
            }
            seg.single_copy_alltoall(send, recv, block)
                .map_err(PmlError::Transport)?;
            Ok(true)
        })?;
        done.unwrap_or(Ok(false))
    }

    /// `MPI_Scatter` (`gather` false) or `MPI_Gather` (true) of equal blocks of `block` bytes
    /// as one round of the node segment when the blocks fit inline lines (a gather's each
    /// one, a scatter's all together in the root's), with single copy from the program
    /// buffers where that wins (32 KiB in all between two members, 1 MiB in larger groups),
    /// or through its fragment slots when a block fits one (up to 16 KiB), if
    /// `coll_gather`/`coll_scatter` is `auto` (the same answer on every member: MPI makes the
    /// block size the same everywhere). A scatter
    /// reads `src` (every block, at the root) and writes this member's block into `dst`; a
    /// gather reads this member's block from `src` and writes every block into `dst` (at
    /// the root). The root's own block is skipped when its `dst` (scatter) or `src` (gather)
    /// is empty: in place. False: not taken, nothing done.
    pub(crate) fn shm_scatter_gather(
        &mut self,
        ctx: u16,
        gather: bool,
        root: u32,
        src: &[u8],
        dst: &mut [u8],
        block: usize,
    ) -> Result<bool, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        let total = block.saturating_mul(n as usize);
        let (gather_auto, scatter_auto) = match self.scatter_gather_auto {
            Some(a) => a,
            None => {
                let a = (
                    self.algorithm(&params::GATHER) == "auto",
                    self.algorithm(&params::SCATTER) == "auto",
                );
                self.scatter_gather_auto = Some(a);
                a
            }
        };
        if block == 0 || !(if gather { gather_auto } else { scatter_auto }) {
            return Ok(false);
        }
        let what = if gather { "gather" } else { "scatter" };
        let root_buf = if gather { dst.len() } else { src.len() };
        if me == root && root_buf < total {
            // The members decide by the block size alone, so the root may not decline.
            return Err(PmlError::Invalid(format!(
                "{what}: the root's buffer holds {root_buf} bytes, not the {total} of {n} blocks"
            )));
        }
        let done = self.with_segment(ctx, what, |seg| {
            // A gather's members each publish their own block in their own line; a scatter's
            // root publishes all the others' in its line.
            let flat = seg.flat(if gather { block } else { total - block });
            let at_root = me == root;
            let root = root as usize;
            if gather {
                let all = if at_root {
                    &mut dst[..total]
                } else {
                    &mut [][..]
                };
                if flat {
                    seg.flat_gather(root, src, all, block);
                    return Ok(true);
                }
                // Single copy where it wins (it declines elsewhere), else the slots.
                if seg.single_copy_rooted(true, root, src, all, block)? {
                    return Ok(true);
                }
                Ok(seg.fragment_gather(root, src, all, block))
            } else {
                let all = if at_root { &src[..total] } else { &[][..] };
                if flat {
                    seg.flat_scatter(root, all, dst, block);
                    return Ok(true);
                }
                if seg.single_copy_rooted(false, root, all, dst, block)? {
                    return Ok(true);
                }
                Ok(seg.fragment_scatter(root, all, dst, block))
            }
        })?;
        done.unwrap_or(Ok(false)).map_err(PmlError::Transport)
    }

    /// Whether `ctx` has a node segment (set up by an earlier collective on it).
    pub(crate) fn has_node_segment(&self, ctx: u16) -> bool {
        matches!(self.coll_segments.get(ctx as usize), Some(Some(Some(_))))
    }

    /// `MPI_Allgather` of equal blocks that fit a line, in one round through the segment,
    /// before anything else is built for it (counts, displacements, the tuning table's
    /// choice: about 1,800 of the 2,400 instructions an 8-byte allgather took). `Ok(false)`:
    /// not taken (no segment, or larger blocks; the same answer on every member).
    pub(crate) fn shm_allgather_flat(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<bool, PmlError> {
        let done = self.with_segment(ctx, "allgather", |seg| {
            if !seg.flat(send.len()) {
                return false;
            }
            seg.flat_allgather(send, recv);
            true
        })?;
        Ok(done.unwrap_or(false))
    }

    /// Allgatherv on node-local communicators: one round of inline lines for the smallest
    /// blocks, the fragment slots for blocks of up to a fragment, single copy for large
    /// totals between two members and rounds through the fragment slots in larger groups;
    /// false when none applies (messages then).
    pub(crate) fn shm_allgatherv(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<bool, PmlError> {
        // Every rank must decide alike: on the total, which all know.
        let total: usize = counts.iter().sum();
        let done = self.with_segment(ctx, "allgather", |seg| {
            // Small blocks: one round through the segment instead of log2(n) exchanges.
            if seg.flat(counts.iter().copied().max().unwrap_or(0)) {
                seg.flat_allgatherv(send, recv, counts, displs);
                return Ok(true);
            }
            // Blocks of up to a fragment: one barrier between a copy in and a copy out,
            // instead of log2(n) message exchanges (2 ranks, 8 KiB: 6.2 -> 1.4-2.1 us).
            // Between two members, single copy from 32 KiB in all (one copy, not two).
            let pair = seg.pair_single_copy(total);
            if !pair && seg.fragment_allgatherv(send, recv, counts, displs) {
                return Ok(true);
            }
            if !pair && !seg.single_copy(total) {
                return Ok(false);
            }
            if !pair {
                // Larger blocks where single copy would read them: through the fragment
                // slots a fragment of every block per round, which won where the members
                // share the cores (4 ranks on 2 cores, 512 KiB 297-367 -> 216-245 us, Open
                // MPI 302-320; 8 ranks 512 KiB 2,348-2,373 -> 1,252-1,385, Open MPI
                // 2,472-2,882).
                seg.pipelined_allgatherv(send, recv, counts, displs);
                return Ok(true);
            }
            seg.single_copy_allgather(send, recv, counts, displs)
                .map_err(PmlError::Transport)?;
            Ok(true)
        })?;
        done.unwrap_or(Ok(false))
    }

    pub(crate) fn shm_bcast(
        &mut self,
        ctx: u16,
        root: u32,
        buf: &mut [u8],
    ) -> Result<bool, PmlError> {
        let done = self.with_segment(ctx, "bcast", |seg| {
            if seg.flat(buf.len()) {
                seg.flat_bcast(root as usize, buf);
            } else if seg.single_copy(buf.len()) && seg.members() == 2 {
                seg.single_copy_bcast(root as usize, buf)
                    .map_err(PmlError::Transport)?;
            } else {
                // In larger groups every reader copying from the root's buffer at once lost to
                // a binomial tree of single-copy rendezvous (1.2-2x at 3 and 4 ranks from 64
                // KiB), and that tree loses to the fragments pipelined through the segment
                // (3 ranks, 64 KiB 6.1-12.7 -> 3.4-6.4 us, 1 MiB 169-192 -> 124-131; 4 ranks,
                // 64 KiB 8.8-15.0 -> 5.2-7.8, 1 MiB 218-249 -> 142-204).
                seg.bcast(root as usize, buf);
            }
            Ok(true)
        })?;
        done.unwrap_or(Ok(false))
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn shm_reduce(
        &mut self,
        ctx: u16,
        root: u32,
        send: &[u8],
        recv: Option<&mut [u8]>,
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<bool, PmlError> {
        let mut err = None;
        let mut cma_err = None;
        let mut none: [u8; 0] = [];
        // Only the root reads a result, so the others pass an empty buffer.
        let target: &mut [u8] = match recv {
            Some(r) => r,
            None => &mut none,
        };
        let commutative = op.is_commutative();
        let done = self
            .with_segment(ctx, "reduce", |seg| {
                let mut apply = |i: &[u8], io: &mut [u8]| {
                    if let Err(e) = op.apply(dtype, i, io) {
                        err.get_or_insert(e);
                    }
                };
                if seg.flat(send.len()) {
                    seg.flat_reduce(Some(root as usize), send, target, &mut apply);
                } else if (commutative
                    && seg.tree_reduce(Some(root as usize), send, target, &mut apply))
                    || seg.fragment_reduce(Some(root as usize), send, target, &mut apply)
                    || seg.pair_reduce(
                        root as usize,
                        send,
                        target,
                        dtype.size(),
                        commutative,
                        &mut apply,
                    )
                {
                    // Done in one tree barrier, or one barrier through the fragment slots, or
                    // streamed through them between two members.
                } else if seg.single_copy_reduction(send.len(), false) {
                    if let Err(e) = seg.single_copy_reduce(
                        Some(root as usize),
                        send,
                        target,
                        dtype.size(),
                        &mut apply,
                    ) {
                        cma_err = Some(e);
                    }
                } else {
                    seg.reduce(Some(root as usize), send, target, dtype.size(), &mut apply);
                }
            })?
            .is_some();
        if let Some(e) = cma_err {
            return Err(PmlError::Transport(e));
        }
        match err {
            Some(e) => Err(PmlError::Invalid(format!("reduce: {e}"))),
            None => Ok(done),
        }
    }

    pub(crate) fn shm_allreduce(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<bool, PmlError> {
        let mut err = None;
        let mut cma_err = None;
        let commutative = op.is_commutative();
        let done = self
            .with_segment(ctx, "allreduce", |seg| {
                let mut apply = |i: &[u8], io: &mut [u8]| {
                    if let Err(e) = op.apply(dtype, i, io) {
                        err.get_or_insert(e);
                    }
                };
                if seg.flat(send.len()) {
                    seg.flat_reduce(None, send, recv, &mut apply);
                } else if (commutative && seg.tree_reduce(None, send, recv, &mut apply))
                    || seg.fragment_reduce(None, send, recv, &mut apply)
                {
                    // Done in one tree barrier, or one barrier through the fragment slots.
                } else if seg.single_copy_reduction(send.len(), true) {
                    if let Err(e) =
                        seg.single_copy_reduce(None, send, recv, dtype.size(), &mut apply)
                    {
                        cma_err = Some(e);
                    }
                } else {
                    seg.reduce(None, send, recv, dtype.size(), &mut apply);
                }
            })?
            .is_some();
        if let Some(e) = cma_err {
            return Err(PmlError::Transport(e));
        }
        match err {
            Some(e) => Err(PmlError::Invalid(format!("allreduce: {e}"))),
            None => Ok(done),
        }
    }
}
