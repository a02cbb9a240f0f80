//! What rank 0 prints, byte for byte as OSU 7.4 does: the usage and version texts, the
//! preamble, the column header and the result rows, and the arithmetic behind the values
//! (latency, bandwidth).
//!
//! It only formats strings; it never writes to a stream and never communicates.

use std::fmt::Write as _;

use super::options::{option_defs, OptDef};
use super::{Bench, Options, Spec, Subtype, FIELD_WIDTH, FLOAT_PRECISION, OMB_VERSION};

/// The usage text (OSU's `print_help_message`; with `note`, mbw_mr's `usage_mbw_mr` note).
pub fn help_text(spec: &Spec, note: bool) -> String {
    let mut s = format!("Usage: {} [options]\nOptions:\n", spec.name);
    // OSU's barrier takes -m and -M but, having no message sizes, does not list them.
    let listed = |d: &&OptDef| spec.has_sizes() || !matches!(d.short, 'm' | 'M');
    for d in option_defs(spec).into_iter().filter(listed) {
        let _ = writeln!(s, "  -{}, --{:<20}{}", d.short, d.long, d.help[0]);
        for line in &d.help[1..] {
            let _ = writeln!(s, "{:28}{}", "", line);
        }
    }
    if note && spec.bench == Bench::MbwMr {
        s.push_str("  Note: This benchmark relies on block ordering of the ranks.  Please see\n");
        s.push_str("        the README for more information.\n");
    }
    s
}

/// The title line: `# OSU MPI Latency Test v7.4` and a newline (also what `-v` prints).
pub fn version_text(spec: &Spec) -> String {
    format!("# {} v{}\n", spec.title, OMB_VERSION)
}

/// What precedes the column header: an empty line, the title, for mbw_mr the pairs line,
/// for the nonblocking collectives OSU's `# Overall = ...` line and an empty line (its
/// `print_preamble_nbc`), and the datatype line (not for barrier and ibarrier, which send no
/// data).
pub fn preamble(spec: &Spec, opts: &Options, pairs: usize) -> String {
    let mut s = format!("\n{}", version_text(spec));
    if let Bench::Nonblocking(_) = spec.bench {
        s.push_str("# Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\n");
    }
    if spec.bench == Bench::LatencyMt {
        let _ = writeln!(
            s,
            "# Number of Sender threads: {}\n# Number of Receiver threads: {}",
            opts.threads.0, opts.threads.1
        );
    }
    if spec.bench == Bench::MbwMr {
        let _ = writeln!(
            s,
            "# [ pairs: {pairs} ] [ window size: {} ]",
            opts.window_size
        );
    }
    if spec.has_sizes() {
        s.push_str("# Datatype: MPI_CHAR.\n");
    }
    s
}

/// The column header line (OSU's `print_only_header`; for the nonblocking collectives
/// [`nbc_column_header`](super::nbc_column_header)), with its newline.
pub fn column_header(spec: &Spec, opts: &Options) -> String {
    if let Bench::Nonblocking(_) = spec.bench {
        return super::nbc::nbc_column_header(spec, opts);
    }
    let w = FIELD_WIDTH;
    let mut s = if spec.has_sizes() {
        format!("{:<10}", "# Size")
    } else {
        String::from("# ")
    };
    match (spec.bench, spec.subtype) {
        (Bench::Collective(_), _) if !spec.has_sizes() => s.push_str("Avg Latency(us)"),
        (Bench::MbwMr, _) if opts.print_rate => {
            let _ = write!(s, "{:>w$}{:>w$}", "MB/s", "Messages/s");
        }
        (Bench::MbwMr, _) => {
            let _ = write!(s, "{:>w$}", "MB/s");
        }
        (Bench::Pt2pt, Subtype::Bw) => {
            let _ = write!(s, "{:>w$}", "Bandwidth (MB/s)");
        }
        (Bench::Pt2pt | Bench::Collective(_) | Bench::LatencyMt, Subtype::Lat) => {
            let _ = write!(s, "{:>w$}", "Avg Latency(us)");
        }
        (Bench::Collective(_) | Bench::LatencyMt, Subtype::Bw) => {
            unreachable!("collectives and osu_latency_mt measure latency")
        }
        (Bench::Nonblocking(_), _) => unreachable!("printed by nbc_column_header"),
    }
    if opts.show_full {
        let _ = write!(
            s,
            "{:>w$}{:>w$}{:>12}",
            "Min Latency(us)", "Max Latency(us)", "Iterations"
        );
    }
    s.push('\n');
    s
}

/// A result row: `%-10d%18.2f` and a newline.
pub fn row(size: usize, value: f64) -> String {
    format!("{size:<10}{value:>FIELD_WIDTH$.FLOAT_PRECISION$}\n")
}

/// A row with two values (mbw_mr: MB/s and messages/s).
pub fn row2(size: usize, a: f64, b: f64) -> String {
    format!("{size:<10}{a:>FIELD_WIDTH$.FLOAT_PRECISION$}{b:>FIELD_WIDTH$.FLOAT_PRECISION$}\n")
}

/// One rank's result for one size of a collective: the average over the ranks of their mean
/// latencies, their minimum and maximum, all in microseconds.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CollStats {
    /// Average over the ranks.
    pub avg: f64,
    /// Smallest rank mean.
    pub min: f64,
    /// Largest rank mean.
    pub max: f64,
}

/// A collective's result row (OSU's `print_stats`): `%-10d%18.2f` (barrier: `%17.2f`), with
/// `-f` then `%18.2f%18.2f%12d` (minimum, maximum, timed iterations), and a newline.
pub fn coll_row(
    spec: &Spec,
    opts: &Options,
    size: usize,
    st: &CollStats,
    iterations: usize,
) -> String {
    let (w, p) = (FIELD_WIDTH, FLOAT_PRECISION);
    let mut s = if spec.has_sizes() {
        format!("{size:<10}{:>w$.p$}", st.avg)
    } else {
        format!("{:>17.p$}", st.avg)
    };
    if opts.show_full {
        let _ = write!(s, "{:>w$.p$}{:>w$.p$}{iterations:>12}", st.min, st.max);
    }
    s.push('\n');
    s
}

/// Mean latency in microseconds of `iterations` timed iterations that took `total_secs`.
pub fn mean_us(total_secs: f64, iterations: usize) -> f64 {
    total_secs * 1e6 / iterations as f64
}

/// Half the average round trip in microseconds (OSU: `t * 1e6 / (2 * iterations)`).
pub fn latency_us(total_secs: f64, iterations: usize) -> f64 {
    total_secs * 1e6 / (2.0 * iterations as f64)
}

/// MB/s (10^6 bytes per second) for `messages` messages of `size` bytes in `secs`.
pub fn bandwidth_mb_s(size: usize, messages: usize, secs: f64) -> f64 {
    size as f64 / 1e6 * messages as f64 / secs
}
