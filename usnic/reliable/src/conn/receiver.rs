//! The receiver half of a [`Connection`]: the receive window, out-of-order buffering,
//! reassembly into messages, the bound on undelivered bytes, and the ACKs it owes (delayed,
//! immediate, or loss and duplicate signals, with the selective bitmap).
//!
//! This module owns how data arrives and is acknowledged. It must never change the sender's
//! state, and never panic on anything a peer sends: framing errors are counted and dropped.

use std::time::Instant;

use super::{Assembly, Connection, RecvSegment};
use crate::timer::Timer;
use crate::wire::{self, seq_diff, Body, DataFields, Header, HEADER_LEN};

impl Connection {
    pub(super) fn recv_stalled(&self) -> bool {
        self.ready_bytes >= self.cfg.max_recv_queue_bytes
    }

    pub(super) fn on_data(&mut self, now: Instant, d: &DataFields, payload: &[u8]) {
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
    pub(super) fn drain_buffered(&mut self) -> u32 {
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
    pub(super) fn write_ack(&mut self, buf: &mut [u8]) -> Option<usize> {
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
