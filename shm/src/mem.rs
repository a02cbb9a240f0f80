//! Shared memory as the ring and queue algorithms see it.
//!
//! The algorithms in [`crate::fifo`] and [`crate::fbox`] are written against [`SharedMem`]: word
//! atomics at 8-aligned offsets plus plain byte copies. Two implementations exist:
//! * [`Mapping`], a real `mmap` of a segment file: the only place in Kestrel that dereferences
//!   shared-memory pointers. Every access is bounds- and alignment-checked, so the safe methods
//!   cannot touch memory outside the mapping whatever offsets a confused peer publishes.
//! * under `cfg(loom)`, a model whose words are loom atomics, so that loom explores every
//!   interleaving of the same algorithm code with threads.
//!
//! Memory-ordering contract for the algorithms: payload bytes are written with
//! [`SharedMem::write_bytes`] (plain stores) *before* a `Release` store of the word that
//! publishes them, and read with [`SharedMem::read_bytes`] / [`SharedMem::bytes`] only *after*
//! an `Acquire` load of that word observed the publication.

use std::sync::atomic::Ordering;

/// Word atomics and byte copies at offsets into a shared region.
pub trait SharedMem {
    /// Size of the region in bytes.
    fn size(&self) -> usize;
    /// Atomic load of the u64 at `off` (8-aligned).
    fn load(&self, off: usize, order: Ordering) -> u64;
    /// Atomic store of the u64 at `off`.
    fn store(&self, off: usize, value: u64, order: Ordering);
    /// Atomic compare-exchange of the u64 at `off`.
    fn compare_exchange(
        &self,
        off: usize,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64>;
    /// Atomic add, returning the previous value.
    fn fetch_add(&self, off: usize, value: u64, order: Ordering) -> u64;
    /// Copies `src` to `off` with plain stores.
    fn write_bytes(&self, off: usize, src: &[u8]);
    /// Copies `dst.len()` bytes from `off` with plain loads.
    fn read_bytes(&self, off: usize, dst: &mut [u8]);
}

/// A shared memory mapping (real `mmap`).
pub struct Mapping {
    base: *mut u8,
    len: usize,
}

// SAFETY: the mapping is plain memory shared with other processes; every access goes through
// atomics or through copies whose races are excluded by the publication protocol documented
// above, exactly as between threads. Moving or sharing the handle across threads is therefore
// as safe as sharing it across processes.
unsafe impl Send for Mapping {}
// SAFETY: see `Send`.
unsafe impl Sync for Mapping {}

impl std::fmt::Debug for Mapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Mapping({:p}, {} bytes)", self.base, self.len)
    }
}

/// A private mapping of `size` zeroed bytes for unit tests: a file made and unlinked at
/// once under the temporary directory, named by `tag`, the process and the thread (tests
/// run in parallel threads).
#[cfg(test)]
pub fn test_mapping(tag: &str, size: usize) -> Mapping {
    let path = std::env::temp_dir().join(format!(
        "kestrel-{tag}-test-{}-{:?}-{size}",
        std::process::id(),
        std::thread::current().id()
    ));
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .unwrap();
    std::fs::remove_file(&path).unwrap();
    f.set_len(size as u64).unwrap();
    Mapping::map(&f, size).unwrap()
}

impl Mapping {
    /// Panics unless `off..off + len` lies inside the mapping (`what`: the access, for the
    /// message).
    fn check_range(&self, what: &str, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "shm {what} {off}+{len} outside a {}-byte mapping",
            self.len
        );
    }

    /// Copies `src` to `off` with non-temporal stores: the destination's cache lines are
    /// written without being read first, so a line that another core holds (a reader of the
    /// last lap of a ring) is invalidated there instead of being pulled back to be
    /// overwritten. Followed by a store fence, so a Release store after it publishes the
    /// bytes. x86-64 only (SSE2, part of the baseline); elsewhere a plain copy.
    pub fn write_bytes_streaming(&self, off: usize, src: &[u8]) {
        self.check_range("write", off, src.len());
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
            let dst = self.base.wrapping_add(off);
            // The destination's first 16-byte boundary; plain stores before it and after the
            // last whole 16 bytes.
            let head = dst.align_offset(16).min(src.len());
            let body = (src.len() - head) / 16 * 16;
            // SAFETY: `dst..dst + src.len()` is inside the mapping (asserted above) and does
            // not overlap `src` (a Rust slice, never a view of this mapping); the streaming
            // stores target 16-byte aligned addresses inside that range, and the loads read
            // `src` within its bounds (unaligned loads).
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), dst, head);
                let mut i = head;
                while i < head + body {
                    let v = _mm_loadu_si128(src.as_ptr().add(i) as *const __m128i);
                    _mm_stream_si128(dst.add(i) as *mut __m128i, v);
                    i += 16;
                }
                std::ptr::copy_nonoverlapping(src.as_ptr().add(i), dst.add(i), src.len() - i);
                _mm_sfence();
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        self.write_bytes(off, src);
    }

    /// Maps `len` bytes of `file` read-write and shared.
    pub fn map(file: &std::fs::File, len: usize) -> std::io::Result<Mapping> {
        use std::os::fd::AsRawFd;
        if len == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "empty mapping",
            ));
        }
        // SAFETY: a fresh shared mapping of an open file; the kernel picks the address, so it
        // aliases no Rust object. The file's length was checked by the caller to be >= len.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                file.as_raw_fd(),
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(std::io::Error::last_os_error());
        }
        Ok(Mapping {
            base: ptr.cast(),
            len,
        })
    }

    /// Address of the first byte (for diagnostics and single-copy descriptors).
    pub fn base_addr(&self) -> usize {
        self.base as usize
    }

    #[inline]
    fn word(&self, off: usize) -> &std::sync::atomic::AtomicU64 {
        assert!(
            off.is_multiple_of(8) && off + 8 <= self.len,
            "shm word access at {off} outside a {}-byte mapping",
            self.len
        );
        // SAFETY: in bounds and 8-aligned (mmap returns page-aligned memory), and AtomicU64
        // has the size and alignment of u64; all concurrent access to this word is atomic.
        unsafe { &*(self.base.add(off) as *const std::sync::atomic::AtomicU64) }
    }

    /// A view of `len` bytes at `off`, valid while the publication protocol keeps writers away
    /// from them (the receiver has not yet released the entry or fragment).
    #[inline]
    pub fn bytes(&self, off: usize, len: usize) -> &[u8] {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len),
            "shm view {off}+{len} outside a {}-byte mapping",
            self.len
        );
        // SAFETY: in bounds; by the protocol no process writes these bytes until the reader
        // publishes that it is done with them, which happens after this borrow ends.
        unsafe { std::slice::from_raw_parts(self.base.add(off), len) }
    }
}

impl Mapping {
    /// Sleeps until the word at `off` is woken by [`Mapping::futex_wake`] (in any process
    /// mapping the same file), its low 32 bits differ from `seen`, or `timeout` passes. The
    /// kernel compares the word with `seen` atomically with going to sleep, so a store and
    /// wake between the caller's last look and this call is never missed.
    pub fn futex_wait(&self, off: usize, seen: u32, timeout: std::time::Duration) {
        let word = self.word(off);
        let ts = libc::timespec {
            tv_sec: timeout.as_secs() as libc::time_t,
            tv_nsec: timeout.subsec_nanos() as libc::c_long,
        };
        // SAFETY: the address is an in-bounds, 8-aligned word of this shared mapping (checked
        // by `word`), whose low 32 bits on this little-endian target are the futex word; the
        // kernel only reads it. Not FUTEX_PRIVATE: other processes wake it through their
        // own mappings of the same file. Any result (woken, value changed, timed out,
        // interrupted) sends the caller back to look at the word again.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr() as *const u32,
                libc::FUTEX_WAIT,
                seen,
                &ts as *const libc::timespec,
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }

    /// Wakes every process sleeping in [`Mapping::futex_wait`] on the word at `off`.
    pub fn futex_wake(&self, off: usize) {
        let word = self.word(off);
        // SAFETY: as in `futex_wait`; FUTEX_WAKE only uses the address as a key.
        unsafe {
            libc::syscall(
                libc::SYS_futex,
                word.as_ptr() as *const u32,
                libc::FUTEX_WAKE,
                i32::MAX,
                std::ptr::null::<libc::timespec>(),
                std::ptr::null::<u32>(),
                0u32,
            );
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: base/len are exactly what mmap returned; no borrow of the mapping outlives
        // `self` because all views borrow `self`.
        unsafe {
            libc::munmap(self.base.cast(), self.len);
        }
    }
}

impl SharedMem for Mapping {
    fn size(&self) -> usize {
        self.len
    }
    #[inline]
    fn load(&self, off: usize, order: Ordering) -> u64 {
        self.word(off).load(order)
    }
    #[inline]
    fn store(&self, off: usize, value: u64, order: Ordering) {
        self.word(off).store(value, order)
    }
    #[inline]
    fn compare_exchange(
        &self,
        off: usize,
        current: u64,
        new: u64,
        success: Ordering,
        failure: Ordering,
    ) -> Result<u64, u64> {
        self.word(off)
            .compare_exchange(current, new, success, failure)
    }
    #[inline]
    fn fetch_add(&self, off: usize, value: u64, order: Ordering) -> u64 {
        self.word(off).fetch_add(value, order)
    }
    #[inline]
    fn write_bytes(&self, off: usize, src: &[u8]) {
        self.check_range("write", off, src.len());
        let dst = self.base.wrapping_add(off);
        // SAFETY: in bounds; `src` is a Rust slice so it cannot overlap the destination unless
        // it is itself a view of this mapping, which callers never pass. The common lengths
        // (a 16-byte match header, 8- and 4-byte payloads) are copies of a constant size, which
        // compile to a few moves instead of a call to `memcpy` (about a tenth of a fast-box
        // send's instructions).
        unsafe {
            match src.len() {
                16 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 16),
                8 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 8),
                4 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 4),
                n => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n),
            }
        }
    }
    #[inline]
    fn read_bytes(&self, off: usize, dst: &mut [u8]) {
        dst.copy_from_slice(self.bytes(off, dst.len()));
    }
}

/// A loom model of shared memory: every byte lives in an atomic word so that loom tracks it.
#[cfg(loom)]
pub mod model {
    use super::SharedMem;
    use loom::sync::atomic::{AtomicU64, Ordering};

    /// `size` bytes of modelled shared memory.
    pub struct ModelMem {
        words: Vec<AtomicU64>,
    }

    impl ModelMem {
        /// Zeroed memory of `size` bytes (a multiple of 8).
        pub fn new(size: usize) -> Self {
            ModelMem {
                words: (0..size / 8).map(|_| AtomicU64::new(0)).collect(),
            }
        }
    }

    impl SharedMem for ModelMem {
        fn size(&self) -> usize {
            self.words.len() * 8
        }
        fn load(&self, off: usize, order: Ordering) -> u64 {
            self.words[off / 8].load(order)
        }
        fn store(&self, off: usize, value: u64, order: Ordering) {
            self.words[off / 8].store(value, order)
        }
        fn compare_exchange(
            &self,
            off: usize,
            c: u64,
            n: u64,
            s: Ordering,
            f: Ordering,
        ) -> Result<u64, u64> {
            self.words[off / 8].compare_exchange(c, n, s, f)
        }
        fn fetch_add(&self, off: usize, v: u64, o: Ordering) -> u64 {
            self.words[off / 8].fetch_add(v, o)
        }
        // Plain byte copies are modelled as relaxed word accesses: loom then reports any read
        // that is not ordered after the write by the protocol's release/acquire pair.
        fn write_bytes(&self, off: usize, src: &[u8]) {
            // One load and one store per touched word keeps loom's state space small.
            let mut i = 0;
            while i < src.len() {
                let word = (off + i) / 8;
                let w = &self.words[word];
                let mut value = w.load(Ordering::Relaxed);
                while i < src.len() && (off + i) / 8 == word {
                    let shift = ((off + i) % 8) * 8;
                    value = (value & !(0xff << shift)) | (u64::from(src[i]) << shift);
                    i += 1;
                }
                w.store(value, Ordering::Relaxed);
            }
        }
        fn read_bytes(&self, off: usize, dst: &mut [u8]) {
            let mut i = 0;
            while i < dst.len() {
                let word = (off + i) / 8;
                let value = self.words[word].load(Ordering::Relaxed);
                while i < dst.len() && (off + i) / 8 == word {
                    dst[i] = (value >> (((off + i) % 8) * 8)) as u8;
                    i += 1;
                }
            }
        }
    }
}
