//! The progress engine: transports, routes, protocols, requests and communicator contexts.
//! This module holds the engine's types; their behaviour is split by concern: `startup`
//! (transports and finalize), `contexts`, `post` (starting operations), `requests`,
//! `progress`, `arrival` (the receiving side of every protocol) and `exchange` (the engine's
//! own blocking byte exchanges).
//!
//! Protocols (see [`crate::hdr`] for the headers):
//! * **eager**: header + payload in one transport message when it fits the route's eager
//!   limit. A standard send completes at once (the transport copied it, or the engine did when
//!   the transport pushed back). A synchronous send carries its request id and completes when
//!   the receiver's ACK says the message matched.
//! * **rendezvous**: a RNDV header announces the length (and, where the transport offers
//!   single copy, the sender's buffer address). On match the receiver either reads the data
//!   with one `get` and answers FIN, or answers ACK and the sender streams FRAGs that the
//!   receiver copies into place. The sender's request completes on FIN or when the last FRAG
//!   left; the receiver's when the data is in its buffer.
//!
//! Messages arrive in transport order and are matched in MPI order by
//! [`crate::matching::MatchEngine`]; in-order arrivals that find a posted receive are copied
//! from the transport straight into the user's buffer. Work that would re-enter a transport
//! from inside its progress callback (replies, gets, streamed fragments) is queued and done
//! right after the callback returns.
//!
//! Identifiers that come back from peers (request ids in ACK/FRAG/FIN) carry a generation and
//! are checked before use, so a stale or forged id is a logged protocol error, never memory
//! corruption.

use std::collections::{HashMap, VecDeque};
use std::fmt;

use kestrel_transport::btl::Btl;
use kestrel_transport::component::Component;
use kestrel_transport::node_coll::{NodeCollectives, NodeSegment};
use kestrel_transport::params::Params;
use kestrel_transport::set;

use crate::buf::UserBuf;
use crate::group::Group;
use crate::hdr::{self, Header, AM_PML};
use crate::matching::{Envelope, MatchEngine, RecvId, Selector};

mod arrival;
pub mod contexts;
pub mod counters;
mod detached;
mod exchange;
pub(crate) mod hier;
pub mod nbc;
mod post;
mod progress;
mod requests;
#[allow(unsafe_code)]
pub mod rma;
mod sleep;
pub(crate) mod spares;
mod startup;

/// A request handle.
pub type ReqId = u64;

/// The handle of an operation that completed when it started.
pub const DONE: ReqId = u64::MAX;

/// Context id of the world communicator.
pub const CTX_WORLD: u16 = 0;
/// Context id of the self communicator.
pub const CTX_SELF: u16 = 1;

/// Tags the engine uses for its own collective exchanges (never matched by user receives,
/// which only use tags >= 0).
const TAG_GATHER: i32 = -100;
const TAG_BCAST: i32 = -101;

/// What a completed operation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Status {
    /// Sender's rank in the communicator.
    pub source: i32,
    /// Tag of the message.
    pub tag: i32,
    /// Bytes received (or of the probed message).
    pub count: usize,
    /// The message was longer than the buffer: its length.
    pub truncated_from: Option<usize>,
    /// The receive was cancelled.
    pub cancelled: bool,
    /// The operation ended because this process (an engine process index) failed; see
    /// [`Engine::failure_of`].
    pub failed_peer: Option<u32>,
    /// A collective request ended with an error other than a failed peer or truncation;
    /// [`Engine::coll_error`] tells which.
    pub op_failed: bool,
}

/// Errors of the messaging layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PmlError {
    /// No transport reaches a rank.
    Unreachable(String),
    /// A transport failed.
    Transport(String),
    /// The runtime failed during setup.
    Runtime(String),
    /// A rank or argument is out of range.
    Invalid(String),
    /// A dynamic-process operation failed, or a process of another job that an operation
    /// needed has failed.
    Dpm(kestrel_runtime::dpm::DpmError),
}

impl fmt::Display for PmlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmlError::Unreachable(m)
            | PmlError::Transport(m)
            | PmlError::Runtime(m)
            | PmlError::Invalid(m) => write!(f, "{m}"),
            PmlError::Dpm(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for PmlError {}

enum Arrived {
    Eager {
        data: Vec<u8>,
        sync_req: Option<u64>,
        peer: u32,
    },
    Rndv {
        len: u64,
        send_req: u64,
        get_addr: Option<u64>,
        get_key: u64,
        peer: u32,
        pull: bool,
    },
}

impl Arrived {
    fn len(&self) -> usize {
        match self {
            Arrived::Eager { data, .. } => data.len(),
            Arrived::Rndv { len, .. } => *len as usize,
        }
    }
}

impl fmt::Debug for Arrived {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Arrived({} bytes)", self.len())
    }
}

pub(crate) struct Ctx {
    matcher: MatchEngine<Arrived>,
    /// The processes ranks address: the members, or for an inter-communicator the remote group.
    pub(crate) group: Vec<u32>,
    /// This process's rank in the context (stamped into every header it sends); for an
    /// inter-communicator its rank in the local group.
    pub(crate) me: u32,
    send_seq: Vec<u16>,
    /// Collective schedules built on this context so far (their tags, see [`crate::nbc`]).
    pub(crate) coll_seq: u32,
    /// The same for schedules that run blocking collectives (a sequence of their own).
    pub(crate) blocking_seq: u32,
    /// Set for inter-communicators.
    pub(crate) inter: Option<InterCtx>,
    /// Set once a member failed: every operation on the context fails with this reason.
    pub(crate) broken: Option<(u32, String)>,
}

/// What an inter-communicator context has beyond its remote group.
#[derive(Debug, Clone)]
pub(crate) struct InterCtx {
    /// The local group (process indices in local rank order).
    pub(crate) local_group: Vec<u32>,
    /// An intra-communicator context over the local group, for the local phases of
    /// inter-communicator collectives.
    pub(crate) local_ctx: u16,
}

enum SendState {
    WaitAck,
    /// Announced; the receiver has not answered yet. `exposed_by`: the transport that exposed
    /// (and may have registered) the buffer for the receiver to read.
    Rndv {
        exposed_by: Option<u8>,
    },
    Streaming,
    Done,
}

/// A send buffer a transport exposed for the peer to read.
#[derive(Clone, Copy)]
struct Exposed {
    peer: u32,
    /// The transport's index in the engine's list (stable: the list only grows).
    btl: u8,
    buf: UserBuf,
}

impl SendState {
    /// The transport that exposed the send's buffer, while the receiver may still read it.
    fn exposed_by(&self) -> Option<u8> {
        match *self {
            SendState::Rndv { exposed_by } => exposed_by,
            _ => None,
        }
    }
}

enum RecvState {
    Posted,
    Pipeline {
        total: usize,
        received: usize,
    },
    /// A split copy: the receiver reads `[0, split)`, the sender writes `[split, end)`.
    Split {
        send_req: u64,
        peer: u32,
        get_done: bool,
        /// Bytes of the sender's part that arrived as fragments (when its put failed).
        streamed: usize,
        sender_part: usize,
        put_done: bool,
    },
    Done,
}

enum Req {
    Send {
        peer: u32,
        buf: UserBuf,
        state: SendState,
        failed: Option<u32>,
    },
    Recv {
        ctx: u16,
        buf: UserBuf,
        state: RecvState,
        status: Status,
    },
}

struct Slot {
    gen: u32,
    req: Option<Req>,
}

pub(crate) enum Out {
    Msg {
        peer: u32,
        hdr: Vec<u8>,
        data: Vec<u8>,
    },
    /// Fragments of `[offset, len)` of a send; `completes` marks the send done at the end
    /// (false for the sender's half of a split copy, which still waits for FIN).
    Stream {
        req: ReqId,
        peer: u32,
        recv_req: u64,
        offset: usize,
        len: usize,
        completes: bool,
    },
    /// A one-sided message (`rma`), whole.
    Rma { peer: u32, msg: Vec<u8> },
}

struct PendingGet {
    req: ReqId,
    peer: u32,
    addr: u64,
    key: u64,
    len: u64,
    send_req: u64,
    /// Read the whole message here (the sender asked: no split copy).
    pull: bool,
}

/// A get a transport finishes later (an RMA read into a receive's buffer): the receive
/// stays incomplete until the transport reports it.
struct RemoteRead {
    btl: usize,
    req: ReqId,
    peer: u32,
    send_req: u64,
    len: u64,
}

struct PendingPut {
    send_req: ReqId,
    peer: u32,
    recv_req: u64,
    addr: u64,
    split: u64,
    end: u64,
}

/// Everything the transports' delivery callbacks may touch.
pub(crate) struct State {
    pub(crate) ctxs: Vec<Option<Ctx>>,
    orphans: HashMap<u16, Vec<(u32, Vec<u8>)>>,
    reqs: Vec<Slot>,
    free_reqs: Vec<u32>,
    pub(crate) outbox: VecDeque<Out>,
    gets: Vec<PendingGet>,
    puts: Vec<PendingPut>,
    /// Gets in flight in a transport ([`RemoteRead`]).
    remote_reads: Vec<RemoteRead>,
    /// Exposed rendezvous send buffers the receiver is done with (FIN, or the ACK that chose
    /// the copy pipeline): the transport that exposed each may release what that took.
    released: Vec<Exposed>,
    matched: Vec<(RecvId, Envelope, Arrived)>,
    probed: Vec<Option<(u16, Envelope, Arrived)>>,
    scratch: Vec<u8>,
    protocol_errors: u64,
    /// Event counts read by tools (see `counters`).
    pub(crate) counters: counters::Counters,
    /// Background sends (see `engine::detached`): the request and the data it sends.
    detached: Vec<(ReqId, Vec<u8>)>,
    /// Buffers of completed background sends and of blocking collectives' scratch, kept
    /// for the next ones (large allocations are page faults on every touch; a repeated
    /// collective reuses them).
    pub(crate) spares: spares::Spares,
    /// One-sided messages delivered by the transports, handled right after their
    /// callbacks return (handling them sends answers).
    pub(crate) rma_inbox: VecDeque<(u32, Vec<u8>)>,
}

/// What an engine starts from, however its transports were set up.
pub struct EngineSetup {
    /// This process's job rank.
    pub rank: u32,
    /// Ranks in the job.
    pub size: u32,
    /// The node id of every rank.
    pub nodes: Vec<String>,
    /// The job id.
    pub job_id: String,
    /// The transports with a route per rank.
    pub transports: set::Attached,
    /// Whether finalize must flush acknowledged transports (the same on every rank).
    pub network_flush: bool,
    /// The components connections to other jobs open transports from.
    pub registry: &'static [&'static dyn Component],
}

pub(crate) use kestrel_transport::component::file_safe;

/// A message removed by a matched probe, to be received with [`Engine::imrecv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageHandle(usize);

/// [`Engine::poll_skip`] of a transport polled on every call.
pub(crate) const ALWAYS_POLLED: u16 = u16::MAX;

/// How often a cold bulk-only transport is polled (see [`Engine::poll_skip`]).
pub(crate) const BULK_IDLE_POLLS: u16 = 16;

/// How many polls a bulk-only transport stays hot (polled on every call) after it delivered.
pub(crate) const BULK_HOT_POLLS: u16 = 4096;

/// The messaging engine of one process.
pub struct Engine {
    rank: u32,
    size: u32,
    /// Transports; peers are process indices (see `crate::dpm`): this job's ranks first,
    /// then processes of other jobs in the order they were connected.
    pub(crate) btls: Vec<Box<dyn Btl>>,
    /// Each transport's `Limits::eager_limit` (fixed for its life, as the transport contract
    /// says), so that a send does not ask through the trait object: 11 instructions per
    /// small send on shared memory, and usnic computes its limits by walking its interfaces.
    pub(crate) eager_limits: Vec<usize>,
    /// The transport (index into `btls`) of each process, `NO_ROUTE` when none.
    pub(crate) route: Vec<u8>,
    /// The transport of each process's rendezvous data (the stream of large messages): the
    /// highest-bandwidth one that reaches it (see `kestrel_transport::set::Attached`).
    pub(crate) bulk_route: Vec<u8>,
    /// Per process, the message size (header included) from which whole messages take the
    /// bulk route too (`u32::MAX`: never; see `kestrel_transport::set::Attached`).
    pub(crate) bulk_from: Vec<u32>,
    /// Per transport, [`ALWAYS_POLLED`] for the transports that carry some process's small
    /// messages. One that is only a bulk route (rendezvous data and messages from
    /// `bulk_from` bytes), or nothing, is polled on every call while the outbox is busy and
    /// for [`BULK_HOT_POLLS`] calls after it delivered (`poll_hot`), otherwise every
    /// [`BULK_IDLE_POLLS`]th call (this counts the calls still to skip): polling a kernel TCP
    /// provider costs a system call, about a sixth of a small message's network latency.
    pub(crate) poll_skip: Vec<u16>,
    /// Per transport, the calls it stays hot (see `poll_skip`).
    pub(crate) poll_hot: Vec<u16>,
    /// The node id of each process.
    pub(crate) nodes: Vec<String>,
    /// Why no transport reaches a process, every component's reason (for the no-route error).
    pub(crate) unreachable: Vec<Option<String>>,
    /// The components transports are opened from (connections to other jobs open more).
    pub(crate) registry: &'static [&'static dyn Component],
    /// The shared-memory collective engine of node-local communicators, if one is built in.
    pub(crate) node_coll: Option<&'static dyn NodeCollectives>,
    /// Processes of other jobs, lifelines, connections (see `crate::dpm`).
    pub(crate) dpm: crate::procs::DpmState,
    /// Finalize runs a barrier and flushes acknowledged transports first (see `finalize`).
    network_flush: bool,
    pub(crate) st: State,
    pub(crate) next_ctx: u16,
    /// Context ids claimed by creations still agreeing on them (see
    /// [`Engine::claim_context`]).
    pub(crate) ctx_claims: Vec<u16>,
    pub(crate) yield_when_idle: bool,
    spin_before_yield: u32,
    /// Sleeping in `poll(2)` after a long idle stretch (see `sleep.rs`).
    sleep: sleep::IdleSleep,
    selected: String,
    params: Params,
    split_copy_min: u64,
    job_tag: String,
    /// Collective segments of node-local communicators (`None`: decided against).
    /// Indexed by context id (looked up on every collective, so no hashing); the outer
    /// `None` means "not decided yet".
    pub(crate) coll_segments: Vec<Option<Option<Box<dyn NodeSegment>>>>,
    /// Collectives each context ran that could have used a segment, while its segment is not
    /// decided yet (`coll_shm_setup_after`); the same count on every member, since members
    /// run a communicator's collectives in the same order.
    pub(crate) coll_segment_calls: Vec<u32>,
    /// Hierarchical collectives per context (`None`: not decided yet; `Some(None)`: flat;
    /// see `hier` and `crate::coll_hier`).
    pub(crate) coll_hier: Vec<Option<Option<std::sync::Arc<hier::Hier>>>>,
    /// Where each context's members are (`None`: not looked at yet; `crate::coll_select`).
    pub(crate) coll_scopes: Vec<Option<crate::coll_table::Scope>>,
    /// The collective tuning table (built in, and `coll_tuning_file`).
    pub(crate) coll_table: crate::coll_table::Table,
    /// The posted rounds of the same segments (nonblocking collectives), by context id: kept
    /// apart so that they go on while a blocking collective holds the segment.
    pub(crate) coll_posted: Vec<Option<Box<dyn kestrel_transport::node_coll::PostedRounds>>>,
    /// Whether `coll_alltoall` is `auto` (read once: the alltoall of small blocks checks it
    /// on every call).
    pub(crate) alltoall_auto: Option<bool>,
    /// `coll_gather` and `coll_scatter` are `auto`, read once.
    pub(crate) scatter_gather_auto: Option<(bool, bool)>,
    /// Nonblocking and persistent collective schedules.
    pub(crate) nbc: crate::engine::nbc::Table,
    /// One-sided windows (`rma`).
    pub(crate) rma: crate::engine::rma::Windows,
}

impl fmt::Debug for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Engine")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("btls", &self.selected)
            .finish()
    }
}

pub(crate) use kestrel_transport::set::NO_ROUTE;

/// Empty polls after which even a rank with a core of its own starts yielding.
const LONG_IDLE: u32 = 20_000;
/// Idle steps of a wait before it counts as stalled (the rank's wait record is written).
const STALL_STEPS: u32 = 1 << 14;
/// Once a wait has stalled, idle steps between two heartbeat checks of its wait record (a
/// clock read; the record is rewritten at most every 500 ms): frequent enough that a loaded
/// machine, where each step yields for long, still keeps the record fresh.
const STALL_TICK: u32 = 1 << 10;

/// Empty polls before a busy wait starts pausing between polls.
const PAUSE_AFTER: u32 = 1_000;

impl Engine {
    /// The resolved parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The node id of job rank `r`.
    pub fn node_of(&self, r: u32) -> &str {
        self.nodes.get(r as usize).map(String::as_str).unwrap_or("")
    }

    /// Whether idle waits yield the CPU (ranks outnumber cores).
    pub fn yields_when_idle(&self) -> bool {
        self.yield_when_idle
    }

    /// The job id made safe for file names.
    pub fn job_tag(&self) -> &str {
        &self.job_tag
    }

    /// This process's job rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The transports in use (`self,shm`).
    pub fn transports(&self) -> &str {
        &self.selected
    }

    /// Malformed or unexpected messages from peers dropped so far.
    pub fn protocol_errors(&self) -> u64 {
        self.st.protocol_errors
    }
}
