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

use std::collections::HashMap;
use std::io::IsTerminal;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{killpg, Signal};
use nix::sys::socket::{socketpair, AddressFamily, SockFlag, SockType};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver, UnboundedSender};
use tokio::time::Instant;

use super::proto::{NodeLaunch, PmiState, RankStatus, ToAgent, ToHead};
use crate::session;
use crate::sys::{apply_child_setup, ChildSetup};
use crate::wire::{Command, Framing};

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

/// A job started for a rank's `spawn`: a nested `kestrel-run` in its own process group.
struct Spawned {
    job_id: String,
    pid: u32,
    by_rank: u32,
    /// The spawning root's port, told when the job ends before it connected.
    port: String,
    what: String,
    alive: bool,
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
        launch,
    };
    agent.start(&events_tx);
    drop(events_tx);
    loop {
        let deadline = agent.kill_deadline;
        tokio::select! {
            msg = link.from_head.recv() => match msg {
                Some(ToAgent::FenceDone { puts }) => agent.fence_done(puts),
                Some(ToAgent::Kill) => agent.kill(),
                Some(ToAgent::Shutdown) => break,
                Some(ToAgent::Launch(_)) => tracing::warn!(target: "launcher", "second launch message ignored"),
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
    let _ = link.to_head.send(ToHead::Bye);
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl Agent {
    fn start(&mut self, events: &UnboundedSender<Event>) {
        let dir = session::session_dir(&self.launch.job_id, self.launch.host_index as usize);
        match session::create_session_dir(&dir) {
            Ok(()) => self.session_dir = Some(dir),
            Err(e) => eprintln!(
                "kestrel-run: cannot create the session directory {} on {}: {e}; ranks run \
                 without one (set TMPDIR to a writable directory)",
                dir.display(),
                self.launch.host_name
            ),
        }
        let cpus = crate::host::available_cpus();
        let local_size = self.launch.ranks.len() as u32;
        for (local, &rank) in self.launch.ranks.clone().iter().enumerate() {
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
            let bind: Vec<usize> = if self.launch.bind_cores && !cpus.is_empty() {
                let per = self.launch.cpus_per_rank.max(1) as usize;
                (0..per)
                    .map(|k| cpus[(local * per + k) % cpus.len()])
                    .collect()
            } else {
                Vec::new()
            };
            match self.spawn_rank(rank, local as u32, local_size, bind, events) {
                Ok(pid) => {
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
        if l.tag_output {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
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

        if let Some(stdin) = child.stdin.take() {
            // A terminal cannot be shared with a rank in another process group, so copy it.
            if let Ok(fd) = stdin.into_owned_fd() {
                std::thread::spawn(move || {
                    let mut out = std::fs::File::from(fd);
                    let _ = std::io::copy(&mut std::io::stdin().lock(), &mut out);
                });
            }
        }
        let mut pipes = Vec::new();
        if let Some(out) = child.stdout.take() {
            pipes.push(tokio::spawn(tag_lines(out, rank, false)));
        }
        if let Some(err) = child.stderr.take() {
            pipes.push(tokio::spawn(tag_lines(err, rank, true)));
        }

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
        tokio::spawn(read_pmi(read_half, rank, events.clone()));
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

    fn slot(&mut self, rank: u32) -> Option<&mut Slot> {
        let idx = *self.index_of.get(&rank)?;
        self.slots.get_mut(idx)
    }

    fn reply(&mut self, rank: u32, mut cmd: Command, thrid: Option<&str>) {
        if let Some(t) = thrid {
            cmd = cmd.with("thrid", t);
        }
        let Some(slot) = self.slot(rank) else { return };
        match slot.framing.encode(&cmd) {
            Ok(bytes) => {
                if let Some(w) = &slot.writer {
                    let _ = w.send(bytes);
                }
            }
            Err(e) => tracing::error!(target: "pmi", rank, "cannot encode reply {cmd}: {e}"),
        }
    }

    fn pmi(&mut self, rank: u32, cmd: Command) {
        tracing::trace!(target: "pmi", rank, "<- {cmd}");
        let thrid = cmd.get("thrid").map(String::from);
        let thrid = thrid.as_deref();
        let v2 = self
            .slot(rank)
            .map(|s| s.framing == Framing::V2)
            .unwrap_or(false);
        let job = self.launch.job_id.clone();
        let ok = |name: &str| Command::new(name).with("rc", "0");
        match cmd.name.as_str() {
            "init" => {
                let version = if cmd.get("pmi_version") == Some("2") {
                    "2"
                } else {
                    "1"
                };
                let sub = if version == "2" { "0" } else { "1" };
                let reply = Command::new("response_to_init")
                    .with("pmi_version", version)
                    .with("pmi_subversion", sub)
                    .with("rc", "0");
                self.reply(rank, reply, None);
                if let Some(slot) = self.slot(rank) {
                    slot.pmi = PmiState::Initialized;
                    if version == "2" {
                        slot.framing = Framing::V2;
                    }
                }
            }
            "initack" => {
                let reply = ok("initack");
                self.reply(rank, reply, None);
                let size = self.launch.size.to_string();
                self.reply(rank, Command::new("set").with("size", size), None);
                self.reply(
                    rank,
                    Command::new("set").with("rank", rank.to_string()),
                    None,
                );
                self.reply(rank, Command::new("set").with("debug", "0"), None);
            }
            "get_maxes" => {
                let reply = ok("maxes")
                    .with("kvsname_max", "256")
                    .with("keylen_max", "64")
                    .with("vallen_max", "1024");
                self.reply(rank, reply, None);
            }
            "get_appnum" => self.reply(rank, ok("appnum").with("appnum", "0"), None),
            "get_universe_size" => {
                let size = self.launch.size.to_string();
                self.reply(rank, ok("universe_size").with("size", size), None)
            }
            "get_my_kvsname" => self.reply(rank, ok("my_kvsname").with("kvsname", job), None),
            "get_rank" => self.reply(
                rank,
                ok("getrank_result").with("rank", rank.to_string()),
                None,
            ),
            "get_size" => {
                let size = self.launch.size.to_string();
                self.reply(rank, ok("getsize_result").with("size", size), None)
            }
            "fullinit" => {
                let reply = ok("fullinit-response")
                    .with("pmi-version", "2")
                    .with("pmi-subversion", "0")
                    .with("rank", rank.to_string())
                    .with("size", self.launch.size.to_string())
                    .with("appnum", "0")
                    .with("spawner-jobid", "")
                    .with("debugged", "FALSE")
                    .with("pmiverbose", "FALSE");
                self.reply(rank, reply, thrid);
            }
            "job-getid" => self.reply(rank, ok("job-getid-response").with("jobid", job), thrid),
            "put" | "kvs-put" => {
                match (cmd.get("key"), cmd.get("value")) {
                    (Some(k), Some(v)) => self.pending_puts.push((k.to_string(), v.to_string())),
                    _ => tracing::warn!(target: "pmi", rank, "put without key or value: {cmd}"),
                }
                let name = if v2 { "kvs-put-response" } else { "put_result" };
                self.reply(rank, ok(name), thrid);
            }
            "barrier_in" | "kvs-fence" => {
                if let Some(slot) = self.slot(rank) {
                    slot.in_fence = Some(thrid.map(String::from));
                }
                self.maybe_fence();
            }
            "get" => {
                let key = cmd.get("key").unwrap_or("");
                match self.lookup(key) {
                    Some(v) => self.reply(
                        rank,
                        ok("get_result").with("msg", "success").with("value", v),
                        None,
                    ),
                    None => {
                        let reply = Command::new("get_result")
                            .with("rc", "-1")
                            .with("msg", format!("key_{key}_not_found"));
                        self.reply(rank, reply, None)
                    }
                }
            }
            "kvs-get" => {
                let key = cmd.get("key").unwrap_or("");
                let reply = match self.lookup(key) {
                    Some(v) => ok("kvs-get-response")
                        .with("found", "TRUE")
                        .with("value", v),
                    None => ok("kvs-get-response").with("found", "FALSE"),
                };
                self.reply(rank, reply, thrid);
            }
            "info-getjobattr" => {
                let key = cmd.get("key").unwrap_or("");
                let reply = match self.job_attr(key) {
                    Some(v) => ok("info-getjobattr-response")
                        .with("found", "TRUE")
                        .with("value", v),
                    None => ok("info-getjobattr-response").with("found", "FALSE"),
                };
                self.reply(rank, reply, thrid);
            }
            "info-putnodeattr" => {
                if let (Some(k), Some(v)) = (cmd.get("key"), cmd.get("value")) {
                    self.node_attrs.insert(k.to_string(), v.to_string());
                    self.wake_attr_waiters(k);
                }
                self.reply(rank, ok("info-putnodeattr-response"), thrid);
            }
            "info-getnodeattr" => {
                let key = cmd.get("key").unwrap_or("").to_string();
                match self.node_attrs.get(&key).cloned() {
                    Some(v) => {
                        let reply = ok("info-getnodeattr-response")
                            .with("found", "TRUE")
                            .with("value", v);
                        self.reply(rank, reply, thrid)
                    }
                    None if cmd.get("wait") == Some("TRUE") => {
                        self.attr_waiters.push((rank, key, thrid.map(String::from)))
                    }
                    None => self.reply(
                        rank,
                        ok("info-getnodeattr-response").with("found", "FALSE"),
                        thrid,
                    ),
                }
            }
            "name-publish" | "publish_name" => {
                let service = cmd.get("name").or_else(|| cmd.get("service")).unwrap_or("");
                let port = cmd.get("port").unwrap_or("");
                let result = self.names().and_then(|r| {
                    r.publish(
                        service,
                        port,
                        &crate::dpm::names::Owner::this_process(&self.launch.job_id),
                    )
                });
                if result.is_ok() {
                    self.published.push((service.to_string(), port.to_string()));
                }
                let name = if v2 {
                    "name-publish-response"
                } else {
                    "publish_result"
                };
                self.reply(rank, name_reply(name, result.map(|()| None)), thrid);
            }
            "name-lookup" | "lookup_name" => {
                let service = cmd.get("name").or_else(|| cmd.get("service")).unwrap_or("");
                let result = self.names().and_then(|r| match r.lookup(service)? {
                    Some(port) => Ok(Some(port)),
                    None => Err(crate::dpm::NameError::NotPublished {
                        service: service.to_string(),
                    }),
                });
                let (name, key) = if v2 {
                    ("name-lookup-response", "value")
                } else {
                    ("lookup_result", "port")
                };
                let mut reply = name_reply(name, result.clone());
                if let Ok(Some(port)) = result {
                    reply = reply.with(key, port);
                }
                self.reply(rank, reply, thrid);
            }
            "name-unpublish" | "unpublish_name" => {
                let service = cmd.get("name").or_else(|| cmd.get("service")).unwrap_or("");
                let result = self.names().and_then(|r| r.unpublish(service, ""));
                self.published.retain(|(s, _)| s != service);
                let name = if v2 {
                    "name-unpublish-response"
                } else {
                    "unpublish_result"
                };
                self.reply(rank, name_reply(name, result.map(|()| None)), thrid);
            }
            "spawn" => {
                let reply = match crate::spawn_request::parse_spawn_command(&cmd) {
                    Ok((cmds, preput)) => match self.spawn_job(rank, &cmds, &preput) {
                        Ok(job) => ok("spawn-response").with("jobid", job),
                        Err(e) => {
                            eprintln!("kestrel-run: rank {rank} asked to spawn a job: {e}");
                            Command::new("spawn-response")
                                .with("rc", "1")
                                .with("errmsg", e.replace(';', ","))
                        }
                    },
                    Err(e) => Command::new("spawn-response").with("rc", "1").with(
                        "errmsg",
                        format!("malformed spawn request: {e}").replace(';', ","),
                    ),
                };
                self.reply(rank, reply, thrid);
            }
            "abort" => {
                let code = cmd
                    .get("exitcode")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                let message = cmd.get("message").unwrap_or("").to_string();
                let _ = self.to_head.send(ToHead::Abort {
                    rank,
                    code,
                    message,
                });
            }
            "finalize" => {
                if let Some(slot) = self.slot(rank) {
                    slot.pmi = PmiState::Finalized;
                }
                let name = if v2 {
                    "finalize-response"
                } else {
                    "finalize_ack"
                };
                self.reply(rank, ok(name), thrid);
            }
            other => {
                tracing::warn!(target: "pmi", rank, "unsupported PMI command {other}");
                let name = if v2 {
                    format!("{other}-response")
                } else {
                    format!("{other}_result")
                };
                let reply = Command::new(name)
                    .with("rc", "-1")
                    .with("msg", format!("kestrel-run does not support {other}"));
                self.reply(rank, reply, thrid);
            }
        }
    }

    /// The name registry of this job (the `dpm_name_dir` parameter as the job sees it).
    fn names(&self) -> Result<crate::dpm::NameRegistry, crate::dpm::NameError> {
        let from_job = |var: &str| {
            self.launch
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
        };
        let dir = ["KESTREL_MCA_DPM_NAME_DIR", "KESTREL_DPM_NAME_DIR"]
            .iter()
            .find_map(|v| from_job(v).or_else(|| std::env::var(v).ok()))
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(crate::dpm::names::default_dir);
        crate::dpm::NameRegistry::open(dir)
    }

    /// Starts a job for a rank's spawn request: a nested `kestrel-run` in its own process
    /// group, which tells the children the spawning root's port. Returns the new job's id.
    fn spawn_job(
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

    fn spawned_exited(&mut self, index: usize, status: RankStatus) {
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
            super::exit::describe_status(status)
        );
        eprintln!("kestrel-run: {reason}");
        // A root still waiting in accept for these children must not wait forever.
        tokio::spawn(async move {
            let Ok(name) = crate::dpm::PortName::parse(&port) else {
                return;
            };
            let msg = crate::dpm::OobMsg::SpawnFailed {
                tag: name.tag,
                reason,
            }
            .encode();
            for addr in name.socket_addresses() {
                let connect = tokio::net::TcpStream::connect(addr);
                if let Ok(Ok(mut s)) = tokio::time::timeout(Duration::from_secs(2), connect).await {
                    let _ = s.write_all(&msg).await;
                    let _ = s.shutdown().await;
                    return;
                }
            }
        });
    }

    /// At the end of the job: spawned jobs still running get a moment to finish, then are
    /// stopped (their launchers stop their ranks and clean up).
    async fn stop_spawned(&mut self, events: &mut UnboundedReceiver<Event>) {
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

    fn lookup(&self, key: &str) -> Option<String> {
        self.kvs.get(key).cloned().or_else(|| self.job_attr(key))
    }

    fn job_attr(&self, key: &str) -> Option<String> {
        match key {
            "PMI_process_mapping" if !self.launch.process_mapping.is_empty() => {
                Some(self.launch.process_mapping.clone())
            }
            "universeSize" => Some(self.launch.size.to_string()),
            _ => None,
        }
    }

    fn wake_attr_waiters(&mut self, key: &str) {
        let Some(value) = self.node_attrs.get(key).cloned() else {
            return;
        };
        let waiters = std::mem::take(&mut self.attr_waiters);
        for (rank, k, thrid) in waiters {
            if k == key {
                let reply = Command::new("info-getnodeattr-response")
                    .with("rc", "0")
                    .with("found", "TRUE")
                    .with("value", value.clone());
                self.reply(rank, reply, thrid.as_deref());
            } else {
                self.attr_waiters.push((rank, k, thrid));
            }
        }
    }

    fn maybe_fence(&mut self) {
        if self.slots.iter().all(|s| s.in_fence.is_some()) {
            let puts = std::mem::take(&mut self.pending_puts);
            let _ = self.to_head.send(ToHead::Fence { puts });
        }
    }

    fn fence_done(&mut self, puts: Vec<(String, String)>) {
        self.kvs.extend(puts);
        let waiting: Vec<(u32, Option<String>, Framing)> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.in_fence.take().map(|t| (s.rank, t, s.framing)))
            .collect();
        for (rank, thrid, framing) in waiting {
            let reply = match framing {
                Framing::V1 => Command::new("barrier_out").with("rc", "0"),
                Framing::V2 => Command::new("kvs-fence-response").with("rc", "0"),
            };
            self.reply(rank, reply, thrid.as_deref());
        }
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

/// The preput key that carries the spawning root's port (MPICH's name for it).
pub const PARENT_PORT_KEY: &str = "PARENT_ROOT_PORT_NAME";

/// The reply to a name-service request: `rc=0` (with `found=TRUE` for lookups), or the
/// error's class as `rc` and its text as `msg`/`errmsg`.
fn name_reply(name: &str, result: Result<Option<String>, crate::dpm::NameError>) -> Command {
    match result {
        Ok(found) => {
            let c = Command::new(name).with("rc", "0");
            if found.is_some() {
                c.with("found", "TRUE")
            } else {
                c
            }
        }
        Err(e) => {
            let text = e.to_string().replace(';', ",");
            Command::new(name)
                .with("rc", e.pmi_rc().to_string())
                .with("msg", text.clone())
                .with("errmsg", text)
        }
    }
}

async fn read_pmi(
    mut read: tokio::net::unix::OwnedReadHalf,
    rank: u32,
    events: UnboundedSender<Event>,
) {
    let mut framing = Framing::V1;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 8192];
    loop {
        loop {
            match framing.decode(&buf) {
                Ok(Some((cmd, used))) => {
                    buf.drain(..used);
                    // After `init pmi_version=2` both sides switch to PMI-2 framing.
                    if cmd.name == "init" && cmd.get("pmi_version") == Some("2") {
                        framing = Framing::V2;
                    }
                    let _ = events.send(Event::Pmi(rank, cmd));
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = events.send(Event::PmiBroken(
                        rank,
                        format!("{e}; closing its PMI connection"),
                    ));
                    return;
                }
            }
        }
        match read.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn tag_lines<R: tokio::io::AsyncRead + Unpin>(pipe: R, rank: u32, is_err: bool) {
    let mut lines = BufReader::new(pipe).split(b'\n');
    let tag = if is_err { "stderr" } else { "stdout" };
    while let Ok(Some(line)) = lines.next_segment().await {
        use std::io::Write;
        let mut text = format!("[1,{rank}]<{tag}>:").into_bytes();
        text.extend_from_slice(&line);
        text.push(b'\n');
        if is_err {
            let _ = std::io::stderr().lock().write_all(&text);
        } else {
            let _ = std::io::stdout().lock().write_all(&text);
        }
    }
}
