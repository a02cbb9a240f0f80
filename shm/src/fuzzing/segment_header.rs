//! The `shm_segment_header` fuzz target: a peer's segment as a rank reads it once it has
//! mapped the file ([`crate::segment`]).
//!
//! An input is: the node's size minus one (byte 0), the receiving rank's local rank (byte 1,
//! modulo the size), the segment file's size (bytes 2-9, little-endian), the 32 header words
//! (bytes 10-265, little-endian, zero when the input is shorter) and then 64-bit words that the
//! receiver finds in its queue, in fragment headers (a fast-box set-up's payload word is the
//! slot it names) and in a fast box, in that order.
//!
//! Checked: [`read_header`] never panics and its error formats; a header it accepts describes
//! a segment whose regions lie in order inside the file, with every word the transport
//! accesses atomically 8-aligned (every fragment header, queue slot and fast box); written
//! back with [`write_header`] it reads back the same. A queue item [`FragRef::decode`] accepts
//! names a local rank and re-encodes to itself; a fragment word [`decode_frag_word`] accepts
//! is within the fragment size and re-encodes to itself. Then the receive path runs on a
//! [`SparseMem`] as the transport runs it on a mapping: the fragment's header word, its bytes,
//! the first header of the fast box it may set up, the return of the fragment through the
//! owner's queue; any access outside the segment or misaligned panics, as it would in a rank.

use std::sync::atomic::Ordering::Relaxed;

use super::SparseMem;
use crate::mem::SharedMem;
use crate::segment::{
    decode_frag_word, frag_word, kind, read_header, write_header, FragRef, Geometry, PeerHeader,
    FBOX_AVAILABLE, FRAG_HEADER, HEADER,
};
use crate::{fbox, fifo};

/// The target's name (its corpus is `fuzz/corpus/shm_segment_header`).
pub const TARGET: &str = "shm_segment_header";

/// Bytes before the header words in an input.
const PREFIX: usize = 10;

/// Largest receive queue written back by the round trip: `write_header` initialises every
/// slot, and a queue of 2^24 slots would make one input take seconds.
const ROUND_TRIP_MAX_SLOTS: usize = 1 << 12;

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let byte = |i: usize| data.get(i).copied().unwrap_or(0);
    let word_at = |at: usize| {
        let mut w = [0u8; 8];
        for (i, b) in w.iter_mut().enumerate() {
            *b = byte(at + i);
        }
        u64::from_le_bytes(w)
    };
    let local_size = usize::from(byte(0)) + 1;
    // Byte 1 (the receiver's local rank) located its fast box before boxes came from a pool
    // named by the set-up fragment; it stays in the format so that old inputs still parse.
    let _me = usize::from(byte(1)) % local_size;
    let size = usize::try_from(word_at(2)).unwrap_or(usize::MAX);
    let mem = SparseMem::new(size);
    let header: Vec<u64> = (0..HEADER / 8).map(|k| word_at(PREFIX + 8 * k)).collect();
    for (k, &w) in header.iter().enumerate() {
        // A file shorter than the header holds only what fits (read_header must refuse it).
        if (k + 1) * 8 <= size {
            mem.store(8 * k, w, Relaxed);
        }
    }
    let items: Vec<u64> = data
        .get(PREFIX + HEADER..)
        .unwrap_or(&[])
        .chunks(8)
        .map(|c| {
            let mut w = [0u8; 8];
            w[..c.len()].copy_from_slice(c);
            u64::from_le_bytes(w)
        })
        .collect();

    let peer = match read_header(&mem, local_size) {
        Ok(h) => Some(h),
        Err(e) => {
            assert!(!e.to_string().is_empty());
            None
        }
    };
    if let Some(h) = &peer {
        check_layout(h, &mem, local_size);
        round_trip(h, &header, size, local_size);
    }
    let frag_size = peer.map_or(4096, |h| h.layout.geometry.frag_size);
    for &item in &items {
        if let Some(r) = FragRef::decode(item, local_size) {
            assert!(r.owner < local_size);
            assert_eq!(
                r.encode(),
                item,
                "a queue item decodes to another reference"
            );
        }
        if let Some((len, am, k)) = decode_frag_word(item, frag_size) {
            assert!(len <= frag_size && (k == kind::DATA || k == kind::FBOX_SETUP));
            assert_eq!(
                frag_word(len, am, k),
                item,
                "a fragment word decodes to another"
            );
        }
    }
    if let Some(h) = &peer {
        receive(h, &mem, local_size, &items);
    }
}

/// The accepted layout is ordered, inside the file, and aligned where words are atomic.
fn check_layout(h: &PeerHeader, mem: &SparseMem, local_size: usize) {
    let l = &h.layout;
    let g = &l.geometry;
    assert!(h.owner < local_size && g.local_size == local_size);
    assert!(l.total <= mem.size(), "the layout runs past the file");
    assert!(HEADER <= l.fifo_off);
    assert!(l.fifo_off + fifo::footprint(g.fifo_capacity) <= l.fbox_off);
    // Which fast boxes a receiver uses is the receive path's business (`receive` checks each
    // lies in this region).
    assert!(l.fbox_off <= l.frag_off);
    assert!(l.frag(g.frag_count) <= l.total);
    assert!(
        l.fifo_off.is_multiple_of(8)
            && l.fbox_off.is_multiple_of(8)
            && fbox::footprint(g.fbox_size).is_multiple_of(8)
            && l.frag_off.is_multiple_of(8),
        "a region of {l:?} is not 8-aligned"
    );
    assert!(
        (FRAG_HEADER + g.frag_size).is_multiple_of(8),
        "fragments of {} bytes: the header word of every other fragment is misaligned",
        g.frag_size
    );
}

/// Written back with `write_header`, the header reads back the same.
fn round_trip(h: &PeerHeader, words: &[u64], size: usize, local_size: usize) {
    if h.layout.geometry.fifo_capacity > ROUND_TRIP_MAX_SLOTS {
        return;
    }
    let fresh = SparseMem::new(size);
    let fbox_max = usize::try_from(words[FBOX_AVAILABLE / 8]).unwrap_or(usize::MAX);
    write_header(&fresh, &h.layout, h.owner, h.pid, h.probe_addr, fbox_max);
    assert_eq!(
        read_header(&fresh, local_size),
        Ok(*h),
        "the header reads back differently"
    );
    for (k, &w) in words.iter().enumerate().take(14) {
        // The pid word is the one `read_header` does not refuse when it is out of range (it
        // reads a pid above u32::MAX as 0), so it round-trips only when in range.
        if k == 12 && u32::try_from(w).is_err() {
            continue;
        }
        assert_eq!(
            fresh.load(8 * k, Relaxed),
            w,
            "header word {k} is written differently"
        );
    }
}

/// The transport's receive path (`ShmBtl::drain_queue`) through a peer's segment: what it
/// reads and writes, in order. It mirrors that code, so a change of the segment format (how a
/// fast box is found, say) changes both.
fn receive(h: &PeerHeader, mem: &SparseMem, local_size: usize, items: &[u64]) {
    let l = &h.layout;
    let g = &l.geometry;
    let mut words = items.iter().copied();
    while let Some(item) = words.next() {
        let Some(r) = FragRef::decode(item, local_size) else {
            continue;
        };
        if r.returning || r.owner != h.owner || r.index >= g.frag_count {
            continue;
        }
        let off = l.frag(r.index);
        mem.store(off, words.next().unwrap_or(0), Relaxed);
        match decode_frag_word(mem.load(off, Relaxed), g.frag_size) {
            Some((len, _, kind::DATA)) => mem.check_view(off + FRAG_HEADER, len),
            Some((8, _, kind::FBOX_SETUP)) => {
                // The set-up names the slot of the owner's pool that carries its traffic to
                // this rank; the receiver takes it only below the header's slot count.
                mem.store(off + FRAG_HEADER, words.next().unwrap_or(0), Relaxed);
                let slot = mem.load(off + FRAG_HEADER, Relaxed);
                if slot >= g.fbox_slots as u64 {
                    continue;
                }
                let base = l.fbox(slot as usize);
                assert!(
                    l.fbox_off <= base && base + fbox::footprint(g.fbox_size) <= l.frag_off,
                    "the fast box at {base} is outside the fast-box region of {l:?}"
                );
                mem.store(base + fbox::RING, words.next().unwrap_or(0), Relaxed);
                let mut cons = fbox::Consumer::new(base, g.fbox_size);
                if let Ok(Some(entry)) = cons.peek(mem) {
                    assert!(entry.len <= fbox::max_payload(g.fbox_size));
                    assert!(
                        entry.offset >= base + fbox::RING
                            && entry.offset + entry.len <= base + fbox::footprint(g.fbox_size),
                        "a fast-box entry outside its ring"
                    );
                    mem.check_view(entry.offset, entry.len);
                    cons.consume(entry);
                }
                cons.publish(mem);
            }
            Some(_) | None => {}
        }
        let back = FragRef {
            returning: true,
            ..r
        }
        .encode();
        let _ = fifo::push(mem, l.fifo_off, g.fifo_capacity, back);
    }
}

/// The geometry the transport gives a node of `local_size` ranks, with these sizes (built from
/// the transport's own, so that a field it adds keeps its default here).
fn geometry(
    local_size: usize,
    fifo_capacity: usize,
    fbox_size: usize,
    frag_count: usize,
    frag_size: usize,
) -> Geometry {
    let params = kestrel_transport::params::Params::defaults(&crate::params::specs());
    let mut g = crate::btl::segment_geometry(&params, local_size);
    g.fifo_capacity = fifo_capacity;
    g.fbox_size = fbox_size;
    g.frag_count = frag_count;
    g.frag_size = frag_size;
    g
}

/// A consistent header for `g` as the owner writes it (the seeds' material).
fn input(local_size: usize, me: usize, g: Geometry, items: &[u64]) -> Vec<u8> {
    let layout = g.layout();
    let mem = SparseMem::new(layout.total);
    write_header(&mem, &layout, local_size - 1, 4242, 0x7fff_0000_1000, 32);
    let mut out = vec![(local_size - 1) as u8, me as u8];
    out.extend((layout.total as u64).to_le_bytes());
    for k in 0..HEADER / 8 {
        out.extend(mem.load(8 * k, Relaxed).to_le_bytes());
    }
    for w in items {
        out.extend(w.to_le_bytes());
    }
    out
}

/// The seed corpus: segments as the transport makes them, queues carrying data and fast-box
/// set-ups, and the typical ways a header is wrong, by file name.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let g = geometry(3, 256, 4096, 8, 4096);
    let data_ref = |index| {
        FragRef {
            returning: false,
            owner: 2,
            index,
        }
        .encode()
    };
    let queue = [
        data_ref(0),
        frag_word(100, 9, kind::DATA),
        data_ref(7),
        frag_word(8, 0, kind::FBOX_SETUP),
        // The slot of the owner's fast-box pool it names, then a first entry there: 24 bytes,
        // tag 1, sequence 0.
        1,
        24 | (1 << 32),
        FragRef {
            returning: true,
            owner: 1,
            index: 3,
        }
        .encode(),
        data_ref(8),
        1 << 50,
        frag_word(5000, 1, kind::DATA),
    ];
    let good = input(3, 0, g, &queue);
    let with_word = |k: usize, value: u64| {
        let mut b = good.clone();
        b[PREFIX + 8 * k..PREFIX + 8 * k + 8].copy_from_slice(&value.to_le_bytes());
        b
    };
    let mut short_file = good.clone();
    short_file[2..PREFIX].copy_from_slice(&(HEADER as u64 - 8).to_le_bytes());
    let mut smaller_file = good.clone();
    smaller_file[2..PREFIX].copy_from_slice(&(g.layout().total as u64 - 1).to_le_bytes());
    let one_rank = geometry(1, 64, 256, 4, 4096);
    let wide = geometry(256, 1 << 16, 1 << 16, 64, 32 << 10);
    vec![
        ("three_ranks_with_queue", good.clone()),
        ("one_rank", input(1, 0, one_rank, &[])),
        ("full_node_of_256", input(256, 255, wide, &queue)),
        ("empty", vec![]),
        ("file_shorter_than_header", short_file),
        ("file_shorter_than_layout", smaller_file),
        ("bad_magic", with_word(0, 0)),
        ("other_version", with_word(1, 0xffff)),
        ("owner_out_of_range", with_word(2, 3)),
        ("node_size_differs", with_word(8, 4)),
        ("queue_not_a_power_of_two", with_word(5, 255)),
        ("fast_box_too_small", with_word(7, 128)),
        ("fragments_too_many", with_word(10, (1 << 24) + 1)),
        ("offsets_inconsistent", with_word(9, 12345)),
        ("pid_out_of_range", with_word(12, 1 << 40)),
        (
            "fragment_size_misaligned",
            input(
                2,
                0,
                geometry(2, 64, 256, 2, 4097),
                &[
                    FragRef {
                        returning: false,
                        owner: 1,
                        index: 1,
                    }
                    .encode(),
                    frag_word(8, 1, kind::DATA),
                ],
            ),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_are_accepted_or_refused_as_named() {
        let valid = [
            "three_ranks_with_queue",
            "one_rank",
            "full_node_of_256",
            "pid_out_of_range",
        ];
        for (name, bytes) in seed_corpus() {
            let local_size = usize::from(bytes.first().copied().unwrap_or(0)) + 1;
            let size = bytes
                .get(2..PREFIX)
                .map_or(0, |b| u64::from_le_bytes(b.try_into().unwrap()) as usize);
            let mem = SparseMem::new(size);
            for k in 0..HEADER / 8 {
                let at = PREFIX + 8 * k;
                if let Some(b) = bytes.get(at..at + 8) {
                    if (k + 1) * 8 <= size {
                        mem.store(8 * k, u64::from_le_bytes(b.try_into().unwrap()), Relaxed);
                    }
                }
            }
            let result = read_header(&mem, local_size);
            assert_eq!(result.is_ok(), valid.contains(&name), "{name}: {result:?}");
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[&[0; 8], &[0xff; 8], &[1, 0, 0, 0, 0, 0, 0, 0x80]];
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0x5E6, 160, tokens, fuzz_one);
    }

    /// A fragment size that is not a multiple of 8 put the header word of every other fragment
    /// off its alignment, and the receiver's first load of one panicked (`Mapping::word`):
    /// `read_header` refuses such a size now (seed `fragment_size_misaligned`).
    #[test]
    fn a_misaligned_fragment_size_is_refused() {
        let g = geometry(2, 64, 256, 2, 4097);
        let second = FragRef {
            returning: false,
            owner: 1,
            index: 1,
        };
        fuzz_one(&input(
            2,
            0,
            g,
            &[second.encode(), frag_word(8, 1, kind::DATA)],
        ));
    }
}
