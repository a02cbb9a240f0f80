//! The library side of `kestrel-ifmatch`, the interface-matching diagnostics command.
//!
//! This module owns the command line (subcommand table, argument parsing, exit codes) and the
//! `explain` report in its three formats. It must never compute a pairing its own way: every
//! edge and every pair comes from [`crate::matching`], exactly as the transport computes them,
//! so what the command shows is what a rank would do with the same cards. It never touches the
//! network or the host's routing table; `explain` works on card files only.
//!
//! # `kestrel-ifmatch explain LOCAL.json REMOTE.json`
//!
//! Options: `--local-rank N` (default 0), `--remote-rank M` (default 1), `--job J` (default
//! `job`, both processes), `--format table|json|dot` (default `table`), `--png FILE` (also
//! render the dot graph with Graphviz). Cards use the JSON format of [`crate::card`].
//!
//! The report shows both cards, every candidate (local, remote) pair with its weight taken
//! apart (same subnet, min link speed, reachable, route metric) or the reason it has no edge,
//! the chosen pairing in the local process's view, unpaired interfaces with their reasons, and
//! the pairing the remote process would choose from its own routes. When those two pairings
//! differ it warns and names both (the transport's first handshake keeps the pairing of the
//! lower (job, rank) side).
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
//!
//! # `--format json`, version 1 (stable)
//!
//! One object; fields in this order, none ever omitted (absent values are `null`):
//!
//! * `format`: `"kestrel-ifmatch-explain"`; `version`: 1.
//! * `local`, `remote`: `{node, job, rank, file, side ("left" or "right"), interfaces: [{index,
//!   name, ipv4, prefix_len, link_speed_mbps, mtu}], routes: [{dest, interface, metric}] or
//!   null}`.
//! * `candidates`: every (local, remote) pair, local-major: `{local_if, local_name, remote_if,
//!   remote_name, chosen, local_view, remote_view}`, where each view is `{reachable, weight,
//!   same_subnet, min_speed_gbps, metric, via, unreachable_reason}`; `weight` is the 64-bit weight
//!   as a JSON integer (always below 2^49, so exact); `via` describes the path when reachable,
//!   `unreachable_reason` says why not otherwise.
//! * `pairs`: the local view's pairing, `[{local_if, local_name, remote_if, remote_name,
//!   weight}]` sorted by `local_if`.
//! * `unpaired_local`, `unpaired_remote`: `[{index, name, reason, partners}]`, `reason` one of
//!   `"no_reachable_partner"`, `"partners_taken_by_better_pairs"`; `partners` are the names of
//!   the reachable interfaces on the other side.
//! * `remote_view_pairs`: the pairing the remote process computes from its own routes, in the
//!   local process's terms (same shape as `pairs`, weights from the remote view).
//! * `sides_agree`, `no_reachable_pair`: booleans; `warnings`: strings.
//!
//! # `--format dot`
//!
//! A Graphviz undirected graph: one cluster per process, one node per interface, one edge per
//! reachable pair in the local view labelled with its weight fields; chosen edges are bold.

use std::fmt::Write as _;
use std::io::Write;
use std::path::Path;
use std::process::{Command as Process, Stdio};

use serde::Serialize;

use crate::card::{CardInterface, HostCard};
use crate::matching::{self, Candidate, Pairing, ProcessCard, UnpairedReason};

/// Exit code: report printed.
pub const EXIT_OK: i32 = 0;
/// Exit code: a helper tool (Graphviz) is missing or failed.
pub const EXIT_TOOL_FAILED: i32 = 1;
/// Exit code: usage error or unusable card file.
pub const EXIT_USAGE: i32 = 2;
/// Exit code: no reachable interface pair.
pub const EXIT_NO_REACHABLE_PAIR: i32 = 3;

const PROGRAM: &str = "kestrel-ifmatch";

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
        run: run_list,
    },
    Subcommand {
        name: "card",
        synopsis: "card [--node NAME] [--compact]",
        summary: "This host's business card as JSON: what a rank publishes in the modex.",
        run: run_card,
    },
    Subcommand {
        name: "check",
        synopsis: "check [--timeout SECONDS]   (under kestrel-run, one or more ranks per host)",
        summary: "Probes every paired interface with a small and an MTU-sized datagram; prints a host x host matrix.",
        run: run_check,
    },
    Subcommand {
    name: "explain",
    synopsis:
        "explain LOCAL.json REMOTE.json [--local-rank N] [--remote-rank M] [--job J]\n          \
               [--format table|json|dot] [--png FILE]",
    summary: "How the usnic transport pairs the interfaces of two business cards, and why.",
    run: run_explain,
    },
];

fn usage() -> String {
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
    match SUBCOMMANDS.iter().find(|c| c.name == first) {
        Some(cmd) => (cmd.run)(&args[1..], out, err),
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

// ---------------------------------------------------------------------------------------------
// explain: arguments

/// Output format of `explain`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Aligned text for people.
    Table,
    /// The stable JSON document described in the module docs.
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

fn run_explain(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
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

// ---------------------------------------------------------------------------------------------
// explain: the model

/// Everything `explain` reports about one pair of cards.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The local process.
    pub local: ProcessCard,
    /// The remote process.
    pub remote: ProcessCard,
    /// The local card's file name.
    pub local_file: String,
    /// The remote card's file name.
    pub remote_file: String,
    /// Whether the local process supplies the left vertices of the canonical graph.
    pub local_is_left: bool,
    /// Every (local, remote) pair in the local routing view, local-major.
    pub local_view: Vec<Candidate>,
    /// Every (remote, local) pair in the remote routing view, remote-major, in remote terms.
    pub remote_view: Vec<Candidate>,
    /// The local process's pairing.
    pub pairing: Pairing,
    /// The remote process's pairing from its own routes, mirrored into local terms.
    pub remote_pairing: Pairing,
}

impl Explanation {
    /// Computes both views exactly as the transport does.
    pub fn new(
        local: ProcessCard,
        remote: ProcessCard,
        local_file: &str,
        remote_file: &str,
    ) -> Explanation {
        Explanation {
            local_is_left: matching::is_left(&local, &remote),
            local_view: matching::candidates(&local, &remote),
            remote_view: matching::candidates(&remote, &local),
            pairing: matching::pair(&local, &remote),
            remote_pairing: matching::pair(&remote, &local).mirrored(),
            local,
            remote,
            local_file: local_file.to_string(),
            remote_file: remote_file.to_string(),
        }
    }

    /// True when both processes choose the same pairs.
    pub fn sides_agree(&self) -> bool {
        self.pairing.index_pairs() == self.remote_pairing.index_pairs()
    }

    /// The remote view's candidate for (local_if, remote_if).
    fn remote_candidate(&self, local_if: usize, remote_if: usize) -> &Candidate {
        &self.remote_view[remote_if * self.local.card.interfaces.len() + local_if]
    }

    /// Why no connection is possible, when one or both sides see no edge at all.
    pub fn no_reachable_pair(&self) -> Option<String> {
        let local_edges = self.local_view.iter().any(|c| c.edge.is_ok());
        let remote_edges = self.remote_view.iter().any(|c| c.edge.is_ok());
        let (l, r) = (&self.local.card.node, &self.remote.card.node);
        let nothing = match self.local_view.len() {
            1 => "the only candidate pair shares no subnet and has no route".to_string(),
            n => format!("none of the {n} candidate pairs shares a subnet or has a route"),
        };
        let fix = "put the interfaces on a shared subnet or add routes (card field 'routes')";
        match (local_edges, remote_edges) {
            (true, true) => None,
            (false, false) if self.local_view.is_empty() => Some(format!(
                "no reachable interface pair between {l} and {r}: {} has no interfaces",
                if self.local.card.interfaces.is_empty() {
                    l
                } else {
                    r
                }
            )),
            (false, false) => Some(format!(
                "no reachable interface pair between {l} and {r}: {nothing}, from either \
                 side (reasons above); {fix}"
            )),
            (false, true) => Some(format!(
                "no reachable interface pair from {l}'s routes: {nothing} through {l}'s \
                 interfaces (reasons above), although {r} can reach {l}; {fix} on {l}"
            )),
            (true, false) => Some(format!(
                "no reachable interface pair from {r}'s routes: {r} can reach none of {l}'s \
                 interfaces, so nothing {l} sends could be acknowledged; {fix} on {r}"
            )),
        }
    }

    /// Warnings for people: today, the two sides choosing different pairs.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.sides_agree() {
            let (lower, lower_rank) = if self.local_is_left {
                (&self.local.card.node, self.local.rank)
            } else {
                (&self.remote.card.node, self.remote.rank)
            };
            warnings.push(format!(
                "the two sides could decide differently: from its own routes {} (rank {}) \
                 chooses {}, but {} (rank {}) chooses {}; the first handshake keeps the \
                 pairing of the lower (job, rank) side, {lower} (rank {lower_rank}); give both \
                 hosts symmetric routes and metrics to make them agree",
                self.local.card.node,
                self.local.rank,
                self.describe_pairs(&self.pairing),
                self.remote.card.node,
                self.remote.rank,
                self.describe_pairs(&self.remote_pairing),
            ));
        }
        warnings
    }

    fn local_name(&self, i: usize) -> &str {
        &self.local.card.interfaces[i].name
    }

    fn remote_name(&self, i: usize) -> &str {
        &self.remote.card.interfaces[i].name
    }

    /// `local eth1 <-> remote eth2, ...` with names from both cards.
    fn describe_pairs(&self, pairing: &Pairing) -> String {
        if pairing.pairs.is_empty() {
            return "no pairs".to_string();
        }
        let list: Vec<String> = pairing
            .pairs
            .iter()
            .map(|p| {
                format!(
                    "{}:{}<->{}:{}",
                    self.local.card.node,
                    self.local_name(p.local_if),
                    self.remote.card.node,
                    self.remote_name(p.remote_if)
                )
            })
            .collect();
        list.join(", ")
    }

    fn chosen(&self, local_if: usize, remote_if: usize) -> bool {
        self.pairing
            .pairs
            .iter()
            .any(|p| (p.local_if, p.remote_if) == (local_if, remote_if))
    }

    // -----------------------------------------------------------------------------------------
    // table

    /// The report for people.
    pub fn render_table(&self) -> String {
        let mut s = String::new();
        let (l, r) = (&self.local.card.node, &self.remote.card.node);
        self.table_process(
            &mut s,
            "local ",
            &self.local,
            &self.local_file,
            self.local_is_left,
        );
        self.table_process(
            &mut s,
            "remote",
            &self.remote,
            &self.remote_file,
            !self.local_is_left,
        );
        let _ = writeln!(
            s,
            "\nthe lower (job, rank) supplies the left side of the graph; weights below are \
             from {l}'s routes\n"
        );

        let _ = writeln!(s, "candidate pairs:");
        let mut rows = vec![row(&[
            "local",
            "remote",
            "same-subnet",
            "min-speed",
            "reachable",
            "metric",
            "weight",
            "chosen",
            "via / why no edge",
        ])];
        let mut differing = Vec::new();
        for c in &self.local_view {
            let mut cells = vec![
                self.local_name(c.local_if).to_string(),
                self.remote_name(c.remote_if).to_string(),
            ];
            match &c.edge {
                Ok(edge) => {
                    let parts = edge.weight.parts();
                    cells.extend([
                        yes_no(parts.same_subnet),
                        format!("{} Gb/s", parts.min_speed_gbps),
                        yes_no(parts.reachable),
                        parts.metric.to_string(),
                        edge.weight.to_string(),
                        yes_no(self.chosen(c.local_if, c.remote_if)),
                        edge.via.to_string(),
                    ]);
                }
                Err(why) => {
                    cells.extend(["-", "-", "no", "-", "-", "-"].map(String::from));
                    cells.push(format!("no edge: {why}"));
                }
            }
            rows.push(cells);
            let theirs = &self.remote_candidate(c.local_if, c.remote_if).edge;
            let mine = c.edge.as_ref().map(|e| e.weight).ok();
            if theirs.as_ref().map(|e| e.weight).ok() != mine {
                differing.push((c, theirs));
            }
        }
        s.push_str(&align(&rows));

        let _ = writeln!(
            s,
            "\nchosen pairing ({l}'s view, {} pair{}):",
            self.pairing.pairs.len(),
            if self.pairing.pairs.len() == 1 {
                ""
            } else {
                "s"
            }
        );
        if self.pairing.pairs.is_empty() {
            let _ = writeln!(s, "  none");
        } else {
            let rows: Vec<Vec<String>> = self
                .pairing
                .pairs
                .iter()
                .map(|p| {
                    vec![
                        format!(
                            "{} <-> {}",
                            self.local_name(p.local_if),
                            self.remote_name(p.remote_if)
                        ),
                        format!("weight {}", p.weight),
                    ]
                })
                .collect();
            s.push_str(&align(&rows));
        }
        self.table_unpaired(&mut s, "local", &self.pairing.unpaired_local, true);
        self.table_unpaired(&mut s, "remote", &self.pairing.unpaired_remote, false);

        let _ = writeln!(s, "\n{r}'s view (from its own routes):");
        if differing.is_empty() {
            let _ = writeln!(s, "  every candidate pair has the same weight as above");
        } else {
            for (c, theirs) in &differing {
                let mine = match &c.edge {
                    Ok(e) => format!("{} ({})", e.weight, e.via),
                    Err(_) => "no edge".to_string(),
                };
                let theirs = match theirs {
                    Ok(e) => format!("{} ({})", e.weight, e.via),
                    Err(why) => format!("no edge: {why}"),
                };
                let _ = writeln!(
                    s,
                    "  {} <-> {}: {l} sees {mine}; {r} sees {theirs}",
                    self.local_name(c.local_if),
                    self.remote_name(c.remote_if)
                );
            }
        }
        if self.sides_agree() && self.pairing.pairs.is_empty() {
            let _ = writeln!(s, "  {r} finds no pairs either");
        } else if self.sides_agree() {
            let _ = writeln!(s, "  {r} chooses the same pairs");
        }
        for w in self.warnings() {
            let _ = writeln!(s, "\nwarning: {w}");
        }
        s
    }

    fn table_process(&self, s: &mut String, label: &str, p: &ProcessCard, file: &str, left: bool) {
        let _ = writeln!(
            s,
            "{label} {} (job \"{}\", rank {}) from {file}: {} side",
            p.card.node,
            p.job.escape_default(),
            p.rank,
            if left { "left" } else { "right" }
        );
        let rows: Vec<Vec<String>> = p
            .card
            .interfaces
            .iter()
            .enumerate()
            .map(|(i, itf)| {
                vec![
                    format!("[{i}] {}", itf.name),
                    format!("{}/{}", itf.ipv4, itf.prefix_len),
                    speed_text(itf),
                    format!("mtu {}", itf.mtu),
                ]
            })
            .collect();
        if rows.is_empty() {
            let _ = writeln!(s, "  no interfaces");
        }
        s.push_str(&align(&rows));
        match &p.card.routes {
            None => {
                let _ = writeln!(s, "  routes: none listed (on-link subnets only)");
            }
            Some(routes) if routes.is_empty() => {
                let _ = writeln!(s, "  routes: none");
            }
            Some(routes) => {
                let _ = writeln!(s, "  routes:");
                for r in routes {
                    let _ = writeln!(
                        s,
                        "    {}/{} via {} metric {}",
                        r.dest, r.dest_prefix_len, r.interface, r.metric
                    );
                }
            }
        }
    }

    fn table_unpaired(
        &self,
        s: &mut String,
        side: &str,
        unpaired: &[(usize, UnpairedReason)],
        local: bool,
    ) {
        let _ = writeln!(s, "unpaired {side} interfaces:");
        if unpaired.is_empty() {
            let _ = writeln!(s, "  none");
        }
        let other = if local {
            &self.remote.card.node
        } else {
            &self.local.card.node
        };
        for (i, reason) in unpaired {
            let name = if local {
                self.local_name(*i)
            } else {
                self.remote_name(*i)
            };
            let why = match reason {
                UnpairedReason::NoReachablePartner if local => {
                    format!("reaches no interface of {other}")
                }
                UnpairedReason::NoReachablePartner => {
                    format!("no interface of {other} reaches it")
                }
                UnpairedReason::PartnersTakenByBetterPairs { partners } => format!(
                    "every partner it reaches ({}) is taken by a better pair",
                    self.partner_names(partners, local).join(", ")
                ),
            };
            let _ = writeln!(s, "  {name}: {why}");
        }
    }

    fn partner_names(&self, partners: &[usize], of_local: bool) -> Vec<String> {
        partners
            .iter()
            .map(|&p| {
                if of_local {
                    self.remote_name(p).to_string()
                } else {
                    self.local_name(p).to_string()
                }
            })
            .collect()
    }

    // -----------------------------------------------------------------------------------------
    // json

    /// The stable JSON document (see the module docs), pretty-printed, with a final newline.
    pub fn render_json(&self) -> String {
        let process = |p: &ProcessCard, file: &str, left: bool| JsonProcess {
            node: p.card.node.clone(),
            job: p.job.clone(),
            rank: p.rank,
            file: file.to_string(),
            side: if left { "left" } else { "right" },
            interfaces: p
                .card
                .interfaces
                .iter()
                .enumerate()
                .map(|(index, i)| JsonInterface {
                    index,
                    name: i.name.clone(),
                    ipv4: i.ipv4.to_string(),
                    prefix_len: i.prefix_len,
                    link_speed_mbps: i.link_speed_mbps,
                    mtu: i.mtu,
                })
                .collect(),
            routes: p.card.routes.as_ref().map(|routes| {
                routes
                    .iter()
                    .map(|r| JsonRoute {
                        dest: format!("{}/{}", r.dest, r.dest_prefix_len),
                        interface: r.interface.clone(),
                        metric: r.metric,
                    })
                    .collect()
            }),
        };
        let pairs = |pairing: &Pairing| -> Vec<JsonPair> {
            pairing
                .pairs
                .iter()
                .map(|p| JsonPair {
                    local_if: p.local_if,
                    local_name: self.local_name(p.local_if).to_string(),
                    remote_if: p.remote_if,
                    remote_name: self.remote_name(p.remote_if).to_string(),
                    weight: p.weight.value(),
                })
                .collect()
        };
        let unpaired = |list: &[(usize, UnpairedReason)], local: bool| -> Vec<JsonUnpaired> {
            list.iter()
                .map(|(index, reason)| {
                    let (reason, partners) = match reason {
                        UnpairedReason::NoReachablePartner => ("no_reachable_partner", vec![]),
                        UnpairedReason::PartnersTakenByBetterPairs { partners } => (
                            "partners_taken_by_better_pairs",
                            self.partner_names(partners, local),
                        ),
                    };
                    JsonUnpaired {
                        index: *index,
                        name: if local {
                            self.local_name(*index).to_string()
                        } else {
                            self.remote_name(*index).to_string()
                        },
                        reason,
                        partners,
                    }
                })
                .collect()
        };
        let doc = JsonExplain {
            format: "kestrel-ifmatch-explain",
            version: 1,
            local: process(&self.local, &self.local_file, self.local_is_left),
            remote: process(&self.remote, &self.remote_file, !self.local_is_left),
            candidates: self
                .local_view
                .iter()
                .map(|c| JsonCandidate {
                    local_if: c.local_if,
                    local_name: self.local_name(c.local_if).to_string(),
                    remote_if: c.remote_if,
                    remote_name: self.remote_name(c.remote_if).to_string(),
                    chosen: self.chosen(c.local_if, c.remote_if),
                    local_view: JsonEdge::from(&c.edge),
                    remote_view: JsonEdge::from(
                        &self.remote_candidate(c.local_if, c.remote_if).edge,
                    ),
                })
                .collect(),
            pairs: pairs(&self.pairing),
            unpaired_local: unpaired(&self.pairing.unpaired_local, true),
            unpaired_remote: unpaired(&self.pairing.unpaired_remote, false),
            remote_view_pairs: pairs(&self.remote_pairing),
            sides_agree: self.sides_agree(),
            no_reachable_pair: self.no_reachable_pair().is_some(),
            warnings: self.warnings(),
        };
        // Plain structs of strings, integers and booleans always serialise.
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }

    // -----------------------------------------------------------------------------------------
    // dot

    /// The Graphviz graph (see the module docs).
    pub fn render_dot(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "graph kestrel_ifmatch {{");
        let _ = writeln!(s, "  rankdir=LR;");
        let _ = writeln!(s, "  node [shape=box, fontname=\"monospace\"];");
        let _ = writeln!(s, "  edge [fontname=\"monospace\", fontsize=10];");
        for (prefix, p, left) in [
            ("l", &self.local, self.local_is_left),
            ("r", &self.remote, !self.local_is_left),
        ] {
            let role = if prefix == "l" { "local" } else { "remote" };
            let _ = writeln!(s, "  subgraph cluster_{role} {{");
            let _ = writeln!(
                s,
                "    label=\"{}\";",
                dot_escape(&format!(
                    "{role} {} (job \"{}\", rank {}, {} side)",
                    p.card.node,
                    p.job,
                    p.rank,
                    if left { "left" } else { "right" }
                ))
            );
            for (i, itf) in p.card.interfaces.iter().enumerate() {
                let paired = if prefix == "l" {
                    self.pairing.pairs.iter().any(|x| x.local_if == i)
                } else {
                    self.pairing.pairs.iter().any(|x| x.remote_if == i)
                };
                let _ = writeln!(
                    s,
                    "    {prefix}{i} [label=\"{}\"{}];",
                    dot_escape(&format!(
                        "{}\n{}/{}\n{}",
                        itf.name,
                        itf.ipv4,
                        itf.prefix_len,
                        speed_text(itf)
                    )),
                    if paired { "" } else { ", style=dashed" }
                );
            }
            let _ = writeln!(s, "  }}");
        }
        for c in &self.local_view {
            let Ok(edge) = &c.edge else { continue };
            let parts = edge.weight.parts();
            // The metric is part of `via` for routed pairs and 0 otherwise.
            let label = format!("{}\n{} Gb/s", edge.via, parts.min_speed_gbps);
            let style = if self.chosen(c.local_if, c.remote_if) {
                "style=bold, penwidth=3"
            } else {
                "color=gray50"
            };
            let _ = writeln!(
                s,
                "  l{} -- r{} [label=\"{}\", {style}];",
                c.local_if,
                c.remote_if,
                dot_escape(&label)
            );
        }
        let _ = writeln!(s, "}}");
        s
    }
}

#[derive(Serialize)]
struct JsonExplain {
    format: &'static str,
    version: u32,
    local: JsonProcess,
    remote: JsonProcess,
    candidates: Vec<JsonCandidate>,
    pairs: Vec<JsonPair>,
    unpaired_local: Vec<JsonUnpaired>,
    unpaired_remote: Vec<JsonUnpaired>,
    remote_view_pairs: Vec<JsonPair>,
    sides_agree: bool,
    no_reachable_pair: bool,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct JsonProcess {
    node: String,
    job: String,
    rank: u32,
    file: String,
    side: &'static str,
    interfaces: Vec<JsonInterface>,
    routes: Option<Vec<JsonRoute>>,
}

#[derive(Serialize)]
struct JsonInterface {
    index: usize,
    name: String,
    ipv4: String,
    prefix_len: u8,
    link_speed_mbps: Option<u32>,
    mtu: u32,
}

#[derive(Serialize)]
struct JsonRoute {
    dest: String,
    interface: String,
    metric: u32,
}

#[derive(Serialize)]
struct JsonCandidate {
    local_if: usize,
    local_name: String,
    remote_if: usize,
    remote_name: String,
    chosen: bool,
    local_view: JsonEdge,
    remote_view: JsonEdge,
}

#[derive(Serialize)]
struct JsonEdge {
    reachable: bool,
    weight: Option<u64>,
    same_subnet: Option<bool>,
    min_speed_gbps: Option<u8>,
    metric: Option<u32>,
    via: Option<String>,
    unreachable_reason: Option<String>,
}

impl From<&Result<matching::Edge, matching::Unreachable>> for JsonEdge {
    fn from(edge: &Result<matching::Edge, matching::Unreachable>) -> Self {
        match edge {
            Ok(e) => {
                let parts = e.weight.parts();
                JsonEdge {
                    reachable: true,
                    weight: Some(e.weight.value()),
                    same_subnet: Some(parts.same_subnet),
                    min_speed_gbps: Some(parts.min_speed_gbps),
                    metric: Some(parts.metric),
                    via: Some(e.via.to_string()),
                    unreachable_reason: None,
                }
            }
            Err(why) => JsonEdge {
                reachable: false,
                weight: None,
                same_subnet: None,
                min_speed_gbps: None,
                metric: None,
                via: None,
                unreachable_reason: Some(why.to_string()),
            },
        }
    }
}

#[derive(Serialize)]
struct JsonPair {
    local_if: usize,
    local_name: String,
    remote_if: usize,
    remote_name: String,
    weight: u64,
}

#[derive(Serialize)]
struct JsonUnpaired {
    index: usize,
    name: String,
    reason: &'static str,
    partners: Vec<String>,
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn speed_text(itf: &CardInterface) -> String {
    match itf.link_speed_mbps {
        Some(mbps) => format!("{mbps} Mb/s"),
        None => "speed unknown".to_string(),
    }
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Left-aligned columns separated by two spaces, indented by two; the last column is not
/// padded so lines carry no trailing blanks.
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

/// Escapes text for a double-quoted dot string; newlines become dot's centred line breaks.
fn dot_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
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

    fn one_interface(node: &str, rank: u32, addr: &str, routes: &str) -> ProcessCard {
        let text = format!(
            r#"{{"version":1,"node":"{node}","interfaces":[{{"name":"eth1","ipv4":"{addr}",
            "prefix_len":24,"link_speed_mbps":10000,"mtu":1500}}]{routes}}}"#
        );
        ProcessCard {
            job: "j".to_string(),
            rank,
            card: HostCard::from_json_str(node, &text).unwrap(),
        }
    }

    #[test]
    fn one_sided_reachability_still_means_no_connection() {
        let routed = r#","routes":[{"dest":"198.18.1.0/24","interface":"eth1","metric":5}]"#;
        let plain = one_interface("h0", 0, "198.18.1.10", "");
        let with_route = one_interface("h1", 1, "198.18.2.20", routed);

        let e = Explanation::new(plain.clone(), with_route.clone(), "a", "b");
        let message = e.no_reachable_pair().expect("h0 cannot reach h1");
        assert!(message.starts_with("no reachable interface pair from h0's routes"));
        assert!(message.contains("although h1 can reach h0"), "{message}");
        assert!(!e.sides_agree(), "h1 would pair, h0 would not");
        assert_eq!(e.warnings().len(), 1);

        let e = Explanation::new(with_route, plain, "b", "a");
        let message = e.no_reachable_pair().expect("h0 cannot answer h1");
        assert!(message.starts_with("no reachable interface pair from h0's routes"));
        assert!(
            message.contains("nothing h1 sends could be acknowledged"),
            "{message}"
        );
    }

    #[test]
    fn alignment_and_escaping() {
        let rows = vec![row(&["a", "bbb", "c"]), row(&["dddd", "e", "f f "])];
        assert_eq!(align(&rows), "  a     bbb  c\n  dddd  e    f f\n");
        assert_eq!(dot_escape("a\"b\\c\nd\u{7}"), "a\\\"b\\\\c\\nd");
    }
}

// ---------------------------------------------------------------------------------------------
// list and card: this host, as discovery sees it

fn discover_here(err: &mut dyn Write) -> Option<crate::discovery::Discovery> {
    let specs = crate::params::specs();
    let params = match kestrel_transport::params::Params::from_env(&specs) {
        Ok(p) => p,
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            return None;
        }
    };
    match crate::discovery::discover(&params) {
        Ok(found) => Some(found),
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            None
        }
    }
}

fn run_list(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
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
                crate::discovery::Verdict::Used => "used".to_string(),
                crate::discovery::Verdict::Excluded(why) => format!("excluded: {why}"),
            },
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    for r in &rows {
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
    if found.used().next().is_none() {
        let _ = writeln!(
            err,
            "{PROGRAM}: no interface is usable: ranks on other nodes cannot be reached over usnic from here"
        );
    }
    EXIT_OK
}

fn speed_source_name(s: &crate::discovery::SpeedSource) -> &'static str {
    match s {
        crate::discovery::SpeedSource::Sysfs => "sysfs",
        crate::discovery::SpeedSource::Override => "KESTREL_USNIC_LINK_SPEED",
        crate::discovery::SpeedSource::Unknown => "unknown",
    }
}

fn run_card(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let mut node = std::env::var("KESTREL_NODE_ID")
        .ok()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| {
            nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_else(|_| "localhost".into())
        });
    let mut layout = crate::card::JsonLayout::Pretty;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--node" => match it.next() {
                Some(n) => node = n.clone(),
                None => {
                    let _ = writeln!(err, "{PROGRAM}: --node needs a name");
                    return EXIT_USAGE;
                }
            },
            "--compact" => layout = crate::card::JsonLayout::Compact,
            other => {
                let _ = writeln!(
                    err,
                    "{PROGRAM}: card does not take '{other}'; run '{PROGRAM} --help'"
                );
                return EXIT_USAGE;
            }
        }
    }
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

// ---------------------------------------------------------------------------------------------
// check: probe every pair of a job's hosts

/// One line of a rank's check results, gathered on rank 0.
#[derive(Debug, Clone, Serialize, serde::Deserialize)]
struct CheckLine {
    from: String,
    to: String,
    local: String,
    remote: String,
    /// "ok", "mtu", "fail", "down" or "nopair".
    verdict: String,
    detail: String,
}

fn run_check(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
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
    specs.extend(crate::params::specs());
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
    let found = crate::discovery::discover(params).map_err(|e| e.to_string())?;
    let mut btl = crate::btl::UsnicBtl::new(params, rank, rt.job_id(), &node)?;
    if rank == 0 {
        rt.put("usnic_key", &crate::btl::new_job_key().to_le_bytes())
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
        if let (
            crate::discovery::Verdict::Excluded(
                why @ crate::discovery::ExclusionReason::Down { .. },
            ),
            Some(ip),
        ) = (&i.verdict, i.ipv4)
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
            let card = crate::card::ModexCard::decode(&bytes)
                .map_err(|e| format!("card of rank {peer}: {e}"))?;
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
