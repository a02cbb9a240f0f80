//! Kestrel's demo: what a job of N ranks costs to coordinate through the runtime.
//! Run with `kestrel-run -n 4 target/release/examples/demo`; rank 0 prints the tables.
//!
//! Measured: the runtime barrier (a PMI fence through the launcher), a modex round trip
//! (put, fence, then read every rank's value) for several value sizes, and an allgather of
//! small blobs. These are start-up paths, not the data path: the data-path tables (latency,
//! bandwidth, allreduce) join this demo with the transports.

use std::time::Instant;

fn main() {
    let u = kestrel::init().unwrap_or_else(|e| kestrel::exit_with(&e));
    let (rank, size) = (u.rank(), u.size());
    let iters: u32 = std::env::var("KESTREL_DEMO_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200);
    let mut rt = u.runtime();
    let die = |e: kestrel::RuntimeError| -> ! {
        eprintln!("demo: rank {rank}: {e}");
        std::process::exit(1)
    };

    rt.barrier().unwrap_or_else(|e| die(e));
    let t = Instant::now();
    for _ in 0..iters {
        rt.barrier().unwrap_or_else(|e| die(e));
    }
    let barrier_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(iters);

    let mut modex_rows = Vec::new();
    for len in [8usize, 256, 1024, 4096] {
        let value = vec![rank as u8; len];
        let rounds = (iters / 4).max(10);
        let t = Instant::now();
        for round in 0..rounds {
            let key = format!("d{len}.{round}");
            rt.put(&key, &value).unwrap_or_else(|e| die(e));
            rt.fence().unwrap_or_else(|e| die(e));
            for peer in 0..size {
                let got = rt.get(peer, &key).unwrap_or_else(|e| die(e));
                if got.as_deref().map(|g| g.len()) != Some(len) {
                    eprintln!("demo: rank {rank}: wrong value from rank {peer}");
                    std::process::exit(1);
                }
            }
        }
        modex_rows.push((len, t.elapsed().as_secs_f64() * 1e6 / f64::from(rounds)));
    }

    let t = Instant::now();
    for _ in 0..iters {
        rt.allgather(&rank.to_le_bytes()).unwrap_or_else(|e| die(e));
    }
    let allgather_us = t.elapsed().as_secs_f64() * 1e6 / f64::from(iters);

    if rank == 0 {
        println!(
            "# Kestrel runtime demo: {size} ranks, PMI {}, {iters} iterations",
            rt.pmi_kind()
        );
        println!();
        println!("# Runtime barrier (PMI fence through the launcher)");
        println!("{:<24}{:>16}", "# Operation", "Latency (us)");
        println!("{:<24}{:>16.2}", "barrier", barrier_us);
        println!("{:<24}{:>16.2}", "allgather (4 B)", allgather_us);
        println!();
        println!("# Modex round trip: put, fence, get from all {size} ranks");
        println!("{:<24}{:>16}", "# Size (bytes)", "Latency (us)");
        for (len, us) in modex_rows {
            println!("{:<24}{:>16.2}", len, us);
        }
    }
}
