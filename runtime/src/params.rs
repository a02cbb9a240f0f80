//! Parameters owned by the runtime (PMI client and launcher).

use kestrel_transport::params::{Param, ParamKind, ParamSpec};

/// `KESTREL_PMI`: which PMI client a rank uses.
pub static PMI: Param<String> = Param::new(ParamSpec {
    name: "pmi",
    component: "pmi",
    kind: ParamKind::Choice(&["auto", "pmi1", "pmi2", "singleton"]),
    default: "auto",
    description: "PMI client: auto (PMI-2 if the launcher offers it, else PMI-1; singleton without a launcher), pmi1, pmi2, singleton.",
});

/// `KESTREL_LAUNCH_KILL_GRACE_MS`: SIGTERM-to-SIGKILL delay when the launcher stops a job.
pub static KILL_GRACE_MS: Param<i64> = Param::new(ParamSpec {
    name: "launch_kill_grace_ms",
    component: "launcher",
    kind: ParamKind::Int {
        min: 0,
        max: 60_000,
    },
    default: "1000",
    description:
        "Milliseconds between SIGTERM and SIGKILL when kestrel-run stops the ranks of a failed job.",
});

/// `KESTREL_LAUNCH_DAEMON_TIMEOUT`: how long remote daemons may take to call back.
pub static DAEMON_TIMEOUT_S: Param<i64> = Param::new(ParamSpec {
    name: "launch_daemon_timeout",
    component: "launcher",
    kind: ParamKind::Int { min: 1, max: 3600 },
    default: "30",
    description:
        "Seconds a per-host daemon started through the launch agent may take to connect back.",
});

/// `KESTREL_LAUNCH_DAEMON_PATH`: the kestrel-run binary to start on remote hosts.
pub static DAEMON_PATH: Param<String> = Param::new(ParamSpec {
    name: "launch_daemon_path",
    component: "launcher",
    kind: ParamKind::Str,
    default: "",
    description:
        "Path of kestrel-run on remote hosts; empty = the same path as the local kestrel-run.",
});

/// `KESTREL_LAUNCH_AGENT_DRAIN_MS`: how long launch agents may take to exit after the job.
pub static AGENT_DRAIN_MS: Param<i64> = Param::new(ParamSpec {
    name: "launch_agent_drain_ms",
    component: "launcher",
    kind: ParamKind::Int {
        min: 0,
        max: 60_000,
    },
    default: "5000",
    description: "Milliseconds kestrel-run waits after a job for each launch agent (srun, ssh) to deliver its host's remaining output and exit before killing it.",
});

/// `KESTREL_DPM_CONNECT_TIMEOUT_MS`: how long connect (and connection set-up) may take.
pub static DPM_CONNECT_TIMEOUT_MS: Param<i64> = Param::new(ParamSpec {
    name: "dpm_connect_timeout_ms",
    component: "dpm",
    kind: ParamKind::Int {
        min: 1,
        max: 3_600_000,
    },
    default: "20000",
    description: "Milliseconds connect may try to reach a port and wait for it to be accepted, and both sides may take to set up a connection's transports and lifelines.",
});

/// `KESTREL_DPM_NAME_DIR`: the name-service registry directory.
pub static DPM_NAME_DIR: Param<String> = Param::new(ParamSpec {
    name: "dpm_name_dir",
    component: "dpm",
    kind: ParamKind::Str,
    default: "",
    description: "Directory of the publish_name/lookup_name registry, shared by every kestrel-run that uses it; empty = $TMPDIR/kestrel-names-<uid> (or /tmp/...).",
});

/// The specs of this crate.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![
        PMI.spec(),
        DPM_CONNECT_TIMEOUT_MS.spec(),
        DPM_NAME_DIR.spec(),
        KILL_GRACE_MS.spec(),
        DAEMON_TIMEOUT_S.spec(),
        DAEMON_PATH.spec(),
        AGENT_DRAIN_MS.spec(),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        kestrel_transport::params::check_specs(&super::specs()).unwrap();
    }
}
