//! Immediate (nonblocking) operations and the scopes that keep their buffers alive.
//!
//! A request borrows its buffer for the scope's lifetime `'a`, and the scope, when it ends,
//! waits for every request started in it that was not completed, even one that was leaked
//! with `mem::forget`. So the messaging layer never touches a buffer after its owner could
//! have freed it. A request returned out of the scope's closure is spent once the scope has
//! ended: dropping it does nothing, and [`Request::wait`] and [`Request::test`] panic.
//!
//! ```no_run
//! # use kestrel::{Communicator, request};
//! # let universe = kestrel::initialize().unwrap();
//! # let world = universe.world();
//! let data = [1u64, 2, 3];
//! let mut back = [0u64; 3];
//! request::scope(|scope| {
//!     let send = world.process_at_rank(1).immediate_send(scope, &data[..]);
//!     let recv = world.process_at_rank(1).immediate_receive_into(scope, &mut back[..]);
//!     send.wait();
//!     recv.wait();
//! });
//! ```

use std::cell::{Cell, RefCell};
use std::marker::PhantomData;
use std::rc::Rc;

use kestrel_pml::buf::UserBuf;
use kestrel_pml::ReqId;

use crate::{Inner, Status};

/// A scope for immediate operations; see [`scope`].
pub struct LocalScope<'a> {
    started: RefCell<Vec<(Rc<Inner>, ReqId)>>,
    // Invariant in 'a, so buffers borrowed for 'a outlive the scope itself.
    _invariant: PhantomData<std::cell::Cell<&'a ()>>,
}

impl std::fmt::Debug for LocalScope<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "LocalScope({} requests)", self.started.borrow().len())
    }
}

thread_local! {
    /// The request list of the last scope that ended on this thread, emptied, for the next
    /// scope: a scope started afresh regrows its list five times on the way to 64 requests
    /// (about 20 instructions per request of the Rust `osu_bw` receiver). Always empty when
    /// stored, so it keeps no universe alive.
    static SPARE_LIST: Cell<Vec<(Rc<Inner>, ReqId)>> = const { Cell::new(Vec::new()) };
}

/// Runs `f` with a scope for immediate operations; returns once every request started in it
/// has completed.
pub fn scope<'a, F, R>(f: F) -> R
where
    F: FnOnce(&LocalScope<'a>) -> R,
{
    let s = LocalScope {
        started: RefCell::new(SPARE_LIST.try_with(Cell::take).unwrap_or_default()),
        _invariant: PhantomData,
    };
    f(&s)
}

impl Drop for LocalScope<'_> {
    fn drop(&mut self) {
        let mut list = std::mem::take(self.started.get_mut());
        for (inner, id) in list.drain(..) {
            finish_unless_freed(&inner, id);
        }
        let _ = SPARE_LIST.try_with(|spare| spare.set(list));
    }
}

/// An operation in flight. Complete it with [`Request::wait`] or [`Request::test`]; dropping
/// it waits.
#[must_use = "a request must be waited for (dropping it waits)"]
pub struct Request<'a> {
    inner: Rc<Inner>,
    id: ReqId,
    ctx: u16,
    done: bool,
    _buffer: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Request({:#x})", self.id)
    }
}

impl<'a> Request<'a> {
    /// Blocks until the operation completes.
    ///
    /// # Panics
    /// When the request was returned out of the [`scope`] it was started in: the scope
    /// completed it when it ended and its status is gone (waiting would never end).
    pub fn wait(mut self) -> Status {
        self.complete()
    }

    /// [`Request::wait`] in place: the request is spent afterwards (`done`), and dropping it
    /// only releases the universe. An eager send completed when it started ([`DONE`]) and
    /// answers here without touching the engine: `wait_all` over a window of 64 sends cost
    /// 31 ns per request when each one borrowed the engine and was moved into `wait`, and
    /// costs 6 ns this way.
    ///
    /// [`DONE`]: kestrel_pml::engine::DONE
    #[inline]
    fn complete(&mut self) -> Status {
        self.done = true;
        if self.id == kestrel_pml::engine::DONE {
            return Status::from_pml(kestrel_pml::Status::default());
        }
        // Complete at once (the common case), or wait; a freed request is only looked for on
        // the way to waiting, so the common case pays nothing for it.
        let done = self.inner.engine.borrow_mut().try_complete(self.id);
        let st = match done {
            Some(st) => st,
            None => {
                self.check_not_escaped("wait");
                self.inner.engine.borrow_mut().wait(self.id)
            }
        };
        check_ended(&self.inner, self.id, st);
        Status::from_pml(st)
    }

    /// Completes the operation if it is done (with one round of progress), else gives the
    /// request back.
    ///
    /// # Panics
    /// As [`Request::wait`], for a request returned out of its scope.
    pub fn test(mut self) -> Result<Status, Self> {
        let r = self.inner.engine.borrow_mut().test(self.id);
        match r {
            Some(s) => {
                self.done = true;
                check_ended(&self.inner, self.id, s);
                Ok(Status::from_pml(s))
            }
            None => {
                // A freed request never tests complete: say why rather than spin for ever.
                self.check_not_escaped("test");
                Err(self)
            }
        }
    }

    /// Panics, naming `what`, when the scope this request was started in has completed and
    /// freed it already (the request was returned out of the scope's closure).
    fn check_not_escaped(&self, what: &str) {
        if self.inner.engine.borrow().is_freed(self.id) {
            panic!(
                "kestrel: Request::{what} on a request that left the request::scope it was \
                 started in: the scope completed it when it ended, and its status is gone; \
                 wait for requests inside their scope"
            );
        }
    }

    /// Cancels a receive that has not matched yet; wait for the request afterwards (its
    /// status says [`Status::is_cancelled`]).
    pub fn cancel(&self) -> bool {
        self.inner.engine.borrow_mut().cancel(self.id, self.ctx)
    }
}

impl Drop for Request<'_> {
    fn drop(&mut self) {
        if !self.done {
            finish_unless_freed(&self.inner, self.id);
        }
    }
}

/// Waits for `id` and frees it, unless it is freed already: a request the caller waited for
/// (at a scope's end), or one returned out of its scope, which the scope finished. One lookup
/// for the freed ones; the rest complete or wait in [`Engine::wait`], and one that ended
/// badly stops the job as its wait would have (nobody else will see its status).
///
/// [`Engine::wait`]: kestrel_pml::Engine::wait
fn finish_unless_freed(inner: &Inner, id: ReqId) {
    let st = {
        let mut e = inner.engine.borrow_mut();
        if e.is_freed(id) {
            return;
        }
        e.wait(id)
    };
    check_ended(inner, id, st);
}

/// Waits for every request; statuses in the same order.
pub fn wait_all(mut requests: Vec<Request<'_>>) -> Vec<Status> {
    // In place: moving each request into `Request::wait` (and collecting in place over the
    // requests' vector) cost about three times as much per request.
    requests.iter_mut().map(Request::complete).collect()
}

/// Completes every request that is done (after one round of progress); returns the indices
/// and statuses completed and keeps the others in `requests` (`MPI_Testsome`).
pub fn test_some(requests: &mut Vec<Request<'_>>) -> Vec<(usize, Status)> {
    if let Some(r) = requests.first() {
        r.inner.engine.borrow_mut().progress();
    }
    let mut done = Vec::new();
    let mut i = 0;
    let mut original = 0;
    while i < requests.len() {
        let complete = requests[i]
            .inner
            .engine
            .borrow()
            .is_complete(requests[i].id);
        if complete {
            let r = requests.remove(i);
            done.push((original, r.wait()));
        } else {
            i += 1;
        }
        original += 1;
    }
    done
}

/// Waits until at least one request completes; returns those completed (`MPI_Waitsome`), with
/// indices into `requests` as it was on entry.
pub fn wait_some(requests: &mut Vec<Request<'_>>) -> Vec<(usize, Status)> {
    if requests.is_empty() {
        return Vec::new();
    }
    let inner = requests[0].inner.clone();
    let mut idle = 0;
    loop {
        if requests
            .iter()
            .any(|r| inner.engine.borrow().is_complete(r.id))
        {
            return test_some(requests);
        }
        inner.engine.borrow_mut().idle_step(&mut idle);
    }
}

/// Waits until one request completes and removes it (`MPI_Waitany`).
pub fn wait_any(requests: &mut Vec<Request<'_>>) -> Option<(usize, Status)> {
    if requests.is_empty() {
        return None;
    }
    let inner = requests[0].inner.clone();
    let mut idle = 0;
    loop {
        let found = requests
            .iter()
            .position(|r| inner.engine.borrow().is_complete(r.id));
        if let Some(i) = found {
            let r = requests.remove(i);
            return Some((i, r.wait()));
        }
        inner.engine.borrow_mut().idle_step(&mut idle);
    }
}

/// Whether every request is complete; if so, completes them all (`MPI_Testall`).
pub fn test_all(requests: &mut Vec<Request<'_>>) -> Option<Vec<Status>> {
    if let Some(r) = requests.first() {
        r.inner.engine.borrow_mut().progress();
    }
    let all = requests
        .iter()
        .all(|r| r.inner.engine.borrow().is_complete(r.id));
    all.then(|| wait_all(std::mem::take(requests)))
}

/// A request that ended badly stops the job, as a failed blocking operation does: a
/// point-to-point operation whose peer (a process of a connected job) failed, or a
/// collective's error.
#[inline]
pub(crate) fn check_ended(inner: &Inner, id: ReqId, st: kestrel_pml::Status) {
    if kestrel_pml::nbc::is_coll(id) {
        check_coll(inner, id, st);
    } else {
        check_peer(inner, st.failed_peer);
    }
}

/// Stops the job when a point-to-point operation ended because its peer failed (the
/// status's `failed_peer`, taken by value so the status stays in registers).
#[inline]
fn check_peer(inner: &Inner, failed_peer: Option<u32>) {
    if let Some(p) = failed_peer {
        peer_failed(inner, p);
    }
}

/// Stops the job for a point-to-point operation that ended because process `p` failed,
/// saying why (the engine's account: which rank of which job, and how it was noticed).
#[cold]
fn peer_failed(inner: &Inner, p: u32) -> ! {
    let why = inner
        .engine
        .try_borrow()
        .ok()
        .and_then(|e| e.failure_of(p).map(String::from))
        .unwrap_or_else(|| format!("process {p} of a connected job failed"));
    inner.fatal(&format!(
        "a point-to-point operation ended because a process it needs failed: {why}"
    ))
}

/// A collective request that ended badly stops the job, as a failed blocking collective
/// does (its error names the rank and what went wrong).
pub(crate) fn check_coll(inner: &Inner, id: ReqId, st: kestrel_pml::Status) {
    if !kestrel_pml::nbc::is_coll(id) {
        return;
    }
    if st.op_failed || st.failed_peer.is_some() || st.truncated_from.is_some() {
        let e = inner.engine.borrow_mut().coll_error(id);
        let msg = e.map_or_else(|| "a collective failed".to_string(), |e| e.to_string());
        inner.fatal(&msg);
    }
}

/// A send buffer for a collective schedule.
///
/// # Safety
/// The schedule the buffer goes into must be started and tracked by a scope of the borrow's
/// lifetime (or kept by a persistent collective bound to one) before the borrow can end.
pub(crate) unsafe fn send_buf(data: &[u8]) -> UserBuf {
    // SAFETY: forwarded to the caller.
    unsafe { UserBuf::for_send(data.as_ptr(), data.len()) }
}

/// A receive buffer for a collective schedule.
///
/// # Safety
/// As [`send_buf`]; the borrow is exclusive.
pub(crate) unsafe fn recv_buf<T: crate::Equivalence>(data: &mut [T]) -> UserBuf {
    let b = crate::BufferMut::as_bytes_mut(data);
    // SAFETY: forwarded to the caller.
    unsafe { UserBuf::for_recv(b.as_mut_ptr(), b.len()) }
}

/// Starts a collective schedule as a request of `scope`.
pub(crate) fn start_coll<'a>(
    scope: &LocalScope<'a>,
    inner: &Rc<Inner>,
    ctx: u16,
    s: kestrel_pml::nbc::Schedule,
) -> Request<'a> {
    let id = inner.engine.borrow_mut().coll_run(s);
    track_coll(scope, inner, ctx, id)
}

/// The request of collective `id`, started on `ctx` over buffers borrowed for `'a`, tracked
/// by `scope`.
pub(crate) fn track_coll<'a>(
    scope: &LocalScope<'a>,
    inner: &Rc<Inner>,
    ctx: u16,
    id: ReqId,
) -> Request<'a> {
    track(scope, inner, id);
    Request {
        inner: inner.clone(),
        id,
        ctx,
        done: false,
        _buffer: PhantomData,
    }
}

/// Makes `scope` wait for request `id` when it ends.
pub(crate) fn track(scope: &LocalScope<'_>, inner: &Rc<Inner>, id: ReqId) {
    scope.started.borrow_mut().push((inner.clone(), id));
}

pub(crate) fn start_send<'a>(
    scope: &LocalScope<'a>,
    inner: &Rc<Inner>,
    ctx: u16,
    dest: u32,
    tag: i32,
    data: &'a [u8],
    sync: bool,
) -> Request<'a> {
    // SAFETY: `data` is borrowed for 'a, which outlives `scope`; the scope (or the request's
    // drop, or `wait`) completes the request before 'a can end.
    let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
    let id = inner
        .engine
        .borrow_mut()
        .isend(ctx, dest, tag, buf, sync)
        .unwrap_or_else(|e| inner.fatal(&e.to_string()));
    // An eager send is complete already: the scope has nothing to wait for.
    if id != kestrel_pml::engine::DONE {
        scope.started.borrow_mut().push((inner.clone(), id));
    }
    Request {
        inner: inner.clone(),
        id,
        ctx,
        done: false,
        _buffer: PhantomData,
    }
}

pub(crate) fn start_recv<'a>(
    scope: &LocalScope<'a>,
    inner: &Rc<Inner>,
    ctx: u16,
    source: Option<u32>,
    tag: Option<i32>,
    data: &'a mut [u8],
) -> Request<'a> {
    // SAFETY: as in `start_send`, and `data` is borrowed exclusively for 'a.
    let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
    let id = inner
        .engine
        .borrow_mut()
        .irecv(ctx, source, tag, buf)
        .unwrap_or_else(|e| inner.fatal(&e.to_string()));
    scope.started.borrow_mut().push((inner.clone(), id));
    Request {
        inner: inner.clone(),
        id,
        ctx,
        done: false,
        _buffer: PhantomData,
    }
}

pub(crate) fn send_now(inner: &Inner, ctx: u16, dest: u32, tag: i32, data: &[u8], sync: bool) {
    // SAFETY: the request completes (wait) before `data`'s borrow ends.
    let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
    let started = inner.engine.borrow_mut().isend(ctx, dest, tag, buf, sync);
    let id = started.unwrap_or_else(|err| inner.fatal(&err.to_string()));
    // An eager send completes inside `isend`: skip the second borrow and the wait.
    if id != kestrel_pml::engine::DONE {
        let st = inner.engine.borrow_mut().wait(id);
        check_peer(inner, st.failed_peer);
    }
}

pub(crate) fn recv_now(
    inner: &Inner,
    ctx: u16,
    source: Option<u32>,
    tag: Option<i32>,
    data: &mut [u8],
) -> Status {
    // SAFETY: the request completes (wait) before `data`'s borrow ends.
    let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
    let started = inner.engine.borrow_mut().irecv(ctx, source, tag, buf);
    let id = started.unwrap_or_else(|err| inner.fatal(&err.to_string()));
    let st = inner.engine.borrow_mut().wait(id);
    check_peer(inner, st.failed_peer);
    Status::from_pml(st)
}

pub(crate) fn mrecv_now(
    inner: &Inner,
    msg: kestrel_pml::engine::MessageHandle,
    data: &mut [u8],
) -> Status {
    // SAFETY: the request completes (wait) before `data`'s borrow ends.
    let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
    let started = inner.engine.borrow_mut().imrecv(msg, buf);
    let id = started.unwrap_or_else(|err| inner.fatal(&err.to_string()));
    let st = inner.engine.borrow_mut().wait(id);
    check_peer(inner, st.failed_peer);
    Status::from_pml(st)
}
