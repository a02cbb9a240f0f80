//! `osu_fop_latency`: OSU's one-sided fetch-and-op latency test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel's one-sided API (`kestrel::window`), twin of
//! `bench/c/osu_fop_latency.c`. `kestrel-run -n 2 target/release/osu_fop_latency [options]`
//!
//! Rank 0 is the origin, rank 1 the target. For each `-T` datatype (default `MPI_CHAR`, as OSU
//! 7.4: `i8`; `mpi_int` `i32`, `mpi_float` `f32`, `all` those three, and `mpi_long_long` `i64`,
//! the 8-byte operation of OSU before 7.x, which is not an OSU 7.4 choice) a header and one
//! row: a window of the `-m` maximum bytes per rank (default 4 MiB, as OSU; `-w`:
//! `allocate_window` by default, or `with_window` for `create`), then `-x` untimed (default
//! 100) and `-i` timed (default 10000) fetch-and-ops (`SystemOperation::sum()`) of one element
//! on displacement 0 of rank 1's window, the old value into one result element, each completed
//! by the `-s` synchronization: flush (default: within one shared lock, each fetch-and-op in a
//! `flushed` part, whose flush frees the result), flush_local (`flushed_local`), lock
//! (exclusive lock, fetch-and-op, unlock each time), lock_all, fence (three fences per
//! iteration: rank 0 fence, operation, fence, fence; rank 1 fence, fence, operation, fence) or
//! pscw (rank 0 start, operation, complete, post, wait; rank 1 post, wait, start, operation,
//! complete): the calls of the C twin in every mode. Reported, against the element's size in
//! bytes, as rank 0's time from the first timed operation to the end of the last / `-i`, in
//! microseconds (fence and pscw: half of it, both ranks having operated). See
//! `kestrel_bench::osu`'s `rma` module for the options, the loops and the output. Exactly two
//! ranks.

use kestrel_bench::osu;

fn main() {
    osu::rma_main(&osu::FOP_LATENCY)
}
