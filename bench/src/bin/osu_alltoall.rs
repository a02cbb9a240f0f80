//! `osu_alltoall`: OSU's all-to-all personalized exchange latency test (OSU Micro-Benchmarks
//! v7.4 methodology and output) on Kestrel. `kestrel-run -n N target/release/osu_alltoall
//! [options]`
//!
//! For each size, after a barrier, every iteration is an all-to-all in which every rank
//! sends a different block of `size` bytes (`MPI_CHAR`) to every rank (`ranks * size` bytes
//! each way), timed on every rank, then a barrier. `-x` warm-up iterations (default 100, 10
//! above 8 KiB) are not timed, `-i` timed ones (default 1000, 100 above 8 KiB) are. A rank's
//! latency is the mean of its timed exchanges in microseconds; rank 0 prints the average over
//! the ranks (and with `-f` the minimum, maximum and iteration count), then all ranks meet in
//! a barrier. Sizes 1 B to 1 MiB in powers of two (see `kestrel_bench::osu` for the options
//! and the output format). At least two ranks.

use kestrel::collective::CommunicatorCollectives;
use kestrel::Communicator;
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::ALLTOALL;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let nprocs = world.size() as usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match osu::coll_begin(&SPEC, &world, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    let sizes = opts.sizes(&SPEC);
    let max = sizes.last().copied().unwrap_or(0);
    let mut s_buf = osu::AlignedBuf::new(max * nprocs);
    let mut r_buf = osu::AlignedBuf::new(max * nprocs);
    s_buf.as_mut_slice().fill(1);

    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        let sb = &s_buf.as_slice()[..size * nprocs];
        let rb = &mut r_buf.as_mut_slice()[..size * nprocs];
        world.barrier();
        let mut timer = 0.0f64;
        for i in 0..iterations + skip {
            let t_start = Instant::now();
            world.all_to_all_into(sb, &mut *rb);
            let elapsed = t_start.elapsed().as_secs_f64();
            world.barrier();
            if i >= skip {
                timer += elapsed;
            }
        }
        if let Some(st) = osu::coll_stats(&world, osu::mean_us(timer, iterations)) {
            print!("{}", osu::coll_row(&SPEC, &opts, size, &st, iterations));
        }
        world.barrier();
    }
    osu::exit(universe, 0);
}
