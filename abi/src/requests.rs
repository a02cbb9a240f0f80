//! Requests: starting engine operations on program memory, and completing them.
//!
//! This module owns a request's life: the engine request it wraps, the staging memory of
//! non-contiguous data (packed before a send, unpacked after a receive), persistent
//! requests' arguments, and the status it reports. Its invariant is the one that makes
//! staging sound: a [`ReqRec`] holding [`Staging`] is dropped only once its engine request
//! completed (`MPI_Request_free` on a running request moves it to the library state's list
//! of detached requests until then). It never validates MPI arguments (the caller did) and
//! never raises errors through handlers. It works on the engine and on single records, not
//! on the library state: `state` keeps the request table and depends on this module, never
//! the other way round.
#![allow(unsafe_code)]

use std::os::raw::c_int;

use kestrel_pml::buf::UserBuf;
use kestrel_pml::{Engine, ReqId, Status};

use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem::{Region, St, Staging};

/// Send modes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `MPI_Send`.
    Standard,
    /// `MPI_Ssend`: completes once the receiver matched.
    Sync,
    /// `MPI_Rsend`: like standard (a matching receive is posted, so nothing is gained by
    /// another protocol).
    Ready,
    /// `MPI_Bsend`: copied into the attached buffer.
    Buffered,
}

/// What a persistent request starts each time.
#[derive(Debug, Clone)]
pub enum Persistent {
    /// A send of `region` to `peer`.
    Send {
        /// Send mode.
        mode: Mode,
        /// The data.
        region: Region,
        /// Destination rank.
        peer: c_int,
        /// Tag.
        tag: c_int,
    },
    /// A receive into `region`.
    Recv {
        /// The buffer.
        region: Region,
        /// Source rank or `MPI_ANY_SOURCE`.
        peer: c_int,
        /// Tag or `MPI_ANY_TAG`.
        tag: c_int,
    },
    /// A persistent collective: the engine's schedule (its staging is the request's
    /// [`Extra::coll`]).
    Coll {
        /// The engine's persistent collective request.
        id: ReqId,
    },
    /// A partitioned send (`MPI_Psend_init`): the whole buffer goes once every partition
    /// is ready.
    Psend {
        /// All partitions.
        region: Region,
        /// Destination rank.
        peer: c_int,
        /// Tag.
        tag: c_int,
        /// Partitions.
        partitions: usize,
    },
    /// A partitioned receive (`MPI_Precv_init`): a partition has arrived once the whole
    /// message has.
    Precv {
        /// All partitions.
        region: Region,
        /// Source rank.
        peer: c_int,
        /// Tag.
        tag: c_int,
        /// Partitions.
        partitions: usize,
    },
}

/// Where a request is.
#[derive(Debug)]
pub enum ReqState {
    /// Running in the engine.
    Active(ReqId),
    /// Complete with this status, not yet reported.
    Done(St),
    /// A persistent request not started, or already reported.
    Inactive,
    /// A generalized request the program completes with `MPI_Grequest_complete`.
    Generalized,
    /// A started partitioned send waiting for its partitions (`MPI_Pready`).
    Partitioned,
    /// A request-based one-sided operation (`MPI_Rget` ...) waiting for its result.
    Rma {
        /// The engine's window.
        win: u16,
        /// The operation.
        op: kestrel_pml::rma::RmaOp,
    },
}

/// A request.
#[derive(Debug)]
pub struct ReqRec {
    /// Where it is.
    pub state: ReqState,
    /// The communicator (for error handlers).
    pub comm: c_int,
    /// Its engine context (for cancel).
    pub ctx: u16,
    /// Whether it receives.
    pub recv: bool,
    /// What only some requests need, boxed so that the common record stays small (records
    /// move in and out of the request table on every nonblocking call).
    pub extra: Option<Box<Extra>>,
}

/// Staging of program data a request's engine operation uses: filled before each run,
/// written back after a successful one (implemented by `icoll::Plan`).
pub trait Staged {
    /// Copies the program's data in.
    fn fill(&mut self) -> MpiResult<()>;
    /// Writes the results back.
    fn drain(&self) -> MpiResult<()>;
}

impl std::fmt::Debug for dyn Staged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Staged")
    }
}

/// The parts of a request only some requests have.
#[derive(Debug, Default)]
pub struct Extra {
    /// Memory lent to the engine.
    pub staging: Option<Staging>,
    /// Where staged received data goes.
    pub unpack_into: Option<Region>,
    /// Set for persistent requests.
    pub persistent: Option<Persistent>,
    /// A collective's staging, filled at every start and drained at every completion.
    pub coll: Option<Box<dyn Staged>>,
    /// Anything else the request keeps until completion for its owner's module (library
    /// memory a companion sends from, a nonblocking duplicate's agreement).
    pub aux: Option<Box<dyn std::any::Any>>,
    /// A request that must complete before this one does (the send of
    /// `MPI_Isendrecv`).
    pub companion: Option<Box<ReqRec>>,
    /// A generalized request's callbacks and state (`MPI_Grequest_start`).
    pub grequest: Option<crate::grequest::Grequest>,
    /// The partitions of a started partitioned send marked ready so far.
    pub ready: Vec<bool>,
}

impl ReqRec {
    /// A request not started yet.
    pub fn new(comm: c_int, ctx: u16, recv: bool) -> ReqRec {
        ReqRec {
            state: ReqState::Inactive,
            comm,
            ctx,
            recv,
            extra: None,
        }
    }

    /// A request that is already complete.
    pub fn done(comm: c_int, ctx: u16, st: St) -> ReqRec {
        ReqRec {
            state: ReqState::Done(st),
            ..ReqRec::new(comm, ctx, false)
        }
    }

    /// The extra parts, created on first use.
    pub fn extra(&mut self) -> &mut Extra {
        self.extra.get_or_insert_with(Default::default)
    }

    /// What a persistent request starts, if this is one.
    pub fn persistent(&self) -> Option<&Persistent> {
        self.extra.as_ref()?.persistent.as_ref()
    }

    /// Whether it is running in the engine.
    pub fn is_active(&self) -> bool {
        matches!(
            self.state,
            ReqState::Active(_)
                | ReqState::Generalized
                | ReqState::Partitioned
                | ReqState::Rma { .. }
        )
    }
}

/// Status of a completed engine request; the engine words a failed peer's error.
#[inline]
pub fn status_of(engine: &Engine, s: Status) -> St {
    St {
        source: s.source,
        tag: s.tag,
        error: if s.truncated_from.is_none() && s.failed_peer.is_none() {
            error::SUCCESS
        } else {
            failure_code(engine, s.failed_peer)
        },
        bytes: s.count,
        cancelled: s.cancelled,
    }
}

/// The error of an operation that ended badly: `MPI_ERR_TRUNCATE` (the caller words it,
/// knowing the buffer), or a code of `MPIX_ERR_PROC_FAILED` that carries the engine's
/// account of the failed process.
#[cold]
fn failure_code(engine: &Engine, failed_peer: Option<u32>) -> c_int {
    // By value, not `&Status`: a reference would keep the whole status in memory on the
    // path every completion takes (+56 instructions per receive completed by MPI_Waitall).
    let Some(p) = failed_peer else {
        return error::ERR_TRUNCATE;
    };
    let why = engine.failure_of(p).map_or_else(
        || format!("process {p} of a connected job failed"),
        String::from,
    );
    error::code_for(
        error::ERR_PROC_FAILED,
        format!("the operation ended because a process it needs failed: {why}"),
    )
}

/// Starts a send of `region` (packed first unless contiguous).
pub fn start_send(
    engine: &mut Engine,
    comm: c_int,
    ctx: u16,
    dest: u32,
    tag: c_int,
    region: &Region,
    sync: bool,
) -> MpiResult<ReqRec> {
    let mut rec = ReqRec::new(comm, ctx, false);
    let buf = if region.is_contiguous() {
        region.span
    } else {
        let staging = rec.extra().staging.insert(Staging::new(region.pack()?));
        // SAFETY: the staging lives in `rec`, which is dropped only after the engine request
        // completed (module invariant).
        unsafe { staging.engine_buf() }
    };
    let id = engine
        .isend(ctx, dest, tag, buf, sync)
        .map_err(error::pml(error::ERR_RANK))?;
    rec.state = if id == kestrel_pml::engine::DONE {
        rec.extra = None;
        ReqState::Done(St::default())
    } else {
        ReqState::Active(id)
    };
    Ok(rec)
}

/// Starts a send from library memory (buffered sends): `buf` must stay valid until the
/// returned engine request completes, which the buffered-send area guarantees.
pub fn start_send_raw(
    engine: &mut Engine,
    ctx: u16,
    dest: u32,
    tag: c_int,
    buf: UserBuf,
) -> MpiResult<ReqId> {
    engine
        .isend(ctx, dest, tag, buf, false)
        .map_err(error::pml(error::ERR_RANK))
}

/// Starts a receive into `region` (through staging unless contiguous).
pub fn start_recv(
    engine: &mut Engine,
    comm: c_int,
    ctx: u16,
    source: Option<u32>,
    tag: Option<c_int>,
    region: &Region,
) -> MpiResult<ReqRec> {
    let mut rec = ReqRec::new(comm, ctx, true);
    let buf = staged_recv_buf(&mut rec, region);
    let id = engine
        .irecv(ctx, source, tag, buf)
        .map_err(error::pml(error::ERR_RANK))?;
    rec.state = ReqState::Active(id);
    Ok(rec)
}

/// Receives a message taken by a matched probe into `region`.
pub fn start_mrecv(
    engine: &mut Engine,
    comm: c_int,
    ctx: u16,
    msg: kestrel_pml::engine::MessageHandle,
    region: &Region,
) -> MpiResult<ReqRec> {
    let mut rec = ReqRec::new(comm, ctx, true);
    let buf = staged_recv_buf(&mut rec, region);
    let id = engine
        .imrecv(msg, buf)
        .map_err(error::pml(error::ERR_REQUEST))?;
    rec.state = ReqState::Active(id);
    Ok(rec)
}

fn staged_recv_buf(rec: &mut ReqRec, region: &Region) -> UserBuf {
    if region.is_contiguous() {
        return region.span;
    }
    let extra = rec.extra();
    extra.unpack_into = Some(region.clone());
    let staging = extra.staging.insert(Staging::zeroed(region.packed_len()));
    // SAFETY: the staging lives in `rec`, dropped only after completion (module invariant).
    unsafe { staging.engine_buf() }
}

/// Completes `rec` if its engine request is done (no progress made): moves it to
/// [`ReqState::Done`] and unpacks staged data. Returns whether it is done.
pub fn poll(engine: &mut Engine, rec: &mut ReqRec) -> MpiResult<bool> {
    if let Some(c) = rec.extra.as_mut().and_then(|x| x.companion.as_mut()) {
        if !poll(engine, c)? {
            return Ok(false);
        }
    }
    match rec.state {
        ReqState::Partitioned => Ok(false),
        ReqState::Rma { win, op } => {
            if !engine.rma_done(win, op) {
                return Ok(false);
            }
            rec.state = ReqState::Done(crate::mem::St::empty(crate::mem::ANY_SOURCE));
            Ok(true)
        }
        ReqState::Generalized => {
            let done = rec
                .extra
                .as_mut()
                .and_then(|x| x.grequest.as_mut())
                .map(crate::grequest::query)
                .transpose()?;
            match done.flatten() {
                Some(st) => {
                    rec.state = ReqState::Done(st);
                    Ok(true)
                }
                None => Ok(false),
            }
        }
        ReqState::Done(_) | ReqState::Inactive => Ok(true),
        ReqState::Active(id) => {
            let Some(s) = engine.try_complete(id) else {
                return Ok(false);
            };
            if kestrel_pml::nbc::is_coll(id) {
                let st = coll_status(engine, id, s);
                rec.state = ReqState::Done(st);
                if st.error == error::SUCCESS {
                    if let Some(plan) = rec.extra.as_ref().and_then(|x| x.coll.as_ref()) {
                        plan.drain()?;
                    }
                }
                return Ok(true);
            }
            let st = status_of(engine, s);
            rec.state = ReqState::Done(st);
            if let Some(extra) = rec.extra.as_mut() {
                if let (Some(region), Some(staging)) =
                    (extra.unpack_into.take(), extra.staging.as_ref())
                {
                    region.unpack(&staging.bytes()[..st.bytes.min(staging.bytes().len())])?;
                }
                extra.staging = None;
            }
            Ok(true)
        }
    }
}

/// The status of a completed collective: no source, tag or count; its error as an error
/// code that carries the engine's message.
fn coll_status(engine: &mut Engine, id: ReqId, s: Status) -> St {
    let mut st = St::empty(crate::mem::ANY_SOURCE);
    if s.failed_peer.is_some() || s.truncated_from.is_some() || s.op_failed {
        let class = if s.truncated_from.is_some() {
            error::ERR_TRUNCATE
        } else if s.failed_peer.is_some() {
            error::ERR_PROC_FAILED
        } else {
            error::ERR_OTHER
        };
        let msg = match engine.coll_error(id) {
            Some(e) => e.to_string(),
            None => "the collective failed".to_string(),
        };
        st.error = error::code_for(class, msg);
    }
    st
}

/// Progresses until `rec` completes; returns its status and leaves it inactive.
pub fn wait(engine: &mut Engine, rec: &mut ReqRec) -> MpiResult<St> {
    let mut idle = 0u32;
    while !poll(engine, rec)? {
        engine.idle_step(&mut idle);
    }
    Ok(take_status(rec))
}

/// The status of a completed request; the request becomes inactive.
pub fn take_status(rec: &mut ReqRec) -> St {
    match std::mem::replace(&mut rec.state, ReqState::Inactive) {
        ReqState::Done(st) => st,
        _ => St::empty(-2),
    }
}

/// The table slot of a request handle.
pub fn slot(h: c_int) -> Option<u32> {
    match handle::decode(h, Obj::Request)? {
        (Kind::Direct, i) => Some(i),
        _ => None,
    }
}

/// The error for a handle that names no request.
pub fn bad_request(h: c_int) -> MpiError {
    MpiError::new(
        error::ERR_REQUEST,
        format!("{h:#x} is not a request (already completed and freed, or another kind of handle)"),
    )
}

/// The error of a completed operation, if any: a truncated receive (into a buffer of
/// `region_bytes`) is `MPI_ERR_TRUNCATE`; any other error keeps the class and message its
/// code carries (a failed peer, a failed collective).
#[inline]
pub fn check_status(st: &St, region_bytes: usize) -> MpiResult<()> {
    if st.error == error::SUCCESS {
        return Ok(());
    }
    Err(failure_error(st, region_bytes))
}

/// [`check_status`]'s error, out of the completion path.
#[cold]
fn failure_error(st: &St, region_bytes: usize) -> MpiError {
    if st.error == error::ERR_TRUNCATE {
        return MpiError::new(
            error::ERR_TRUNCATE,
            format!(
                "the message from rank {} (tag {}) is longer than the {region_bytes}-byte receive buffer; the buffer holds its first {} bytes",
                st.source, st.tag, st.bytes
            ),
        );
    }
    let class = error::class_of(st.error).unwrap_or(error::ERR_OTHER);
    let msg = error::string_of(st.error).unwrap_or_default();
    MpiError::new(class, msg)
}

/// The error a completed request reports, if any, on its communicator.
pub fn status_error(st: &St, comm: c_int) -> MpiResult<()> {
    check_status(st, st.bytes).map_err(|e| e.on(comm))
}
