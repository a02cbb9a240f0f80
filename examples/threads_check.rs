//! `MPI_THREAD_MULTIPLE` through the Rust API (`kestrel::threads`): four threads on each of
//! two ranks at once, each thread with a communicator of its own.
//!   1. streams: each thread exchanges 12,500 messages each way with its twin on the other
//!      rank (100,000 in all), checked for order and content; odd threads on their own
//!      duplicate, even threads on the world communicator with a tag of their own;
//!   2. shared wildcard receives: rank 0's threads send on one communicator, rank 1's
//!      threads all receive from it with any source and any tag; every message arrives
//!      once, and each receiving thread sees each sender's messages in order;
//!   3. collectives (allreduce, barrier) on a duplicate per thread, concurrently.
//!
//! Prints `threads_check passed on N ranks` from rank 0. Run with 2 ranks or more (ranks
//! beyond 1 only join the collectives).

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use kestrel::collective::SystemOperation;
use kestrel::threads::{initialize_multithreaded, SharedCommunicator};

const THREADS: usize = 4;
const STREAM: u32 = 12_500;
const WILD: u32 = 2_000;
const COLLS: u32 = 300;

fn check(seq_thread: u32, seq: u32) -> u32 {
    seq_thread
        .wrapping_mul(1_000_003)
        .wrapping_add(seq.wrapping_mul(7))
        ^ 0x5a5a
}

fn stream(t: usize, comm: &SharedCommunicator, tag: i32) {
    let peer = 1 - comm.rank();
    for seq in 0..STREAM {
        let out = [t as u32, seq, check(t as u32, seq)];
        // Even ranks send first, odd ranks receive first: a ping-pong per thread pair.
        let mut got = [0u32; 3];
        if comm.rank() == 0 {
            comm.send_with_tag(peer, &out[..], tag);
            comm.receive_into_with_tag(Some(peer), &mut got[..], Some(tag));
        } else {
            comm.receive_into_with_tag(Some(peer), &mut got[..], Some(tag));
            comm.send_with_tag(peer, &out[..], tag);
        }
        // The twin's message of the same round: its sequence number is this one.
        assert_eq!(
            got,
            [t as u32, seq, check(t as u32, seq)],
            "thread {t}: message out of order or corrupted"
        );
    }
}

fn wildcards(t: usize, comm: &SharedCommunicator, seen: &[AtomicU8]) {
    if comm.rank() == 0 {
        for seq in 0..WILD {
            comm.send_with_tag(1, &[t as u32, seq, check(t as u32, seq)][..], t as i32);
        }
        return;
    }
    let mut last = [None::<u32>; THREADS];
    for _ in 0..WILD {
        let mut m = [0u32; 3];
        let st = comm.receive_into_with_tag(None, &mut m[..], None);
        let (sender, seq) = (m[0] as usize, m[1]);
        assert!(
            sender < THREADS && seq < WILD,
            "thread {t}: bad message {m:?}"
        );
        assert_eq!(
            st.tag(),
            sender as i32,
            "thread {t}: tag and content disagree"
        );
        assert_eq!(
            m[2],
            check(sender as u32, seq),
            "thread {t}: corrupted {m:?}"
        );
        assert!(
            last[sender].is_none_or(|l| seq > l),
            "thread {t}: sender {sender}'s message {seq} after {:?}",
            last[sender]
        );
        last[sender] = Some(seq);
        let before = seen[sender * WILD as usize + seq as usize].fetch_add(1, Ordering::Relaxed);
        assert_eq!(before, 0, "message ({sender}, {seq}) received twice");
    }
}

fn collectives(t: usize, comm: &SharedCommunicator) {
    let n = comm.size() as u64;
    for i in 0..COLLS {
        let v = [comm.rank() as u64 + t as u64 + i as u64];
        let mut sum = [0u64];
        comm.all_reduce_into(&v[..], &mut sum[..], SystemOperation::sum());
        assert_eq!(
            sum[0],
            n * (t as u64 + i as u64) + n * (n - 1) / 2,
            "thread {t}: allreduce {i}"
        );
        if i % 50 == 0 {
            comm.barrier();
        }
    }
}

fn main() {
    let universe = initialize_multithreaded().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    assert!(world.size() >= 2, "threads_check needs 2 ranks or more");
    let own: Vec<SharedCommunicator> = (0..THREADS).map(|_| world.duplicate()).collect();
    let coll: Vec<SharedCommunicator> = (0..THREADS).map(|_| world.duplicate()).collect();
    let wild = world.duplicate();
    let seen: Arc<Vec<AtomicU8>> = Arc::new(
        (0..THREADS * WILD as usize)
            .map(|_| AtomicU8::new(0))
            .collect(),
    );
    let pair = world.rank() < 2;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (world, own, coll, wild, seen) = (&world, &own[t], &coll[t], &wild, &seen);
            s.spawn(move || {
                if pair {
                    if t % 2 == 1 {
                        stream(t, own, 5);
                    } else {
                        stream(t, world, 100 + t as i32);
                    }
                    wildcards(t, wild, seen);
                }
                collectives(t, coll);
            });
        }
    });
    if world.rank() == 1 {
        for (k, s) in seen.iter().enumerate() {
            assert_eq!(
                s.load(Ordering::Relaxed),
                1,
                "wildcard message {k} seen wrongly"
            );
        }
    }
    world.barrier();
    if world.rank() == 0 {
        println!("threads_check passed on {} ranks", world.size());
    }
    universe
        .finalize()
        .unwrap_or_else(|e| kestrel::exit_with(&e));
}
