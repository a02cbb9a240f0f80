//! `kestrel-ifmatch check`: run under `kestrel-run`, every rank opens the usnic transport,
//! probes each paired interface of every peer with a small and an MTU-sized datagram, and rank
//! 0 prints a host x host matrix with the failing pairs and their causes.
//!
//! This module owns the subcommand's arguments, the gathering of results and the report. It
//! must never probe or pair interfaces its own way: the probes are
//! `UsnicBtl::connectivity_check` and the pairs those of `UsnicBtl::add_peer`, exactly as a
//! job's.

use std::fmt::Write as _;
use std::io::Write;

use kestrel_transport::set::new_job_key;
use kestrel_usnic::btl::UsnicBtl;
use kestrel_usnic::card::ModexCard;
use kestrel_usnic::discovery::{self, ExclusionReason, Verdict};
use serde::{Deserialize, Serialize};

use crate::{EXIT_OK, EXIT_TOOL_FAILED, EXIT_USAGE, PROGRAM};

/// One line of a rank's check results, gathered on rank 0.
#[derive(Debug, Clone, Serialize, Deserialize)]
struct CheckLine {
    from: String,
    to: String,
    local: String,
    remote: String,
    /// "ok", "mtu", "fail", "down" or "nopair".
    verdict: String,
    detail: String,
}

/// Runs `check [--timeout SECONDS]`; returns the exit code.
pub(crate) fn run_check(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut timeout = std::time::Duration::from_secs(5);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match (a.as_str(), it.clone().next().map(|v| v.parse::<f64>())) {
            ("--timeout", Some(Ok(secs))) if secs > 0.0 && secs < 3600.0 => {
                timeout = std::time::Duration::from_secs_f64(secs);
                it.next();
            }
            _ => {
                let _ = writeln!(err, "{PROGRAM}: check takes --timeout SECONDS (0 < S < 3600); run '{PROGRAM} --help'");
                return EXIT_USAGE;
            }
        }
    }
    let mut specs = kestrel_transport::core_params::specs();
    specs.extend(kestrel_runtime::params::specs());
    specs.extend(kestrel_usnic::params::specs());
    let params = match kestrel_transport::params::Params::from_env(&specs) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            return EXIT_USAGE;
        }
    };
    let mut rt = match kestrel_runtime::Runtime::init(&params) {
        Ok(rt) => rt,
        Err(e) => {
            let _ = writeln!(
                err,
                "{PROGRAM} check: {e} (run it under kestrel-run with one or more ranks per host)"
            );
            return EXIT_TOOL_FAILED;
        }
    };
    match check_ranks(&params, &mut rt, timeout, out) {
        Ok(code) => {
            let _ = rt.finalize();
            code
        }
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM} check: rank {}: {e}", rt.rank());
            rt.abort(EXIT_TOOL_FAILED, &e)
        }
    }
}

fn check_ranks(
    params: &kestrel_transport::params::Params,
    rt: &mut kestrel_runtime::Runtime,
    timeout: std::time::Duration,
    out: &mut dyn Write,
) -> Result<i32, String> {
    let (rank, size) = (rt.rank(), rt.size());
    let node = rt.node_id().to_string();
    let nodes = rt.node_ids().map_err(|e| e.to_string())?.to_vec();
    let found = discovery::discover(params).map_err(|e| e.to_string())?;
    let mut btl = UsnicBtl::new(params, rank, rt.job_id(), &node)?;
    if rank == 0 {
        rt.put("usnic_key", &new_job_key().to_le_bytes())
            .map_err(|e| e.to_string())?;
    }
    if let Some(b) = &btl {
        rt.put("usnic", &b.card().encode())
            .map_err(|e| e.to_string())?;
    }
    rt.fence().map_err(|e| e.to_string())?;
    let key = rt
        .get(0, "usnic_key")
        .map_err(|e| e.to_string())?
        .and_then(|k| <[u8; 8]>::try_from(&k[..]).ok())
        .map(u64::from_le_bytes)
        .ok_or("rank 0 published no key")?;
    let mut lines = Vec::new();
    // Interfaces that are down: their peers' interfaces on the same subnet have no partner.
    for i in &found.interfaces {
        if let (Verdict::Excluded(why @ ExclusionReason::Down { .. }), Some(ip)) =
            (&i.verdict, i.ipv4)
        {
            lines.push(CheckLine {
                from: node.clone(),
                to: String::new(),
                local: format!("{} ({ip}/{})", i.name, i.prefix_len),
                remote: String::new(),
                verdict: "down".into(),
                detail: why.to_string(),
            });
        }
    }
    if let Some(b) = btl.as_mut() {
        b.set_key(key);
        for peer in (0..size).filter(|&r| r != rank) {
            let Some(bytes) = rt.get(peer, "usnic").map_err(|e| e.to_string())? else {
                lines.push(CheckLine {
                    from: node.clone(),
                    to: nodes[peer as usize].clone(),
                    local: "-".into(),
                    remote: "-".into(),
                    verdict: "nopair".into(),
                    detail: format!(
                        "rank {peer} has no usable interface (`{PROGRAM} list` on {})",
                        nodes[peer as usize]
                    ),
                });
                continue;
            };
            let card =
                ModexCard::decode(&bytes).map_err(|e| format!("card of rank {peer}: {e}"))?;
            if let Err(why) = b.add_peer(peer, card) {
                lines.push(CheckLine {
                    from: node.clone(),
                    to: nodes[peer as usize].clone(),
                    local: "-".into(),
                    remote: "-".into(),
                    verdict: "nopair".into(),
                    detail: why,
                });
            }
        }
        for r in b.connectivity_check(timeout, std::time::Duration::from_millis(300)) {
            let verdict = match (r.small_ok, r.large_ok) {
                (true, true) => "ok",
                (true, false) => "mtu",
                _ => "fail",
            };
            lines.push(CheckLine {
                from: node.clone(),
                to: r.peer_node.clone(),
                local: r.local.clone(),
                remote: r.remote.clone(),
                verdict: verdict.into(),
                detail: r.diagnosis.unwrap_or_default(),
            });
        }
    } else {
        lines.push(CheckLine {
            from: node.clone(),
            to: String::new(),
            local: "-".into(),
            remote: "-".into(),
            verdict: "nopair".into(),
            detail: format!("{node} has no usable interface (`{PROGRAM} list` there shows why)"),
        });
    }
    let mine = serde_json::to_vec(&lines).expect("check lines serialize");
    let all = rt.allgather(&mine).map_err(|e| e.to_string())?;
    let mut every: Vec<CheckLine> = Vec::new();
    for (r, bytes) in all.iter().enumerate() {
        let v: Vec<CheckLine> = serde_json::from_slice(bytes)
            .map_err(|e| format!("rank {r} sent unreadable results: {e}"))?;
        every.extend(v);
    }
    let failed = report_check(&nodes, &every, timeout, rank == 0, out);
    // Only rank 0 reports, so only rank 0 fails: another rank exiting non-zero first would
    // make the launcher stop rank 0 before it printed anything.
    Ok(if failed && rank == 0 {
        EXIT_TOOL_FAILED
    } else {
        EXIT_OK
    })
}

/// Prints the matrix and the failing pairs (when `print`); returns whether anything failed.
fn report_check(
    nodes: &[String],
    lines: &[CheckLine],
    timeout: std::time::Duration,
    print: bool,
    out: &mut dyn Write,
) -> bool {
    let mut hosts: Vec<&String> = Vec::new();
    for n in nodes {
        if !hosts.contains(&n) {
            hosts.push(n);
        }
    }
    // A down interface fails every pair whose other end has a used interface on its subnet;
    // the partner's side shows as that interface's missing pair.
    let mut problems: Vec<String> = Vec::new();
    let rank_of = |v: &str| match v {
        "ok" => 0,
        "mtu" => 2,
        "down" => 3,
        _ => 4,
    };
    let mut matrix = vec![vec![String::from("-"); hosts.len()]; hosts.len()];
    for l in lines {
        let Some(i) = hosts.iter().position(|h| **h == l.from) else {
            continue;
        };
        if l.verdict == "down" {
            for (j, row) in matrix.iter_mut().enumerate() {
                let slot = &mut row[i];
                if j != i && (*slot == "-" || rank_of(slot) < rank_of("down")) {
                    *slot = "DOWN".to_string();
                }
            }
            problems.push(format!(
                "{} {}: {} -- every pair with this interface is lost; bring it up (`ip link set IF up`) or exclude it (KESTREL_USNIC_IF_EXCLUDE)",
                l.from, l.local, l.detail
            ));
            continue;
        }
        let Some(j) = hosts.iter().position(|h| **h == l.to) else {
            continue;
        };
        let shown = match l.verdict.as_str() {
            "ok" => "ok",
            "mtu" => "MTU",
            "nopair" => "NOPAIR",
            _ => "FAIL",
        };
        let slot = &mut matrix[i][j];
        let current = match slot.as_str() {
            "-" => -1,
            "ok" => 0,
            "MTU" => 2,
            "DOWN" => 3,
            _ => 4,
        };
        if rank_of(&l.verdict) > current || current < 0 {
            *slot = shown.to_string();
        }
        if l.verdict != "ok" {
            let cause = match l.verdict.as_str() {
                "mtu" => "small probes pass, MTU-sized probes are lost: MTU mismatch".to_string(),
                "nopair" => "no interface pair".to_string(),
                _ => "no probe answered: unreachable".to_string(),
            };
            problems.push(format!(
                "{} {} -> {} {}: {cause}{}{}",
                l.from,
                l.local,
                l.to,
                l.remote,
                if l.detail.is_empty() { "" } else { "; " },
                l.detail
            ));
        }
    }
    problems.sort();
    problems.dedup();
    if print {
        let w = hosts.iter().map(|h| h.len()).max().unwrap_or(1).max(6);
        let _ = writeln!(
            out,
            "{PROGRAM} check: {} hosts, {} ranks, small and MTU-sized probes, timeout {:.1} s",
            hosts.len(),
            nodes.len(),
            timeout.as_secs_f64()
        );
        let mut head = format!("{:w$}", "from\\to");
        for h in &hosts {
            let _ = write!(head, "  {h:>w$}");
        }
        let _ = writeln!(out, "{head}");
        for (i, h) in hosts.iter().enumerate() {
            let mut row = format!("{h:w$}");
            for c in &matrix[i] {
                let _ = write!(row, "  {c:>w$}");
            }
            let _ = writeln!(out, "{row}");
        }
        if problems.is_empty() {
            let paths = lines.iter().filter(|l| l.verdict == "ok").count();
            let _ = writeln!(out, "all {paths} paths answered both probes");
        } else {
            let _ = writeln!(out, "FAILED:");
            for p in &problems {
                let _ = writeln!(out, "  {p}");
            }
        }
    }
    !problems.is_empty()
}
