//! Dynamic processes in the C library: ports, connect/accept, the name service, spawn,
//! `MPI_Comm_get_parent`, inter-communicator merge and creation, and disconnect.
//!
//! This module owns the MPI meaning of these calls on top of the engine
//! (`kestrel_pml::dpm`) and the runtime's name service and spawn: which arguments matter at
//! the root only, how a spawn's outcome reaches every rank of the spawning communicator,
//! how dynamic-process errors map to MPI error classes (`MPI_ERR_PORT`, `MPI_ERR_NAME`,
//! `MPI_ERR_SERVICE`, `MPI_ERR_SPAWN`), and the lifetime of the parent communicator. It
//! never touches raw pointers and never parses port names itself (the runtime's strict
//! parser does).

use std::os::raw::c_int;

use kestrel_pml::PmlError;
use kestrel_runtime::client::{PmiError, SpawnRequest};
use kestrel_runtime::dpm::{DpmError, MpiClass, PortName};
use kestrel_runtime::RuntimeError;

use crate::comm;
use crate::error::{self, MpiError, MpiResult};
use crate::handle;
use crate::state::{comm_slot, Core, Locked};

/// `MPI_ERR_NAME`: no port is published under the service name.
pub const ERR_NAME: c_int = 33;
/// `MPI_ERR_PORT`: a malformed, closed or unreachable port.
pub const ERR_PORT: c_int = 38;
/// `MPI_ERR_SERVICE`: the name service refused to publish or unpublish.
pub const ERR_SERVICE: c_int = 41;
/// `MPI_ERR_SPAWN`: the launcher could not start the processes.
pub const ERR_SPAWN: c_int = 42;
/// `MPI_MAX_PORT_NAME`: port names are at most this long, NUL included.
pub const MAX_PORT_NAME: usize = 256;

/// The MPI class of a dynamic-process error.
pub fn class_of(e: &DpmError) -> c_int {
    match e.mpi_class() {
        MpiClass::Port => ERR_PORT,
        MpiClass::Name => ERR_NAME,
        MpiClass::Service => ERR_SERVICE,
        MpiClass::Spawn => ERR_SPAWN,
        MpiClass::ProcFailed => error::ERR_PROC_FAILED,
        MpiClass::Other => error::ERR_OTHER,
    }
}

/// An engine error of a dynamic-process call; argument errors are `invalid` (the class of
/// the argument the engine rejected).
fn engine(invalid: c_int) -> impl Fn(PmlError) -> MpiError {
    move |e| match e {
        PmlError::Dpm(d) => MpiError::new(class_of(&d), d.to_string()),
        PmlError::Invalid(m) => MpiError::new(invalid, m),
        other => MpiError::new(error::ERR_OTHER, other.to_string()),
    }
}

/// A name-service error from the launcher: its reply code says which class.
fn name_service(e: RuntimeError) -> MpiError {
    match e {
        RuntimeError::Pmi(PmiError::Server { rc, msg, .. }) => MpiError::new(
            match rc {
                2 => ERR_NAME,
                1 | 3 => ERR_SERVICE,
                _ => error::ERR_OTHER,
            },
            msg,
        ),
        other => MpiError::new(
            error::ERR_OTHER,
            format!("the launcher's name service failed: {other}"),
        ),
    }
}

/// Checks a port name's syntax (`MPI_ERR_PORT` naming what is wrong).
fn parse_port(port: &str) -> MpiResult<()> {
    PortName::parse(port)
        .map(|_| ())
        .map_err(|e| MpiError::new(ERR_PORT, DpmError::from(e).to_string()))
}

/// Checks a root rank of an intra-communicator of `n` ranks.
fn check_root(root: c_int, n: i32, what: &str) -> MpiResult<u32> {
    if root < 0 || root >= n {
        return Err(MpiError::new(
            error::ERR_ROOT,
            format!("{what} root {root} is outside a communicator of {n} ranks; every rank must name the same root in 0..{}", n - 1),
        ));
    }
    Ok(root as u32)
}

/// `MPI_Open_port`: a new port of this process. Fails rather than truncating a name longer
/// than `MPI_MAX_PORT_NAME` (a cut name would not parse).
pub fn open_port(core: &mut Core) -> MpiResult<String> {
    let port = core.engine.open_port().map_err(engine(error::ERR_OTHER))?;
    if port.len() >= MAX_PORT_NAME {
        let _ = core.engine.close_port(&port);
        return Err(MpiError::new(
            error::ERR_INTERN,
            format!("the port name has {} bytes, more than MPI_MAX_PORT_NAME ({MAX_PORT_NAME}) allows; this host has too many addresses to list", port.len()),
        ));
    }
    Ok(port)
}

/// `MPI_Close_port`.
pub fn close_port(core: &mut Core, port: &str) -> MpiResult<()> {
    parse_port(port)?;
    core.engine.close_port(port).map_err(engine(ERR_PORT))
}

/// `MPI_Comm_accept` (`accepting`) or `MPI_Comm_connect` over intra-communicator `comm`:
/// `port` matters at `root` only. Returns the new inter-communicator.
pub fn accept_or_connect(
    core: &mut Core,
    comm: c_int,
    port: &str,
    root: c_int,
    accepting: bool,
) -> MpiResult<c_int> {
    let (ctx, eh, n) = {
        let c = comm::intra(
            core,
            comm,
            if accepting {
                "MPI_Comm_accept"
            } else {
                "MPI_Comm_connect"
            },
        )?;
        (c.ctx, c.errhandler, c.size())
    };
    let root = check_root(root, n, if accepting { "accept" } else { "connect" })?;
    let new = if accepting {
        core.engine.accept(ctx, root, port)
    } else {
        core.engine.connect(ctx, root, port)
    }
    .map_err(engine(error::ERR_ARG))?;
    core.new_comm(new, eh)
}

/// `MPI_Publish_name`.
pub fn publish_name(core: &mut Core, service: &str, port: &str) -> MpiResult<()> {
    parse_port(port)?;
    core.runtime
        .publish_name(service, port)
        .map_err(name_service)
}

/// `MPI_Lookup_name`: `MPI_ERR_NAME` when nothing is published under `service`.
pub fn lookup_name(core: &mut Core, service: &str) -> MpiResult<String> {
    match core.runtime.lookup_name(service) {
        Ok(Some(port)) => Ok(port),
        Ok(None) => Err(MpiError::new(
            ERR_NAME,
            format!("no port is published under the service name '{service}' (not yet, or unpublished); the server publishes it with MPI_Publish_name"),
        )),
        Err(e) => Err(name_service(e)),
    }
}

/// `MPI_Unpublish_name` (the service goes whatever port it was published with).
pub fn unpublish_name(core: &mut Core, service: &str) -> MpiResult<()> {
    core.runtime.unpublish_name(service).map_err(name_service)
}

/// One command of `MPI_Comm_spawn(_multiple)`, as the root read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnCmd {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How many processes run it.
    pub procs: u32,
    /// Info keys and values.
    pub info: Vec<(String, String)>,
}

impl SpawnCmd {
    /// The launcher's request. Keys Kestrel's launcher knows are `host`, `wdir` and `env`
    /// (`NAME=VALUE` lines, sent one pair per variable since PMI values cannot carry
    /// newlines); others are dropped here, as MPI lets an implementation ignore them.
    fn request(&self) -> SpawnRequest {
        let mut info = Vec::new();
        for (k, v) in &self.info {
            match k.as_str() {
                "env" => info.extend(
                    v.lines()
                        .filter(|l| !l.trim().is_empty())
                        .map(|l| (k.clone(), l.to_string())),
                ),
                "host" | "wdir" => info.push((k.clone(), v.clone())),
                other => {
                    tracing::debug!(target: "abi", key = other, "spawn info key ignored")
                }
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

/// `MPI_Comm_spawn_multiple` over intra-communicator `comm`: the root (which alone passes
/// `cmds`, `Some`) asks the launcher for a new job that connects back to a port the root
/// opened; every rank then accepts it. Returns the inter-communicator to the children.
pub fn spawn(
    core: &mut Core,
    comm: c_int,
    cmds: Option<&[SpawnCmd]>,
    root: c_int,
) -> MpiResult<c_int> {
    let (ctx, eh, me, n) = {
        let c = comm::intra(core, comm, "MPI_Comm_spawn")?;
        (c.ctx, c.errhandler, c.rank, c.size())
    };
    let root = check_root(root, n, "spawn")?;
    let mut port = String::new();
    let started: Result<Vec<u8>, PmlError> = if me as u32 == root {
        let r = (|| -> MpiResult<()> {
            let cmds = cmds.unwrap_or(&[]);
            if cmds.is_empty() {
                return Err(MpiError::new(ERR_SPAWN, "no command to spawn"));
            }
            port = open_port(core)?;
            let requests: Vec<SpawnRequest> = cmds.iter().map(SpawnCmd::request).collect();
            let preput = vec![(
                kestrel_runtime::launcher::agent::PARENT_PORT_KEY.to_string(),
                port.clone(),
            )];
            core.runtime.spawn(&requests, &preput).map_err(|e| {
                MpiError::new(
                    ERR_SPAWN,
                    format!("the launcher could not start the processes: {e}"),
                )
            })?;
            Ok(())
        })();
        // The other ranks learn the outcome as a dynamic-process error of the spawn class.
        r.map(|()| Vec::new())
            .map_err(|e| PmlError::Dpm(DpmError::Spawn(e.msg.clone())))
    } else {
        Ok(Vec::new())
    };
    let shared = core
        .engine
        .bcast_bytes(ctx, root, kestrel_pml::dpm::encode_outcome(&started))
        .map_err(engine(error::ERR_OTHER))
        .and_then(|bytes| {
            kestrel_pml::dpm::decode_outcome(&bytes, root).map_err(engine(ERR_SPAWN))
        });
    let result = shared.and_then(|_| {
        core.engine
            .accept(ctx, root, &port)
            .map_err(engine(error::ERR_ARG))
    });
    if !port.is_empty() {
        let _ = core.engine.close_port(&port);
    }
    core.new_comm(result?, eh)
}

/// Connects a spawned job to its parent during `MPI_Init`, as the Rust facade does; returns
/// the parent inter-communicator's context, `None` when the job was not spawned.
pub fn connect_parent(engine: &mut kestrel_pml::Engine) -> MpiResult<Option<u16>> {
    match std::env::var(kestrel::dpm::PARENT_PORT_VAR) {
        Ok(port) if !port.is_empty() => engine
            .connect(kestrel_pml::engine::CTX_WORLD, 0, &port)
            .map(Some)
            .map_err(|e| {
                MpiError::new(
                    error::ERR_OTHER,
                    format!("start-up failed: this job was spawned but cannot connect back to its parent: {e}"),
                )
            }),
        _ => Ok(None),
    }
}

/// `MPI_Intercomm_merge`: the group passing `high = false` first.
pub fn merge(core: &mut Core, comm: c_int, high: bool) -> MpiResult<c_int> {
    let (ctx, eh) = inter(core, comm, "MPI_Intercomm_merge")?;
    let new = core
        .engine
        .intercomm_merge(ctx, high)
        .map_err(engine(error::ERR_COMM))?;
    core.new_comm(new, eh)
}

fn inter(core: &Core, comm: c_int, what: &str) -> MpiResult<(u16, c_int)> {
    let c = core.comm(comm)?;
    if !c.is_inter() {
        return Err(MpiError::new(
            error::ERR_COMM,
            format!("{what} needs an inter-communicator (from MPI_Comm_accept, MPI_Comm_connect, MPI_Comm_spawn or MPI_Intercomm_create)"),
        ));
    }
    Ok((c.ctx, c.errhandler))
}

/// `MPI_Intercomm_create`: `peer` and `remote_leader` matter at `local_leader` only.
pub fn intercomm_create(
    core: &mut Core,
    local: c_int,
    local_leader: c_int,
    peer: c_int,
    remote_leader: c_int,
    tag: c_int,
) -> MpiResult<c_int> {
    let (ctx, eh, me, n) = {
        let c = comm::intra(core, local, "MPI_Intercomm_create")?;
        (c.ctx, c.errhandler, c.rank, c.size())
    };
    let leader = check_root(local_leader, n, "local leader as")?;
    let tag = crate::p2p::send_tag(tag)?;
    let (peer_ctx, remote) = if me as u32 == leader {
        let p = comm::intra(core, peer, "MPI_Intercomm_create (peer communicator)")?;
        let remote = u32::try_from(remote_leader)
            .ok()
            .filter(|&r| (r as i32) < p.size())
            .ok_or_else(|| {
                MpiError::new(
                    error::ERR_RANK,
                    format!(
                        "remote leader {remote_leader} is outside the peer communicator of {} ranks",
                        p.size()
                    ),
                )
            })?;
        (p.ctx, remote)
    } else {
        // Only the leaders use the peer communicator.
        (ctx, 0)
    };
    let new = core
        .engine
        .intercomm_create(ctx, leader, peer_ctx, remote, tag)
        .map_err(engine(error::ERR_ARG))?;
    core.new_comm(new, eh)
}

/// `MPI_Comm_disconnect`: deletes the attributes, waits for both groups (or every member of
/// an intra-communicator), frees the communicator and closes connections no communicator
/// uses any more.
pub fn disconnect(l: &mut Locked, comm: c_int) -> MpiResult<()> {
    if comm == handle::COMM_WORLD || comm == handle::COMM_SELF {
        return Err(MpiError::new(
            error::ERR_COMM,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be disconnected",
        ));
    }
    l.core()?.comm(comm)?;
    comm::delete_all_attrs(l, comm)?;
    let core = l.core()?;
    let ctx = core.comm(comm)?.ctx;
    let r = core.engine.disconnect(ctx).map_err(engine(error::ERR_COMM));
    if let Some(i) = comm_slot(comm) {
        core.comms.remove(i);
    }
    if core.parent == comm {
        core.parent = handle::COMM_NULL;
    }
    r
}

/// `MPI_Comm_join`: the two processes at the ends of a connected socket meet. Each opens a
/// port and sends its name (and a random tie-breaker) over the socket; the lower one
/// accepts, the other connects, both over `MPI_COMM_SELF`.
pub fn join(core: &mut Core, sock: &mut (impl std::io::Read + std::io::Write)) -> MpiResult<c_int> {
    let io = |e: std::io::Error| {
        MpiError::new(
            error::ERR_OTHER,
            format!("the socket given to MPI_Comm_join failed: {e}; pass a connected stream socket whose other end calls MPI_Comm_join too"),
        )
    };
    let port = open_port(core)?;
    let tie = kestrel_transport::set::new_job_key();
    let mut w = kestrel_transport::codec::Writer::new();
    w.raw(b"KJOIN1").string(&port).u64(tie);
    let msg = w.into_vec();
    sock.write_all(&(msg.len() as u32).to_le_bytes())
        .map_err(io)?;
    sock.write_all(&msg).map_err(io)?;
    let mut len = [0u8; 4];
    sock.read_exact(&mut len).map_err(io)?;
    let n = u32::from_le_bytes(len) as usize;
    if n > 4096 {
        return Err(MpiError::new(error::ERR_OTHER, format!("MPI_Comm_join: the other end sent a {n}-byte greeting; it is not Kestrel's MPI_Comm_join")));
    }
    let mut theirs = vec![0u8; n];
    sock.read_exact(&mut theirs).map_err(io)?;
    let bad = |e: kestrel_transport::codec::DecodeError| {
        MpiError::new(error::ERR_OTHER, format!("MPI_Comm_join: the other end's greeting is malformed ({e}); it is not Kestrel's MPI_Comm_join"))
    };
    let mut r = kestrel_transport::codec::Reader::new(&theirs, "join greeting");
    if r.take(6, "magic").map_err(bad)? != b"KJOIN1" {
        return Err(MpiError::new(
            error::ERR_OTHER,
            "MPI_Comm_join: the other end is not Kestrel's MPI_Comm_join",
        ));
    }
    let their_port = r.string("port").map_err(bad)?;
    let their_tie = r.u64("tie").map_err(bad)?;
    r.finish("join greeting").map_err(bad)?;
    let accepting = (tie, port.as_str()) < (their_tie, their_port.as_str());
    let h = if accepting {
        accept_or_connect(core, crate::handle::COMM_SELF, &port, 0, true)
    } else {
        accept_or_connect(core, crate::handle::COMM_SELF, &their_port, 0, false)
    };
    let _ = close_port(core, &port);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_map_to_their_mpi_classes() {
        let bad = PortName::parse("not-a-port").unwrap_err();
        assert_eq!(class_of(&DpmError::from(bad)), ERR_PORT);
        assert_eq!(parse_port("kestrel-port:v1:").unwrap_err().class, ERR_PORT);
        assert_eq!(class_of(&DpmError::Spawn("x".into())), ERR_SPAWN);
        assert_eq!(
            class_of(&DpmError::ProcFailed("x".into())),
            error::ERR_PROC_FAILED
        );
        let e = engine(error::ERR_ROOT)(PmlError::Invalid("root 9".into()));
        assert_eq!(e.class, error::ERR_ROOT);
    }

    #[test]
    fn spawn_info_keeps_launcher_keys_and_splits_env_lines() {
        let c = SpawnCmd {
            program: "p".into(),
            args: vec!["a".into()],
            procs: 3,
            info: vec![
                ("env".into(), "A=1\n\nB=2\n".into()),
                ("wdir".into(), "/tmp".into()),
                ("soft".into(), "1:3".into()),
            ],
        };
        let r = c.request();
        assert_eq!(r.procs, 3);
        assert_eq!(
            r.info,
            vec![
                ("env".to_string(), "A=1".to_string()),
                ("env".to_string(), "B=2".to_string()),
                ("wdir".to_string(), "/tmp".to_string()),
            ]
        );
    }
}
