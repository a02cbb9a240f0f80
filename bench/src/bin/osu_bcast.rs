//! `osu_bcast`: OSU's broadcast latency test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel. `kestrel-run -n N target/release/osu_bcast [options]`
//!
//! Before the sizes, an all-to-all of one `i32` per rank lets every rank meet every other
//! (OSU does it to keep connection set-up out of the timings). For each size, every
//! iteration is a barrier, the broadcast of `size` bytes (`MPI_CHAR`) timed on every rank,
//! and another barrier; the root rotates every iteration (`i % ranks`, as OSU 7.4 forces for
//! bcast). `-x` warm-up iterations (default 100, 10 above 8 KiB) are not timed, `-i` timed
//! ones (default 1000, 100 above 8 KiB) are. A rank's latency is the mean of its timed
//! broadcasts in microseconds; rank 0 prints the average over the ranks (and with `-f` the
//! minimum, maximum and iteration count). Sizes 1 B to 1 MiB in powers of two (see
//! `kestrel_bench::osu` for the options and the output format). At least two ranks.

use kestrel::collective::{CommunicatorCollectives, Root};
use kestrel::Communicator;
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::BCAST;

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
    let mut buf = osu::AlignedBuf::new(max);
    buf.as_mut_slice().fill(1);

    // Everyone meets everyone before the timings.
    let hello = vec![rank; nprocs];
    let mut met = vec![0i32; nprocs];
    world.all_to_all_into(&hello[..], &mut met[..]);

    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        let b = &mut buf.as_mut_slice()[..size];
        let mut timer = 0.0f64;
        for i in 0..iterations + skip {
            let root = world.process_at_rank(osu::Coll::Bcast.root(i, nprocs) as i32);
            world.barrier();
            let t_start = Instant::now();
            root.broadcast_into(&mut *b);
            let elapsed = t_start.elapsed().as_secs_f64();
            world.barrier();
            if i >= skip {
                timer += elapsed;
            }
        }
        world.barrier();
        if let Some(st) = osu::coll_stats(&world, osu::mean_us(timer, iterations)) {
            print!("{}", osu::coll_row(&SPEC, &opts, size, &st, iterations));
        }
    }
    osu::exit(universe, 0);
}
