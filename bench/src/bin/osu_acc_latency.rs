//! `osu_acc_latency`: OSU's one-sided accumulate latency test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel's one-sided API (`kestrel::window`), twin of
//! `bench/c/osu_acc_latency.c`. `kestrel-run -n 2 target/release/osu_acc_latency [options]`
//!
//! Rank 0 is the origin, rank 1 the target. For each `-T` datatype (default `MPI_CHAR`, as OSU
//! 7.4: `i8`; `mpi_int` `i32`, `mpi_float` `f32`, `all` those three, and `mpi_long_long` `i64`,
//! which is not OSU's) a header, then per size (1 B to 4 MiB in powers of two; sizes smaller
//! than one element skipped) a new window of `size` bytes per rank (`-w`: `allocate_window` by
//! default, or `with_window` for `create`), then `-x` untimed (default 100, 10 above 8 KiB) and
//! `-i` timed (default 10000, 1000 above 8 KiB) accumulates (`SystemOperation::sum()`) of
//! `size / sizeof(type)` elements to displacement 0 of rank 1's window, each completed by the
//! `-s` synchronization: flush (default: a flush after each, all within one shared lock),
//! flush_local, lock (shared lock, accumulate, unlock each time), lock_all, fence (three fences
//! per iteration: rank 0 fence, accumulate, fence, fence; rank 1 fence, fence, accumulate,
//! fence) or pscw (rank 0 start, accumulate, complete, post, wait; rank 1 post, wait, start,
//! accumulate, complete): the calls of the C twin in every mode. Reported as rank 0's time
//! from the first timed accumulate to the end of the last / `-i`, in microseconds (fence and
//! pscw: half of it, both ranks having accumulated). See `kestrel_bench::osu`'s `rma` module
//! for the options, the loops and the output. Exactly two ranks.

use kestrel_bench::osu;

fn main() {
    osu::rma_main(&osu::ACC_LATENCY)
}
