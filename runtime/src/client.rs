//! PMI clients: how a rank talks to whoever launched it.
//!
//! [`connect`] picks the client from the environment: `PMI_FD` (an inherited socket, as hydra,
//! Slurm's pmi2 plugin and `kestrel-run` provide) or `PMI_PORT` (+ `PMI_ID`, a TCP address),
//! with the wire version chosen by the `pmi` parameter; with neither variable the process is a
//! singleton of size 1, except when it is one of several tasks `srun` started without a PMI
//! plugin, which is an error that shows the command that works. Clients are synchronous: PMI is
//! used at start-up and teardown only. This module must never guess a rank or size that the
//! launcher did not give: a wrong guess makes jobs of N rank-0s.

use std::collections::HashMap;
use std::fmt;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::unix::net::UnixStream;
use std::time::Duration;

use crate::wire::{Command, EncodeError, Framing, WireError};

/// Why a PMI operation failed.
#[derive(Debug)]
pub enum PmiError {
    /// A PMI environment variable is unusable.
    Env {
        /// The variable.
        variable: &'static str,
        /// Its value.
        value: String,
        /// What is wrong and how to fix it.
        reason: String,
    },
    /// The connection to the PMI server failed.
    Io {
        /// The step that failed (`init`, `fence`, `get 3/node`).
        during: String,
        /// The server's address (`PMI_FD=5`, `PMI_PORT=host:1234`).
        server: String,
        /// The error.
        source: io::Error,
    },
    /// The server sent bytes we could not decode.
    Wire {
        /// The step that failed.
        during: String,
        /// The decoding error (quotes the line).
        source: WireError,
    },
    /// A value cannot be sent in this framing.
    Encode(EncodeError),
    /// The server answered with an error code.
    Server {
        /// The step that failed.
        during: String,
        /// The server's `rc`.
        rc: i64,
        /// The server's message.
        msg: String,
    },
    /// The process is one of several tasks that `srun` started without a PMI plugin: nothing
    /// connects the tasks, and running each as a singleton would silently give N rank-0 jobs.
    SrunWithoutPmi {
        /// The Slurm step and this task's place in it.
        step: crate::slurm::SrunWithoutPmi,
        /// This process's command line, for the command that works.
        command: String,
    },
    /// The server answered with an unexpected command.
    Protocol {
        /// The step that failed.
        during: String,
        /// What we expected.
        expected: String,
        /// What came.
        got: String,
    },
}

impl fmt::Display for PmiError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PmiError::Env {
                variable,
                value,
                reason,
            } => write!(f, "PMI: {variable}='{value}': {reason}"),
            PmiError::Io {
                during,
                server,
                source,
            } => write!(
                f,
                "PMI: {during} failed talking to the launcher ({server}): {source}; the launcher \
                 or another rank probably died first (see its messages above)"
            ),
            PmiError::Wire { during, source } => write!(f, "PMI: during {during}: {source}"),
            PmiError::Encode(e) => write!(f, "PMI: {e}"),
            PmiError::Server { during, rc, msg } if msg.is_empty() => write!(
                f,
                "PMI: {during} refused by the launcher (rc={rc}, no message; the launcher's own \
                 error output or log may say why)"
            ),
            PmiError::Server { during, rc, msg } => {
                write!(f, "PMI: {during} refused by the launcher (rc={rc}): {msg}")
            }
            PmiError::SrunWithoutPmi { step, command } => step.explain(f, command),
            PmiError::Protocol {
                during,
                expected,
                got,
            } => write!(
                f,
                "PMI: during {during} expected '{expected}' but the launcher sent '{got}'"
            ),
        }
    }
}

impl std::error::Error for PmiError {}

/// Which client to use (`pmi` parameter).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiChoice {
    /// PMI-2 if the server agrees, else PMI-1; singleton without PMI variables.
    Auto,
    /// Force PMI-1.
    Pmi1,
    /// Force PMI-2.
    Pmi2,
    /// Ignore PMI variables: run alone.
    Singleton,
}

impl PmiChoice {
    /// From the parameter's word.
    pub fn from_word(word: &str) -> PmiChoice {
        match word {
            "pmi1" => PmiChoice::Pmi1,
            "pmi2" => PmiChoice::Pmi2,
            "singleton" => PmiChoice::Singleton,
            _ => PmiChoice::Auto,
        }
    }
}

/// One command of a spawn request (`MPI_Comm_spawn_multiple` has several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How many processes run it.
    pub procs: u32,
    /// Info keys and values (`host`, `wdir`, `env`...).
    pub info: Vec<(String, String)>,
}

/// Encodes a spawn as the PMI-2 `spawn` command: header pairs, then per command `subcmd`,
/// `maxprocs`, `argc`, `argv0..`, `infokeycount`, `infokey0..`/`infoval0..`.
pub fn spawn_command(cmds: &[SpawnRequest], preput: &[(String, String)]) -> Command {
    let mut c = Command::new("spawn")
        .with("ncmds", cmds.len().to_string())
        .with("preputcount", preput.len().to_string());
    for (i, (k, v)) in preput.iter().enumerate() {
        c = c
            .with(format!("ppkey{i}"), k.as_str())
            .with(format!("ppval{i}"), v.as_str());
    }
    for cmd in cmds {
        c = c
            .with("subcmd", cmd.program.as_str())
            .with("maxprocs", cmd.procs.to_string())
            .with("argc", cmd.args.len().to_string());
        for (i, a) in cmd.args.iter().enumerate() {
            c = c.with(format!("argv{i}"), a.as_str());
        }
        c = c.with("infokeycount", cmd.info.len().to_string());
        for (i, (k, v)) in cmd.info.iter().enumerate() {
            c = c
                .with(format!("infokey{i}"), k.as_str())
                .with(format!("infoval{i}"), v.as_str());
        }
    }
    c
}

/// Decodes a PMI-2 `spawn` command (checked: counts must match the pairs that follow).
#[allow(clippy::type_complexity)]
pub fn parse_spawn_command(
    cmd: &Command,
) -> Result<(Vec<SpawnRequest>, Vec<(String, String)>), String> {
    let mut it = cmd.pairs.iter().filter(|(k, _)| k != "thrid").peekable();
    let mut next = |key: &str| -> Result<String, String> {
        match it.next() {
            Some((k, v)) if k == key => Ok(v.clone()),
            Some((k, _)) => Err(format!("expected '{key}', found '{k}'")),
            None => Err(format!("'{key}' is missing")),
        }
    };
    let count = |text: String, what: &str, max: usize| -> Result<usize, String> {
        text.parse::<usize>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("{what} '{text}' is not a number up to {max}"))
    };
    let ncmds = count(next("ncmds")?, "ncmds", 1024)?;
    let npre = count(next("preputcount")?, "preputcount", 1024)?;
    let mut preput = Vec::with_capacity(npre);
    for i in 0..npre {
        let k = next(&format!("ppkey{i}"))?;
        let v = next(&format!("ppval{i}"))?;
        preput.push((k, v));
    }
    let mut cmds = Vec::with_capacity(ncmds);
    for _ in 0..ncmds {
        let program = next("subcmd")?;
        let procs = count(next("maxprocs")?, "maxprocs", 1 << 20)? as u32;
        let argc = count(next("argc")?, "argc", 1 << 16)?;
        let mut args = Vec::with_capacity(argc);
        for i in 0..argc {
            args.push(next(&format!("argv{i}"))?);
        }
        let ninfo = count(next("infokeycount")?, "infokeycount", 1 << 16)?;
        let mut info = Vec::with_capacity(ninfo);
        for i in 0..ninfo {
            let k = next(&format!("infokey{i}"))?;
            let v = next(&format!("infoval{i}"))?;
            info.push((k, v));
        }
        cmds.push(SpawnRequest {
            program,
            args,
            procs,
            info,
        });
    }
    if let Some((k, _)) = it.next() {
        return Err(format!("unexpected '{k}' after the last command"));
    }
    Ok((cmds, preput))
}

/// The operations every client offers. Keys and values must follow PMI limits
/// ([`PmiClient::max_key_len`], [`PmiClient::max_value_len`]); the modex splits larger blobs.
pub trait PmiClient: Send {
    /// `pmi1`, `pmi2` or `singleton`.
    fn kind(&self) -> &'static str;
    /// This process's rank in the job.
    fn rank(&self) -> u32;
    /// Number of ranks in the job.
    fn size(&self) -> u32;
    /// The job's KVS name / job id.
    fn job_id(&self) -> &str;
    /// Longest key the server accepts.
    fn max_key_len(&self) -> usize;
    /// Longest value the server accepts.
    fn max_value_len(&self) -> usize;
    /// Publishes a value; visible to others after the next [`PmiClient::fence`].
    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError>;
    /// Collective: commits puts and waits for every rank.
    fn fence(&mut self) -> Result<(), PmiError>;
    /// Reads a value published by `src` (a hint for PMI-2 servers).
    fn get(&mut self, src: u32, key: &str) -> Result<Option<String>, PmiError>;
    /// A job attribute such as `PMI_process_mapping`.
    fn job_attr(&mut self, key: &str) -> Result<Option<String>, PmiError>;
    /// Asks the launcher to kill the job.
    fn abort(&mut self, code: i32, message: &str) -> Result<(), PmiError>;
    /// Tells the launcher this rank is done with PMI.
    fn finalize(&mut self) -> Result<(), PmiError>;
    /// Publishes `port` under `service` in the launcher's name service.
    fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        let _ = port;
        Err(self.unsupported("publish_name", service))
    }
    /// The port published under `service` (`None` when nothing is).
    fn lookup_name(&mut self, service: &str) -> Result<Option<String>, PmiError> {
        Err(self.unsupported("lookup_name", service))
    }
    /// Removes `service` from the name service.
    fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        Err(self.unsupported("unpublish_name", service))
    }
    /// Asks the launcher to start a new job; returns its job id.
    fn spawn(
        &mut self,
        cmds: &[SpawnRequest],
        preput: &[(String, String)],
    ) -> Result<String, PmiError> {
        let _ = (cmds, preput);
        Err(self.unsupported("spawn", ""))
    }
    #[doc(hidden)]
    fn unsupported(&self, what: &str, _subject: &str) -> PmiError {
        PmiError::Server {
            during: what.to_string(),
            rc: -1,
            msg: format!(
                "the {} client cannot {what}; start the program with kestrel-run (PMI-2)",
                self.kind()
            ),
        }
    }
}

/// A process started without a launcher.
#[derive(Debug, Default)]
pub struct Singleton {
    kvs: HashMap<String, String>,
    job_id: String,
}

impl Singleton {
    /// A size-1 job named after this process.
    pub fn new() -> Self {
        Singleton {
            kvs: HashMap::new(),
            job_id: format!("singleton-{}", std::process::id()),
        }
    }
}

impl PmiClient for Singleton {
    fn kind(&self) -> &'static str {
        "singleton"
    }
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn max_key_len(&self) -> usize {
        64
    }
    fn max_value_len(&self) -> usize {
        1024
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        self.kvs.insert(key.into(), value.into());
        Ok(())
    }
    fn fence(&mut self) -> Result<(), PmiError> {
        Ok(())
    }
    fn get(&mut self, _src: u32, key: &str) -> Result<Option<String>, PmiError> {
        Ok(self.kvs.get(key).cloned())
    }
    fn job_attr(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        Ok(match key {
            "PMI_process_mapping" => Some("(vector,(0,1,1))".into()),
            _ => None,
        })
    }
    fn abort(&mut self, _code: i32, _message: &str) -> Result<(), PmiError> {
        Ok(())
    }
    fn finalize(&mut self) -> Result<(), PmiError> {
        Ok(())
    }
    // A process without a launcher serves its own names from the registry directory, so a
    // singleton server and clients under kestrel-run still find each other.
    fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        singleton_registry("publish_name")?
            .publish(
                service,
                port,
                &crate::dpm::names::Owner::this_process(&self.job_id),
            )
            .map_err(|e| name_error("publish_name", e))
    }
    fn lookup_name(&mut self, service: &str) -> Result<Option<String>, PmiError> {
        singleton_registry("lookup_name")?
            .lookup(service)
            .map_err(|e| name_error("lookup_name", e))
    }
    fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        singleton_registry("unpublish_name")?
            .unpublish(service, "")
            .map_err(|e| name_error("unpublish_name", e))
    }
}

fn singleton_registry(during: &str) -> Result<crate::dpm::NameRegistry, PmiError> {
    let dir = std::env::var("KESTREL_MCA_DPM_NAME_DIR")
        .or_else(|_| std::env::var("KESTREL_DPM_NAME_DIR"))
        .ok()
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(crate::dpm::names::default_dir);
    crate::dpm::NameRegistry::open(dir).map_err(|e| name_error(during, e))
}

fn name_error(during: &str, e: crate::dpm::NameError) -> PmiError {
    PmiError::Server {
        during: during.to_string(),
        rc: name_rc(&e),
        msg: e.to_string(),
    }
}

/// The `rc` a launcher answers a failed name operation with (the class survives the wire).
pub fn name_rc(e: &crate::dpm::NameError) -> i64 {
    match e {
        crate::dpm::NameError::AlreadyPublished { .. } => 1,
        crate::dpm::NameError::NotPublished { .. } => 2,
        crate::dpm::NameError::BadService { .. } => 3,
        crate::dpm::NameError::Io { .. } => 4,
    }
}

/// The longest PMI-1 request line a client may send, newline included. PMI-1 servers read a
/// request into a fixed buffer of this size: MPICH's simple PMI and Slurm's pmi2 plugin, which
/// reads once and parses whatever arrived, so a longer line turns into garbage requests.
const PMI1_MAX_LINE: usize = 1024;

trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// What the launcher said through the environment before any PMI exchange; servers differ in
/// which of these they expect back during the handshake.
#[derive(Debug, Default, Clone)]
struct LaunchHints {
    /// `PMI_ID` (PMI_PORT servers identify clients by it).
    pmi_id: Option<String>,
    /// `PMI_RANK`.
    rank: Option<u32>,
    /// `PMI_SIZE`.
    size: Option<u32>,
    /// `PMI_JOBID` (Slurm's pmi2 plugin wants it back in `fullinit`).
    job: Option<String>,
}

/// A PMI-1 or PMI-2 client over a connected stream.
pub struct WireClient {
    stream: Box<dyn Stream>,
    server: String,
    framing: Framing,
    inbuf: Vec<u8>,
    rank: u32,
    size: u32,
    job_id: String,
    max_key: usize,
    max_value: usize,
}

impl fmt::Debug for WireClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireClient")
            .field("server", &self.server)
            .field("framing", &self.framing)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

/// Connects to the PMI server described by `lookup` (a stand-in for the environment).
pub fn connect(
    choice: PmiChoice,
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Box<dyn PmiClient>, PmiError> {
    if choice == PmiChoice::Singleton {
        return Ok(Box::new(Singleton::new()));
    }
    let (stream, server, pmi_id): (Box<dyn Stream>, String, Option<String>) =
        if let Some(fd_text) = lookup("PMI_FD") {
            let fd: i32 = fd_text.trim().parse().map_err(|_| PmiError::Env {
                variable: "PMI_FD",
                value: fd_text.clone(),
                reason: "not a descriptor number".into(),
            })?;
            let owned = crate::sys::adopt_inherited_socket(fd).map_err(|reason| PmiError::Env {
                variable: "PMI_FD",
                value: fd_text.clone(),
                reason: format!(
                    "{reason}; was this process started by a PMI launcher (kestrel-run, mpiexec, \
                     srun --mpi=pmi2)? Unset PMI_FD to run as a singleton"
                ),
            })?;
            let stream = UnixStream::from(owned);
            (Box::new(stream), format!("PMI_FD={fd}"), None)
        } else if let Some(port) = lookup("PMI_PORT") {
            let stream = TcpStream::connect(port.trim()).map_err(|e| PmiError::Io {
                during: "connect".into(),
                server: format!("PMI_PORT={port}"),
                source: e,
            })?;
            let _ = stream.set_nodelay(true);
            (
                Box::new(stream),
                format!("PMI_PORT={port}"),
                lookup("PMI_ID"),
            )
        } else {
            if let Some(step) = crate::slurm::srun_without_pmi(lookup) {
                let program: Vec<String> = std::env::args().collect();
                return Err(PmiError::SrunWithoutPmi {
                    step,
                    command: program.join(" "),
                });
            }
            if matches!(choice, PmiChoice::Pmi1 | PmiChoice::Pmi2) {
                return Err(PmiError::Env {
                    variable: "PMI_FD",
                    value: String::new(),
                    reason: "KESTREL_PMI forces a PMI client but neither PMI_FD nor PMI_PORT is \
                             set; start the program with kestrel-run, mpiexec or srun \
                             --mpi=pmi2, or set KESTREL_PMI=auto to run as a singleton"
                        .into(),
                });
            }
            return Ok(Box::new(Singleton::new()));
        };
    let hints = LaunchHints {
        pmi_id,
        rank: lookup("PMI_RANK").and_then(|r| r.trim().parse::<u32>().ok()),
        size: lookup("PMI_SIZE").and_then(|r| r.trim().parse::<u32>().ok()),
        job: lookup("PMI_JOBID").filter(|j| !j.trim().is_empty()),
    };
    let client = WireClient::over_stream(stream, server, choice, hints)?;
    Ok(Box::new(client))
}

impl WireClient {
    /// Runs the handshake over an already connected stream.
    fn over_stream(
        stream: Box<dyn Stream>,
        server: String,
        choice: PmiChoice,
        hints: LaunchHints,
    ) -> Result<WireClient, PmiError> {
        let mut client = WireClient {
            stream,
            server,
            framing: Framing::V1,
            inbuf: Vec::with_capacity(4096),
            rank: 0,
            size: 1,
            job_id: String::new(),
            max_key: 64,
            max_value: 1024,
        };
        client.handshake(choice, hints)?;
        Ok(client)
    }

    fn send(&mut self, during: &str, cmd: &Command) -> Result<(), PmiError> {
        let bytes = self.framing.encode(cmd).map_err(PmiError::Encode)?;
        if self.framing == Framing::V1 && bytes.len() > PMI1_MAX_LINE {
            let longest = cmd
                .pairs
                .iter()
                .max_by_key(|(_, v)| v.len())
                .map(|(k, _)| k.clone())
                .unwrap_or_else(|| cmd.name.clone());
            return Err(PmiError::Encode(EncodeError {
                key: longest,
                reason: "makes the PMI-1 request longer than the 1024 bytes a PMI-1 server \
                         reads at once (Slurm's pmi2 plugin mangles longer lines); use a \
                         shorter value, or PMI-2 (KESTREL_PMI=pmi2)",
            }));
        }
        self.stream
            .write_all(&bytes)
            .map_err(|e| self.io(during, e))
    }

    fn io(&self, during: &str, source: io::Error) -> PmiError {
        PmiError::Io {
            during: during.into(),
            server: self.server.clone(),
            source,
        }
    }

    fn recv(&mut self, during: &str) -> Result<Command, PmiError> {
        loop {
            match self.framing.decode(&self.inbuf) {
                Ok(Some((cmd, used))) => {
                    self.inbuf.drain(..used);
                    return Ok(cmd);
                }
                Ok(None) => {}
                Err(source) => {
                    return Err(PmiError::Wire {
                        during: during.into(),
                        source,
                    })
                }
            }
            let mut chunk = [0u8; 4096];
            let n = loop {
                match self.stream.read(&mut chunk) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(self.io(during, e)),
                }
            };
            if n == 0 {
                let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed");
                return Err(self.io(during, eof));
            }
            self.inbuf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends `cmd` and reads the reply, which must be named `expect` and carry rc=0.
    fn call(&mut self, during: &str, cmd: Command, expect: &str) -> Result<Command, PmiError> {
        self.send(during, &cmd)?;
        let reply = self.recv(during)?;
        if reply.name != expect {
            return Err(PmiError::Protocol {
                during: during.into(),
                expected: expect.into(),
                got: reply.to_string(),
            });
        }
        let rc = reply.rc().map_err(|source| PmiError::Wire {
            during: during.into(),
            source,
        })?;
        if rc != 0 {
            return Err(PmiError::Server {
                during: during.into(),
                rc,
                msg: reply
                    .get("msg")
                    .or_else(|| reply.get("errmsg"))
                    .unwrap_or("")
                    .into(),
            });
        }
        Ok(reply)
    }

    fn field<'a>(&self, during: &str, reply: &'a Command, key: &str) -> Result<&'a str, PmiError> {
        reply.require(key).map_err(|source| PmiError::Wire {
            during: during.into(),
            source,
        })
    }

    fn num<T: std::str::FromStr>(
        &self,
        during: &str,
        reply: &Command,
        key: &str,
    ) -> Result<T, PmiError> {
        let text = self.field(during, reply, key)?;
        text.trim().parse().map_err(|_| PmiError::Wire {
            during: during.into(),
            source: WireError {
                text: reply.to_string(),
                reason: format!("'{key}={text}' is not a number"),
            },
        })
    }

    fn handshake(&mut self, choice: PmiChoice, hints: LaunchHints) -> Result<(), PmiError> {
        let mut port_rank = hints.rank;
        let mut port_size = hints.size;
        if let Some(id) = &hints.pmi_id {
            if choice != PmiChoice::Pmi2 {
                // PMI_PORT servers identify the client first and push size and rank.
                self.call(
                    "initack",
                    Command::new("initack").with("pmiid", id.as_str()),
                    "initack",
                )?;
                for _ in 0..3 {
                    let set = self.recv("initack")?;
                    match set.pairs.first() {
                        Some((k, v)) if k == "size" => port_size = v.parse().ok(),
                        Some((k, v)) if k == "rank" => port_rank = v.parse().ok(),
                        _ => {}
                    }
                }
            }
        }
        let want_v2 = matches!(choice, PmiChoice::Pmi2 | PmiChoice::Auto);
        let version = if want_v2 { "2" } else { "1" };
        let sub = if want_v2 { "0" } else { "1" };
        let init = Command::new("init")
            .with("pmi_version", version)
            .with("pmi_subversion", sub);
        self.send("init", &init)?;
        let reply = self.recv("init")?;
        if reply.name != "response_to_init" {
            return Err(PmiError::Protocol {
                during: "init".into(),
                expected: "response_to_init".into(),
                got: reply.to_string(),
            });
        }
        let rc = reply.rc().unwrap_or(-1);
        let server_version = reply.get("pmi_version").unwrap_or("1");
        let use_v2 = want_v2 && rc == 0 && server_version == "2";
        if choice == PmiChoice::Pmi2 && !use_v2 {
            return Err(PmiError::Server {
                during: "init".into(),
                rc,
                msg: format!(
                    "the server does not speak PMI-2 (it answered pmi_version={server_version}); \
                     set KESTREL_PMI=pmi1 or auto"
                ),
            });
        }
        if use_v2 {
            self.framing = Framing::V2;
            self.init_v2(hints)
        } else {
            if rc != 0 || server_version != "1" {
                // The server refused version 2; ask again for version 1 in the same session.
                self.call(
                    "init",
                    Command::new("init")
                        .with("pmi_version", "1")
                        .with("pmi_subversion", "1"),
                    "response_to_init",
                )?;
            }
            self.init_v1(port_rank, port_size)
        }
    }

    fn init_v1(
        &mut self,
        known_rank: Option<u32>,
        known_size: Option<u32>,
    ) -> Result<(), PmiError> {
        let maxes = self.call("get_maxes", Command::new("get_maxes"), "maxes")?;
        self.max_key = self.num("get_maxes", &maxes, "keylen_max")?;
        self.max_value = self.num("get_maxes", &maxes, "vallen_max")?;
        let kvs = self.call(
            "get_my_kvsname",
            Command::new("get_my_kvsname"),
            "my_kvsname",
        )?;
        self.job_id = self.field("get_my_kvsname", &kvs, "kvsname")?.to_string();
        // The largest put must fit in one request line together with the command, the KVS
        // name and the longest key.
        let put_overhead =
            "cmd=put kvsname= key= value=\n".len() + self.job_id.len() + self.max_key;
        self.max_value = self
            .max_value
            .min(PMI1_MAX_LINE.saturating_sub(put_overhead));
        // Rank and size come from the environment (PMI_RANK/PMI_SIZE) or the PMI_PORT initack;
        // old servers also answer get_rank/get_size, which we fall back to.
        self.rank = match known_rank {
            Some(r) => r,
            None => {
                let r = self.call("get_rank", Command::new("get_rank"), "getrank_result")?;
                self.num("get_rank", &r, "rank")?
            }
        };
        self.size = match known_size {
            Some(s) => s,
            None => {
                let s = self.call("get_size", Command::new("get_size"), "getsize_result")?;
                self.num("get_size", &s, "size")?
            }
        };
        Ok(())
    }

    fn init_v2(&mut self, hints: LaunchHints) -> Result<(), PmiError> {
        let mut full = Command::new("fullinit");
        // Slurm's pmi2 plugin refuses a fullinit without `pmijobid` (it hands out PMI_JOBID
        // for this); hydra sets no PMI_JOBID and ignores the key.
        if let Some(job) = &hints.job {
            full = full.with("pmijobid", job.trim());
        }
        // Hydra identifies PMI_PORT clients by `pmirank` even when it handed out PMI_ID, and
        // Slurm requires the key, so send the rank we know (PMI_RANK, else the id) and the id
        // when there is one.
        let rank_hint = hints
            .rank
            .map(|r| r.to_string())
            .or_else(|| hints.pmi_id.clone());
        if let Some(r) = rank_hint {
            full = full.with("pmirank", r);
        }
        if let Some(id) = hints.pmi_id {
            full = full.with("pmiid", id);
        }
        full = full.with("threaded", "FALSE");
        let reply = self.call("fullinit", full, "fullinit-response")?;
        self.rank = self.num("fullinit", &reply, "rank")?;
        self.size = self.num("fullinit", &reply, "size")?;
        let id = self.call("job-getid", Command::new("job-getid"), "job-getid-response")?;
        self.job_id = self.field("job-getid", &id, "jobid")?.to_string();
        self.max_key = 64;
        self.max_value = 1024;
        Ok(())
    }
}

impl PmiClient for WireClient {
    fn kind(&self) -> &'static str {
        match self.framing {
            Framing::V1 => "pmi1",
            Framing::V2 => "pmi2",
        }
    }
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn max_key_len(&self) -> usize {
        self.max_key
    }
    fn max_value_len(&self) -> usize {
        self.max_value
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let during = format!("put {key}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("put")
                    .with("kvsname", self.job_id.clone())
                    .with("key", key)
                    .with("value", value);
                self.call(&during, cmd, "put_result")?;
            }
            Framing::V2 => {
                let cmd = Command::new("kvs-put")
                    .with("key", key)
                    .with("value", value);
                self.call(&during, cmd, "kvs-put-response")?;
            }
        }
        Ok(())
    }

    fn fence(&mut self) -> Result<(), PmiError> {
        match self.framing {
            Framing::V1 => self.call("fence", Command::new("barrier_in"), "barrier_out")?,
            Framing::V2 => self.call("fence", Command::new("kvs-fence"), "kvs-fence-response")?,
        };
        Ok(())
    }

    fn get(&mut self, src: u32, key: &str) -> Result<Option<String>, PmiError> {
        let during = format!("get {key}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("get")
                    .with("kvsname", self.job_id.clone())
                    .with("key", key);
                self.send(&during, &cmd)?;
                let reply = self.recv(&during)?;
                if reply.name != "get_result" {
                    return Err(PmiError::Protocol {
                        during,
                        expected: "get_result".into(),
                        got: reply.to_string(),
                    });
                }
                // PMI-1 reports a missing key as an error code (or found=FALSE).
                if reply.rc().unwrap_or(-1) != 0 || reply.get("found") == Some("FALSE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, "value")?.to_string()))
            }
            Framing::V2 => {
                let cmd = Command::new("kvs-get")
                    .with("jobid", self.job_id.clone())
                    .with("srcid", src.to_string())
                    .with("key", key);
                let reply = self.call(&during, cmd, "kvs-get-response")?;
                if reply.get("found") != Some("TRUE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, "value")?.to_string()))
            }
        }
    }

    fn job_attr(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        match self.framing {
            Framing::V1 => self.get(0, key),
            Framing::V2 => {
                let during = format!("job attribute {key}");
                let cmd = Command::new("info-getjobattr").with("key", key);
                let reply = self.call(&during, cmd, "info-getjobattr-response")?;
                if reply.get("found") != Some("TRUE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, "value")?.to_string()))
            }
        }
    }

    fn abort(&mut self, code: i32, message: &str) -> Result<(), PmiError> {
        // PMI-2 values cannot hold ';' and PMI-1 lines cannot hold newlines.
        let clean: String = message
            .chars()
            .map(|c| match c {
                ';' => ',',
                '\n' => ' ',
                c => c,
            })
            .collect();
        let cmd = match self.framing {
            Framing::V1 => Command::new("abort")
                .with("exitcode", code.to_string())
                .with("message", clean),
            Framing::V2 => Command::new("abort")
                .with("isworld", "TRUE")
                .with("exitcode", code.to_string())
                .with("message", clean),
        };
        self.send("abort", &cmd)?;
        // Give the launcher a moment to act before the caller exits on its own.
        let _ = self.stream.flush();
        std::thread::sleep(Duration::from_millis(50));
        Ok(())
    }

    fn finalize(&mut self) -> Result<(), PmiError> {
        match self.framing {
            Framing::V1 => self.call("finalize", Command::new("finalize"), "finalize_ack")?,
            Framing::V2 => self.call("finalize", Command::new("finalize"), "finalize-response")?,
        };
        Ok(())
    }

    fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        let during = format!("publish_name {service}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("publish_name")
                    .with("service", service)
                    .with("port", port);
                self.call(&during, cmd, "publish_result")?
            }
            Framing::V2 => {
                let cmd = Command::new("name-publish")
                    .with("name", service)
                    .with("port", port);
                self.call(&during, cmd, "name-publish-response")?
            }
        };
        Ok(())
    }

    fn lookup_name(&mut self, service: &str) -> Result<Option<String>, PmiError> {
        let during = format!("lookup_name {service}");
        let (cmd, expect, value) = match self.framing {
            Framing::V1 => (
                Command::new("lookup_name").with("service", service),
                "lookup_result",
                "port",
            ),
            Framing::V2 => (
                Command::new("name-lookup").with("name", service),
                "name-lookup-response",
                "value",
            ),
        };
        match self.call(&during, cmd, expect) {
            Ok(reply) => {
                if reply.get("found") == Some("FALSE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, value)?.to_string()))
            }
            // rc 2: not published (see `name_rc`).
            Err(PmiError::Server { rc: 2, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        let during = format!("unpublish_name {service}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("unpublish_name").with("service", service);
                self.call(&during, cmd, "unpublish_result")?
            }
            Framing::V2 => {
                let cmd = Command::new("name-unpublish").with("name", service);
                self.call(&during, cmd, "name-unpublish-response")?
            }
        };
        Ok(())
    }

    fn spawn(
        &mut self,
        cmds: &[SpawnRequest],
        preput: &[(String, String)],
    ) -> Result<String, PmiError> {
        if self.framing != Framing::V2 {
            return Err(PmiError::Server {
                during: "spawn".into(),
                rc: -1,
                msg: "spawn needs PMI-2; set KESTREL_PMI=auto or pmi2".into(),
            });
        }
        let reply = self.call("spawn", spawn_command(cmds, preput), "spawn-response")?;
        Ok(reply.get("jobid").unwrap_or("").to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{BufRead, BufReader};

    /// A scripted PMI server: for each expected request prefix, the raw reply bytes.
    fn serve(
        script: Vec<(&'static str, Vec<u8>)>,
    ) -> (UnixStream, std::thread::JoinHandle<Vec<String>>) {
        let (client, server) = UnixStream::pair().unwrap();
        let handle = std::thread::spawn(move || {
            let mut seen = Vec::new();
            let mut reader = BufReader::new(server.try_clone().unwrap());
            let mut writer = server;
            for (expect, reply) in script {
                let mut line = String::new();
                if let Some(v2_expect) = expect.strip_prefix("v2:") {
                    let mut len = [0u8; 6];
                    reader.read_exact(&mut len).unwrap();
                    let n: usize = String::from_utf8_lossy(&len).trim().parse().unwrap();
                    let mut body = vec![0u8; n];
                    reader.read_exact(&mut body).unwrap();
                    line = String::from_utf8(body).unwrap();
                    assert!(line.starts_with(v2_expect), "expected {expect}, got {line}");
                } else {
                    reader.read_line(&mut line).unwrap();
                    assert!(line.starts_with(expect), "expected {expect}, got {line}");
                }
                seen.push(line);
                writer.write_all(&reply).unwrap();
            }
            seen
        });
        (client, handle)
    }

    fn v2(body: &str) -> Vec<u8> {
        format!("{:6}{body}", body.len()).into_bytes()
    }

    #[test]
    fn pmi1_session_against_a_scripted_server() {
        let (stream, server) = serve(vec![
            (
                "cmd=init pmi_version=1",
                b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".to_vec(),
            ),
            (
                "cmd=get_maxes",
                b"cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n".to_vec(),
            ),
            (
                "cmd=get_my_kvsname",
                b"cmd=my_kvsname rc=0 kvsname=kvs_7\n".to_vec(),
            ),
            (
                "cmd=put kvsname=kvs_7 key=k value=v",
                b"cmd=put_result rc=0 msg=success\n".to_vec(),
            ),
            ("cmd=barrier_in", b"cmd=barrier_out\n".to_vec()),
            (
                "cmd=get kvsname=kvs_7 key=k",
                b"cmd=get_result rc=0 msg=success value=v\n".to_vec(),
            ),
            (
                "cmd=get kvsname=kvs_7 key=missing",
                b"cmd=get_result rc=-1 msg=key not found\n".to_vec(),
            ),
        ]);
        let mut c = WireClient::over_stream(
            Box::new(stream),
            "test".into(),
            PmiChoice::Pmi1,
            LaunchHints {
                rank: Some(2),
                size: Some(4),
                ..LaunchHints::default()
            },
        )
        .unwrap();
        assert_eq!(
            (c.kind(), c.rank(), c.size(), c.job_id()),
            ("pmi1", 2, 4, "kvs_7")
        );
        // A put of the largest value with the longest key still fits in one 1024-byte line.
        let line = "cmd=put kvsname=kvs_7 key= value=\n".len() + 64 + c.max_value_len();
        assert_eq!(line, PMI1_MAX_LINE);
        // A longer line is refused before it reaches the server (which would mangle it).
        let e = c.put("k", &"x".repeat(PMI1_MAX_LINE)).unwrap_err();
        assert!(
            e.to_string()
                .contains("'value' makes the PMI-1 request longer than the 1024"),
            "{e}"
        );
        c.put("k", "v").unwrap();
        c.fence().unwrap();
        assert_eq!(c.get(0, "k").unwrap().as_deref(), Some("v"));
        assert_eq!(c.get(0, "missing").unwrap(), None);
        server.join().unwrap();
    }

    #[test]
    fn auto_negotiates_pmi2_and_uses_v2_framing() {
        let (stream, server) = serve(vec![
            (
                "cmd=init pmi_version=2",
                b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
            ),
            (
                "v2:cmd=fullinit;pmirank=1;",
                v2("cmd=fullinit-response;rc=0;rank=1;size=3;appnum=0;"),
            ),
            (
                "v2:cmd=job-getid;",
                v2("cmd=job-getid-response;rc=0;jobid=j9;"),
            ),
            (
                "v2:cmd=kvs-get;jobid=j9;srcid=0;key=a;",
                v2("cmd=kvs-get-response;rc=0;found=FALSE;"),
            ),
            (
                "v2:cmd=info-getjobattr;key=PMI_process_mapping;",
                v2("cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,3));"),
            ),
        ]);
        let mut c = WireClient::over_stream(
            Box::new(stream),
            "test".into(),
            PmiChoice::Auto,
            LaunchHints {
                rank: Some(1),
                ..LaunchHints::default()
            },
        )
        .unwrap();
        assert_eq!(
            (c.kind(), c.rank(), c.size(), c.job_id()),
            ("pmi2", 1, 3, "j9")
        );
        assert_eq!(c.get(0, "a").unwrap(), None);
        assert_eq!(
            c.job_attr("PMI_process_mapping").unwrap().as_deref(),
            Some("(vector,(0,1,3))")
        );
        server.join().unwrap();
    }

    #[test]
    fn pmi2_handshake_as_slurms_plugin_wants_it() {
        // Slurm's pmi2 plugin refuses a fullinit without pmijobid, pmirank and threaded, and
        // answers with its own set of keys (appnum=-1, pmi-version...).
        let (stream, server) = serve(vec![
            (
                "cmd=init pmi_version=2 pmi_subversion=0",
                b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
            ),
            (
                "v2:cmd=fullinit;pmijobid=12.0;pmirank=1;threaded=FALSE;",
                v2(
                    "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;\
                    appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
                ),
            ),
            (
                "v2:cmd=job-getid;",
                v2("cmd=job-getid-response;rc=0;jobid=12.0;"),
            ),
            ("v2:cmd=kvs-fence;", v2("cmd=kvs-fence-response;rc=0;")),
            ("v2:cmd=finalize;", v2("cmd=finalize-response;rc=0;")),
        ]);
        let mut c = WireClient::over_stream(
            Box::new(stream),
            "test".into(),
            PmiChoice::Auto,
            LaunchHints {
                rank: Some(1),
                size: Some(2),
                job: Some("12.0".into()),
                ..LaunchHints::default()
            },
        )
        .unwrap();
        assert_eq!(
            (c.kind(), c.rank(), c.size(), c.job_id()),
            ("pmi2", 1, 2, "12.0")
        );
        c.fence().unwrap();
        c.finalize().unwrap();
        server.join().unwrap();
    }

    #[test]
    fn spawn_requests_round_trip_and_malformed_ones_are_refused() {
        let cmds = vec![
            SpawnRequest {
                program: "/bin/a".into(),
                args: vec!["x".into(), "y z".into()],
                procs: 2,
                info: vec![("wdir".into(), "/tmp".into()), ("env".into(), "A=1".into())],
            },
            SpawnRequest {
                program: "b".into(),
                args: vec![],
                procs: 1,
                info: vec![],
            },
        ];
        let preput = vec![("PARENT_ROOT_PORT_NAME".to_string(), "p".to_string())];
        let cmd = spawn_command(&cmds, &preput);
        // Through the PMI-2 wire and back.
        let bytes = Framing::V2.encode(&cmd).unwrap();
        let (decoded, _) = Framing::V2.decode(&bytes).unwrap().unwrap();
        assert_eq!(parse_spawn_command(&decoded).unwrap(), (cmds, preput));
        let cut = |n: usize| Command {
            name: "spawn".into(),
            pairs: cmd.pairs[..n].to_vec(),
        };
        for n in 0..cmd.pairs.len() {
            assert!(parse_spawn_command(&cut(n)).is_err(), "cut at {n}");
        }
        let mut extra = cmd.clone();
        extra.pairs.push(("junk".into(), "1".into()));
        assert!(parse_spawn_command(&extra)
            .unwrap_err()
            .contains("unexpected 'junk'"));
        let huge = Command::new("spawn")
            .with("ncmds", "99999999")
            .with("preputcount", "0");
        assert!(parse_spawn_command(&huge).unwrap_err().contains("ncmds"));
    }

    #[test]
    fn pmi2_name_service_and_spawn_against_a_scripted_server() {
        let (stream, server) =
            serve(vec![
            (
                "cmd=init pmi_version=2",
                b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
            ),
            (
                "v2:cmd=fullinit;",
                v2("cmd=fullinit-response;rc=0;rank=0;size=1;appnum=0;"),
            ),
            ("v2:cmd=job-getid;", v2("cmd=job-getid-response;rc=0;jobid=j;")),
            (
                "v2:cmd=name-publish;name=svc;port=kestrel-port:v1:127.0.0.1:5:1;",
                v2("cmd=name-publish-response;rc=0;"),
            ),
            (
                "v2:cmd=name-lookup;name=svc;",
                v2("cmd=name-lookup-response;rc=0;found=TRUE;value=P;"),
            ),
            (
                "v2:cmd=name-lookup;name=nope;",
                v2("cmd=name-lookup-response;rc=2;msg=nothing published;"),
            ),
            (
                "v2:cmd=name-publish;name=svc;",
                v2("cmd=name-publish-response;rc=1;msg=already published;"),
            ),
            (
                "v2:cmd=name-unpublish;name=svc;",
                v2("cmd=name-unpublish-response;rc=0;"),
            ),
            (
                "v2:cmd=spawn;ncmds=1;preputcount=0;subcmd=prog;maxprocs=3;argc=0;infokeycount=0;",
                v2("cmd=spawn-response;rc=0;jobid=child1;"),
            ),
        ]);
        let mut c = WireClient::over_stream(
            Box::new(stream),
            "test".into(),
            PmiChoice::Pmi2,
            LaunchHints {
                rank: Some(0),
                ..LaunchHints::default()
            },
        )
        .unwrap();
        c.publish_name("svc", "kestrel-port:v1:127.0.0.1:5:1")
            .unwrap();
        assert_eq!(c.lookup_name("svc").unwrap().as_deref(), Some("P"));
        assert_eq!(c.lookup_name("nope").unwrap(), None);
        let e = c.publish_name("svc", "x").unwrap_err();
        assert!(matches!(e, PmiError::Server { rc: 1, .. }), "{e}");
        c.unpublish_name("svc").unwrap();
        let job = c
            .spawn(
                &[SpawnRequest {
                    program: "prog".into(),
                    args: vec![],
                    procs: 3,
                    info: vec![],
                }],
                &[],
            )
            .unwrap();
        assert_eq!(job, "child1");
        server.join().unwrap();
    }

    #[test]
    fn a_refusal_without_message_still_reads_as_a_sentence() {
        let (stream, server) = serve(vec![
            (
                "cmd=init pmi_version=2",
                b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
            ),
            (
                "v2:cmd=fullinit;",
                v2("cmd=fullinit-response;rc=3;rank=0;size=2;"),
            ),
        ]);
        let e = WireClient::over_stream(
            Box::new(stream),
            "x".into(),
            PmiChoice::Pmi2,
            LaunchHints::default(),
        )
        .unwrap_err();
        let text = e.to_string();
        assert!(
            text.contains("fullinit refused by the launcher (rc=3, no message;"),
            "{text}"
        );
        server.join().unwrap();
    }

    #[test]
    fn auto_falls_back_to_pmi1_when_the_server_refuses_version_2() {
        let (stream, server) = serve(vec![
            (
                "cmd=init pmi_version=2",
                b"cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1\n".to_vec(),
            ),
            (
                "cmd=init pmi_version=1",
                b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n".to_vec(),
            ),
            (
                "cmd=get_maxes",
                b"cmd=maxes rc=0 kvsname_max=256 keylen_max=32 vallen_max=512\n".to_vec(),
            ),
            (
                "cmd=get_my_kvsname",
                b"cmd=my_kvsname rc=0 kvsname=k\n".to_vec(),
            ),
        ]);
        let c = WireClient::over_stream(
            Box::new(stream),
            "test".into(),
            PmiChoice::Auto,
            LaunchHints {
                rank: Some(0),
                size: Some(1),
                ..LaunchHints::default()
            },
        )
        .unwrap();
        assert_eq!(
            (c.kind(), c.max_key_len(), c.max_value_len()),
            ("pmi1", 32, 512)
        );
        server.join().unwrap();
    }

    #[test]
    fn malformed_server_lines_are_errors_naming_the_line() {
        let (stream, server) = serve(vec![("cmd=init", b"hello there\n".to_vec())]);
        let e = WireClient::over_stream(
            Box::new(stream),
            "PMI_FD=9".into(),
            PmiChoice::Pmi1,
            LaunchHints::default(),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'hello there'") && msg.contains("during init"),
            "{msg}"
        );
        server.join().unwrap();

        let (stream, server) = serve(vec![
            (
                "cmd=init",
                b"cmd=response_to_init pmi_version=1 rc=0\n".to_vec(),
            ),
            (
                "cmd=get_maxes",
                b"cmd=maxes rc=0 keylen_max=sixty vallen_max=1024\n".to_vec(),
            ),
        ]);
        let e = WireClient::over_stream(
            Box::new(stream),
            "PMI_FD=9".into(),
            PmiChoice::Pmi1,
            LaunchHints::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("keylen_max=sixty"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn a_vanishing_server_is_an_io_error_naming_the_step_and_server() {
        let (stream, server) = serve(vec![]);
        server.join().unwrap();
        let e = WireClient::over_stream(
            Box::new(stream),
            "PMI_FD=9".into(),
            PmiChoice::Pmi1,
            LaunchHints::default(),
        )
        .unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("init failed") && msg.contains("PMI_FD=9"),
            "{msg}"
        );
    }

    #[test]
    fn forcing_pmi2_on_a_pmi1_server_says_what_to_do() {
        let (stream, server) = serve(vec![(
            "cmd=init pmi_version=2",
            b"cmd=response_to_init rc=-1 pmi_version=1\n".to_vec(),
        )]);
        let e = WireClient::over_stream(
            Box::new(stream),
            "x".into(),
            PmiChoice::Pmi2,
            LaunchHints::default(),
        )
        .unwrap_err();
        assert!(e.to_string().contains("KESTREL_PMI=pmi1"), "{e}");
        server.join().unwrap();
    }

    #[test]
    fn no_launcher_means_singleton_unless_a_client_is_forced() {
        let c = connect(PmiChoice::Auto, &|_| None).unwrap();
        assert_eq!((c.kind(), c.rank(), c.size()), ("singleton", 0, 1));
        let e = connect(PmiChoice::Pmi2, &|_| None).err().unwrap();
        assert!(e.to_string().contains("neither PMI_FD nor PMI_PORT"), "{e}");
        let e = connect(PmiChoice::Auto, &|v| {
            (v == "PMI_FD").then(|| "abc".to_string())
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("PMI_FD='abc'"), "{e}");
        let e = connect(PmiChoice::Auto, &|v| {
            (v == "PMI_FD").then(|| "987".to_string())
        })
        .err()
        .unwrap();
        assert!(e.to_string().contains("not open"), "{e}");
    }

    #[test]
    fn several_srun_tasks_without_pmi_fail_instead_of_running_alone() {
        let srun = |var: &str| {
            match var {
                "SLURM_JOB_ID" => Some("12"),
                "SLURM_STEP_ID" => Some("0"),
                "SLURM_PROCID" => Some("0"),
                "SLURM_STEP_NUM_TASKS" => Some("2"),
                "SLURM_MPI_TYPE" => Some("none"),
                _ => None,
            }
            .map(String::from)
        };
        let e = connect(PmiChoice::Auto, &srun).err().unwrap();
        assert!(matches!(e, PmiError::SrunWithoutPmi { .. }), "{e:?}");
        let text = e.to_string();
        assert!(
            text.contains("srun --mpi=pmi2 -n 2 ") && text.contains("Slurm step 12.0"),
            "{text}"
        );
        // Forcing the singleton is the way out for tasks that are meant to run alone.
        let c = connect(PmiChoice::Singleton, &srun).unwrap();
        assert_eq!(c.kind(), "singleton");
        // One task of a step is a genuine singleton.
        let one = |var: &str| {
            if var == "SLURM_STEP_NUM_TASKS" {
                Some("1".to_string())
            } else {
                srun(var)
            }
        };
        assert_eq!(connect(PmiChoice::Auto, &one).unwrap().kind(), "singleton");
    }
}
