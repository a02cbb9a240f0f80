//! The parameter registry: every tunable of Kestrel, declared once.
//!
//! A parameter is a static [`ParamSpec`] (name, owning component, type, default, one-line
//! description) wrapped in a typed handle [`Param<T>`]. Each crate exports the list of its specs;
//! the `kestrel` facade concatenates them, [`Params::resolve`] computes the value of each, and
//! `kestrel-info` prints them.
//!
//! Where a value comes from, lowest precedence first (see [`Source`]):
//! 1. the default in the spec;
//! 2. `KESTREL_AUTO_<NAME>`: a value the launcher chose for this job (for example yield-when-idle
//!    when ranks outnumber cores), which any explicit setting overrides;
//! 3. `KESTREL_<NAME>`: the user's environment;
//! 4. `KESTREL_MCA_<NAME>`: `kestrel-run --mca <name> <value>`, forwarded to every rank.
//!
//! This module never reads the process environment by itself: callers pass a lookup function,
//! which keeps resolution a pure function and testable.

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use crate::components::Selection;

/// The type of a parameter and the values it admits.
#[derive(Debug, Clone, Copy)]
pub enum ParamKind {
    /// `true/false`, `1/0`, `yes/no`, `on/off`.
    Bool,
    /// A signed integer within `min..=max`.
    Int {
        /// Smallest allowed value.
        min: i64,
        /// Largest allowed value.
        max: i64,
    },
    /// A byte count within `min..=max`; accepts suffixes `k`, `m`, `g` (powers of 1024).
    Size {
        /// Smallest allowed value in bytes.
        min: u64,
        /// Largest allowed value in bytes.
        max: u64,
    },
    /// Free text (paths, filter strings, interface lists).
    Str,
    /// One of a fixed set of words.
    Choice(&'static [&'static str]),
    /// A component list (`a,b` or `^c`) over these known components.
    Components(&'static [&'static str]),
}

/// The declaration of one parameter.
#[derive(Debug)]
pub struct ParamSpec {
    /// Lower-case name, used with `--mca`; the environment variable is `KESTREL_<NAME>`.
    pub name: &'static str,
    /// The framework or component that owns the parameter (`btl`, `shm`, `runtime`...).
    pub component: &'static str,
    /// Type and admissible values.
    pub kind: ParamKind,
    /// The default, written as a user would write it.
    pub default: &'static str,
    /// One line saying what the parameter changes.
    pub description: &'static str,
}

impl ParamSpec {
    /// `KESTREL_<NAME>`: the variable users set.
    pub fn env_var(&self) -> String {
        env_var_for(self.name)
    }

    /// What the kind admits, in words, for error messages and `kestrel-info`.
    pub fn allowed(&self) -> String {
        match self.kind {
            ParamKind::Bool => "a boolean (true/false, 1/0, yes/no, on/off)".into(),
            ParamKind::Int { min, max } => format!("an integer from {min} to {max}"),
            ParamKind::Size { min, max } => format!(
                "a byte count from {} to {} (suffixes k, m, g allowed)",
                format_size(min),
                format_size(max)
            ),
            ParamKind::Str => "text".into(),
            ParamKind::Choice(words) => format!("one of: {}", words.join(", ")),
            ParamKind::Components(known) => format!(
                "a component list like '{}' or '^{}' (known: {})",
                known.join(","),
                known.last().copied().unwrap_or("name"),
                known.join(", ")
            ),
        }
    }

    fn expected(&self) -> String {
        format!("expected {}", self.allowed())
    }

    /// Parses `raw` according to the kind, or says why not.
    pub fn parse(&self, raw: &str) -> Result<Value, String> {
        let text = raw.trim();
        match self.kind {
            ParamKind::Bool => parse_bool(text)
                .map(Value::Bool)
                .ok_or_else(|| self.expected()),
            ParamKind::Int { min, max } => match text.parse::<i64>() {
                Ok(v) if (min..=max).contains(&v) => Ok(Value::Int(v)),
                _ => Err(self.expected()),
            },
            ParamKind::Size { min, max } => match parse_size(text) {
                Some(v) if (min..=max).contains(&v) => Ok(Value::Size(v)),
                _ => Err(self.expected()),
            },
            ParamKind::Str => Ok(Value::Str(raw.to_string())),
            ParamKind::Choice(words) => words
                .iter()
                .find(|w| w.eq_ignore_ascii_case(text))
                .map(|w| Value::Choice(w))
                .ok_or_else(|| self.expected()),
            ParamKind::Components(known) => Selection::parse(self.name, text, known)
                .map(Value::Components)
                .map_err(|e| e.to_string()),
        }
    }
}

/// The environment variable for a parameter name.
pub fn env_var_for(name: &str) -> String {
    format!("KESTREL_{}", name.to_ascii_uppercase())
}

/// The variable `kestrel-run --mca` uses to forward a value to the ranks.
pub fn mca_env_var_for(name: &str) -> String {
    format!("KESTREL_MCA_{}", name.to_ascii_uppercase())
}

/// The variable the launcher uses for a value it chose for the job.
pub fn auto_env_var_for(name: &str) -> String {
    format!("KESTREL_AUTO_{}", name.to_ascii_uppercase())
}

fn parse_bool(text: &str) -> Option<bool> {
    match text.to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Parses `4096`, `64k`, `16M`, `1g`, `32KiB` into bytes.
pub fn parse_size(text: &str) -> Option<u64> {
    let lower = text.trim().to_ascii_lowercase();
    let lower = lower
        .strip_suffix("ib")
        .or_else(|| lower.strip_suffix('b'))
        .unwrap_or(&lower);
    let (digits, shift) = match lower.chars().last()? {
        'k' => (&lower[..lower.len() - 1], 10),
        'm' => (&lower[..lower.len() - 1], 20),
        'g' => (&lower[..lower.len() - 1], 30),
        _ => (lower, 0),
    };
    let n: u64 = digits.trim().parse().ok()?;
    n.checked_mul(1u64 << shift)
}

/// Formats a byte count with the largest exact binary suffix.
pub fn format_size(bytes: u64) -> String {
    for (shift, suffix) in [(30, "G"), (20, "M"), (10, "K")] {
        if bytes >= (1 << shift) && bytes.is_multiple_of(1 << shift) {
            return format!("{}{suffix}", bytes >> shift);
        }
    }
    bytes.to_string()
}

/// A parsed parameter value.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A byte count.
    Size(u64),
    /// Text.
    Str(String),
    /// One of the spec's words, as spelled in the spec.
    Choice(&'static str),
    /// A component list.
    Components(Selection),
}

/// Where a resolved value came from, lowest precedence first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Source {
    /// The spec's default.
    Default,
    /// Chosen by the launcher for this job (`KESTREL_AUTO_<NAME>`).
    Launcher,
    /// The user's environment (`KESTREL_<NAME>`).
    Environment,
    /// `kestrel-run --mca` (`KESTREL_MCA_<NAME>`).
    CommandLine,
}

impl Source {
    /// A short word for listings.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Default => "default",
            Source::Launcher => "launcher",
            Source::Environment => "environment",
            Source::CommandLine => "command line",
        }
    }
}

/// One parameter's resolved value.
#[derive(Debug, Clone)]
pub struct Resolved {
    /// The declaration.
    pub spec: &'static ParamSpec,
    /// The value.
    pub value: Value,
    /// The text the value was parsed from.
    pub raw: String,
    /// Where it came from.
    pub source: Source,
}

/// A parameter could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamError {
    /// A value does not fit the parameter's type or range.
    InvalidValue {
        /// Parameter name.
        name: String,
        /// The rejected text.
        value: String,
        /// Where the text came from (`KESTREL_BTL`, `--mca btl`).
        origin: String,
        /// Why it was rejected and what the parameter accepts.
        reason: String,
    },
    /// `--mca` (or `KESTREL_MCA_*`) named a parameter that no component registers.
    Unknown {
        /// The unknown name.
        name: String,
        /// Registered names that look alike.
        suggestions: Vec<String>,
    },
    /// `--mca` gave the same parameter twice with different values.
    Conflicting {
        /// Parameter name.
        name: String,
        /// The first value.
        first: String,
        /// The second value.
        second: String,
    },
}

impl fmt::Display for ParamError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamError::InvalidValue {
                name,
                value,
                origin,
                reason,
            } => write!(
                f,
                "parameter '{name}': value '{value}' (from {origin}) is not valid: {reason}"
            ),
            ParamError::Unknown { name, suggestions } => {
                write!(f, "parameter '{name}' does not exist")?;
                if !suggestions.is_empty() {
                    write!(f, "; did you mean {}?", suggestions.join(" or "))?;
                }
                write!(f, " (kestrel-info lists every parameter)")
            }
            ParamError::Conflicting {
                name,
                first,
                second,
            } => write!(
                f,
                "--mca {name} was given twice with different values ('{first}' and '{second}'); \
                 keep one of them"
            ),
        }
    }
}

impl std::error::Error for ParamError {}

/// The resolved value of every registered parameter.
#[derive(Debug, Clone, Default)]
pub struct Params {
    entries: BTreeMap<&'static str, Resolved>,
}

impl Params {
    /// Resolves every spec from its default and the variables `lookup` returns, then checks that
    /// no `KESTREL_MCA_*` variable names an unregistered parameter. `mca_names` lists the
    /// parameter names that appear as `KESTREL_MCA_<NAME>` in the environment (lower case).
    pub fn resolve(
        specs: &[&'static ParamSpec],
        lookup: &dyn Fn(&str) -> Option<String>,
        mca_names: &[String],
    ) -> Result<Params, ParamError> {
        for mca in mca_names {
            if !specs.iter().any(|s| s.name == mca) {
                return Err(ParamError::Unknown {
                    name: mca.clone(),
                    suggestions: suggest(mca, specs),
                });
            }
        }
        let mut entries = BTreeMap::new();
        for &spec in specs {
            let layers = [
                (Source::CommandLine, mca_env_var_for(spec.name)),
                (Source::Environment, env_var_for(spec.name)),
                (Source::Launcher, auto_env_var_for(spec.name)),
            ];
            let found = layers
                .iter()
                .find_map(|(src, var)| lookup(var).map(|v| (*src, var.clone(), v)));
            let (source, origin, raw) = match found {
                Some((src, var, v)) => (src, origin_of(src, spec.name, &var), v),
                None => (
                    Source::Default,
                    "the default".into(),
                    spec.default.to_string(),
                ),
            };
            let value = spec
                .parse(&raw)
                .map_err(|reason| ParamError::InvalidValue {
                    name: spec.name.into(),
                    value: raw.clone(),
                    origin,
                    reason,
                })?;
            entries.insert(
                spec.name,
                Resolved {
                    spec,
                    value,
                    raw,
                    source,
                },
            );
        }
        Ok(Params { entries })
    }

    /// Resolves from the process environment.
    pub fn from_env(specs: &[&'static ParamSpec]) -> Result<Params, ParamError> {
        let mca_names: Vec<String> = std::env::vars()
            .filter_map(|(k, _)| {
                k.strip_prefix("KESTREL_MCA_")
                    .map(|n| n.to_ascii_lowercase())
            })
            .collect();
        Self::resolve(specs, &|var| std::env::var(var).ok(), &mca_names)
    }

    /// Resolves only from the defaults.
    pub fn defaults(specs: &[&'static ParamSpec]) -> Params {
        Self::resolve(specs, &|_| None, &[]).expect("registered defaults must parse")
    }

    /// The resolved entry of a parameter, if it is registered.
    pub fn get(&self, name: &str) -> Option<&Resolved> {
        self.entries.get(name)
    }

    /// All entries in name order.
    pub fn iter(&self) -> impl Iterator<Item = &Resolved> {
        self.entries.values()
    }

    fn value_of(&self, spec: &'static ParamSpec) -> Value {
        match self.entries.get(spec.name) {
            Some(r) => r.value.clone(),
            // A layer asked for a parameter the caller did not register: fall back to the
            // default so that unit tests of one crate need not register every other crate's.
            None => spec
                .parse(spec.default)
                .expect("registered defaults must parse"),
        }
    }
}

fn origin_of(source: Source, name: &str, var: &str) -> String {
    match source {
        Source::CommandLine => format!("--mca {name}"),
        Source::Environment => var.to_string(),
        Source::Launcher => format!("{var}, set by kestrel-run"),
        Source::Default => "the default".into(),
    }
}

/// Registered names within edit distance 2, or sharing a prefix/suffix with `name`.
fn suggest(name: &str, specs: &[&'static ParamSpec]) -> Vec<String> {
    let mut out: Vec<String> = specs
        .iter()
        .filter(|s| {
            edit_distance(s.name, name) <= 2
                || (name.len() >= 4 && (s.name.contains(name) || name.contains(s.name)))
        })
        .map(|s| s.name.to_string())
        .collect();
    out.truncate(3);
    out
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != *cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// A typed handle to a registered parameter.
#[derive(Debug)]
pub struct Param<T> {
    spec: ParamSpec,
    _type: PhantomData<fn() -> T>,
}

impl<T> Param<T> {
    /// Declares a parameter. The kind must match `T` (checked by the unit tests of each
    /// crate's spec list through [`check_specs`]).
    pub const fn new(spec: ParamSpec) -> Self {
        Param {
            spec,
            _type: PhantomData,
        }
    }

    /// The declaration.
    pub const fn spec(&'static self) -> &'static ParamSpec {
        &self.spec
    }

    /// The parameter's name.
    pub const fn name(&self) -> &'static str {
        self.spec.name
    }
}

impl Param<bool> {
    /// The resolved value.
    pub fn get(&'static self, params: &Params) -> bool {
        match params.value_of(&self.spec) {
            Value::Bool(b) => b,
            other => unreachable!("{} is declared bool but holds {other:?}", self.spec.name),
        }
    }
}

impl Param<i64> {
    /// The resolved value.
    pub fn get(&'static self, params: &Params) -> i64 {
        match params.value_of(&self.spec) {
            Value::Int(v) => v,
            other => unreachable!("{} is declared int but holds {other:?}", self.spec.name),
        }
    }
}

impl Param<u64> {
    /// The resolved value (a byte count).
    pub fn get(&'static self, params: &Params) -> u64 {
        match params.value_of(&self.spec) {
            Value::Size(v) => v,
            other => unreachable!("{} is declared size but holds {other:?}", self.spec.name),
        }
    }
}

impl Param<String> {
    /// The resolved value.
    pub fn get(&'static self, params: &Params) -> String {
        match params.value_of(&self.spec) {
            Value::Str(s) => s,
            Value::Choice(w) => w.to_string(),
            other => unreachable!("{} is declared text but holds {other:?}", self.spec.name),
        }
    }
}

impl Param<Selection> {
    /// The resolved value.
    pub fn get(&'static self, params: &Params) -> Selection {
        match params.value_of(&self.spec) {
            Value::Components(s) => s,
            other => unreachable!(
                "{} is declared components but holds {other:?}",
                self.spec.name
            ),
        }
    }
}

/// Checks a crate's spec list: unique lower-case names, defaults that parse, one-line
/// descriptions. Every crate calls this from a unit test.
pub fn check_specs(specs: &[&'static ParamSpec]) -> Result<(), String> {
    let mut seen = std::collections::BTreeSet::new();
    for s in specs {
        if !seen.insert(s.name) {
            return Err(format!("parameter {} is registered twice", s.name));
        }
        if s.name.is_empty()
            || !s
                .name
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            return Err(format!(
                "parameter name '{}' must be lower-case snake",
                s.name
            ));
        }
        if let Err(e) = s.parse(s.default) {
            return Err(format!("default of {} does not parse: {e}", s.name));
        }
        if s.description.is_empty() || s.description.contains('\n') {
            return Err(format!("{} needs a one-line description", s.name));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    static FLAG: Param<bool> = Param::new(ParamSpec {
        name: "test_flag",
        component: "test",
        kind: ParamKind::Bool,
        default: "false",
        description: "A flag for tests.",
    });
    static DEPTH: Param<i64> = Param::new(ParamSpec {
        name: "test_depth",
        component: "test",
        kind: ParamKind::Int { min: 1, max: 16 },
        default: "4",
        description: "A bounded integer for tests.",
    });
    static SIZE: Param<u64> = Param::new(ParamSpec {
        name: "test_size",
        component: "test",
        kind: ParamKind::Size {
            min: 1024,
            max: 1 << 30,
        },
        default: "16M",
        description: "A size for tests.",
    });
    static MODE: Param<String> = Param::new(ParamSpec {
        name: "test_mode",
        component: "test",
        kind: ParamKind::Choice(&["auto", "on", "off"]),
        default: "auto",
        description: "A choice for tests.",
    });

    fn specs() -> Vec<&'static ParamSpec> {
        vec![FLAG.spec(), DEPTH.spec(), SIZE.spec(), MODE.spec()]
    }

    fn resolve(vars: &[(&str, &str)]) -> Result<Params, ParamError> {
        let map: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let mca: Vec<String> = map
            .keys()
            .filter_map(|k| {
                k.strip_prefix("KESTREL_MCA_")
                    .map(|n| n.to_ascii_lowercase())
            })
            .collect();
        Params::resolve(&specs(), &|k| map.get(k).cloned(), &mca)
    }

    #[test]
    fn defaults_apply_without_variables() {
        let p = resolve(&[]).unwrap();
        assert!(!FLAG.get(&p));
        assert_eq!(DEPTH.get(&p), 4);
        assert_eq!(SIZE.get(&p), 16 << 20);
        assert_eq!(MODE.get(&p), "auto");
        assert_eq!(p.get("test_depth").unwrap().source, Source::Default);
    }

    #[test]
    fn precedence_is_default_launcher_environment_command_line() {
        let p = resolve(&[("KESTREL_AUTO_TEST_DEPTH", "5")]).unwrap();
        assert_eq!(
            (DEPTH.get(&p), p.get("test_depth").unwrap().source),
            (5, Source::Launcher)
        );
        let p = resolve(&[
            ("KESTREL_AUTO_TEST_DEPTH", "5"),
            ("KESTREL_TEST_DEPTH", "6"),
        ])
        .unwrap();
        assert_eq!(
            (DEPTH.get(&p), p.get("test_depth").unwrap().source),
            (6, Source::Environment)
        );
        let p = resolve(&[
            ("KESTREL_AUTO_TEST_DEPTH", "5"),
            ("KESTREL_TEST_DEPTH", "6"),
            ("KESTREL_MCA_TEST_DEPTH", "7"),
        ])
        .unwrap();
        assert_eq!(
            (DEPTH.get(&p), p.get("test_depth").unwrap().source),
            (7, Source::CommandLine)
        );
    }

    #[test]
    fn bad_values_name_parameter_value_and_allowed_range() {
        let e = resolve(&[("KESTREL_TEST_DEPTH", "17")]).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("test_depth") && msg.contains("'17'"), "{msg}");
        assert!(
            msg.contains("from 1 to 16") && msg.contains("KESTREL_TEST_DEPTH"),
            "{msg}"
        );
        let e = resolve(&[("KESTREL_MCA_TEST_FLAG", "maybe")]).unwrap_err();
        assert!(e.to_string().contains("--mca test_flag"), "{e}");
        let e = resolve(&[("KESTREL_TEST_MODE", "sideways")]).unwrap_err();
        assert!(e.to_string().contains("one of: auto, on, off"), "{e}");
        let e = resolve(&[("KESTREL_TEST_SIZE", "12")]).unwrap_err();
        assert!(e.to_string().contains("1K to 1G"), "{e}");
    }

    #[test]
    fn unknown_mca_name_is_an_error_with_suggestions() {
        let e = resolve(&[("KESTREL_MCA_TEST_DEPHT", "3")]).unwrap_err();
        assert_eq!(
            e,
            ParamError::Unknown {
                name: "test_depht".into(),
                suggestions: vec!["test_depth".into()]
            }
        );
    }

    #[test]
    fn sizes_and_bools_accept_usual_spellings() {
        assert_eq!(parse_size("4096"), Some(4096));
        assert_eq!(parse_size("64k"), Some(65536));
        assert_eq!(parse_size("32KiB"), Some(32768));
        assert_eq!(parse_size("2G"), Some(2 << 30));
        assert_eq!(parse_size("x"), None);
        assert_eq!(parse_size(""), None);
        assert_eq!(format_size(96 << 20), "96M");
        assert_eq!(format_size(1000), "1000");
        for t in ["1", "TRUE", "yes", "On"] {
            assert_eq!(parse_bool(t), Some(true));
        }
        assert_eq!(parse_bool("2"), None);
    }

    #[test]
    fn spec_list_checks_catch_mistakes() {
        check_specs(&specs()).unwrap();
        assert!(check_specs(&[FLAG.spec(), FLAG.spec()]).is_err());
    }
}
