//! `kestrel-ifmatch explain`: its arguments, and the run that loads two card files, builds the
//! [`Explanation`] and prints it (optionally rendering a PNG with Graphviz).
//!
//! This module owns argument parsing and the exit code of `explain`. It must never compute a
//! pairing (that is [`model`], from `kestrel_usnic::matching`) nor format a report (that is
//! [`table`], [`json`] and [`dot`]). It never touches the network or the host's routing
//! table; `explain` works on card files only.
//!
//! # `kestrel-ifmatch explain LOCAL.json REMOTE.json`
//!
//! Options: `--local-rank N` (default 0), `--remote-rank M` (default 1), `--job J` (default
//! `job`, both processes), `--format table|json|dot` (default `table`), `--png FILE` (also
//! render the dot graph with Graphviz). Cards use the JSON format of `kestrel_usnic::card`.
//!
//! The report shows both cards, every candidate (local, remote) pair with its weight taken
//! apart (same subnet, min link speed, reachable, route metric) or the reason it has no edge,
//! the chosen pairing in the local process's view, unpaired interfaces with their reasons, and
//! the pairing the remote process would choose from its own routes. When those two pairings
//! differ it warns and names both (the transport's first handshake keeps the pairing of the
//! lower (job, rank) side).

use std::io::Write;
use std::path::Path;
use std::process::{Command as Process, Stdio};

use kestrel_usnic::card::HostCard;
use kestrel_usnic::matching::ProcessCard;

use crate::{usage, EXIT_NO_REACHABLE_PAIR, EXIT_OK, EXIT_TOOL_FAILED, EXIT_USAGE, PROGRAM};

pub mod dot;
pub mod json;
pub mod model;
pub mod table;

pub use model::Explanation;

/// Output format of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// The stable JSON document described in [`json`].
    Json,
    /// A Graphviz graph.
    Dot,
}

/// Parsed `explain` arguments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplainArgs {
    /// The local card file.
    pub local_file: String,
    /// The remote card file.
    pub remote_file: String,
    /// Rank of the local process.
    pub local_rank: u32,
    /// Rank of the remote process.
    pub remote_rank: u32,
    /// Job id of both processes.
    pub job: String,
    /// Output format.
    pub format: Format,
    /// Where to render a PNG, if asked.
    pub png: Option<String>,
}

/// What `explain` was asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExplainRequest {
    /// Print the usage.
    Help,
    /// Explain a pair of cards.
    Explain(ExplainArgs),
}

/// Parses `explain`'s arguments; the error is a one-line message without the program name.
pub fn parse_explain_args(args: &[String]) -> Result<ExplainRequest, String> {
    let mut files = Vec::new();
    let mut local_rank = 0u32;
    let mut remote_rank = 1u32;
    let mut job = "job".to_string();
    let mut format = Format::Table;
    let mut png = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        if !arg.starts_with("--") || arg == "--" {
            if arg == "-h" {
                return Ok(ExplainRequest::Help);
            }
            files.push(arg.clone());
            continue;
        }
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) => (n, Some(v.to_string())),
            None => (arg.as_str(), None),
        };
        if name == "--help" {
            return Ok(ExplainRequest::Help);
        }
        let mut value = || -> Result<String, String> {
            match inline.clone().or_else(|| it.next().cloned()) {
                Some(v) => Ok(v),
                None => Err(format!("{name} needs a value")),
            }
        };
        let rank = |v: String| -> Result<u32, String> {
            v.parse::<u32>()
                .map_err(|_| format!("{name} needs a rank (0 to 4294967295), got '{v}'"))
        };
        match name {
            "--local-rank" => local_rank = rank(value()?)?,
            "--remote-rank" => remote_rank = rank(value()?)?,
            "--job" => {
                job = value()?;
                if job.is_empty() {
                    return Err("--job needs a non-empty job id".to_string());
                }
            }
            "--format" => {
                format = match value()?.as_str() {
                    "table" => Format::Table,
                    "json" => Format::Json,
                    "dot" => Format::Dot,
                    other => {
                        return Err(format!(
                            "--format must be table, json or dot, got '{other}'"
                        ))
                    }
                }
            }
            "--png" => png = Some(value()?),
            _ => return Err(format!("unknown option '{name}'")),
        }
    }
    let [local_file, remote_file] = <[String; 2]>::try_from(files).map_err(|files| {
        format!(
            "explain needs exactly two card files (LOCAL.json REMOTE.json), got {}",
            files.len()
        )
    })?;
    if local_rank == remote_rank {
        return Err(format!(
            "--local-rank and --remote-rank are both {local_rank}; two processes of one job \
             have different ranks"
        ));
    }
    Ok(ExplainRequest::Explain(ExplainArgs {
        local_file,
        remote_file,
        local_rank,
        remote_rank,
        job,
        format,
        png,
    }))
}

/// Runs `explain` with its arguments (after the subcommand name); returns the exit code.
pub(crate) fn run_explain(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let args = match parse_explain_args(args) {
        Ok(ExplainRequest::Help) => {
            let _ = write!(out, "{}", usage());
            return EXIT_OK;
        }
        Ok(ExplainRequest::Explain(args)) => args,
        Err(message) => {
            let _ = writeln!(
                err,
                "{PROGRAM} explain: {message}; run '{PROGRAM} --help' for usage"
            );
            return EXIT_USAGE;
        }
    };
    let load = |file: &str| HostCard::from_file(Path::new(file));
    let (local_card, remote_card) = match (load(&args.local_file), load(&args.remote_file)) {
        (Ok(l), Ok(r)) => (l, r),
        (Err(e), _) | (_, Err(e)) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            return EXIT_USAGE;
        }
    };
    let explanation = Explanation::new(
        ProcessCard {
            job: args.job.clone(),
            rank: args.local_rank,
            card: local_card,
        },
        ProcessCard {
            job: args.job.clone(),
            rank: args.remote_rank,
            card: remote_card,
        },
        &args.local_file,
        &args.remote_file,
    );
    let text = match args.format {
        Format::Table => explanation.render_table(),
        Format::Json => explanation.render_json(),
        Format::Dot => explanation.render_dot(),
    };
    let _ = write!(out, "{text}");
    let _ = out.flush();
    if args.format != Format::Table {
        // The table carries its warnings; other formats are for tools, so people see them here.
        for w in explanation.warnings() {
            let _ = writeln!(err, "{PROGRAM}: warning: {w}");
        }
    }

    let mut code = EXIT_OK;
    if let Some(png) = &args.png {
        if let Err(message) = render_png(&explanation.render_dot(), png) {
            let _ = writeln!(err, "{PROGRAM}: {message}");
            code = EXIT_TOOL_FAILED;
        }
    }
    if let Some(message) = explanation.no_reachable_pair() {
        let _ = writeln!(err, "{PROGRAM}: {message}");
        if code == EXIT_OK {
            code = EXIT_NO_REACHABLE_PAIR;
        }
    }
    code
}

/// Pipes a dot graph through Graphviz into a PNG file.
fn render_png(dot: &str, file: &str) -> Result<(), String> {
    let child = Process::new("dot")
        .arg("-Tpng")
        .arg("-o")
        .arg(file)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(format!(
                "--png needs Graphviz's 'dot' command, which is not installed (not found in \
                 PATH); install it with 'apt-get install graphviz' (Debian, Ubuntu) or \
                 'dnf install graphviz', or use '--format dot' and render the graph elsewhere; \
                 {file} was not written"
            ))
        }
        Err(e) => return Err(format!("cannot run Graphviz's 'dot' for --png: {e}")),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(dot.as_bytes())
            .map_err(|e| format!("cannot send the graph to Graphviz's 'dot': {e}"))?;
    }
    let output = child
        .wait_with_output()
        .map_err(|e| format!("Graphviz's 'dot' did not finish: {e}"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "Graphviz's 'dot -Tpng -o {file}' failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn explain_arguments() {
        let parsed = parse_explain_args(&args(&[
            "a.json",
            "--remote-rank=7",
            "b.json",
            "--local-rank",
            "3",
            "--job",
            "j9",
            "--format",
            "json",
            "--png",
            "g.png",
        ]))
        .unwrap();
        assert_eq!(
            parsed,
            ExplainRequest::Explain(ExplainArgs {
                local_file: "a.json".into(),
                remote_file: "b.json".into(),
                local_rank: 3,
                remote_rank: 7,
                job: "j9".into(),
                format: Format::Json,
                png: Some("g.png".into()),
            })
        );
        let defaults = parse_explain_args(&args(&["a", "b"])).unwrap();
        let ExplainRequest::Explain(d) = defaults else {
            panic!("not an explain request")
        };
        assert_eq!(
            (d.local_rank, d.remote_rank, d.format),
            (0, 1, Format::Table)
        );
        assert_eq!(
            parse_explain_args(&args(&["a", "b", "--help"])),
            Ok(ExplainRequest::Help)
        );
        for (bad, needle) in [
            (&["a"][..], "exactly two card files"),
            (&["a", "b", "c"], "got 3"),
            (&["a", "b", "--format", "svg"], "table, json or dot"),
            (&["a", "b", "--local-rank", "-1"], "needs a rank"),
            (&["a", "b", "--local-rank"], "needs a value"),
            (&["a", "b", "--remote-rank", "0"], "both 0"),
            (&["a", "b", "--frobnicate"], "unknown option '--frobnicate'"),
            (&["a", "b", "--job="], "non-empty"),
        ] {
            let e = parse_explain_args(&args(bad)).unwrap_err();
            assert!(e.contains(needle), "{bad:?}: {e}");
        }
    }
}
