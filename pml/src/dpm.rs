//! Dynamic processes in the messaging layer: processes of other jobs, connect/accept,
//! inter-communicators, merge, disconnect, and what happens when a connected process fails.
//!
//! **Process indices.** Every process the engine can talk to has an index: this job's ranks
//! first (index = job rank), then processes of other jobs in the order connections brought
//! them. Contexts, routes and transports address processes by index only. A process of
//! another job is identified by (job id, rank in that job); meeting it again through a second
//! connection reuses its index.
//!
//! **Transports of a connection.** The processes of both groups form a *union* numbered
//! accepting group first, then connecting group. For the pairs a connection introduces, each
//! process creates fresh transport instances that number peers by union index: a shared-memory
//! instance over the union's processes on its node, and a network (usnic) instance for the
//! others, keyed by the connection id. [`Remapped`] translates between union indices and
//! process indices, so the transports themselves never see either job's ranks. Their cards
//! travel in the out-of-band exchange, once per process.
//!
//! **The protocol** (collective over the local communicator; the roots talk over TCP, or over
//! a shared communicator for `intercomm_create`): gather the local group's identities, node
//! ids, lifeline contacts and free context ids; `Connect` → `Accept` (or `Refuse`); everyone
//! creates its instances; `Cards` both ways; everyone attaches the remote cards and opens
//! lifelines; `Ready` both ways. Each root broadcasts every outcome to its group, so all
//! members return the same result. The new inter-communicator uses context id C (free on
//! every member of both groups); each group's local phase of inter-communicator collectives
//! uses C+1 among itself.
//!
//! **Failures.** Each newly connected pair keeps a lifeline (see
//! `kestrel_runtime::dpm::lifeline`). When one ends without a goodbye, the engine marks the
//! process failed: every context with it as a member breaks, its pending operations complete
//! with [`crate::Status::failed_peer`] set, and later operations on it return
//! [`PmlError::Dpm`] with `DpmError::ProcFailed`. This module never blocks without progressing
//! the engine, and never waits without a deadline except where MPI itself waits forever
//! (accept, and receives a program posted).

use std::collections::HashMap;
use std::net::TcpStream;
use std::time::{Duration, Instant};

use kestrel_runtime::dpm::listener::{connect_any, parse_contact};
use kestrel_runtime::dpm::oob::{read_frame, write_frame, FrameError};
use kestrel_runtime::dpm::{
    DpmError, LifelineEvent, Lifelines, Listener, MpiClass, OobMsg, PortEvent, PortName, ProcInfo,
};
use kestrel_transport::codec::{DecodeError, Reader, Writer};
use kestrel_transport::component::OpenContext;
use kestrel_transport::set::remap::{Remapped, Retired};
use kestrel_transport::set::{self, NO_ROUTE};

use crate::engine::{Engine, PmlError};

/// Tag of the broadcasts inside connect/accept.
const TAG_DPM_BCAST: i32 = -30;
/// Tag of merge's leader exchange.
const TAG_MERGE: i32 = -31;

fn dpm_err(e: DpmError) -> PmlError {
    PmlError::Dpm(e)
}

/// A process that left: failed (without a goodbye) or departed (disconnected, finalized).
#[derive(Debug, Clone)]
struct Gone {
    failed: bool,
    why: String,
}

/// Transports and lifelines one connection added, to be released when no communicator uses
/// its processes any more.
#[derive(Debug)]
struct Connection {
    id: u64,
    /// Processes (indices) the connection introduced.
    procs: Vec<u32>,
    /// Slots in the engine's transport list it added.
    btls: Vec<usize>,
}

/// The engine's dynamic-process state.
#[derive(Debug)]
pub struct DpmState {
    /// This job's id.
    job: String,
    /// This job's size (processes below it are this job's ranks).
    job_size: u32,
    listener: Option<Listener>,
    /// Lifelines to processes of other jobs.
    pub(crate) lifelines: Lifelines,
    /// (job, rank) of each process at or above `job_size`.
    foreign: Vec<(String, u32)>,
    known: HashMap<(String, u32), u32>,
    gone: HashMap<u32, Gone>,
    conns: Vec<Connection>,
}

impl DpmState {
    pub(crate) fn new(job: &str, job_size: u32) -> DpmState {
        DpmState {
            job: job.to_string(),
            job_size,
            listener: None,
            lifelines: Lifelines::new(),
            foreign: Vec::new(),
            known: HashMap::new(),
            gone: HashMap::new(),
            conns: Vec::new(),
        }
    }

    /// The first failed process among `group`, with the reason.
    pub(crate) fn first_failed_in(&self, group: &[u32]) -> Option<(u32, String)> {
        if self.gone.is_empty() {
            return None;
        }
        group.iter().find_map(|p| {
            self.gone
                .get(p)
                .filter(|g| g.failed)
                .map(|g| (*p, g.why.clone()))
        })
    }

    /// Whether connections to other jobs are open.
    pub(crate) fn has_connections(&self) -> bool {
        !self.conns.is_empty()
    }

    /// Why process `p` is gone, if it is.
    pub(crate) fn gone_reason(&self, p: u32) -> Option<&str> {
        self.gone.get(&p).map(|g| g.why.as_str())
    }

    /// (job, rank) of process `p`.
    fn identity(&self, p: u32) -> (String, u32) {
        if p < self.job_size {
            (self.job.clone(), p)
        } else {
            self.foreign
                .get((p - self.job_size) as usize)
                .cloned()
                .unwrap_or_default()
        }
    }

    fn lookup(&self, job: &str, rank: u32) -> Option<u32> {
        if job == self.job {
            return (rank < self.job_size).then_some(rank);
        }
        self.known.get(&(job.to_string(), rank)).copied()
    }
}

/// How the two roots talk.
enum Link {
    /// Over the TCP connection of a port.
    Tcp {
        stream: TcpStream,
        peer: String,
        buf: Vec<u8>,
    },
    /// Over a communicator both roots belong to (`intercomm_create`).
    Comm { ctx: u16, peer: u32, tag: i32 },
}

impl Link {
    fn peer(&self) -> String {
        match self {
            Link::Tcp { peer, .. } => peer.clone(),
            Link::Comm { peer, .. } => {
                format!("the remote leader (rank {peer} of the peer communicator)")
            }
        }
    }

    fn send(&mut self, eng: &mut Engine, msg: &OobMsg) -> Result<(), PmlError> {
        match self {
            Link::Tcp { stream, peer, .. } => {
                let _ = stream.set_nonblocking(false);
                write_frame(stream, msg).map_err(|e| {
                    dpm_err(DpmError::Protocol {
                        peer: peer.clone(),
                        what: format!("sending {}: {e}", msg.kind()),
                    })
                })
            }
            Link::Comm { ctx, peer, tag } => eng.send_bytes(*ctx, *peer, *tag, &msg.encode_body()),
        }
    }

    /// The next message, progressing the engine while waiting; `Ok(None)` at the deadline.
    fn recv(
        &mut self,
        eng: &mut Engine,
        deadline: Option<Instant>,
    ) -> Result<Option<OobMsg>, PmlError> {
        match self {
            Link::Comm { ctx, peer, tag } => {
                let body = eng.recv_bytes(*ctx, *peer, *tag)?;
                OobMsg::decode(&body).map(Some).map_err(|e| {
                    dpm_err(DpmError::Protocol {
                        peer: format!("rank {peer} of the peer communicator"),
                        what: e.to_string(),
                    })
                })
            }
            Link::Tcp { stream, peer, buf } => {
                let protocol = |what: String| {
                    dpm_err(DpmError::Protocol {
                        peer: peer.clone(),
                        what,
                    })
                };
                let _ = stream.set_nonblocking(true);
                let mut idle = 0u32;
                let mut chunk = [0u8; 65536];
                loop {
                    if buf.len() >= 4 {
                        let n = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                        if n > kestrel_runtime::dpm::oob::MAX_FRAME {
                            return Err(protocol("a frame longer than 16 MiB".into()));
                        }
                        if buf.len() >= 4 + n {
                            let msg = OobMsg::decode(&buf[4..4 + n])
                                .map_err(|e| protocol(e.to_string()))?;
                            buf.drain(..4 + n);
                            return Ok(Some(msg));
                        }
                    }
                    match std::io::Read::read(stream, &mut chunk) {
                        Ok(0) => {
                            return Err(protocol(
                                "the other side closed the connection (its process ended or \
                                 failed; see its messages)"
                                    .into(),
                            ))
                        }
                        Ok(n) => {
                            buf.extend_from_slice(&chunk[..n]);
                            idle = 0;
                            continue;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(protocol(e.to_string())),
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(None);
                    }
                    eng.idle_step(&mut idle);
                    if idle > 1000 {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            }
        }
    }
}

/// Which side of a connection a call is.
enum Role<'a> {
    Accept(&'a str),
    Connect(&'a str),
    Create {
        peer_ctx: u16,
        remote_leader: u32,
        tag: i32,
    },
}

/// The result the roots broadcast after their first exchange.
struct Agreed {
    conn: u64,
    acceptor: bool,
    remote: Vec<ProcInfo>,
    ctx: u16,
}

/// Encodes a root's outcome for its group: `[0]` + body, or `[1, class]` + the error's text
/// (see [`decode_outcome`]).
pub fn encode_outcome(r: &Result<Vec<u8>, PmlError>) -> Vec<u8> {
    match r {
        Ok(body) => {
            let mut v = vec![0u8];
            v.extend_from_slice(body);
            v
        }
        Err(e) => {
            let class = match e {
                PmlError::Dpm(d) => d.mpi_class(),
                _ => MpiClass::Other,
            };
            let mut v = vec![
                1u8,
                match class {
                    MpiClass::Port => 1,
                    MpiClass::Name => 2,
                    MpiClass::Service => 3,
                    MpiClass::Spawn => 4,
                    MpiClass::ProcFailed => 5,
                    MpiClass::Other => 6,
                },
            ];
            v.extend_from_slice(e.to_string().as_bytes());
            v
        }
    }
}

/// Decodes [`encode_outcome`]'s bytes; an error becomes `DpmError::Reported` with the root's
/// class and text.
pub fn decode_outcome(bytes: &[u8], root: u32) -> Result<Vec<u8>, PmlError> {
    match bytes.split_first() {
        Some((0, body)) => Ok(body.to_vec()),
        Some((1, rest)) if !rest.is_empty() => {
            let class = match rest[0] {
                1 => MpiClass::Port,
                2 => MpiClass::Name,
                3 => MpiClass::Service,
                4 => MpiClass::Spawn,
                5 => MpiClass::ProcFailed,
                _ => MpiClass::Other,
            };
            Err(dpm_err(DpmError::Reported {
                class,
                message: String::from_utf8_lossy(&rest[1..]).into_owned(),
            }))
        }
        _ => Err(dpm_err(DpmError::Protocol {
            peer: format!("root {root} of the local group"),
            what: "a malformed outcome broadcast".into(),
        })),
    }
}

/// The cards of a group's processes, in rank order: a count, then each process's bundle.
fn encode_group_cards(cards: &[Vec<u8>]) -> Vec<u8> {
    let mut w = Writer::new();
    w.u32(cards.len() as u32);
    for c in cards {
        w.bytes(c);
    }
    w.into_vec()
}

fn decode_group_cards(body: &[u8]) -> Result<Vec<Vec<u8>>, DecodeError> {
    let mut r = Reader::new(body, "group card list");
    let n = r.count("cards", 4)?;
    let cards = (0..n)
        .map(|_| r.bytes("card"))
        .collect::<Result<Vec<_>, _>>()?;
    r.finish("card list")?;
    Ok(cards)
}

impl Engine {
    /// Why process `p` failed or left, if it did.
    pub fn failure_of(&self, p: u32) -> Option<&str> {
        self.dpm.gone_reason(p)
    }

    /// The error for an operation that ended because process `p` failed.
    pub(crate) fn failure_error(&self, p: u32) -> PmlError {
        let why = self
            .dpm
            .gone_reason(p)
            .map(String::from)
            .unwrap_or_else(|| format!("process {p} failed"));
        dpm_err(DpmError::ProcFailed(why))
    }

    /// (job id, rank in that job) of process `p`.
    pub fn process_identity(&self, p: u32) -> (String, u32) {
        self.dpm.identity(p)
    }

    /// Applies what the lifeline watcher saw.
    pub(crate) fn apply_lifeline_events(&mut self) {
        let events = self.dpm.lifelines.take_events();
        if events.is_empty() {
            return;
        }
        // Messages a failed process sent before it died may still sit in a transport:
        // deliver them before its operations fail.
        self.progress();
        for ev in events {
            match ev {
                LifelineEvent::Failed { proc, why } => {
                    tracing::warn!(target: "dpm", "{why}");
                    self.process_gone(proc, true, why)
                }
                LifelineEvent::Departed { proc } => {
                    let (job, rank) = self.dpm.identity(proc);
                    self.process_gone(
                        proc,
                        false,
                        format!("rank {rank} of job {job} has disconnected or finalized"),
                    )
                }
            }
        }
    }

    /// Process `p` is gone. A failure breaks every context it belongs to and fails the
    /// operations pending on them; a departure only stops sends to it.
    fn process_gone(&mut self, p: u32, failed: bool, why: String) {
        if p < self.size() {
            return;
        }
        if let Some(g) = self.dpm.gone.get(&p) {
            if g.failed || !failed {
                return;
            }
        }
        self.dpm.gone.insert(
            p,
            Gone {
                failed,
                why: why.clone(),
            },
        );
        if let Some(r) = self.route.get_mut(p as usize) {
            *r = NO_ROUTE;
        }
        let mut broken = Vec::new();
        if failed {
            for (i, c) in self.st.ctxs.iter_mut().enumerate() {
                let Some(c) = c.as_mut() else { continue };
                let member = c.group.contains(&p)
                    || c.inter.as_ref().is_some_and(|x| x.local_group.contains(&p));
                if member && c.broken.is_none() {
                    c.broken = Some((p, why.clone()));
                    broken.push(i as u16);
                }
            }
        }
        self.st.fail_pending(p, &broken);
        // A connection whose processes are all gone takes its transports with it: a network
        // instance would otherwise keep resending to the dead and, after
        // usnic_peer_timeout_ms, end this process.
        if let Some(i) = self.dpm.conns.iter().position(|c| c.procs.contains(&p)) {
            if self.dpm.conns[i]
                .procs
                .iter()
                .all(|q| self.dpm.gone.contains_key(q))
            {
                let c = self.dpm.conns.remove(i);
                self.dpm.lifelines.retire(&c.procs);
                for &s in &c.btls {
                    self.btls[s] = Box::new(Retired);
                }
                tracing::debug!(target: "dpm", conn = format_args!("{:x}", c.id), "every process of the connection is gone; its transports are closed");
            }
        }
    }

    fn add_process(&mut self, info: &ProcInfo) -> u32 {
        let idx = self.route.len() as u32;
        self.route.push(NO_ROUTE);
        self.nodes.push(info.node.clone());
        self.unreachable.push(None);
        self.dpm.foreign.push((info.job.clone(), info.rank));
        self.dpm.known.insert((info.job.clone(), info.rank), idx);
        idx
    }

    fn listener(&mut self) -> Result<&Listener, PmlError> {
        if self.dpm.listener.is_none() {
            let addrs = kestrel_runtime::launcher::head::local_ipv4_addresses();
            let l = Listener::start(addrs).map_err(|e| {
                dpm_err(DpmError::Setup(format!(
                    "cannot open the out-of-band TCP listener: {e}"
                )))
            })?;
            self.dpm.listener = Some(l);
        }
        Ok(self.dpm.listener.as_ref().expect("just set"))
    }

    fn connect_timeout(&self) -> Duration {
        Duration::from_millis(
            kestrel_runtime::params::DPM_CONNECT_TIMEOUT_MS.get(self.params()) as u64,
        )
    }

    /// `MPI_Open_port`: a new port of this process (see `kestrel_runtime::dpm::port` for
    /// the format).
    pub fn open_port(&mut self) -> Result<String, PmlError> {
        Ok(self.listener()?.open_port().to_string())
    }

    /// `MPI_Close_port`.
    pub fn close_port(&mut self, port: &str) -> Result<(), PmlError> {
        let name = PortName::parse(port).map_err(|e| dpm_err(e.into()))?;
        let closed = self
            .dpm
            .listener
            .as_ref()
            .is_some_and(|l| l.close_port(&name));
        if closed {
            Ok(())
        } else {
            Err(dpm_err(DpmError::Refused {
                port: port.to_string(),
                reason: "this process has no such open port (closed already, or opened by \
                         another process)"
                    .into(),
            }))
        }
    }

    /// `MPI_Comm_accept` over the intra-communicator `ctx`: `port` matters at `root` only.
    /// Returns the new inter-communicator's context.
    pub fn accept(&mut self, ctx: u16, root: u32, port: &str) -> Result<u16, PmlError> {
        self.establish(ctx, root, Role::Accept(port))
    }

    /// `MPI_Comm_connect` over the intra-communicator `ctx`: `port` matters at `root` only.
    pub fn connect(&mut self, ctx: u16, root: u32, port: &str) -> Result<u16, PmlError> {
        self.establish(ctx, root, Role::Connect(port))
    }

    /// `MPI_Intercomm_create`: `local_ctx` is this group's intra-communicator; its
    /// `local_leader` talks to `remote_leader` (a rank of `peer_ctx`) with `tag`.
    pub fn intercomm_create(
        &mut self,
        local_ctx: u16,
        local_leader: u32,
        peer_ctx: u16,
        remote_leader: u32,
        tag: i32,
    ) -> Result<u16, PmlError> {
        self.establish(
            local_ctx,
            local_leader,
            Role::Create {
                peer_ctx,
                remote_leader,
                tag,
            },
        )
    }

    /// Root-to-group broadcast of bytes of any length (linear: used for set-up only).
    pub fn bcast_bytes(&mut self, ctx: u16, root: u32, data: Vec<u8>) -> Result<Vec<u8>, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if me == root {
            for r in (0..n).filter(|&r| r != root) {
                self.send_bytes(ctx, r, TAG_DPM_BCAST, &data)?;
            }
            Ok(data)
        } else {
            self.recv_bytes(ctx, root, TAG_DPM_BCAST)
        }
    }

    fn establish(&mut self, ctx: u16, root: u32, role: Role<'_>) -> Result<u16, PmlError> {
        if self.is_inter(ctx) {
            return Err(PmlError::Invalid(
                "dpm: connect, accept and intercomm_create need an intra-communicator".into(),
            ));
        }
        let (me, n) = self.comm_info(ctx)?;
        if root >= n {
            return Err(PmlError::Invalid(format!(
                "dpm: root {root} is outside a communicator of {n}"
            )));
        }
        let local_group = self.ctx(ctx)?.group.clone();
        // Every member needs a listener: lifelines arrive there.
        let contact = match self.listener() {
            Ok(l) => l.contact(),
            Err(e) => {
                tracing::warn!(target: "dpm", "{e}");
                String::new()
            }
        };
        let mut mine = Vec::new();
        mine.extend_from_slice(&self.next_ctx.to_le_bytes());
        let me_info = ProcInfo {
            job: self.dpm.job.clone(),
            rank: self.rank(),
            node: self.node_of(self.rank()).to_string(),
            contact,
        };
        mine.extend_from_slice(
            &OobMsg::Connect {
                tag: 0,
                group: vec![me_info],
                ctx: 0,
            }
            .encode_body(),
        );
        let all = self.allgather_bytes(ctx, &mine)?;
        let mut local_infos = Vec::with_capacity(n as usize);
        let mut proposal = 0u16;
        for (r, blob) in all.iter().enumerate() {
            let parsed = blob.get(..2).and_then(|c| {
                let next = u16::from_le_bytes([c[0], c[1]]);
                match OobMsg::decode(&blob[2..]) {
                    Ok(OobMsg::Connect { mut group, .. }) if group.len() == 1 => {
                        Some((next, group.remove(0)))
                    }
                    _ => None,
                }
            });
            let Some((next, info)) = parsed else {
                return Err(dpm_err(DpmError::Protocol {
                    peer: format!("rank {r} of the local group"),
                    what: "a malformed identity".into(),
                }));
            };
            proposal = proposal.max(next);
            local_infos.push(info);
        }
        // Phase 1: the roots introduce their groups.
        let mut link = None;
        let outcome = if me == root {
            self.roots_meet(&role, &local_infos, proposal, &mut link)
                .map(|a| {
                    let mut v = vec![u8::from(a.acceptor)];
                    v.extend_from_slice(
                        &OobMsg::Accept {
                            conn: a.conn,
                            group: a.remote,
                            ctx: a.ctx,
                        }
                        .encode_body(),
                    );
                    v
                })
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        // The root keeps its own, typed error; the others get its class and text.
        outcome?;
        let body = decode_outcome(&bytes, root)?;
        let agreed = match (body.split_first(), body.get(1..).map(OobMsg::decode)) {
            (Some((&acc, _)), Some(Ok(OobMsg::Accept { conn, group, ctx }))) if acc <= 1 => {
                Agreed {
                    conn,
                    acceptor: acc == 1,
                    remote: group,
                    ctx,
                }
            }
            _ => {
                return Err(dpm_err(DpmError::Protocol {
                    peer: format!("root {root} of the local group"),
                    what: "a malformed agreement".into(),
                }))
            }
        };
        self.finish_establish(ctx, root, me, local_group, local_infos, agreed, link)
    }

    /// The root's side of phase 1.
    fn roots_meet(
        &mut self,
        role: &Role<'_>,
        local: &[ProcInfo],
        proposal: u16,
        link_out: &mut Option<Link>,
    ) -> Result<Agreed, PmlError> {
        let timeout = self.connect_timeout();
        match role {
            Role::Accept(port) => {
                let name = PortName::parse(port).map_err(|e| dpm_err(e.into()))?;
                let listener_has = self.dpm.listener.as_ref().is_some_and(|l| l.owns(&name));
                if !listener_has {
                    return Err(dpm_err(DpmError::Refused {
                        port: port.to_string(),
                        reason: "accept needs a port this process opened and has not closed".into(),
                    }));
                }
                let ev = {
                    // Short waits on the port, with engine progress between them: MPI's
                    // accept waits forever, but this process's transports must not stall.
                    let mut idle = 0u32;
                    loop {
                        let slice = Some(Instant::now() + Duration::from_millis(2));
                        let got = self
                            .dpm
                            .listener
                            .as_ref()
                            .expect("checked above")
                            .wait_port(&name, slice, &mut || {})
                            .map_err(|e| {
                                dpm_err(DpmError::Refused {
                                    port: port.to_string(),
                                    reason: e,
                                })
                            })?;
                        if let Some(ev) = got {
                            break ev;
                        }
                        self.idle_step(&mut idle);
                    }
                };
                match ev {
                    PortEvent::SpawnFailed { reason } => Err(dpm_err(DpmError::Spawn(reason))),
                    PortEvent::Connect { stream, group, ctx } => {
                        let peer = stream
                            .peer_addr()
                            .map(|a| format!("the connecting root at {a}"))
                            .unwrap_or_else(|_| "the connecting root".into());
                        let mut link = Link::Tcp {
                            stream,
                            peer,
                            buf: Vec::new(),
                        };
                        let r = self.accept_side(&mut link, local, proposal, group, ctx);
                        *link_out = Some(link);
                        r
                    }
                }
            }
            Role::Connect(port) => {
                let name = PortName::parse(port).map_err(|e| dpm_err(e.into()))?;
                let deadline = Instant::now() + timeout;
                let stream = {
                    let addrs = name.socket_addresses();
                    let mut idle = 0u32;
                    let mut progress = || self.idle_step(&mut idle);
                    connect_any(&addrs, deadline, &mut progress).map_err(|last| {
                        dpm_err(DpmError::Unreachable {
                            port: port.to_string(),
                            timeout_ms: timeout.as_millis() as u64,
                            last,
                        })
                    })?
                };
                let mut link = Link::Tcp {
                    stream,
                    peer: format!("port {port}"),
                    buf: Vec::new(),
                };
                link.send(
                    self,
                    &OobMsg::Connect {
                        tag: name.tag,
                        group: local.to_vec(),
                        ctx: proposal,
                    },
                )?;
                let reply = link.recv(self, Some(deadline))?;
                let r = match reply {
                    None => Err(dpm_err(DpmError::NotAccepted {
                        port: port.to_string(),
                        timeout_ms: timeout.as_millis() as u64,
                    })),
                    Some(OobMsg::Accept { conn, group, ctx }) => Ok(Agreed {
                        conn,
                        acceptor: false,
                        remote: group,
                        ctx,
                    }),
                    Some(OobMsg::Refuse { reason }) => Err(dpm_err(DpmError::Refused {
                        port: port.to_string(),
                        reason,
                    })),
                    Some(other) => Err(dpm_err(DpmError::Protocol {
                        peer: format!("port {port}"),
                        what: format!("expected Accept, got {}", other.kind()),
                    })),
                };
                *link_out = Some(link);
                r
            }
            Role::Create {
                peer_ctx,
                remote_leader,
                tag,
            } => {
                let remote = *self
                    .ctx(*peer_ctx)?
                    .group
                    .get(*remote_leader as usize)
                    .ok_or_else(|| {
                        PmlError::Invalid(format!(
                            "intercomm_create: remote leader {remote_leader} is outside the peer communicator"
                        ))
                    })?;
                let mine = self.dpm.identity(self.rank());
                let theirs = self.dpm.identity(remote);
                if mine == theirs {
                    return Err(PmlError::Invalid(
                        "intercomm_create: the local and remote leaders are the same process"
                            .into(),
                    ));
                }
                let mut link = Link::Comm {
                    ctx: *peer_ctx,
                    peer: *remote_leader,
                    tag: *tag,
                };
                // The leader with the smaller identity plays the accepting side.
                let r = if mine < theirs {
                    match link.recv(self, None)? {
                        Some(OobMsg::Connect { group, ctx, .. }) => {
                            self.accept_side(&mut link, local, proposal, group, ctx)
                        }
                        other => Err(dpm_err(DpmError::Protocol {
                            peer: link.peer(),
                            what: format!(
                                "expected Connect, got {}",
                                other.map(|m| m.kind()).unwrap_or("nothing")
                            ),
                        })),
                    }
                } else {
                    link.send(
                        self,
                        &OobMsg::Connect {
                            tag: 0,
                            group: local.to_vec(),
                            ctx: proposal,
                        },
                    )?;
                    match link.recv(self, None)? {
                        Some(OobMsg::Accept { conn, group, ctx }) => Ok(Agreed {
                            conn,
                            acceptor: false,
                            remote: group,
                            ctx,
                        }),
                        Some(OobMsg::Refuse { reason }) => Err(dpm_err(DpmError::Refused {
                            port: link.peer(),
                            reason,
                        })),
                        other => Err(dpm_err(DpmError::Protocol {
                            peer: link.peer(),
                            what: format!(
                                "expected Accept, got {}",
                                other.map(|m| m.kind()).unwrap_or("nothing")
                            ),
                        })),
                    }
                };
                *link_out = Some(link);
                r
            }
        }
    }

    /// The accepting root answers a `Connect`.
    fn accept_side(
        &mut self,
        link: &mut Link,
        local: &[ProcInfo],
        proposal: u16,
        remote: Vec<ProcInfo>,
        their_ctx: u16,
    ) -> Result<Agreed, PmlError> {
        let ctx = proposal.max(their_ctx);
        let refuse = |why: String| OobMsg::Refuse { reason: why };
        if ctx >= u16::MAX - 2 {
            let why = "out of communicator context ids; free communicators you no longer need";
            let _ = link.send(self, &refuse(why.into()));
            return Err(PmlError::Invalid(format!("dpm: {why}")));
        }
        if remote.is_empty() {
            let _ = link.send(self, &refuse("the connecting group is empty".into()));
            return Err(dpm_err(DpmError::Protocol {
                peer: link.peer(),
                what: "an empty connecting group".into(),
            }));
        }
        let conn = set::new_job_key();
        link.send(
            self,
            &OobMsg::Accept {
                conn,
                group: local.to_vec(),
                ctx,
            },
        )?;
        Ok(Agreed {
            conn,
            acceptor: true,
            remote,
            ctx,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn finish_establish(
        &mut self,
        ctx: u16,
        root: u32,
        me: u32,
        local_group: Vec<u32>,
        local_infos: Vec<ProcInfo>,
        agreed: Agreed,
        mut link: Option<Link>,
    ) -> Result<u16, PmlError> {
        let timeout = self.connect_timeout();
        let conn = agreed.conn;
        // The union: accepting group first.
        let (union, my_u, remote_offset): (Vec<ProcInfo>, u32, usize) = if agreed.acceptor {
            let mut u = local_infos.clone();
            u.extend(agreed.remote.iter().cloned());
            (u, me, local_infos.len())
        } else {
            let mut u = agreed.remote.clone();
            u.extend(local_infos.iter().cloned());
            (u, agreed.remote.len() as u32 + me, 0)
        };
        let remote_range = remote_offset..remote_offset + agreed.remote.len();
        // Phase 2: indices for the remote processes; transports for the new pairs.
        let mut local_ok: Result<(), String> = Ok(());
        for r in &agreed.remote {
            if local_infos
                .iter()
                .any(|l| l.job == r.job && l.rank == r.rank)
            {
                local_ok = Err(format!(
                    "rank {} of job {} is in both groups; the groups of an inter-communicator must be disjoint",
                    r.rank, r.job
                ));
            }
        }
        let mut remote_idx = Vec::with_capacity(agreed.remote.len());
        let mut new_remote: Vec<(u32, usize)> = Vec::new(); // (process index, union index)
        for (k, info) in agreed.remote.iter().enumerate() {
            let u = remote_range.start + k;
            match self.dpm.lookup(&info.job, info.rank) {
                Some(p) if !self.dpm.gone.contains_key(&p) => remote_idx.push(p),
                _ => {
                    let p = self.add_process(info);
                    remote_idx.push(p);
                    new_remote.push((p, u));
                }
            }
        }
        let mut prepared = None;
        let mut my_cards = set::encode_bundle([]);
        if local_ok.is_ok() && !new_remote.is_empty() {
            match self.prepare_transports(conn, &union, my_u, &new_remote) {
                Ok(opening) => {
                    my_cards = opening.bundle();
                    prepared = Some(opening);
                }
                Err(e) => local_ok = Err(e),
            }
        }
        // Cards: gather locally, roots swap, broadcast.
        let mut blob = vec![u8::from(local_ok.is_ok())];
        blob.extend_from_slice(&my_cards);
        let gathered = self.allgather_bytes(ctx, &blob)?;
        let mut setup_failures: Vec<String> = Vec::new();
        let local_cards: Vec<Vec<u8>> = gathered
            .iter()
            .enumerate()
            .map(|(r, b)| {
                if b.first() != Some(&1) {
                    setup_failures.push(format!("local rank {r}"));
                }
                b.get(1..).unwrap_or(&[]).to_vec()
            })
            .collect();
        let outcome = if me == root {
            let link = link.as_mut().expect("the root has the link");
            self.swap_cards(link, agreed.acceptor, local_cards.clone(), timeout)
                .map(|remote_cards| encode_group_cards(&remote_cards))
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        let shared = match outcome {
            Err(e) => Err(e),
            Ok(_) => decode_outcome(&bytes, root),
        };
        let remote_cards = match shared {
            Ok(body) => match decode_group_cards(&body) {
                Err(e) => Err(dpm_err(DpmError::Protocol {
                    peer: "the other group".into(),
                    what: e.to_string(),
                })),
                Ok(cards) if cards.len() != agreed.remote.len() => {
                    Err(dpm_err(DpmError::Protocol {
                        peer: "the other group".into(),
                        what: format!(
                            "{} cards for {} processes",
                            cards.len(),
                            agreed.remote.len()
                        ),
                    }))
                }
                Ok(cards) => Ok(cards),
            },
            Err(e) => Err(e),
        };
        let remote_cards = match remote_cards {
            Ok(c) => c,
            Err(e) => {
                self.abandon(&new_remote, &[]);
                return Err(e);
            }
        };
        if !setup_failures.is_empty() && local_ok.is_ok() {
            local_ok = Err(format!(
                "transport set-up failed on {}",
                setup_failures.join(", ")
            ));
        }
        // Phase 3: attach, then lifelines for the new pairs.
        let mut slots = Vec::new();
        if let (Ok(()), Some(prepared)) = (&local_ok, prepared) {
            let mut union_cards: Vec<Vec<u8>> = vec![Vec::new(); union.len()];
            let (local_off, remote_off) = if agreed.acceptor {
                (0, local_infos.len())
            } else {
                (agreed.remote.len(), 0)
            };
            for (i, c) in local_cards.iter().enumerate() {
                union_cards[local_off + i] = c.clone();
            }
            for (i, c) in remote_cards.iter().enumerate() {
                union_cards[remote_off + i] = c.clone();
            }
            match self.attach_transports(conn, prepared, &union, my_u, &union_cards, &new_remote) {
                Ok(s) => slots = s,
                Err(e) => local_ok = Err(e),
            }
        }
        if local_ok.is_ok() && !new_remote.is_empty() {
            if let Err(e) = self.open_lifelines(conn, agreed.acceptor, &union, &new_remote, timeout)
            {
                local_ok = Err(e);
            }
        }
        // Phase 4: everyone ready on both sides?
        let mut flag = vec![u8::from(local_ok.is_ok())];
        if let Err(e) = &local_ok {
            flag.extend_from_slice(e.as_bytes());
        }
        let flags = self.allgather_bytes(ctx, &flag)?;
        let mut group_ok = Ok(());
        for (r, f) in flags.iter().enumerate() {
            if f.first() != Some(&1) {
                group_ok = Err(format!(
                    "local rank {r}: {}",
                    String::from_utf8_lossy(f.get(1..).unwrap_or(&[]))
                ));
                break;
            }
        }
        let outcome = if me == root {
            let link = link.as_mut().expect("the root has the link");
            self.swap_ready(link, agreed.acceptor, group_ok, timeout)
                .map(|()| Vec::new())
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        let shared = match outcome {
            Err(e) => Err(e),
            Ok(_) => decode_outcome(&bytes, root),
        };
        if let Err(e) = shared {
            self.abandon(&new_remote, &slots);
            return Err(e);
        }
        drop(link);
        // The new contexts.
        let inter_ctx = agreed.ctx;
        self.add_inter_context(inter_ctx, local_group, remote_idx, inter_ctx + 1);
        self.next_ctx = self.next_ctx.max(inter_ctx + 2);
        if !new_remote.is_empty() {
            self.dpm.conns.push(Connection {
                id: conn,
                procs: new_remote.iter().map(|&(p, _)| p).collect(),
                btls: slots,
            });
        }
        tracing::debug!(target: "dpm", ctx = inter_ctx, conn = format_args!("{conn:x}"), new = new_remote.len(), "inter-communicator ready");
        Ok(inter_ctx)
    }

    fn swap_cards(
        &mut self,
        link: &mut Link,
        acceptor: bool,
        mine: Vec<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, PmlError> {
        let deadline = Some(Instant::now() + timeout);
        let expect = |m: Option<OobMsg>, peer: String| match m {
            Some(OobMsg::Cards { cards }) => Ok(cards),
            Some(OobMsg::Refuse { reason }) => Err(dpm_err(DpmError::Setup(format!(
                "{peer} gave up: {reason}"
            )))),
            Some(other) => Err(dpm_err(DpmError::Protocol {
                peer,
                what: format!("expected Cards, got {}", other.kind()),
            })),
            None => Err(dpm_err(DpmError::Protocol {
                peer,
                what: format!("no cards within {} ms", timeout.as_millis()),
            })),
        };
        // The connecting root sends first, so the two never both block writing.
        if acceptor {
            let theirs = link.recv(self, deadline)?;
            let theirs = expect(theirs, link.peer())?;
            link.send(self, &OobMsg::Cards { cards: mine })?;
            Ok(theirs)
        } else {
            link.send(self, &OobMsg::Cards { cards: mine })?;
            let theirs = link.recv(self, deadline)?;
            expect(theirs, link.peer())
        }
    }

    fn swap_ready(
        &mut self,
        link: &mut Link,
        acceptor: bool,
        mine: Result<(), String>,
        timeout: Duration,
    ) -> Result<(), PmlError> {
        let deadline = Some(Instant::now() + timeout);
        let read = |eng: &mut Engine, link: &mut Link| -> Result<Result<(), String>, PmlError> {
            match link.recv(eng, deadline)? {
                Some(OobMsg::Ready { ok: true, .. }) => Ok(Ok(())),
                Some(OobMsg::Ready { ok: false, reason }) => Ok(Err(reason)),
                Some(other) => Err(dpm_err(DpmError::Protocol {
                    peer: link.peer(),
                    what: format!("expected Ready, got {}", other.kind()),
                })),
                None => Err(dpm_err(DpmError::Protocol {
                    peer: link.peer(),
                    what: format!("not ready within {} ms", timeout.as_millis()),
                })),
            }
        };
        let msg = |r: &Result<(), String>| OobMsg::Ready {
            ok: r.is_ok(),
            reason: r.clone().err().unwrap_or_default(),
        };
        let both = if acceptor {
            let theirs = read(self, link)?;
            let both = match (&mine, theirs) {
                (Err(e), _) => Err(format!("this side: {e}")),
                (Ok(()), Err(e)) => Err(format!("the connecting side: {e}")),
                (Ok(()), Ok(())) => Ok(()),
            };
            link.send(self, &msg(&both))?;
            both
        } else {
            link.send(self, &msg(&mine))?;
            read(self, link)?
        };
        both.map_err(|e| dpm_err(DpmError::Setup(e)))
    }

    /// Opens this process's transports for the new pairs through the transport set (the
    /// same code path as a job's start-up, over the union of both groups).
    fn prepare_transports(
        &mut self,
        conn: u64,
        union: &[ProcInfo],
        my_u: u32,
        new_remote: &[(u32, usize)],
    ) -> Result<set::Opening, String> {
        let nodes: Vec<String> = union.iter().map(|p| p.node.clone()).collect();
        let mut wanted = vec![false; union.len()];
        wanted[my_u as usize] = true;
        for &(_, u) in new_remote {
            wanted[u] = true;
        }
        let set_id = format!("dpm-{conn:x}");
        let file_prefix = format!("kestrel.{}.dpm{conn:x}.", self.job_tag());
        let cx = OpenContext {
            me: my_u,
            nodes: &nodes,
            set_id: &set_id,
            file_prefix: &file_prefix,
        };
        set::open(self.registry, self.params(), &cx, &wanted)
    }

    /// Hands the union's cards to this process's transports and routes the new processes
    /// through them.
    fn attach_transports(
        &mut self,
        conn: u64,
        prepared: set::Opening,
        union: &[ProcInfo],
        my_u: u32,
        union_cards: &[Vec<u8>],
        new_remote: &[(u32, usize)],
    ) -> Result<Vec<usize>, String> {
        let bundles: Vec<Option<Vec<u8>>> = union_cards
            .iter()
            .enumerate()
            .map(|(u, c)| (u as u32 != my_u).then(|| c.clone()))
            .collect();
        let describe = |u: u32| {
            let p = &union[u as usize];
            format!("rank {} of job {} (node {})", p.rank, p.job, p.node)
        };
        let attached = prepared.attach(&bundles, conn.max(1), &describe)?;
        if self.btls.len() + attached.btls.len() >= NO_ROUTE as usize {
            return Err("too many transport instances (connections) in this process; disconnect the ones no longer needed".into());
        }
        let mut slots = Vec::new();
        for (i, btl) in attached.btls.into_iter().enumerate() {
            let pairs: Vec<(u32, u32)> = new_remote
                .iter()
                .filter(|&&(_, u)| attached.route[u] == i as u8)
                .map(|&(p, u)| (p, u as u32))
                .collect();
            let slot = self.btls.len();
            self.btls.push(Box::new(Remapped::new(btl, &pairs)));
            for &(p, _) in &pairs {
                self.route[p as usize] = slot as u8;
            }
            slots.push(slot);
        }
        for &(p, u) in new_remote {
            if self.route[p as usize] == NO_ROUTE {
                let why = attached.unreachable[u].clone().unwrap_or_default();
                self.unreachable[p as usize] = Some(why.clone());
                return Err(format!(
                    "no transport reaches {}: {why}",
                    describe(u as u32)
                ));
            }
        }
        tracing::debug!(target: "dpm", conn = format_args!("{conn:x}"), slots = ?slots, "connection transports attached");
        Ok(slots)
    }

    /// The connecting side opens a lifeline to each new remote process; the accepting side
    /// waits for them.
    fn open_lifelines(
        &mut self,
        conn: u64,
        acceptor: bool,
        union: &[ProcInfo],
        new_remote: &[(u32, usize)],
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let label = |u: usize| format!("rank {} of job {}", union[u].rank, union[u].job);
        if acceptor {
            let expected: Vec<(String, u32)> = new_remote
                .iter()
                .map(|&(_, u)| (union[u].job.clone(), union[u].rank))
                .collect();
            let got = {
                let mut idle = 0u32;
                let listener = self.dpm.listener.take().ok_or("no out-of-band listener")?;
                let r = listener
                    .wait_lifelines(conn, &expected, deadline, &mut || self.idle_step(&mut idle));
                self.dpm.listener = Some(listener);
                r
            };
            let streams = got.map_err(|missing| {
                let names: Vec<String> = missing
                    .iter()
                    .map(|(j, r)| format!("rank {r} of job {j}"))
                    .collect();
                format!(
                    "no lifeline from {} within {} ms (dpm_connect_timeout_ms)",
                    names.join(", "),
                    timeout.as_millis()
                )
            })?;
            for (stream, &(p, u)) in streams.into_iter().zip(new_remote) {
                self.dpm
                    .lifelines
                    .add(p, stream, label(u))
                    .map_err(|e| format!("lifeline to {}: {e}", label(u)))?;
            }
        } else {
            let (job, rank) = (self.dpm.job.clone(), self.rank());
            for &(p, u) in new_remote {
                let addrs =
                    parse_contact(&union[u].contact).map_err(|e| format!("{}: {e}", label(u)))?;
                let mut idle = 0u32;
                let mut stream =
                    connect_any(&addrs, deadline, &mut || self.idle_step(&mut idle))
                        .map_err(|e| format!("cannot open a lifeline to {}: {e}", label(u)))?;
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                let _ = stream.set_read_timeout(Some(left));
                write_frame(
                    &mut stream,
                    &OobMsg::Lifeline {
                        conn,
                        job: job.clone(),
                        rank,
                    },
                )
                .and_then(|()| match read_frame(&mut stream)? {
                    OobMsg::LifelineOk => Ok(()),
                    _ => Err(FrameError::Closed),
                })
                .map_err(|e| format!("lifeline to {}: {e}", label(u)))?;
                let _ = stream.set_read_timeout(None);
                self.dpm
                    .lifelines
                    .add(p, stream, label(u))
                    .map_err(|e| format!("lifeline to {}: {e}", label(u)))?;
            }
        }
        Ok(())
    }

    /// Undoes a connection whose set-up failed.
    fn abandon(&mut self, new_remote: &[(u32, usize)], slots: &[usize]) {
        let procs: Vec<u32> = new_remote.iter().map(|&(p, _)| p).collect();
        self.dpm.lifelines.say_bye(&procs);
        self.dpm.lifelines.retire(&procs);
        for &slot in slots {
            self.btls[slot] = Box::new(Retired);
        }
        for &p in &procs {
            let (job, rank) = self.dpm.identity(p);
            self.dpm.known.remove(&(job, rank));
            self.process_gone(p, false, "its connection could not be set up".into());
        }
    }

    /// `MPI_Intercomm_merge`: an intra-communicator of both groups, the group whose members
    /// pass `high = false` first (ties: the group whose first member has the smaller (job,
    /// rank)). Collective over both groups.
    pub fn intercomm_merge(&mut self, ctx: u16, high: bool) -> Result<u16, PmlError> {
        let (local, remote, local_ctx) = self.inter_parts(ctx)?;
        let (me, _) = self.comm_info(local_ctx)?;
        let all = self.allgather_bytes(local_ctx, &self.next_ctx.to_le_bytes())?;
        let mut proposal = self.next_ctx;
        for a in &all {
            if let [lo, hi] = a[..] {
                proposal = proposal.max(u16::from_le_bytes([lo, hi]));
            }
        }
        let mut decision = [0u8; 4];
        if me == 0 {
            let mut mine = vec![u8::from(high)];
            mine.extend_from_slice(&proposal.to_le_bytes());
            let mut theirs = [0u8; 3];
            let r = self.exchange(ctx, TAG_MERGE, &[(0, &mine)], &mut [(0, &mut theirs[..])]);
            match r {
                Ok(()) => {
                    let their_high = theirs[0] == 1;
                    let their_proposal = u16::from_le_bytes([theirs[1], theirs[2]]);
                    let first = if high != their_high {
                        !high
                    } else {
                        self.dpm.identity(local[0]) < self.dpm.identity(remote[0])
                    };
                    let new = proposal.max(their_proposal);
                    decision = [
                        1,
                        u8::from(first),
                        new.to_le_bytes()[0],
                        new.to_le_bytes()[1],
                    ];
                }
                Err(e) => {
                    let _ = self.coll_bcast(local_ctx, 0, &mut decision);
                    return Err(e);
                }
            }
        }
        self.coll_bcast(local_ctx, 0, &mut decision)?;
        if decision[0] != 1 {
            return Err(self.remote_failure(&remote));
        }
        let new = u16::from_le_bytes([decision[2], decision[3]]);
        if new == u16::MAX {
            return Err(PmlError::Invalid("pml: out of communicator context ids (65534 in use); free communicators you no longer need".into()));
        }
        let group = if decision[1] == 1 {
            [local, remote].concat()
        } else {
            [remote, local].concat()
        };
        self.add_context(new, group);
        Ok(new)
    }

    /// (local group, remote group, local context) of an inter-communicator.
    pub(crate) fn inter_parts(&self, ctx: u16) -> Result<(Vec<u32>, Vec<u32>, u16), PmlError> {
        let c = self.ctx(ctx)?;
        match &c.inter {
            Some(i) => Ok((i.local_group.clone(), c.group.clone(), i.local_ctx)),
            None => Err(PmlError::Invalid(format!(
                "pml: context {ctx} is not an inter-communicator"
            ))),
        }
    }

    /// The error for a local group whose leader saw the other group fail.
    pub(crate) fn remote_failure(&self, remote: &[u32]) -> PmlError {
        match self.dpm.first_failed_in(remote) {
            Some((_, why)) => dpm_err(DpmError::ProcFailed(why)),
            None => dpm_err(DpmError::ProcFailed(
                "the other group of the inter-communicator failed (its leader reported it)".into(),
            )),
        }
    }

    /// `MPI_Comm_disconnect` of an inter-communicator: waits for both groups, frees the
    /// context, and closes the connections no communicator uses any more (goodbye on their
    /// lifelines, transports retired). Collective over both groups.
    pub fn disconnect(&mut self, ctx: u16) -> Result<(), PmlError> {
        let r = if self.is_inter(ctx) {
            self.inter_barrier(ctx)
        } else {
            self.coll_barrier(ctx)
        };
        self.free_context(ctx);
        self.release_unused_connections();
        r
    }

    /// Closes connections whose processes no context uses.
    fn release_unused_connections(&mut self) {
        let mut i = 0;
        while i < self.dpm.conns.len() {
            let used = self.dpm.conns[i].procs.iter().any(|p| {
                self.st.ctxs.iter().flatten().any(|c| {
                    c.group.contains(p)
                        || c.inter.as_ref().is_some_and(|x| x.local_group.contains(p))
                })
            });
            if used {
                i += 1;
                continue;
            }
            let c = self.dpm.conns.remove(i);
            let lifelines = self.dpm.lifelines.clone();
            lifelines.say_bye(&c.procs);
            let deadline = Instant::now() + self.connect_timeout();
            let mut idle = 0u32;
            let late = lifelines.wait_bye(&c.procs, deadline, &mut || self.idle_step(&mut idle));
            if !late.is_empty() {
                tracing::debug!(target: "dpm", ?late, "no goodbye from these processes before the deadline");
            }
            lifelines.retire(&c.procs);
            // Flush what the transports still owe before they go.
            let mut spins = 0u32;
            while !c.btls.iter().all(|&s| self.btls[s].quiesce()) && spins < 1_000_000 {
                self.progress();
                spins += 1;
            }
            for &s in &c.btls {
                self.btls[s] = Box::new(Retired);
            }
            for &p in &c.procs {
                let (job, rank) = self.dpm.identity(p);
                self.dpm.known.remove(&(job.clone(), rank));
                self.process_gone(
                    p,
                    false,
                    format!("rank {rank} of job {job} is disconnected"),
                );
            }
            tracing::debug!(target: "dpm", conn = format_args!("{:x}", c.id), "connection closed");
        }
    }

    /// At finalize: goodbye on every lifeline, then close them.
    pub(crate) fn dpm_finalize(&mut self) {
        let procs = self.dpm.lifelines.watched();
        if !procs.is_empty() {
            self.dpm.lifelines.say_bye(&procs);
            self.dpm.lifelines.retire(&procs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cards_and_outcomes_round_trip_and_garbage_is_refused() {
        for cards in [vec![], vec![vec![]], vec![b"bundle".to_vec(), vec![9; 300]]] {
            let enc = encode_group_cards(&cards);
            assert_eq!(decode_group_cards(&enc).unwrap(), cards);
            for end in 0..enc.len() {
                assert!(decode_group_cards(&enc[..end]).is_err());
            }
        }
        assert!(decode_group_cards(&[0, 0, 0, 9, 0]).is_err());
        let ok = encode_outcome(&Ok(vec![5, 6]));
        assert_eq!(decode_outcome(&ok, 0).unwrap(), vec![5, 6]);
        let err = encode_outcome(&Err(PmlError::Dpm(DpmError::Spawn("no".into()))));
        match decode_outcome(&err, 0) {
            Err(PmlError::Dpm(e)) => {
                assert_eq!(e.mpi_class(), MpiClass::Spawn);
                assert!(e.to_string().contains("spawn failed: no"), "{e}");
            }
            other => panic!("{other:?}"),
        }
        assert!(decode_outcome(&[], 0).is_err());
        assert!(decode_outcome(&[7], 0).is_err());
    }
}
