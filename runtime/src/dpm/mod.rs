//! Dynamic processes, the runtime side: port names, the out-of-band listener and messages that
//! connect two jobs, lifelines that report a connected process's death, and the name service.
//!
//! * [`port`]: the port-name format and its strict parser.
//! * [`oob`]: the out-of-band messages of connect/accept and their checked codec.
//! * [`listener`]: a process's TCP listener behind its ports and lifelines.
//! * [`lifeline`]: the watcher that turns a closed lifeline into a failure event.
//! * [`names`]: the file registry behind `publish_name` and `lookup_name`.
//!
//! This module never touches a transport: what the messaging layer exchanges through it
//! (business cards) is opaque bytes here. The collective connect/accept protocol that uses
//! these pieces lives in the messaging layer (`kestrel-pml`, module `dpm`).

pub mod lifeline;
pub mod listener;
pub mod names;
pub mod oob;
pub mod port;

use std::fmt;

pub use lifeline::{LifelineEvent, Lifelines};
pub use listener::{Listener, PortEvent};
pub use names::{NameError, NameRegistry};
pub use oob::{OobMsg, ProcInfo};
pub use port::{PortError, PortName, PortRole};

/// Why a dynamic-process operation failed. Each variant maps to an MPI error class in the C
/// ABI (see [`DpmError::mpi_class`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DpmError {
    /// A malformed port name.
    Port(PortError),
    /// A name-service operation failed.
    Name(NameError),
    /// Nothing answered at the port's addresses before the timeout.
    Unreachable {
        /// The port.
        port: String,
        /// The timeout that expired (milliseconds, `dpm_connect_timeout_ms`).
        timeout_ms: u64,
        /// The last socket error.
        last: String,
    },
    /// The port's process refused (the port is closed, or the accepting side failed).
    Refused {
        /// The port.
        port: String,
        /// Its reason.
        reason: String,
    },
    /// The connection was queued but nobody accepted it before the timeout.
    NotAccepted {
        /// The port.
        port: String,
        /// The timeout that expired (milliseconds).
        timeout_ms: u64,
    },
    /// The peer broke the connect/accept protocol (or the connection dropped in the middle).
    Protocol {
        /// Who (a port or an address).
        peer: String,
        /// What happened.
        what: String,
    },
    /// The spawned job could not be started or ended before it connected.
    Spawn(String),
    /// A process of the other side failed.
    ProcFailed(String),
    /// Setting up the transports or lifelines of a connection failed on some process.
    Setup(String),
    /// The launcher refused or failed a request.
    Pmi(String),
    /// The messaging layer failed under a dynamic-process operation.
    Messaging(String),
    /// An error another process reported: the root of a collective connect, accept or spawn
    /// (to the other members), or the launcher (name service).
    Reported {
        /// The error class the root saw.
        class: MpiClass,
        /// The root's message.
        message: String,
    },
}

/// MPI error classes the C ABI maps [`DpmError`] to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MpiClass {
    /// `MPI_ERR_PORT`.
    Port,
    /// `MPI_ERR_NAME`.
    Name,
    /// `MPI_ERR_SERVICE`.
    Service,
    /// `MPI_ERR_SPAWN`.
    Spawn,
    /// `MPI_ERR_PROC_FAILED` (ULFM; MPICH's `MPIX_ERR_PROC_FAILED`, 101, in the C ABI).
    ProcFailed,
    /// `MPI_ERR_OTHER`.
    Other,
}

impl DpmError {
    /// The MPI error class of this error.
    pub fn mpi_class(&self) -> MpiClass {
        match self {
            DpmError::Port(_)
            | DpmError::Unreachable { .. }
            | DpmError::Refused { .. }
            | DpmError::NotAccepted { .. } => MpiClass::Port,
            DpmError::Name(NameError::NotPublished { .. }) => MpiClass::Name,
            DpmError::Name(_) => MpiClass::Service,
            DpmError::Spawn(_) => MpiClass::Spawn,
            DpmError::ProcFailed(_) => MpiClass::ProcFailed,
            DpmError::Protocol { .. }
            | DpmError::Setup(_)
            | DpmError::Pmi(_)
            | DpmError::Messaging(_) => MpiClass::Other,
            DpmError::Reported { class, .. } => *class,
        }
    }
}

impl fmt::Display for DpmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DpmError::Port(e) => write!(f, "{e}"),
            DpmError::Name(e) => write!(f, "{e}"),
            DpmError::Unreachable {
                port,
                timeout_ms,
                last,
            } => write!(
                f,
                "dpm: cannot reach port {port} within {timeout_ms} ms (dpm_connect_timeout_ms; \
                 last error: {last}); is the process that opened it still running, and is TCP \
                 open between the hosts?"
            ),
            DpmError::Refused { port, reason } => {
                write!(f, "dpm: port {port} refused the connection: {reason}")
            }
            DpmError::NotAccepted { port, timeout_ms } => write!(
                f,
                "dpm: port {port} took the connection but did not accept it within {timeout_ms} \
                 ms (dpm_connect_timeout_ms); does the server call accept on it?"
            ),
            DpmError::Protocol { peer, what } => {
                write!(f, "dpm: connect/accept with {peer} failed: {what}")
            }
            DpmError::Spawn(m) => write!(f, "dpm: spawn failed: {m}"),
            DpmError::ProcFailed(m) => write!(f, "dpm: {m}"),
            DpmError::Setup(m) => write!(f, "dpm: setting up the connection failed: {m}"),
            DpmError::Pmi(m) => write!(f, "dpm: {m}"),
            DpmError::Messaging(m) => write!(f, "{m}"),
            DpmError::Reported { message, .. } => write!(f, "{message}"),
        }
    }
}

impl std::error::Error for DpmError {}

impl From<PortError> for DpmError {
    fn from(e: PortError) -> Self {
        DpmError::Port(e)
    }
}

impl From<NameError> for DpmError {
    fn from(e: NameError) -> Self {
        DpmError::Name(e)
    }
}
