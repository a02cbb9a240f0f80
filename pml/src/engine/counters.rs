//! The engine's own counters and the view of every counter of this process that tools read
//! (the C library's MPI_T performance variables).
//!
//! This module owns the list of the engine's counters ([`COUNTERS`]) and the sums it
//! reports. The counters themselves are plain `u64` fields of the engine's state, each
//! bumped by one plain add where the event happens (a send started, a message header
//! arrived, a message queued unexpected); this module must never add work to those paths:
//! it only reads.

use kestrel_transport::btl::CounterSpec;

use super::Engine;

/// The engine's counters, in the order [`Engine::counters`] reports them.
pub const COUNTERS: &[CounterSpec] = &[
    CounterSpec {
        name: "pml_messages_sent",
        description: "Point-to-point messages this process started sending (every protocol; collectives' own messages included).",
    },
    CounterSpec {
        name: "pml_bytes_sent",
        description: "Payload bytes of those messages.",
    },
    CounterSpec {
        name: "pml_messages_received",
        description: "Point-to-point messages that arrived from peers (eager and rendezvous announcements).",
    },
    CounterSpec {
        name: "pml_bytes_received",
        description: "Payload bytes of those messages (the announced length of rendezvous messages).",
    },
    CounterSpec {
        name: "pml_unexpected_messages",
        description: "Messages that arrived before a matching receive was posted (queued as unexpected).",
    },
    CounterSpec {
        name: "pml_protocol_errors",
        description: "Malformed or unexpected messages from peers that were dropped.",
    },
];

/// The engine's event counts (see [`COUNTERS`] for their meaning).
///
/// `repr(C)` with the two counters each path bumps apart: adjacent, LLVM merges the message
/// and byte adds into one vector read-modify-write of six instructions; apart, they stay two
/// plain `add`s to memory.
#[derive(Debug, Default, Clone, Copy)]
#[repr(C)]
pub(crate) struct Counters {
    pub(crate) sent: u64,
    pub(crate) received: u64,
    pub(crate) sent_bytes: u64,
    pub(crate) received_bytes: u64,
    pub(crate) unexpected: u64,
}

impl Engine {
    /// The engine's counters ([`COUNTERS`], in that order), then every transport counter
    /// summed over the transport instances that report it (world and connections, retired
    /// ones included), in the order they first appear.
    pub fn counters(&self) -> Vec<(&'static str, u64)> {
        let c = &self.st.counters;
        let mut out = vec![
            (COUNTERS[0].name, c.sent),
            (COUNTERS[1].name, c.sent_bytes),
            (COUNTERS[2].name, c.received),
            (COUNTERS[3].name, c.received_bytes),
            (COUNTERS[4].name, c.unexpected),
            (COUNTERS[5].name, self.st.protocol_errors),
        ];
        let own = out.len();
        for b in &self.btls {
            for (name, v) in b.counters() {
                match out[own..].iter_mut().find(|(n, _)| *n == name) {
                    Some((_, sum)) => *sum += v,
                    None => out.push((name, v)),
                }
            }
        }
        out
    }
}
