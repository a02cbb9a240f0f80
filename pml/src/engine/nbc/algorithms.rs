//! The rounds of each collective on an intra-communicator, and the engine calls that build
//! them.
//!
//! Every function here appends rounds to a [`Builder`] for the process of rank `me` in a
//! communicator context of `n` ranks, so the inter-communicator schedules ([`super::inter`])
//! reuse them for their local phases. Buffers are bytes; counts and displacements are in
//! bytes. Reductions keep MPI's order (the lower ranks' operand is the `input`), so the
//! non-commutative case gets rank order: trees rooted at rank 0 combine contiguous rank
//! ranges, and the result then moves to the root.
//!
//! Algorithms: barrier — dissemination; bcast — binomial tree; reduce — binomial tree;
//! allreduce — recursive doubling (with the ranks beyond a power of two folded in), or for
//! large commutative reductions on more than two ranks a ring (reduce-scatter, then
//! allgather); gather(v),
//! scatter(v), alltoall(v) — one round of direct messages; allgather(v) — direct messages
//! up to [`DIRECT_MAX`] ranks, a ring beyond; reduce_scatter — reduce to rank 0, then
//! scatterv; scan/exscan — recursive doubling. This module must never post anything
//! itself: it only describes rounds.

use crate::buf::UserBuf;
use crate::engine::{Engine, PmlError};
use crate::op::{Dtype, Reduction};
use crate::params;

use super::posted::PostedKind;
use super::{Builder, Schedule, Span};

/// Up to this many ranks, allgather(v) exchanges every block directly in one round.
pub const DIRECT_MAX: u32 = 8;

/// Where a schedule's process stands: the communicator context its messages use, its rank
/// there and the number of ranks.
#[derive(Debug, Clone, Copy)]
pub struct Comm {
    /// The context.
    pub ctx: u16,
    /// This process's rank.
    pub me: u32,
    /// Ranks in the context.
    pub n: u32,
}

/// Blocks of a buffer, one per rank: `counts[r]` bytes at `displs[r]`.
#[derive(Debug, Clone, Copy)]
pub struct Layout<'a> {
    /// Bytes per rank.
    pub counts: &'a [usize],
    /// Offsets per rank.
    pub displs: &'a [usize],
}

impl Layout<'_> {
    /// Rank `r`'s block of `s`.
    pub fn block(&self, s: Span, r: u32) -> Span {
        s.sub(self.displs[r as usize], self.counts[r as usize])
    }
}

/// Dissemination barrier: round k sends to `me + 2^k` and hears from `me - 2^k`.
pub fn barrier(b: &mut Builder, c: Comm) {
    let Comm { ctx, me, n } = c;
    let empty = b.temp(0);
    let mut k = 1;
    while k < n {
        b.send(ctx, (me + k) % n, empty);
        b.recv(ctx, (me + n - k) % n, empty);
        b.round();
        k <<= 1;
    }
}

/// Binomial-tree broadcast of `buf` from `root`.
pub fn bcast(b: &mut Builder, c: Comm, root: u32, buf: Span) {
    let Comm { ctx, me, n } = c;
    if n < 2 {
        return;
    }
    let vr = (me + n - root) % n;
    let mut mask = 1;
    while mask < n {
        if vr & mask != 0 {
            b.recv(ctx, (vr - mask + root) % n, buf);
            b.round();
            break;
        }
        mask <<= 1;
    }
    mask >>= 1;
    while mask > 0 {
        if vr + mask < n {
            b.send(ctx, (vr + mask + root) % n, buf);
        }
        mask >>= 1;
    }
    b.round();
}

/// Binomial-tree reduction of every rank's `input` into `out` at `root` (`out` is ignored
/// elsewhere and may be `input` itself at the root). The reduction must be set.
pub fn reduce(b: &mut Builder, c: Comm, root: u32, input: Span, out: Option<Span>) {
    let Comm { ctx, me, n } = c;
    let len = input.len;
    if n == 1 {
        if let Some(o) = out {
            b.copy(input, o);
            b.round();
        }
        return;
    }
    let commutative = b.commutative();
    // A non-commutative reduction runs on the tree rooted at rank 0, where every subtree is
    // a contiguous range of ranks; the result then goes to the root.
    let tree_root = if commutative { root } else { 0 };
    let vr = (me + n - tree_root) % n;
    let parent = (vr != 0).then(|| {
        let low = vr & vr.wrapping_neg();
        ((vr - low) + tree_root) % n
    });
    let children: Vec<u32> = {
        let mut c = Vec::new();
        let mut mask = 1;
        while mask < n && vr & mask == 0 {
            if vr + mask < n {
                c.push(vr + mask);
            }
            mask <<= 1;
        }
        c
    };
    let at_top = me == tree_root;
    // The root of a non-commutative reduction that is not rank 0 gets the result from the
    // top of the rank-0 tree at the end.
    let from_top = (!commutative && root != 0 && me == root)
        .then_some(out)
        .flatten();
    if children.is_empty() {
        // A leaf sends its contribution as it is.
        if let Some(p) = parent {
            b.send(ctx, p, input);
            b.round();
        }
        if let Some(o) = from_top {
            b.recv(ctx, 0, o);
            b.round();
        }
        return;
    }
    // The accumulator: the root's output when the tree's top is the root, else a temporary.
    let acc = match out {
        Some(o) if at_top && me == root => o,
        _ => b.temp(len),
    };
    b.copy(input, acc);
    let tmp = b.temp(len * children.len());
    // Every child's partial result arrives in one round, then they are combined in rank
    // order (children are in increasing relative rank).
    for (i, &c) in children.iter().enumerate() {
        b.recv(ctx, (c + tree_root) % n, tmp.block(i, len));
    }
    b.round();
    for i in 0..children.len() {
        if commutative {
            b.reduce(tmp.block(i, len), acc);
        } else {
            b.reduce_low(acc, tmp.block(i, len));
        }
    }
    match parent {
        Some(p) => {
            b.send(ctx, p, acc);
            b.round();
        }
        None if me == root => b.round(),
        None => {
            // The top of a rank-0 tree hands the result to the real root.
            b.send(ctx, root, acc);
            b.round();
        }
    }
    if let Some(o) = from_top {
        b.recv(ctx, 0, o);
        b.round();
    }
}

/// Recursive-doubling allreduce in `acc` (which holds this rank's contribution).
pub fn allreduce_rd(b: &mut Builder, c: Comm, acc: Span) {
    let Comm { ctx, me, n } = c;
    let len = acc.len;
    let mut pof2 = 1;
    while pof2 * 2 <= n {
        pof2 *= 2;
    }
    let rem = n - pof2;
    let tmp = b.temp(len);
    let newrank = if me < 2 * rem {
        if me.is_multiple_of(2) {
            b.send(ctx, me + 1, acc);
            b.round();
            None
        } else {
            b.recv(ctx, me - 1, tmp);
            b.round();
            b.reduce(tmp, acc);
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
            b.send(ctx, dst, acc);
            b.recv(ctx, dst, tmp);
            b.round();
            if dst < me {
                b.reduce(tmp, acc);
            } else {
                b.reduce_low(acc, tmp);
            }
            mask <<= 1;
        }
    }
    if me < 2 * rem {
        if me.is_multiple_of(2) {
            b.recv(ctx, me + 1, acc);
        } else {
            b.send(ctx, me - 1, acc);
        }
    }
    b.round();
}

/// Allreduce in one round: every rank sends its contribution in `acc` to every other and
/// reduces what it receives in rank order, `((x0 OP x1) OP x2) OP ...` from the left on every
/// rank, so that every rank gets the same bits (floating-point sums depend on the grouping;
/// a program that compares or branches on the result, as BAGEL's solvers do, diverges when
/// ranks disagree in the last bit) and non-commutative reductions come out as with the other
/// algorithms. For small messages: `n - 1` messages per rank, and no rank depends on another's
/// later progress.
pub fn allreduce_direct(b: &mut Builder, c: Comm, acc: Span) {
    let Comm { ctx, me, n } = c;
    let len = acc.len;
    let tmp = b.temp(len * (n as usize - 1));
    let slot = |r: u32| -> Span {
        let i = if r < me { r } else { r - 1 } as usize;
        tmp.sub(i * len, len)
    };
    for r in (0..n).filter(|&r| r != me) {
        b.send(ctx, r, acc);
        b.recv(ctx, r, slot(r));
    }
    b.round();
    // Rank 0's contribution is where the result grows (`acc` on rank 0, its slot elsewhere),
    // combined with each higher rank's in turn.
    let first = if me == 0 { acc } else { slot(0) };
    for r in 1..n {
        let next = if r == me { acc } else { slot(r) };
        b.reduce_low(first, next);
    }
    if me != 0 {
        b.copy(first, acc);
    }
    b.round();
}

/// Ring allreduce of a commutative reduction in `acc` of `count` elements of `es` bytes
/// (`count >= n`): a reduce-scatter around the ring, then an allgather around it.
pub fn allreduce_ring(b: &mut Builder, c: Comm, acc: Span, es: usize) {
    let Comm { ctx, me, n } = c;
    let nn = n as usize;
    let count = acc.len / es;
    let block = |i: usize| -> Span {
        let base = count / nn;
        let extra = count % nn;
        let start = i * base + i.min(extra);
        let len = base + usize::from(i < extra);
        acc.sub(start * es, len * es)
    };
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    let tmp = b.temp(block(0).len);
    let me = me as usize;
    for step in 0..nn - 1 {
        let sb = block((me + nn - step) % nn);
        let rb = block((me + nn - step - 1) % nn);
        b.send(ctx, right, sb);
        b.recv(ctx, left, tmp.sub(0, rb.len));
        b.round();
        b.reduce(tmp.sub(0, rb.len), rb);
    }
    for step in 0..nn - 1 {
        b.send(ctx, right, block((me + 1 + nn - step) % nn));
        b.recv(ctx, left, block((me + nn - step) % nn));
        b.round();
    }
}

/// Direct gather of `counts[r]` bytes from every rank `r` to `recv[displs[r]..]` at `root`.
/// `send` is `None` at a root whose block is already in place.
pub fn gatherv(
    b: &mut Builder,
    c: Comm,
    root: u32,
    send: Option<Span>,
    recv: Option<Span>,
    layout: Layout,
) {
    let Comm { ctx, me, n } = c;
    if me != root {
        if let Some(s) = send {
            b.send(ctx, root, s);
        }
        b.round();
        return;
    }
    let Some(recv) = recv else { return };
    if let Some(s) = send {
        b.copy(s, layout.block(recv, me));
    }
    for r in (0..n).filter(|&r| r != root) {
        b.recv(ctx, r, layout.block(recv, r));
    }
    b.round();
}

/// Direct scatter of `send[displs[r]..][..counts[r]]` at `root` to every rank `r`. `recv`
/// is `None` at a root that keeps its block in place.
pub fn scatterv(
    b: &mut Builder,
    c: Comm,
    root: u32,
    send: Option<Span>,
    layout: Layout,
    recv: Option<Span>,
) {
    let Comm { ctx, me, n } = c;
    if me != root {
        if let Some(r) = recv {
            b.recv(ctx, root, r);
        }
        b.round();
        return;
    }
    let Some(send) = send else { return };
    if let Some(r) = recv {
        b.copy(layout.block(send, me), r);
    }
    for r in (0..n).filter(|&r| r != root) {
        b.send(ctx, r, layout.block(send, r));
    }
    b.round();
}

/// Allgather of `counts[r]` bytes from every rank into `recv[displs[r]..]`; `send` is
/// `None` when this rank's block is already in place.
pub fn allgatherv(b: &mut Builder, c: Comm, send: Option<Span>, recv: Span, layout: Layout) {
    let Comm { ctx, me, n } = c;
    let block = |r: u32| layout.block(recv, r);
    if let Some(s) = send {
        b.copy(s, block(me));
    }
    if n <= DIRECT_MAX {
        for r in (0..n).filter(|&r| r != me) {
            b.recv(ctx, r, block(r));
        }
        for r in (0..n).filter(|&r| r != me) {
            b.send(ctx, r, block(me));
        }
        b.round();
        return;
    }
    let right = (me + 1) % n;
    let left = (me + n - 1) % n;
    for step in 0..n - 1 {
        b.send(ctx, right, block((me + n - step) % n));
        b.recv(ctx, left, block((me + n - step - 1) % n));
        b.round();
    }
}

/// All-to-all: `send[sdispls[r]..][..scounts[r]]` to rank `r`, `recv[rdispls[r]..]
/// [..rcounts[r]]` from it, all in one round. `send` `None` means in place: the data is in
/// `recv` (with the receive layout), copied aside first.
pub fn alltoallv(
    b: &mut Builder,
    c: Comm,
    send: Option<(Span, Layout)>,
    recv: Span,
    rlayout: Layout,
) {
    let Comm { ctx, me, n } = c;
    let (src, slayout) = match send {
        Some(s) => s,
        None => {
            let t = b.temp(recv.len);
            b.copy(recv, t);
            (t, rlayout)
        }
    };
    if send.is_some() {
        b.copy(slayout.block(src, me), rlayout.block(recv, me));
    }
    // Post in the order a pairwise exchange would use, so that large exchanges spread over
    // the peers instead of all starting with rank 0.
    for k in 1..n {
        let from = (me + n - k) % n;
        b.recv(ctx, from, rlayout.block(recv, from));
    }
    for k in 1..n {
        let to = (me + k) % n;
        b.send(ctx, to, slayout.block(src, to));
    }
    b.round();
}

/// Reduce-scatter: the reduction of every rank's `input` (the sum of `counts` bytes), block
/// `r` (`counts[r]` bytes) to rank `r`'s `out`.
pub fn reduce_scatter(b: &mut Builder, c: Comm, input: Span, out: Span, counts: &[usize]) {
    let total: usize = counts.iter().sum();
    let all = (c.me == 0).then(|| b.temp(total));
    reduce(b, c, 0, input, all);
    b.round();
    let displs = packed_displs(counts);
    let layout = Layout {
        counts,
        displs: &displs,
    };
    scatterv(b, c, 0, all, layout, Some(out));
}

/// Displacements of blocks of `counts` bytes laid end to end.
pub fn packed_displs(counts: &[usize]) -> Vec<usize> {
    let mut displs = Vec::with_capacity(counts.len());
    let mut at = 0;
    for c in counts {
        displs.push(at);
        at += c;
    }
    displs
}

/// Recursive-doubling scan (`exclusive`: exscan) of `input` into `out`.
pub fn scan(b: &mut Builder, c: Comm, input: Span, out: Span, exclusive: bool) {
    let Comm { ctx, me, n } = c;
    let len = input.len;
    let partial = b.temp(len);
    let tmp = b.temp(len);
    b.copy(input, partial);
    if !exclusive {
        b.copy(input, out);
    }
    let mut have = !exclusive;
    let mut mask = 1;
    while mask < n {
        let dst = me ^ mask;
        if dst < n {
            b.send(ctx, dst, partial);
            b.recv(ctx, dst, tmp);
            b.round();
            if me > dst {
                // `tmp` covers lower ranks than everything this rank holds.
                b.reduce(tmp, partial);
                if have {
                    b.reduce(tmp, out);
                } else {
                    b.copy(tmp, out);
                    have = true;
                }
            } else {
                b.reduce_low(partial, tmp);
            }
        }
        mask <<= 1;
    }
    b.round();
}

/// The span of an optional program buffer.
fn input_or(b: &mut Builder, send: Option<UserBuf>, fallback: Span) -> Span {
    match send {
        Some(s) => b.input(s),
        None => fallback,
    }
}

fn check_root(what: &str, root: u32, n: u32) -> Result<(), PmlError> {
    if root >= n {
        return Err(PmlError::Invalid(format!(
            "{what}: root {root} outside a communicator of {n}"
        )));
    }
    Ok(())
}

fn check_len(what: &str, got: usize, want: usize) -> Result<(), PmlError> {
    if got != want {
        return Err(PmlError::Invalid(format!(
            "{what}: buffer of {got} bytes where {want} are needed"
        )));
    }
    Ok(())
}

/// Checks that `n` blocks (`counts[r]` bytes at `displs[r]`) fit a buffer of `len` bytes.
pub(crate) fn check_layout(
    what: &str,
    len: usize,
    counts: &[usize],
    displs: &[usize],
    n: u32,
) -> Result<(), PmlError> {
    if counts.len() != n as usize || displs.len() != n as usize {
        return Err(PmlError::Invalid(format!(
            "{what}: {} counts and {} displacements for {n} ranks",
            counts.len(),
            displs.len()
        )));
    }
    for (r, (&c, &d)) in counts.iter().zip(displs).enumerate() {
        if d.checked_add(c).is_none_or(|end| end > len) {
            return Err(PmlError::Invalid(format!(
                "{what}: block of rank {r} ({c} bytes at {d}) outside a buffer of {len} bytes"
            )));
        }
    }
    Ok(())
}

/// Uniform blocks of `block` bytes: counts and displacements for `n` ranks.
pub fn uniform(n: u32, block: usize) -> (Vec<usize>, Vec<usize>) {
    (
        vec![block; n as usize],
        (0..n as usize).map(|r| r * block).collect(),
    )
}

/// The nonblocking collectives of intra-communicators: each builds the schedule (drawing the
/// context's next collective tag), which [`Engine::coll_run`] starts or
/// [`Engine::coll_persist`] keeps. Buffers follow MPI's rules: they stay valid, and send
/// buffers unmodified, until the request completes. `None` for a send buffer means
/// `MPI_IN_PLACE`.
impl Engine {
    /// `MPI_Ibarrier`.
    pub fn nbc_barrier(&mut self, ctx: u16) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        let mut b = self.coll_builder(ctx)?;
        match self.posted_round(ctx, 0, false) {
            Some((round, _)) => b.posted(ctx, round, PostedKind::Barrier, None),
            None => barrier(&mut b, Comm { ctx, me, n }),
        }
        Ok(b.finish())
    }

    /// `MPI_Ibcast` of `buf` (read at the root, written elsewhere).
    pub fn nbc_bcast(&mut self, ctx: u16, root: u32, buf: UserBuf) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_root("bcast", root, n)?;
        let mut b = self.coll_builder(ctx)?;
        let span = if me == root {
            b.input(buf)
        } else {
            b.output(buf)
        };
        match self.posted_round(ctx, span.len, false) {
            Some((round, _)) => {
                let is_root = me == root;
                b.posted(ctx, round, PostedKind::Bcast { root, is_root }, Some(span));
            }
            None => bcast(&mut b, Comm { ctx, me, n }, root, span),
        }
        Ok(b.finish())
    }

    /// `MPI_Ireduce`: `recv` matters at the root; `send` `None` is in place (root only).
    #[allow(clippy::too_many_arguments)]
    pub fn nbc_reduce(
        &mut self,
        ctx: u16,
        root: u32,
        send: Option<UserBuf>,
        recv: Option<UserBuf>,
        dtype: Dtype,
        op: Reduction,
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_root("reduce", root, n)?;
        let mut b = self.coll_builder(ctx)?;
        b.set_reduction(op, dtype);
        let out = if me == root {
            let r = recv.ok_or_else(|| {
                PmlError::Invalid("reduce: the root needs a receive buffer".into())
            })?;
            if let Some(s) = &send {
                check_len("reduce", r.len(), s.len())?;
            }
            Some(b.output(r))
        } else {
            None
        };
        let input = match (send, out) {
            (Some(s), _) => b.input(s),
            (None, Some(o)) => {
                // In place: the root's contribution is in its receive buffer, which the
                // tree overwrites; keep a copy.
                let t = b.temp(o.len);
                b.copy(o, t);
                t
            }
            (None, None) => {
                return Err(PmlError::Invalid(
                    "reduce: MPI_IN_PLACE is only allowed as the root's send buffer".into(),
                ))
            }
        };
        reduce(&mut b, Comm { ctx, me, n }, root, input, out);
        Ok(b.finish())
    }

    /// `coll_allreduce_ring_min` and `coll_iallreduce_direct_max`, read once (a parameter
    /// lookup costs more than building a small schedule).
    fn nbc_allreduce_tuning(&mut self) -> (usize, usize) {
        if let Some(t) = self.nbc.allreduce_tuning {
            return t;
        }
        let t = (
            params::ALLREDUCE_RING_MIN.get(self.params()) as usize,
            params::IALLREDUCE_DIRECT_MAX.get(self.params()) as usize,
        );
        self.nbc.allreduce_tuning = Some(t);
        t
    }

    /// `MPI_Iallreduce`; `send` `None` is in place.
    pub fn nbc_allreduce(
        &mut self,
        ctx: u16,
        send: Option<UserBuf>,
        recv: UserBuf,
        dtype: Dtype,
        op: Reduction,
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if let Some(s) = &send {
            check_len("allreduce", recv.len(), s.len())?;
        }
        let (ring_min, direct_max) = self.nbc_allreduce_tuning();
        let commutative = op.is_commutative();
        let mut b = self.coll_builder(ctx)?;
        b.set_reduction(op, dtype);
        let acc = b.output(recv);
        if let Some(s) = send {
            let s = b.input(s);
            b.copy(s, acc);
        }
        if n > 1 {
            if let Some((round, shared)) = self.posted_round(ctx, acc.len, true) {
                b.posted(ctx, round, PostedKind::Allreduce { shared }, Some(acc));
                return Ok(b.finish());
            }
        }
        let count = acc.len / dtype.size().max(1);
        let direct = (n as usize - 1).saturating_mul(acc.len + 64) <= direct_max;
        // Two ranks exchange everything in one round at any size, and small messages go
        // straight to everyone: a rank whose peer is busy computing then completes as soon
        // as the peer's data is readable, with nothing left for the busy one to forward.
        if n > 2 && direct {
            allreduce_direct(&mut b, Comm { ctx, me, n }, acc);
        } else if n > 2 && commutative && acc.len >= ring_min && count >= n as usize {
            allreduce_ring(&mut b, Comm { ctx, me, n }, acc, dtype.size());
        } else if n > 1 {
            allreduce_rd(&mut b, Comm { ctx, me, n }, acc);
        }
        Ok(b.finish())
    }

    /// `MPI_Igatherv` (`counts`/`displs` in bytes, at the root); `send` `None` is in place
    /// (root only).
    pub fn nbc_gatherv(
        &mut self,
        ctx: u16,
        root: u32,
        send: Option<UserBuf>,
        recv: Option<UserBuf>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_root("gather", root, n)?;
        let mut b = self.coll_builder(ctx)?;
        let recv = match recv {
            Some(r) if me == root => {
                check_layout("gather", r.len(), counts, displs, n)?;
                Some(b.output(r))
            }
            None if me == root => {
                return Err(PmlError::Invalid(
                    "gather: the root needs a receive buffer".into(),
                ))
            }
            _ => None,
        };
        if send.is_none() && me != root {
            return Err(PmlError::Invalid(
                "gather: MPI_IN_PLACE is only allowed at the root".into(),
            ));
        }
        let send = send.map(|s| b.input(s));
        if let (Some(s), true) = (send, me == root) {
            check_len("gather", s.len, counts[me as usize])?;
        }
        gatherv(
            &mut b,
            Comm { ctx, me, n },
            root,
            send,
            recv,
            Layout { counts, displs },
        );
        Ok(b.finish())
    }

    /// `MPI_Iscatterv` (`counts`/`displs` in bytes, at the root); `recv` `None` is in place
    /// (root only).
    #[allow(clippy::too_many_arguments)]
    pub fn nbc_scatterv(
        &mut self,
        ctx: u16,
        root: u32,
        send: Option<UserBuf>,
        counts: &[usize],
        displs: &[usize],
        recv: Option<UserBuf>,
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_root("scatter", root, n)?;
        let mut b = self.coll_builder(ctx)?;
        let send = match send {
            Some(s) if me == root => {
                check_layout("scatter", s.len(), counts, displs, n)?;
                Some(b.input(s))
            }
            None if me == root => {
                return Err(PmlError::Invalid(
                    "scatter: the root needs a send buffer".into(),
                ))
            }
            _ => None,
        };
        if recv.is_none() && me != root {
            return Err(PmlError::Invalid(
                "scatter: MPI_IN_PLACE is only allowed at the root".into(),
            ));
        }
        let recv = recv.map(|r| b.output(r));
        if let (Some(r), true) = (recv, me == root) {
            check_len("scatter", r.len, counts[me as usize])?;
        }
        scatterv(
            &mut b,
            Comm { ctx, me, n },
            root,
            send,
            Layout { counts, displs },
            recv,
        );
        Ok(b.finish())
    }

    /// `MPI_Iallgatherv` (`counts`/`displs` in bytes); `send` `None` is in place.
    pub fn nbc_allgatherv(
        &mut self,
        ctx: u16,
        send: Option<UserBuf>,
        recv: UserBuf,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_layout("allgather", recv.len(), counts, displs, n)?;
        if let Some(s) = &send {
            check_len("allgather", s.len(), counts[me as usize])?;
        }
        let mut b = self.coll_builder(ctx)?;
        let recv = b.output(recv);
        let send = send.map(|s| b.input(s));
        allgatherv(
            &mut b,
            Comm { ctx, me, n },
            send,
            recv,
            Layout { counts, displs },
        );
        Ok(b.finish())
    }

    /// `MPI_Ialltoallv` (counts and displacements in bytes); `send` `None` is in place.
    #[allow(clippy::too_many_arguments)]
    pub fn nbc_alltoallv(
        &mut self,
        ctx: u16,
        send: Option<UserBuf>,
        scounts: &[usize],
        sdispls: &[usize],
        recv: UserBuf,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        check_layout("alltoall (receive)", recv.len(), rcounts, rdispls, n)?;
        if let Some(s) = &send {
            check_layout("alltoall (send)", s.len(), scounts, sdispls, n)?;
        }
        let mut b = self.coll_builder(ctx)?;
        let recv = b.output(recv);
        let send = send.map(|s| b.input(s));
        let slayout = Layout {
            counts: scounts,
            displs: sdispls,
        };
        let rlayout = Layout {
            counts: rcounts,
            displs: rdispls,
        };
        let c = Comm { ctx, me, n };
        alltoallv(&mut b, c, send.map(|s| (s, slayout)), recv, rlayout);
        Ok(b.finish())
    }

    /// `MPI_Ireduce_scatter` (`counts` in bytes per rank); `send` `None` is in place (the
    /// whole vector is in `recv`, whose first `counts[me]` bytes get the result).
    pub fn nbc_reduce_scatter(
        &mut self,
        ctx: u16,
        send: Option<UserBuf>,
        recv: UserBuf,
        counts: &[usize],
        dtype: Dtype,
        op: Reduction,
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if counts.len() != n as usize {
            return Err(PmlError::Invalid(format!(
                "reduce_scatter: {} counts for {n} ranks",
                counts.len()
            )));
        }
        let total: usize = counts.iter().sum();
        let mut b = self.coll_builder(ctx)?;
        b.set_reduction(op, dtype);
        let (input, out) = match send {
            Some(s) => {
                check_len("reduce_scatter (send)", s.len(), total)?;
                check_len("reduce_scatter (receive)", recv.len(), counts[me as usize])?;
                (b.input(s), b.output(recv))
            }
            None => {
                check_len("reduce_scatter (in place)", recv.len(), total)?;
                let r = b.output(recv);
                let t = b.temp(total);
                b.copy(r, t);
                (t, r.sub(0, counts[me as usize]))
            }
        };
        reduce_scatter(&mut b, Comm { ctx, me, n }, input, out, counts);
        Ok(b.finish())
    }

    /// `MPI_Iscan` / `MPI_Iexscan`; `send` `None` is in place.
    pub fn nbc_scan(
        &mut self,
        ctx: u16,
        send: Option<UserBuf>,
        recv: UserBuf,
        dtype: Dtype,
        op: Reduction,
        exclusive: bool,
    ) -> Result<Schedule, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if let Some(s) = &send {
            check_len("scan", recv.len(), s.len())?;
        }
        let mut b = self.coll_builder(ctx)?;
        b.set_reduction(op, dtype);
        let out = b.output(recv);
        let input = input_or(&mut b, send, out);
        scan(&mut b, Comm { ctx, me, n }, input, out, exclusive);
        Ok(b.finish())
    }
}
