//! `osu_latency_mt`: OSU's multithreaded latency test (OSU Micro-Benchmarks v7.4 methodology
//! and output) on Kestrel's multithreaded Rust API (`kestrel::threads`).
//! `kestrel-run -n 2 target/release/osu_latency_mt [options]`
//!
//! Rank 0 runs SENDERS threads, rank 1 RECEIVERS threads (`-t SENDERS:RECEIVERS`; `-t N`
//! sets the receivers, OSU's default is 1:2). Per size: a barrier, then every sender thread
//! does `-x` untimed and `-i` timed round trips (send tag 1, receive tag 2) and the receiver
//! threads share the matching receive-and-answer between them (each an equal part of the
//! senders' total). Which receiver answers which sender is the library's matching. The
//! latency is half of a sender thread's average round trip, averaged over the sender
//! threads, in microseconds. The C twin is `bench/c/osu_latency_mt.c`. Exactly two ranks.

use kestrel::threads::{initialize_multithreaded, SharedCommunicator, SharedUniverse};
use kestrel_bench::osu;
use std::time::Instant;

const SPEC: osu::Spec = osu::LATENCY_MT;

fn leave(universe: SharedUniverse, code: i32) -> ! {
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    universe.world().barrier();
    drop(universe);
    std::process::exit(code)
}

/// One sender thread: its timed seconds.
fn sender(world: &SharedCommunicator, size: usize, iterations: usize, skip: usize) -> f64 {
    let sb = vec![b'a'; size];
    let mut rb = vec![b'b'; size];
    let mut t_start = Instant::now();
    for i in 0..iterations + skip {
        if i == skip {
            t_start = Instant::now();
        }
        world.send_with_tag(1, &sb[..], 1);
        world.receive_into_with_tag(Some(1), &mut rb[..], Some(2));
    }
    t_start.elapsed().as_secs_f64()
}

/// One receiver thread: answers `share` round trips.
fn receiver(world: &SharedCommunicator, size: usize, share: usize) {
    let sb = vec![b'a'; size];
    let mut rb = vec![b'b'; size];
    for _ in 0..share {
        world.receive_into_with_tag(Some(0), &mut rb[..], Some(1));
        world.send_with_tag(0, &sb[..], 2);
    }
}

fn main() {
    let universe = initialize_multithreaded().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, nprocs) = (world.rank(), world.size());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut opts = match osu::parse_or_report(&SPEC, rank, &args) {
        Ok(o) => o,
        Err(code) => leave(universe, code),
    };
    if nprocs != 2 {
        if rank == 0 {
            eprintln!("This test requires exactly two processes");
        }
        leave(universe, 1);
    }
    if let Some(w) = opts.limit_to_memory(&SPEC) {
        if rank == 0 {
            eprintln!("{w}");
        }
    }
    let (senders, receivers) = opts.threads;
    if rank == 0 {
        print!(
            "{}{}",
            osu::preamble(&SPEC, &opts, 1),
            osu::column_header(&SPEC, &opts)
        );
    }
    for size in opts.sizes(&SPEC) {
        let (iterations, skip) = (opts.iterations_for(size), opts.skip_for(size));
        let total = senders * (iterations + skip);
        world.barrier();
        let mean = std::thread::scope(|s| {
            if rank == 0 {
                let handles: Vec<_> = (0..senders)
                    .map(|_| s.spawn(|| sender(&world, size, iterations, skip)))
                    .collect();
                let per_thread: Vec<f64> = handles
                    .into_iter()
                    .map(|h| osu::latency_us(h.join().expect("sender thread"), iterations))
                    .collect();
                per_thread.iter().sum::<f64>() / senders as f64
            } else {
                let w = &world;
                let handles: Vec<_> = (0..receivers)
                    .map(|t| {
                        let share = total / receivers + usize::from(t < total % receivers);
                        s.spawn(move || receiver(w, size, share))
                    })
                    .collect();
                for h in handles {
                    h.join().expect("receiver thread");
                }
                0.0
            }
        });
        if rank == 0 {
            print!("{}", osu::row(size, mean));
        }
    }
    leave(universe, 0);
}
