//! The asynchronous progress thread (`async_progress`, off by default): one thread per
//! process that advances what the program started while the program computes without
//! calling MPI, as MPICH's `MPIR_CVAR_ASYNC_PROGRESS` does.
//!
//! This module owns the thread's life (started by `MPI_Init_thread`, stopped and joined by
//! `MPI_Finalize` before the engine shuts down) and its polling policy. It never waits for
//! the library lock: it only *tries* to take it, so a program thread inside a call (which
//! makes progress itself) is never held up by it, and a blocking call may keep the lock
//! across its wait as it does without the thread. It never runs a callback into the program
//! but a user reduction function inside a schedule, which MPI allows on any thread.
//!
//! The lock: with the thread running, two threads may take the lock at once, so it runs in
//! shared mode (a compare-exchange) whatever level the program asked for. Everything else
//! keeps the program's level: [`crate::api::multithreaded`] reports `MPI_THREAD_MULTIPLE`
//! only when the program asked for it ([`LOCK_SHARED_FOR_THREAD_ONLY`]), so blocking
//! collectives keep their node-local algorithms.
//!
//! Polling: while something this process started is unfinished
//! ([`kestrel_pml::engine::Engine::has_work_in_flight`]) the thread polls, then sleeps
//! `async_progress_interval_us` (10 µs; its timer slack is set to 1 µs so that the sleep is
//! that short) or, after a poll that moved something, only yields. With nothing in flight it
//! polls every millisecond (a one-sided target or a peer's rendezvous may still need it).
//! When a program thread holds the lock, that thread makes progress itself, often in a
//! blocking wait that a wake-up every 10 µs would only slow down (measured: a 1 MiB
//! `MPI_Iallreduce` between two ranks on two cores took twice as long), so the thread
//! backs off, doubling its sleep up to a millisecond. A call that leaves work in flight
//! wakes it from any such long sleep ([`after_call`]), so computation that follows an
//! `MPI_I*` call is overlapped from its start.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::state::{Locked, Phase, CORE, LOCK_SHARED_FOR_THREAD_ONLY};

/// The thread sleeps longer than its poll interval (nothing was in flight, or a program
/// thread was in the library): a call that leaves work in flight unparks it.
static PARKED: AtomicBool = AtomicBool::new(false);

/// `MPI_Finalize` asks the thread to end.
static STOP: AtomicBool = AtomicBool::new(false);

/// The running thread, for waking and joining.
static THREAD: Mutex<Option<JoinHandle<()>>> = Mutex::new(None);

/// The poll interval with nothing in flight.
const IDLE_POLL: Duration = Duration::from_millis(1);

/// Timer slack of the thread: the kernel's default (50 µs) would stretch every short sleep.
const TIMER_SLACK_NS: u64 = 1_000;

/// Starts the thread (`MPI_Init_thread`, with the lock held and the library running).
/// `interval`: the sleep between polls while work is in flight (zero: yield instead).
/// `program_multiple`: the program was granted `MPI_THREAD_MULTIPLE`.
pub fn start(l: &mut Locked, interval: Duration, program_multiple: bool) {
    LOCK_SHARED_FOR_THREAD_ONLY.store(!program_multiple, Ordering::Relaxed);
    l.set_multithreaded(true);
    STOP.store(false, Ordering::Relaxed);
    let spawned = std::thread::Builder::new()
        .name("kestrel-progress".into())
        .spawn(move || run(interval));
    match spawned {
        Ok(t) => {
            *THREAD.lock().unwrap_or_else(|p| p.into_inner()) = Some(t);
            tracing::debug!(target: "abi", ?interval, "asynchronous progress thread started");
        }
        Err(e) => {
            // The program still runs correctly, only without the overlap it asked for.
            eprintln!(
                "kestrel: async_progress: could not start the progress thread ({e}); \
                 continuing without it (raise the process's thread limit, ulimit -u)"
            );
            LOCK_SHARED_FOR_THREAD_ONLY.store(false, Ordering::Relaxed);
            l.set_multithreaded(program_multiple);
        }
    }
}

/// Stops and joins the thread (`MPI_Finalize`, before the engine shuts down; the lock is
/// held, which the thread never waits for). Nothing when it is not running.
pub fn stop() {
    let Some(t) = THREAD.lock().unwrap_or_else(|p| p.into_inner()).take() else {
        return;
    };
    STOP.store(true, Ordering::Release);
    t.thread().unpark();
    if t.join().is_err() {
        eprintln!("kestrel: async_progress: the progress thread panicked before MPI_Finalize");
    }
    LOCK_SHARED_FOR_THREAD_ONLY.store(false, Ordering::Relaxed);
}

/// At the end of a call: when the thread is in a long sleep and the call left work in
/// flight (an `MPI_I*` call, say), wakes it so that the work advances from now on.
#[inline]
pub fn after_call(l: &mut Locked) {
    if PARKED.load(Ordering::Relaxed) {
        wake_for_work(l);
    }
}

#[cold]
fn wake_for_work(l: &mut Locked) {
    if let Phase::Running(core) = l.phase() {
        if core.engine.has_work_in_flight() && PARKED.swap(false, Ordering::Relaxed) {
            if let Some(t) = THREAD.lock().unwrap_or_else(|p| p.into_inner()).as_ref() {
                t.thread().unpark();
            }
        }
    }
}

/// What one attempt found.
enum Poll {
    /// A program thread holds the lock (it makes progress itself).
    Busy,
    /// Polled: events handled, and whether work is still in flight.
    Polled { moved: usize, in_flight: bool },
    /// The library is not running (finalize is under way).
    Stopped,
}

fn poll_once() -> Poll {
    let Some(mut g) = CORE.try_lock() else {
        return Poll::Busy;
    };
    match &mut g.0 {
        Phase::Running(core) => {
            let moved = core.engine.progress();
            Poll::Polled {
                moved,
                in_flight: core.engine.has_work_in_flight(),
            }
        }
        _ => Poll::Stopped,
    }
}

fn run(interval: Duration) {
    // A panic inside the engine leaves its state half-updated; the program must not go on
    // communicating through it.
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        poll_until_stopped(interval)
    }));
    if r.is_err() {
        eprintln!("kestrel: async_progress: the progress thread panicked; stopping the process");
        std::process::abort();
    }
}

fn poll_until_stopped(interval: Duration) {
    if let Err(e) = nix::sys::prctl::set_timerslack(TIMER_SLACK_NS) {
        tracing::debug!(target: "abi", "async_progress: timer slack not set ({e}); sleeps may be longer");
    }
    let mut busy_streak = 0u32;
    while !STOP.load(Ordering::Acquire) {
        let nap = match poll_once() {
            Poll::Busy => {
                busy_streak = busy_streak.saturating_add(1);
                busy_backoff(interval, busy_streak)
            }
            Poll::Polled { moved, in_flight } => {
                busy_streak = 0;
                match (in_flight, moved) {
                    (true, 0) => interval,
                    // Something moved: more may follow at once.
                    (true, _) => Duration::ZERO,
                    (false, _) => IDLE_POLL,
                }
            }
            Poll::Stopped => return,
        };
        sleep(nap, interval);
    }
}

/// The sleep after `streak` attempts in a row found a program thread in the library: it
/// makes progress itself (often in a blocking wait, where waking every interval would only
/// take its core away), so the thread backs off, doubling up to [`IDLE_POLL`]; a call that
/// leaves work in flight wakes it early ([`after_call`]).
fn busy_backoff(interval: Duration, streak: u32) -> Duration {
    let base = interval.max(Duration::from_micros(1));
    base.saturating_mul(1 << streak.min(10)).min(IDLE_POLL)
}

/// Sleeps `nap` (zero: yields); a sleep longer than `interval` may be cut short by
/// [`after_call`].
fn sleep(nap: Duration, interval: Duration) {
    if nap.is_zero() {
        std::thread::yield_now();
        return;
    }
    let long = nap > interval;
    if long {
        PARKED.store(true, Ordering::Relaxed);
    }
    std::thread::park_timeout(nap);
    if long {
        PARKED.store(false, Ordering::Relaxed);
    }
}
