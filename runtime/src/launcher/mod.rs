//! The `kestrel-run` launcher.
//!
//! * [`args`]: the command line.
//! * [`plan`]: where ranks go; [`head`]: starts agents, merges fences, handles failures.
//! * [`agent`]: one host's ranks and their PMI server; [`daemon`] runs it on remote hosts.
//! * [`proto`]: head ↔ agent messages and their checked codec.
//! * [`exit`]: how ranks ended, in words.
//! * [`hang_report`]: each rank's state and wait, gathered on `--timeout` or SIGUSR1.
//! * [`limits`]: what a host can take (processes, descriptors, shared memory) before it forks.

pub mod agent;
pub mod args;
pub mod auth;
pub mod daemon;
pub mod daemon_link;
pub mod exit;
pub mod guard;
pub mod hang_report;
pub mod head;
pub mod limits;
pub mod plan;
pub mod proto;

use std::path::PathBuf;
use std::sync::OnceLock;

use kestrel_transport::params::Params;
use kestrel_transport::ParamSpec;

/// Every parameter the launcher itself reads.
pub fn specs() -> Vec<&'static ParamSpec> {
    let mut s = kestrel_transport::core_params::specs();
    s.extend(crate::params::specs());
    s
}

/// What only the layers above the runtime know, handed in by the `kestrel-run` binary.
pub struct Layers {
    /// Every parameter a rank reads (the launcher's among them): `--mca` names and values are
    /// checked against these before any rank starts.
    pub specs: Vec<&'static ParamSpec>,
    /// The shared-memory directory and the bytes a job of this many ranks takes there on one
    /// host with these parameters; `None` when the job does not use shared memory.
    pub shm_footprint: fn(&Params, u32) -> Option<(PathBuf, u64)>,
}

static LAYERS: OnceLock<Layers> = OnceLock::new();

/// The layers given to [`main`], or the launcher's own view (its parameters, no shared-memory
/// estimate) in a process that did not go through it.
pub(crate) fn layers() -> &'static Layers {
    LAYERS.get_or_init(|| Layers {
        specs: specs(),
        shm_footprint: |_, _| None,
    })
}

/// The entry point of the `kestrel-run` binary: returns the exit code.
pub fn main(argv: Vec<String>, given: Layers) -> i32 {
    let _ = LAYERS.set(given);
    let lookup = |v: &str| std::env::var(v).ok();
    let invocation = match args::parse(argv.get(1..).unwrap_or(&[]), &lookup) {
        Ok(i) => i,
        Err(e) => {
            eprintln!("kestrel-run: {e}");
            return 2;
        }
    };
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("kestrel-run: cannot start the event loop: {e}");
            return 2;
        }
    };
    match invocation {
        args::Invocation::Help => {
            println!("{}", args::USAGE);
            0
        }
        args::Invocation::Version => {
            println!("kestrel-run {}", env!("CARGO_PKG_VERSION"));
            0
        }
        args::Invocation::Guard(opts) => guard::run(opts),
        args::Invocation::Cleanup => {
            let removed = crate::stale::sweep(&[]);
            for path in &removed {
                println!("kestrel-run: removed {}", path.display());
            }
            println!(
                "kestrel-run: {} stale file(s) of dead jobs removed",
                removed.len()
            );
            0
        }
        args::Invocation::Daemon(opts) => {
            let _ = kestrel_transport::logging::init(
                &opts.verbose,
                &format!("kestrel-run daemon {}", opts.host_index),
            );
            runtime.block_on(daemon::run(opts))
        }
        args::Invocation::Launch(opts) => {
            // The launcher's own parameters: environment first, then its --mca values.
            let mca = opts.mca.clone();
            let lookup = |var: &str| {
                for (name, value) in &mca {
                    if kestrel_transport::params::mca_env_var_for(name) == var {
                        return Some(value.clone());
                    }
                }
                std::env::var(var).ok()
            };
            // Every name and value is checked here, before a rank starts, against every
            // layer's parameters: a typo fails in the launcher, not in each rank.
            let names: Vec<String> = mca.iter().map(|(n, _)| n.clone()).collect();
            let params = match Params::resolve(&layers().specs, &lookup, &names) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("kestrel-run: {e}");
                    return 2;
                }
            };
            let verbose = kestrel_transport::core_params::VERBOSE.get(&params);
            if let Err(e) = kestrel_transport::logging::init(&verbose, "kestrel-run") {
                eprintln!("kestrel-run: {e}");
                return 2;
            }
            let argv0 = std::env::current_exe().unwrap_or_else(|_| argv[0].clone().into());
            let code = runtime.block_on(head::run(*opts, params, argv0));
            // Threads copying a terminal to rank 0 may still block in read: do not wait for them.
            runtime.shutdown_timeout(std::time::Duration::from_millis(100));
            code
        }
    }
}
