//! The paths to one peer: which pair of endpoints (one of this process's rails, one of the
//! peer's endpoints) carries the traffic, the numbering of the frames sent to the peer, the
//! acknowledgements both ways, and what happens when the pair in use goes silent.
//!
//! The provider delivers every message reliably on one pair (not always in order: `ofi_rxm`
//! completes a large message after small ones sent behind it; the messaging layer puts
//! messages back in order itself), but it cannot tell
//! a link that went down from a slow one: a TCP connection over a dead link retransmits for
//! a quarter of an hour before libfabric reports anything. So every data frame is numbered,
//! every frame carries the receiver's stream position back (piggybacked, or in an ack frame
//! when there is no data going that way), and a pair whose acknowledgements stop while data
//! is outstanding is declared dead: after `fail_after` when another pair to the peer works
//! (traffic moves there and every unacknowledged frame is sent again, in order; the receiver
//! drops the ones it already had), after `peer_timeout` when it was the last one (the job
//! stops, naming the pair).
//!
//! Sans-IO: time enters as a `Duration` since any fixed origin, and frames as numbers; the
//! transport ([`crate::btl`]) reads the clock and moves the bytes. This module owns the
//! per-peer numbering, acknowledgement and failure state; it must never do I/O or read the
//! clock.
//!
//! Acknowledgements are produced only when the peer's process makes progress, so a peer that
//! computes for long without calling MPI is as silent as a dead link. Once a pair has been
//! silent for `probe_after`, [`Tick::probe`] asks the transport (every `probe_every`) to probe
//! the peer's liveness responder over the same link (`kestrel_fabric::liveness`); an answer
//! ([`PeerPaths::answered`]) restarts the silence clock, so a busy peer is waited for as long
//! as it takes and only a silent link (or a stopped process) runs into the timeouts.

use std::collections::VecDeque;
use std::net::SocketAddrV4;
use std::time::Duration;

/// Frames received before an ack goes out even if no data does.
pub const ACK_EVERY: u32 = 32;

/// How far past the oldest missing frame a data frame may be numbered (frames in flight on a
/// pair never come near: they are bounded by the provider's queues).
pub const MAX_REORDER: u32 = 1 << 20;

/// Unacknowledged data frames are kept for sending again only while their bytes stay under
/// this (with a single pair nothing is kept: there is nowhere to send them again).
pub const MAX_RETAINED_BYTES: usize = 64 << 20;

/// The timeouts, from the `ofi_*` parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// Silence before a pair is dead when another pair to the peer works.
    pub fail_after: Duration,
    /// Silence before the last pair to a peer is dead (the job stops).
    pub peer_timeout: Duration,
    /// Longest wait before received frames are acknowledged without data to carry it.
    pub ack_delay: Duration,
    /// Silence after which the peer's liveness is probed.
    pub probe_after: Duration,
    /// Time between two probes of a silent peer.
    pub probe_every: Duration,
}

/// One pair of endpoints that reaches the peer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair<A> {
    /// This process's rail (endpoint index).
    pub rail: usize,
    /// The peer's address in that rail's address vector.
    pub addr: A,
    /// The peer's domain (interface) at the other end, for messages.
    pub remote: String,
    /// The peer's liveness responder for that endpoint, when it published one.
    pub probe: Option<SocketAddrV4>,
    /// One of the pairs large frames are striped over (the others are standbys).
    pub primary: bool,
    /// The pair's link speed in Mb/s (0: unknown), which sets its share of striped bytes.
    pub speed_mbps: u32,
    /// Declared dead: never used again.
    pub dead: bool,
}

impl<A> Pair<A> {
    /// A live pair, not yet used.
    pub fn new(
        rail: usize,
        addr: A,
        remote: String,
        probe: Option<SocketAddrV4>,
        primary: bool,
        speed_mbps: u32,
    ) -> Pair<A> {
        Pair {
            rail,
            addr,
            remote,
            probe,
            primary,
            speed_mbps,
            dead: false,
        }
    }
}

/// The speed assumed for a pair whose link speed is unknown (the transport's bandwidth
/// estimate makes the same assumption).
const UNKNOWN_SPEED_MBPS: u32 = 10_000;

/// A data frame kept until the peer acknowledges it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Retained {
    /// Its number.
    pub seq: u32,
    /// The pair it went out on last (watched while its acknowledgement does not come).
    pub pair: usize,
    /// Its active-message tag.
    pub am: u8,
    /// The messaging layer's header and payload.
    pub data: Vec<u8>,
}

/// What a received frame is, for the peer's stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Arrival {
    /// A data frame not seen before: hand it up (the messaging layer orders messages).
    Deliver,
    /// An ack frame: nothing to hand up.
    Ack,
    /// A data frame already handed up (sent again after a failover): drop it.
    Duplicate,
    /// A data frame numbered implausibly far beyond the oldest missing one (a corrupt or
    /// foreign number): dropped and reported.
    Gap {
        /// The oldest number missing.
        expected: u32,
        /// The number found.
        found: u32,
    },
}

/// A pair declared dead by [`PeerPaths::tick`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Failure {
    /// The dead pair's index.
    pub pair: usize,
    /// The pair traffic moved to, or `None` when it was the last one.
    pub moved_to: Option<usize>,
    /// How long it had been silent.
    pub silent_for: Duration,
}

/// What [`PeerPaths::tick`] asks of the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tick {
    /// Send an ack frame now.
    pub send_ack: bool,
    /// Probe the peer's liveness over the active pair now.
    pub probe: bool,
    /// A pair died.
    pub failure: Option<Failure>,
}

/// Everything about one peer's paths and streams.
#[derive(Debug)]
pub struct PeerPaths<A> {
    pairs: Vec<Pair<A>>,
    /// Bytes sent on each pair, for striping by speed.
    pair_bytes: Vec<u64>,
    /// Kept (unacknowledged) frames last sent on each pair.
    pair_unacked: Vec<u32>,
    /// When each pair's link last answered a liveness probe.
    pair_answered: Vec<Option<Duration>>,
    active: usize,
    /// Number of the next data frame to the peer.
    next_seq: u32,
    /// The peer has every frame before this.
    acked: u32,
    /// Since when the acknowledgements have not moved while data is outstanding (`None`: not
    /// timed yet; the next tick starts the clock).
    silent_since: Option<Duration>,
    retained: VecDeque<Retained>,
    retained_bytes: usize,
    /// Retained frames before this index were already sent again on the active pair.
    resent: usize,
    /// Number of the oldest data frame from the peer not yet received: every one before it
    /// was (this is the ack we send).
    expected: u32,
    /// Which frames from `expected` on have arrived (index 0 is `expected` itself, always
    /// false while non-empty).
    arrived: VecDeque<bool>,
    /// Frames received since the last ack went out.
    rx_unacked: u32,
    /// Since when received frames wait for an ack.
    rx_waiting_since: Option<Duration>,
    /// When the last liveness probe went out.
    last_probe: Option<Duration>,
    /// RMA reads from the peer in flight (over the active pair): waited for like
    /// unacknowledged frames, since a dead link never completes them.
    reads: u32,
}

/// `a` is at or after `b` in wrapping sequence space.
fn at_or_after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) >= 0
}

impl<A> PeerPaths<A> {
    /// The paths over `pairs` (at least one; the first is used first).
    pub fn new(pairs: Vec<Pair<A>>) -> PeerPaths<A> {
        assert!(
            !pairs.is_empty(),
            "a peer is reached over at least one pair"
        );
        PeerPaths {
            pair_bytes: vec![0; pairs.len()],
            pair_unacked: vec![0; pairs.len()],
            pair_answered: vec![None; pairs.len()],
            pairs,
            active: 0,
            next_seq: 0,
            acked: 0,
            silent_since: None,
            retained: VecDeque::new(),
            retained_bytes: 0,
            resent: 0,
            expected: 0,
            arrived: VecDeque::new(),
            rx_unacked: 0,
            rx_waiting_since: None,
            last_probe: None,
            reads: 0,
        }
    }

    /// The pairs, in order.
    pub fn pairs(&self) -> &[Pair<A>] {
        &self.pairs
    }

    /// The pair traffic to the peer takes now.
    pub fn active(&self) -> &Pair<A> {
        &self.pairs[self.active]
    }

    /// Index of the active pair.
    pub fn active_index(&self) -> usize {
        self.active
    }

    /// Whether sent frames are kept for a failover (more than one pair).
    pub fn retains(&self) -> bool {
        self.pairs.len() > 1
    }

    /// Whether a data frame of `len` bytes may go now: earlier frames sent again after a
    /// failover go first, and kept bytes stay bounded.
    pub fn may_send(&self, len: usize) -> bool {
        self.resend_pending() == 0
            && (!self.retains()
                || self.retained.is_empty()
                || self.retained_bytes + len <= MAX_RETAINED_BYTES)
    }

    /// The (seq, ack) a data frame sent now carries. Commit with [`Self::sent`] once the
    /// provider took it.
    pub fn next_header(&self) -> (u32, u32) {
        (self.next_seq, self.expected)
    }

    /// The pair a data frame of `len` bytes takes: the active pair, or for a frame of at
    /// least `stripe_min` bytes the live primary pair (or the active one) with the fewest
    /// bytes sent relative to its link speed, which stripes a pipelined large message over
    /// the pairs by bandwidth. A frame on another pair than the active one is sent marked
    /// as striped, so that the receiver does not take it for a move of the traffic.
    /// Returns the pair and the [`Self::stripe_width`] it was chosen among.
    pub fn choose(&self, len: usize, stripe_min: usize) -> (usize, usize) {
        let width = self.stripe_width(len, stripe_min);
        if width == 1 {
            return (self.active, 1);
        }
        let load = |i: usize| {
            let speed = match self.pairs[i].speed_mbps {
                0 => UNKNOWN_SPEED_MBPS,
                s => s,
            };
            ((self.pair_bytes[i] as u128) << 32) / speed as u128
        };
        let pair = self
            .striped_pairs()
            .min_by_key(|&i| (load(i), i != self.active))
            .unwrap_or(self.active);
        (pair, width)
    }

    /// The pairs a large frame may take: the active one and the live primaries.
    fn striped_pairs(&self) -> impl Iterator<Item = usize> + '_ {
        (0..self.pairs.len())
            .filter(|&i| i == self.active || (self.pairs[i].primary && !self.pairs[i].dead))
    }

    /// Over how many pairs a frame of `len` bytes is striped (1: it takes the active pair).
    /// The transport gives each of them that share of its rail's send slots for large
    /// frames, so striping spreads the frames in flight instead of multiplying them.
    pub fn stripe_width(&self, len: usize, stripe_min: usize) -> usize {
        if len < stripe_min {
            return 1;
        }
        self.striped_pairs().count()
    }

    /// The data frame of [`Self::next_header`] went out on `pair`, `len` bytes carrying `am`
    /// and `data` (kept when this peer has more than one pair). It also carried the ack.
    pub fn sent(&mut self, pair: usize, len: usize, am: u8, data: impl FnOnce() -> Vec<u8>) {
        if self.next_seq == self.acked {
            // Nothing was outstanding: the silence clock starts at the next tick.
            self.silent_since = None;
        }
        self.pair_bytes[pair] += len as u64;
        if self.retains() {
            self.pair_unacked[pair] += 1;
            let data = data();
            self.retained_bytes += data.len();
            self.retained.push_back(Retained {
                seq: self.next_seq,
                pair,
                am,
                data,
            });
            self.resent = self.retained.len();
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        self.acked_out();
    }

    /// The ack an ack frame sent now carries; call [`Self::acked_out`] once it went.
    pub fn ack_value(&self) -> u32 {
        self.expected
    }

    /// An ack (in a data frame or on its own) went out.
    pub fn acked_out(&mut self) {
        self.rx_unacked = 0;
        self.rx_waiting_since = None;
    }

    /// Data frames sent and not yet acknowledged.
    pub fn outstanding(&self) -> u32 {
        self.next_seq.wrapping_sub(self.acked)
    }

    /// Whether ticks have anything to time.
    pub fn busy(&self) -> bool {
        self.waiting() || self.rx_unacked > 0
    }

    /// Whether something sent to the peer or asked of it has not come back: frames not
    /// acknowledged, or reads not completed. Silence then counts.
    fn waiting(&self) -> bool {
        self.outstanding() > 0 || self.reads > 0
    }

    /// An RMA read from the peer was posted (on the active pair).
    pub fn read_started(&mut self) {
        self.reads += 1;
    }

    /// An RMA read from the peer completed, well or not: the link moved data (or the
    /// provider gave up on it), so the silence clock restarts as an ack would restart it.
    pub fn read_finished(&mut self) {
        self.reads = self.reads.saturating_sub(1);
        self.silent_since = None;
    }

    /// RMA reads from the peer in flight.
    pub fn reads(&self) -> u32 {
        self.reads
    }

    /// Whether frames arrived since the last ack went out.
    pub fn owes_ack(&self) -> bool {
        self.rx_unacked > 0
    }

    /// Whether enough frames arrived that an ack should go out now.
    pub fn ack_due(&self) -> bool {
        self.rx_unacked >= ACK_EVERY
    }

    /// Takes a received frame's numbers: `data` (a data frame, numbered `seq`) or an ack;
    /// `ack` is the peer's position in our stream; `rail` where it arrived; `striped` when
    /// the sender marked it as striped over a pair other than its active one.
    pub fn received(
        &mut self,
        data: bool,
        seq: u32,
        ack: u32,
        rail: usize,
        striped: bool,
    ) -> Arrival {
        self.take_ack(ack);
        // The peer moved to another pair (after a failover of its own): follow it, and take
        // the pair it left as dead too, so that its late frames do not pull us back.
        if !striped && self.pairs[self.active].rail != rail {
            if let Some(i) = self.pairs.iter().position(|p| p.rail == rail && !p.dead) {
                self.pairs[self.active].dead = true;
                self.switch_to(i);
            }
        }
        if !data {
            return Arrival::Ack;
        }
        self.rx_unacked = self.rx_unacked.saturating_add(1);
        // The common case, the next frame in order with nothing held back: what the general
        // path below does for it, without its queue operations (this is on every message's
        // critical path).
        if seq == self.expected && self.arrived.is_empty() {
            self.expected = self.expected.wrapping_add(1);
            return Arrival::Deliver;
        }
        if !at_or_after(seq, self.expected) {
            return Arrival::Duplicate;
        }
        let offset = seq.wrapping_sub(self.expected);
        if offset >= MAX_REORDER {
            return Arrival::Gap {
                expected: self.expected,
                found: seq,
            };
        }
        let offset = offset as usize;
        if self.arrived.len() <= offset {
            self.arrived.resize(offset + 1, false);
        }
        if self.arrived[offset] {
            return Arrival::Duplicate;
        }
        self.arrived[offset] = true;
        while self.arrived.front() == Some(&true) {
            self.arrived.pop_front();
            self.expected = self.expected.wrapping_add(1);
        }
        Arrival::Deliver
    }

    /// Applies the peer's cumulative ack (stale or impossible values are ignored).
    fn take_ack(&mut self, ack: u32) {
        let advance = ack.wrapping_sub(self.acked);
        if advance == 0 || advance > self.outstanding() {
            return;
        }
        self.acked = ack;
        self.silent_since = None;
        while self
            .retained
            .front()
            .is_some_and(|r| !at_or_after(r.seq, ack))
        {
            let r = self.retained.pop_front().expect("front exists");
            self.retained_bytes -= r.data.len();
            self.pair_unacked[r.pair] -= 1;
            self.resent = self.resent.saturating_sub(1);
        }
    }

    fn switch_to(&mut self, pair: usize) {
        self.active = pair;
        // Everything unacknowledged goes again, in order, on the new pair.
        self.resent = 0;
        self.silent_since = None;
    }

    /// Kept frames still to send again on the active pair.
    pub fn resend_pending(&self) -> usize {
        self.retained.len() - self.resent
    }

    /// The next kept frame to send again, with the ack it carries.
    pub fn next_resend(&self) -> Option<(&Retained, u32)> {
        self.retained.get(self.resent).map(|r| (r, self.expected))
    }

    /// The frame of [`Self::next_resend`] went out again (on the active pair).
    pub fn resent_one(&mut self) {
        let active = self.active;
        if let Some(r) = self.retained.get_mut(self.resent) {
            self.pair_unacked[r.pair] -= 1;
            self.pair_unacked[active] += 1;
            r.pair = active;
            self.pair_bytes[active] += r.data.len() as u64;
        }
        self.resent += 1;
        self.acked_out();
    }

    /// The pairs watched while acknowledgements stop, active first: the active pair (the
    /// acknowledgements come back over it) and every live pair that carried a frame not yet
    /// acknowledged (the receiver's position cannot pass a frame lost with its link).
    /// Liveness probes go over each.
    pub fn watched(&self) -> impl Iterator<Item = usize> + '_ {
        std::iter::once(self.active).chain(
            (0..self.pairs.len())
                .filter(|&i| i != self.active && self.pair_unacked[i] > 0 && !self.pairs[i].dead),
        )
    }

    /// The peer's liveness responder answered, at `now`, a probe sent over `pair`: the peer
    /// and that pair's link are alive, the peer is only busy. That pair's silence clock
    /// restarts.
    pub fn answered(&mut self, pair: usize, now: Duration) {
        if self.waiting() {
            self.pair_answered[pair] = Some(now);
        }
    }

    /// Advances the timers to `now`: whether an ack is due, whether to probe the peer, and
    /// whether a watched pair died.
    pub fn tick(&mut self, now: Duration, timing: &Timing) -> Tick {
        let mut tick = Tick::default();
        if self.rx_unacked > 0 {
            let since = *self.rx_waiting_since.get_or_insert(now);
            tick.send_ack = self.ack_due() || now.saturating_sub(since) >= timing.ack_delay;
        }
        if !self.waiting() {
            self.silent_since = None;
            return tick;
        }
        let since = *self.silent_since.get_or_insert(now);
        // Each watched pair is silent since the acknowledgements stopped or since its link
        // last answered a probe, whichever is later.
        let silence =
            |i: usize| now.saturating_sub(self.pair_answered[i].map_or(since, |a| a.max(since)));
        let mut failed = None;
        let mut longest = Duration::ZERO;
        for i in self.watched() {
            let silent_for = silence(i);
            longest = longest.max(silent_for);
            // A striped pair that died leaves the traffic on the active one; the active
            // pair's death moves it to the next live pair.
            let next_alive = if i == self.active {
                (1..self.pairs.len())
                    .map(|k| (self.active + k) % self.pairs.len())
                    .find(|&j| !self.pairs[j].dead)
            } else {
                Some(self.active)
            };
            // Frames that cannot be sent again (one pair) have nowhere to move.
            let limit = match next_alive {
                Some(_) if self.retains() => timing.fail_after,
                _ => timing.peer_timeout,
            };
            if failed.is_none() && silent_for >= limit {
                failed = Some((i, next_alive, silent_for));
            }
        }
        if longest >= timing.probe_after
            && self
                .last_probe
                .is_none_or(|t| now.saturating_sub(t) >= timing.probe_every)
        {
            tick.probe = true;
            self.last_probe = Some(now);
        }
        if let Some((dead, next_alive, silent_for)) = failed {
            self.pairs[dead].dead = true;
            let moved_to = next_alive.filter(|_| self.retains());
            if let Some(to) = moved_to {
                // Everything unacknowledged goes again, in order, on the (new) active pair.
                self.switch_to(to);
            }
            tick.failure = Some(Failure {
                pair: dead,
                moved_to,
                silent_for,
            });
        }
        tick
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Timing = Timing {
        fail_after: Duration::from_secs(3),
        peer_timeout: Duration::from_secs(10),
        ack_delay: Duration::from_millis(1),
        probe_after: Duration::from_millis(1500),
        probe_every: Duration::from_millis(250),
    };

    fn pair(rail: usize) -> Pair<u32> {
        Pair::new(
            rail,
            rail as u32 * 10,
            format!("eth{}", rail + 1),
            None,
            false,
            0,
        )
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// Sends `n` data frames from `a` (contents: their numbers) and returns their headers.
    fn send(a: &mut PeerPaths<u32>, n: usize) -> Vec<(u32, u32, Vec<u8>)> {
        (0..n)
            .map(|_| {
                let (seq, ack) = a.next_header();
                let data = seq.to_le_bytes().to_vec();
                let kept = data.clone();
                a.sent(a.active_index(), 4, 1, move || kept);
                (seq, ack, data)
            })
            .collect()
    }

    #[test]
    fn acks_piggyback_and_clear_the_outstanding_frames() {
        let mut a = PeerPaths::new(vec![pair(0)]);
        let mut b = PeerPaths::new(vec![pair(0)]);
        for (seq, ack, _) in send(&mut a, 3) {
            assert_eq!(b.received(true, seq, ack, 0, false), Arrival::Deliver);
        }
        assert_eq!(a.outstanding(), 3);
        assert!(!a.retains(), "one pair: nothing is kept");
        // b answers with data: its header acknowledges all three.
        let (seq, ack) = b.next_header();
        assert_eq!(ack, 3);
        b.sent(b.active_index(), 0, 1, Vec::new);
        assert!(!b.busy() || b.outstanding() == 1);
        assert_eq!(a.received(true, seq, ack, 0, false), Arrival::Deliver);
        assert_eq!(a.outstanding(), 0);
    }

    #[test]
    fn a_receiver_without_data_to_send_acks_after_the_delay_or_a_batch() {
        let mut a = PeerPaths::new(vec![pair(0)]);
        let mut b = PeerPaths::new(vec![pair(0)]);
        let frames = send(&mut a, ACK_EVERY as usize + 1);
        let (seq, ack, _) = frames[0];
        b.received(true, seq, ack, 0, false);
        assert!(!b.tick(ms(0), &T).send_ack, "the delay starts now");
        assert!(b.tick(ms(1), &T).send_ack, "after ack_delay");
        for &(seq, ack, _) in &frames[1..ACK_EVERY as usize] {
            b.received(true, seq, ack, 0, false);
        }
        assert!(b.ack_due(), "a batch of ACK_EVERY frames is acked at once");
        let value = b.ack_value();
        b.acked_out();
        assert_eq!(a.received(false, 0, value, 0, false), Arrival::Ack);
        assert_eq!(a.outstanding(), 1);
    }

    #[test]
    fn the_last_pair_dies_after_the_peer_timeout_only() {
        let mut a = PeerPaths::new(vec![pair(0)]);
        send(&mut a, 1);
        assert_eq!(a.tick(ms(0), &T).failure, None);
        assert_eq!(a.tick(ms(9_999), &T).failure, None);
        let f = a.tick(ms(10_000), &T).failure.expect("dead");
        assert_eq!(
            f,
            Failure {
                pair: 0,
                moved_to: None,
                silent_for: ms(10_000)
            }
        );
    }

    #[test]
    fn acknowledgement_progress_restarts_the_clock() {
        let mut a = PeerPaths::new(vec![pair(0)]);
        send(&mut a, 2);
        a.tick(ms(0), &T);
        a.received(false, 0, 1, 0, false);
        // The clock restarts at the next tick after the ack.
        assert_eq!(a.tick(ms(9_000), &T).failure, None);
        assert_eq!(a.tick(ms(18_999), &T).failure, None);
        assert!(a.tick(ms(19_000), &T).failure.is_some());
    }

    #[test]
    fn nothing_outstanding_never_fails() {
        let mut a = PeerPaths::<u32>::new(vec![pair(0)]);
        for t in [0, 10_000, 100_000] {
            assert_eq!(a.tick(ms(t), &T), Tick::default());
        }
    }

    #[test]
    fn a_failover_sends_the_unacknowledged_frames_again_in_order_and_the_receiver_drops_duplicates()
    {
        let mut a = PeerPaths::new(vec![pair(0), pair(1)]);
        let mut b = PeerPaths::new(vec![pair(0), pair(1)]);
        assert!(a.retains());
        let frames = send(&mut a, 5);
        // Frames 0..3 arrive over rail 0 and the ack of 0..2 gets back; then rail 0 dies.
        for &(seq, ack, _) in &frames[..3] {
            assert_eq!(b.received(true, seq, ack, 0, false), Arrival::Deliver);
        }
        a.received(false, 0, 2, 0, false);
        assert_eq!(a.outstanding(), 3);
        a.tick(ms(0), &T);
        assert_eq!(a.tick(ms(2_999), &T).failure, None);
        let f = a.tick(ms(3_000), &T).failure.expect("rail 0 dead");
        assert_eq!(f.moved_to, Some(1));
        assert_eq!(a.active().rail, 1);
        // Frames 2, 3, 4 go again over rail 1, in order, before anything new.
        assert!(!a.may_send(1));
        let mut again = Vec::new();
        while let Some((r, ack)) = a.next_resend() {
            again.push((r.seq, ack, r.data.clone()));
            a.resent_one();
        }
        assert_eq!(again.iter().map(|f| f.0).collect::<Vec<_>>(), vec![2, 3, 4]);
        assert!(a.may_send(1));
        let arrivals: Vec<_> = again
            .iter()
            .map(|&(seq, ack, _)| b.received(true, seq, ack, 1, false))
            .collect();
        assert_eq!(
            arrivals,
            vec![Arrival::Duplicate, Arrival::Deliver, Arrival::Deliver]
        );
        assert_eq!(
            b.active().rail,
            1,
            "the receiver answers where data now comes"
        );
        assert!(b.pairs()[0].dead, "and never goes back");
        assert_eq!(b.received(true, 3, 0, 0, false), Arrival::Duplicate);
        assert_eq!(b.active().rail, 1);
        a.received(false, 0, b.ack_value(), 1, false);
        assert_eq!(a.outstanding(), 0);
        assert_eq!(a.resend_pending(), 0);
        // The second pair dies too: now it is the last one.
        send(&mut a, 1);
        a.tick(ms(4_000), &T);
        assert_eq!(a.tick(ms(13_999), &T).failure, None);
        assert_eq!(
            a.tick(ms(14_000), &T).failure.map(|f| f.moved_to),
            Some(None)
        );
    }

    #[test]
    fn out_of_order_frames_are_delivered_once_and_acked_only_when_contiguous() {
        let mut b = PeerPaths::<u32>::new(vec![pair(0)]);
        assert_eq!(b.received(true, 2, 0, 0, false), Arrival::Deliver);
        assert_eq!(b.received(true, 1, 0, 0, false), Arrival::Deliver);
        assert_eq!(b.ack_value(), 0, "frame 0 is still missing");
        assert_eq!(b.received(true, 2, 0, 0, false), Arrival::Duplicate);
        assert_eq!(b.received(true, 0, 0, 0, false), Arrival::Deliver);
        assert_eq!(b.ack_value(), 3);
        assert_eq!(b.received(true, 1, 0, 0, false), Arrival::Duplicate);
        assert_eq!(
            b.received(true, 3 + MAX_REORDER, 0, 0, false),
            Arrival::Gap {
                expected: 3,
                found: 3 + MAX_REORDER
            }
        );
    }

    #[test]
    fn stale_and_impossible_acks_are_ignored() {
        let mut a = PeerPaths::new(vec![pair(0)]);
        send(&mut a, 2);
        a.received(false, 0, 7, 0, false); // beyond what was sent
        assert_eq!(a.outstanding(), 2);
        a.received(false, 0, 2, 0, false);
        a.received(false, 0, 1, 0, false); // older than what is known
        assert_eq!(a.outstanding(), 0);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let mut a = PeerPaths::new(vec![pair(0), pair(1)]);
        let mut b = PeerPaths::new(vec![pair(0), pair(1)]);
        a.next_seq = u32::MAX - 1;
        a.acked = u32::MAX - 1;
        b.expected = u32::MAX - 1;
        for (seq, ack, _) in send(&mut a, 4) {
            assert_eq!(b.received(true, seq, ack, 0, false), Arrival::Deliver);
        }
        a.received(false, 0, b.ack_value(), 0, false);
        assert_eq!(a.outstanding(), 0);
        assert_eq!(a.retained.len(), 0);
        assert_eq!(b.received(true, u32::MAX, 0, 0, false), Arrival::Duplicate);
    }

    #[test]
    fn kept_bytes_are_bounded() {
        let mut a = PeerPaths::new(vec![pair(0), pair(1)]);
        let (_, _) = a.next_header();
        a.sent(0, MAX_RETAINED_BYTES - 10, 1, || {
            vec![0; MAX_RETAINED_BYTES - 10]
        });
        assert!(a.may_send(10));
        assert!(!a.may_send(11));
        a.received(false, 0, 1, 0, false);
        assert!(a.may_send(MAX_RETAINED_BYTES * 2), "nothing kept: any size");
    }

    #[test]
    fn a_busy_peer_that_answers_probes_is_never_taken_for_dead() {
        let mut a = PeerPaths::new(vec![pair(0)]);
        send(&mut a, 1);
        let (mut probes, mut last_answer) = (0, 0);
        for t in (0..60_000).step_by(50) {
            let tick = a.tick(ms(t), &T);
            assert!(tick.failure.is_none(), "failed at {t} ms");
            if tick.probe {
                probes += 1;
                last_answer = t + 1;
                a.answered(0, ms(last_answer));
            }
        }
        // An answer restarts the silence clock: one probe per 1.5 s of silence, for a minute.
        assert!((35..=45).contains(&probes), "{probes} probes");
        // Answers stop (the link died): the last pair fails after the peer timeout.
        let failed_at = (60_000..80_000)
            .step_by(50)
            .find(|&t| a.tick(ms(t), &T).failure.is_some())
            .expect("fails");
        let silent = failed_at - last_answer;
        assert!(
            (9_950..=10_050).contains(&silent),
            "failed {silent} ms after the last answer"
        );
    }

    #[test]
    fn a_read_in_flight_is_waited_for_like_an_unacknowledged_frame() {
        // Nothing sent, one read posted: a dead link would never complete it.
        let mut a = PeerPaths::new(vec![pair(0)]);
        a.read_started();
        assert!(a.busy());
        // Reads that keep completing keep the pair alive, however long the transfer.
        for t in (0..30_000).step_by(500) {
            assert!(a.tick(ms(t), &T).failure.is_none(), "failed at {t} ms");
            a.read_finished();
            a.read_started();
        }
        // A busy peer's probe answers keep a slow read alive too.
        let mut answered = 0;
        for t in (30_000..50_000).step_by(50) {
            let tick = a.tick(ms(t), &T);
            assert!(tick.failure.is_none(), "failed at {t} ms");
            if tick.probe {
                answered = t + 1;
                a.answered(0, ms(answered));
            }
        }
        assert!(answered > 0, "probed while the read waited");
        // Then silence: the last pair fails after the peer timeout, naming it.
        let failed = (50_000..70_000)
            .step_by(50)
            .find_map(|t| a.tick(ms(t), &T).failure.map(|f| (t, f)))
            .expect("fails");
        assert_eq!(failed.1.pair, 0);
        assert_eq!(failed.1.moved_to, None, "one pair: nowhere to move");
        let silent = failed.0 - answered;
        assert!(
            (9_950..=10_050).contains(&silent),
            "failed {silent} ms after the last answer"
        );
        // Once the read is over, nothing is waited for.
        let mut b = PeerPaths::new(vec![pair(0)]);
        b.read_started();
        b.read_finished();
        assert!(!b.busy());
        assert!(b.tick(ms(60_000), &T).failure.is_none());
    }

    fn striped(rail: usize, speed_mbps: u32) -> Pair<u32> {
        Pair {
            primary: true,
            speed_mbps,
            ..pair(rail)
        }
    }

    /// Sends `n` frames of `len` bytes from `a`, each on the pair [`PeerPaths::choose`]
    /// picks: (pair, seq, ack) per frame.
    fn send_striped(a: &mut PeerPaths<u32>, n: usize, len: usize) -> Vec<(usize, u32, u32)> {
        (0..n)
            .map(|_| {
                let (seq, ack) = a.next_header();
                let (p, _) = a.choose(len, 16 << 10);
                a.sent(p, len, 1, || vec![0; len]);
                (p, seq, ack)
            })
            .collect()
    }

    #[test]
    fn large_frames_are_striped_over_the_primary_pairs_by_speed_and_small_ones_stay() {
        // 25 and 75 Gb/s primaries, and a standby that is never striped over.
        let mut a = PeerPaths::new(vec![striped(0, 25_000), striped(1, 75_000), pair(2)]);
        let frames = send_striped(&mut a, 400, 128 << 10);
        let on = |p: usize| frames.iter().filter(|f| f.0 == p).count();
        assert_eq!((on(0), on(1), on(2)), (100, 300, 0), "shares by speed");
        assert_eq!(
            a.stripe_width(128 << 10, 16 << 10),
            2,
            "the standby is not striped over"
        );
        assert_eq!(a.stripe_width(1024, 16 << 10), 1);
        // Below the striping threshold: always the active pair.
        for (p, _, _) in send_striped(&mut a, 20, 1024) {
            assert_eq!(p, 0);
        }
        // Unknown speeds count as equal.
        let mut b = PeerPaths::new(vec![striped(0, 0), striped(1, 0)]);
        let frames = send_striped(&mut b, 10, 64 << 10);
        assert_eq!(frames.iter().filter(|f| f.0 == 1).count(), 5);
        // One pair: nothing to choose.
        let mut c = PeerPaths::new(vec![striped(0, 0)]);
        assert!(send_striped(&mut c, 3, 1 << 20).iter().all(|f| f.0 == 0));
    }

    #[test]
    fn a_receiver_does_not_follow_striped_frames_but_follows_a_move() {
        let mut b = PeerPaths::new(vec![striped(0, 0), striped(1, 0)]);
        assert_eq!(b.received(true, 0, 0, 1, true), Arrival::Deliver);
        assert_eq!(b.active_index(), 0, "a striped frame on rail 1 is no move");
        assert_eq!(b.received(true, 1, 0, 1, false), Arrival::Deliver);
        assert_eq!(b.active_index(), 1, "an unmarked frame there is");
        assert!(b.pairs()[0].dead);
    }

    #[test]
    fn a_dead_striped_pair_is_blamed_and_its_frames_go_again_on_the_active_pair() {
        let mut a = PeerPaths::new(vec![striped(0, 0), striped(1, 0)]);
        let mut b = PeerPaths::new(vec![striped(0, 0), striped(1, 0)]);
        let frames = send_striped(&mut a, 6, 64 << 10);
        // Pair 1 (frames 1, 3, 5) is dead: b gets only frames 0, 2, 4 and acks frame 0.
        for &(p, seq, ack) in &frames {
            if p == 0 {
                assert_eq!(b.received(true, seq, ack, 0, false), Arrival::Deliver);
            }
        }
        assert_eq!(b.ack_value(), 1);
        a.received(false, 0, b.ack_value(), 0, false);
        assert_eq!(
            a.watched().collect::<Vec<_>>(),
            vec![0, 1],
            "both carried unacked frames"
        );
        // Probes go over both; pair 0's link answers, pair 1's stays silent and dies after
        // fail_after.
        a.tick(ms(0), &T);
        for t in (250..3_000).step_by(250) {
            let tick = a.tick(ms(t), &T);
            assert_eq!(tick.failure, None, "at {t} ms");
            if tick.probe {
                a.answered(0, ms(t + 1));
            }
        }
        let f = a.tick(ms(3_000), &T).failure.expect("pair 1 dies");
        assert_eq!((f.pair, f.moved_to), (1, Some(0)));
        assert_eq!(a.active_index(), 0, "the traffic stays on the active pair");
        // Frames 1..=5 go again on pair 0; b drops the ones it had.
        let mut delivered = Vec::new();
        while let Some((r, ack)) = a.next_resend() {
            let (seq, pair) = (r.seq, r.pair);
            match b.received(true, seq, ack, 0, false) {
                Arrival::Deliver => delivered.push(seq),
                other => assert_eq!(other, Arrival::Duplicate),
            }
            a.resent_one();
            assert_eq!(a.retained[a.resent - 1].pair, 0, "was on {pair}");
        }
        assert_eq!(delivered, vec![1, 3, 5]);
        assert_eq!(b.ack_value(), 6);
        // Striping now leaves the dead pair out.
        assert!(send_striped(&mut a, 4, 64 << 10).iter().all(|f| f.0 == 0));
    }

    #[test]
    fn a_dead_active_link_is_told_from_a_live_striped_one_by_their_probe_answers() {
        let mut a = PeerPaths::new(vec![striped(0, 0), striped(1, 0)]);
        send_striped(&mut a, 6, 64 << 10);
        // Nothing is acknowledged (the acks come over pair 0, whose link is dead); pair 1's
        // link answers its probes.
        a.tick(ms(0), &T);
        let mut probes = 0;
        for t in (250..3_000).step_by(250) {
            let tick = a.tick(ms(t), &T);
            assert_eq!(tick.failure, None, "at {t} ms");
            if tick.probe {
                probes += 1;
                a.answered(1, ms(t + 1));
            }
        }
        assert!(probes >= 5, "{probes} probe rounds");
        let f = a.tick(ms(3_000), &T).failure.expect("pair 0 dies");
        assert_eq!((f.pair, f.moved_to), (0, Some(1)));
        assert_eq!(a.active_index(), 1);
        assert_eq!(
            a.resend_pending(),
            6,
            "every unacknowledged frame goes again on pair 1"
        );
    }

    #[test]
    fn a_busy_peer_answering_on_every_striped_link_is_never_taken_for_dead() {
        let mut a = PeerPaths::new(vec![striped(0, 0), striped(1, 0)]);
        send_striped(&mut a, 4, 64 << 10);
        for t in (0..30_000).step_by(50) {
            let tick = a.tick(ms(t), &T);
            assert_eq!(tick.failure, None, "at {t} ms");
            if tick.probe {
                a.answered(0, ms(t + 1));
                a.answered(1, ms(t + 1));
            }
        }
    }
}
