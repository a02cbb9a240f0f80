//! `kestrel-ifmatch list` and `kestrel-ifmatch card`: this host's interfaces and business card
//! as the usnic transport's discovery sees them, under the same `KESTREL_USNIC_*` parameters
//! as a job.
//!
//! This module owns the two subcommands' arguments and output. It must never decide itself
//! whether an interface is used (that is `kestrel_usnic::discovery`) nor build a card its own
//! way (that is `kestrel_usnic::card`); it never sends anything.

use std::io::Write;

use kestrel_usnic::card::{HostCard, JsonLayout};
use kestrel_usnic::discovery::{self, Discovery, SpeedSource, Verdict};

use crate::{EXIT_OK, EXIT_TOOL_FAILED, EXIT_USAGE, PROGRAM};

/// Discovery under the parameters from the environment; prints the error and gives `None`.
fn discover_here(err: &mut dyn Write) -> Option<Discovery> {
    let specs = kestrel_usnic::params::specs();
    let params = match kestrel_transport::params::Params::from_env(&specs) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            return None;
        }
    };
    match discovery::discover(&params) {
        Ok(found) => Some(found),
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            None
        }
    }
}

/// Runs `list [--json]`; returns the exit code.
pub(crate) fn run_list(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let json = match args {
        [] => false,
        [a] if a == "--json" => true,
        _ => {
            let _ = writeln!(
                err,
                "{PROGRAM}: list takes only --json; run '{PROGRAM} --help'"
            );
            return EXIT_USAGE;
        }
    };
    let Some(found) = discover_here(err) else {
        return EXIT_TOOL_FAILED;
    };
    if json {
        let text = serde_json::to_string_pretty(&found).expect("discovery serializes");
        let _ = writeln!(out, "{text}");
        return EXIT_OK;
    }
    let mut rows = vec![[
        "interface".to_string(),
        "provider/domain".to_string(),
        "ipv4".to_string(),
        "speed".to_string(),
        "mtu".to_string(),
        "verdict".to_string(),
    ]];
    for i in &found.interfaces {
        let speed = match (i.link_speed_mbps, &i.speed_source) {
            (Some(s), src) => format!("{s} Mb/s ({})", speed_source_name(src)),
            (None, _) => "unknown".to_string(),
        };
        rows.push([
            i.name.clone(),
            match (&i.provider, &i.domain) {
                (Some(p), Some(d)) => format!("{p}/{d}"),
                (Some(p), None) => p.clone(),
                _ => "-".to_string(),
            },
            i.ipv4
                .map(|a| format!("{a}/{}", i.prefix_len))
                .unwrap_or_else(|| "-".to_string()),
            speed,
            if i.mtu == 0 {
                "-".to_string()
            } else {
                i.mtu.to_string()
            },
            match &i.verdict {
                Verdict::Used => "used".to_string(),
                Verdict::Excluded(why) => format!("excluded: {why}"),
            },
        ]);
    }
    let rows: Vec<Vec<String>> = rows.into_iter().map(Vec::from).collect();
    crate::print_rows(out, &rows);
    if found.used().next().is_none() {
        let _ = writeln!(
            err,
            "{PROGRAM}: no interface is usable: ranks on other nodes cannot be reached over usnic from here"
        );
    }
    EXIT_OK
}

fn speed_source_name(s: &SpeedSource) -> &'static str {
    match s {
        SpeedSource::Sysfs => "sysfs",
        SpeedSource::Override => "KESTREL_USNIC_LINK_SPEED",
        SpeedSource::Unknown => "unknown",
    }
}

/// The node name a card carries by default: `KESTREL_NODE_ID`, else the host name.
pub(crate) fn default_node() -> String {
    std::env::var("KESTREL_NODE_ID")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "localhost".into())
        })
}

/// Parses `card`'s `[--node NAME] [--compact]` (for either transport): the node name (by
/// default [`default_node`]) and whether the JSON is compact; `Err` is the exit code after
/// the message.
pub(crate) fn parse_card_args(args: &[String], err: &mut dyn Write) -> Result<(String, bool), i32> {
    let mut node = default_node();
    let mut compact = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--node" => match it.next() {
                Some(n) => node = n.clone(),
                None => {
                    let _ = writeln!(err, "{PROGRAM}: --node needs a name");
                    return Err(EXIT_USAGE);
                }
            },
            "--compact" => compact = true,
            other => {
                let _ = writeln!(
                    err,
                    "{PROGRAM}: card does not take '{other}'; run '{PROGRAM} --help'"
                );
                return Err(EXIT_USAGE);
            }
        }
    }
    Ok((node, compact))
}

/// Runs `card [--node NAME] [--compact]`; returns the exit code.
pub(crate) fn run_card(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let (node, compact) = match parse_card_args(args, err) {
        Ok(parsed) => parsed,
        Err(code) => return code,
    };
    let layout = if compact {
        JsonLayout::Compact
    } else {
        JsonLayout::Pretty
    };
    let Some(found) = discover_here(err) else {
        return EXIT_TOOL_FAILED;
    };
    match HostCard::from_discovery(&found, &node) {
        Ok(card) => {
            let _ = writeln!(out, "{}", card.to_json(layout));
            EXIT_OK
        }
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: this host's card is invalid: {e}");
            EXIT_TOOL_FAILED
        }
    }
}
