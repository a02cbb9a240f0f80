//! Self-checking one-sided communication through the Rust API (`kestrel::window`), on a
//! window of `allocate_window` (shared memory between the ranks of a node) and on one of
//! `with_window` over this program's own memory (active messages), every expected value
//! computed here by plain arithmetic:
//!
//! - fence epochs: a ring of puts, then gets of the right neighbour's whole window; a run of
//!   `fences` epochs (put, read back, read what the left neighbour put here);
//! - general active target: each rank exposes itself to its left neighbour and accesses its
//!   right one with a put and an accumulate;
//! - passive target: concurrent `accumulate(SUM)` from every rank into one element of rank 0
//!   (the exact sum), `fetch_and_op(SUM)` chains (the fetched values are distinct partial
//!   sums), `get_accumulate`, `replace` and `fetch`;
//! - a spin lock made of `compare_and_swap_now` on rank 0, acquired `ACQUISITIONS` times in
//!   all (split over the ranks), protecting a counter read in a `flushed` part and written by put + flush:
//!   the counter must end exact;
//! - `with_local` reads and writes of the own memory.
//!
//! Prints `rma_check passed on N ranks` from rank 0; exits 1 naming the rank and the
//! mismatch otherwise.

use kestrel::collective::{CommunicatorCollectives, SystemOperation};
use kestrel::window::{LockType, Window, WindowCreation};
use kestrel::{Communicator, Rank};

const ACQUISITIONS: u64 = 10_000;
const ADDS: u64 = 500;

fn fail(rank: Rank, what: String) -> ! {
    eprintln!("rma_check: rank {rank}: {what}");
    std::process::exit(1)
}

fn same<T: PartialEq + std::fmt::Debug>(rank: Rank, what: &str, got: T, want: T) {
    if got != want {
        fail(rank, format!("{what}: got {got:?}, expected {want:?}"));
    }
}

/// Slot layout of the window (elements of u64).
const RING: usize = 0; // 4 elements: the ring's puts
const ACC: usize = 4; // accumulate target on rank 0
const FOP: usize = 5; // fetch_and_op chain on rank 0
const LOCK: usize = 6; // the CAS lock word on rank 0
const COUNTER: usize = 7; // protected by the CAS lock
const PSCW: usize = 8; // 2 elements: written by the left neighbour
const SLOTS: usize = 10;

fn check(world: &impl Communicator, win: &Window<u64>, flavor: &str) {
    let (rank, n) = (world.rank(), world.size());
    let (right, left) = ((rank + 1) % n, (rank + n - 1) % n);
    let me = rank as u64;
    win.with_local(|m| m.fill(0));
    world.barrier();

    // Fence: a ring of puts, then a get of the right neighbour's ring slots.
    win.fence(|e| e.put(right, RING, &[me, me * 10, me * 100, 7]));
    win.with_local(|m| {
        let l = left as u64;
        same(
            rank,
            &format!("{flavor}: ring put"),
            &m[RING..RING + 4],
            &[l, l * 10, l * 100, 7][..],
        );
    });
    let mut got = [0u64; 4];
    win.fence(|e| e.get(right, RING, &mut got));
    same(
        rank,
        &format!("{flavor}: ring get"),
        got,
        [me, me * 10, me * 100, 7],
    );

    // A run of fence epochs sharing their fences: put, then read back in the next epoch.
    let mut back = [0u64; 4];
    win.fences(|f| {
        f.epoch(|e| e.put(right, RING, &[me + 1, me + 2, me + 3, 8]));
        f.epoch(|e| e.get(right, RING, &mut back));
        same(
            rank,
            &format!("{flavor}: fences: the put read back"),
            back,
            [me + 1, me + 2, me + 3, 8],
        );
        f.epoch(|e| e.get(rank, RING, &mut back));
    });
    let l = left as u64;
    same(
        rank,
        &format!("{flavor}: fences: the left's put, read from myself"),
        back,
        [l + 1, l + 2, l + 3, 8],
    );

    // General active target: expose to the left, access the right.
    let exposure = win.expose(&[left]);
    win.access(&[right], |e| {
        e.put(right, PSCW, &[me + 1]);
        e.accumulate(right, PSCW + 1, &[me + 2], SystemOperation::sum());
    });
    exposure.wait();
    win.with_local(|m| {
        let l = left as u64;
        same(
            rank,
            &format!("{flavor}: access/expose"),
            &m[PSCW..PSCW + 2],
            &[l + 1, l + 2][..],
        );
    });
    world.barrier();

    // Passive target: concurrent accumulates and fetch-and-op chains to rank 0.
    let mut fetched = Vec::with_capacity(ADDS as usize);
    win.lock_all(|e| {
        for _ in 0..ADDS {
            e.accumulate(0, ACC, &[me + 1], SystemOperation::sum());
        }
        e.flush(0);
    });
    for i in 0..ADDS {
        let mut old = 0u64;
        if i % 2 == 0 {
            // The result borrowed until the epoch closes ...
            win.lock(0, LockType::Shared, |e| {
                e.fetch_and_op(0, FOP, &(me + 1), &mut old, SystemOperation::sum())
            });
        } else {
            // ... or completed at once.
            old = win.lock(0, LockType::Shared, |e| {
                e.fetch_and_op_now(0, FOP, me + 1, SystemOperation::sum())
            });
        }
        fetched.push(old);
    }
    world.barrier();
    let nn = n as u64;
    let total = ADDS * nn * (nn + 1) / 2;
    if rank == 0 {
        win.with_local(|m| {
            same(
                rank,
                &format!("{flavor}: concurrent accumulates"),
                m[ACC],
                total,
            );
            same(rank, &format!("{flavor}: fetch_and_op sum"), m[FOP], total);
        });
    }
    // Every fetched value is distinct across all ranks (atomic chain) and below the total.
    let mut all = vec![0u64; fetched.len() * n as usize];
    world.all_gather_into(&fetched[..], &mut all[..]);
    all.sort_unstable();
    all.dedup();
    same(
        rank,
        &format!("{flavor}: distinct fetched partial sums"),
        all.len(),
        fetched.len() * n as usize,
    );
    if all.iter().any(|&v| v >= total) {
        fail(
            rank,
            format!("{flavor}: a fetched partial sum is not below {total}"),
        );
    }

    // get_accumulate, replace, fetch on the right neighbour.
    let mut before = [0u64; 2];
    win.lock(right, LockType::Exclusive, |e| {
        e.get_accumulate(right, PSCW, &[5, 6], &mut before, SystemOperation::sum())
    });
    same(
        rank,
        &format!("{flavor}: get_accumulate old"),
        before,
        [me + 1, me + 2],
    );
    let mut again = [0u64; 2];
    win.lock(right, LockType::Exclusive, |e| {
        e.get_accumulate_now(right, PSCW, &[0, 0], &mut again, SystemOperation::sum());
        same(
            rank,
            &format!("{flavor}: get_accumulate_now"),
            again,
            [me + 6, me + 8],
        );
    });
    let mut now = 0u64;
    win.lock(right, LockType::Exclusive, |e| {
        e.replace(right, PSCW, &[42])
    });
    win.lock(right, LockType::Shared, |e| e.fetch(right, PSCW, &mut now));
    same(rank, &format!("{flavor}: replace then fetch"), now, 42);
    world.barrier();

    // A compare-and-swap spin lock on rank 0 protecting a counter.
    let mine = ACQUISITIONS / nn + u64::from((rank as u64) < ACQUISITIONS % nn);
    win.lock_all(|e| {
        for _ in 0..mine {
            let mut spins = 0u32;
            while e.compare_and_swap_now(0, LOCK, 0, me + 1) != 0 {
                spins += 1;
                if spins > 64 {
                    std::thread::yield_now();
                }
            }
            // One result buffer reused: each read completes in its own flushed part.
            let mut c = [0u64];
            e.flushed(0, |part| part.get(0, COUNTER, &mut c));
            e.put(0, COUNTER, &[c[0] + 1]);
            e.flush(0);
            let held = e.compare_and_swap_now(0, LOCK, me + 1, 0);
            if held != me + 1 {
                fail(
                    rank,
                    format!("{flavor}: CAS lock held by {held} when rank {rank} released it"),
                );
            }
        }
        // The counter after this rank's share: at least its own increments (atomic read).
        if e.fetch_now(0, COUNTER) < mine {
            fail(
                rank,
                format!("{flavor}: the counter lost this rank's increments"),
            );
        }
    });
    world.barrier();
    if rank == 0 {
        win.with_local(|m| {
            same(
                rank,
                &format!("{flavor}: counter under the CAS lock"),
                m[COUNTER],
                ACQUISITIONS,
            );
            same(rank, &format!("{flavor}: lock word free"), m[LOCK], 0);
        });
    }
    world.barrier();
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let allocated = world.allocate_window::<u64>(SLOTS);
    check(&world, &allocated, "allocate_window");
    drop(allocated);
    let mut memory = vec![0u64; SLOTS];
    world.with_window(&mut memory, |win| check(&world, win, "with_window"));
    if world.rank() == 0 {
        println!("rma_check passed on {} ranks", world.size());
    }
}
