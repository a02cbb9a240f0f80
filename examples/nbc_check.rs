//! Self-checking nonblocking and persistent collectives through the Rust API: each result is
//! compared with what the blocking collective returns for the same inputs.
//!
//! `nbc_check MODE`: `full` (every immediate collective, sizes on both sides of the eager
//! limit, every root, 16 outstanding at once completed in reverse order, persistent
//! collectives run several times with new data), `overlap BYTES` (rank 0 starts an
//! allreduce, computes for 100 ms without calling MPI, then waits; every other rank waits at
//! once and must finish long before rank 0's computation ends: the schedule advances without
//! it; prints the extra latency measured).

use std::time::{Duration, Instant};

use kestrel::collective::{CommunicatorCollectives, Root, SystemOperation};
use kestrel::immediate::{ImmediateCollectives, ImmediateRoot};
use kestrel::{request, Communicator, SimpleCommunicator};

fn fail(rank: i32, what: String) -> ! {
    eprintln!("nbc_check: rank {rank}: {what}");
    std::process::exit(1)
}

fn data(rank: i32, k: usize, n: usize) -> Vec<i64> {
    (0..n)
        .map(|i| (rank as i64 + 1) * 1000 + (k * 7 + i) as i64)
        .collect()
}

fn full(world: &SimpleCommunicator) {
    let (me, size) = (world.rank(), world.size());
    for &n in &[1usize, 100, 5000] {
        let send = data(me, 1, n);
        // allreduce, scan, exscan against the blocking ones.
        let mut expect = vec![0i64; n];
        world.all_reduce_into(&send, &mut expect, SystemOperation::sum());
        let mut got = vec![0i64; n];
        request::scope(|s| {
            world
                .immediate_all_reduce_into(s, &send, &mut got, SystemOperation::sum())
                .wait();
        });
        if got != expect {
            fail(me, format!("immediate allreduce of {n} differs"));
        }
        let mut expect = vec![0i64; n];
        world.scan_into(&send, &mut expect, SystemOperation::max());
        let mut got = vec![0i64; n];
        request::scope(|s| {
            world
                .immediate_scan_into(s, &send, &mut got, SystemOperation::max())
                .wait();
        });
        if got != expect {
            fail(me, format!("immediate scan of {n} differs"));
        }
        let mut expect = vec![-1i64; n];
        world.exclusive_scan_into(&send, &mut expect, SystemOperation::sum());
        let mut got = vec![-1i64; n];
        request::scope(|s| {
            world
                .immediate_exclusive_scan_into(s, &send, &mut got, SystemOperation::sum())
                .wait();
        });
        if got != expect {
            fail(me, format!("immediate exscan of {n} differs"));
        }
        // allgather, alltoall, reduce_scatter_block.
        let mut expect = vec![0i64; n * size as usize];
        world.all_gather_into(&send, &mut expect);
        let mut got = vec![0i64; n * size as usize];
        request::scope(|s| world.immediate_all_gather_into(s, &send, &mut got).wait());
        if got != expect {
            fail(me, format!("immediate allgather of {n} differs"));
        }
        let many = data(me, 2, n * size as usize);
        let mut expect = vec![0i64; n * size as usize];
        world.all_to_all_into(&many, &mut expect);
        let mut got = vec![0i64; n * size as usize];
        request::scope(|s| world.immediate_all_to_all_into(s, &many, &mut got).wait());
        if got != expect {
            fail(me, format!("immediate alltoall of {n} differs"));
        }
        let mut expect = vec![0i64; n];
        world.reduce_scatter_block_into(&many, &mut expect, SystemOperation::sum());
        let mut got = vec![0i64; n];
        request::scope(|s| {
            world
                .immediate_reduce_scatter_block_into(s, &many, &mut got, SystemOperation::sum())
                .wait();
        });
        if got != expect {
            fail(me, format!("immediate reduce_scatter_block of {n} differs"));
        }
        // Rooted ones at every root.
        for root in 0..size {
            let p = world.process_at_rank(root);
            let mut b = if me == root { send.clone() } else { vec![0; n] };
            request::scope(|s| p.immediate_broadcast_into(s, &mut b).wait());
            if b != data(root, 1, n) {
                fail(me, format!("immediate bcast of {n} from {root} differs"));
            }
            let mut expect = vec![0i64; n];
            let mut got = vec![0i64; n];
            if me == root {
                p.reduce_into_root(&send, &mut expect, SystemOperation::sum());
                request::scope(|s| {
                    p.immediate_reduce_into_root(s, &send, &mut got, SystemOperation::sum())
                        .wait()
                });
                if got != expect {
                    fail(me, format!("immediate reduce of {n} at {root} differs"));
                }
            } else {
                p.reduce_into(&send, SystemOperation::sum());
                request::scope(|s| {
                    p.immediate_reduce_into(s, &send, SystemOperation::sum())
                        .wait()
                });
            }
            let mut gathered = vec![0i64; n * size as usize];
            if me == root {
                request::scope(|s| p.immediate_gather_into_root(s, &send, &mut gathered).wait());
                for r in 0..size {
                    if gathered[r as usize * n..(r as usize + 1) * n] != data(r, 1, n)[..] {
                        fail(me, format!("immediate gather block {r} at {root} differs"));
                    }
                }
            } else {
                request::scope(|s| p.immediate_gather_into(s, &send).wait());
            }
            let mut part = vec![0i64; n];
            if me == root {
                let all = data(me, 3, n * size as usize);
                request::scope(|s| p.immediate_scatter_into_root(s, &all, &mut part).wait());
                if part[..] != all[me as usize * n..(me as usize + 1) * n] {
                    fail(me, "immediate scatter: root's own block".into());
                }
            } else {
                request::scope(|s| p.immediate_scatter_into(s, &mut part).wait());
                if part[..]
                    != data(root, 3, n * size as usize)[me as usize * n..(me as usize + 1) * n]
                {
                    fail(me, format!("immediate scatter of {n} from {root} differs"));
                }
            }
        }
    }

    // Many at once, completed in reverse order of starting.
    let k = 16usize;
    let sends: Vec<Vec<i64>> = (0..k).map(|j| data(me, j, 1 + j * 37)).collect();
    let mut recvs: Vec<Vec<i64>> = sends.iter().map(|s| vec![0; s.len()]).collect();
    request::scope(|s| {
        let mut reqs: Vec<_> = sends
            .iter()
            .zip(recvs.iter_mut())
            .map(|(a, b)| world.immediate_all_reduce_into(s, a, b, SystemOperation::sum()))
            .collect();
        let barrier = world.immediate_barrier(s);
        while let Some(r) = reqs.pop() {
            r.wait();
        }
        barrier.wait();
    });
    for (j, r) in recvs.iter().enumerate() {
        let expect: Vec<i64> = (0..r.len())
            .map(|i| (0..size).map(|q| data(q, j, r.len())[i]).sum())
            .collect();
        if *r != expect {
            fail(me, format!("outstanding allreduce {j} differs"));
        }
    }

    // More small ones at once than the node segment has posted lines (8), so later rounds
    // are published only once every rank finished earlier ones: even ranks wait for the
    // newest first, odd ranks first enter a blocking barrier, whose wait must let the
    // schedules go on (an even rank waits for them before it reaches the barrier).
    let k = 12usize;
    let sends: Vec<[i64; 1]> = (0..k).map(|j| [(me as i64 + 1) * (j as i64 + 3)]).collect();
    let mut recvs = vec![[0i64; 1]; k];
    request::scope(|s| {
        let mut reqs: Vec<_> = sends
            .iter()
            .zip(recvs.iter_mut())
            .map(|(a, b)| {
                world.immediate_all_reduce_into(s, &a[..], &mut b[..], SystemOperation::sum())
            })
            .collect();
        if me % 2 == 1 {
            world.barrier();
        }
        while let Some(r) = reqs.pop() {
            r.wait();
        }
        if me % 2 == 0 {
            world.barrier();
        }
    });
    let ranks_sum: i64 = (1..=size as i64).sum();
    for (j, r) in recvs.iter().enumerate() {
        if r[0] != ranks_sum * (j as i64 + 3) {
            fail(
                me,
                format!(
                    "small outstanding allreduce {j}: {} instead of {}",
                    r[0],
                    ranks_sum * (j as i64 + 3)
                ),
            );
        }
    }

    // Large broadcasts outstanding at once, more data than the engine keeps in background
    // copies (16 MiB): the root's later rounds wait for their sends instead of copying.
    if size > 1 {
        let (k, n) = (6usize, 512 * 1024);
        let mut bufs: Vec<Vec<i64>> = (0..k)
            .map(|j| if me == 0 { data(0, j, n) } else { vec![0; n] })
            .collect();
        let root = world.process_at_rank(0);
        request::scope(|s| {
            let mut reqs: Vec<_> = bufs
                .iter_mut()
                .map(|b| root.immediate_broadcast_into(s, &mut b[..]))
                .collect();
            while let Some(r) = reqs.pop() {
                r.wait();
            }
        });
        for (j, b) in bufs.iter().enumerate() {
            if *b != data(0, j, n) {
                fail(me, format!("large outstanding broadcast {j} differs"));
            }
        }
    }

    // Persistent collectives, several runs with new data.
    let mut input = vec![0i64; 64];
    let mut out = vec![0i64; 64];
    let mut bc = vec![0i64; 16];
    for run in 0..4i64 {
        request::scope(|s| {
            let mut barrier = world.barrier_init(s);
            barrier.start();
            barrier.wait();
        });
        for (i, v) in input.iter_mut().enumerate() {
            *v = run * 100 + i as i64 + me as i64;
        }
        {
            let (inp, o) = (&input, &mut out);
            request::scope(|s| {
                let mut p = world.all_reduce_init(s, inp, o, SystemOperation::sum());
                p.start();
                p.wait();
                p.start();
                while !p.test() {}
            });
        }
        for (i, v) in out.iter().enumerate() {
            let expect: i64 = (0..size as i64).map(|q| run * 100 + i as i64 + q).sum();
            if *v != expect {
                fail(
                    me,
                    format!("persistent allreduce run {run} element {i}: {v} vs {expect}"),
                );
            }
        }
        if me == 0 {
            bc.iter_mut().for_each(|v| *v = run);
        }
        request::scope(|s| {
            let mut p = world.process_at_rank(0).broadcast_init(s, &mut bc);
            p.start();
            p.wait();
        });
        if bc.iter().any(|&v| v != run) {
            fail(me, format!("persistent bcast run {run}"));
        }
    }
}

/// The other persistent collectives (allgather, alltoall, reduce-scatter, scan, exscan, and
/// reduce, gather and scatter at every root): each run with new data, started twice.
fn persistent_rooted(world: &SimpleCommunicator) {
    let (me, size) = (world.rank(), world.size());
    let (n, all) = (5usize, 5 * size as usize);
    let block = |v: &[i64], r: i32| v[r as usize * n..(r as usize + 1) * n].to_vec();
    for run in 10..13usize {
        let send = data(me, run, n);
        let many = data(me, run + 20, all);
        let (mut gathered, mut exchanged) = (vec![0i64; all], vec![0i64; all]);
        request::scope(|s| {
            let mut a = world.all_gather_init(s, &send, &mut gathered);
            let mut b = world.all_to_all_init(s, &many, &mut exchanged);
            for _ in 0..2 {
                a.start();
                b.start();
                b.wait();
                while !a.test() {}
            }
        });
        // Reduce-scatter, scan and exscan (rank 0's exscan output stays -1).
        let (mut part, mut incl, mut excl) = (vec![0i64; n], vec![0i64; n], vec![-1i64; n]);
        request::scope(|s| {
            let sum = SystemOperation::sum();
            let mut ops = [
                world.reduce_scatter_block_init(s, &many, &mut part, sum),
                world.scan_init(s, &send, &mut incl, sum),
                world.exclusive_scan_init(s, &send, &mut excl, sum),
            ];
            for _ in 0..2 {
                ops.iter_mut().for_each(|o| o.start());
                ops.iter_mut().for_each(|o| o.wait());
            }
        });
        let summed = |ranks: std::ops::Range<i32>, k: usize, len: usize, at: usize| -> Vec<i64> {
            (0..n)
                .map(|i| ranks.clone().map(|q| data(q, k, len)[at + i]).sum())
                .collect()
        };
        if part != summed(0..size, run + 20, all, me as usize * n) {
            fail(me, format!("persistent reduce_scatter_block run {run}"));
        }
        if incl != summed(0..me + 1, run, n, 0) {
            fail(me, format!("persistent scan run {run}"));
        }
        let want = if me == 0 {
            vec![-1; n]
        } else {
            summed(0..me, run, n, 0)
        };
        if excl != want {
            fail(me, format!("persistent exscan run {run}"));
        }
        for q in 0..size {
            if block(&gathered, q) != data(q, run, n) {
                fail(me, format!("persistent allgather run {run}: block {q}"));
            }
            if block(&exchanged, q) != block(&data(q, run + 20, all), me) {
                fail(me, format!("persistent alltoall run {run}: block {q}"));
            }
        }
        for root in 0..size {
            let p = world.process_at_rank(root);
            let (mut sum, mut gath, mut part) = (vec![0i64; n], vec![0i64; all], vec![0i64; n]);
            let spread = data(root, run + 40, all);
            request::scope(|s| {
                let mut ops = if me == root {
                    [
                        p.reduce_init_root(s, &send, &mut sum, SystemOperation::sum()),
                        p.gather_init_root(s, &send, &mut gath),
                        p.scatter_init_root(s, &spread, &mut part),
                    ]
                } else {
                    [
                        p.reduce_init(s, &send, SystemOperation::sum()),
                        p.gather_init(s, &send),
                        p.scatter_init(s, &mut part),
                    ]
                };
                for _ in 0..2 {
                    ops.iter_mut().for_each(|o| o.start());
                    ops.iter_mut().rev().for_each(|o| o.wait());
                }
            });
            if part != block(&spread, me) {
                fail(me, format!("persistent scatter run {run} from {root}"));
            }
            if me == root {
                let want: Vec<i64> = (0..n)
                    .map(|i| (0..size).map(|q| data(q, run, n)[i]).sum())
                    .collect();
                if sum != want {
                    fail(me, format!("persistent reduce run {run} at {root}"));
                }
                for q in 0..size {
                    if block(&gath, q) != data(q, run, n) {
                        fail(
                            me,
                            format!("persistent gather run {run} at {root}: block {q}"),
                        );
                    }
                }
            }
        }
    }
}

/// Rank 0 computes for 100 ms between start and wait; the others must not wait for it.
fn overlap(world: &SimpleCommunicator, bytes: usize) {
    let me = world.rank();
    let n = (bytes / 8).max(1);
    let send = vec![1i64; n];
    let mut out = vec![0i64; n];
    // Baseline: the same allreduce with everyone waiting at once (median of 9).
    let mut base = Vec::new();
    for _ in 0..9 {
        world.barrier();
        let t = Instant::now();
        request::scope(|s| {
            world
                .immediate_all_reduce_into(s, &send, &mut out, SystemOperation::sum())
                .wait()
        });
        base.push(t.elapsed());
    }
    base.sort();
    let baseline = base[base.len() / 2];
    world.barrier();
    let compute = Duration::from_millis(100);
    let t = Instant::now();
    request::scope(|s| {
        let r = world.immediate_all_reduce_into(s, &send, &mut out, SystemOperation::sum());
        if me == 0 {
            // Computation without a single MPI call.
            let mut x = 0u64;
            while t.elapsed() < compute {
                x = std::hint::black_box(x.wrapping_mul(6364136223846793005).wrapping_add(1));
            }
        }
        r.wait();
    });
    let took = t.elapsed();
    if out.iter().any(|&v| v != world.size() as i64) {
        fail(me, "overlap: wrong result".into());
    }
    if me != 0 {
        let extra = took.saturating_sub(baseline);
        println!(
            "nbc_check overlap {bytes} B: rank {me} waited {:.1} us (baseline {:.1} us, extra {:.1} us) while rank 0 computed {} ms",
            took.as_secs_f64() * 1e6,
            baseline.as_secs_f64() * 1e6,
            extra.as_secs_f64() * 1e6,
            compute.as_millis()
        );
        // Stalled until rank 0's wait, the extra latency would be about the whole 100 ms.
        if extra > compute / 2 {
            fail(
                me,
                format!(
                    "overlap: the allreduce waited for rank 0's computation ({:.1} ms extra)",
                    extra.as_secs_f64() * 1e3
                ),
            );
        }
    }
    world.barrier();
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("full") => {
            full(&world);
            persistent_rooted(&world);
        }
        Some("overlap") => {
            let bytes = args.get(2).and_then(|b| b.parse().ok()).unwrap_or(8);
            overlap(&world, bytes)
        }
        other => fail(
            world.rank(),
            format!("unknown mode {other:?} (full, overlap BYTES)"),
        ),
    }
    if world.rank() == 0 {
        println!("nbc_check passed on {} ranks", world.size());
    }
}
