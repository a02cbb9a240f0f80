//! `kestrel-run` command-line parsing (mpirun-style options; pure, table-tested).

use std::time::Duration;

use kestrel_transport::params::ParamError;

/// `--bind-to`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bind {
    /// Bind to cores when a machine has a core for every rank on it (and one host), else not.
    Auto,
    /// No binding.
    None,
    /// Each rank on its own core(s).
    Core,
}

/// Where the hosts come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostSource {
    /// Nothing given: the allocation if inside Slurm, else this host.
    Default,
    /// `--host LIST`.
    List(String),
    /// `--hostfile FILE`.
    File(String),
}

/// A parsed `kestrel-run` command line for launching a job.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LaunchOptions {
    /// `-n`: ranks to start (`None` = one per slot).
    pub np: Option<u32>,
    /// Hosts.
    pub hosts: HostSource,
    /// `--oversubscribe`.
    pub oversubscribe: bool,
    /// `--mca NAME VALUE`, each name once.
    pub mca: Vec<(String, String)>,
    /// `-x VAR[=VALUE]`, resolved to values.
    pub env: Vec<(String, String)>,
    /// `--bind-to`.
    pub bind: Bind,
    /// `--cpus-per-rank N`: cores each bound rank gets (for its threads).
    pub cpus_per_rank: Option<u32>,
    /// `--report-bindings`: each rank's cores on standard error as it starts.
    pub report_bindings: bool,
    /// `--tag-output`.
    pub tag_output: bool,
    /// `--timeout SECONDS`.
    pub timeout: Option<Duration>,
    /// `--timeout-stacks`: hang reports (timeout, SIGUSR1) add each rank's stacks.
    pub timeout_stacks: bool,
    /// `--launch-agent CMD`.
    pub launch_agent: Option<String>,
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Further `: -n N program args` contexts (MPMD); `np` is then required and counts the
    /// first context's ranks only.
    pub more_apps: Vec<AppContext>,
    /// `--wdir DIR`: the ranks' working directory.
    pub wdir: Option<String>,
    /// `--job-id ID` (internal: the launcher that serves a spawn names the child job).
    pub job_id: Option<String>,
}

/// One `: -n N program args` context of an MPMD command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AppContext {
    /// Its ranks.
    pub np: u32,
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

/// A parsed daemon-mode command line (internal: started by the head through the launch agent).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonOptions {
    /// `--parent ADDR[,ADDR...]:PORT`-style list of `ip:port` candidates.
    pub parents: Vec<String>,
    /// `--host-index N`.
    pub host_index: u32,
    /// `--verbose FILTER`.
    pub verbose: String,
}

/// Whether `v` may be a job id: 1 to 64 letters, digits, '-' or '_' (it names files).
fn valid_job_id(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 64
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// What the launcher's guard removes once the launcher is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardOptions {
    /// The job whose files go.
    pub job_id: String,
    /// Shared-memory directories besides the default ones.
    pub dirs: Vec<std::path::PathBuf>,
}

/// What the command line asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invocation {
    /// Launch a job (boxed: it is most of the enum's size).
    Launch(Box<LaunchOptions>),
    /// Serve one host for a head.
    Daemon(DaemonOptions),
    /// `--cleanup-after-exit JOB [--cleanup-dir DIR]...`: the launcher's guard (see
    /// [`super::guard`]).
    Guard(GuardOptions),
    /// `--cleanup`: remove what dead jobs of this user left (see [`crate::stale`]).
    Cleanup,
    /// `--help`.
    Help,
    /// `--version`.
    Version,
}

/// The usage text.
pub const USAGE: &str = "\
usage: kestrel-run [options] [--] program [args...] [: -n N program [args...]]...

Starts `program` as the ranks of one job and serves them PMI-1 and PMI-2. Several
programs separated by ':' form one job (MPMD); each needs its own -n.

options:
  -n, -np N               number of ranks (default: one per slot)
  -H, --host LIST         hosts and slots: h1:2,h2:2 (a host without :N has 1 slot)
  --hostfile FILE         one host per line: name [slots=N]
  --oversubscribe         allow more ranks than slots (without --host, this host has one
                          slot per core); the process, descriptor and /dev/shm limits of
                          each host are still checked before any rank starts
  --mca NAME VALUE        set Kestrel parameter NAME for every rank (see kestrel-info);
                          names and values are checked before any rank starts
  -x VAR[=VALUE]          export VAR (with its value here, or VALUE) to every rank
  --bind-to core|none     bind each rank to its own core(s); default: core when every rank
                          of a machine has a core of its own, none when oversubscribed
  --cpus-per-rank N       cores each bound rank gets, for its threads (default: Slurm's
                          --cpus-per-task, else OMP_NUM_THREADS as the ranks will see it,
                          else 1); where N per rank do not fit, as many as fit
  --report-bindings       print each rank's cores on standard error as it starts
  --tag-output            prefix each output line with [1,rank]<stdout>: or <stderr>:
  --timeout SECONDS       after SECONDS, report each rank's state and the MPI wait it is
                          stalled in (as SIGUSR1 to kestrel-run does at any time), then
                          stop the job
  --timeout-stacks        add each rank's stacks to those reports (gdb or eu-stack)
  --launch-agent CMD      how to reach another host, run as `CMD HOST COMMAND...`
                          (default: ssh; 'ip netns exec' reaches network namespaces)
  --wdir DIR              run the ranks in DIR
  --cleanup               remove what dead jobs of this user left (shared-memory segments
                          no process maps, session directories whose launcher is gone),
                          say what was removed, and exit (every launch does this too)
  -h, --help              this text
  --version               Kestrel's version

Inside a Slurm allocation, hosts and slots come from SLURM_NODELIST and
SLURM_TASKS_PER_NODE and remote hosts are reached with srun.";

/// Why a command line was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// A usage mistake, explained.
    Usage(String),
    /// Conflicting `--mca` values.
    Param(ParamError),
}

impl std::fmt::Display for ArgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ArgError::Usage(m) => write!(f, "{m} (kestrel-run --help shows the options)"),
            ArgError::Param(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ArgError {}

fn usage(msg: impl Into<String>) -> ArgError {
    ArgError::Usage(msg.into())
}

/// Parses `args` (without the program name). `lookup` reads the launcher's environment for
/// `-x VAR`.
pub fn parse(
    args: &[String],
    lookup: &dyn Fn(&str) -> Option<String>,
) -> Result<Invocation, ArgError> {
    let mut np = None;
    let mut hosts = HostSource::Default;
    let mut oversubscribe = false;
    let mut mca: Vec<(String, String)> = Vec::new();
    let mut env: Vec<(String, String)> = Vec::new();
    let mut bind = Bind::Auto;
    let mut cpus_per_rank = None;
    let mut report_bindings = false;
    let mut tag_output = false;
    let mut timeout = None;
    let mut timeout_stacks = false;
    let mut launch_agent = None;
    let mut wdir = None;
    let mut job_id = None;
    let mut daemon = false;
    let mut guard_job: Option<String> = None;
    let mut guard_dirs: Vec<std::path::PathBuf> = Vec::new();
    let mut parents = Vec::new();
    let mut host_index = None;
    let mut verbose = String::new();

    let mut i = 0;
    let mut program_at = None;
    while i < args.len() {
        let arg = args[i].as_str();
        if arg == "--" {
            program_at = Some(i + 1);
            break;
        }
        if !arg.starts_with('-') || arg == "-" {
            program_at = Some(i);
            break;
        }
        // `--opt=value` is the same as `--opt value`.
        let (flag, inline) = match arg.split_once('=') {
            Some((f, v)) if f.starts_with("--") => (f, Some(v.to_string())),
            _ => (arg, None),
        };
        let mut value = |what: &str| -> Result<String, ArgError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| usage(format!("{flag} needs {what}")))
        };
        match flag {
            "-n" | "-np" | "--np" | "-c" => {
                let v = value("a number of ranks")?;
                let n: u32 = v.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    usage(format!("{flag} '{v}' is not a positive number of ranks"))
                })?;
                np = Some(n);
            }
            "-H" | "--host" | "-host" => {
                hosts = HostSource::List(value("a host list like h1:2,h2:2")?)
            }
            "--hostfile" | "-hostfile" | "--machinefile" | "-machinefile" => {
                hosts = HostSource::File(value("a file name")?)
            }
            "--oversubscribe" => oversubscribe = true,
            "--mca" | "-mca" => {
                let name = value("a parameter name and a value")?;
                i += 1;
                let val = args
                    .get(i)
                    .cloned()
                    .ok_or_else(|| usage(format!("--mca {name} needs a value")))?;
                let name = name.to_ascii_lowercase();
                match mca.iter().find(|(n, _)| *n == name) {
                    Some((_, first)) if *first != val => {
                        return Err(ArgError::Param(ParamError::Conflicting {
                            name,
                            first: first.clone(),
                            second: val,
                        }))
                    }
                    Some(_) => {}
                    None => mca.push((name, val)),
                }
            }
            "-x" => {
                let spec = value("VAR or VAR=value")?;
                let (name, val) = match spec.split_once('=') {
                    Some((n, v)) => (n.to_string(), v.to_string()),
                    None => {
                        let v = lookup(&spec).ok_or_else(|| {
                            usage(format!(
                                "-x {spec}: {spec} is not set in kestrel-run's environment; give \
                                 -x {spec}=value"
                            ))
                        })?;
                        (spec.clone(), v)
                    }
                };
                if name.is_empty() || name.contains(char::is_whitespace) {
                    return Err(usage(format!("-x '{spec}' does not name a variable")));
                }
                env.retain(|(n, _)| *n != name);
                env.push((name, val));
            }
            "--bind-to" | "-bind-to" => {
                bind = match value("core or none")?.as_str() {
                    "core" | "cores" => Bind::Core,
                    "none" => Bind::None,
                    other => return Err(usage(format!("--bind-to '{other}': use core or none"))),
                }
            }
            "--cpus-per-rank" | "--cpus-per-proc" | "-cpus-per-rank" => {
                let v = value("a number of cores")?;
                match v.parse::<u32>() {
                    Ok(n) if (1..=4096).contains(&n) => cpus_per_rank = Some(n),
                    _ => {
                        return Err(usage(format!(
                            "--cpus-per-rank '{v}': give the cores per rank, 1 to 4096"
                        )))
                    }
                }
            }
            "--report-bindings" | "-report-bindings" => report_bindings = true,
            "--tag-output" | "-tag-output" => tag_output = true,
            "--timeout-stacks" => timeout_stacks = true,
            "--timeout" => {
                let v = value("a number of seconds")?;
                let secs: f64 = v
                    .parse()
                    .ok()
                    .filter(|s: &f64| s.is_finite() && *s > 0.0)
                    .ok_or_else(|| {
                        usage(format!(
                            "--timeout '{v}' is not a positive number of seconds"
                        ))
                    })?;
                timeout = Some(Duration::from_secs_f64(secs));
            }
            "--launch-agent" | "-launch-agent" => {
                let v = value("a command")?;
                if v.split_whitespace().next().is_none() {
                    return Err(usage("--launch-agent needs a command"));
                }
                launch_agent = Some(v);
            }
            "--wdir" | "-wdir" | "--wd" | "-wd" => {
                let v = value("a directory")?;
                if v.is_empty() {
                    return Err(usage("--wdir needs a directory"));
                }
                wdir = Some(v);
            }
            "--job-id" => {
                let v = value("a job id")?;
                if !valid_job_id(&v) {
                    return Err(usage(format!(
                        "--job-id '{v}' must be 1 to 64 letters, digits, '-' or '_'"
                    )));
                }
                job_id = Some(v);
            }
            "--daemon" => daemon = true,
            "--cleanup-after-exit" => guard_job = Some(value("a job id")?),
            "--cleanup" => return Ok(Invocation::Cleanup),
            "--cleanup-dir" => guard_dirs.push(value("a directory")?.into()),
            "--parent" => parents = value("addresses")?.split(',').map(String::from).collect(),
            "--host-index" => {
                host_index = Some(
                    value("an index")?
                        .parse()
                        .map_err(|_| usage("--host-index needs a number"))?,
                )
            }
            "--key" => {
                return Err(usage(
                    "--key is not accepted: kestrel-run gives its daemons the job's secret on \
                     standard input, never on a command line (is this daemon from another \
                     Kestrel version?)",
                ))
            }
            "--verbose" => verbose = value("a filter")?,
            "-h" | "--help" => return Ok(Invocation::Help),
            "-V" | "--version" => return Ok(Invocation::Version),
            other => return Err(usage(format!("unknown option '{other}'"))),
        }
        i += 1;
    }

    if let Some(job_id) = guard_job {
        if !valid_job_id(&job_id) {
            return Err(usage(format!(
                "--cleanup-after-exit '{job_id}' is not a job id"
            )));
        }
        return Ok(Invocation::Guard(GuardOptions {
            job_id,
            dirs: guard_dirs,
        }));
    }
    if daemon {
        return match (parents.is_empty(), host_index) {
            (false, Some(host_index)) => Ok(Invocation::Daemon(DaemonOptions {
                parents,
                host_index,
                verbose,
            })),
            _ => Err(usage("--daemon needs --parent and --host-index, and the job's secret on standard input (it is started by kestrel-run itself)")),
        };
    }
    let Some(at) = program_at.filter(|&at| at < args.len()) else {
        return Err(usage(
            "no program to run; usage: kestrel-run -n N program [args...]",
        ));
    };
    // MPMD: `prog args : -n N prog2 args2 : ...`.
    let mut contexts = args[at..].split(|a| a == ":");
    let first = contexts.next().unwrap_or(&[]);
    let mut more_apps = Vec::new();
    for ctx in contexts {
        let (n, rest) = match ctx {
            [flag, n, rest @ ..] if matches!(flag.as_str(), "-n" | "-np" | "--np" | "-c") => {
                (n, rest)
            }
            _ => {
                return Err(usage(
                    "each ':' context needs '-n N program [args...]' (MPMD command line)",
                ))
            }
        };
        let np: u32 = n
            .parse()
            .ok()
            .filter(|&x| x > 0)
            .ok_or_else(|| usage(format!("-n '{n}' is not a positive number of ranks")))?;
        let Some((program, args)) = rest.split_first() else {
            return Err(usage(format!(
                "the ':' context with -n {np} names no program"
            )));
        };
        more_apps.push(AppContext {
            np,
            program: program.clone(),
            args: args.to_vec(),
        });
    }
    if first.is_empty() {
        return Err(usage("no program before the first ':'"));
    }
    if !more_apps.is_empty() && np.is_none() {
        return Err(usage(
            "an MPMD command line (with ':') needs -n for its first program too",
        ));
    }
    Ok(Invocation::Launch(Box::new(LaunchOptions {
        np,
        hosts,
        oversubscribe,
        mca,
        env,
        bind,
        cpus_per_rank,
        report_bindings,
        tag_output,
        timeout,
        timeout_stacks,
        launch_agent,
        program: first[0].clone(),
        args: first[1..].to_vec(),
        more_apps,
        wdir,
        job_id,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn launch(s: &str) -> LaunchOptions {
        match parse(&argv(s), &|v| (v == "HOME").then(|| "/root".to_string())).unwrap() {
            Invocation::Launch(l) => *l,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn mpirun_style_options() {
        let l = launch(
            "-n 4 --host h1:2,h2:2 --oversubscribe --mca btl shm -x HOME -x A=b --bind-to core \
             --tag-output --timeout 2.5 --launch-agent=ip -- prog -n 3",
        );
        assert_eq!(l.np, Some(4));
        assert_eq!(l.hosts, HostSource::List("h1:2,h2:2".into()));
        assert!(l.oversubscribe && l.tag_output);
        assert_eq!(l.mca, vec![("btl".into(), "shm".into())]);
        assert_eq!(
            l.env,
            vec![("HOME".into(), "/root".into()), ("A".into(), "b".into())]
        );
        assert_eq!(l.bind, Bind::Core);
        assert_eq!(l.timeout, Some(Duration::from_millis(2500)));
        assert_eq!(l.launch_agent.as_deref(), Some("ip"));
        assert_eq!((l.program.as_str(), l.args.clone()), ("prog", argv("-n 3")));
        let l = launch("-np 2 ./a.out x");
        assert_eq!(
            (l.np, l.program.as_str(), l.args.len()),
            (Some(2), "./a.out", 1)
        );
    }

    #[test]
    fn conflicting_mca_names_both_values() {
        let e = parse(&argv("-n 2 --mca btl shm --mca btl usnic true"), &|_| None).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("'shm'") && msg.contains("'usnic'") && msg.contains("btl"),
            "{msg}"
        );
        // The same value twice is harmless.
        assert_eq!(launch("--mca btl shm --mca btl shm true").mca.len(), 1);
    }

    #[test]
    fn usage_errors_explain() {
        for (line, needle) in [
            ("-n 0 true", "positive"),
            ("-n x true", "positive"),
            ("-n 2", "no program"),
            ("-x NOPE true", "NOPE is not set"),
            ("--bind-to socket true", "core or none"),
            ("--timeout -1 true", "seconds"),
            ("--frobnicate true", "unknown option '--frobnicate'"),
            ("--mca btl", "needs a value"),
            ("--daemon --host-index 1", "--parent"),
            (
                "--daemon --parent 1.2.3.4:5 --host-index 1 --key k",
                "standard input",
            ),
            ("--cleanup-after-exit ../etc", "is not a job id"),
        ] {
            let e = parse(&argv(line), &|_| None).unwrap_err().to_string();
            assert!(e.contains(needle), "{line}: {e}");
        }
    }

    #[test]
    fn mpmd_wdir_and_job_id() {
        let l = launch("-n 2 --wdir /tmp --job-id ab-1 a x : -n 3 b y z : -np 1 c");
        assert_eq!(
            (l.np, l.program.as_str(), l.args.clone()),
            (Some(2), "a", argv("x"))
        );
        assert_eq!(
            l.more_apps,
            vec![
                AppContext {
                    np: 3,
                    program: "b".into(),
                    args: argv("y z")
                },
                AppContext {
                    np: 1,
                    program: "c".into(),
                    args: vec![]
                }
            ]
        );
        assert_eq!(l.wdir.as_deref(), Some("/tmp"));
        assert_eq!(l.job_id.as_deref(), Some("ab-1"));
        for (line, needle) in [
            ("a : -n 2 b", "needs -n for its first program"),
            ("-n 1 a : b", "needs '-n N program"),
            ("-n 1 a : -n 0 b", "positive"),
            ("-n 1 a : -n 2", "names no program"),
            ("--job-id a/b x", "letters"),
        ] {
            let e = parse(&argv(line), &|_| None).unwrap_err().to_string();
            assert!(e.contains(needle), "{line}: {e}");
        }
    }

    #[test]
    fn daemon_mode() {
        let inv = parse(
            &argv("--daemon --parent 10.0.0.1:5,127.0.0.1:5 --host-index 2"),
            &|_| None,
        )
        .unwrap();
        assert_eq!(
            inv,
            Invocation::Daemon(DaemonOptions {
                parents: vec!["10.0.0.1:5".into(), "127.0.0.1:5".into()],
                host_index: 2,
                verbose: String::new(),
            })
        );
    }
}
