//! One-sided operations on the simulated cluster (`sim`): puts, gets, accumulates,
//! get-accumulates and compare-and-swap between 3 engines over a network that reorders,
//! delays and pushes back, with messages split to fit a small `max_send`, checked against a
//! serial model of every window; operations from one origin are applied in issue order
//! whatever the delivery order; operations that arrive before the target registered the
//! window wait for it; a range outside the target window is refused at the origin and, when
//! forged, dropped by the target without writing anything; operations behind a lazy lock's
//! in-order request wait for its grant. Synchronization calls block and
//! run on real processes (`tests/c/rma_sync.c` through `tests/tests/abi.rs`).

mod sim;

use std::cell::RefCell;
use std::rc::Rc;

use kestrel_pml::op::{Dtype, Op};
use kestrel_pml::rma::{wire, AccOp, MemberInfo, RmaOp, Segment, WinMemory};
use sim::*;

const WIN: u16 = 900;
const BYTES: usize = 4096;

fn configs() -> Vec<(&'static str, NetConfig)> {
    vec![
        ("default", NetConfig::default()),
        (
            "reordering, delays, push-back, 256-byte messages",
            NetConfig {
                reorder: true,
                delay: 4,
                push_back: 5,
                max_send: 256,
                eager: 128,
                seed: 7,
                ..NetConfig::default()
            },
        ),
    ]
}

/// A cluster of `n` engines, each exposing `BYTES` bytes of `mems[r]` as window `WIN`.
fn windows(n: u32, cfg: NetConfig, mems: &mut [Vec<u8>]) -> Cluster {
    let mut c = Cluster::new(n, cfg);
    let members: Vec<MemberInfo> = mems
        .iter()
        .map(|m| MemberInfo {
            size: m.len() as u64,
            disp_unit: 1,
            base: m.as_ptr() as u64,
        })
        .collect();
    for (r, e) in c.engines.iter_mut().enumerate() {
        // SAFETY: each test keeps `mems` alive and untouched until its engines are dropped.
        let mem = unsafe { WinMemory::fixed(mems[r].as_mut_ptr(), mems[r].len()) };
        e.win_register(WIN, (0..n).collect(), mem, members.clone())
            .unwrap();
    }
    c
}

fn drive(c: &mut Cluster, done: impl Fn(&Cluster) -> bool) {
    for _ in 0..200_000 {
        if done(c) {
            return;
        }
        c.step();
    }
    panic!("one-sided operations did not complete");
}

/// Runs every engine until the network is empty for a while.
fn settle(c: &mut Cluster) {
    for _ in 0..2_000 {
        c.step();
    }
}

fn seg(offset: u64, len: u32) -> Segment {
    Segment { offset, len }
}

fn sink(into: &Rc<RefCell<Vec<u8>>>) -> kestrel_pml::rma::Sink {
    let into = into.clone();
    Box::new(move |b: &[u8]| *into.borrow_mut() = b.to_vec())
}

#[test]
fn puts_gets_and_accumulates_match_a_serial_model() {
    for (name, cfg) in configs() {
        let n = 3u32;
        let mut mems: Vec<Vec<u8>> = (0..n).map(|r| pattern(BYTES, r as u8)).collect();
        let mut model = mems.clone();
        let mut c = windows(n, cfg, &mut mems);
        // Every rank puts a scattered pattern into its right neighbour (two ranges, 1500
        // bytes: split over several messages when max_send is small).
        for r in 0..n {
            let t = (r + 1) % n;
            let data = pattern(1500, 100 + r as u8);
            let segs = [seg(10 * r as u64, 700), seg(2000 + r as u64, 800)];
            c.engines[r as usize].rma_put(WIN, t, &segs, &data).unwrap();
            let m = &mut model[t as usize];
            m[10 * r as usize..10 * r as usize + 700].copy_from_slice(&data[..700]);
            m[2000 + r as usize..2800 + r as usize].copy_from_slice(&data[700..]);
        }
        settle(&mut c);
        // Then every rank adds i32s into rank 0 (the same elements: the sums must all land).
        let vals: Vec<i32> = (0..64).map(|i| i * 3 - 50).collect();
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_ne_bytes()).collect();
        for r in 0..n {
            c.engines[r as usize]
                .rma_accumulate(
                    WIN,
                    0,
                    &[seg(3000, 256)],
                    &bytes,
                    AccOp::Reduce(Op::Sum),
                    Dtype::I32,
                )
                .unwrap();
        }
        for (k, v) in vals.iter().enumerate() {
            let at = 3000 + 4 * k;
            let old = i32::from_ne_bytes(model[0][at..at + 4].try_into().unwrap());
            let new = old.wrapping_add(v * n as i32);
            model[0][at..at + 4].copy_from_slice(&new.to_ne_bytes());
        }
        settle(&mut c);
        // Gets read back what the model says, in the order of their ranges.
        let got = Rc::new(RefCell::new(Vec::new()));
        let op = c.engines[2]
            .rma_get(WIN, 0, &[seg(3000, 256), seg(0, 40)], sink(&got))
            .unwrap();
        drive(&mut c, |c| c.engines[2].rma_done(WIN, op));
        let mut want = model[0][3000..3256].to_vec();
        want.extend_from_slice(&model[0][0..40]);
        assert_eq!(*got.borrow(), want, "{name}: get");
        drop(c);
        assert_eq!(mems, model, "{name}: windows differ from the model");
    }
}

#[test]
fn one_origins_operations_apply_in_issue_order_and_fetches_see_their_turn() {
    for (name, cfg) in configs() {
        let mut mems: Vec<Vec<u8>> = (0..2).map(|_| vec![0u8; BYTES]).collect();
        let mut c = windows(2, cfg, &mut mems);
        // 200 replaces of one u64, then fetch-and-add: each fetch must see exactly the value
        // the operations before it left.
        let mut fetched = Vec::new();
        let mut ops: Vec<RmaOp> = Vec::new();
        for i in 0..200u64 {
            c.engines[1]
                .rma_accumulate(
                    WIN,
                    0,
                    &[seg(8, 8)],
                    &i.to_ne_bytes(),
                    AccOp::Replace,
                    Dtype::U64,
                )
                .unwrap();
            let got = Rc::new(RefCell::new(Vec::new()));
            ops.push(
                c.engines[1]
                    .rma_get_accumulate(
                        WIN,
                        0,
                        &[seg(8, 8)],
                        &1u64.to_ne_bytes(),
                        AccOp::Reduce(Op::Sum),
                        Dtype::U64,
                        sink(&got),
                    )
                    .unwrap(),
            );
            fetched.push(got);
        }
        drive(&mut c, |c| {
            ops.iter().all(|&o| c.engines[1].rma_done(WIN, o))
        });
        for (i, f) in fetched.iter().enumerate() {
            assert_eq!(
                u64::from_ne_bytes(f.borrow()[..].try_into().unwrap()),
                i as u64,
                "{name}: fetch {i}"
            );
        }
        // Compare-and-swap: succeeds when the compare matches, and returns the old value.
        let old = Rc::new(RefCell::new(Vec::new()));
        let op = c.engines[1]
            .rma_compare_and_swap(
                WIN,
                0,
                8,
                &200u64.to_ne_bytes(),
                &7u64.to_ne_bytes(),
                sink(&old),
            )
            .unwrap();
        drive(&mut c, |c| c.engines[1].rma_done(WIN, op));
        assert_eq!(*old.borrow(), 200u64.to_ne_bytes(), "{name}: cas old");
        let op = c.engines[1]
            .rma_compare_and_swap(
                WIN,
                0,
                8,
                &200u64.to_ne_bytes(),
                &9u64.to_ne_bytes(),
                sink(&old),
            )
            .unwrap();
        drive(&mut c, |c| c.engines[1].rma_done(WIN, op));
        assert_eq!(*old.borrow(), 7u64.to_ne_bytes(), "{name}: failed cas");
        drop(c);
        assert_eq!(&mems[0][8..16], &7u64.to_ne_bytes(), "{name}");
    }
}

#[test]
fn operations_before_the_target_registers_the_window_wait_for_it() {
    let mut mems: Vec<Vec<u8>> = (0..2).map(|_| vec![0u8; 64]).collect();
    let mut c = Cluster::new(2, NetConfig::default());
    let members: Vec<MemberInfo> = mems
        .iter()
        .map(|m| MemberInfo {
            size: m.len() as u64,
            disp_unit: 1,
            base: 0,
        })
        .collect();
    // SAFETY: `mems` outlives the engines.
    let m0 = unsafe { WinMemory::fixed(mems[0].as_mut_ptr(), 64) };
    c.engines[0]
        .win_register(WIN, vec![0, 1], m0, members.clone())
        .unwrap();
    c.engines[0]
        .rma_put(WIN, 1, &[seg(4, 4)], &[1, 2, 3, 4])
        .unwrap();
    settle(&mut c);
    assert_eq!(mems[1][4..8], [0, 0, 0, 0]);
    // SAFETY: as above.
    let m1 = unsafe { WinMemory::fixed(mems[1].as_mut_ptr(), 64) };
    c.engines[1]
        .win_register(WIN, vec![0, 1], m1, members)
        .unwrap();
    settle(&mut c);
    drop(c);
    assert_eq!(mems[1][4..8], [1, 2, 3, 4]);
}

#[test]
fn ranges_outside_a_window_are_refused_and_forged_ones_write_nothing() {
    let mut mems: Vec<Vec<u8>> = (0..2).map(|_| vec![0u8; 64]).collect();
    let mut c = windows(2, NetConfig::default(), &mut mems);
    let e = c.engines[0]
        .rma_put(WIN, 1, &[seg(60, 8)], &[9; 8])
        .unwrap_err();
    assert!(e.to_string().contains("run past its 64 bytes"), "{e}");
    assert!(c.engines[0].rma_put(WIN, 5, &[seg(0, 1)], &[9]).is_err());
    assert!(c.engines[0]
        .rma_accumulate(
            WIN,
            1,
            &[seg(0, 6)],
            &[0; 6],
            AccOp::Reduce(Op::Sum),
            Dtype::I32
        )
        .is_err());
    // A forged message (what a broken or hostile peer could send) past the window's end.
    let forged = wire::encode(
        WIN,
        &wire::Msg::Put {
            seq: 0,
            segs: vec![seg(60, 8)],
            data: &[9; 8],
        },
    );
    assert!(wire::decode(&forged).is_ok());
    let mut truncated = forged.clone();
    truncated.pop();
    assert!(
        wire::decode(&truncated).is_err(),
        "data shorter than its ranges"
    );
    settle(&mut c);
    let before = c.engines[1].rma_errors();
    c.engines[1].rma_inject(0, forged);
    settle(&mut c);
    assert_eq!(c.engines[1].rma_errors(), before + 1);
    drop(c);
    assert!(mems[1].iter().all(|&b| b == 0));
}

/// A lazy lock's request (LOCK_IN_ORDER) is numbered like an operation: the target applies
/// nothing after it from that origin until it grants it, whatever order the requests and
/// operations arrive in, and grants it when the holder before it unlocks. Messages are
/// injected as the origins would send them.
#[test]
fn operations_behind_an_in_order_lock_request_wait_for_its_grant() {
    let mut mems: Vec<Vec<u8>> = (0..3).map(|_| vec![0u8; 64]).collect();
    let mut c = windows(3, NetConfig::default(), &mut mems);
    let msg = |m: &wire::Msg<'_>| wire::encode(WIN, m);
    let put = |seq: u64, v: u8| {
        msg(&wire::Msg::Put {
            seq,
            segs: vec![seg(0, 8)],
            data: &[v; 8],
        })
    };
    let target = 1;
    let errors = c.engines[target].rma_errors();
    // Process 2 holds the target's lock exclusively (an eager LOCK).
    c.engines[target].rma_inject(2, msg(&wire::Msg::Lock { exclusive: true }));
    // Process 0's lazy epoch: its put arrives before its lock request.
    c.engines[target].rma_inject(0, put(1, 7));
    c.engines[target].rma_inject(
        0,
        msg(&wire::Msg::LockInOrder {
            seq: 0,
            exclusive: false,
        }),
    );
    c.engines[target].rma_inject(0, msg(&wire::Msg::Unlock { ops: 2 }));
    settle(&mut c);
    assert_eq!(mems[target][0], 0, "applied before the lock was granted");
    // The same request again while it waits: a duplicate, dropped.
    c.engines[target].rma_inject(
        0,
        msg(&wire::Msg::LockInOrder {
            seq: 0,
            exclusive: false,
        }),
    );
    assert_eq!(c.engines[target].rma_errors(), errors + 1);
    // Process 2 unlocks: process 0 gets the lock, its put is applied, its unlock answered
    // and the lock released.
    c.engines[target].rma_inject(2, msg(&wire::Msg::Unlock { ops: 0 }));
    settle(&mut c);
    assert_eq!(mems[target][..8], [7; 8]);
    // Free again: process 2's own in-order request is granted at once, and its put follows.
    c.engines[target].rma_inject(
        2,
        msg(&wire::Msg::LockInOrder {
            seq: 0,
            exclusive: true,
        }),
    );
    c.engines[target].rma_inject(2, put(1, 9));
    settle(&mut c);
    assert_eq!(mems[target][..8], [9; 8]);
    // While process 2 holds it exclusively, process 0's next epoch waits again.
    c.engines[target].rma_inject(
        0,
        msg(&wire::Msg::LockInOrder {
            seq: 2,
            exclusive: true,
        }),
    );
    c.engines[target].rma_inject(0, put(3, 5));
    settle(&mut c);
    assert_eq!(mems[target][..8], [9; 8]);
    c.engines[target].rma_inject(2, msg(&wire::Msg::Unlock { ops: 2 }));
    settle(&mut c);
    assert_eq!(mems[target][..8], [5; 8]);
    assert_eq!(c.engines[target].rma_errors(), errors + 1);
}
