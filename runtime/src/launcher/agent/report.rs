//! Hang reports, the agent's half: the state of each running rank of this host, read from
//! outside the rank (its `/proc` entry, its wait record in the session directory, and, when
//! asked, its stacks through gdb or eu-stack), so that a stopped or deadlocked rank is
//! described as well as a healthy one.
//!
//! It owns the reading and the stack tools' invocation. It never signals or changes a rank
//! (a debugger attaches and detaches; a stopped rank stays stopped), and it never blocks the
//! agent's event loop: the report is built in a task of its own.

use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::sync::mpsc::UnboundedSender;

use crate::launcher::proto::{RankReport, ToHead, NO_TIME};
use crate::wait_board;

/// Longest a stack tool may take for one rank.
const STACK_TIMEOUT: Duration = Duration::from_secs(10);
/// Bytes of a rank's stacks kept in a report.
const MAX_STACK: usize = 16 << 10;

/// Builds the report for `ranks` (rank, pid) and sends it to the head.
pub(super) fn start(
    ranks: Vec<(u32, u32)>,
    session_dir: Option<PathBuf>,
    stacks: bool,
    to_head: UnboundedSender<ToHead>,
) {
    tokio::spawn(async move {
        let mut out = Vec::with_capacity(ranks.len());
        for (rank, pid) in ranks {
            let mut r = describe(rank, pid, session_dir.as_deref());
            if stacks && r.state != "gone" {
                r.stack = stack_of(pid).await;
            }
            out.push(r);
        }
        let _ = to_head.send(ToHead::Report { ranks: out });
    });
}

/// What `/proc` and the wait record say about one rank.
fn describe(rank: u32, pid: u32, session_dir: Option<&Path>) -> RankReport {
    let (state, cpu_ms) = proc_state(pid);
    let mut report = RankReport {
        rank,
        pid,
        state,
        cpu_ms,
        waiting: String::new(),
        stalled_ms: NO_TIME,
        heard_ms: NO_TIME,
        stack: String::new(),
    };
    if let Some(dir) = session_dir {
        match wait_board::read(&wait_board::record_path(dir, rank)) {
            Ok(record) if record.pid == pid && record.rank == rank => {
                let now = wait_board::monotonic_ns();
                report.waiting = record.waiting;
                report.stalled_ms = now.saturating_sub(record.since_ns) / 1_000_000;
                report.heard_ms = now.saturating_sub(record.heartbeat_ns) / 1_000_000;
            }
            Ok(record) => {
                tracing::warn!(target: "launcher", "wait record of rank {rank} names rank {} pid {}; ignored", record.rank, record.pid);
            }
            Err(e) => {
                tracing::debug!(target: "launcher", "no wait record for rank {rank}: {e}");
            }
        }
    }
    report
}

/// The process state in a word and the CPU time used (ms), from `/proc/PID/stat`.
fn proc_state(pid: u32) -> (String, u64) {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return ("gone".into(), 0);
    };
    // "PID (COMM) STATE PPID ..." with COMM possibly holding spaces or parentheses: the
    // fields after the last ')' are fixed. utime and stime are fields 14 and 15 (1-based).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return ("unknown".into(), 0);
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let word = match fields.first().copied().unwrap_or("?") {
        "R" => "running",
        "S" => "sleeping",
        "D" => "disk-wait",
        "T" => "STOPPED",
        "t" => "traced",
        "Z" => "zombie",
        "X" => "gone",
        "I" => "idle",
        other => other,
    };
    let ticks = |i: usize| -> u64 { fields.get(i).and_then(|v| v.parse().ok()).unwrap_or(0) };
    // fields[0] is field 3 (state), so utime (14) is fields[11] and stime (15) fields[12].
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|&h| h > 0)
        .unwrap_or(100) as u64;
    let cpu_ms = (ticks(11) + ticks(12)) * 1000 / hz;
    (word.to_string(), cpu_ms)
}

/// The stacks of every thread of `pid`, by eu-stack or gdb (whichever is installed), or why
/// there are none.
async fn stack_of(pid: u32) -> String {
    let tools: [(&str, Vec<String>); 2] = [
        ("eu-stack", vec!["-p".into(), pid.to_string()]),
        (
            "gdb",
            vec![
                "-nx".into(),
                "-batch".into(),
                "-p".into(),
                pid.to_string(),
                "-ex".into(),
                "thread apply all bt".into(),
            ],
        ),
    ];
    for (tool, args) in tools {
        let mut cmd = tokio::process::Command::new(tool);
        cmd.args(&args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let out = match tokio::time::timeout(STACK_TIMEOUT, cmd.output()).await {
            Ok(Ok(out)) => out,
            Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Ok(Err(e)) => return format!("({tool} failed: {e})"),
            Err(_) => return format!("({tool} took over {} s)", STACK_TIMEOUT.as_secs()),
        };
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        if text.trim().is_empty() {
            text = String::from_utf8_lossy(&out.stderr).into_owned();
        }
        if text.len() > MAX_STACK {
            let mut end = MAX_STACK;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("\n(cut)");
        }
        return text;
    }
    "(no stacks: install gdb or elfutils' eu-stack)".into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_running_and_a_missing_one_gone() {
        // The test harness's main thread (whose state the pid shows) runs or waits.
        let (state, _) = proc_state(std::process::id());
        assert!(state == "running" || state == "sleeping", "{state}");
        assert_eq!(proc_state(u32::MAX).0, "gone");
    }

    #[test]
    fn a_stopped_process_is_named_stopped() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let pid = nix::unistd::Pid::from_raw(child.id() as i32);
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGSTOP).unwrap();
        let mut state = String::new();
        for _ in 0..200 {
            state = proc_state(child.id()).0;
            if state == "STOPPED" {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(state, "STOPPED");
    }
}
