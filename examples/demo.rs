//! Kestrel's demo: two ranks on this node measure what an application feels — point-to-point
//! latency and bandwidth through the shared-memory transport, allreduce latency through the
//! collective engine — and the runtime's own coordination cost. Rank 0 prints the tables.
//!
//! `kestrel-run -n 2 target/release/examples/demo` (`KESTREL_DEMO_QUICK=1` for a short run).
//! Methodology follows the OSU micro-benchmarks: latency is half the round trip of a
//! ping-pong, averaged; bandwidth is a window of 64 nonblocking sends answered by one short
//! acknowledgement.

use std::time::Instant;

use kestrel::collective::{CommunicatorCollectives, SystemOperation};
use kestrel::{request, Communicator};

const SIZES: &[usize] = &[0, 8, 64, 512, 4096, 32 << 10, 256 << 10, 1 << 20, 4 << 20];

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    if size < 2 {
        eprintln!("demo: needs at least 2 ranks (kestrel-run -n 2 target/release/examples/demo)");
        std::process::exit(2);
    }
    let quick = std::env::var_os("KESTREL_DEMO_QUICK").is_some();
    let scale = if quick { 10 } else { 1 };

    let mut latency = Vec::new();
    let mut bandwidth = Vec::new();
    let mut buf = vec![0u8; 4 << 20];
    let mut window_bufs: Vec<Vec<u8>> = (0..64).map(|_| vec![0u8; 4 << 20]).collect();
    for &len in SIZES {
        let (iters, warmup) = if len <= 8192 {
            (10_000 / scale, 100)
        } else {
            (1000 / scale, 10)
        };
        let peer = world.process_at_rank(1 - rank.min(1));
        world.barrier();
        let mut start = Instant::now();
        if rank < 2 {
            for i in 0..iters + warmup {
                if i == warmup {
                    start = Instant::now();
                }
                if rank == 0 {
                    peer.send(&buf[..len]);
                    peer.receive_into(&mut buf[..len]);
                } else {
                    peer.receive_into(&mut buf[..len]);
                    peer.send(&buf[..len]);
                }
            }
        }
        latency.push((
            len,
            start.elapsed().as_secs_f64() * 1e6 / (2.0 * iters as f64),
        ));

        if len == 0 {
            continue;
        }
        let (iters, warmup) = if len <= 8192 {
            (100 / scale.min(5), 10)
        } else {
            (20 / scale.min(4), 2)
        };
        world.barrier();
        let mut start = Instant::now();
        if rank < 2 {
            for i in 0..iters + warmup {
                if i == warmup {
                    start = Instant::now();
                }
                if rank == 0 {
                    request::scope(|scope| {
                        let reqs: Vec<_> = (0..64)
                            .map(|_| peer.immediate_send_with_tag(scope, &buf[..len], 100))
                            .collect();
                        request::wait_all(reqs);
                    });
                    peer.receive_into_with_tag(&mut [0u8; 4][..], 101);
                } else {
                    request::scope(|scope| {
                        let reqs: Vec<_> = window_bufs
                            .iter_mut()
                            .map(|b| {
                                peer.immediate_receive_into_with_tag(scope, &mut b[..len], 100)
                            })
                            .collect();
                        request::wait_all(reqs);
                    });
                    peer.send_with_tag(&[0u8; 4][..], 101);
                }
            }
        }
        let secs = start.elapsed().as_secs_f64();
        bandwidth.push((len, (len * 64 * iters) as f64 / secs / 1e6));
    }

    let mut allreduce = Vec::new();
    for &len in &[8usize, 64, 512, 4096, 32 << 10, 256 << 10, 1 << 20] {
        let count = len / 8;
        let send = vec![1.0f64; count];
        let mut recv = vec![0.0f64; count];
        let (iters, warmup) = if len <= 8192 {
            (10_000 / scale, 100)
        } else {
            (1000 / scale, 10)
        };
        world.barrier();
        let mut start = Instant::now();
        for i in 0..iters + warmup {
            if i == warmup {
                start = Instant::now();
            }
            world.all_reduce_into(&send, &mut recv, SystemOperation::sum());
        }
        let us = start.elapsed().as_secs_f64() * 1e6 / iters as f64;
        if recv.iter().any(|&v| v != size as f64) {
            eprintln!("demo: allreduce of {len} bytes gave a wrong sum");
            std::process::exit(1);
        }
        allreduce.push((len, us));
    }

    let t = Instant::now();
    let rounds = 100;
    let mut rt = universe.runtime();
    for _ in 0..rounds {
        rt.barrier().unwrap_or_else(|e| {
            eprintln!("demo: {e}");
            std::process::exit(1)
        });
    }
    let pmi_barrier = t.elapsed().as_secs_f64() * 1e6 / rounds as f64;
    drop(rt);

    if rank == 0 {
        println!(
            "# Kestrel demo: {size} ranks on {}, transports {}",
            universe.node_id(),
            universe.transports()
        );
        println!();
        println!("# Point-to-point latency (ping-pong, half round trip)");
        println!("{:<10}{:>18}", "# Size", "Latency (us)");
        for (len, us) in &latency {
            println!("{:<10}{:>18.2}", len, us);
        }
        println!();
        println!("# Point-to-point bandwidth (window of 64 messages)");
        println!("{:<10}{:>18}", "# Size", "Bandwidth (MB/s)");
        for (len, mbs) in &bandwidth {
            println!("{:<10}{:>18.2}", len, mbs);
        }
        println!();
        println!("# Allreduce (sum of f64, all {size} ranks)");
        println!("{:<10}{:>18}", "# Size", "Avg Latency(us)");
        for (len, us) in &allreduce {
            println!("{:<10}{:>18.2}", len, us);
        }
        println!();
        println!("# Runtime barrier through the launcher (PMI fence)");
        println!("{:<10}{:>18}", "# Ranks", "Latency (us)");
        println!("{:<10}{:>18.2}", size, pmi_barrier);
    }
}
