//! Start-up and shut-down: `MPI_Init`, `MPI_Finalize`, thread levels, clocks, versions.
//!
//! This module owns the library's life cycle: resolving Kestrel's parameters, starting
//! logging, connecting to the launcher and starting the engine (as the Rust facade does),
//! creating `MPI_COMM_WORLD` and `MPI_COMM_SELF` (and, in a spawned job, the parent
//! inter-communicator), and tearing it all down in order, telling the tool interface
//! ([`crate::tool`]) the parameters it started with and the counters it ended with. It
//! never runs before `MPI_Init` or after `MPI_Finalize` except for the calls MPI allows
//! then (`MPI_Initialized`, `MPI_Finalized`, `MPI_Get_version`, `MPI_Wtime`).

use std::os::raw::c_int;

use kestrel_pml::engine::{CTX_SELF, CTX_WORLD};
use kestrel_pml::Engine;
use kestrel_runtime::Runtime;

use crate::error::{self, MpiError, MpiResult};
use crate::handle;
use crate::state::{BsendArea, CommRec, Core, Locked, Phase, Slab};

/// `MPI_THREAD_SINGLE`.
pub const THREAD_SINGLE: c_int = 0;
/// `MPI_THREAD_SERIALIZED`.
pub const THREAD_SERIALIZED: c_int = 2;
/// `MPI_THREAD_MULTIPLE`: granted when asked for (the library lock turns shared and blocking
/// calls let other threads in while they wait; see [`kestrel_abi_lock::call_lock`]).
pub const THREAD_MULTIPLE: c_int = 3;

/// The MPI standard version this library implements, but for one-sided communication,
/// MPI-IO and the MPI_T events (as `abi/include/mpi.h` declares).
pub const VERSION: (c_int, c_int) = (4, 0);

/// `MPI_Wtick`: the monotonic clock's resolution.
pub const WTICK: f64 = 1e-9;

/// `MPI_Get_library_version`.
pub fn library_version() -> String {
    format!(
        "Kestrel {} (MPICH ABI, libmpich.so.12; MPI {}.{} subset; transports over shared memory, launcher kestrel-run)",
        env!("CARGO_PKG_VERSION"),
        VERSION.0,
        VERSION.1
    )
}

fn startup(e: impl std::fmt::Display) -> MpiError {
    MpiError::new(error::ERR_OTHER, format!("start-up failed: {e}"))
}

/// `MPI_Init_thread`: returns the thread level provided.
pub fn init(l: &mut Locked, required: c_int) -> MpiResult<c_int> {
    match l.phase() {
        Phase::Before => {}
        Phase::Running(_) => {
            return Err(MpiError::new(
                error::ERR_OTHER,
                "MPI is already initialized; call MPI_Init or MPI_Init_thread once",
            ))
        }
        Phase::After => {
            return Err(MpiError::new(
                error::ERR_OTHER,
                "MPI was finalized and cannot be initialized again",
            ))
        }
    }
    kestrel::components::prepare_process();
    // The environment, with control variables written through MPI_T on top.
    let params = crate::tool::params_for_init(&kestrel::all_param_specs()).map_err(startup)?;
    let label = match std::env::var("PMI_RANK") {
        Ok(r) => format!("kestrel r{r}"),
        Err(_) => "kestrel".to_string(),
    };
    kestrel_transport::logging::init(
        &kestrel_transport::core_params::VERBOSE.get(&params),
        &label,
    )
    .map_err(startup)?;
    let mut runtime = Runtime::init(&params).map_err(startup)?;
    let mut engine =
        Engine::new(&params, &mut runtime, kestrel::components::registry()).map_err(startup)?;
    // A spawned job connects back to its parent's root before the program runs.
    let parent_ctx = crate::dpm::connect_parent(&mut engine)?;
    let me = engine.rank();
    let size = engine.size();
    let mut comms = Slab::default();
    comms.put_at(
        0,
        CommRec {
            ctx: CTX_WORLD,
            rank: me as i32,
            members: (0..size).collect(),
            remote: None,
            name: String::new(),
            errhandler: handle::ERRORS_ARE_FATAL,
            attrs: Vec::new(),
            info: Vec::new(),
            topo: None,
        },
    );
    comms.put_at(
        1,
        CommRec {
            ctx: CTX_SELF,
            rank: 0,
            members: vec![me],
            remote: None,
            name: String::new(),
            errhandler: handle::ERRORS_ARE_FATAL,
            attrs: Vec::new(),
            info: Vec::new(),
            topo: None,
        },
    );
    crate::comm::set_universe_size(size);
    let provided = required.clamp(THREAD_SINGLE, THREAD_MULTIPLE);
    l.set_multithreaded(provided == THREAD_MULTIPLE);
    if provided == THREAD_MULTIPLE {
        // A thread sleeping in poll(2) would hold the engine the other threads wait for.
        engine.forbid_idle_sleep();
    }
    tracing::debug!(target: "abi", rank = me, size, provided, "MPI initialized");
    let mut requests = Slab::default();
    requests.put_at(
        handle::COMPLETED_SEND_SLOT,
        crate::requests::ReqRec::done(handle::COMM_WORLD, 0, crate::mem::St::default()),
    );
    *l.phase() = Phase::Running(Box::new(Core {
        engine,
        runtime,
        comms,
        groups: Slab::default(),
        requests,
        messages: Slab::default(),
        ops: Slab::default(),
        errhandlers: Slab::default(),
        keyvals: Slab::default(),
        infos: Slab::default(),
        bsend: BsendArea::default(),
        detached: Vec::new(),
        thread_level: provided,
        main_thread: std::thread::current().id(),
        parent: handle::COMM_NULL,
        sessions: Slab::default(),
        wins: Slab::default(),
        deferred_frees: Vec::new(),
        grequests: 0,
        creations: Default::default(),
    }));
    if let Some(ctx) = parent_ctx {
        let core = l.core()?;
        core.parent = core.new_comm(ctx, handle::ERRORS_ARE_FATAL)?;
    }
    if async_progress_requested(&params) {
        let us = kestrel_pml::params::ASYNC_PROGRESS_INTERVAL_US.get(&params);
        let interval = std::time::Duration::from_micros(us.max(0) as u64);
        crate::progress_thread::start(l, interval, provided == THREAD_MULTIPLE);
    }
    crate::tool::library_started(params);
    Ok(provided)
}

/// Whether the progress thread runs: `async_progress`, or, while that is at its default,
/// MPICH's `MPIR_CVAR_ASYNC_PROGRESS`, so that a job set up for MPICH keeps its setting.
fn async_progress_requested(params: &kestrel_transport::params::Params) -> bool {
    use kestrel_transport::params::Source;
    let set = params
        .get(kestrel_pml::params::ASYNC_PROGRESS.spec().name)
        .is_some_and(|r| r.source != Source::Default);
    if set {
        return kestrel_pml::params::ASYNC_PROGRESS.get(params);
    }
    std::env::var("MPIR_CVAR_ASYNC_PROGRESS").is_ok_and(|v| {
        matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "1" | "true" | "yes" | "on"
        )
    })
}

/// `MPI_Finalize`: deletes `MPI_COMM_SELF`'s attributes (their delete functions run first,
/// as MPI specifies), lets buffered sends finish, then stops the engine and the runtime.
pub fn finalize(l: &mut Locked) -> MpiResult<()> {
    let self_attrs = l.core()?.comm(handle::COMM_SELF)?.attrs.clone();
    for (kv, _) in self_attrs.into_iter().rev() {
        crate::comm::delete_attr(l, handle::COMM_SELF, kv)?;
    }
    // The progress thread must not poll an engine that is shutting down.
    crate::progress_thread::stop();
    let core = l.core()?;
    let mut idle = 0u32;
    while !core.bsend.pending.is_empty() {
        let Core { bsend, engine, .. } = &mut *core;
        bsend
            .pending
            .retain(|&(id, _, _)| engine.try_complete(id).is_none());
        core.engine.idle_step(&mut idle);
    }
    core.reap_detached();
    crate::tool::library_finalized(core.engine.counters());
    let Phase::Running(mut core) = std::mem::replace(l.phase(), Phase::After) else {
        unreachable!("checked by l.core() above");
    };
    // Any thread may ask MPI_Finalized from now on.
    l.set_multithreaded(true);
    let Core {
        engine, runtime, ..
    } = &mut *core;
    engine
        .finalize(runtime)
        .map_err(|e| MpiError::new(error::ERR_OTHER, format!("shut-down failed: {e}")))?;
    runtime
        .finalize()
        .map_err(|e| MpiError::new(error::ERR_OTHER, format!("shut-down failed: {e}")))?;
    tracing::debug!(target: "abi", "MPI finalized");
    Ok(())
}
