//! The bodies of the shm transport's cargo-fuzz targets (`fuzz/`, one submodule per target)
//! and their seed corpora: what a rank reads from its local peers.
//!
//! * [`segment_header`]: a peer's segment header ([`crate::segment::read_header`]) and what the
//!   transport then reads through it: queue items ([`crate::segment::FragRef::decode`]),
//!   fragment header words ([`crate::segment::decode_frag_word`]), a fast box's first header;
//! * [`card`]: the card a peer publishes in the modex ([`crate::btl::ShmCard::decode`]).
//!
//! Each submodule's `fuzz_one` holds what its target checks, so that the unit tests replay the
//! committed corpus `fuzz/corpus/<target>/` without cargo-fuzz; `seed_corpus` generates that
//! corpus. Segments are fuzzed through [`SparseMem`], an in-memory [`SharedMem`] that checks
//! every access as a real mapping does. This module owns those checks; it must never map a
//! file, hold state between calls, or panic except on a violated property.

pub mod card;
pub mod segment_header;

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::Ordering;

use crate::mem::SharedMem;

/// Shared memory of any declared size (a peer's segment file may claim gigabytes) of which only
/// the words written are stored, zero elsewhere. Every access is bounds- and alignment-checked
/// as [`crate::mem::Mapping`] checks it (with overflow-checked arithmetic), so an access that
/// would panic in a rank panics here too.
pub struct SparseMem {
    size: usize,
    words: RefCell<HashMap<usize, u64>>,
}

impl SparseMem {
    /// Zeroed memory of `size` bytes.
    pub fn new(size: usize) -> SparseMem {
        SparseMem {
            size,
            words: RefCell::new(HashMap::new()),
        }
    }

    /// Panics unless `len` bytes at `off` lie inside the memory (as `Mapping::bytes` does).
    pub fn check_view(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.size),
            "shm view {off}+{len} outside a {}-byte mapping",
            self.size
        );
    }

    fn check_word(&self, off: usize) {
        assert!(
            off.is_multiple_of(8) && off.checked_add(8).is_some_and(|end| end <= self.size),
            "shm word access at {off} outside a {}-byte mapping (or not 8-aligned)",
            self.size
        );
    }

    fn word(&self, off: usize) -> u64 {
        self.words.borrow().get(&off).copied().unwrap_or(0)
    }

    fn set(&self, off: usize, value: u64) {
        self.words.borrow_mut().insert(off, value);
    }

    fn byte(&self, at: usize) -> u8 {
        (self.word(at & !7) >> ((at & 7) * 8)) as u8
    }

    fn set_byte(&self, at: usize, b: u8) {
        let shift = (at & 7) * 8;
        let w = self.word(at & !7);
        self.set(at & !7, (w & !(0xff << shift)) | (u64::from(b) << shift));
    }
}

impl SharedMem for SparseMem {
    fn size(&self) -> usize {
        self.size
    }
    fn load(&self, off: usize, _: Ordering) -> u64 {
        self.check_word(off);
        self.word(off)
    }
    fn store(&self, off: usize, value: u64, _: Ordering) {
        self.check_word(off);
        self.set(off, value);
    }
    fn compare_exchange(
        &self,
        off: usize,
        current: u64,
        new: u64,
        _: Ordering,
        _: Ordering,
    ) -> Result<u64, u64> {
        self.check_word(off);
        let now = self.word(off);
        if now == current {
            self.set(off, new);
            Ok(now)
        } else {
            Err(now)
        }
    }
    fn fetch_add(&self, off: usize, value: u64, _: Ordering) -> u64 {
        self.check_word(off);
        let now = self.word(off);
        self.set(off, now.wrapping_add(value));
        now
    }
    fn write_bytes(&self, off: usize, src: &[u8]) {
        self.check_view(off, src.len());
        for (i, &b) in src.iter().enumerate() {
            self.set_byte(off + i, b);
        }
    }
    fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        self.check_view(off, dst.len());
        for (i, b) in dst.iter_mut().enumerate() {
            *b = self.byte(off + i);
        }
    }
}

/// The committed corpus directory of `target` (`fuzz/corpus/<target>` of the repository).
#[cfg(test)]
fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::atomic::Ordering::Relaxed;

    #[test]
    fn sparse_memory_behaves_as_memory_and_checks_like_a_mapping() {
        let m = SparseMem::new(1 << 40);
        m.store(8, 0x0102_0304_0506_0708, Relaxed);
        assert_eq!(m.load(8, Relaxed), 0x0102_0304_0506_0708);
        m.write_bytes(13, &[0xaa, 0xbb, 0xcc, 0xdd]);
        let mut b = [0u8; 6];
        m.read_bytes(12, &mut b);
        assert_eq!(b, [0x04, 0xaa, 0xbb, 0xcc, 0xdd, 0]);
        assert_eq!(m.fetch_add(24, 5, Relaxed), 0);
        assert_eq!(m.compare_exchange(24, 5, 7, Relaxed, Relaxed), Ok(5));
        assert_eq!(m.compare_exchange(24, 5, 9, Relaxed, Relaxed), Err(7));
        let small = SparseMem::new(64);
        for bad in [60usize, 12, usize::MAX - 3] {
            let r = catch_unwind(AssertUnwindSafe(|| small.load(bad, Relaxed)));
            assert!(r.is_err(), "a load at {bad} passed");
        }
        assert!(catch_unwind(AssertUnwindSafe(|| small.check_view(60, 5))).is_err());
        assert!(catch_unwind(AssertUnwindSafe(|| small.check_view(usize::MAX, 2))).is_err());
        small.check_view(60, 4);
    }
}
