//! Path failure in virtual time: the connection's [`Timer::PathFailure`] reports
//! [`Event::PathFailed`] after the configured silence (`fail_after`, or `peer_timeout` on a
//! sole path), never before it, and never while acknowledgements keep arriving.

use std::time::{Duration, Instant};

use crate::config::Config;
use crate::sim::{Limits, LinkConfig, Sim, Workload};
use crate::{Event, FailureLimit, SendError, Timer};

/// Slack between a deadline and the step that runs it (the sim's steps are microseconds apart
/// while data is outstanding; timers are never late by more than one retransmission round).
const SLACK: Duration = Duration::from_millis(1);

/// A sim whose A side has sent and had acknowledged 10 messages, then idles for 10 s and has
/// 5 more to send when both directions are cut. Returns it with the instant of the cut.
fn silenced(cfg: Config, sole_path: bool) -> (Sim, Instant) {
    let mut s = Sim::new(
        cfg.clone(),
        cfg,
        LinkConfig::clean(),
        LinkConfig::clean(),
        Workload::fixed(10, 5000, 71),
        Workload::none(),
        72,
    )
    .unwrap();
    s.a.conn.set_sole_path(sole_path);
    s.drive(Limits::default()).expect("clean transfer");
    // A long idle period does not count against the peer.
    s.now += Duration::from_secs(10);
    s.ab.cut = true;
    s.ba.cut = true;
    s.a.workload.count = 15;
    let cut = s.now;
    s.run_until(Limits::default(), |s| s.a.conn.in_flight() > 0)
        .unwrap();
    assert_eq!(
        s.a.conn.timer(Timer::PathFailure),
        Some(cut + s.a.conn.failure_limit().duration()),
        "the failure timer runs from when data became outstanding"
    );
    (s, cut)
}

/// Runs until virtual time reaches `until` (the step that gets there may overshoot it by up to
/// one retransmission round) or A fails; asserts A reported nothing before `until`.
fn run_silent_until(s: &mut Sim, until: Instant) {
    s.run_until(Limits::default(), |s| {
        s.now >= until || s.a.conn.is_failed()
    })
    .unwrap();
    assert!(
        s.a.events.iter().all(|(at, _)| *at >= until),
        "reported before {until:?}: {:?}",
        s.a.events
    );
}

/// Runs until A fails; returns its one event and when it was reported.
fn run_until_failed(s: &mut Sim) -> (Instant, Event) {
    s.run_until(Limits::default(), |s| s.a.conn.is_failed())
        .unwrap();
    assert_eq!(s.a.events.len(), 1, "{:?}", s.a.events);
    let (at, event) = s.a.events[0];
    (at, event)
}

#[test]
fn path_failed_is_reported_at_fail_after_and_not_before() {
    let cfg = Config::default();
    let (mut s, cut) = silenced(cfg.clone(), false);
    let deadline = cut + cfg.fail_after;
    run_silent_until(&mut s, deadline);
    let (at, event) = run_until_failed(&mut s);
    assert!(at >= deadline && at <= deadline + SLACK, "{:?}", at - cut);
    let Event::PathFailed {
        limit,
        unacknowledged,
    } = event;
    assert_eq!(limit, FailureLimit::FailAfter(cfg.fail_after));
    // 5 messages of 5000 bytes, 4 segments each.
    assert_eq!(unacknowledged, 20);
    assert_eq!(unacknowledged, s.a.conn.in_flight());
    assert_eq!(
        limit.to_string(),
        "no acknowledgement for 3000 ms (usnic_fail_after_ms)"
    );
    // Failed: no new data, no more failure timer, and the event is not repeated.
    assert_eq!(s.a.conn.send(0, &[b"late"]), Err(SendError::Failed));
    assert_eq!(s.a.conn.timer(Timer::PathFailure), None);
    assert_eq!(s.a.conn.timer(Timer::Retransmit), None);
    s.a.conn.handle_timeout(s.now + Duration::from_secs(60));
    assert_eq!(s.a.conn.poll_event(), None);
    assert_eq!(s.a.conn.take_unacknowledged().len(), 5);
}

#[test]
fn a_sole_path_waits_for_peer_timeout() {
    let cfg = Config::default();
    assert!(cfg.peer_timeout > cfg.fail_after + Duration::from_secs(1));
    let (mut s, cut) = silenced(cfg.clone(), true);
    // Well past fail_after: still resending, nothing reported.
    run_silent_until(&mut s, cut + cfg.fail_after + Duration::from_secs(1));
    assert!(!s.a.conn.is_failed());
    assert!(s.a.conn.stats().rto_events > 0, "{}", s.a.conn.stats());
    let deadline = cut + cfg.peer_timeout;
    run_silent_until(&mut s, deadline);
    let (at, event) = run_until_failed(&mut s);
    assert!(at >= deadline && at <= deadline + SLACK, "{:?}", at - cut);
    assert_eq!(
        event,
        Event::PathFailed {
            limit: FailureLimit::PeerTimeout(cfg.peer_timeout),
            unacknowledged: 20,
        }
    );
    assert_eq!(
        FailureLimit::PeerTimeout(cfg.peer_timeout).to_string(),
        "no acknowledgement for 10000 ms (usnic_peer_timeout_ms)"
    );
}

#[test]
fn a_path_that_stops_being_the_sole_one_fails_at_once_when_past_fail_after() {
    let cfg = Config::default();
    let (mut s, cut) = silenced(cfg.clone(), true);
    let later = cut + cfg.fail_after + Duration::from_secs(2);
    run_silent_until(&mut s, later);
    assert!(!s.a.conn.is_failed());
    // Another path to the peer came up (or the driver's view changed): the shorter limit
    // applies, and it has passed.
    s.a.conn.set_sole_path(false);
    assert!(s.a.conn.poll_timeout().is_some_and(|t| t <= s.now));
    let now = s.now;
    let (at, event) = run_until_failed(&mut s);
    assert!(at - now <= SLACK, "{:?}", at - now);
    assert_eq!(
        event,
        Event::PathFailed {
            limit: FailureLimit::FailAfter(cfg.fail_after),
            unacknowledged: 20,
        }
    );
}

#[test]
fn peer_timeout_below_fail_after_never_shortens_the_wait() {
    let cfg = Config {
        peer_timeout: Duration::from_millis(500),
        ..Config::default()
    };
    let (mut s, cut) = silenced(cfg.clone(), true);
    assert_eq!(
        s.a.conn.failure_limit(),
        FailureLimit::FailAfter(cfg.fail_after)
    );
    run_silent_until(&mut s, cut + cfg.fail_after);
    let (at, _) = run_until_failed(&mut s);
    assert!(at >= cut + cfg.fail_after, "{:?}", at - cut);
}

#[test]
fn no_failure_while_acks_keep_arriving() {
    // A slow, lossy link: the transfer takes several fail_after periods, with data outstanding
    // all along and many retransmissions, but acknowledgements keep coming.
    let cfg = Config::default();
    let slow = LinkConfig {
        bytes_per_sec: Some(1_000_000),
        ..LinkConfig::clean()
    };
    let mut s = Sim::new(
        cfg.clone(),
        cfg.clone(),
        slow.clone().with_loss(0.05),
        slow.with_loss(0.3),
        Workload::fixed(2000, 6000, 73),
        Workload::fixed(50, 100, 74),
        75,
    )
    .unwrap();
    let report = s
        .drive(Limits::default())
        .expect("completes without failing");
    assert!(
        report.elapsed > cfg.fail_after * 3,
        "the transfer must outlast fail_after several times: {:?}",
        report.elapsed
    );
    assert!(report.stats.0.resent_fast + report.stats.0.resent_timeout > 0);
    assert!(s.a.events.is_empty() && s.b.events.is_empty());
    assert!(!s.a.conn.is_failed() && !s.b.conn.is_failed());
}
