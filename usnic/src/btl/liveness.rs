//! Busy peers versus dead paths: the reliable core fails a path whose acknowledgements have
//! stopped for `usnic_fail_after_ms` (`usnic_peer_timeout_ms` on the last path), but a peer
//! that computes without calling MPI stops acknowledging too. Each rail runs a liveness
//! responder (`kestrel_fabric::liveness`, its port in the card); once a path has been silent
//! for half its failure limit (or its first-contact connectivity probes have gone unanswered
//! that long), this module probes the peer's responder on the path's remote
//! interface from the rail's address, over the same link, every [`PROBE_EVERY`]; an answer
//! echoing the last nonce tells the connection the peer is alive
//! ([`crate::reliable::Connection::peer_alive`]) and its failure clock restarts (for a path
//! still probing connectivity, the probe timeout restarts).
//!
//! This module owns when to probe and what an answer means for a path. It must never fail a
//! path itself: the reliable core's failure timer does.

use std::net::SocketAddrV4;
use std::time::{Duration, Instant};

use super::{PathState, UsnicBtl};

/// Time between two probes of a silent path.
pub(super) const PROBE_EVERY: Duration = Duration::from_millis(250);

/// A gap between two timer scans longer than this means the process itself was away (computing
/// without MPI calls), not listening.
const AWAY: Duration = Duration::from_millis(500);

impl UsnicBtl {
    /// Called first in every timer scan: when this process was away (no scan for [`AWAY`]),
    /// it heard nothing because it did not listen, so every silence clock restarts now: the
    /// first-contact connectivity probes' timeout and the connections' failure timers (the
    /// peers' answers and acknowledgements, and what goes again, get a full limit) instead of
    /// failing paths the moment the process is back.
    pub(super) fn forgive_time_away(&mut self, now: Instant) {
        let away = now.saturating_duration_since(self.last_scan);
        self.last_scan = now;
        if away < AWAY || self.finalizing {
            return;
        }
        for path in self
            .peers
            .iter_mut()
            .flatten()
            .flat_map(|p| p.paths.iter_mut())
        {
            if let PathState::Probing {
                since, next_probe, ..
            } = &mut path.state
            {
                *since = now;
                *next_probe = now;
            }
            path.conn.peer_alive(now);
        }
    }

    /// Takes the answers that arrived, then probes every path silent for half its limit.
    pub(super) fn probe_silent_paths(&mut self, now: Instant) {
        // At finalize a silent peer is done with us (finalized, in the launcher's last
        // fence): its responder would keep answering, and quiesce would wait forever.
        if self.finalizing {
            return;
        }
        self.take_liveness_answers(now);
        let (key, me) = (self.key, self.rank);
        let probe_after = self.cfg.fail_after / 2;
        for idx in 0..self.active.len() {
            let peer = self.active[idx];
            let Some(p) = self.peers[peer as usize].as_mut() else {
                continue;
            };
            for path in p.paths.iter_mut().filter(|x| x.usable()) {
                // Silent: acknowledgements stopped with data outstanding, or the connectivity
                // probes of first contact unanswered (the peer went busy right after it).
                let silent = match path.state {
                    PathState::Probing { since, .. } => Some(now.duration_since(since)),
                    _ => path.conn.silent_for(now),
                };
                let Some(silent) = silent else {
                    continue;
                };
                if silent < probe_after
                    || path
                        .last_probe
                        .is_some_and(|t| now.duration_since(t) < PROBE_EVERY)
                {
                    continue;
                }
                let remote = &p.card.interfaces()[path.remote_if as usize].interface;
                let (Some(port), Some(prober)) = (
                    p.card.probe_port(path.remote_if as usize),
                    self.rails[path.rail].prober.as_ref(),
                ) else {
                    continue;
                };
                path.last_probe = Some(now);
                path.probe_nonce = path.probe_nonce.wrapping_add(1);
                let to = SocketAddrV4::new(remote.ipv4, port);
                match prober.probe(to, key, me, peer, path.probe_nonce) {
                    Ok(()) => path.counters.liveness_probes += 1,
                    // A link that is down has no route: expected, the failure timer decides.
                    Err(e) => {
                        tracing::debug!(target: "usnic", peer, %to, error = %e, "liveness probe not sent")
                    }
                }
            }
        }
    }

    /// Every answer echoing the last nonce of a path to its sender marks that path's peer
    /// alive.
    fn take_liveness_answers(&mut self, now: Instant) {
        let (key, me) = (self.key, self.rank);
        let UsnicBtl { rails, peers, .. } = self;
        for (rail, prober) in rails
            .iter()
            .enumerate()
            .filter_map(|(i, r)| r.prober.as_ref().map(|p| (i, p)))
        {
            prober.answers(key, me, |from, nonce| {
                let Some(p) = peers.get_mut(from as usize).and_then(Option::as_mut) else {
                    return;
                };
                for path in p
                    .paths
                    .iter_mut()
                    .filter(|x| x.rail == rail && x.probe_nonce == nonce && x.last_probe.is_some())
                {
                    path.conn.peer_alive(now);
                    // Still probing connectivity: the peer is alive but busy; its answers to
                    // the connectivity probes (and the MTU check) come when it is back.
                    if let PathState::Probing { since, .. } = &mut path.state {
                        *since = now;
                    }
                    path.counters.liveness_answers += 1;
                }
            });
        }
    }
}
