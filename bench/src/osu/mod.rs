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
//! | `-f`, `--full` | collectives only (as in OSU) | min/max columns and the iteration count (nonblocking: init, test, wait, min/max pure communication) |
//! | `-t`, `--num-test-calls CALLS` | nonblocking collectives | `MPI_Test` calls during the dummy computation (default 0) |
//!
//! OSU's point-to-point tests do not take `-M` (OSU only applies it to collectives); Kestrel's
//! do, and honour it: a rank never allocates more message-buffer bytes than the limit, and
//! sizes that would need more are dropped with a warning (as OSU's `check_mem_limit` does).
//! For the collectives the limit is checked against what the test really allocates per rank
//! for the number of ranks (e.g. `2 * ranks * size` for alltoall), not against OSU's rougher
//! `ranks * size`. `osu_barrier` accepts `-m` and `-M` (OSU's option string has them) but has
//! no messages, so they change nothing, and its usage omits them as OSU's does.
//!
//! Collectives, blocking and nonblocking, default to OSU's collective counts: sizes 1 B to
//! 1 MiB, 1000 timed iterations and 100 warm-up up to 8 KiB, 100 and 10 above (`osu_ibarrier`
//! always uses the latter, as OSU's does).
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
//!
//! The nonblocking collectives (`osu_iallreduce` ...) print OSU's overlap table: see `nbc`
//! (the method, the columns and an example).
//!
//! # Where things are
//!
//! * `spec`: the benchmark families and the [`Spec`] of each test;
//! * `options`: [`Options`], OSU's defaults and the command-line parser;
//! * `output`: the usage, the preamble, headers and rows, and the values they print;
//! * `run`: what every benchmark program does around its measurement loop (buffers, start-up
//!   on every rank, collective statistics, exit);
//! * `nbc`: the nonblocking collectives' method (pure communication and overlap loops, the
//!   dummy computation, their statistics, header and rows), with its own output section;
//! * `rma`: the one-sided tests (`osu_put_latency` ... `osu_cas_latency`, twins of
//!   `bench/c/osu_rma.h`): their options (`-w`, `-s`, `-T`), usage, header, windows and timed
//!   loops per synchronization, with their own options, method and output sections.
//!
//! Everything is re-exported here: the programs name `osu::X`.

mod nbc;
mod options;
mod output;
mod rma;
mod run;
mod spec;

pub use nbc::*;
pub use options::*;
pub use output::*;
pub use rma::*;
pub use run::*;
pub use spec::*;

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

#[cfg(test)]
mod rma_tests;
#[cfg(test)]
mod tests;
