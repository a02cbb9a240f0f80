//! The node agent: starts one host's ranks, serves them PMI, and relays to the head.
//!
//! The same code runs inside `kestrel-run` for the launcher's own host and inside
//! `kestrel-run --daemon` on every other host. It answers node-local PMI queries itself (init,
//! maxes, names, gets after a fence, node attributes), combines the fence of all its ranks into
//! one [`ToHead::Fence`] carrying their puts, and caches the merged key space the head sends
//! back, so a job of N hosts costs N messages per fence, not one per rank.
//!
//! Each rank runs in its own process group, so that stopping it also stops whatever it
//! started (`sh -c '...; sleep 60'`). The agent never decides the fate of the job: it reports
//! exits and obeys [`ToAgent::Kill`] and [`ToAgent::Shutdown`].
//!
//! The pieces: this module holds the agent's state and event loop and ends the ranks;
//! `ranks` starts them, `forwarding` moves their standard streams, `pmi_server` answers their
//! PMI commands, `spawned_jobs` runs the jobs they spawn, and `report` describes them for hang
//! reports.

mod forwarding;
mod pmi_server;
mod ranks;
mod report;
mod spawned_jobs;

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::proto::{NodeLaunch, PmiState, RankStatus, ToAgent, ToHead};
use crate::session;
use crate::wire::{Command, Framing};
use spawned_jobs::Spawned;
pub use spawned_jobs::PARENT_PORT_KEY;

/// The agent's connection to the head.
pub struct AgentLink {
    /// Messages to the head.
    pub to_head: UnboundedSender<ToHead>,
    /// Messages from the head.
    pub from_head: UnboundedReceiver<ToAgent>,
}

enum Event {
    Pmi(u32, Command),
    PmiBroken(u32, String),
    Exited(u32, RankStatus),
    /// A job this agent started for a rank's spawn request ended (index into `spawned`).
    SpawnedExited(usize, RankStatus),
}

struct Slot {
    rank: u32,
    pid: Option<u32>,
    framing: Framing,
    writer: Option<UnboundedSender<Vec<u8>>>,
    pmi: PmiState,
    in_fence: Option<Option<String>>,
    alive: bool,
}

struct Agent {
    launch: NodeLaunch,
    to_head: UnboundedSender<ToHead>,
    slots: Vec<Slot>,
    index_of: HashMap<u32, usize>,
    kvs: HashMap<String, String>,
    pending_puts: Vec<(String, String)>,
    node_attrs: HashMap<String, String>,
    attr_waiters: Vec<(u32, String, Option<String>)>,
    session_dir: Option<PathBuf>,
    groups: Vec<i32>,
    kill_deadline: Option<Instant>,
    events: UnboundedSender<Event>,
    spawned: Vec<Spawned>,
    /// Names this job's ranks published, unpublished when the job ends.
    published: Vec<(String, String)>,
    /// Index (into `launch.ranks`) of the next rank to start.
    next_start: usize,
    /// The CPUs ranks are bound to, in order.
    cpus: Vec<usize>,
}

/// Runs the agent until the head says [`ToAgent::Shutdown`] or goes away.
pub async fn run_agent(mut link: AgentLink) {
    let launch = match link.from_head.recv().await {
        Some(ToAgent::Launch(l)) => *l,
        _ => {
            let _ = link.to_head.send(ToHead::Bye);
            return;
        }
    };
    let (events_tx, mut events) = unbounded_channel();
    let mut agent = Agent {
        slots: Vec::new(),
        index_of: HashMap::new(),
        to_head: link.to_head.clone(),
        kvs: HashMap::new(),
        pending_puts: Vec::new(),
        node_attrs: HashMap::new(),
        attr_waiters: Vec::new(),
        session_dir: None,
        groups: Vec::new(),
        kill_deadline: None,
        events: events_tx.clone(),
        spawned: Vec::new(),
        published: Vec::new(),
        next_start: 0,
        cpus: crate::host::available_cpus(),
        launch,
    };
    drop(events_tx);
    agent.prepare();
    loop {
        let deadline = agent.kill_deadline;
        tokio::select! {
            // Ranks start a batch per turn, so that the head (and its signal handlers) run in
            // between and a kill stops the start-up at once.
            _ = tokio::task::yield_now(), if agent.starting() => agent.start_some(),
            msg = link.from_head.recv() => match msg {
                Some(ToAgent::FenceDone { puts }) => agent.fence_done(puts),
                Some(ToAgent::Kill) => agent.kill(),
                Some(ToAgent::Report { stacks }) => {
                    let ranks = agent
                        .slots
                        .iter()
                        .filter(|s| s.alive)
                        .filter_map(|s| s.pid.map(|pid| (s.rank, pid)))
                        .collect();
                    report::start(ranks, agent.session_dir.clone(), stacks, agent.to_head.clone());
                }
                Some(ToAgent::Shutdown) => break,
                Some(ToAgent::Launch(_)) => tracing::warn!(target: "launcher", "second launch message ignored"),
                Some(ToAgent::Challenge { .. } | ToAgent::Welcome { .. }) => {
                    tracing::warn!(target: "launcher", "authentication message after the handshake ignored");
                }
                None => {
                    // The head is gone: nobody will collect our ranks' results.
                    tracing::warn!(target: "launcher", "lost the connection to kestrel-run; stopping this host's ranks");
                    agent.kill();
                    agent.wait_all(&mut events).await;
                    break;
                }
            },
            ev = events.recv() => match ev {
                Some(Event::Pmi(rank, cmd)) => agent.pmi(rank, cmd),
                Some(Event::PmiBroken(rank, why)) => {
                    eprintln!("kestrel-run: rank {rank} on {}: {why}", agent.launch.host_name);
                }
                Some(Event::Exited(rank, status)) => agent.exited(rank, status),
                Some(Event::SpawnedExited(i, status)) => agent.spawned_exited(i, status),
                None => {}
            },
            _ = sleep_until_opt(deadline) => {
                agent.kill_deadline = None;
                agent.signal_groups(Signal::SIGKILL);
            }
        }
    }
    agent.stop_spawned(&mut events).await;
    agent.finish();
    forwarding::drain(Duration::from_secs(2));
    let _ = link.to_head.send(ToHead::Bye);
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl Agent {
    fn slot(&mut self, rank: u32) -> Option<&mut Slot> {
        let idx = *self.index_of.get(&rank)?;
        self.slots.get_mut(idx)
    }

    fn exited(&mut self, rank: u32, status: RankStatus) {
        let Some(slot) = self.slot(rank) else { return };
        slot.alive = false;
        slot.writer = None;
        let (pid, pmi) = (slot.pid.unwrap_or(0), slot.pmi);
        let _ = self.to_head.send(ToHead::Exited {
            rank,
            pid,
            status,
            pmi,
        });
    }

    fn signal_groups(&self, sig: Signal) {
        for &pgid in &self.groups {
            // ESRCH just means the whole group is already gone.
            let _ = killpg(Pid::from_raw(pgid), sig);
        }
    }

    fn kill(&mut self) {
        if self.starting() {
            self.cancel_start("not started: the job was stopped while its ranks started");
        }
        if self.launch.kill_grace_ms == 0 {
            self.signal_groups(Signal::SIGKILL);
            return;
        }
        self.signal_groups(Signal::SIGTERM);
        if self.kill_deadline.is_none() {
            self.kill_deadline =
                Some(Instant::now() + Duration::from_millis(u64::from(self.launch.kill_grace_ms)));
        }
    }

    async fn wait_all(&mut self, events: &mut UnboundedReceiver<Event>) {
        let grace = Duration::from_millis(u64::from(self.launch.kill_grace_ms));
        let deadline = Instant::now() + grace;
        while self.slots.iter().any(|s| s.alive) {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(Event::Exited(rank, status))) => self.exited(rank, status),
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => break,
            }
        }
    }

    fn finish(&mut self) {
        // Whatever ranks left running in their groups (background children) goes with the job.
        self.signal_groups(Signal::SIGKILL);
        // Names the job's ranks left published.
        if !self.published.is_empty() {
            if let Ok(r) = self.names() {
                for (service, port) in std::mem::take(&mut self.published) {
                    let _ = r.unpublish(&service, &port);
                }
            }
        }
        // Ranks may have been given their own shared-memory directory.
        let shm_dirs: Vec<PathBuf> = self
            .launch
            .env
            .iter()
            .filter(|(k, _)| k == "KESTREL_SHM_DIR" || k == "KESTREL_MCA_SHM_DIR")
            .map(|(_, v)| PathBuf::from(v))
            .collect();
        let removed =
            session::remove_job_files(&self.launch.job_id, self.session_dir.as_deref(), &shm_dirs);
        tracing::debug!(target: "launcher", removed, "removed the job's files on {}", self.launch.host_name);
    }
}
