//! PMI clients: how a rank talks to whoever launched it.
//!
//! [`connect`] picks the client from the environment: `PMI_FD` (an inherited socket, as hydra,
//! Slurm's pmi2 plugin and `kestrel-run` provide) or `PMI_PORT` (+ `PMI_ID`, a TCP address),
//! with the wire version chosen by the `pmi` parameter; with neither variable the process is a
//! singleton of size 1, except when it is one of several tasks `srun` started without a PMI
//! plugin, which is an error that shows the command that works. Clients are synchronous: PMI is
//! used at start-up and teardown only. This module must never guess a rank or size that the
//! launcher did not give: a wrong guess makes jobs of N rank-0s.
//!
//! The pieces:
//! * this module: the [`PmiClient`] contract, its errors, and [`connect`], which picks a client;
//! * `singleton`: a process without a launcher ([`Singleton`]);
//! * `wire_client`: the PMI-1/PMI-2 client's connection (framing, request and reply);
//! * `handshake`: how that client agrees on a wire version and learns rank, size and job;
//! * `operations`: what each [`PmiClient`] operation sends in either framing.
//!
//! [`SpawnRequest`] and its codec live in [`crate::spawn_request`], shared with the launcher.

mod handshake;
mod operations;
mod singleton;
mod wire_client;

use std::fmt;
use std::io;
use std::net::TcpStream;
use std::os::unix::net::UnixStream;

pub use crate::spawn_request::{parse_spawn_command, spawn_command, SpawnRequest};
use crate::wire::{EncodeError, WireError};
pub use singleton::Singleton;
pub use wire_client::WireClient;
use wire_client::{LaunchHints, Stream};

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

#[cfg(test)]
mod tests;
