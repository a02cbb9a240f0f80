//! A private Slurm cluster (one node, or one per network-namespace host) made by `ci/slurm-cluster` for the duration of a test, and
//! torn down when the guard drops (also when the test fails).
//!
//! One cluster exists at a time: the guard holds an exclusive lock on
//! `/tmp/kestrel-slurm-tests.lock` for its lifetime (waiting at most ten minutes for it), so tests of one binary, and of concurrent
//! test runs, take turns. The cluster lives in a fixed directory and on its own ports (not
//! Slurm's defaults, so a cluster someone started by hand with the script's defaults is left
//! alone); a cluster that a killed earlier run left there is taken down first.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the test cluster lives.
const DIR: &str = "/tmp/kestrel-slurm-tests";
/// Held while a test uses the cluster.
const LOCK: &str = "/tmp/kestrel-slurm-tests.lock";
/// How long a test waits for another to finish with the cluster.
const LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(600);
/// slurmctld's port (slurmd uses the next one).
const PORT: &str = "6917";
/// Programs the cluster needs, with their Debian packages.
const PROGRAMS: &[(&str, &str)] = &[
    ("slurmctld", "slurmctld"),
    ("slurmd", "slurmd"),
    ("srun", "slurm-client"),
    ("salloc", "slurm-client"),
    ("sbatch", "slurm-client"),
    ("munged", "munge"),
];

fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ci/slurm-cluster")
}

fn on_path(name: &str) -> bool {
    std::env::var("PATH")
        .unwrap_or_default()
        .split(':')
        .any(|d| Path::new(d).join(name).exists())
}

/// A running cluster; dropping it stops the daemons and removes its directory.
pub struct Cluster {
    nodes: Vec<String>,
    first_job_id: u64,
    down: bool,
    _lock: File,
}

impl Cluster {
    /// Starts a cluster whose node is called `node` (`None`: this machine's short host name).
    ///
    /// Returns `None`, after a loud message on stderr, only when Slurm is not installed and the
    /// test is not running in CI; in CI (`CI` set, as `.ci/run` has it) a missing Slurm is a
    /// failure, because `ci/setup.sh` installs it.
    pub fn up(test: &str, node: Option<&str>) -> Option<Cluster> {
        let node = node.map(String::from).unwrap_or_else(|| {
            let h = nix::unistd::gethostname()
                .ok()
                .and_then(|h| h.into_string().ok())
                .expect("this machine's host name");
            h.split('.').next().unwrap_or(&h).to_string()
        });
        Self::start(test, vec![("KESTREL_SLURM_NODE", node.clone())], vec![node])
    }

    /// Starts a cluster with one node per host of `hosts` (named like the hosts, each with its
    /// slurmd inside the host's network namespace). Same skipping rule as [`Cluster::up`].
    pub fn on_netns_hosts(test: &str, hosts: &crate::netns::Cluster) -> Option<Cluster> {
        let names = hosts.hosts().to_vec();
        let prefix = names[0]
            .strip_suffix("h0")
            .expect("namespace hosts are named PREFIXh0, PREFIXh1...")
            .to_string();
        let env = vec![
            ("KESTREL_SLURM_NETNS", prefix),
            ("KESTREL_SLURM_NETNS_COUNT", names.len().to_string()),
        ];
        Self::start(test, env, names)
    }

    fn start(test: &str, env: Vec<(&str, String)>, nodes: Vec<String>) -> Option<Cluster> {
        let missing: Vec<String> = PROGRAMS
            .iter()
            .filter(|(p, _)| !on_path(p))
            .map(|(p, pkg)| format!("{p} ({pkg})"))
            .collect();
        if !missing.is_empty() {
            let msg = format!(
                "Slurm is not installed (missing {}); `bash ci/setup.sh` installs slurm-wlm and \
                 munge",
                missing.join(", ")
            );
            assert!(std::env::var_os("CI").is_none(), "{msg}");
            eprintln!("\n*** SKIPPED {test}: {msg} ***\n");
            return None;
        }
        let lock = File::create(LOCK).expect("create the Slurm test lock");
        // Bounded: a holder that never lets go must fail this test, not hang it.
        let waited = std::time::Instant::now();
        loop {
            match lock.try_lock() {
                Ok(()) => break,
                Err(std::fs::TryLockError::WouldBlock) if waited.elapsed() < LOCK_WAIT => {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                Err(e) => panic!(
                    "{LOCK} still held after {LOCK_WAIT:?} ({e}): another test run is using the \
                     Slurm test cluster, or hangs (see `pgrep -af slurm`)"
                ),
            }
        }
        let _ = Command::new(script()).args(["down", DIR]).output();
        // Job ids start somewhere new for every cluster: /dev/shm files are named after them,
        // and the leftover check below looks only at this cluster's range.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos() as u64 ^ d.as_secs())
            .unwrap_or(0);
        let first_job_id = 1_000_000 + (nanos ^ (std::process::id() as u64) << 7) % 50_000_000;
        let mut cmd = Command::new(script());
        cmd.args(["up", DIR])
            .env("KESTREL_SLURM_PORT", PORT)
            .env("KESTREL_SLURM_FIRST_JOB_ID", first_job_id.to_string());
        for var in [
            "KESTREL_SLURM_NODE",
            "KESTREL_SLURM_NETNS",
            "KESTREL_SLURM_NETNS_COUNT",
            "KESTREL_SLURM_CPUS",
        ] {
            cmd.env_remove(var);
        }
        cmd.envs(env);
        let out = cmd.output().expect("run ci/slurm-cluster");
        assert!(
            out.status.success(),
            "ci/slurm-cluster up failed (needs root):\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        Some(Cluster {
            nodes,
            first_job_id,
            down: false,
            _lock: lock,
        })
    }

    /// The (first) node's Slurm name.
    pub fn node(&self) -> &str {
        &self.nodes[0]
    }

    /// Every node's Slurm name.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    /// A Slurm client command (`srun`, `salloc`, `sbatch`...) aimed at this cluster, with no
    /// Slurm or PMI variable inherited from whatever started the tests.
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new(program);
        for (k, _) in std::env::vars_os() {
            let k = k.to_string_lossy().into_owned();
            if k.starts_with("SLURM_") || k.starts_with("PMI_") || k.starts_with("KESTREL_") {
                c.env_remove(&k);
            }
        }
        c.env("SLURM_CONF", format!("{DIR}/slurm.conf"));
        c
    }

    /// Shared-memory and session files named after a job of this cluster (`kestrel.<job>_*`).
    pub fn job_files(&self) -> Vec<String> {
        let range = self.first_job_id..self.first_job_id + 10_000;
        crate::job_files()
            .into_iter()
            .filter(|f| {
                let name = f.rsplit('/').next().unwrap_or("");
                name.strip_prefix("kestrel.")
                    .and_then(|rest| rest.split('_').next())
                    .and_then(|id| id.parse::<u64>().ok())
                    .is_some_and(|id| range.contains(&id))
            })
            .collect()
    }

    /// Stops the cluster and reports what it left: processes still mentioning its directory
    /// and whether the directory is still there. Empty when clean.
    pub fn shut_down(mut self) -> Vec<String> {
        self.down = true;
        let out = Command::new(script())
            .args(["down", DIR])
            .output()
            .expect("run ci/slurm-cluster down");
        let mut left = Vec::new();
        if !out.status.success() {
            left.push(format!(
                "ci/slurm-cluster down failed: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        for pid in crate::processes_matching(DIR) {
            left.push(format!("process {pid} still mentions {DIR}"));
        }
        for pid in processes_holding_files_in(DIR) {
            left.push(format!(
                "process {pid} (slurmstepd?) still holds files of {DIR}"
            ));
        }
        if Path::new(DIR).exists() {
            left.push(format!("{DIR} still exists"));
        }
        left
    }
}

/// Pids of processes with a file under `dir` open (slurmstepd keeps the cluster's log and spool
/// files open, and its command line does not name them).
fn processes_holding_files_in(dir: &str) -> Vec<u32> {
    let me = std::process::id();
    let prefix = format!("{dir}/");
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(fds) = std::fs::read_dir(entry.path().join("fd")) else {
            continue;
        };
        let holds = fds.flatten().any(|fd| {
            std::fs::read_link(fd.path())
                .map(|target| target.to_string_lossy().starts_with(&prefix))
                .unwrap_or(false)
        });
        if holds {
            out.push(pid);
        }
    }
    out
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if !self.down {
            let _ = Command::new(script()).args(["down", DIR]).output();
        }
    }
}
