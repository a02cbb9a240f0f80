//! Collective operations over point-to-point messages, for every communicator.
//!
//! Each algorithm is a sequence of [`Engine::exchange`] steps on the communicator's own
//! context with a reserved negative tag per operation, so collective traffic can never match
//! a user receive (user tags are >= 0 and `ANY_TAG` skips negative tags). Buffers are bytes;
//! reductions go through [`crate::op::Reduction`] with MPI's order convention (the operand of
//! the lower rank is the `input`), so non-commutative operations get rank order.
//!
//! Algorithms, chosen by the tuning table (`crate::coll_select`) for the communicator's shape
//! and the size, each forceable by a parameter:
//! barrier — dissemination; bcast — binomial tree, or linear; reduce — binomial tree
//! (commutative) or rank-ordered linear; allreduce — recursive doubling (small), ring (large,
//! commutative), or reduce + bcast; gather(v)/scatter(v) — linear; allgather(v) — ring or
//! recursive doubling; alltoall(v) — pairwise exchange; reduce_scatter — ring
//! (commutative) or reduce + scatterv; scan/exscan — chain in rank order.

use crate::coll_select::Chosen;
use crate::coll_table::Coll;
use crate::engine::{Engine, PmlError};
use crate::op::{Dtype, Reduction};
use crate::params;

const TAG_BARRIER: i32 = -2;
const TAG_BCAST: i32 = -3;
const TAG_REDUCE: i32 = -4;
const TAG_ALLREDUCE: i32 = -5;
const TAG_GATHER: i32 = -6;
const TAG_SCATTER: i32 = -7;
const TAG_ALLGATHER: i32 = -8;
const TAG_ALLTOALL: i32 = -9;
const TAG_SCAN: i32 = -11;

fn op_err(e: crate::op::OpError) -> PmlError {
    PmlError::Invalid(format!("collective: {e}"))
}

fn check_len(what: &str, got: usize, want: usize) -> Result<(), PmlError> {
    if got != want {
        return Err(PmlError::Invalid(format!(
            "{what}: buffer of {got} bytes where {want} are needed"
        )));
    }
    Ok(())
}

impl Engine {
    /// `(my rank, size)` of a communicator context.
    pub fn comm_info(&self, ctx: u16) -> Result<(u32, u32), PmlError> {
        if self.is_inter(ctx) {
            return Err(PmlError::Invalid(format!(
                "collective: context {ctx} is an inter-communicator; use the inter-communicator \
                 collectives (inter_barrier, inter_bcast, inter_allreduce, inter_allgather)"
            )));
        }
        let g = self.context_group(ctx).ok_or_else(|| {
            PmlError::Invalid(format!(
                "collective: communicator context {ctx} does not exist"
            ))
        })?;
        let me = g.iter().position(|&r| r == self.rank()).unwrap_or(0) as u32;
        Ok((me, g.len() as u32))
    }

    pub(crate) fn algorithm(&self, which: &'static kestrel_transport::Param<String>) -> String {
        which.get(self.params())
    }

    /// `MPI_Barrier`.
    pub fn coll_barrier(&mut self, ctx: u16) -> Result<(), PmlError> {
        if let Some(r) = self.shm_barrier(ctx)? {
            return Ok(r);
        }
        let (_, n) = self.comm_info(ctx)?;
        if let Chosen::Hier(h) =
            self.coll_choose(ctx, Coll::Barrier, &params::BARRIER, n, 0, true)?
        {
            return self.hier_barrier(&h);
        }
        self.dissemination_barrier(ctx)
    }

    /// A barrier that sets up nothing for `ctx`: through its shared-memory segment if it
    /// has one already, else by messages. For a communicator's last collective (a window's
    /// `MPI_Win_free`), where setting a segment up (a file, its pages, every member
    /// attaching) would cost far more than the barrier: ARMCI-MPI creates and frees a window
    /// for every temporary array, and NWChem's CCSD(T) spent 6 % of its time there.
    pub(crate) fn barrier_without_setup(&mut self, ctx: u16) -> Result<(), PmlError> {
        if matches!(self.coll_segments.get(ctx as usize), Some(Some(_))) {
            if let Some(r) = self.shm_barrier(ctx)? {
                return Ok(r);
            }
        }
        self.dissemination_barrier(ctx)
    }

    /// The barrier by messages: in round k every member signals the member 2^k after it
    /// and waits for the one 2^k before it (ceil(log2 n) rounds).
    fn dissemination_barrier(&mut self, ctx: u16) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        let mut k = 1;
        while k < n {
            let to = (me + k) % n;
            let from = (me + n - k) % n;
            self.exchange(ctx, TAG_BARRIER, &[(to, &[])], &mut [(from, &mut [])])?;
            k <<= 1;
        }
        Ok(())
    }

    /// `MPI_Bcast` of `buf` from `root`.
    pub fn coll_bcast(&mut self, ctx: u16, root: u32, buf: &mut [u8]) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if root >= n {
            return Err(PmlError::Invalid(format!(
                "bcast: root {root} outside a communicator of {n}"
            )));
        }
        if n == 1 {
            return Ok(());
        }
        if self.shm_bcast(ctx, root, buf)? {
            return Ok(());
        }
        let algo =
            match self.coll_choose(ctx, Coll::Bcast, &params::BCAST, n, buf.len() as u64, true)? {
                Chosen::Hier(h) => return self.hier_bcast(&h, me, root, buf),
                Chosen::Flat(a) => a,
            };
        if algo == "linear" {
            if me == root {
                let sends: Vec<(u32, &[u8])> = (0..n)
                    .filter(|&r| r != root)
                    .map(|r| (r, &buf[..]))
                    .collect();
                return self.exchange(ctx, TAG_BCAST, &sends, &mut []);
            }
            return self.exchange(ctx, TAG_BCAST, &[], &mut [(root, buf)]);
        }
        let vr = (me + n - root) % n;
        let mut mask = 1;
        while mask < n {
            if vr & mask != 0 {
                let src = (vr - mask + root) % n;
                self.exchange(ctx, TAG_BCAST, &[], &mut [(src, &mut *buf)])?;
                break;
            }
            mask <<= 1;
        }
        mask >>= 1;
        let mut sends = Vec::new();
        while mask > 0 {
            if vr + mask < n {
                sends.push(((vr + mask + root) % n, &buf[..]));
            }
            mask >>= 1;
        }
        self.exchange(ctx, TAG_BCAST, &sends, &mut [])
    }

    /// `MPI_Reduce`: `recv` (root only) gets the reduction of every rank's `send`.
    pub fn coll_reduce(
        &mut self,
        ctx: u16,
        root: u32,
        send: &[u8],
        mut recv: Option<&mut [u8]>,
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if root >= n {
            return Err(PmlError::Invalid(format!(
                "reduce: root {root} outside a communicator of {n}"
            )));
        }
        if me == root {
            check_len(
                "reduce",
                recv.as_ref().map(|r| r.len()).unwrap_or(0),
                send.len(),
            )?;
        }
        if self.shm_reduce(ctx, root, send, recv.as_deref_mut(), dtype, op)? {
            return Ok(());
        }
        // Hierarchical phases combine operands out of rank order: commutative operations only.
        let algo = match self.coll_choose(
            ctx,
            Coll::Reduce,
            &params::REDUCE,
            n,
            send.len() as u64,
            op.is_commutative(),
        )? {
            Chosen::Hier(h) => return self.hier_reduce(&h, me, root, send, recv, dtype, op),
            Chosen::Flat(a) => a,
        };
        let linear = !op.is_commutative() || algo == "linear";
        if linear {
            // Rank order: result = a0 op (a1 op (... op a(n-1))).
            if me != root {
                return self.exchange(ctx, TAG_REDUCE, &[(root, send)], &mut []);
            }
            let recv = recv.expect("root has a receive buffer");
            let len = send.len();
            let mut all = self.st.spares.take(len * n as usize);
            {
                let counts = vec![len; n as usize];
                let displs: Vec<usize> = (0..n as usize).map(|r| r * len).collect();
                let mut recvs: Vec<(u32, &mut [u8])> =
                    split_parts(&mut all, &counts, &displs, n, "reduce")?
                        .into_iter()
                        .enumerate()
                        .filter(|(r, _)| *r as u32 != root)
                        .map(|(r, c)| (r as u32, c))
                        .collect();
                self.exchange(ctx, TAG_REDUCE, &[], &mut recvs)?;
            }
            all[root as usize * len..(root as usize + 1) * len].copy_from_slice(send);
            // The last block is the first accumulator: combine the others into it from the
            // right, in place.
            let (head, last) = all.split_at_mut((n as usize - 1) * len);
            for r in (0..n as usize - 1).rev() {
                op.apply(dtype, &head[r * len..(r + 1) * len], last)
                    .map_err(op_err)?;
            }
            recv.copy_from_slice(last);
            self.st.spares.keep(all.into_vec());
            return Ok(());
        }
        let vr = (me + n - root) % n;
        let mut acc = self.st.spares.take(send.len());
        acc.copy_from_slice(send);
        let mut tmp = self.st.spares.take(send.len());
        let mut mask = 1;
        let mut sent = Ok(());
        while mask < n {
            if vr & mask == 0 {
                let child = vr | mask;
                if child < n {
                    self.exchange(
                        ctx,
                        TAG_REDUCE,
                        &[],
                        &mut [((child + root) % n, &mut tmp[..])],
                    )?;
                    // The child's subtree holds higher relative ranks: it is the right operand.
                    op.apply(dtype, &acc, &mut tmp).map_err(op_err)?;
                    std::mem::swap(&mut acc, &mut tmp);
                }
            } else {
                let parent = ((vr & !mask) + root) % n;
                sent = self.exchange(ctx, TAG_REDUCE, &[(parent, &acc[..])], &mut []);
                break;
            }
            mask <<= 1;
        }
        if mask >= n {
            if let Some(recv) = recv {
                recv.copy_from_slice(&acc);
            }
        }
        self.st.spares.keep(acc.into_vec());
        self.st.spares.keep(tmp.into_vec());
        sent
    }

    /// `MPI_Allreduce`.
    pub fn coll_allreduce(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_len("allreduce", recv.len(), send.len())?;
        if n == 1 {
            recv.copy_from_slice(send);
            return Ok(());
        }
        if self.shm_allreduce(ctx, send, recv, dtype, op)? {
            return Ok(());
        }
        let chosen = self.coll_choose(
            ctx,
            Coll::Allreduce,
            &params::ALLREDUCE,
            n,
            send.len() as u64,
            op.is_commutative(),
        )?;
        let algo = match chosen {
            Chosen::Hier(h) => return self.hier_allreduce(&h, send, recv, dtype, op),
            Chosen::Flat(a) => a,
        };
        // The ring splits the vector into one piece per rank and both it and recursive
        // doubling combine out of rank order.
        let count = send.len() / dtype.size();
        let algo = match algo {
            "ring" if !op.is_commutative() || count < n as usize => "reduce_bcast",
            "recursive_doubling" if !op.is_commutative() => "reduce_bcast",
            other => other,
        };
        match algo {
            "ring" => self.allreduce_ring(ctx, me, n, send, recv, dtype, op),
            "recursive_doubling" => self.allreduce_rd(ctx, me, n, send, recv, dtype, op),
            _ => {
                self.coll_reduce(
                    ctx,
                    0,
                    send,
                    if me == 0 { Some(&mut *recv) } else { None },
                    dtype,
                    op,
                )?;
                self.coll_bcast(ctx, 0, recv)
            }
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn allreduce_rd(
        &mut self,
        ctx: u16,
        me: u32,
        n: u32,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let mut pof2 = 1;
        while pof2 * 2 <= n {
            pof2 *= 2;
        }
        let rem = n - pof2;
        let mut tmp = self.st.spares.take(send.len());
        // Where this rank's partial result is: the caller's `send` until the first
        // combination, then `recv` or `tmp` (each step receives into the other one and
        // combines there or back), so no step copies a whole vector; at most one copy at the
        // end, into `recv`.
        #[derive(Clone, Copy, PartialEq)]
        enum At {
            Send,
            Recv,
            Tmp,
        }
        let mut at = At::Send;
        // Fold the ranks beyond the largest power of two into their neighbours.
        let newrank = if me < 2 * rem {
            if me.is_multiple_of(2) {
                self.exchange(ctx, TAG_ALLREDUCE, &[(me + 1, send)], &mut [])?;
                None
            } else {
                self.exchange(ctx, TAG_ALLREDUCE, &[], &mut [(me - 1, &mut tmp[..])])?;
                recv.copy_from_slice(send);
                op.apply(dtype, &tmp, recv).map_err(op_err)?;
                at = At::Recv;
                Some(me / 2)
            }
        } else {
            Some(me - rem)
        };
        if let Some(nr) = newrank {
            let mut mask = 1;
            while mask < pof2 {
                let nd = nr ^ mask;
                let dst = if nd < rem { nd * 2 + 1 } else { nd + rem };
                // The lower rank's operand goes left: theirs op mine when the peer is lower.
                let theirs_first = dst < me;
                at = match at {
                    At::Send => {
                        let into: &mut [u8] = if theirs_first { &mut tmp } else { recv };
                        self.exchange(ctx, TAG_ALLREDUCE, &[(dst, send)], &mut [(dst, into)])?;
                        if theirs_first {
                            recv.copy_from_slice(send);
                            op.apply(dtype, &tmp, recv).map_err(op_err)?;
                        } else {
                            op.apply(dtype, send, recv).map_err(op_err)?;
                        }
                        At::Recv
                    }
                    held => {
                        // The partial result is in one of recv and the scratch: send it,
                        // receive into the other, combine into whichever keeps rank order.
                        let (mine, other): (&mut [u8], &mut [u8]) = if held == At::Recv {
                            (&mut *recv, &mut tmp)
                        } else {
                            (&mut tmp, &mut *recv)
                        };
                        self.exchange(ctx, TAG_ALLREDUCE, &[(dst, &*mine)], &mut [(dst, other)])?;
                        if theirs_first {
                            op.apply(dtype, other, mine).map_err(op_err)?;
                            held
                        } else {
                            op.apply(dtype, mine, other).map_err(op_err)?;
                            if held == At::Recv {
                                At::Tmp
                            } else {
                                At::Recv
                            }
                        }
                    }
                };
                mask <<= 1;
            }
            match at {
                At::Send => recv.copy_from_slice(send),
                At::Tmp => recv.copy_from_slice(&tmp),
                At::Recv => {}
            }
        }
        if me < 2 * rem {
            if me.is_multiple_of(2) {
                self.exchange(ctx, TAG_ALLREDUCE, &[], &mut [(me + 1, recv)])?;
            } else {
                self.exchange(ctx, TAG_ALLREDUCE, &[(me - 1, &recv[..])], &mut [])?;
            }
        }
        self.st.spares.keep(tmp.into_vec());
        Ok(())
    }

    /// Ring allreduce: a reduce-scatter around the ring, then an allgather around it.
    #[allow(clippy::too_many_arguments)]
    fn allreduce_ring(
        &mut self,
        ctx: u16,
        me: u32,
        n: u32,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let es = dtype.size();
        let count = send.len() / es;
        let nn = n as usize;
        let block = |b: usize| -> (usize, usize) {
            let base = count / nn;
            let extra = count % nn;
            let start = b * base + b.min(extra);
            let len = base + usize::from(b < extra);
            (start * es, (start + len) * es)
        };
        recv.copy_from_slice(send);
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        let mut tmp = self.st.spares.take(block(0).1 - block(0).0);
        for step in 0..nn - 1 {
            let sb = (me as usize + nn - step) % nn;
            let rb = (me as usize + nn - step - 1) % nn;
            let (s0, s1) = block(sb);
            let (r0, r1) = block(rb);
            self.exchange(
                ctx,
                TAG_ALLREDUCE,
                &[(right, &recv[s0..s1])],
                &mut [(left, &mut tmp[..r1 - r0])],
            )?;
            op.apply(dtype, &tmp[..r1 - r0], &mut recv[r0..r1])
                .map_err(op_err)?;
        }
        self.st.spares.keep(tmp.into_vec());
        for step in 0..nn - 1 {
            let sb = (me as usize + 1 + nn - step) % nn;
            let rb = (me as usize + nn - step) % nn;
            let (out, into) = disjoint(recv, block(sb), block(rb), "allreduce")?;
            self.exchange(ctx, TAG_ALLREDUCE, &[(right, out)], &mut [(left, into)])?;
        }
        Ok(())
    }

    /// `MPI_Gatherv`: root receives `counts[r]` bytes from rank r at `displs[r]` of `recv`.
    pub fn coll_gatherv(
        &mut self,
        ctx: u16,
        root: u32,
        send: &[u8],
        recv: Option<&mut [u8]>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if me != root {
            return self.exchange(ctx, TAG_GATHER, &[(root, send)], &mut []);
        }
        let recv = recv
            .ok_or_else(|| PmlError::Invalid("gather: the root needs a receive buffer".into()))?;
        let parts = split_parts(recv, counts, displs, n, "gather")?;
        let mut recvs = Vec::new();
        for (r, part) in parts.into_iter().enumerate() {
            if r as u32 == root {
                check_len("gather (root's own block)", send.len(), part.len())?;
                part.copy_from_slice(send);
            } else {
                recvs.push((r as u32, part));
            }
        }
        self.exchange(ctx, TAG_GATHER, &[], &mut recvs)
    }

    /// `MPI_Gather`: equal blocks of `send.len()` bytes.
    pub fn coll_gather(
        &mut self,
        ctx: u16,
        root: u32,
        send: &[u8],
        mut recv: Option<&mut [u8]>,
    ) -> Result<(), PmlError> {
        let (_, n) = self.comm_info(ctx)?;
        let len = send.len();
        let dst = recv.as_deref_mut().unwrap_or_default();
        if self.shm_scatter_gather(ctx, true, root, send, dst, len)? {
            return Ok(());
        }
        if let Chosen::Hier(h) =
            self.coll_choose(ctx, Coll::Gather, &params::GATHER, n, len as u64, true)?
        {
            let (me, _) = self.comm_info(ctx)?;
            if root >= n {
                return Err(PmlError::Invalid(format!(
                    "gather: root {root} outside a communicator of {n}"
                )));
            }
            if me == root {
                check_len(
                    "gather",
                    recv.as_ref().map_or(0, |r| r.len()),
                    len * n as usize,
                )?;
            }
            return self.hier_gather(&h, me, root, send, recv);
        }
        let counts = vec![len; n as usize];
        let displs: Vec<usize> = (0..n as usize).map(|r| r * len).collect();
        self.coll_gatherv(ctx, root, send, recv, &counts, &displs)
    }

    /// `MPI_Scatterv`: rank r receives `counts[r]` bytes from `send[displs[r]..]` of the root.
    pub fn coll_scatterv(
        &mut self,
        ctx: u16,
        root: u32,
        send: Option<&[u8]>,
        counts: &[usize],
        displs: &[usize],
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if me != root {
            return self.exchange(ctx, TAG_SCATTER, &[], &mut [(root, recv)]);
        }
        let send =
            send.ok_or_else(|| PmlError::Invalid("scatter: the root needs a send buffer".into()))?;
        if counts.len() != n as usize || displs.len() != n as usize {
            return Err(PmlError::Invalid(format!(
                "scatter: {} counts and {} displacements for {n} ranks",
                counts.len(),
                displs.len()
            )));
        }
        let mut sends = Vec::new();
        for r in 0..n as usize {
            let part = send.get(displs[r]..displs[r] + counts[r]).ok_or_else(|| {
                PmlError::Invalid(format!(
                    "scatter: block of rank {r} lies outside the send buffer"
                ))
            })?;
            if r as u32 == root {
                check_len("scatter (root's own block)", recv.len(), part.len())?;
                recv.copy_from_slice(part);
            } else {
                sends.push((r as u32, part));
            }
        }
        self.exchange(ctx, TAG_SCATTER, &sends, &mut [])
    }

    /// `MPI_Scatter`: equal blocks of `recv.len()` bytes.
    pub fn coll_scatter(
        &mut self,
        ctx: u16,
        root: u32,
        send: Option<&[u8]>,
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let (_, n) = self.comm_info(ctx)?;
        let len = recv.len();
        if self.shm_scatter_gather(ctx, false, root, send.unwrap_or_default(), recv, len)? {
            return Ok(());
        }
        if let Chosen::Hier(h) =
            self.coll_choose(ctx, Coll::Scatter, &params::SCATTER, n, len as u64, true)?
        {
            let (me, _) = self.comm_info(ctx)?;
            if root >= n {
                return Err(PmlError::Invalid(format!(
                    "scatter: root {root} outside a communicator of {n}"
                )));
            }
            return self.hier_scatter(&h, me, root, send, recv);
        }
        let counts = vec![len; n as usize];
        let displs: Vec<usize> = (0..n as usize).map(|r| r * len).collect();
        self.coll_scatterv(ctx, root, send, &counts, &displs, recv)
    }

    /// `MPI_Allgatherv`.
    pub fn coll_allgatherv(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        {
            let parts = split_parts(recv, counts, displs, n, "allgather")?;
            let mine = parts.into_iter().nth(me as usize).expect("n parts");
            check_len("allgather (own block)", send.len(), mine.len())?;
            mine.copy_from_slice(send);
        }
        if n == 1 {
            return Ok(());
        }
        if self.shm_allgatherv(ctx, send, recv, counts, displs)? {
            return Ok(());
        }
        // Every rank must pick the same algorithm: decide on the total, which all ranks know,
        // never on the local contribution (allgatherv contributions differ).
        let total = counts.iter().sum::<usize>() as u64;
        let algo =
            match self.coll_choose(ctx, Coll::Allgather, &params::ALLGATHER, n, total, false)? {
                Chosen::Flat(a) => a,
                Chosen::Hier(_) => unreachable!("coll_choose: a hierarchy was not allowed"),
            };
        // Recursive doubling exchanges contiguous ranges of blocks, so it needs a power-of-two
        // size and blocks laid out back to back in rank order; otherwise the ring runs.
        let contiguous = (1..n as usize).all(|r| displs[r] == displs[r - 1] + counts[r - 1]);
        let doubling_fits = n.is_power_of_two() && contiguous;
        if doubling_fits && algo == "recursive_doubling" {
            // Each step doubles the contiguous range of blocks a rank holds.
            let mut mask = 1;
            while mask < n {
                let peer = me ^ mask;
                let my_first = me & !(mask - 1);
                let peer_first = peer & !(mask - 1);
                let range = |first: u32| -> (usize, usize) {
                    let a = displs[first as usize];
                    let last = (first + mask - 1) as usize;
                    (a, displs[last] + counts[last])
                };
                let (m0, m1) = range(my_first);
                let (p0, p1) = range(peer_first);
                let (out, into) = disjoint(recv, (m0, m1), (p0, p1), "allgather")?;
                self.exchange(ctx, TAG_ALLGATHER, &[(peer, out)], &mut [(peer, into)])?;
                mask <<= 1;
            }
            return Ok(());
        }
        if algo == "gather_bcast" {
            let mine = send.to_vec();
            {
                let r = if me == 0 { Some(&mut *recv) } else { None };
                self.coll_gatherv(ctx, 0, &mine, r, counts, displs)?;
            }
            return self.coll_bcast(ctx, 0, recv);
        }
        let right = (me + 1) % n;
        let left = (me + n - 1) % n;
        for step in 0..n - 1 {
            let sb = ((me + n - step) % n) as usize;
            let rb = ((me + n - step - 1) % n) as usize;
            let (out, into) = disjoint(
                recv,
                (displs[sb], displs[sb] + counts[sb]),
                (displs[rb], displs[rb] + counts[rb]),
                "allgather",
            )?;
            self.exchange(ctx, TAG_ALLGATHER, &[(right, out)], &mut [(left, into)])?;
        }
        Ok(())
    }

    /// `MPI_Allgather`.
    pub fn coll_allgather(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let (_, n) = self.comm_info(ctx)?;
        let len = send.len();
        check_len("allgather", recv.len(), len * n as usize)?;
        // A communicator with a segment lies on one node, where no hierarchy applies: small
        // blocks take the flat round at once, larger ones skip the hierarchy's question.
        if n > 1 && len > 0 && self.shm_allgather_flat(ctx, send, recv)? {
            return Ok(());
        }
        if n > 1 && !self.has_node_segment(ctx) {
            if let Chosen::Hier(h) = self.coll_choose(
                ctx,
                Coll::Allgather,
                &params::ALLGATHER,
                n,
                recv.len() as u64,
                true,
            )? {
                return self.hier_allgather(&h, send, recv);
            }
        }
        let counts = vec![len; n as usize];
        let displs: Vec<usize> = (0..n as usize).map(|r| r * len).collect();
        self.coll_allgatherv(ctx, send, recv, &counts, &displs)
    }

    /// `MPI_Alltoallv` (counts and displacements in bytes).
    #[allow(clippy::too_many_arguments)]
    pub fn coll_alltoallv(
        &mut self,
        ctx: u16,
        send: &[u8],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [u8],
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        let sparts: Vec<&[u8]> = (0..n as usize)
            .map(|r| {
                send.get(sdispls.get(r).copied().unwrap_or(usize::MAX)..)
                    .and_then(|s| s.get(..scounts[r]))
            })
            .collect::<Option<_>>()
            .ok_or_else(|| {
                PmlError::Invalid("alltoall: a send block lies outside the send buffer".into())
            })?;
        let mut rparts = split_parts(recv, rcounts, rdispls, n, "alltoall")?;
        check_len(
            "alltoall (own block)",
            sparts[me as usize].len(),
            rparts[me as usize].len(),
        )?;
        rparts[me as usize].copy_from_slice(sparts[me as usize]);
        // Members need not agree here (one message per pair, matched by source whatever the
        // order), so the local average block is the size.
        let avg_block = scounts.iter().sum::<usize>() as u64 / u64::from(n);
        let linear = matches!(
            self.coll_choose(ctx, Coll::Alltoall, &params::ALLTOALL, n, avg_block, false)?,
            Chosen::Flat("linear")
        );
        if linear {
            let sends: Vec<(u32, &[u8])> = (0..n)
                .filter(|&r| r != me)
                .map(|r| (r, sparts[r as usize]))
                .collect();
            let mut recvs: Vec<(u32, &mut [u8])> = rparts
                .into_iter()
                .enumerate()
                .filter(|(r, _)| *r as u32 != me)
                .map(|(r, p)| (r as u32, p))
                .collect();
            return self.exchange(ctx, TAG_ALLTOALL, &sends, &mut recvs);
        }
        let mut slots: Vec<Option<&mut [u8]>> = rparts.into_iter().map(Some).collect();
        for step in 1..n {
            let dst = (me + step) % n;
            let src = (me + n - step) % n;
            let rbuf = slots[src as usize].take().expect("each block once");
            self.exchange(
                ctx,
                TAG_ALLTOALL,
                &[(dst, sparts[dst as usize])],
                &mut [(src, rbuf)],
            )?;
        }
        Ok(())
    }

    /// `MPI_Alltoall`: equal blocks.
    pub fn coll_alltoall(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let (_, n) = self.comm_info(ctx)?;
        check_len("alltoall", recv.len(), send.len())?;
        let b = send.len() / n as usize;
        if b * n as usize != send.len() {
            return Err(PmlError::Invalid(format!(
                "alltoall: {} bytes do not split into {n} equal blocks",
                send.len()
            )));
        }
        if self.shm_alltoall(ctx, send, recv, b)? {
            return Ok(());
        }
        let counts = vec![b; n as usize];
        let displs: Vec<usize> = (0..n as usize).map(|r| r * b).collect();
        self.coll_alltoallv(ctx, send, &counts, &displs, recv, &counts, &displs)
    }

    /// `MPI_Reduce_scatter`: rank r gets `counts[r]` elements of the reduction.
    pub fn coll_reduce_scatter(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        let es = dtype.size();
        if counts.len() != n as usize {
            return Err(PmlError::Invalid(format!(
                "reduce_scatter: {} counts for {n} ranks",
                counts.len()
            )));
        }
        let total: usize = counts.iter().sum();
        check_len("reduce_scatter (send)", send.len(), total * es)?;
        check_len(
            "reduce_scatter (receive)",
            recv.len(),
            counts[me as usize] * es,
        )?;
        let mut full = if me == 0 {
            vec![0u8; send.len()]
        } else {
            Vec::new()
        };
        self.coll_reduce(
            ctx,
            0,
            send,
            if me == 0 { Some(&mut full[..]) } else { None },
            dtype,
            op,
        )?;
        let bcounts: Vec<usize> = counts.iter().map(|c| c * es).collect();
        let mut displs = Vec::with_capacity(n as usize);
        let mut at = 0;
        for c in &bcounts {
            displs.push(at);
            at += c;
        }
        self.coll_scatterv(
            ctx,
            0,
            if me == 0 { Some(&full[..]) } else { None },
            &bcounts,
            &displs,
            recv,
        )
    }

    /// `MPI_Reduce_scatter_block`.
    pub fn coll_reduce_scatter_block(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let (_, n) = self.comm_info(ctx)?;
        let per = recv.len() / dtype.size();
        self.coll_reduce_scatter(ctx, send, recv, &vec![per; n as usize], dtype, op)
    }

    /// `MPI_Scan` (inclusive) or, with `exclusive`, `MPI_Exscan` (rank 0's `recv` untouched).
    pub fn coll_scan(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
        exclusive: bool,
    ) -> Result<(), PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_len("scan", recv.len(), send.len())?;
        // A chain in rank order keeps non-commutative operations correct.
        let mut partial = vec![0u8; send.len()];
        let mut acc = send.to_vec();
        if me > 0 {
            self.exchange(ctx, TAG_SCAN, &[], &mut [(me - 1, &mut partial[..])])?;
            if exclusive {
                recv.copy_from_slice(&partial);
            }
            op.apply(dtype, &partial, &mut acc).map_err(op_err)?;
        }
        if !exclusive {
            recv.copy_from_slice(&acc);
        }
        if me + 1 < n {
            self.exchange(ctx, TAG_SCAN, &[(me + 1, &acc[..])], &mut [])?;
        }
        Ok(())
    }
}

/// The bytes `out` of `buf` to read and the bytes `into` to write (a step that sends one
/// block of its buffer while it receives another), or an error naming `what` when they
/// overlap (receive blocks may not: MPI calls such a program erroneous).
fn disjoint<'b>(
    buf: &'b mut [u8],
    out: (usize, usize),
    into: (usize, usize),
    what: &str,
) -> Result<(&'b [u8], &'b mut [u8]), PmlError> {
    if out.0 <= out.1 && into.0 <= into.1 && out.1 <= into.0 && into.1 <= buf.len() {
        let (a, b) = buf.split_at_mut(into.0);
        Ok((&a[out.0..out.1], &mut b[..into.1 - into.0]))
    } else if out.0 <= out.1 && into.0 <= into.1 && into.1 <= out.0 && out.1 <= buf.len() {
        let (a, b) = buf.split_at_mut(out.0);
        Ok((&b[..out.1 - out.0], &mut a[into.0..into.1]))
    } else {
        Err(PmlError::Invalid(format!(
            "{what}: receive blocks at bytes {}..{} and {}..{} of a {}-byte buffer overlap or exceed it; each rank's block needs its own bytes",
            out.0,
            out.1,
            into.0,
            into.1,
            buf.len()
        )))
    }
}

/// Splits `buf` into the `n` blocks `[displs[r], displs[r]+counts[r])`, which must not overlap.
fn split_parts<'b>(
    buf: &'b mut [u8],
    counts: &[usize],
    displs: &[usize],
    n: u32,
    what: &str,
) -> Result<Vec<&'b mut [u8]>, PmlError> {
    let n = n as usize;
    if counts.len() != n || displs.len() != n {
        return Err(PmlError::Invalid(format!(
            "{what}: {} counts and {} displacements for {n} ranks",
            counts.len(),
            displs.len()
        )));
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by_key(|&r| displs[r]);
    let mut parts: Vec<Option<&'b mut [u8]>> = (0..n).map(|_| None).collect();
    let mut rest = buf;
    let mut at = 0;
    for r in order {
        if counts[r] == 0 {
            // An empty block takes no bytes, wherever its displacement points.
            parts[r] = Some(&mut []);
            continue;
        }
        let skip = displs[r]
            .checked_sub(at)
            .ok_or_else(|| PmlError::Invalid(format!("{what}: blocks overlap at rank {r}")))?;
        if skip + counts[r] > rest.len() {
            return Err(PmlError::Invalid(format!(
                "{what}: block of rank {r} lies outside the buffer"
            )));
        }
        let tail = std::mem::take(&mut rest);
        let (_, tail) = tail.split_at_mut(skip);
        let (part, tail) = tail.split_at_mut(counts[r]);
        parts[r] = Some(part);
        rest = tail;
        at = displs[r] + counts[r];
    }
    Ok(parts
        .into_iter()
        .map(|p| p.expect("every rank placed"))
        .collect())
}
