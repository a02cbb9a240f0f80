//! The conformance suite every transport must pass. A transport crate calls [`run`] from its
//! tests with a function that builds a fresh set of endpoints (endpoint `i` is rank `i`), and
//! [`run_component`] runs it against a registered component (the facade does so for every
//! component of the build); tests of capabilities a transport lacks are skipped.
//!
//! Owns the checks of the contract in `crate::btl`; it must never know a concrete transport.

use crate::btl::{Btl, LocalRegion, SendError};

/// A delivered message as the suite records it: (receiver, sender, am tag, bytes).
type Got = (u32, u32, u8, Vec<u8>);

/// Drives `progress` on every endpoint until `until` holds or 100,000 rounds pass.
fn drive(eps: &mut [Box<dyn Btl>], got: &mut Vec<Got>, until: &dyn Fn(&[Got]) -> bool) {
    for _ in 0..100_000 {
        if until(got) {
            return;
        }
        for (me, ep) in eps.iter_mut().enumerate() {
            ep.progress(&mut |m| got.push((me as u32, m.peer, m.am, m.data.to_vec())));
        }
    }
    panic!(
        "conformance: messages not delivered after 100000 progress rounds (got {})",
        got.len()
    );
}

fn pattern(seed: usize, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (i.wrapping_mul(131) ^ seed) as u8)
        .collect()
}

/// Runs the suite against a registered component: each round opens `ranks` modules in
/// this process as processes of one node (the component's own `open`, cards exchanged
/// through `card`/`add_peers` as the transport set does). Returns `false`, running
/// nothing, when the component declines here (no device), with the reason printed.
pub fn run_component(
    component: &dyn crate::component::Component,
    params: &crate::params::Params,
    ranks: u32,
) -> bool {
    use crate::component::{OpenContext, OpenError};
    use crate::set::PeerCard;
    use std::sync::atomic::{AtomicU32, Ordering};
    static ROUND: AtomicU32 = AtomicU32::new(0);
    // A loopback reaches only its own process: one module is the whole suite for it.
    let ranks = match component.reach() {
        crate::component::Reach::Process => 1,
        _ => ranks,
    };
    let nodes: Vec<String> = (0..ranks).map(|_| "conformance-node".to_string()).collect();
    let open_all = || -> Result<Vec<Box<dyn crate::component::Module>>, OpenError> {
        let round = ROUND.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("kestrel.conformance-{}-{round}.", std::process::id());
        let set_id = prefix.clone();
        (0..ranks)
            .map(|me| {
                let cx = OpenContext {
                    me,
                    nodes: &nodes,
                    set_id: &set_id,
                    file_prefix: &prefix,
                };
                component.open(params, &cx)
            })
            .collect()
    };
    match open_all() {
        Err(OpenError::Declined(why)) => {
            eprintln!(
                "conformance: {} declined here, skipped: {why}",
                component.name()
            );
            return false;
        }
        Err(OpenError::Failed(why)) => {
            panic!("conformance: {} failed to open: {why}", component.name())
        }
        Ok(_) => {}
    }
    let make = || -> Vec<Box<dyn Btl>> {
        let mut mods = open_all().expect("opened once, so opens again");
        let cards: Vec<Vec<u8>> = mods.iter().map(|m| m.card()).collect();
        for (me, m) in mods.iter_mut().enumerate() {
            let peer_cards: Vec<PeerCard<'_>> = cards
                .iter()
                .enumerate()
                .map(|(p, c)| {
                    if p == me {
                        PeerCard::Skip
                    } else {
                        PeerCard::Card(c)
                    }
                })
                .collect();
            for (p, r) in m.add_peers(0x5eed, &peer_cards).into_iter().enumerate() {
                if let Err(why) = r {
                    assert!(
                        p == me,
                        "conformance: {} module {me} cannot reach {p}: {why}",
                        component.name()
                    );
                }
            }
        }
        mods.into_iter().map(|m| m as Box<dyn Btl>).collect()
    };
    run(component.name(), &make);
    counters_are_the_declared_ones(component, &make);
    true
}

/// A module reports only counters its component declares, each once, under names starting
/// with the component's name, and never less after traffic than before.
fn counters_are_the_declared_ones(
    component: &dyn crate::component::Component,
    make: &dyn Fn() -> Vec<Box<dyn Btl>>,
) {
    let name = component.name();
    let declared: Vec<&str> = component.counters().iter().map(|c| c.name).collect();
    for d in &declared {
        assert!(
            d.starts_with(&format!("{name}_")),
            "conformance: {name} declares counter {d}, which does not start with '{name}_'"
        );
    }
    let mut eps = make();
    let before = eps[0].counters();
    for (a, b) in pairs(&eps) {
        let _ = eps[a as usize].send(b, 1, b"hdr", b"counted");
    }
    for _ in 0..100 {
        for e in eps.iter_mut() {
            e.progress(&mut |_| {});
        }
    }
    let after = eps[0].counters();
    for (n, v) in &after {
        assert!(
            declared.contains(n),
            "conformance: {name} reports counter {n}, which Component::counters does not declare"
        );
        assert_eq!(
            after.iter().filter(|(m, _)| m == n).count(),
            1,
            "conformance: {name} reports counter {n} twice"
        );
        if let Some((_, old)) = before.iter().find(|(m, _)| m == n) {
            assert!(v >= old, "conformance: {name}'s counter {n} went down");
        }
    }
}

/// Runs every applicable check. `make` builds endpoints; `ranks` is how many it builds.
pub fn run(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
    delivers_whole_messages_of_every_size(name, make);
    back_pressure_is_would_block_and_recovers(name, make);
    unreachable_and_oversized_are_errors(name, make);
    get_copies_from_exposed_memory(name, make);
}

fn pairs(eps: &[Box<dyn Btl>]) -> Vec<(u32, u32)> {
    let n = eps.len() as u32;
    let mut v = Vec::new();
    for a in 0..n {
        for b in 0..n {
            if eps[a as usize].reaches(b) {
                v.push((a, b));
            }
        }
    }
    v
}

/// Every size from 0 to the eager limit's neighbourhood, between every reachable pair.
pub fn delivers_whole_messages_of_every_size(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
    let mut eps = make();
    let max = eps[0].limits().max_send.min(256 * 1024);
    let eager = eps[0].limits().eager_limit.min(max);
    let mut sizes = vec![0usize, 1, 7, 8, 63, 64, 65, 1000, 4096];
    for s in [
        eager.saturating_sub(9),
        eager.saturating_sub(8),
        eager,
        max - 8,
    ] {
        sizes.push(s);
    }
    sizes.retain(|&s| s + 8 <= max);
    for (a, b) in pairs(&eps) {
        let mut want = Vec::new();
        for (i, &len) in sizes.iter().enumerate() {
            let header = (i as u64).to_le_bytes();
            let payload = pattern(i + a as usize, len);
            loop {
                match eps[a as usize].send(b, 3, &header, &payload) {
                    Ok(()) => break,
                    Err(SendError::WouldBlock) => {
                        let mut sink = Vec::new();
                        drive(&mut eps, &mut sink, &|g: &[_]| !g.is_empty());
                        want.retain(|w: &Vec<u8>| !sink.iter().any(|(_, _, _, d)| d == w));
                    }
                    Err(e) => panic!("{name}: send {len} bytes {a}->{b}: {e}"),
                }
            }
            let mut whole = header.to_vec();
            whole.extend_from_slice(&payload);
            want.push(whole);
        }
        let mut got = Vec::new();
        let n = want.len();
        drive(&mut eps, &mut got, &|g: &[_]| g.len() >= n);
        for (to, from, am, data) in &got {
            assert_eq!((*to, *from, *am), (b, a, 3), "{name}: wrong envelope");
            assert!(
                want.contains(data),
                "{name}: corrupted message of {} bytes {a}->{b}",
                data.len()
            );
        }
        let mut seen: Vec<&Vec<u8>> = got.iter().map(|g| &g.3).collect();
        seen.sort();
        seen.dedup();
        assert_eq!(seen.len(), n, "{name}: duplicates or losses {a}->{b}");
    }
}

/// Flooding one peer without progress ends in WouldBlock (or the transport absorbs it all);
/// after progress, everything sent arrives and sending works again.
pub fn back_pressure_is_would_block_and_recovers(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
    let mut eps = make();
    let Some(&(a, b)) = pairs(&eps)
        .iter()
        .find(|(a, b)| a != b)
        .or(pairs(&eps).first())
    else {
        return;
    };
    let len = eps[a as usize].limits().eager_limit.min(4096) - 8;
    let mut sent = 0usize;
    let mut blocked = false;
    for i in 0..20_000u64 {
        match eps[a as usize].send(b, 1, &i.to_le_bytes(), &pattern(i as usize, len)) {
            Ok(()) => sent += 1,
            Err(SendError::WouldBlock) => {
                blocked = true;
                break;
            }
            Err(e) => panic!("{name}: {e}"),
        }
    }
    let mut got = Vec::new();
    drive(&mut eps, &mut got, &|g: &[_]| g.len() >= sent);
    assert_eq!(got.len(), sent, "{name}: lost messages under back-pressure");
    if blocked {
        // Progress (on every endpoint: resources may come back to the sender through its
        // own progress) must make room again within a bounded number of rounds.
        let mut ok = false;
        for _ in 0..1000 {
            match eps[a as usize].send(b, 1, &[0; 8], &[1, 2, 3]) {
                Ok(()) => {
                    ok = true;
                    break;
                }
                Err(SendError::WouldBlock) => poll_all(&mut eps),
                Err(e) => panic!("{name}: send after recovery: {e}"),
            }
        }
        assert!(ok, "{name}: still blocked after 1000 progress rounds");
    }
}

/// Sends to an unreachable rank or above max_send fail with the matching error.
pub fn unreachable_and_oversized_are_errors(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
    let mut eps = make();
    let far = 1_000_000;
    assert!(!eps[0].reaches(far));
    assert_eq!(
        eps[0].send(far, 1, &[], &[]),
        Err(SendError::Unreachable { peer: far }),
        "{name}"
    );
    let max = eps[0].limits().max_send;
    if max < 64 << 20 {
        let big = vec![0u8; max + 1];
        let to = pairs(&eps)[0].1;
        assert!(
            matches!(
                eps[0].send(to, 1, &[], &big),
                Err(SendError::TooLarge { .. })
            ),
            "{name}"
        );
    }
}

/// One round of progress on every endpoint, deliveries dropped.
fn poll_all(eps: &mut [Box<dyn Btl>]) {
    for ep in eps.iter_mut() {
        ep.progress(&mut |_| {});
    }
}

/// Single copy: when the transport offers get, bytes read match what was exposed, whether
/// the get finishes inside the call or later (then both ends are polled meanwhile, as the
/// exposing side must be for a network read); the exposer releases the region after.
pub fn get_copies_from_exposed_memory(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
    let mut eps = make();
    if !eps[0].limits().get {
        return;
    }
    let Some(&(a, b)) = pairs(&eps).iter().find(|(a, b)| a != b) else {
        return;
    };
    if !eps[a as usize].can_get(b) {
        return;
    }
    let source = pattern(99, 3 << 20);
    let region = eps[b as usize]
        .expose(&source)
        .unwrap_or_else(|| panic!("{name}: expose offered nothing"));
    let mut dest = vec![0u8; 1 << 20];
    if eps[a as usize].gets_finish_later() {
        let local = LocalRegion {
            addr: dest.as_mut_ptr() as u64,
            len: dest.len() as u64,
        };
        // WouldBlock (connecting, or reads in flight) means: progress, then try again.
        let mut started = false;
        for _ in 0..1_000_000 {
            match eps[a as usize].start_get(b, region, 1 << 20, local, 7) {
                Ok(()) => {
                    started = true;
                    break;
                }
                Err(SendError::WouldBlock) => poll_all(&mut eps),
                Err(e) => panic!("{name}: start_get: {e}"),
            }
        }
        assert!(started, "{name}: start_get refused for 1,000,000 rounds");
        let mut outcome = None;
        for _ in 0..1_000_000 {
            poll_all(&mut eps);
            eps[a as usize].take_finished_gets(&mut |ticket, r| outcome = Some((ticket, r)));
            if outcome.is_some() {
                break;
            }
        }
        match outcome {
            Some((7, Ok(()))) => {}
            other => panic!("{name}: the get finished as {other:?}"),
        }
    } else {
        eps[a as usize]
            .get(b, region, 1 << 20, &mut dest)
            .unwrap_or_else(|e| panic!("{name}: get: {e}"));
    }
    eps[b as usize].release(&source);
    assert!(
        dest == source[1 << 20..2 << 20],
        "{name}: get returned wrong bytes"
    );
}
