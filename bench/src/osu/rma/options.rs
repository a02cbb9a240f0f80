//! The one-sided tests' command line, as `osu_rma.h` reads it: `-w`, `-s` and `-T` taken out
//! first with `getopt`'s rules ([`rma_parse`]), the rest handed to the OSU parser (`options`);
//! the options of a run ([`RmaOptions`]): its sizes, `-M` and what the Rust twin refuses.

use super::{RmaSpec, RmaType, SyncKind, WinKind, MAX_TYPES};
use crate::osu::{parse, BadUsage, Options, Parsed};

/// The options of a one-sided run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RmaOptions {
    /// The OSU options (`-m -x -i -W -M`), the smallest size at least 1.
    pub opts: Options,
    /// `-w`.
    pub win: WinKind,
    /// `-s`.
    pub sync: SyncKind,
    /// `-T`, in order (`MPI_CHAR` when none).
    pub types: Vec<RmaType>,
}

/// The outcome of parsing a one-sided command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RmaParsed {
    /// Run with these options.
    Run(RmaOptions),
    /// `-h`: print [`rma_help_text`](super::rma_help_text), exit 0.
    Help,
    /// `-v`: print the title line, exit 0.
    Version,
    /// A bad OSU option (reported before the rank count is checked).
    BadUsage(BadUsage),
    /// A bad `-w`, `-s` or `-T` (reported after the rank count and the other options'
    /// warnings, as `osu_rma.h` does).
    BadRmaOption {
        /// What to report.
        bad: BadUsage,
        /// The other options' warnings (`-M`).
        warnings: Vec<String>,
    },
}

/// A long option as `osu_rma.h`'s `rma_longs[]` has it.
struct LongDef {
    name: &'static str,
    short: char,
    arg: bool,
}

/// The long options of `spec`, in `rma_longs[]`'s order.
fn long_defs(spec: &RmaSpec) -> Vec<LongDef> {
    let d = |name, short, arg| LongDef { name, short, arg };
    let mut v = vec![
        d("help", 'h', false),
        d("version", 'v', false),
        d("message-size", 'm', true),
        d("warmup", 'x', true),
        d("iterations", 'i', true),
        d("mem-limit", 'M', true),
    ];
    if spec.is_bw() {
        v.push(d("window-size", 'W', true));
    }
    if spec.takes_types() {
        v.push(d("type", 'T', true));
    }
    v.push(d("win-options", 'w', true));
    v.push(d("sync-option", 's', true));
    v
}

/// Whether `c` is one of the options this module takes out (`-w`, `-s`, `-T`).
fn is_rma_short(spec: &RmaSpec, c: char) -> bool {
    c == 'w' || c == 's' || (c == 'T' && spec.takes_types())
}

/// `-w`, `-s` and `-T` as parsed so far.
struct Choices {
    win: WinKind,
    sync: SyncKind,
    types: Vec<RmaType>,
}

/// `strncasecmp(val, pattern, strlen(pattern)) == 0`.
fn starts_with_ignore_case(val: &str, pattern: &str) -> bool {
    let (v, p) = (val.as_bytes(), pattern.as_bytes());
    v.len() >= p.len() && v[..p.len()].eq_ignore_ascii_case(p)
}

/// OSU's `process_one_sided_options` for `c` (`w`, `s`, `T`); `Err` for a bad value.
fn set_rma_option(spec: &RmaSpec, ch: &mut Choices, c: char, val: &str) -> Result<(), ()> {
    match c {
        'w' => {
            let k = WinKind::ALL
                .into_iter()
                .find(|k| val.eq_ignore_ascii_case(k.arg()));
            ch.win = k.ok_or(())?;
        }
        's' => {
            let k = SyncKind::ALL
                .into_iter()
                .find(|k| val.eq_ignore_ascii_case(k.arg()));
            match k {
                Some(k) if !spec.active_only || k.is_active() => ch.sync = k,
                _ => return Err(()),
            }
        }
        _ => {
            let float = spec.types.contains(&RmaType::Float);
            let add: &[RmaType] = if starts_with_ignore_case(val, "MPI_CHAR") {
                &[RmaType::Char]
            } else if starts_with_ignore_case(val, "MPI_INT") {
                &[RmaType::Int]
            } else if float && starts_with_ignore_case(val, "MPI_FLOAT") {
                &[RmaType::Float]
            } else if starts_with_ignore_case(val, "MPI_LONG_LONG") {
                &[RmaType::LongLong]
            } else if starts_with_ignore_case(val, "ALL") {
                spec.types
            } else {
                return Err(());
            };
            for &t in add {
                if ch.types.len() < MAX_TYPES {
                    ch.types.push(t);
                }
            }
        }
    }
    Ok(())
}

/// `osu_rma.h`'s `rma_strip`: the words but `-w`, `-s` (and `-T`) with their values, applied
/// to `ch`, stopping at the first bad one of those (returned; the words after it are dropped,
/// so that a bad OSU option before it is reported first).
fn strip<S: AsRef<str>>(
    spec: &RmaSpec,
    args: &[S],
    ch: &mut Choices,
) -> (Vec<String>, Option<BadUsage>) {
    let longs = long_defs(spec);
    let bad = |message: &str, option: String, arg: Option<&str>| {
        Some(BadUsage {
            message: message.to_string(),
            option,
            optarg: arg.map(str::to_string),
        })
    };
    let mut rest: Vec<String> = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_ref();
        if !a.starts_with('-') || a == "-" || a == "--" {
            break; // options end at the first operand ("+")
        }
        let (c, val): (char, Option<String>);
        if let Some(long) = a.strip_prefix("--") {
            let (name, eq) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            // getopt_long's match: the exact name, else a unique prefix.
            let def = match longs.iter().find(|d| d.name == name) {
                Some(d) => Some(d),
                None => {
                    let m: Vec<&LongDef> =
                        longs.iter().filter(|d| d.name.starts_with(name)).collect();
                    if m.len() > 1 {
                        // Ambiguous: reported here if one of ours matches, else by parse().
                        if m.iter().any(|d| is_rma_short(spec, d.short)) {
                            return (rest, bad("Invalid option", format!("--{name}"), None));
                        }
                        None
                    } else {
                        m.first().copied()
                    }
                }
            };
            match def {
                Some(d) if is_rma_short(spec, d.short) => {
                    c = d.short;
                    val = eq.map(str::to_string);
                }
                _ => {
                    rest.push(a.to_string());
                    i += 1;
                    if def.is_some_and(|d| d.arg) && eq.is_none() && i < args.len() {
                        rest.push(args[i].as_ref().to_string());
                        i += 1;
                    }
                    continue;
                }
            }
        } else {
            let cluster: Vec<char> = a[1..].chars().collect();
            let mut p = 0;
            while p < cluster.len() && !is_rma_short(spec, cluster[p]) {
                let k = cluster[p];
                if "mxiM".contains(k) || (k == 'W' && spec.is_bw()) {
                    break; // the rest of the word (or the next word) is this option's value
                }
                p += 1;
            }
            if p == cluster.len() || !is_rma_short(spec, cluster[p]) {
                rest.push(a.to_string());
                i += 1;
                if p + 1 == cluster.len() && i < args.len() {
                    rest.push(args[i].as_ref().to_string());
                    i += 1;
                }
                continue;
            }
            if p > 0 {
                // The flags before it, as a word of their own.
                rest.push(format!("-{}", cluster[..p].iter().collect::<String>()));
            }
            c = cluster[p];
            let tail: String = cluster[p + 1..].iter().collect();
            val = (!tail.is_empty()).then_some(tail);
        }
        let mut used = 1;
        let val = match val {
            Some(v) => v,
            None => {
                if i + 1 >= args.len() {
                    let message = "Option Missing Required Argument";
                    return (rest, bad(message, format!("-{c}"), None));
                }
                used = 2;
                args[i + 1].as_ref().to_string()
            }
        };
        if set_rma_option(spec, ch, c, &val).is_err() {
            let message = "Invalid option or invalid argument";
            return (rest, bad(message, format!("-{c}"), Some(&val)));
        }
        i += used;
    }
    rest.extend(args[i..].iter().map(|s| s.as_ref().to_string()));
    (rest, None)
}

/// Parses the arguments after the program name as `osu_rma.h`: `-w`, `-s` (and `-T`) first,
/// then the others with [`parse`].
pub fn rma_parse<S: AsRef<str>>(spec: &RmaSpec, args: &[S]) -> RmaParsed {
    let mut ch = Choices {
        win: spec.win_default,
        sync: spec.sync_default,
        types: Vec::new(),
    };
    let (rest, bad) = strip(spec, args, &mut ch);
    match parse(&spec.base(), &rest) {
        Parsed::Run(mut opts) => {
            if let Some(bad) = bad {
                return RmaParsed::BadRmaOption {
                    bad,
                    warnings: opts.warnings,
                };
            }
            // OSU's one-sided tests start at 1 (the latency default of `options` is 0, which
            // the two-sided tests skip).
            opts.min_message_size = opts.min_message_size.max(1);
            if ch.types.is_empty() {
                ch.types.push(RmaType::Char);
            }
            RmaParsed::Run(RmaOptions {
                opts,
                win: ch.win,
                sync: ch.sync,
                types: ch.types,
            })
        }
        Parsed::Help => RmaParsed::Help,
        Parsed::Version => RmaParsed::Version,
        Parsed::BadUsage(b) => RmaParsed::BadUsage(b),
    }
}

impl RmaOptions {
    /// The sizes of `osu_rma.h`'s loops: from the smallest, doubling, up to the largest.
    pub fn sizes(&self) -> Vec<usize> {
        let (min, max) = (self.opts.min_message_size, self.opts.max_message_size);
        let mut out = Vec::new();
        let mut size = min;
        while size <= max {
            out.push(size);
            if size > max / 2 {
                break; // the next doubling would pass the maximum (or overflow)
            }
            size *= 2;
        }
        out
    }

    /// Applies `-M` as `rma_limit_to_memory`: the largest size whose buffers (the operation's
    /// [`RmaOp::blocks`](super::RmaOp::blocks), times `-W` for bandwidth) fit; OSU's warning
    /// when it lowered it.
    pub fn limit_to_memory(&mut self, spec: &RmaSpec) -> Option<String> {
        let mut blocks = spec.op.blocks();
        if spec.is_bw() {
            blocks = blocks.saturating_mul(self.opts.window_size);
        }
        let fits = self.opts.max_mem_limit / blocks;
        if self.opts.max_message_size <= fits {
            return None;
        }
        self.opts.max_message_size = fits;
        Some(format!(
            "Warning! Limiting max message size to: {fits}. Increase -M, --mem-limit for higher message sizes."
        ))
    }

    /// Why the Rust twin cannot run these options, or `None`: only `-w dynamic` (see the
    /// module documentation).
    pub fn unsupported(&self, spec: &RmaSpec) -> Option<String> {
        (self.win == WinKind::Dynamic).then(|| {
            format!(
                "{}: -w dynamic (MPI_Win_create_dynamic) is not available: kestrel::window has \
                 no dynamic windows (no MPI_Win_create_dynamic, MPI_Win_attach); use the C twin \
                 bench/c/{}.c (built with abi/bin/mpicc) for it",
                spec.name, spec.name
            )
        })
    }
}
