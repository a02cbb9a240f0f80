//! Parameters of the shared-memory transport.

use kestrel_transport::params::{Param, ParamKind, ParamSpec};

/// `KESTREL_SHM_DIR`: where segments are created.
pub static DIR: Param<String> = Param::new(ParamSpec {
    name: "shm_dir",
    component: "shm",
    kind: ParamKind::Str,
    default: "/dev/shm",
    description: "Directory (a tmpfs) for shared-memory segments; use another when /dev/shm is small (containers).",
});

/// `KESTREL_SHM_SINGLE_COPY`: how large messages move between local ranks.
pub static SINGLE_COPY: Param<String> = Param::new(ParamSpec {
    name: "shm_single_copy",
    component: "shm",
    kind: ParamKind::Choice(&["auto", "cma", "none"]),
    default: "auto",
    description: "Large-message copy: auto (process_vm_readv where permitted, else a pipelined copy), cma (require it), none (always the pipeline).",
});

/// `KESTREL_SHM_EAGER_LIMIT`: largest message sent eagerly.
pub static EAGER_LIMIT: Param<u64> = Param::new(ParamSpec {
    name: "shm_eager_limit",
    component: "shm",
    kind: ParamKind::Size { min: 256, max: 1 << 20 },
    default: "8K",
    description: "Largest message (with its 24-byte header) sent eagerly; larger ones use single copy or the pipeline.",
});

/// `KESTREL_SHM_FRAG_SIZE`: payload bytes of one fragment.
pub static FRAG_SIZE: Param<u64> = Param::new(ParamSpec {
    name: "shm_frag_size",
    component: "shm",
    kind: ParamKind::Size { min: 4096, max: 4 << 20 },
    default: "32K",
    description: "Bytes per shared-memory fragment (eager messages too big for a fast box, pipelined copies).",
});

/// `KESTREL_SHM_FRAG_COUNT`: fragments each process owns.
pub static FRAG_COUNT: Param<i64> = Param::new(ParamSpec {
    name: "shm_frag_count",
    component: "shm",
    kind: ParamKind::Int { min: 4, max: 65536 },
    default: "64",
    description:
        "Fragments in each process's segment (in-flight messages through the receive queues).",
});

/// `KESTREL_SHM_FBOX_SIZE`: bytes of each fast-box ring.
pub static FBOX_SIZE: Param<u64> = Param::new(ParamSpec {
    name: "shm_fbox_size",
    component: "shm",
    kind: ParamKind::Size { min: 1024, max: 16 << 20 },
    default: "64K",
    description: "Ring bytes of each per-pair fast box (rounded up to a power of two); messages up to a quarter of it use it.",
});

/// `KESTREL_SHM_FBOX_THRESHOLD`: sends to a peer before its fast box is set up.
pub static FBOX_THRESHOLD: Param<i64> = Param::new(ParamSpec {
    name: "shm_fbox_threshold",
    component: "shm",
    kind: ParamKind::Int {
        min: 0,
        max: 1 << 30,
    },
    default: "16",
    description:
        "Messages sent to a local peer through the receive queue before a fast box to it is set up.",
});

/// `KESTREL_SHM_FBOX_MAX`: fast boxes a process reads, and writes, at most.
pub static FBOX_MAX: Param<i64> = Param::new(ParamSpec {
    name: "shm_fbox_max",
    component: "shm",
    kind: ParamKind::Int { min: 0, max: 4096 },
    default: "16",
    description: "Most fast boxes one process reads (bounds its polling work) and writes (each is shm_fbox_size bytes of its segment, so this bounds its memory whatever the node's size); 0 disables fast boxes.",
});

/// The specs of this crate.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![
        DIR.spec(),
        SINGLE_COPY.spec(),
        EAGER_LIMIT.spec(),
        FRAG_SIZE.spec(),
        FRAG_COUNT.spec(),
        FBOX_SIZE.spec(),
        FBOX_THRESHOLD.spec(),
        FBOX_MAX.spec(),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        kestrel_transport::params::check_specs(&super::specs()).unwrap();
    }
}
