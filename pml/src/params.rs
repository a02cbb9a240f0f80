//! Parameters of the messaging layer and of collective selection.

use kestrel_transport::params::{Param, ParamKind, ParamSpec};

/// `KESTREL_PML_SPIN_BEFORE_YIELD`: empty polls before an idle wait yields the CPU. 0:
/// when ranks outnumber cores the rank a waiter waits for usually needs the core, so every
/// empty poll yields (measured on 4 ranks over 2 cores: `osu_alltoall` 8 B 11-15 us with 64,
/// 6-10 us with 0; `osu_ialltoall` 27-34 us against 17-22 us; `osu_multi_lat` no worse).
pub static SPIN_BEFORE_YIELD: Param<i64> = Param::new(ParamSpec {
    name: "pml_spin_before_yield",
    component: "pml",
    kind: ParamKind::Int { min: 0, max: 1 << 30 },
    default: "0",
    description: "Empty progress polls a waiting rank spins before yielding the CPU (only when yield_when_idle is on).",
});

/// `KESTREL_ASYNC_PROGRESS`: a progress thread per process in the C library, so that
/// nonblocking operations advance while the program computes without MPI calls.
pub static ASYNC_PROGRESS: Param<bool> = Param::new(ParamSpec {
    name: "async_progress",
    component: "pml",
    kind: ParamKind::Bool,
    default: "false",
    description: "Run a progress thread in each process of the C library (libmpich.so.12) that advances nonblocking collectives, rendezvous transfers and one-sided requests while the program computes without MPI calls. Left at its default, MPICH's MPIR_CVAR_ASYNC_PROGRESS=1 turns it on too. Every call then takes the library lock with a compare-exchange, and the thread shares the program's cores.",
});

/// `KESTREL_ASYNC_PROGRESS_INTERVAL_US`: how often the progress thread polls while work is
/// in flight.
pub static ASYNC_PROGRESS_INTERVAL_US: Param<i64> = Param::new(ParamSpec {
    name: "async_progress_interval_us",
    component: "pml",
    kind: ParamKind::Int { min: 0, max: 1_000_000 },
    default: "10",
    description: "Microseconds the progress thread (async_progress) sleeps between polls while an operation this process started is unfinished (0: yield the core instead of sleeping); with nothing in flight, or while a program thread is inside the library, it backs off to one poll per millisecond.",
});

/// `KESTREL_PML_IDLE_SLEEP_AFTER_MS`: idle time before a waiting rank sleeps in `poll(2)`.
pub static IDLE_SLEEP_AFTER_MS: Param<i64> = Param::new(ParamSpec {
    name: "pml_idle_sleep_after_ms",
    component: "pml",
    kind: ParamKind::Int { min: 0, max: 3_600_000 },
    default: "10",
    description: "Milliseconds a waiting rank finds nothing to do before it sleeps in poll(2) on its transports' wait descriptors instead of polling; only when every transport in use can wake it (ofi with ofi_cq_wait; not shared memory or usnic), never in a multithreaded process. 0: never sleep.",
});

/// `KESTREL_PML_IDLE_SLEEP_MS`: the longest single sleep of an idle rank.
pub static IDLE_SLEEP_MS: Param<i64> = Param::new(ParamSpec {
    name: "pml_idle_sleep_ms",
    component: "pml",
    kind: ParamKind::Int { min: 1, max: 1000 },
    default: "10",
    description: "Longest single sleep of an idle rank (see pml_idle_sleep_after_ms), in milliseconds: the rank wakes at least this often to run transport timers and look at its connections.",
});

/// `KESTREL_PML_SPLIT_COPY_MIN`: rendezvous size from which sender and receiver copy halves.
pub static SPLIT_COPY_MIN: Param<u64> = Param::new(ParamSpec {
    name: "pml_split_copy_min",
    component: "pml",
    kind: ParamKind::Size { min: 0, max: 1 << 40 },
    default: "256K",
    description: "Single-copy messages from this size are copied by both sides at once (receiver reads half, sender writes half); 0 turns it off.",
});

/// `KESTREL_PML_RMA_SINGLE_COPY_MIN`: one-sided puts and gets from this size to a target
/// on the node whose window is the program's memory (`MPI_Win_create`) are one
/// cross-memory copy by the origin, with no message and no work at the target. Below it the
/// system call costs more than the message (osu_put_bw -w create, 2 ranks: 8 KiB 3,112 MB/s
/// single copy against 5,099 by message, 32 KiB 6,538 against 5,981, 4 MiB 5,392 against
/// 1,755).
pub static RMA_SINGLE_COPY_MIN: Param<u64> = Param::new(ParamSpec {
    name: "pml_rma_single_copy_min",
    component: "pml",
    kind: ParamKind::Size { min: 0, max: 1 << 40 },
    default: "32K",
    description: "One-sided puts and gets of at least this many bytes to a node-local MPI_Win_create window are single copies (process_vm_writev/readv where permitted); smaller ones are messages the target applies.",
});

/// `KESTREL_PML_RMA_STREAM_AFTER`: a run of puts (or gets) of at least 64 KiB each into
/// consecutive memory of a node-local window (or of the origin) streams past the caches once
/// it has written this many bytes (`engine::rma::stream`): C `osu_put_bw` 4 MiB, 2 ranks,
/// 4.9-6.1 GB/s with ordinary stores, 9.5-10.2 streaming. 0 means the last-level cache's
/// size.
pub static RMA_STREAM_AFTER: Param<u64> = Param::new(ParamSpec {
    name: "pml_rma_stream_after",
    component: "pml",
    kind: ParamKind::Size { min: 0, max: 1 << 50 },
    default: "0",
    description: "Bytes a run of large one-sided puts or gets into consecutive memory of a node-local window (or of the origin) writes before its further transfers use non-temporal stores, which skip the caches; 0 (the default) means the last-level cache's size, the largest value (1048576G) never streams.",
});

/// `KESTREL_PML_RMA_LAZY_LOCK`: `MPI_Win_lock` of a target reached by messages returns at
/// once; the lock request goes with the epoch's first operation, numbered like one, and the
/// target applies nothing more from that origin until it grants it, so a lock, an operation
/// and an unlock cost one round trip instead of three (osu_get_acc_latency -w create, 2
/// ranks, 8 B: 2.6-4.0 us eagerly against MPICH's 1.4-2.7).
pub static RMA_LAZY_LOCK: Param<bool> = Param::new(ParamSpec {
    name: "pml_rma_lazy_lock",
    component: "pml",
    kind: ParamKind::Bool,
    default: "true",
    description: "MPI_Win_lock of a target reached by messages sends its request with the epoch's first operation instead of waiting for the grant (a lock of the process's own window is always taken at once).",
});

/// `KESTREL_COLL_BARRIER`.
pub static BARRIER: Param<String> = Param::new(ParamSpec {
    name: "coll_barrier",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "dissemination", "hierarchical"]),
    default: "auto",
    description: "Barrier algorithm where the shared-memory engine does not serve it; auto: the tuning table (coll_tuning_file; built in: hierarchical on communicators that span nodes with several members on some, else dissemination).",
});

/// `KESTREL_COLL_TUNING_FILE`: the table `bench/tune` writes (see `crate::coll_tune`).
pub static TUNING_FILE: Param<String> = Param::new(ParamSpec {
    name: "coll_tuning_file",
    component: "coll",
    kind: ParamKind::Str,
    default: "",
    description: "Collective tuning table (written by bench/tune) whose rows override the built-in choices of every coll_* parameter left at auto, by collective, communicator shape (node, nodes, hier), rank count and size; must be the same file in every process. Empty: the built-in table. kestrel-info --coll shows the active choices.",
});

/// `KESTREL_COLL_BCAST`.
pub static BCAST: Param<String> = Param::new(ParamSpec {
    name: "coll_bcast",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "binomial", "linear", "hierarchical"]),
    default: "auto",
    description: "Broadcast algorithm where the shared-memory engine does not serve it (node-local communicators use it unless coll_shm is off); auto: the tuning table (built in: hierarchical where possible, else binomial).",
});

/// `KESTREL_COLL_REDUCE`.
pub static REDUCE: Param<String> = Param::new(ParamSpec {
    name: "coll_reduce",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "binomial", "linear", "hierarchical"]),
    default: "auto",
    description: "Reduce algorithm (linear keeps rank order; non-commutative ops always use it); auto: the tuning table (built in: hierarchical where possible, else binomial).",
});

/// `KESTREL_COLL_ALLREDUCE`.
pub static ALLREDUCE: Param<String> = Param::new(ParamSpec {
    name: "coll_allreduce",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "recursive_doubling", "ring", "reduce_bcast", "hierarchical"]),
    default: "auto",
    description: "Allreduce algorithm (non-commutative ops use reduce_bcast); auto: the tuning table (built in: hierarchical where possible, else recursive doubling, ring from coll_allreduce_ring_min bytes).",
});

/// `KESTREL_COLL_ALLREDUCE_RING_MIN`.
pub static ALLREDUCE_RING_MIN: Param<u64> = Param::new(ParamSpec {
    name: "coll_allreduce_ring_min",
    component: "coll",
    kind: ParamKind::Size {
        min: 0,
        max: 1 << 40,
    },
    default: "64K",
    description:
        "Message size from which the built-in tuning table chooses the ring algorithm for allreduce (commutative ops).",
});

/// `KESTREL_COLL_IALLREDUCE_DIRECT_MAX`.
pub static IALLREDUCE_DIRECT_MAX: Param<u64> = Param::new(ParamSpec {
    name: "coll_iallreduce_direct_max",
    component: "coll",
    kind: ParamKind::Size {
        min: 0,
        max: 1 << 30,
    },
    default: "4K",
    description: "Nonblocking allreduce sends every contribution straight to every rank (one round; a rank that computes without MPI calls holds nobody back) while (ranks - 1) x (message + 64 B) is at most this; 0 turns it off.",
});

/// `KESTREL_COLL_ALLGATHER`.
pub static ALLGATHER: Param<String> = Param::new(ParamSpec {
    name: "coll_allgather",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "recursive_doubling", "ring", "gather_bcast", "hierarchical"]),
    default: "auto",
    description: "Allgather algorithm (recursive doubling needs a power-of-two communicator and blocks in rank order, else the ring runs); auto: the tuning table (built in: hierarchical where possible, else recursive doubling up to 64 KiB in all, then ring).",
});

/// `KESTREL_COLL_ALLTOALL`.
pub static ALLTOALL: Param<String> = Param::new(ParamSpec {
    name: "coll_alltoall",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "pairwise", "linear"]),
    default: "auto",
    description: "Alltoall algorithm; auto: one round of the node segment for blocks of at most 504 bytes in all on node-local communicators of up to 16 ranks, else the tuning table (built in: pairwise exchange); pairwise or linear (all at once) force message algorithms.",
});

/// `KESTREL_COLL_GATHER`.
pub static GATHER: Param<String> = Param::new(ParamSpec {
    name: "coll_gather",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "linear", "hierarchical"]),
    default: "auto",
    description: "Gather algorithm (MPI_Gather; MPI_Gatherv is always linear); auto: one round of the node segment for blocks of at most 504 bytes in all on node-local communicators of up to 16 ranks, else the tuning table (built in: hierarchical where possible, else linear, the root receiving from each rank); linear forces messages.",
});

/// `KESTREL_COLL_SCATTER`.
pub static SCATTER: Param<String> = Param::new(ParamSpec {
    name: "coll_scatter",
    component: "coll",
    kind: ParamKind::Choice(&["auto", "linear", "hierarchical"]),
    default: "auto",
    description: "Scatter algorithm (MPI_Scatter; MPI_Scatterv is always linear); auto: one round of the node segment for blocks of at most 504 bytes in all on node-local communicators of up to 16 ranks, else the tuning table (built in: hierarchical where possible below 32 KiB per rank, else linear, the root sending to each rank); linear forces messages.",
});

/// `KESTREL_COLL_SHM`.
pub static SHM: Param<bool> = Param::new(ParamSpec {
    name: "coll_shm",
    component: "coll",
    kind: ParamKind::Bool,
    default: "true",
    description: "Use the shared-memory segment engine for barrier, bcast, reduce and allreduce on node-local communicators.",
});

/// `KESTREL_COLL_SHM_SETUP_AFTER`.
pub static SHM_SETUP_AFTER: Param<i64> = Param::new(ParamSpec {
    name: "coll_shm_setup_after",
    component: "coll",
    kind: ParamKind::Int { min: 1, max: 1 << 20 },
    default: "16",
    description: "A node-local communicator's shared-memory segment is set up at its Nth collective that could use it; the ones before go by messages. Setting a segment up (a file, its pages, every member attaching, four exchanges) costs hundreds of microseconds, which a communicator that lives for a few collectives never earns back (4 ranks on 2 cores: split, one allreduce and free took 437 us with the segment at the first call, 21 us by messages). 1: at the first.",
});

/// `KESTREL_COLL_HIERARCHICAL`: node / leaders / node phases for communicators across nodes.
pub static HIERARCHICAL: Param<bool> = Param::new(ParamSpec {
    name: "coll_hierarchical",
    component: "coll",
    kind: ParamKind::Bool,
    default: "true",
    description: "Run barrier, bcast, reduce and allreduce (commutative operations), allgather, gather and scatter on communicators that span several nodes with more than one member on some node in three phases: within each node (shared memory), among one leader per node (network), within each node again. Used where the collective's algorithm parameter is hierarchical, or auto and the tuning table chooses it (the built-in table does wherever it is possible); must be the same in every process. false: flat point-to-point algorithms over all members.",
});

/// `KESTREL_COLL_SHM_POSTED`.
pub static SHM_POSTED: Param<bool> = Param::new(ParamSpec {
    name: "coll_shm_posted",
    component: "coll",
    kind: ParamKind::Bool,
    default: "true",
    description: "Nonblocking barrier, bcast and allreduce of at most 504 bytes on a node-local communicator of at most 16 ranks whose segment exists (after its first blocking collective) run as one posted round through the segment: each rank publishes its block when it starts and reads the others' when they are there, with no message and nothing left for a busy rank to forward. Persistent collectives keep the message schedules.",
});

/// `KESTREL_COLL_SHM_FRAGMENT_SIZE`.
pub static SHM_FRAGMENT: Param<u64> = Param::new(ParamSpec {
    name: "coll_shm_fragment_size",
    component: "coll",
    kind: ParamKind::Size { min: 64, max: 64 << 20 },
    default: "256K",
    description: "Bytes per rank and buffer set in a collective segment (larger messages are pipelined in fragments); groups whose slots would pass 4 MiB get less, down to 64K (16 ranks 128K, 32 and more 64K).",
});

/// `KESTREL_COLL_SHM_SETS`.
pub static SHM_SETS: Param<i64> = Param::new(ParamSpec {
    name: "coll_shm_sets",
    component: "coll",
    kind: ParamKind::Int { min: 2, max: 64 },
    default: "2",
    description: "Alternating buffer sets in a collective segment (in-use protection between consecutive operations).",
});

/// `KESTREL_COLL_SHM_TREE_DEGREE`.
pub static SHM_TREE_DEGREE: Param<i64> = Param::new(ParamSpec {
    name: "coll_shm_tree_degree",
    component: "coll",
    kind: ParamKind::Int { min: 2, max: 1024 },
    default: "4",
    description: "Degree of the fan-in/fan-out tree of shared-memory barriers.",
});

/// The specs of this crate.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![
        SPIN_BEFORE_YIELD.spec(),
        ASYNC_PROGRESS.spec(),
        ASYNC_PROGRESS_INTERVAL_US.spec(),
        IDLE_SLEEP_AFTER_MS.spec(),
        IDLE_SLEEP_MS.spec(),
        SPLIT_COPY_MIN.spec(),
        RMA_SINGLE_COPY_MIN.spec(),
        RMA_STREAM_AFTER.spec(),
        RMA_LAZY_LOCK.spec(),
        BARRIER.spec(),
        TUNING_FILE.spec(),
        BCAST.spec(),
        REDUCE.spec(),
        ALLREDUCE.spec(),
        ALLREDUCE_RING_MIN.spec(),
        IALLREDUCE_DIRECT_MAX.spec(),
        ALLGATHER.spec(),
        ALLTOALL.spec(),
        GATHER.spec(),
        SCATTER.spec(),
        SHM.spec(),
        HIERARCHICAL.spec(),
        SHM_POSTED.spec(),
        SHM_FRAGMENT.spec(),
        SHM_SETS.spec(),
        SHM_SETUP_AFTER.spec(),
        SHM_TREE_DEGREE.spec(),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        kestrel_transport::params::check_specs(&super::specs()).unwrap();
    }
}
