//! `osu_bibw`: OSU's bidirectional bandwidth test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel. `kestrel-run -n 2 target/release/osu_bibw [options]`
//!
//! Per iteration both ranks post a window of `-W` (default 64) nonblocking receives of `size`
//! bytes, then start `-W` nonblocking sends of `size` bytes to the other rank (rank 0 sends
//! with tag 100 and receives tag 10, rank 1 the reverse); rank 0 waits for its sends then its
//! receives, rank 1 for its receives then its sends. After a barrier per size, `-x` warm-up
//! iterations (default 10, 2 above 8 KiB) are not timed; the `-i` timed iterations (default
//! 100, 20 above 8 KiB) are timed one by one on rank 0, and the bandwidth is `2 * size * W *
//! iterations / time` in MB/s (10^6 bytes). The sends all read one buffer; each receive of a
//! window has its own. Sizes 1 B to 4 MiB in powers of two. Exactly two ranks.

use kestrel::{request, Communicator};
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::BIBW;

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
    let mut s_buf = osu::AlignedBuf::new(max);
    let mut r_buf = osu::AlignedBuf::new(max * window);
    if rank == 0 {
        print!(
            "{}{}",
            osu::preamble(&SPEC, &opts, 1),
            osu::column_header(&SPEC, &opts)
        );
    }

    let peer = world.process_at_rank(1 - rank);
    let (send_tag, recv_tag) = if rank == 0 { (100, 10) } else { (10, 100) };
    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        s_buf.as_mut_slice()[..size].fill(b'a');
        r_buf.as_mut_slice()[..size * window].fill(b'b');
        world.barrier();
        let mut t_total = 0.0f64;
        for i in 0..iterations + skip {
            let t_start = Instant::now();
            let sb = &s_buf.as_slice()[..size];
            let rb = &mut r_buf.as_mut_slice()[..size * window];
            request::scope(|scope| {
                let recvs: Vec<_> = rb
                    .chunks_mut(size)
                    .map(|chunk| peer.immediate_receive_into_with_tag(scope, chunk, recv_tag))
                    .collect();
                let sends: Vec<_> = (0..window)
                    .map(|_| peer.immediate_send_with_tag(scope, sb, send_tag))
                    .collect();
                if rank == 0 {
                    request::wait_all(sends);
                    request::wait_all(recvs);
                } else {
                    request::wait_all(recvs);
                    request::wait_all(sends);
                }
            });
            if rank == 0 && i >= skip {
                t_total += t_start.elapsed().as_secs_f64();
            }
        }
        if rank == 0 {
            let bw = osu::bandwidth_mb_s(size, 2 * iterations * window, t_total);
            print!("{}", osu::row(size, bw));
        }
    }
    osu::exit(universe, 0);
}
