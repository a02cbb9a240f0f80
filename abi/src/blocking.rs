//! How a blocking call waits: progress between polls and, under `MPI_THREAD_MULTIPLE`, the
//! library lock handed to a thread waiting for it (see [`crate::call_lock`]).
//!
//! This module owns the wait loop every blocking call of the C library uses (the wait and
//! test families, blocking sends, receives and probes, blocking collectives). It never
//! decides what completes a request (that is [`crate::requests`]) and never keeps a borrow
//! of the library state across [`Locked::let_others_in`].

use crate::error::MpiResult;
use crate::mem::St;
use crate::requests::{self, ReqRec};
use crate::state::Locked;

/// One idle step of a blocking call: progress, back off when nothing moved, and under
/// `MPI_THREAD_MULTIPLE` let a thread waiting for the library in (so no call holds the lock
/// across a blocking wait, and whichever thread waits makes progress for all).
pub fn idle_step(l: &mut Locked, idle: &mut u32) -> MpiResult<()> {
    let core = l.core()?;
    core.engine.idle_step(idle);
    core.reap_detached();
    l.let_others_in();
    Ok(())
}

/// Waits for a request record the caller owns (blocking calls' own requests); its status.
pub fn wait_rec(l: &mut Locked, rec: &mut ReqRec) -> MpiResult<St> {
    if !l.multithreaded() {
        return requests::wait(&mut l.core()?.engine, rec);
    }
    let mut idle = 0u32;
    while !requests::poll(&mut l.core()?.engine, rec)? {
        idle_step(l, &mut idle)?;
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
    let mut idle = 0u32;
    loop {
        if let Some(s) = l.core()?.engine.try_complete(id) {
            return Ok(s);
        }
        idle_step(l, &mut idle)?;
    }
}
