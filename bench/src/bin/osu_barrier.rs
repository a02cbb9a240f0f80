//! `osu_barrier`: OSU's barrier latency test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel. `kestrel-run -n N target/release/osu_barrier [options]`
//!
//! Every rank times each `MPI_Barrier`-equivalent call on its own: `-x` warm-up barriers
//! (default 100) are not timed, then `-i` barriers (default 1000) are. A rank's latency is the
//! mean of its timed barriers in microseconds; after a closing barrier, rank 0 prints the
//! average of the ranks' means (reductions to rank 0) and, with `-f`, their minimum and
//! maximum and the iteration count. There are no message sizes: `-m` and `-M` are accepted
//! and ignored, as in OSU, and the output has no size column and no datatype line (see
//! `kestrel_bench::osu`). At least two ranks.

use kestrel::Communicator;
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::BARRIER;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match osu::coll_begin(&SPEC, &world, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };

    let (iterations, skip) = (opts.iterations, opts.skip);
    let mut timer = 0.0f64;
    for i in 0..iterations + skip {
        let t_start = Instant::now();
        world.barrier();
        let elapsed = t_start.elapsed().as_secs_f64();
        if i >= skip {
            timer += elapsed;
        }
    }
    world.barrier();
    if let Some(st) = osu::coll_stats(&world, osu::mean_us(timer, iterations)) {
        print!("{}", osu::coll_row(&SPEC, &opts, 0, &st, iterations));
    }
    osu::exit(universe, 0);
}
