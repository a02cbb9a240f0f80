//! The one-sided benchmarks (`src/bin/osu_put_latency.rs` ... `osu_cas_latency.rs`): the
//! Rust twin of `bench/c/osu_rma.h`, OSU 7.4's one-sided options, help, header, windows and
//! timed loops on [`kestrel::window`], so that each program holds only its [`RmaSpec`].
//!
//! # Options
//!
//! The OSU options of the two-rank tests (`-h -v -m -x -i -M`, and `-W` for the bandwidth
//! tests, parsed as in `options`), plus OSU's one-sided ones, taken out of the command line
//! first as `osu_rma.h` does (same `getopt` rules: `-w X`, `-wX`, `--win-options=X`,
//! `--win-options X`, unique prefixes of the long names, in a cluster like `-vwX`), so that the
//! first bad option on the command line is the one reported:
//!
//! | option | tests | meaning |
//! |---|---|---|
//! | `-w`, `--win-options` | all | `create` (`MPI_Win_create`: [`WindowCreation::with_window`]), `allocate` (`MPI_Win_allocate`: [`WindowCreation::allocate_window`]) or `dynamic`; case-insensitive |
//! | `-s`, `--sync-option` | all | `lock`, `pscw`, `fence`, `flush`, `flush_local`, `lock_all` (osu_put_bibw: `pscw`, `fence`); case-insensitive |
//! | `-T`, `--type` | acc, fop, cas | `mpi_char`, `mpi_int`, `mpi_float` (not cas), `mpi_long_long` (not OSU 7.4's), `all` (char, int and float; cas: char and int); prefixes compared case-insensitively as OSU's `strncasecmp`; each `-T` adds to the list (default `MPI_CHAR`) |
//!
//! Defaults: `-w allocate -s flush`, but osu_get_acc_latency `-w create -s lock` and
//! osu_put_bibw `-s pscw` (OSU's). A bad value prints `Invalid option or invalid argument [-w
//! X]` (or `Option Missing Required Argument [-w]`) and an empty line on stderr and the usage
//! on stdout, exit 1.
//!
//! Two choices the C twin has cannot be expressed with `kestrel::window`; the programs refuse
//! them with a message on stderr naming the reason and the C twin, exit 1 (after the options
//! and the rank count were checked, as a bad option is):
//!
//! * `-w dynamic`: the API has no dynamic windows (`MPI_Win_create_dynamic`, `attach`);
//! * osu_get_acc_latency `-s flush` and `-s flush_local`: OSU's loop issues every
//!   `MPI_Get_accumulate` into one result buffer within one lock, reusing it after each flush,
//!   but [`Epoch::get_accumulate`] keeps its result borrowed until the epoch closes and has no
//!   `_now` form.
//!
//! # Method (`osu_rma.h`)
//!
//! Rank 0 is the origin and rank 1 the target; exactly two ranks. Buffers and windows are
//! filled with `'a'` bytes (C's `memset`), the buffers page-aligned.
//!
//! **Latency tests** ([`rma_latency_sizes`], [`rma_atomic_latency`]): per size (1 B to 4 MiB in
//! powers of two; sizes below one element skipped) a new window of `size` bytes per rank and
//! `-x` untimed then `-i` timed operations of `size / element` elements at displacement 0
//! (default 100 and 10000, 10 and 1000 above 8 KiB); osu_fop_latency and osu_cas_latency
//! instead open one window of the `-m` maximum per type and measure one element. Per sync:
//! `lock` lock, operation, unlock each time (shared; exclusive for get_accumulate, fetch-and-op
//! and compare-and-swap); `flush` and `flush_local` one shared lock around operation +
//! flush (or flush_local) each time; `lock_all` lock_all, operation,
//! unlock_all each time; `fence` rank 0 operation in one fence epoch then an empty one, rank 1
//! an empty one then its operation (to rank 0); `pscw` rank 0 start, operation, complete, post,
//! wait, rank 1 post, wait, start, operation, complete. Reported: rank 0's time from the first
//! timed operation to the end of the last / `-i`, in microseconds, halved for fence and pscw
//! (both ranks operated).
//!
//! **Bandwidth tests** ([`rma_bandwidth_sizes`]): per size a new window of `size * W` bytes
//! (`-W`, default 64) and per iteration `W` operations of `size` bytes to consecutive places
//! of the target, then the synchronization (lock and lock_all around them, shared; flush and
//! flush_local after them within one shared lock; fence: both ranks' fence epochs, rank 0
//! operating; pscw: rank 0 start, operations, complete while rank 1 posts and waits).
//! osu_put_bibw (fence and pscw only) has rank 1 do the same towards rank 0 in the same epochs
//! (pscw: both post, start, operate, complete, wait). `-x` untimed (default 10, 2 above 8 KiB)
//! and `-i` timed iterations (100, 20); reported `size / 1e6 * W * -i / time` in MB/s, doubled
//! for osu_put_bibw.
//!
//! Where the Rust API makes the loop differ from the C one:
//!
//! * **fence**: a Rust fence epoch ([`Window::fence`]) opens and closes with its own fences,
//!   so consecutive epochs cannot share one `MPI_Win_fence` as C's do: a latency iteration
//!   makes 4 fences (C: 3: rank 0 fence-op-fence-fence, rank 1 fence-fence-op-fence); the
//!   bandwidth loop makes 2 per iteration, as C's.
//! * **gets under flush and flush_local**: a get's buffer stays borrowed until its epoch
//!   closes, so the gets of a flush loop (one lock) are [`Epoch::get_now`] (get +
//!   flush_local), followed in `flush` by the flush: a latency iteration makes one
//!   flush_local more than C's (on an all-local window a memory fence; otherwise only the
//!   wait for the data the flush waits for anyway), and get_bw completes each of the `W` gets
//!   before issuing the next (C: one flush_local or flush after `W` gets in flight).
//! * **fetch-and-op and compare-and-swap under flush and flush_local**: each operation's
//!   result goes to its own element (one per operation, warm-up included: 8 bytes per
//!   operation at most), so the loop makes exactly C's calls.
//!
//! # Output (rank 0, stdout)
//!
//! ```text
//! # OSU MPI_Put Latency Test v7.4
//! # Window creation: MPI_Win_allocate
//! # Synchronization: MPI_Win_flush
//! # Datatype: MPI_CHAR.
//! # Size          Latency (us)
//! 1                       0.04
//! ```
//!
//! OSU's `print_header_one_sided` (no empty line first; osu_get_acc_latency has no datatype
//! line; osu_acc_latency, osu_fop_latency and osu_cas_latency print it per `-T` type), the
//! column header `%-10s%18s` with `Latency (us)` or `Bandwidth (MB/s)`, rows `%-10d%18.2f`
//! (fop and cas: one row, the element's size in bytes).

use std::fmt::Write as _;
use std::time::Instant;

use kestrel::collective::{Reducible, SystemOperation};
use kestrel::window::{Epoch, LockType, Window, WindowCreation};
use kestrel::{Communicator as _, Rank, SimpleCommunicator};

use super::options::option_defs;
use super::{
    bandwidth_mb_s, parse, row, BadUsage, Bench, Options, Parsed, Spec, Subtype, FIELD_WIDTH,
    OMB_VERSION,
};

/// How the window is created (`-w`), in the order of OSU's `win_info[]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WinKind {
    /// `MPI_Win_create` on the program's memory ([`WindowCreation::with_window`]).
    Create,
    /// `MPI_Win_allocate` ([`WindowCreation::allocate_window`]).
    Allocate,
    /// `MPI_Win_create_dynamic`: accepted by the parser, refused by [`rma_begin`].
    Dynamic,
}

impl WinKind {
    /// Every kind, in OSU's order.
    pub const ALL: [WinKind; 3] = [WinKind::Create, WinKind::Allocate, WinKind::Dynamic];

    /// The `-w` argument.
    pub fn arg(self) -> &'static str {
        match self {
            WinKind::Create => "create",
            WinKind::Allocate => "allocate",
            WinKind::Dynamic => "dynamic",
        }
    }

    /// The MPI call, as the header names it.
    pub fn mpi_name(self) -> &'static str {
        match self {
            WinKind::Create => "MPI_Win_create",
            WinKind::Allocate => "MPI_Win_allocate",
            WinKind::Dynamic => "MPI_Win_create_dynamic",
        }
    }
}

/// The synchronization (`-s`), in the order of OSU's `sync_info[]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncKind {
    /// `MPI_Win_lock`/`unlock` around each operation (or window of operations).
    Lock,
    /// `MPI_Win_post`/`start`/`complete`/`wait`.
    Pscw,
    /// `MPI_Win_fence`.
    Fence,
    /// `MPI_Win_flush` after each operation (or window) within one lock.
    Flush,
    /// `MPI_Win_flush_local` after each operation (or window) within one lock.
    FlushLocal,
    /// `MPI_Win_lock_all`/`unlock_all` around each operation (or window).
    LockAll,
}

impl SyncKind {
    /// Every synchronization, in OSU's order.
    pub const ALL: [SyncKind; 6] = [
        SyncKind::Lock,
        SyncKind::Pscw,
        SyncKind::Fence,
        SyncKind::Flush,
        SyncKind::FlushLocal,
        SyncKind::LockAll,
    ];

    /// The `-s` argument.
    pub fn arg(self) -> &'static str {
        match self {
            SyncKind::Lock => "lock",
            SyncKind::Pscw => "pscw",
            SyncKind::Fence => "fence",
            SyncKind::Flush => "flush",
            SyncKind::FlushLocal => "flush_local",
            SyncKind::LockAll => "lock_all",
        }
    }

    /// The MPI calls, as the header names them.
    pub fn mpi_name(self) -> &'static str {
        match self {
            SyncKind::Lock => "MPI_Win_lock/unlock",
            SyncKind::Pscw => "MPI_Win_post/start/complete/wait",
            SyncKind::Fence => "MPI_Win_fence",
            SyncKind::Flush => "MPI_Win_flush",
            SyncKind::FlushLocal => "MPI_Win_flush_local",
            SyncKind::LockAll => "MPI_Win_lock_all/unlock_all",
        }
    }

    /// Whether it is one of the active-target synchronizations (all osu_put_bibw takes).
    pub fn is_active(self) -> bool {
        matches!(self, SyncKind::Pscw | SyncKind::Fence)
    }
}

/// A `-T` datatype and the Rust element type that stands for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmaType {
    /// `MPI_CHAR`: `i8`.
    Char,
    /// `MPI_INT`: `i32`.
    Int,
    /// `MPI_FLOAT`: `f32`.
    Float,
    /// `MPI_LONG_LONG`: `i64` (not an OSU 7.4 choice: the 8-byte atomics of OSU before 7.x).
    LongLong,
}

impl RmaType {
    /// The MPI name, as the header prints it.
    pub fn mpi_name(self) -> &'static str {
        match self {
            RmaType::Char => "MPI_CHAR",
            RmaType::Int => "MPI_INT",
            RmaType::Float => "MPI_FLOAT",
            RmaType::LongLong => "MPI_LONG_LONG",
        }
    }

    /// Bytes per element.
    pub fn size(self) -> usize {
        match self {
            RmaType::Char => 1,
            RmaType::Int | RmaType::Float => 4,
            RmaType::LongLong => 8,
        }
    }
}

/// The most `-T` types a command line may list (OSU's array of 16).
pub const MAX_TYPES: usize = 16;

/// The operation a one-sided benchmark measures (the C files' own function).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RmaOp {
    /// `MPI_Put` of `size` bytes.
    Put,
    /// `MPI_Get` of `size` bytes.
    Get,
    /// `MPI_Accumulate(MPI_SUM)` of `size / element` elements.
    Accumulate,
    /// `MPI_Get_accumulate(MPI_SUM)` of `size` chars, the old contents into a result buffer.
    GetAccumulate,
    /// `MPI_Fetch_and_op(MPI_SUM)` of one element.
    FetchAndOp,
    /// `MPI_Compare_and_swap` of one element.
    CompareAndSwap,
}

impl RmaOp {
    /// The lock kinds of the `lock` and of the `flush`/`flush_local` loops (OSU's).
    pub fn lock_types(self) -> (LockType, LockType) {
        match self {
            RmaOp::GetAccumulate => (LockType::Exclusive, LockType::Exclusive),
            RmaOp::FetchAndOp | RmaOp::CompareAndSwap => (LockType::Exclusive, LockType::Shared),
            RmaOp::Put | RmaOp::Get | RmaOp::Accumulate => (LockType::Shared, LockType::Shared),
        }
    }

    /// Buffers of the largest size per rank that `-M` must hold, the window's included (the
    /// C twin's `rma_limit_to_memory` argument; times `-W` for the bandwidth tests).
    pub fn blocks(self) -> usize {
        match self {
            RmaOp::Put | RmaOp::Get | RmaOp::Accumulate => 2,
            RmaOp::GetAccumulate | RmaOp::FetchAndOp => 3,
            RmaOp::CompareAndSwap => 4,
        }
    }

    /// Whether it reads the origin buffer.
    fn has_origin(self) -> bool {
        self != RmaOp::Get
    }

    /// Whether it writes a result buffer.
    fn has_result(self) -> bool {
        !matches!(self, RmaOp::Put | RmaOp::Accumulate)
    }

    /// Fetch-and-op and compare-and-swap: one element, a result per operation in flush loops.
    fn is_atomic(self) -> bool {
        matches!(self, RmaOp::FetchAndOp | RmaOp::CompareAndSwap)
    }
}

/// One one-sided benchmark (what the C file defines before including `osu_rma.h`).
#[derive(Clone, Copy, Debug)]
pub struct RmaSpec {
    /// Program name (`osu_put_latency`).
    pub name: &'static str,
    /// Title without version, as OSU spells it.
    pub title: &'static str,
    /// The operation measured.
    pub op: RmaOp,
    /// Latency or bandwidth (`RMA_BW`: `-W`, OSU's bandwidth counts).
    pub subtype: Subtype,
    /// Rank 1 operates towards rank 0 too (osu_put_bibw).
    pub bidirectional: bool,
    /// `-s` takes only pscw and fence (`RMA_ACTIVE_ONLY`).
    pub active_only: bool,
    /// What `-T all` means; empty: no `-T` (`RMA_TYPES`, `RMA_NO_FLOAT`).
    pub types: &'static [RmaType],
    /// `-w` when not given (`RMA_WIN_DEFAULT`).
    pub win_default: WinKind,
    /// `-s` when not given (`RMA_SYNC_DEFAULT`).
    pub sync_default: SyncKind,
    /// OSU's own usage line of osu_get_acc_latency (`RMA_GET_ACC_HELP`).
    pub own_usage: bool,
}

const LAT: RmaSpec = RmaSpec {
    name: "",
    title: "",
    op: RmaOp::Put,
    subtype: Subtype::Lat,
    bidirectional: false,
    active_only: false,
    types: &[],
    win_default: WinKind::Allocate,
    sync_default: SyncKind::Flush,
    own_usage: false,
};

/// `-T all` of acc and fop.
const ALL_TYPES: &[RmaType] = &[RmaType::Char, RmaType::Int, RmaType::Float];
/// `-T all` of cas (no floating-point type in `MPI_Compare_and_swap`).
const INTEGER_TYPES: &[RmaType] = &[RmaType::Char, RmaType::Int];

/// `osu_put_latency`.
pub const PUT_LATENCY: RmaSpec = RmaSpec {
    name: "osu_put_latency",
    title: "OSU MPI_Put Latency Test",
    ..LAT
};
/// `osu_get_latency` (OSU's title spells "latency" in lower case).
pub const GET_LATENCY: RmaSpec = RmaSpec {
    name: "osu_get_latency",
    title: "OSU MPI_Get latency Test",
    op: RmaOp::Get,
    ..LAT
};
/// `osu_put_bw`.
pub const PUT_BW: RmaSpec = RmaSpec {
    name: "osu_put_bw",
    title: "OSU MPI_Put Bandwidth Test",
    subtype: Subtype::Bw,
    ..LAT
};
/// `osu_get_bw`.
pub const GET_BW: RmaSpec = RmaSpec {
    name: "osu_get_bw",
    title: "OSU MPI_Get Bandwidth Test",
    op: RmaOp::Get,
    subtype: Subtype::Bw,
    ..LAT
};
/// `osu_put_bibw`: active target only, pscw by default.
pub const PUT_BIBW: RmaSpec = RmaSpec {
    name: "osu_put_bibw",
    title: "OSU MPI_Put Bi-directional Bandwidth Test",
    subtype: Subtype::Bw,
    bidirectional: true,
    active_only: true,
    sync_default: SyncKind::Pscw,
    ..LAT
};
/// `osu_acc_latency`.
pub const ACC_LATENCY: RmaSpec = RmaSpec {
    name: "osu_acc_latency",
    title: "OSU MPI_Accumulate latency Test",
    op: RmaOp::Accumulate,
    types: ALL_TYPES,
    ..LAT
};
/// `osu_get_acc_latency`: `MPI_Win_create` and lock by default, OSU's own usage line.
pub const GET_ACC_LATENCY: RmaSpec = RmaSpec {
    name: "osu_get_acc_latency",
    title: "OSU MPI_Get_accumulate latency Test",
    op: RmaOp::GetAccumulate,
    win_default: WinKind::Create,
    sync_default: SyncKind::Lock,
    own_usage: true,
    ..LAT
};
/// `osu_fop_latency`.
pub const FOP_LATENCY: RmaSpec = RmaSpec {
    name: "osu_fop_latency",
    title: "OSU MPI_Fetch_and_op latency Test",
    op: RmaOp::FetchAndOp,
    types: ALL_TYPES,
    ..LAT
};
/// `osu_cas_latency` (`-T` without `mpi_float`).
pub const CAS_LATENCY: RmaSpec = RmaSpec {
    name: "osu_cas_latency",
    title: "OSU MPI_Compare_and_swap latency Test",
    op: RmaOp::CompareAndSwap,
    types: INTEGER_TYPES,
    ..LAT
};

impl RmaSpec {
    /// The [`Spec`] whose options (`-h -v -m -x -i -M`, `-W` for bandwidth) it takes.
    pub fn base(&self) -> Spec {
        Spec {
            name: self.name,
            title: self.title,
            bench: Bench::Pt2pt,
            subtype: self.subtype,
            full: false,
        }
    }

    /// Whether it is a bandwidth test.
    pub fn is_bw(&self) -> bool {
        self.subtype == Subtype::Bw
    }

    /// Whether it takes `-T`.
    pub fn takes_types(&self) -> bool {
        !self.types.is_empty()
    }
}

/// The options of a one-sided run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RmaOptions {
    /// The OSU options (`-m -x -i -W -M`), the smallest size at least 1.
    pub opts: Options,
    /// `-w`.
    pub win: WinKind,
    /// `-s`.
    pub sync: SyncKind,
    /// `-T`, in order (`MPI_CHAR` when none).
    pub types: Vec<RmaType>,
}

/// The outcome of parsing a one-sided command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RmaParsed {
    /// Run with these options.
    Run(RmaOptions),
    /// `-h`: print [`rma_help_text`], exit 0.
    Help,
    /// `-v`: print the title line, exit 0.
    Version,
    /// A bad OSU option (reported before the rank count is checked).
    BadUsage(BadUsage),
    /// A bad `-w`, `-s` or `-T` (reported after the rank count and the other options'
    /// warnings, as `osu_rma.h` does).
    BadRmaOption {
        /// What to report.
        bad: BadUsage,
        /// The other options' warnings (`-M`).
        warnings: Vec<String>,
    },
}

/// A long option as `osu_rma.h`'s `rma_longs[]` has it.
struct LongDef {
    name: &'static str,
    short: char,
    arg: bool,
}

/// The long options of `spec`, in `rma_longs[]`'s order.
fn long_defs(spec: &RmaSpec) -> Vec<LongDef> {
    let d = |name, short, arg| LongDef { name, short, arg };
    let mut v = vec![
        d("help", 'h', false),
        d("version", 'v', false),
        d("message-size", 'm', true),
        d("warmup", 'x', true),
        d("iterations", 'i', true),
        d("mem-limit", 'M', true),
    ];
    if spec.is_bw() {
        v.push(d("window-size", 'W', true));
    }
    if spec.takes_types() {
        v.push(d("type", 'T', true));
    }
    v.push(d("win-options", 'w', true));
    v.push(d("sync-option", 's', true));
    v
}

/// Whether `c` is one of the options this module takes out (`-w`, `-s`, `-T`).
fn is_rma_short(spec: &RmaSpec, c: char) -> bool {
    c == 'w' || c == 's' || (c == 'T' && spec.takes_types())
}

/// `-w`, `-s` and `-T` as parsed so far.
struct Choices {
    win: WinKind,
    sync: SyncKind,
    types: Vec<RmaType>,
}

/// `strncasecmp(val, pattern, strlen(pattern)) == 0`.
fn starts_with_ignore_case(val: &str, pattern: &str) -> bool {
    let (v, p) = (val.as_bytes(), pattern.as_bytes());
    v.len() >= p.len() && v[..p.len()].eq_ignore_ascii_case(p)
}

/// OSU's `process_one_sided_options` for `c` (`w`, `s`, `T`); `Err` for a bad value.
fn set_rma_option(spec: &RmaSpec, ch: &mut Choices, c: char, val: &str) -> Result<(), ()> {
    match c {
        'w' => {
            let k = WinKind::ALL
                .into_iter()
                .find(|k| val.eq_ignore_ascii_case(k.arg()));
            ch.win = k.ok_or(())?;
        }
        's' => {
            let k = SyncKind::ALL
                .into_iter()
                .find(|k| val.eq_ignore_ascii_case(k.arg()));
            match k {
                Some(k) if !spec.active_only || k.is_active() => ch.sync = k,
                _ => return Err(()),
            }
        }
        _ => {
            let float = spec.types.contains(&RmaType::Float);
            let add: &[RmaType] = if starts_with_ignore_case(val, "MPI_CHAR") {
                &[RmaType::Char]
            } else if starts_with_ignore_case(val, "MPI_INT") {
                &[RmaType::Int]
            } else if float && starts_with_ignore_case(val, "MPI_FLOAT") {
                &[RmaType::Float]
            } else if starts_with_ignore_case(val, "MPI_LONG_LONG") {
                &[RmaType::LongLong]
            } else if starts_with_ignore_case(val, "ALL") {
                spec.types
            } else {
                return Err(());
            };
            for &t in add {
                if ch.types.len() < MAX_TYPES {
                    ch.types.push(t);
                }
            }
        }
    }
    Ok(())
}

/// `osu_rma.h`'s `rma_strip`: the words but `-w`, `-s` (and `-T`) with their values, applied
/// to `ch`, stopping at the first bad one of those (returned; the words after it are dropped,
/// so that a bad OSU option before it is reported first).
fn strip<S: AsRef<str>>(
    spec: &RmaSpec,
    args: &[S],
    ch: &mut Choices,
) -> (Vec<String>, Option<BadUsage>) {
    let longs = long_defs(spec);
    let bad = |message: &str, option: String, arg: Option<&str>| {
        Some(BadUsage {
            message: message.to_string(),
            option,
            optarg: arg.map(str::to_string),
        })
    };
    let mut rest: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_ref();
        if !a.starts_with('-') || a == "-" || a == "--" {
            break; // options end at the first operand ("+")
        }
        let (c, val): (char, Option<String>);
        if let Some(long) = a.strip_prefix("--") {
            let (name, eq) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            // getopt_long's match: the exact name, else a unique prefix.
            let def = match longs.iter().find(|d| d.name == name) {
                Some(d) => Some(d),
                None => {
                    let m: Vec<&LongDef> =
                        longs.iter().filter(|d| d.name.starts_with(name)).collect();
                    if m.len() > 1 {
                        // Ambiguous: reported here if one of ours matches, else by parse().
                        if m.iter().any(|d| is_rma_short(spec, d.short)) {
                            return (rest, bad("Invalid option", format!("--{name}"), None));
                        }
                        None
                    } else {
                        m.first().copied()
                    }
                }
            };
            match def {
                Some(d) if is_rma_short(spec, d.short) => {
                    c = d.short;
                    val = eq.map(str::to_string);
                }
                _ => {
                    rest.push(a.to_string());
                    i += 1;
                    if def.is_some_and(|d| d.arg) && eq.is_none() && i < args.len() {
                        rest.push(args[i].as_ref().to_string());
                        i += 1;
                    }
                    continue;
                }
            }
        } else {
            let cluster: Vec<char> = a[1..].chars().collect();
            let mut p = 0;
            while p < cluster.len() && !is_rma_short(spec, cluster[p]) {
                let k = cluster[p];
                if "mxiM".contains(k) || (k == 'W' && spec.is_bw()) {
                    break; // the rest of the word (or the next word) is this option's value
                }
                p += 1;
            }
            if p == cluster.len() || !is_rma_short(spec, cluster[p]) {
                rest.push(a.to_string());
                i += 1;
                if p + 1 == cluster.len() && i < args.len() {
                    rest.push(args[i].as_ref().to_string());
                    i += 1;
                }
                continue;
            }
            if p > 0 {
                // The flags before it, as a word of their own.
                rest.push(format!("-{}", cluster[..p].iter().collect::<String>()));
            }
            c = cluster[p];
            let tail: String = cluster[p + 1..].iter().collect();
            val = (!tail.is_empty()).then_some(tail);
        }
        let mut used = 1;
        let val = match val {
            Some(v) => v,
            None => {
                if i + 1 >= args.len() {
                    let message = "Option Missing Required Argument";
                    return (rest, bad(message, format!("-{c}"), None));
                }
                used = 2;
                args[i + 1].as_ref().to_string()
            }
        };
        if set_rma_option(spec, ch, c, &val).is_err() {
            let message = "Invalid option or invalid argument";
            return (rest, bad(message, format!("-{c}"), Some(&val)));
        }
        i += used;
    }
    rest.extend(args[i..].iter().map(|s| s.as_ref().to_string()));
    (rest, None)
}

/// Parses the arguments after the program name as `osu_rma.h`: `-w`, `-s` (and `-T`) first,
/// then the others with [`parse`].
pub fn rma_parse<S: AsRef<str>>(spec: &RmaSpec, args: &[S]) -> RmaParsed {
    let mut ch = Choices {
        win: spec.win_default,
        sync: spec.sync_default,
        types: Vec::new(),
    };
    let (rest, bad) = strip(spec, args, &mut ch);
    match parse(&spec.base(), &rest) {
        Parsed::Run(mut opts) => {
            if let Some(bad) = bad {
                return RmaParsed::BadRmaOption {
                    bad,
                    warnings: opts.warnings,
                };
            }
            // OSU's one-sided tests start at 1 (the latency default of `options` is 0, which
            // the two-sided tests skip).
            opts.min_message_size = opts.min_message_size.max(1);
            if ch.types.is_empty() {
                ch.types.push(RmaType::Char);
            }
            RmaParsed::Run(RmaOptions {
                opts,
                win: ch.win,
                sync: ch.sync,
                types: ch.types,
            })
        }
        Parsed::Help => RmaParsed::Help,
        Parsed::Version => RmaParsed::Version,
        Parsed::BadUsage(b) => RmaParsed::BadUsage(b),
    }
}

impl RmaOptions {
    /// The sizes of `osu_rma.h`'s loops: from the smallest, doubling, up to the largest.
    pub fn sizes(&self) -> Vec<usize> {
        let (min, max) = (self.opts.min_message_size, self.opts.max_message_size);
        let mut out = Vec::new();
        let mut size = min;
        while size <= max {
            out.push(size);
            if size > max / 2 {
                break; // the next doubling would pass the maximum (or overflow)
            }
            size *= 2;
        }
        out
    }

    /// Applies `-M` as `rma_limit_to_memory`: the largest size whose buffers (the operation's
    /// [`RmaOp::blocks`], times `-W` for bandwidth) fit; OSU's warning when it lowered it.
    pub fn limit_to_memory(&mut self, spec: &RmaSpec) -> Option<String> {
        let mut blocks = spec.op.blocks();
        if spec.is_bw() {
            blocks = blocks.saturating_mul(self.opts.window_size);
        }
        let fits = self.opts.max_mem_limit / blocks;
        if self.opts.max_message_size <= fits {
            return None;
        }
        self.opts.max_message_size = fits;
        Some(format!(
            "Warning! Limiting max message size to: {fits}. Increase -M, --mem-limit for higher message sizes."
        ))
    }

    /// Why the Rust twin cannot run these options (see the module documentation), or `None`.
    pub fn unsupported(&self, spec: &RmaSpec) -> Option<String> {
        let twin = format!(
            "use the C twin bench/c/{}.c (built with abi/bin/mpicc) for it",
            spec.name
        );
        if self.win == WinKind::Dynamic {
            return Some(format!(
                "{}: -w dynamic (MPI_Win_create_dynamic) is not available: kestrel::window has \
                 no dynamic windows (no MPI_Win_create_dynamic, MPI_Win_attach); {twin}",
                spec.name
            ));
        }
        if spec.op == RmaOp::GetAccumulate
            && matches!(self.sync, SyncKind::Flush | SyncKind::FlushLocal)
        {
            return Some(format!(
                "{}: -s {} ({}) is not available: kestrel::window's get_accumulate keeps its \
                 result buffer borrowed until the epoch closes and has no _now form, so OSU's \
                 get-accumulates into one result buffer within one lock, reused after each \
                 flush, cannot be written; {twin}",
                spec.name,
                self.sync.arg(),
                self.sync.mpi_name()
            ));
        }
        None
    }
}

/// The usage text, byte for byte `osu_rma.h`'s `help()`.
pub fn rma_help_text(spec: &RmaSpec) -> String {
    let pad = "";
    let mut s = if spec.own_usage {
        format!(
            "Usage: ./{} -w <win_option>  -s < sync_option> [-x ITER] [-i ITER]\n",
            spec.name
        )
    } else {
        format!("Usage: {} [options]\nOptions:\n", spec.name)
    };
    s.push_str(
        "  -w, --win-options         WIN_OPTION - Supports MPI>=3. Can be any of the follows:\n",
    );
    for (arg, call) in [
        ("create  ", "MPI_Win_create"),
        ("allocate", "MPI_Win_allocate"),
        ("dynamic ", "MPI_Win_create_dynamic"),
    ] {
        let _ = writeln!(
            s,
            "{pad:28}{arg}     use {call} to create an MPI Window object"
        );
    }
    let _ = writeln!(s, "{pad:28}(default {})", spec.win_default.arg());
    s.push_str("  -s, --sync-option         SYNC_OPTION - can be any of the follows:\n");
    let _ = writeln!(
        s,
        "{pad:28}pscw          use Post/Start/Complete/Wait synchronization calls"
    );
    let _ = writeln!(
        s,
        "{pad:28}fence         use MPI_Win_fence synchronization call"
    );
    if !spec.active_only {
        let _ = writeln!(
            s,
            "{pad:28}lock          use MPI_Win_lock/unlock synchronizations calls"
        );
        let _ = writeln!(
            s,
            "{pad:28}flush         use MPI_Win_flush synchronization call"
        );
        let _ = writeln!(
            s,
            "{pad:28}flush_local   use MPI_Win_flush_local synchronization call"
        );
        let _ = writeln!(
            s,
            "{pad:28}lock_all      use MPI_Win_lock_all/unlock_all synchronization calls"
        );
    }
    let _ = writeln!(s, "{pad:28}(default {})", spec.sync_default.arg());
    // -h -v -m -x -i (-W), then -T, then -M: the order of osu_rma.h's help.
    let defs = option_defs(&spec.base());
    let line = |s: &mut String, short: char| {
        if let Some(d) = defs.iter().find(|d| d.short == short) {
            let _ = writeln!(s, "  -{}, --{:<20}{}", d.short, d.long, d.help[0]);
            for l in &d.help[1..] {
                let _ = writeln!(s, "{pad:28}{l}");
            }
        }
    };
    for short in ['h', 'v', 'm', 'x', 'i', 'W'] {
        line(&mut s, short);
    }
    if spec.takes_types() {
        let names: Vec<&str> = ["all"]
            .into_iter()
            .chain(spec.types.iter().map(|t| match t {
                RmaType::Char => "mpi_char",
                RmaType::Int => "mpi_int",
                RmaType::Float => "mpi_float",
                RmaType::LongLong => "mpi_long_long",
            }))
            .collect();
        let _ = writeln!(
            s,
            "  -T, --type                [{}] - Set MPI_TYPE . Default:MPI_CHAR.",
            names.join(",")
        );
        let _ = writeln!(
            s,
            "{pad:28}(also mpi_long_long: the 8-byte operation of OSU before 7.x)"
        );
    }
    line(&mut s, 'M');
    s
}

/// The title line (also what `-v` prints).
pub fn rma_version_text(spec: &RmaSpec) -> String {
    format!("# {} v{}\n", spec.title, OMB_VERSION)
}

/// OSU's `print_header_one_sided`: title, window creation, synchronization, the datatype
/// (`None`: no line, as osu_get_acc_latency) and the column header.
pub fn rma_header(spec: &RmaSpec, o: &RmaOptions, datatype: Option<RmaType>) -> String {
    let mut s = rma_version_text(spec);
    let _ = writeln!(s, "# Window creation: {}", o.win.mpi_name());
    let _ = writeln!(s, "# Synchronization: {}", o.sync.mpi_name());
    if let Some(t) = datatype {
        let _ = writeln!(s, "# Datatype: {}.", t.mpi_name());
    }
    let column = match spec.subtype {
        Subtype::Lat => "Latency (us)",
        Subtype::Bw => "Bandwidth (MB/s)",
    };
    let _ = writeln!(s, "{:<10}{column:>FIELD_WIDTH$}", "# Size");
    s
}

/// The start of a one-sided test on every rank, in `osu_rma.h`'s order: parses the options
/// (`-h`, `-v` and a bad OSU option print on rank 0 and stop), requires exactly two ranks,
/// prints the options' warnings, reports a bad `-w`/`-s`/`-T`, refuses what the Rust API
/// cannot do ([`RmaOptions::unsupported`]) and applies `-M`. `Err` carries the exit status for
/// [`exit`](super::exit).
pub fn rma_begin(
    spec: &RmaSpec,
    world: &SimpleCommunicator,
    args: &[String],
) -> Result<RmaOptions, i32> {
    let (rank, nprocs) = (world.rank(), world.size());
    let root = rank == 0;
    let report = |b: &BadUsage| {
        if root {
            eprint!("{b}\n\n");
            print!("{}", rma_help_text(spec));
        }
    };
    let (o, bad) = match rma_parse(spec, args) {
        RmaParsed::Help => {
            if root {
                print!("{}", rma_help_text(spec));
            }
            return Err(0);
        }
        RmaParsed::Version => {
            if root {
                print!("{}", rma_version_text(spec));
            }
            return Err(0);
        }
        RmaParsed::BadUsage(b) => {
            report(&b);
            return Err(1);
        }
        RmaParsed::Run(o) => (Some(o), None),
        RmaParsed::BadRmaOption { bad, warnings } => (None, Some((bad, warnings))),
    };
    if nprocs != 2 {
        if root {
            eprintln!("This test requires exactly two processes");
        }
        return Err(1);
    }
    let warnings = match (&o, &bad) {
        (Some(o), _) => &o.opts.warnings,
        (None, Some((_, w))) => w,
        (None, None) => unreachable!("either options or a bad one"),
    };
    if root {
        for w in warnings {
            eprintln!("{w}");
        }
    }
    let Some(mut o) = o else {
        if let Some((b, _)) = &bad {
            report(b);
        }
        return Err(1);
    };
    if let Some(why) = o.unsupported(spec) {
        if root {
            eprintln!("{why}");
        }
        return Err(1);
    }
    if let Some(w) = o.limit_to_memory(spec) {
        if root {
            eprintln!("{w}");
        }
    }
    Ok(o)
}

/// An element type of the one-sided windows: what `-T` names (and `u8` for the byte-wise puts
/// and gets).
pub trait RmaElem: Reducible + PartialEq {
    /// The element C's `memset(p, 'a', n)` leaves.
    fn filled() -> Self;
}

impl RmaElem for u8 {
    fn filled() -> u8 {
        b'a'
    }
}

impl RmaElem for i8 {
    fn filled() -> i8 {
        i8::from_ne_bytes([b'a'])
    }
}

impl RmaElem for i32 {
    fn filled() -> i32 {
        i32::from_ne_bytes([b'a'; 4])
    }
}

impl RmaElem for f32 {
    fn filled() -> f32 {
        f32::from_ne_bytes([b'a'; 4])
    }
}

impl RmaElem for i64 {
    fn filled() -> i64 {
        i64::from_ne_bytes([b'a'; 8])
    }
}

/// Elements of `T` starting at a 4096-byte boundary (OSU's `posix_memalign`), filled with
/// `'a'` bytes.
struct PageBuf<T> {
    storage: Vec<T>,
    offset: usize,
    len: usize,
}

impl<T: RmaElem> PageBuf<T> {
    fn filled(len: usize) -> PageBuf<T> {
        const PAGE: usize = 4096;
        let per_page = (PAGE / std::mem::size_of::<T>()).max(1);
        let storage = vec![T::filled(); len + per_page];
        let offset = storage.as_ptr().align_offset(PAGE).min(per_page);
        PageBuf {
            storage,
            offset,
            len,
        }
    }

    fn as_slice(&self) -> &[T] {
        &self.storage[self.offset..self.offset + self.len]
    }

    fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// A window of `len` elements per rank as `-w` says, filled with `'a'` bytes, for the
/// duration of `f` (freed collectively when it returns).
fn with_rma_window<T: RmaElem, R>(
    world: &SimpleCommunicator,
    kind: WinKind,
    len: usize,
    f: impl FnOnce(&Window<T>) -> R,
) -> R {
    match kind {
        WinKind::Create => {
            let mut memory = PageBuf::<T>::filled(len);
            world.with_window(memory.as_mut_slice(), f)
        }
        WinKind::Allocate => {
            let win = world.allocate_window::<T>(len);
            win.with_local(|m| m.fill(T::filled()));
            f(&win)
        }
        WinKind::Dynamic => unreachable!("rma_begin refuses -w dynamic"),
    }
}

/// One latency operation's buffers (OSU's `allocate_memory_one_sided`): origin, compare and
/// result of `count` elements as the operation uses them, and for fetch-and-op and
/// compare-and-swap under flush one result element per operation.
struct LatencyBufs<T> {
    origin: PageBuf<T>,
    compare: PageBuf<T>,
    result: PageBuf<T>,
    slots: Vec<T>,
}

impl<T: RmaElem> LatencyBufs<T> {
    fn new(op: RmaOp, sync: SyncKind, count: usize, operations: usize) -> LatencyBufs<T> {
        let flush = matches!(sync, SyncKind::Flush | SyncKind::FlushLocal);
        let n = |yes: bool| if yes { count } else { 0 };
        LatencyBufs {
            origin: PageBuf::filled(n(op.has_origin())),
            compare: PageBuf::filled(n(op == RmaOp::CompareAndSwap)),
            result: PageBuf::filled(n(op.has_result())),
            slots: vec![
                T::filled();
                if op.is_atomic() && flush {
                    operations
                } else {
                    0
                }
            ],
        }
    }
}

/// One operation to `target` at displacement 0, its result (if any) into `result`, which
/// stays borrowed until the epoch closes.
fn issue<'b, T: RmaElem>(
    e: &Epoch<'b, T>,
    op: RmaOp,
    target: Rank,
    origin: &[T],
    compare: &[T],
    result: &'b mut [T],
) {
    let sum = SystemOperation::sum;
    match op {
        RmaOp::Put => e.put(target, 0, origin),
        RmaOp::Get => e.get(target, 0, result),
        RmaOp::Accumulate => e.accumulate(target, 0, origin, sum()),
        RmaOp::GetAccumulate => e.get_accumulate(target, 0, origin, result, sum()),
        RmaOp::FetchAndOp => e.fetch_and_op(target, 0, &origin[0], &mut result[0], sum()),
        RmaOp::CompareAndSwap => {
            e.compare_and_swap(target, 0, &compare[0], &origin[0], &mut result[0])
        }
    }
}

/// One operation of a flush loop (many in one lock epoch): a get completes at once
/// ([`Epoch::get_now`]) so that its buffer is reused, fetch-and-op and compare-and-swap write
/// their own element of `slots`.
fn issue_in_lock<'b, T: RmaElem>(
    e: &Epoch<'b, T>,
    op: RmaOp,
    origin: &[T],
    compare: &[T],
    result: &mut [T],
    slots: &mut std::slice::IterMut<'b, T>,
) {
    let sum = SystemOperation::sum;
    let mut slot = || slots.next().expect("one result element per operation");
    match op {
        RmaOp::Put | RmaOp::Accumulate => issue(e, op, 1, origin, compare, &mut []),
        RmaOp::Get => e.get_now(1, 0, result),
        RmaOp::FetchAndOp => e.fetch_and_op(1, 0, &origin[0], slot(), sum()),
        RmaOp::CompareAndSwap => e.compare_and_swap(1, 0, &compare[0], &origin[0], slot()),
        RmaOp::GetAccumulate => unreachable!("rma_begin refuses get_accumulate under flush"),
    }
}

/// OSU's `run_*_with_<sync>` for the latency tests on `win`: `warm` untimed then `iters` timed
/// operations of `bufs` (see the module documentation). Returns rank 0's microseconds per
/// operation (halved for fence and pscw; 0 on rank 1); a barrier ends it.
fn latency_loop<T: RmaElem>(
    world: &SimpleCommunicator,
    spec: &RmaSpec,
    sync: SyncKind,
    win: &Window<T>,
    bufs: &mut LatencyBufs<T>,
    iters: usize,
    warm: usize,
) -> f64 {
    let rank = world.rank();
    let (op, total) = (spec.op, iters + warm);
    let (lock, flush_lock) = op.lock_types();
    let origin = bufs.origin.as_slice();
    let compare = bufs.compare.as_slice();
    let result = bufs.result.as_mut_slice();
    let mut slots = bufs.slots.iter_mut();
    let (mut t_start, mut t_end) = (None::<Instant>, None::<Instant>);
    let mut factor = 1.0;
    match sync {
        SyncKind::Lock if rank == 0 => {
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock(1, lock, |e| issue(e, op, 1, origin, compare, result));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Flush | SyncKind::FlushLocal if rank == 0 => {
            (t_start, t_end) = win.lock(1, flush_lock, |e| {
                let mut start = None;
                for i in 0..total {
                    if i == warm {
                        start = Some(Instant::now());
                    }
                    issue_in_lock(e, op, origin, compare, result, &mut slots);
                    if sync == SyncKind::Flush {
                        e.flush(1);
                    } else if op != RmaOp::Get {
                        // get_now ended with it already.
                        e.flush_local(1);
                    }
                }
                (start, Some(Instant::now()))
            });
        }
        SyncKind::LockAll if rank == 0 => {
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock_all(|e| issue(e, op, 1, origin, compare, result));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Lock | SyncKind::Flush | SyncKind::FlushLocal | SyncKind::LockAll => {}
        SyncKind::Fence => {
            factor = 0.5;
            world.barrier();
            for i in 0..total {
                if rank == 0 {
                    if i == warm {
                        t_start = Some(Instant::now());
                    }
                    win.fence(|e| issue(e, op, 1, origin, compare, result));
                    win.fence(|_| ());
                } else {
                    win.fence(|_| ());
                    win.fence(|e| issue(e, op, 0, origin, compare, result));
                }
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Pscw => {
            factor = 0.5;
            world.barrier();
            for i in 0..total {
                if rank == 0 {
                    win.access(&[1], |e| {
                        if i == warm {
                            t_start = Some(Instant::now());
                        }
                        issue(e, op, 1, origin, compare, result);
                    });
                    win.expose(&[1]).wait();
                } else {
                    win.expose(&[0]).wait();
                    win.access(&[0], |e| issue(e, op, 0, origin, compare, result));
                }
            }
            t_end = Some(Instant::now());
        }
    }
    world.barrier();
    match (t_start, t_end) {
        (Some(s), Some(e)) if rank == 0 => (e - s).as_secs_f64() * 1e6 * factor / iters as f64,
        _ => 0.0,
    }
}

/// The latency of every `-m` size for element type `T` (sizes below one element skipped), each
/// with a fresh window of `size` bytes, printed by rank 0 as OSU does (the header is the
/// caller's).
pub fn rma_latency_sizes<T: RmaElem>(world: &SimpleCommunicator, spec: &RmaSpec, o: &RmaOptions) {
    let elem = std::mem::size_of::<T>();
    for size in o.sizes() {
        if size < elem {
            continue;
        }
        let count = size / elem;
        let (iters, warm) = (o.opts.iterations_for(size), o.opts.skip_for(size));
        let mut bufs = LatencyBufs::<T>::new(spec.op, o.sync, count, iters + warm);
        let lat = with_rma_window::<T, _>(world, o.win, size.div_ceil(elem), |win| {
            latency_loop(world, spec, o.sync, win, &mut bufs, iters, warm)
        });
        if world.rank() == 0 {
            print!("{}", row(size, lat));
        }
    }
}

/// osu_fop_latency's and osu_cas_latency's one row for element type `T`: a window of the `-m`
/// maximum (at least one element) and the latency of one-element operations, printed by rank
/// 0 against the element's size.
pub fn rma_atomic_latency<T: RmaElem>(world: &SimpleCommunicator, spec: &RmaSpec, o: &RmaOptions) {
    let elem = std::mem::size_of::<T>();
    let (iters, warm) = (o.opts.iterations_for(elem), o.opts.skip_for(elem));
    let mut bufs = LatencyBufs::<T>::new(spec.op, o.sync, 1, iters + warm);
    let len = o.opts.max_message_size.max(elem).div_ceil(elem);
    let lat = with_rma_window::<T, _>(world, o.win, len, |win| {
        latency_loop(world, spec, o.sync, win, &mut bufs, iters, warm)
    });
    if world.rank() == 0 {
        print!("{}", row(elem, lat));
    }
}

/// `window` puts or gets of `size` elements between `buf` and consecutive places of `target`
/// (the gets' destinations borrowed until the epoch closes).
fn window_ops<'b, T: RmaElem>(
    e: &Epoch<'b, T>,
    op: RmaOp,
    target: Rank,
    buf: &'b mut [T],
    size: usize,
    window: usize,
) {
    match op {
        RmaOp::Put => {
            for (j, chunk) in buf.chunks(size).take(window).enumerate() {
                e.put(target, j * size, chunk);
            }
        }
        RmaOp::Get => {
            for (j, chunk) in buf.chunks_mut(size).take(window).enumerate() {
                e.get(target, j * size, chunk);
            }
        }
        _ => unreachable!("the bandwidth tests put or get"),
    }
}

/// [`window_ops`] in a flush loop: each get completes at once ([`Epoch::get_now`]) so that
/// `buf` is reused.
fn window_ops_in_lock<T: RmaElem>(
    e: &Epoch<'_, T>,
    op: RmaOp,
    buf: &mut [T],
    size: usize,
    window: usize,
) {
    match op {
        RmaOp::Put => {
            for (j, chunk) in buf.chunks(size).take(window).enumerate() {
                e.put(1, j * size, chunk);
            }
        }
        RmaOp::Get => {
            for (j, chunk) in buf.chunks_mut(size).take(window).enumerate() {
                e.get_now(1, j * size, chunk);
            }
        }
        _ => unreachable!("the bandwidth tests put or get"),
    }
}

/// OSU's `run_*_with_<sync>` for the bandwidth tests on `win` (see the module documentation):
/// `warm` untimed then `iters` timed iterations of `-W` operations of `size` bytes from `buf`.
/// Returns rank 0's seconds; a barrier ends it.
#[allow(clippy::too_many_arguments)]
fn bandwidth_loop(
    world: &SimpleCommunicator,
    spec: &RmaSpec,
    o: &RmaOptions,
    win: &Window<u8>,
    buf: &mut [u8],
    size: usize,
    iters: usize,
    warm: usize,
) -> f64 {
    let (rank, peer) = (world.rank(), 1 - world.rank());
    let (op, total, w) = (spec.op, iters + warm, o.opts.window_size);
    let bidir = spec.bidirectional;
    let (mut t_start, mut t_end) = (None::<Instant>, None::<Instant>);
    match o.sync {
        SyncKind::Lock if rank == 0 => {
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock(1, LockType::Shared, |e| window_ops(e, op, 1, buf, size, w));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Flush | SyncKind::FlushLocal if rank == 0 => {
            let flush = o.sync == SyncKind::Flush;
            (t_start, t_end) = win.lock(1, LockType::Shared, |e| {
                let mut start = None;
                for i in 0..total {
                    if i == warm {
                        start = Some(Instant::now());
                    }
                    window_ops_in_lock(e, op, buf, size, w);
                    if flush {
                        e.flush(1);
                    } else if op != RmaOp::Get {
                        // The gets' get_now ended with it already.
                        e.flush_local(1);
                    }
                }
                (start, Some(Instant::now()))
            });
        }
        SyncKind::LockAll if rank == 0 => {
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock_all(|e| window_ops(e, op, 1, buf, size, w));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Lock | SyncKind::Flush | SyncKind::FlushLocal | SyncKind::LockAll => {}
        SyncKind::Fence => {
            world.barrier();
            for i in 0..total {
                if rank == 0 && i == warm {
                    t_start = Some(Instant::now());
                }
                win.fence(|e| {
                    if rank == 0 || bidir {
                        window_ops(e, op, peer, buf, size, w);
                    }
                });
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Pscw => {
            world.barrier();
            for i in 0..total {
                if bidir {
                    if rank == 0 && i == warm {
                        t_start = Some(Instant::now());
                    }
                    let exposure = win.expose(&[peer]);
                    win.access(&[peer], |e| window_ops(e, op, peer, buf, size, w));
                    exposure.wait();
                } else if rank == 0 {
                    win.access(&[1], |e| {
                        if i == warm {
                            t_start = Some(Instant::now());
                        }
                        window_ops(e, op, 1, buf, size, w);
                    });
                } else {
                    win.expose(&[0]).wait();
                }
            }
            t_end = Some(Instant::now());
        }
    }
    world.barrier();
    match (t_start, t_end) {
        (Some(s), Some(e)) => (e - s).as_secs_f64(),
        _ => 0.0,
    }
}

/// The bandwidth of every `-m` size, each with a fresh window of `size * W` bytes, printed by
/// rank 0 as OSU does: `size / 1e6 * iterations * W / time` MB/s (doubled when
/// bidirectional). The header is the caller's.
pub fn rma_bandwidth_sizes(world: &SimpleCommunicator, spec: &RmaSpec, o: &RmaOptions) {
    let w = o.opts.window_size;
    for size in o.sizes() {
        let (iters, warm) = (o.opts.iterations_for(size), o.opts.skip_for(size));
        let bytes = size.saturating_mul(w);
        let mut buf = PageBuf::<u8>::filled(bytes);
        let t = with_rma_window::<u8, _>(world, o.win, bytes, |win| {
            bandwidth_loop(world, spec, o, win, buf.as_mut_slice(), size, iters, warm)
        });
        if world.rank() == 0 {
            let bw = bandwidth_mb_s(size, iters * w, t);
            print!(
                "{}",
                row(size, if spec.bidirectional { bw * 2.0 } else { bw })
            );
        }
    }
}
