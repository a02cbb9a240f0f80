//! Protocol tests without processes: several engines in this one test process on the
//! simulated cluster of `sim` (delay, reordering, push-back, a lost peer; virtual time).

mod sim;

use sim::*;

/// Sends one message of `len` bytes from 0 to 1 and checks it arrives whole.
fn one_message(cfg: NetConfig, len: usize, sync: bool) {
    let mut c = Cluster::new(2, cfg);
    let data = pattern(len, 7);
    let mut got = vec![0u8; len];
    let r = c.irecv(1, Some(0), Some(5), &mut got);
    let s = c.isend(0, 1, 5, &data, sync);
    let st = c.complete(&[(0, s), (1, r)]);
    assert_eq!(st[1].count, len);
    assert_eq!((st[1].source, st[1].tag), (0, 5));
    assert_eq!(st[1].truncated_from, None);
    assert!(got == data, "payload of {len} bytes differs");
}

#[test]
fn eager_message_arrives_whole() {
    one_message(NetConfig::default(), 100, false);
}

#[test]
fn zero_byte_message_arrives() {
    one_message(NetConfig::default(), 0, false);
}

#[test]
fn messages_around_the_eager_limit_take_either_protocol_intact() {
    let cfg = NetConfig::default();
    // The header takes 16 bytes of the eager limit.
    for len in [
        cfg.eager - 17,
        cfg.eager - 16,
        cfg.eager - 15,
        cfg.eager + 1,
    ] {
        one_message(cfg, len, false);
    }
}

#[test]
fn rendezvous_by_single_copy_get() {
    one_message(NetConfig::default(), 1 << 20, false);
}

#[test]
fn rendezvous_by_a_get_that_finishes_later_completes_after_its_report_and_releases_the_buffer() {
    let cfg = NetConfig {
        get_later: Some(60),
        ..NetConfig::default()
    };
    for (len, seed) in [(5000usize, 1u8), (1 << 20, 2), (300_001, 3)] {
        let mut c = Cluster::new(2, cfg);
        let data = pattern(len, seed);
        let mut got = vec![0u8; len];
        let r = c.irecv(1, Some(0), Some(5), &mut got);
        let s = c.isend(0, 1, 5, &data, false);
        for _ in 0..30 {
            c.step();
        }
        assert_eq!(c.net.borrow().gets_started, 1, "{len} B: the get started");
        assert!(
            !c.engines[1].is_complete(r) && !c.engines[0].is_complete(s),
            "{len} B: completed before the get was reported"
        );
        let st = c.complete(&[(0, s), (1, r)]);
        assert_eq!(st[1].count, len);
        assert!(got == data, "{len} B differ");
        assert_eq!(
            c.net.borrow().exposed,
            0,
            "{len} B: every exposed buffer released"
        );
    }
}

#[test]
fn a_get_that_fails_later_turns_into_the_fragment_pipeline() {
    let cfg = NetConfig {
        get_later: Some(5),
        get_fails: true,
        ..NetConfig::default()
    };
    one_message(cfg, 300_000, false);
    let mut c = Cluster::new(2, cfg);
    let data = pattern(100_000, 9);
    let mut got = vec![0u8; 100_000];
    let r = c.irecv(1, Some(0), Some(1), &mut got);
    let s = c.isend(0, 1, 1, &data, false);
    c.complete(&[(0, s), (1, r)]);
    assert!(got == data);
    assert_eq!(c.net.borrow().gets_started, 1);
    assert_eq!(
        c.net.borrow().exposed,
        0,
        "released after the pipeline's ACK"
    );
}

#[test]
fn rendezvous_by_fragment_pipeline_without_get() {
    let cfg = NetConfig {
        get: false,
        ..NetConfig::default()
    };
    one_message(cfg, 300_000, false);
}

#[test]
fn synchronous_send_completes_only_once_matched() {
    for len in [8usize, 100_000] {
        let mut c = Cluster::new(2, NetConfig::default());
        let data = pattern(len, 1);
        let s = c.isend(0, 1, 3, &data, true);
        for _ in 0..200 {
            c.step();
            assert!(
                !c.engines[0].is_complete(s),
                "a synchronous send of {len} B completed before any receive was posted"
            );
        }
        let mut got = vec![0u8; len];
        let r = c.irecv(1, Some(0), Some(3), &mut got);
        c.complete(&[(0, s), (1, r)]);
        assert!(got == data);
    }
}

#[test]
fn standard_eager_send_completes_before_the_receive_is_posted() {
    let mut c = Cluster::new(2, NetConfig::default());
    let data = pattern(64, 2);
    let s = c.isend(0, 1, 0, &data, false);
    assert!(c.engines[0].try_complete(s).is_some());
    for _ in 0..10 {
        c.step();
    }
    let mut got = vec![0u8; 64];
    let r = c.irecv(1, None, None, &mut got);
    c.complete(&[(1, r)]);
    assert_eq!(got, data);
}

#[test]
fn counters_count_messages_bytes_and_unexpected_arrivals() {
    let mut c = Cluster::new(2, NetConfig::default());
    let count = |c: &Cluster, e: usize, name: &str| {
        c.engines[e]
            .counters()
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no counter {name}"))
    };
    // Sent before its receive is posted: unexpected at rank 1.
    let data = pattern(64, 3);
    let s = c.isend(0, 1, 0, &data, false);
    c.complete(&[(0, s)]);
    for _ in 0..10 {
        c.step();
    }
    let mut got = vec![0u8; 64];
    let r = c.irecv(1, None, None, &mut got);
    c.complete(&[(1, r)]);
    assert_eq!(count(&c, 0, "pml_messages_sent"), 1);
    assert_eq!(count(&c, 0, "pml_bytes_sent"), 64);
    assert_eq!(count(&c, 1, "pml_messages_received"), 1);
    assert_eq!(count(&c, 1, "pml_bytes_received"), 64);
    assert_eq!(count(&c, 1, "pml_unexpected_messages"), 1);
    // A rendezvous whose receive was posted first: expected, and counted by its length.
    let big = pattern(1 << 20, 4);
    let mut got = vec![0u8; 1 << 20];
    let r = c.irecv(1, Some(0), Some(1), &mut got);
    let s = c.isend(0, 1, 1, &big, false);
    c.complete(&[(0, s), (1, r)]);
    assert_eq!(count(&c, 0, "pml_messages_sent"), 2);
    assert_eq!(count(&c, 0, "pml_bytes_sent"), 64 + (1 << 20));
    assert_eq!(count(&c, 1, "pml_messages_received"), 2);
    assert_eq!(count(&c, 1, "pml_bytes_received"), 64 + (1 << 20));
    assert_eq!(count(&c, 1, "pml_unexpected_messages"), 1);
    assert_eq!(count(&c, 1, "pml_protocol_errors"), 0);
    assert_eq!(count(&c, 1, "pml_messages_sent"), 0);
}

#[test]
fn truncation_is_reported_for_eager_and_rendezvous() {
    for len in [200usize, 50_000] {
        let mut c = Cluster::new(2, NetConfig::default());
        let data = pattern(len, 3);
        let mut got = vec![0u8; 100];
        let r = c.irecv(1, Some(0), None, &mut got);
        let s = c.isend(0, 1, 1, &data, false);
        let st = c.complete(&[(0, s), (1, r)]);
        assert_eq!(st[1].truncated_from, Some(len), "{len} B into 100");
        assert_eq!(&got[..], &data[..100], "the part that fits arrives");
    }
}

#[test]
fn a_cancelled_receive_leaves_the_message_to_the_next() {
    let mut c = Cluster::new(2, NetConfig::default());
    let mut first = vec![0u8; 16];
    let mut second = vec![0u8; 16];
    let r1 = c.irecv(1, Some(0), Some(9), &mut first);
    assert!(c.engines[1].cancel(r1, CTX_WORLD));
    let st = c.complete(&[(1, r1)]);
    assert!(st[0].cancelled);
    let data = pattern(16, 4);
    let s = c.isend(0, 1, 9, &data, false);
    let r2 = c.irecv(1, Some(0), Some(9), &mut second);
    c.complete(&[(0, s), (1, r2)]);
    assert_eq!(second, data);
    assert_eq!(first, vec![0u8; 16], "the cancelled buffer was written");
}

#[test]
fn a_matched_receive_cannot_be_cancelled() {
    let mut c = Cluster::new(2, NetConfig::default());
    let data = pattern(32, 5);
    let mut got = vec![0u8; 32];
    let r = c.irecv(1, Some(0), Some(1), &mut got);
    let s = c.isend(0, 1, 1, &data, false);
    c.complete(&[(0, s)]);
    for _ in 0..5 {
        c.step();
    }
    assert!(!c.engines[1].cancel(r, CTX_WORLD));
    let st = c.complete(&[(1, r)]);
    assert!(!st[0].cancelled);
    assert_eq!(got, data);
}

#[test]
fn probe_reports_the_message_without_taking_it() {
    let mut c = Cluster::new(2, NetConfig::default());
    let data = pattern(70_000, 6);
    let s = c.isend(0, 1, 42, &data, false);
    let mut found = None;
    for _ in 0..1000 {
        c.step();
        found = c.engines[1].iprobe(CTX_WORLD, None, None).unwrap();
        if found.is_some() {
            break;
        }
    }
    let st = found.expect("probe never saw the message");
    assert_eq!((st.source, st.tag, st.count), (0, 42, 70_000));
    // Probing again sees the same message.
    let again = c.engines[1].iprobe(CTX_WORLD, Some(0), Some(42)).unwrap();
    assert_eq!(again.map(|s| s.count), Some(70_000));
    let mut got = vec![0u8; 70_000];
    let r = c.irecv(1, Some(0), Some(42), &mut got);
    c.complete(&[(0, s), (1, r)]);
    assert!(got == data);
}

#[test]
fn matched_probe_removes_the_message_from_matching() {
    let mut c = Cluster::new(2, NetConfig::default());
    let a = pattern(10, 1);
    let b = pattern(20, 2);
    let s1 = c.isend(0, 1, 7, &a, false);
    let s2 = c.isend(0, 1, 7, &b, false);
    let mut handle = None;
    for _ in 0..1000 {
        c.step();
        handle = c.engines[1].improbe(CTX_WORLD, Some(0), Some(7)).unwrap();
        if handle.is_some() {
            break;
        }
    }
    let (h, st) = handle.expect("improbe found nothing");
    assert_eq!(st.count, 10);
    // A plain receive now gets the second message, not the probed one.
    let mut second = vec![0u8; 20];
    let r2 = c.irecv(1, Some(0), Some(7), &mut second);
    let mut first = vec![0u8; 10];
    // SAFETY: `first` outlives the request, completed below.
    let ub = unsafe { UserBuf::for_recv(first.as_mut_ptr(), first.len()) };
    let r1 = c.engines[1].imrecv(h, ub).unwrap();
    c.complete(&[(0, s1), (0, s2), (1, r1), (1, r2)]);
    assert_eq!((first, second), (a, b));
    // SAFETY: never used: the handle is spent, so this fails before touching the buffer.
    let again = c.engines[1].imrecv(h, unsafe { UserBuf::for_recv(std::ptr::null_mut(), 0) });
    assert!(again.is_err(), "a message handle received twice");
}

#[test]
fn wildcard_receives_take_messages_from_every_source() {
    let mut c = Cluster::new(4, NetConfig::default());
    let datas: Vec<Vec<u8>> = (1..4).map(|r| pattern(100 * r, r as u8)).collect();
    let mut bufs = vec![vec![0u8; 400]; 3];
    let recvs: Vec<ReqId> = bufs
        .iter_mut()
        .map(|b| {
            // SAFETY: the buffers outlive the requests, completed below.
            let ub = unsafe { UserBuf::for_recv(b.as_mut_ptr(), b.len()) };
            c.engines[0].irecv(CTX_WORLD, None, None, ub).unwrap()
        })
        .collect();
    let sends: Vec<(usize, ReqId)> = (1..4)
        .map(|r| (r, c.isend(r, 0, r as i32 * 10, &datas[r - 1], false)))
        .collect();
    let mut all = sends.clone();
    all.extend(recvs.iter().map(|&r| (0, r)));
    let st = c.complete(&all);
    let mut seen: Vec<(i32, i32, usize)> =
        st[3..].iter().map(|s| (s.source, s.tag, s.count)).collect();
    seen.sort();
    assert_eq!(seen, vec![(1, 10, 100), (2, 20, 200), (3, 30, 300)]);
    for (s, b) in st[3..].iter().zip(&bufs) {
        assert_eq!(&b[..s.count], &datas[s.source as usize - 1][..]);
    }
}

/// Many messages of mixed sizes on one (source, tag) must match in send order whatever the
/// transport does to them.
fn ordered_stream(cfg: NetConfig, n: usize) {
    let mut c = Cluster::new(2, cfg);
    let sizes: Vec<usize> = (0..n)
        .map(|i| [0, 8, 3000, 5000, 20_000][i % 5] + i)
        .collect();
    let datas: Vec<Vec<u8>> = sizes
        .iter()
        .enumerate()
        .map(|(i, &l)| pattern(l, i as u8))
        .collect();
    let mut bufs: Vec<Vec<u8>> = sizes.iter().map(|&l| vec![0u8; l]).collect();
    let mut reqs = Vec::new();
    for (i, d) in datas.iter().enumerate() {
        reqs.push((0, c.isend(0, 1, 4, d, i % 7 == 3)));
    }
    for b in bufs.iter_mut() {
        reqs.push((1, c.irecv(1, Some(0), Some(4), b)));
    }
    let st = c.complete(&reqs);
    for i in 0..n {
        assert_eq!(
            st[n + i].count,
            sizes[i],
            "message {i} matched out of order"
        );
        assert!(bufs[i] == datas[i], "message {i} corrupted");
    }
    let net = c.net.borrow();
    if cfg.reorder {
        assert!(net.overtakes > 0, "the transport never reordered anything");
    }
    if cfg.push_back != 0 {
        assert!(net.refused > 0, "the transport never pushed back");
    }
}

#[test]
fn mpi_order_holds_over_a_reordering_transport() {
    let cfg = NetConfig {
        reorder: true,
        seed: 11,
        ..NetConfig::default()
    };
    ordered_stream(cfg, 200);
}

#[test]
fn mpi_order_holds_over_random_delays() {
    let cfg = NetConfig {
        reorder: true,
        delay: 20,
        seed: 5,
        ..NetConfig::default()
    };
    ordered_stream(cfg, 150);
}

#[test]
fn a_transport_that_pushes_back_loses_nothing() {
    let cfg = NetConfig {
        push_back: 3,
        ..NetConfig::default()
    };
    ordered_stream(cfg, 100);
}

#[test]
fn receives_posted_by_tag_in_reverse_find_their_messages() {
    let mut c = Cluster::new(
        2,
        NetConfig {
            reorder: true,
            ..NetConfig::default()
        },
    );
    let datas: Vec<Vec<u8>> = (0..10).map(|t| pattern(50 + t * 700, t as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..10).map(|_| vec![0u8; 8000]).collect();
    let mut reqs = Vec::new();
    for (t, b) in bufs.iter_mut().enumerate().rev() {
        reqs.push((1, c.irecv(1, Some(0), Some(t as i32), b)));
    }
    for (t, d) in datas.iter().enumerate() {
        reqs.push((0, c.isend(0, 1, t as i32, d, false)));
    }
    let st = c.complete(&reqs);
    for (k, t) in (0..10).rev().enumerate() {
        assert_eq!(st[k].tag, t as i32);
        assert_eq!(&bufs[t][..st[k].count], &datas[t][..]);
    }
}

#[test]
fn unexpected_messages_wait_for_their_receives_in_order() {
    let mut c = Cluster::new(2, NetConfig::default());
    let datas: Vec<Vec<u8>> = (0..50).map(|i| pattern(i * 97, i as u8)).collect();
    let sends: Vec<(usize, ReqId)> = datas
        .iter()
        .map(|d| (0, c.isend(0, 1, 2, d, false)))
        .collect();
    for _ in 0..50 {
        c.step();
    }
    let mut bufs: Vec<Vec<u8>> = (0..50).map(|_| vec![0u8; 5000]).collect();
    let mut reqs = sends;
    for b in bufs.iter_mut() {
        reqs.push((1, c.irecv(1, Some(0), Some(2), b)));
    }
    let st = c.complete(&reqs);
    for i in 0..50 {
        assert_eq!(st[50 + i].count, datas[i].len());
        assert_eq!(&bufs[i][..datas[i].len()], &datas[i][..]);
    }
}

#[test]
fn a_thousand_outstanding_pairs_complete() {
    let mut c = Cluster::new(
        2,
        NetConfig {
            reorder: true,
            ..NetConfig::default()
        },
    );
    let datas: Vec<Vec<u8>> = (0..1000).map(|i| pattern(i % 300, i as u8)).collect();
    let mut bufs: Vec<Vec<u8>> = (0..1000).map(|_| vec![0u8; 300]).collect();
    let mut reqs = Vec::new();
    for (i, b) in bufs.iter_mut().enumerate() {
        reqs.push((1, c.irecv(1, Some(0), Some(i as i32), b)));
    }
    for (i, d) in datas.iter().enumerate() {
        reqs.push((0, c.isend(0, 1, i as i32, d, false)));
    }
    let st = c.complete(&reqs);
    for i in 0..1000 {
        assert_eq!(&bufs[i][..st[i].count], &datas[i][..]);
    }
}

#[test]
fn a_rank_sends_to_itself_through_the_self_transport() {
    let mut c = Cluster::new(2, NetConfig::default());
    for len in [0usize, 10, 100_000] {
        let data = pattern(len, 9);
        let mut got = vec![0u8; len];
        let r = c.irecv(0, Some(0), Some(1), &mut got);
        let s = c.isend(0, 0, 1, &data, len == 10);
        c.complete(&[(0, s), (0, r)]);
        assert!(got == data);
    }
    assert_eq!(c.net.borrow().sends, 0, "a self send went over the network");
}

#[test]
fn messages_for_a_communicator_not_yet_created_wait_for_it() {
    let mut c = Cluster::new(2, NetConfig::default());
    let ctx = 40u16;
    c.engines[0].add_context(ctx, vec![0, 1]);
    let data = pattern(33, 3);
    // SAFETY: `data` outlives the request, completed below.
    let ub = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
    let s = c.engines[0].isend(ctx, 1, 0, ub, false).unwrap();
    for _ in 0..20 {
        c.step();
    }
    c.engines[1].add_context(ctx, vec![0, 1]);
    let mut got = vec![0u8; 33];
    // SAFETY: as above.
    let ub = unsafe { UserBuf::for_recv(got.as_mut_ptr(), got.len()) };
    let r = c.engines[1].irecv(ctx, Some(0), Some(0), ub).unwrap();
    c.complete(&[(0, s), (1, r)]);
    assert_eq!(got, data);
}

#[test]
fn a_vanished_peer_fails_sends_to_it_and_spares_the_others() {
    let mut c = Cluster::new(3, NetConfig::default());
    c.net.borrow_mut().gone[2] = true;
    let data = pattern(64, 1);
    // SAFETY: `data` outlives every request below.
    let ub = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
    let err = c.engines[0].isend(CTX_WORLD, 2, 0, ub, false).unwrap_err();
    assert!(err.to_string().contains("rank 2 is gone"), "{err}");
    let mut got = vec![0u8; 64];
    let r = c.irecv(1, Some(0), Some(0), &mut got);
    let s = c.isend(0, 1, 0, &data, false);
    c.complete(&[(0, s), (1, r)]);
    assert_eq!(got, data);
}

#[test]
fn a_peer_no_transport_reaches_is_named_in_the_error() {
    let mut c = Cluster::new(2, NetConfig::default());
    // An engine whose route to rank 1 is missing, with the set's reason for it.
    let p = params();
    let mut lonely = Engine::with_transports(
        &p,
        EngineSetup {
            rank: 0,
            size: 2,
            nodes: vec!["h0".into(), "h3".into()],
            job_id: "pair-test".into(),
            transports: Attached {
                btls: vec![Box::new(SelfBtl::new(0))],
                names: vec!["self"],
                route: vec![0, u8::MAX],
                bulk_route: vec![0, u8::MAX],
                bulk_from: vec![u32::MAX; 2],
                unreachable: vec![
                    None,
                    Some("shm: other node; usnic: excluded by the btl parameter".into()),
                ],
            },
            network_flush: false,
            registry: &[],
        },
    );
    let data = [1u8];
    // SAFETY: `data` outlives the call, which fails before any request exists.
    let ub = unsafe { UserBuf::for_send(data.as_ptr(), 1) };
    let e = lonely
        .isend(CTX_WORLD, 1, 0, ub, false)
        .unwrap_err()
        .to_string();
    assert!(e.contains("no transport reaches rank 1 on h3"), "{e}");
    assert!(
        e.contains("shm: other node; usnic: excluded by the btl parameter"),
        "{e}"
    );
    c.step();
}

#[test]
fn garbage_from_a_peer_is_counted_and_never_corrupts() {
    // Rank 2 sends the garbage; rank 0's traffic afterwards must be untouched by it.
    let mut c = Cluster::new(3, NetConfig::default());
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..5000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 64) as usize;
        let bytes: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8).collect();
        c.net.borrow_mut().queues[1].push_back(InFlight {
            from: 2,
            am: (x >> 60) as u8 % 2,
            data: bytes,
            due: 0,
            id: 0,
        });
    }
    c.step();
    assert!(c.engines[1].protocol_errors() > 0, "no garbage was noticed");
    // The engine still works afterwards.
    let data = pattern(5000, 8);
    let mut got = vec![0u8; 5000];
    let r = c.irecv(1, Some(0), Some(77), &mut got);
    let s = c.isend(0, 1, 77, &data, false);
    c.complete(&[(0, s), (1, r)]);
    assert!(got == data);
}
