//! `osu_reduce`: OSU's reduce latency test (OSU Micro-Benchmarks v7.4 methodology and output)
//! on Kestrel. `kestrel-run -n N target/release/osu_reduce [options]`
//!
//! For each size, after a barrier, every iteration is a barrier then a reduction (`MPI_SUM`)
//! of `size` C chars (`i8`, OSU 7.4's default `MPI_CHAR`) to a root that rotates every
//! iteration (`i % ranks`, as OSU 7.4 forces for reduce), timed on every rank. `-x` warm-up
//! iterations (default 100, 10 above 8 KiB) are not timed, `-i` timed ones (default 1000,
//! 100 above 8 KiB) are. A rank's latency is the mean of its timed reductions in
//! microseconds; rank 0 prints the average over the ranks (and with `-f` the minimum,
//! maximum and iteration count), then all ranks meet in a barrier. Sizes 1 B to 1 MiB in
//! powers of two (see `kestrel_bench::osu` for the options and the output format). At least
//! two ranks.

use kestrel::collective::{Root, SystemOperation};
use kestrel::Communicator;
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::REDUCE;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, nprocs) = (world.rank(), world.size() as usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match osu::coll_begin(&SPEC, &world, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    let sizes = opts.sizes(&SPEC);
    let max = sizes.last().copied().unwrap_or(0);
    let mut s_buf = osu::AlignedBuf::new(max);
    let mut r_buf = osu::AlignedBuf::new(max);
    s_buf.as_mut_slice().fill(1);

    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        let sb = &s_buf.as_i8_slice()[..size];
        let rb = &mut r_buf.as_mut_i8_slice()[..size];
        world.barrier();
        let mut timer = 0.0f64;
        for i in 0..iterations + skip {
            let root_rank = osu::Coll::Reduce.root(i, nprocs) as i32;
            let root = world.process_at_rank(root_rank);
            world.barrier();
            let t_start = Instant::now();
            if rank == root_rank {
                root.reduce_into_root(sb, &mut *rb, SystemOperation::sum());
            } else {
                root.reduce_into(sb, SystemOperation::sum());
            }
            let elapsed = t_start.elapsed().as_secs_f64();
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
