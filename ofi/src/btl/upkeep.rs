//! The ofi transport's upkeep of its peers' paths: acknowledgements owed, frames sent again
//! after a failover, the timers (every `TICK_POLLS` progress calls), liveness probes and
//! their answers, and what a dead pair or a lost message does to the process.
//!
//! This module owns no state (the transport's [`OfiBtl`] does) and decides nothing about
//! paths ([`crate::paths`] does); it carries the decisions out. It must never block.

use std::time::Duration;

use kestrel_fabric::SendError as FabricSendError;

use super::{OfiBtl, FRAME_LEN};
use crate::paths::{Failure, PeerPaths};
use crate::wire::{self, Header, Kind};

impl OfiBtl {
    /// Sends an ack frame to `peer` on its active pair; if the provider has no slot, the ack
    /// stays owed and goes at a later tick.
    pub(super) fn send_ack(&mut self, peer: u32) {
        let Some(st) = self.peers.get_mut(peer as usize).and_then(Option::as_mut) else {
            return;
        };
        let pair = st.active();
        let header = Header {
            kind: Kind::Ack,
            am: 0,
            sender: self.me,
            key: self.key,
            seq: 0,
            ack: st.ack_value(),
            striped: false,
        };
        let sent = self.rails[pair.rail].endpoint.send_with(pair.addr, |slot| {
            wire::write_header(slot, &header);
            FRAME_LEN
        });
        if sent.is_ok() {
            st.acked_out();
            self.counters.acks_sent += 1;
        }
    }

    /// Sends an ack frame to every peer owed one (frames arrived since the last ack).
    pub(super) fn send_owed_acks(&mut self) {
        for peer in 0..self.peers.len() as u32 {
            if self.peers[peer as usize]
                .as_ref()
                .is_some_and(PeerPaths::owes_ack)
            {
                self.send_ack(peer);
            }
        }
    }

    /// Sends again, on the active pair, what `peer` kept after a failover, oldest first, as
    /// far as the provider takes it now.
    pub(super) fn flush_resends(&mut self, peer: u32) {
        let (me, key) = (self.me, self.key);
        let Some(st) = self.peers.get_mut(peer as usize).and_then(Option::as_mut) else {
            return;
        };
        while let Some((frame, ack)) = st.next_resend() {
            let pair = st.active();
            let header = Header {
                kind: Kind::Data,
                am: frame.am,
                sender: me,
                key,
                seq: frame.seq,
                ack,
                striped: false,
            };
            let data = &frame.data;
            let sent = self.rails[pair.rail].endpoint.send_with(pair.addr, |slot| {
                wire::write_header(slot, &header);
                slot[FRAME_LEN..FRAME_LEN + data.len()].copy_from_slice(data);
                FRAME_LEN + data.len()
            });
            match sent {
                Ok(()) => st.resent_one(),
                Err(FabricSendError::Full) => return,
                Err(e) => {
                    tracing::warn!(target: "ofi", peer, error = %e, "sending again after a failover failed");
                    return;
                }
            }
        }
    }

    /// Advances every busy peer's timers: owed acks go out, silent pairs die.
    pub(super) fn tick(&mut self) {
        if !self.peers.iter().flatten().any(PeerPaths::busy) {
            return;
        }
        let now = self.clock_origin.elapsed();
        self.take_probe_answers(now);
        for peer in 0..self.peers.len() as u32 {
            let Some(st) = self.peers[peer as usize].as_mut() else {
                continue;
            };
            if !st.busy() {
                continue;
            }
            let t = st.tick(now, &self.timing);
            if t.send_ack {
                self.send_ack(peer);
            }
            // At finalize a silent peer is done with us; nothing to tell apart.
            if t.probe && !self.finalizing {
                self.probe(peer);
            }
            if let Some(f) = t.failure {
                self.on_failure(peer, f);
            }
        }
    }

    /// Sends a liveness probe to `peer` over the link of every pair its acknowledgements
    /// wait for ([`PeerPaths::watched`]) where both ends have the sockets for it; the answers
    /// come back per link, so each pair's silence is judged by its own.
    fn probe(&mut self, peer: u32) {
        let Some(st) = self.peers[peer as usize].as_ref() else {
            return;
        };
        let nonce = self.probe_nonces[peer as usize].wrapping_add(1);
        self.probe_nonces[peer as usize] = nonce;
        for i in st.watched() {
            let pair = &st.pairs()[i];
            let (Some(to), Some(prober)) = (pair.probe, self.rails[pair.rail].prober.as_ref())
            else {
                continue;
            };
            match prober.probe(to, self.key, self.me, peer, nonce) {
                Ok(()) => self.counters.probes_sent += 1,
                // A link that is down has no route: expected, the timeouts decide.
                Err(e) => {
                    tracing::debug!(target: "ofi", peer, error = %e, "liveness probe not sent")
                }
            }
        }
    }

    /// Takes the liveness answers that arrived: a peer that answered the last probe is busy,
    /// not lost.
    fn take_probe_answers(&mut self, now: Duration) {
        let (key, me) = (self.key, self.me);
        let OfiBtl {
            rails,
            peers,
            probe_nonces,
            counters,
            ..
        } = self;
        for (rail, prober) in rails
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((i, r.prober.as_ref()?)))
        {
            prober.answers(key, me, |from, nonce| {
                let i = from as usize;
                if probe_nonces.get(i) == Some(&nonce) {
                    if let Some(st) = peers.get_mut(i).and_then(Option::as_mut) {
                        // The answer came back over this rail: the peer's pair on it lives.
                        if let Some(pair) =
                            st.pairs().iter().position(|p| p.rail == rail && !p.dead)
                        {
                            st.answered(pair, now);
                            counters.probe_answers += 1;
                        }
                    }
                }
            });
        }
    }

    /// A pair to `peer` went silent: traffic moved to another pair, or the peer is lost.
    fn on_failure(&mut self, peer: u32, f: Failure) {
        let st = self.peers[peer as usize]
            .as_ref()
            .expect("only known peers fail");
        let dead = &st.pairs()[f.pair];
        self.rail_failed[dead.rail] = true;
        // Its stuck sends never complete: closing it at finalize will find it busy.
        self.rails[dead.rail].endpoint.abandon();
        let local = &self.rails[dead.rail];
        let what = format!(
            "{} ({}) -> {} of process {peer}",
            local.domain, local.fabric, dead.remote
        );
        match f.moved_to {
            Some(to) => {
                let next = &st.pairs()[to];
                tracing::warn!(
                    target: "ofi",
                    "process {} heard nothing over {what} for {:.1} s with messages \
                     outstanding: that pair is taken as dead and the traffic moves to {} -> {}",
                    self.me,
                    f.silent_for.as_secs_f64(),
                    self.rails[next.rail].domain,
                    next.remote
                );
                self.counters.failovers += 1;
                self.resends_pending = true;
                self.flush_resends(peer);
            }
            None if self.finalizing => {
                tracing::debug!(target: "ofi", peer, "last pair silent while finalizing");
            }
            None => {
                let msg = format!(
                    "ofi: process {} lost process {peer}: no acknowledgement or read completion for {:.1} s over \
                     its last working pair of endpoints, {what}.\nThe job cannot continue. \
                     Check that link (ip link, cabling, switch). If process {peer} computes \
                     longer than that without calling MPI, raise KESTREL_OFI_PEER_TIMEOUT_MS.",
                    self.me,
                    f.silent_for.as_secs_f64()
                );
                tracing::error!(target: "ofi", "{msg}");
                eprintln!("{msg}");
                std::process::exit(1);
            }
        }
    }

    /// A completion failed outside finalize: a message was lost, and MPI has no way to go on.
    pub(super) fn lost(&self, error: &kestrel_fabric::FabricError) -> ! {
        let msg = format!(
            "ofi: process {} lost a message over {}: {error}\nThe job cannot continue. \
             Check that every peer is alive and reachable over this network (the domains are \
             chosen with KESTREL_OFI_IF_INCLUDE / KESTREL_OFI_IF_EXCLUDE).",
            self.me, self.card.provider
        );
        tracing::error!(target: "ofi", "{msg}");
        eprintln!("{msg}");
        std::process::exit(1);
    }
}
