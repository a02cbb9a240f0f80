//! Posted rounds: the one-round exchange of the inline lines, split so that a nonblocking
//! collective can publish its contribution when it starts and read the others' when they are
//! there, with no wait in between.
//!
//! Every member has [`LINES`] posted lines and one finished word. Posted round `g` (numbered
//! from 1 by [`PostedRounds::draw`], in the order the members start their collectives,
//! which MPI makes the same everywhere) uses line `(g - 1) % LINES` of every member: a member
//! writes its payload there, then `g` into the line's first word (Release); a reader that
//! sees at least `g` there (Acquire) reads the payload. A member that has read every round up
//! to `f` stores `f` into its finished word (Release). A member rewrites a line for round `g`
//! only once every member's finished word (Acquire) shows at least `g - LINES`, so a line is
//! never overwritten while someone still reads it; until then the round is not published and
//! [`PostedRounds::publish`] says so, for the caller to try again later (it must never
//! wait: the member holding the line may be waiting for this one).
//!
//! Rounds may finish in any order (a program may wait for its collectives in any order): the
//! finished word advances over the rounds finished without a gap. The rounds go through a
//! [`PostedRounds`] handle of their own, beside the [`CollSegment`] (the same mapping), so a
//! member can go on with them while a blocking operation holds the segment: a peer may wait
//! for a round this member has yet to publish while this member waits in a blocking
//! collective (MPI lets the program start one before completing its nonblocking ones). This
//! module owns only the posted lines and finished words; it never touches the blocking
//! operations' words.

use std::sync::atomic::Ordering::{AcqRel, Acquire, Relaxed, Release};
use std::sync::Arc;

use super::single_copy::{chunk_size, reduce_chunk, Member, Own, SHARED_CHUNK};
use super::{CollGeometry, CollSegment, FLAT_MAX_RANKS, INLINE_LINE, INLINE_MAX, SINGLE_COPY_MIN};
use crate::mem::{Mapping, SharedMem};

/// Posted lines per member: rounds that may be published before the oldest is finished
/// everywhere.
pub(super) const LINES: usize = 8;

/// Byte offsets, in member 0's line of a shared round, of its counters (the payload, the
/// [`Member::BYTES`] bytes of [`Member`], ends before them): the next chunk to claim, the chunks done, and
/// 1 + the rank of the first member whose copy failed (0: none).
const CLAIMED: usize = 64;
const DONE: usize = 72;
const FAILED: usize = 80;

/// One member's handle on the posted rounds of a collective segment.
pub struct PostedRounds {
    map: Arc<Mapping>,
    geo: CollGeometry,
    me: usize,
    /// The last round drawn.
    drawn: u64,
    /// Every round up to this one is finished here (and published in the finished word).
    finished: u64,
    /// Rounds finished here above `finished`, with a gap below them.
    finished_above: Vec<u64>,
    /// The least finished word seen on the other members (a lower bound of them all).
    others_finished: u64,
    /// Every member can reach every other's memory (single copy on for the segment).
    single_copy: bool,
    /// The two chunk buffers of shared reductions, kept between rounds.
    scratch: Vec<u8>,
}

impl std::fmt::Debug for PostedRounds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "PostedRounds(rank {} of {}, drawn {}, finished {})",
            self.me, self.geo.n, self.drawn, self.finished
        )
    }
}

impl CollSegment {
    /// The handle on this segment's posted rounds (one per member and segment: it keeps the
    /// member's count of rounds). Take it after [`CollSegment::enable_single_copy`]: it keeps
    /// the answer for its shared reductions.
    pub fn posted_rounds(&self) -> PostedRounds {
        PostedRounds {
            map: Arc::clone(&self.map),
            geo: self.geo,
            me: self.me,
            drawn: 0,
            finished: 0,
            finished_above: Vec::new(),
            others_finished: 0,
            single_copy: self.cma,
            scratch: Vec::new(),
        }
    }
}

impl PostedRounds {
    fn line(&self, r: usize, g: u64) -> usize {
        let k = ((g - 1) % LINES as u64) as usize;
        self.geo.posted_off() + (r * LINES + k) * INLINE_LINE
    }

    fn finished_word(&self, r: usize) -> usize {
        self.geo.finished_off() + r * INLINE_LINE
    }

    /// Members.
    pub fn members(&self) -> usize {
        self.geo.n
    }

    /// Whether a round can carry blocks of `len` bytes in this group (as the blocking
    /// one-round operations: at most [`FLAT_MAX_RANKS`] members, [`INLINE_MAX`] bytes).
    pub fn fits(&self, len: usize) -> bool {
        self.geo.n <= FLAT_MAX_RANKS && len <= INLINE_MAX
    }

    /// Draws the number of the next posted round (every member draws the same number for the
    /// same collective, as they start them in the same order).
    pub fn draw(&mut self) -> u64 {
        self.drawn += 1;
        self.drawn
    }

    /// Publishes this member's `payload` (at most [`INLINE_MAX`] bytes) for round `g`, or
    /// returns false, publishing nothing, while a member still reads the round that used the
    /// line before (call again later).
    pub fn publish(&mut self, g: u64, payload: &[u8]) -> bool {
        assert!(
            payload.len() <= INLINE_MAX,
            "posted round of {} bytes",
            payload.len()
        );
        if !self.line_free(g) {
            return false;
        }
        let line = self.line(self.me, g);
        self.map.write_bytes(line + 8, payload);
        self.map.store(line, g, Release);
        true
    }

    /// Whether this member may rewrite its line for round `g`: every member finished the
    /// round that used it before.
    fn line_free(&mut self, g: u64) -> bool {
        debug_assert!(g >= 1 && g <= self.drawn, "round {g} was never drawn");
        let Some(reuse) = g.checked_sub(LINES as u64).filter(|&r| r > 0) else {
            return true;
        };
        if self.finished < reuse {
            return false;
        }
        if self.others_finished < reuse {
            let least = (0..self.geo.n)
                .filter(|&r| r != self.me)
                .map(|r| self.map.load(self.finished_word(r), Acquire))
                .min()
                .unwrap_or(u64::MAX);
            self.others_finished = least;
            if least < reuse {
                return false;
            }
        }
        true
    }

    /// Whether every member has published round `g` (this one included).
    pub fn arrived(&self, g: u64) -> bool {
        (0..self.geo.n).all(|r| self.map.load(self.line(r, g), Acquire) >= g)
    }

    /// Member `r`'s first `len` bytes of round `g`, once [`PostedRounds::arrived`] and until
    /// this member calls [`PostedRounds::finish`] for `g` (no member rewrites the line before
    /// that).
    pub fn payload(&self, g: u64, r: usize, len: usize) -> &[u8] {
        assert!(len <= INLINE_MAX, "posted round of {len} bytes");
        self.map.bytes(self.line(r, g) + 8, len)
    }

    /// Whether an allreduce of `len` bytes can run as a shared round
    /// ([`PostedRounds::publish_buffers`], [`PostedRounds::reduce_shared`]): single copy is on
    /// and the block is as large as the blocking single-copy reduction takes.
    pub fn shares(&self, len: usize) -> bool {
        self.single_copy && self.geo.n <= FLAT_MAX_RANKS && len >= SINGLE_COPY_MIN
    }

    /// Publishes, for shared round `g`, the addresses of this member's contribution and
    /// result buffer (the same address when in place) and its element size instead of a
    /// payload; false as [`PostedRounds::publish`]. Both buffers must stay valid until
    /// [`PostedRounds::reduce_shared`] has answered true: other members read and write them.
    pub fn publish_buffers(&mut self, g: u64, send: u64, recv: u64, elem: usize) -> bool {
        if !self.line_free(g) {
            return false;
        }
        let line = self.line(self.me, g);
        let me = Member {
            send,
            recv,
            pid: std::process::id(),
            elem: elem as u64,
        };
        self.map.write_bytes(line + 8, &me.encode());
        // Only member 0's counters are used; every member resets its own alike. The store of
        // `g` below publishes them with the buffers.
        for word in [CLAIMED, DONE, FAILED] {
            self.map.store(line + word, 0, Relaxed);
        }
        self.map.store(line, g, Release);
        true
    }

    /// Works on shared round `g` (an allreduce of `len` bytes, every member arrived): claims chunks (`SHARED_CHUNK`) from member 0's counter, one at a time, and reduces
    /// each for all members ([`reduce_chunk`]), until none is left. Whoever is in the library
    /// does the work, so a member busy computing holds nobody back. `send` is this member's
    /// contribution (`None`: in place, in `recv`). True once every chunk is done, by anyone;
    /// false while other members still work on theirs (call again). An error (a copy that
    /// failed, here or on another member) comes once every chunk is done, so that no member
    /// returns while another still copies into its buffers.
    pub fn reduce_shared(
        &mut self,
        g: u64,
        len: usize,
        send: Option<&[u8]>,
        recv: &mut [u8],
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) -> Result<bool, String> {
        // On the stack: this runs at every progress while others still work on their chunks
        // (`shares` keeps the group within the flat size).
        let mut all = [Member::default(); FLAT_MAX_RANKS];
        let members = &mut all[..self.geo.n];
        for (r, m) in members.iter_mut().enumerate() {
            *m = Member::decode(self.payload(g, r, Member::BYTES));
        }
        let members = &*members;
        let chunk = chunk_size(members, len, SHARED_CHUNK);
        let chunks = len.div_ceil(chunk) as u64;
        let counters = self.line(0, g);
        let mut own = Own {
            send,
            recv: Some(recv),
        };
        if self.map.load(counters + CLAIMED, Relaxed) < chunks {
            let mut buffers = std::mem::take(&mut self.scratch);
            buffers.resize(2 * chunk, 0);
            let (acc, tmp) = buffers.split_at_mut(chunk);
            loop {
                let c = self.map.fetch_add(counters + CLAIMED, 1, AcqRel);
                if c >= chunks {
                    break;
                }
                let at = c as usize * chunk;
                let w = chunk.min(len - at);
                let step = (at, w);
                if let Err(e) = reduce_chunk(members, self.me, &mut own, step, (acc, tmp), apply) {
                    tracing::warn!(target: "coll", "posted round {g}: {e}");
                    let _ = self.map.compare_exchange(
                        counters + FAILED,
                        0,
                        self.me as u64 + 1,
                        AcqRel,
                        Relaxed,
                    );
                }
                // Release: the chunk's copies happen before a member sees it done.
                self.map.fetch_add(counters + DONE, 1, AcqRel);
            }
            self.scratch = buffers;
        }
        if self.map.load(counters + DONE, Acquire) < chunks {
            return Ok(false);
        }
        match self.map.load(counters + FAILED, Acquire) {
            0 => Ok(true),
            r => Err(format!(
                "shm coll: a single-copy allreduce failed on rank {} of the communicator \
                 (its log has the reason); set KESTREL_SHM_SINGLE_COPY=none to use copies \
                 through the segment",
                r - 1
            )),
        }
    }

    /// This member is done with round `g` (read, or given up): the members may reuse the line.
    pub fn finish(&mut self, g: u64) {
        if g <= self.finished || self.finished_above.contains(&g) {
            return;
        }
        if g != self.finished + 1 {
            self.finished_above.push(g);
            return;
        }
        self.finished = g;
        while let Some(i) = self
            .finished_above
            .iter()
            .position(|&x| x == self.finished + 1)
        {
            self.finished_above.swap_remove(i);
            self.finished += 1;
        }
        self.map
            .store(self.finished_word(self.me), self.finished, Release);
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::group;
    use super::LINES;

    /// Two members, rounds published ahead, finished out of order: a line is not rewritten
    /// before every member finished the round that used it, and payloads read back intact.
    #[test]
    fn lines_are_reused_only_after_every_member_finished() {
        let (_path, segs) = group(2, 192);
        let (mut a, mut b) = (segs[0].posted_rounds(), segs[1].posted_rounds());
        let rounds: Vec<u64> = (0..LINES as u64 + 1).map(|_| a.draw()).collect();
        for _ in 0..=LINES {
            b.draw();
        }
        for &g in &rounds[..LINES] {
            assert!(a.publish(g, &g.to_le_bytes()));
        }
        // The ninth reuses the first line: b has not even published round 1.
        let ninth = rounds[LINES];
        assert!(!a.publish(ninth, &ninth.to_le_bytes()));
        assert!(!a.arrived(1));
        assert!(b.publish(1, &[0xb1; 8]));
        assert!(a.arrived(1) && b.arrived(1));
        assert_eq!(b.payload(1, 0, 8), 1u64.to_le_bytes());
        assert_eq!(a.payload(1, 1, 8), [0xb1; 8]);
        // a finished round 1, b not yet: still not free.
        a.finish(1);
        assert!(!a.publish(ninth, &ninth.to_le_bytes()));
        // b finishes round 2 first: the finished word stays at 0 (a gap at 1).
        assert!(b.publish(2, &[0xb2; 8]));
        b.finish(2);
        assert!(!a.publish(ninth, &ninth.to_le_bytes()));
        b.finish(1);
        assert!(a.publish(ninth, &ninth.to_le_bytes()));
        for g in 3..=ninth {
            assert!(b.publish(g, &[g as u8; 8]));
        }
        assert!(b.arrived(ninth));
        assert_eq!(b.payload(ninth, 0, 8), ninth.to_le_bytes());
        assert_eq!(a.payload(ninth, 1, 8), [ninth as u8; 8]);
    }
    /// A shared round in one process (single copy to its own pid): member 0 reduces every
    /// chunk while member 1 does nothing, then member 1 finds the round done; sums in rank
    /// order with member 1 in place, a size that ends in a partial chunk, and elements of
    /// different sizes on the two members (8-byte on one, 12-byte on the other).
    #[test]
    fn shared_round_is_done_by_whoever_is_there() {
        let (_path, mut segs) = group(2, 192);
        for s in &mut segs {
            s.enable_single_copy(true);
        }
        let (mut a, mut b) = (segs[0].posted_rounds(), segs[1].posted_rounds());
        let len = 3 * super::SHARED_CHUNK + 24 * 100;
        assert!(a.shares(len) && !a.shares(1000));
        let send_a: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut recv_a = vec![0u8; len];
        let mut inplace_b: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
        let want: Vec<u8> = (0..len).map(|i| ((i % 251) + (i % 7)) as u8).collect();
        let g = a.draw();
        assert_eq!(b.draw(), g);
        assert!(a.publish_buffers(g, send_a.as_ptr() as u64, recv_a.as_mut_ptr() as u64, 8));
        let b_addr = inplace_b.as_mut_ptr() as u64;
        assert!(b.publish_buffers(g, b_addr, b_addr, 12));
        assert!(a.arrived(g));
        let mut add = |x: &[u8], acc: &mut [u8]| {
            // Chunks end on both members' element boundaries (multiples of 24 bytes).
            assert!(
                x.len().is_multiple_of(24) && x.len() <= super::SHARED_CHUNK,
                "chunk of {}",
                x.len()
            );
            for (a, x) in acc.iter_mut().zip(x) {
                *a = a.wrapping_add(*x);
            }
        };
        assert_eq!(
            a.reduce_shared(g, len, Some(&send_a), &mut recv_a, &mut add),
            Ok(true)
        );
        assert_eq!(recv_a, want);
        assert_eq!(inplace_b, want);
        let mut untouched = |_: &[u8], _: &mut [u8]| panic!("no chunk was left for member 1");
        let mut mine = inplace_b.clone();
        assert_eq!(
            b.reduce_shared(g, len, None, &mut mine, &mut untouched),
            Ok(true)
        );
        a.finish(g);
        b.finish(g);
        // Round two, the other way round: member 1 (the last rank, in place, so it builds the
        // result in its own buffer) does every chunk, with an order-sensitive operation
        // (result = member 1's * 3 + member 0's).
        let g = a.draw();
        assert_eq!(b.draw(), g);
        let mut inplace_b: Vec<u8> = (0..len).map(|i| (i % 7) as u8).collect();
        let want: Vec<u8> = (0..len)
            .map(|i| {
                ((i % 7) as u8)
                    .wrapping_mul(3)
                    .wrapping_add((i % 251) as u8)
            })
            .collect();
        recv_a.fill(0);
        assert!(a.publish_buffers(g, send_a.as_ptr() as u64, recv_a.as_mut_ptr() as u64, 8));
        let b_addr = inplace_b.as_mut_ptr() as u64;
        assert!(b.publish_buffers(g, b_addr, b_addr, 12));
        let mut ordered = |x: &[u8], acc: &mut [u8]| {
            for (a, x) in acc.iter_mut().zip(x) {
                *a = a.wrapping_mul(3).wrapping_add(*x);
            }
        };
        assert_eq!(
            b.reduce_shared(g, len, None, &mut inplace_b, &mut ordered),
            Ok(true)
        );
        assert_eq!(inplace_b, want);
        assert_eq!(recv_a, want);
        let mut untouched = |_: &[u8], _: &mut [u8]| panic!("no chunk was left for member 0");
        let mut mine = recv_a.clone();
        assert_eq!(
            a.reduce_shared(g, len, Some(&send_a), &mut mine, &mut untouched),
            Ok(true)
        );
        a.finish(g);
        b.finish(g);
    }
}
