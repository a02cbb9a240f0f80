//! Spare buffers of the engine's own large allocations: the copies background sends keep
//! (`detached`) and the scratch space of blocking collective algorithms (temporary blocks,
//! partial results). A fresh allocation of more than a few pages is a page fault on every
//! first touch of each page, and glibc hands freed heap tops back to the kernel, so a
//! collective that allocated its 512 KiB of scratch on every call paid 128 page faults on
//! every call (measured: a 2-rank ring allreduce of 512 KiB between two hosts took 550-680
//! us with fresh buffers and 280-510 us with glibc told not to give memory back). Owns the
//! kept buffers and how many and how large they may be; it must never hand one buffer out
//! twice, nor promise anything about a buffer's contents.

/// Buffers kept, the largest kept (larger ones cost the fault-in once per use, a small share
/// of moving that much data), and the most kept in all (a root whose nonblocking scatter
/// leaves a copy per member in flight, call after call, needs several at once).
const KEPT: usize = 8;
const KEPT_MAX: usize = 16 << 20;
const KEPT_TOTAL: usize = 32 << 20;

/// The kept buffers. Each is kept with its initialized length (`Vec::len`), so handing it
/// out again as scratch of at most that length writes nothing.
#[derive(Default)]
pub(crate) struct Spares {
    kept: Vec<Vec<u8>>,
}

impl Spares {
    /// An empty vector with room for at least `capacity` bytes, a kept one if one is large
    /// enough (for a caller that fills it by extending).
    pub(crate) fn take_empty(&mut self, capacity: usize) -> Vec<u8> {
        let mut v = self
            .kept
            .iter()
            .position(|b| b.capacity() >= capacity)
            .map(|i| self.kept.swap_remove(i))
            .unwrap_or_default();
        v.clear();
        v
    }

    /// `len` bytes of scratch, whose contents are whatever an earlier user left: the
    /// smallest kept buffer that already has `len` initialized bytes, else the largest
    /// (grown with zeros), else a new one. Give it back with [`Spares::keep`].
    pub(crate) fn take(&mut self, len: usize) -> Scratch {
        let fits = self
            .kept
            .iter()
            .enumerate()
            .filter(|(_, b)| b.len() >= len)
            .min_by_key(|(_, b)| b.len())
            .map(|(i, _)| i);
        let largest = || {
            self.kept
                .iter()
                .enumerate()
                .max_by_key(|(_, b)| b.capacity())
                .map(|(i, _)| i)
        };
        let mut buf = match fits.or_else(largest) {
            Some(i) => self.kept.swap_remove(i),
            None => Vec::new(),
        };
        if buf.len() < len {
            buf.resize(len, 0);
        }
        Scratch { buf, len }
    }

    /// Keeps `b` for a later [`Spares::take`] if it is not too large, in place of the
    /// smallest kept one when all places are taken (the larger ones cost the most to fault
    /// in again).
    pub(crate) fn keep(&mut self, b: Vec<u8>) {
        if b.capacity() == 0 || b.capacity() > KEPT_MAX {
            return;
        }
        let total: usize = self.kept.iter().map(Vec::capacity).sum();
        if self.kept.len() < KEPT && total + b.capacity() <= KEPT_TOTAL {
            self.kept.push(b);
        } else if let Some(small) = self.kept.iter_mut().min_by_key(|s| s.capacity()) {
            if small.capacity() < b.capacity()
                && total - small.capacity() + b.capacity() <= KEPT_TOTAL
            {
                *small = b;
            }
        }
    }
}

impl super::Engine {
    /// Runs `f` with `len` bytes of the engine's kept scratch (contents unspecified), e.g.
    /// the input copy of an `MPI_IN_PLACE` reduction, which a fresh allocation would fault
    /// in page by page on every call.
    pub fn with_scratch<R>(&mut self, len: usize, f: impl FnOnce(&mut Self, &mut [u8]) -> R) -> R {
        let mut s = self.st.spares.take(len);
        let r = f(self, &mut s);
        self.st.spares.keep(s.into_vec());
        r
    }
}

/// Scratch space of a known length taken from [`Spares`]; derefs to exactly `len` bytes.
pub(crate) struct Scratch {
    buf: Vec<u8>,
    len: usize,
}

impl Scratch {
    /// The buffer, to give back with [`Spares::keep`].
    pub(crate) fn into_vec(self) -> Vec<u8> {
        self.buf
    }
}

impl std::ops::Deref for Scratch {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.buf[..self.len]
    }
}

impl std::ops::DerefMut for Scratch {
    fn deref_mut(&mut self) -> &mut [u8] {
        &mut self.buf[..self.len]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_buffer_comes_back_with_its_length_and_is_never_handed_out_twice() {
        let mut s = Spares::default();
        let mut a = s.take(1000);
        assert_eq!(a.len(), 1000);
        a[999] = 7;
        let b = s.take(1000);
        s.keep(a.into_vec());
        // Smaller scratch reuses the kept buffer without writing it.
        let c = s.take(10);
        assert_eq!(c.len(), 10);
        assert!(
            s.take(5).iter().all(|&x| x == 0),
            "the kept buffer is in use"
        );
        let v = c.into_vec();
        assert_eq!(v.len(), 1000);
        assert_eq!(v[999], 7);
        s.keep(v);
        s.keep(b.into_vec());
        // Larger scratch grows the largest kept buffer.
        let d = s.take(3000);
        assert_eq!(d.len(), 3000);
        assert_eq!(s.kept.len(), 1);
    }

    #[test]
    fn keeps_a_bounded_number_and_size_preferring_large_buffers() {
        let mut s = Spares::default();
        for n in 1..=KEPT + 1 {
            s.keep(vec![0; n * 10]);
        }
        let mut caps: Vec<usize> = s.kept.iter().map(|b| b.capacity()).collect();
        caps.sort_unstable();
        assert_eq!(caps, (2..=KEPT + 1).map(|n| n * 10).collect::<Vec<_>>());
        s.keep(vec![0; KEPT_MAX + 1]);
        assert!(s.kept.iter().all(|b| b.capacity() <= KEPT_MAX));
        let e = s.take_empty(35);
        assert!(e.is_empty() && e.capacity() >= 35);
        assert_eq!(s.kept.len(), KEPT - 1);
        // At most KEPT_TOTAL bytes in all.
        let mut s = Spares::default();
        for _ in 0..KEPT {
            s.keep(vec![0; KEPT_MAX]);
        }
        let total: usize = s.kept.iter().map(Vec::capacity).sum();
        assert!(total <= KEPT_TOTAL, "{total}");
    }
}
