//! Kestrel: an MPI-style messaging stack.
//!
//! This facade is the public Rust API. A program calls [`init`] once; the returned
//! [`Universe`] knows the process's rank, the job's size and which ranks share its node, and
//! finalizes the job's runtime when dropped.
//!
//! ```no_run
//! let universe = kestrel::init().unwrap_or_else(|e| kestrel::exit_with(&e));
//! println!("Hello from rank {} of {} on {}", universe.rank(), universe.size(), universe.node_id());
//! ```
//!
//! Start programs with `kestrel-run -n N program`, MPICH's `mpiexec`, or `srun --mpi=pmi2`; run
//! alone they are a job of one rank.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::fmt;

pub use kestrel_runtime::{Runtime, RuntimeError};
pub use kestrel_transport::params::{ParamError, ParamSpec, Params};
pub use kestrel_transport::Selection;

/// Every registered parameter of every layer, in layer order.
pub fn all_param_specs() -> Vec<&'static ParamSpec> {
    let mut specs = kestrel_transport::core_params::specs();
    specs.extend(kestrel_runtime::params::specs());
    specs
}

/// Why [`init`] failed.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// A parameter has a bad value or name.
    Param(ParamError),
    /// The verbosity filter is malformed.
    Logging(kestrel_transport::logging::FilterError),
    /// The runtime (PMI, modex) failed.
    Runtime(RuntimeError),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Param(e) => write!(f, "{e}"),
            Error::Logging(e) => write!(f, "{e}"),
            Error::Runtime(e) => write!(f, "{e}"),
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

/// Prints `kestrel: <error>` to stderr and exits with status 1: the usual reaction of a
/// program whose [`init`] failed.
pub fn exit_with(e: &Error) -> ! {
    eprintln!("kestrel: {e}");
    std::process::exit(1)
}

/// The job as one process sees it. Dropping it finalizes the runtime.
#[derive(Debug)]
pub struct Universe {
    params: Params,
    runtime: Runtime,
    finalized: bool,
}

/// Initializes Kestrel: resolves every parameter (environment and `kestrel-run --mca`),
/// starts logging, connects to the launcher, and selects the transports.
pub fn init() -> Result<Universe, Error> {
    let params = Params::from_env(&all_param_specs())?;
    let label = match std::env::var("PMI_RANK") {
        Ok(r) => format!("kestrel r{r}"),
        Err(_) => "kestrel".to_string(),
    };
    kestrel_transport::logging::init(
        &kestrel_transport::core_params::VERBOSE.get(&params),
        &label,
    )
    .map_err(Error::Logging)?;
    let btls = kestrel_transport::core_params::BTL.get(&params);
    tracing::debug!(target: "btl", selected = ?btls.ordered(kestrel_transport::core_params::KNOWN_BTLS), "transport selection");
    let runtime = Runtime::init(&params)?;
    Ok(Universe {
        params,
        runtime,
        finalized: false,
    })
}

impl Universe {
    /// This process's rank.
    pub fn rank(&self) -> u32 {
        self.runtime.rank()
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.runtime.size()
    }

    /// This process's node id (ranks with the same id share memory).
    pub fn node_id(&self) -> &str {
        self.runtime.node_id()
    }

    /// The resolved parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// The runtime: modex, barrier, allgather, abort.
    pub fn runtime(&mut self) -> &mut Runtime {
        &mut self.runtime
    }

    /// Waits for every rank.
    pub fn barrier(&mut self) -> Result<(), Error> {
        Ok(self.runtime.barrier()?)
    }

    /// Stops the whole job with `code`, printing `message` from the launcher.
    pub fn abort(&mut self, code: i32, message: &str) -> ! {
        self.runtime.abort(code, message)
    }

    /// Finalizes explicitly (dropping the universe does it too, ignoring errors).
    pub fn finalize(mut self) -> Result<(), Error> {
        self.finalized = true;
        Ok(self.runtime.finalize()?)
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if !self.finalized {
            self.finalized = true;
            if let Err(e) = self.runtime.finalize() {
                tracing::warn!(target: "pmi", "finalize failed: {e}");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_layer_registers_well_formed_unique_parameters() {
        kestrel_transport::params::check_specs(&super::all_param_specs()).unwrap();
    }
}
