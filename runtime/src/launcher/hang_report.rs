//! Hang reports, the head's half: gathering every agent's [`RankReport`]s after `--timeout`
//! expires or SIGUSR1 arrives, and printing them as one table.
//!
//! It owns the gathering state and the table's wording. It never decides to stop the job: the
//! head does, once the report is printed (for a timeout) or not at all (for SIGUSR1).

use std::collections::HashSet;
use std::fmt::Write as _;
use std::time::Duration;

use tokio::time::Instant;

use super::proto::{RankReport, NO_TIME};

/// How long the head waits for the agents' reports (stacks take longer).
pub fn gather_time(stacks: bool) -> Duration {
    if stacks {
        Duration::from_secs(30)
    } else {
        Duration::from_secs(3)
    }
}

/// A report being gathered.
#[derive(Debug)]
pub struct PendingReport {
    /// Hosts that have not answered yet.
    waiting: HashSet<usize>,
    /// Rows received so far: host name and report.
    rows: Vec<(String, RankReport)>,
    /// When to print whatever arrived.
    pub deadline: Instant,
    /// What asked for it (`SIGUSR1`, `--timeout 10.0 s expired`).
    why: String,
    /// Whether the job stops once it is printed (a timeout).
    pub then_stop: bool,
}

impl PendingReport {
    /// Starts gathering from `hosts`.
    pub fn new(hosts: HashSet<usize>, why: String, then_stop: bool, stacks: bool) -> Self {
        PendingReport {
            waiting: hosts,
            rows: Vec::new(),
            deadline: Instant::now() + gather_time(stacks),
            why,
            then_stop,
        }
    }

    /// Adds host `h`'s answer; true once every host answered.
    pub fn add(&mut self, h: usize, host: &str, ranks: Vec<RankReport>) -> bool {
        if self.waiting.remove(&h) {
            self.rows
                .extend(ranks.into_iter().map(|r| (host.to_string(), r)));
        }
        self.waiting.is_empty()
    }

    /// The table, naming the hosts that did not answer (`name_of` maps host indices).
    pub fn render(mut self, name_of: &dyn Fn(usize) -> String) -> String {
        let mut missing: Vec<String> = self.waiting.iter().map(|&h| name_of(h)).collect();
        missing.sort();
        self.rows.sort_by_key(|(_, r)| r.rank);
        render_table(&self.why, &self.rows, &missing)
    }
}

fn seconds(ms: u64) -> String {
    if ms == NO_TIME {
        "-".into()
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

/// A record older than this is the last wait the rank reported, not necessarily its current
/// one (it computes, or is stopped).
const STALE_MS: u64 = 2_000;

/// Formats the report: one line per rank, then the stacks of the ranks that have them.
pub fn render_table(why: &str, rows: &[(String, RankReport)], missing: &[String]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "kestrel-run: state of the job's running ranks ({why}):"
    );
    let host_w = rows
        .iter()
        .map(|(h, _)| h.len())
        .chain(["host".len()])
        .max()
        .unwrap_or(4);
    let _ = writeln!(
        out,
        "  {:>5}  {:<host_w$}  {:>8}  {:<9}  {:>8}  {:>8}  waiting for",
        "rank", "host", "pid", "state", "cpu", "stalled"
    );
    for (host, r) in rows {
        let waiting = if r.waiting.is_empty() {
            if r.state == "STOPPED" {
                "(stopped; no MPI wait recorded)".to_string()
            } else {
                "(no MPI wait recorded: computing, or not in MPI)".to_string()
            }
        } else if r.state == "STOPPED" {
            format!("(stopped while waiting) {}", r.waiting)
        } else if r.heard_ms != NO_TIME && r.heard_ms > STALE_MS {
            format!(
                "(last heard {} ago, may have moved on) {}",
                seconds(r.heard_ms),
                r.waiting
            )
        } else {
            r.waiting.clone()
        };
        let stalled = if r.waiting.is_empty() {
            "-".to_string()
        } else {
            seconds(r.stalled_ms)
        };
        let _ = writeln!(
            out,
            "  {:>5}  {:<host_w$}  {:>8}  {:<9}  {:>8}  {:>8}  {}",
            r.rank,
            host,
            r.pid,
            r.state,
            seconds(r.cpu_ms),
            stalled,
            waiting
        );
    }
    if rows.is_empty() {
        let _ = writeln!(out, "  (no rank reported)");
    }
    if !missing.is_empty() {
        let _ = writeln!(out, "  no answer from the daemon on {}", missing.join(", "));
    }
    for (host, r) in rows.iter().filter(|(_, r)| !r.stack.is_empty()) {
        let _ = writeln!(out, "--- rank {} (pid {} on {host}):", r.rank, r.pid);
        out.push_str(r.stack.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rank: u32, state: &str, waiting: &str, heard_ms: u64) -> (String, RankReport) {
        (
            "node-a".into(),
            RankReport {
                rank,
                pid: 100 + rank,
                state: state.into(),
                cpu_ms: 1500,
                waiting: waiting.into(),
                stalled_ms: if waiting.is_empty() { NO_TIME } else { 9_800 },
                heard_ms: if waiting.is_empty() {
                    NO_TIME
                } else {
                    heard_ms
                },
                stack: String::new(),
            },
        )
    }

    #[test]
    fn the_table_names_stopped_waiting_and_silent_ranks() {
        let mut rows = vec![
            row(
                0,
                "sleeping",
                "recv from source 1, tag 7, communicator context 0",
                100,
            ),
            row(1, "STOPPED", "", NO_TIME),
            row(2, "running", "", NO_TIME),
            row(3, "sleeping", "barrier on communicator context 0", 7_000),
        ];
        rows[1].1.stack = "#0 raise\n#1 main\n".into();
        let t = render_table("--timeout 10.0 s expired", &rows, &["node-b".to_string()]);
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(
            lines[0],
            "kestrel-run: state of the job's running ranks (--timeout 10.0 s expired):"
        );
        assert!(
            lines[2].contains("sleeping")
                && lines[2].contains("9.8 s")
                && lines[2].ends_with("recv from source 1, tag 7, communicator context 0"),
            "{t}"
        );
        assert!(
            lines[3].contains("STOPPED") && lines[3].ends_with("(stopped; no MPI wait recorded)"),
            "{t}"
        );
        assert!(
            lines[4].ends_with("(no MPI wait recorded: computing, or not in MPI)"),
            "{t}"
        );
        assert!(
            lines[5].contains("(last heard 7.0 s ago, may have moved on) barrier"),
            "{t}"
        );
        assert_eq!(lines[6], "  no answer from the daemon on node-b");
        assert_eq!(lines[7], "--- rank 1 (pid 101 on node-a):");
        assert_eq!(lines[8..], ["#0 raise", "#1 main"]);
    }

    #[test]
    fn gathering_completes_when_every_host_answered() {
        let mut p =
            PendingReport::new([0, 1].into_iter().collect(), "SIGUSR1".into(), false, false);
        assert!(!p.add(1, "b", vec![row(1, "sleeping", "", NO_TIME).1]));
        // A host that answers twice, or was not asked, changes nothing.
        assert!(!p.add(1, "b", vec![row(5, "sleeping", "", NO_TIME).1]));
        assert!(!p.add(7, "x", vec![]));
        assert!(p.add(0, "a", vec![row(0, "running", "", NO_TIME).1]));
        let t = p.render(&|h| format!("host{h}"));
        assert!(t.contains("(SIGUSR1)") && !t.contains("no answer"), "{t}");
        assert_eq!(t.lines().count(), 4, "{t}");
    }
}
