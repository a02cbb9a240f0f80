//! Slurm allocation discovery: turning Slurm's environment variables into hosts and slots.
//!
//! Inside a Slurm allocation (`SLURM_JOB_ID` set), `kestrel-run` takes its hosts and slots
//! from the variables Slurm exports rather than from a hostfile. This module owns parsing
//! those variables: the compressed hostlist syntax of `SLURM_JOB_NODELIST` (`node[01-04,07]`),
//! the run-length syntax of `SLURM_TASKS_PER_NODE` (`2(x3),1`) and `SLURM_CPUS_PER_TASK`.
//!
//! It also recognises the tasks of an `srun` step ([`srun_without_pmi`], [`direct_launch_node`]):
//! a task started by `srun --mpi=pmi2` takes its node id from Slurm, and one of several tasks
//! started without a PMI plugin must fail with an explanation instead of running alone.
//!
//! It never runs Slurm commands (`scontrol show hostnames`, `srun`...): parsing the variables
//! is enough, works where the Slurm client tools are not installed on compute nodes, and keeps
//! everything here a pure function of its input. Like the parameter registry, it never reads the
//! process environment itself: [`allocation_from_env`] takes a lookup function.
//!
//! Every error is a [`SlurmError`] naming the variable, the value and a fix, because these values
//! usually come from a job script the user has to edit.

use std::fmt;

/// Upper bound on the number of names any one variable may expand to.
///
/// Real allocations are far smaller; the bound keeps a typo such as `n[1-99999999999]` from
/// exhausting memory instead of producing an error.
const MAX_EXPANSION: u64 = 1_000_000;

/// Why a Slurm variable could not be used.
///
/// `Display` names the variable, the offending value, what is wrong and how to fix it, e.g.
/// "SLURM_CPUS_PER_TASK='0' is not a positive integer; Slurm sets it from `-c N`/`--cpus-per-task=N`
/// with N >= 1".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmError {
    /// The environment variable at fault, e.g. `SLURM_JOB_NODELIST`.
    pub variable: String,
    /// Its value as read (empty when the variable is unset).
    pub value: String,
    /// What is wrong with the value and how to fix it; follows `VAR='value' ` in `Display`.
    pub reason: String,
}

impl SlurmError {
    fn new(variable: &str, value: &str, reason: impl Into<String>) -> Self {
        SlurmError {
            variable: variable.to_string(),
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for SlurmError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}='{}' {}", self.variable, self.value, self.reason)
    }
}

impl std::error::Error for SlurmError {}

/// One piece of a hostlist entry: fixed text or a bracket group of numeric ranges.
#[derive(Debug)]
enum Segment {
    Literal(String),
    Ranges(Vec<NumRange>),
}

/// An inclusive numeric range from a bracket group, printed zero-padded to `width` digits.
#[derive(Debug)]
struct NumRange {
    lo: u64,
    hi: u64,
    width: usize,
}

impl Segment {
    /// How many alternatives this segment contributes; saturates so that absurd input is caught
    /// by the [`MAX_EXPANSION`] check instead of overflowing.
    fn count(&self) -> u64 {
        match self {
            Segment::Literal(_) => 1,
            Segment::Ranges(ranges) => ranges.iter().fold(0u64, |acc, r| {
                acc.saturating_add(r.hi.saturating_sub(r.lo).saturating_add(1))
            }),
        }
    }

    fn values(&self) -> Vec<String> {
        match self {
            Segment::Literal(text) => vec![text.clone()],
            Segment::Ranges(ranges) => ranges
                .iter()
                .flat_map(|r| (r.lo..=r.hi).map(move |n| format!("{n:0width$}", width = r.width)))
                .collect(),
        }
    }
}

/// Splits `s` at characters matching `is_sep` that lie outside brackets, checking bracket
/// balance on the way so that every caller sees the same unbalanced-bracket errors.
fn split_outside_brackets(s: &str, is_sep: fn(char) -> bool) -> Result<Vec<String>, String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut in_bracket = false;
    for c in s.chars() {
        match c {
            '[' if in_bracket => {
                return Err(
                    "has a `[` inside another bracket group; brackets do not nest, write \
                     several groups side by side instead, e.g. `rack[1-2]-n[01-02]`"
                        .to_string(),
                )
            }
            '[' => in_bracket = true,
            ']' if !in_bracket => {
                return Err("has a `]` without a matching `[`; \
                            remove it or open the group, e.g. `node[1-4]`"
                    .to_string())
            }
            ']' => in_bracket = false,
            c if !in_bracket && is_sep(c) => {
                parts.push(std::mem::take(&mut current));
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    if in_bracket {
        return Err(
            "has a `[` that is never closed; add the matching `]`, e.g. `node[1-4]`".into(),
        );
    }
    parts.push(current);
    Ok(parts)
}

/// Parses a bracket bound: decimal digits only, so that signs, spaces and hex are rejected
/// rather than silently reinterpreted.
fn parse_bound(text: &str, item: &str, entry: &str) -> Result<u64, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!(
            "has a non-numeric range `{item}` in entry `{entry}`; bracket groups hold decimal \
             numbers and `lo-hi` ranges, e.g. `node[01-04,07]`"
        ));
    }
    text.parse::<u64>().map_err(|_| {
        format!(
            "has a number too large for a host index in range `{item}` of entry `{entry}`; \
             check the bracket group for a typo"
        )
    })
}

fn parse_ranges(body: &str, entry: &str) -> Result<Vec<NumRange>, String> {
    let mut ranges = Vec::new();
    for item in body.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(format!(
                "has an empty range in `[{body}]` of entry `{entry}`; write ranges as `lo-hi` \
                 or single numbers separated by single commas, e.g. `[1-4,7]`"
            ));
        }
        let (lo_text, hi_text) = match item.split_once('-') {
            Some((lo, hi)) => (lo.trim(), hi.trim()),
            None => (item, item),
        };
        let lo = parse_bound(lo_text, item, entry)?;
        let hi = parse_bound(hi_text, item, entry)?;
        if lo > hi {
            return Err(format!(
                "has a descending range `{item}` in entry `{entry}`; write it low to high, \
                 e.g. `{hi_text}-{lo_text}`"
            ));
        }
        // Slurm pads to the width of the lower bound as written: `08-10` gives 08,09,10 while
        // `8-10` gives 8,9,10.
        ranges.push(NumRange {
            lo,
            hi,
            width: lo_text.len(),
        });
    }
    Ok(ranges)
}

fn parse_entry(entry: &str) -> Result<Vec<Segment>, String> {
    let mut segments = Vec::new();
    let mut literal = String::new();
    let mut chars = entry.chars();
    while let Some(c) = chars.next() {
        match c {
            '[' => {
                let mut body = String::new();
                let mut closed = false;
                for b in chars.by_ref() {
                    match b {
                        ']' => {
                            closed = true;
                            break;
                        }
                        // The splitter already rejects these; repeated here so this function is
                        // correct on its own.
                        '[' => {
                            return Err(format!(
                                "has nested brackets in entry `{entry}`; write several groups \
                                 side by side instead, e.g. `rack[1-2]-n[01-02]`"
                            ))
                        }
                        _ => body.push(b),
                    }
                }
                if !closed {
                    return Err(format!(
                        "has a `[` that is never closed in entry `{entry}`; add the matching `]`"
                    ));
                }
                if !literal.is_empty() {
                    segments.push(Segment::Literal(std::mem::take(&mut literal)));
                }
                segments.push(Segment::Ranges(parse_ranges(&body, entry)?));
            }
            ']' => {
                return Err(format!(
                    "has a `]` without a matching `[` in entry `{entry}`; remove it or open the \
                     group, e.g. `node[1-4]`"
                ))
            }
            _ => literal.push(c),
        }
    }
    if !literal.is_empty() {
        segments.push(Segment::Literal(literal));
    }
    Ok(segments)
}

fn too_many(what: &str) -> String {
    format!(
        "expands to more than {MAX_EXPANSION} {what}; this is almost certainly a typo in a range \
         (check the upper bounds)"
    )
}

/// Expands a Slurm hostlist expression into host names, in order.
///
/// Entries are separated by commas (a comma inside brackets belongs to the bracket group) or
/// whitespace. Each entry is a prefix plus optional bracket groups of ranges and single numbers:
/// `node[01-04,07],gpu5` gives node01, node02, node03, node04, node07, gpu5. Zero padding
/// follows the width of the written lower bound (`n[08-10]` gives n08, n09, n10). Several groups
/// and suffixes combine as a cartesian product, leftmost slowest: `rack[1-2]-n[01-02]` gives
/// rack1-n01, rack1-n02, rack2-n01, rack2-n02.
///
/// `variable` is only used to name the source in errors. Errors: an empty expression or entry,
/// unbalanced or nested brackets, an empty, descending or non-numeric range, and an expansion
/// larger than 1,000,000 hosts.
pub fn expand_hostlist(variable: &str, expr: &str) -> Result<Vec<String>, SlurmError> {
    let err = |reason: String| SlurmError::new(variable, expr, reason);
    if expr.trim().is_empty() {
        return Err(err(
            "is empty; expected a hostlist such as `node[01-04,07],gpu5`".into(),
        ));
    }

    let mut entries = Vec::new();
    for piece in split_outside_brackets(expr, |c| c == ',').map_err(err)? {
        let words: Vec<String> = split_outside_brackets(&piece, char::is_whitespace)
            .map_err(err)?
            .into_iter()
            .filter(|w| !w.is_empty())
            .collect();
        if words.is_empty() {
            return Err(err(
                "has an empty entry (a leading, trailing or doubled comma); \
                 separate host names with single commas, e.g. `node1,node2`"
                    .into(),
            ));
        }
        entries.extend(words);
    }

    // Count before expanding so that an oversized expression fails fast without allocating.
    let mut parsed = Vec::with_capacity(entries.len());
    let mut total: u64 = 0;
    for entry in &entries {
        let segments = parse_entry(entry).map_err(err)?;
        let count = segments
            .iter()
            .fold(1u64, |acc, s| acc.saturating_mul(s.count()));
        total = total.saturating_add(count);
        if total > MAX_EXPANSION {
            return Err(err(too_many("hosts")));
        }
        parsed.push(segments);
    }

    let mut hosts = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    for segments in &parsed {
        // Appending each segment's values to every partial name keeps the leftmost group slowest.
        let mut names = vec![String::new()];
        for segment in segments {
            let values = segment.values();
            names = names
                .iter()
                .flat_map(|prefix| values.iter().map(move |v| format!("{prefix}{v}")))
                .collect();
        }
        hosts.extend(names);
    }
    Ok(hosts)
}

/// Parses a non-negative decimal integer made of ASCII digits only; `str::parse` alone would
/// also accept a leading `+`, which Slurm never writes.
fn parse_digits(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Expands `SLURM_TASKS_PER_NODE` syntax into one task count per node.
///
/// The value is a comma list where `c` means one node with `c` tasks and `c(xN)` means `N`
/// consecutive nodes with `c` tasks each: `2(x3),1` gives `[2, 2, 2, 1]`.
///
/// `variable` is only used to name the source in errors. Errors: an empty value or entry
/// (including a trailing comma), a missing count or repeat (`(x3)`, `2(x)`), a zero count or
/// repeat, an unclosed group (`2(x3`), non-numeric text, and more than 1,000,000 nodes.
pub fn expand_tasks_per_node(variable: &str, expr: &str) -> Result<Vec<u32>, SlurmError> {
    let err = |reason: String| SlurmError::new(variable, expr, reason);
    const FIX: &str =
        "Slurm writes it as `c` or `c(xN)` (c tasks on each of N nodes) separated by \
                       commas, e.g. `2(x3),1`; if you set it yourself, use that form or unset it";
    if expr.trim().is_empty() {
        return Err(err(format!("is empty; {FIX}")));
    }

    let mut tasks = Vec::new();
    let mut total: u64 = 0;
    for item in expr.split(',') {
        let item = item.trim();
        if item.is_empty() {
            return Err(err(format!(
                "has an empty entry (a leading, trailing or doubled comma); {FIX}"
            )));
        }
        let (count_text, repeat) = match item.split_once('(') {
            None => (item, 1),
            Some((count_text, rest)) => {
                let repeat = rest
                    .strip_suffix(')')
                    .and_then(|r| r.strip_prefix('x'))
                    .and_then(parse_digits)
                    .ok_or_else(|| err(format!("has a malformed entry `{item}`; {FIX}")))?;
                if repeat == 0 {
                    return Err(err(format!(
                        "has a repeat count of 0 in `{item}`; a group covers at least one node, \
                         {FIX}"
                    )));
                }
                (count_text.trim(), repeat)
            }
        };
        let count = parse_digits(count_text)
            .ok_or_else(|| err(format!("has a malformed entry `{item}`; {FIX}")))?;
        // Slurm lists only nodes that run tasks, so 0 means the value was not written by Slurm.
        if count == 0 {
            return Err(err(format!(
                "gives 0 tasks in entry `{item}`; every listed node needs at least one task, \
                 {FIX}"
            )));
        }
        total = total.saturating_add(u64::from(repeat));
        if total > MAX_EXPANSION {
            return Err(err(too_many("nodes")));
        }
        tasks.resize(
            tasks
                .len()
                .saturating_add(usize::try_from(repeat).unwrap_or(0)),
            count,
        );
    }
    Ok(tasks)
}

/// Reads `SLURM_CPUS_PER_TASK`: `None` (unset) gives 1, a positive integer gives itself.
///
/// Anything else (`0`, `-1`, `abc`, the empty string) is an error naming the variable, since
/// silently falling back to 1 would oversubscribe cores the user meant to reserve.
pub fn cpus_per_task(value: Option<&str>) -> Result<u32, SlurmError> {
    let Some(value) = value else {
        return Ok(1);
    };
    match parse_digits(value.trim()) {
        Some(n) if n > 0 => Ok(n),
        _ => Err(SlurmError::new(
            "SLURM_CPUS_PER_TASK",
            value,
            "is not a positive integer; Slurm sets it from `-c N`/`--cpus-per-task=N` with N >= 1",
        )),
    }
}

/// The Slurm allocation as `kestrel-run` uses it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlurmAllocation {
    /// `SLURM_JOB_ID`, kept for log lines and error messages.
    pub job_id: String,
    /// Each allocated host with its number of task slots, in Slurm's node order.
    pub hosts: Vec<(String, u32)>,
    /// CPUs Slurm reserved for each task (`SLURM_CPUS_PER_TASK`, 1 when unset).
    pub cpus_per_task: u32,
}

/// Reads the Slurm allocation through `lookup`, a stand-in for `std::env::var`.
///
/// Returns `Ok(None)` when `SLURM_JOB_ID` is unset (or empty), i.e. outside Slurm. Hosts come from
/// `SLURM_JOB_NODELIST`, or from the older `SLURM_NODELIST` when the former is unset; slots come
/// from `SLURM_TASKS_PER_NODE`, which must give exactly one entry per host; `cpus_per_task` comes
/// from `SLURM_CPUS_PER_TASK`.
pub fn allocation_from_env(
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<SlurmAllocation>, SlurmError> {
    // An empty value is what `SLURM_JOB_ID=` in a script leaves behind to leave the allocation,
    // so it means "not inside Slurm" rather than an error.
    let job_id = match lookup("SLURM_JOB_ID") {
        Some(id) if !id.trim().is_empty() => id.trim().to_string(),
        _ => return Ok(None),
    };

    let (nodelist_var, nodelist) = match lookup("SLURM_JOB_NODELIST") {
        Some(v) => ("SLURM_JOB_NODELIST", v),
        None => match lookup("SLURM_NODELIST") {
            Some(v) => ("SLURM_NODELIST", v),
            None => {
                return Err(SlurmError::new(
                    "SLURM_JOB_NODELIST",
                    "",
                    format!(
                        "is unset, and so is SLURM_NODELIST, although SLURM_JOB_ID={job_id} is \
                         set; run kestrel-run inside an allocation made by `salloc`/`sbatch`, \
                         or unset SLURM_JOB_ID to launch without Slurm"
                    ),
                ))
            }
        },
    };
    let hosts = expand_hostlist(nodelist_var, &nodelist)?;

    let tasks_text = lookup("SLURM_TASKS_PER_NODE").ok_or_else(|| {
        SlurmError::new(
            "SLURM_TASKS_PER_NODE",
            "",
            format!(
                "is unset although SLURM_JOB_ID={job_id} is set, so the number of slots per \
                 node is unknown; request tasks when allocating, e.g. `salloc -n N` / \
                 `sbatch -n N`"
            ),
        )
    })?;
    let tasks = expand_tasks_per_node("SLURM_TASKS_PER_NODE", &tasks_text)?;

    if tasks.len() != hosts.len() {
        return Err(SlurmError::new(
            "SLURM_TASKS_PER_NODE",
            &tasks_text,
            format!(
                "expands to {} task counts but {nodelist_var}='{nodelist}' expands to {} hosts; \
                 Slurm gives one count per node, so the two variables come from different jobs \
                 or steps (e.g. an environment inherited from another allocation); run \
                 kestrel-run directly inside a single `salloc`/`sbatch` allocation",
                tasks.len(),
                hosts.len()
            ),
        ));
    }

    let cpus_per_task = cpus_per_task(lookup("SLURM_CPUS_PER_TASK").as_deref())?;

    Ok(Some(SlurmAllocation {
        job_id,
        hosts: hosts.into_iter().zip(tasks).collect(),
        cpus_per_task,
    }))
}

/// The step id of the `srun` step this process is a task of (`SLURM_STEP_ID`, or the older
/// `SLURM_STEPID`). Unset in `salloc` shells and `sbatch` scripts, which are not tasks of a step.
fn step_id(lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    lookup("SLURM_STEP_ID")
        .or_else(|| lookup("SLURM_STEPID"))
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// A task of a multi-task `srun` step that got no PMI server (`srun --mpi=none`, or a plugin
/// Kestrel does not speak): what the error message needs to say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SrunWithoutPmi {
    /// `SLURM_JOB_ID.SLURM_STEP_ID`, e.g. `12.0`.
    pub step: String,
    /// This task's rank in the step (`SLURM_PROCID`).
    pub task: u32,
    /// Tasks in the step (`SLURM_STEP_NUM_TASKS`, else `SLURM_NTASKS`).
    pub tasks: u32,
    /// The MPI plugin srun used when it is not `none` (e.g. `pmix`), from `SLURM_MPI_TYPE`.
    pub plugin: Option<String>,
}

/// Recognises a task that `srun` started as one of several without PMI variables.
///
/// All of these must hold: no `PMI_FD` and no `PMI_PORT`; a step id (so `salloc` shells and
/// `sbatch` scripts, which carry `SLURM_NTASKS` and even `SLURM_PROCID` but are not tasks of a
/// step, still run as singletons); a numeric `SLURM_PROCID`; and more than one task in the step.
/// A one-task step (`srun -n 1 prog`) is a genuine singleton and gives `None`, and so does
/// anything unparsable: the detection must never stop a program that could have run.
pub fn srun_without_pmi(lookup: &dyn Fn(&str) -> Option<String>) -> Option<SrunWithoutPmi> {
    if lookup("PMI_FD").is_some() || lookup("PMI_PORT").is_some() {
        return None;
    }
    let step = step_id(lookup)?;
    let number = |v: &str| lookup(v).and_then(|t| parse_digits(t.trim()));
    let task = number("SLURM_PROCID")?;
    let tasks = number("SLURM_STEP_NUM_TASKS").or_else(|| number("SLURM_NTASKS"))?;
    if tasks <= 1 {
        return None;
    }
    let job = lookup("SLURM_JOB_ID")
        .or_else(|| lookup("SLURM_JOBID"))
        .map(|j| j.trim().to_string())
        .unwrap_or_else(|| "?".into());
    let plugin = lookup("SLURM_MPI_TYPE")
        .map(|p| p.trim().to_string())
        .filter(|p| !p.is_empty() && p != "none");
    Some(SrunWithoutPmi {
        step: format!("{job}.{step}"),
        task,
        tasks,
        plugin,
    })
}

impl SrunWithoutPmi {
    /// Writes the explanation; `command` is the task's command line, shown in the command that
    /// works. Task 0 gives the whole story, the others one line pointing to it, so that a
    /// 64-task step does not print 64 paragraphs.
    pub fn explain(&self, f: &mut fmt::Formatter<'_>, command: &str) -> fmt::Result {
        let how = match &self.plugin {
            Some(p) => format!("with srun's '{p}' MPI plugin, which Kestrel does not speak"),
            None => "without a PMI plugin (srun --mpi=none, Slurm's usual default)".to_string(),
        };
        let fix = format!("srun --mpi=pmi2 -n {} {command}", self.tasks);
        if self.task != 0 {
            return write!(
                f,
                "PMI: task {} of {} of Slurm step {} was started {how}; run `{fix}` \
                 (task 0 explains)",
                self.task, self.tasks, self.step
            );
        }
        write!(
            f,
            "PMI: this process is task 0 of {tasks} of Slurm step {step}, started {how}, so \
             the {tasks} tasks cannot find each other (each would run alone as rank 0 of 1). \
             Start it with Slurm's PMI-2 plugin:\n    {fix}\n\
             or set `MpiDefault=pmi2` in slurm.conf so that plain `srun` offers PMI-2; \
             `kestrel-run` inside `salloc`/`sbatch` works too. To run every task alone on \
             purpose, set KESTREL_PMI=singleton",
            tasks = self.tasks,
            step = self.step,
        )
    }
}

/// The node name Slurm gave this task (`SLURMD_NODENAME`) when the process was started
/// directly by `srun --mpi=pmi2` and is talking to Slurm's own PMI-2 server: then the name is
/// the node's identity even where host names do not tell nodes apart (several `slurmd`s on one
/// machine). `None` otherwise, including under other launchers run inside a step, because they
/// pass their own environment (with the launching node's name) to ranks on other nodes.
///
/// Slurm's plugin is recognised by `SLURM_MPI_TYPE=pmi2` together with
/// `PMI_JOBID` = `SLURM_JOB_ID.SLURM_STEP_ID`, which it sets and no other launcher does.
pub fn direct_launch_node(lookup: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    if lookup("SLURM_MPI_TYPE")?.trim() != "pmi2" {
        return None;
    }
    let job = lookup("SLURM_JOB_ID").or_else(|| lookup("SLURM_JOBID"))?;
    let expected = format!("{}.{}", job.trim(), step_id(lookup)?);
    if lookup("PMI_JOBID")?.trim() != expected {
        return None;
    }
    lookup("SLURMD_NODENAME")
        .map(|n| n.trim().to_string())
        .filter(|n| !n.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn hostlist_valid() {
        let cases: &[(&str, &[&str])] = &[
            ("gpu5", &["gpu5"]),
            ("node1", &["node1"]),
            ("a1,b[3-4]", &["a1", "b3", "b4"]),
            (
                "node[01-04,07],gpu5",
                &["node01", "node02", "node03", "node04", "node07", "gpu5"],
            ),
            ("n[08-10]", &["n08", "n09", "n10"]),
            ("n[8-10]", &["n8", "n9", "n10"]),
            ("n[001-002]", &["n001", "n002"]),
            ("n[007]", &["n007"]),
            ("n[5]", &["n5"]),
            ("n[3-3]", &["n3"]),
            ("node[1-3]x", &["node1x", "node2x", "node3x"]),
            (
                "rack[1-2]-n[01-02]",
                &["rack1-n01", "rack1-n02", "rack2-n01", "rack2-n02"],
            ),
            ("n[1-2]a[7]b", &["n1a7b", "n2a7b"]),
            ("a b", &["a", "b"]),
            ("a  b\tc\n", &["a", "b", "c"]),
            ("a, b", &["a", "b"]),
            (" n[1-2] , m ", &["n1", "n2", "m"]),
            ("n[1, 3]", &["n1", "n3"]),
            ("n[1-2],n[1-2]", &["n1", "n2", "n1", "n2"]),
            ("[1-2]", &["1", "2"]),
            ("a.example.org", &["a.example.org"]),
        ];
        for (expr, want) in cases {
            let got = expand_hostlist("SLURM_JOB_NODELIST", expr);
            let want: Vec<String> = want.iter().map(|s| s.to_string()).collect();
            assert_eq!(got, Ok(want), "expr {expr:?}");
        }
    }

    #[test]
    fn hostlist_malformed() {
        let cases: &[(&str, &str)] = &[
            ("", "is empty"),
            ("   ", "is empty"),
            (",", "empty entry"),
            ("a,,b", "empty entry"),
            ("a,", "empty entry"),
            (",a", "empty entry"),
            ("a, ,b", "empty entry"),
            ("n[1-3", "never closed"),
            ("n1-3]", "without a matching `[`"),
            ("n[1-[2]]", "inside another bracket"),
            ("n[]", "empty range"),
            ("n[1,,2]", "empty range"),
            ("n[1-2,]", "empty range"),
            ("n[5-3]", "descending range `5-3`"),
            ("n[a-b]", "non-numeric range"),
            ("n[1-x]", "non-numeric range"),
            ("n[-3]", "non-numeric range"),
            ("n[1-]", "non-numeric range"),
            ("n[1-2-3]", "non-numeric range"),
            ("n[+1]", "non-numeric range"),
            ("n[0x10]", "non-numeric range"),
            ("n[99999999999999999999999]", "too large"),
            ("n[1-1000001]", "more than 1000000 hosts"),
            ("n[0-999999],m[0-1]", "more than 1000000 hosts"),
            ("a[1-1000]b[1-1001]", "more than 1000000 hosts"),
            (
                "n[0-18446744073709551615][0-18446744073709551615]",
                "more than 1000000 hosts",
            ),
        ];
        for (expr, needle) in cases {
            let err = expand_hostlist("SLURM_JOB_NODELIST", expr)
                .expect_err(&format!("expr {expr:?} should fail"));
            assert_eq!(err.variable, "SLURM_JOB_NODELIST");
            assert_eq!(err.value, *expr);
            assert!(
                err.reason.contains(needle),
                "expr {expr:?}: reason {:?} lacks {needle:?}",
                err.reason
            );
            assert!(err
                .to_string()
                .starts_with(&format!("SLURM_JOB_NODELIST='{expr}' ")));
        }
    }

    #[test]
    fn hostlist_at_limit_is_accepted() {
        let hosts = expand_hostlist("V", "n[1-1000000]").expect("exactly the limit");
        assert_eq!(hosts.len(), 1_000_000);
        assert_eq!(hosts.first().map(String::as_str), Some("n1"));
        assert_eq!(hosts.last().map(String::as_str), Some("n1000000"));
    }

    #[test]
    fn tasks_per_node_valid() {
        let cases: &[(&str, &[u32])] = &[
            ("1", &[1]),
            ("4", &[4]),
            ("2(x3),1", &[2, 2, 2, 1]),
            ("2(x3)", &[2, 2, 2]),
            ("1,2,3", &[1, 2, 3]),
            ("16(x2),8(x1),4", &[16, 16, 8, 4]),
            (" 2(x2) , 1 ", &[2, 2, 1]),
        ];
        for (expr, want) in cases {
            assert_eq!(
                expand_tasks_per_node("SLURM_TASKS_PER_NODE", expr),
                Ok(want.to_vec()),
                "expr {expr:?}"
            );
        }
    }

    #[test]
    fn tasks_per_node_malformed() {
        let cases: &[(&str, &str)] = &[
            ("", "is empty"),
            (" ", "is empty"),
            ("2(x)", "malformed entry `2(x)`"),
            ("(x3)", "malformed entry `(x3)`"),
            ("a", "malformed entry `a`"),
            ("2(x0)", "repeat count of 0"),
            ("2(x3", "malformed entry `2(x3`"),
            ("2,", "empty entry"),
            (",2", "empty entry"),
            ("2,,1", "empty entry"),
            ("2(3)", "malformed entry"),
            ("2(x3)4", "malformed entry"),
            ("2(x-1)", "malformed entry"),
            ("-2", "malformed entry"),
            ("+2", "malformed entry"),
            ("0", "0 tasks"),
            ("0(x2)", "0 tasks"),
            ("99999999999", "malformed entry"),
            ("1(x1000001)", "more than 1000000 nodes"),
            ("1(x4294967295)", "more than 1000000 nodes"),
            ("1(x600000),1(x600000)", "more than 1000000 nodes"),
        ];
        for (expr, needle) in cases {
            let err = expand_tasks_per_node("SLURM_TASKS_PER_NODE", expr)
                .expect_err(&format!("expr {expr:?} should fail"));
            assert_eq!(err.variable, "SLURM_TASKS_PER_NODE");
            assert_eq!(err.value, *expr);
            assert!(
                err.reason.contains(needle),
                "expr {expr:?}: reason {:?} lacks {needle:?}",
                err.reason
            );
        }
    }

    #[test]
    fn cpus_per_task_values() {
        let ok: &[(Option<&str>, u32)] =
            &[(None, 1), (Some("1"), 1), (Some("4"), 4), (Some(" 8 "), 8)];
        for (value, want) in ok {
            assert_eq!(cpus_per_task(*value), Ok(*want), "value {value:?}");
        }
        for bad in ["0", "-1", "abc", "", " ", "+2", "1.5", "99999999999"] {
            let err = cpus_per_task(Some(bad)).expect_err(bad);
            assert_eq!(err.variable, "SLURM_CPUS_PER_TASK");
            assert_eq!(err.value, bad);
        }
    }

    #[test]
    fn display_names_variable_value_and_fix() {
        let err = cpus_per_task(Some("0")).unwrap_err();
        assert_eq!(
            err.to_string(),
            "SLURM_CPUS_PER_TASK='0' is not a positive integer; Slurm sets it from \
             `-c N`/`--cpus-per-task=N` with N >= 1"
        );
    }

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |key: &str| map.get(key).cloned()
    }

    fn hosts(pairs: &[(&str, u32)]) -> Vec<(String, u32)> {
        pairs.iter().map(|(h, n)| (h.to_string(), *n)).collect()
    }

    #[test]
    fn allocation_valid() {
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            Option<(&'a str, &'a [(&'a str, u32)], u32)>,
        );
        let cases: &[Case] = &[
            // Outside Slurm.
            (&[], None),
            (&[("SLURM_JOB_NODELIST", "n[1-2]")], None),
            (&[("SLURM_JOB_ID", "")], None),
            (
                &[
                    ("SLURM_JOB_ID", "42"),
                    ("SLURM_JOB_NODELIST", "node[01-03],gpu5"),
                    ("SLURM_TASKS_PER_NODE", "2(x3),1"),
                ],
                Some((
                    "42",
                    &[("node01", 2), ("node02", 2), ("node03", 2), ("gpu5", 1)],
                    1,
                )),
            ),
            // SLURM_JOB_NODELIST wins over the older SLURM_NODELIST.
            (
                &[
                    ("SLURM_JOB_ID", "7"),
                    ("SLURM_JOB_NODELIST", "a[1-2]"),
                    ("SLURM_NODELIST", "b[1-3]"),
                    ("SLURM_TASKS_PER_NODE", "1(x2)"),
                    ("SLURM_CPUS_PER_TASK", "4"),
                ],
                Some(("7", &[("a1", 1), ("a2", 1)], 4)),
            ),
            // Fallback to SLURM_NODELIST.
            (
                &[
                    ("SLURM_JOB_ID", "8"),
                    ("SLURM_NODELIST", "b[1-3]"),
                    ("SLURM_TASKS_PER_NODE", "3,2,1"),
                ],
                Some(("8", &[("b1", 3), ("b2", 2), ("b3", 1)], 1)),
            ),
        ];
        for (vars, want) in cases {
            let lookup = env(vars);
            let want = want.map(|(job_id, h, cpus)| SlurmAllocation {
                job_id: job_id.to_string(),
                hosts: hosts(h),
                cpus_per_task: cpus,
            });
            assert_eq!(allocation_from_env(&lookup), Ok(want), "vars {vars:?}");
        }
    }

    #[test]
    fn allocation_errors() {
        // (environment, variable the error must name, text the message must contain)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a [&'a str]);
        let cases: &[Case] = &[
            (
                &[("SLURM_JOB_ID", "1"), ("SLURM_TASKS_PER_NODE", "1")],
                "SLURM_JOB_NODELIST",
                &["SLURM_NODELIST", "unset"],
            ),
            (
                &[("SLURM_JOB_ID", "1"), ("SLURM_JOB_NODELIST", "n[1-2]")],
                "SLURM_TASKS_PER_NODE",
                &["unset", "salloc -n N", "sbatch -n N"],
            ),
            (
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("SLURM_JOB_NODELIST", "n[1-3]"),
                    ("SLURM_TASKS_PER_NODE", "2(x2)"),
                ],
                "SLURM_TASKS_PER_NODE",
                &["2 task counts", "SLURM_JOB_NODELIST='n[1-3]'", "3 hosts"],
            ),
            (
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("SLURM_NODELIST", "n1"),
                    ("SLURM_TASKS_PER_NODE", "1,1"),
                ],
                "SLURM_TASKS_PER_NODE",
                &["2 task counts", "SLURM_NODELIST='n1'", "1 hosts"],
            ),
            (
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("SLURM_JOB_NODELIST", "n[3-1]"),
                    ("SLURM_TASKS_PER_NODE", "1"),
                ],
                "SLURM_JOB_NODELIST",
                &["descending"],
            ),
            (
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("SLURM_NODELIST", "n[1-"),
                    ("SLURM_TASKS_PER_NODE", "1"),
                ],
                "SLURM_NODELIST",
                &["never closed"],
            ),
            (
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("SLURM_JOB_NODELIST", "n1"),
                    ("SLURM_TASKS_PER_NODE", "1(x)"),
                ],
                "SLURM_TASKS_PER_NODE",
                &["malformed"],
            ),
            (
                &[
                    ("SLURM_JOB_ID", "1"),
                    ("SLURM_JOB_NODELIST", "n1"),
                    ("SLURM_TASKS_PER_NODE", "1"),
                    ("SLURM_CPUS_PER_TASK", "0"),
                ],
                "SLURM_CPUS_PER_TASK",
                &["positive integer"],
            ),
        ];
        for (vars, variable, needles) in cases {
            let lookup = env(vars);
            let err = allocation_from_env(&lookup).expect_err(&format!("vars {vars:?}"));
            assert_eq!(err.variable, *variable, "vars {vars:?}");
            let text = err.to_string();
            for needle in *needles {
                assert!(
                    text.contains(needle),
                    "vars {vars:?}: {text:?} lacks {needle:?}"
                );
            }
        }
    }

    fn srun_task(extra: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
        let mut v = vec![
            ("SLURM_JOB_ID", "12"),
            ("SLURM_STEP_ID", "0"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
            ("SLURM_STEP_NUM_TASKS", "2"),
            ("SLURMD_NODENAME", "n3"),
        ];
        v.extend_from_slice(extra);
        v
    }

    #[test]
    fn srun_without_pmi_is_recognised_only_for_multi_task_steps() {
        let found = srun_without_pmi(&env(&srun_task(&[("SLURM_MPI_TYPE", "none")]))).unwrap();
        assert_eq!(
            found,
            SrunWithoutPmi {
                step: "12.0".into(),
                task: 1,
                tasks: 2,
                plugin: None
            }
        );
        let pmix = srun_without_pmi(&env(&srun_task(&[("SLURM_MPI_TYPE", "pmix")]))).unwrap();
        assert_eq!(pmix.plugin.as_deref(), Some("pmix"));
        // The older step variable counts too; the step's task count wins over the job's.
        let old = env(&[
            ("SLURM_JOBID", "5"),
            ("SLURM_STEPID", "3"),
            ("SLURM_PROCID", "0"),
            ("SLURM_NTASKS", "1"),
            ("SLURM_STEP_NUM_TASKS", "4"),
        ]);
        let found = srun_without_pmi(&old).unwrap();
        assert_eq!((found.step.as_str(), found.tasks), ("5.3", 4));

        let genuine_singletons: &[&[(&str, &str)]] = &[
            // No Slurm at all.
            &[],
            // An sbatch script: SLURM_PROCID and SLURM_NTASKS=4, but no step.
            &[
                ("SLURM_JOB_ID", "4"),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "4"),
            ],
            // A salloc shell.
            &[("SLURM_JOB_ID", "3"), ("SLURM_NTASKS", "4")],
            // srun -n 1.
            &[
                ("SLURM_JOB_ID", "3"),
                ("SLURM_STEP_ID", "1"),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "1"),
                ("SLURM_STEP_NUM_TASKS", "1"),
            ],
            // Unparsable numbers: never stop a program on a guess.
            &[
                ("SLURM_STEP_ID", "1"),
                ("SLURM_PROCID", "x"),
                ("SLURM_NTASKS", "2"),
            ],
            &[
                ("SLURM_STEP_ID", "1"),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "-2"),
            ],
            &[
                ("SLURM_STEP_ID", ""),
                ("SLURM_PROCID", "0"),
                ("SLURM_NTASKS", "2"),
            ],
        ];
        for vars in genuine_singletons {
            assert_eq!(srun_without_pmi(&env(vars)), None, "vars {vars:?}");
        }
        // With a PMI server the task is fine, whatever Slurm says.
        for pmi in [("PMI_FD", "5"), ("PMI_PORT", "h:1")] {
            assert_eq!(srun_without_pmi(&env(&srun_task(&[pmi]))), None);
        }
    }

    struct Explained(SrunWithoutPmi);
    impl fmt::Display for Explained {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            self.0.explain(f, "./app -x")
        }
    }

    #[test]
    fn srun_without_pmi_explains_the_command_that_works() {
        let mut step = SrunWithoutPmi {
            step: "12.0".into(),
            task: 0,
            tasks: 4,
            plugin: None,
        };
        let text = Explained(step.clone()).to_string();
        for needle in [
            "task 0 of 4 of Slurm step 12.0",
            "without a PMI plugin",
            "srun --mpi=pmi2 -n 4 ./app -x",
            "MpiDefault=pmi2",
            "KESTREL_PMI=singleton",
        ] {
            assert!(text.contains(needle), "{text:?} lacks {needle:?}");
        }
        step.plugin = Some("pmix".into());
        step.task = 3;
        let text = Explained(step).to_string();
        assert!(
            text.contains("task 3 of 4")
                && text.contains("'pmix' MPI plugin")
                && text.contains("srun --mpi=pmi2 -n 4 ./app -x")
                && !text.contains('\n'),
            "{text:?}"
        );
    }

    #[test]
    fn direct_launch_node_needs_slurms_own_pmi2_server() {
        let direct = srun_task(&[("SLURM_MPI_TYPE", "pmi2"), ("PMI_JOBID", "12.0")]);
        assert_eq!(direct_launch_node(&env(&direct)).as_deref(), Some("n3"));
        let not_direct: &[&[(&str, &str)]] = &[
            // srun --mpi=none, then another launcher inside the step.
            &[("SLURM_MPI_TYPE", "none"), ("PMI_JOBID", "12.0")],
            // A PMI_JOBID of another launcher.
            &[("SLURM_MPI_TYPE", "pmi2"), ("PMI_JOBID", "kvs_77_0")],
            &[("SLURM_MPI_TYPE", "pmi2")],
        ];
        for extra in not_direct {
            let vars = srun_task(extra);
            assert_eq!(direct_launch_node(&env(&vars)), None, "vars {vars:?}");
        }
        let mut nameless = direct.clone();
        nameless.retain(|(k, _)| *k != "SLURMD_NODENAME");
        assert_eq!(direct_launch_node(&env(&nameless)), None);
    }
}
