//! Streams between the two members of a pair: one member copies fragments into the
//! segment's data slots, used as one ring, while the other takes them out, each side
//! announcing its progress in a counter of its own instead of meeting the other at a
//! barrier per fragment.
//!
//! This module owns the ring and the two stream counters (see the layout table in
//! [`super`]); it never touches a slot outside the ring's turn, and it never returns while
//! the other member may still read a slot this member wrote: the writer waits, at the end of
//! an operation, until the reader has taken every fragment, and an operation starts with a
//! barrier, so no slot read for an earlier operation is rewritten under its reader.
//!
//! Why a stream: between two members, a plain copy out of the other core's shared lines
//! moved 12-13 GB/s on the test machine, `process_vm_readv` 6-7 GB/s (its page pinning), so
//! a copy through the segment that the other core fills meanwhile beats single copy; and a
//! barrier per fragment (the sets' discipline of [`CollSegment::bcast`]) left the writer
//! waiting for the reader at every fragment, which in the machine's slow core-to-core state
//! doubled the time (`osu_reduce` 1 MiB 224-316 us against 171 by single copy).

use super::{CollSegment, INLINE_LINE};
use crate::mem::SharedMem;

/// Smallest operand of [`CollSegment::pair_reduce`]; up to this size a reduce goes through
/// one set of fragment slots ([`CollSegment::fragment_reduce`], one barrier), which at 2
/// ranks takes exactly 16 KiB first. Above it the stream beats single copy once the root
/// combines straight out of the ring (2 ranks, `osu_reduce -i 2000` 32 KiB 4.8-5.7 us
/// streamed against 5.7-7.4 by single copy, Open MPI 5.1-7.6, five interleaved rounds); with
/// a copy out of the ring before the arithmetic it had been no faster than single copy
/// (5.6-6.8 against 5.1-6.4), which is why this was 64 KiB in session 33.
pub const PAIR_REDUCE_MIN: usize = 16 << 10;

/// Bytes per stream fragment: small enough that the reader starts early and a 64 KiB
/// operand is four fragments in flight (2 members, 16 KiB against 64 KiB fragments:
/// `osu_reduce` 64 KiB 7.6 against 13.0 us, 1 MiB 101.5 against 104), large enough that the
/// counters' handshakes stay rare.
const PAIR_CHUNK: usize = 16 << 10;

/// Byte, within member r's finished line (see the layout table), of r's stream counter: on
/// a cache line of its own, away from the posted rounds' word 0.
const STREAM_WORD: usize = 256;

/// How the writer of a pair stream stores into the ring, chosen by what each way cost it
/// lately (the whole operation, until the reader took the last fragment): plain stores leave
/// the lines in the writer's cache for the reader to pull, non-temporal ones send them to
/// memory. Which is faster depends on where the two cores sit, which on a virtual machine
/// changes while a job runs: where they shared a cache, plain stores made `osu_reduce` 1 MiB
/// 100-108 us (Open MPI 119-126); where every line crossed between the cores' caches, the
/// writer pulling each line back before overwriting it doubled the traffic (plain 172-205 us,
/// non-temporal 151-165, Open MPI 144-181). The way that is not in use is tried again every
/// [`StoreChoice::RETRY`] operations, so a change of placement is noticed. A local choice:
/// the reader sees the same bytes either way.
///
/// Each way's cost is the median of its last three samples, not a running mean: one stream
/// the scheduler interrupted (seen: 560 ns/KiB among plain streams of 73-100) would
/// otherwise have made the slower way look cheaper until the next retry, and a session-33
/// version with a running mean measured 512 KiB 51-74 us against 38-53 with plain stores
/// forced.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct StoreChoice {
    /// Recent samples of each way, plain first.
    cost: [Samples; 2],
    /// Streams written so far.
    streams: u64,
}

/// The last three costs of one way, nanoseconds per KiB.
#[derive(Debug, Default, Clone, Copy)]
struct Samples {
    last: [f64; 3],
    /// Samples taken (the first three fill `last`).
    taken: u64,
}

impl Samples {
    fn push(&mut self, sample: f64) {
        self.last[(self.taken % 3) as usize] = sample;
        self.taken += 1;
    }

    /// The median of the last three, or the least of fewer (`None`: never tried). An
    /// interrupted stream only ever costs more, so with too few samples for a median the
    /// least is the better guess.
    fn estimate(&self) -> Option<f64> {
        let [a, b, c] = self.last;
        match self.taken {
            0 => None,
            1 => Some(a),
            2 => Some(a.min(b)),
            _ => Some(a.max(b).min(a.min(b).max(c))),
        }
    }
}

impl StoreChoice {
    /// Every this many streams the writer tries the way it does not prefer.
    const RETRY: u64 = 16;

    /// Whether the next stream uses non-temporal stores.
    fn choose(&mut self) -> bool {
        self.streams += 1;
        let better = match self.cost.map(|way| way.estimate()) {
            [None, _] => return false,
            [_, None] => return true,
            [Some(plain), Some(streaming)] => streaming < plain,
        };
        if self.streams.is_multiple_of(Self::RETRY) {
            !better
        } else {
            better
        }
    }

    /// Records what a stream of `len` bytes cost the writer, stored one way.
    fn record(&mut self, streaming: bool, took: std::time::Duration, len: usize) {
        let sample = took.as_nanos() as f64 * 1024.0 / len.max(1) as f64;
        self.cost[usize::from(streaming)].push(sample);
    }
}

impl CollSegment {
    /// Member `r`'s stream counter: the fragments of pair streams it has written (as the
    /// writer) or taken out (as the reader), over the segment's life.
    fn stream_word(&self, r: usize) -> usize {
        self.geo.finished_off() + r * INLINE_LINE + STREAM_WORD
    }

    /// Where piece `k` of a stream of `frag`-byte pieces goes: the data slots of every set,
    /// cut into `ring` pieces, in turn from the first for every stream. Each stream starts
    /// at the ring's start, not where the last one ended: the start barrier and the last
    /// stream's final wait leave no reader there, and the same lines stay in the two cores'
    /// caches from one operation to the next (2 ranks, `osu_reduce` 64 KiB 3.7-5.2 us
    /// against 7.9-10.5 going on around the ring in the runs before; Open MPI 7.6-9.2).
    fn ring_slot(&self, k: u64, ring: u64, frag: usize) -> usize {
        self.slot(0, 0) + (k % ring) as usize * frag
    }

    /// A reduce between exactly two members as a stream: the other member copies its
    /// operand into the ring fragment by fragment, the root combines each with its own in
    /// rank order, using the ring's piece in place as the input where the order allows (at
    /// root 1, whose input is rank 0's operand, or for a `commutative` operation) and
    /// copying it out first otherwise. False, nothing
    /// done, unless the group has two members and the operand is at least
    /// [`PAIR_REDUCE_MIN`] bytes (the same answer on both).
    pub fn pair_reduce(
        &mut self,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        commutative: bool,
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) -> bool {
        let len = send.len();
        if self.geo.n != 2 || len < PAIR_REDUCE_MIN || elem == 0 || elem > self.geo.frag {
            return false;
        }
        let (me, other) = (self.me, 1 - root);
        let frag = (PAIR_CHUNK.min(self.geo.frag) / elem * elem).max(elem);
        let ring = (self.geo.sets * self.geo.n * self.geo.frag / frag) as u64;
        let count = len.div_ceil(frag) as u64;
        // No slot is rewritten while a member still reads it for an earlier operation.
        self.barrier();
        let base = self.streamed;
        self.streamed += count;
        let piece = |k: u64| {
            let at = k as usize * frag;
            at..(at + frag).min(len)
        };
        if me == other {
            let streaming = self.stream_stores.choose();
            let started = std::time::Instant::now();
            for k in 0..count {
                let g = base + k;
                if k >= ring {
                    // The slot's last fragment of this stream has been taken out.
                    self.wait_word(self.stream_word(root), g + 1 - ring);
                }
                let (at, part) = (self.ring_slot(k, ring, frag), &send[piece(k)]);
                if streaming {
                    self.map.write_bytes_streaming(at, part);
                } else {
                    self.map.write_bytes(at, part);
                }
                self.release_store(self.stream_word(me), g + 1);
            }
            // The ring is free again only once the root took everything.
            self.wait_word(self.stream_word(root), base + count);
            self.stream_stores.record(streaming, started.elapsed(), len);
            return true;
        }
        for k in 0..count {
            let g = base + k;
            self.wait_word(self.stream_word(other), g + 1);
            let part = piece(k);
            let acc = &mut recv[part.clone()];
            let theirs = self.map.bytes(self.ring_slot(k, ring, frag), acc.len());
            if root == 1 || commutative {
                // The ring's operand is the input (rank 0's, or either for a commutative
                // operation): combined straight out of the ring, so the pull of its lines
                // overlaps the arithmetic instead of preceding it in a copy of its own.
                acc.copy_from_slice(&send[part]);
                apply(theirs, acc);
            } else {
                // Rank 1's operand is the inout: copied out, then ours is combined into it.
                acc.copy_from_slice(theirs);
                apply(&send[part], acc);
            }
            self.release_store(self.stream_word(me), g + 1);
        }
        true
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::PAIR_REDUCE_MIN;
    use crate::coll::tests::{group, spawn_member};

    /// Not commutative, so a result in the wrong operand order shows: `inout = inout * 31 +
    /// input`, byte by byte.
    fn ordered(input: &[u8], inout: &mut [u8]) {
        for (i, o) in input.iter().zip(inout.iter_mut()) {
            *o = o.wrapping_mul(31).wrapping_add(*i);
        }
    }

    /// Commutative: `inout += input`, byte by byte.
    fn added(input: &[u8], inout: &mut [u8]) {
        for (i, o) in input.iter().zip(inout.iter_mut()) {
            *o = o.wrapping_add(*i);
        }
    }

    /// Non-temporal copies at every alignment and length write exactly their bytes: the
    /// unaligned head and tail by plain stores, the rest 16 bytes at a time.
    #[test]
    fn streaming_writes_land_exactly_where_asked() {
        use crate::mem::{test_mapping, SharedMem};
        let m = test_mapping("stream", 4096);
        for off in 0..33 {
            for len in [0, 1, 15, 16, 17, 31, 32, 33, 100, 1000] {
                m.write_bytes(0, &[0xaa; 2048]);
                let src: Vec<u8> = (0..len).map(|i| (i * 7 + off) as u8).collect();
                m.write_bytes_streaming(off, &src);
                let mut back = vec![0u8; 2048];
                m.read_bytes(0, &mut back);
                assert_eq!(&back[off..off + len], &src[..], "off {off} len {len}");
                assert!(back[..off]
                    .iter()
                    .chain(&back[off + len..])
                    .all(|&b| b == 0xaa));
            }
        }
    }

    /// The writer tries both ways first, then keeps the cheaper, tries the other every
    /// `RETRY` streams, and turns to it once it has become the cheaper one.
    #[test]
    fn the_writer_stores_the_way_that_cost_least_lately() {
        use super::StoreChoice;
        use std::time::Duration;
        let mut c = StoreChoice::default();
        let run = |c: &mut StoreChoice, plain_us: u64, streaming_us: u64, n: u64| {
            (0..n)
                .map(|_| {
                    let streaming = c.choose();
                    let us = if streaming { streaming_us } else { plain_us };
                    c.record(streaming, Duration::from_micros(us), 1 << 20);
                    streaming
                })
                .collect::<Vec<bool>>()
        };
        let first = run(&mut c, 100, 150, 2 * StoreChoice::RETRY);
        assert_eq!(&first[..2], &[false, true], "both ways are tried first");
        for (i, &streaming) in first.iter().enumerate().skip(2) {
            let retry = (i as u64 + 1).is_multiple_of(StoreChoice::RETRY);
            assert_eq!(
                streaming, retry,
                "plain is cheaper: non-temporal only on every RETRY-th stream: {first:?}"
            );
        }
        // The placement changes: plain now costs more, and the retry finds it out.
        let after = run(&mut c, 200, 150, 3 * StoreChoice::RETRY);
        let tail = &after[after.len() - StoreChoice::RETRY as usize + 1..];
        assert!(
            tail.iter().filter(|&&s| s).count() >= tail.len() - 1,
            "non-temporal stores must take over once cheaper: {after:?}"
        );
    }

    /// One stream the scheduler interrupted does not turn the writer to the slower way:
    /// each way's cost is a median of its last three, so a lone plain stream at six times
    /// the usual cost leaves plain stores chosen on every stream but the retries.
    #[test]
    fn one_interrupted_stream_does_not_change_the_choice() {
        use super::StoreChoice;
        use std::time::Duration;
        let mut c = StoreChoice::default();
        let mut chosen = Vec::new();
        for i in 0..4 * StoreChoice::RETRY {
            let streaming = c.choose();
            let us = match (streaming, i) {
                (true, _) => 150,
                (false, 20) => 600,
                (false, _) => 100,
            };
            c.record(streaming, Duration::from_micros(us), 1 << 20);
            chosen.push(streaming);
        }
        for (i, &streaming) in chosen.iter().enumerate().skip(2) {
            let retry = (i as u64 + 1).is_multiple_of(StoreChoice::RETRY);
            assert_eq!(streaming, retry, "stream {i}: {chosen:?}");
        }
    }

    /// Streams of many laps around a ring of four 4 KiB pieces, to either root, with 1-,
    /// 8- and 12-byte elements and commutative and non-commutative operations, interleaved
    /// with broadcasts (which use the same slots under the sets' discipline) and barriers:
    /// the root's result is rank 0's operand combined into rank 1's, exactly, every time;
    /// shorter operands and larger groups decline.
    #[test]
    fn pair_streams_reduce_in_rank_order_between_other_collectives() {
        let (_, segs) = group(2, 4096);
        let handles: Vec<_> = segs
            .into_iter()
            .enumerate()
            .map(|(me, mut seg)| {
                spawn_member(me, move || {
                    let mut none = [0u8; 0];
                    assert!(!seg.pair_reduce(
                        0,
                        &vec![0u8; PAIR_REDUCE_MIN - 1],
                        &mut vec![0u8; PAIR_REDUCE_MIN - 1],
                        1,
                        false,
                        &mut ordered
                    ));
                    for round in 0..60usize {
                        let elem = [1, 8, 12][round % 3];
                        let len = (PAIR_REDUCE_MIN + round * 1777) / elem * elem;
                        let root = round % 2;
                        // Every root with either kind of operation: the in-place and the
                        // copying reader.
                        let commutative = (round / 2) % 2 == 1;
                        let mut op: fn(&[u8], &mut [u8]) =
                            if commutative { added } else { ordered };
                        let operand = |r: usize| -> Vec<u8> {
                            (0..len)
                                .map(|i| (i * (r + 3) + round * 5 + r) as u8)
                                .collect()
                        };
                        let mut want = operand(1);
                        op(&operand(0), &mut want);
                        let send = operand(me);
                        let mut recv = vec![0u8; len];
                        let target: &mut [u8] = if me == root { &mut recv } else { &mut none };
                        assert!(seg.pair_reduce(root, &send, target, elem, commutative, &mut op));
                        if me == root {
                            assert!(
                                recv == want,
                                "round {round}: root {root} got a wrong result \
                                 (commutative: {commutative})"
                            );
                        }
                        if round % 4 == 1 {
                            let mut buf: Vec<u8> =
                                (0..9000).map(|i| (i * me + round) as u8).collect();
                            seg.bcast(1 - root, &mut buf);
                            let from = 1 - root;
                            assert!(buf
                                .iter()
                                .enumerate()
                                .all(|(i, &b)| b == (i * from + round) as u8));
                        }
                        if round % 5 == 2 {
                            seg.barrier();
                        }
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        let (_, mut three) = group(3, 4096);
        let big = vec![0u8; PAIR_REDUCE_MIN];
        assert!(!three[0].pair_reduce(0, &big, &mut big.clone(), 1, true, &mut added));
    }
}
