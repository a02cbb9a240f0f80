//! `osu_bw`: OSU's point-to-point bandwidth test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel. `kestrel-run -n 2 target/release/osu_bw [options]`
//!
//! Per iteration rank 0 starts a window of `-W` (default 64) nonblocking sends of `size` bytes
//! (tag 100) and waits for all of them, then receives a 4-byte acknowledgement (tag 101); rank
//! 1 posts the window's nonblocking receives, waits for all, and sends the acknowledgement.
//! After a barrier per size, `-x` warm-up iterations (default 10, 2 above 8 KiB) are not timed;
//! the `-i` timed iterations (default 100, 20 above 8 KiB) are timed one by one on rank 0, and
//! the bandwidth is `size * W * iterations / time` in MB/s (10^6 bytes). The sends all read
//! one buffer; the receives of a window each have their own (OSU lets them share one, which
//! Rust's borrows do not allow). Sizes 1 B to 4 MiB in powers of two. Exactly two ranks.

use kestrel::{request, Communicator};
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::BW;

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
    let window = opts.window_size;
    let sizes = opts.sizes(&SPEC);
    let max = sizes.last().copied().unwrap_or(0);
    let mut s_buf = osu::AlignedBuf::new(max.max(osu::ACK_BYTES));
    // Rank 0 only receives acknowledgements; rank 1 receives whole windows.
    let mut r_buf =
        osu::AlignedBuf::new(if rank == 1 { max * window } else { 0 }.max(osu::ACK_BYTES));
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
        let used = if rank == 1 {
            size * window
        } else {
            osu::ACK_BYTES
        };
        r_buf.as_mut_slice()[..used].fill(b'b');
        world.barrier();
        let mut t_total = 0.0f64;
        for i in 0..iterations + skip {
            if rank == 0 {
                let t_start = Instant::now();
                let sb = &s_buf.as_slice()[..size];
                request::scope(|scope| {
                    let reqs: Vec<_> = (0..window)
                        .map(|_| peer.immediate_send_with_tag(scope, sb, 100))
                        .collect();
                    request::wait_all(reqs);
                });
                peer.receive_into_with_tag(&mut r_buf.as_mut_slice()[..osu::ACK_BYTES], 101);
                if i >= skip {
                    t_total += t_start.elapsed().as_secs_f64();
                }
            } else {
                let rb = &mut r_buf.as_mut_slice()[..size * window];
                request::scope(|scope| {
                    let reqs: Vec<_> = rb
                        .chunks_mut(size)
                        .map(|chunk| peer.immediate_receive_into_with_tag(scope, chunk, 100))
                        .collect();
                    request::wait_all(reqs);
                });
                peer.send_with_tag(&s_buf.as_slice()[..osu::ACK_BYTES], 101);
            }
        }
        if rank == 0 {
            let bw = osu::bandwidth_mb_s(size, iterations * window, t_total);
            print!("{}", osu::row(size, bw));
        }
    }
    osu::exit(universe, 0);
}
