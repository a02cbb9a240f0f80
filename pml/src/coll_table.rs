//! The collective tuning table: which algorithm a blocking collective runs when its
//! `coll_*` parameter is `auto`, by collective, communicator shape and message size.
//!
//! Owns the table's text format (parsed with bounds and typed errors, because the file
//! comes from outside the process), the built-in rows (the defaults measured in earlier
//! sessions) and the lookup (`crate::coll_select` applies it to a communicator). It never
//! runs a collective and never talks to another process. Every member of a communicator must
//! choose the same algorithm, so every process of a job must load the same table, exactly as
//! every process must see the same `coll_*` parameters.
//!
//! The shared-memory segment engine (`coll_shm`) is asked first on node-local communicators
//! and takes the sizes it serves; the table chooses among the message algorithms and the
//! hierarchical phases (`coll_hier`) for everything else.
//!
//! Format (what `bench/tune` writes; `#` starts a comment):
//!
//! ```text
//! kestrel-coll-tuning 1
//! # collective  scope  ranks  min_bytes  algorithm
//! allreduce     *      *      0          recursive_doubling
//! allreduce     nodes  2-8    256K       ring
//! ```
//!
//! `scope` is `node` (every member on one node), `nodes` (members on several nodes, at most
//! one per node, or hierarchical collectives turned off), `hier` (several nodes, more than
//! one member on some) or `*`; `ranks` is `*`, `N`, `N-M` or `N-*`; `min_bytes` takes K, M
//! and G suffixes. The size a row is compared with is the message of bcast, reduce and
//! allreduce, one rank's block of gather and scatter, one peer's block of alltoall, the whole
//! result of allgather, and 0 for barrier. The rows of a file follow the built-in rows, and
//! the last row that matches wins, so a file only has to name what it changes.

use std::path::Path;

use kestrel_transport::params::{parse_size, Params};

use crate::params;

/// The first line of a table file (its format version).
pub const HEADER: &str = "kestrel-coll-tuning 1";
/// Largest table file read.
const MAX_FILE_BYTES: u64 = 1 << 20;
/// Most rows a table file may hold.
const MAX_ROWS: usize = 4096;
/// Largest rank count a row may name.
const MAX_RANKS: u32 = 1 << 24;
/// The algorithm name of the node / leaders / node phases.
pub const HIERARCHICAL: &str = "hierarchical";

/// A collective the table chooses an algorithm for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coll {
    /// `MPI_Barrier`.
    Barrier,
    /// `MPI_Bcast`.
    Bcast,
    /// `MPI_Reduce`.
    Reduce,
    /// `MPI_Allreduce`.
    Allreduce,
    /// `MPI_Allgather(v)`.
    Allgather,
    /// `MPI_Alltoall(v)`.
    Alltoall,
    /// `MPI_Gather`.
    Gather,
    /// `MPI_Scatter`.
    Scatter,
}

impl Coll {
    /// Every collective of the table, in the order `kestrel-info` shows them.
    pub const ALL: [Coll; 8] = [
        Coll::Barrier,
        Coll::Bcast,
        Coll::Reduce,
        Coll::Allreduce,
        Coll::Allgather,
        Coll::Alltoall,
        Coll::Gather,
        Coll::Scatter,
    ];

    /// The name in table files (the `coll_<name>` parameter forces it).
    pub fn name(self) -> &'static str {
        match self {
            Coll::Barrier => "barrier",
            Coll::Bcast => "bcast",
            Coll::Reduce => "reduce",
            Coll::Allreduce => "allreduce",
            Coll::Allgather => "allgather",
            Coll::Alltoall => "alltoall",
            Coll::Gather => "gather",
            Coll::Scatter => "scatter",
        }
    }

    /// The algorithms a row may name (and the parameter may force, besides `auto`).
    pub fn algorithms(self) -> &'static [&'static str] {
        match self {
            Coll::Barrier => &["dissemination", HIERARCHICAL],
            Coll::Bcast => &["binomial", "linear", HIERARCHICAL],
            Coll::Reduce => &["binomial", "linear", HIERARCHICAL],
            Coll::Allreduce => &["recursive_doubling", "ring", "reduce_bcast", HIERARCHICAL],
            Coll::Allgather => &["recursive_doubling", "ring", "gather_bcast", HIERARCHICAL],
            Coll::Alltoall => &["pairwise", "linear"],
            Coll::Gather => &["linear", HIERARCHICAL],
            Coll::Scatter => &["linear", HIERARCHICAL],
        }
    }

    /// What the size of a row is compared with.
    pub fn size_meaning(self) -> &'static str {
        match self {
            Coll::Barrier => "none",
            Coll::Bcast | Coll::Reduce | Coll::Allreduce => "message",
            Coll::Allgather => "whole result",
            Coll::Alltoall => "block per peer",
            Coll::Gather | Coll::Scatter => "block per rank",
        }
    }

    fn by_name(name: &str) -> Option<Coll> {
        Coll::ALL.into_iter().find(|c| c.name() == name)
    }

    /// `name` as one of this collective's algorithm names.
    pub fn algorithm(self, name: &str) -> Option<&'static str> {
        self.algorithms().iter().copied().find(|a| *a == name)
    }
}

/// Where a communicator's members are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    /// Every member on one node.
    Node,
    /// Several nodes, one member on each (or hierarchical collectives turned off, or members
    /// of other jobs).
    Nodes,
    /// Several nodes, more than one member on some: the hierarchical phases are possible.
    Hier,
}

impl Scope {
    /// Every scope, in the order `kestrel-info` shows them.
    pub const ALL: [Scope; 3] = [Scope::Node, Scope::Nodes, Scope::Hier];

    /// The name in table files.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Node => "node",
            Scope::Nodes => "nodes",
            Scope::Hier => "hier",
        }
    }

    fn by_name(name: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|s| s.name() == name)
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Row {
    coll: Coll,
    /// `None`: any scope.
    scope: Option<Scope>,
    /// Inclusive.
    ranks: (u32, u32),
    min_bytes: u64,
    algo: &'static str,
}

impl Row {
    fn matches(&self, coll: Coll, scope: Scope, ranks: u32, bytes: u64) -> bool {
        self.coll == coll
            && self.scope.is_none_or(|s| s == scope)
            && (self.ranks.0..=self.ranks.1).contains(&ranks)
            && self.min_bytes <= bytes
    }
}

/// A malformed table file: which file, which line, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TuneError {
    /// The file's path.
    pub file: String,
    /// 0: the file as a whole.
    pub line: usize,
    /// What is wrong, and what is expected instead.
    pub problem: String,
}

impl std::fmt::Display for TuneError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "coll: tuning table {}", self.file)?;
        if self.line > 0 {
            write!(f, ", line {}", self.line)?;
        }
        write!(
            f,
            ": {}; fix it, write it again with bench/tune, or unset coll_tuning_file for the built-in table",
            self.problem
        )
    }
}

impl std::error::Error for TuneError {}

/// The built-in rows followed by the rows of `coll_tuning_file`, if one is set.
#[derive(Clone, Debug)]
pub struct Table {
    rows: Vec<Row>,
    /// Where the rows after the built-in ones came from (`None`: built-in only).
    file: Option<String>,
}

impl Table {
    /// Today's defaults: recursive doubling below `ring_min` bytes and the ring from there for
    /// allreduce, recursive doubling for allgathers of at most 64 KiB in all, the hierarchy
    /// wherever a communicator has one (but for scatters of 32 KiB per rank and more).
    pub fn builtin(ring_min: u64) -> Table {
        let any = (1, u32::MAX);
        let row = |coll, scope, min_bytes, algo| Row {
            coll,
            scope,
            ranks: any,
            min_bytes,
            algo,
        };
        let hier = Some(Scope::Hier);
        let rows = vec![
            row(Coll::Barrier, None, 0, "dissemination"),
            row(Coll::Barrier, hier, 0, HIERARCHICAL),
            row(Coll::Bcast, None, 0, "binomial"),
            row(Coll::Bcast, hier, 0, HIERARCHICAL),
            row(Coll::Reduce, None, 0, "binomial"),
            row(Coll::Reduce, hier, 0, HIERARCHICAL),
            row(Coll::Allreduce, None, 0, "recursive_doubling"),
            row(Coll::Allreduce, None, ring_min, "ring"),
            row(Coll::Allreduce, hier, 0, HIERARCHICAL),
            row(Coll::Allgather, None, 0, "recursive_doubling"),
            row(Coll::Allgather, None, (64 << 10) + 1, "ring"),
            row(Coll::Allgather, hier, 0, HIERARCHICAL),
            row(Coll::Alltoall, None, 0, "pairwise"),
            row(Coll::Gather, None, 0, "linear"),
            row(Coll::Gather, hier, 0, HIERARCHICAL),
            row(Coll::Scatter, None, 0, "linear"),
            row(Coll::Scatter, hier, 0, HIERARCHICAL),
            // From 32 KiB per rank the hierarchy's forwarding step (leader, then node) costs
            // more than the messages it saves (2 hosts x 2 ranks: 64 KiB 64-106 us linear
            // against 89-96 hierarchical, 1 MiB 642-958 against 870-1,017).
            row(Coll::Scatter, hier, 32 << 10, "linear"),
        ];
        Table { rows, file: None }
    }

    /// The table `params` select: built-in, then `coll_tuning_file` if set.
    pub fn from_params(params: &Params) -> Result<Table, TuneError> {
        let mut table = Table::builtin(params::ALLREDUCE_RING_MIN.get(params));
        let file = params::TUNING_FILE.get(params);
        if !file.is_empty() {
            table.load(Path::new(&file))?;
        }
        Ok(table)
    }

    /// Appends the rows of the file at `path`.
    pub fn load(&mut self, path: &Path) -> Result<(), TuneError> {
        let name = path.display().to_string();
        let whole = |problem: String| TuneError {
            file: name.clone(),
            line: 0,
            problem,
        };
        let len = std::fs::metadata(path)
            .map_err(|e| whole(format!("cannot read it ({e})")))?
            .len();
        if len > MAX_FILE_BYTES {
            return Err(whole(format!(
                "{len} bytes, more than the {MAX_FILE_BYTES} a table may have"
            )));
        }
        let text =
            std::fs::read_to_string(path).map_err(|e| whole(format!("cannot read it ({e})")))?;
        self.rows.extend(parse(&text, &name)?);
        self.file = Some(name);
        Ok(())
    }

    /// Where the rows after the built-in ones came from.
    pub fn file(&self) -> Option<&str> {
        self.file.as_deref()
    }

    /// The algorithm of `coll` on a communicator of `ranks` members in `scope` for `bytes`:
    /// the last matching row; rows naming the hierarchy are skipped unless `hier_ok`.
    pub fn choose(
        &self,
        coll: Coll,
        scope: Scope,
        ranks: u32,
        bytes: u64,
        hier_ok: bool,
    ) -> &'static str {
        self.rows
            .iter()
            .rev()
            .find(|r| r.matches(coll, scope, ranks, bytes) && (hier_ok || r.algo != HIERARCHICAL))
            .map_or(coll.algorithms()[0], |r| r.algo)
    }

    /// The choices for every size, as `(from bytes, algorithm)` bands in increasing order
    /// (what `kestrel-info --coll` shows).
    pub fn bands(&self, coll: Coll, scope: Scope, ranks: u32) -> Vec<(u64, &'static str)> {
        let mut edges: Vec<u64> = self
            .rows
            .iter()
            .filter(|r| r.coll == coll)
            .map(|r| r.min_bytes)
            .chain([0])
            .collect();
        edges.sort_unstable();
        edges.dedup();
        let mut bands: Vec<(u64, &'static str)> = Vec::new();
        for e in edges {
            let algo = self.choose(coll, scope, ranks, e, scope == Scope::Hier);
            if bands.last().is_none_or(|(_, a)| *a != algo) {
                bands.push((e, algo));
            }
        }
        bands
    }
}

/// The choices of one collective for one communicator shape (what `kestrel-info --coll`
/// shows): from each band's bytes up to the next band's, its algorithm.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Active {
    /// The collective.
    pub coll: Coll,
    /// Where the members are.
    pub scope: Scope,
    /// Communicator sizes with these bands (inclusive; `u32::MAX`: no upper bound).
    pub ranks: (u32, u32),
    /// `(from bytes, algorithm)`, increasing.
    pub bands: Vec<(u64, &'static str)>,
}

impl Table {
    /// Every collective's choices by scope and communicator size (2 ranks and up), sizes
    /// with the same bands merged.
    pub fn active(&self) -> Vec<Active> {
        let mut out = Vec::new();
        for coll in Coll::ALL {
            let mut edges: Vec<u32> = vec![2];
            for r in self.rows.iter().filter(|r| r.coll == coll) {
                edges.push(r.ranks.0.max(2));
                if r.ranks.1 < u32::MAX {
                    edges.push(r.ranks.1 + 1);
                }
            }
            edges.sort_unstable();
            edges.dedup();
            for scope in Scope::ALL {
                let mut shapes: Vec<Active> = Vec::new();
                for (i, &lo) in edges.iter().enumerate() {
                    let hi = edges.get(i + 1).map_or(u32::MAX, |&next| next - 1);
                    let bands = self.bands(coll, scope, lo);
                    match shapes.last_mut() {
                        Some(last) if last.bands == bands => last.ranks.1 = hi,
                        _ => shapes.push(Active {
                            coll,
                            scope,
                            ranks: (lo, hi),
                            bands,
                        }),
                    }
                }
                out.extend(shapes);
            }
        }
        out
    }
}

/// The rows of a table file's text (`file` names it in errors).
fn parse(text: &str, file: &str) -> Result<Vec<Row>, TuneError> {
    let err = |line: usize, problem: String| TuneError {
        file: file.to_string(),
        line,
        problem,
    };
    let mut rows = Vec::new();
    let mut header = false;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let content = raw.split('#').next().unwrap_or("").trim();
        if content.is_empty() {
            continue;
        }
        if !header {
            if content != HEADER {
                return Err(err(
                    line,
                    format!("the first line must be '{HEADER}', not '{content}'"),
                ));
            }
            header = true;
            continue;
        }
        if rows.len() == MAX_ROWS {
            return Err(err(line, format!("more than {MAX_ROWS} rows")));
        }
        rows.push(parse_row(content).map_err(|p| err(line, p))?);
    }
    if !header {
        return Err(err(0, format!("empty: no '{HEADER}' line")));
    }
    Ok(rows)
}

fn parse_row(content: &str) -> Result<Row, String> {
    let f: Vec<&str> = content.split_whitespace().collect();
    let [coll, scope, ranks, min_bytes, algo] = f[..] else {
        return Err(format!(
            "{} fields where 5 are needed (collective scope ranks min_bytes algorithm)",
            f.len()
        ));
    };
    let coll = Coll::by_name(coll).ok_or_else(|| {
        format!(
            "no collective '{coll}' (one of {})",
            Coll::ALL.map(Coll::name).join(", ")
        )
    })?;
    let scope = match scope {
        "*" => None,
        s => Some(
            Scope::by_name(s).ok_or_else(|| format!("no scope '{s}' (node, nodes, hier or *)"))?,
        ),
    };
    let ranks = parse_ranks(ranks)?;
    let min_bytes = parse_size(min_bytes)
        .filter(|&b| b <= 1 << 40)
        .ok_or_else(|| {
            format!("min_bytes '{min_bytes}' is not a size up to 1T (e.g. 0, 4096, 64K, 1M)")
        })?;
    let algo = coll.algorithm(algo).ok_or_else(|| {
        format!(
            "{} has no algorithm '{algo}' (one of {})",
            coll.name(),
            coll.algorithms().join(", ")
        )
    })?;
    Ok(Row {
        coll,
        scope,
        ranks,
        min_bytes,
        algo,
    })
}

fn parse_ranks(text: &str) -> Result<(u32, u32), String> {
    let bad = || format!("ranks '{text}' is not *, N, N-M or N-* (1 <= N <= M <= {MAX_RANKS})");
    let num = |s: &str| {
        s.parse::<u32>()
            .ok()
            .filter(|n| (1..=MAX_RANKS).contains(n))
    };
    if text == "*" {
        return Ok((1, u32::MAX));
    }
    let (lo, hi) = match text.split_once('-') {
        None => {
            let n = num(text).ok_or_else(bad)?;
            (n, n)
        }
        Some((lo, "*")) => (num(lo).ok_or_else(bad)?, u32::MAX),
        Some((lo, hi)) => (num(lo).ok_or_else(bad)?, num(hi).ok_or_else(bad)?),
    };
    if lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        let mut t = Table::builtin(64 << 10);
        t.rows.extend(parse(text, "test").unwrap());
        t
    }

    #[test]
    fn builtin_matches_the_former_fixed_rules() {
        let t = Table::builtin(64 << 10);
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Node, 4, 8, false),
            "recursive_doubling"
        );
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Nodes, 4, 64 << 10, false),
            "ring"
        );
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Hier, 4, 1 << 20, true),
            HIERARCHICAL
        );
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Hier, 4, 1 << 20, false),
            "ring"
        );
        assert_eq!(
            t.choose(Coll::Allgather, Scope::Node, 4, 64 << 10, false),
            "recursive_doubling"
        );
        assert_eq!(
            t.choose(Coll::Allgather, Scope::Node, 4, (64 << 10) + 1, false),
            "ring"
        );
        assert_eq!(
            t.choose(Coll::Barrier, Scope::Nodes, 9, 0, true),
            "dissemination"
        );
        assert_eq!(
            t.choose(Coll::Alltoall, Scope::Hier, 9, 1, true),
            "pairwise"
        );
        assert_eq!(
            t.choose(Coll::Scatter, Scope::Hier, 4, (32 << 10) - 1, true),
            HIERARCHICAL
        );
        assert_eq!(
            t.choose(Coll::Scatter, Scope::Hier, 4, 32 << 10, true),
            "linear"
        );
        for c in Coll::ALL {
            for s in Scope::ALL {
                assert!(c
                    .algorithm(t.choose(c, s, 2, 0, s == Scope::Hier))
                    .is_some());
            }
        }
    }

    #[test]
    fn file_rows_override_by_shape_and_size() {
        let t = table(
            "# tuned\nkestrel-coll-tuning 1\n\
             allreduce hier 4 0 hierarchical\n\
             allreduce hier 4 512K ring   # measured\n\
             bcast node 2-8 1K linear\n",
        );
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Hier, 4, 8, true),
            HIERARCHICAL
        );
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Hier, 4, 1 << 20, true),
            "ring"
        );
        assert_eq!(
            t.choose(Coll::Allreduce, Scope::Hier, 6, 1 << 20, true),
            HIERARCHICAL
        );
        assert_eq!(t.choose(Coll::Bcast, Scope::Node, 8, 1024, false), "linear");
        assert_eq!(
            t.choose(Coll::Bcast, Scope::Node, 9, 1024, false),
            "binomial"
        );
        assert_eq!(
            t.choose(Coll::Bcast, Scope::Node, 8, 1023, false),
            "binomial"
        );
        assert_eq!(
            t.bands(Coll::Allreduce, Scope::Hier, 4),
            vec![(0, HIERARCHICAL), (512 << 10, "ring")]
        );
        assert_eq!(
            t.bands(Coll::Allreduce, Scope::Node, 2),
            vec![(0, "recursive_doubling"), (64 << 10, "ring")]
        );
        let hier: Vec<_> = t
            .active()
            .into_iter()
            .filter(|a| a.coll == Coll::Allreduce && a.scope == Scope::Hier)
            .map(|a| (a.ranks, a.bands))
            .collect();
        assert_eq!(
            hier,
            vec![
                ((2, 3), vec![(0, HIERARCHICAL)]),
                ((4, 4), vec![(0, HIERARCHICAL), (512 << 10, "ring")]),
                ((5, u32::MAX), vec![(0, HIERARCHICAL)]),
            ]
        );
    }

    #[test]
    fn malformed_files_name_the_line_and_the_problem() {
        let cases = [
            ("allreduce * * 0 ring\n", 1, "first line"),
            ("kestrel-coll-tuning 1\nallreduce * * 0\n", 2, "4 fields"),
            (
                "kestrel-coll-tuning 1\nallscan * * 0 ring\n",
                2,
                "no collective",
            ),
            (
                "kestrel-coll-tuning 1\n\nbcast world * 0 linear\n",
                3,
                "no scope",
            ),
            ("kestrel-coll-tuning 1\nbcast * 8-2 0 linear\n", 2, "ranks"),
            ("kestrel-coll-tuning 1\nbcast * 0 0 linear\n", 2, "ranks"),
            (
                "kestrel-coll-tuning 1\nbcast * * lots linear\n",
                2,
                "min_bytes",
            ),
            (
                "kestrel-coll-tuning 1\nbcast * * 2T linear\n",
                2,
                "min_bytes",
            ),
            (
                "kestrel-coll-tuning 1\nalltoall * * 0 hierarchical\n",
                2,
                "no algorithm",
            ),
            ("# nothing\n", 0, "empty"),
        ];
        for (text, line, what) in cases {
            let e = parse(text, "t.conf").unwrap_err();
            assert_eq!(e.line, line, "{text}");
            assert!(e.to_string().contains(what), "{e} lacks {what}");
            assert!(e.to_string().contains("t.conf"), "{e}");
        }
        let many = format!(
            "{HEADER}\n{}",
            "barrier * * 0 dissemination\n".repeat(MAX_ROWS + 1)
        );
        assert!(parse(&many, "big").unwrap_err().problem.contains("rows"));
    }

    #[test]
    fn every_builtin_algorithm_is_a_parameter_choice() {
        // A table row and the parameter must speak the same names, so that
        // `coll_<name>=<algorithm>` forces exactly what a row would choose.
        let choices = |p: &'static kestrel_transport::Param<String>| match p.spec().kind {
            kestrel_transport::params::ParamKind::Choice(c) => c,
            _ => panic!("{} is not a choice", p.spec().name),
        };
        for (coll, p) in [
            (Coll::Barrier, &params::BARRIER),
            (Coll::Bcast, &params::BCAST),
            (Coll::Reduce, &params::REDUCE),
            (Coll::Allreduce, &params::ALLREDUCE),
            (Coll::Allgather, &params::ALLGATHER),
            (Coll::Alltoall, &params::ALLTOALL),
            (Coll::Gather, &params::GATHER),
            (Coll::Scatter, &params::SCATTER),
        ] {
            let mut want: Vec<&str> = vec!["auto"];
            want.extend(coll.algorithms());
            assert_eq!(choices(p), &want[..], "{}", coll.name());
        }
    }
}
