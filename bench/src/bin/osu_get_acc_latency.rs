//! `osu_get_acc_latency`: OSU's one-sided get-accumulate latency test (OSU Micro-Benchmarks
//! v7.4 methodology and output: its own defaults `-w create -s lock` and usage line, and no
//! `# Datatype` line, as OSU) on Kestrel's one-sided API (`kestrel::window`), twin of
//! `bench/c/osu_get_acc_latency.c`. `kestrel-run -n 2 target/release/osu_get_acc_latency
//! [options]`
//!
//! Rank 0 is the origin, rank 1 the target. Per size (1 B to 4 MiB in powers of two) a new
//! window of `size` bytes per rank (`-w`: `with_window` by default, or `allocate_window`), then
//! `-x` untimed (default 100, 10 above 8 KiB) and `-i` timed (default 10000, 1000 above 8 KiB)
//! get-accumulates (`SystemOperation::sum()`) of `size` C chars (`i8`) on displacement 0 of
//! rank 1's window, the old contents into one result buffer, each completed by the `-s`
//! synchronization: lock (default: exclusive lock, get-accumulate, unlock each time), flush
//! (within one exclusive lock, each get-accumulate in a `flushed` part, whose flush frees the
//! result buffer for the next one), flush_local (`flushed_local`), lock_all, fence (three
//! fences per iteration: rank 0 fence, operation, fence, fence; rank 1 fence, fence, operation,
//! fence) or pscw (rank 0 start, operation, complete, post, wait; rank 1 post, wait, start,
//! operation, complete): the calls of the C twin in every mode. Reported as rank 0's time from
//! the first timed operation to the end of the last / `-i`, in microseconds (fence and pscw:
//! half of it, both ranks having operated). See `kestrel_bench::osu`'s `rma` module for the
//! options, the loops and the output. Exactly two ranks.

use kestrel_bench::osu;

fn main() {
    osu::rma_main(&osu::GET_ACC_LATENCY)
}
