//! Congestion control of one connection: how many segments may be in the network at once.
//!
//! This module owns the congestion window (`cwnd`, in segments), the slow-start threshold, the
//! loss episodes, the estimates they rest on (delivery rate, smallest round trip, standing
//! queue) and the undo of a timeout found spurious. It must never look at segments, buffers
//! or the clock: the connection hands it counts, transmission numbers and `now`.
//!
//! The algorithm is TCP NewReno (RFC 5681 / 6582 / 6675) counted in segments, with two changes
//! for paths whose losses are mostly not congestion (a lossy link, a firewall dropping 5 %):
//!
//! * slow start from `initial_window`: `cwnd` grows by every segment newly acknowledged
//!   (cumulatively or selectively), doubling per round trip, up to `ssthresh`; then congestion
//!   avoidance: one segment more per window acknowledged. Growth only while the window is
//!   used (RFC 7661 spirit): an application-limited sender (a ping-pong) does not inflate a
//!   window that a later burst would fire at once;
//! * a loss found without the timer (selective/order rule, duplicate ACKs) opens a loss
//!   episode, at most one per round trip: a later loss only opens a new one if the lost
//!   transmission left after the previous episode began (so a lost retransmission counts
//!   again). The episode halves `cwnd` (fast recovery, no growth until the cumulative ACK passes
//!   what was outstanding), **if a standing queue is seen**: the smallest round trip of the
//!   current round exceeds the smallest ever by enough for `queue_threshold` of our segments to
//!   be waiting in a buffer (Vegas's estimate `cwnd * (rtt - min_rtt) / rtt`, used as TCP Veno
//!   does to tell congestion from random loss). A receive buffer overflows only when full, so
//!   its losses always come with that queue; a random or reordering-induced loss on an empty
//!   queue leaves the window alone, where Reno would shrink it to about `sqrt(1.5 / loss)`
//!   segments;
//! * a reduction never goes below the measured bandwidth-delay product (Westwood+'s idea): the
//!   largest delivery rate of the last [`BW_ROUNDS`] round trips times the smallest round trip
//!   of the last [`MIN_RTT_WINDOW`], so that a small buffer is not left empty;
//! * a retransmission timeout sets `cwnd` to `loss_window` with a queue (and `ssthresh` to the
//!   reduced window), to `initial_window` without one (and `ssthresh` to the previous window),
//!   then slow start; a repeated timeout of the same episode keeps `ssthresh` and sets `cwnd`
//!   to `loss_window`. The state before the timeout is kept so that
//!   [`Congestion::undo_timeout`] can restore it when the caller finds the timeout spurious (a
//!   stalled process, not a lossy network).
//!
//! The caller keeps `pipe` (segments sent and neither acknowledged, reported received nor
//! declared lost) and sends, new data or retransmission, only while [`Congestion::can_send`].

use std::time::{Duration, Instant};

use super::config::{CcAlgorithm, Config};
use super::wire::seq_diff;

/// Smallest window after a reduction (RFC 5681: two segments keep the ACK clock going).
const MIN_CWND: u32 = 2;
/// Round trips over which the largest delivery rate is kept (BBR's bandwidth filter length):
/// long enough to bridge the rounds a loss recovery delivers little in.
pub const BW_ROUNDS: usize = 10;
/// How long the smallest round trip is trusted before a larger sample may replace it (BBR's
/// value), so that a path that became slower is eventually seen as such.
pub const MIN_RTT_WINDOW: Duration = Duration::from_secs(10);

/// What a loss did to the window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LossResponse {
    /// Part of the episode already open (or congestion control is off): nothing changed.
    SameEpisode,
    /// New episode without a standing queue: the window was kept.
    NoQueue,
    /// New episode with a queue: the window was reduced.
    Reduced,
}

/// What a timeout overwrote, restored if the timeout turns out spurious.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Snapshot {
    cwnd: u32,
    ssthresh: u32,
    episode_from: u64,
    recovery: Option<Recovery>,
}

/// A reduction in progress: until the cumulative ACK reaches `until` (the first sequence
/// number sent after the reduction).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Recovery {
    until: u16,
    /// Fast recovery (no growth) rather than slow start after a timeout.
    fast: bool,
}

/// The congestion state of one connection. See the module doc.
#[derive(Debug, Clone)]
pub(super) struct Congestion {
    enabled: bool,
    cwnd: u32,
    ssthresh: u32,
    /// Segments acknowledged towards the next increment in congestion avoidance.
    ca_acked: u32,
    loss_window: u32,
    initial_window: u32,
    queue_threshold: u32,
    max: u32,
    /// Transmissions numbered from here on left after the last loss episode began: their loss
    /// opens a new one.
    episode_from: u64,
    recovery: Option<Recovery>,
    /// Transmissions allowed beyond the window: the first retransmission of a loss episode
    /// goes out at once, whatever the pipe (RFC 6675, step 4.3).
    extra: u32,
    /// Largest `pipe` of this round trip and of the previous one (is the window used?).
    flight_high: u32,
    flight_high_prev: u32,
    /// The round trip ends when a transmission numbered this or later is delivered.
    round_end: u64,
    /// Segments newly acknowledged in this round trip, and when it began.
    round_delivered: u32,
    round_start: Option<Instant>,
    /// Smallest round-trip sample of this round and of the previous one.
    rtt_round: Option<Duration>,
    rtt_prev_round: Option<Duration>,
    /// Segments delivered by each of the last `BW_ROUNDS` rounds, with when it began and
    /// ended (the arithmetic is left to the rare loss that needs the rate: a round ends on
    /// every ACK of a ping-pong).
    bw_samples: [Option<(u32, Instant, Instant)>; BW_ROUNDS],
    bw_next: usize,
    /// Smallest round-trip sample, and until when it is trusted.
    min_rtt: Option<(Duration, Instant)>,
    undo: Option<Snapshot>,
}

impl Congestion {
    pub(super) fn new(cfg: &Config) -> Congestion {
        let max = u32::from(cfg.window);
        let enabled = cfg.congestion_control == CcAlgorithm::Reno;
        Congestion {
            enabled,
            cwnd: if enabled {
                u32::from(cfg.initial_window).clamp(1, max)
            } else {
                max
            },
            ssthresh: max,
            ca_acked: 0,
            loss_window: u32::from(cfg.loss_window).clamp(1, max),
            initial_window: u32::from(cfg.initial_window).clamp(1, max),
            queue_threshold: u32::from(cfg.queue_threshold),
            max,
            episode_from: 0,
            recovery: None,
            extra: 0,
            flight_high: 0,
            flight_high_prev: 0,
            round_end: 0,
            round_delivered: 0,
            round_start: None,
            rtt_round: None,
            rtt_prev_round: None,
            bw_samples: [None; BW_ROUNDS],
            bw_next: 0,
            min_rtt: None,
            undo: None,
        }
    }

    /// Segments allowed in the network.
    pub(super) fn cwnd(&self) -> u32 {
        self.cwnd
    }

    /// The slow-start threshold.
    pub(super) fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    /// Whether one more segment may be sent with `pipe` segments in the network.
    #[inline]
    pub(super) fn can_send(&self, pipe: u32) -> bool {
        pipe < self.cwnd || self.extra > 0
    }

    /// A segment was just transmitted; `pipe` includes it.
    #[inline]
    pub(super) fn on_transmit(&mut self, pipe: u32) {
        if pipe > self.flight_high {
            self.flight_high = pipe;
        }
        if pipe > self.cwnd {
            self.extra = self.extra.saturating_sub(1);
        }
    }

    /// The bandwidth-delay product measured so far, in segments (0 before any measurement).
    pub(super) fn bdp(&self) -> u32 {
        let Some((rtt, _)) = self.min_rtt else {
            return 0;
        };
        let rtt = rtt.as_nanos();
        let segments = self
            .bw_samples
            .iter()
            .flatten()
            .filter_map(|&(delivered, start, end)| {
                let ns = end.saturating_duration_since(start).as_nanos();
                (u128::from(delivered) * rtt).checked_div(ns)
            })
            .max()
            .unwrap_or(0);
        segments.min(u128::from(self.max)) as u32
    }

    /// Our segments estimated to wait in a queue (`None` before the round trip is known).
    pub(super) fn queued(&self) -> Option<u32> {
        let (base, _) = self.min_rtt?;
        let rtt = self.rtt_round.or(self.rtt_prev_round)?;
        if rtt <= base || rtt.is_zero() {
            return Some(0);
        }
        let q = u128::from(self.cwnd) * (rtt - base).as_nanos() / rtt.as_nanos();
        Some(q.min(u128::from(u32::MAX)) as u32)
    }

    /// Whether a loss now is congestion: a standing queue is seen, or nothing is known yet.
    fn congested(&self) -> bool {
        self.queued().is_none_or(|q| q >= self.queue_threshold)
    }

    /// A round-trip sample (of a segment sent once) taken at `now`.
    pub(super) fn on_rtt_sample(&mut self, rtt: Duration, now: Instant) {
        if self
            .min_rtt
            .is_none_or(|(min, trusted_until)| rtt < min || now > trusted_until)
        {
            self.min_rtt = Some((rtt, now.checked_add(MIN_RTT_WINDOW).unwrap_or(now)));
        }
        if self.rtt_round.is_none_or(|r| rtt < r) {
            self.rtt_round = Some(rtt);
        }
    }

    /// An ACK arrived at `now`. `newly` segments were acknowledged for the first time;
    /// `delivered_order` is the newest transmission known delivered, `next_order` the number
    /// of the next one; `snd_una` the oldest unacknowledged sequence number after the ACK.
    #[inline]
    pub(super) fn on_ack(
        &mut self,
        newly: u32,
        delivered_order: u64,
        next_order: u64,
        snd_una: u16,
        now: Instant,
    ) {
        self.round_delivered = self.round_delivered.saturating_add(newly);
        if delivered_order >= self.round_end {
            self.end_round(next_order, now);
        }
        if let Some(r) = self.recovery {
            if seq_diff(snd_una, r.until) >= 0 {
                self.recovery = None;
            }
        }
        if !self.enabled || newly == 0 || self.recovery.is_some_and(|r| r.fast) {
            return;
        }
        let used = self.flight_high.max(self.flight_high_prev);
        if self.cwnd < self.ssthresh {
            // Slow start may double the window only if the window was at least half used.
            if used.saturating_mul(2) < self.cwnd {
                return;
            }
            self.cwnd = (self.cwnd + newly).min(self.ssthresh).min(self.max);
        } else {
            if used < self.cwnd {
                return;
            }
            self.ca_acked += newly;
            if self.ca_acked >= self.cwnd {
                self.ca_acked -= self.cwnd;
                self.cwnd = (self.cwnd + 1).min(self.max);
            }
        }
    }

    /// A round trip ended: roll the per-round estimates.
    fn end_round(&mut self, next_order: u64, now: Instant) {
        self.flight_high_prev = self.flight_high;
        self.flight_high = 0;
        self.round_end = next_order;
        self.rtt_prev_round = self.rtt_round.take().or(self.rtt_prev_round);
        // A round lasts at least one round trip (a transmission sent after it began was
        // delivered), so a burst of ACKs processed at once cannot fake a high rate.
        if let Some(start) = self.round_start {
            self.bw_samples[self.bw_next] = Some((self.round_delivered, start, now));
            self.bw_next = (self.bw_next + 1) % BW_ROUNDS;
        }
        self.round_start = Some(now);
        self.round_delivered = 0;
    }

    /// A transmission numbered `order` was declared lost by the selective/order rule or by
    /// duplicate ACKs. `next_order` and `snd_nxt` (the next new sequence number) mark where a
    /// new episode begins.
    pub(super) fn on_fast_loss(
        &mut self,
        order: u64,
        next_order: u64,
        snd_nxt: u16,
    ) -> LossResponse {
        if !self.enabled || order < self.episode_from {
            return LossResponse::SameEpisode;
        }
        self.episode_from = next_order;
        if !self.congested() {
            return LossResponse::NoQueue;
        }
        // Real congestion: a pending timeout was not (only) a stall.
        self.undo = None;
        self.ssthresh = self.reduced();
        self.cwnd = self.cwnd.min(self.ssthresh);
        self.ca_acked = 0;
        self.recovery = Some(Recovery {
            until: snd_nxt,
            fast: true,
        });
        self.extra = 1;
        LossResponse::Reduced
    }

    /// The retransmission timer expired; `repeated` if it already expired since the last
    /// acknowledgement progress (same episode: `ssthresh` stays).
    pub(super) fn on_timeout(&mut self, repeated: bool, next_order: u64, snd_nxt: u16) {
        if !self.enabled {
            return;
        }
        let congested = self.congested();
        if !repeated {
            self.undo = Some(Snapshot {
                cwnd: self.cwnd,
                ssthresh: self.ssthresh,
                episode_from: self.episode_from,
                recovery: self.recovery,
            });
            self.ssthresh = if congested {
                self.reduced()
            } else {
                self.cwnd.max(MIN_CWND)
            };
        }
        // Without a queue the losses were not ours to cause: restart like a new connection.
        // A repeated expiry is a silent path: start from the smallest window.
        self.cwnd = if congested || repeated {
            self.loss_window
        } else {
            self.initial_window.min(self.ssthresh)
        };
        self.ca_acked = 0;
        self.episode_from = next_order;
        self.recovery = Some(Recovery {
            until: snd_nxt,
            fast: false,
        });
    }

    /// The window after a congestion loss: half, but not below the bandwidth-delay product.
    fn reduced(&self) -> u32 {
        (self.cwnd / 2).max(self.bdp()).max(MIN_CWND)
    }

    /// The caller found the last timeout spurious: restore the state before it. Returns
    /// whether there was something to restore.
    pub(super) fn undo_timeout(&mut self) -> bool {
        let Some(s) = self.undo.take() else {
            return false;
        };
        self.cwnd = self.cwnd.max(s.cwnd);
        self.ssthresh = s.ssthresh;
        self.episode_from = s.episode_from;
        self.recovery = s.recovery;
        true
    }

    /// In fast recovery (a reduction's retransmissions under way, no growth).
    pub(super) fn in_fast_recovery(&self) -> bool {
        self.recovery.is_some_and(|r| r.fast)
    }

    /// The caller found the last timeout genuine: forget the state before it.
    pub(super) fn confirm_timeout(&mut self) {
        self.undo = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cc(initial: u16, window: u16) -> Congestion {
        Congestion::new(&Config {
            initial_window: initial,
            loss_window: 2,
            window,
            ..Config::default()
        })
    }

    fn at(t0: Instant, us: u64) -> Instant {
        t0 + Duration::from_micros(us)
    }

    /// Sends a full window, then acknowledges it in ACKs of `per_ack`; returns the new window.
    fn round(c: &mut Congestion, order: &mut u64, per_ack: u32) -> u32 {
        let w = c.cwnd();
        for pipe in 1..=w {
            c.on_transmit(pipe);
        }
        let first = *order;
        *order += u64::from(w);
        let mut acked = 0;
        while acked < w {
            let n = per_ack.min(w - acked);
            acked += n;
            c.on_ack(n, first + u64::from(acked) - 1, *order, 0, Instant::now());
        }
        c.cwnd()
    }

    /// A connection that measured a 100 µs round trip and 1 M segments/s (a product of 100
    /// segments), with its window at `cwnd` and the current round's smallest sample `rtt_us`.
    fn measured(cwnd: u32, rtt_us: u64) -> (Congestion, u64) {
        let t0 = Instant::now();
        let mut c = cc(32, 4096);
        c.on_rtt_sample(Duration::from_micros(100), t0);
        let mut order = 0u64;
        for r in 1..=3u64 {
            order += 100;
            c.on_ack(100, order - 1, order, 0, at(t0, 100 * r));
        }
        assert_eq!(c.bdp(), 100);
        c.cwnd = cwnd;
        c.ssthresh = 4096;
        c.on_rtt_sample(Duration::from_micros(rtt_us), at(t0, 400));
        (c, order)
    }

    #[test]
    fn slow_start_doubles_per_round_trip_then_grows_by_one() {
        let mut c = cc(16, 4096);
        let mut order = 0;
        assert_eq!(round(&mut c, &mut order, 16), 32);
        assert_eq!(round(&mut c, &mut order, 16), 64);
        assert_eq!(round(&mut c, &mut order, 1), 128);
        c.ssthresh = 128;
        assert_eq!(round(&mut c, &mut order, 16), 129);
        assert_eq!(round(&mut c, &mut order, 1), 130);
    }

    #[test]
    fn an_application_limited_sender_does_not_grow_the_window() {
        let mut c = cc(32, 4096);
        for order in 0..10_000u64 {
            c.on_transmit(1);
            c.on_ack(1, order, order + 1, 0, Instant::now());
        }
        assert_eq!(c.cwnd(), 32);
    }

    #[test]
    fn losses_of_one_episode_halve_once_and_a_lost_retransmission_halves_again() {
        // Nothing measured yet: every loss counts as congestion.
        let mut c = cc(100, 4096);
        assert_eq!(c.on_fast_loss(10, 100, 100), LossResponse::Reduced);
        assert_eq!((c.cwnd(), c.ssthresh()), (50, 50));
        // The first retransmission goes out even though 90 segments are still in the pipe,
        // and only that one.
        assert!(c.can_send(90));
        c.on_transmit(91);
        assert!(!c.can_send(90));
        assert_eq!(c.on_fast_loss(20, 100, 100), LossResponse::SameEpisode);
        assert_eq!(c.on_fast_loss(99, 101, 100), LossResponse::SameEpisode);
        assert_eq!(c.cwnd(), 50);
        // No growth in fast recovery, even when segments are acknowledged.
        for p in 1..=50 {
            c.on_transmit(p);
        }
        c.on_ack(10, 50, 110, 20, Instant::now());
        assert_eq!(c.cwnd(), 50);
        // A retransmission (order 105, sent after the reduction) lost again: new episode.
        assert_eq!(c.on_fast_loss(105, 120, 100), LossResponse::Reduced);
        assert_eq!(c.cwnd(), 25);
        // Recovery ends when the cumulative ACK passes what was outstanding: growth resumes
        // (congestion avoidance: one segment per window acknowledged).
        for p in 1..=25 {
            c.on_transmit(p);
        }
        c.on_ack(24, 115, 150, 100, Instant::now());
        assert_eq!(c.cwnd(), 25);
        c.on_ack(1, 116, 150, 101, Instant::now());
        assert_eq!(c.cwnd(), 26);
        // The floor.
        for k in 0..20u64 {
            c.on_fast_loss(200 + 10 * k, 201 + 10 * k, 100);
        }
        assert_eq!(c.cwnd(), MIN_CWND);
    }

    #[test]
    fn a_loss_without_a_standing_queue_keeps_the_window() {
        // 200 segments out, round trips at the minimum: a random loss.
        let (mut c, order) = measured(200, 100);
        assert_eq!(c.queued(), Some(0));
        assert_eq!(c.on_fast_loss(order - 50, order, 0), LossResponse::NoQueue);
        assert_eq!(c.cwnd(), 200);
        // One evaluation per round trip.
        assert_eq!(
            c.on_fast_loss(order - 40, order, 0),
            LossResponse::SameEpisode
        );
        // Next round: 150 µs with 200 out, 66 of them queued, above the 16-segment threshold.
        c.end_round(order + 1, Instant::now());
        c.on_rtt_sample(Duration::from_micros(150), Instant::now());
        assert_eq!(c.queued(), Some(66));
        assert_eq!(
            c.on_fast_loss(order + 1, order + 2, 0),
            LossResponse::Reduced
        );
        assert_eq!(c.cwnd(), 100);
    }

    #[test]
    fn a_reduction_stops_at_the_measured_bandwidth_delay_product() {
        // A queue of 80 segments (180 out, 100 in the pipe's product): cut to the product,
        // not to 90.
        let (mut c, order) = measured(180, 225);
        assert_eq!(c.on_fast_loss(order, order + 1, 0), LossResponse::Reduced);
        assert_eq!((c.cwnd(), c.ssthresh()), (100, 100));
        // Far above the product, Reno's half applies.
        let (mut c, order) = measured(400, 400);
        c.on_fast_loss(order, order + 1, 0);
        assert_eq!(c.cwnd(), 200);
        // A stale minimum is replaced by a larger sample.
        let t = Instant::now();
        c.on_rtt_sample(Duration::from_micros(300), t);
        assert_eq!(c.bdp(), 100);
        c.on_rtt_sample(
            Duration::from_micros(300),
            t + MIN_RTT_WINDOW + Duration::from_secs(1),
        );
        assert_eq!(c.bdp(), 300);
    }

    #[test]
    fn timeout_collapses_to_the_loss_window_and_undo_restores() {
        let mut c = cc(64, 4096);
        c.on_timeout(false, 64, 64);
        assert_eq!((c.cwnd(), c.ssthresh()), (2, 32));
        // A repeated expiry keeps ssthresh.
        c.on_timeout(true, 66, 64);
        assert_eq!((c.cwnd(), c.ssthresh()), (2, 32));
        // Slow start after a timeout (unlike fast recovery).
        c.on_transmit(2);
        c.on_ack(2, 66, 67, 2, Instant::now());
        assert_eq!(c.cwnd(), 4);
        assert!(c.undo_timeout());
        assert_eq!((c.cwnd(), c.ssthresh()), (64, 4096));
        assert!(!c.undo_timeout());
        c.on_timeout(false, 70, 70);
        c.confirm_timeout();
        assert!(!c.undo_timeout());
        assert_eq!(c.cwnd(), 2);
        // Without a queue the timeout restarts at the initial window, and slow start returns
        // to the window it had.
        let (mut c, order) = measured(200, 100);
        c.on_timeout(false, order, 0);
        assert_eq!((c.cwnd(), c.ssthresh()), (32, 200));
    }

    #[test]
    fn off_keeps_the_flow_window() {
        let mut c = Congestion::new(&Config {
            congestion_control: CcAlgorithm::Off,
            window: 1000,
            ..Config::default()
        });
        assert_eq!(c.cwnd(), 1000);
        assert_eq!(c.on_fast_loss(0, 1, 1), LossResponse::SameEpisode);
        c.on_timeout(false, 1, 1);
        assert_eq!(c.cwnd(), 1000);
        assert!(c.can_send(999) && !c.can_send(1000));
    }
}
