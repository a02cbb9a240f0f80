//! What this machine is: its host name, the identity it shares with every namespace of the
//! same kernel, and the CPUs this process may run on.
//!
//! The launcher (placement, binding), the name service (is a publisher's machine this one?)
//! and the rank side (node ids) all ask these questions; answering them here keeps those
//! modules from depending on one another. This module only reads the system: it never
//! decides anything from the answers.

use nix::unistd::Pid;

/// The host name, or `localhost` if it cannot be read.
pub fn hostname() -> String {
    nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .unwrap_or_else(|| "localhost".into())
}

/// Identity of this machine: hosts that are namespaces of one machine share cores.
pub fn machine_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| hostname())
}

/// CPUs this process may run on.
pub fn available_cpus() -> Vec<usize> {
    match nix::sched::sched_getaffinity(Pid::from_raw(0)) {
        Ok(set) => (0..nix::sched::CpuSet::count())
            .filter(|&c| set.is_set(c).unwrap_or(false))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1))
            .collect(),
    }
}
