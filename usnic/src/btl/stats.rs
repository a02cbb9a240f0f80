//! The usnic transport's counters: per path ([`PathCounters`]), per rail ([`BadDatagrams`]),
//! and the `usnic_stats` table printed at finalize.
//!
//! This module owns the report's layout. It must never change transport state: it only reads
//! the counters the other parts keep and the connections' own statistics.

use std::fmt::Write as _;

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

impl UsnicBtl {
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
