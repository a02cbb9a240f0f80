//! The receive queue of a process: many writers (its local peers), one reader (the owner).
//!
//! A bounded ring of slots in the owner's segment, after Vyukov's bounded queue. Items are
//! 64-bit fragment references (see `crate::segment::FragRef`); the fragments themselves live in
//! their sender's segment and go back to it through the sender's own queue when the reader is
//! done, so buffers are always freed by their owner.
//!
//! Layout at `base` (all fields u64, each on its own cache line where it has its own writer):
//!
//! | offset | field | written by | read by | ordering |
//! |---|---|---|---|---|
//! | 0 | `tail`: next ticket | producers (CAS) | producers | Relaxed (the slot's `seq` orders data) |
//! | 64 + 16·i | slot `seq` | producer: `ticket+1` (Release) publishes `value`; consumer: `pos+capacity` (Release) frees it | consumer (Acquire) / producers (Acquire) | Release/Acquire |
//! | 72 + 16·i | slot `value` | the producer that claimed the slot | consumer, after its Acquire of `seq` | Relaxed |
//!
//! The consumer's position is private to the owner, so it costs no shared cache line.
//! A full ring is [`Full`], never a wait: the sender keeps the item pending and retries.

use std::sync::atomic::Ordering::{Acquire, Relaxed, Release};

use crate::mem::SharedMem;

/// Offset of the first slot from the queue base.
const SLOTS: usize = 64;

/// Bytes a queue of `capacity` slots occupies.
pub const fn footprint(capacity: usize) -> usize {
    SLOTS + capacity * 16
}

/// The ring has no free slot right now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Full;

/// Initializes a queue at `base` (by its owner, before any peer can see it).
pub fn init(mem: &impl SharedMem, base: usize, capacity: usize) {
    debug_assert!(capacity.is_power_of_two());
    mem.store(base, 0, Relaxed);
    for i in 0..capacity {
        mem.store(base + SLOTS + i * 16, i as u64, Relaxed);
        mem.store(base + SLOTS + i * 16 + 8, 0, Relaxed);
    }
}

/// Appends `value` (any producer).
#[inline]
pub fn push(mem: &impl SharedMem, base: usize, capacity: usize, value: u64) -> Result<(), Full> {
    let mask = capacity as u64 - 1;
    let mut ticket = mem.load(base, Relaxed);
    loop {
        let slot = base + SLOTS + ((ticket & mask) as usize) * 16;
        let seq = mem.load(slot, Acquire);
        let diff = seq.wrapping_sub(ticket) as i64;
        if diff == 0 {
            match mem.compare_exchange(base, ticket, ticket + 1, Relaxed, Relaxed) {
                Ok(_) => {
                    mem.store(slot + 8, value, Relaxed);
                    mem.store(slot, ticket + 1, Release);
                    return Ok(());
                }
                Err(now) => ticket = now,
            }
        } else if diff < 0 {
            // The slot still holds an item from the previous lap: the ring is full.
            return Err(Full);
        } else {
            ticket = mem.load(base, Relaxed);
        }
    }
}

/// The owner's end of its queue.
#[derive(Debug)]
pub struct Consumer {
    base: usize,
    capacity: usize,
    pos: u64,
}

impl Consumer {
    /// The reader of the queue at `base`.
    pub fn new(base: usize, capacity: usize) -> Self {
        Consumer {
            base,
            capacity,
            pos: 0,
        }
    }

    /// Offset of the slot the next item goes through.
    #[inline]
    fn next_slot(&self) -> usize {
        self.base + SLOTS + ((self.pos as usize) & (self.capacity - 1)) * 16
    }

    /// Whether the next item is published (one load, no side effects).
    #[inline]
    pub fn ready(&self, mem: &impl SharedMem) -> bool {
        mem.load(self.next_slot(), Acquire) == self.pos + 1
    }

    /// Takes the next item, if one is published.
    #[inline]
    pub fn pop(&mut self, mem: &impl SharedMem) -> Option<u64> {
        let slot = self.next_slot();
        if mem.load(slot, Acquire) != self.pos + 1 {
            return None;
        }
        let value = mem.load(slot + 8, Relaxed);
        mem.store(slot, self.pos + self.capacity as u64, Release);
        self.pos += 1;
        Some(value)
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::mem::Mapping;

    fn mapping(size: usize) -> Mapping {
        crate::mem::test_mapping("fifo", size)
    }

    #[test]
    fn fifo_order_full_and_wrap() {
        let m = mapping(footprint(8));
        init(&m, 0, 8);
        let mut c = Consumer::new(0, 8);
        assert_eq!(c.pop(&m), None);
        for lap in 0..5u64 {
            for i in 0..8 {
                push(&m, 0, 8, lap * 100 + i).unwrap();
            }
            assert_eq!(push(&m, 0, 8, 999), Err(Full));
            for i in 0..8 {
                assert_eq!(c.pop(&m), Some(lap * 100 + i));
            }
            assert_eq!(c.pop(&m), None);
        }
    }

    #[test]
    fn many_producer_threads_lose_and_duplicate_nothing() {
        let m = std::sync::Arc::new(mapping(footprint(64)));
        init(&*m, 0, 64);
        let producers: Vec<_> = (0..3u64)
            .map(|p| {
                let m = m.clone();
                std::thread::spawn(move || {
                    for i in 0..20_000u64 {
                        while push(&*m, 0, 64, (p << 32) | i).is_err() {
                            std::thread::yield_now();
                        }
                    }
                })
            })
            .collect();
        let mut c = Consumer::new(0, 64);
        let mut next = [0u64; 3];
        let mut got = 0;
        while got < 60_000 {
            match c.pop(&*m) {
                Some(v) => {
                    let (p, i) = ((v >> 32) as usize, v & 0xffff_ffff);
                    assert_eq!(i, next[p], "producer {p} out of order");
                    next[p] += 1;
                    got += 1;
                }
                None => std::thread::yield_now(),
            }
        }
        for t in producers {
            t.join().unwrap();
        }
    }
}
