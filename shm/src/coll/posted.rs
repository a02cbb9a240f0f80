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

use std::sync::atomic::Ordering::{Acquire, Release};
use std::sync::Arc;

use super::{CollGeometry, CollSegment, FLAT_MAX_RANKS, INLINE_LINE, INLINE_MAX};
use crate::mem::{Mapping, SharedMem};

/// Posted lines per member: rounds that may be published before the oldest is finished
/// everywhere.
pub(super) const LINES: usize = 8;

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
    /// member's count of rounds).
    pub fn posted_rounds(&self) -> PostedRounds {
        PostedRounds {
            map: Arc::clone(&self.map),
            geo: self.geo,
            me: self.me,
            drawn: 0,
            finished: 0,
            finished_above: Vec::new(),
            others_finished: 0,
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
        debug_assert!(g >= 1 && g <= self.drawn, "round {g} was never drawn");
        if let Some(reuse) = g.checked_sub(LINES as u64).filter(|&r| r > 0) {
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
        }
        let line = self.line(self.me, g);
        self.map.write_bytes(line + 8, payload);
        self.map.store(line, g, Release);
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
}
