//! The benchmarks: each family (point-to-point, multiple bandwidth / message rate, the
//! blocking and the nonblocking collectives) and the [`Spec`] of every OSU test Kestrel reproduces.
//!
//! It only describes tests (names, titles, what they measure, which options they take, how
//! much memory a collective needs); it never parses, prints or communicates.

/// Which OSU benchmark family a test belongs to (OSU's `options.bench`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// Point-to-point between two ranks or pairs of ranks.
    Pt2pt,
    /// The multiple bandwidth / message rate test.
    MbwMr,
    /// The multithreaded ping-pong (`MPI_THREAD_MULTIPLE`, `-t SENDERS[:RECEIVERS]`).
    LatencyMt,
    /// A blocking collective over all ranks.
    Collective(Coll),
    /// A nonblocking collective over all ranks, measured with OSU's overlap method (see
    /// [`nbc`](super::nbc)).
    Nonblocking(Coll),
}

/// The collective a [`Bench::Collective`] or [`Bench::Nonblocking`] test measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    /// `MPI_Barrier`.
    Barrier,
    /// `MPI_Bcast`.
    Bcast,
    /// `MPI_Reduce` (`MPI_SUM`).
    Reduce,
    /// `MPI_Allreduce` (`MPI_SUM`).
    Allreduce,
    /// `MPI_Allgather`.
    Allgather,
    /// `MPI_Alltoall`.
    Alltoall,
    /// `MPI_Gather`.
    Gather,
    /// `MPI_Scatter`.
    Scatter,
}

impl Coll {
    /// The root of iteration `i` (counting warm-up iterations) with `nprocs` ranks, as OSU 7.4
    /// chooses it: bcast and reduce rotate the root every iteration (`i % nprocs`; OSU forces
    /// rotation for them), gather and scatter keep rank 0 (OSU's default `-k fixed:0`). The
    /// others have no root (0).
    pub fn root(self, i: usize, nprocs: usize) -> usize {
        match self {
            Coll::Bcast | Coll::Reduce => i % nprocs.max(1),
            _ => 0,
        }
    }

    /// Message-buffer bytes the busiest rank allocates for messages of `size` bytes (per
    /// rank, per block) with `nprocs` ranks: bcast one buffer; reduce and allreduce a send and
    /// a receive buffer; allgather and gather a send buffer and `nprocs` receive blocks;
    /// scatter `nprocs` send blocks and a receive buffer; alltoall `nprocs` blocks each way;
    /// barrier nothing.
    pub fn buffer_bytes(self, size: usize, nprocs: usize) -> usize {
        let blocks = match self {
            Coll::Barrier => 0,
            Coll::Bcast => 1,
            Coll::Reduce | Coll::Allreduce => 2,
            Coll::Allgather | Coll::Gather | Coll::Scatter => nprocs.saturating_add(1),
            Coll::Alltoall => nprocs.saturating_mul(2),
        };
        size.saturating_mul(blocks)
    }
}

/// What a test measures (OSU's `options.subtype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Subtype {
    /// Latency in microseconds.
    Lat,
    /// Bandwidth in MB/s.
    Bw,
}

/// One benchmark: its name, title and which options it has.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Program name (`osu_latency`), used in the usage line.
    pub name: &'static str,
    /// Title without version (`OSU MPI Latency Test`).
    pub title: &'static str,
    /// Family.
    pub bench: Bench,
    /// What it measures.
    pub subtype: Subtype,
    /// Whether `-f/--full` is accepted (OSU has it only for collectives).
    pub full: bool,
}

/// `osu_latency`: ping-pong between ranks 0 and 1.
pub const LATENCY: Spec = Spec {
    name: "osu_latency",
    title: "OSU MPI Latency Test",
    bench: Bench::Pt2pt,
    subtype: Subtype::Lat,
    full: false,
};
/// `osu_latency_mt`: ping-pong between sender threads on rank 0 and receiver threads on
/// rank 1.
pub const LATENCY_MT: Spec = Spec {
    name: "osu_latency_mt",
    title: "OSU MPI Multi-threaded Latency Test",
    bench: Bench::LatencyMt,
    subtype: Subtype::Lat,
    full: false,
};
/// `osu_bw`: windows of sends from rank 0 to rank 1.
pub const BW: Spec = Spec {
    name: "osu_bw",
    title: "OSU MPI Bandwidth Test",
    bench: Bench::Pt2pt,
    subtype: Subtype::Bw,
    full: false,
};
/// `osu_bibw`: windows in both directions at once.
pub const BIBW: Spec = Spec {
    name: "osu_bibw",
    title: "OSU MPI Bi-Directional Bandwidth Test",
    bench: Bench::Pt2pt,
    subtype: Subtype::Bw,
    full: false,
};
/// `osu_mbw_mr`: windows from ranks i < n/2 to i + n/2, aggregate bandwidth and rate.
pub const MBW_MR: Spec = Spec {
    name: "osu_mbw_mr",
    title: "OSU MPI Multiple Bandwidth / Message Rate Test",
    bench: Bench::MbwMr,
    subtype: Subtype::Bw,
    full: false,
};
/// `osu_multi_lat`: ping-pong in every pair (i, i + n/2) at once.
pub const MULTI_LAT: Spec = Spec {
    name: "osu_multi_lat",
    title: "OSU MPI Multi Latency Test",
    bench: Bench::Pt2pt,
    subtype: Subtype::Lat,
    full: false,
};

/// Specification of a collective: all have `-f`, and OSU titles them `... Latency Test`.
const fn collective(name: &'static str, title: &'static str, coll: Coll) -> Spec {
    Spec {
        name,
        title,
        bench: Bench::Collective(coll),
        subtype: Subtype::Lat,
        full: true,
    }
}

/// `osu_barrier`: `MPI_Barrier` latency (no message sizes).
pub const BARRIER: Spec = collective("osu_barrier", "OSU MPI Barrier Latency Test", Coll::Barrier);
/// `osu_bcast`: `MPI_Bcast` latency, root rotating every iteration.
pub const BCAST: Spec = collective("osu_bcast", "OSU MPI Broadcast Latency Test", Coll::Bcast);
/// `osu_reduce`: `MPI_Reduce` (`MPI_SUM` on `MPI_CHAR`) latency, root rotating.
pub const REDUCE: Spec = collective("osu_reduce", "OSU MPI Reduce Latency Test", Coll::Reduce);
/// `osu_allreduce`: `MPI_Allreduce` (`MPI_SUM` on `MPI_CHAR`) latency.
pub const ALLREDUCE: Spec = collective(
    "osu_allreduce",
    "OSU MPI Allreduce Latency Test",
    Coll::Allreduce,
);
/// `osu_allgather`: `MPI_Allgather` latency.
pub const ALLGATHER: Spec = collective(
    "osu_allgather",
    "OSU MPI Allgather Latency Test",
    Coll::Allgather,
);
/// `osu_alltoall`: `MPI_Alltoall` latency (`size` bytes to every rank).
pub const ALLTOALL: Spec = collective(
    "osu_alltoall",
    "OSU MPI All-to-All Personalized Exchange Latency Test",
    Coll::Alltoall,
);
/// `osu_gather`: `MPI_Gather` latency to rank 0.
pub const GATHER: Spec = collective("osu_gather", "OSU MPI Gather Latency Test", Coll::Gather);
/// `osu_scatter`: `MPI_Scatter` latency from rank 0.
pub const SCATTER: Spec = collective("osu_scatter", "OSU MPI Scatter Latency Test", Coll::Scatter);

/// Specification of a nonblocking collective: all have `-f` (and `-t`).
const fn nonblocking(name: &'static str, title: &'static str, coll: Coll) -> Spec {
    Spec {
        name,
        title,
        bench: Bench::Nonblocking(coll),
        subtype: Subtype::Lat,
        full: true,
    }
}

// The titles are OSU 7.4's, each as its program spells it (`osu_ibcast` says "Non-Blocking").

/// `osu_ibarrier`: `MPI_Ibarrier` overlap (no message sizes).
pub const IBARRIER: Spec = nonblocking(
    "osu_ibarrier",
    "OSU MPI Non-blocking Barrier Latency Test",
    Coll::Barrier,
);
/// `osu_ibcast`: `MPI_Ibcast` overlap; the root rotates in the pure-communication loop only.
pub const IBCAST: Spec = nonblocking(
    "osu_ibcast",
    "OSU MPI Non-Blocking Broadcast Latency Test",
    Coll::Bcast,
);
/// `osu_ireduce`: `MPI_Ireduce` (`MPI_SUM` on `MPI_CHAR`) overlap, root rotating.
pub const IREDUCE: Spec = nonblocking(
    "osu_ireduce",
    "OSU MPI Non-blocking Reduce Latency Test",
    Coll::Reduce,
);
/// `osu_iallreduce`: `MPI_Iallreduce` (`MPI_SUM` on `MPI_CHAR`) overlap.
pub const IALLREDUCE: Spec = nonblocking(
    "osu_iallreduce",
    "OSU MPI Non-blocking Allreduce Latency Test",
    Coll::Allreduce,
);
/// `osu_iallgather`: `MPI_Iallgather` overlap.
pub const IALLGATHER: Spec = nonblocking(
    "osu_iallgather",
    "OSU MPI Non-blocking Allgather Latency Test",
    Coll::Allgather,
);
/// `osu_ialltoall`: `MPI_Ialltoall` overlap (`size` bytes to every rank).
pub const IALLTOALL: Spec = nonblocking(
    "osu_ialltoall",
    "OSU MPI Non-blocking All-to-All Latency Test",
    Coll::Alltoall,
);
/// `osu_igather`: `MPI_Igather` overlap, to rank 0.
pub const IGATHER: Spec = nonblocking(
    "osu_igather",
    "OSU MPI Non-blocking Gather Latency Test",
    Coll::Gather,
);
/// `osu_iscatter`: `MPI_Iscatter` overlap, from rank 0.
pub const ISCATTER: Spec = nonblocking(
    "osu_iscatter",
    "OSU MPI Non-blocking Scatter Latency Test",
    Coll::Scatter,
);

impl Spec {
    /// The collective, for collective tests (blocking or not).
    pub fn coll(&self) -> Option<Coll> {
        match self.bench {
            Bench::Collective(c) | Bench::Nonblocking(c) => Some(c),
            _ => None,
        }
    }

    /// Whether the output has a size column (all but `osu_barrier` and `osu_ibarrier`).
    pub fn has_sizes(&self) -> bool {
        self.coll() != Some(Coll::Barrier)
    }
}
