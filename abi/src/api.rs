//! How every MPI call runs: take the lock, run the body, and route a failure through the
//! right error handler.
//!
//! This module owns MPI's error-handler semantics: an error is raised on a communicator
//! (the one the call names, or `MPI_COMM_WORLD` when it names none or an invalid one);
//! `MPI_ERRORS_ARE_FATAL` and `MPI_ERRORS_ABORT` print the message, naming the function,
//! and stop the whole job through the launcher; `MPI_ERRORS_RETURN` returns an error code
//! whose `MPI_Error_string` is that message; a user handler is called with the lock
//! released, then its code is returned. It never implements a call itself.

use std::os::raw::c_int;

use crate::blocking::{Begun, BlockingStart};
use crate::callbacks;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::state::{self, comm_slot, Locked, Phase};
use kestrel_pml::engine::{Engine, Status};

/// What an error handler handle stands for.
pub enum Handler {
    /// `MPI_ERRORS_ARE_FATAL` (and `MPI_ERRORS_ABORT`).
    Fatal,
    /// `MPI_ERRORS_RETURN`.
    Return,
    /// A program's handler.
    User(state::ErrFn),
}

/// The handler behind an error handler handle.
pub fn handler_of(core: &state::Core, eh: c_int) -> Handler {
    match handle::decode(eh, Obj::Errhandler) {
        Some((Kind::Builtin, 1)) => Handler::Return,
        Some((Kind::Direct, i)) => match core.errhandlers.get(i) {
            Some(f) => Handler::User(*f),
            None => Handler::Fatal,
        },
        _ => Handler::Fatal,
    }
}

/// Whether program threads may call at once (`MPI_THREAD_MULTIPLE` granted, or the library
/// not running): blocking collectives then run as schedules, so that their waits let other
/// threads in. The progress thread alone does not count (see [`crate::progress_thread`]).
#[inline]
pub fn multithreaded() -> bool {
    crate::state::CORE.is_shared()
        && !crate::state::LOCK_SHARED_FOR_THREAD_ONLY.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs the body of MPI function `name`; errors go to `comm`'s handler (or the error's own
/// communicator, when it names one).
pub fn call(
    name: &'static str,
    comm: c_int,
    body: impl FnOnce(&mut Locked) -> MpiResult<()>,
) -> c_int {
    let Some(mut l) = Locked::acquire() else {
        return reentered(name);
    };
    let r = body(&mut l);
    // Free functions of generalized requests the call freed run now, unlocked.
    let r = match l.phase() {
        Phase::Running(c) if !c.deferred_frees.is_empty() => r.and(run_deferred_frees(&mut l)),
        _ => r,
    };
    crate::progress_thread::after_call(&mut l);
    match r {
        Ok(()) => error::SUCCESS,
        Err(e) => raise(&mut l, name, comm, e),
    }
}

/// The fast path of a call that either completes at once, with nothing to report, or does
/// not qualify: `f` runs under the lock on the running library and says whether it did the
/// call. When it did not (or the library is not running, or a reduction function calls), the
/// caller runs [`call`], which takes the lock again and reports any error. It costs less than
/// [`call`] because it has no error to route: the one-sided node-local operations use it.
#[inline(always)]
pub fn direct(f: impl FnOnce(&state::Core) -> bool) -> bool {
    let Some(mut l) = Locked::acquire() else {
        return false;
    };
    match l.phase() {
        Phase::Running(c) => f(c),
        _ => false,
    }
}

/// The fast path of a call that starts work and has nothing to report when it qualifies (a
/// nonblocking send or receive of a predefined contiguous type to a real rank): `f` runs under
/// the lock on the running library and gives the handle it made, or `None` when the call does
/// not qualify, and then the caller runs [`call`] (which takes the lock again and reports any
/// error). Unlike [`direct`] it wakes a parked progress thread for the work the call started;
/// unlike [`call`] it has no error to route and no generalized request to free (callgrind,
/// C `osu_bw -m 8:8`: `MPI_Irecv` 414 -> 272 instructions per call, `MPI_Isend` 501 -> 436).
#[inline(always)]
pub fn plain_start(f: impl FnOnce(&mut state::Core) -> Option<c_int>) -> Option<c_int> {
    let mut l = Locked::acquire()?;
    let h = match l.phase() {
        Phase::Running(c) => f(c)?,
        _ => return None,
    };
    crate::progress_thread::after_call(&mut l);
    Some(h)
}

/// [`call`] for the common form of a call (a test or wait of a plain request) in a body of
/// its own: `None` from `body` means the call does not take this form and nothing was done,
/// and the caller then runs [`call`] with the general body. Kept apart from the general body,
/// the common one compiles to a shorter path.
#[inline(always)]
pub fn call_plain(
    name: &'static str,
    comm: c_int,
    body: impl FnOnce(&mut Locked) -> Option<MpiResult<()>>,
) -> Option<c_int> {
    let mut l = Locked::acquire()?;
    let r = body(&mut l)?;
    let r = match l.phase() {
        Phase::Running(c) if !c.deferred_frees.is_empty() => r.and(run_deferred_frees(&mut l)),
        _ => r,
    };
    crate::progress_thread::after_call(&mut l);
    Some(match r {
        Ok(()) => error::SUCCESS,
        Err(e) => raise(&mut l, name, comm, e),
    })
}

/// [`call`] for the common form of a blocking send or receive (a predefined contiguous type,
/// a real rank): `start` starts it on the running library, or gives `None` when the call
/// does not take this form (nothing was done: the caller then runs [`call`] with the general
/// body, which reports any error); `finish` turns the request's status into the call's
/// outcome. The library's state is looked up once, and a process of one program thread
/// waits in the engine directly; under `MPI_THREAD_MULTIPLE` the wait lets other threads in
/// ([`crate::blocking::wait_engine`]). Neither a blocking send nor a receive frees a
/// generalized request, so unlike [`call_plain`] this runs no deferred free function
/// (callgrind, C `osu_latency -m 8:8`: `MPI_Recv` outside its wait 366 -> 276 instructions
/// per call, of which those after the wait, on the ping-pong's critical path, ~85 -> ~45).
#[inline(always)]
pub fn call_blocking(
    name: &'static str,
    comm: c_int,
    start: impl BlockingStart,
    finish: impl FnOnce(&Engine, &Status) -> MpiResult<()>,
) -> Option<c_int> {
    let mut l = Locked::acquire()?;
    let one_thread = !l.multithreaded();
    let Phase::Running(core) = l.phase() else {
        return None;
    };
    let r = match start.start(core)? {
        Begun::Done(r) => r,
        Begun::Waiting(id) if one_thread => {
            let s = core.engine.wait(id);
            finish(&core.engine, &s)
        }
        Begun::Waiting(id) => {
            crate::blocking::wait_engine(&mut l, id).and_then(|s| finish(&l.core()?.engine, &s))
        }
    };
    crate::progress_thread::after_call(&mut l);
    Some(match r {
        Ok(()) => error::SUCCESS,
        Err(e) => raise(&mut l, name, comm, e),
    })
}

/// Runs the deferred free functions of generalized requests with the lock released; the
/// first failure is the call's error.
#[cold]
fn run_deferred_frees(l: &mut Locked) -> MpiResult<()> {
    let frees = match l.phase() {
        Phase::Running(c) => std::mem::take(&mut c.deferred_frees),
        _ => return Ok(()),
    };
    let mut first = Ok(());
    for (f, extra) in frees {
        let r = l.unlocked(|| crate::grequest::run_free(f, extra));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

/// Runs the query functions of the completed generalized requests among `hs` with the
/// lock released (they may call MPI); the wait and test functions call this first.
pub fn query_grequests(l: &mut Locked, hs: &[c_int]) -> MpiResult<()> {
    let core = l.core()?;
    if core.grequests == 0 {
        return Ok(());
    }
    for (slot, q, extra) in pending(core, hs) {
        let r = l.unlocked(|| crate::grequest::run(q, extra));
        store(l.core()?, slot, r);
    }
    Ok(())
}

/// The query functions to run for the completed generalized requests among `hs`:
/// (request slot, function, extra state).
fn pending(
    core: &state::Core,
    hs: &[c_int],
) -> Vec<(
    u32,
    Option<crate::grequest::QueryFn>,
    crate::grequest::Extra,
)> {
    hs.iter()
        .filter_map(|&h| {
            let i = match crate::handle::decode(h, crate::handle::Obj::Request)? {
                (crate::handle::Kind::Direct, i) => i,
                _ => return None,
            };
            let g = core.requests.get(i)?.extra.as_ref()?.grequest.as_ref()?;
            // Every call that reports the status asks again (MPI: the query function runs
            // for each MPI_Request_get_status and for the completing wait or test).
            g.complete.then_some((i, g.query, g.extra))
        })
        .collect()
}

/// Keeps what a query function said for the request in `slot`.
fn store(core: &mut state::Core, slot: u32, r: MpiResult<crate::mem::St>) {
    if let Some(g) = core
        .requests
        .get_mut(slot)
        .and_then(|r| r.extra.as_mut())
        .and_then(|x| x.grequest.as_mut())
    {
        g.queried = Some(r);
    }
}

/// Runs the body of MPI function `name` that touches no state but datatypes (queries and
/// constructors), without the library lock: a user reduction function may call these.
/// Errors still go through `MPI_COMM_WORLD`'s handler, except inside a reduction function,
/// where the code is returned.
pub fn call_types(name: &'static str, body: impl FnOnce() -> MpiResult<()>) -> c_int {
    match body() {
        Ok(()) => error::SUCCESS,
        Err(e) => match Locked::acquire() {
            Some(mut l) => raise(&mut l, name, crate::handle::COMM_WORLD, e),
            None => error::code_for(e.class, format!("{name}: {}", e.msg)),
        },
    }
}

/// The error of a call made from inside a user reduction function.
pub fn reentered(name: &str) -> c_int {
    eprintln!("kestrel: {name} was called from inside a user reduction function; MPI calls other than datatype queries are not allowed there");
    error::code_for(
        error::ERR_OTHER,
        format!("{name}: called from inside a user reduction function (MPI_Op_create), where only datatype queries are allowed"),
    )
}

/// Routes `e`, raised by `name`, through the handler of its communicator.
pub fn raise(l: &mut Locked, name: &str, comm: c_int, e: MpiError) -> c_int {
    let comm = e.comm.unwrap_or(comm);
    let msg = format!("{name}: {}", e.msg);
    tracing::debug!(target: "abi", class = e.class, comm, "{msg}");
    let (handler, comm) = match l.phase() {
        Phase::Running(core) => {
            // A window's calls raise through the window's handler.
            let on_win = crate::win::slot(comm).and_then(|i| core.wins.get(i));
            let on_comm = comm_slot(comm).and_then(|i| core.comms.get(i));
            let (eh, on) = match (on_win, on_comm) {
                (Some(w), _) => (w.errhandler, comm),
                (None, Some(c)) => (c.errhandler, comm),
                (None, None) => (
                    core.comms
                        .get(0)
                        .map(|c| c.errhandler)
                        .unwrap_or(handle::ERRORS_ARE_FATAL),
                    handle::COMM_WORLD,
                ),
            };
            let h = match handle::decode(eh, Obj::Errhandler) {
                Some((Kind::Builtin, 1)) => Handler::Return,
                Some((Kind::Direct, i)) => match core.errhandlers.get(i) {
                    Some(f) => Handler::User(*f),
                    None => Handler::Fatal,
                },
                _ => Handler::Fatal,
            };
            (h, on)
        }
        // Before MPI_Init and after MPI_Finalize there is no handler but the default.
        Phase::Before | Phase::After => (Handler::Fatal, comm),
    };
    // MPI_ERR_IN_STATUS is returned as itself: programs compare against it, and the real
    // errors are in the statuses.
    let code = if let Some(c) = e.code {
        c
    } else if e.class == error::ERR_IN_STATUS {
        e.class
    } else {
        error::code_for(e.class, msg.clone())
    };
    match handler {
        Handler::Return => code,
        Handler::User(f) => {
            l.unlocked(|| callbacks::error_handler(f, comm, code));
            code
        }
        Handler::Fatal => fatal(l, e.class, &msg),
    }
}

/// `MPI_ERRORS_ARE_FATAL`: prints `msg` and stops the job with exit code `class`.
pub fn fatal(l: &mut Locked, class: c_int, msg: &str) -> ! {
    let text = format!("{msg} ({}; the error handler is MPI_ERRORS_ARE_FATAL, so the job stops; set MPI_ERRORS_RETURN with MPI_Comm_set_errhandler to handle errors yourself)", error::class_text(class));
    match l.phase() {
        Phase::Running(core) => {
            let rank = core.engine.rank();
            eprintln!("kestrel: rank {rank}: {text}");
            core.runtime.abort(class.max(1), &text)
        }
        _ => {
            eprintln!("kestrel: {text}");
            std::process::exit(class.max(1))
        }
    }
}
