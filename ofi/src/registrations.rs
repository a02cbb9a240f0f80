//! The send buffers this process registered for its peers to read (RMA rendezvous): which
//! registration covers a buffer, how many messages in flight use it, and which unused ones
//! to close so that at most `keep` stay for reuse.
//!
//! This module owns the bookkeeping only, generic over the registration handle, so it is
//! tested without a provider. It must never close a registration a message still uses:
//! [`Registrations::release`] and eviction hand back only unused ones.
//!
//! Reuse is correct only where a registration names addresses, not pages (the provider
//! reads the memory as it is at read time): then a buffer freed and allocated again at the
//! same address is read with its new contents. The transport keeps unused registrations
//! (`keep > 0`) only for such providers; where registering pins pages (`FI_MR_ALLOCATED`)
//! it passes `keep = 0`, and every registration closes when its last message is done.

/// One registration: the bytes it covers and its users.
#[derive(Debug, Clone, Copy)]
struct Entry<R> {
    start: u64,
    len: u64,
    region: R,
    /// Messages in flight that peers may read through it.
    users: u32,
    /// When it was last acquired (a counter), for least-recently-used eviction.
    last_used: u64,
}

impl<R> Entry<R> {
    fn covers(&self, start: u64, len: u64) -> bool {
        start >= self.start && start.saturating_add(len) <= self.start + self.len
    }

    fn exactly(&self, start: u64, len: u64) -> bool {
        self.start == start && self.len == len
    }
}

/// The registrations of one endpoint.
#[derive(Debug)]
pub struct Registrations<R> {
    entries: Vec<Entry<R>>,
    keep: usize,
    clock: u64,
}

impl<R: Copy> Registrations<R> {
    /// No registrations; at most `keep` unused ones are kept for reuse.
    pub fn new(keep: usize) -> Registrations<R> {
        Registrations {
            entries: Vec::new(),
            keep,
            clock: 0,
        }
    }

    /// A registration covering `start..start + len`, with one more user, and the offset of
    /// `start` in it; `None` when none covers it (register, then [`Registrations::insert`]).
    /// An exact match is preferred, then the smallest cover.
    pub fn acquire(&mut self, start: u64, len: u64) -> Option<(R, u64)> {
        let i = self.find(start, len, false)?;
        self.clock += 1;
        let e = &mut self.entries[i];
        e.users += 1;
        e.last_used = self.clock;
        Some((e.region, start - e.start))
    }

    /// Records a new registration of `start..start + len` with one user.
    pub fn insert(&mut self, start: u64, len: u64, region: R) {
        self.clock += 1;
        self.entries.push(Entry {
            start,
            len,
            region,
            users: 1,
            last_used: self.clock,
        });
    }

    /// A message that used the registration covering `start..start + len` is done; hands
    /// `close` every registration no longer kept (this one when `keep` is 0, else the least
    /// recently used unused ones beyond `keep`). A range no registration in use covers (the
    /// buffer was never exposed) changes nothing.
    pub fn release(&mut self, start: u64, len: u64, mut close: impl FnMut(R)) {
        let Some(i) = self.find(start, len, true) else {
            return;
        };
        self.entries[i].users -= 1;
        let mut unused = self.entries.iter().filter(|e| e.users == 0).count();
        while unused > self.keep {
            unused -= 1;
            let oldest = self
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| e.users == 0)
                .min_by_key(|(_, e)| e.last_used)
                .map(|(i, _)| i)
                .expect("an unused entry exists");
            close(self.entries.swap_remove(oldest).region);
        }
    }

    /// Whether a message in flight still uses some registration (a peer may read it).
    pub fn in_use(&self) -> bool {
        self.entries.iter().any(|e| e.users > 0)
    }

    /// Registrations held, used or not.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when none is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry covering the range: exact first, then the smallest; only entries in use
    /// when `in_use` (a release must find the one its acquire counted).
    fn find(&self, start: u64, len: u64, in_use: bool) -> Option<usize> {
        let candidates = || {
            self.entries
                .iter()
                .enumerate()
                .filter(move |(_, e)| e.covers(start, len) && (!in_use || e.users > 0))
        };
        candidates()
            .find(|(_, e)| e.exactly(start, len))
            .or_else(|| candidates().min_by_key(|(_, e)| e.len))
            .map(|(i, _)| i)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_sent_again_reuses_its_registration_and_a_part_of_it_too() {
        let mut r = Registrations::new(4);
        assert_eq!(r.acquire(4096, 1 << 20), None);
        r.insert(4096, 1 << 20, 'a');
        let mut closed = Vec::new();
        r.release(4096, 1 << 20, |x| closed.push(x));
        assert!(closed.is_empty(), "kept for reuse");
        assert!(!r.in_use());
        assert_eq!(r.acquire(4096, 1 << 20), Some(('a', 0)));
        assert_eq!(r.acquire(8192, 4096), Some(('a', 4096)));
        assert!(r.in_use());
        assert_eq!(r.acquire(0, 4096), None, "not covered");
        assert_eq!(
            r.acquire(4096, (1 << 20) + 1),
            None,
            "longer than the registration"
        );
    }

    #[test]
    fn without_reuse_a_registration_closes_when_its_last_user_is_done() {
        let mut r = Registrations::new(0);
        r.insert(0, 100, 1);
        assert_eq!(r.acquire(0, 100), Some((1, 0)));
        let mut closed = Vec::new();
        r.release(0, 100, |x| closed.push(x));
        assert!(closed.is_empty(), "a second message still uses it");
        r.release(0, 100, |x| closed.push(x));
        assert_eq!(closed, vec![1]);
        assert!(r.is_empty());
        r.release(0, 100, |x| closed.push(x));
        assert_eq!(
            closed,
            vec![1],
            "releasing an unknown range changes nothing"
        );
    }

    #[test]
    fn the_least_recently_used_unused_registrations_go_first_and_used_ones_never() {
        let mut r = Registrations::new(2);
        for (i, start) in [0u64, 1000, 2000, 3000].into_iter().enumerate() {
            r.insert(start, 100, i);
        }
        let mut closed = Vec::new();
        // 3000 stays in use throughout.
        r.release(1000, 100, |x| closed.push(x));
        r.release(0, 100, |x| closed.push(x));
        assert!(closed.is_empty(), "two unused are kept");
        // Touch 1000 so that 0 is the oldest unused one.
        assert_eq!(r.acquire(1000, 100), Some((1, 0)));
        r.release(1000, 100, |x| closed.push(x));
        r.release(2000, 100, |x| closed.push(x));
        assert_eq!(closed, vec![0], "three unused, two kept: the oldest closes");
        assert!(r.in_use(), "3000 is still used");
        assert_eq!(r.len(), 3);
    }

    #[test]
    fn a_release_counts_down_the_registration_its_acquire_counted() {
        let mut r = Registrations::new(8);
        r.insert(0, 1 << 20, 'w');
        r.release(0, 1 << 20, |_| {});
        // An exact registration of a part, in use, and the whole one, unused.
        r.insert(4096, 4096, 'p');
        assert_eq!(r.acquire(4096, 4096), Some(('p', 0)), "exact first");
        r.release(4096, 4096, |_| {});
        r.release(4096, 4096, |_| {});
        assert!(!r.in_use());
        let mut closed = Vec::new();
        r.release(4096, 4096, |x| closed.push(x));
        assert!(
            closed.is_empty() && r.len() == 2,
            "nothing left to count down"
        );
    }
}
