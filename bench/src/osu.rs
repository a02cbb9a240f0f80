//! What the OSU-style benchmarks (`src/bin/osu_*.rs`) share: option parsing, buffers and
//! output formatting, matching OSU Micro-Benchmarks v7.4.
//!
//! # Options
//!
//! As OSU parses them (`getopt_long` with a leading `+:`): short options may be clustered
//! (`-hv`) and take their argument attached or as the next word (`-i100`, `-i 100`); long
//! options take `--name=value` or `--name value` and may be abbreviated to a unique prefix;
//! parsing stops at `--` or at the first word that is not an option, and remaining words are
//! ignored. Numbers are read like C's `atoi`/`atoll` (leading digits; `abc` is 0). Each
//! benchmark accepts only the options its OSU counterpart has:
//!
//! | option | tests | meaning |
//! |---|---|---|
//! | `-h`, `--help` | all | usage on stdout, exit 0 |
//! | `-v`, `--version` | all | the title line, exit 0 |
//! | `-m`, `--message-size [MIN:]MAX` | all | `128` (max), `2:128`, `2:` (min), `:128` (max) |
//! | `-i`, `--iterations ITER` | all | timed iterations for every size (≥ 1) |
//! | `-x`, `--warmup ITER` | all | untimed warm-up iterations for every size (≥ 0) |
//! | `-W`, `--window-size SIZE` | bw, bibw, mbw_mr | messages in flight per iteration (≥ 1) |
//! | `-p`, `--num-pairs PAIRS` | mbw_mr | pairs (default ranks / 2) |
//! | `-R`, `--print-rate 0\|1` | mbw_mr | print the message rate column (default 1) |
//! | `-M`, `--mem-limit SIZE` | all | per-process buffer bytes (default 512 MiB, at least 1 MiB) |
//! | `-f`, `--full` | collectives only (as in OSU) | min/max columns and the iteration count |
//!
//! OSU's point-to-point tests do not take `-M` (OSU only applies it to collectives); Kestrel's
//! do, and honour it: a rank never allocates more message-buffer bytes than the limit, and
//! sizes that would need more are dropped with a warning (as OSU's `check_mem_limit` does).
//! For the collectives the limit is checked against what the test really allocates per rank
//! for the number of ranks (e.g. `2 * ranks * size` for alltoall), not against OSU's rougher
//! `ranks * size`. `osu_barrier` accepts `-m` and `-M` (OSU's option string has them) but has
//! no messages, so they change nothing, and its usage omits them as OSU's does.
//!
//! Collectives default to OSU's collective counts: sizes 1 B to 1 MiB, 1000 timed iterations
//! and 100 warm-up up to 8 KiB, 100 and 10 above.
//!
//! A bad option makes rank 0 print `<message> [-x <arg>]` and an empty line to stderr, then
//! the usage to stdout (where OSU prints it), and every rank exits with status 1.
//!
//! # Output (rank 0, stdout)
//!
//! ```text
//!
//! # OSU MPI Latency Test v7.4
//! # Datatype: MPI_CHAR.
//! # Size       Avg Latency(us)
//! 1                       0.21
//! ```
//!
//! An empty line, the title, the datatype, the column header (`%-10s%18s`), then one row per
//! size (`%-10d%18.2f`, a second `%18.2f` for mbw_mr's message rate). This is what OSU 7.4
//! prints (its `print_preamble` and `print_only_header`): the latency column is titled
//! `Avg Latency(us)` since 7.4 (7.3 and older printed `Latency (us)`), bandwidth is
//! `Bandwidth (MB/s)` with MB = 10^6 bytes, and mbw_mr adds `# [ pairs: N ] [ window size:
//! W ]` after the title and prints `MB/s` and `Messages/s`. Sizes double from the minimum to
//! the maximum; OSU 7.4's latency tests start at 0 but skip it (a message of 0 elements), so
//! their first row is 1.
//!
//! The collectives (OSU's `print_preamble`, `print_only_header`, `print_stats`) print the same
//! preamble and `# Datatype: MPI_CHAR.` (OSU 7.4 runs every collective, the reductions too,
//! on `MPI_CHAR` unless `-T` says otherwise), then `# Size` and `Avg Latency(us)`; with `-f`
//! also `%18s%18s%12s` `Min Latency(us)`, `Max Latency(us)`, `Iterations`, and rows
//! `%-10d%18.2f` plus `%18.2f%18.2f%12d`. `osu_barrier` has no size: no datatype line, the
//! header is `# Avg Latency(us)` (then the `-f` columns) and its one row is `%17.2f` (then
//! `%18.2f%18.2f%12d`):
//!
//! ```text
//!
//! # OSU MPI Barrier Latency Test v7.4
//! # Avg Latency(us)
//!              1.52
//! ```
//!
//! The value is OSU's: each rank times every iteration around the collective call alone, its
//! latency is the mean of its timed iterations, and the row shows the average of those means
//! over the ranks (a `SUM` reduction to rank 0 divided by the ranks), with `-f` their minimum
//! and maximum (`MIN` and `MAX` reductions).

use std::fmt::{self, Write as _};

/// The OSU Micro-Benchmarks version whose behaviour and output these benchmarks reproduce.
pub const OMB_VERSION: &str = "7.4";
/// Width of every value column (OSU builds with `FIELD_WIDTH=18`).
pub const FIELD_WIDTH: usize = 18;
/// Decimals of every value.
pub const FLOAT_PRECISION: usize = 2;
/// Sizes above this use the "large" iteration and warm-up counts.
pub const LARGE_MESSAGE_SIZE: usize = 8192;
/// Default largest message: 4 MiB.
pub const MAX_MESSAGE_SIZE: usize = 1 << 22;
/// Default largest message of the collectives: 1 MiB (OSU's `MAX_MSG_SIZE_COLL`).
pub const MAX_MSG_SIZE_COLL: usize = 1 << 20;
/// Default per-process memory limit (`-M`): 512 MiB.
pub const MAX_MEM_LIMIT: usize = 512 * 1024 * 1024;
/// Smallest accepted memory limit: 1 MiB.
pub const MAX_MEM_LOWER_LIMIT: usize = 1024 * 1024;
/// Default window (`-W`).
pub const WINDOW_SIZE: usize = 64;
/// Bytes of the acknowledgement the bandwidth tests send back after each window.
pub const ACK_BYTES: usize = 4;

/// Which OSU benchmark family a test belongs to (OSU's `options.bench`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bench {
    /// Point-to-point between two ranks or pairs of ranks.
    Pt2pt,
    /// The multiple bandwidth / message rate test.
    MbwMr,
    /// A blocking collective over all ranks.
    Collective(Coll),
}

/// The collective a [`Bench::Collective`] test measures.
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

impl Spec {
    /// The collective, for collective tests.
    pub fn coll(&self) -> Option<Coll> {
        match self.bench {
            Bench::Collective(c) => Some(c),
            _ => None,
        }
    }

    /// Whether the output has a size column (all but `osu_barrier`).
    pub fn has_sizes(&self) -> bool {
        self.coll() != Some(Coll::Barrier)
    }
}

/// Parsed options, with OSU's defaults for the test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Smallest size (latency tests 0, which is skipped; bandwidth tests 1).
    pub min_message_size: usize,
    /// Largest size (4 MiB).
    pub max_message_size: usize,
    /// Timed iterations for sizes up to [`LARGE_MESSAGE_SIZE`].
    pub iterations: usize,
    /// Timed iterations above it.
    pub iterations_large: usize,
    /// Warm-up iterations up to [`LARGE_MESSAGE_SIZE`].
    pub skip: usize,
    /// Warm-up iterations above it.
    pub skip_large: usize,
    /// Window (bandwidth tests).
    pub window_size: usize,
    /// Per-process buffer limit in bytes.
    pub max_mem_limit: usize,
    /// `-f` given (only where accepted).
    pub show_full: bool,
    /// `-p` (mbw_mr); `None` means ranks / 2.
    pub pairs: Option<usize>,
    /// `-R` (mbw_mr): print the message rate.
    pub print_rate: bool,
    /// Warnings for stderr that do not stop the run (e.g. a memory limit raised to 1 MiB).
    pub warnings: Vec<String>,
}

impl Options {
    /// OSU's defaults for `spec`.
    pub fn defaults(spec: &Spec) -> Options {
        let (iterations, skip, iterations_large, skip_large, min) = match (spec.bench, spec.subtype)
        {
            (Bench::Collective(_), _) => (1_000, 100, 100, 10, 1),
            (_, Subtype::Lat) => (10_000, 100, 1_000, 10, 0),
            (_, Subtype::Bw) => (100, 10, 20, 2, 1),
        };
        let max = match spec.bench {
            Bench::Collective(_) => MAX_MSG_SIZE_COLL,
            _ => MAX_MESSAGE_SIZE,
        };
        Options {
            min_message_size: min,
            max_message_size: max,
            iterations,
            iterations_large,
            skip,
            skip_large,
            window_size: WINDOW_SIZE,
            max_mem_limit: MAX_MEM_LIMIT,
            show_full: false,
            pairs: None,
            print_rate: true,
            warnings: Vec::new(),
        }
    }

    /// Timed iterations for `size`.
    pub fn iterations_for(&self, size: usize) -> usize {
        if size > LARGE_MESSAGE_SIZE {
            self.iterations_large
        } else {
            self.iterations
        }
    }

    /// Warm-up iterations for `size`.
    pub fn skip_for(&self, size: usize) -> usize {
        if size > LARGE_MESSAGE_SIZE {
            self.skip_large
        } else {
            self.skip
        }
    }

    /// The sizes measured, in order, as OSU's loops produce them: latency tests go
    /// `0, 1, 2, 4, ...` and skip 0 (no elements to send); bandwidth tests double from the
    /// minimum. Stops at the maximum.
    pub fn sizes(&self, spec: &Spec) -> Vec<usize> {
        let mut out = Vec::new();
        let mut size = self.min_message_size;
        loop {
            if size > self.max_message_size {
                break;
            }
            if size > 0 {
                out.push(size);
            }
            let next = match spec.subtype {
                Subtype::Lat if size == 0 => Some(1),
                _ => size.checked_mul(2),
            };
            match next {
                Some(n) if n > size => size = n,
                _ => break,
            }
        }
        out
    }

    /// Buffer bytes one rank needs for messages of `size` in `spec`: a send and a receive
    /// buffer for the latency tests; for the bandwidth tests a send buffer and one receive
    /// buffer per message of the window (a window's receives are in flight together, so
    /// each gets its own memory). For collectives this assumes two ranks; see
    /// [`Options::buffer_bytes_ranks`].
    pub fn buffer_bytes(&self, spec: &Spec, size: usize) -> usize {
        self.buffer_bytes_ranks(spec, size, 2)
    }

    /// [`Options::buffer_bytes`] with `nprocs` ranks (only the collectives depend on it:
    /// [`Coll::buffer_bytes`]).
    pub fn buffer_bytes_ranks(&self, spec: &Spec, size: usize, nprocs: usize) -> usize {
        match (spec.bench, spec.subtype) {
            (Bench::Collective(c), _) => c.buffer_bytes(size, nprocs),
            (_, Subtype::Lat) => size.saturating_mul(2),
            (_, Subtype::Bw) => size.saturating_mul(self.window_size.saturating_add(1)),
        }
    }

    /// Applies `-M`: lowers the largest size so that [`Options::buffer_bytes`] fits in the
    /// memory limit. Returns OSU's warning when it did.
    pub fn limit_to_memory(&mut self, spec: &Spec) -> Option<String> {
        self.limit_to_memory_ranks(spec, 2)
    }

    /// [`Options::limit_to_memory`] with `nprocs` ranks (what the collectives use). A test
    /// without buffers (barrier) is never limited.
    pub fn limit_to_memory_ranks(&mut self, spec: &Spec, nprocs: usize) -> Option<String> {
        let per_byte = self.buffer_bytes_ranks(spec, 1, nprocs);
        if per_byte == 0 {
            return None;
        }
        let fits = self.max_mem_limit / per_byte;
        if self.max_message_size > fits {
            self.max_message_size = fits;
            Some(format!(
                "Warning! Limiting max message size to: {fits}. Increase -M, --mem-limit for higher message sizes."
            ))
        } else {
            None
        }
    }
}

/// A rejected command line: OSU's `bad_usage` (message, option, argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadUsage {
    /// What is wrong (`Invalid Number of Iterations`).
    pub message: String,
    /// The option as written in the report: `-i`, or `--name` for an unknown long option.
    pub option: String,
    /// The offending argument, if the option had one.
    pub optarg: Option<String>,
}

impl fmt::Display for BadUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.optarg {
            Some(a) => write!(f, "{} [{} {}]", self.message, self.option, a),
            None => write!(f, "{} [{}]", self.message, self.option),
        }
    }
}

/// The outcome of parsing a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Run with these options.
    Run(Options),
    /// `-h`: print [`help_text`], exit 0.
    Help,
    /// `-v`: print [`version_text`], exit 0.
    Version,
    /// A bad option: print it and the usage, exit 1.
    BadUsage(BadUsage),
}

/// One option a test accepts: short letter, long name, whether it takes an argument, help.
struct OptDef {
    short: char,
    long: &'static str,
    arg: bool,
    help: &'static [&'static str],
}

const OPT_H: OptDef = OptDef {
    short: 'h',
    long: "help",
    arg: false,
    help: &["print this help"],
};
const OPT_V: OptDef = OptDef {
    short: 'v',
    long: "version",
    arg: false,
    help: &["print version info"],
};
const OPT_F: OptDef = OptDef {
    short: 'f',
    long: "full",
    arg: false,
    help: &[
        "print full format listing (MIN/MAX latency and ITERATIONS",
        "displayed in addition to AVERAGE latency)",
    ],
};
const OPT_M: OptDef = OptDef {
    short: 'm',
    long: "message-size",
    arg: true,
    help: &[
        "[MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX",
        "bytes respectively. Examples:",
        "-m 128      // min = default, max = 128",
        "-m 2:128    // min = 2, max = 128",
        "-m 2:       // min = 2, max = default",
    ],
};
const OPT_W: OptDef = OptDef {
    short: 'W',
    long: "window-size",
    arg: true,
    help: &["SIZE - set number of messages to send before synchronization (default 64)"],
};
const OPT_I: OptDef = OptDef {
    short: 'i',
    long: "iterations",
    arg: true,
    help: &["ITER - number of iterations for timing (default 10000)"],
};
const OPT_X: OptDef = OptDef {
    short: 'x',
    long: "warmup",
    arg: true,
    help: &[
        "ITER - set number of warmup",
        "iterations to skip before timing (default 200)",
    ],
};
const OPT_I_COLL: OptDef = OptDef {
    short: 'i',
    long: "iterations",
    arg: true,
    help: &[
        "ITER - set iterations per message size to ITER (default 1000 for small",
        "messages, 100 for large messages)",
    ],
};
const OPT_MEM: OptDef = OptDef {
    short: 'M',
    long: "mem-limit",
    arg: true,
    help: &[
        "SIZE - set per process maximum memory consumption to SIZE bytes",
        "(default 536870912)",
    ],
};
const OPT_R: OptDef = OptDef {
    short: 'R',
    long: "print-rate",
    arg: true,
    help: &["[0|1] - Print uni-directional message rate (default 1)"],
};
const OPT_P: OptDef = OptDef {
    short: 'p',
    long: "num-pairs",
    arg: true,
    help: &["PAIRS - Number of pairs involved (default np / 2)"],
};

/// The options of `spec`, in the order of OSU's option string for that test (which is the
/// order of the usage text), with `-M` last. The collectives follow OSU's `hvfm:i:x:M:`.
fn option_defs(spec: &Spec) -> Vec<&'static OptDef> {
    let mut v: Vec<&'static OptDef> = match (spec.bench, spec.subtype) {
        (Bench::Collective(_), _) => vec![&OPT_H, &OPT_V, &OPT_M, &OPT_I_COLL, &OPT_X],
        (Bench::MbwMr, _) => vec![
            &OPT_P, &OPT_W, &OPT_R, &OPT_X, &OPT_I, &OPT_M, &OPT_H, &OPT_V,
        ],
        (Bench::Pt2pt, Subtype::Bw) => vec![&OPT_H, &OPT_V, &OPT_M, &OPT_X, &OPT_I, &OPT_W],
        (Bench::Pt2pt, Subtype::Lat) => vec![&OPT_H, &OPT_V, &OPT_M, &OPT_X, &OPT_I],
    };
    if spec.full {
        // Where OSU has -f it follows -v in the option string.
        let at = v.iter().position(|d| d.short == 'v').map_or(0, |p| p + 1);
        v.insert(at, &OPT_F);
    }
    v.push(&OPT_MEM);
    v
}

/// C's `atoll`: optional whitespace and sign, then leading digits; anything else gives 0.
/// Saturates instead of overflowing.
pub fn c_atoll(s: &str) -> i64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        let d = i64::from(b - b'0');
        v = if neg {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
    }
    v
}

/// C's `atoi` as glibc does it: `(int) strtol(...)`.
pub fn c_atoi(s: &str) -> i64 {
    i64::from(c_atoll(s) as i32)
}

/// OSU's `set_message_size`: `MAX`, `MIN:MAX`, `MIN:` or `:MAX`. The minimum must be > 0
/// and the maximum >= 0; as in OSU, a bad minimum next to a good maximum is ignored.
fn set_message_size(o: &mut Options, val: &str) -> Result<(), ()> {
    fn set_min(o: &mut Options, v: i64) -> Result<(), ()> {
        if v <= 0 {
            return Err(());
        }
        o.min_message_size = v as usize;
        Ok(())
    }
    fn set_max(o: &mut Options, v: i64) -> Result<(), ()> {
        if v < 0 {
            return Err(());
        }
        o.max_message_size = v as usize;
        Ok(())
    }
    match val.matches(':').count() {
        0 => set_max(o, c_atoll(val)),
        1 => {
            // strtok(val, ":") skips empty tokens.
            let mut tokens = val.split(':').filter(|t| !t.is_empty());
            match (tokens.next(), tokens.next()) {
                (Some(a), Some(b)) => {
                    let _ = set_min(o, c_atoll(a));
                    set_max(o, c_atoll(b))
                }
                (Some(a), None) if val.starts_with(':') => set_max(o, c_atoll(a)),
                (Some(a), None) => set_min(o, c_atoll(a)),
                _ => Err(()),
            }
        }
        _ => Err(()),
    }
}

fn bad(message: &str, option: String, optarg: Option<&str>) -> Parsed {
    Parsed::BadUsage(BadUsage {
        message: message.to_string(),
        option,
        optarg: optarg.map(str::to_string),
    })
}

/// Applies one option with its argument; `Some` ends parsing.
fn apply(o: &mut Options, c: char, arg: Option<&str>) -> Option<Parsed> {
    let a = arg.unwrap_or("");
    let opt = format!("-{c}");
    match c {
        'h' => return Some(Parsed::Help),
        'v' => return Some(Parsed::Version),
        'f' => o.show_full = true,
        'm' => {
            if set_message_size(o, a).is_err() {
                return Some(bad("Invalid Message Size", opt, arg));
            }
        }
        'i' => {
            let v = c_atoi(a);
            if v < 1 {
                return Some(bad("Invalid Number of Iterations", opt, arg));
            }
            o.iterations = v as usize;
            o.iterations_large = v as usize;
        }
        'x' => {
            let v = c_atoi(a);
            if v < 0 {
                return Some(bad("Invalid Number of Warmup Iterations", opt, arg));
            }
            o.skip = v as usize;
            o.skip_large = v as usize;
        }
        'W' => {
            let v = c_atoi(a);
            if v < 1 {
                return Some(bad("Invalid Window Size", opt, arg));
            }
            o.window_size = v as usize;
        }
        'M' => {
            let v = c_atoll(a);
            if v < MAX_MEM_LOWER_LIMIT as i64 {
                o.max_mem_limit = MAX_MEM_LOWER_LIMIT;
                o.warnings.push(format!(
                    "Requested memory limit too low, using [{MAX_MEM_LOWER_LIMIT}] instead."
                ));
            } else {
                o.max_mem_limit = v as usize;
            }
        }
        'R' => match c_atoi(a) {
            0 => o.print_rate = false,
            1 => o.print_rate = true,
            _ => return Some(bad("Invalid Print Rate", opt, arg)),
        },
        'p' => {
            let v = c_atoi(a);
            if v < 1 {
                return Some(bad("Invalid Number of Pairs", opt, arg));
            }
            o.pairs = Some(v as usize);
        }
        _ => unreachable!("option -{c} has no handler"),
    }
    None
}

/// Parses the arguments after the program name.
pub fn parse<S: AsRef<str>>(spec: &Spec, args: &[S]) -> Parsed {
    let defs = option_defs(spec);
    let mut o = Options::defaults(spec);
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_ref();
        i += 1;
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let def = match defs.iter().find(|d| d.long == name) {
                Some(d) => *d,
                None => {
                    let matches: Vec<_> =
                        defs.iter().filter(|d| d.long.starts_with(name)).collect();
                    if matches.len() == 1 && !name.is_empty() {
                        *matches[0]
                    } else {
                        return bad("Invalid option", format!("--{name}"), None);
                    }
                }
            };
            let arg = if def.arg {
                match inline {
                    Some(v) => Some(v.to_string()),
                    None if i < args.len() => {
                        i += 1;
                        Some(args[i - 1].as_ref().to_string())
                    }
                    None => {
                        return bad(
                            "Option Missing Required Argument",
                            format!("-{}", def.short),
                            None,
                        )
                    }
                }
            } else {
                if inline.is_some() {
                    return bad("Invalid option", format!("-{}", def.short), None);
                }
                None
            };
            if let Some(p) = apply(&mut o, def.short, arg.as_deref()) {
                return p;
            }
            continue;
        }
        let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) else {
            // The first non-option word ends the options ("+" in OSU's option string); the
            // rest is ignored, as OSU ignores it.
            break;
        };
        for (pos, c) in cluster.char_indices() {
            let Some(def) = defs.iter().find(|d| d.short == c) else {
                return bad("Invalid option", format!("-{c}"), None);
            };
            if def.arg {
                let rest = &cluster[pos + c.len_utf8()..];
                let arg = if !rest.is_empty() {
                    rest.to_string()
                } else if i < args.len() {
                    i += 1;
                    args[i - 1].as_ref().to_string()
                } else {
                    return bad("Option Missing Required Argument", format!("-{c}"), None);
                };
                if let Some(p) = apply(&mut o, c, Some(&arg)) {
                    return p;
                }
                break;
            }
            if let Some(p) = apply(&mut o, c, None) {
                return p;
            }
        }
    }
    Parsed::Run(o)
}

/// The usage text (OSU's `print_help_message`; with `note`, mbw_mr's `usage_mbw_mr` note).
pub fn help_text(spec: &Spec, note: bool) -> String {
    let mut s = format!("Usage: {} [options]\nOptions:\n", spec.name);
    // OSU's barrier takes -m and -M but, having no message sizes, does not list them.
    let listed = |d: &&OptDef| spec.has_sizes() || !matches!(d.short, 'm' | 'M');
    for d in option_defs(spec).into_iter().filter(listed) {
        let _ = writeln!(s, "  -{}, --{:<20}{}", d.short, d.long, d.help[0]);
        for line in &d.help[1..] {
            let _ = writeln!(s, "{:28}{}", "", line);
        }
    }
    if note && spec.bench == Bench::MbwMr {
        s.push_str("  Note: This benchmark relies on block ordering of the ranks.  Please see\n");
        s.push_str("        the README for more information.\n");
    }
    s
}

/// The title line: `# OSU MPI Latency Test v7.4` and a newline (also what `-v` prints).
pub fn version_text(spec: &Spec) -> String {
    format!("# {} v{}\n", spec.title, OMB_VERSION)
}

/// What precedes the column header: an empty line, the title, for mbw_mr the pairs line,
/// and the datatype line (not for barrier, which sends no data).
pub fn preamble(spec: &Spec, opts: &Options, pairs: usize) -> String {
    let mut s = format!("\n{}", version_text(spec));
    if spec.bench == Bench::MbwMr {
        let _ = writeln!(
            s,
            "# [ pairs: {pairs} ] [ window size: {} ]",
            opts.window_size
        );
    }
    if spec.has_sizes() {
        s.push_str("# Datatype: MPI_CHAR.\n");
    }
    s
}

/// The column header line (OSU's `print_only_header`), with its newline.
pub fn column_header(spec: &Spec, opts: &Options) -> String {
    let w = FIELD_WIDTH;
    let mut s = if spec.has_sizes() {
        format!("{:<10}", "# Size")
    } else {
        String::from("# ")
    };
    match (spec.bench, spec.subtype) {
        (Bench::Collective(_), _) if !spec.has_sizes() => s.push_str("Avg Latency(us)"),
        (Bench::MbwMr, _) if opts.print_rate => {
            let _ = write!(s, "{:>w$}{:>w$}", "MB/s", "Messages/s");
        }
        (Bench::MbwMr, _) => {
            let _ = write!(s, "{:>w$}", "MB/s");
        }
        (Bench::Pt2pt, Subtype::Bw) => {
            let _ = write!(s, "{:>w$}", "Bandwidth (MB/s)");
        }
        (Bench::Pt2pt | Bench::Collective(_), Subtype::Lat) => {
            let _ = write!(s, "{:>w$}", "Avg Latency(us)");
        }
        (Bench::Collective(_), Subtype::Bw) => unreachable!("collectives measure latency"),
    }
    if opts.show_full {
        let _ = write!(
            s,
            "{:>w$}{:>w$}{:>12}",
            "Min Latency(us)", "Max Latency(us)", "Iterations"
        );
    }
    s.push('\n');
    s
}

/// A result row: `%-10d%18.2f` and a newline.
pub fn row(size: usize, value: f64) -> String {
    format!("{size:<10}{value:>FIELD_WIDTH$.FLOAT_PRECISION$}\n")
}

/// A row with two values (mbw_mr: MB/s and messages/s).
pub fn row2(size: usize, a: f64, b: f64) -> String {
    format!("{size:<10}{a:>FIELD_WIDTH$.FLOAT_PRECISION$}{b:>FIELD_WIDTH$.FLOAT_PRECISION$}\n")
}

/// One rank's result for one size of a collective: the average over the ranks of their mean
/// latencies, their minimum and maximum, all in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollStats {
    /// Average over the ranks.
    pub avg: f64,
    /// Smallest rank mean.
    pub min: f64,
    /// Largest rank mean.
    pub max: f64,
}

/// A collective's result row (OSU's `print_stats`): `%-10d%18.2f` (barrier: `%17.2f`), with
/// `-f` then `%18.2f%18.2f%12d` (minimum, maximum, timed iterations), and a newline.
pub fn coll_row(
    spec: &Spec,
    opts: &Options,
    size: usize,
    st: &CollStats,
    iterations: usize,
) -> String {
    let (w, p) = (FIELD_WIDTH, FLOAT_PRECISION);
    let mut s = if spec.has_sizes() {
        format!("{size:<10}{:>w$.p$}", st.avg)
    } else {
        format!("{:>17.p$}", st.avg)
    };
    if opts.show_full {
        let _ = write!(s, "{:>w$.p$}{:>w$.p$}{iterations:>12}", st.min, st.max);
    }
    s.push('\n');
    s
}

/// Mean latency in microseconds of `iterations` timed iterations that took `total_secs`.
pub fn mean_us(total_secs: f64, iterations: usize) -> f64 {
    total_secs * 1e6 / iterations as f64
}

/// Half the average round trip in microseconds (OSU: `t * 1e6 / (2 * iterations)`).
pub fn latency_us(total_secs: f64, iterations: usize) -> f64 {
    total_secs * 1e6 / (2.0 * iterations as f64)
}

/// MB/s (10^6 bytes per second) for `messages` messages of `size` bytes in `secs`.
pub fn bandwidth_mb_s(size: usize, messages: usize, secs: f64) -> f64 {
    size as f64 / 1e6 * messages as f64 / secs
}

/// A page-aligned, zeroed byte buffer (OSU aligns its buffers to the page size).
pub struct AlignedBuf {
    storage: Vec<u8>,
    offset: usize,
    len: usize,
}

impl AlignedBuf {
    /// `len` zero bytes starting at a 4096-byte boundary.
    pub fn new(len: usize) -> AlignedBuf {
        const ALIGN: usize = 4096;
        let storage = vec![0u8; len + ALIGN];
        let offset = storage.as_ptr().align_offset(ALIGN).min(ALIGN);
        AlignedBuf {
            storage,
            offset,
            len,
        }
    }

    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.storage[self.offset..self.offset + self.len]
    }

    /// The bytes, mutably.
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        &mut self.storage[self.offset..self.offset + self.len]
    }

    /// The bytes as C `char`s (`i8`, what `MPI_CHAR` is on the platforms Kestrel runs on).
    pub fn as_i8_slice(&self) -> &[i8] {
        let b = self.as_slice();
        // SAFETY: i8 has the size, alignment and (all bit patterns) validity of u8.
        unsafe { std::slice::from_raw_parts(b.as_ptr().cast::<i8>(), b.len()) }
    }

    /// The bytes as C `char`s, mutably.
    pub fn as_mut_i8_slice(&mut self) -> &mut [i8] {
        let b = self.as_mut_slice();
        // SAFETY: as in `as_i8_slice`; the borrow of `self` is exclusive.
        unsafe { std::slice::from_raw_parts_mut(b.as_mut_ptr().cast::<i8>(), b.len()) }
    }
}

/// Parses the command line for every rank and handles what stops the program: `-h`, `-v`
/// and bad options print on rank 0 only. Warnings go to rank 0's stderr. `Err` carries the
/// exit status (0 for help and version, 1 for a bad option).
pub fn parse_or_report(spec: &Spec, rank: i32, args: &[String]) -> Result<Options, i32> {
    let is_root = rank == 0;
    match parse(spec, args) {
        Parsed::Run(o) => {
            if is_root {
                for w in &o.warnings {
                    eprintln!("{w}");
                }
            }
            Ok(o)
        }
        Parsed::Help => {
            if is_root {
                print!("{}", help_text(spec, true));
            }
            Err(0)
        }
        Parsed::Version => {
            if is_root {
                print!("{}", version_text(spec));
            }
            Err(0)
        }
        Parsed::BadUsage(b) => {
            if is_root {
                eprint!("{b}\n\n");
                print!("{}", help_text(spec, false));
            }
            Err(1)
        }
    }
}

/// The start of a collective test on every rank: parses the options (as
/// [`parse_or_report`]), requires at least two ranks, applies `-M` for this number of ranks
/// (warning on rank 0's stderr) and prints the preamble and the column header on rank 0.
/// `Err` carries the exit status for [`exit`].
pub fn coll_begin(
    spec: &Spec,
    world: &kestrel::SimpleCommunicator,
    args: &[String],
) -> Result<Options, i32> {
    use kestrel::Communicator as _;
    let (rank, nprocs) = (world.rank(), world.size());
    let mut opts = parse_or_report(spec, rank, args)?;
    if nprocs < 2 {
        if rank == 0 {
            eprintln!("This test requires at least two processes");
        }
        return Err(1);
    }
    if let Some(w) = opts.limit_to_memory_ranks(spec, nprocs as usize) {
        if rank == 0 {
            eprintln!("{w}");
        }
    }
    if rank == 0 {
        print!("{}{}", preamble(spec, &opts, 1), column_header(spec, &opts));
    }
    Ok(opts)
}

/// OSU's per-size statistics of a collective, called by every rank with its mean latency in
/// microseconds: reductions to rank 0 of the minimum, the maximum and the sum (in OSU's
/// order). Rank 0 gets the minimum, the maximum and the sum divided by the ranks; the other
/// ranks get `None`.
pub fn coll_stats(world: &kestrel::SimpleCommunicator, latency_us: f64) -> Option<CollStats> {
    use kestrel::collective::{Root as _, SystemOperation};
    use kestrel::Communicator as _;
    let root = world.process_at_rank(0);
    let send = [latency_us];
    if world.rank() != 0 {
        root.reduce_into(&send[..], SystemOperation::min());
        root.reduce_into(&send[..], SystemOperation::max());
        root.reduce_into(&send[..], SystemOperation::sum());
        return None;
    }
    let (mut min, mut max, mut sum) = ([0.0f64], [0.0f64], [0.0f64]);
    root.reduce_into_root(&send[..], &mut min[..], SystemOperation::min());
    root.reduce_into_root(&send[..], &mut max[..], SystemOperation::max());
    root.reduce_into_root(&send[..], &mut sum[..], SystemOperation::sum());
    Some(CollStats {
        avg: sum[0] / f64::from(world.size()),
        min: min[0],
        max: max[0],
    })
}

/// Flushes stdout, waits for every rank (so that rank 0's report is out before a rank
/// exiting with an error makes the launcher stop the job), finalizes Kestrel (by dropping
/// the universe) and exits with `code`. Every rank must call it at the same point.
pub fn exit(universe: kestrel::Universe, code: i32) -> ! {
    use kestrel::Communicator as _;
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    universe.world().barrier();
    drop(universe);
    std::process::exit(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(spec: &Spec, args: &[&str]) -> Options {
        match parse(spec, args) {
            Parsed::Run(o) => o,
            other => panic!("{args:?}: expected options, got {other:?}"),
        }
    }

    fn bad_usage(spec: &Spec, args: &[&str]) -> String {
        match parse(spec, args) {
            Parsed::BadUsage(b) => b.to_string(),
            other => panic!("{args:?}: expected a bad usage, got {other:?}"),
        }
    }

    #[test]
    fn defaults_follow_osu() {
        let lat = run(&LATENCY, &[]);
        assert_eq!(
            (
                lat.min_message_size,
                lat.max_message_size,
                lat.iterations,
                lat.skip
            ),
            (0, 4194304, 10000, 100)
        );
        assert_eq!((lat.iterations_large, lat.skip_large), (1000, 10));
        let bw = run(&BW, &[]);
        assert_eq!(
            (
                bw.min_message_size,
                bw.iterations,
                bw.skip,
                bw.iterations_large,
                bw.skip_large
            ),
            (1, 100, 10, 20, 2)
        );
        assert_eq!(
            (bw.window_size, bw.max_mem_limit, bw.print_rate),
            (64, 536870912, true)
        );
        assert_eq!(bw.iterations_for(8192), 100);
        assert_eq!(bw.iterations_for(8193), 20);
        assert_eq!(bw.skip_for(16384), 2);
        assert_eq!(lat.skip_for(8192), 100);
    }

    #[test]
    fn sizes_are_osu_loops() {
        let lat = run(&LATENCY, &[]);
        let s = lat.sizes(&LATENCY);
        assert_eq!(s.first(), Some(&1));
        assert_eq!(s.last(), Some(&4194304));
        assert_eq!(s.len(), 23);
        let bw = run(&BW, &["-m", "3:50"]);
        assert_eq!(bw.sizes(&BW), vec![3, 6, 12, 24, 48]);
        let lat = run(&LATENCY, &["-m", "0"]);
        assert!(lat.sizes(&LATENCY).is_empty());
        let lat = run(&LATENCY, &["-m", "1"]);
        assert_eq!(lat.sizes(&LATENCY), vec![1]);
        let huge = run(&BW, &["-m", "9223372036854775807"]);
        assert_eq!(huge.sizes(&BW).len(), 63);
    }

    #[test]
    fn message_size_forms() {
        let o = run(&LATENCY, &["-m", "128"]);
        assert_eq!((o.min_message_size, o.max_message_size), (0, 128));
        let o = run(&LATENCY, &["-m", "2:128"]);
        assert_eq!((o.min_message_size, o.max_message_size), (2, 128));
        let o = run(&BW, &["-m", "2:"]);
        assert_eq!((o.min_message_size, o.max_message_size), (2, 4194304));
        let o = run(&BW, &["-m", ":64"]);
        assert_eq!((o.min_message_size, o.max_message_size), (1, 64));
        // As in OSU: a bad minimum next to a good maximum is ignored.
        let o = run(&BW, &["-m", "0:64"]);
        assert_eq!((o.min_message_size, o.max_message_size), (1, 64));
        let o = run(&BW, &["--message-size=8:16"]);
        assert_eq!((o.min_message_size, o.max_message_size), (8, 16));
        assert_eq!(
            bad_usage(&BW, &["-m", "1:2:3"]),
            "Invalid Message Size [-m 1:2:3]"
        );
        assert_eq!(bad_usage(&BW, &["-m", ":"]), "Invalid Message Size [-m :]");
        assert_eq!(
            bad_usage(&BW, &["-m", "-5"]),
            "Invalid Message Size [-m -5]"
        );
        assert_eq!(
            bad_usage(&BW, &["-m", "0:"]),
            "Invalid Message Size [-m 0:]"
        );
    }

    #[test]
    fn iterations_warmup_window() {
        let o = run(&BW, &["-i", "7", "-x", "0", "-W", "3"]);
        assert_eq!(
            (o.iterations, o.iterations_large, o.skip, o.skip_large),
            (7, 7, 0, 0)
        );
        assert_eq!(o.window_size, 3);
        let o = run(&BW, &["-i5", "--warmup", "2", "--window-size=9"]);
        assert_eq!((o.iterations, o.skip, o.window_size), (5, 2, 9));
        let o = run(&LATENCY, &["--iter", "12", "--warm=1"]);
        assert_eq!((o.iterations, o.skip), (12, 1));
        assert_eq!(
            bad_usage(&LATENCY, &["-i", "0"]),
            "Invalid Number of Iterations [-i 0]"
        );
        assert_eq!(
            bad_usage(&LATENCY, &["-i", "abc"]),
            "Invalid Number of Iterations [-i abc]"
        );
        assert_eq!(
            bad_usage(&LATENCY, &["-x", "-1"]),
            "Invalid Number of Warmup Iterations [-x -1]"
        );
        assert_eq!(bad_usage(&BW, &["-W", "0"]), "Invalid Window Size [-W 0]");
        // C atoi: leading digits count.
        assert_eq!(run(&LATENCY, &["-i", "12abc"]).iterations, 12);
    }

    #[test]
    fn rejected_options() {
        // -f/--full exist only for OSU's collectives.
        for spec in [LATENCY, BW, BIBW, MBW_MR, MULTI_LAT] {
            assert_eq!(bad_usage(&spec, &["-f"]), "Invalid option [-f]");
            assert_eq!(bad_usage(&spec, &["--full"]), "Invalid option [--full]");
        }
        assert_eq!(bad_usage(&LATENCY, &["-W", "4"]), "Invalid option [-W]");
        assert_eq!(
            bad_usage(&LATENCY, &["--window-size=4"]),
            "Invalid option [--window-size]"
        );
        assert_eq!(bad_usage(&BW, &["-p", "1"]), "Invalid option [-p]");
        assert_eq!(
            bad_usage(&BW, &["-i"]),
            "Option Missing Required Argument [-i]"
        );
        assert_eq!(
            bad_usage(&BW, &["--iterations"]),
            "Option Missing Required Argument [-i]"
        );
        assert_eq!(bad_usage(&BW, &["--help=1"]), "Invalid option [-h]");
        // --m is ambiguous (message-size, mem-limit).
        assert_eq!(bad_usage(&BW, &["--m", "4"]), "Invalid option [--m]");
        assert_eq!(bad_usage(&BW, &["-i", "3", "-q"]), "Invalid option [-q]");
    }

    #[test]
    fn full_where_accepted() {
        let spec = Spec {
            full: true,
            ..LATENCY
        };
        let o = run(&spec, &["-f"]);
        assert!(o.show_full);
        assert!(run(&spec, &["--full"]).show_full);
        assert_eq!(
            column_header(&spec, &o),
            "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
        );
        assert!(help_text(&spec, false).contains("  -f, --full                print full format"));
    }

    #[test]
    fn help_version_and_stops() {
        assert_eq!(parse(&LATENCY, &["-h"]), Parsed::Help);
        assert_eq!(parse(&LATENCY, &["--help"]), Parsed::Help);
        assert_eq!(parse(&LATENCY, &["-v"]), Parsed::Version);
        assert_eq!(parse(&LATENCY, &["--vers"]), Parsed::Version);
        assert_eq!(parse(&LATENCY, &["-hv"]), Parsed::Help);
        assert_eq!(parse(&LATENCY, &["-i", "3", "-v"]), Parsed::Version);
        // Options end at the first non-option word or at "--".
        assert_eq!(run(&LATENCY, &["extra", "-i", "0"]).iterations, 10000);
        assert_eq!(run(&LATENCY, &["--", "-i", "0"]).iterations, 10000);
        // An option argument may start with '-'.
        assert_eq!(
            bad_usage(&LATENCY, &["-i", "-m", "8"]),
            "Invalid Number of Iterations [-i -m]"
        );
        assert_eq!(run(&LATENCY, &["-m", "-i"]).max_message_size, 0);
    }

    #[test]
    fn mem_limit() {
        let mut o = run(&BW, &["-M", "1000"]);
        assert_eq!(o.max_mem_limit, 1048576);
        assert_eq!(
            o.warnings,
            vec!["Requested memory limit too low, using [1048576] instead.".to_string()]
        );
        let w = o
            .limit_to_memory(&BW)
            .expect("4 MiB x 65 does not fit in 1 MiB");
        assert_eq!(o.max_message_size, 1048576 / 65);
        assert_eq!(
            w,
            "Warning! Limiting max message size to: 16131. Increase -M, --mem-limit for higher message sizes."
        );
        assert_eq!(o.sizes(&BW).last(), Some(&8192));
        let mut o = run(&LATENCY, &["--mem-limit", "16777216"]);
        assert!(o.warnings.is_empty());
        assert_eq!(o.limit_to_memory(&LATENCY), None);
        assert_eq!(o.max_message_size, 4194304);
        let mut o = run(&BW, &[]);
        assert_eq!(o.limit_to_memory(&BW), None, "the defaults fit in 512 MiB");
        let mut o = run(&BW, &["-W", "200"]);
        assert!(o.limit_to_memory(&BW).is_some());
        assert_eq!(o.sizes(&BW).last(), Some(&2097152));
    }

    #[test]
    fn mbw_mr_options() {
        let o = run(&MBW_MR, &["-p", "2", "-R", "0", "-W", "8"]);
        assert_eq!((o.pairs, o.print_rate, o.window_size), (Some(2), false, 8));
        assert_eq!(
            bad_usage(&MBW_MR, &["-R", "2"]),
            "Invalid Print Rate [-R 2]"
        );
        assert_eq!(
            bad_usage(&MBW_MR, &["-p", "0"]),
            "Invalid Number of Pairs [-p 0]"
        );
        assert_eq!(run(&MBW_MR, &[]).min_message_size, 1);
    }

    #[test]
    fn golden_output() {
        let o = Options::defaults(&LATENCY);
        assert_eq!(version_text(&LATENCY), "# OSU MPI Latency Test v7.4\n");
        assert_eq!(
            format!(
                "{}{}",
                preamble(&LATENCY, &o, 1),
                column_header(&LATENCY, &o)
            ),
            "\n# OSU MPI Latency Test v7.4\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n"
        );
        let o = Options::defaults(&BW);
        assert_eq!(
            format!("{}{}", preamble(&BW, &o, 1), column_header(&BW, &o)),
            "\n# OSU MPI Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n"
        );
        assert_eq!(
            preamble(&BIBW, &o, 1),
            "\n# OSU MPI Bi-Directional Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n"
        );
        assert_eq!(
            preamble(&MULTI_LAT, &o, 1),
            "\n# OSU MPI Multi Latency Test v7.4\n# Datatype: MPI_CHAR.\n"
        );
        let o = Options::defaults(&MBW_MR);
        assert_eq!(
            format!("{}{}", preamble(&MBW_MR, &o, 3), column_header(&MBW_MR, &o)),
            "\n# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n\
             # [ pairs: 3 ] [ window size: 64 ]\n# Datatype: MPI_CHAR.\n\
             # Size                  MB/s        Messages/s\n"
        );
        let no_rate = run(&MBW_MR, &["-R", "0"]);
        assert_eq!(
            column_header(&MBW_MR, &no_rate),
            "# Size                  MB/s\n"
        );
        assert_eq!(row(1, 0.2149), "1                       0.21\n");
        assert_eq!(row(4194304, 23647.654), "4194304             23647.65\n");
        assert_eq!(row(8, 0.125), "8                       0.12\n");
        assert_eq!(
            row2(1, 2.3649, 2356892.444),
            "1                       2.36        2356892.44\n"
        );
        assert_eq!(row(2, f64::INFINITY), "2                        inf\n");
    }

    #[test]
    fn golden_help() {
        assert_eq!(
            help_text(&LATENCY, true),
            "Usage: osu_latency [options]\n\
             Options:\n  \
             -h, --help                print this help\n  \
             -v, --version             print version info\n  \
             -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n                            \
             bytes respectively. Examples:\n                            \
             -m 128      // min = default, max = 128\n                            \
             -m 2:128    // min = 2, max = 128\n                            \
             -m 2:       // min = 2, max = default\n  \
             -x, --warmup              ITER - set number of warmup\n                            \
             iterations to skip before timing (default 200)\n  \
             -i, --iterations          ITER - number of iterations for timing (default 10000)\n  \
             -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n                            \
             (default 536870912)\n"
        );
        let bw = help_text(&BW, false);
        assert!(bw.contains(
            "  -W, --window-size         SIZE - set number of messages to send before synchronization (default 64)\n"
        ));
        let mbw = help_text(&MBW_MR, true);
        assert!(mbw.starts_with("Usage: osu_mbw_mr [options]\nOptions:\n  -p, --num-pairs "));
        assert!(mbw.ends_with("        the README for more information.\n"));
        assert!(!help_text(&MBW_MR, false).contains("Note:"));
    }

    const COLLECTIVES: [Spec; 8] = [
        BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, GATHER, SCATTER,
    ];

    #[test]
    fn collective_defaults_and_options() {
        for spec in COLLECTIVES {
            let o = run(&spec, &[]);
            assert_eq!(
                (
                    o.min_message_size,
                    o.max_message_size,
                    o.iterations,
                    o.skip,
                    o.iterations_large,
                    o.skip_large
                ),
                (1, 1048576, 1000, 100, 100, 10),
                "{}",
                spec.name
            );
            assert!(!o.show_full);
            assert!(run(&spec, &["-f"]).show_full);
            assert!(run(&spec, &["--full", "-i", "5"]).show_full);
            assert_eq!(bad_usage(&spec, &["-W", "2"]), "Invalid option [-W]");
            assert_eq!(
                bad_usage(&spec, &["-i", "0"]),
                "Invalid Number of Iterations [-i 0]"
            );
        }
        let o = run(&ALLREDUCE, &["-m", "4:64", "-x", "3", "-i", "7"]);
        assert_eq!(o.sizes(&ALLREDUCE), vec![4, 8, 16, 32, 64]);
        assert_eq!((o.iterations_for(16384), o.skip_for(16384)), (7, 3));
        let o = run(&BCAST, &[]);
        let s = o.sizes(&BCAST);
        assert_eq!(
            (s.first(), s.last(), s.len()),
            (Some(&1), Some(&1048576), 21)
        );
        assert_eq!(
            (o.iterations_for(8192), o.iterations_for(16384)),
            (1000, 100)
        );
        assert_eq!((o.skip_for(8192), o.skip_for(16384)), (100, 10));
        // The barrier takes -m and -M (as OSU's option string does) and ignores them.
        assert_eq!(
            run(&BARRIER, &["-m", "64", "-M", "2000000"]).max_message_size,
            64
        );
    }

    #[test]
    fn collective_roots_and_memory() {
        assert_eq!(
            (0..5).map(|i| Coll::Bcast.root(i, 3)).collect::<Vec<_>>(),
            vec![0, 1, 2, 0, 1]
        );
        assert_eq!(Coll::Reduce.root(7, 4), 3);
        assert_eq!(Coll::Gather.root(7, 4), 0);
        assert_eq!(Coll::Scatter.root(1, 2), 0);
        assert_eq!(Coll::Bcast.buffer_bytes(10, 4), 10);
        assert_eq!(Coll::Allreduce.buffer_bytes(10, 4), 20);
        assert_eq!(Coll::Gather.buffer_bytes(10, 4), 50);
        assert_eq!(Coll::Alltoall.buffer_bytes(10, 4), 80);
        assert_eq!(Coll::Barrier.buffer_bytes(10, 4), 0);
        let mut o = run(&ALLTOALL, &["-M", "1048576"]);
        let w = o
            .limit_to_memory_ranks(&ALLTOALL, 4)
            .expect("8 MiB does not fit in 1 MiB");
        assert_eq!(o.max_message_size, 131072);
        assert!(w.starts_with("Warning! Limiting max message size to: 131072."));
        assert_eq!(o.sizes(&ALLTOALL).last(), Some(&131072));
        let mut o = run(&ALLREDUCE, &[]);
        assert_eq!(o.limit_to_memory_ranks(&ALLREDUCE, 64), None);
        let mut o = run(&BARRIER, &["-M", "1", "-m", "99999999"]);
        assert_eq!(o.limit_to_memory_ranks(&BARRIER, 8), None);
    }

    #[test]
    fn golden_collective_output() {
        let o = run(&ALLREDUCE, &[]);
        assert_eq!(
            version_text(&ALLREDUCE),
            "# OSU MPI Allreduce Latency Test v7.4\n"
        );
        assert_eq!(
            format!(
                "{}{}",
                preamble(&ALLREDUCE, &o, 1),
                column_header(&ALLREDUCE, &o)
            ),
            "\n# OSU MPI Allreduce Latency Test v7.4\n# Datatype: MPI_CHAR.\n\
             # Size       Avg Latency(us)\n"
        );
        let st = CollStats {
            avg: 1.2349,
            min: 0.994,
            max: 12345.678,
        };
        assert_eq!(
            coll_row(&ALLREDUCE, &o, 4, &st, 1000),
            "4                       1.23\n"
        );
        assert_eq!(
            coll_row(&ALLREDUCE, &o, 1048576, &st, 100),
            "1048576                 1.23\n"
        );
        let full = run(&ALLREDUCE, &["-f"]);
        assert_eq!(
            column_header(&ALLREDUCE, &full),
            "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
        );
        assert_eq!(
            coll_row(&ALLREDUCE, &full, 16384, &st, 100),
            "16384                   1.23              0.99          12345.68         100\n"
        );
        for (spec, title) in [
            (BCAST, "OSU MPI Broadcast Latency Test"),
            (REDUCE, "OSU MPI Reduce Latency Test"),
            (ALLGATHER, "OSU MPI Allgather Latency Test"),
            (
                ALLTOALL,
                "OSU MPI All-to-All Personalized Exchange Latency Test",
            ),
            (GATHER, "OSU MPI Gather Latency Test"),
            (SCATTER, "OSU MPI Scatter Latency Test"),
        ] {
            assert_eq!(
                preamble(&spec, &o, 1),
                format!("\n# {title} v7.4\n# Datatype: MPI_CHAR.\n")
            );
            assert_eq!(column_header(&spec, &o), "# Size       Avg Latency(us)\n");
        }
    }

    #[test]
    fn golden_barrier_output() {
        let o = run(&BARRIER, &[]);
        assert_eq!(
            format!(
                "{}{}",
                preamble(&BARRIER, &o, 1),
                column_header(&BARRIER, &o)
            ),
            "\n# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)\n"
        );
        let st = CollStats {
            avg: 1.526,
            min: 1.5,
            max: 1.556,
        };
        assert_eq!(coll_row(&BARRIER, &o, 0, &st, 1000), "             1.53\n");
        let full = run(&BARRIER, &["-f"]);
        assert_eq!(
            column_header(&BARRIER, &full),
            "# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
        );
        assert_eq!(
            coll_row(&BARRIER, &full, 0, &st, 1000),
            "             1.53              1.50              1.56        1000\n"
        );
    }

    #[test]
    fn golden_collective_help() {
        assert_eq!(
            help_text(&ALLREDUCE, false),
            "Usage: osu_allreduce [options]\n\
             Options:\n  \
             -h, --help                print this help\n  \
             -v, --version             print version info\n  \
             -f, --full                print full format listing (MIN/MAX latency and ITERATIONS\n                            \
             displayed in addition to AVERAGE latency)\n  \
             -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n                            \
             bytes respectively. Examples:\n                            \
             -m 128      // min = default, max = 128\n                            \
             -m 2:128    // min = 2, max = 128\n                            \
             -m 2:       // min = 2, max = default\n  \
             -i, --iterations          ITER - set iterations per message size to ITER (default 1000 for small\n                            \
             messages, 100 for large messages)\n  \
             -x, --warmup              ITER - set number of warmup\n                            \
             iterations to skip before timing (default 200)\n  \
             -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n                            \
             (default 536870912)\n"
        );
        let barrier = help_text(&BARRIER, false);
        assert!(barrier.starts_with("Usage: osu_barrier [options]\nOptions:\n  -h, --help "));
        assert!(!barrier.contains("--message-size"));
        assert!(!barrier.contains("--mem-limit"));
        assert!(barrier.contains("  -f, --full "));
        assert!(barrier.contains("  -i, --iterations "));
    }

    #[test]
    fn arithmetic() {
        assert_eq!(latency_us(2.0e-6 * 10.0, 10), 1.0);
        assert_eq!(mean_us(3.0e-6 * 10.0, 10), 3.0);
        assert_eq!(bandwidth_mb_s(1_000_000, 64 * 10, 64.0), 10.0);
        assert_eq!(c_atoll("  +42x"), 42);
        assert_eq!(c_atoll("-7"), -7);
        assert_eq!(c_atoll("x"), 0);
        assert_eq!(c_atoi("4294967297"), 1);
        let mut b = AlignedBuf::new(10000);
        assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
        assert_eq!(b.as_mut_slice().len(), 10000);
        b.as_mut_i8_slice()[3] = -1;
        assert_eq!(b.as_slice()[3], 255);
        assert_eq!(b.as_i8_slice().len(), 10000);
    }
}
