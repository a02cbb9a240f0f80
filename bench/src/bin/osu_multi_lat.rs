//! `osu_multi_lat`: OSU's multi-pair latency test (OSU Micro-Benchmarks v7.4 methodology and
//! output) on Kestrel. `kestrel-run -n 4 target/release/osu_multi_lat [options]`
//!
//! With `P = ranks / 2` pairs, rank `i < P` ping-pongs with rank `i + P`, all pairs at once:
//! per iteration every rank enters a barrier (not timed), then each sender sends `size` bytes
//! (tag 1) and receives them back, timing the round trip; its partner receives and sends
//! back. With an odd number of ranks the last one only takes part in the barriers. `-x`
//! warm-up iterations (default 100, 10 above 8 KiB) are not timed; each sender's latency is
//! half its average timed round trip (`-i`, default 10000, 1000 above 8 KiB) in
//! microseconds, and rank 0 reports the average over the pairs (OSU up to 7.2 reported rank
//! 0's own pair). Sizes 1 B to 4 MiB in powers of two. At least two ranks.

use kestrel::Communicator;
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::MULTI_LAT;

/// Tag of the per-size latency reports to rank 0.
const REPORT_TAG: i32 = 2;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, nprocs) = (world.rank(), world.size());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = match osu::parse_or_report(&SPEC, rank, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    if nprocs < 2 {
        if rank == 0 {
            eprintln!("This test requires at least two processes");
        }
        osu::exit(universe, 1);
    }
    if let Some(w) = opts.limit_to_memory(&SPEC) {
        if rank == 0 {
            eprintln!("{w}");
        }
    }
    let pairs = (nprocs / 2) as usize;
    let me = rank as usize;
    let sender = me < pairs;
    let receiver = !sender && me < 2 * pairs;
    let sizes = opts.sizes(&SPEC);
    let max = sizes.last().copied().unwrap_or(0);
    let mut s_buf = osu::AlignedBuf::new(max);
    let mut r_buf = osu::AlignedBuf::new(max);
    if rank == 0 {
        print!(
            "{}{}",
            osu::preamble(&SPEC, &opts, pairs),
            osu::column_header(&SPEC, &opts)
        );
    }

    let partner = if sender {
        Some(world.process_at_rank((me + pairs) as i32))
    } else if receiver {
        Some(world.process_at_rank((me - pairs) as i32))
    } else {
        None
    };
    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        s_buf.as_mut_slice()[..size].fill(b'a');
        r_buf.as_mut_slice()[..size].fill(b'b');
        let sb = &s_buf.as_slice()[..size];
        let rb = &mut r_buf.as_mut_slice()[..size];
        world.barrier();
        let mut t_total = 0.0f64;
        for i in 0..iterations + skip {
            world.barrier();
            match &partner {
                Some(p) if sender => {
                    let t_start = Instant::now();
                    p.send_with_tag(sb, 1);
                    p.receive_into_with_tag(&mut *rb, 1);
                    if i >= skip {
                        t_total += t_start.elapsed().as_secs_f64();
                    }
                }
                Some(p) => {
                    p.receive_into_with_tag(&mut *rb, 1);
                    p.send_with_tag(sb, 1);
                }
                None => {}
            }
        }
        let latency = osu::latency_us(t_total, iterations);
        if rank == 0 {
            let mut sum = latency;
            for r in 1..pairs {
                let mut v = 0.0f64;
                world
                    .process_at_rank(r as i32)
                    .receive_into_with_tag(&mut v, REPORT_TAG);
                sum += v;
            }
            print!("{}", osu::row(size, sum / pairs as f64));
        } else if sender {
            world.process_at_rank(0).send_with_tag(&latency, REPORT_TAG);
        }
    }
    osu::exit(universe, 0);
}
