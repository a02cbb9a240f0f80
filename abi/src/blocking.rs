//! How a blocking call waits: progress between polls and, under `MPI_THREAD_MULTIPLE`, the
//! library lock handed to a thread waiting for it (see [`kestrel_abi_lock::call_lock`]).
//!
//! This module owns the wait loop every blocking call of the C library uses (the wait and
//! test families, blocking sends, receives and probes, blocking collectives). It never
//! decides what completes a request (that is [`crate::requests`]) and never keeps a borrow
//! of the library state across [`Locked::let_others_in`].

use std::sync::atomic::{AtomicU32, Ordering};

use kestrel_pml::engine::ReqId;

use crate::error::MpiResult;
use crate::mem::St;
use crate::requests::{self, ReqRec};
use crate::state::{Core, Locked};

/// What the start of a blocking call's common form left to do (see
/// [`crate::api::call_blocking`]).
pub enum Begun {
    /// Complete already (an eager send): its outcome.
    Done(MpiResult<()>),
    /// Waiting for an engine request, which the call completes.
    Waiting(ReqId),
}

/// The start of a blocking call's common form ([`crate::api::call_blocking`]): a closure,
/// or a type whose `start` is always inlined where the call is (a closure's body is one
/// function, which LLVM kept out of line when `MPI_Send` and `MPI_Send_c` both inlined the
/// call).
pub trait BlockingStart {
    /// Starts the call on the running library; `None` when it does not take this form.
    fn start(self, core: &mut Core) -> Option<Begun>;
}

impl<F: FnOnce(&mut Core) -> Option<Begun>> BlockingStart for F {
    #[inline(always)]
    fn start(self, core: &mut Core) -> Option<Begun> {
        self(core)
    }
}

/// Threads of this process inside a blocking wait under `MPI_THREAD_MULTIPLE`.
static BLOCKED: AtomicU32 = AtomicU32::new(0);

/// The state of one blocking wait: its idle count, and whether it counts in [`BLOCKED`].
#[derive(Default)]
pub struct Waiter {
    idle: u32,
    counted: bool,
}

impl Waiter {
    /// One idle step: progress, back off when nothing moved, and under
    /// `MPI_THREAD_MULTIPLE` let a thread waiting for the library in (so no call holds the
    /// lock across a blocking wait, and whichever thread waits makes progress for all).
    /// When more threads wait than the rank has cores, an empty poll also yields the core:
    /// the thread that would complete the wait (here, or in the peer rank) may need it.
    pub fn step(&mut self, l: &mut Locked) -> MpiResult<()> {
        let core = l.core()?;
        let wants_yield = core.engine.idle_poll(&mut self.idle);
        core.reap_detached();
        if l.multithreaded() {
            if !self.counted {
                self.counted = true;
                BLOCKED.fetch_add(1, Ordering::Relaxed);
            }
            if wants_yield
                || (self.idle > 0
                    && BLOCKED.load(Ordering::Relaxed) > kestrel::threads::cores_per_rank())
            {
                // Yielding the core with the lock held would leave the threads scheduled
                // meanwhile spinning on it.
                l.yield_unlocked();
            } else {
                l.let_others_in();
            }
        } else if wants_yield {
            std::thread::yield_now();
        }
        Ok(())
    }
}

impl Drop for Waiter {
    fn drop(&mut self) {
        if self.counted {
            BLOCKED.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

/// Waits for a request record the caller owns (blocking calls' own requests); its status.
pub fn wait_rec(l: &mut Locked, rec: &mut ReqRec) -> MpiResult<St> {
    if !l.multithreaded() {
        return requests::wait(&mut l.core()?.engine, rec);
    }
    let mut w = Waiter::default();
    while !requests::poll(&mut l.core()?.engine, rec)? {
        w.step(l)?;
    }
    Ok(requests::take_status(rec))
}

/// Waits for an engine request the caller started (blocking sends and receives).
pub fn wait_engine(
    l: &mut Locked,
    id: kestrel_pml::engine::ReqId,
) -> MpiResult<kestrel_pml::engine::Status> {
    if !l.multithreaded() {
        return Ok(l.core()?.engine.wait(id));
    }
    let mut w = Waiter::default();
    loop {
        if let Some(s) = l.core()?.engine.try_complete(id) {
            return Ok(s);
        }
        w.step(l)?;
    }
}
