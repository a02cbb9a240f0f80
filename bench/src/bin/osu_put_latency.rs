//! `osu_put_latency`: OSU's one-sided put latency test (OSU Micro-Benchmarks v7.4 methodology
//! and output) on Kestrel's one-sided API (`kestrel::window`), twin of
//! `bench/c/osu_put_latency.c`. `kestrel-run -n 2 target/release/osu_put_latency [options]`
//!
//! Rank 0 is the origin, rank 1 the target. Per size (1 B to 4 MiB in powers of two) a new
//! window of `size` bytes per rank (`-w`: `allocate_window` by default, or `with_window` for
//! `create`), then `-x` untimed (default 100, 10 above 8 KiB) and `-i` timed (default 10000,
//! 1000 above 8 KiB) puts of `size` bytes to displacement 0 of rank 1's window, each completed
//! by the `-s` synchronization: flush (default: a flush after each put, all within one shared
//! lock), flush_local, lock (shared lock, put, unlock each time), lock_all, fence (three fences
//! per iteration: rank 0 fence, put, fence, fence; rank 1 fence, fence, put, fence) or pscw
//! (rank 0 start, put, complete, post, wait; rank 1 post, wait, start, put, complete): the
//! calls of the C twin in every mode. Reported as rank 0's time from the first timed put to the
//! end of the last / `-i`, in microseconds (fence and pscw: half of it, both ranks having put).
//! See `kestrel_bench::osu`'s `rma` module for the options, the loops and the output. Exactly
//! two ranks.

use kestrel_bench::osu;

fn main() {
    osu::rma_main(&osu::PUT_LATENCY)
}
