//! First-contact probing: per path, a small and an MTU-sized probe repeated until both are
//! answered (the path is then up) or `usnic_probe_timeout_ms` passes (the path is dead, with a
//! diagnosis: an MTU mismatch when only the small probe came back, the pair unreachable when
//! neither did); and the connectivity check of `kestrel-ifmatch check`, built on the same
//! probes.
//!
//! This module owns probe timing and the diagnoses. It must never send data or touch a
//! path's reliable connection: probes bypass it.

use std::time::{Duration, Instant};

use super::{PathState, UsnicBtl};
use crate::reliable::wire::{self, Body, Header};

/// The outcome of probing one path (`kestrel-ifmatch check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathReport {
    /// The peer's job rank.
    pub peer: u32,
    /// The peer's node.
    pub peer_node: String,
    /// Local interface and address.
    pub local: String,
    /// Remote interface and address.
    pub remote: String,
    /// Bytes of the large probe.
    pub mtu_probe: usize,
    /// A small probe came back.
    pub small_ok: bool,
    /// An MTU-sized probe came back.
    pub large_ok: bool,
    /// What is wrong, when something is.
    pub diagnosis: Option<String>,
}

impl UsnicBtl {
    pub(super) fn send_probes(&mut self, peer: u32, now: Instant) {
        let key = self.key;
        let me = self.rank;
        let Some(p) = self.peers[peer as usize].as_mut() else {
            return;
        };
        for path in p.paths.iter_mut() {
            let PathState::Probing {
                small,
                large,
                since,
                next_probe,
            } = &mut path.state
            else {
                continue;
            };
            if now.duration_since(*since) > self.probe_timeout {
                let remote = &p.card.interfaces()[path.remote_if as usize].interface;
                let rail = &self.rails[path.rail];
                let why = match (*small, *large) {
                    (true, false) => format!(
                        "small probes were answered but {}-byte ones were not within {} ms (usnic_probe_timeout_ms): \
                         an MTU mismatch on the path {} ({}) -> rank {peer} {} ({}); make the MTU the same on both \
                         interfaces and every switch between them",
                        path.max_datagram,
                        self.probe_timeout.as_millis(),
                        rail.name,
                        rail.ipv4,
                        remote.name,
                        remote.ipv4
                    ),
                    _ => format!(
                        "no probe was answered within {} ms (usnic_probe_timeout_ms): {} ({}) cannot reach rank {peer} {} ({}); \
                         check addresses, routes and firewalls, or exclude the interface with KESTREL_USNIC_IF_EXCLUDE",
                        self.probe_timeout.as_millis(),
                        rail.name,
                        rail.ipv4,
                        remote.name,
                        remote.ipv4
                    ),
                };
                tracing::warn!(target: "usnic", "{why}");
                path.state = PathState::Dead(why);
                continue;
            }
            if now < *next_probe {
                continue;
            }
            *next_probe = now + self.probe_interval;
            let rail = &mut self.rails[path.rail];
            for (size, big) in [(wire::HEADER_LEN + 8, false), (path.max_datagram, true)] {
                if (big && *large) || (!big && *small) || rail.ep().free_tx_slots() == 0 {
                    continue;
                }
                let (from, to) = (path.rail as u8, path.remote_if);
                let _ = rail.ep().send_with(path.addr, |buf| {
                    write_probe(key, me, from, to, Body::Probe, size, buf)
                });
                path.counters.probes_sent += 1;
            }
        }
    }

    /// The connectivity check of `kestrel-ifmatch check`: probes every path to every peer with
    /// a small and an MTU-sized datagram until each path is answered or `timeout` passes, while
    /// answering the peers' probes; then keeps answering until no probe has arrived for
    /// `linger` (peers may still be checking). Sends no data and never ends the process.
    pub fn connectivity_check(&mut self, timeout: Duration, linger: Duration) -> Vec<PathReport> {
        let start = Instant::now();
        self.probe_timeout = timeout;
        for &peer in &self.active {
            if let Some(p) = self.peers[peer as usize].as_mut() {
                p.contacted = true;
                for path in p.paths.iter_mut() {
                    path.state = PathState::Probing {
                        small: false,
                        large: false,
                        since: start,
                        next_probe: start,
                    };
                }
            }
        }
        let mut last_heard = Instant::now();
        loop {
            let now = Instant::now();
            for i in 0..self.active.len() {
                let peer = self.active[i];
                self.send_probes(peer, now);
            }
            let heard = self.poll_rails(now, &mut |_| {});
            if heard > 0 {
                last_heard = now;
            }
            let resolved = self.peers.iter().flatten().all(|p| {
                p.paths
                    .iter()
                    .all(|x| !matches!(x.state, PathState::Probing { .. }))
            });
            if resolved && now.duration_since(last_heard) > linger {
                break;
            }
            if now.duration_since(start) > timeout + linger {
                break;
            }
            if heard == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let mut out = Vec::new();
        for p in self.peers.iter().flatten() {
            for path in &p.paths {
                let remote = &p.card.interfaces()[path.remote_if as usize].interface;
                let rail = &self.rails[path.rail];
                let (small, large, diagnosis) = match &path.state {
                    PathState::Up => (true, true, None),
                    PathState::Probing { small, large, .. } => {
                        (*small, *large, Some("still unanswered".to_string()))
                    }
                    PathState::Dead(why) => {
                        let small = why.starts_with("small probes were answered");
                        (small, false, Some(why.clone()))
                    }
                };
                out.push(PathReport {
                    peer: p.rank,
                    peer_node: p.card.node().to_string(),
                    local: format!("{} ({})", rail.name, rail.ipv4),
                    remote: format!("{} ({})", remote.name, remote.ipv4),
                    mtu_probe: path.max_datagram,
                    small_ok: small,
                    large_ok: large,
                    diagnosis,
                });
            }
        }
        out
    }
}

/// Writes a probe (or probe reply) of `size` bytes in all into `buf`; returns its length.
pub(super) fn write_probe(
    key: u64,
    me: u32,
    from: u8,
    to: u8,
    body: Body,
    size: usize,
    buf: &mut [u8],
) -> usize {
    let size = size.clamp(wire::HEADER_LEN, buf.len());
    let h = Header {
        key,
        src_rank: me,
        src_rail: from,
        dst_rail: to,
        payload_len: (size - wire::HEADER_LEN) as u16,
        body,
    };
    if wire::write_header(&h, buf).is_err() {
        return 0;
    }
    buf[wire::HEADER_LEN..size].fill(0x5a);
    size
}
