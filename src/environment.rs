//! The job as one process sees it: [`initialize`] and the [`Universe`] it returns (rsmpi's
//! `mpi::environment`), which gives the world communicator and finalizes the job when
//! dropped.
//!
//! It owns start-up (parameters, logging, runtime, engine, the connection of a spawned job
//! to its parent) and finalization; it never communicates on a user's behalf.

use std::cell::{Cell, RefCell, RefMut};
use std::fmt;
use std::rc::Rc;

use kestrel_pml::engine::{CTX_SELF, CTX_WORLD};

use crate::{
    all_param_specs, components, dpm, Engine, Error, Inner, Params, Runtime, SimpleCommunicator,
};

/// The job as one process sees it. Dropping it finalizes the runtime.
pub struct Universe {
    pub(crate) inner: Rc<Inner>,
    finalized: bool,
}

impl fmt::Debug for Universe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Universe(rank {} of {})", self.rank(), self.size())
    }
}

/// Initializes Kestrel: resolves every parameter (environment and `kestrel-run --mca`),
/// starts logging, connects to the launcher, and starts the transports.
pub fn initialize() -> Result<Universe, Error> {
    Ok(Universe {
        inner: Rc::new(start()?),
        finalized: false,
    })
}

/// Starts the library for this process: parameters, logging, the runtime and the engine
/// (shared by [`initialize`] and [`crate::threads::initialize_multithreaded`]).
pub(crate) fn start() -> Result<Inner, Error> {
    components::prepare_process();
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
    let mut runtime = Runtime::init(&params)?;
    let mut engine =
        Engine::new(&params, &mut runtime, components::registry()).map_err(Error::Messaging)?;
    let node_id = runtime.node_id().to_string();
    // A spawned job connects back to its parent's root before the program runs.
    let parent = match std::env::var(dpm::PARENT_PORT_VAR) {
        Ok(port) if !port.is_empty() => Some(
            engine
                .connect(CTX_WORLD, 0, &port)
                .map_err(Error::Messaging)?,
        ),
        _ => None,
    };
    Ok(Inner {
        engine: RefCell::new(engine),
        runtime: RefCell::new(runtime),
        params,
        node_id,
        parent: Cell::new(parent),
    })
}

/// The same as [`initialize`] (the name the first Kestrel examples used).
pub fn init() -> Result<Universe, Error> {
    initialize()
}

impl Universe {
    /// The communicator of every rank of the job.
    pub fn world(&self) -> SimpleCommunicator {
        SimpleCommunicator::from_context(&self.inner, CTX_WORLD)
    }

    /// A communicator of this rank alone.
    pub fn self_comm(&self) -> SimpleCommunicator {
        SimpleCommunicator::from_context(&self.inner, CTX_SELF)
    }

    /// This process's rank in the world.
    pub fn rank(&self) -> u32 {
        self.inner.engine.borrow().rank()
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.inner.engine.borrow().size()
    }

    /// This process's node id (ranks with the same id share memory).
    pub fn node_id(&self) -> &str {
        &self.inner.node_id
    }

    /// The transports in use (`self,shm`).
    pub fn transports(&self) -> String {
        self.inner.engine.borrow().transports().to_string()
    }

    /// The resolved parameters.
    pub fn params(&self) -> &Params {
        &self.inner.params
    }

    /// The runtime: modex, PMI barrier, allgather, abort.
    pub fn runtime(&self) -> RefMut<'_, Runtime> {
        self.inner.runtime.borrow_mut()
    }

    /// Waits for every rank (through the runtime).
    pub fn barrier(&mut self) -> Result<(), Error> {
        Ok(self.inner.runtime.borrow_mut().barrier()?)
    }

    /// Stops the whole job with `code`, printing `message` from the launcher.
    pub fn abort(&self, code: i32, message: &str) -> ! {
        self.inner.runtime.borrow_mut().abort(code, message)
    }

    /// Finalizes explicitly (dropping the universe does it too, ignoring errors).
    pub fn finalize(mut self) -> Result<(), Error> {
        self.finalized = true;
        self.do_finalize()
    }

    fn do_finalize(&mut self) -> Result<(), Error> {
        let mut rt = self.inner.runtime.borrow_mut();
        self.inner
            .engine
            .borrow_mut()
            .finalize(&mut rt)
            .map_err(Error::Messaging)?;
        Ok(rt.finalize()?)
    }
}

impl Drop for Universe {
    fn drop(&mut self) {
        if !self.finalized {
            self.finalized = true;
            if let Err(e) = self.do_finalize() {
                tracing::warn!(target: "pml", "finalize failed: {e}");
            }
        }
    }
}
