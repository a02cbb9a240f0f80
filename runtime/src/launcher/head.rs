//! The head of a job: takes the plan of where ranks go ([`super::plan`]), starts node agents (in-process for this host,
//! `kestrel-run --daemon` through the launch agent for others), merges fences, and decides the
//! fate of the job when a rank fails, the user interrupts, or the timeout expires.

use std::collections::{BTreeMap, HashSet};
use std::process::Stdio;
use std::time::Duration;

use kestrel_transport::params::{self, Params};
use tokio::io::AsyncWriteExt;
use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};
use tokio::time::Instant;

use super::agent::{run_agent, AgentLink};
use super::args::{Bind, LaunchOptions};
use super::auth::JobSecret;
use super::daemon_link::{accept_daemons, listen_for_daemons, LinkEvent};
use super::exit::describe_status;
use super::guard::Guard;
use super::hang_report::PendingReport;
pub use super::plan::{plan, process_mapping, HostPlan, JobPlan};
use super::proto::{NodeLaunch, PmiState, RankStatus, ToAgent, ToHead};
use crate::host::{available_cpus, machine_id};
use crate::session;

enum HeadEvent {
    Agent(usize, ToHead),
    AgentLost(usize),
    AgentProcessExited(usize, String),
    Connected(usize, UnboundedSender<ToAgent>, String, u32),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RankState {
    Pending,
    Running(u32),
    Done,
}

struct Head {
    plan: JobPlan,
    rank_host: Vec<usize>,
    ranks: Vec<RankState>,
    agents: Vec<Option<UnboundedSender<ToAgent>>>,
    fenced: HashSet<usize>,
    fence_puts: Vec<(String, String)>,
    exit_code: Option<i32>,
    stopping: bool,
    bye: HashSet<usize>,
    /// Hosts whose launch-agent process (srun, ssh...) is running.
    agent_processes: HashSet<usize>,
    /// Ranks in [`RankState::Done`].
    done: usize,
    /// Ranks in [`RankState::Running`].
    live: usize,
    /// A hang report being gathered.
    report: Option<PendingReport>,
}

impl Head {
    fn host_of(&self, rank: u32) -> &str {
        self.rank_host
            .get(rank as usize)
            .and_then(|&h| self.plan.hosts.get(h))
            .map(|h| h.name.as_str())
            .unwrap_or("?")
    }

    fn running(&self) -> Vec<(u32, u32)> {
        self.ranks
            .iter()
            .enumerate()
            .filter_map(|(r, s)| match s {
                RankState::Running(pid) => Some((r as u32, *pid)),
                _ => None,
            })
            .collect()
    }

    fn describe_running(&self) -> String {
        let list: Vec<String> = self
            .running()
            .iter()
            .map(|(r, pid)| format!("rank {r} (pid {pid} on {})", self.host_of(*r)))
            .collect();
        if list.is_empty() {
            "none".into()
        } else {
            list.join(", ")
        }
    }

    /// The ranks still running that really are: a rank of this host whose process is gone
    /// (its exit not yet reported) is not one; ranks of other hosts are as their daemon said.
    fn describe_survivors(&self) -> String {
        let list: Vec<String> = self
            .running()
            .into_iter()
            .filter(|&(r, pid)| {
                let local = self
                    .rank_host
                    .get(r as usize)
                    .and_then(|&h| self.plan.hosts.get(h))
                    .map(|h| h.local)
                    .unwrap_or(false);
                !local || process_exists(pid)
            })
            .map(|(r, pid)| format!("rank {r} (pid {pid} on {})", self.host_of(r)))
            .collect();
        list.join(", ")
    }

    fn broadcast(&self, msg: ToAgent) {
        for a in self.agents.iter().flatten() {
            let _ = a.send(msg.clone());
        }
    }

    /// Starts stopping the job; the first failure decides the exit code.
    fn fail(&mut self, code: i32, grace_ms: i64) {
        if self.exit_code.is_none() {
            self.exit_code = Some(code);
        }
        if !self.stopping {
            self.stopping = true;
            let n = self.live;
            if n > 0 {
                eprintln!(
                    "kestrel-run: stopping the {n} rank{} still running (SIGTERM, then SIGKILL after {grace_ms} ms)",
                    if n == 1 { "" } else { "s" }
                );
            }
            self.broadcast(ToAgent::Kill);
        }
    }

    fn all_done(&self) -> bool {
        self.done == self.ranks.len()
    }

    /// Moves `rank` to `new`, keeping the counts (a job of 100,000 ranks must not rescan them
    /// on every event).
    fn set_state(&mut self, rank: u32, new: RankState) {
        let Some(state) = self.ranks.get_mut(rank as usize) else {
            return;
        };
        let old = std::mem::replace(state, new);
        match old {
            RankState::Done => self.done -= 1,
            RankState::Running(_) => self.live -= 1,
            RankState::Pending => {}
        }
        match new {
            RankState::Done => self.done += 1,
            RankState::Running(_) => self.live += 1,
            RankState::Pending => {}
        }
    }

    /// Marks every rank done.
    fn all_finished(&mut self) {
        for r in 0..self.ranks.len() as u32 {
            self.set_state(r, RankState::Done);
        }
    }
}

/// Runs a job to completion and returns the launcher's exit code.
pub async fn run(opts: LaunchOptions, params: Params, argv0: std::path::PathBuf) -> i32 {
    let plan = match plan(&opts, &|v| std::env::var(v).ok()) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kestrel-run: {e}");
            return 2;
        }
    };
    // Removes the job's files on this host should this process die without doing it.
    let shm_dirs: Vec<std::path::PathBuf> = opts
        .env
        .iter()
        .filter(|(k, _)| k == "KESTREL_SHM_DIR" || k == "KESTREL_MCA_SHM_DIR")
        .map(|(_, v)| v.into())
        .chain(
            opts.mca
                .iter()
                .filter(|(k, _)| k == "shm_dir")
                .map(|(_, v)| v.into()),
        )
        .collect();
    let guard = Guard::start(&argv0, &plan.job_id, &shm_dirs);
    for path in crate::stale::sweep(&shm_dirs) {
        eprintln!(
            "kestrel-run: removed {}, left by a job that is gone",
            path.display()
        );
    }
    let grace_ms = crate::params::KILL_GRACE_MS.get(&params);
    let daemon_timeout = Duration::from_secs(crate::params::DAEMON_TIMEOUT_S.get(&params) as u64);
    tracing::debug!(target: "launcher", job = %plan.job_id, size = plan.size, hosts = plan.hosts.len(), "plan ready");

    let mut rank_host = vec![0usize; plan.size as usize];
    for (h, host) in plan.hosts.iter().enumerate() {
        for &r in &host.ranks {
            rank_host[r as usize] = h;
        }
    }
    let mapping = process_mapping(&plan.hosts);
    let (events_tx, mut events) = unbounded_channel::<HeadEvent>();
    let mut head = Head {
        agents: vec![None; plan.hosts.len()],
        ranks: vec![RankState::Pending; plan.size as usize],
        rank_host,
        fenced: HashSet::new(),
        fence_puts: Vec::new(),
        exit_code: None,
        stopping: false,
        bye: HashSet::new(),
        agent_processes: HashSet::new(),
        done: 0,
        live: 0,
        report: None,
        plan,
    };

    let mut sigint = signal(SignalKind::interrupt()).ok();
    let mut sigterm = signal(SignalKind::terminate()).ok();
    let mut sighup = signal(SignalKind::hangup()).ok();
    let mut sigusr1 = signal(SignalKind::user_defined1()).ok();

    // Hosts: in-process agents for this host, daemons for the others.
    let remote: Vec<usize> = (0..head.plan.hosts.len())
        .filter(|&h| !head.plan.hosts[h].local)
        .collect();
    // The job's secret goes to each daemon on its standard input, never on a command line.
    let secret = if remote.is_empty() {
        None
    } else {
        match JobSecret::generate() {
            Ok(s) => Some(s),
            Err(e) => {
                eprintln!("{e}");
                return 2;
            }
        }
    };
    let mut machines: BTreeMap<usize, (String, u32)> = BTreeMap::new();
    for h in 0..head.plan.hosts.len() {
        if head.plan.hosts[h].local {
            let (to_agent, from_head) = unbounded_channel();
            let (to_head, mut agent_rx) = unbounded_channel();
            tokio::spawn(run_agent(AgentLink { to_head, from_head }));
            let tx = events_tx.clone();
            tokio::spawn(async move {
                while let Some(m) = agent_rx.recv().await {
                    let _ = tx.send(HeadEvent::Agent(h, m));
                }
                let _ = tx.send(HeadEvent::AgentLost(h));
            });
            head.agents[h] = Some(to_agent);
            machines.insert(h, (machine_id(), available_cpus().len() as u32));
        }
    }
    if !remote.is_empty() {
        let names: Vec<String> = remote
            .iter()
            .map(|&h| head.plan.hosts[h].name.clone())
            .collect();
        let (listeners, parents) = match listen_for_daemons(&names).await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("{e}");
                return 2;
            }
        };
        let (link_tx, mut link_rx) = unbounded_channel();
        let link_secret = secret.clone().expect("made for remote hosts");
        tokio::spawn(accept_daemons(
            listeners,
            link_secret,
            head.plan.hosts.len(),
            link_tx,
        ));
        let tx = events_tx.clone();
        tokio::spawn(async move {
            while let Some(e) = link_rx.recv().await {
                let e = match e {
                    LinkEvent::Connected(h, to, machine, cpus) => {
                        HeadEvent::Connected(h, to, machine, cpus)
                    }
                    LinkEvent::Frame(h, m) => HeadEvent::Agent(h, m),
                    LinkEvent::Lost(h) => HeadEvent::AgentLost(h),
                };
                if tx.send(e).is_err() {
                    break;
                }
            }
        });
        let exe = {
            let configured = crate::params::DAEMON_PATH.get(&params);
            if configured.is_empty() {
                argv0.display().to_string()
            } else {
                configured
            }
        };
        let verbose = kestrel_transport::core_params::VERBOSE.get(&params);
        for &h in &remote {
            let host = head.plan.hosts[h].name.clone();
            let mut words = agent_command(&head.plan.agent, &host);
            words.extend([
                exe.clone(),
                "--daemon".into(),
                "--parent".into(),
                parents.join(","),
            ]);
            words.extend(["--host-index".into(), h.to_string()]);
            if !verbose.is_empty() {
                words.extend(["--verbose".into(), verbose.clone()]);
            }
            tracing::debug!(target: "launcher", "starting daemon: {}", words.join(" "));
            let shown = words.join(" ");
            let mut cmd = tokio::process::Command::new(&words[0]);
            // Its own process group: a Ctrl-C at the terminal reaches the launcher only, which
            // then stops the job in order, instead of killing daemons under their ranks.
            cmd.args(&words[1..])
                .stdin(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            let tx = events_tx.clone();
            match cmd.spawn() {
                Ok(mut child) => {
                    head.agent_processes.insert(h);
                    let line = secret.as_ref().map(JobSecret::line).unwrap_or_default();
                    let stdin = child.stdin.take();
                    tokio::spawn(async move {
                        if let Some(mut stdin) = stdin {
                            // A daemon that never reads it fails to authenticate; nothing
                            // to do about a write error here.
                            let _ = stdin.write_all(line.as_bytes()).await;
                            drop(stdin);
                        }
                        let status = child.wait().await;
                        let how = match status {
                            Ok(s) => describe_exit_status(s),
                            Err(e) => e.to_string(),
                        };
                        let _ =
                            tx.send(HeadEvent::AgentProcessExited(h, format!("'{shown}' {how}")));
                    });
                }
                Err(e) => {
                    eprintln!(
                        "kestrel-run: cannot run the launch agent '{}' to reach host {host}: {e}; \
                         install it or choose another with --launch-agent",
                        head.plan.agent.join(" ")
                    );
                    head.fail(2, grace_ms);
                }
            }
        }
    }

    // Wait for every remote daemon to call back before any rank starts.
    let connect_deadline = Instant::now() + daemon_timeout;
    let mut interrupted: Option<i32> = None;
    while head.exit_code.is_none() && machines.len() < head.plan.hosts.len() {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(HeadEvent::Connected(h, tx, machine, cpus)) => {
                    head.agents[h] = Some(tx);
                    machines.insert(h, (machine, cpus));
                }
                Some(HeadEvent::AgentProcessExited(h, how)) if !machines.contains_key(&h) => {
                    head.agent_processes.remove(&h);
                    let host = &head.plan.hosts[h].name;
                    eprintln!(
                        "kestrel-run: the daemon for host {host} ended before connecting back: {how}. \
                         Check that `{} true` works without prompting, and that kestrel-run is at \
                         the same path there (or set --mca launch_daemon_path)",
                        agent_command(&head.plan.agent, host).join(" ")
                    );
                    head.fail(2, grace_ms);
                }
                Some(_) => {}
                None => break,
            },
            _ = tokio::time::sleep_until(connect_deadline) => {
                let missing: Vec<&str> = (0..head.plan.hosts.len())
                    .filter(|h| !machines.contains_key(h))
                    .map(|h| head.plan.hosts[h].name.as_str())
                    .collect();
                eprintln!(
                    "kestrel-run: no answer within {} s from the daemon on {}; the host may be \
                     unreachable or unable to connect back to this one (firewall?). Raise \
                     --mca launch_daemon_timeout if it is only slow",
                    daemon_timeout.as_secs(),
                    missing.join(", ")
                );
                head.fail(2, grace_ms);
            }
            _ = recv_signal(&mut sigint) => { interrupted = Some(2); head.fail(130, grace_ms); }
            _ = recv_signal(&mut sigterm) => { interrupted = Some(15); head.fail(143, grace_ms); }
        }
    }
    if let Some(sig) = interrupted {
        eprintln!("kestrel-run: interrupted by signal {sig} while starting the daemons");
    }

    if head.exit_code.is_none() {
        // Yield-when-idle: ranks outnumber the cores of the machine they share.
        let mut hosts_per_machine: BTreeMap<String, u32> = BTreeMap::new();
        for (machine, _) in machines.values() {
            *hosts_per_machine.entry(machine.clone()).or_insert(0) += 1;
        }
        let mut per_machine: BTreeMap<String, (u32, u32)> = BTreeMap::new();
        for (h, (machine, cpus)) in &machines {
            let e = per_machine.entry(machine.clone()).or_insert((0, *cpus));
            e.0 += head.plan.hosts[*h].ranks.len() as u32;
        }
        let user_set = opts.mca.iter().any(|(n, _)| n == "yield_when_idle")
            || opts.env.iter().any(|(n, _)| n == "KESTREL_YIELD_WHEN_IDLE")
            || std::env::var_os("KESTREL_YIELD_WHEN_IDLE").is_some();
        let mut base_env: Vec<(String, String)> = opts.env.clone();
        for (name, value) in &opts.mca {
            base_env.push((params::mca_env_var_for(name), value.clone()));
        }
        for h in 0..head.plan.hosts.len() {
            let Some((machine, _)) = machines.get(&h) else {
                continue;
            };
            let (ranks_here, cpus) = per_machine[machine];
            let mut env = base_env.clone();
            if ranks_here > cpus && !user_set {
                tracing::debug!(target: "launcher", ranks_here, cpus, "oversubscribed: turning on yield_when_idle");
                env.push((params::auto_env_var_for("yield_when_idle"), "true".into()));
            }
            let host = &head.plan.hosts[h];
            let launch = NodeLaunch {
                job_id: head.plan.job_id.clone(),
                host_index: h as u32,
                host_name: host.name.clone(),
                size: head.plan.size,
                ranks: host.ranks.clone(),
                process_mapping: mapping.clone(),
                program: opts.program.clone(),
                args: opts.args.clone(),
                more_apps: {
                    let mut first = opts.np.unwrap_or(0);
                    opts.more_apps
                        .iter()
                        .map(|a| {
                            let entry = (first, a.program.clone(), a.args.clone());
                            first += a.np;
                            entry
                        })
                        .collect()
                },
                wdir: opts.wdir.clone().unwrap_or_default(),
                launch_agent: head.plan.agent.join(" "),
                env,
                // Namespace hosts of one machine would bind their ranks to the same cores, and
                // oversubscribed ranks must be free to move: auto binds only when neither holds.
                bind_cores: match opts.bind {
                    Bind::Core => true,
                    Bind::None => false,
                    Bind::Auto => ranks_here <= cpus && hosts_per_machine[machine] == 1,
                },
                // As many of the cores asked for per rank as the machine has for each of
                // its ranks (a domain of their own each, never shared).
                cpus_per_rank: head.plan.cpus_per_rank.min(cpus / ranks_here.max(1)).max(1),
                report_bindings: opts.report_bindings,
                tag_output: opts.tag_output,
                kill_grace_ms: grace_ms as u32,
                forward_stdin: host.local,
            };
            if let Some(a) = &head.agents[h] {
                let _ = a.send(ToAgent::Launch(Box::new(launch)));
            }
        }
    } else {
        head.broadcast(ToAgent::Shutdown);
        head.all_finished();
    }

    let timeout_at = opts.timeout.map(|t| Instant::now() + t);
    let mut timed_out = false;
    let mut stop_deadline: Option<Instant> = None;
    let mut shutdown_sent = head.all_done();
    let mut bye_deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if head.stopping && stop_deadline.is_none() {
            stop_deadline = Some(
                Instant::now() + Duration::from_millis(grace_ms as u64) + Duration::from_secs(3),
            );
        }
        if head.all_done() && !shutdown_sent {
            shutdown_sent = true;
            bye_deadline = Instant::now() + Duration::from_secs(5);
            head.broadcast(ToAgent::Shutdown);
        }
        if shutdown_sent
            && (0..head.plan.hosts.len()).all(|h| head.bye.contains(&h) || head.agents[h].is_none())
        {
            break;
        }
        tokio::select! {
            ev = events.recv() => match ev {
                Some(HeadEvent::Agent(h, msg)) => handle_agent(&mut head, h, msg, grace_ms),
                Some(HeadEvent::AgentLost(h)) => agent_gone(&mut head, h, grace_ms),
                Some(HeadEvent::AgentProcessExited(h, _)) => {
                    head.agent_processes.remove(&h);
                    agent_gone(&mut head, h, grace_ms);
                }
                Some(HeadEvent::Connected(..)) => {}
                None => break,
            },
            _ = sleep_until_opt(timeout_at.filter(|_| !head.stopping && !timed_out)) => {
                timed_out = true;
                let secs = opts.timeout.map(|t| t.as_secs_f64()).unwrap_or(0.0);
                eprintln!(
                    "kestrel-run: the job exceeded --timeout {secs:.1} s; still running: {}",
                    head.describe_running()
                );
                request_report(&mut head, format!("--timeout {secs:.1} s expired"), true, opts.timeout_stacks, grace_ms);
            }
            _ = sleep_until_opt(head.report.as_ref().map(|r| r.deadline)) => finish_report(&mut head, grace_ms),
            _ = recv_signal(&mut sigusr1) => {
                request_report(&mut head, "SIGUSR1".into(), false, opts.timeout_stacks, grace_ms);
            }
            _ = sleep_until_opt(stop_deadline.filter(|_| !shutdown_sent)) => {
                let survivors = head.describe_survivors();
                if !survivors.is_empty() {
                    eprintln!("kestrel-run: these ranks did not stop after SIGKILL: {survivors}");
                }
                head.all_finished();
            }
            _ = sleep_until_opt(Some(bye_deadline).filter(|_| shutdown_sent)) => {
                eprintln!("kestrel-run: some daemons did not confirm their cleanup; exiting anyway");
                break;
            }
            _ = recv_signal(&mut sigint) => interrupt(&mut head, "SIGINT", 2, grace_ms),
            _ = recv_signal(&mut sigterm) => interrupt(&mut head, "SIGTERM", 15, grace_ms),
            _ = recv_signal(&mut sighup) => interrupt(&mut head, "SIGHUP", 1, grace_ms),
        }
    }
    // Launch agents that relay their host's output (srun, ssh) may still hold its last lines
    // after the daemon said goodbye: let them finish, then kill the stragglers on drop.
    let drain_deadline =
        Instant::now() + Duration::from_millis(crate::params::AGENT_DRAIN_MS.get(&params) as u64);
    while !head.agent_processes.is_empty() {
        tokio::select! {
            ev = events.recv() => match ev {
                Some(HeadEvent::AgentProcessExited(h, _)) => {
                    head.agent_processes.remove(&h);
                }
                Some(_) => {}
                None => break,
            },
            _ = tokio::time::sleep_until(drain_deadline) => {
                tracing::debug!(target: "launcher", hosts = ?head.agent_processes, "launch agents still running after the job; killing them");
                break;
            }
        }
    }
    // The head-local agents cleaned up on Shutdown; remote daemons did on theirs. A lost daemon
    // on a shared machine leaves its files: remove what we can see from here.
    session::remove_job_files(&head.plan.job_id, None, &[]);
    if let Some(g) = guard {
        g.finish();
    }
    head.exit_code.unwrap_or(0)
}

/// Host `h`'s agent is gone (connection closed or its process exited): fine after its
/// goodbye, a failure of the job while ranks still ran there.
fn agent_gone(head: &mut Head, h: usize, grace_ms: i64) {
    if head.agents[h].take().is_some() && !head.bye.contains(&h) {
        let lost: Vec<u32> = head.plan.hosts[h]
            .ranks
            .iter()
            .copied()
            .filter(|&r| head.ranks[r as usize] != RankState::Done)
            .collect();
        if !lost.is_empty() {
            eprintln!(
                "kestrel-run: lost contact with the daemon on {} while {} rank{} still ran there",
                head.plan.hosts[h].name,
                lost.len(),
                if lost.len() == 1 { "" } else { "s" }
            );
            for r in lost {
                head.set_state(r, RankState::Done);
            }
            head.fail(1, grace_ms);
        }
    }
    head.bye.insert(h);
}

/// Asks every host with running ranks for their state; the table is printed when all
/// answered or the gathering time is over, and then the job stops if `then_stop`.
fn request_report(head: &mut Head, why: String, then_stop: bool, stacks: bool, grace_ms: i64) {
    if let Some(pending) = head.report.as_mut() {
        // A timeout during a SIGUSR1 report still stops the job once it is printed.
        pending.then_stop |= then_stop;
        return;
    }
    let hosts: HashSet<usize> = (0..head.plan.hosts.len())
        .filter(|&h| head.agents[h].is_some())
        .filter(|&h| {
            head.plan.hosts[h]
                .ranks
                .iter()
                .any(|&r| matches!(head.ranks[r as usize], RankState::Running(_)))
        })
        .collect();
    for &h in &hosts {
        if let Some(Some(agent)) = head.agents.get(h) {
            let _ = agent.send(ToAgent::Report { stacks });
        }
    }
    let nobody = hosts.is_empty();
    head.report = Some(PendingReport::new(hosts, why, then_stop, stacks));
    if nobody {
        finish_report(head, grace_ms);
    }
}

/// Prints the gathered report (whatever arrived) and stops the job if it was a timeout's.
fn finish_report(head: &mut Head, grace_ms: i64) {
    let Some(report) = head.report.take() else {
        return;
    };
    let then_stop = report.then_stop;
    let names: Vec<String> = head.plan.hosts.iter().map(|h| h.name.clone()).collect();
    let table = report.render(&|h| names.get(h).cloned().unwrap_or_else(|| h.to_string()));
    eprint!("{table}");
    if then_stop {
        head.fail(124, grace_ms);
    }
}

fn interrupt(head: &mut Head, name: &str, signo: i32, grace_ms: i64) {
    if head.stopping {
        eprintln!("kestrel-run: {name} again; killing every rank now");
        head.broadcast(ToAgent::Kill);
        return;
    }
    eprintln!("kestrel-run: interrupted by {name}");
    head.fail(128 + signo, grace_ms);
}

fn handle_agent(head: &mut Head, h: usize, msg: ToHead, grace_ms: i64) {
    match msg {
        ToHead::Started { rank, pid } => {
            head.set_state(rank, RankState::Running(pid));
            if head.stopping {
                // Started after the job began to stop: make sure it is stopped too.
                if let Some(Some(a)) = head.agents.get(h) {
                    let _ = a.send(ToAgent::Kill);
                }
            }
        }
        ToHead::SpawnFailed { rank, error } => {
            head.set_state(rank, RankState::Done);
            if !head.stopping {
                eprintln!("kestrel-run: rank {rank}: {error}");
                let code = if error.contains("not found") {
                    127
                } else {
                    126
                };
                head.fail(code, grace_ms);
            }
        }
        ToHead::Fence { puts } => {
            head.fenced.insert(h);
            head.fence_puts.extend(puts);
            let live_hosts: Vec<usize> = (0..head.plan.hosts.len())
                .filter(|&x| head.agents[x].is_some())
                .collect();
            if live_hosts.iter().all(|x| head.fenced.contains(x)) {
                let puts = std::mem::take(&mut head.fence_puts);
                head.fenced.clear();
                head.broadcast(ToAgent::FenceDone { puts });
            }
        }
        ToHead::Exited {
            rank,
            pid,
            status,
            pmi,
        } => {
            if rank as usize >= head.ranks.len() {
                return;
            }
            head.set_state(rank, RankState::Done);
            if head.stopping {
                return;
            }
            let host = head.host_of(rank).to_string();
            let others_running = head.live > 0;
            match status {
                RankStatus::Code(0) if pmi == PmiState::Initialized && others_running => {
                    eprintln!(
                        "kestrel-run: rank {rank} (pid {pid} on {host}) exited with status 0 \
                         without finalizing while other ranks still run; stopping the job so \
                         they do not wait for it forever"
                    );
                    head.fail(1, grace_ms);
                }
                RankStatus::Code(0) => {}
                RankStatus::Code(c) => {
                    eprintln!(
                        "kestrel-run: rank {rank} (pid {pid} on {host}) {}",
                        describe_status(status)
                    );
                    head.fail(c, grace_ms);
                }
                RankStatus::Signal(s) => {
                    eprintln!(
                        "kestrel-run: rank {rank} (pid {pid} on {host}) {}",
                        describe_status(status)
                    );
                    head.fail(128 + s, grace_ms);
                }
            }
        }
        ToHead::Abort {
            rank,
            code,
            message,
        } => {
            if !head.stopping {
                let pid = match head.ranks.get(rank as usize) {
                    Some(RankState::Running(p)) => p.to_string(),
                    _ => "?".into(),
                };
                let host = head.host_of(rank).to_string();
                eprintln!(
                    "kestrel-run: rank {rank} (pid {pid} on {host}) aborted the job with code {code}{}{}",
                    if message.is_empty() { "" } else { ": " },
                    message
                );
                // The job ends with the code given, 0 included, as with mpiexec and mpirun.
                head.fail(code, grace_ms);
            }
        }
        ToHead::Bye => {
            head.bye.insert(h);
        }
        ToHead::Report { ranks } => {
            let host = head.plan.hosts[h].name.clone();
            let complete = match head.report.as_mut() {
                Some(report) => report.add(h, &host, ranks),
                None => false,
            };
            if complete {
                finish_report(head, grace_ms);
            }
        }
        ToHead::Hello { .. } => {}
    }
}

fn describe_exit_status(s: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (Some(c), _) => describe_status(RankStatus::Code(c)),
        (None, Some(sig)) => describe_status(RankStatus::Signal(sig)),
        _ => "ended".into(),
    }
}

/// The command that runs `COMMAND...` on `host`: `ssh host`, `ip netns exec host`, or srun's
/// one-task step on that node.
pub fn agent_command(agent: &[String], host: &str) -> Vec<String> {
    let is_srun = agent
        .first()
        .map(|w| {
            std::path::Path::new(w)
                .file_name()
                .map(|n| n == "srun")
                .unwrap_or(false)
        })
        .unwrap_or(false);
    let mut words: Vec<String> = agent.to_vec();
    if is_srun {
        words.extend(
            [
                "--nodes=1",
                "--ntasks=1",
                "--overlap",
                "--mpi=none",
                "--kill-on-bad-exit=0",
            ]
            .iter()
            .map(|s| s.to_string()),
        );
        words.push(format!("--nodelist={host}"));
    } else {
        words.push(host.to_string());
    }
    words
}

/// Whether process `pid` of this host exists and is not a zombie waiting to be reaped.
fn process_exists(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "PID (COMM) STATE ...": the state follows the last ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(|state| state != "Z" && state != "X")
            .unwrap_or(true),
        Err(_) => false,
    }
}

async fn recv_signal(s: &mut Option<tokio::signal::unix::Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending().await,
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

/// IPv4 addresses of this host that daemons may use to call back, loopback last.
pub fn local_ipv4_addresses() -> Vec<std::net::Ipv4Addr> {
    let mut addrs: Vec<std::net::Ipv4Addr> = Vec::new();
    if let Ok(ifaces) = nix::ifaddrs::getifaddrs() {
        for ifa in ifaces {
            if let Some(sin) = ifa.address.as_ref().and_then(|a| a.as_sockaddr_in()) {
                let ip = sin.ip();
                if !addrs.contains(&ip) {
                    addrs.push(ip);
                }
            }
        }
    }
    addrs.sort_by_key(|a| a.is_loopback());
    if addrs.is_empty() {
        addrs.push(std::net::Ipv4Addr::LOCALHOST);
    }
    addrs
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_commands() {
        let ssh = vec!["ssh".to_string()];
        assert_eq!(agent_command(&ssh, "n1"), vec!["ssh", "n1"]);
        let netns: Vec<String> = vec!["ip".into(), "netns".into(), "exec".into()];
        assert_eq!(
            agent_command(&netns, "h1"),
            vec!["ip", "netns", "exec", "h1"]
        );
        let srun = vec!["/usr/bin/srun".to_string()];
        let words = agent_command(&srun, "n2");
        assert!(
            words.contains(&"--nodelist=n2".to_string())
                && words.contains(&"--ntasks=1".to_string())
        );
    }
}
