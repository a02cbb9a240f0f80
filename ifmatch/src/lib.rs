//! `kestrel-ifmatch`, the interface-matching diagnostics command of the network transports
//! (usnic, and with `--transport ofi` the ofi transport): the
//! command line (subcommand table, usage, exit codes) and the subcommands behind it.
//!
//! This crate owns what the command prints and how it is invoked; it must never compute a
//! pairing, a card or an interface verdict its own way. Every edge, pair, card and verdict
//! comes from `kestrel-usnic` (`matching`, `card`, `discovery`, `btl`), exactly as the
//! transport computes them, so what the command shows is what a rank would do.
//!
//! * [`explain`]: `explain LOCAL.json REMOTE.json`, on card files only (its argument parsing,
//!   the model and its table, JSON and dot renderings);
//! * [`host`]: `list` and `card`, this host as the transport's discovery sees it;
//! * [`check`]: `check`, probing every paired interface of a job's hosts under `kestrel-run`;
//! * [`ofi`]: `list`, `card` and `explain` with `--transport ofi`: the ofi transport's RDM
//!   domains, card and pairs (from `kestrel-ofi`).
//!
//! # Exit codes
//!
//! | code | meaning |
//! |---|---|
//! | 0 | report printed |
//! | 1 | a helper tool failed (Graphviz missing or failing for `--png`) |
//! | 2 | usage error, or a card file that is unreadable, malformed or of an unknown version |
//! | 3 | no reachable pair: one of the two sides (or both) sees no edge at all |
//!
//! A reliable-datagram connection needs both directions (ACKs travel back), so exit code 3
//! is used as soon as either side's routing view has no edge.
// The command needs libfabric (discovery, cards, probes); without the feature nothing is built.
#![cfg(feature = "libfabric")]

use std::fmt::Write as _;
use std::io::Write;

pub mod check;
pub mod explain;
pub mod host;
pub mod ofi;

/// Exit code: report printed.
pub const EXIT_OK: i32 = 0;
/// Exit code: a helper tool (Graphviz) is missing or failed.
pub const EXIT_TOOL_FAILED: i32 = 1;
/// Exit code: usage error or unusable card file.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: no reachable interface pair.
pub const EXIT_NO_REACHABLE_PAIR: i32 = 3;

/// The program name, as messages and the usage text spell it.
pub(crate) const PROGRAM: &str = "kestrel-ifmatch";

/// One subcommand: how it is invoked, what it does, and its entry point.
struct Subcommand {
    name: &'static str,
    synopsis: &'static str,
    summary: &'static str,
    run: fn(&[String], &mut dyn Write, &mut dyn Write) -> i32,
}

/// Every subcommand; the usage text lists exactly these.
const SUBCOMMANDS: &[Subcommand] = &[
    Subcommand {
        name: "list",
        synopsis: "list [--json]",
        summary: "This host's interfaces as the usnic transport sees them: used, or excluded and why.",
        run: host::run_list,
    },
    Subcommand {
        name: "card",
        synopsis: "card [--node NAME] [--compact]",
        summary: "This host's business card as JSON: what a rank publishes in the modex.",
        run: host::run_card,
    },
    Subcommand {
        name: "check",
        synopsis: "check [--timeout SECONDS]   (under kestrel-run, one or more ranks per host)",
        summary: "Probes every paired interface with a small and an MTU-sized datagram; prints a host x host matrix.",
        run: check::run_check,
    },
    Subcommand {
    name: "explain",
    synopsis:
        "explain LOCAL.json REMOTE.json [--local-rank N] [--remote-rank M] [--job J]\n          \
               [--format table|json|dot] [--png FILE]",
    summary: "How the usnic transport pairs the interfaces of two business cards, and why.",
    run: explain::run_explain,
    },
];

/// The usage text: every subcommand of [`SUBCOMMANDS`] and the `explain` options.
pub(crate) fn usage() -> String {
    let mut text = format!(
        "usage: {PROGRAM} <command> [options]\n\n\
         Shows how Kestrel's usnic transport pairs local and remote network interfaces.\n\ncommands:\n"
    );
    for cmd in SUBCOMMANDS {
        let _ = writeln!(text, "  {PROGRAM} {}\n      {}", cmd.synopsis, cmd.summary);
    }
    text.push_str(
        "\nThe usnic parameters (KESTREL_USNIC_IF_INCLUDE, KESTREL_USNIC_IF_EXCLUDE,\n\
         KESTREL_USNIC_LINK_SPEED, KESTREL_USNIC_PROVIDER) apply to list and card as to a job.\n\
         \nlist, card and explain take --transport usnic (the default) or --transport ofi: the\n\
         ofi transport's RDM domains and verdicts, its card (endpoints opened as a rank opens\n\
         them) and the pairs two ofi cards form, under the KESTREL_OFI_* parameters.\n\
         \nexplain options:\n  \
         --local-rank N   rank of the process holding LOCAL.json (default 0)\n  \
         --remote-rank M  rank of the process holding REMOTE.json (default 1)\n  \
         --job J          job id of both processes (default \"job\")\n  \
         --format F       table (default), json (stable, versioned) or dot (Graphviz)\n  \
         --png FILE       also render the graph to FILE with Graphviz's dot\n\n\
         exit codes: 0 ok; 1 Graphviz missing or failed; 2 usage or card file error;\n\
         3 no reachable interface pair\n",
    );
    text
}

/// Runs the command line `args` (without the program name); returns the exit code.
pub fn run(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let Some(first) = args.first() else {
        let _ = write!(err, "{}", usage());
        return EXIT_USAGE;
    };
    if matches!(first.as_str(), "-h" | "--help" | "help") {
        let _ = write!(out, "{}", usage());
        return EXIT_OK;
    }
    let mut rest: Vec<String> = args[1..].to_vec();
    let transport = match rest.iter().position(|a| a == "--transport") {
        None => "usnic".to_string(),
        Some(i) => {
            let Some(t) = rest.get(i + 1).cloned() else {
                let _ = writeln!(err, "{PROGRAM}: --transport needs usnic or ofi");
                return EXIT_USAGE;
            };
            rest.drain(i..=i + 1);
            t
        }
    };
    match transport.as_str() {
        "usnic" => {}
        "ofi" => return run_ofi(first, &rest, out, err),
        other => {
            let _ = writeln!(err, "{PROGRAM}: unknown transport '{other}' (usnic or ofi)");
            return EXIT_USAGE;
        }
    }
    match SUBCOMMANDS.iter().find(|c| c.name == first) {
        Some(cmd) => (cmd.run)(&rest, out, err),
        None => {
            let names: Vec<&str> = SUBCOMMANDS.iter().map(|c| c.name).collect();
            let _ = writeln!(
                err,
                "{PROGRAM}: unknown command '{first}' (commands: {}); run '{PROGRAM} --help'",
                names.join(", ")
            );
            EXIT_USAGE
        }
    }
}

/// Prints `rows` as aligned columns, two spaces apart (the last column unpadded).
pub(crate) fn print_rows(out: &mut dyn Write, rows: &[Vec<String>]) {
    let columns = rows.first().map_or(0, Vec::len);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in rows {
        let mut line = String::new();
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

/// The `--transport ofi` forms of `list`, `card` and `explain`.
fn run_ofi(command: &str, args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    match command {
        "list" => match args {
            [] => ofi::run_list(false, out, err),
            [a] if a == "--json" => ofi::run_list(true, out, err),
            _ => {
                let _ = writeln!(err, "{PROGRAM}: list takes only --json and --transport");
                EXIT_USAGE
            }
        },
        "card" => match host::parse_card_args(args, err) {
            Ok((node, compact)) => ofi::run_card(&node, compact, out, err),
            Err(code) => code,
        },
        "explain" => ofi::run_explain(args, out, err),
        other => {
            let _ = writeln!(
                err,
                "{PROGRAM}: '{other}' covers the usnic transport only (--transport ofi: list, \
                 card, explain)"
            );
            EXIT_USAGE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn usage_lists_only_existing_commands() {
        let text = usage();
        for cmd in SUBCOMMANDS {
            assert!(text.contains(&format!("{PROGRAM} {}", cmd.name)));
        }
        assert!(!text.contains(&format!("{PROGRAM} frob")));
        let mut out = Vec::new();
        let mut err = Vec::new();
        assert_eq!(run(&args(&["frob"]), &mut out, &mut err), EXIT_USAGE);
        assert!(String::from_utf8_lossy(&err).contains("unknown command 'frob'"));
        assert_eq!(run(&[], &mut out, &mut err), EXIT_USAGE);
    }
}
