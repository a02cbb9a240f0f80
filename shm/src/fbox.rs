//! Fast boxes: one single-producer/single-consumer ring per (sender, receiver) pair, in the
//! sender's segment, for small messages.
//!
//! Layout at `base`:
//!
//! | offset | field | written by | read by | ordering |
//! |---|---|---|---|---|
//! | 0 | `consumed`: bytes the receiver has finished with (free-running) | receiver (Release, once per poll batch) | sender, only when the ring looks full (Acquire) | Release/Acquire |
//! | 64.. | ring of `size` bytes (a power of two) | sender | receiver | see entries |
//!
//! Each entry starts 16-byte aligned with an 8-byte header word
//! `len (bits 0-31) | tag (bits 32-47) | seq (bits 48-63)`, followed by `len` payload bytes.
//! The sender writes the payload, zeroes the header of the *next* entry position, then
//! publishes the header with one Release store. The receiver loads the header with Acquire and
//! accepts it only if `tag != 0` and `seq` is the 16-bit sequence it expects next, so neither
//! a zeroed slot nor stale bytes of an earlier lap can pass for a new entry. Tag [`SKIP`] marks
//! the unused tail of the ring: the next entry starts at offset 0 of the next lap.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::mem::SharedMem;

/// Offset of the ring from the fast box base.
pub const RING: usize = 64;
/// Entry alignment.
pub const ALIGN: usize = 16;
/// Tag of the wrap marker.
pub const SKIP: u16 = 0xffff;

/// Bytes a fast box with a ring of `size` occupies.
pub const fn footprint(size: usize) -> usize {
    RING + size
}

/// Largest payload one entry may carry in a ring of `size` bytes: a quarter of the ring, so a
/// wrap never wastes more than that.
pub const fn max_payload(size: usize) -> usize {
    size / 4 - 8
}

const fn entry_len(len: usize) -> usize {
    (8 + len + ALIGN - 1) & !(ALIGN - 1)
}

fn header(len: usize, tag: u16, seq: u16) -> u64 {
    len as u64 | (u64::from(tag) << 32) | (u64::from(seq) << 48)
}

/// The ring has no room for the entry now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

/// The sender's end.
#[derive(Debug)]
pub struct Producer {
    base: usize,
    size: usize,
    written: u64,
    consumed_cache: u64,
    seq: u16,
}

impl Producer {
    /// The producer of a (zeroed) fast box at `base` with a ring of `size` bytes.
    pub fn new(base: usize, size: usize) -> Self {
        debug_assert!(size.is_power_of_two() && size >= 256);
        Producer {
            base,
            size,
            written: 0,
            consumed_cache: 0,
            seq: 0,
        }
    }

    /// Whether the ring has room up to byte `upto` (free-running), asking the receiver's
    /// `consumed` only when the cached value says no.
    #[inline]
    fn room(&mut self, mem: &impl SharedMem, upto: u64) -> bool {
        // `upto` includes the 8 bytes of the next header we zero.
        upto - self.consumed_cache <= self.size as u64 || self.refresh_room(mem, upto)
    }

    #[cold]
    fn refresh_room(&mut self, mem: &impl SharedMem, upto: u64) -> bool {
        self.consumed_cache = mem.load(self.base, Acquire);
        upto - self.consumed_cache <= self.size as u64
    }

    /// Appends an entry whose payload is the concatenation of `parts`, with tag `tag` (1..=0xfffe).
    #[inline]
    pub fn push(&mut self, mem: &impl SharedMem, tag: u16, parts: &[&[u8]]) -> Result<(), NoRoom> {
        debug_assert!(tag != 0 && tag != SKIP);
        let len: usize = parts.iter().map(|p| p.len()).sum();
        if len > max_payload(self.size) {
            return Err(NoRoom);
        }
        let need = entry_len(len);
        let off = (self.written as usize) & (self.size - 1);
        if need > self.size - off {
            return self.push_wrapping(mem, tag, parts, len);
        }
        if !self.room(mem, self.written + need as u64 + 8) {
            return Err(NoRoom);
        }
        self.write_entry(mem, off, tag, parts, len);
        Ok(())
    }

    /// Writes the entry at `off` (room checked) and publishes it.
    #[inline]
    fn write_entry(
        &mut self,
        mem: &impl SharedMem,
        off: usize,
        tag: u16,
        parts: &[&[u8]],
        len: usize,
    ) {
        let ring = self.base + RING;
        let mut at = ring + off + 8;
        for p in parts {
            mem.write_bytes(at, p);
            at += p.len();
        }
        let need = entry_len(len);
        let next = (off + need) & (self.size - 1);
        mem.store(ring + next, 0, Relaxed);
        mem.store(ring + off, header(len, tag, self.seq), Release);
        self.seq = self.seq.wrapping_add(1);
        self.written += need as u64;
    }

    /// [`Producer::push`] when the entry does not fit before the end of the ring: a wrap
    /// marker fills the tail and the entry starts the next lap.
    #[cold]
    fn push_wrapping(
        &mut self,
        mem: &impl SharedMem,
        tag: u16,
        parts: &[&[u8]],
        len: usize,
    ) -> Result<(), NoRoom> {
        let off = (self.written as usize) & (self.size - 1);
        let tail_left = (self.size - off) as u64;
        if !self.room(mem, self.written + tail_left + entry_len(len) as u64 + 8) {
            return Err(NoRoom);
        }
        let ring = self.base + RING;
        // Zero the header at the start of the next lap before publishing the marker.
        mem.store(ring, 0, Relaxed);
        mem.store(ring + off, header(0, SKIP, self.seq), Release);
        self.seq = self.seq.wrapping_add(1);
        self.written += tail_left;
        self.write_entry(mem, 0, tag, parts, len);
        Ok(())
    }
}

/// One entry found by the receiver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    /// The sender's tag.
    pub tag: u16,
    /// Offset of the payload in the memory.
    pub offset: usize,
    /// Payload length.
    pub len: usize,
}

/// A header the receiver cannot accept: the peer wrote garbage.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Corrupt {
    /// The raw header word.
    pub header: u64,
}

/// The receiver's end.
#[derive(Debug)]
pub struct Consumer {
    base: usize,
    size: usize,
    read: u64,
    published: u64,
    seq: u16,
    /// Offset of the next header word (`base + RING + read mod size`), kept so the idle poll
    /// computes nothing before its load.
    next: usize,
}

impl Consumer {
    /// The consumer of the fast box at `base`.
    pub fn new(base: usize, size: usize) -> Self {
        Consumer {
            base,
            size,
            read: 0,
            published: 0,
            seq: 0,
            next: base + RING,
        }
    }

    fn advance(&mut self, by: u64) {
        self.seq = self.seq.wrapping_add(1);
        self.read += by;
        self.next = self.base + RING + ((self.read as usize) & (self.size - 1));
    }

    /// The next entry, if published. Call [`Consumer::consume`] when done with its bytes.
    #[inline]
    pub fn peek(&mut self, mem: &impl SharedMem) -> Result<Option<Entry>, Corrupt> {
        loop {
            let h = mem.load(self.next, Acquire);
            let (len, tag, seq) = (
                (h & 0xffff_ffff) as usize,
                (h >> 32) as u16,
                (h >> 48) as u16,
            );
            if tag == 0 || seq != self.seq {
                return Ok(None);
            }
            let off = self.next - self.base - RING;
            if tag == SKIP {
                self.advance((self.size - off) as u64);
                continue;
            }
            if len > max_payload(self.size) || off + entry_len(len) > self.size {
                return Err(Corrupt { header: h });
            }
            return Ok(Some(Entry {
                tag,
                offset: self.next + 8,
                len,
            }));
        }
    }

    /// Marks the entry returned by the last `peek` as consumed (locally).
    #[inline]
    pub fn consume(&mut self, entry: Entry) {
        self.advance(entry_len(entry.len) as u64);
    }

    /// Whether the next header starts a cache line the consumer has not read yet.
    #[inline]
    pub fn next_is_new_line(&self) -> bool {
        self.read & 63 == 0
    }

    /// Publishes how far the receiver has read, freeing space for the sender. Called once per
    /// poll batch rather than per entry, to keep the shared cache line quiet.
    #[inline]
    pub fn publish(&mut self, mem: &impl SharedMem) {
        if self.published != self.read {
            mem.store(self.base, self.read, Release);
            self.published = self.read;
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mem::Mapping;

    fn mapping(size: usize) -> Mapping {
        crate::mem::test_mapping("fbox", size)
    }

    #[test]
    fn entries_of_every_size_survive_many_wraps() {
        let size = 1024;
        let m = mapping(footprint(size));
        let mut p = Producer::new(0, size);
        let mut c = Consumer::new(0, size);
        let mut expect = std::collections::VecDeque::new();
        let mut n = 0u32;
        for round in 0..5000usize {
            let len = (round * 37) % (max_payload(size) + 1);
            let payload: Vec<u8> = (0..len).map(|i| (i + round) as u8).collect();
            loop {
                match p.push(&m, 7, &[&payload[..len / 2], &payload[len / 2..]]) {
                    Ok(()) => break,
                    Err(NoRoom) => {
                        let e = c.peek(&m).unwrap().expect("full ring must have an entry");
                        let want: Vec<u8> = expect.pop_front().unwrap();
                        assert_eq!(m.bytes(e.offset, e.len), &want[..]);
                        c.consume(e);
                        c.publish(&m);
                        n += 1;
                    }
                }
            }
            expect.push_back(payload);
        }
        while let Some(e) = c.peek(&m).unwrap() {
            assert_eq!(m.bytes(e.offset, e.len), &expect.pop_front().unwrap()[..]);
            c.consume(e);
            n += 1;
        }
        assert!(expect.is_empty() && n == 5000);
    }

    #[test]
    fn stale_and_garbage_headers_are_not_taken_as_new() {
        let size = 256;
        let m = mapping(footprint(size));
        let mut c = Consumer::new(0, size);
        // A plausible header with the wrong sequence number: ignored.
        m.store(RING, 8 | (1 << 32) | (5 << 48), Release);
        assert_eq!(c.peek(&m), Ok(None));
        // The right sequence but an impossible length: reported, not trusted.
        m.store(RING, 10_000 | (1 << 32), Release);
        assert!(c.peek(&m).is_err());
    }

    #[test]
    fn oversized_payloads_are_refused() {
        let m = mapping(footprint(256));
        let mut p = Producer::new(0, 256);
        assert_eq!(p.push(&m, 1, &[&[0u8; 57]]), Err(NoRoom));
        assert_eq!(p.push(&m, 1, &[&[0u8; 56]]), Ok(()));
    }
}
