//! Logging through `tracing`, one target per component.
//!
//! Each component logs with `target: "<component>"` (`shm`, `usnic`, `pml`, `pmi`, `launcher`,
//! ...). The `verbose` parameter (`KESTREL_VERBOSE`) is a comma list whose entries are either a
//! level for every component (`debug`) or `component:level` (`shm:debug,usnic:trace`). By default
//! errors and warnings are shown: a warning is a degradation an operator should fix (a dead
//! rail, an MTU mismatch, a single-copy mechanism that is refused), never routine.

use std::fmt;
use std::sync::OnceLock;
use std::time::Instant;

use tracing_subscriber::filter::{EnvFilter, LevelFilter};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

/// Why a verbosity filter was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FilterError {
    /// The filter as given.
    pub filter: String,
    /// The bad entry.
    pub entry: String,
}

impl fmt::Display for FilterError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "verbose filter '{}': entry '{}' is not 'level' or 'component:level'; levels are {} \
             (example: KESTREL_VERBOSE=shm:debug,usnic:trace)",
            self.filter,
            self.entry,
            LEVELS.join(", ")
        )
    }
}

impl std::error::Error for FilterError {}

/// Translates a `KESTREL_VERBOSE` filter into `tracing` directives (`shm=debug`).
pub fn directives(filter: &str) -> Result<Vec<String>, FilterError> {
    let mut out = vec!["warn".to_string()];
    for entry in filter.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let bad = || FilterError {
            filter: filter.into(),
            entry: entry.into(),
        };
        let (component, level) = match entry.split_once(':') {
            Some((c, l)) => (Some(c.trim()), l.trim()),
            None => (None, entry),
        };
        let level = level.to_ascii_lowercase();
        if !LEVELS.contains(&level.as_str()) {
            return Err(bad());
        }
        match component {
            None => out[0] = level,
            Some(c)
                if !c.is_empty() && c.chars().all(|ch| ch.is_ascii_alphanumeric() || ch == '_') =>
            {
                out.push(format!("{c}={level}"))
            }
            Some(_) => return Err(bad()),
        }
    }
    Ok(out)
}

static START: OnceLock<Instant> = OnceLock::new();

struct KestrelFormat {
    label: String,
}

impl<S, N> FormatEvent<S, N> for KestrelFormat
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let elapsed = START.get_or_init(Instant::now).elapsed();
        let meta = event.metadata();
        write!(
            writer,
            "[{} +{:.6}s] {} {}: ",
            self.label,
            elapsed.as_secs_f64(),
            meta.level(),
            meta.target()
        )?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// Installs the global subscriber writing to stderr, each line prefixed with `label`
/// (`kestrel r3`). A second call keeps the first subscriber and returns `Ok`.
pub fn init(filter: &str, label: &str) -> Result<(), FilterError> {
    START.get_or_init(Instant::now);
    let mut env_filter = EnvFilter::default().add_directive(LevelFilter::WARN.into());
    for d in directives(filter)? {
        // Directives were validated above, so parsing cannot fail.
        if let Ok(parsed) = d.parse() {
            env_filter = env_filter.add_directive(parsed);
        }
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .event_format(KestrelFormat {
            label: label.to_string(),
        })
        .try_init();
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_component_and_global_levels() {
        assert_eq!(directives("").unwrap(), vec!["warn"]);
        assert_eq!(
            directives("shm:debug, usnic:TRACE").unwrap(),
            vec!["warn", "shm=debug", "usnic=trace"]
        );
        assert_eq!(
            directives("info,pmi:trace").unwrap(),
            vec!["info", "pmi=trace"]
        );
    }

    #[test]
    fn bad_entries_are_named() {
        let e = directives("shm:loud").unwrap_err();
        assert_eq!(e.entry, "shm:loud");
        assert!(e.to_string().contains("KESTREL_VERBOSE"));
        assert!(directives(":debug").is_err());
        assert!(directives("sh m:debug").is_err());
    }
}
