//! The wait and test families (`MPI_Wait`, `MPI_Test` and their `all`/`any`/`some` forms):
//! the entry points hand the handle arrays to `crate::complete` and write what it returns.

use std::os::raw::c_int;

use crate::api;
use crate::complete::{self, UNDEFINED};
use crate::error::{self, MpiError};
use crate::handle;
use crate::mem::{self, MpiStatus};

mpi_fn! {
    /// `MPI_Wait`.
    fn MPI_Wait / PMPI_Wait(request: *mut c_int, status: *mut MpiStatus) -> c_int {
        // A send that left as it started (the commonest request there is) has nothing to wait
        // for and no state: reported as the general path would, without the lock.
        // SAFETY: a non-null in-out parameter; status pointer or MPI_STATUS_IGNORE (contract).
        if !request.is_null() && unsafe { all_sent_at_once(request, 1, status) } {
            return error::SUCCESS;
        }
        // A plain send or receive: waited for without the general body (callgrind, Irecv +
        // Wait of 8 bytes: see `complete::wait_plain`).
        if !request.is_null() {
            // SAFETY: a non-null in-out parameter (contract).
            let mut h = unsafe { *request };
            let plain = api::call_plain("MPI_Wait", handle::COMM_WORLD, |l| {
                let r = complete::wait_plain(l, &mut h)?;
                Some(r.and_then(|(st, comm)| {
                    // SAFETY: in-out parameter; status pointer or MPI_STATUS_IGNORE (contract).
                    unsafe {
                        *request = h;
                        mem::put_status(status, &st, false);
                    }
                    complete::status_error(&st, comm)
                }))
            });
            if let Some(code) = plain {
                return code;
            }
        }
        api::call("MPI_Wait", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let mut h = unsafe { mem::get(request, "request") }?;
            api::query_grequests(l, &[h])?;
            let (st, comm) = complete::wait(l, &mut h)?;
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(request, h, "request")?;
                mem::put_status(status, &st, false);
            }
            complete::status_error(&st, comm)
        })
    }
}

mpi_fn! {
    /// `MPI_Test`.
    fn MPI_Test / PMPI_Test(request: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        // As in `MPI_Wait`: a send that left as it started is complete, without the lock.
        // SAFETY: non-null in-out and out parameters; status pointer or MPI_STATUS_IGNORE
        // (contract).
        if !request.is_null() && !flag.is_null() && unsafe { all_sent_at_once(request, 1, status) } {
            // SAFETY: a non-null out-parameter (contract).
            unsafe { *flag = 1 };
            return error::SUCCESS;
        }
        // A plain send or receive, tested without the general body.
        if !request.is_null() && !flag.is_null() {
            // SAFETY: a non-null in-out parameter (contract).
            let mut h = unsafe { *request };
            let plain = api::call_plain("MPI_Test", handle::COMM_WORLD, |l| {
                let done = complete::test_plain(l.core().ok()?, &mut h)?;
                // SAFETY: non-null in-out and out parameters (contract).
                unsafe {
                    *request = h;
                    *flag = c_int::from(done.is_some());
                }
                Some(match done {
                    Some((st, comm)) => {
                        // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                        unsafe { mem::put_status(status, &st, false) };
                        complete::status_error(&st, comm)
                    }
                    None => Ok(()),
                })
            });
            if let Some(code) = plain {
                return code;
            }
        }
        api::call("MPI_Test", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let mut h = unsafe { mem::get(request, "request") }?;
            api::query_grequests(l, &[h])?;
            let done = complete::test(l.core()?, &mut h)?;
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(request, h, "request")?;
                mem::put(flag, c_int::from(done.is_some()), "flag")?;
            }
            if let Some((st, comm)) = done {
                // SAFETY: status pointer or MPI_STATUS_IGNORE (contract).
                unsafe { mem::put_status(status, &st, false) };
                complete::status_error(&st, comm)?;
            }
            Ok(())
        })
    }
}

/// When all `count` handles at `requests` are sends that completed as they started
/// (`handle::COMPLETED_SEND`), reports them (`MPI_REQUEST_NULL`, empty statuses) and says so;
/// otherwise changes nothing. Such handles have no state, so this takes no lock. With `count`
/// 1 it is `MPI_Wait`'s and `MPI_Test`'s case too (`MPI_STATUS_IGNORE` is
/// `MPI_STATUSES_IGNORE`).
///
/// # Safety
/// `requests` holds `count` handles; `statuses` holds `count` entries or ignores them.
unsafe fn all_sent_at_once(requests: *mut c_int, count: usize, statuses: *mut MpiStatus) -> bool {
    // SAFETY: `count` handles (caller).
    let hs = unsafe { std::slice::from_raw_parts_mut(requests, count) };
    if hs.iter().any(|&h| h != handle::COMPLETED_SEND) {
        return false;
    }
    let empty = mem::St::default();
    for (i, h) in hs.iter_mut().enumerate() {
        *h = handle::REQUEST_NULL;
        // SAFETY: entry `i` exists or the array is ignored (caller).
        unsafe { mem::put_status_at(statuses, i, &empty, false) };
    }
    true
}

/// Writes the statuses of a multiple completion and returns its error.
///
/// # Safety
/// `statuses` is `MPI_STATUSES_IGNORE` or holds `m.statuses.len()` statuses.
unsafe fn report_many(statuses: *mut MpiStatus, m: &complete::Many) -> Result<(), MpiError> {
    let with_error = m.in_status.is_some();
    for (i, st) in m.statuses.iter().enumerate() {
        // SAFETY: entry `i` exists (caller).
        unsafe { mem::put_status_at(statuses, i, st, with_error) };
    }
    match &m.in_status {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

mpi_fn! {
    /// `MPI_Waitall`.
    fn MPI_Waitall / PMPI_Waitall(count: c_int, requests: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        // A window of sends that all left as they started (as `MPI_Wait` does for one).
        // SAFETY: `requests` holds `count` handles and `statuses` as many entries or ignores
        // them (contract).
        if count > 0 && !requests.is_null() && unsafe { all_sent_at_once(requests, count as usize, statuses) } {
            return error::SUCCESS;
        }
        api::call("MPI_Waitall", handle::COMM_WORLD, |l| {
            // SAFETY: `requests` holds `count` handles (contract).
            let hs = unsafe { mem::slice_mut(requests, mem::count(count)?, "array_of_requests") }?;
            api::query_grequests(l, hs)?;
            let want = !mem::ignores_status(statuses);
            let mut failures = Vec::new();
            let in_status = complete::waitall_each(l, hs, want, |i, st| {
                if st.error != error::SUCCESS {
                    failures.push((i, st.error));
                }
                // SAFETY: `statuses` holds `count` entries (contract), `i` is below it.
                unsafe { mem::put_status_at(statuses, i, &st, false) };
            })?;
            let Some(e) = in_status else { return Ok(()) };
            // MPI_ERR_IN_STATUS: every status carries its own error.
            for i in 0..hs.len() {
                let code = failures.iter().find(|f| f.0 == i).map_or(error::SUCCESS, |f| f.1);
                // SAFETY: as above.
                unsafe { mem::put_status_error_at(statuses, i, code) };
            }
            Err(e)
        })
    }
}

mpi_fn! {
    /// `MPI_Testall`.
    fn MPI_Testall / PMPI_Testall(count: c_int, requests: *mut c_int, flag: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        api::call("MPI_Testall", handle::COMM_WORLD, |l| {
            // SAFETY: `requests` holds `count` handles (contract).
            let hs = unsafe { mem::slice_mut(requests, mem::count(count)?, "array_of_requests") }?;
            api::query_grequests(l, hs)?;
            let m = complete::testall(l, hs, !mem::ignores_status(statuses))?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(m.is_some()), "flag") }?;
            match m {
                // SAFETY: `statuses` holds `count` entries or ignores them (contract).
                Some(m) => unsafe { report_many(statuses, &m) },
                None => Ok(()),
            }
        })
    }
}

fn any(
    name: &'static str,
    count: c_int,
    requests: *mut c_int,
    index: *mut c_int,
    flag: *mut c_int,
    status: *mut MpiStatus,
    block: bool,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        // SAFETY: `requests` holds `count` handles (contract of the calling entry point).
        let hs = unsafe { mem::slice_mut(requests, mem::count(count)?, "array_of_requests") }?;
        api::query_grequests(l, hs)?;
        let found = complete::any(l, hs, block)?;
        if !block {
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }?;
        }
        match found {
            Some((i, st, comm)) => {
                // SAFETY: out-parameters (contract).
                unsafe {
                    mem::put(index, i, "index")?;
                    mem::put_status(status, &st, false);
                }
                complete::status_error(&st, comm)
            }
            // SAFETY: out-parameter (contract).
            None => unsafe { mem::put(index, UNDEFINED, "index") },
        }
    })
}

mpi_fn! {
    /// `MPI_Waitany`.
    fn MPI_Waitany / PMPI_Waitany(count: c_int, requests: *mut c_int, index: *mut c_int, status: *mut MpiStatus) -> c_int {
        any("MPI_Waitany", count, requests, index, std::ptr::null_mut(), status, true)
    }
}

mpi_fn! {
    /// `MPI_Testany`.
    fn MPI_Testany / PMPI_Testany(count: c_int, requests: *mut c_int, index: *mut c_int, flag: *mut c_int, status: *mut MpiStatus) -> c_int {
        any("MPI_Testany", count, requests, index, flag, status, false)
    }
}

fn some(
    name: &'static str,
    incount: c_int,
    requests: *mut c_int,
    outcount: *mut c_int,
    indices: *mut c_int,
    statuses: *mut MpiStatus,
    block: bool,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        let n = mem::count(incount)?;
        // SAFETY: `requests` holds `incount` handles (contract of the calling entry point).
        let hs = unsafe { mem::slice_mut(requests, n, "array_of_requests") }?;
        api::query_grequests(l, hs)?;
        match complete::some(l, hs, block)? {
            // SAFETY: out-parameter (contract).
            None => unsafe { mem::put(outcount, UNDEFINED, "outcount") },
            Some((idx, m)) => {
                // SAFETY: `indices` holds up to `incount` ints (contract).
                let out = unsafe { mem::slice_mut(indices, idx.len(), "array_of_indices") }?;
                out.copy_from_slice(&idx);
                // SAFETY: out-parameter; `statuses` holds up to `incount` entries (contract).
                unsafe {
                    mem::put(outcount, idx.len() as c_int, "outcount")?;
                    report_many(statuses, &m)
                }
            }
        }
    })
}

mpi_fn! {
    /// `MPI_Waitsome`.
    fn MPI_Waitsome / PMPI_Waitsome(incount: c_int, requests: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        some("MPI_Waitsome", incount, requests, outcount, indices, statuses, true)
    }
}

mpi_fn! {
    /// `MPI_Testsome`.
    fn MPI_Testsome / PMPI_Testsome(incount: c_int, requests: *mut c_int, outcount: *mut c_int, indices: *mut c_int, statuses: *mut MpiStatus) -> c_int {
        some("MPI_Testsome", incount, requests, outcount, indices, statuses, false)
    }
}
