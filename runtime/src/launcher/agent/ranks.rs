//! Starting this host's ranks: one process group each, the PMI socket it inherits, its
//! environment and CPU binding, and the task that reports its exit.
//!
//! It owns how a rank process is created. It never answers PMI (that is `pmi_server`) and
//! never decides what a rank's exit means for the job: it reports it to the head.

use std::io::IsTerminal;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use super::{forwarding, pmi_server, Agent, Event, Slot};
use crate::launcher::limits;
use crate::launcher::proto::{PmiState, RankStatus, ToHead};
use crate::session;
use crate::sys::{apply_child_setup, ChildSetup};
use crate::wire::Framing;

/// Ranks started per turn of the agent's event loop: few enough that a signal to the launcher
/// or a kill from the head is seen within milliseconds, whatever the job's size.
pub(super) const START_BATCH: usize = 8;

impl Agent {
    /// Creates the session directory and checks that this host can take its ranks (processes,
    /// descriptors, shared memory). A host that cannot reports every rank as failed to start,
    /// and nothing is forked.
    pub(super) fn prepare(&mut self) {
        let dir = session::session_dir(&self.launch.job_id, self.launch.host_index as usize);
        match session::create_session_dir(&dir) {
            Ok(()) => {
                // Names this agent as its owner, so a later sweep knows when it is stale.
                if let Err(e) = crate::stale::claim(&dir) {
                    tracing::warn!(target: "launcher", "cannot write the owner of {}: {e}", dir.display());
                }
                self.session_dir = Some(dir)
            }
            Err(e) => eprintln!(
                "kestrel-run: cannot create the session directory {} on {}: {e}; ranks run \
                 without one (set TMPDIR to a writable directory)",
                dir.display(),
                self.launch.host_name
            ),
        }
        let needs = limits::HostNeeds {
            host: self.launch.host_name.clone(),
            ranks: self.launch.ranks.len() as u32,
            shm: self.shm_footprint(),
        };
        limits::raise_fd_limit(&needs);
        let machine = limits::Machine::read(needs.shm.as_ref().map(|(d, _)| d.as_path()));
        if let Err(refusal) = limits::check(&needs, &machine) {
            tracing::debug!(target: "launcher", ?machine, "host limits refuse the job");
            self.cancel_start(&refusal.0);
        }
    }

    /// What the shm transport will take on this host, from the parameters the ranks will see
    /// (the launcher's environment and the job's `--mca` and `-x` values).
    fn shm_footprint(&self) -> Option<(std::path::PathBuf, u64)> {
        let layers = crate::launcher::layers();
        let env = &self.launch.env;
        let lookup = |var: &str| {
            env.iter()
                .rev()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
                .or_else(|| std::env::var(var).ok())
        };
        // A value the ranks would refuse is theirs to report; no estimate then.
        let params =
            kestrel_transport::params::Params::resolve(&layers.specs, &lookup, &[]).ok()?;
        (layers.shm_footprint)(&params, self.launch.ranks.len() as u32)
    }

    /// Whether ranks of this host remain to be started.
    pub(super) fn starting(&self) -> bool {
        self.next_start < self.launch.ranks.len()
    }

    /// Starts the next [`START_BATCH`] ranks, telling the head each one's pid or why it could
    /// not start.
    pub(super) fn start_some(&mut self) {
        let local_size = self.launch.ranks.len() as u32;
        let end = (self.next_start + START_BATCH).min(self.launch.ranks.len());
        for local in self.next_start..end {
            let rank = self.launch.ranks[local];
            self.next_start = local + 1;
            self.index_of.insert(rank, self.slots.len());
            self.slots.push(Slot {
                rank,
                pid: None,
                framing: Framing::V1,
                writer: None,
                pmi: PmiState::Unused,
                in_fence: None,
                alive: false,
            });
            let bind: Vec<usize> = if self.launch.bind_cores && !self.cpus.is_empty() {
                let per = self.launch.cpus_per_rank.max(1) as usize;
                (0..per)
                    .map(|k| self.cpus[(local * per + k) % self.cpus.len()])
                    .collect()
            } else {
                Vec::new()
            };
            let events = self.events.clone();
            let binding = self.launch.report_bindings.then(|| cpu_list(&bind));
            match self.spawn_rank(rank, local as u32, local_size, bind, &events) {
                Ok(pid) => {
                    if let Some(cpus) = &binding {
                        eprintln!(
                            "kestrel-run: rank {rank} (pid {pid} on {}): {cpus}",
                            self.launch.host_name
                        );
                    }
                    let idx = self.index_of[&rank];
                    self.slots[idx].pid = Some(pid);
                    self.slots[idx].alive = true;
                    self.groups.push(pid as i32);
                    let _ = self.to_head.send(ToHead::Started { rank, pid });
                }
                Err(error) => {
                    let _ = self.to_head.send(ToHead::SpawnFailed { rank, error });
                }
            }
        }
    }

    /// Gives up starting the ranks not started yet: each is reported to the head as failed to
    /// start, for `why`.
    pub(super) fn cancel_start(&mut self, why: &str) {
        for local in self.next_start..self.launch.ranks.len() {
            let rank = self.launch.ranks[local];
            let _ = self.to_head.send(ToHead::SpawnFailed {
                rank,
                error: why.to_string(),
            });
        }
        self.next_start = self.launch.ranks.len();
    }

    fn spawn_rank(
        &mut self,
        rank: u32,
        local_rank: u32,
        local_size: u32,
        cpus: Vec<usize>,
        events: &UnboundedSender<Event>,
    ) -> Result<u32, String> {
        let l = &self.launch;
        let (program, program_args) = l.app_of(rank);
        let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .map_err(|e| format!("cannot create the PMI socket for rank {rank}: {e}"))?;
        let mut cmd = tokio::process::Command::new(program);
        if !l.wdir.is_empty() {
            cmd.current_dir(&l.wdir);
        }
        cmd.args(program_args)
            .env_remove("PMI_PORT")
            .env_remove("PMI_ID")
            .env("PMI_FD", theirs.as_raw_fd().to_string())
            .env("PMI_RANK", rank.to_string())
            .env("PMI_SIZE", l.size.to_string())
            .env("MPI_LOCALRANKID", local_rank.to_string())
            .env("MPI_LOCALNRANKS", local_size.to_string())
            .env("KESTREL_JOB_ID", &l.job_id)
            .env("KESTREL_NODE_ID", &l.host_name)
            .env("KESTREL_LOCAL_RANK", local_rank.to_string())
            .env("KESTREL_LOCAL_SIZE", local_size.to_string())
            .envs(quiet_crash_handlers())
            .envs(l.env.iter().map(|(k, v)| (k, v)))
            .process_group(0)
            .kill_on_drop(false);
        if let Some(dir) = &self.session_dir {
            cmd.env("KESTREL_SESSION_DIR", dir);
        }
        let stdin_tty = std::io::stdin().is_terminal();
        let forward = l.forward_stdin && rank == 0;
        cmd.stdin(match (forward, stdin_tty) {
            (true, false) => Stdio::inherit(),
            (true, true) => Stdio::piped(),
            (false, _) => Stdio::null(),
        });
        // Always pipes: the ranks' lines are forwarded whole (see `forwarding`).
        cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        apply_child_setup(
            &mut cmd,
            ChildSetup {
                keep_fd: Some(theirs.as_raw_fd()),
                cpus,
            },
        );
        let mut child = cmd.spawn().map_err(|e| {
            let hint = match e.kind() {
                std::io::ErrorKind::NotFound => {
                    " (not found: give a path like ./prog, or check PATH on that host)"
                }
                std::io::ErrorKind::PermissionDenied => " (permission denied: is it executable?)",
                _ => "",
            };
            let wdir = if l.wdir.is_empty() {
                String::new()
            } else {
                format!(" in {}", l.wdir)
            };
            format!(
                "cannot start '{program}' on {}{wdir}: {e}{hint}",
                l.host_name
            )
        })?;
        drop(theirs);
        let pid = child.id().unwrap_or(0);

        let pipes = forwarding::forward_child_io(&mut child, rank, l.tag_output);

        let std_stream = std::os::unix::net::UnixStream::from(ours);
        std_stream
            .set_nonblocking(true)
            .map_err(|e| format!("PMI socket for rank {rank}: {e}"))?;
        let stream = tokio::net::UnixStream::from_std(std_stream)
            .map_err(|e| format!("PMI socket for rank {rank}: {e}"))?;
        let (read_half, mut write_half) = stream.into_split();
        let (wtx, mut wrx) = unbounded_channel::<Vec<u8>>();
        tokio::spawn(async move {
            while let Some(bytes) = wrx.recv().await {
                if write_half.write_all(&bytes).await.is_err() {
                    break;
                }
            }
        });
        tokio::spawn(pmi_server::read_pmi(read_half, rank, events.clone()));
        let idx = self.index_of[&rank];
        self.slots[idx].writer = Some(wtx);

        let exit_events = events.clone();
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(s) => match (s.code(), s.signal()) {
                    (Some(c), _) => RankStatus::Code(c),
                    (None, Some(sig)) => RankStatus::Signal(sig),
                    (None, None) => RankStatus::Code(-1),
                },
                Err(_) => RankStatus::Code(-1),
            };
            // Let the last output lines through, but do not wait for grandchildren that keep
            // the pipes open.
            for p in pipes {
                let _ = tokio::time::timeout(Duration::from_millis(300), p).await;
            }
            let _ = exit_events.send(Event::Exited(rank, status));
        });
        Ok(pid)
    }
}

/// libfabric links the psm provider libraries (libinfinipath, libpsm2), whose load-time
/// constructors take over the crash signals of every program that links libfabric: a rank's
/// segfault then prints their backtrace, writes a `.btr` file into the working directory and
/// exits with status 1, and the launcher could not report the signal. Kestrel programs put the
/// default action back at start-up (`kestrel-usnic`'s `prepare_process`), but a crash before
/// that, or in a program that is not Kestrel's, still meets those handlers; these variables
/// (the libraries' own switches) keep them from being installed at all. A value the user set,
/// in the environment or with `-x`, wins.
fn quiet_crash_handlers() -> Vec<(&'static str, &'static str)> {
    ["IPATH_NO_BACKTRACE", "HFI_NO_BACKTRACE"]
        .into_iter()
        .filter(|v| std::env::var_os(v).is_none())
        .map(|v| (v, "1"))
        .collect()
}

/// How `--report-bindings` shows a rank's cores: "bound to cpus 0-3,6" or "not bound".
fn cpu_list(cpus: &[usize]) -> String {
    if cpus.is_empty() {
        return "not bound".into();
    }
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut parts: Vec<String> = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let mut j = i;
        while j + 1 < sorted.len() && sorted[j + 1] == sorted[j] + 1 {
            j += 1;
        }
        parts.push(if j > i {
            format!("{}-{}", sorted[i], sorted[j])
        } else {
            sorted[i].to_string()
        });
        i = j + 1;
    }
    format!("bound to cpus {}", parts.join(","))
}

#[cfg(test)]
mod binding_report_tests {
    use super::cpu_list;

    #[test]
    fn cpu_lists_collapse_runs() {
        assert_eq!(cpu_list(&[]), "not bound");
        assert_eq!(cpu_list(&[3]), "bound to cpus 3");
        assert_eq!(cpu_list(&[2, 0, 1, 3, 6]), "bound to cpus 0-3,6");
        assert_eq!(cpu_list(&[5, 7, 7]), "bound to cpus 5,7");
    }
}
