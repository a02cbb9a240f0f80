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
use super::congestion::{Congestion, LossResponse};
use super::event::{Event, FailureLimit};
use super::timer::{Timer, TimerTable};
use super::wire::{self, seq_diff, Body, DataFields, Header, HEADER_LEN};

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

/// Counters of one connection (per peer and rail).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnStats {
    /// Messages accepted by `send`.
    pub messages_queued: u64,
    /// Messages whose every segment the peer acknowledged.
    pub messages_acked: u64,
    /// Messages handed out by `poll_deliver`.
    pub messages_delivered: u64,
    /// DATA segments sent for the first time.
    pub segments_sent: u64,
    /// Payload bytes of those.
    pub payload_bytes_sent: u64,
    /// Segments retransmitted because the retransmission timer expired.
    pub resent_timeout: u64,
    /// Segments retransmitted early (duplicate ACK, or later segments acknowledged).
    pub resent_fast: u64,
    /// Segments resent as tail-loss probes (no acknowledgement for the probe timeout).
    pub resent_probe: u64,
    /// Expiries of the retransmission timer.
    pub rto_events: u64,
    /// Standalone ACKs sent.
    pub acks_sent: u64,
    /// Standalone ACKs received.
    pub acks_received: u64,
    /// Standalone ACKs received that acknowledged nothing new while data was outstanding.
    pub dup_acks: u64,
    /// Segments first acknowledged selectively (bitmap or newest-received field).
    pub sacked: u64,
    /// ACKs for segments never sent (ignored).
    pub bogus_acks: u64,
    /// New DATA segments accepted within the window.
    pub segments_received: u64,
    /// DATA segments received again (already delivered or already buffered).
    pub duplicates: u64,
    /// DATA segments beyond the receive window.
    pub out_of_window: u64,
    /// Datagrams whose key, rank or rails do not belong to this connection.
    pub misrouted: u64,
    /// Segments that break framing (wrong offset, message too large, inconsistent fields).
    pub protocol_errors: u64,
    /// PROBE / PROBE_REPLY datagrams passed here (the transport above should handle them).
    pub probes_ignored: u64,
    /// In-order segments held unacknowledged because undelivered messages reached
    /// `max_recv_queue_bytes`.
    pub recv_stalls: u64,
    /// Congestion-window halvings (loss episodes found without the timer, with a queue).
    pub cwnd_reductions: u64,
    /// Loss episodes found without the timer and without a standing queue (random loss or
    /// reordering): the window was kept.
    pub losses_without_queue: u64,
    /// Timer expiries found spurious afterwards (the cumulative ACK covered segments sent
    /// before the expiry and not since): the window was restored.
    pub spurious_timeouts: u64,
}

impl fmt::Display for ConnStats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "msgs {}/{}/{} (queued/acked/delivered) segs sent {} ({} B) resent {}+{}+{} (timeout+fast+probe, {} timer expiries, {} spurious) cwnd halvings {} kept {} acks {}/{} (out/in, {} dup, {} sacked, {} bogus) segs recv {} dup {} out-of-window {} misrouted {} protocol-errors {} stalls {}",
            self.messages_queued,
            self.messages_acked,
            self.messages_delivered,
            self.segments_sent,
            self.payload_bytes_sent,
            self.resent_timeout,
            self.resent_fast,
            self.resent_probe,
            self.rto_events,
            self.spurious_timeouts,
            self.cwnd_reductions,
            self.losses_without_queue,
            self.acks_sent,
            self.acks_received,
            self.dup_acks,
            self.sacked,
            self.bogus_acks,
            self.segments_received,
            self.duplicates,
            self.out_of_window,
            self.misrouted,
            self.protocol_errors,
            self.recv_stalls,
        )
    }
}

/// Buffers kept for reuse, so that steady traffic does not allocate.
const POOL_BUFFERS: usize = 256;
/// Larger buffers are freed rather than kept (a 4 MiB reassembly buffer is not worth holding).
const POOL_MAX_CAPACITY: usize = 64 << 10;
/// Backoff doublings beyond which the timeout is at `rto_max` anyway.
const MAX_BACKOFF: u32 = 16;

#[derive(Debug, Default)]
struct BufferPool {
    free: Vec<Vec<u8>>,
}

impl BufferPool {
    fn take(&mut self, len: usize) -> Vec<u8> {
        match self.free.pop() {
            Some(mut v) => {
                v.clear();
                v.reserve(len);
                v
            }
            None => Vec::with_capacity(len),
        }
    }

    fn give(&mut self, v: Vec<u8>) {
        if v.capacity() != 0 && v.capacity() <= POOL_MAX_CAPACITY && self.free.len() < POOL_BUFFERS
        {
            self.free.push(v);
        }
    }
}

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

/// Round-trip estimation after RFC 6298.
#[derive(Debug, Clone, Copy, Default)]
struct RttEstimator {
    srtt: Option<Duration>,
    rttvar: Duration,
    backoff: u32,
}

impl RttEstimator {
    fn sample(&mut self, rtt: Duration) {
        // A valid measurement replaces whatever the backoff guessed.
        self.backoff = 0;
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// The path delivers: drop the backoff, unless no round trip was ever measured. Then the
    /// backed-off timeout is kept until a sample exists (RFC 6298 5.7), or a first timeout
    /// shorter than the path's round trip would retransmit every segment before its ACK and
    /// Karn's rule would never let a sample through.
    fn progress(&mut self) {
        if self.srtt.is_some() {
            self.backoff = 0;
        }
    }

    fn rto(&self, cfg: &Config) -> Duration {
        let base = match self.srtt {
            None => cfg.rto_initial,
            Some(srtt) => (srtt + self.rttvar * 4).clamp(cfg.rto_min, cfg.rto_max),
        };
        base.saturating_mul(1 << self.backoff.min(MAX_BACKOFF))
            .min(cfg.rto_max)
    }
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

    // ------------------------------------------------------------------ sender internals

    /// When the next tail-loss probe is due, if one may be sent: something is unanswered,
    /// fewer than `tail_probes` probes went out since the last progress, and no timer expiry
    /// is being recovered from (the window already paces that).
    fn probe_deadline(&self) -> Option<Instant> {
        if self.probes >= u32::from(self.cfg.tail_probes)
            || self.rto_order.is_some()
            || self.state != State::Open
            || self.probe_due
            || self.tx_log.is_empty()
        {
            return None;
        }
        // RFC 8985's 2 * SRTT, plus the time the peer may hold its ACK.
        let base = match self.rtt.srtt {
            Some(srtt) => srtt * 2 + self.cfg.ack_delay,
            None => self.cfg.rto_initial,
        };
        let pto = base
            .max(self.cfg.tail_probe_min)
            .saturating_mul(1 << self.probes.min(MAX_BACKOFF))
            .min(self.cfg.rto_max);
        self.probe_base.checked_add(pto)
    }

    /// The segment a tail-loss probe resends: one declared lost and still waiting for the
    /// window, else the oldest transmission still unanswered (the likeliest hole; if it did
    /// arrive, the peer's answer to the duplicate restarts the ACK clock).
    fn probe_target(&mut self) -> Option<usize> {
        while let Some(&(seq, _)) = self.resend.front() {
            match self.index_of(seq) {
                Some(idx) if self.in_flight[idx].lost => return Some(idx),
                _ => {
                    self.resend.pop_front();
                }
            }
        }
        self.trim_tx_log();
        let rec = self.tx_log.front()?;
        self.index_of(rec.seq)
    }

    /// What the congestion window is compared with: the pipe, less (without selective ACKs,
    /// which shrink the pipe precisely) one segment per duplicate ACK.
    #[inline]
    fn cc_pipe(&self) -> u32 {
        if self.cfg.selective_ack {
            self.pipe
        } else {
            self.pipe.saturating_sub(self.dup_ack_credit)
        }
    }

    /// The sequence number the next new segment gets.
    fn snd_nxt(&self) -> u16 {
        self.snd_una.wrapping_add(self.in_flight.len() as u16)
    }

    fn index_of(&self, seq: u16) -> Option<usize> {
        let d = seq_diff(seq, self.snd_una);
        (d >= 0 && (d as usize) < self.in_flight.len()).then_some(d as usize)
    }

    /// A transmission record still matters: its segment is unacknowledged, not reported
    /// received, not already queued for retransmission, and this is its latest transmission.
    fn is_live(&self, rec: &TxRecord) -> bool {
        self.index_of(rec.seq).is_some_and(|i| {
            let s = &self.in_flight[i];
            s.order == rec.order && !s.sacked && !s.lost
        })
    }

    fn trim_tx_log(&mut self) {
        while let Some(rec) = self.tx_log.front() {
            if self.is_live(rec) {
                break;
            }
            self.tx_log.pop_front();
        }
        // Dead records behind a live front are dropped when they reach the front; bound
        // their number so memory stays proportional to the window.
        if self.tx_log.len() > 4 * usize::from(self.cfg.window) + 64 {
            let mut log = std::mem::take(&mut self.tx_log);
            log.retain(|r| self.is_live(r));
            self.tx_log = log;
        }
    }

    fn mark_lost(&mut self, seq: u16, reason: LossReason) {
        let Some(i) = self.index_of(seq) else {
            return;
        };
        let seg = &mut self.in_flight[i];
        if seg.lost || seg.sacked {
            return;
        }
        if in_pipe(seg) {
            self.pipe -= 1;
        }
        seg.lost = true;
        seg.timed_out = reason == LossReason::Timeout;
        let order = seg.order;
        self.resend.push_back((seq, reason));
        if reason != LossReason::Fast {
            return;
        }
        match self.cc.on_fast_loss(order, self.next_order, self.snd_nxt()) {
            LossResponse::SameEpisode => {}
            LossResponse::NoQueue => self.stats.losses_without_queue += 1,
            LossResponse::Reduced => {
                self.stats.cwnd_reductions += 1;
                tracing::debug!(
                    target: "usnic",
                    peer_rank = self.remote.0,
                    peer_rail = self.remote.1,
                    cwnd = self.cc.cwnd(),
                    "loss with a standing queue: congestion window reduced"
                );
            }
        }
    }

    /// The expiry in `rto_order` proved spurious: segments it declared lost and that were not
    /// resent since are presumed in the network again (their copy is probably in the peer's
    /// receive buffer), each with a fresh timer, instead of all being resent.
    fn undo_timeout_losses(&mut self, rto_order: u64, now: Instant) {
        let mut restored: Vec<TxRecord> = Vec::new();
        for (i, seg) in self.in_flight.iter_mut().enumerate() {
            if seg.lost && seg.timed_out && seg.order < rto_order {
                seg.lost = false;
                self.pipe += 1;
                restored.push(TxRecord {
                    sent_at: now,
                    order: seg.order,
                    seq: self.snd_una.wrapping_add(i as u16),
                });
            }
        }
        // Older transmissions than anything sent since the expiry: they go first, in order.
        restored.sort_unstable_by_key(|r| r.order);
        for rec in restored.into_iter().rev() {
            self.tx_log.push_front(rec);
        }
        let undone = self.cc.undo_timeout();
        self.stats.spurious_timeouts += 1;
        tracing::debug!(
            target: "usnic",
            peer_rank = self.remote.0,
            peer_rail = self.remote.1,
            window_restored = undone,
            cwnd = self.cc.cwnd(),
            "retransmission timeout was spurious: segments sent before it were acknowledged"
        );
    }

    /// Cuts the next segment from the unsegmented data, if any, into `in_flight`.
    fn cut_next(&mut self, now: Instant) -> bool {
        let Some(msg) = self
            .cut_msg
            .checked_sub(self.msg_base)
            .and_then(|i| self.messages.get(i as usize))
        else {
            return false;
        };
        let remaining = msg.data.len() - self.cut_offset as usize;
        let len = remaining.min(self.cfg.max_payload());
        let last = len == remaining;
        if self.in_flight.is_empty() {
            // Failure is measured from when data became outstanding.
            self.last_progress = now;
        }
        self.in_flight.push_back(SentSegment {
            msg: self.cut_msg,
            offset: self.cut_offset,
            len: len as u16,
            last,
            sent_at: now,
            order: 0,
            transmissions: 0,
            sacked: false,
            lost: false,
            timed_out: false,
        });
        if last {
            self.cut_msg += 1;
            self.cut_offset = 0;
        } else {
            self.cut_offset += len as u32;
        }
        true
    }

    /// Writes segment `in_flight[idx]` into `buf` and records the transmission.
    fn transmit(&mut self, idx: usize, now: Instant, buf: &mut [u8]) -> Option<usize> {
        let seq = self.snd_una.wrapping_add(idx as u16);
        let seg = self.in_flight[idx];
        let msg = seg
            .msg
            .checked_sub(self.msg_base)
            .and_then(|i| self.messages.get(i as usize))?;
        let header = Header {
            key: self.key,
            src_rank: self.local.0,
            src_rail: self.local.1,
            dst_rail: self.remote.1,
            payload_len: seg.len,
            body: Body::Data(DataFields {
                seq,
                ack: Some(self.rcv_next.wrapping_sub(1)),
                am: msg.am,
                msg_len: msg.data.len() as u32,
                offset: seg.offset,
            }),
        };
        let start = seg.offset as usize;
        let end = start + usize::from(seg.len);
        let total = HEADER_LEN + usize::from(seg.len);
        if let Err(e) = wire::write_header(&header, buf) {
            tracing::error!(target: "usnic", "cannot encode a DATA header: {e}");
            return None;
        }
        buf[HEADER_LEN..total].copy_from_slice(&msg.data[start..end]);
        let order = self.next_order;
        self.next_order += 1;
        let s = &mut self.in_flight[idx];
        // New, or resent after being declared lost: (back) in the pipe. A probe may also resend
        // a segment that is still presumed in the network.
        let counted = in_pipe(s);
        s.sent_at = now;
        s.order = order;
        s.transmissions += 1;
        s.lost = false;
        s.timed_out = false;
        if !counted {
            self.pipe += 1;
        }
        self.probe_base = now;
        self.cc.on_transmit(self.cc_pipe());
        self.tx_log.push_back(TxRecord {
            sent_at: now,
            order,
            seq,
        });
        // The cumulative ACK rode along; a loss signal still needs its standalone ACK.
        self.ack_now = false;
        self.timers.stop(Timer::Ack);
        self.unacked_segments = 0;
        Some(total)
    }

    /// Processes a cumulative ACK and, from standalone ACKs, the selective part:
    /// `(bitmap, newest segment received)`.
    fn on_ack(&mut self, now: Instant, ack: u16, selective: Option<(u64, u16)>, standalone: bool) {
        if self.state == State::Closed {
            return;
        }
        let advance = seq_diff(ack.wrapping_add(1), self.snd_una);
        if advance < 0 {
            return; // an old ACK, overtaken by a newer one
        }
        let advance = advance as usize;
        if advance > self.in_flight.len() {
            self.stats.bogus_acks += 1;
            return;
        }
        let mut sample: Option<(u64, Instant)> = None;
        // Only a segment sent once says unambiguously which transmission arrived (Karn): a
        // retransmitted one may be answered for its first copy, and taking its latest
        // transmission number would declare everything sent in between lost.
        let note = |seg: &SentSegment, delivered: &mut u64, sample: &mut Option<(u64, Instant)>| {
            if seg.transmissions == 1 {
                *delivered = (*delivered).max(seg.order);
                if sample.is_none_or(|(o, _)| seg.order > o) {
                    *sample = Some((seg.order, seg.sent_at));
                }
            }
        };
        let mut newly = 0u32;
        let mut spurious_rto = false;
        if advance > 0 {
            let mut hole_filled = false;
            for _ in 0..advance {
                let Some(seg) = self.in_flight.pop_front() else {
                    break;
                };
                if in_pipe(&seg) {
                    self.pipe -= 1;
                }
                if !seg.sacked {
                    newly += 1;
                    hole_filled |= seg.transmissions > 1;
                    note(&seg, &mut self.delivered_order, &mut sample);
                }
                // Declared lost by the timer and not resent since, yet received: the copy sent
                // before the expiry arrived.
                if self
                    .rto_order
                    .is_some_and(|o| seg.lost && seg.timed_out && seg.order < o)
                {
                    spurious_rto = true;
                }
                if seg.last && seg.msg == self.msg_base {
                    if let Some(m) = self.messages.pop_front() {
                        self.queued_bytes -= m.data.len();
                        self.pool.give(m.data);
                    }
                    self.msg_base += 1;
                    self.stats.messages_acked += 1;
                }
            }
            self.snd_una = self.snd_una.wrapping_add(advance as u16);
            if hole_filled {
                // A cumulative ACK that fills a hole also covers segments that arrived long
                // before (without selective ACKs the sender never heard of them): their wait
                // for the repair is no round trip.
                sample = None;
            }
            if let Some(rto_order) = self.rto_order.take() {
                // Without selective ACKs the sender never learnt of segments received beyond
                // a hole, so the cumulative ACK jumping over them once the hole is filled is
                // no evidence.
                if spurious_rto && self.cfg.selective_ack {
                    self.undo_timeout_losses(rto_order, now);
                } else {
                    self.cc.confirm_timeout();
                }
            }
            self.last_progress = now;
            self.rtt.progress();
            self.fast_resent_una = None;
            self.dup_acks_for_una = 0;
            self.dup_ack_credit = 0;
            if !self.cfg.selective_ack && self.cc.in_fast_recovery() && !self.in_flight.is_empty() {
                // A partial ACK in fast recovery: the next hole is lost too (NewReno, RFC 6582).
                self.fast_resent_una = Some(self.snd_una);
                self.mark_lost(self.snd_una, LossReason::Fast);
            }
        } else if standalone && !self.in_flight.is_empty() {
            self.stats.dup_acks += 1;
            self.dup_ack_credit = self.dup_ack_credit.saturating_add(1);
            // Without selective information, each duplicate ACK stands for one more segment
            // received past the first hole; `reorder_threshold` of them make it a loss (TCP's
            // three duplicate ACKs). With it, the order rule below sees the same thing more
            // precisely, and a duplicate ACK caused by a duplicated datagram is no evidence.
            if !self.cfg.selective_ack && self.fast_resent_una != Some(self.snd_una) {
                self.dup_acks_for_una += 1;
                if self.dup_acks_for_una >= self.cfg.reorder_threshold {
                    self.fast_resent_una = Some(self.snd_una);
                    self.mark_lost(self.snd_una, LossReason::Fast);
                }
            }
        }
        if let (Some((mut bits, latest)), true) = (selective, self.cfg.selective_ack) {
            let mut sack = |seq: u16, this: &mut Connection| {
                if let Some(i) = this.index_of(seq) {
                    let seg = &mut this.in_flight[i];
                    if !seg.sacked {
                        if in_pipe(seg) {
                            this.pipe -= 1;
                        }
                        seg.sacked = true;
                        seg.lost = false;
                        let seg = *seg;
                        this.stats.sacked += 1;
                        note(&seg, &mut this.delivered_order, &mut sample);
                    }
                }
            };
            let sacked_before = self.stats.sacked;
            while bits != 0 {
                let bit = bits.trailing_zeros() as u16;
                bits &= bits - 1;
                sack(ack.wrapping_add(2 + bit), self);
            }
            if seq_diff(latest, ack) > 0 {
                sack(latest, self);
            }
            if self.stats.sacked != sacked_before {
                newly += (self.stats.sacked - sacked_before) as u32;
                self.rtt.progress();
            }
        }
        if let Some((_, sent_at)) = sample {
            let rtt = now.saturating_duration_since(sent_at);
            self.rtt.sample(rtt);
            self.cc.on_rtt_sample(rtt, now);
        }
        if newly > 0 {
            self.probes = 0;
            self.probe_base = now;
        }
        if newly > 0 || advance > 0 {
            self.cc.on_ack(
                newly,
                self.delivered_order,
                self.next_order,
                self.snd_una,
                now,
            );
        }
        self.detect_lost_by_order();
        self.trim_tx_log();
    }

    /// Declares lost every live transmission followed by `reorder_threshold` delivered ones.
    fn detect_lost_by_order(&mut self) {
        let threshold = u64::from(self.cfg.reorder_threshold);
        while let Some(rec) = self.tx_log.front().copied() {
            if !self.is_live(&rec) {
                self.tx_log.pop_front();
            } else if rec.order + threshold <= self.delivered_order {
                self.tx_log.pop_front();
                self.mark_lost(rec.seq, LossReason::Fast);
            } else {
                break;
            }
        }
    }

    // ------------------------------------------------------------------ receiver internals

    fn recv_stalled(&self) -> bool {
        self.ready_bytes >= self.cfg.max_recv_queue_bytes
    }

    fn on_data(&mut self, now: Instant, d: &DataFields, payload: &[u8]) {
        let dist = seq_diff(d.seq, self.rcv_next);
        if dist < 0 {
            // Delivered already: our ACK was probably lost; repeat it at once.
            self.stats.duplicates += 1;
            self.ack_signal = true;
            return;
        }
        let idx = dist as usize;
        if idx >= usize::from(self.cfg.window) {
            self.stats.out_of_window += 1;
            self.ack_signal = true;
            return;
        }
        if d.msg_len as usize > self.cfg.max_message {
            self.protocol_error(d.seq, "message larger than max_message");
            return;
        }
        let slot_free = self.ooo.get(idx).is_none_or(|s| s.is_none());
        if !slot_free {
            // Buffered already: the sender missed the news (its ACK was lost, or the segment is
            // beyond the bitmap). Echo it, or the sender would keep declaring it lost.
            self.stats.duplicates += 1;
            self.rcv_latest = d.seq;
            self.ack_signal = true;
            return;
        }
        if idx == 0 && !self.recv_stalled() {
            if !self.consume(d.seq, d.am, d.msg_len, d.offset, payload) {
                return;
            }
            self.stats.segments_received += 1;
            self.rcv_latest = d.seq;
            self.rcv_next = self.rcv_next.wrapping_add(1);
            self.ooo.pop_front();
            let drained = self.drain_buffered();
            if drained > 0 {
                // A hole just closed: tell the sender at once, its window opens.
                self.ack_now = true;
            }
            self.schedule_ack(now, 1 + drained);
            return;
        }
        self.stats.segments_received += 1;
        self.rcv_latest = d.seq;
        while self.ooo.len() <= idx {
            self.ooo.push_back(None);
        }
        let mut data = self.pool.take(payload.len());
        data.extend_from_slice(payload);
        self.ooo[idx] = Some(RecvSegment {
            am: d.am,
            msg_len: d.msg_len,
            offset: d.offset,
            data,
        });
        if idx == 0 {
            // In order but the application is behind: held, not acknowledged.
            self.stats.recv_stalls += 1;
        } else {
            // Out of order: the sender learns of the hole from this ACK.
            self.ack_signal = true;
        }
    }

    fn schedule_ack(&mut self, now: Instant, segments: u32) {
        self.unacked_segments = self.unacked_segments.saturating_add(segments);
        if self.unacked_segments >= u32::from(self.cfg.ack_every) {
            self.ack_now = true;
        } else if self.timers.get(Timer::Ack).is_none() {
            self.timers.set(
                Timer::Ack,
                now.checked_add(self.cfg.ack_delay).unwrap_or(now),
            );
        }
    }

    /// Moves buffered in-order segments into messages; returns how many.
    fn drain_buffered(&mut self) -> u32 {
        let mut n = 0;
        while !self.recv_stalled() && matches!(self.ooo.front(), Some(Some(_))) {
            let Some(Some(seg)) = self.ooo.pop_front() else {
                break;
            };
            let seq = self.rcv_next;
            if self.consume(seq, seg.am, seg.msg_len, seg.offset, &seg.data) {
                self.rcv_next = self.rcv_next.wrapping_add(1);
                n += 1;
                self.pool.give(seg.data);
            } else {
                self.ooo.push_front(None);
                self.pool.give(seg.data);
                break;
            }
        }
        n
    }

    /// Appends the in-order segment to its message; false (and counted) if it does not fit
    /// the framing, in which case it is dropped unacknowledged.
    fn consume(&mut self, seq: u16, am: u8, msg_len: u32, offset: u32, payload: &[u8]) -> bool {
        let total = msg_len as usize;
        match self.assembling.as_mut() {
            None => {
                if offset != 0 {
                    self.protocol_error(seq, "a message must start at offset 0");
                    return false;
                }
                if payload.len() == total {
                    let mut buf = self.pool.take(total);
                    buf.extend_from_slice(payload);
                    self.push_ready(am, buf);
                } else {
                    let mut buf = Vec::with_capacity(total);
                    buf.extend_from_slice(payload);
                    self.assembling = Some(Assembly { am, msg_len, buf });
                }
            }
            Some(a) => {
                if a.am != am || a.msg_len != msg_len || offset as usize != a.buf.len() {
                    self.protocol_error(
                        seq,
                        "fragment does not continue the message in reassembly",
                    );
                    return false;
                }
                a.buf.extend_from_slice(payload);
                if a.buf.len() == total {
                    if let Some(a) = self.assembling.take() {
                        self.push_ready(a.am, a.buf);
                    }
                }
            }
        }
        true
    }

    fn push_ready(&mut self, am: u8, buf: Vec<u8>) {
        self.ready_bytes += buf.len();
        self.ready.push_back((am, buf));
    }

    fn protocol_error(&mut self, seq: u16, what: &str) {
        self.stats.protocol_errors += 1;
        tracing::warn!(
            target: "usnic",
            peer_rank = self.remote.0,
            peer_rail = self.remote.1,
            seq,
            "segment dropped: {what} (a peer of another build or a stale connection?)"
        );
    }

    /// A standalone ACK: cumulative ACK, the bitmap of buffered segments after the first hole,
    /// and the newest segment received.
    fn write_ack(&mut self, buf: &mut [u8]) -> Option<usize> {
        let mut sack = 0u64;
        for (bit, slot) in self.ooo.iter().skip(1).take(64).enumerate() {
            if slot.is_some() {
                sack |= 1 << bit;
            }
        }
        let header = Header {
            key: self.key,
            src_rank: self.local.0,
            src_rail: self.local.1,
            dst_rail: self.remote.1,
            payload_len: 0,
            body: Body::Ack {
                ack: self.rcv_next.wrapping_sub(1),
                sack,
                latest: self.rcv_latest,
            },
        };
        if let Err(e) = wire::write_header(&header, buf) {
            tracing::error!(target: "usnic", "cannot encode an ACK header: {e}");
            return None;
        }
        self.stats.acks_sent += 1;
        self.ack_signal = false;
        self.ack_now = false;
        self.timers.stop(Timer::Ack);
        self.unacked_segments = 0;
        Some(HEADER_LEN)
    }
}
