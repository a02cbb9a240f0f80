//! The sender half of a [`Connection`]: segmenting messages, transmitting within the flow
//! and congestion windows, processing ACKs (cumulative and selective), loss detection by
//! transmission order, spurious-timeout undo, and the tail-loss probe deadline.
//!
//! This module owns how data leaves and how its fate is learnt. It must never touch the
//! receive side's buffers (it reads `rcv_next` to piggyback the cumulative ACK, which stops the
//! delayed-ACK timer) and never arms a timer: the table follows from the state it leaves
//! (`rearm`).

use std::time::Instant;

use super::rtt::MAX_BACKOFF;
use super::{in_pipe, Connection, LossReason, SentSegment, State, TxRecord};
use crate::congestion::LossResponse;
use crate::timer::Timer;
use crate::wire::{self, seq_diff, Body, DataFields, Header, HEADER_LEN};

impl Connection {
    /// When the next tail-loss probe is due, if one may be sent: something is unanswered,
    /// fewer than `tail_probes` probes went out since the last progress, and no timer expiry
    /// is being recovered from (the window already paces that).
    pub(super) fn probe_deadline(&self) -> Option<Instant> {
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
    pub(super) fn probe_target(&mut self) -> Option<usize> {
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
    pub(super) fn cc_pipe(&self) -> u32 {
        if self.cfg.selective_ack {
            self.pipe
        } else {
            self.pipe.saturating_sub(self.dup_ack_credit)
        }
    }

    /// The sequence number the next new segment gets.
    pub(super) fn snd_nxt(&self) -> u16 {
        self.snd_una.wrapping_add(self.in_flight.len() as u16)
    }

    pub(super) fn index_of(&self, seq: u16) -> Option<usize> {
        let d = seq_diff(seq, self.snd_una);
        (d >= 0 && (d as usize) < self.in_flight.len()).then_some(d as usize)
    }

    /// A transmission record still matters: its segment is unacknowledged, not reported
    /// received, not already queued for retransmission, and this is its latest transmission.
    pub(super) fn is_live(&self, rec: &TxRecord) -> bool {
        self.index_of(rec.seq).is_some_and(|i| {
            let s = &self.in_flight[i];
            s.order == rec.order && !s.sacked && !s.lost
        })
    }

    pub(super) fn trim_tx_log(&mut self) {
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

    pub(super) fn mark_lost(&mut self, seq: u16, reason: LossReason) {
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
    pub(super) fn cut_next(&mut self, now: Instant) -> bool {
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
    pub(super) fn transmit(&mut self, idx: usize, now: Instant, buf: &mut [u8]) -> Option<usize> {
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
    pub(super) fn on_ack(
        &mut self,
        now: Instant,
        ack: u16,
        selective: Option<(u64, u16)>,
        standalone: bool,
    ) {
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
}
