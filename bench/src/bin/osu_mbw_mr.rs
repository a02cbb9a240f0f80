//! `osu_mbw_mr`: OSU's multiple bandwidth / message rate test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel. `kestrel-run -n 4 target/release/osu_mbw_mr [options]`
//!
//! With `P` pairs (`-p`, default ranks / 2), rank `i < P` sends to rank `i + P`. Per iteration
//! every rank enters a barrier (not timed); then each sender starts a window of `-W` (default
//! 64) nonblocking sends of `size` bytes (tag 100), waits for them and receives a 4-byte
//! acknowledgement (tag 101), while each receiver posts the window's nonblocking receives,
//! waits, and sends the acknowledgement. Ranks beyond `2 P` only take part in the barriers.
//! `-x` warm-up iterations (default 10, 2 above 8 KiB) are not timed; rank 0 times each of the
//! `-i` iterations (default 100, 20 above 8 KiB) and reports the aggregate bandwidth
//! `P * size * W * iterations / time` in MB/s (10^6 bytes) and the message rate
//! `10^6 * bandwidth / size` in messages/s (`-R 0` drops that column). Each receive of a
//! window has its own buffer. Sizes 1 B to 4 MiB in powers of two. At least two ranks; pairs
//! rely on block placement of ranks (ranks 0..P on one side).

use kestrel::{request, Communicator};
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::MBW_MR;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, nprocs) = (world.rank(), world.size());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = match osu::parse_or_report(&SPEC, rank, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    let half = (nprocs / 2) as usize;
    let pairs = opts.pairs.unwrap_or(half);
    if pairs > half && nprocs >= 2 {
        if rank == 0 {
            let bad = osu::BadUsage {
                message: "Invalid Number of Pairs".to_string(),
                option: "-p".to_string(),
                optarg: Some(pairs.to_string()),
            };
            eprint!("{bad}\n\n");
            print!("{}", osu::help_text(&SPEC, false));
        }
        osu::exit(universe, 1);
    }
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
    let window = opts.window_size;
    let sizes = opts.sizes(&SPEC);
    let max = sizes.last().copied().unwrap_or(0);
    let me = rank as usize;
    let sender = me < pairs;
    let receiver = !sender && me < 2 * pairs;
    let mut s_buf = osu::AlignedBuf::new(if sender { max } else { 0 }.max(osu::ACK_BYTES));
    let mut r_buf =
        osu::AlignedBuf::new(if receiver { max * window } else { 0 }.max(osu::ACK_BYTES));
    if rank == 0 {
        print!(
            "{}{}",
            osu::preamble(&SPEC, &opts, pairs),
            osu::column_header(&SPEC, &opts)
        );
    }

    let peer = if sender {
        Some(world.process_at_rank((me + pairs) as i32))
    } else if receiver {
        Some(world.process_at_rank((me - pairs) as i32))
    } else {
        None
    };
    for &size in &sizes {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        let s_used = if sender { size } else { osu::ACK_BYTES };
        let r_used = if receiver {
            size * window
        } else {
            osu::ACK_BYTES
        };
        s_buf.as_mut_slice()[..s_used].fill(b'a');
        r_buf.as_mut_slice()[..r_used].fill(b'b');
        world.barrier();
        let mut t = 0.0f64;
        for i in 0..iterations + skip {
            world.barrier();
            match &peer {
                Some(p) if sender => {
                    let t_start = Instant::now();
                    let sb = &s_buf.as_slice()[..size];
                    request::scope(|scope| {
                        let reqs: Vec<_> = (0..window)
                            .map(|_| p.immediate_send_with_tag(scope, sb, 100))
                            .collect();
                        request::wait_all(reqs);
                    });
                    p.receive_into_with_tag(&mut r_buf.as_mut_slice()[..osu::ACK_BYTES], 101);
                    if i >= skip {
                        t += t_start.elapsed().as_secs_f64();
                    }
                }
                Some(p) => {
                    let rb = &mut r_buf.as_mut_slice()[..size * window];
                    request::scope(|scope| {
                        let reqs: Vec<_> = rb
                            .chunks_mut(size)
                            .map(|chunk| p.immediate_receive_into_with_tag(scope, chunk, 100))
                            .collect();
                        request::wait_all(reqs);
                    });
                    p.send_with_tag(&s_buf.as_slice()[..osu::ACK_BYTES], 101);
                }
                None => {}
            }
        }
        if rank == 0 {
            let bw = osu::bandwidth_mb_s(size, pairs * iterations * window, t);
            let rate = 1e6 * bw / size as f64;
            if opts.print_rate {
                print!("{}", osu::row2(size, bw, rate));
            } else {
                print!("{}", osu::row(size, bw));
            }
        }
    }
    osu::exit(universe, 0);
}
