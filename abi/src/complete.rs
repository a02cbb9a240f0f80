//! The wait and test families, and request management (`MPI_Start`, `MPI_Cancel`,
//! `MPI_Request_free`, `MPI_Request_get_status`).
//!
//! This module owns MPI's completion rules over arrays of request handles: null and
//! inactive requests, freeing completed requests (persistent ones become inactive instead),
//! `MPI_UNDEFINED` when nothing is active, and `MPI_ERR_IN_STATUS` for multiple
//! completions with a failed member. The entry points hand it the handle arrays as slices
//! and write the statuses it returns; it never touches raw memory.

use std::os::raw::c_int;

use crate::blocking::Waiter;
use crate::error::{self, MpiError, MpiResult};
use crate::handle;
use crate::mem::St;
use crate::p2p::{self, ANY_SOURCE};
use crate::requests::{self, Persistent, ReqState};
use crate::state::{Core, Locked};

/// `MPI_UNDEFINED`.
pub use crate::mem::UNDEFINED;

/// A request's slot, or `None` for `MPI_REQUEST_NULL`.
fn slot_of(core: &Core, h: c_int) -> MpiResult<Option<u32>> {
    if h == handle::REQUEST_NULL {
        return Ok(None);
    }
    match requests::slot(h) {
        Some(i) if core.requests.get(i).is_some() => Ok(Some(i)),
        _ => Err(requests::bad_request(h)),
    }
}

/// Whether a slot holds a request that can complete (not inactive persistent).
fn live(core: &Core, i: u32) -> bool {
    core.requests
        .get(i)
        .is_some_and(|r| !matches!(r.state, ReqState::Inactive))
}

/// Polls slot `i` without progress.
fn poll_slot(core: &mut Core, i: u32) -> MpiResult<bool> {
    let Core {
        engine, requests, ..
    } = core;
    match requests.get_mut(i) {
        Some(r) => requests::poll(engine, r),
        None => Ok(true),
    }
}

/// Whether `h` is the shared request of sends that completed as they started
/// ([`handle::COMPLETED_SEND`]); if so it becomes `MPI_REQUEST_NULL` (its status is the
/// default one). The wait and test fast paths check this before any table lookup.
#[inline]
fn take_completed_send(h: &mut c_int) -> bool {
    let done = *h == handle::COMPLETED_SEND;
    if done {
        *h = handle::REQUEST_NULL;
    }
    done
}

/// The common case of [`poll_slot`] and [`finish`] in one table lookup: a plain send or
/// receive (nothing extra, not a collective) behind the valid handle `h`, whose engine
/// request `complete` tries to finish. `None`: not such a request (the general path decides);
/// `Some(None)`: still pending; `Some(Some((what complete reported, communicator)))`:
/// completed, its slot freed and `h` set to `MPI_REQUEST_NULL`.
#[inline(always)]
fn finish_plain_with<T>(
    core: &mut Core,
    h: &mut c_int,
    complete: impl FnOnce(&mut kestrel_pml::Engine, kestrel_pml::ReqId) -> Option<T>,
) -> Option<Option<(T, c_int)>> {
    let i = requests::slot(*h)?;
    let Core {
        engine, requests, ..
    } = core;
    let r = requests.get_mut(i)?;
    let (ReqState::Active(id), None) = (&r.state, &r.extra) else {
        return None;
    };
    if kestrel_pml::nbc::is_coll(*id) {
        return None;
    }
    let Some(done) = complete(engine, *id) else {
        return Some(None);
    };
    let comm = r.comm;
    // Checked above: an engine request and no extra record, so the slot owns nothing.
    requests.vacate(i);
    *h = handle::REQUEST_NULL;
    Some(Some((done, comm)))
}

/// [`finish_plain_with`] reporting the request's status.
#[inline]
fn finish_plain(core: &mut Core, h: &mut c_int) -> Option<Option<(St, c_int)>> {
    finish_plain_with(core, h, |e, id| e.try_complete(id))
        .map(|done| done.map(|(s, comm)| (requests::status_of(&core.engine, s), comm)))
}

/// Reports a completed slot: its status; frees it (or deactivates a persistent one) and
/// sets the handle to `MPI_REQUEST_NULL` when freed.
fn finish(core: &mut Core, h: &mut c_int, i: u32) -> St {
    if i == handle::COMPLETED_SEND_SLOT {
        // The shared record of sends that completed as they started: it stays.
        *h = handle::REQUEST_NULL;
        return St::default();
    }
    // The common record, a plain send or receive with nothing extra: its status, and the
    // slot freed.
    if let Some(r) = core.requests.get_mut(i) {
        if r.extra.is_none() {
            let st = requests::take_status(r);
            core.requests.remove(i);
            *h = handle::REQUEST_NULL;
            return st;
        }
    }
    if let Err(e) = crate::comm_create::settle(core, i) {
        if let Some(ReqState::Done(st)) = core.requests.get_mut(i).map(|r| &mut r.state) {
            st.error = error::code_for(e.class, e.msg.clone());
        }
    }
    let persistent = core
        .requests
        .get(i)
        .is_some_and(|r| r.persistent().is_some());
    let st = match core.requests.get_mut(i) {
        Some(r) => requests::take_status(r),
        None => St::empty(ANY_SOURCE),
    };
    if !persistent {
        if let Some(mut r) = core.requests.remove(i) {
            if let Some(f) = r
                .extra
                .as_mut()
                .and_then(|x| x.grequest.as_mut())
                .and_then(|g| g.free.take().map(|f| (f, g.extra)))
            {
                core.deferred_frees.push(f);
            }
        }
        *h = handle::REQUEST_NULL;
    }
    st
}

pub use crate::requests::status_error;

fn comm_of(core: &Core, i: u32) -> c_int {
    core.requests
        .get(i)
        .map(|r| r.comm)
        .unwrap_or(handle::COMM_WORLD)
}

/// `MPI_Wait`: the status and the request's communicator.
pub fn wait(l: &mut Locked, h: &mut c_int) -> MpiResult<(St, c_int)> {
    if take_completed_send(h) {
        return Ok((St::default(), handle::COMM_WORLD));
    }
    let core = l.core()?;
    let Some(i) = slot_of(core, *h)? else {
        return Ok((St::empty(ANY_SOURCE), handle::COMM_WORLD));
    };
    if !live(core, i) {
        return Ok((St::empty(ANY_SOURCE), comm_of(core, i)));
    }
    let mut w = Waiter::default();
    while !poll_slot(l.core()?, i)? {
        w.step(l)?;
    }
    let core = l.core()?;
    let comm = comm_of(core, i);
    Ok((finish(core, h, i), comm))
}

/// `MPI_Wait`'s common case: a plain send or receive (see [`finish_plain`]) while no
/// generalized request exists. `None`: not that case, and nothing was done (the caller takes
/// the general path). The request is never looked up twice per poll, and no handle array,
/// query pass or inactive-request rule is paid for.
pub fn wait_plain(l: &mut Locked, h: &mut c_int) -> Option<MpiResult<(St, c_int)>> {
    let core = l.core().ok()?;
    if core.grequests != 0 {
        return None;
    }
    if let Some(done) = finish_plain(core, h)? {
        return Some(Ok(done));
    }
    let mut w = Waiter::default();
    loop {
        if let Err(e) = w.step(l) {
            return Some(Err(e));
        }
        let core = match l.core() {
            Ok(c) => c,
            Err(e) => return Some(Err(e)),
        };
        match finish_plain(core, h) {
            Some(Some(done)) => return Some(Ok(done)),
            Some(None) => {}
            // Changed while other threads were let in (an erroneous concurrent use of the
            // handle): the general wait decides.
            None => return Some(wait(l, h)),
        }
    }
}

/// `MPI_Test`'s common case, as [`wait_plain`]: `None` when it does not apply (nothing was
/// done), else whether the request completed, with its status and communicator.
pub fn test_plain(core: &mut Core, h: &mut c_int) -> Option<Option<(St, c_int)>> {
    if core.grequests != 0 {
        return None;
    }
    if let Some(done) = finish_plain(core, h)? {
        return Some(Some(done));
    }
    core.progress();
    // Progress does not change what kind of request the handle names.
    finish_plain(core, h)
}

/// `MPI_Test`: the status if complete.
pub fn test(core: &mut Core, h: &mut c_int) -> MpiResult<Option<(St, c_int)>> {
    if take_completed_send(h) {
        return Ok(Some((St::default(), handle::COMM_WORLD)));
    }
    let Some(i) = slot_of(core, *h)? else {
        return Ok(Some((St::empty(ANY_SOURCE), handle::COMM_WORLD)));
    };
    if !live(core, i) {
        return Ok(Some((St::empty(ANY_SOURCE), comm_of(core, i))));
    }
    if !poll_slot(core, i)? {
        core.progress();
        if !poll_slot(core, i)? {
            return Ok(None);
        }
    }
    let comm = comm_of(core, i);
    Ok(Some((finish(core, h, i), comm)))
}

/// Statuses of a multiple completion, and the error to return (`MPI_ERR_IN_STATUS` when a
/// member failed; each status then carries its own class).
pub struct Many {
    /// One per request (empty statuses for null and inactive ones).
    pub statuses: Vec<St>,
    /// Set when a member failed.
    pub in_status: Option<MpiError>,
}

fn many(statuses: Vec<St>, comm: c_int) -> Many {
    let failed = statuses
        .iter()
        .filter(|s| s.error != error::SUCCESS)
        .count();
    many_failed(statuses, failed, comm)
}

fn many_failed(statuses: Vec<St>, failed: usize, comm: c_int) -> Many {
    Many {
        statuses,
        in_status: in_status_error(failed, comm),
    }
}

/// `MPI_ERR_IN_STATUS` when `failed` members of a multiple completion failed.
fn in_status_error(failed: usize, comm: c_int) -> Option<MpiError> {
    (failed > 0).then(|| {
        MpiError::new(
            error::ERR_IN_STATUS,
            format!("{failed} of the requests failed; see MPI_ERROR in their statuses"),
        )
        .on(comm)
    })
}

/// `MPI_Waitall`; `want_statuses`: the caller reports statuses (not `MPI_STATUSES_IGNORE`),
/// otherwise [`Many::statuses`] stays empty and nothing is allocated.
pub fn waitall(l: &mut Locked, hs: &mut [c_int], want_statuses: bool) -> MpiResult<Many> {
    let mut statuses = Vec::new();
    if want_statuses {
        statuses.reserve_exact(hs.len());
    }
    let in_status = waitall_each(l, hs, want_statuses, |_, st| statuses.push(st))?;
    Ok(Many {
        statuses,
        in_status,
    })
}

/// [`waitall`] handing each request's status to `report` (its index and status) as it
/// completes, in order, when `want_statuses`: `MPI_Waitall` writes them straight into the
/// program's array (callgrind, C `osu_bw -m 8:8` receiver: 736 -> 726 instructions per
/// message). Returns the `MPI_ERR_IN_STATUS` error when a member failed.
pub fn waitall_each(
    l: &mut Locked,
    hs: &mut [c_int],
    want_statuses: bool,
    mut report: impl FnMut(usize, St),
) -> MpiResult<Option<MpiError>> {
    let core = l.core()?;
    for &h in hs.iter() {
        if h != handle::COMPLETED_SEND {
            slot_of(core, h)?;
        }
    }
    // Requests mostly complete in the order they were started (a window of sends, or of
    // receives matched in order): go through them in order, reporting each as soon as it
    // completes, and make progress only at the first one still pending. A pass then costs
    // what completed since the last pass, not the whole array (which made a 64-request
    // window quadratic), and each request is looked up once.
    let mut comm = handle::COMM_WORLD;
    let mut failed = 0;
    let mut next = 0;
    let mut w = Waiter::default();
    loop {
        let core = l.core()?;
        while let Some(h) = hs.get_mut(next) {
            // Without statuses (`MPI_STATUSES_IGNORE`) only whether a request ended badly
            // (truncated, or its peer failed) leaves the engine: no status is built or moved
            // (callgrind, C `osu_bw` receiver without statuses: `MPI_Waitall` 465 -> 405
            // instructions per request, progress included).
            if !want_statuses && *h != handle::COMPLETED_SEND {
                match finish_plain_with(core, h, |e, id| e.try_complete_quiet(id)) {
                    Some(None) => break,
                    Some(Some((ended_badly, c))) => {
                        if ended_badly {
                            comm = c;
                            failed += 1;
                        }
                        next += 1;
                        continue;
                    }
                    None => {}
                }
            }
            let st = if take_completed_send(h) {
                St::default()
            } else if let Some(plain) = finish_plain(core, h) {
                let Some((st, c)) = plain else {
                    break;
                };
                if st.error != error::SUCCESS {
                    comm = c;
                    failed += 1;
                }
                st
            } else {
                match slot_of(core, *h)? {
                    Some(i) if live(core, i) => {
                        if !poll_slot(core, i)? {
                            break;
                        }
                        let c = comm_of(core, i);
                        let st = finish(core, h, i);
                        if st.error != error::SUCCESS {
                            comm = c;
                            failed += 1;
                        }
                        st
                    }
                    _ => St::empty(ANY_SOURCE),
                }
            };
            if want_statuses {
                report(next, st);
            }
            next += 1;
        }
        if next == hs.len() {
            break;
        }
        w.step(l)?;
    }
    Ok(in_status_error(failed, comm))
}

/// `MPI_Testall`: `None` when not all are complete (then none is reported).
pub fn testall(l: &mut Locked, hs: &mut [c_int], want_statuses: bool) -> MpiResult<Option<Many>> {
    let core = l.core()?;
    let slots: Vec<Option<u32>> = hs
        .iter()
        .map(|&h| slot_of(core, h))
        .collect::<MpiResult<_>>()?;
    core.progress();
    for &i in slots.iter().flatten() {
        if live(core, i) && !poll_slot(core, i)? {
            return Ok(None);
        }
    }
    waitall(l, hs, want_statuses).map(Some)
}

/// `MPI_Waitany` (`block`) and `MPI_Testany`: the index completed (`MPI_UNDEFINED` when no
/// request is active) and its status; `None` from a test that found nothing complete.
pub fn any(l: &mut Locked, hs: &mut [c_int], block: bool) -> MpiResult<Option<(c_int, St, c_int)>> {
    let core = l.core()?;
    let slots: Vec<Option<u32>> = hs
        .iter()
        .map(|&h| slot_of(core, h))
        .collect::<MpiResult<_>>()?;
    if !slots.iter().flatten().any(|&i| live(core, i)) {
        return Ok(Some((UNDEFINED, St::empty(ANY_SOURCE), handle::COMM_WORLD)));
    }
    let mut w = Waiter::default();
    let mut progressed = false;
    loop {
        let core = l.core()?;
        for (k, s) in slots.iter().enumerate() {
            if let Some(i) = *s {
                if live(core, i) && poll_slot(core, i)? {
                    let comm = comm_of(core, i);
                    let st = finish(core, &mut hs[k], i);
                    return Ok(Some((k as c_int, st, comm)));
                }
            }
        }
        if !block {
            if progressed {
                return Ok(None);
            }
            core.progress();
            progressed = true;
            continue;
        }
        w.step(l)?;
    }
}

/// `MPI_Waitsome` (`block`) and `MPI_Testsome`: indices completed with their statuses;
/// `None` when no request is active (`outcount = MPI_UNDEFINED`).
pub fn some(
    l: &mut Locked,
    hs: &mut [c_int],
    block: bool,
) -> MpiResult<Option<(Vec<c_int>, Many)>> {
    let core = l.core()?;
    let slots: Vec<Option<u32>> = hs
        .iter()
        .map(|&h| slot_of(core, h))
        .collect::<MpiResult<_>>()?;
    if !slots.iter().flatten().any(|&i| live(core, i)) {
        return Ok(None);
    }
    let mut w = Waiter::default();
    let mut progressed = false;
    loop {
        let core = l.core()?;
        let mut done = Vec::new();
        for (k, s) in slots.iter().enumerate() {
            if let Some(i) = *s {
                if live(core, i) && poll_slot(core, i)? {
                    done.push((k, i));
                }
            }
        }
        if !done.is_empty() || (!block && progressed) {
            let mut comm = handle::COMM_WORLD;
            let mut idx = Vec::with_capacity(done.len());
            let mut sts = Vec::with_capacity(done.len());
            for (k, i) in done {
                let c = comm_of(core, i);
                let st = finish(core, &mut hs[k], i);
                if st.error != error::SUCCESS {
                    comm = c;
                }
                idx.push(k as c_int);
                sts.push(st);
            }
            return Ok(Some((idx, many(sts, comm))));
        }
        if block {
            w.step(l)?;
        } else {
            core.progress();
            progressed = true;
        }
    }
}

/// `MPI_Request_get_status`: the status if complete, without freeing the request.
pub fn get_status(core: &mut Core, h: c_int) -> MpiResult<Option<St>> {
    let Some(i) = slot_of(core, h)? else {
        return Ok(Some(St::empty(ANY_SOURCE)));
    };
    if !live(core, i) {
        return Ok(Some(St::empty(ANY_SOURCE)));
    }
    if !poll_slot(core, i)? {
        core.progress();
        if !poll_slot(core, i)? {
            return Ok(None);
        }
    }
    Ok(match core.requests.get(i).map(|r| &r.state) {
        Some(ReqState::Done(st)) => Some(*st),
        _ => Some(St::empty(ANY_SOURCE)),
    })
}

/// `MPI_Cancel`: receives not yet matched are cancelled; sends cannot be (MPI allows
/// that: their status then reports "not cancelled").
pub fn cancel(core: &mut Core, h: c_int) -> MpiResult<()> {
    let i = slot_of(core, h)?
        .ok_or_else(|| MpiError::new(error::ERR_REQUEST, "the request is MPI_REQUEST_NULL"))?;
    let Core {
        engine, requests, ..
    } = core;
    if let Some(r) = requests.get_mut(i) {
        if let (ReqState::Active(id), true) = (&r.state, r.recv) {
            engine.cancel(*id, r.ctx);
        }
    }
    Ok(())
}

/// `MPI_Request_free`: a running request completes on its own and is then forgotten.
pub fn free(core: &mut Core, h: &mut c_int) -> MpiResult<()> {
    let i = slot_of(core, *h)?
        .ok_or_else(|| MpiError::new(error::ERR_REQUEST, "the request is MPI_REQUEST_NULL"))?;
    if i == handle::COMPLETED_SEND_SLOT {
        *h = handle::REQUEST_NULL;
        return Ok(());
    }
    let pending_grequest = core
        .requests
        .get_mut(i)
        .and_then(|r| r.extra.as_mut())
        .and_then(|x| x.grequest.as_mut())
        .filter(|g| !g.complete);
    if let Some(g) = pending_grequest {
        // The program completes it later through a copy of the handle (MPI 3.1 §12.2).
        g.freed = true;
        *h = handle::REQUEST_NULL;
        return Ok(());
    }
    if let Some(mut r) = core.requests.remove(i) {
        if r.is_active() {
            core.detached.push(r);
        } else if let Some(f) = r
            .extra
            .as_mut()
            .and_then(|x| x.grequest.as_mut())
            .and_then(|g| g.free.take().map(|f| (f, g.extra)))
        {
            core.deferred_frees.push(f);
        } else if let Some(Persistent::Coll { id }) = r.persistent() {
            core.engine.coll_free(*id);
        }
    }
    *h = handle::REQUEST_NULL;
    Ok(())
}

/// `MPI_Start`.
pub fn start(core: &mut Core, h: c_int) -> MpiResult<()> {
    let i = slot_of(core, h)?
        .ok_or_else(|| MpiError::new(error::ERR_REQUEST, "the request is MPI_REQUEST_NULL"))?;
    let (p, comm) = match core.requests.get(i) {
        Some(r) => match (r.persistent(), &r.state) {
            (Some(p), ReqState::Inactive) => (p.clone(), r.comm),
            (Some(_), _) => {
                return Err(MpiError::new(
                    error::ERR_REQUEST,
                    "the persistent request is still active; complete it (MPI_Wait, MPI_Test) before starting it again",
                ))
            }
            (None, _) => {
                return Err(MpiError::new(
                    error::ERR_REQUEST,
                    format!("{h:#x} is not a persistent request (MPI_Send_init, MPI_Recv_init, ...)"),
                ))
            }
        },
        None => return Err(requests::bad_request(h)),
    };
    if let Persistent::Coll { id } = p {
        let Core {
            engine, requests, ..
        } = core;
        let r = requests
            .get_mut(i)
            .ok_or_else(|| requests::bad_request(h))?;
        if let Some(plan) = r.extra.as_mut().and_then(|x| x.coll.as_mut()) {
            plan.fill()?;
        }
        engine
            .coll_start(id)
            .map_err(error::pml(error::ERR_REQUEST))?;
        r.state = ReqState::Active(id);
        return Ok(());
    }
    let mut fresh = match &p {
        Persistent::Send {
            mode,
            region,
            peer,
            tag,
        } => p2p::start_send(core, comm, region, *peer, *tag, *mode)?,
        Persistent::Recv { region, peer, tag } => p2p::start_recv(core, comm, region, *peer, *tag)?,
        Persistent::Coll { .. } => unreachable!("started above"),
        Persistent::Psend { partitions, .. } => {
            let mut r = requests::ReqRec::new(comm, core.comm(comm)?.ctx, false);
            r.state = ReqState::Partitioned;
            r.extra().ready = vec![false; *partitions];
            r
        }
        Persistent::Precv {
            region, peer, tag, ..
        } => p2p::start_recv(core, comm, region, *peer, *tag)?,
    };
    fresh.extra().persistent = Some(p);
    if let Some(r) = core.requests.get_mut(i) {
        *r = fresh;
    }
    Ok(())
}
