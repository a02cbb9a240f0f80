//! Why [`initialize`](crate::initialize) failed ([`Error`]).
//!
//! It owns the error type of start-up and its messages; errors of communication are fatal
//! (MPI's default error handler) and never pass through it.

use std::fmt;

use kestrel_runtime::RuntimeError;
use kestrel_transport::params::ParamError;

/// Why [`initialize`](crate::initialize) failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A parameter has a bad value or name.
    Param(ParamError),
    /// The verbosity filter is malformed.
    Logging(kestrel_transport::logging::FilterError),
    /// The runtime (PMI, modex) failed.
    Runtime(RuntimeError),
    /// The messaging layer or a transport could not start.
    Messaging(kestrel_pml::PmlError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Param(e) => write!(f, "{e}"),
            Error::Logging(e) => write!(f, "{e}"),
            Error::Runtime(e) => write!(f, "{e}"),
            Error::Messaging(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for Error {}

impl From<ParamError> for Error {
    fn from(e: ParamError) -> Self {
        Error::Param(e)
    }
}

impl From<RuntimeError> for Error {
    fn from(e: RuntimeError) -> Self {
        Error::Runtime(e)
    }
}
