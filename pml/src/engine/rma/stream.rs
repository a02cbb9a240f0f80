//! Copies that bypass the caches, for one-sided transfers too large to stay in them.
//!
//! A put or get that is one of a run of large transfers into consecutive memory (a
//! bandwidth loop, a window filled piece by piece) writes more than the last-level cache
//! holds, so its destination lines are evicted before anyone reads them; ordinary stores
//! then cost a read of every destination line first (to own it) and a write-back later.
//! Non-temporal stores write whole lines straight to memory: on the test machine (8 MiB
//! last-level cache) a 4 MiB copy ran at ~6.2 GB/s with `memcpy` and ~9.8 GB/s streaming,
//! while a copy whose destination is read again soon (the same 1 MiB over and over) ran at
//! ~20 GB/s with `memcpy` and ~10 GB/s streaming. So streaming is chosen only for the part of
//! a run beyond the cache's size ([`StreamRun`]), never for one transfer alone.
//!
//! This module owns the choice and the streaming copy. It never decides whether a range is
//! inside a window: callers pass ranges they checked.

use std::sync::atomic::{AtomicUsize, Ordering};

/// Transfers smaller than this are never streamed: the run bookkeeping stays off the path
/// of small puts and gets, and a short copy gains nothing.
pub const STREAM_MIN: usize = 64 << 10;

/// The run of consecutive large transfers into one destination that a window view has seen:
/// where the last one ended and how many bytes the run holds. Relaxed atomics: the view may
/// be used from several threads (each call is independent), and a lost update only changes
/// which copy a transfer uses.
#[derive(Debug, Default)]
pub struct StreamRun {
    end: AtomicUsize,
    len: AtomicUsize,
}

impl Clone for StreamRun {
    /// A fresh run: a copied view starts its own.
    fn clone(&self) -> Self {
        StreamRun::default()
    }
}

impl StreamRun {
    /// Records a transfer of `len` bytes to address `dst` and says whether it should
    /// stream: when it continues a run (it starts where the last one ended) that already
    /// wrote at least `after` bytes. `after` 0 streams nothing.
    #[inline]
    pub fn streams(&self, dst: usize, len: usize, after: usize) -> bool {
        let before = if dst == self.end.load(Ordering::Relaxed) {
            self.len.load(Ordering::Relaxed)
        } else {
            0
        };
        self.end.store(dst.wrapping_add(len), Ordering::Relaxed);
        self.len
            .store(before.saturating_add(len), Ordering::Relaxed);
        after != 0 && before >= after
    }
}

/// The bytes a run writes before it streams: `pml_rma_stream_after`, where 0 (the default)
/// means the last-level cache's size.
pub fn stream_after(params: &kestrel_transport::Params) -> usize {
    match crate::params::RMA_STREAM_AFTER.get(params) {
        0 => last_level_cache().unwrap_or(FALLBACK_CACHE),
        n => usize::try_from(n).unwrap_or(usize::MAX),
    }
}

/// Assumed when the kernel does not say how large the last-level cache is: large enough
/// that streaming starts late rather than too early.
const FALLBACK_CACHE: usize = 32 << 20;

/// The largest cache CPU 0 reports (`/sys/devices/system/cpu/cpu0/cache/index*/size`), read
/// once per process (every window's view asks).
fn last_level_cache() -> Option<usize> {
    static SIZE: std::sync::OnceLock<Option<usize>> = std::sync::OnceLock::new();
    *SIZE.get_or_init(|| {
        let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
        dir.filter_map(|e| {
            let text = std::fs::read_to_string(e.ok()?.path().join("size")).ok()?;
            parse_cache_size(text.trim())
        })
        .max()
    })
}

/// `8192K`, `32M` or a plain byte count, as the kernel writes cache sizes.
fn parse_cache_size(s: &str) -> Option<usize> {
    let (digits, unit) = match s.as_bytes().last()? {
        b'K' => (&s[..s.len() - 1], 1 << 10),
        b'M' => (&s[..s.len() - 1], 1 << 20),
        b'G' => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    digits.parse::<usize>().ok()?.checked_mul(unit)
}

/// Copies `len` bytes from `src` to `dst`, with non-temporal stores where the target has
/// them (x86-64: SSE2, always present) and the ranges do not overlap; otherwise an
/// ordinary `ptr::copy`.
///
/// # Safety
/// `src..src + len` must be readable and `dst..dst + len` writable for the whole call, as for
/// [`std::ptr::copy`].
pub unsafe fn copy(dst: *mut u8, src: *const u8, len: usize) {
    let apart = !super::memory::ranges_overlap(dst as usize, len, src as usize, len);
    #[cfg(target_arch = "x86_64")]
    if apart {
        // SAFETY: forwarded from the caller; the ranges are disjoint.
        unsafe { copy_streaming(dst, src, len) };
        return;
    }
    let _ = apart;
    // SAFETY: forwarded from the caller.
    unsafe { std::ptr::copy(src, dst, len) };
}

/// The streaming copy: the head up to the destination's next 64-byte boundary and the tail
/// by `ptr::copy_nonoverlapping`, the lines between with four 16-byte non-temporal stores
/// each, then a store fence so the data is visible in order with the caller's later stores
/// (a flush or an unlock publishes completion with ordinary stores after it).
///
/// # Safety
/// As [`copy`], with disjoint ranges.
#[cfg(target_arch = "x86_64")]
unsafe fn copy_streaming(dst: *mut u8, src: *const u8, len: usize) {
    use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_sfence, _mm_stream_si128};
    let head = ((64 - (dst as usize & 63)) & 63).min(len);
    // SAFETY: the first `head` bytes of both ranges (the caller's contract, disjoint).
    unsafe { std::ptr::copy_nonoverlapping(src, dst, head) };
    let mut i = head;
    while i + 64 <= len {
        // SAFETY: bytes i..i + 64 lie in both ranges; `dst + i` is 64-byte aligned (after
        // the head), as `_mm_stream_si128` needs 16; the loads are unaligned loads.
        unsafe {
            let s = src.add(i) as *const __m128i;
            let d = dst.add(i) as *mut __m128i;
            let a = _mm_loadu_si128(s);
            let b = _mm_loadu_si128(s.add(1));
            let c = _mm_loadu_si128(s.add(2));
            let e = _mm_loadu_si128(s.add(3));
            _mm_stream_si128(d, a);
            _mm_stream_si128(d.add(1), b);
            _mm_stream_si128(d.add(2), c);
            _mm_stream_si128(d.add(3), e);
        }
        i += 64;
    }
    // SAFETY: the remaining `len - i` bytes of both ranges.
    unsafe { std::ptr::copy_nonoverlapping(src.add(i), dst.add(i), len - i) };
    // SAFETY: SSE2 is part of x86-64.
    unsafe { _mm_sfence() };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_streams_only_past_its_first_bytes_and_a_jump_starts_a_new_one() {
        let r = StreamRun::default();
        let after = 3 * STREAM_MIN;
        assert!(!r.streams(1 << 20, STREAM_MIN, after));
        assert!(!r.streams((1 << 20) + STREAM_MIN, STREAM_MIN, after));
        assert!(!r.streams((1 << 20) + 2 * STREAM_MIN, STREAM_MIN, after));
        assert!(
            r.streams((1 << 20) + 3 * STREAM_MIN, STREAM_MIN, after),
            "past `after` bytes"
        );
        assert!(
            !r.streams(1 << 20, STREAM_MIN, after),
            "back to the start: a new run"
        );
        assert!(
            !r.clone().streams((1 << 20) + STREAM_MIN, STREAM_MIN, after),
            "a clone starts afresh"
        );
        let never = StreamRun::default();
        for k in 0..100 {
            assert!(
                !never.streams(k * STREAM_MIN, STREAM_MIN, 0),
                "0 never streams"
            );
        }
    }

    #[test]
    fn cache_sizes_parse_as_the_kernel_writes_them() {
        assert_eq!(parse_cache_size("8192K"), Some(8 << 20));
        assert_eq!(parse_cache_size("32M"), Some(32 << 20));
        assert_eq!(parse_cache_size("512"), Some(512));
        assert_eq!(parse_cache_size(""), None);
        assert_eq!(parse_cache_size("K"), None);
        assert_eq!(parse_cache_size("x12K"), None);
    }

    #[test]
    fn streaming_copies_every_length_and_alignment_exactly_and_overlap_falls_back() {
        let src: Vec<u8> = (0..20_000u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in [0usize, 1, 15, 63, 64, 65, 127, 128, 1000, 4099, 16_384] {
            for off in [0usize, 1, 8, 33, 63] {
                let mut dst = vec![0xAAu8; len + 200];
                // SAFETY: both ranges lie inside their vectors.
                unsafe { copy(dst.as_mut_ptr().add(off), src.as_ptr().add(5), len) };
                assert_eq!(
                    &dst[off..off + len],
                    &src[5..5 + len],
                    "len {len} off {off}"
                );
                assert!(
                    dst[..off].iter().all(|&b| b == 0xAA),
                    "before, len {len} off {off}"
                );
                assert!(
                    dst[off + len..].iter().all(|&b| b == 0xAA),
                    "after, len {len} off {off}"
                );
            }
        }
        // Overlapping ranges inside one buffer: memmove semantics.
        let mut v: Vec<u8> = (0..300u32).map(|i| i as u8).collect();
        let expect: Vec<u8> = v[0..200].to_vec();
        let p = v.as_mut_ptr();
        // SAFETY: both ranges lie inside `v`.
        unsafe { copy(p.add(50), p, 200) };
        assert_eq!(&v[50..250], &expect[..]);
    }
}
