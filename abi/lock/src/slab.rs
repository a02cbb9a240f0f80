//! The indexed tables of the C library: objects addressed by slot number (the index in their
//! handle), so that decoding a handle is an array access, never a search.
//!
//! This module owns slot reuse: a freed slot goes on a free list and the next insert takes
//! it. It never synchronizes: every table lives inside the library state, which only a
//! holder of the call lock ([`crate::CallLock`]) reaches; the loom model in `tests/loom.rs`
//! checks that the lock orders every access to a table from different threads.

/// A table of objects addressed by slot number, reusing freed slots.
#[derive(Debug)]
pub struct Slab<T> {
    items: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab {
            items: Vec::new(),
            free: Vec::new(),
        }
    }
}

impl<T> Slab<T> {
    /// Stores `v`; returns its slot. Reusing a free slot is the common case and is inlined
    /// (every nonblocking call stores a request); growing the table is not.
    #[inline(always)]
    pub fn insert(&mut self, v: T) -> u32 {
        match self.free.pop() {
            Some(i) => {
                // A free slot is empty: nothing to drop (forgetting `None` skips the
                // out-of-line drop the compiler would call for it).
                let old = self.items[i as usize].replace(v);
                debug_assert!(
                    old.is_none(),
                    "slab slot {i} on the free list holds a value"
                );
                std::mem::forget(old);
                i
            }
            None => self.push(v),
        }
    }

    /// [`Slab::insert`] into a new slot at the end.
    #[inline(never)]
    fn push(&mut self, v: T) -> u32 {
        self.items.push(Some(v));
        (self.items.len() - 1) as u32
    }

    /// Stores `v` in slot `i` (for fixed slots such as the world communicator).
    pub fn put_at(&mut self, i: u32, v: T) {
        let i = i as usize;
        if self.items.len() <= i {
            self.items.resize_with(i + 1, || None);
        }
        self.items[i] = Some(v);
    }

    /// The object in slot `i`.
    #[inline]
    pub fn get(&self, i: u32) -> Option<&T> {
        self.items.get(i as usize)?.as_ref()
    }

    /// The object in slot `i`, mutably.
    #[inline]
    pub fn get_mut(&mut self, i: u32) -> Option<&mut T> {
        self.items.get_mut(i as usize)?.as_mut()
    }

    /// Frees slot `i` whose value the caller knows to own nothing (no heap memory, no
    /// resource): its destructor is not run, which on the C library's completion path saves
    /// an out-of-line drop of a record already checked to be plain. A value that does own
    /// something is leaked, never freed twice. Whether the slot held a value.
    #[inline]
    pub fn vacate(&mut self, i: u32) -> bool {
        match self.items.get_mut(i as usize) {
            Some(slot @ Some(_)) => {
                std::mem::forget(slot.take());
                self.free.push(i);
                true
            }
            _ => false,
        }
    }

    /// Empties slot `i`.
    #[inline]
    pub fn remove(&mut self, i: u32) -> Option<T> {
        let v = self.items.get_mut(i as usize)?.take();
        if v.is_some() {
            self.free.push(i);
        }
        v
    }

    /// Occupied slots and their objects.
    pub fn iter(&self) -> impl Iterator<Item = (u32, &T)> {
        self.items
            .iter()
            .enumerate()
            .filter_map(|(i, v)| v.as_ref().map(|v| (i as u32, v)))
    }
}
