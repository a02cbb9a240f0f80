//! Receiving: polling every rail's endpoint, checking and routing each datagram to its path
//! (by job key, sender and rail pair), delivering each message once (by its message id,
//! across failovers), and answering probes once the rail's endpoint is free again.
//!
//! This module owns the receive side of the endpoints. Datagrams with the wrong key, a
//! malformed header or an unknown sender are counted and dropped here; they must never reach
//! a connection. It never blocks.

use std::time::Instant;

use kestrel_transport::btl::Incoming;

use super::pairing::on_hello;
use super::probe::write_probe;
use super::{PathState, UsnicBtl, AM_HELLO, AM_INTERNAL, MSG_ID_LEN};
use crate::reliable::wire::{self, Body};

impl UsnicBtl {
    /// Handles one datagram that arrived on `rail`.
    fn on_datagram(
        &mut self,
        rail: usize,
        now: Instant,
        bytes: &[u8],
        deliver: &mut dyn FnMut(Incoming<'_>),
    ) -> usize {
        let (h, payload) = match wire::decode(bytes, self.key) {
            Ok(v) => v,
            Err(wire::WireError::BadKey) => {
                self.rails[rail].bad.bad_key += 1;
                return 0;
            }
            Err(_) => {
                self.rails[rail].bad.malformed += 1;
                return 0;
            }
        };
        let peer = h.src_rank;
        let found = self
            .peers
            .get_mut(peer as usize)
            .and_then(Option::as_mut)
            .filter(|_| h.dst_rail as usize == rail)
            .and_then(|p| {
                p.paths
                    .iter()
                    .position(|x| x.rail == rail && x.remote_if == h.src_rail)
                    .map(|i| (p, i))
            });
        let Some((p, i)) = found else {
            self.rails[rail].bad.unknown_sender += 1;
            return 0;
        };
        match h.body {
            Body::Probe => {
                // Echo the probe's size: the reply tells the prober which size class arrived.
                // Sent once polling of this rail ends (its endpoint is busy now).
                let path = &p.paths[i];
                self.probe_replies
                    .push((rail, path.addr, path.remote_if, bytes.len()));
                0
            }
            Body::ProbeReply => {
                let path = &mut p.paths[i];
                path.counters.probe_replies += 1;
                if let PathState::Probing { small, large, .. } = &mut path.state {
                    if bytes.len() > wire::HEADER_LEN + 8 {
                        *large = true;
                    } else {
                        *small = true;
                    }
                    if *small && *large {
                        path.state = PathState::Up;
                    }
                }
                0
            }
            Body::Data(_) | Body::Ack { .. } => {
                p.paths[i].conn.handle_datagram(now, &h, payload);
                self.touched.push(peer);
                let mut n = 0;
                while let Some((am, data)) = p.paths[i].conn.poll_deliver() {
                    if data.len() < MSG_ID_LEN {
                        self.rails[rail].bad.malformed += 1;
                        continue;
                    }
                    let id = u64::from_le_bytes(data[..MSG_ID_LEN].try_into().expect("8 bytes"));
                    if !p.delivered.insert(id) {
                        continue;
                    }
                    let body = &data[MSG_ID_LEN..];
                    if am >= AM_INTERNAL {
                        if am == AM_HELLO {
                            if let Some(theirs) = on_hello(&self.job, self.rank, p, body) {
                                self.adoptions.push((peer, theirs));
                            }
                        }
                    } else {
                        deliver(Incoming {
                            peer,
                            am,
                            data: body,
                        });
                        n += 1;
                    }
                    p.paths[i].conn.recycle(data);
                }
                n
            }
        }
    }

    /// Polls every rail's endpoint and handles what arrived; returns the datagrams seen.
    pub(super) fn poll_rails(
        &mut self,
        now: Instant,
        deliver: &mut dyn FnMut(Incoming<'_>),
    ) -> usize {
        let mut seen = 0;
        for i in 0..self.rails.len() {
            let Some(mut ep) = self.rails[i].endpoint.take() else {
                continue;
            };
            let polled = ep.poll(|d| {
                seen += 1;
                self.on_datagram(i, now, d, deliver);
            });
            if let Err(e) = polled {
                tracing::warn!(target: "usnic", "polling {}: {e}", self.rails[i].name);
            }
            for (rail, addr, to, size) in self.probe_replies.drain(..) {
                let (key, me) = (self.key, self.rank);
                let _ = ep.send_with(addr, |buf| {
                    write_probe(key, me, rail as u8, to, Body::ProbeReply, size, buf)
                });
            }
            self.rails[i].endpoint = Some(ep);
        }
        seen
    }
}
