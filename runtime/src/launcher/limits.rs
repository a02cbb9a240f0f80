//! What a host can take before its ranks are forked: processes (the kernel's task limits and
//! this user's `ulimit -u`), file descriptors (the launcher's own, per rank) and shared memory
//! (what the shm transport will reserve in its directory).
//!
//! It owns the arithmetic and the wording of the refusal. It reads the machine's state
//! ([`Machine::read`]) but never changes anything except raising the launcher's own soft
//! descriptor limit towards the hard one, and it never forks: the agent asks it before the
//! first rank starts, so an impossible job fails at once with numbers instead of half-starting.

use std::path::PathBuf;

/// Descriptors the launcher holds per rank it starts: the PMI socket, the stdout and stderr
/// pipes it forwards, and one spare (a pidfd or a terminal copy).
pub const FDS_PER_RANK: u64 = 4;
/// Descriptors the launcher needs whatever the rank count (its own streams, listeners, the
/// event loop, daemons' links).
pub const FDS_BASE: u64 = 64;
/// Tasks the kernel should still have free after the job started (other users, the shell
/// that waits for the job), so that a job never takes the machine's last processes.
pub const TASK_HEADROOM: u64 = 256;

/// The machine's limits and current use that bound a job on it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Machine {
    /// Tasks (threads) running on the machine now.
    pub tasks_now: Option<u64>,
    /// `kernel.threads-max` and `kernel.pid_max`, the lower of the two.
    pub tasks_max: Option<u64>,
    /// This user's `RLIMIT_NPROC` soft limit (`None`: unlimited or not enforced, as for root).
    pub user_tasks_max: Option<u64>,
    /// Tasks this user runs now (counted only when `user_tasks_max` is set).
    pub user_tasks_now: u64,
    /// The launcher's descriptor limits (soft, hard); `None` for unlimited.
    pub fds: (Option<u64>, Option<u64>),
    /// Free bytes in the shared-memory directory, when the job uses one.
    pub shm_free: Option<u64>,
}

/// What a job asks of one host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostNeeds {
    /// The host's name, for the message.
    pub host: String,
    /// Ranks to start there.
    pub ranks: u32,
    /// The shared-memory directory and the bytes the job's segments take there.
    pub shm: Option<(PathBuf, u64)>,
}

impl HostNeeds {
    /// Descriptors the launcher (or daemon) of this host needs.
    pub fn fds(&self) -> u64 {
        FDS_BASE + FDS_PER_RANK * u64::from(self.ranks)
    }
}

/// Why a host cannot take the job, with the numbers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal(pub String);

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

fn bytes(n: u64) -> String {
    const UNITS: [(&str, u64); 4] = [
        ("TiB", 1 << 40),
        ("GiB", 1 << 30),
        ("MiB", 1 << 20),
        ("KiB", 1 << 10),
    ];
    for (unit, size) in UNITS {
        if n >= size {
            return format!("{:.1} {unit}", n as f64 / size as f64);
        }
    }
    format!("{n} B")
}

/// Checks `needs` against `machine`; the first limit the job would break, explained.
pub fn check(needs: &HostNeeds, machine: &Machine) -> Result<(), Refusal> {
    let ranks = u64::from(needs.ranks);
    let prefix = format!("cannot start {} ranks on {}", needs.ranks, needs.host);
    if let (Some(now), Some(max)) = (machine.tasks_now, machine.tasks_max) {
        if now + ranks + TASK_HEADROOM > max {
            return Err(Refusal(format!(
                "{prefix}: the kernel allows {max} tasks (the lower of kernel.threads-max and \
                 kernel.pid_max), {now} run now, and the job needs at least one per rank with \
                 {TASK_HEADROOM} left for everyone else; start fewer ranks or spread them over \
                 more hosts"
            )));
        }
    }
    if let Some(max) = machine.user_tasks_max {
        let now = machine.user_tasks_now;
        if now + ranks > max {
            return Err(Refusal(format!(
                "{prefix}: this user may run {max} tasks (ulimit -u) and runs {now} now; start \
                 fewer ranks or raise the limit (ulimit -u, or nproc in \
                 /etc/security/limits.conf)"
            )));
        }
    }
    if let Some(hard) = machine.fds.1 {
        let need = needs.fds();
        if need > hard {
            return Err(Refusal(format!(
                "{prefix}: the launcher needs {need} file descriptors ({FDS_PER_RANK} per rank \
                 + {FDS_BASE}) and may open at most {hard} (ulimit -Hn); start fewer ranks or \
                 raise the hard limit (nofile in /etc/security/limits.conf)"
            )));
        }
    }
    if let (Some((dir, need)), Some(free)) = (&needs.shm, machine.shm_free) {
        if *need > free {
            return Err(Refusal(format!(
                "{prefix}: the shm transport needs {} of shared memory in {} for them ({} per \
                 rank), which has {} free; start fewer ranks per host, enlarge {} (docker \
                 --shm-size, or mount -o remount,size=...), set KESTREL_SHM_DIR to a larger \
                 tmpfs, or leave shared memory out with --mca btl ^shm",
                bytes(*need),
                dir.display(),
                bytes(need / ranks.max(1)),
                bytes(free),
                dir.display()
            )));
        }
    }
    Ok(())
}

impl Machine {
    /// Reads this machine's limits and use; `shm_dir` is where the job's segments would go.
    /// Whatever cannot be read is left unknown (and then not checked).
    pub fn read(shm_dir: Option<&std::path::Path>) -> Machine {
        use nix::sys::resource::{getrlimit, Resource, RLIM_INFINITY};
        let finite = |v: u64| (v != RLIM_INFINITY).then_some(v);
        let read_u64 = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .and_then(|t| t.trim().parse::<u64>().ok())
        };
        // /proc/loadavg: "0.00 0.01 0.05 RUNNING/TASKS LASTPID".
        let tasks_now = std::fs::read_to_string("/proc/loadavg").ok().and_then(|t| {
            let field = t.split_whitespace().nth(3)?.to_string();
            field.split_once('/')?.1.parse::<u64>().ok()
        });
        let tasks_max = match (
            read_u64("/proc/sys/kernel/threads-max"),
            read_u64("/proc/sys/kernel/pid_max"),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // The kernel does not apply RLIMIT_NPROC to root (CAP_SYS_RESOURCE / CAP_SYS_ADMIN).
        let user_tasks_max = if nix::unistd::getuid().is_root() {
            None
        } else {
            getrlimit(Resource::RLIMIT_NPROC)
                .ok()
                .and_then(|(soft, _)| finite(soft))
        };
        let user_tasks_now = if user_tasks_max.is_some() {
            tasks_of_user(nix::unistd::getuid().as_raw())
        } else {
            0
        };
        let fds = getrlimit(Resource::RLIMIT_NOFILE)
            .map(|(soft, hard)| (finite(soft), finite(hard)))
            .unwrap_or((None, None));
        let shm_free = shm_dir.and_then(|d| {
            nix::sys::statvfs::statvfs(d)
                .ok()
                .map(|st| st.blocks_available() * st.fragment_size())
        });
        Machine {
            tasks_now,
            tasks_max,
            user_tasks_max,
            user_tasks_now,
            fds,
            shm_free,
        }
    }
}

/// Tasks (threads) of the processes whose real owner is `uid`, as `RLIMIT_NPROC` counts them.
fn tasks_of_user(uid: u32) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut total = 0;
    for entry in dir.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if entry.metadata().map(|m| m.uid()).ok() != Some(uid) {
            continue;
        }
        // /proc/PID/status has "Threads:\tN".
        let threads = std::fs::read_to_string(entry.path().join("status"))
            .ok()
            .and_then(|s| {
                s.lines()
                    .find_map(|l| l.strip_prefix("Threads:"))
                    .and_then(|v| v.trim().parse::<u64>().ok())
            })
            .unwrap_or(1);
        total += threads;
    }
    total
}

/// Raises this process's soft descriptor limit to what `needs` takes (at most the hard
/// limit), so that a job the hard limit allows does not fail at its thousandth rank. Ranks
/// inherit the raised soft limit.
pub fn raise_fd_limit(needs: &HostNeeds) {
    use nix::sys::resource::{getrlimit, setrlimit, Resource, RLIM_INFINITY};
    let Ok((soft, hard)) = getrlimit(Resource::RLIMIT_NOFILE) else {
        return;
    };
    let need = needs.fds();
    if soft != RLIM_INFINITY && soft < need {
        let target = if hard == RLIM_INFINITY {
            need
        } else {
            need.min(hard)
        };
        if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, target, hard) {
            tracing::warn!(target: "launcher", "cannot raise the descriptor limit from {soft} to {target}: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn needs(ranks: u32, shm: Option<u64>) -> HostNeeds {
        HostNeeds {
            host: "node1".into(),
            ranks,
            shm: shm.map(|b| (PathBuf::from("/dev/shm"), b)),
        }
    }

    fn roomy() -> Machine {
        Machine {
            tasks_now: Some(300),
            tasks_max: Some(100_000),
            user_tasks_max: Some(5000),
            user_tasks_now: 100,
            fds: (Some(1024), Some(524_288)),
            shm_free: Some(12 << 30),
        }
    }

    #[test]
    fn a_job_that_fits_passes() {
        assert_eq!(check(&needs(64, Some(256 << 20)), &roomy()), Ok(()));
        // Unknown limits are not checked.
        assert_eq!(
            check(&needs(1_000_000, Some(u64::MAX)), &Machine::default()),
            Ok(())
        );
    }

    #[test]
    fn each_limit_refuses_with_its_numbers() {
        let m = roomy();
        let e = check(&needs(99_500, None), &m).unwrap_err().0;
        assert!(
            e.contains("cannot start 99500 ranks on node1")
                && e.contains("allows 100000 tasks")
                && e.contains("300 run now"),
            "{e}"
        );
        let e = check(&needs(4_901, None), &m).unwrap_err().0;
        assert!(
            e.contains("may run 5000 tasks (ulimit -u)") && e.contains("runs 100 now"),
            "{e}"
        );
        assert_eq!(check(&needs(4_900, None), &m), Ok(()));
        let small_fds = Machine {
            fds: (Some(1024), Some(4096)),
            user_tasks_max: None,
            ..m.clone()
        };
        let e = check(&needs(1009, None), &small_fds).unwrap_err().0;
        assert!(
            e.contains("needs 4100 file descriptors") && e.contains("at most 4096"),
            "{e}"
        );
        assert_eq!(check(&needs(1008, None), &small_fds), Ok(()));
        let e = check(&needs(16, Some(13 << 30)), &m).unwrap_err().0;
        assert!(
            e.contains("needs 13.0 GiB of shared memory in /dev/shm")
                && e.contains("which has 12.0 GiB free")
                && e.contains("--mca btl ^shm"),
            "{e}"
        );
    }

    #[test]
    fn this_machine_reads() {
        let m = Machine::read(Some(std::path::Path::new("/tmp")));
        assert!(m.tasks_now.unwrap_or(1) > 0);
        assert!(m.shm_free.is_some());
        assert!(check(&needs(1, Some(1)), &m).is_ok(), "{m:?}");
    }
}
