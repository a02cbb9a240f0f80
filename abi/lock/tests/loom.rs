//! The call lock and the request table under loom: every interleaving (within
//! `LOOM_MAX_PREEMPTIONS`) of threads that start requests, wait for them while handing the
//! lock over, and complete the others' requests, as the C library's threads do under
//! `MPI_THREAD_MULTIPLE`. The table sits in a loom cell, so loom fails the model if any
//! access to it is not ordered after the previous access by another thread (a lock that
//! let two holders in, or released without publishing its writes).
//!
//! Run: `RUSTFLAGS="--cfg loom" cargo test -p kestrel-abi-lock --release --test loom`.
#![cfg(loom)]

use kestrel_abi_lock::{CallLock, Slab};
use loom::cell::UnsafeCell;
use loom::sync::Arc;

/// A request as the table sees it: running, or complete with its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Req {
    Active(u32),
    Done(u32),
}

/// The library state in miniature: the request table, behind a cell loom watches.
struct State {
    requests: UnsafeCell<Slab<Req>>,
}

impl State {
    fn new() -> Self {
        State {
            requests: UnsafeCell::new(Slab::default()),
        }
    }

    /// Runs `f` on the table; the caller holds the call lock.
    fn table<R>(&self, f: impl FnOnce(&mut Slab<Req>) -> R) -> R {
        // SAFETY: only a holder of the call lock calls this (each test below does), and the
        // lock admits one holder at a time: that is what loom checks here.
        #[allow(unsafe_code)]
        self.requests.with_mut(|t| f(unsafe { &mut *t }))
    }
}

/// The progress a waiter makes: completes every running request (as the engine does for
/// whichever thread polls).
fn progress(t: &mut Slab<Req>) {
    let running: Vec<u32> = t
        .iter()
        .filter(|(_, r)| matches!(r, Req::Active(_)))
        .map(|(i, _)| i)
        .collect();
    for i in running {
        if let Some(r) = t.get_mut(i) {
            if let Req::Active(tag) = *r {
                *r = Req::Done(tag);
            }
        }
    }
}

/// What a blocking call does between polls (`Waiter::step` in the library): lets waiting
/// threads in, then backs off (a yield, which also tells loom this thread spins).
fn idle_step(g: &mut kestrel_abi_lock::CallGuard<'_, State>) {
    g.let_others_in();
    loom::thread::yield_now();
}

/// Starts a request under the lock, then waits for it as `MPI_Wait` does: poll, make
/// progress, let others in between polls; frees it and returns its status.
fn start_and_wait(lock: &CallLock<State>, tag: u32) -> u32 {
    let slot = {
        let g = lock.lock();
        g.table(|t| t.insert(Req::Active(tag)))
    };
    let mut g = lock.lock();
    loop {
        let done = g.table(|t| match t.get(slot) {
            Some(Req::Done(st)) => {
                let st = *st;
                t.remove(slot);
                Some(st)
            }
            Some(Req::Active(_)) => {
                progress(t);
                None
            }
            None => panic!("request slot {slot} vanished"),
        });
        if let Some(st) = done {
            return st;
        }
        idle_step(&mut g);
    }
}

#[test]
fn threads_start_wait_and_free_requests_in_one_table() {
    loom::model(|| {
        let lock = Arc::new(CallLock::new(State::new()));
        let others: Vec<_> = (1..=1)
            .map(|tag| {
                let lock = lock.clone();
                loom::thread::spawn(move || start_and_wait(&lock, tag))
            })
            .collect();
        assert_eq!(start_and_wait(&lock, 0), 0);
        for (tag, t) in (1..=1).zip(others) {
            assert_eq!(t.join().unwrap(), tag, "a waiter got another's status");
        }
        let g = lock.lock();
        g.table(|t| assert_eq!(t.iter().count(), 0, "a request was not freed"));
    });
}

#[test]
fn a_holder_that_waits_hands_the_lock_to_a_thread_that_completes_its_request() {
    // The waiter never drops its guard; the other thread gets in only through the
    // hand-over, and must see the waiter's request and publish its completion back.
    loom::model(|| {
        let lock = Arc::new(CallLock::new(State::new()));
        let mut g = lock.lock();
        let slot = g.table(|t| t.insert(Req::Active(7)));
        let completer = {
            let lock = lock.clone();
            loom::thread::spawn(move || {
                let g = lock.lock();
                g.table(|t| {
                    assert_eq!(t.get(slot), Some(&Req::Active(7)));
                    *t.get_mut(slot).unwrap() = Req::Done(7);
                });
            })
        };
        while g.table(|t| t.get(slot) == Some(&Req::Active(7))) {
            idle_step(&mut g);
        }
        assert_eq!(g.table(|t| t.remove(slot)), Some(Req::Done(7)));
        drop(g);
        completer.join().unwrap();
    });
}

#[test]
fn a_holder_that_yields_its_core_releases_the_lock_meanwhile() {
    // `Waiter::step` with more waiting threads than cores: the waiter yields with the lock
    // released (`yield_unlocked`), whether or not the other thread was already waiting.
    loom::model(|| {
        let lock = Arc::new(CallLock::new(State::new()));
        let mut g = lock.lock();
        let slot = g.table(|t| t.insert(Req::Active(9)));
        let completer = {
            let lock = lock.clone();
            loom::thread::spawn(move || {
                let g = lock.lock();
                g.table(|t| *t.get_mut(slot).unwrap() = Req::Done(9));
            })
        };
        while g.table(|t| t.get(slot) == Some(&Req::Active(9))) {
            g.yield_unlocked();
        }
        assert_eq!(g.table(|t| t.remove(slot)), Some(Req::Done(9)));
        drop(g);
        completer.join().unwrap();
    });
}

#[test]
fn exclusive_mode_relies_on_the_programs_own_ordering() {
    // Below MPI_THREAD_MULTIPLE the program orders its calls (here by join); the lock is a
    // plain load and store, and the table's accesses are still ordered.
    loom::model(|| {
        let lock = Arc::new(CallLock::new(State::new()));
        lock.lock().set_shared(false);
        let t = {
            let lock = lock.clone();
            loom::thread::spawn(move || {
                let g = lock.lock();
                g.table(|t| t.insert(Req::Done(3)))
            })
        };
        let slot = t.join().unwrap();
        let g = lock.lock();
        assert_eq!(g.table(|t| t.remove(slot)), Some(Req::Done(3)));
    });
}
