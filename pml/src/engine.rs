//! The progress engine: transports, routes, protocols, requests and communicator contexts.
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

use kestrel_runtime::Runtime;
use kestrel_transport::btl::{Btl, RemoteRegion, SendError};
use kestrel_transport::component::{Component, OpenContext};
use kestrel_transport::core_params;
use kestrel_transport::node_coll::{NodeCollectives, NodeSegment};
use kestrel_transport::params::Params;
use kestrel_transport::set;

use crate::buf::UserBuf;
use crate::group::Group;
use crate::hdr::{self, Header, AM_PML};
use crate::matching::{Envelope, MatchEngine, RecvId, Selector};

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
        peer: u32,
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
    Rndv,
    Streaming,
    Done,
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

enum Out {
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
}

struct PendingGet {
    req: ReqId,
    peer: u32,
    addr: u64,
    len: u64,
    send_req: u64,
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
    outbox: VecDeque<Out>,
    gets: Vec<PendingGet>,
    puts: Vec<PendingPut>,
    matched: Vec<(RecvId, Envelope, Arrived)>,
    probed: Vec<Option<(u16, Envelope, Arrived)>>,
    scratch: Vec<u8>,
    protocol_errors: u64,
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

/// `text` with every character but ASCII letters, digits, `-` and `_` replaced by `_`.
pub(crate) fn file_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A message removed by a matched probe, to be received with [`Engine::imrecv`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MessageHandle(usize);

/// The messaging engine of one process.
pub struct Engine {
    rank: u32,
    size: u32,
    /// Transports; peers are process indices (see [`crate::dpm`]): this job's ranks first,
    /// then processes of other jobs in the order they were connected.
    pub(crate) btls: Vec<Box<dyn Btl>>,
    /// The transport (index into `btls`) of each process, `NO_ROUTE` when none.
    pub(crate) route: Vec<u8>,
    /// The node id of each process.
    pub(crate) nodes: Vec<String>,
    /// Why no transport reaches a process, every component's reason (for the no-route error).
    pub(crate) unreachable: Vec<Option<String>>,
    /// The components transports are opened from (connections to other jobs open more).
    pub(crate) registry: &'static [&'static dyn Component],
    /// The shared-memory collective engine of node-local communicators, if one is built in.
    pub(crate) node_coll: Option<&'static dyn NodeCollectives>,
    /// Processes of other jobs, lifelines, connections (see [`crate::dpm`]).
    pub(crate) dpm: crate::dpm::DpmState,
    /// Finalize runs a barrier and flushes acknowledged transports first (see `finalize`).
    network_flush: bool,
    pub(crate) st: State,
    pub(crate) next_ctx: u16,
    yield_when_idle: bool,
    spin_before_yield: u32,
    selected: String,
    params: Params,
    split_copy_min: u64,
    job_tag: String,
    /// Collective segments of node-local communicators (`None`: decided against).
    /// Indexed by context id (looked up on every collective, so no hashing); the outer
    /// `None` means "not decided yet".
    pub(crate) coll_segments: Vec<Option<Option<Box<dyn NodeSegment>>>>,
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

/// Empty polls before a busy wait starts pausing between polls.
const PAUSE_AFTER: u32 = 1_000;

impl Engine {
    /// Sets up the transports the `btl` parameter allows from `registry` through the
    /// transport set, exchanges their cards through the runtime (one fence, on every rank),
    /// and routes every rank.
    pub fn new(
        params: &Params,
        rt: &mut Runtime,
        registry: &'static [&'static dyn Component],
    ) -> Result<Engine, PmlError> {
        let rank = rt.rank();
        let size = rt.size();
        let runtime_err = |e: kestrel_runtime::RuntimeError| PmlError::Runtime(e.to_string());
        let nodes = rt.node_ids().map_err(runtime_err)?.to_vec();
        let job_id = rt.job_id().to_string();
        let job_tag = file_safe(&job_id);
        let file_prefix = format!("kestrel.{job_tag}.");
        let cx = OpenContext {
            me: rank,
            nodes: &nodes,
            set_id: &job_id,
            file_prefix: &file_prefix,
        };
        let opening = set::open(registry, params, &cx, &vec![true; size as usize])
            .map_err(PmlError::Transport)?;
        let network_flush = opening.has_network();
        rt.put(set::CARDS_KEY, &opening.bundle())
            .map_err(runtime_err)?;
        if rank == 0 {
            rt.put(set::JOB_KEY_KEY, &set::new_job_key().to_le_bytes())
                .map_err(runtime_err)?;
        }
        rt.fence().map_err(runtime_err)?;
        let key = rt
            .get(0, set::JOB_KEY_KEY)
            .map_err(runtime_err)?
            .and_then(|k| <[u8; 8]>::try_from(&k[..]).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| {
                PmlError::Transport(
                    "transport set: rank 0 published no job key (a rank of another Kestrel \
                     version?)"
                        .into(),
                )
            })?;
        let mut bundles = Vec::with_capacity(size as usize);
        for p in 0..size {
            bundles.push(if p == rank {
                None
            } else {
                rt.get(p, set::CARDS_KEY).map_err(runtime_err)?
            });
        }
        let describe = |p: u32| format!("rank {p} on {}", nodes[p as usize]);
        let transports = opening
            .attach(&bundles, key, &describe)
            .map_err(PmlError::Transport)?;
        Ok(Engine::with_transports(
            params,
            EngineSetup {
                rank,
                size,
                nodes,
                job_id,
                transports,
                network_flush,
                registry,
            },
        ))
    }

    /// An engine over transports set up elsewhere (by [`Engine::new`], or by a test over
    /// in-memory transports).
    pub fn with_transports(params: &Params, setup: EngineSetup) -> Engine {
        let EngineSetup {
            rank,
            size,
            nodes,
            job_id,
            transports,
            network_flush,
            registry,
        } = setup;
        let set::Attached {
            btls,
            names,
            route,
            unreachable,
        } = transports;
        let selected = names.join(",");
        tracing::debug!(target: "pml", rank, btls = %selected, "transports ready");
        let kernel_time = btls.iter().any(|b| b.needs_kernel_time());
        let node_coll = registry.iter().find_map(|c| c.node_collectives());
        let mut e = Engine {
            rank,
            size,
            btls,
            route,
            nodes,
            unreachable,
            network_flush,
            registry,
            node_coll,
            st: State {
                ctxs: Vec::new(),
                orphans: HashMap::new(),
                reqs: Vec::new(),
                free_reqs: Vec::new(),
                outbox: VecDeque::new(),
                gets: Vec::new(),
                puts: Vec::new(),
                matched: Vec::new(),
                probed: Vec::new(),
                scratch: Vec::new(),
                protocol_errors: 0,
            },
            next_ctx: 2,
            // A rank polling a kernel-driven transport yields between polls even with a
            // core of its own: the packets it waits for are processed on the same cores.
            yield_when_idle: core_params::YIELD_WHEN_IDLE.get(params) || kernel_time,
            spin_before_yield: crate::params::SPIN_BEFORE_YIELD.get(params) as u32,
            selected,
            params: params.clone(),
            split_copy_min: crate::params::SPLIT_COPY_MIN.get(params),
            job_tag: file_safe(&job_id),
            coll_segments: Vec::new(),
            dpm: crate::dpm::DpmState::new(&job_id, size),
        };
        e.add_context(CTX_WORLD, (0..size).collect());
        e.add_context(CTX_SELF, vec![rank]);
        e
    }

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

    /// Registers a communicator context (its members as job ranks, in rank order) and
    /// delivers messages that arrived for it before it existed here.
    pub fn add_context(&mut self, ctx: u16, group: Vec<u32>) {
        let idx = ctx as usize;
        if self.st.ctxs.len() <= idx {
            self.st.ctxs.resize_with(idx + 1, || None);
        }
        let n = group.len();
        let me = group.iter().position(|&r| r == self.rank).unwrap_or(0) as u32;
        let broken = self.dpm.first_failed_in(&group);
        self.st.ctxs[idx] = Some(Ctx {
            matcher: MatchEngine::new(n as u32),
            group,
            me,
            send_seq: vec![0; n],
            inter: None,
            broken,
        });
        self.context_added(ctx);
    }

    /// Registers an inter-communicator context: ranks address `remote` (process indices in
    /// remote rank order); `local_ctx` is created as an intra-communicator over `local`.
    pub(crate) fn add_inter_context(
        &mut self,
        ctx: u16,
        local: Vec<u32>,
        remote: Vec<u32>,
        local_ctx: u16,
    ) {
        self.add_context(local_ctx, local.clone());
        let idx = ctx as usize;
        if self.st.ctxs.len() <= idx {
            self.st.ctxs.resize_with(idx + 1, || None);
        }
        let n = remote.len();
        let me = local.iter().position(|&r| r == self.rank).unwrap_or(0) as u32;
        let broken = self
            .dpm
            .first_failed_in(&remote)
            .or_else(|| self.dpm.first_failed_in(&local));
        self.st.ctxs[idx] = Some(Ctx {
            matcher: MatchEngine::new(n as u32),
            group: remote,
            me,
            send_seq: vec![0; n],
            inter: Some(InterCtx {
                local_group: local,
                local_ctx,
            }),
            broken,
        });
        self.context_added(ctx);
    }

    fn context_added(&mut self, ctx: u16) {
        if ctx >= self.next_ctx {
            self.next_ctx = ctx + 1;
        }
        if let Some(early) = self.st.orphans.remove(&ctx) {
            for (peer, data) in early {
                self.st.on_message(peer, &data);
            }
            self.after_delivery();
        }
    }

    /// Forgets a context (`MPI_Comm_free`); for an inter-communicator also its local context.
    pub fn free_context(&mut self, ctx: u16) {
        if ctx > CTX_SELF {
            if let Some(slot) = self.coll_segments.get_mut(ctx as usize) {
                *slot = None;
            }
            if let Some(slot) = self.st.ctxs.get_mut(ctx as usize) {
                if let Some(inter) = slot.take().and_then(|c| c.inter) {
                    self.free_context(inter.local_ctx);
                }
            }
        }
    }

    /// The processes ranks of a context address: its members (process indices, which are job
    /// ranks for this job's processes), or the remote group of an inter-communicator.
    pub fn context_group(&self, ctx: u16) -> Option<&[u32]> {
        self.st
            .ctxs
            .get(ctx as usize)?
            .as_ref()
            .map(|c| c.group.as_slice())
    }

    /// The local group of a context: its members, or an inter-communicator's local group.
    pub fn context_local_group(&self, ctx: u16) -> Option<&[u32]> {
        let c = self.st.ctxs.get(ctx as usize)?.as_ref()?;
        Some(match &c.inter {
            Some(i) => i.local_group.as_slice(),
            None => c.group.as_slice(),
        })
    }

    /// Whether `ctx` is an inter-communicator.
    pub fn is_inter(&self, ctx: u16) -> bool {
        self.st
            .ctxs
            .get(ctx as usize)
            .and_then(|c| c.as_ref())
            .is_some_and(|c| c.inter.is_some())
    }

    pub(crate) fn ctx(&self, ctx: u16) -> Result<&Ctx, PmlError> {
        let c = self
            .st
            .ctxs
            .get(ctx as usize)
            .and_then(|c| c.as_ref())
            .ok_or_else(|| {
                PmlError::Invalid(format!(
                    "pml: communicator context {ctx} does not exist (freed?)"
                ))
            })?;
        if let Some((_, why)) = &c.broken {
            return Err(PmlError::Dpm(kestrel_runtime::dpm::DpmError::ProcFailed(
                why.clone(),
            )));
        }
        Ok(c)
    }

    fn no_route(&self, peer: u32) -> PmlError {
        let node = |r: u32| {
            self.nodes
                .get(r as usize)
                .map(String::as_str)
                .unwrap_or("?")
        };
        let why = self
            .unreachable
            .get(peer as usize)
            .and_then(Option::as_deref)
            .unwrap_or("no transport allowed by the btl parameter reaches it");
        PmlError::Unreachable(format!(
            "pml: no transport reaches rank {peer} on {} from rank {} on {} (transports in use: \
             {}): {why}",
            node(peer),
            self.rank,
            node(self.rank),
            self.selected,
        ))
    }

    #[cold]
    fn send_route_error(&self, peer: u32) -> PmlError {
        if let Some(why) = self.dpm.gone_reason(peer) {
            return PmlError::Dpm(kestrel_runtime::dpm::DpmError::ProcFailed(why.to_string()));
        }
        self.no_route(peer)
    }

    /// Why `isend` cannot use context `ctx` (missing or broken) or rank `dest` in it.
    #[cold]
    fn send_ctx_error(&self, ctx: u16, dest: u32) -> PmlError {
        match self.ctx(ctx) {
            Err(e) => e,
            Ok(c) => PmlError::Invalid(format!(
                "pml: destination rank {dest} is outside a communicator of {}",
                c.group.len()
            )),
        }
    }

    /// Starts a send of `buf` to communicator rank `dest` of `ctx`. `sync` makes it complete
    /// only once the receiver matched it.
    pub fn isend(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        buf: UserBuf,
        sync: bool,
    ) -> Result<ReqId, PmlError> {
        // One lookup of the context serves the checks, the route and the sequence number:
        // this is the path of every small send.
        let (peer, me, b, seq) = match self.st.ctxs.get_mut(ctx as usize) {
            Some(Some(c)) if c.broken.is_none() && (dest as usize) < c.group.len() => {
                let peer = c.group[dest as usize];
                let b = self.route[peer as usize];
                if b == NO_ROUTE {
                    return Err(self.send_route_error(peer));
                }
                let seq = &mut c.send_seq[dest as usize];
                let s = *seq;
                *seq = s.wrapping_add(1);
                (peer, c.me, b, s)
            }
            _ => return Err(self.send_ctx_error(ctx, dest)),
        };
        let limits = self.btls[b as usize].limits();
        let len = buf.len();
        if !sync && len + hdr::MATCH_LEN <= limits.eager_limit {
            let h = hdr::match_header(ctx, me, tag, seq);
            if self.st.outbox.is_empty() {
                match self.btls[b as usize].send(peer, AM_PML, &h, buf.as_slice()) {
                    Ok(()) => return Ok(DONE),
                    Err(SendError::WouldBlock) => {}
                    Err(e) => return Err(PmlError::Transport(e.to_string())),
                }
            }
            self.st.outbox.push_back(Out::Msg {
                peer,
                hdr: h.to_vec(),
                data: buf.as_slice().to_vec(),
            });
            return Ok(DONE);
        }
        if sync && len + hdr::SYNC_LEN <= limits.eager_limit {
            let id = self.st.alloc(Req::Send {
                peer,
                buf,
                state: SendState::WaitAck,
                failed: None,
            });
            let mut h = Vec::with_capacity(hdr::SYNC_LEN);
            hdr::encode(
                &Header::Match {
                    ctx,
                    src: me,
                    tag,
                    seq,
                    sync_req: Some(id),
                },
                &mut h,
            );
            self.st.outbox.push_back(Out::Msg {
                peer,
                hdr: h,
                data: buf.as_slice().to_vec(),
            });
            self.drain_outbox();
            return Ok(id);
        }
        let id = self.st.alloc(Req::Send {
            peer,
            buf,
            state: SendState::Rndv,
            failed: None,
        });
        let get_addr = limits
            .get
            .then(|| self.btls[b as usize].expose(buf.as_slice()).addr);
        let mut h = Vec::with_capacity(hdr::RNDV_LEN);
        hdr::encode(
            &Header::Rndv {
                ctx,
                src: me,
                tag,
                seq,
                len: len as u64,
                send_req: id,
                get_addr,
            },
            &mut h,
        );
        self.st.outbox.push_back(Out::Msg {
            peer,
            hdr: h,
            data: Vec::new(),
        });
        self.drain_outbox();
        Ok(id)
    }

    /// Posts a receive into `buf` from communicator rank `source` (None = any) with `tag`
    /// (None = any non-negative tag).
    pub fn irecv(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
        buf: UserBuf,
    ) -> Result<ReqId, PmlError> {
        self.ctx(ctx)?;
        let id = self.st.alloc(Req::Recv {
            ctx,
            buf,
            state: RecvState::Posted,
            status: Status::default(),
        });
        let c = self.st.ctxs[ctx as usize].as_mut().expect("checked above");
        if let Some((env, arrived)) = c.matcher.post(RecvId(id), Selector { source, tag }) {
            self.st.matched_recv(id, env, arrived);
            self.after_delivery();
        }
        Ok(id)
    }

    /// `MPI_Iprobe`: the status of the message a receive would get now, if any.
    pub fn iprobe(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Option<Status>, PmlError> {
        self.ctx(ctx)?;
        let found = self.peek_probe(ctx, source, tag);
        if found.is_none() {
            self.progress();
            return Ok(self.peek_probe(ctx, source, tag));
        }
        Ok(found)
    }

    fn peek_probe(&self, ctx: u16, source: Option<u32>, tag: Option<i32>) -> Option<Status> {
        let c = self.st.ctxs.get(ctx as usize)?.as_ref()?;
        c.matcher
            .probe(Selector { source, tag })
            .map(|(env, a)| Status {
                source: env.source as i32,
                tag: env.tag,
                count: a.len(),
                ..Status::default()
            })
    }

    /// `MPI_Improbe`: removes the matching message, to be received with [`Engine::imrecv`].
    pub fn improbe(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Option<(MessageHandle, Status)>, PmlError> {
        self.ctx(ctx)?;
        for attempt in 0..2 {
            let c = self.st.ctxs[ctx as usize].as_mut().expect("checked above");
            if let Some((env, a)) = c.matcher.take(Selector { source, tag }) {
                let status = Status {
                    source: env.source as i32,
                    tag: env.tag,
                    count: a.len(),
                    ..Status::default()
                };
                let slot = self
                    .st
                    .probed
                    .iter()
                    .position(|p| p.is_none())
                    .unwrap_or_else(|| {
                        self.st.probed.push(None);
                        self.st.probed.len() - 1
                    });
                self.st.probed[slot] = Some((ctx, env, a));
                return Ok(Some((MessageHandle(slot), status)));
            }
            if attempt == 0 {
                self.progress();
            }
        }
        Ok(None)
    }

    /// `MPI_Imrecv`: receives a message taken by [`Engine::improbe`].
    pub fn imrecv(&mut self, msg: MessageHandle, buf: UserBuf) -> Result<ReqId, PmlError> {
        let (ctx, env, arrived) = self
            .st
            .probed
            .get_mut(msg.0)
            .and_then(Option::take)
            .ok_or_else(|| {
                PmlError::Invalid("pml: message handle already received or never probed".into())
            })?;
        let id = self.st.alloc(Req::Recv {
            ctx,
            buf,
            state: RecvState::Posted,
            status: Status::default(),
        });
        self.st.matched_recv(id, env, arrived);
        self.after_delivery();
        Ok(id)
    }

    /// Cancels a receive that has not matched yet; true if it was cancelled.
    pub fn cancel(&mut self, id: ReqId, ctx: u16) -> bool {
        let Some(c) = self.st.ctxs.get_mut(ctx as usize).and_then(|c| c.as_mut()) else {
            return false;
        };
        if !c.matcher.cancel(RecvId(id)) {
            return false;
        }
        if let Some(Req::Recv { state, status, .. }) = self.st.req_mut(id) {
            *state = RecvState::Done;
            status.cancelled = true;
        }
        true
    }

    /// Completes `id` if done, without progress: `Some(status)` frees the request.
    pub fn try_complete(&mut self, id: ReqId) -> Option<Status> {
        if id == DONE {
            return Some(Status::default());
        }
        let done = match self.st.req_mut(id)? {
            Req::Send { state, .. } => matches!(state, SendState::Done),
            Req::Recv { state, .. } => matches!(state, RecvState::Done),
        };
        if !done {
            return None;
        }
        let status = match self.st.free(id) {
            Some(Req::Recv { status, .. }) => status,
            Some(Req::Send { failed, .. }) => Status {
                failed_peer: failed,
                ..Status::default()
            },
            None => Status::default(),
        };
        Some(status)
    }

    /// Whether `id` is complete (without freeing it).
    pub fn is_complete(&self, id: ReqId) -> bool {
        if id == DONE {
            return true;
        }
        match self.st.req(id) {
            Some(Req::Send { state, .. }) => matches!(state, SendState::Done),
            Some(Req::Recv { state, .. }) => matches!(state, RecvState::Done),
            None => true,
        }
    }

    /// `MPI_Test`: one round of progress, then completes `id` if done.
    pub fn test(&mut self, id: ReqId) -> Option<Status> {
        if let Some(s) = self.try_complete(id) {
            return Some(s);
        }
        self.progress();
        self.try_complete(id)
    }

    /// Progresses until `id` completes.
    pub fn wait(&mut self, id: ReqId) -> Status {
        let mut idle = 0u32;
        loop {
            if let Some(s) = self.try_complete(id) {
                return s;
            }
            self.idle_step(&mut idle);
        }
    }

    /// One step of an idle wait: progress, and back off when nothing happened.
    pub fn idle_step(&mut self, idle: &mut u32) {
        if self.dpm.lifelines.has_news() {
            self.apply_lifeline_events();
        }
        if self.progress() > 0 {
            *idle = 0;
            return;
        }
        *idle = idle.saturating_add(1);
        // Oversubscribed ranks yield soon; the others only after a long idle stretch, which
        // costs a spinning rank nothing measurable but saves it when the machine turns out to
        // be busier than the launcher could see (other jobs, namespace hosts sharing cores).
        if (self.yield_when_idle && *idle > self.spin_before_yield) || *idle > LONG_IDLE {
            std::thread::yield_now();
        } else if *idle > PAUSE_AFTER {
            // PAUSE costs tens of nanoseconds on recent cores: use it only once a wait is
            // clearly not a ping-pong, where it would add straight to the latency.
            std::hint::spin_loop();
        }
    }

    /// Polls every transport, then runs the work deliveries queued. Returns events handled.
    pub fn progress(&mut self) -> usize {
        let mut n = 0;
        let st = &mut self.st;
        for b in self.btls.iter_mut() {
            n += b.progress(&mut |m| {
                if m.am == AM_PML {
                    st.on_message(m.peer, m.data);
                } else {
                    st.protocol_errors += 1;
                    tracing::error!(target: "pml", "dropped a message with unknown active-message tag {} from rank {}", m.am, m.peer);
                }
            });
        }
        n + self.after_delivery()
    }

    /// Runs the work deliveries queued (gets, puts, sends that found a transport full). The
    /// check is inline because a waiting rank runs it on every poll and nearly always finds
    /// nothing.
    #[inline]
    fn after_delivery(&mut self) -> usize {
        if self.st.puts.is_empty() && self.st.gets.is_empty() && self.st.outbox.is_empty() {
            return 0;
        }
        self.run_deliveries()
    }

    #[inline(never)]
    fn run_deliveries(&mut self) -> usize {
        let mut n = 0;
        if !self.st.puts.is_empty() {
            n += self.run_puts();
        }
        if !self.st.gets.is_empty() {
            n += self.run_gets();
        }
        if !self.st.outbox.is_empty() {
            n += self.drain_outbox();
        }
        n
    }

    /// The sender's half of split copies: write it into the receiver's buffer, or stream it
    /// as fragments if the put fails.
    fn run_puts(&mut self) -> usize {
        let puts = std::mem::take(&mut self.st.puts);
        let n = puts.len();
        for p in puts {
            let Some(Req::Send { buf, .. }) = self.st.req(p.send_req) else {
                continue;
            };
            let buf = *buf;
            let b = self.route[p.peer as usize];
            let part = &buf.as_slice()[p.split as usize..p.end as usize];
            let put = if b == NO_ROUTE {
                Err(SendError::Unreachable { peer: p.peer })
            } else {
                self.btls[b as usize].put(
                    p.peer,
                    RemoteRegion {
                        addr: p.addr,
                        len: p.end,
                    },
                    p.split,
                    part,
                )
            };
            match put {
                Ok(()) => self.st.control(
                    p.peer,
                    Header::PutDone {
                        recv_req: p.recv_req,
                    },
                ),
                Err(e) => {
                    tracing::warn!(target: "pml", "single-copy put to rank {} failed, streaming instead: {e}", p.peer);
                    self.st.outbox.push_back(Out::Stream {
                        req: p.send_req,
                        peer: p.peer,
                        recv_req: p.recv_req,
                        offset: p.split as usize,
                        len: p.end as usize,
                        completes: false,
                    });
                }
            }
        }
        n
    }

    fn run_gets(&mut self) -> usize {
        let gets = std::mem::take(&mut self.st.gets);
        let n = gets.len();
        for g in gets {
            let b = self.route[g.peer as usize];
            let Some(Req::Recv { buf, .. }) = self.st.req(g.req) else {
                continue;
            };
            let mut target = *buf;
            let usable = b != NO_ROUTE && self.btls[b as usize].can_get(g.peer);
            let effective = (g.len as usize).min(target.len());
            // Large messages: the sender, otherwise idle until FIN, copies the upper half
            // while we copy the lower one, so both cores move data.
            let split = (self.split_copy_min > 0
                && effective as u64 >= self.split_copy_min
                && usable
                && self.btls[b as usize].can_put(g.peer))
            .then_some((effective / 2) & !4095);
            if let Some(split) = split {
                let addr = self.btls[b as usize]
                    .expose(target.slice_mut(0, effective))
                    .addr;
                if let Some(Req::Recv { state, .. }) = self.st.req_mut(g.req) {
                    *state = RecvState::Split {
                        send_req: g.send_req,
                        peer: g.peer,
                        get_done: false,
                        streamed: 0,
                        sender_part: effective - split,
                        put_done: false,
                    };
                }
                self.st.control(
                    g.peer,
                    Header::Split {
                        send_req: g.send_req,
                        recv_req: g.req,
                        addr,
                        split: split as u64,
                        end: effective as u64,
                    },
                );
                // Send the request now so the sender starts while we copy.
                self.drain_outbox();
                let dst = target.slice_mut(0, split);
                match self.btls[b as usize].get(
                    g.peer,
                    RemoteRegion {
                        addr: g.addr,
                        len: g.len,
                    },
                    0,
                    dst,
                ) {
                    Ok(()) => self.st.split_part_done(g.req, true),
                    Err(e) => {
                        // Cannot happen once can_get said yes, unless the peer died; the
                        // launcher then stops the job.
                        tracing::error!(target: "pml", "single-copy get from rank {} failed in a split copy: {e}", g.peer);
                    }
                }
                continue;
            }
            let mut done = false;
            if usable {
                let dst = target.slice_mut(0, g.len as usize);
                match self.btls[b as usize].get(
                    g.peer,
                    RemoteRegion {
                        addr: g.addr,
                        len: g.len,
                    },
                    0,
                    dst,
                ) {
                    Ok(()) => done = true,
                    Err(e) => {
                        tracing::warn!(target: "pml", "single-copy get from rank {} failed, using the copy pipeline: {e}", g.peer)
                    }
                }
            }
            if done {
                if let Some(Req::Recv { state, .. }) = self.st.req_mut(g.req) {
                    *state = RecvState::Done;
                }
                self.st.control(
                    g.peer,
                    Header::Fin {
                        send_req: g.send_req,
                    },
                );
            } else {
                if let Some(Req::Recv { state, .. }) = self.st.req_mut(g.req) {
                    *state = RecvState::Pipeline {
                        total: g.len as usize,
                        received: 0,
                    };
                }
                self.st.control(
                    g.peer,
                    Header::Ack {
                        send_req: g.send_req,
                        recv_req: g.req,
                    },
                );
            }
        }
        n
    }

    fn drain_outbox(&mut self) -> usize {
        let mut n = 0;
        while let Some(out) = self.st.outbox.pop_front() {
            match out {
                Out::Msg { peer, hdr, data } => {
                    let b = self.route[peer as usize];
                    if b == NO_ROUTE {
                        self.st.protocol_errors += 1;
                        continue;
                    }
                    match self.btls[b as usize].send(peer, AM_PML, &hdr, &data) {
                        Ok(()) => n += 1,
                        Err(SendError::WouldBlock) => {
                            self.st.outbox.push_front(Out::Msg { peer, hdr, data });
                            break;
                        }
                        Err(e) => {
                            tracing::error!(target: "pml", "send to rank {peer} failed: {e}");
                            self.st.protocol_errors += 1;
                        }
                    }
                }
                Out::Stream {
                    req,
                    peer,
                    recv_req,
                    mut offset,
                    len,
                    completes,
                } => {
                    let b = self.route[peer as usize];
                    if b == NO_ROUTE {
                        // The peer failed: its request was failed with it.
                        continue;
                    }
                    let b = b as usize;
                    let chunk = self.btls[b].limits().max_send - hdr::FRAG_LEN;
                    let Some(Req::Send { buf, .. }) = self.st.req(req) else {
                        continue;
                    };
                    let buf = *buf;
                    let mut blocked = false;
                    while offset < len {
                        let end = (offset + chunk).min(len);
                        let mut h = std::mem::take(&mut self.st.scratch);
                        hdr::encode(
                            &Header::Frag {
                                recv_req,
                                offset: offset as u64,
                            },
                            &mut h,
                        );
                        let r = self.btls[b].send(peer, AM_PML, &h, &buf.as_slice()[offset..end]);
                        self.st.scratch = h;
                        match r {
                            Ok(()) => {
                                offset = end;
                                n += 1;
                            }
                            Err(SendError::WouldBlock) => {
                                blocked = true;
                                break;
                            }
                            Err(e) => {
                                tracing::error!(target: "pml", "streaming to rank {peer} failed: {e}");
                                offset = len;
                            }
                        }
                    }
                    if blocked {
                        self.st.outbox.push_front(Out::Stream {
                            req,
                            peer,
                            recv_req,
                            offset,
                            len,
                            completes,
                        });
                        break;
                    }
                    if completes {
                        if let Some(Req::Send { state, .. }) = self.st.req_mut(req) {
                            *state = SendState::Done;
                        }
                    }
                }
            }
        }
        n
    }

    /// One step of a collective algorithm: posts every receive, starts every send, and returns
    /// once all of them completed. It holds the borrows of all buffers until then, which is
    /// what makes it safe. A receive that gets a different length than its buffer is an error
    /// naming the rank (ranks passed mismatched counts).
    pub fn exchange(
        &mut self,
        ctx: u16,
        tag: i32,
        sends: &[(u32, &[u8])],
        recvs: &mut [(u32, &mut [u8])],
    ) -> Result<(), PmlError> {
        let mut ids: Vec<(ReqId, Option<(u32, usize)>)> =
            Vec::with_capacity(sends.len() + recvs.len());
        let mut first_err = None;
        for (src, buf) in recvs.iter_mut() {
            // SAFETY: `buf` stays borrowed until every request of this call has completed
            // (all are waited for below, errors included).
            #[allow(unsafe_code)]
            let ub = unsafe { UserBuf::for_recv(buf.as_mut_ptr(), buf.len()) };
            match self.irecv(ctx, Some(*src), Some(tag), ub) {
                Ok(id) => ids.push((id, Some((*src, buf.len())))),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for (dst, data) in sends {
            // SAFETY: as above.
            #[allow(unsafe_code)]
            let ub = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
            match self.isend(ctx, *dst, tag, ub, false) {
                Ok(id) => ids.push((id, None)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for (id, expect) in ids {
            let st = self.wait(id);
            if let Some(p) = st.failed_peer {
                if first_err.is_none() {
                    first_err = Some(self.failure_error(p));
                }
                continue;
            }
            if let Some((src, len)) = expect {
                let got = st.truncated_from.unwrap_or(st.count);
                if got != len && first_err.is_none() {
                    first_err = Some(PmlError::Invalid(format!(
                        "collective: rank {src} sent {got} bytes where {len} were expected; every rank must pass matching counts and types"
                    )));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Blocking helper: sends bytes to a communicator rank.
    pub fn send_bytes(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        data: &[u8],
    ) -> Result<(), PmlError> {
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
        let id = self.isend(ctx, dest, tag, buf, false)?;
        self.wait(id);
        Ok(())
    }

    /// Blocking send that reports a failed peer (or broken communicator) as an error.
    pub fn send_checked(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        data: &[u8],
        sync: bool,
    ) -> Result<(), PmlError> {
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
        let id = self.isend(ctx, dest, tag, buf, sync)?;
        match self.wait(id).failed_peer {
            Some(p) => Err(self.failure_error(p)),
            None => Ok(()),
        }
    }

    /// Blocking receive into `buf` that reports a failed peer (or broken communicator) as an
    /// error instead of a status.
    pub fn recv_checked(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
        buf: &mut [u8],
    ) -> Result<Status, PmlError> {
        // SAFETY: `buf` stays borrowed until the request completes, before this returns.
        #[allow(unsafe_code)]
        let ub = unsafe { UserBuf::for_recv(buf.as_mut_ptr(), buf.len()) };
        let id = self.irecv(ctx, source, tag, ub)?;
        let st = self.wait(id);
        match st.failed_peer {
            Some(p) => Err(self.failure_error(p)),
            None => Ok(st),
        }
    }

    /// Blocking receive of a whole message of any length (a matched probe, then the receive);
    /// a failed peer (or broken communicator) is an error.
    pub fn recv_vec_checked(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Result<(Vec<u8>, Status), PmlError> {
        let mut idle = 0;
        let (handle, status) = loop {
            if let Some(found) = self.improbe(ctx, source, tag)? {
                break found;
            }
            self.idle_step(&mut idle);
        };
        let mut data = vec![0u8; status.count];
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
        let id = self.imrecv(handle, buf)?;
        let st = self.wait(id);
        match st.failed_peer {
            Some(p) => Err(self.failure_error(p)),
            None => Ok((data, st)),
        }
    }

    /// Blocking helper: receives a message of any length from a communicator rank.
    pub fn recv_bytes(&mut self, ctx: u16, source: u32, tag: i32) -> Result<Vec<u8>, PmlError> {
        let mut idle = 0;
        let (handle, status) = loop {
            if let Some(found) = self.improbe(ctx, Some(source), Some(tag))? {
                break found;
            }
            self.idle_step(&mut idle);
        };
        let mut data = vec![0u8; status.count];
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
        let id = self.imrecv(handle, buf)?;
        self.wait(id);
        Ok(data)
    }

    /// Collective over `ctx`: every member's bytes, in rank order (linear gather + broadcast).
    pub fn allgather_bytes(&mut self, ctx: u16, mine: &[u8]) -> Result<Vec<Vec<u8>>, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if me != 0 {
            self.send_bytes(ctx, 0, TAG_GATHER, mine)?;
            let packed = self.recv_bytes(ctx, 0, TAG_BCAST)?;
            return unpack(&packed, n as usize).ok_or_else(|| {
                PmlError::Transport("pml: malformed allgather reply from rank 0".into())
            });
        }
        let mut all = vec![mine.to_vec()];
        for r in 1..n {
            all.push(self.recv_bytes(ctx, r, TAG_GATHER)?);
        }
        let packed = pack(&all);
        for r in 1..n {
            self.send_bytes(ctx, r, TAG_BCAST, &packed)?;
        }
        Ok(all)
    }

    /// Collective over `ctx`: a new context id agreed by all members (`MPI_Comm_dup`'s
    /// first step): the largest next-free id among them.
    pub fn agree_context(&mut self, ctx: u16) -> Result<u16, PmlError> {
        let all = self.allgather_bytes(ctx, &self.next_ctx.to_le_bytes())?;
        let mut best = self.next_ctx;
        for a in all {
            if let [lo, hi] = a[..] {
                best = best.max(u16::from_le_bytes([lo, hi]));
            }
        }
        if best == u16::MAX {
            return Err(PmlError::Invalid("pml: out of communicator context ids (65534 in use); free communicators you no longer need".into()));
        }
        self.next_ctx = best + 1;
        Ok(best)
    }

    /// `MPI_Comm_dup`: a new context with the same members.
    pub fn dup(&mut self, ctx: u16) -> Result<u16, PmlError> {
        if self.is_inter(ctx) {
            return self.inter_dup(ctx);
        }
        let group = self.ctx(ctx)?.group.clone();
        let new = self.agree_context(ctx)?;
        self.add_context(new, group);
        Ok(new)
    }

    /// `MPI_Comm_split`: members with the same `color` form a communicator ordered by (key,
    /// old rank); `None` = `MPI_UNDEFINED` (no communicator). Returns the new context.
    pub fn split(
        &mut self,
        ctx: u16,
        color: Option<i32>,
        key: i32,
    ) -> Result<Option<u16>, PmlError> {
        let mut mine = Vec::with_capacity(9);
        mine.push(u8::from(color.is_some()));
        mine.extend_from_slice(&color.unwrap_or(0).to_le_bytes());
        mine.extend_from_slice(&key.to_le_bytes());
        let all = self.allgather_bytes(ctx, &mine)?;
        let group = self.ctx(ctx)?.group.clone();
        let new = self.agree_context(ctx)?;
        let Some(color) = color else { return Ok(None) };
        let mut members: Vec<(i32, usize, u32)> = Vec::new();
        for (r, a) in all.iter().enumerate() {
            if a.len() != 9 {
                return Err(PmlError::Transport(format!(
                    "pml: malformed split contribution from rank {r}"
                )));
            }
            let c = i32::from_le_bytes([a[1], a[2], a[3], a[4]]);
            let k = i32::from_le_bytes([a[5], a[6], a[7], a[8]]);
            if a[0] == 1 && c == color {
                members.push((k, r, group[r]));
            }
        }
        members.sort();
        self.add_context(new, members.into_iter().map(|(_, _, g)| g).collect());
        Ok(Some(new))
    }

    /// A group of the members of `ctx`.
    pub fn group_of(&self, ctx: u16) -> Result<Group, PmlError> {
        Ok(Group::new(self.ctx(ctx)?.group.clone()))
    }

    /// Completes all queued sends, then waits for every rank (through the runtime, which does
    /// not need the transports) so that no peer still reads our memory when it goes away.
    pub fn finalize(&mut self, rt: &mut Runtime) -> Result<(), PmlError> {
        let mut idle = 0;
        while !self.st.outbox.is_empty()
            || self.st.reqs.iter().any(|s| matches!(&s.req, Some(Req::Send { state, .. }) if !matches!(state, SendState::Done)))
        {
            self.idle_step(&mut idle);
            if idle > 10_000_000 {
                break;
            }
        }
        // A transport that acknowledges its data (usnic) may still owe a peer a resend after
        // the last send completed here. Every rank's receives are complete once all ranks
        // reach this barrier, so what is left to flush afterwards is only acknowledgements
        // and resends that peers still progressing will answer.
        // `network_flush` is the same on every rank (it depends on the node list and the btl
        // parameter only), so either every rank enters this barrier or none does.
        if self.network_flush {
            self.coll_barrier(CTX_WORLD)?;
        }
        // Transports of connections to other jobs flush too: those jobs keep running and
        // must get what this process sent before it leaves.
        if self.network_flush || self.dpm.has_connections() {
            let mut idle = 0;
            while !self.btls.iter_mut().all(|b| b.quiesce()) {
                self.idle_step(&mut idle);
            }
        }
        self.dpm_finalize();
        rt.barrier().map_err(|e| PmlError::Runtime(e.to_string()))?;
        self.coll_segments.clear();
        self.btls.clear();
        Ok(())
    }
}

fn pack(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for p in parts {
        out.extend_from_slice(&(p.len() as u64).to_le_bytes());
        out.extend_from_slice(p);
    }
    out
}

fn unpack(mut data: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = u64::from_le_bytes(data.get(..8)?.try_into().ok()?) as usize;
        out.push(data.get(8..8 + len)?.to_vec());
        data = &data[8 + len..];
    }
    data.is_empty().then_some(out)
}

impl State {
    /// Completes the pending operations that failed process `p` ends: sends to it, receives
    /// posted on the contexts in `broken` (and split copies it was part of), and drops queued
    /// work for it. Transfers with live peers already under way are left to finish, so no
    /// peer writes into a buffer its owner was told is free.
    pub(crate) fn fail_pending(&mut self, p: u32, broken: &[u16]) {
        let mut cancel = Vec::new();
        for (idx, slot) in self.reqs.iter_mut().enumerate() {
            let id = (u64::from(slot.gen) << 32) | idx as u64;
            match &mut slot.req {
                Some(Req::Send {
                    peer,
                    state,
                    failed,
                    ..
                }) if *peer == p && !matches!(state, SendState::Done) => {
                    *state = SendState::Done;
                    *failed = Some(p);
                }
                Some(Req::Recv {
                    ctx, state, status, ..
                }) if broken.contains(ctx) => {
                    let ends = match state {
                        RecvState::Posted => {
                            cancel.push((*ctx, id));
                            true
                        }
                        RecvState::Pipeline { .. } => true,
                        RecvState::Split { peer, .. } => *peer == p,
                        RecvState::Done => false,
                    };
                    if ends {
                        *state = RecvState::Done;
                        status.failed_peer = Some(p);
                    }
                }
                _ => {}
            }
        }
        for (ctx, id) in cancel {
            if let Some(c) = self.ctxs.get_mut(ctx as usize).and_then(Option::as_mut) {
                c.matcher.cancel(RecvId(id));
            }
        }
        self.outbox.retain(|o| match o {
            Out::Msg { peer, .. } | Out::Stream { peer, .. } => *peer != p,
        });
        self.gets.retain(|g| g.peer != p);
        self.puts.retain(|x| x.peer != p);
    }

    fn alloc(&mut self, req: Req) -> ReqId {
        let idx = match self.free_reqs.pop() {
            Some(i) => i,
            None => {
                self.reqs.push(Slot { gen: 0, req: None });
                (self.reqs.len() - 1) as u32
            }
        };
        let slot = &mut self.reqs[idx as usize];
        slot.gen = slot.gen.wrapping_add(1) & 0x7fff_ffff;
        slot.req = Some(req);
        (u64::from(slot.gen) << 32) | u64::from(idx)
    }

    fn req(&self, id: ReqId) -> Option<&Req> {
        let slot = self.reqs.get((id & 0xffff_ffff) as usize)?;
        (u64::from(slot.gen) == id >> 32).then_some(())?;
        slot.req.as_ref()
    }

    fn req_mut(&mut self, id: ReqId) -> Option<&mut Req> {
        let slot = self.reqs.get_mut((id & 0xffff_ffff) as usize)?;
        (u64::from(slot.gen) == id >> 32).then_some(())?;
        slot.req.as_mut()
    }

    fn free(&mut self, id: ReqId) -> Option<Req> {
        let idx = (id & 0xffff_ffff) as usize;
        let slot = self.reqs.get_mut(idx)?;
        if u64::from(slot.gen) != id >> 32 {
            return None;
        }
        let r = slot.req.take();
        self.free_reqs.push(idx as u32);
        r
    }

    fn control(&mut self, peer: u32, h: Header) {
        let mut v = Vec::with_capacity(hdr::ACK_LEN);
        hdr::encode(&h, &mut v);
        self.outbox.push_back(Out::Msg {
            peer,
            hdr: v,
            data: Vec::new(),
        });
    }

    fn protocol_error(&mut self, peer: u32, what: impl fmt::Display) {
        self.protocol_errors += 1;
        tracing::error!(target: "pml", "dropped a message from rank {peer}: {what}");
    }

    /// A matched receive: copy eager data, or start the rendezvous.
    fn matched_recv(&mut self, id: ReqId, env: Envelope, arrived: Arrived) {
        let Some(Req::Recv {
            buf, state, status, ..
        }) = self.req_mut(id)
        else {
            return;
        };
        status.source = env.source as i32;
        status.tag = env.tag;
        let len = arrived.len();
        if len > buf.len() {
            status.truncated_from = Some(len);
        }
        match arrived {
            Arrived::Eager {
                data,
                sync_req,
                peer,
            } => {
                status.count = buf.write_at(0, &data);
                *state = RecvState::Done;
                if let Some(send_req) = sync_req {
                    self.control(
                        peer,
                        Header::Ack {
                            send_req,
                            recv_req: 0,
                        },
                    );
                }
            }
            Arrived::Rndv {
                len,
                send_req,
                get_addr,
                peer,
            } => {
                status.count = (len as usize).min(buf.len());
                match get_addr {
                    Some(addr) => self.gets.push(PendingGet {
                        req: id,
                        peer,
                        addr,
                        len,
                        send_req,
                    }),
                    None => {
                        *state = RecvState::Pipeline {
                            total: len as usize,
                            received: 0,
                        };
                        self.control(
                            peer,
                            Header::Ack {
                                send_req,
                                recv_req: id,
                            },
                        );
                    }
                }
            }
        }
    }

    fn on_message(&mut self, peer: u32, data: &[u8]) {
        let (h, used) = match hdr::decode(data) {
            Ok(x) => x,
            Err(e) => return self.protocol_error(peer, e),
        };
        match h {
            Header::Match {
                ctx,
                src,
                tag,
                seq,
                sync_req,
            } => {
                let Some(c) = self.ctxs.get_mut(ctx as usize).and_then(|c| c.as_mut()) else {
                    self.orphans
                        .entry(ctx)
                        .or_default()
                        .push((peer, data.to_vec()));
                    return;
                };
                let env = Envelope {
                    source: src,
                    tag,
                    seq,
                };
                let payload = &data[used..];
                match c.matcher.match_in_order(env) {
                    Ok(Some(RecvId(id))) => {
                        // The fast path: straight from the transport into the user's buffer.
                        if let Some(Req::Recv {
                            buf, state, status, ..
                        }) = self.req_mut(id)
                        {
                            status.source = src as i32;
                            status.tag = tag;
                            status.count = buf.write_at(0, payload);
                            if payload.len() > buf.len() {
                                status.truncated_from = Some(payload.len());
                            }
                            *state = RecvState::Done;
                        }
                        if let Some(send_req) = sync_req {
                            self.control(
                                peer,
                                Header::Ack {
                                    send_req,
                                    recv_req: 0,
                                },
                            );
                        }
                    }
                    Ok(None) => {
                        let arrived = Arrived::Eager {
                            data: payload.to_vec(),
                            sync_req,
                            peer,
                        };
                        self.arrive(peer, ctx, env, arrived);
                    }
                    Err(e) => self.protocol_error(peer, e),
                }
            }
            Header::Rndv {
                ctx,
                src,
                tag,
                seq,
                len,
                send_req,
                get_addr,
            } => {
                if self
                    .ctxs
                    .get(ctx as usize)
                    .and_then(|c| c.as_ref())
                    .is_none()
                {
                    self.orphans
                        .entry(ctx)
                        .or_default()
                        .push((peer, data.to_vec()));
                    return;
                }
                let env = Envelope {
                    source: src,
                    tag,
                    seq,
                };
                self.arrive(
                    peer,
                    ctx,
                    env,
                    Arrived::Rndv {
                        len,
                        send_req,
                        get_addr,
                        peer,
                    },
                );
            }
            Header::Ack { send_req, recv_req } => match self.req_mut(send_req) {
                Some(Req::Send {
                    state: state @ SendState::WaitAck,
                    ..
                }) => *state = SendState::Done,
                Some(Req::Send {
                    state: state @ SendState::Rndv,
                    buf,
                    peer: p,
                    ..
                }) if *p == peer => {
                    *state = SendState::Streaming;
                    let len = buf.len();
                    self.outbox.push_back(Out::Stream {
                        req: send_req,
                        peer,
                        recv_req,
                        offset: 0,
                        len,
                        completes: true,
                    });
                }
                _ => {
                    self.protocol_error(peer, format!("ACK for unknown send request {send_req:#x}"))
                }
            },
            Header::Fin { send_req } => match self.req_mut(send_req) {
                Some(Req::Send {
                    state: state @ SendState::Rndv,
                    ..
                }) => *state = SendState::Done,
                _ => {
                    self.protocol_error(peer, format!("FIN for unknown send request {send_req:#x}"))
                }
            },
            Header::Split {
                send_req,
                recv_req,
                addr,
                split,
                end,
            } => match self.req_mut(send_req) {
                Some(Req::Send {
                    state: SendState::Rndv,
                    peer: p,
                    buf,
                    ..
                }) if *p == peer && split <= end && end <= buf.len() as u64 => {
                    self.puts.push(PendingPut {
                        send_req,
                        peer,
                        recv_req,
                        addr,
                        split,
                        end,
                    });
                }
                _ => self.protocol_error(
                    peer,
                    format!("SPLIT for unknown send request {send_req:#x}"),
                ),
            },
            Header::PutDone { recv_req } => {
                if matches!(
                    self.req(recv_req),
                    Some(Req::Recv {
                        state: RecvState::Split { .. },
                        ..
                    })
                ) {
                    self.split_part_done(recv_req, false);
                } else {
                    self.protocol_error(
                        peer,
                        format!("PUTDONE for unknown receive request {recv_req:#x}"),
                    );
                }
            }
            Header::Frag { recv_req, offset } => {
                let payload = &data[used..];
                match self.req_mut(recv_req) {
                    Some(Req::Recv {
                        buf,
                        state: state @ RecvState::Pipeline { .. },
                        ..
                    }) => {
                        if let RecvState::Pipeline { total, received } = state {
                            buf.write_at(offset as usize, payload);
                            *received += payload.len();
                            if *received >= *total {
                                *state = RecvState::Done;
                            }
                        }
                    }
                    Some(Req::Recv {
                        buf,
                        state:
                            RecvState::Split {
                                streamed,
                                sender_part,
                                ..
                            },
                        ..
                    }) => {
                        // The sender's put failed and its half comes as fragments instead.
                        buf.write_at(offset as usize, payload);
                        *streamed += payload.len();
                        if *streamed >= *sender_part {
                            self.split_part_done(recv_req, false);
                        }
                    }
                    _ => self.protocol_error(
                        peer,
                        format!("FRAG for unknown receive request {recv_req:#x}"),
                    ),
                }
            }
        }
    }

    /// One half of a split copy finished (`mine`: the receiver's own get, else the sender's
    /// put); when both are, the receive completes and the sender learns it may finish.
    fn split_part_done(&mut self, recv_req: ReqId, mine: bool) {
        let Some(Req::Recv { state, .. }) = self.req_mut(recv_req) else {
            return;
        };
        let RecvState::Split {
            send_req,
            peer,
            get_done,
            put_done,
            ..
        } = state
        else {
            return;
        };
        if mine {
            *get_done = true;
        } else {
            *put_done = true;
        }
        if *get_done && *put_done {
            let (send_req, peer) = (*send_req, *peer);
            *state = RecvState::Done;
            self.control(peer, Header::Fin { send_req });
        }
    }

    fn arrive(&mut self, peer: u32, ctx: u16, env: Envelope, arrived: Arrived) {
        let mut matched = std::mem::take(&mut self.matched);
        let Some(c) = self.ctxs.get_mut(ctx as usize).and_then(|c| c.as_mut()) else {
            return;
        };
        if let Err(e) = c.matcher.arrive(env, arrived, &mut matched) {
            self.protocol_error(peer, e);
        }
        for (RecvId(id), env, a) in matched.drain(..) {
            self.matched_recv(id, env, a);
        }
        self.matched = matched;
    }
}
