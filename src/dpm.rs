//! Dynamic processes: ports, connect/accept, the name service, spawn, and
//! inter-communicators.
//!
//! ```no_run
//! use kestrel::dpm::InterRoot;
//! use kestrel::Communicator;
//! # let universe = kestrel::initialize().unwrap();
//! let world = universe.world();
//! // Server job:
//! let port = if world.rank() == 0 { universe.open_port().unwrap() } else { String::new() };
//! if world.rank() == 0 {
//!     universe.publish_name("my-service", &port).unwrap();
//! }
//! let clients = world.accept(&port, 0).unwrap();
//! let mut hello = [0u32; 1];
//! clients.broadcast_into(if world.rank() == 0 { InterRoot::Root } else { InterRoot::RootGroup }, &mut hello[..]).unwrap();
//! let everyone = clients.merge(false).unwrap();
//! clients.disconnect().unwrap();
//! # drop(everyone);
//! ```
//!
//! Unlike the rest of this API, dynamic-process operations return errors instead of aborting:
//! a port may be wrong or closed, and the processes of the other job may fail. An
//! inter-communicator whose other side failed returns [`DpmError::ProcFailed`] from every
//! operation that needs it (see `kestrel_pml::dpm` for how failures are noticed). A
//! communicator merged from one ([`InterCommunicator::merge`]) is an ordinary communicator:
//! an operation on it that needs the failed process stops the job, naming the failure, as
//! every error on a communicator does in this API.
//!
//! Port names look like `kestrel-port:v2:192.0.2.7,127.0.0.1:40123:1:<32 hex digits>`
//! (addresses and TCP port of the opener's listener, a tag, and the port's random 128-bit
//! token); see `kestrel_runtime::dpm::port` for the grammar. A port name is a capability:
//! whoever holds it may connect, and connect and accept each prove knowledge of the token
//! before anything else counts.
//! The name service is kept by `kestrel-run` in the directory named by the `dpm_name_dir`
//! parameter (by default `$TMPDIR/kestrel-names-<uid>`), shared by separate `kestrel-run`
//! invocations. Spawned jobs are started by the parent's `kestrel-run` (info keys `host`,
//! `wdir`, and `env` with `NAME=VALUE` lines) and end with the job that spawned them.

use std::fmt;
use std::rc::Rc;

pub use kestrel_pml::inter::InterRoot;
pub use kestrel_runtime::dpm::{DpmError, MpiClass, NameError, PortError};

use kestrel_pml::PmlError;
use kestrel_runtime::client::{PmiError, SpawnRequest};

use crate::collective::Operation;
use crate::datatype::{zeroed_vec, BufferMut};
use crate::{Buffer, Equivalence, Group, Inner, Rank, SimpleCommunicator, Status, Tag, Universe};

/// The environment variable through which a spawned job learns its parent's port.
pub const PARENT_PORT_VAR: &str = "KESTREL_DPM_PARENT_PORT";

fn dpm(e: PmlError) -> DpmError {
    match e {
        PmlError::Dpm(d) => d,
        other => DpmError::Messaging(other.to_string()),
    }
}

fn from_runtime(e: kestrel_runtime::RuntimeError) -> DpmError {
    match e {
        kestrel_runtime::RuntimeError::Pmi(PmiError::Server { rc, msg, .. }) => {
            DpmError::Reported {
                class: match rc {
                    2 => MpiClass::Name,
                    1 | 3 => MpiClass::Service,
                    _ => MpiClass::Other,
                },
                message: msg,
            }
        }
        other => DpmError::Pmi(other.to_string()),
    }
}

fn check_tag(tag: Tag) -> Result<i32, DpmError> {
    if tag < 0 {
        return Err(DpmError::Messaging(format!(
            "tag {tag} is negative; user tags must be >= 0"
        )));
    }
    Ok(tag)
}

impl Universe {
    /// `MPI_Open_port`: a new port of this process, to pass to [`SimpleCommunicator::accept`]
    /// here and to [`SimpleCommunicator::connect`] in another job.
    pub fn open_port(&self) -> Result<String, DpmError> {
        self.inner.engine.borrow_mut().open_port().map_err(dpm)
    }

    /// `MPI_Close_port`: later connections to it are refused.
    pub fn close_port(&self, port: &str) -> Result<(), DpmError> {
        self.inner.engine.borrow_mut().close_port(port).map_err(dpm)
    }

    /// `MPI_Publish_name`: makes `port` findable under `service` by other jobs.
    pub fn publish_name(&self, service: &str, port: &str) -> Result<(), DpmError> {
        kestrel_runtime::dpm::PortName::parse(port)?;
        self.inner
            .runtime
            .borrow_mut()
            .publish_name(service, port)
            .map_err(from_runtime)
    }

    /// `MPI_Lookup_name`: the port published under `service`; an error of class
    /// [`MpiClass::Name`] when nothing is (yet).
    pub fn lookup_name(&self, service: &str) -> Result<String, DpmError> {
        match self.inner.runtime.borrow_mut().lookup_name(service) {
            Ok(Some(port)) => Ok(port),
            Ok(None) => Err(DpmError::Name(NameError::NotPublished {
                service: service.to_string(),
            })),
            Err(e) => Err(from_runtime(e)),
        }
    }

    /// `MPI_Unpublish_name` (the service is removed whatever port it was published with).
    pub fn unpublish_name(&self, service: &str, port: &str) -> Result<(), DpmError> {
        let _ = port;
        self.inner
            .runtime
            .borrow_mut()
            .unpublish_name(service)
            .map_err(from_runtime)
    }

    /// `MPI_Comm_get_parent`: the inter-communicator to the job that spawned this one.
    pub fn parent(&self) -> Option<InterCommunicator> {
        self.inner
            .parent
            .get()
            .map(|ctx| InterCommunicator::from_context(&self.inner, ctx, false))
    }
}

/// One command of a spawn: a program, its arguments, how many processes, and info keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnCommand {
    program: String,
    args: Vec<String>,
    procs: u32,
    info: Vec<(String, String)>,
}

impl SpawnCommand {
    /// `procs` processes of `program`.
    pub fn new(program: impl Into<String>, procs: u32) -> SpawnCommand {
        SpawnCommand {
            program: program.into(),
            args: Vec::new(),
            procs,
            info: Vec::new(),
        }
    }

    /// Adds an argument.
    pub fn arg(mut self, a: impl Into<String>) -> SpawnCommand {
        self.args.push(a.into());
        self
    }

    /// Adds arguments.
    pub fn args<I: IntoIterator<Item = S>, S: Into<String>>(mut self, args: I) -> SpawnCommand {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds an info key: `host` (where the processes run: a host or `h1:2,h2` list), `wdir`
    /// (their working directory), `env` (`NAME=VALUE` lines for their environment).
    pub fn info(mut self, key: impl Into<String>, value: impl Into<String>) -> SpawnCommand {
        self.info.push((key.into(), value.into()));
        self
    }

    fn request(&self) -> SpawnRequest {
        let mut info = Vec::new();
        for (k, v) in &self.info {
            if k == "env" {
                // PMI values cannot carry newlines: one pair per variable.
                for line in v.lines().filter(|l| !l.trim().is_empty()) {
                    info.push((k.clone(), line.to_string()));
                }
            } else {
                info.push((k.clone(), v.clone()));
            }
        }
        SpawnRequest {
            program: self.program.clone(),
            args: self.args.clone(),
            procs: self.procs,
            info,
        }
    }
}

impl SimpleCommunicator {
    /// `MPI_Comm_accept`: waits for a job to connect to `port` (which matters at `root` only,
    /// and must be a port `root` opened). Collective over this communicator.
    pub fn accept(&self, port: &str, root: Rank) -> Result<InterCommunicator, DpmError> {
        let ctx = self
            .inner
            .engine
            .borrow_mut()
            .accept(self.ctx, root_index(root)?, port)
            .map_err(dpm)?;
        Ok(InterCommunicator::from_context(&self.inner, ctx, true))
    }

    /// `MPI_Comm_connect`: connects to the job that accepts on `port` (which matters at
    /// `root` only). Fails after `dpm_connect_timeout_ms` when nobody accepts. Collective
    /// over this communicator.
    pub fn connect(&self, port: &str, root: Rank) -> Result<InterCommunicator, DpmError> {
        let ctx = self
            .inner
            .engine
            .borrow_mut()
            .connect(self.ctx, root_index(root)?, port)
            .map_err(dpm)?;
        Ok(InterCommunicator::from_context(&self.inner, ctx, true))
    }

    /// `MPI_Comm_spawn`: starts `command` as a new job (through the launcher) and returns the
    /// inter-communicator to it. `command` matters at `root` only. Collective.
    pub fn spawn(&self, command: &SpawnCommand, root: Rank) -> Result<InterCommunicator, DpmError> {
        self.spawn_multiple(std::slice::from_ref(command), root)
    }

    /// `MPI_Comm_spawn_multiple`: one job running several programs (ranks in command order).
    pub fn spawn_multiple(
        &self,
        commands: &[SpawnCommand],
        root: Rank,
    ) -> Result<InterCommunicator, DpmError> {
        let root = root_index(root)?;
        let me = self.rank as u32;
        let mut port = String::new();
        let started: Result<Vec<u8>, PmlError> = if me == root {
            let r = (|| -> Result<(), DpmError> {
                if commands.is_empty() {
                    return Err(DpmError::Spawn("no command to spawn".into()));
                }
                port = self.inner.engine.borrow_mut().open_port().map_err(dpm)?;
                let requests: Vec<SpawnRequest> =
                    commands.iter().map(SpawnCommand::request).collect();
                let preput = vec![(
                    kestrel_runtime::launcher::agent::PARENT_PORT_KEY.to_string(),
                    port.clone(),
                )];
                self.inner
                    .runtime
                    .borrow_mut()
                    .spawn(&requests, &preput)
                    .map_err(|e| DpmError::Spawn(e.to_string()))?;
                Ok(())
            })();
            r.map(|()| Vec::new()).map_err(PmlError::Dpm)
        } else {
            Ok(Vec::new())
        };
        let shared = {
            let mut e = self.inner.engine.borrow_mut();
            let bytes = e
                .bcast_bytes(self.ctx, root, kestrel_pml::dpm::encode_outcome(&started))
                .map_err(dpm)?;
            kestrel_pml::dpm::decode_outcome(&bytes, root)
        };
        let result = match shared {
            Ok(_) => self
                .inner
                .engine
                .borrow_mut()
                .accept(self.ctx, root, &port)
                .map_err(dpm),
            Err(e) => Err(dpm(e)),
        };
        if me == root && !port.is_empty() {
            let _ = self.inner.engine.borrow_mut().close_port(&port);
        }
        let ctx = result?;
        Ok(InterCommunicator::from_context(&self.inner, ctx, true))
    }

    /// `MPI_Intercomm_create`: this communicator's `local_leader` and `peer`'s
    /// `remote_leader` (both members of `peer`) join their groups with `tag`. Collective over
    /// this communicator and the remote group's.
    pub fn intercomm_create(
        &self,
        local_leader: Rank,
        peer: &SimpleCommunicator,
        remote_leader: Rank,
        tag: Tag,
    ) -> Result<InterCommunicator, DpmError> {
        let ctx = self
            .inner
            .engine
            .borrow_mut()
            .intercomm_create(
                self.ctx,
                root_index(local_leader)?,
                peer.ctx,
                root_index(remote_leader)?,
                check_tag(tag)?,
            )
            .map_err(dpm)?;
        Ok(InterCommunicator::from_context(&self.inner, ctx, true))
    }
}

fn root_index(r: Rank) -> Result<u32, DpmError> {
    u32::try_from(r).map_err(|_| DpmError::Messaging(format!("root rank {r} is negative")))
}

/// An inter-communicator: a local group and a remote group. Ranks passed to point-to-point
/// operations are ranks of the remote group.
pub struct InterCommunicator {
    inner: Rc<Inner>,
    ctx: u16,
    rank: Rank,
    size: Rank,
    remote_size: Rank,
    owned: bool,
}

impl fmt::Debug for InterCommunicator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "InterCommunicator(context {}, rank {} of {}, remote group of {})",
            self.ctx, self.rank, self.size, self.remote_size
        )
    }
}

impl Drop for InterCommunicator {
    fn drop(&mut self) {
        if self.owned {
            if let Ok(mut e) = self.inner.engine.try_borrow_mut() {
                e.free_context(self.ctx);
            }
        }
    }
}

impl InterCommunicator {
    fn from_context(inner: &Rc<Inner>, ctx: u16, owned: bool) -> InterCommunicator {
        let e = inner.engine.borrow();
        let local = e.context_local_group(ctx).unwrap_or(&[]);
        let me = e.rank();
        InterCommunicator {
            rank: local
                .iter()
                .position(|&r| r == me)
                .map(|r| r as Rank)
                .unwrap_or(-1),
            size: local.len() as Rank,
            remote_size: e.context_group(ctx).map(|g| g.len()).unwrap_or(0) as Rank,
            inner: inner.clone(),
            ctx,
            owned,
        }
    }

    /// This process's rank in the local group.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Size of the local group (`MPI_Comm_size`).
    pub fn size(&self) -> Rank {
        self.size
    }

    /// Size of the remote group (`MPI_Comm_remote_size`).
    pub fn remote_size(&self) -> Rank {
        self.remote_size
    }

    /// The messaging layer's context id (for the C ABI's handles).
    pub fn context_id(&self) -> u16 {
        self.ctx
    }

    /// The local group (process indices; this job's ranks for processes of this job).
    pub fn local_group(&self) -> Group {
        let e = self.inner.engine.borrow();
        Group::new(e.context_local_group(self.ctx).unwrap_or(&[]).to_vec())
    }

    /// The remote group (`MPI_Comm_remote_group`).
    pub fn remote_group(&self) -> Group {
        let e = self.inner.engine.borrow();
        Group::new(e.context_group(self.ctx).unwrap_or(&[]).to_vec())
    }

    /// (job id, rank in that job) of remote rank `r`.
    pub fn remote_identity(&self, r: Rank) -> Option<(String, u32)> {
        let e = self.inner.engine.borrow();
        let p = *e.context_group(self.ctx)?.get(usize::try_from(r).ok()?)?;
        Some(e.process_identity(p))
    }

    fn dest(&self, r: Rank) -> Result<u32, DpmError> {
        u32::try_from(r)
            .ok()
            .filter(|&d| (d as Rank) < self.remote_size)
            .ok_or_else(|| {
                DpmError::Messaging(format!(
                    "rank {r} is outside the remote group of {}",
                    self.remote_size
                ))
            })
    }

    /// Sends `buf` to remote rank `dest` with `tag`.
    pub fn send<B: Buffer + ?Sized>(&self, dest: Rank, buf: &B, tag: Tag) -> Result<(), DpmError> {
        let d = self.dest(dest)?;
        self.inner
            .engine
            .borrow_mut()
            .send_checked(self.ctx, d, check_tag(tag)?, buf.as_bytes(), false)
            .map_err(dpm)
    }

    /// Receives into `buf` from remote rank `source` (`None` = any) with `tag` (`None` =
    /// any).
    pub fn receive_into<B: BufferMut + ?Sized>(
        &self,
        source: Option<Rank>,
        tag: Option<Tag>,
        buf: &mut B,
    ) -> Result<Status, DpmError> {
        let s = source.map(|r| self.dest(r)).transpose()?;
        let t = tag.map(check_tag).transpose()?;
        let st = self
            .inner
            .engine
            .borrow_mut()
            .recv_checked(self.ctx, s, t, buf.as_bytes_mut())
            .map_err(dpm)?;
        Ok(Status::from_pml(st))
    }

    /// Receives a message of any length from remote rank `source` (`None` = any).
    pub fn receive_vec<T: Equivalence>(
        &self,
        source: Option<Rank>,
        tag: Option<Tag>,
    ) -> Result<(Vec<T>, Status), DpmError> {
        let s = source.map(|r| self.dest(r)).transpose()?;
        let t = tag.map(check_tag).transpose()?;
        let (bytes, st) = self
            .inner
            .engine
            .borrow_mut()
            .recv_vec_checked(self.ctx, s, t)
            .map_err(dpm)?;
        let size = std::mem::size_of::<T>().max(1);
        let mut v: Vec<T> = zeroed_vec(bytes.len() / size);
        let n = v.as_bytes_mut().len();
        v.as_bytes_mut().copy_from_slice(&bytes[..n]);
        Ok((v, Status::from_pml(st)))
    }

    /// `MPI_Barrier`: returns once every process of both groups entered.
    pub fn barrier(&self) -> Result<(), DpmError> {
        self.inner
            .engine
            .borrow_mut()
            .inter_barrier(self.ctx)
            .map_err(dpm)
    }

    /// `MPI_Bcast`: the root passes [`InterRoot::Root`], the rest of its group
    /// [`InterRoot::RootGroup`], the other group `InterRoot::Remote(root's rank)`.
    pub fn broadcast_into<B: BufferMut + ?Sized>(
        &self,
        root: InterRoot,
        buf: &mut B,
    ) -> Result<(), DpmError> {
        self.inner
            .engine
            .borrow_mut()
            .inter_bcast(self.ctx, root, buf.as_bytes_mut())
            .map_err(dpm)
    }

    /// `MPI_Allreduce`: `recv` gets the reduction of the *remote* group's `send` buffers.
    pub fn all_reduce_into<T: Equivalence, O: Operation<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) -> Result<(), DpmError> {
        let (red, dt) = op.reduction();
        self.inner
            .engine
            .borrow_mut()
            .inter_allreduce(self.ctx, send.as_bytes(), recv.as_bytes_mut(), dt, &red)
            .map_err(dpm)
    }

    /// `MPI_Allgather`: `recv` (remote size × `send.len()` elements) gets the *remote*
    /// group's contributions in its rank order.
    pub fn all_gather_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
    ) -> Result<(), DpmError> {
        self.inner
            .engine
            .borrow_mut()
            .inter_allgather(self.ctx, send.as_bytes(), recv.as_bytes_mut())
            .map_err(dpm)
    }

    /// `MPI_Intercomm_merge`: an intra-communicator of both groups; the group passing
    /// `high = false` comes first. Collective over both groups.
    pub fn merge(&self, high: bool) -> Result<SimpleCommunicator, DpmError> {
        let ctx = self
            .inner
            .engine
            .borrow_mut()
            .intercomm_merge(self.ctx, high)
            .map_err(dpm)?;
        Ok(SimpleCommunicator::from_context(&self.inner, ctx))
    }

    /// `MPI_Comm_dup` of an inter-communicator.
    pub fn duplicate(&self) -> Result<InterCommunicator, DpmError> {
        let ctx = self.inner.engine.borrow_mut().dup(self.ctx).map_err(dpm)?;
        Ok(InterCommunicator::from_context(&self.inner, ctx, true))
    }

    /// `MPI_Comm_disconnect`: waits for both groups, then frees the communicator and closes
    /// the connection when no other communicator uses it. Collective over both groups.
    pub fn disconnect(mut self) -> Result<(), DpmError> {
        self.owned = false;
        if self.inner.parent.get() == Some(self.ctx) {
            self.inner.parent.set(None);
        }
        self.inner
            .engine
            .borrow_mut()
            .disconnect(self.ctx)
            .map_err(dpm)
    }
}
