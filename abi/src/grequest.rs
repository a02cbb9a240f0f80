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
    /// The program's `extra_state`, and the callbacks' language.
    pub extra: Extra,
    /// `MPI_Grequest_complete` was called.
    pub complete: bool,
    /// What the query function said, once it ran.
    pub queried: Option<MpiResult<St>>,
    /// `MPI_Request_free` was called before completion: the handle lives on only for
    /// `MPI_Grequest_complete`, which releases it and runs the free function.
    pub freed: bool,
}

/// What the callbacks are called with: the program's `extra_state`, and whether they are
/// Fortran subroutines (started through MPICH's Fortran library, which then calls
/// `MPII_Grequest_set_lang_f77`): those take every argument by reference and return
/// their error in a last `ierror` argument.
#[derive(Debug, Clone, Copy)]
pub struct Extra {
    /// `extra_state` (for Fortran, the address of the program's variable).
    pub state: usize,
    /// Fortran callbacks.
    pub fortran: bool,
}

/// `SUBROUTINE QUERY_FN(EXTRA_STATE, STATUS, IERROR)`.
type FortranQuery = unsafe extern "C" fn(*mut c_void, *mut MpiStatus, *mut c_int);
/// `SUBROUTINE FREE_FN(EXTRA_STATE, IERROR)`.
type FortranFree = unsafe extern "C" fn(*mut c_void, *mut c_int);
/// `SUBROUTINE CANCEL_FN(EXTRA_STATE, COMPLETE, IERROR)` (`COMPLETE` a default LOGICAL).
type FortranCancel = unsafe extern "C" fn(*mut c_void, *mut c_int, *mut c_int);

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
pub fn run(q: Option<QueryFn>, extra: Extra) -> MpiResult<St> {
    let mut raw = MpiStatus::default();
    St::empty(crate::mem::ANY_SOURCE).encode(&mut raw, true);
    if let Some(q) = q {
        let rc = if extra.fortran {
            let mut rc = error::SUCCESS;
            // SAFETY: the program registered a Fortran query subroutine (see [`Extra`]);
            // a Fortran status array has the C status's layout (five integers).
            unsafe {
                let f: FortranQuery = std::mem::transmute(q);
                f(extra.state as *mut c_void, &mut raw, &mut rc);
            }
            rc
        } else {
            // SAFETY: `q` is the program's MPI_Grequest_query_function; `raw` is a status.
            unsafe { q(extra.state as *mut c_void, &mut raw) }
        };
        if rc != error::SUCCESS {
            return Err(callback_error("query", rc));
        }
    }
    Ok(St::decode(&raw))
}

/// Runs a free function (the library lock released).
pub fn run_free(f: FreeFn, extra: Extra) -> MpiResult<()> {
    let rc = if extra.fortran {
        let mut rc = error::SUCCESS;
        // SAFETY: a Fortran free subroutine (see [`Extra`]).
        unsafe {
            let f: FortranFree = std::mem::transmute(f);
            f(extra.state as *mut c_void, &mut rc);
        }
        rc
    } else {
        // SAFETY: the program's MPI_Grequest_free_function with its extra state.
        unsafe { f(extra.state as *mut c_void) }
    };
    if rc != error::SUCCESS {
        return Err(callback_error("free", rc));
    }
    Ok(())
}

/// Runs a cancel function (the library lock released).
pub fn run_cancel(f: CancelFn, extra: Extra, complete: bool) -> MpiResult<()> {
    let rc = if extra.fortran {
        let (mut rc, mut logical) = (error::SUCCESS, c_int::from(complete));
        // SAFETY: a Fortran cancel subroutine (see [`Extra`]); gfortran's default LOGICAL
        // is a 4-byte integer, 1 for .TRUE.
        unsafe {
            let f: FortranCancel = std::mem::transmute(f);
            f(extra.state as *mut c_void, &mut logical, &mut rc);
        }
        rc
    } else {
        // SAFETY: the program's MPI_Grequest_cancel_function with its extra state.
        unsafe { f(extra.state as *mut c_void, c_int::from(complete)) }
    };
    if rc != error::SUCCESS {
        return Err(callback_error("cancel", rc));
    }
    Ok(())
}
