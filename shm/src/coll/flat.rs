//! The collective segment's flat rounds: the one-round operations of small groups (barrier,
//! bcast, allgather(v), alltoall, scatter, gather, reduce) through the inline lines, and the
//! rule that lets a member rewrite its line (see the parent module's layout and doc).
//!
//! Owns `Readers` and the inline-line protocol; must never touch the control words, slots or
//! posted lines, which other operations own.

use super::{CollSegment, FLAT_MAX_RANKS, INLINE_LINE, INLINE_MAX};
use crate::mem::SharedMem;

/// Which members read which lines in a flat round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Readers {
    /// Every member reads every line (barrier, allreduce, allgather, alltoall).
    All,
    /// The root reads every line; the others read none and go on once published (reduce
    /// and gather to a root).
    Root(usize),
    /// Every member reads the root's line; the root reads none (bcast, scatter).
    OfRoot(usize),
}

impl CollSegment {
    /// Offset of member `r`'s inline line of `parity`.
    pub(super) fn inline_line(&self, r: usize, parity: usize) -> usize {
        self.geo.inline_off() + (r * 2 + parity) * INLINE_LINE
    }

    /// Whether the single-round operations apply to this group and payload.
    pub fn flat(&self, len: usize) -> bool {
        self.geo.n <= FLAT_MAX_RANKS && len <= INLINE_MAX
    }

    /// One round: publish `payload` (may be empty), then wait for the lines this member reads
    /// by `readers` (every line, the root's only, or none) and `visit(r, bytes)` each of them
    /// in rank order.
    #[inline]
    pub(super) fn flat_round(
        &mut self,
        payload: &[u8],
        len: usize,
        readers: Readers,
        visit: &mut dyn FnMut(usize, &[u8]),
    ) {
        self.flat_round_parts(payload, &[], len, readers, visit);
    }

    /// [`CollSegment::flat_round`] publishing `head` followed by `tail`.
    pub(super) fn flat_round_parts(
        &mut self,
        head: &[u8],
        tail: &[u8],
        len: usize,
        readers: Readers,
        visit: &mut dyn FnMut(usize, &[u8]),
    ) {
        self.flat_gen += 1;
        let g = self.flat_gen;
        let parity = (g % 2) as usize;
        let (n, me) = (self.geo.n, self.me);
        // My line of this parity was last written two rounds ago. Whoever read it then must
        // be done: each reader publishes the round in between only after its reads, so wait
        // for that publication from the readers of that round (nothing to wait for when the
        // last round already showed every member's publication here).
        if g > 2 && !self.flat_saw_all {
            let earlier = self.flat_readers[parity];
            let before = self.flat_gen - 1;
            let wait = |seg: &Self, r: usize| seg.wait_word(seg.inline_line(r, 1 - parity), before);
            match earlier {
                Readers::All => (0..n).filter(|&r| r != me).for_each(|r| wait(self, r)),
                Readers::Root(root) if root != me => wait(self, root),
                Readers::OfRoot(root) if root == me => {
                    (0..n).filter(|&r| r != me).for_each(|r| wait(self, r))
                }
                _ => {}
            }
        }
        self.flat_readers[parity] = readers;
        let mine = self.inline_line(me, parity);
        self.map.write_bytes(mine + 8, head);
        if !tail.is_empty() {
            self.map.write_bytes(mine + 8 + head.len(), tail);
        }
        self.release_store(mine, g);
        let reads_all = match readers {
            Readers::All => true,
            Readers::Root(root) => root == me,
            Readers::OfRoot(_) => false,
        };
        self.flat_saw_all = reads_all;
        if let Readers::OfRoot(root) = readers {
            if root != me {
                let line = self.inline_line(root, parity);
                self.wait_word(line, g);
                if len > 0 {
                    // The root rewrites its line only after this member has published a
                    // later round, so the view stays valid during `visit`.
                    visit(root, self.map.bytes(line + 8, len));
                }
            }
            return;
        }
        if !reads_all {
            return;
        }
        for r in 0..n {
            let line = self.inline_line(r, parity);
            if r != me {
                self.wait_word(line, g);
            }
            if len > 0 {
                // Other ranks rewrite a line only two operations later, after this rank has
                // published the next one, so the view stays valid during `visit`.
                visit(r, self.map.bytes(line + 8, len));
            }
        }
        // Every member published this round after it finished reading any set it read
        // before.
        self.sets_in_reading = 0;
    }

    /// Single-round barrier (small groups).
    pub fn flat_barrier(&mut self) {
        self.flat_round(&[], 0, Readers::All, &mut |_, _| {});
    }

    /// Barrier in two flat rounds through `root`: every member publishes and the root waits
    /// for all, then the root publishes and the others wait for it. The root leaves first,
    /// a round ahead of the others (see [`CollSegment::explicit_barrier`]).
    pub(super) fn flat_rooted_barrier(&mut self, root: usize) {
        self.flat_round(&[], 0, Readers::Root(root), &mut |_, _| {});
        self.flat_round(&[], 0, Readers::OfRoot(root), &mut |_, _| {});
    }

    /// Single-round broadcast of at most [`INLINE_MAX`] bytes (small groups).
    pub fn flat_bcast(&mut self, root: usize, buf: &mut [u8]) {
        if self.me == root {
            // The root reads nothing back: it publishes the buffer as it is.
            self.flat_round(buf, 0, Readers::OfRoot(root), &mut |_, _| {});
            return;
        }
        let len = buf.len();
        self.flat_round(&[], len, Readers::OfRoot(root), &mut |r, bytes| {
            if r == root {
                buf.copy_from_slice(bytes);
            }
        });
    }

    /// Single-round allgather(v) of blocks of at most [`INLINE_MAX`] bytes (small groups):
    /// every rank publishes its block and copies the others' into `recv` at `displs`.
    /// `recv` already holds this rank's own block.
    pub fn flat_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) {
        let widest = counts.iter().copied().max().unwrap_or(0);
        let me = self.me;
        self.flat_round(send, widest, Readers::All, &mut |r, bytes| {
            if r != me {
                recv[displs[r]..displs[r] + counts[r]].copy_from_slice(&bytes[..counts[r]]);
            }
        });
    }

    /// Single-round allgather of equal blocks (`send`, at most [`INLINE_MAX`]): every member
    /// publishes its block and copies every block, its own included, into `recv` in rank
    /// order (no counts and displacements to build, as `MPI_Allgather` needs none).
    pub fn flat_allgather(&mut self, send: &[u8], recv: &mut [u8]) {
        let block = send.len();
        let me = self.me;
        recv[me * block..(me + 1) * block].copy_from_slice(send);
        self.flat_round(send, block, Readers::All, &mut |r, bytes| {
            if r != me {
                recv[r * block..(r + 1) * block].copy_from_slice(&bytes[..block]);
            }
        });
    }

    /// Single-round alltoall of `n` blocks of `block` bytes, at most [`INLINE_MAX`] in all
    /// (small groups): every rank publishes its whole send buffer and copies block `me` of
    /// every other rank's into `recv`.
    pub fn flat_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) {
        let me = self.me;
        let mine = me * block..(me + 1) * block;
        recv[mine.clone()].copy_from_slice(&send[mine.clone()]);
        self.flat_round(send, send.len(), Readers::All, &mut |r, bytes| {
            if r != me {
                recv[r * block..(r + 1) * block].copy_from_slice(&bytes[mine.clone()]);
            }
        });
    }

    /// Single-round scatter of `n` blocks of `block` bytes, the other members' at most
    /// [`INLINE_MAX`] in all (small groups): the root publishes every block but its own, in
    /// rank order, and every other member copies its block out of the root's line into
    /// `recv`. The root copies its own block unless `recv` is empty (in place); `send` is
    /// read at the root only. (Leaving the root's block out lets 4 members scatter 128-byte
    /// blocks in one round: with it, they passed the line and took the fragment slots and a
    /// barrier, 3.4 us against Open MPI's 0.9.)
    pub fn flat_scatter(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize) {
        let me = self.me;
        if me == root {
            let (before, rest) = send.split_at(root * block);
            let (own, after) = rest.split_at(block);
            if recv.len() == block {
                recv.copy_from_slice(own);
            }
            let after = &after[..(self.geo.n - 1 - root) * block];
            debug_assert!(
                before.len() + after.len() <= INLINE_MAX,
                "flat scatter past the line"
            );
            self.flat_round_parts(before, after, 0, Readers::OfRoot(root), &mut |_, _| {});
            return;
        }
        let at = if me < root { me } else { me - 1 } * block;
        let total = block * (self.geo.n - 1);
        self.flat_round(&[], total, Readers::OfRoot(root), &mut |r, bytes| {
            if r == root {
                recv.copy_from_slice(&bytes[at..at + block]);
            }
        });
    }

    /// Single-round gather of blocks of `block` bytes, at most [`INLINE_MAX`] each (small
    /// groups): every member publishes its `send` block in its own line and the root copies
    /// the others' into `recv` (`n` blocks), and its own too unless `send` is empty (in
    /// place: it is there).
    pub fn flat_gather(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize) {
        let me = self.me;
        if me != root {
            self.flat_round(send, 0, Readers::Root(root), &mut |_, _| {});
            return;
        }
        if send.len() == block {
            recv[me * block..(me + 1) * block].copy_from_slice(send);
        }
        self.flat_round(&[], block, Readers::Root(root), &mut |r, bytes| {
            if r != me {
                recv[r * block..(r + 1) * block].copy_from_slice(bytes);
            }
        });
    }

    /// Single-round reduction of at most [`INLINE_MAX`] bytes (small groups): every rank
    /// combines all contributions itself, in rank order; `root` = `None` means all keep it.
    pub fn flat_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) {
        let len = send.len();
        let (n, me) = (self.geo.n, self.me);
        let want = root.is_none_or(|r| r == me);
        let readers = match root {
            Some(root) => Readers::Root(root),
            None => Readers::All,
        };
        // Publish and wait for the lines this member reads; nothing copied out yet.
        self.flat_round(send, 0, readers, &mut |_, _| {});
        if !want {
            return;
        }
        // Combine straight from the lines (and this member's own `send`): a member rewrites
        // its line only after this one has published a later round, so the lines stay valid
        // until this member's next round. No copy of each contribution into a scratch
        // buffer first (2 ranks, `osu_reduce` 256 B 0.23-0.27 -> 0.15-0.18 us).
        let parity = (self.flat_gen % 2) as usize;
        let acc = &mut recv[..len];
        if me == n - 1 {
            acc.copy_from_slice(send);
        } else {
            acc.copy_from_slice(self.map.bytes(self.inline_line(n - 1, parity) + 8, len));
        }
        for r in (0..n - 1).rev() {
            if r == me {
                apply(send, acc);
            } else {
                apply(self.map.bytes(self.inline_line(r, parity) + 8, len), acc);
            }
        }
    }
}
