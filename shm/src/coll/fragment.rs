//! Collectives through one set of fragment slots (scatter of blocks up to
//! [`FRAGMENT_BLOCK_MAX`](super::FRAGMENT_BLOCK_MAX), gather, allgather and alltoall up to
//! a fragment, short reductions):
//! every writer copies its data into a slot, one round publishes them, every reader copies
//! (or, for a reduction, combines) out of the slots. Between the inline line of the flat
//! rounds and single copy, this replaces per-pair messages (alltoall, gather, scatter) and
//! the two-barrier pipelined reduction of short messages.
//!
//! In groups of up to [`FLAT_MAX_RANKS`] the round is one flat round that only the readers
//! wait in ([`CollSegment::publish_set`]): a broadcast's or scatter's root and a gather's or
//! rooted reduction's other members go on as soon as they have written, as a sender of
//! eager messages would (4 ranks on 2 cores, `osu_scatter` 512 B-16 KiB 2.7-6.9 -> 0.13-1.7
//! us, `osu_gather` 2.7-6.3 -> 0.8-4.4, `osu_reduce` 2.7-6.2 -> 0.8-3.0, Open MPI 4.3-15).
//! In larger groups it is the segment's barrier.
//!
//! This module owns the choice of a fragment set, what each operation reads and writes in
//! it, and the record of which sets members may still read; it never waits for anything
//! but the segment's rounds, and it never touches a set that a member may still read: a
//! writer first waits ([`CollSegment::claim_set`]) until every reader of the set's last use
//! has published a later round, which it does only after it has read (free when a full
//! round since showed every member's publication; in larger groups every operation has a
//! barrier, which proves it).

use super::flat::Readers;
use super::{combine_in_rank_order, CollSegment, FLAT_MAX_RANKS};
use crate::mem::SharedMem;

/// Largest operand of [`CollSegment::fragment_reduce`], except a rooted one in a group of 3
/// to [`FLAT_MAX_RANKS`] members, which takes operands up to a fragment: there the other
/// members write theirs and go on, so only the root's reads count, where the sliced
/// reduction meets at two barriers per fragment (4 ranks on 2 cores, three interleaved
/// launches, `osu_reduce` 32 KiB 17-38 -> 5.4-16 us, 64 KiB 26-65 -> 8.9-29, 256 KiB
/// (single copy) 93-131 -> 22-106, Open MPI 20-43, 20-40 and 73-105; 8 ranks 64 KiB 47-117
/// -> 8.3-36, Open MPI 65-79). Two members stream instead ([`CollSegment::pair_reduce`]).
pub const FRAGMENT_REDUCE_MAX: usize = 16 << 10;

/// Most bytes of other members' operands that all readers of
/// [`CollSegment::fragment_reduce`] together copy and combine. Every reader combining all
/// operands costs less than the sliced reduction's second barrier only while this stays
/// short, and where ranks outnumber cores the readers take turns (4 ranks on 2 cores,
/// `osu_allreduce` 4 KiB 4.4-5.7 -> 3.5-4.6 us, but 16 KiB 7.9-9.8 -> 9.6-10.5, so it stays
/// sliced; rooted `osu_reduce` 16 KiB 6.9-7.1 -> 4.1-5.0). The bound counts every reader
/// even where each has a core: it must not depend on anything members may see differently
/// (whether this rank yields does), or they would take different paths and deadlock.
const FRAGMENT_REDUCE_READS: usize = 64 << 10;

/// Largest group whose alltoall goes through the fragment slots in rounds
/// ([`CollSegment::pipelined_alltoall`]): at 16 members a round moves `frag / 16` bytes of
/// each block per barrier, and the barriers of 16 ranks on 2 cores cost more than single
/// copy (16 ranks, `osu_alltoall -i 20`, three interleaved launches: 32 KiB 1,294-1,898 us in
/// rounds against 724-864 by single copy, 256 KiB 13.1-14.9 ms against 6.5-8.2; 8 ranks 64
/// KiB 150-173 against 339-341).
pub const PIPELINED_ALLTOALL_MAX_MEMBERS: usize = 8;

impl CollSegment {
    /// Makes what the writers put into `set` visible to its `readers`: in groups of up to
    /// [`FLAT_MAX_RANKS`], one flat round that only they wait in (the writers go on at once:
    /// a broadcast's or scatter's root, a gather's other members; with `Readers::All`, a
    /// barrier), remembering that the set may still be read until
    /// [`CollSegment::claim_set`]; in larger groups, a barrier. Every operation that reads
    /// a set goes through here: the next one may no longer wait for its readers.
    pub(super) fn publish_set(&mut self, set: usize, readers: Readers) {
        if self.geo.n > FLAT_MAX_RANKS {
            self.barrier();
            return;
        }
        self.flat_round(&[], 0, readers, &mut |_, _| {});
        self.set_reads[set] = (self.flat_gen, readers);
        self.sets_in_reading |= 1 << set;
    }

    /// Before this member writes into `set`: if members may still read it after a one-way
    /// round ([`CollSegment::publish_set`]), waits until each of them has published a later
    /// round, which it does only after its reads. Free when a round since then showed every
    /// member's publication (every full flat round clears the record).
    pub(super) fn claim_set(&mut self, set: usize) {
        if self.sets_in_reading & (1 << set) == 0 {
            return;
        }
        let (g, readers) = self.set_reads[set];
        let (me, later) = (self.me, g + 1);
        let reads = |r: usize| match readers {
            Readers::All => true,
            Readers::Root(root) => r == root,
            Readers::OfRoot(root) => r != root,
        };
        for r in (0..self.geo.n).filter(|&r| r != me && reads(r)) {
            self.wait_word(self.inline_line(r, (later % 2) as usize), later);
        }
        self.sets_in_reading &= !(1 << set);
    }

    /// Allgather(v) of blocks of at most a fragment each, in one set of fragment slots:
    /// every member writes its block into its slot, one barrier round, every member copies
    /// the others' slots into `recv` at `displs` (`recv` already holds its own block). False,
    /// nothing done, when a block is larger than a fragment (the same answer on every member:
    /// all know the counts). Between two members the caller takes single copy from 32 KiB in
    /// all instead (two copies through lines the other core just wrote lost there: 64 KiB
    /// 13.3 us against 10.5-13); in larger groups, whose members share the cores, one
    /// barrier and plain copies beat each member's single-copy reads of every other block
    /// (4 ranks on 2 cores, `osu_allgather` 32 KiB 38-61 -> 19-25 us, 256 KiB 229-292 ->
    /// 87-124, Open MPI 41-63 and 203-213; blocks had been capped at 16 KiB here too).
    pub fn fragment_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> bool {
        if counts.iter().copied().max().unwrap_or(0) > self.geo.frag {
            return false;
        }
        let set = self.next_fragment_set();
        let me = self.me;
        self.claim_set(set);
        self.map
            .write_bytes(self.slot(set, me), &send[..counts[me]]);
        self.publish_set(set, Readers::All);
        for (r, (&at, &len)) in displs.iter().zip(counts).enumerate() {
            if r != me {
                self.map
                    .read_bytes(self.slot(set, r), &mut recv[at..at + len]);
            }
        }
        true
    }

    /// Allgather(v) of blocks of any size through the fragment slots, a fragment of every
    /// block per round: [`CollSegment::fragment_allgatherv`] over the blocks' first
    /// fragments, then their second, and so on (every member knows the counts, so all agree
    /// on the rounds).
    pub fn pipelined_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) {
        let frag = self.geo.frag;
        let rounds = counts.iter().copied().max().unwrap_or(0).div_ceil(frag);
        let piece = |at: usize, len: usize| at.min(len)..(at + frag).min(len);
        let mut sub_counts = vec![0; counts.len()];
        let mut sub_displs = vec![0; counts.len()];
        for round in 0..rounds {
            let at = round * frag;
            for (r, (&len, &displ)) in counts.iter().zip(displs).enumerate() {
                let part = piece(at, len);
                sub_counts[r] = part.len();
                sub_displs[r] = displ + part.start;
            }
            let mine = piece(at, counts[self.me]);
            self.fragment_allgatherv(&send[mine], recv, &sub_counts, &sub_displs);
        }
    }

    /// Scatter of `n` blocks of `block` bytes (at most a fragment and
    /// [`FRAGMENT_BLOCK_MAX`](super::FRAGMENT_BLOCK_MAX))
    /// through one set of fragment slots: the root writes block r into member r's slot and
    /// publishes them (in small groups it goes on at once), every other member copies its
    /// slot into `recv`. The root copies its own block unless `recv` is empty (in place).
    /// False, nothing done, when the block is larger (the same answer everywhere).
    pub fn fragment_scatter(
        &mut self,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> bool {
        let Some(set) = self.fragment_set(block) else {
            return false;
        };
        let me = self.me;
        if me == root {
            self.claim_set(set);
            for r in (0..self.geo.n).filter(|&r| r != me) {
                self.map
                    .write_bytes(self.slot(set, r), &send[r * block..(r + 1) * block]);
            }
            if recv.len() == block {
                recv.copy_from_slice(&send[me * block..(me + 1) * block]);
            }
        }
        self.publish_set(set, Readers::OfRoot(root));
        if me != root {
            self.map.read_bytes(self.slot(set, me), recv);
        }
        true
    }

    /// Gather of blocks of `block` bytes (at most a fragment) through one set of fragment
    /// slots: every member writes its block into its slot and publishes it (in small groups
    /// it goes on at once), the root copies the others' into `recv` (and its own unless
    /// `send` is empty, in place). False, nothing done, when the block is larger (the same
    /// answer everywhere). Blocks the caller does
    /// not send through single copy first (two members from 32 KiB in all, larger groups
    /// from 64 KiB blocks) come here up to a fragment, not only
    /// [`FRAGMENT_BLOCK_MAX`](super::FRAGMENT_BLOCK_MAX) as a scatter's: the members' copies
    /// in run at once, where messages reach the root one after another (4 ranks on 2 cores,
    /// `osu_gather` 32 KiB 15-21 -> 10-13 us, Open MPI 18-20; a scatter through the slots
    /// lost there, 9.2-9.9 -> 11.4-12).
    pub fn fragment_gather(
        &mut self,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> bool {
        if block > self.geo.frag {
            return false;
        }
        let set = self.next_fragment_set();
        let me = self.me;
        if me != root {
            self.claim_set(set);
            self.map.write_bytes(self.slot(set, me), send);
        } else if send.len() == block {
            recv[me * block..(me + 1) * block].copy_from_slice(send);
        }
        self.publish_set(set, Readers::Root(root));
        if me == root {
            for r in (0..self.geo.n).filter(|&r| r != me) {
                self.map
                    .read_bytes(self.slot(set, r), &mut recv[r * block..(r + 1) * block]);
            }
        }
        true
    }

    /// Alltoall of `n` blocks of `block` bytes through one set of fragment slots, when all of
    /// a member's blocks fit one slot (the caller takes single copy between two members from
    /// 32 KiB in all, as for [`CollSegment::fragment_allgatherv`]; in larger groups this
    /// beat single copy: 4 ranks on 2 cores, `osu_alltoall` 32 KiB 34-54 -> 17-19 us, 64 KiB
    /// 55-84 -> 24-25, Open MPI 37-49 and 54-75; 8 ranks 32 KiB 168-192 -> 41-44, Open MPI
    /// 122-125; blocks had been capped at 16 KiB): every
    /// member writes its whole `send` buffer into its slot, one barrier, every member copies
    /// block `me` of every other member's slot into `recv` (its own block straight from
    /// `send`). One copy in and one out per block, where pairwise messages pay a match and a
    /// handshake per peer. False, nothing done, when the blocks are larger (the same answer
    /// everywhere: MPI makes the block size the same on every member); the slots are reused as
    /// in [`CollSegment::fragment_allgatherv`].
    pub fn fragment_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) -> bool {
        let n = self.geo.n;
        if block.saturating_mul(n) > self.geo.frag {
            return false;
        }
        let set = self.next_fragment_set();
        let me = self.me;
        let mine = me * block..(me + 1) * block;
        self.claim_set(set);
        self.map.write_bytes(self.slot(set, me), &send[..n * block]);
        recv[mine.clone()].copy_from_slice(&send[mine]);
        self.publish_set(set, Readers::All);
        for r in (0..n).filter(|&r| r != me) {
            self.map.read_bytes(
                self.slot(set, r) + me * block,
                &mut recv[r * block..(r + 1) * block],
            );
        }
        true
    }

    /// Alltoall of `n` blocks of `block` bytes of any size through the fragment slots, in
    /// rounds: each round every member writes the next `frag / n` bytes of each block meant
    /// for another member into its slot (block d's piece at d pieces in), one barrier, and
    /// every member copies its piece out of each other member's slot. The own block is
    /// copied from `send` first. False, nothing done, in groups of more than
    /// [`PIPELINED_ALLTOALL_MAX_MEMBERS`].
    pub fn pipelined_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) -> bool {
        let (n, me) = (self.geo.n, self.me);
        if n > PIPELINED_ALLTOALL_MAX_MEMBERS {
            return false;
        }
        let step = (self.geo.frag / n).max(1);
        let own = me * block..(me + 1) * block;
        recv[own.clone()].copy_from_slice(&send[own]);
        let mut at = 0;
        while at < block {
            let len = step.min(block - at);
            let set = self.next_fragment_set();
            self.claim_set(set);
            let mine = self.slot(set, me);
            for d in (0..n).filter(|&d| d != me) {
                let from = d * block + at;
                self.map
                    .write_bytes(mine + d * step, &send[from..from + len]);
            }
            self.publish_set(set, Readers::All);
            for r in (0..n).filter(|&r| r != me) {
                let to = r * block + at;
                self.map
                    .read_bytes(self.slot(set, r) + me * step, &mut recv[to..to + len]);
            }
            at += len;
        }
        true
    }

    /// Reduction of operands of at most [`FRAGMENT_REDUCE_MAX`] bytes (and a fragment; a
    /// rooted one in a group of 3 to [`FLAT_MAX_RANKS`], up to a fragment) through one set
    /// of fragment slots: every member writes its operand into its slot, one round (that
    /// only the root waits in, in small groups, when there is one), and every member that
    /// wants the result (`root`, or all when `None`) combines all operands itself in rank
    /// order (`apply(input, inout)` with the lower rank's operand as `input`, as
    /// [`CollSegment::reduce`] does), so non-commutative operations keep MPI's order. One
    /// round where the sliced reduction needs two barriers. False, nothing done, when the
    /// operands are longer (the same answer everywhere).
    pub fn fragment_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) -> bool {
        let (n, me) = (self.geo.n, self.me);
        let len = send.len();
        let per_reader = len.saturating_mul(n - 1);
        let readers = if root.is_some() { 1 } else { n };
        let fits = if root.is_some() && (3..=FLAT_MAX_RANKS).contains(&n) {
            len <= self.geo.frag
        } else {
            len <= FRAGMENT_REDUCE_MAX.min(self.geo.frag)
                && per_reader.saturating_mul(readers) <= FRAGMENT_REDUCE_READS
        };
        if !fits {
            return false;
        }
        let set = self.next_fragment_set();
        let want = root.is_none_or(|r| r == me);
        // A root alone reads the slots, so it need not publish its own operand; the others
        // go on once they have written theirs.
        if root != Some(me) {
            self.claim_set(set);
            self.map.write_bytes(self.slot(set, me), send);
        }
        self.publish_set(set, root.map_or(Readers::All, Readers::Root));
        if !want {
            return true;
        }
        let mut scratch = std::mem::take(&mut self.scratch);
        if scratch.len() < len {
            scratch.resize(len, 0);
        }
        combine_in_rank_order(
            n,
            me,
            send,
            &mut recv[..len],
            &mut scratch,
            |r, dst| self.map.read_bytes(self.slot(set, r), dst),
            apply,
        );
        self.scratch = scratch;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::{group, on_every_member, wrapping_sum};

    /// Fragment operations whose writers go on without waiting for the readers (scatter,
    /// broadcast over several fragments, gather, rooted reduction), back to back with no
    /// barrier between, from rotating roots, with one member now and then late by a
    /// scheduling quantum: every value arrives intact, so no writer rewrites a set that a
    /// member still reads.
    #[test]
    fn one_way_sets_are_rewritten_only_after_their_readers_finished() {
        for n in [2usize, 3, 5] {
            let (_, segs) = group(n, 64);
            on_every_member(segs, move |me, mut seg| {
                for round in 0..2000usize {
                    let root = (round / 4 + round) % n;
                    if me == round % n && round % 97 == 0 {
                        std::thread::sleep(std::time::Duration::from_millis(1));
                    }
                    let v = |r: usize, i: usize| (r * 31 + i * 7 + round) as u8;
                    match round % 4 {
                        0 => {
                            let send: Vec<u8> = (0..n * 48).map(|i| v(i / 48, i)).collect();
                            let mut mine = vec![0u8; 48];
                            let from = if me == root { &send[..] } else { &[][..] };
                            assert!(seg.fragment_scatter(root, from, &mut mine, 48));
                            assert_eq!(mine, send[me * 48..me * 48 + 48], "scatter {round}");
                        }
                        1 => {
                            let want: Vec<u8> = (0..200).map(|i| v(root, i)).collect();
                            let mut buf = if me == root {
                                want.clone()
                            } else {
                                vec![0; 200]
                            };
                            seg.bcast(root, &mut buf);
                            assert_eq!(buf, want, "bcast {round}");
                        }
                        2 => {
                            let block: Vec<u8> = (0..40).map(|i| v(me, i)).collect();
                            let mut all = vec![0u8; if me == root { 40 * n } else { 0 }];
                            assert!(seg.fragment_gather(root, &block, &mut all, 40));
                            if me == root {
                                let want: Vec<u8> =
                                    (0..n * 40).map(|i| v(i / 40, i % 40)).collect();
                                assert_eq!(all, want, "gather {round}");
                            }
                        }
                        _ => {
                            // A whole slot every other time (64 bytes: the fragment).
                            let len = if round % 8 == 3 { 32 } else { 64 };
                            let send: Vec<u8> = (0..len).map(|i| v(me, i)).collect();
                            let mut out = vec![0u8; len];
                            assert!(seg.fragment_reduce(
                                Some(root),
                                &send,
                                &mut out,
                                &mut wrapping_sum
                            ));
                            if me == root {
                                let want: Vec<u8> = (0..len)
                                    .map(|i| (0..n).map(|r| v(r, i)).fold(0u8, u8::wrapping_add))
                                    .collect();
                                assert_eq!(out, want, "reduce {round}");
                            }
                            // Past a fragment it declines, on every member alike.
                            assert!(!seg.fragment_reduce(
                                Some(root),
                                &[0u8; 65],
                                &mut [0u8; 65],
                                &mut wrapping_sum
                            ));
                        }
                    }
                }
            });
        }
    }
}
