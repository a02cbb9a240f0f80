//! `osu_get_bw`: OSU's one-sided get bandwidth test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel's one-sided API (`kestrel::window`), twin of `bench/c/osu_get_bw.c`.
//! `kestrel-run -n 2 target/release/osu_get_bw [options]`
//!
//! Rank 0 is the origin, rank 1 the target. Per size (1 B to 4 MiB in powers of two) a new
//! window of `size * W` bytes per rank (`-W`, default 64; `-w`: `allocate_window` by default,
//! or `with_window` for `create`), then `-x` untimed (default 10, 2 above 8 KiB) and `-i` timed
//! (default 100, 20 above 8 KiB) iterations of `W` gets of `size` bytes from consecutive places
//! of rank 1's window into consecutive places of rank 0's buffer, with the `-s`
//! synchronization: flush (default: one shared lock; per iteration the `W` gets in flight
//! together in a `flushed` part, completed by its one flush), flush_local (`flushed_local`),
//! lock (shared lock, `W` gets, unlock), lock_all, fence (fence, rank 0's gets, fence) or pscw
//! (rank 0 start, `W` gets, complete; rank 1 post, wait): the calls of the C twin in every
//! mode. Reported as `size / 1e6 * W * -i` / rank 0's time from the first timed iteration to
//! the end of the last, in MB/s. See `kestrel_bench::osu`'s `rma` module for the options, the
//! loops and the output. Exactly two ranks.

use kestrel_bench::osu;

fn main() {
    osu::rma_main(&osu::GET_BW)
}
