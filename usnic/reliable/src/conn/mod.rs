//! One reliable, ordered message channel to one peer over one rail, as a deterministic state
//! machine.
//!
//! This module owns the sender window, loss detection, retransmission, acknowledgement
//! scheduling, reassembly and delivery order of one (peer, rail) pair, and feeds the
//! congestion window ([`super::congestion`]) what it needs. It must never do I/O,
//! read the clock (time comes in as `now` arguments, which must not go backwards), allocate per
//! datagram on the steady path, or panic on anything a peer sends.
//!
//! # Protocol
//!
//! * Messages are cut into segments of at most `max_datagram - HEADER_LEN` payload bytes, each
//!   with a 16-bit sequence number; a message of 0 bytes is one empty segment.
//! * The sender keeps at most `window` segments unacknowledged (the flow window, which the
//!   receiver's reorder buffer matches), and at most the congestion window of them in the
//!   network: `pipe`, the segments sent and neither acknowledged, reported received nor
//!   declared lost, stays below `cwnd` for new data and retransmissions alike (RFC 6675; the
//!   first retransmission of a loss episode goes out at once). ACKs are cumulative (the last
//!   in-order segment received), piggybacked on every DATA, and otherwise sent alone after
//!   `ack_delay`, after `ack_every` in-order segments, or at once when something arrived out
//!   of order, twice, or outside the window (the sender learns of a loss from those).
//! * Standalone ACKs also carry a 64-segment selective-ACK bitmap after the cumulative ACK,
//!   and in their `seq` field the newest segment the receiver got. The receiver buffers
//!   out-of-order segments anywhere in the window (selective receive).
//! * Loss detection, in transmission order (every transmission gets a number, `order`): a
//!   segment is lost when `reorder_threshold` segments transmitted after it (and sent only
//!   once, so that which copy arrived is unambiguous) have been acknowledged, cumulatively or
//!   selectively; with `selective_ack` off, `reorder_threshold` duplicate standalone ACKs
//!   retransmit the first unacknowledged segment, once per value of the cumulative ACK;
//!   and when the oldest transmission still unanswered is older than the retransmission
//!   timeout, every segment neither acknowledged nor reported received is declared lost and
//!   queued oldest first (the collapsed congestion window lets only a few out per round trip),
//!   and the timeout doubles (up to `rto_max`; any acknowledgement progress, cumulative or
//!   selective, resets it once a round trip has been measured). The timeout follows RFC 6298
//!   from round-trip samples of segments sent once (Karn) and not covered late by a
//!   cumulative ACK that filled a hole, clamped to `[rto_min, rto_max]`.
//! * Tail-loss probes (RFC 8985 spirit): with something unanswered and neither an
//!   acknowledgement nor a transmission for `max(2 srtt + ack_delay, tail_probe_min)`, one
//!   segment is resent (one declared lost and waiting for the window, else the oldest
//!   unanswered) whatever the window, without touching it; up to `tail_probes` times per quiet
//!   period, the timeout doubling each time. A single lost segment at the end of a burst (or a
//!   lost last ACK that stops the ACK clock) is repaired after a probe timeout, well before
//!   `rto_min`, which can therefore stay above this machine's multi-millisecond stalls.
//! * A timer expiry is found spurious (F-RTO's test, RFC 5682) when the next cumulative
//!   progress covers a segment it declared lost and that was not resent since: the copy sent
//!   before the expiry arrived, the peer (or this process) was stalled. The congestion window
//!   is restored and the remaining segments it declared lost are presumed in the network
//!   again, with a fresh timer, instead of all being resent. Only with `selective_ack`: without
//!   it the sender never learnt of segments received beyond a hole.
//! * With data outstanding and no cumulative progress for `fail_after` (`peer_timeout` while
//!   the driver says this is the peer's sole working path, [`Connection::set_sole_path`]), the
//!   connection fails: it reports [`Event::PathFailed`], stops sending data, and
//!   [`Connection::take_unacknowledged`] hands every message not fully acknowledged back, in
//!   order, for another rail. The driver never measures the silence itself.
//!
//! # Timers
//!
//! Every deadline lives in one [`TimerTable`] ([`Timer::Ack`], [`Timer::Retransmit`],
//! [`Timer::TailProbe`], [`Timer::PathFailure`]). The delayed-ACK timer is set and stopped
//! where ACKs are scheduled and sent; the other three follow from the sender's state and are
//! re-armed (`rearm`) at the end of every public method that changes that state, so
//! [`Connection::poll_timeout`] is the table's earliest deadline.
//!
//! # Calling order
//!
//! Method groups as in quinn-proto: getters; `handle_*` (input from the network or a timer);
//! mutators (`send`, `take_unacknowledged`, `recycle`, `set_sole_path`); `poll_*` (output).
//! After any input or mutation, call `poll_deliver` until `None`, then `poll_transmit` until
//! `None`, then `poll_timeout` to learn when to call `handle_timeout`; after `handle_timeout`,
//! call `poll_event` until `None`. A driver should hand over the
//! datagrams it has already received before running due timers: after this process was
//! descheduled, the ACKs waiting in its socket would otherwise arrive after a timer that
//! expired during the stall (the expiry is then undone, but its resends went out).
//!
//! # Memory bounds
//!
//! * send side: the bytes of accepted, unacknowledged messages (`max_send_queue_bytes`, beyond
//!   which `send` reports [`SendError::WouldBlock`]) plus one record per unacknowledged segment
//!   (`window`) and a transmission log compacted back under `4 * window + 64` entries after
//!   every ACK;
//! * receive side: out-of-order segments within the window, one message in reassembly
//!   (`max_message`), and complete messages up to `max_recv_queue_bytes` (past that the
//!   receiver stops advancing until [`Connection::poll_deliver`] drains them).
//!
//! A message can be delivered by the peer even though its last ACK never came back; after a
//! failover the layer above may therefore see it twice and must deduplicate (the pml's per-peer
//! sequence numbers do).

use std::collections::VecDeque;
use std::fmt;
use std::time::{Duration, Instant};

use super::config::{Config, ConfigError};
use super::congestion::Congestion;
use super::event::{Event, FailureLimit};
use super::timer::{Timer, TimerTable};
use super::wire::{self, Body, Header};

mod pool;
mod receiver;
mod rtt;
mod sender;
mod stats;

use pool::BufferPool;
use rtt::{RttEstimator, MAX_BACKOFF};
pub use stats::ConnStats;

/// Why [`Connection::send`] refused a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SendError {
    /// The send queue is full; retry after acknowledgements arrive (after `handle_datagram`).
    WouldBlock,
    /// The message exceeds `max_message`; the layer above must split it.
    TooLarge {
        /// Length of the message.
        len: usize,
        /// The configured limit.
        max: usize,
    },
    /// The connection has failed ([`Event::PathFailed`]); take its unacknowledged messages to
    /// another rail.
    Failed,
    /// The connection was closed by `take_unacknowledged`.
    Closed,
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SendError::WouldBlock => write!(f, "usnic reliable connection: send queue full, retry after progress"),
            SendError::TooLarge { len, max } => write!(
                f,
                "usnic reliable connection: message of {len} bytes exceeds the {max}-byte limit; split it above the reliability layer or raise KESTREL_USNIC_MAX_MESSAGE"
            ),
            SendError::Failed => write!(f, "usnic reliable connection: the rail to this peer has failed; resend its unacknowledged messages on another rail"),
            SendError::Closed => write!(f, "usnic reliable connection: closed after failover"),
        }
    }
}

impl std::error::Error for SendError {}

#[derive(Debug)]
struct OutMessage {
    am: u8,
    data: Vec<u8>,
}

/// An unacknowledged segment, at `in_flight[seq - snd_una]`.
#[derive(Debug, Clone, Copy)]
struct SentSegment {
    /// Absolute number of its message (`messages[msg - msg_base]`).
    msg: u64,
    offset: u32,
    len: u16,
    /// The message's final segment.
    last: bool,
    /// Time of the latest transmission.
    sent_at: Instant,
    /// Transmission number of the latest transmission.
    order: u64,
    transmissions: u32,
    /// The receiver reported it buffered (it is no longer retransmitted).
    sacked: bool,
    /// Declared lost and queued in `resend`.
    lost: bool,
    /// Declared lost by the retransmission timer (not by the order rule).
    timed_out: bool,
}

/// One transmission, in `tx_log` (in transmission order).
#[derive(Debug, Clone, Copy)]
struct TxRecord {
    sent_at: Instant,
    order: u64,
    seq: u16,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LossReason {
    Timeout,
    Fast,
}

/// A segment received ahead of the next expected one.
#[derive(Debug)]
struct RecvSegment {
    am: u8,
    msg_len: u32,
    offset: u32,
    data: Vec<u8>,
}

#[derive(Debug)]
struct Assembly {
    am: u8,
    msg_len: u32,
    buf: Vec<u8>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Open,
    /// No acknowledgement progress for the failure limit; data is no longer sent.
    Failed,
    /// `take_unacknowledged` was called; nothing is sent or accepted.
    Closed,
}

/// Whether a segment counts in `pipe`: transmitted, and neither reported received nor
/// declared lost (a lost one is back in the pipe when resent).
#[inline]
fn in_pipe(seg: &SentSegment) -> bool {
    seg.transmissions > 0 && !seg.sacked && !seg.lost
}

/// The reliable channel to one peer over one rail. See the module doc for the protocol and the
/// calling order.
#[derive(Debug)]
pub struct Connection {
    cfg: Config,
    key: u64,
    local: (u32, u8),
    remote: (u32, u8),
    state: State,
    stats: ConnStats,
    pool: BufferPool,
    /// Every deadline (see the module doc, "Timers").
    timers: TimerTable,
    /// The driver has no other working path to this peer: failure waits for `peer_timeout`.
    sole_path: bool,
    /// Reported, not yet taken by `poll_event` (at most one `PathFailed`).
    events: VecDeque<Event>,

    // --- sender ---
    /// Accepted messages not yet fully acknowledged, oldest first.
    messages: VecDeque<OutMessage>,
    /// Absolute number of `messages[0]`.
    msg_base: u64,
    /// Next unsegmented byte: message number and offset.
    cut_msg: u64,
    cut_offset: u32,
    queued_bytes: usize,
    /// Oldest unacknowledged sequence number (`in_flight[0]`).
    snd_una: u16,
    in_flight: VecDeque<SentSegment>,
    /// Segments declared lost, to retransmit (entries whose segment was acknowledged since are
    /// skipped).
    resend: VecDeque<(u16, LossReason)>,
    /// Every transmission still possibly unanswered, in transmission order. Its front is
    /// kept live (see `is_live`) so the timer deadline is the front's.
    tx_log: VecDeque<TxRecord>,
    next_order: u64,
    /// Highest transmission number known delivered (0: none yet).
    delivered_order: u64,
    /// The `snd_una` duplicate ACKs already caused a retransmission for.
    fast_resent_una: Option<u16>,
    /// Duplicate ACKs received since `snd_una` last moved, up to the fast retransmission.
    dup_acks_for_una: u16,
    /// Duplicate ACKs received since `snd_una` last moved, all of them: without selective
    /// ACKs, each one is a segment that left the network (NewReno's window inflation).
    dup_ack_credit: u32,
    /// Last cumulative progress, or when data became outstanding.
    last_progress: Instant,
    rtt: RttEstimator,
    cc: Congestion,
    /// Segments transmitted and neither acknowledged, reported received nor declared lost:
    /// what the network holds, kept below the congestion window (see `in_pipe`).
    pipe: u32,
    /// Set by a timer expiry until the next cumulative progress: transmissions numbered below
    /// it left before the expiry. If that progress covers one of them not resent since, the
    /// expiry was spurious (F-RTO's test, RFC 5682, without its extra round trip).
    rto_order: Option<u64>,
    /// Tail-loss probes sent since the last acknowledgement progress.
    probes: u32,
    /// The probe timer runs from here: the last transmission or acknowledgement progress.
    probe_base: Instant,
    /// The probe timer expired: the next `poll_transmit` sends one segment, window or not.
    probe_due: bool,

    // --- receiver ---
    /// Next sequence number expected in order.
    rcv_next: u16,
    /// The segment received last, new or a duplicate of a buffered one (echoed in standalone
    /// ACKs as `latest`).
    rcv_latest: u16,
    /// `ooo[i]` holds segment `rcv_next + i` if it arrived early; grows only as far as needed.
    ooo: VecDeque<Option<RecvSegment>>,
    assembling: Option<Assembly>,
    ready: VecDeque<(u8, Vec<u8>)>,
    ready_bytes: usize,
    /// A standalone ACK must go out before any data (loss or duplicate signal to the sender).
    ack_signal: bool,
    /// An ACK is due now (piggybacked on data if there is any).
    ack_now: bool,
    unacked_segments: u32,
}

impl Connection {
    /// A connection from `local` (rank, rail) to `remote` (rank, rail), for a job with `key`.
    /// Sequence numbers start at 0 both ways unless [`Connection::with_initial_sequences`]
    /// says otherwise.
    pub fn new(
        cfg: Config,
        key: u64,
        local: (u32, u8),
        remote: (u32, u8),
        now: Instant,
    ) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let cc = Congestion::new(&cfg);
        Ok(Connection {
            cfg,
            key,
            local,
            remote,
            state: State::Open,
            stats: ConnStats::default(),
            pool: BufferPool::default(),
            timers: TimerTable::default(),
            sole_path: false,
            events: VecDeque::new(),
            messages: VecDeque::new(),
            msg_base: 0,
            cut_msg: 0,
            cut_offset: 0,
            queued_bytes: 0,
            snd_una: 0,
            in_flight: VecDeque::new(),
            resend: VecDeque::new(),
            tx_log: VecDeque::new(),
            next_order: 1,
            delivered_order: 0,
            fast_resent_una: None,
            dup_acks_for_una: 0,
            dup_ack_credit: 0,
            last_progress: now,
            rtt: RttEstimator::default(),
            cc,
            pipe: 0,
            rto_order: None,
            probes: 0,
            probe_base: now,
            probe_due: false,
            rcv_next: 0,
            rcv_latest: u16::MAX,
            ooo: VecDeque::new(),
            assembling: None,
            ready: VecDeque::new(),
            ready_bytes: 0,
            ack_signal: false,
            ack_now: false,
            unacked_segments: 0,
        })
    }

    /// Starts the sequence spaces at `send` (this side's first segment) and `recv` (the peer's
    /// first segment), as exchanged out of band (a new connection on a rail that was used
    /// before should not start where the old one did). Only before any traffic; later calls
    /// are ignored.
    pub fn with_initial_sequences(mut self, send: u16, recv: u16) -> Self {
        let fresh = self.stats.segments_sent == 0
            && self.stats.segments_received == 0
            && self.in_flight.is_empty()
            && self.ooo.is_empty();
        if fresh {
            self.snd_una = send;
            self.rcv_next = recv;
            self.rcv_latest = recv.wrapping_sub(1);
        } else {
            tracing::warn!(target: "usnic", "initial sequence numbers set after traffic started; ignored");
        }
        self
    }

    // ------------------------------------------------------------------ getters

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.cfg
    }

    /// Counters.
    pub fn stats(&self) -> &ConnStats {
        &self.stats
    }

    /// (rank, rail) of this side.
    pub fn local(&self) -> (u32, u8) {
        self.local
    }

    /// (rank, rail) of the peer.
    pub fn remote(&self) -> (u32, u8) {
        self.remote
    }

    /// No acknowledgement progress for the failure limit while data was outstanding (the
    /// connection reported [`Event::PathFailed`]).
    pub fn is_failed(&self) -> bool {
        self.state == State::Failed
    }

    /// Closed by [`Connection::take_unacknowledged`].
    pub fn is_closed(&self) -> bool {
        self.state == State::Closed
    }

    /// When the peer last acknowledged something new (or data became outstanding), for
    /// failure messages.
    pub fn last_ack_progress(&self) -> Instant {
        self.last_progress
    }

    /// How long data has been outstanding without acknowledgement progress, at `now` (`None`
    /// when nothing is outstanding or the connection is not open): what the failure timer
    /// measures, for a driver that probes the peer's liveness.
    pub fn silent_for(&self, now: Instant) -> Option<Duration> {
        (self.state == State::Open && !self.in_flight.is_empty())
            .then(|| now.saturating_duration_since(self.last_progress))
    }

    /// Whether the driver declared this the peer's sole working path.
    pub fn is_sole_path(&self) -> bool {
        self.sole_path
    }

    /// The silence this connection is allowed before it fails: `fail_after`, or on the peer's
    /// sole path `peer_timeout` (never less than `fail_after`).
    pub fn failure_limit(&self) -> FailureLimit {
        if self.sole_path && self.cfg.peer_timeout > self.cfg.fail_after {
            FailureLimit::PeerTimeout(self.cfg.peer_timeout)
        } else {
            FailureLimit::FailAfter(self.cfg.fail_after)
        }
    }

    /// The deadline of one timer, if armed.
    pub fn timer(&self, timer: Timer) -> Option<Instant> {
        self.timers.get(timer)
    }

    /// Some accepted message is not fully acknowledged.
    pub fn has_unacknowledged(&self) -> bool {
        !self.messages.is_empty()
    }

    /// Nothing to send, nothing unacknowledged, no ACK owed, nothing waiting for delivery.
    pub fn is_idle(&self) -> bool {
        self.messages.is_empty() && !self.ack_pending() && self.ready.is_empty()
    }

    /// Unacknowledged segments.
    pub fn in_flight(&self) -> usize {
        self.in_flight.len()
    }

    /// Bytes of accepted, unacknowledged messages.
    pub fn queued_bytes(&self) -> usize {
        self.queued_bytes
    }

    /// The current retransmission timeout (with backoff).
    pub fn rto(&self) -> Duration {
        self.rtt.rto(&self.cfg)
    }

    /// The smoothed round-trip time, once measured.
    pub fn srtt(&self) -> Option<Duration> {
        self.rtt.srtt
    }

    /// The congestion window, in segments.
    pub fn cwnd(&self) -> u32 {
        self.cc.cwnd()
    }

    /// The slow-start threshold, in segments.
    pub fn ssthresh(&self) -> u32 {
        self.cc.ssthresh()
    }

    /// Segments presumed in the network (sent, not acknowledged, reported received or
    /// declared lost); new transmissions wait while it reaches [`Connection::cwnd`].
    pub fn pipe(&self) -> u32 {
        self.pipe
    }

    /// Checks the bookkeeping that is kept incrementally against a recount.
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        let recount = self.in_flight.iter().filter(|s| in_pipe(s)).count() as u32;
        assert_eq!(self.pipe, recount, "pipe drifted from its recount");
    }

    /// Everything but the counters, to check that an input changed nothing.
    #[cfg(test)]
    pub(crate) fn fingerprint(&mut self) -> String {
        let stats = std::mem::take(&mut self.stats);
        let s = format!("{self:?}");
        self.stats = stats;
        s
    }

    fn ack_pending(&self) -> bool {
        self.ack_signal || self.ack_now || self.timers.get(Timer::Ack).is_some()
    }

    /// Re-arms the timers that follow from the sender's state (every one but [`Timer::Ack`]).
    /// Called at the end of every public method that can change what they depend on: the
    /// state, `in_flight`, `tx_log`, `last_progress`, the round-trip estimate, the probe
    /// bookkeeping and `sole_path`. It changes nothing but the table.
    fn rearm(&mut self) {
        let armed = self.state == State::Open && !self.in_flight.is_empty();
        let (failure, retransmit, probe) = if armed {
            let rto = self.rtt.rto(&self.cfg);
            (
                self.last_progress
                    .checked_add(self.failure_limit().duration()),
                self.tx_log
                    .iter()
                    .find(|r| self.is_live(r))
                    .and_then(|r| r.sent_at.checked_add(rto)),
                self.probe_deadline(),
            )
        } else {
            (None, None, None)
        };
        self.timers.set_or_stop(Timer::PathFailure, failure);
        self.timers.set_or_stop(Timer::Retransmit, retransmit);
        self.timers.set_or_stop(Timer::TailProbe, probe);
    }

    /// The failure timer expired: no more data goes out, and the driver hears of it.
    fn fail(&mut self, now: Instant) {
        let limit = self.failure_limit();
        self.state = State::Failed;
        tracing::debug!(
            target: "usnic",
            peer_rank = self.remote.0,
            peer_rail = self.remote.1,
            local_rail = self.local.1,
            outstanding = self.in_flight.len(),
            silent_ms = now.saturating_duration_since(self.last_progress).as_millis() as u64,
            "{limit}; rail declared failed"
        );
        self.events.push_back(Event::PathFailed {
            limit,
            unacknowledged: self.in_flight.len(),
        });
    }

    // ------------------------------------------------------------------ handle_*

    /// Takes one datagram already decoded (and its key checked) by [`wire::decode`].
    /// Datagrams of another peer, rail or key, and inconsistent headers, are counted and
    /// ignored; nothing here can panic.
    pub fn handle_datagram(&mut self, now: Instant, header: &Header, payload: &[u8]) {
        if self.state == State::Closed {
            return;
        }
        if header.key != self.key
            || header.src_rank != self.remote.0
            || header.src_rail != self.remote.1
            || header.dst_rail != self.local.1
        {
            self.stats.misrouted += 1;
            return;
        }
        if payload.len() != usize::from(header.payload_len) || wire::check_rules(header).is_err() {
            self.stats.protocol_errors += 1;
            return;
        }
        match header.body {
            Body::Data(d) => {
                if let Some(ack) = d.ack {
                    self.on_ack(now, ack, None, false);
                }
                self.on_data(now, &d, payload);
            }
            Body::Ack { ack, sack, latest } => {
                self.stats.acks_received += 1;
                self.on_ack(now, ack, Some((sack, latest)), true);
            }
            Body::Probe | Body::ProbeReply => self.stats.probes_ignored += 1,
        }
        self.rearm();
    }

    /// Runs the timers that are due at `now` ([`TimerTable`]): delayed ACK, then failure, or
    /// else retransmission or a tail-loss probe. A failure is reported by
    /// [`Connection::poll_event`].
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.state == State::Closed {
            return;
        }
        if self.timers.is_expired(Timer::Ack, now) {
            self.timers.stop(Timer::Ack);
            self.ack_now = true;
        }
        if self.timers.is_expired(Timer::PathFailure, now) {
            self.fail(now);
        } else if self.state == State::Open && !self.in_flight.is_empty() {
            // Trimming retires records the table may have looked past; re-arm before asking.
            self.trim_tx_log();
            self.rearm();
            self.run_sender_timers(now);
        }
        self.rearm();
    }

    /// The retransmission timer, or else the tail-loss probe timer, if expired.
    fn run_sender_timers(&mut self, now: Instant) {
        if self.timers.is_expired(Timer::Retransmit, now) {
            self.stats.rto_events += 1;
            let repeated = self.rto_order.is_some();
            if !repeated {
                self.rto_order = Some(self.next_order);
            }
            self.cc
                .on_timeout(repeated, self.next_order, self.snd_nxt());
            // Everything still unanswered is declared lost (RFC 6675, RACK-TLP): one expiry is
            // one recovery round. Expiring only the records older than the timeout would cut
            // recovery into many small rounds whenever retransmissions went out at different
            // times, each waiting for its own expiry. The congestion window, collapsed above,
            // paces their retransmission.
            let mut lost = 0usize;
            for rec in std::mem::take(&mut self.tx_log) {
                if self.is_live(&rec) {
                    self.mark_lost(rec.seq, LossReason::Timeout);
                    lost += 1;
                }
            }
            // The collapsed window lets only a few out per round trip: they must be the
            // oldest (the hole that holds the cumulative ACK back), not whatever was declared
            // lost first.
            self.resend.clear();
            for (i, seg) in self.in_flight.iter().enumerate() {
                if seg.lost {
                    let reason = if seg.timed_out {
                        LossReason::Timeout
                    } else {
                        LossReason::Fast
                    };
                    self.resend
                        .push_back((self.snd_una.wrapping_add(i as u16), reason));
                }
            }
            self.rtt.backoff = (self.rtt.backoff + 1).min(MAX_BACKOFF);
            tracing::debug!(
                target: "usnic",
                peer_rank = self.remote.0,
                peer_rail = self.remote.1,
                lost,
                next_rto_us = self.rtt.rto(&self.cfg).as_micros() as u64,
                "retransmission timer expired"
            );
        } else if self.timers.is_expired(Timer::TailProbe, now) {
            self.probe_due = true;
            self.probes += 1;
            self.probe_base = now;
        }
    }

    // ------------------------------------------------------------------ mutators

    /// Queues one message made of `parts` concatenated (copied; the caller's buffers are free
    /// on return), tagged with active-message tag `am`.
    pub fn send(&mut self, am: u8, parts: &[&[u8]]) -> Result<(), SendError> {
        match self.state {
            State::Open => {}
            State::Failed => return Err(SendError::Failed),
            State::Closed => return Err(SendError::Closed),
        }
        let len = parts.iter().fold(0usize, |a, p| a.saturating_add(p.len()));
        if len > self.cfg.max_message {
            return Err(SendError::TooLarge {
                len,
                max: self.cfg.max_message,
            });
        }
        if !self.messages.is_empty() && self.queued_bytes + len > self.cfg.max_send_queue_bytes {
            return Err(SendError::WouldBlock);
        }
        let mut data = self.pool.take(len);
        for p in parts {
            data.extend_from_slice(p);
        }
        self.messages.push_back(OutMessage { am, data });
        self.queued_bytes += len;
        self.stats.messages_queued += 1;
        Ok(())
    }

    /// Closes the connection and returns every message not fully acknowledged, in send order,
    /// so the layer above can send them over another rail. Complete received messages stay
    /// available to [`Connection::poll_deliver`]; a partly received one is dropped (its sender
    /// still holds it).
    pub fn take_unacknowledged(&mut self) -> Vec<(u8, Vec<u8>)> {
        let out: Vec<(u8, Vec<u8>)> = self.messages.drain(..).map(|m| (m.am, m.data)).collect();
        self.msg_base += out.len() as u64;
        self.cut_msg = self.msg_base;
        self.cut_offset = 0;
        self.queued_bytes = 0;
        self.in_flight.clear();
        self.pipe = 0;
        self.rto_order = None;
        self.probe_due = false;
        self.resend.clear();
        self.tx_log.clear();
        for seg in self.ooo.drain(..).flatten() {
            self.pool.give(seg.data);
        }
        self.assembling = None;
        self.ack_signal = false;
        self.ack_now = false;
        self.timers.stop(Timer::Ack);
        self.state = State::Closed;
        self.rearm();
        out
    }

    /// Tells the connection whether it is its peer's sole working path (the driver's view of
    /// the other paths). A sole path fails after `peer_timeout` instead of `fail_after`;
    /// losing that status with the silence already past `fail_after` makes the next
    /// `handle_timeout` fail it.
    pub fn set_sole_path(&mut self, sole: bool) {
        self.sole_path = sole;
        self.rearm();
    }

    /// The driver learned, outside this connection, that the peer's process is alive and the
    /// path's link works (its liveness responder answered over the same link at `now`): the
    /// peer is only busy, so the failure clock restarts. Also called when the driver itself was
    /// away (not listening) for a long time: silence it did not listen to is no evidence.
    /// Retransmissions go on as before.
    pub fn peer_alive(&mut self, now: Instant) {
        if self.state == State::Open && !self.in_flight.is_empty() {
            self.last_progress = self.last_progress.max(now);
            self.rearm();
        }
    }

    /// Gives a buffer from [`Connection::poll_deliver`] back for reuse (optional; avoids an
    /// allocation per small message).
    pub fn recycle(&mut self, buf: Vec<u8>) {
        self.pool.give(buf);
    }

    // ------------------------------------------------------------------ poll_*

    /// The next complete message, in send order: (active-message tag, bytes). Each message is
    /// returned exactly once. The buffer is the caller's; [`Connection::recycle`] takes it back.
    pub fn poll_deliver(&mut self) -> Option<(u8, Vec<u8>)> {
        let was_stalled = self.recv_stalled();
        let (am, data) = self.ready.pop_front()?;
        self.ready_bytes -= data.len();
        self.stats.messages_delivered += 1;
        if was_stalled && !self.recv_stalled() && self.drain_buffered() > 0 {
            self.ack_now = true;
        }
        Some((am, data))
    }

    /// Writes the next datagram (header and payload) into `buf` and returns its length, or
    /// `None` when nothing is to be sent now. `buf` must hold `max_datagram` bytes (a smaller
    /// one gets nothing). Order: a loss/duplicate ACK, retransmissions, new segments within
    /// the window (each carrying the cumulative ACK), then a due standalone ACK. Data, new or
    /// resent, goes out only while the congestion window has room.
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let n = self.next_datagram(now, buf);
        self.rearm();
        n
    }

    /// [`Connection::poll_transmit`] before the timers are re-armed.
    fn next_datagram(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        if self.state == State::Closed || buf.len() < self.cfg.max_datagram {
            return None;
        }
        if self.ack_signal {
            return self.write_ack(buf);
        }
        if self.probe_due && self.state == State::Open {
            self.probe_due = false;
            if let Some(idx) = self.probe_target() {
                self.stats.resent_probe += 1;
                let n = self.transmit(idx, now, buf);
                self.trim_tx_log();
                return n;
            }
        }
        if self.state == State::Open && self.cc.can_send(self.cc_pipe()) {
            while let Some((seq, reason)) = self.resend.pop_front() {
                let Some(idx) = self.index_of(seq) else {
                    continue;
                };
                if !self.in_flight[idx].lost {
                    continue;
                }
                match reason {
                    LossReason::Timeout => self.stats.resent_timeout += 1,
                    LossReason::Fast => self.stats.resent_fast += 1,
                }
                let n = self.transmit(idx, now, buf);
                self.trim_tx_log();
                return n;
            }
            if self.in_flight.len() < usize::from(self.cfg.window) && self.cut_next(now) {
                let idx = self.in_flight.len() - 1;
                let n = self.transmit(idx, now, buf);
                if n.is_some() {
                    self.stats.segments_sent += 1;
                    self.stats.payload_bytes_sent += u64::from(self.in_flight[idx].len);
                }
                return n;
            }
        }
        if self.ack_now || self.timers.is_expired(Timer::Ack, now) {
            return self.write_ack(buf);
        }
        None
    }

    /// When [`Connection::handle_timeout`] should next run (delayed ACK, retransmission,
    /// tail-loss probe, failure): the earliest deadline of the [`TimerTable`], or `None` if no
    /// timer is armed.
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_timeout()
    }

    /// The next event for the driver ([`Event::PathFailed`]), once each.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}
