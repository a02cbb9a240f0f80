//! Path failure and failover: running every connection's timers, telling each connection
//! whether it is its peer's last usable path (which then waits `usnic_peer_timeout_ms` instead
//! of `usnic_fail_after_ms`), reacting to the [`Event::PathFailed`] the connection reports,
//! moving a dead path's unacknowledged messages to the remaining paths, and ending the job
//! with a diagnosis when no path to a peer is left.
//!
//! This module owns the reaction to failure. It must never measure a path's silence itself:
//! the reliable core's timer table does, and reports it.

use std::fmt::Write as _;
use std::time::Instant;

use super::{Path, PathState, UsnicBtl};
use crate::reliable::Event;

impl UsnicBtl {
    pub(super) fn scan_timers(&mut self, now: Instant) {
        // Time this process spent away is not the peer's silence; silent paths whose peer is
        // only busy get their failure clock restarted.
        self.forgive_time_away(now);
        self.probe_silent_paths(now);
        for idx in 0..self.active.len() {
            let peer = self.active[idx];
            self.send_probes(peer, now);
            let p = self.peers[peer as usize].as_mut().expect("active peer");
            let mut orphaned = Vec::new();
            let mut usable_paths = p.paths.iter().filter(|x| x.usable()).count();
            for path in p.paths.iter_mut() {
                // The last usable path gets the longer peer timeout: with nowhere to move its
                // traffic, a stall must not end the job. Told before its timers run, so a path
                // that became the last one in this scan is judged by the new limit.
                let others = usable_paths - usize::from(path.usable());
                path.conn.set_sole_path(others == 0);
                if path.conn.poll_timeout().is_some_and(|t| t <= now) {
                    path.conn.handle_timeout(now);
                }
                while let Some(event) = path.conn.poll_event() {
                    let Event::PathFailed { limit, .. } = event;
                    // Peers that have finalized stop acknowledging: not a failure then.
                    if self.finalizing || !path.usable() {
                        continue;
                    }
                    let why = limit.to_string();
                    tracing::warn!(target: "usnic", "path {} -> rank {peer} interface {} failed: {why}; moving its traffic to the other rails",
                        self.rails[path.rail].name, path.remote_if);
                    path.state = PathState::Dead(why);
                    usable_paths -= 1;
                }
                if matches!(path.state, PathState::Dead(_)) && path.conn.has_unacknowledged() {
                    orphaned.extend(path.conn.take_unacknowledged());
                }
            }
            if !orphaned.is_empty() {
                self.rehome.push((peer, orphaned));
            }
            if !p.paths.iter().any(Path::usable) && !self.finalizing {
                self.all_paths_lost(peer);
            }
        }
        self.rehome_orphans();
    }

    pub(super) fn rehome_orphans(&mut self) {
        let mut left = Vec::new();
        for (peer, msgs) in std::mem::take(&mut self.rehome) {
            let p = self.peers[peer as usize].as_mut().expect("active peer");
            let mut it = msgs.into_iter();
            let mut rest = Vec::new();
            for (am, data) in it.by_ref() {
                let Some(i) = Self::choose_path(p, data.len(), self.stripe_min) else {
                    rest.push((am, data));
                    continue;
                };
                if p.paths[i].conn.send(am, &[&data]).is_err() {
                    rest.push((am, data));
                }
            }
            if !rest.is_empty() {
                left.push((peer, rest));
            }
        }
        self.rehome = left;
    }

    fn all_paths_lost(&self, peer: u32) -> ! {
        let p = self.peers[peer as usize].as_ref().expect("active peer");
        let mut why = String::new();
        for path in &p.paths {
            let remote = &p.card.interfaces()[path.remote_if as usize].interface;
            let reason = match &path.state {
                PathState::Dead(r) => r.as_str(),
                _ => "unknown",
            };
            let _ = write!(
                why,
                "\n  {} ({}) -> {} ({}): {reason}",
                self.rails[path.rail].name, self.rails[path.rail].ipv4, remote.name, remote.ipv4
            );
        }
        let msg = format!(
            "usnic: rank {} lost every network path to rank {peer} on node {}:{why}\n\
             The job cannot continue. Check the links between these interfaces (ip link, cables, switch ports); \
             usnic_fail_after_ms and usnic_peer_timeout_ms set how long silent paths are tolerated.",
            self.rank, p.card.node()
        );
        tracing::error!(target: "usnic", "{msg}");
        eprintln!("{msg}");
        std::process::exit(1);
    }
}
