//! `osu_latency`: OSU's point-to-point latency test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel. `kestrel-run -n 2 target/release/osu_latency [options]`
//!
//! Ping-pong between ranks 0 and 1: rank 0 sends `size` bytes (tag 1) and receives them back,
//! rank 1 receives and sends back, both with blocking calls. After a barrier per size, `-x`
//! warm-up round trips (default 100, 10 above 8 KiB) are not timed; each of the `-i` timed
//! round trips (default 10000, 1000 above 8 KiB) is timed on rank 0 and the sum is reported as
//! half the average round trip in microseconds. Sizes 1 B to 4 MiB in powers of two (see
//! `kestrel_bench::osu` for the options and the output format). Exactly two ranks.

use kestrel::Communicator;
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::LATENCY;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, nprocs) = (world.rank(), world.size());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = match osu::parse_or_report(&SPEC, rank, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    if nprocs != 2 {
        if rank == 0 {
            eprintln!("This test requires exactly two processes");
        }
        osu::exit(universe, 1);
    }
    if let Some(w) = opts.limit_to_memory(&SPEC) {
        if rank == 0 {
            eprintln!("{w}");
        }
    }
    let sizes = opts.sizes(&SPEC);
    let max = sizes.last().copied().unwrap_or(0);
    let mut s_buf = osu::AlignedBuf::new(max);
    let mut r_buf = osu::AlignedBuf::new(max);
    if rank == 0 {
        print!(
            "{}{}",
            osu::preamble(&SPEC, &opts, 1),
            osu::column_header(&SPEC, &opts)
        );
    }

    let peer = world.process_at_rank(1 - rank);
    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        s_buf.as_mut_slice()[..size].fill(b'a');
        r_buf.as_mut_slice()[..size].fill(b'b');
        let sb = &s_buf.as_slice()[..size];
        let rb = &mut r_buf.as_mut_slice()[..size];
        world.barrier();
        let mut t_total = 0.0f64;
        for i in 0..iterations + skip {
            if rank == 0 {
                let t_start = Instant::now();
                peer.send_with_tag(sb, 1);
                peer.receive_into_with_tag(&mut *rb, 1);
                if i >= skip {
                    t_total += t_start.elapsed().as_secs_f64();
                }
            } else {
                peer.receive_into_with_tag(&mut *rb, 1);
                peer.send_with_tag(sb, 1);
            }
        }
        if rank == 0 {
            print!("{}", osu::row(size, osu::latency_us(t_total, iterations)));
        }
    }
    osu::exit(universe, 0);
}
