//! Jobs a rank asks for with `MPI_Comm_spawn`: each is a nested `kestrel-run` in its own
//! process group, told the spawning root's port; a job that ends before it connected back is
//! reported to that port, and jobs still running when this job ends are stopped.
//!
//! It owns the spawned jobs' lives. It never answers PMI itself (`pmi_server` decodes the
//! request and replies) and never touches this job's own ranks.

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use tokio::io::AsyncWriteExt;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

use super::{Agent, Event};
use crate::launcher::proto::RankStatus;
use crate::session;
use crate::sys::{apply_child_setup, ChildSetup};

/// The preput key that carries the spawning root's port (MPICH's name for it).
pub const PARENT_PORT_KEY: &str = "PARENT_ROOT_PORT_NAME";

/// A job started for a rank's `spawn`: a nested `kestrel-run` in its own process group.
pub(super) struct Spawned {
    job_id: String,
    pid: u32,
    by_rank: u32,
    /// The spawning root's port, told when the job ends before it connected.
    port: String,
    what: String,
    alive: bool,
}

impl Agent {
    /// Starts a job for a rank's spawn request: a nested `kestrel-run` in its own process
    /// group, which tells the children the spawning root's port. Returns the new job's id.
    pub(super) fn spawn_job(
        &mut self,
        rank: u32,
        cmds: &[crate::spawn_request::SpawnRequest],
        preput: &[(String, String)],
    ) -> Result<String, String> {
        let port = preput
            .iter()
            .find(|(k, _)| k == PARENT_PORT_KEY)
            .map(|(_, v)| v.clone())
            .ok_or_else(|| format!("the request has no {PARENT_PORT_KEY} to connect back to"))?;
        let first = cmds.first().ok_or("the request has no command")?;
        let exe = std::env::current_exe()
            .map_err(|e| format!("cannot find the kestrel-run executable: {e}"))?;
        let job_id = session::new_job_id();
        let mut argv: Vec<String> =
            vec!["--job-id".into(), job_id.clone(), "--oversubscribe".into()];
        // Info keys apply to the whole job; those of the first command decide.
        let mut hosts: Vec<String> = Vec::new();
        for (key, value) in &first.info {
            match key.as_str() {
                "host" | "hosts" => hosts.push(value.clone()),
                "wdir" | "wd" => argv.extend(["--wdir".into(), value.clone()]),
                "env" => {
                    for entry in value.lines().filter(|l| !l.trim().is_empty()) {
                        if !entry.contains('=') {
                            return Err(format!("info env entry '{entry}' is not NAME=VALUE"));
                        }
                        argv.extend(["-x".into(), entry.to_string()]);
                    }
                }
                other => {
                    tracing::warn!(target: "launcher", "spawn info key '{other}' is not supported; ignored")
                }
            }
        }
        if !hosts.is_empty() {
            argv.extend(["--host".into(), hosts.join(",")]);
            // Other hosts are reached the way this job reached its own.
            if !self.launch.launch_agent.is_empty() {
                argv.extend(["--launch-agent".into(), self.launch.launch_agent.clone()]);
            }
        }
        argv.extend(["-x".into(), format!("KESTREL_DPM_PARENT_PORT={port}")]);
        argv.extend([
            "-x".into(),
            format!("KESTREL_DPM_PARENT_JOB={}", self.launch.job_id),
        ]);
        for (i, c) in cmds.iter().enumerate() {
            if c.procs == 0 {
                return Err(format!(
                    "command {i} ('{}') asks for 0 processes",
                    c.program
                ));
            }
            if i > 0 {
                argv.push(":".into());
            }
            argv.extend(["-n".into(), c.procs.to_string()]);
            if i == 0 {
                argv.push("--".into());
            }
            argv.push(c.program.clone());
            argv.extend(c.args.iter().cloned());
        }
        let what = cmds
            .iter()
            .map(|c| format!("{} x {}", c.procs, c.program))
            .collect::<Vec<_>>()
            .join(" + ");
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.args(&argv)
            .envs(self.launch.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(false);
        if !self.launch.wdir.is_empty() {
            cmd.current_dir(&self.launch.wdir);
        }
        apply_child_setup(
            &mut cmd,
            ChildSetup {
                keep_fd: None,
                cpus: Vec::new(),
            },
        );
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", exe.display()))?;
        let pid = child.id().unwrap_or(0);
        self.groups.push(pid as i32);
        let index = self.spawned.len();
        self.spawned.push(Spawned {
            job_id: job_id.clone(),
            pid,
            by_rank: rank,
            port,
            what: what.clone(),
            alive: true,
        });
        tracing::debug!(target: "launcher", rank, job = %job_id, pid, "spawned {what}");
        let events = self.events.clone();
        tokio::spawn(async move {
            let status = match child.wait().await {
                Ok(s) => match (s.code(), s.signal()) {
                    (Some(c), _) => RankStatus::Code(c),
                    (None, Some(sig)) => RankStatus::Signal(sig),
                    (None, None) => RankStatus::Code(-1),
                },
                Err(_) => RankStatus::Code(-1),
            };
            let _ = events.send(Event::SpawnedExited(index, status));
        });
        Ok(job_id)
    }

    pub(super) fn spawned_exited(&mut self, index: usize, status: RankStatus) {
        let Some(job) = self.spawned.get_mut(index) else {
            return;
        };
        job.alive = false;
        let (job_id, port) = (job.job_id.clone(), job.port.clone());
        // Whatever the nested launcher could not remove (it may have been killed outright).
        session::remove_job_files(&job_id, None, &[]);
        if status == RankStatus::Code(0) {
            return;
        }
        let reason = format!(
            "job {job_id} ({}, spawned by rank {}) {}",
            job.what,
            job.by_rank,
            crate::launcher::exit::describe_status(status)
        );
        eprintln!("kestrel-run: {reason}");
        // A root still waiting in accept for these children must not wait forever.
        tokio::spawn(async move {
            let Ok(name) = crate::dpm::PortName::parse(&port) else {
                return;
            };
            for addr in name.socket_addresses() {
                let connect = tokio::net::TcpStream::connect(addr);
                if let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(2), connect).await {
                    // The listener opens with a challenge; the report proves the port's token
                    // over it (the port name this launcher spawned for carries the token).
                    let Ok(Ok(challenge)) =
                        tokio::time::timeout(Duration::from_secs(2), read_challenge(&mut s)).await
                    else {
                        continue;
                    };
                    let msg = crate::dpm::OobMsg::SpawnFailed {
                        tag: name.tag,
                        proof: name.proof(crate::dpm::PortRole::SpawnFailed, &challenge),
                        reason,
                    }
                    .encode();
                    let _ = s.write_all(&msg).await;
                    let _ = s.shutdown().await;
                    return;
                }
            }
        });
    }

    /// At the end of the job: spawned jobs still running get a moment to finish, then are
    /// stopped (their launchers stop their ranks and clean up).
    pub(super) async fn stop_spawned(&mut self, events: &mut UnboundedReceiver<Event>) {
        let running = |a: &Agent| a.spawned.iter().any(|s| s.alive);
        if !running(self) {
            return;
        }
        let grace = Duration::from_millis(u64::from(self.launch.kill_grace_ms));
        let mut phase = 0;
        let mut deadline = Instant::now() + Duration::from_secs(2);
        while running(self) {
            match tokio::time::timeout_at(deadline, events.recv()).await {
                Ok(Some(Event::SpawnedExited(i, status))) => self.spawned_exited(i, status),
                Ok(Some(Event::Exited(rank, status))) => self.exited(rank, status),
                Ok(Some(_)) => {}
                Ok(None) => break,
                Err(_) => {
                    let sig = if phase == 0 {
                        Signal::SIGTERM
                    } else {
                        Signal::SIGKILL
                    };
                    if phase >= 2 {
                        break;
                    }
                    let pids: Vec<u32> = self
                        .spawned
                        .iter()
                        .filter(|s| s.alive)
                        .map(|s| s.pid)
                        .collect();
                    tracing::debug!(target: "launcher", ?pids, ?sig, "stopping spawned jobs still running at the end of the job");
                    for pid in pids {
                        let _ = killpg(Pid::from_raw(pid as i32), sig);
                    }
                    phase += 1;
                    deadline = Instant::now() + grace + Duration::from_secs(1);
                }
            }
        }
    }
}

/// Reads the listener's opening `Challenge` frame; its nonce.
async fn read_challenge(s: &mut tokio::net::TcpStream) -> Result<Vec<u8>, String> {
    use tokio::io::AsyncReadExt;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).await.map_err(|e| e.to_string())?;
    let len = u32::from_be_bytes(len) as usize;
    if len > 1024 {
        return Err("the listener's first frame is not a challenge".into());
    }
    let mut body = vec![0u8; len];
    s.read_exact(&mut body).await.map_err(|e| e.to_string())?;
    match crate::dpm::OobMsg::decode(&body) {
        Ok(crate::dpm::OobMsg::Challenge { nonce }) => Ok(nonce),
        _ => Err("the listener's first frame is not a challenge".into()),
    }
}
