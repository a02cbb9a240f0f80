//! The counters of one connection ([`ConnStats`]) and their one-line rendering.
//!
//! This module owns the counters' meaning; the connection increments them. It must never
//! hold state the protocol depends on: every counter is for people and tests only.

use std::fmt;

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
