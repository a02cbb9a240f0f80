//! Idle waiting: `idle_check MS` — rank 0 computes (sleeps) for MS milliseconds and then sends
//! every other rank a message each of them waits for in a receive. Every waiting rank prints
//! `idle_check rank R: waited W ms, cpu C ms` (the CPU time, user and system, its process
//! spent during the wait), so a test can tell a rank that slept while idle from one that
//! spun; rank 0 prints `idle_check: done on N ranks` after a final barrier.
//!
//! `idle_check MS busy-peer`: the other way round — rank 0 first sends every other rank a
//! message, then waits for their answers while they compute for MS milliseconds without any
//! MPI call before receiving it: a peer that is only busy must not be taken for dead by a
//! transport waiting for its acknowledgements.
//!
//! `idle_check MS busy-sender`: rank 0 starts a 4 MiB send to every other rank, then computes
//! for MS milliseconds without any MPI call before waiting for the sends; the others receive
//! at once. A transport whose receiver reads the sender's buffer (ofi's RMA) sees its read
//! stall while the sender computes, and must wait for a busy sender as for a busy receiver.

use std::time::{Duration, Instant};

use kestrel::Communicator;
use nix::sys::resource::{getrusage, UsageWho};

/// CPU time of this process so far.
fn cpu() -> Duration {
    let u = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage of this process");
    let t = |tv: nix::sys::time::TimeVal| {
        Duration::from_secs(tv.tv_sec() as u64) + Duration::from_micros(tv.tv_usec() as u64)
    };
    t(u.user_time()) + t(u.system_time())
}

fn main() {
    let ms: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(2000);
    let u = kestrel::init().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = u.world();
    let (rank, size) = (world.rank(), world.size());
    world.barrier();
    if std::env::args().nth(2).as_deref() == Some("busy-sender") {
        const LEN: usize = 4 << 20;
        if rank == 0 {
            let data: Vec<u8> = (0..LEN).map(|i| (i * 13 + (i >> 20)) as u8).collect();
            kestrel::request::scope(|scope| {
                let reqs: Vec<_> = (1..size)
                    .map(|r| {
                        world
                            .process_at_rank(r)
                            .immediate_send_with_tag(scope, &data[..], 6)
                    })
                    .collect();
                std::thread::sleep(Duration::from_millis(ms));
                for r in reqs {
                    r.wait();
                }
            });
        } else {
            let mut got = vec![0u8; LEN];
            world
                .process_at_rank(0)
                .receive_into_with_tag(&mut got[..], 6);
            let bad = (0..LEN).find(|&i| got[i] != (i * 13 + (i >> 20)) as u8);
            assert_eq!(bad, None, "idle_check: the busy sender's message differs");
        }
        world.barrier();
        if rank == 0 {
            println!("idle_check: busy senders waited for on {size} ranks");
        }
        return;
    }
    if std::env::args().nth(2).as_deref() == Some("busy-peer") {
        if rank == 0 {
            for r in 1..size {
                world.process_at_rank(r).send_with_tag(&[r as u32][..], 4);
            }
            for r in 1..size {
                let mut back = [0u32];
                world
                    .process_at_rank(r)
                    .receive_into_with_tag(&mut back[..], 5);
                assert_eq!(back[0], 2 * r as u32, "idle_check: wrong answer");
            }
        } else {
            std::thread::sleep(Duration::from_millis(ms));
            let mut got = [0u32];
            world
                .process_at_rank(0)
                .receive_into_with_tag(&mut got[..], 4);
            world.process_at_rank(0).send_with_tag(&[2 * got[0]][..], 5);
        }
        world.barrier();
        if rank == 0 {
            println!("idle_check: busy peers answered on {size} ranks");
        }
        return;
    }
    if rank == 0 {
        std::thread::sleep(Duration::from_millis(ms));
        for r in 1..size {
            world.process_at_rank(r).send_with_tag(&[r as u32][..], 3);
        }
    } else {
        let (c0, t0) = (cpu(), Instant::now());
        let mut got = [0u32];
        world
            .process_at_rank(0)
            .receive_into_with_tag(&mut got[..], 3);
        let (waited, spent) = (t0.elapsed(), cpu() - c0);
        assert_eq!(got[0], rank as u32, "idle_check: wrong payload");
        println!(
            "idle_check rank {rank}: waited {} ms, cpu {} ms",
            waited.as_millis(),
            spent.as_millis()
        );
    }
    world.barrier();
    if rank == 0 {
        println!("idle_check: done on {size} ranks");
    }
}
