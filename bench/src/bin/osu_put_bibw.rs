//! `osu_put_bibw`: OSU's one-sided bi-directional put bandwidth test (OSU Micro-Benchmarks
//! v7.4 methodology and output) on Kestrel's one-sided API (`kestrel::window`), twin of
//! `bench/c/osu_put_bibw.c`. `kestrel-run -n 2 target/release/osu_put_bibw [options]`
//!
//! Both ranks put to each other. Per size (1 B to 4 MiB in powers of two) a new window of
//! `size * W` bytes per rank (`-W`, default 64; `-w`: `allocate_window` by default, or
//! `with_window` for `create`), then `-x` untimed (default 10, 2 above 8 KiB) and `-i` timed
//! (default 100, 20 above 8 KiB) iterations in which each rank puts `W` times `size` bytes to
//! consecutive places of the other's window, within the `-s` synchronization, active target
//! only as in OSU: pscw (default: post, start, the `W` puts, complete, wait) or fence (fence,
//! both ranks' puts, fence): the calls of the C twin in both modes. Reported as
//! `2 * size / 1e6 * W * -i` / rank 0's time from the first timed iteration to the end of the
//! last, in MB/s. See `kestrel_bench::osu`'s `rma` module for the options, the loops and the
//! output. Exactly two ranks.

use kestrel_bench::osu;

fn main() {
    osu::rma_main(&osu::PUT_BIBW)
}
