//! The lock around the library state, whose cost the thread level selects.
//!
//! This module owns [`CallLock`]: how an MPI call takes and gives back the library state,
//! and how a blocking call lets other threads in while it waits. It never looks at the
//! state it guards and never blocks a caller on anything but the lock itself.
//!
//! Two modes, switched only while the lock is held (by `MPI_Init_thread` and
//! `MPI_Finalize`):
//! * **Shared** (`MPI_THREAD_MULTIPLE`, and before `MPI_Init_thread` returns and after
//!   `MPI_Finalize`, when any thread may ask `MPI_Initialized`): taking the lock is a
//!   compare-exchange; a thread that finds it taken counts itself in `waiting` and spins,
//!   then yields. A call that blocks (a wait, a blocking receive, a collective) gives the lock
//!   back between polls whenever a thread is waiting ([`CallGuard::let_others_in`]), so no
//!   lock is held across a blocking wait and progress is made by whichever thread holds it.
//! * **Exclusive** (`MPI_THREAD_SINGLE`, `FUNNELED`, `SERIALIZED`): the program promises one
//!   call at a time and orders calls from different threads itself, so taking the lock is a
//!   plain load and store, with no locked instruction (a locked instruction is a full fence:
//!   it waits for the previous call's stores, such as a message just written for a peer, to
//!   leave the store buffer, which cost a fifth of a small-message send in the C library).
//!   The flag still catches re-entry: a user reduction function calling MPI finds it set.
//!   A program that breaks its thread level gets what MPICH gives it: undefined behaviour.

use std::cell::UnsafeCell;

// Under loom (`tests/loom.rs`) the atomics and the scheduling points are loom's, so that it
// explores every interleaving of takers, holders and hand-overs.
#[cfg(loom)]
use loom::{
    hint::spin_loop,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
    thread::yield_now,
};
#[cfg(not(loom))]
use std::{
    hint::spin_loop,
    sync::atomic::{AtomicBool, AtomicU32, Ordering},
    thread::yield_now,
};

/// Failed attempts a waiting thread spins through before it starts yielding its core. Under
/// loom every spin is a scheduling point, so the model spins once (the same protocol, fewer
/// identical branches).
const SPINS_BEFORE_YIELD: u32 = if cfg!(loom) { 1 } else { 100 };

/// The library state's lock; see the module documentation.
pub struct CallLock<T> {
    /// A guard exists.
    held: AtomicBool,
    /// Calls may overlap: take with a compare-exchange (see the module documentation).
    shared: AtomicBool,
    /// Threads spinning in [`CallLock::lock`] (shared mode only).
    waiting: AtomicU32,
    value: UnsafeCell<T>,
}

// SAFETY: `value` is reached only through a `CallGuard`. In shared mode `held` is taken with
// an Acquire compare-exchange and given back with a Release store, so at most one guard
// exists and successive holders are ordered, as with a mutex. In exclusive mode the program
// guarantees (MPI_THREAD_SERIALIZED or less) that no two threads call at once and orders
// their calls with its own synchronization, which also orders the accesses to `value`.
#[allow(unsafe_code)]
unsafe impl<T: Send> Sync for CallLock<T> {}

/// `CallLock::new`: `const` for the library's `static`, plain under loom (whose atomics
/// are made at run time).
macro_rules! call_lock_new {
    ($($constness:ident)?) => {
        /// An unheld lock around `value`, in shared mode.
        pub $($constness)? fn new(value: T) -> Self {
            CallLock {
                held: AtomicBool::new(false),
                shared: AtomicBool::new(true),
                waiting: AtomicU32::new(0),
                value: UnsafeCell::new(value),
            }
        }
    };
}

impl<T> CallLock<T> {
    #[cfg(not(loom))]
    call_lock_new!(const);
    #[cfg(loom)]
    call_lock_new!();

    /// The guard, if the lock is free now.
    #[inline]
    pub fn try_lock(&self) -> Option<CallGuard<'_, T>> {
        if self.shared.load(Ordering::Relaxed) {
            return self
                .held
                .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
                .ok()
                .map(|_| CallGuard {
                    lock: self,
                    shared: true,
                });
        }
        if self.held.load(Ordering::Relaxed) {
            return None;
        }
        self.held.store(true, Ordering::Relaxed);
        Some(CallGuard {
            lock: self,
            shared: false,
        })
    }

    /// Whether calls may overlap (shared mode). Exact for a thread that holds the lock or
    /// calls under the program's thread level; the mode changes only at init and finalize.
    #[inline]
    pub fn is_shared(&self) -> bool {
        self.shared.load(Ordering::Relaxed)
    }

    /// The guard, waiting for the holder to finish its call (or to let others in).
    pub fn lock(&self) -> CallGuard<'_, T> {
        if let Some(g) = self.try_lock() {
            return g;
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let mut spins = 0u32;
        let g = loop {
            if let Some(g) = self.try_lock() {
                break g;
            }
            spins += 1;
            if spins < SPINS_BEFORE_YIELD {
                spin_loop();
            } else {
                yield_now();
            }
        };
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        g
    }
}

/// Access to a [`CallLock`]'s value; releases the lock when dropped (also when unwinding).
pub struct CallGuard<'a, T> {
    lock: &'a CallLock<T>,
    /// The mode when the guard was taken, which only a holder changes ([`Self::set_shared`]
    /// keeps both): the calls that ask it again need not load the flag again.
    shared: bool,
}

impl<'a, T> CallGuard<'a, T> {
    /// Switches the mode (see the module documentation): `shared` for
    /// `MPI_THREAD_MULTIPLE` and outside the library's life, exclusive otherwise. Only a
    /// holder switches, so no other thread is between its load of the mode and its take.
    pub fn set_shared(&mut self, shared: bool) {
        self.lock.shared.store(shared, Ordering::Relaxed);
        self.shared = shared;
    }

    /// Whether calls may overlap (`MPI_THREAD_MULTIPLE`).
    #[inline]
    pub fn is_shared(&self) -> bool {
        self.shared
    }

    /// Called by a blocking call between polls: in shared mode, when another thread waits
    /// for the lock, gives it back, yields so that thread can take it, and takes it again.
    /// The caller must hold no reference into the value across this call (the borrow
    /// checker sees to it: this takes `&mut self`).
    #[inline]
    pub fn let_others_in(&mut self) {
        if self.shared && self.lock.waiting.load(Ordering::Relaxed) > 0 {
            self.hand_over();
        }
    }

    /// Gives the core away between the polls of a blocking call, with the lock released in
    /// shared mode: a thread that yielded while holding it would leave every thread
    /// scheduled meanwhile spinning on the lock (the C library's `osu_latency_mt`, 4 threads
    /// per rank on one core each, was several times slower than the Rust API's threads,
    /// which yield with the engine released).
    pub fn yield_unlocked(&mut self) {
        if self.shared {
            self.hand_over();
        } else {
            yield_now();
        }
    }

    #[cold]
    fn hand_over(&mut self) {
        self.lock.held.store(false, Ordering::Release);
        yield_now();
        let g = self.lock.lock();
        // The new guard and this one guard the same lock: keep this one (with the mode the
        // new one saw), forget the other.
        self.shared = g.shared;
        std::mem::forget(g);
    }
}

impl<T> std::ops::Deref for CallGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (see `CallLock`), so no `&mut` aliases it.
        #[allow(unsafe_code)]
        unsafe {
            &*self.lock.value.get()
        }
    }
}

impl<T> std::ops::DerefMut for CallGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: this guard is the only one, and `&mut self` makes this borrow unique.
        #[allow(unsafe_code)]
        unsafe {
            &mut *self.lock.value.get()
        }
    }
}

impl<T> Drop for CallGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        self.lock.held.store(false, Ordering::Release);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::CallLock;

    /// Non-atomic read-modify-write under the lock: any overlap of two holders, or a
    /// release that does not publish the write, loses increments.
    fn count_with(lock: &'static CallLock<u64>, threads: usize, hand_over: bool) -> u64 {
        let handles: Vec<_> = (0..threads)
            .map(|_| {
                std::thread::spawn(move || {
                    for _ in 0..20_000 {
                        let mut g = lock.lock();
                        let v = *g;
                        std::hint::black_box(&v);
                        if hand_over {
                            g.let_others_in();
                        }
                        *g += 1;
                    }
                })
            })
            .collect();
        for t in handles {
            t.join().unwrap();
        }
        let v = *lock.lock();
        v
    }

    #[test]
    fn shared_mode_excludes_and_orders_its_holders() {
        static COUNTER: CallLock<u64> = CallLock::new(0);
        assert_eq!(count_with(&COUNTER, 4, false), 80_000);
        let held = COUNTER.lock();
        assert!(
            COUNTER.try_lock().is_none(),
            "a held lock must refuse a second guard"
        );
        drop(held);
        assert!(COUNTER.try_lock().is_some());
    }

    #[test]
    fn letting_others_in_keeps_exclusion_and_lets_waiters_through() {
        // Every holder hands the lock over in the middle of its turn, then increments: the
        // count comes out exact only if the guard it keeps after the hand-over excludes
        // the others again.
        static COUNTER: CallLock<u64> = CallLock::new(0);
        assert_eq!(count_with(&COUNTER, 4, true), 80_000);
    }

    #[test]
    fn a_waiting_thread_gets_the_lock_from_a_holder_that_polls() {
        // The holder keeps the lock and only lets others in, as a blocking wait does; the
        // other thread must still get through (no starvation).
        static LOCK: CallLock<u32> = CallLock::new(0);
        let mut g = LOCK.lock();
        let other = std::thread::spawn(|| {
            *LOCK.lock() = 7;
        });
        let mut polls = 0u64;
        while *g != 7 {
            g.let_others_in();
            polls += 1;
            assert!(polls < 100_000_000, "the waiting thread never got the lock");
        }
        drop(g);
        other.join().unwrap();
    }

    #[test]
    fn exclusive_mode_still_refuses_a_second_guard() {
        static LOCK: CallLock<u32> = CallLock::new(0);
        let mut g = LOCK.lock();
        g.set_shared(false);
        assert!(!g.is_shared());
        assert!(
            LOCK.try_lock().is_none(),
            "re-entry (a reduction function calling MPI) must be seen"
        );
        drop(g);
        let g = LOCK.try_lock().expect("free again");
        drop(g);
    }
}
