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
use kestrel_transport::btl::{Btl, Incoming, Limits, RemoteRegion, SendError};
use kestrel_transport::core_params;

use crate::engine::{Engine, PmlError, NO_ROUTE};

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

/// A transport instance of one connection, seen through process indices: it numbers peers by
/// union index, the engine by process index.
pub struct Remapped {
    inner: Box<dyn Btl>,
    /// Process index → union index.
    to_inner: HashMap<u32, u32>,
    /// Union index → process index (`u32::MAX`: not routed through this instance).
    to_outer: Vec<u32>,
    dropped: u64,
}

impl Remapped {
    fn new(inner: Box<dyn Btl>, pairs: &[(u32, u32)]) -> Remapped {
        let mut to_outer = Vec::new();
        let mut to_inner = HashMap::new();
        for &(outer, inner_id) in pairs {
            if to_outer.len() <= inner_id as usize {
                to_outer.resize(inner_id as usize + 1, u32::MAX);
            }
            to_outer[inner_id as usize] = outer;
            to_inner.insert(outer, inner_id);
        }
        Remapped {
            inner,
            to_inner,
            to_outer,
            dropped: 0,
        }
    }

    fn map(&self, peer: u32) -> Result<u32, SendError> {
        self.to_inner
            .get(&peer)
            .copied()
            .ok_or(SendError::Unreachable { peer })
    }
}

impl Btl for Remapped {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn reaches(&self, peer: u32) -> bool {
        self.to_inner
            .get(&peer)
            .is_some_and(|&i| self.inner.reaches(i))
    }
    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner
            .send(i, am, header, payload)
            .map_err(|e| match e {
                SendError::Unreachable { .. } => SendError::Unreachable { peer },
                other => other,
            })
    }
    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let to_outer = &self.to_outer;
        let dropped = &mut self.dropped;
        self.inner.progress(&mut |m| {
            match to_outer.get(m.peer as usize) {
                Some(&outer) if outer != u32::MAX => deliver(Incoming {
                    peer: outer,
                    am: m.am,
                    data: m.data,
                }),
                // A member of the union this process does not talk to through here.
                _ => *dropped += 1,
            }
        })
    }
    fn quiet(&self) -> bool {
        self.inner.quiet()
    }
    fn quiesce(&mut self) -> bool {
        self.inner.quiesce()
    }
    fn can_get(&mut self, peer: u32) -> bool {
        match self.map(peer) {
            Ok(i) => self.inner.can_get(i),
            Err(_) => false,
        }
    }
    fn expose(&self, buf: &[u8]) -> RemoteRegion {
        self.inner.expose(buf)
    }
    fn can_put(&mut self, peer: u32) -> bool {
        match self.map(peer) {
            Ok(i) => self.inner.can_put(i),
            Err(_) => false,
        }
    }
    fn put(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &[u8],
    ) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner.put(i, remote, offset, local)
    }
    fn get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &mut [u8],
    ) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner.get(i, remote, offset, local)
    }
}

/// What is left in a transport slot after its connection ended: reaches nobody.
struct Retired;

impl Btl for Retired {
    fn name(&self) -> &'static str {
        "retired"
    }
    fn limits(&self) -> Limits {
        Limits {
            eager_limit: 0,
            max_send: 0,
            latency_ns: u32::MAX,
            bandwidth_mbps: 0,
            exclusivity: 0,
            get: false,
        }
    }
    fn reaches(&self, _peer: u32) -> bool {
        false
    }
    fn send(&mut self, peer: u32, _: u8, _: &[u8], _: &[u8]) -> Result<(), SendError> {
        Err(SendError::Unreachable { peer })
    }
    fn progress(&mut self, _deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        0
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

/// Transports created for a connection, before the remote cards are known.
struct Prepared {
    shm: Option<kestrel_shm::ShmBtl>,
    usnic: Option<kestrel_usnic::btl::UsnicBtl>,
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

fn put_u32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}

fn put_bytes(v: &mut Vec<u8>, b: &[u8]) {
    put_u32(v, b.len() as u32);
    v.extend_from_slice(b);
}

fn take_bytes<'a>(data: &mut &'a [u8]) -> Option<&'a [u8]> {
    let n = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
    let b = data.get(4..4 + n)?;
    *data = &data[4 + n..];
    Some(b)
}

/// A process's transport cards: `[flags u8][shm card][usnic card]`, each a length-prefixed
/// byte string (empty when absent).
fn encode_cards(shm: Option<Vec<u8>>, usnic: Option<Vec<u8>>) -> Vec<u8> {
    let mut v = vec![u8::from(shm.is_some()) | (u8::from(usnic.is_some()) << 1)];
    put_bytes(&mut v, shm.as_deref().unwrap_or(&[]));
    put_bytes(&mut v, usnic.as_deref().unwrap_or(&[]));
    v
}

#[allow(clippy::type_complexity)]
fn decode_cards(mut data: &[u8]) -> Option<(Option<Vec<u8>>, Option<Vec<u8>>)> {
    let (&flags, rest) = data.split_first()?;
    data = rest;
    let shm = take_bytes(&mut data)?;
    let usnic = take_bytes(&mut data)?;
    if !data.is_empty() || flags > 3 {
        return None;
    }
    Some((
        (flags & 1 != 0).then(|| shm.to_vec()),
        (flags & 2 != 0).then(|| usnic.to_vec()),
    ))
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
        self.usnic_unreachable.push(None);
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
        let conn = kestrel_usnic::btl::new_job_key();
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
        let mut prepared = Prepared {
            shm: None,
            usnic: None,
        };
        let mut my_cards = encode_cards(None, None);
        if local_ok.is_ok() && !new_remote.is_empty() {
            match self.prepare_transports(conn, &union, my_u, &new_remote) {
                Ok((p, cards)) => {
                    prepared = p;
                    my_cards = cards;
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
                .map(|remote_cards| {
                    let mut v = Vec::new();
                    put_u32(&mut v, remote_cards.len() as u32);
                    for c in &remote_cards {
                        put_bytes(&mut v, c);
                    }
                    v
                })
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        let shared = match outcome {
            Err(e) => Err(e),
            Ok(_) => decode_outcome(&bytes, root),
        };
        let remote_cards = match shared {
            Ok(body) => {
                let mut data = &body[..];
                let n = data
                    .get(..4)
                    .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize)
                    .unwrap_or(usize::MAX);
                data = data.get(4..).unwrap_or(&[]);
                let mut cards = Vec::new();
                while let Some(c) = take_bytes(&mut data) {
                    cards.push(c.to_vec());
                }
                if cards.len() != n || n != agreed.remote.len() {
                    Err(dpm_err(DpmError::Protocol {
                        peer: "the other group".into(),
                        what: format!(
                            "{} cards for {} processes",
                            cards.len(),
                            agreed.remote.len()
                        ),
                    }))
                } else {
                    Ok(cards)
                }
            }
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
        if local_ok.is_ok() && !new_remote.is_empty() {
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

    /// Creates this process's transport instances for the new pairs and returns its cards.
    fn prepare_transports(
        &mut self,
        conn: u64,
        union: &[ProcInfo],
        my_u: u32,
        new_remote: &[(u32, usize)],
    ) -> Result<(Prepared, Vec<u8>), String> {
        let params = self.params().clone();
        let selection = core_params::BTL.get(&params);
        let my_node = union[my_u as usize].node.clone();
        let shm_ok = selection.allows("shm");
        let need_shm = shm_ok && new_remote.iter().any(|&(_, u)| union[u].node == my_node);
        let need_usnic = selection.allows("usnic")
            && new_remote
                .iter()
                .any(|&(_, u)| union[u].node != my_node || !shm_ok);
        let mut prepared = Prepared {
            shm: None,
            usnic: None,
        };
        let mut shm_card = None;
        let mut usnic_card = None;
        if need_shm {
            let node_group: Vec<u32> = union
                .iter()
                .enumerate()
                .filter(|(_, p)| p.node == my_node)
                .map(|(u, _)| u as u32)
                .collect();
            let safe_job: String = self
                .dpm
                .job
                .chars()
                .map(|c| if c == '/' || c == '\0' { '_' } else { c })
                .collect();
            let file = format!("kestrel.{safe_job}.dpm{conn:x}.shm.{my_u}");
            let (b, card) = kestrel_shm::ShmBtl::with_file_name(&params, my_u, &node_group, &file)?;
            shm_card = Some(card.encode());
            prepared.shm = Some(b);
        }
        if need_usnic {
            let b = kestrel_usnic::btl::UsnicBtl::new(
                &params,
                my_u,
                &format!("dpm-{conn:x}"),
                &my_node,
            )?;
            match b {
                Some(mut b) => {
                    b.set_key(conn.max(1));
                    usnic_card = Some(b.card().encode());
                    prepared.usnic = Some(b);
                }
                None => {
                    return Err(format!(
                        "this process (node {my_node}) has no usable network interface for usnic \
                         and processes of the other job are on other nodes (run `kestrel-ifmatch \
                         list` to see why)"
                    ))
                }
            }
        }
        Ok((prepared, encode_cards(shm_card, usnic_card)))
    }

    /// Adds the remote cards to this process's instances and routes the new processes.
    fn attach_transports(
        &mut self,
        conn: u64,
        prepared: Prepared,
        union: &[ProcInfo],
        my_u: u32,
        union_cards: &[Vec<u8>],
        new_remote: &[(u32, usize)],
    ) -> Result<Vec<usize>, String> {
        let my_node = union[my_u as usize].node.clone();
        let mut decoded = Vec::with_capacity(union.len());
        for (u, c) in union_cards.iter().enumerate() {
            let d = decode_cards(c).ok_or_else(|| {
                format!(
                    "the transport cards of rank {} of job {} are malformed",
                    union[u].rank, union[u].job
                )
            })?;
            decoded.push(d);
        }
        let mut slots = Vec::new();
        let mut routed: HashMap<u32, usize> = HashMap::new();
        if let Some(mut shm) = prepared.shm {
            let mut pairs = Vec::new();
            for (u, p) in union.iter().enumerate() {
                if u as u32 == my_u || p.node != my_node {
                    continue;
                }
                if let Some(bytes) = &decoded[u].0 {
                    let card = kestrel_shm::ShmCard::decode(bytes).map_err(|e| {
                        format!("shm card of rank {} of job {}: {e}", p.rank, p.job)
                    })?;
                    shm.add_peer(u as u32, &card)?;
                }
            }
            for &(proc_idx, u) in new_remote {
                if union[u].node == my_node && decoded[u].0.is_some() {
                    pairs.push((proc_idx, u as u32));
                }
            }
            let slot = self.btls.len();
            self.btls
                .push(Box::new(Remapped::new(Box::new(shm), &pairs)));
            for &(p, _) in &pairs {
                routed.insert(p, slot);
            }
            slots.push(slot);
        }
        if let Some(mut usnic) = prepared.usnic {
            let mut pairs = Vec::new();
            for &(proc_idx, u) in new_remote {
                if routed.contains_key(&proc_idx) {
                    continue;
                }
                let Some(bytes) = &decoded[u].1 else {
                    continue;
                };
                let card = kestrel_usnic::card::ModexCard::decode(bytes).map_err(|e| {
                    format!(
                        "usnic card of rank {} of job {}: {e}",
                        union[u].rank, union[u].job
                    )
                })?;
                match usnic.add_peer(u as u32, card) {
                    Ok(()) => pairs.push((proc_idx, u as u32)),
                    Err(why) => {
                        self.usnic_unreachable[proc_idx as usize] = Some(why);
                    }
                }
            }
            let slot = self.btls.len();
            self.btls
                .push(Box::new(Remapped::new(Box::new(usnic), &pairs)));
            for &(p, _) in &pairs {
                routed.insert(p, slot);
            }
            slots.push(slot);
        }
        if self.btls.len() >= NO_ROUTE as usize {
            return Err("too many transport instances (connections) in this process; disconnect the ones no longer needed".into());
        }
        for &(p, u) in new_remote {
            match routed.get(&p) {
                Some(&slot) if self.btls[slot].reaches(p) => self.route[p as usize] = slot as u8,
                _ => {
                    let why = self.usnic_unreachable[p as usize]
                        .clone()
                        .unwrap_or_else(|| {
                            "no transport allowed by the btl parameter reaches it".into()
                        });
                    return Err(format!(
                        "no transport reaches rank {} of job {} (node {}): {why}",
                        union[u].rank, union[u].job, union[u].node
                    ));
                }
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
    use kestrel_transport::btl::SelfBtl;

    #[test]
    fn remapped_translates_peers_both_ways_and_drops_strangers() {
        // Union index 4 is this process inside the instance; the engine calls it 9.
        let mut b = Remapped::new(Box::new(SelfBtl::new(4)), &[(9, 4)]);
        assert!(b.reaches(9));
        assert!(!b.reaches(4));
        b.send(9, 1, b"hdr", b"payload").unwrap();
        assert_eq!(
            b.send(5, 1, b"", b""),
            Err(SendError::Unreachable { peer: 5 })
        );
        let mut got = Vec::new();
        b.progress(&mut |m| got.push((m.peer, m.am, m.data.to_vec())));
        assert_eq!(got, vec![(9, 1, b"hdrpayload".to_vec())]);
        // An instance member this process does not route through it: dropped, counted.
        let mut stray = Remapped::new(Box::new(SelfBtl::new(2)), &[(7, 3)]);
        stray.inner.send(2, 1, b"x", b"").unwrap();
        let mut n = 0;
        stray.progress(&mut |_| n += 1);
        assert_eq!((n, stray.dropped), (0, 1));
        let mut r = Retired;
        assert!(!r.reaches(0));
        assert_eq!(r.progress(&mut |_| {}), 0);
    }

    #[test]
    fn cards_and_outcomes_round_trip_and_garbage_is_refused() {
        for (shm, usnic) in [
            (None, None),
            (Some(b"1|0|/dev/shm/x".to_vec()), None),
            (None, Some(vec![1, 2, 3])),
            (Some(vec![]), Some(vec![9; 300])),
        ] {
            let enc = encode_cards(shm.clone(), usnic.clone());
            assert_eq!(decode_cards(&enc), Some((shm, usnic)));
            for end in 0..enc.len() {
                assert_eq!(decode_cards(&enc[..end]), None);
            }
        }
        assert_eq!(decode_cards(&[4, 0, 0, 0, 0, 0, 0, 0, 0]), None);
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
