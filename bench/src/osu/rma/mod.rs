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
//! One choice the C twin has cannot be expressed with `kestrel::window`: `-w dynamic`, as the
//! API has no dynamic windows (`MPI_Win_create_dynamic`, `attach`). The programs refuse it
//! with a message on stderr naming the reason and the C twin, exit 1 (after the options and
//! the rank count were checked, as a bad option is: [`RmaOptions::unsupported`]). Every other
//! benchmark, `-s` and `-w` runs.
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
//! and compare-and-swap); `flush` and `flush_local` one lock (shared; exclusive for
//! get_accumulate) around operation + flush (or flush_local) each time, the operation in an
//! [`Epoch::flushed`] (or [`Epoch::flushed_local`]) part so that its result buffer is free for
//! the next one; `lock_all` lock_all, operation, unlock_all each time; `fence` 3 fences per
//! iteration in one [`Window::fences`] run, rank 0 fence-operation-fence-fence, rank 1
//! fence-fence-operation (to rank 0)-fence; `pscw` rank 0 start, operation, complete, post,
//! wait, rank 1 post, wait, start, operation, complete. Reported: rank 0's time from the first
//! timed operation to the end of the last / `-i`, in microseconds, halved for fence and pscw
//! (both ranks operated).
//!
//! **Bandwidth tests** ([`rma_bandwidth_sizes`]): per size a new window of `size * W` bytes
//! (`-W`, default 64) and per iteration `W` operations of `size` bytes to consecutive places
//! of the target, then the synchronization (lock and lock_all around them, shared; flush and
//! flush_local after them within one shared lock, the `W` operations, gets included, in flight
//! together in one [`Epoch::flushed`] or [`Epoch::flushed_local`] part; fence: each iteration
//! a fence epoch of its own, two fences, rank 0 operating; pscw: rank 0 start, operations,
//! complete while rank 1 posts and waits). osu_put_bibw (fence and pscw only) has rank 1 do the
//! same towards rank 0 in the same epochs (pscw: both post, start, operate, complete, wait).
//! `-x` untimed (default 10, 2 above 8 KiB) and `-i` timed iterations (100, 20); reported
//! `size / 1e6 * W * -i / time` in MB/s, doubled for osu_put_bibw.
//!
//! So every timed loop issues the one-sided operations and synchronizations of its C twin, in
//! the same order and number (counted per rank for every benchmark, `-s` and `-w`, with gdb
//! breakpoints on the engine's window calls under both programs: the same counts, but for the
//! first point below). What still differs, outside the timed loops:
//!
//! * `-w allocate`: C `memset`s the new window directly; the Rust program fills it in
//!   [`Window::with_local`], which holds an exclusive lock of its own rank meanwhile (one
//!   `MPI_Win_lock`/`unlock` pair per window, before the loop's barrier).
//! * a `-m` size that is not a multiple of the element (osu_acc_latency's sizes with a `-T`
//!   wider than a char, as `-m 6:`; the `-m` maximum of osu_fop_latency's and
//!   osu_cas_latency's window): C's window is that many bytes, the Rust one (of whole
//!   elements) that rounded up to the element; the operations are the same.
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
//!
//! # Where things are
//!
//! * this file: the benchmarks' descriptions ([`RmaSpec`] and the nine of them), `-w`, `-s`
//!   and `-T`'s values ([`WinKind`], [`SyncKind`], [`RmaType`]) and the operations
//!   ([`RmaOp`]);
//! * `options`: the command line ([`rma_parse`], [`RmaOptions`]): `-w`/`-s`/`-T` taken out
//!   with `getopt`'s rules, the sizes, `-M` and what the Rust API refuses;
//! * `output`: the usage, version and header texts;
//! * `start`: [`rma_begin`], the start-up on every rank in `osu_rma.h`'s order of reports;
//! * `window`: the element types ([`RmaElem`]), page-aligned buffers, the windows per `-w`
//!   and the flush parts per `-s`;
//! * `latency`: the latency tests' timed loops and rows;
//! * `bandwidth`: the bandwidth tests' timed loops and rows.

mod bandwidth;
mod latency;
mod options;
mod output;
mod start;
mod window;

pub use bandwidth::*;
pub use latency::*;
pub use options::*;
pub use output::*;
pub use start::*;
pub use window::*;

use kestrel::window::LockType;
#[cfg(doc)]
use kestrel::window::{Epoch, Window, WindowCreation};

use super::{Bench, Spec, Subtype};

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
