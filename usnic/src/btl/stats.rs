//! The usnic transport's counters: per path ([`PathCounters`]), per rail ([`BadDatagrams`]),
//! the sums tools read ([`COUNTERS`], through `Btl::counters`), and the `usnic_stats` table
//! printed at finalize.
//!
//! This module owns the report's layout and the counters' names. It must never change
//! transport state: it only reads the counters the other parts keep and the connections' own
//! statistics.

use std::fmt::Write as _;

use kestrel_transport::btl::CounterSpec;

use super::{PathState, UsnicBtl};

/// Counters of one path, printed at finalize when `usnic_stats` asks.
#[derive(Debug, Default, Clone, Copy)]
pub struct PathCounters {
    /// Messages handed to this path.
    pub messages: u64,
    /// Probes sent and answers received.
    pub probes_sent: u64,
    /// Probe answers received.
    pub probe_replies: u64,
    /// Liveness probes sent while the path was silent (see `liveness.rs`).
    pub liveness_probes: u64,
    /// Liveness answers received: the peer was busy, not behind a dead link.
    pub liveness_answers: u64,
}

/// Datagrams dropped before they reached any connection, per rail.
#[derive(Debug, Default, Clone, Copy)]
pub struct BadDatagrams {
    /// Header carried another job's key.
    pub bad_key: u64,
    /// Header malformed (truncated, bad length, unknown kind or version).
    pub malformed: u64,
    /// Key right but the sender or rail pair is not one of ours.
    pub unknown_sender: u64,
}

impl BadDatagrams {
    fn total(&self) -> u64 {
        self.bad_key + self.malformed + self.unknown_sender
    }
}

/// The counters the usnic transport reports (`Btl::counters`), summed over every path to
/// every peer, in this order.
pub const COUNTERS: &[CounterSpec] = &[
    CounterSpec {
        name: "usnic_messages_sent",
        description: "Messages handed to a network path (a message resent on another path after a failover counts again).",
    },
    CounterSpec {
        name: "usnic_segments_sent",
        description: "Data segments (datagrams) sent for the first time.",
    },
    CounterSpec {
        name: "usnic_bytes_sent",
        description: "Payload bytes of those segments.",
    },
    CounterSpec {
        name: "usnic_segments_resent",
        description: "Data segments sent again (retransmission timeout, early retransmit or tail-loss probe).",
    },
    CounterSpec {
        name: "usnic_timeouts",
        description: "Expiries of the retransmission timer.",
    },
    CounterSpec {
        name: "usnic_segments_received",
        description: "New data segments accepted within the receive window.",
    },
    CounterSpec {
        name: "usnic_duplicates",
        description: "Data segments received again (already delivered or already buffered).",
    },
    CounterSpec {
        name: "usnic_out_of_window",
        description: "Data segments received beyond the receive window (dropped).",
    },
    CounterSpec {
        name: "usnic_acks_sent",
        description: "Standalone acknowledgements sent.",
    },
    CounterSpec {
        name: "usnic_acks_received",
        description: "Standalone acknowledgements received.",
    },
    CounterSpec {
        name: "usnic_probes_sent",
        description: "Connectivity probes sent at first contact.",
    },
    CounterSpec {
        name: "usnic_probe_replies",
        description: "Answers to those probes received.",
    },
    CounterSpec {
        name: "usnic_bad_datagrams",
        description: "Datagrams dropped before reaching a connection (another job's key, malformed, unknown sender).",
    },
    CounterSpec {
        name: "usnic_liveness_probes",
        description: "Liveness probes sent to peers whose acknowledgements had stopped on a path.",
    },
    CounterSpec {
        name: "usnic_liveness_answers",
        description: "Liveness probes answered: the peer was busy, not behind a dead link.",
    },
];

impl UsnicBtl {
    /// [`COUNTERS`], summed over paths and rails.
    pub fn counter_values(&self) -> Vec<(&'static str, u64)> {
        let mut v = [0u64; 15];
        for path in self.peers.iter().flatten().flat_map(|p| &p.paths) {
            let st = path.conn.stats();
            v[0] += path.counters.messages;
            v[1] += st.segments_sent;
            v[2] += st.payload_bytes_sent;
            v[3] += st.resent_timeout + st.resent_fast + st.resent_probe;
            v[4] += st.rto_events;
            v[5] += st.segments_received;
            v[6] += st.duplicates;
            v[7] += st.out_of_window;
            v[8] += st.acks_sent;
            v[9] += st.acks_received;
            v[10] += path.counters.probes_sent;
            v[11] += path.counters.probe_replies;
            v[13] += path.counters.liveness_probes;
            v[14] += path.counters.liveness_answers;
        }
        v[12] = self.bad_datagrams().total();
        COUNTERS.iter().map(|c| c.name).zip(v).collect()
    }

    /// Datagrams dropped per rail before reaching any connection.
    pub fn bad_datagrams(&self) -> BadDatagrams {
        let mut t = BadDatagrams::default();
        for r in &self.rails {
            t.bad_key += r.bad.bad_key;
            t.malformed += r.bad.malformed;
            t.unknown_sender += r.bad.unknown_sender;
        }
        t
    }

    /// The statistics table printed at finalize (`usnic_stats`).
    pub fn stats_report(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "usnic stats rank {}: peer rail(local->remote) state msgs sent resent(timeout+fast) acks(tx/rx) dup out-of-window probes(tx/rx)",
            self.rank
        );
        for p in self.peers.iter().flatten() {
            for path in &p.paths {
                let st = path.conn.stats();
                let remote = p
                    .card
                    .interfaces()
                    .get(path.remote_if as usize)
                    .map(|i| i.interface.name.as_str())
                    .unwrap_or("?");
                let _ = writeln!(
                    s,
                    "  rank {} {}->{} {} {} {} {}+{} {}/{} {} {} {}/{}",
                    p.rank,
                    self.rails[path.rail].name,
                    remote,
                    match &path.state {
                        PathState::Up => "up",
                        PathState::Probing { .. } => "probing",
                        PathState::Dead(_) => "dead",
                    },
                    path.counters.messages,
                    st.segments_sent,
                    st.resent_timeout,
                    st.resent_fast,
                    st.acks_sent,
                    st.acks_received,
                    st.duplicates,
                    st.out_of_window,
                    path.counters.probes_sent,
                    path.counters.probe_replies,
                );
            }
        }
        for r in &self.rails {
            let _ = writeln!(
                s,
                "  rail {}: bad datagrams {} (wrong key {}, malformed {}, unknown sender {})",
                r.name,
                r.bad.total(),
                r.bad.bad_key,
                r.bad.malformed,
                r.bad.unknown_sender
            );
        }
        s
    }
}
