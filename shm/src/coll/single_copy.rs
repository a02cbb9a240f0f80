//! Collectives through the members' own buffers (single copy with `process_vm_readv` /
//! `process_vm_writev`, [`crate::cma`]): the members publish their buffers' addresses and
//! their pids, and each copies straight between the program buffers, so no data passes
//! through the segment. Used from [`SINGLE_COPY_MIN`] bytes, when every member can reach every
//! other ([`CollSegment::enable_single_copy`], decided by the messaging layer after every
//! member probed every other).
//!
//! This module owns the per-chunk reduction shared by the blocking reduction and the posted
//! rounds' shared allreduce ([`super::PostedRounds::reduce_shared`]); it never writes a
//! member's buffer outside the range the caller names, and never returns before its own
//! copies are done (the closing rounds, or the posted round's done counter, keep the buffers
//! alive until every member's copies are).

use super::{CollSegment, FLAT_MAX_RANKS, SINGLE_COPY_MIN};
use crate::cma;

/// Bytes reduced per step of a blocking single-copy reduction: the two operand buffers
/// stay in the core's 1 MiB L2 between the copy and the reduction, and each step is one
/// `process_vm_readv` (whose fixed cost made 64 KiB steps 10-25 % slower at 1 MiB on the
/// test machine).
pub(super) const REDUCE_CHUNK: usize = 512 << 10;

/// Bytes per chunk of a shared round's reduction, the unit members claim: small enough that
/// two members in the library share a 1 MiB allreduce (4 chunks), large enough for the
/// syscall to matter little (64 KiB: 168-191 us pure at 1 MiB; 256 KiB: 150-170; one
/// chunk: 250-380, no sharing).
pub(super) const SHARED_CHUNK: usize = 256 << 10;

/// Smallest reduction, allgather or alltoall (bytes in all) between two members that goes
/// through single copy: there, from 32 KiB, reading the peer's buffer once beats the sliced
/// reduction's two barriers per fragment (2 ranks, `osu_reduce` 32 KiB 5.9-6.9 -> 2.9-3.3
/// us, `osu_allreduce` 6.8-7.0 -> 3.9-4.1) and the fragment slots' two copies (`osu_allgather`
/// 16 KiB 3.5-3.6 -> 2.4-2.9, `osu_alltoall` 16 KiB 3.2-3.4 -> 2.1-2.5), but at 4 ranks on 2
/// cores it lost (reduce 32 KiB 9.8-12.1 -> 13.9-14.9 us), so larger groups keep
/// [`SINGLE_COPY_MIN`].
pub const PAIR_SINGLE_COPY_MIN: usize = 32 << 10;

/// Smallest scatter (bytes in all) that goes through single copy in groups of more than two
/// (a gather's bound is [`GATHER_SINGLE_COPY_BLOCK_MIN`] per block): below it, the fragment slots or messages were as fast or faster (4 ranks on 2
/// cores, 16-64 KiB blocks: gather 4.2-5.1 -> 5.4-6.4 us at 16 KiB, scatter 4.6-5.9 -> 6.8
/// at 32 KiB); from 256 KiB blocks single copy won (gather 512 KiB 116-132 -> 65-88 us, 1
/// MiB 256-273 -> 183-203; scatter 1 MiB 239-356 -> 183-201). Between two members it wins
/// from 32 KiB in all ([`PAIR_SINGLE_COPY_MIN`]): gather 1 MiB 98-115 -> 47-60 us, scatter
/// 92-93 -> 51.
pub const ROOTED_SINGLE_COPY_MIN: usize = 1 << 20;

/// Smallest block of a gather that goes through single copy in groups of more than two (a
/// scatter keeps [`ROOTED_SINGLE_COPY_MIN`] in all). The members writing their blocks into
/// the root's buffer at once beat messages the root takes one after another from 64 KiB
/// blocks (4 ranks on 2 cores, three interleaved rounds, `osu_gather` 64 KiB 24-27 -> 15-20
/// us, 128 KiB 42-47 -> 21-32, Open MPI 24-33 and 40-54; 8 ranks 64 KiB 56-57 -> 44-56,
/// Open MPI 64-75); a scatter's members reading the root's buffer at once did not win there
/// (4 ranks 64 KiB 15-21 -> 16-26 us; 8 ranks 17-20 -> 31-66).
pub const GATHER_SINGLE_COPY_BLOCK_MIN: usize = 64 << 10;

/// Smallest rooted reduction (reduce) that goes through single copy in groups of more than
/// two: below it the sliced reduction through the fragments was as fast or faster (4 ranks on
/// 2 cores, `osu_reduce` 64 KiB 19.3-21.0 -> 15.3-16.1 us; 128 KiB 39-49 single copy against
/// 31-38 sliced, 256 KiB even at 62-79), from 512 KiB single copy (117-131 against 125-147;
/// 1 MiB 217-226 against 252-254).
pub const GROUP_REDUCE_SINGLE_COPY_MIN: usize = 256 << 10;

/// Smallest allreduce that goes through single copy in groups of more than two. Every
/// member's result there is written into every other member's buffer with
/// `process_vm_writev`, whose page pinning costs more than the sliced reduction's plain
/// copies through the fragment slots up to 1 MiB (4 ranks on 2 cores, `osu_allreduce` 128
/// KiB 55-77 us single copy against 25-38 sliced, 512 KiB 165-226 against 110-156, 1 MiB
/// 295-445 against 223-320, even from 2 MiB: 667-975 against 695-843; 3 ranks 1 MiB 259-272
/// against 183-213).
pub const GROUP_ALLREDUCE_SINGLE_COPY_MIN: usize = 2 << 20;

/// A member's buffers as it published them.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Member {
    /// Its contribution.
    pub(super) send: u64,
    /// Where its result goes (0: it wants none).
    pub(super) recv: u64,
    /// Its process.
    pub(super) pid: u32,
    /// Bytes of its elements (members may pass different datatypes of one signature to a
    /// user operation, so this may differ between members; chunks end on every member's
    /// element boundaries, see [`common_unit`]).
    pub(super) elem: u64,
}

impl Member {
    /// Bytes a member publishes.
    pub(super) const BYTES: usize = 32;

    /// The [`Member::BYTES`] bytes a member publishes.
    pub(super) fn encode(&self) -> [u8; Member::BYTES] {
        let mut b = [0u8; Member::BYTES];
        b[..8].copy_from_slice(&self.send.to_le_bytes());
        b[8..16].copy_from_slice(&self.recv.to_le_bytes());
        b[16..24].copy_from_slice(&u64::from(self.pid).to_le_bytes());
        b[24..].copy_from_slice(&self.elem.to_le_bytes());
        b
    }

    /// A member from its published bytes (a pid that does not fit is kept out of range, so
    /// that the copies fail on it instead of reaching another process).
    pub(super) fn decode(b: &[u8]) -> Member {
        let word = |i: usize| {
            b.get(i..i + 8)
                .and_then(|w| w.try_into().ok())
                .map_or(0, u64::from_le_bytes)
        };
        Member {
            send: word(0),
            recv: word(8),
            pid: u32::try_from(word(16)).unwrap_or(u32::MAX),
            elem: word(24).max(1),
        }
    }
}

/// The least common multiple of the members' element sizes: ranges that start and end on
/// multiples of it (or at the end of the data) hold whole elements on every member. `None`
/// when it exceeds `len` (then the data is one range).
pub(super) fn common_unit(members: &[Member], len: usize) -> Option<usize> {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    members
        .iter()
        .try_fold(1u64, |l, m| {
            let l = (l / gcd(l, m.elem)).checked_mul(m.elem)?;
            (l <= len as u64).then_some(l)
        })
        .map(|l| l as usize)
}

/// Bytes per chunk, at most about `most`, of a single-copy reduction of `len` bytes among
/// `members`.
pub(super) fn chunk_size(members: &[Member], len: usize, most: usize) -> usize {
    match common_unit(members, len) {
        Some(unit) => (most / unit).max(1) * unit,
        None => len.max(1),
    }
}

/// This member's side of a chunk: its contribution (`send`, or `recv` itself when in place)
/// and its result buffer (none: it wants none), both the whole buffers.
pub(super) struct Own<'a> {
    pub(super) send: Option<&'a [u8]>,
    pub(super) recv: Option<&'a mut [u8]>,
}

/// Reduces bytes `at..at + w` of every member's contribution, in rank order (member `n - 1`
/// first, then each lower rank's applied onto it, as the other reductions do), and writes
/// the result into every member's result buffer. The members' buffers are read and written
/// with single copy, this member's directly. The result is built in this member's own result
/// buffer when it wants one and its contribution lies elsewhere, or lies there but comes first
/// (this member is the last rank, in place): one copy of the chunk less than building it in
/// `acc` and copying it over. `tmp` holds one operand; both are at least `w` bytes.
pub(super) fn reduce_chunk(
    members: &[Member],
    me: usize,
    own: &mut Own<'_>,
    (at, w): (usize, usize),
    (acc, tmp): (&mut [u8], &mut [u8]),
    apply: &mut dyn FnMut(&[u8], &mut [u8]),
) -> Result<(), String> {
    let n = members.len();
    let (acc, tmp) = (&mut acc[..w], &mut tmp[..w]);
    let read = |r: usize, dst: &mut [u8]| {
        cma::read(members[r].pid, members[r].send + at as u64, dst)
            .map_err(|e| format!("shm coll: reading rank {r}'s buffer: {e}"))
    };
    let last = me == n - 1;
    let in_recv = own.recv.is_some() && (own.send.is_some() || last);
    {
        // The contribution (none: already at the start of the result, in place) and where
        // the result is built.
        let (contribution, result): (Option<&[u8]>, &mut [u8]) = match (own.send, &mut own.recv) {
            (send, Some(recv)) if in_recv => (
                send.map(|s| chunk(s, at, w)).transpose()?,
                recv.get_mut(at..at + w).ok_or_else(|| outside(at, w))?,
            ),
            (Some(send), _) => (Some(chunk(send, at, w)?), &mut *acc),
            (None, Some(recv)) => (Some(chunk(recv, at, w)?), &mut *acc),
            (None, None) => return Err("shm coll: a reduction without a contribution".into()),
        };
        if !last {
            read(n - 1, result)?;
        } else if let Some(c) = contribution {
            result.copy_from_slice(c);
        }
        for r in (0..n - 1).rev() {
            if r == me {
                apply(contribution.unwrap_or_default(), result);
            } else {
                read(r, tmp)?;
                apply(tmp, result);
            }
        }
    }
    let result: &[u8] = match &mut own.recv {
        Some(recv) if in_recv => chunk(recv, at, w)?,
        Some(recv) => {
            let dst = recv.get_mut(at..at + w).ok_or_else(|| outside(at, w))?;
            dst.copy_from_slice(acc);
            acc
        }
        None => acc,
    };
    for (r, m) in members.iter().enumerate() {
        if r != me && m.recv != 0 {
            cma::write(m.pid, m.recv + at as u64, result)
                .map_err(|e| format!("shm coll: writing rank {r}'s buffer: {e}"))?;
        }
    }
    Ok(())
}

/// Bytes `at..at + w` of one of this member's buffers.
fn chunk(b: &[u8], at: usize, w: usize) -> Result<&[u8], String> {
    b.get(at..at + w).ok_or_else(|| outside(at, w))
}

fn outside(at: usize, w: usize) -> String {
    format!(
        "shm coll: bytes {at}..{} lie outside this member's buffer",
        at + w
    )
}

impl CollSegment {
    /// Enables the single-copy reductions (after every member probed every other).
    pub fn enable_single_copy(&mut self, ok: bool) {
        self.cma = ok;
    }

    /// Whether an operation of `len` bytes takes the single-copy path.
    pub fn single_copy(&self, len: usize) -> bool {
        self.cma && self.geo.n <= FLAT_MAX_RANKS && len >= SINGLE_COPY_MIN
    }

    /// Whether a reduction, allgather or alltoall of `len` bytes (in all) between exactly
    /// two members takes the single-copy path below [`SINGLE_COPY_MIN`]: from
    /// [`PAIR_SINGLE_COPY_MIN`] (decided by the group size, which every member knows alike).
    pub fn pair_single_copy(&self, len: usize) -> bool {
        self.cma && self.geo.n == 2 && len >= PAIR_SINGLE_COPY_MIN
    }

    /// Whether a reduction of `len` bytes takes the single-copy path: between two members
    /// from [`PAIR_SINGLE_COPY_MIN`], in larger groups from [`GROUP_REDUCE_SINGLE_COPY_MIN`]
    /// for a reduce (`everyone` false: one root wants the result) and from
    /// [`GROUP_ALLREDUCE_SINGLE_COPY_MIN`] for an allreduce (the same answer on every member).
    pub fn single_copy_reduction(&self, len: usize, everyone: bool) -> bool {
        let group_min = if everyone {
            GROUP_ALLREDUCE_SINGLE_COPY_MIN
        } else {
            GROUP_REDUCE_SINGLE_COPY_MIN
        };
        self.single_copy_from(len, group_min)
    }

    /// Single copy for `len` bytes in all: between two members from
    /// [`PAIR_SINGLE_COPY_MIN`], in larger groups from `group_min` (an operation's measured
    /// threshold, at least [`SINGLE_COPY_MIN`]).
    fn single_copy_from(&self, len: usize, group_min: usize) -> bool {
        self.pair_single_copy(len) || (self.single_copy(len) && len >= group_min)
    }

    /// Reduction through the members' own buffers: one round publishes every member's send
    /// and receive addresses; rank i then reduces slice i of the data (the root's twice as
    /// large as the others'), chunk by chunk
    /// ([`reduce_chunk`]), and writes the result into every receive buffer that wants it; a
    /// closing round keeps every buffer alive until all copies are done.
    pub fn single_copy_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) -> Result<(), String> {
        let n = self.geo.n;
        let me = self.me;
        let want = root.is_none() || root == Some(me);
        let mine = Member {
            send: send.as_ptr() as u64,
            recv: if want { recv.as_mut_ptr() as u64 } else { 0 },
            pid: std::process::id(),
            elem: elem as u64,
        };
        let mut members = vec![Member::default(); n];
        let bytes = Member::BYTES;
        self.flat_round(&mine.encode(), bytes, super::Readers::All, &mut |r, b| {
            members[r] = Member::decode(b)
        });
        let len = send.len();
        // Rank i's slice, on boundaries that are element boundaries on every member. A root
        // takes twice the share of the others: it writes its result locally, where they copy
        // their contribution aside and write theirs into its buffer with single copy (at 2
        // ranks, equal halves left the root waiting for a third of the time).
        let unit = common_unit(&members, len).unwrap_or(len.max(1));
        let units = len / unit;
        let weight = |i: usize| if root == Some(i) { 2 } else { 1 };
        let total_weight: usize = (0..n).map(weight).sum();
        let bound = |i: usize| {
            if i == n {
                len
            } else {
                units * (0..i).map(weight).sum::<usize>() / total_weight * unit
            }
        };
        let (s0, s1) = (bound(me), bound(me + 1));
        let chunk = chunk_size(&members, len, REDUCE_CHUNK);
        let mut buffers = std::mem::take(&mut self.scratch);
        buffers.resize(2 * chunk, 0);
        let (acc, tmp) = buffers.split_at_mut(chunk);
        let mut own = Own {
            send: Some(send),
            recv: want.then_some(recv),
        };
        let mut result = Ok(());
        let mut at = s0;
        while at < s1 && result.is_ok() {
            let w = chunk.min(s1 - at);
            result = reduce_chunk(
                &members,
                me,
                &mut own,
                (at, w),
                (&mut *acc, &mut *tmp),
                apply,
            );
            at += w;
        }
        self.scratch = buffers;
        // Nobody may return (and free or reuse its buffers) before every copy is done.
        self.flat_barrier();
        result
    }

    /// Broadcast through the members' own buffers: one round publishes the root's buffer
    /// address (in a pair, both buffers'); the others read the message from the root's buffer
    /// with single copy (in a pair, the root writes the upper half into its partner's buffer
    /// meanwhile, so both cores copy); a closing round keeps the root's buffer (in a pair,
    /// both) alive until all copies are done.
    pub fn single_copy_bcast(&mut self, root: usize, buf: &mut [u8]) -> Result<(), String> {
        let n = self.geo.n;
        if n > 2 {
            // Everyone reads the root's buffer: only the root's address matters, and only the
            // root waits for the copies.
            let (addr, pid) = self.root_address(root, buf.as_ptr() as u64);
            let result = if self.me == root {
                Ok(())
            } else {
                cma::read(pid, addr, buf)
                    .map_err(|e| format!("shm coll: reading the root's buffer: {e}"))
            };
            self.copies_done_at_root(root);
            return result;
        }
        let members = self.exchange_addresses(buf.as_ptr() as u64);
        let len = buf.len();
        let split = if n == 2 { (len / 2) & !4095 } else { len };
        let result = if self.me == root {
            if n == 2 {
                let (addr, pid) = members[1 - root];
                cma::write(pid, addr + split as u64, &buf[split..])
                    .map_err(|e| format!("shm coll: writing the partner's buffer: {e}"))
            } else {
                Ok(())
            }
        } else {
            let (addr, pid) = members[root];
            cma::read(pid, addr, &mut buf[..split])
                .map_err(|e| format!("shm coll: reading the root's buffer: {e}"))
        };
        self.flat_barrier();
        result
    }

    /// Allgather through the members' own buffers: one round publishes every send buffer's
    /// address; each member reads block r from member r's send buffer straight into
    /// `recv[displs[r]..]` with single copy; a closing round keeps every buffer alive.
    /// `recv` already holds this member's own block (as for [`CollSegment::flat_allgatherv`]).
    pub fn single_copy_allgather(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), String> {
        let n = self.geo.n;
        let members = self.exchange_addresses(send.as_ptr() as u64);
        let mut result = Ok(());
        for r in 0..n {
            let (at, len) = (displs[r], counts[r]);
            let Some(dst) = recv.get_mut(at..at + len) else {
                result = Err(format!(
                    "shm coll: block of rank {r} lies outside the receive buffer"
                ));
                continue;
            };
            if r == self.me {
                // The caller put this member's own block in place already.
                continue;
            }
            if let Err(e) = cma::read(members[r].1, members[r].0, dst) {
                result = Err(format!("shm coll: reading rank {r}'s buffer: {e}"));
            }
        }
        self.flat_barrier();
        result
    }
    /// Alltoall through the members' own buffers: one round publishes every send buffer's
    /// address; each member reads block `me` of member r's send buffer straight into block r
    /// of `recv` with single copy (its own block from `send`); a closing round keeps every
    /// buffer alive until all copies are done.
    pub fn single_copy_alltoall(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<(), String> {
        let (n, me) = (self.geo.n, self.me);
        let members = self.exchange_addresses(send.as_ptr() as u64);
        recv[me * block..(me + 1) * block].copy_from_slice(&send[me * block..(me + 1) * block]);
        let mut result = Ok(());
        // Start with the next member, so the members do not all read member 0's buffer first.
        for r in (1..n).map(|k| (me + k) % n) {
            let (addr, pid) = members[r];
            let dst = &mut recv[r * block..(r + 1) * block];
            if let Err(e) = cma::read(pid, addr + (me * block) as u64, dst) {
                result = Err(format!("shm coll: reading rank {r}'s send buffer: {e}"));
            }
        }
        self.flat_barrier();
        result
    }

    /// Gather (`gather` true) or scatter of `block`-byte blocks through the program buffers,
    /// the root's buffer published in one round: a gather's members write their `send` block
    /// into the root's `recv`, a scatter's read theirs from the root's `send`, so the copies
    /// run on every member at once rather than one after another on the root; a closing
    /// round keeps the root's buffer alive until all copies are done (only the root waits in
    /// either round: a member never waits for another non-root). The root's own block is
    /// copied unless its `send` (gather) or `recv` (scatter) is empty (in place). Ok(false),
    /// nothing done, below the sizes where this wins: 32 KiB in all between two members
    /// ([`CollSegment::pair_single_copy`]), in larger groups [`GATHER_SINGLE_COPY_BLOCK_MIN`]
    /// blocks for a gather and [`ROOTED_SINGLE_COPY_MIN`] in all for a scatter (the same
    /// answer on every member: all know the block size and the group).
    pub fn single_copy_rooted(
        &mut self,
        gather: bool,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<bool, String> {
        let group_min = if gather {
            GATHER_SINGLE_COPY_BLOCK_MIN.saturating_mul(self.geo.n)
        } else {
            ROOTED_SINGLE_COPY_MIN
        };
        if !self.single_copy_from(block.saturating_mul(self.geo.n), group_min) {
            return Ok(false);
        }
        let me = self.me;
        let published = if gather { recv.as_ptr() } else { send.as_ptr() };
        let (addr, pid) = self.root_address(root, published as u64);
        let at = addr + (me * block) as u64;
        let own = me * block..(me + 1) * block;
        let mut result = Ok(());
        match (gather, me == root) {
            (true, true) if send.len() == block => recv[own].copy_from_slice(send),
            (false, true) if recv.len() == block => recv.copy_from_slice(&send[own]),
            (true, false) => {
                if let Err(e) = cma::write(pid, at, &send[..block]) {
                    result = Err(format!(
                        "shm coll: gather writing into the root's (rank {root}) buffer: {e}"
                    ));
                }
            }
            (false, false) => {
                if let Err(e) = cma::read(pid, at, &mut recv[..block]) {
                    result = Err(format!(
                        "shm coll: scatter reading the root's (rank {root}) buffer: {e}"
                    ));
                }
            }
            _ => {}
        }
        self.copies_done_at_root(root);
        result.map(|()| true)
    }
}
