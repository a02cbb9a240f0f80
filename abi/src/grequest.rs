//! Generalized requests (`MPI_Grequest_start`): operations the program runs itself and
//! reports through the wait and test family once it calls `MPI_Grequest_complete`.
//!
//! This module owns the three callbacks and the completion flag; the program's query
//! function fills the status when the request completes, its free function runs when the
//! request is freed, and its cancel function on `MPI_Cancel`. It never waits: a wait on a
//! generalized request progresses the engine until another thread completes it.
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
}

fn callback_error(what: &str, rc: c_int) -> MpiError {
    MpiError::new(
        error::class_of(rc).unwrap_or(error::ERR_OTHER),
        format!("the generalized request's {what} function returned error {rc}"),
    )
}

/// The status of a completed generalized request (its query function's), or `None` while
/// the program has not completed it.
pub fn query(g: &mut Grequest) -> MpiResult<Option<St>> {
    if !g.complete {
        return Ok(None);
    }
    let mut raw = MpiStatus::default();
    St::empty(crate::mem::ANY_SOURCE).encode(&mut raw, true);
    if let Some(q) = g.query {
        // SAFETY: `q` is the program's MPI_Grequest_query_function; `raw` is a status.
        let rc = unsafe { q(g.extra as *mut c_void, &mut raw) };
        if rc != error::SUCCESS {
            return Err(callback_error("query", rc));
        }
    }
    Ok(Some(St::decode(&raw)))
}

/// Runs the free function (once).
pub fn free(g: &mut Grequest) -> MpiResult<()> {
    if let Some(f) = g.free.take() {
        // SAFETY: the program's MPI_Grequest_free_function with its extra state.
        let rc = unsafe { f(g.extra as *mut c_void) };
        if rc != error::SUCCESS {
            return Err(callback_error("free", rc));
        }
    }
    Ok(())
}

/// Runs the cancel function.
pub fn cancel(g: &Grequest) -> MpiResult<()> {
    if let Some(f) = g.cancel {
        // SAFETY: the program's MPI_Grequest_cancel_function with its extra state.
        let rc = unsafe { f(g.extra as *mut c_void, c_int::from(g.complete)) };
        if rc != error::SUCCESS {
            return Err(callback_error("cancel", rc));
        }
    }
    Ok(())
}
