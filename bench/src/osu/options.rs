//! Command-line options as OSU 7.4 parses them: OSU's defaults per test, the `getopt_long`
//! rules (clustering, attached arguments, unique long prefixes, C's `atoi`), and the memory
//! limit's effect on the largest size.
//!
//! It turns words into [`Options`] or a [`BadUsage`]; it never prints (the caller decides what
//! rank 0 shows) and never exits.

use std::fmt;

use super::{
    Bench, Spec, Subtype, LARGE_MESSAGE_SIZE, MAX_MEM_LIMIT, MAX_MEM_LOWER_LIMIT, MAX_MESSAGE_SIZE,
    MAX_MSG_SIZE_COLL, WINDOW_SIZE,
};

/// Parsed options, with OSU's defaults for the test.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Smallest size (latency tests 0, which is skipped; bandwidth tests 1).
    pub min_message_size: usize,
    /// Largest size (4 MiB).
    pub max_message_size: usize,
    /// Timed iterations for sizes up to [`LARGE_MESSAGE_SIZE`].
    pub iterations: usize,
    /// Timed iterations above it.
    pub iterations_large: usize,
    /// Warm-up iterations up to [`LARGE_MESSAGE_SIZE`].
    pub skip: usize,
    /// Warm-up iterations above it.
    pub skip_large: usize,
    /// Window (bandwidth tests).
    pub window_size: usize,
    /// Per-process buffer limit in bytes.
    pub max_mem_limit: usize,
    /// `-f` given (only where accepted).
    pub show_full: bool,
    /// `-p` (mbw_mr); `None` means ranks / 2.
    pub pairs: Option<usize>,
    /// `-R` (mbw_mr): print the message rate.
    pub print_rate: bool,
    /// `-t` (nonblocking collectives): `MPI_Test` calls during the dummy computation (OSU's
    /// `num_probes`; default 0, no test).
    pub num_probes: usize,
    /// `-t SENDERS[:RECEIVERS]` (osu_latency_mt): threads on rank 0 and on rank 1 (OSU's
    /// defaults 1 and 2; `-t N` sets the receivers only).
    pub threads: (usize, usize),
    /// Warnings for stderr that do not stop the run (e.g. a memory limit raised to 1 MiB).
    pub warnings: Vec<String>,
}

impl Options {
    /// OSU's defaults for `spec`.
    pub fn defaults(spec: &Spec) -> Options {
        let (iterations, skip, iterations_large, skip_large, min) = match (spec.bench, spec.subtype)
        {
            (Bench::Collective(_) | Bench::Nonblocking(_), _) => (1_000, 100, 100, 10, 1),
            (_, Subtype::Lat) => (10_000, 100, 1_000, 10, 0),
            (_, Subtype::Bw) => (100, 10, 20, 2, 1),
        };
        let max = match spec.bench {
            Bench::Collective(_) | Bench::Nonblocking(_) => MAX_MSG_SIZE_COLL,
            _ => MAX_MESSAGE_SIZE,
        };
        Options {
            min_message_size: min,
            max_message_size: max,
            iterations,
            iterations_large,
            skip,
            skip_large,
            window_size: WINDOW_SIZE,
            max_mem_limit: MAX_MEM_LIMIT,
            show_full: false,
            pairs: None,
            print_rate: true,
            num_probes: 0,
            threads: (1, 2),
            warnings: Vec::new(),
        }
    }

    /// Timed iterations for `size`.
    pub fn iterations_for(&self, size: usize) -> usize {
        if size > LARGE_MESSAGE_SIZE {
            self.iterations_large
        } else {
            self.iterations
        }
    }

    /// Warm-up iterations for `size`.
    pub fn skip_for(&self, size: usize) -> usize {
        if size > LARGE_MESSAGE_SIZE {
            self.skip_large
        } else {
            self.skip
        }
    }

    /// The sizes measured, in order, as OSU's loops produce them: latency tests go
    /// `0, 1, 2, 4, ...` and skip 0 (no elements to send); bandwidth tests double from the
    /// minimum. Stops at the maximum.
    pub fn sizes(&self, spec: &Spec) -> Vec<usize> {
        let mut out = Vec::new();
        let mut size = self.min_message_size;
        loop {
            if size > self.max_message_size {
                break;
            }
            if size > 0 {
                out.push(size);
            }
            let next = match spec.subtype {
                Subtype::Lat if size == 0 => Some(1),
                _ => size.checked_mul(2),
            };
            match next {
                Some(n) if n > size => size = n,
                _ => break,
            }
        }
        out
    }

    /// Buffer bytes one rank needs for messages of `size` in `spec`: a send and a receive
    /// buffer for the latency tests; for the bandwidth tests a send buffer and one receive
    /// buffer per message of the window (a window's receives are in flight together, so
    /// each gets its own memory). For collectives this assumes two ranks; see
    /// [`Options::buffer_bytes_ranks`].
    pub fn buffer_bytes(&self, spec: &Spec, size: usize) -> usize {
        self.buffer_bytes_ranks(spec, size, 2)
    }

    /// [`Options::buffer_bytes`] with `nprocs` ranks (only the collectives depend on it:
    /// [`Coll::buffer_bytes`](super::Coll::buffer_bytes)).
    pub fn buffer_bytes_ranks(&self, spec: &Spec, size: usize, nprocs: usize) -> usize {
        match (spec.bench, spec.subtype) {
            (Bench::Collective(c) | Bench::Nonblocking(c), _) => c.buffer_bytes(size, nprocs),
            (_, Subtype::Lat) => size.saturating_mul(2),
            (_, Subtype::Bw) => size.saturating_mul(self.window_size.saturating_add(1)),
        }
    }

    /// Applies `-M`: lowers the largest size so that [`Options::buffer_bytes`] fits in the
    /// memory limit. Returns OSU's warning when it did.
    pub fn limit_to_memory(&mut self, spec: &Spec) -> Option<String> {
        self.limit_to_memory_ranks(spec, 2)
    }

    /// [`Options::limit_to_memory`] with `nprocs` ranks (what the collectives use). A test
    /// without buffers (barrier) is never limited.
    pub fn limit_to_memory_ranks(&mut self, spec: &Spec, nprocs: usize) -> Option<String> {
        let per_byte = self.buffer_bytes_ranks(spec, 1, nprocs);
        if per_byte == 0 {
            return None;
        }
        let fits = self.max_mem_limit / per_byte;
        if self.max_message_size > fits {
            self.max_message_size = fits;
            Some(format!(
                "Warning! Limiting max message size to: {fits}. Increase -M, --mem-limit for higher message sizes."
            ))
        } else {
            None
        }
    }
}

/// A rejected command line: OSU's `bad_usage` (message, option, argument).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadUsage {
    /// What is wrong (`Invalid Number of Iterations`).
    pub message: String,
    /// The option as written in the report: `-i`, or `--name` for an unknown long option.
    pub option: String,
    /// The offending argument, if the option had one.
    pub optarg: Option<String>,
}

impl fmt::Display for BadUsage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.optarg {
            Some(a) => write!(f, "{} [{} {}]", self.message, self.option, a),
            None => write!(f, "{} [{}]", self.message, self.option),
        }
    }
}

/// The outcome of parsing a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// Run with these options.
    Run(Options),
    /// `-h`: print [`help_text`](super::help_text), exit 0.
    Help,
    /// `-v`: print [`version_text`](super::version_text), exit 0.
    Version,
    /// A bad option: print it and the usage, exit 1.
    BadUsage(BadUsage),
}

/// One option a test accepts: short letter, long name, whether it takes an argument, help.
pub(super) struct OptDef {
    pub(super) short: char,
    pub(super) long: &'static str,
    pub(super) arg: bool,
    pub(super) help: &'static [&'static str],
}

const OPT_H: OptDef = OptDef {
    short: 'h',
    long: "help",
    arg: false,
    help: &["print this help"],
};
const OPT_V: OptDef = OptDef {
    short: 'v',
    long: "version",
    arg: false,
    help: &["print version info"],
};
const OPT_F: OptDef = OptDef {
    short: 'f',
    long: "full",
    arg: false,
    help: &[
        "print full format listing (MIN/MAX latency and ITERATIONS",
        "displayed in addition to AVERAGE latency)",
    ],
};
const OPT_M: OptDef = OptDef {
    short: 'm',
    long: "message-size",
    arg: true,
    help: &[
        "[MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX",
        "bytes respectively. Examples:",
        "-m 128      // min = default, max = 128",
        "-m 2:128    // min = 2, max = 128",
        "-m 2:       // min = 2, max = default",
    ],
};
const OPT_W: OptDef = OptDef {
    short: 'W',
    long: "window-size",
    arg: true,
    help: &["SIZE - set number of messages to send before synchronization (default 64)"],
};
const OPT_I: OptDef = OptDef {
    short: 'i',
    long: "iterations",
    arg: true,
    help: &["ITER - number of iterations for timing (default 10000)"],
};
const OPT_X: OptDef = OptDef {
    short: 'x',
    long: "warmup",
    arg: true,
    help: &[
        "ITER - set number of warmup",
        "iterations to skip before timing (default 200)",
    ],
};
const OPT_I_COLL: OptDef = OptDef {
    short: 'i',
    long: "iterations",
    arg: true,
    help: &[
        "ITER - set iterations per message size to ITER (default 1000 for small",
        "messages, 100 for large messages)",
    ],
};
const OPT_MEM: OptDef = OptDef {
    short: 'M',
    long: "mem-limit",
    arg: true,
    help: &[
        "SIZE - set per process maximum memory consumption to SIZE bytes",
        "(default 536870912)",
    ],
};
const OPT_R: OptDef = OptDef {
    short: 'R',
    long: "print-rate",
    arg: true,
    help: &["[0|1] - Print uni-directional message rate (default 1)"],
};
const OPT_T: OptDef = OptDef {
    short: 't',
    long: "num-test-calls",
    arg: true,
    // OSU 7.4's text, shared with its multi-threaded latency test.
    help: &[
        "Non-blocking collectives-> CALLS - set the number of MPI_Test() calls during the dummy computation,",
        "set CALLS to 100, 1000, or any number > 0.",
        "Multi-Threaded/Process-> SEND:[RECV] - set the sender and receiver number of threads/processes(t/p)",
        "min: 1 default: (receiver t/p: 2 sender t/p: 1), max: 128.",
        "Examples:",
        "-t 4        // receiver t/p = 4 and sender t/p = 1",
        "-t 4:6      // sender t/p = 4 and receiver t/p = 6",
        "-t 2:       // not defined",
    ],
};
const OPT_P: OptDef = OptDef {
    short: 'p',
    long: "num-pairs",
    arg: true,
    help: &["PAIRS - Number of pairs involved (default np / 2)"],
};

/// The options of `spec`, in the order of OSU's option string for that test (which is the
/// order of the usage text), with `-M` last but for the nonblocking collectives' `-t`. The
/// collectives follow OSU's `hvfm:i:x:M:`, the nonblocking ones `hvfm:i:x:M:t:`.
pub(super) fn option_defs(spec: &Spec) -> Vec<&'static OptDef> {
    let mut v: Vec<&'static OptDef> = match (spec.bench, spec.subtype) {
        (Bench::Collective(_) | Bench::Nonblocking(_), _) => {
            vec![&OPT_H, &OPT_V, &OPT_M, &OPT_I_COLL, &OPT_X]
        }
        (Bench::MbwMr, _) => vec![
            &OPT_P, &OPT_W, &OPT_R, &OPT_X, &OPT_I, &OPT_M, &OPT_H, &OPT_V,
        ],
        (Bench::Pt2pt, Subtype::Bw) => vec![&OPT_H, &OPT_V, &OPT_M, &OPT_X, &OPT_I, &OPT_W],
        (Bench::Pt2pt | Bench::LatencyMt, Subtype::Lat) => {
            vec![&OPT_H, &OPT_V, &OPT_M, &OPT_X, &OPT_I]
        }
        (Bench::LatencyMt, Subtype::Bw) => unreachable!("osu_latency_mt is a latency test"),
    };
    if spec.full {
        // Where OSU has -f it follows -v in the option string.
        let at = v.iter().position(|d| d.short == 'v').map_or(0, |p| p + 1);
        v.insert(at, &OPT_F);
    }
    v.push(&OPT_MEM);
    if matches!(spec.bench, Bench::Nonblocking(_) | Bench::LatencyMt) {
        v.push(&OPT_T);
    }
    v
}

/// C's `atoll`: optional whitespace and sign, then leading digits; anything else gives 0.
/// Saturates instead of overflowing.
pub fn c_atoll(s: &str) -> i64 {
    let s = s.trim_start_matches([' ', '\t', '\n', '\r', '\x0b', '\x0c']);
    let (neg, digits) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let mut v: i64 = 0;
    for b in digits.bytes().take_while(u8::is_ascii_digit) {
        let d = i64::from(b - b'0');
        v = if neg {
            v.saturating_mul(10).saturating_sub(d)
        } else {
            v.saturating_mul(10).saturating_add(d)
        };
    }
    v
}

/// C's `atoi` as glibc does it: `(int) strtol(...)`.
pub fn c_atoi(s: &str) -> i64 {
    i64::from(c_atoll(s) as i32)
}

/// OSU's `set_message_size`: `MAX`, `MIN:MAX`, `MIN:` or `:MAX`. The minimum must be > 0
/// and the maximum >= 0; as in OSU, a bad minimum next to a good maximum is ignored.
fn set_message_size(o: &mut Options, val: &str) -> Result<(), ()> {
    fn set_min(o: &mut Options, v: i64) -> Result<(), ()> {
        if v <= 0 {
            return Err(());
        }
        o.min_message_size = v as usize;
        Ok(())
    }
    fn set_max(o: &mut Options, v: i64) -> Result<(), ()> {
        if v < 0 {
            return Err(());
        }
        o.max_message_size = v as usize;
        Ok(())
    }
    match val.matches(':').count() {
        0 => set_max(o, c_atoll(val)),
        1 => {
            // strtok(val, ":") skips empty tokens.
            let mut tokens = val.split(':').filter(|t| !t.is_empty());
            match (tokens.next(), tokens.next()) {
                (Some(a), Some(b)) => {
                    let _ = set_min(o, c_atoll(a));
                    set_max(o, c_atoll(b))
                }
                (Some(a), None) if val.starts_with(':') => set_max(o, c_atoll(a)),
                (Some(a), None) => set_min(o, c_atoll(a)),
                _ => Err(()),
            }
        }
        _ => Err(()),
    }
}

fn bad(message: &str, option: String, optarg: Option<&str>) -> Parsed {
    Parsed::BadUsage(BadUsage {
        message: message.to_string(),
        option,
        optarg: optarg.map(str::to_string),
    })
}

/// Applies one option with its argument; `Some` ends parsing.
fn apply(spec: &Spec, o: &mut Options, c: char, arg: Option<&str>) -> Option<Parsed> {
    let a = arg.unwrap_or("");
    let opt = format!("-{c}");
    match c {
        'h' => return Some(Parsed::Help),
        'v' => return Some(Parsed::Version),
        'f' => o.show_full = true,
        'm' => {
            if set_message_size(o, a).is_err() {
                return Some(bad("Invalid Message Size", opt, arg));
            }
        }
        'i' => {
            let v = c_atoi(a);
            if v < 1 {
                return Some(bad("Invalid Number of Iterations", opt, arg));
            }
            o.iterations = v as usize;
            o.iterations_large = v as usize;
        }
        'x' => {
            let v = c_atoi(a);
            if v < 0 {
                return Some(bad("Invalid Number of Warmup Iterations", opt, arg));
            }
            o.skip = v as usize;
            o.skip_large = v as usize;
        }
        'W' => {
            let v = c_atoi(a);
            if v < 1 {
                return Some(bad("Invalid Window Size", opt, arg));
            }
            o.window_size = v as usize;
        }
        'M' => {
            let v = c_atoll(a);
            if v < MAX_MEM_LOWER_LIMIT as i64 {
                o.max_mem_limit = MAX_MEM_LOWER_LIMIT;
                o.warnings.push(format!(
                    "Requested memory limit too low, using [{MAX_MEM_LOWER_LIMIT}] instead."
                ));
            } else {
                o.max_mem_limit = v as usize;
            }
        }
        'R' => match c_atoi(a) {
            0 => o.print_rate = false,
            1 => o.print_rate = true,
            _ => return Some(bad("Invalid Print Rate", opt, arg)),
        },
        'p' => {
            let v = c_atoi(a);
            if v < 1 {
                return Some(bad("Invalid Number of Pairs", opt, arg));
            }
            o.pairs = Some(v as usize);
        }
        't' if spec.bench == Bench::LatencyMt => match thread_counts(a) {
            Some(t) => o.threads = t,
            None => return Some(bad("Invalid Number of Threads", opt, arg)),
        },
        't' => {
            let v = c_atoi(a);
            if v < 0 {
                return Some(bad("Invalid Number of Probes", opt, arg));
            }
            o.num_probes = v as usize;
        }
        _ => unreachable!("option -{c} has no handler"),
    }
    None
}

/// OSU's `-t` of the multithreaded tests: `N` (receivers; one sender) or `SENDERS:RECEIVERS`,
/// each 1 to 128.
fn thread_counts(a: &str) -> Option<(usize, usize)> {
    let ok = |v: usize| (1..=128).contains(&v).then_some(v);
    match a.split_once(':') {
        None => Some((1, ok(a.parse().ok()?)?)),
        Some((s, r)) => Some((ok(s.parse().ok()?)?, ok(r.parse().ok()?)?)),
    }
}

/// Parses the arguments after the program name.
pub fn parse<S: AsRef<str>>(spec: &Spec, args: &[S]) -> Parsed {
    let defs = option_defs(spec);
    let mut o = Options::defaults(spec);
    let mut i = 0;
    while i < args.len() {
        let word = args[i].as_ref();
        i += 1;
        if word == "--" {
            break;
        }
        if let Some(long) = word.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v)),
                None => (long, None),
            };
            let def = match defs.iter().find(|d| d.long == name) {
                Some(d) => *d,
                None => {
                    let matches: Vec<_> =
                        defs.iter().filter(|d| d.long.starts_with(name)).collect();
                    if matches.len() == 1 && !name.is_empty() {
                        *matches[0]
                    } else {
                        return bad("Invalid option", format!("--{name}"), None);
                    }
                }
            };
            let arg = if def.arg {
                match inline {
                    Some(v) => Some(v.to_string()),
                    None if i < args.len() => {
                        i += 1;
                        Some(args[i - 1].as_ref().to_string())
                    }
                    None => {
                        return bad(
                            "Option Missing Required Argument",
                            format!("-{}", def.short),
                            None,
                        )
                    }
                }
            } else {
                if inline.is_some() {
                    return bad("Invalid option", format!("-{}", def.short), None);
                }
                None
            };
            if let Some(p) = apply(spec, &mut o, def.short, arg.as_deref()) {
                return p;
            }
            continue;
        }
        let Some(cluster) = word.strip_prefix('-').filter(|c| !c.is_empty()) else {
            // The first non-option word ends the options ("+" in OSU's option string); the
            // rest is ignored, as OSU ignores it.
            break;
        };
        for (pos, c) in cluster.char_indices() {
            let Some(def) = defs.iter().find(|d| d.short == c) else {
                return bad("Invalid option", format!("-{c}"), None);
            };
            if def.arg {
                let rest = &cluster[pos + c.len_utf8()..];
                let arg = if !rest.is_empty() {
                    rest.to_string()
                } else if i < args.len() {
                    i += 1;
                    args[i - 1].as_ref().to_string()
                } else {
                    return bad("Option Missing Required Argument", format!("-{c}"), None);
                };
                if let Some(p) = apply(spec, &mut o, c, Some(&arg)) {
                    return p;
                }
                break;
            }
            if let Some(p) = apply(spec, &mut o, c, None) {
                return p;
            }
        }
    }
    Parsed::Run(o)
}
