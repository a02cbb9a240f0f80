//! Sending: the path each message takes (the best path for small messages, the least loaded
//! by link speed for messages of at least `usnic_stripe_min` bytes, which stripes a pipelined
//! large message across rails), the message id that leads it, and handing the datagrams the
//! connections have ready to the endpoints.
//!
//! This module owns path choice and the send side of the endpoints. It must never interpret
//! the messaging layer's headers, block, or decide that a path is dead.

use std::time::Instant;

use kestrel_transport::btl::SendError;

use super::{PathState, Peer, UsnicBtl};

impl UsnicBtl {
    /// [`kestrel_transport::btl::Btl::send`]: one message to `peer`, on the path it should take.
    pub(super) fn send_message(
        &mut self,
        peer: u32,
        am: u8,
        header: &[u8],
        payload: &[u8],
    ) -> Result<(), SendError> {
        let len = header.len() + payload.len();
        if len > self.max_send {
            return Err(SendError::TooLarge {
                len,
                max: self.max_send,
            });
        }
        let now = Instant::now();
        let Some(p) = self.peers.get_mut(peer as usize).and_then(Option::as_mut) else {
            return Err(SendError::Unreachable { peer });
        };
        if !p.contacted {
            self.first_contact(peer, now);
        }
        let p = self.peers[peer as usize].as_mut().expect("checked above");
        let Some(i) = Self::choose_path(p, len, self.stripe_min) else {
            return Err(SendError::Unreachable { peer });
        };
        let id = p.next_msg_id;
        let path = &mut p.paths[i];
        if path
            .conn
            .send(am, &[&id.to_le_bytes(), header, payload])
            .is_err()
        {
            return Err(SendError::WouldBlock);
        }
        p.next_msg_id += 1;
        path.bytes_sent += len as u64;
        path.counters.messages += 1;
        self.flush(peer, now);
        Ok(())
    }

    pub(super) fn choose_path(peer: &mut Peer, len: usize, stripe_min: usize) -> Option<usize> {
        // Paths whose probes came back first; unproven ones only when no proven one is left
        // (at first contact, before any probe returns).
        let proven = peer.paths.iter().any(|p| p.state == PathState::Up);
        let usable = peer.paths.iter().enumerate().filter(|(_, p)| {
            if proven {
                p.state == PathState::Up
            } else {
                p.usable()
            }
        });
        if len < stripe_min {
            // Paths are in pairing order, best first.
            return usable.map(|(i, _)| i).next();
        }
        usable
            .min_by_key(|(_, p)| (p.bytes_sent / p.speed_mbps as u64, p.rail))
            .map(|(i, _)| i)
    }

    /// Hands every datagram each path has ready to its endpoint, while the endpoint has room.
    pub(super) fn flush(&mut self, peer: u32, now: Instant) {
        let Some(p) = self.peers[peer as usize].as_mut() else {
            return;
        };
        for path in p.paths.iter_mut() {
            let rail = &mut self.rails[path.rail];
            while rail.ep().free_tx_slots() > 0 {
                let Some(n) = path.conn.poll_transmit(now, &mut self.scratch) else {
                    break;
                };
                let data = &self.scratch[..n];
                if rail
                    .ep()
                    .send_with(path.addr, |buf| {
                        buf[..n].copy_from_slice(data);
                        n
                    })
                    .is_err()
                {
                    // The datagram is lost like one the network dropped; the core resends it.
                    break;
                }
            }
        }
    }
}
