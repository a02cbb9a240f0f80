//! What the engine knows of processes beyond its own job's ranks: their identities and
//! process indices, which of them are gone and why, the connections that brought them, and
//! the lifelines that tell when one dies. Owns that bookkeeping; it must never talk to a
//! process (the connect/accept protocol in `crate::dpm` does).

use std::collections::HashMap;

use kestrel_runtime::dpm::{Lifelines, Listener};

/// A process that left: failed (without a goodbye) or departed (disconnected, finalized).
#[derive(Debug, Clone)]
pub(crate) struct Gone {
    pub(crate) failed: bool,
    pub(crate) why: String,
}

/// Transports and lifelines one connection added, to be released when no communicator uses
/// its processes any more.
#[derive(Debug)]
pub(crate) struct Connection {
    pub(crate) id: u64,
    /// Processes (indices) the connection introduced.
    pub(crate) procs: Vec<u32>,
    /// Slots in the engine's transport list it added.
    pub(crate) btls: Vec<usize>,
}

/// The engine's dynamic-process state.
#[derive(Debug)]
pub struct DpmState {
    /// This job's id.
    pub(crate) job: String,
    /// This job's size (processes below it are this job's ranks).
    pub(crate) job_size: u32,
    pub(crate) listener: Option<Listener>,
    /// Lifelines to processes of other jobs.
    pub(crate) lifelines: Lifelines,
    /// (job, rank) of each process at or above `job_size`.
    pub(crate) foreign: Vec<(String, u32)>,
    pub(crate) known: HashMap<(String, u32), u32>,
    pub(crate) gone: HashMap<u32, Gone>,
    pub(crate) conns: Vec<Connection>,
}

impl DpmState {
    pub(crate) fn new(job: &str, job_size: u32) -> DpmState {
        DpmState {
            job: job.to_string(),
            job_size,
            listener: None,
            lifelines: Lifelines::new(),
            foreign: Vec::new(),
            known: HashMap::new(),
            gone: HashMap::new(),
            conns: Vec::new(),
        }
    }

    /// The first failed process among `group`, with the reason.
    pub(crate) fn first_failed_in(&self, group: &[u32]) -> Option<(u32, String)> {
        if self.gone.is_empty() {
            return None;
        }
        group.iter().find_map(|p| {
            self.gone
                .get(p)
                .filter(|g| g.failed)
                .map(|g| (*p, g.why.clone()))
        })
    }

    /// Whether connections to other jobs are open.
    pub(crate) fn has_connections(&self) -> bool {
        !self.conns.is_empty()
    }

    /// Why process `p` is gone, if it is.
    pub(crate) fn gone_reason(&self, p: u32) -> Option<&str> {
        self.gone.get(&p).map(|g| g.why.as_str())
    }

    /// (job, rank) of process `p`.
    pub(crate) fn identity(&self, p: u32) -> (String, u32) {
        if p < self.job_size {
            (self.job.clone(), p)
        } else {
            self.foreign
                .get((p - self.job_size) as usize)
                .cloned()
                .unwrap_or_default()
        }
    }

    pub(crate) fn lookup(&self, job: &str, rank: u32) -> Option<u32> {
        if job == self.job {
            return (rank < self.job_size).then_some(rank);
        }
        self.known.get(&(job.to_string(), rank)).copied()
    }
}
