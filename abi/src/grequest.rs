//! Generalized requests (`MPI_Grequest_start`): operations the program runs itself and
//! reports through the wait and test family once it calls `MPI_Grequest_complete`.
//!
//! This module owns the three callbacks and the completion flag; the program's query
//! function fills the status when the request completes, its free function runs when the
//! request is freed, and its cancel function on `MPI_Cancel`. The callbacks may call MPI,
//! so they never run with the library lock held: the wait and test entry points run the
//! query functions of completed requests before looking at them (`api::query_grequests`
//! and [`run`]), and free functions after (`Core::deferred_frees`). It never waits.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_void};

use crate::error::{self, MpiError, MpiResult};
use crate::mem::{MpiStatus, St};

/// `MPI_Grequest_query_function`.
pub type QueryFn = unsafe extern "C" fn(*mut c_void, *mut MpiStatus) -> c_int;
/// `MPI_Grequest_free_function`.
pub type FreeFn = unsafe extern "C" fn(*mut c_void) -> c_int;
/// `MPI_Grequest_cancel_function`.
pub type CancelFn = unsafe extern "C" fn(*mut c_void, c_int) -> c_int;

/// A generalized request's callbacks and state.
#[derive(Debug)]
pub struct Grequest {
    /// Fills the status at completion.
    pub query: Option<QueryFn>,
    /// Runs when the request is freed.
    pub free: Option<FreeFn>,
    /// Runs on `MPI_Cancel`.
    pub cancel: Option<CancelFn>,
    /// The program's `extra_state`.
    pub extra: usize,
    /// `MPI_Grequest_complete` was called.
    pub complete: bool,
    /// What the query function said, once it ran.
    pub queried: Option<MpiResult<St>>,
    /// `MPI_Request_free` was called before completion: the handle lives on only for
    /// `MPI_Grequest_complete`, which releases it and runs the free function.
    pub freed: bool,
}

fn callback_error(what: &str, rc: c_int) -> MpiError {
    MpiError::new(
        error::class_of(rc).unwrap_or(error::ERR_OTHER),
        format!("the generalized request's {what} function returned error {rc}"),
    )
}

/// The status of a completed generalized request (its query function's, which the entry
/// point ran), or `None` while the program has not completed it.
pub fn query(g: &mut Grequest) -> MpiResult<Option<St>> {
    match &g.queried {
        Some(r) if g.complete => r.clone().map(Some),
        _ => Ok(None),
    }
}

/// Runs a query function (the library lock released: it may call MPI).
pub fn run(q: Option<QueryFn>, extra: usize) -> MpiResult<St> {
    let mut raw = MpiStatus::default();
    St::empty(crate::mem::ANY_SOURCE).encode(&mut raw, true);
    if let Some(q) = q {
        // SAFETY: `q` is the program's MPI_Grequest_query_function; `raw` is a status.
        let rc = unsafe { q(extra as *mut c_void, &mut raw) };
        if rc != error::SUCCESS {
            return Err(callback_error("query", rc));
        }
    }
    Ok(St::decode(&raw))
}

/// Runs a free function (the library lock released).
pub fn run_free(f: FreeFn, extra: usize) -> MpiResult<()> {
    // SAFETY: the program's MPI_Grequest_free_function with its extra state.
    let rc = unsafe { f(extra as *mut c_void) };
    if rc != error::SUCCESS {
        return Err(callback_error("free", rc));
    }
    Ok(())
}

/// Runs a cancel function (the library lock released).
pub fn run_cancel(f: CancelFn, extra: usize, complete: bool) -> MpiResult<()> {
    // SAFETY: the program's MPI_Grequest_cancel_function with its extra state.
    let rc = unsafe { f(extra as *mut c_void, c_int::from(complete)) };
    if rc != error::SUCCESS {
        return Err(callback_error("cancel", rc));
    }
    Ok(())
}
