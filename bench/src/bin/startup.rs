//! Startup cost of a job: Kestrel's `kestrel-run` against Open MPI's `mpirun` and MPICH's
//! `mpiexec`, each starting N ranks of a hello program that initializes, prints one line and
//! finalizes.
//!
//! What is measured: the wall time from spawning the launcher until the launcher exits, so it
//! includes the launcher's own start, starting the ranks, their init (PMI wire-up, modex),
//! finalize and the launcher's teardown. The programs are `target/release/examples/hello`
//! (Kestrel) and `bench/c/hello.c` built with `mpicc.openmpi` and `mpicc.mpich` into a
//! temporary directory; all three print `Hello from rank R of N on NODE`.
//!
//! How: each launcher first gets one checked run (not timed) that must succeed, then `--warmup`
//! untimed rounds, then `--runs` timed rounds. A round runs kestrel, openmpi, mpich in turn, so
//! machine noise hits all launchers alike. Every run, warm-up included, must exit 0 within 60 s
//! and print exactly one hello line per rank (each rank once, each saying `of N`); otherwise the
//! failure is reported with the run's stderr and the program exits with status 1. A run that
//! times out is killed together with every process it started. Open MPI gets
//! `--allow-run-as-root --oversubscribe` (the benchmark may run as root on a machine with fewer
//! cores than ranks). If its checked run complains that the shared-memory transport's
//! single-copy mechanism (CMA) is unavailable, which happens in containers that forbid
//! ptrace, it is rerun with `OMPI_MCA_btl_vader_single_copy_mechanism=none` and that setting
//! is kept and reported.
//!
//! Usage: `startup [--ranks N] [--runs R] [--warmup W] [--out FILE] [--only LAUNCHER]...`
//! with defaults 8 ranks, 20 runs, 2 warm-up rounds and all three launchers; `--only`
//! (`kestrel`, `openmpi` or `mpich`, repeatable) restricts the set. `bench/startup.sh`
//! installs the MPI packages if missing, builds, and runs this binary.
//!
//! Output (stdout, and also `--out FILE` if given), times in milliseconds, ratio = the
//! launcher's median over Kestrel's median (`-` when Kestrel is not measured):
//!
//! ```text
//! startup cost: 8 ranks of hello, 20 timed runs per launcher after 2 warm-up rounds, interleaved
//! launcher   median ms    min ms   mean ms  stdev ms  ratio
//! kestrel        12.34     11.02     12.80      1.05  baseline
//! openmpi       480.12    455.30    486.77     20.41  openmpi/kestrel = 38.9x
//! mpich         330.50    310.08    333.91     12.66  mpich/kestrel = 26.8x
//! machine: nproc 2, kernel 6.1.0-18-amd64 | kestrel-run 0.1.0 | mpirun.openmpi (OpenRTE) 4.1.4 | mpiexec.mpich HYDRA build details: Version: 4.0.2
//! ```
//!
//! followed, only when the CMA workaround was needed, by a line
//! `note: openmpi ran with OMPI_MCA_btl_vader_single_copy_mechanism=none (...)`. Progress goes
//! to stderr.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::fs::{self, File};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

/// A run that has not finished by then is stuck (a hello takes well under a second).
const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// The Open MPI parameter that turns off CMA single-copy in the vader (shared memory) BTL.
const OMPI_CMA_VAR: &str = "OMPI_MCA_btl_vader_single_copy_mechanism";

const USAGE: &str = "usage: startup [--ranks N] [--runs R] [--warmup W] [--out FILE] \
[--only kestrel|openmpi|mpich]...

Times `-n N` hello jobs started by kestrel-run, Open MPI's mpirun and MPICH's mpiexec.

options:
  --ranks N        ranks per job (default 8)
  --runs R         timed runs per launcher (default 20)
  --warmup W       untimed warm-up rounds before them (default 2)
  --out FILE       also write the report to FILE
  --only NAME      measure only this launcher (kestrel, openmpi, mpich); repeatable
  -h, --help       this text";

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Launcher {
    Kestrel,
    OpenMpi,
    Mpich,
}

impl Launcher {
    /// Round order: the order the launchers run in within each round and appear in the table.
    const ALL: [Launcher; 3] = [Launcher::Kestrel, Launcher::OpenMpi, Launcher::Mpich];

    fn name(self) -> &'static str {
        match self {
            Launcher::Kestrel => "kestrel",
            Launcher::OpenMpi => "openmpi",
            Launcher::Mpich => "mpich",
        }
    }

    /// The launcher binary, to label version strings that do not name it.
    fn binary(self) -> &'static str {
        match self {
            Launcher::Kestrel => "kestrel-run",
            Launcher::OpenMpi => "mpirun.openmpi",
            Launcher::Mpich => "mpiexec.mpich",
        }
    }

    fn parse(s: &str) -> Option<Launcher> {
        Launcher::ALL.into_iter().find(|l| l.name() == s)
    }
}

struct Options {
    ranks: u32,
    runs: usize,
    warmup: usize,
    out: Option<PathBuf>,
    only: BTreeSet<Launcher>,
}

fn parse_args(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let mut opts = Options {
        ranks: 8,
        runs: 20,
        warmup: 2,
        out: None,
        only: BTreeSet::new(),
    };
    while let Some(arg) = args.next() {
        // Accept both `--opt value` and `--opt=value`.
        let (name, inline) = match arg.split_once('=') {
            Some((n, v)) if n.starts_with("--") => (n.to_string(), Some(v.to_string())),
            _ => (arg.clone(), None),
        };
        if name == "-h" || name == "--help" {
            println!("{USAGE}");
            std::process::exit(0);
        }
        if !matches!(
            name.as_str(),
            "--ranks" | "--runs" | "--warmup" | "--out" | "--only"
        ) {
            return Err(format!("unknown argument `{arg}`\n{USAGE}"));
        }
        let value = match inline {
            Some(v) => v,
            None => args
                .next()
                .ok_or_else(|| format!("{name} needs a value\n{USAGE}"))?,
        };
        match name.as_str() {
            "--ranks" => opts.ranks = parse_count(&name, &value)?,
            "--runs" => opts.runs = parse_count(&name, &value)?,
            "--warmup" => {
                opts.warmup = value
                    .parse()
                    .map_err(|_| format!("--warmup: `{value}` is not a number"))?
            }
            "--out" => opts.out = Some(PathBuf::from(value)),
            _ => {
                let l = Launcher::parse(&value).ok_or_else(|| {
                    format!("--only: `{value}` is not one of kestrel, openmpi, mpich")
                })?;
                opts.only.insert(l);
            }
        }
    }
    if opts.only.is_empty() {
        opts.only = Launcher::ALL.into_iter().collect();
    }
    Ok(opts)
}

/// A count that must be at least 1.
fn parse_count<T: std::str::FromStr + PartialOrd + From<u8>>(
    name: &str,
    value: &str,
) -> Result<T, String> {
    match value.parse::<T>() {
        Ok(n) if n >= T::from(1) => Ok(n),
        _ => Err(format!("{name}: `{value}` is not a positive number")),
    }
}

/// Deletes the scratch directory (the C hellos and the runs' output) however we exit `run`.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> Result<TempDir, String> {
        let dir = std::env::temp_dir().join(format!("kestrel-startup-{}", std::process::id()));
        // A leftover from an earlier process with the same pid is stale: start clean.
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        Ok(TempDir(dir))
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// One launcher ready to run: the command line and environment of a job.
struct Job {
    launcher: Launcher,
    program: PathBuf,
    args: Vec<String>,
    env: Vec<(String, String)>,
}

/// How a run went wrong.
enum RunError {
    /// It could not be started or waited for at all.
    Spawn(String),
    /// It ran but failed: a description, and its stdout and stderr.
    Failed {
        what: String,
        stdout: String,
        stderr: String,
    },
}

struct RunOutput {
    elapsed: Duration,
    stderr: String,
}

fn main() {
    match parse_args(std::env::args().skip(1)).and_then(|opts| run(&opts)) {
        Ok(()) => {}
        Err(e) => {
            eprintln!("startup: {e}");
            std::process::exit(1);
        }
    }
}

fn run(opts: &Options) -> Result<(), String> {
    let scratch = TempDir::new()?;
    let mut jobs = Vec::new();
    for &launcher in &opts.only {
        jobs.push(prepare(launcher, opts.ranks, &scratch.0)?);
    }

    // The checked run: fails fast with a clear message before any timing, and decides whether
    // Open MPI needs the CMA workaround.
    let mut notes = Vec::new();
    for job in &mut jobs {
        eprintln!("startup: checking {}", job.launcher.name());
        let out = run_checked(job, opts.ranks, &scratch.0, "check run")?;
        if job.launcher == Launcher::OpenMpi && complains_about_cma(&out.stderr) {
            eprintln!("startup: Open MPI cannot use CMA here; retrying with {OMPI_CMA_VAR}=none");
            job.env.push((OMPI_CMA_VAR.to_string(), "none".to_string()));
            let again = run_checked(job, opts.ranks, &scratch.0, "check run")?;
            if complains_about_cma(&again.stderr) {
                return Err(format!(
                    "openmpi still reports CMA errors with {OMPI_CMA_VAR}=none:\n{}",
                    again.stderr.trim_end()
                ));
            }
            notes.push(format!(
                "note: openmpi ran with {OMPI_CMA_VAR}=none (CMA single-copy is unavailable \
                 on this machine)"
            ));
        }
    }

    for round in 0..opts.warmup {
        eprintln!("startup: warm-up round {}/{}", round + 1, opts.warmup);
        for job in &jobs {
            run_checked(
                job,
                opts.ranks,
                &scratch.0,
                &format!("warm-up {}", round + 1),
            )?;
        }
    }

    let mut samples: Vec<Vec<f64>> = vec![Vec::with_capacity(opts.runs); jobs.len()];
    for round in 0..opts.runs {
        eprintln!("startup: timed round {}/{}", round + 1, opts.runs);
        for (job, times) in jobs.iter().zip(&mut samples) {
            let out = run_checked(job, opts.ranks, &scratch.0, &format!("run {}", round + 1))?;
            times.push(out.elapsed.as_secs_f64() * 1e3);
        }
    }

    let report = format_report(opts, &jobs, &samples, &notes);
    print!("{report}");
    if let Some(path) = &opts.out {
        fs::write(path, &report).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(())
}

/// Finds the launcher and builds the hello it runs; a missing piece is an error that says how
/// to get it.
fn prepare(launcher: Launcher, ranks: u32, scratch: &Path) -> Result<Job, String> {
    let n = ranks.to_string();
    match launcher {
        Launcher::Kestrel => {
            // The benchmark is built in the same cargo invocation as the launcher and the
            // examples, so they sit next to this executable (target/release/).
            let exe = std::env::current_exe()
                .map_err(|e| format!("cannot locate this executable: {e}"))?;
            let dir = exe
                .parent()
                .ok_or_else(|| format!("{} has no parent directory", exe.display()))?;
            let run = dir.join("kestrel-run");
            let hello = dir.join("examples").join("hello");
            for f in [&run, &hello] {
                if !f.is_file() {
                    return Err(format!(
                        "{} not found: build it with `cargo build --release --workspace \
                         --examples --bins` (or run bench/startup.sh)",
                        f.display()
                    ));
                }
            }
            Ok(Job {
                launcher,
                program: run,
                args: vec!["-n".into(), n, path_arg(&hello)?],
                env: Vec::new(),
            })
        }
        Launcher::OpenMpi => {
            let install = "apt-get install openmpi-bin libopenmpi-dev";
            let mpirun = find_in_path("mpirun.openmpi", install)?;
            let mpicc = find_in_path("mpicc.openmpi", install)?;
            let hello = compile_hello(&mpicc, &scratch.join("hello-openmpi"))?;
            Ok(Job {
                launcher,
                program: mpirun,
                // We may be root, and 8 ranks on a 2-core machine oversubscribe it; Open MPI
                // refuses both unless told.
                args: vec![
                    "--allow-run-as-root".into(),
                    "--oversubscribe".into(),
                    "-n".into(),
                    n,
                    path_arg(&hello)?,
                ],
                env: Vec::new(),
            })
        }
        Launcher::Mpich => {
            let install = "apt-get install mpich libmpich-dev";
            let mpiexec = find_in_path("mpiexec.mpich", install)?;
            let mpicc = find_in_path("mpicc.mpich", install)?;
            let hello = compile_hello(&mpicc, &scratch.join("hello-mpich"))?;
            Ok(Job {
                launcher,
                program: mpiexec,
                args: vec!["-n".into(), n, path_arg(&hello)?],
                env: Vec::new(),
            })
        }
    }
}

fn path_arg(p: &Path) -> Result<String, String> {
    p.to_str()
        .map(str::to_string)
        .ok_or_else(|| format!("path {} is not UTF-8", p.display()))
}

/// The executable `name` on PATH, or an error naming the Debian packages that provide it.
fn find_in_path(name: &str, install: &str) -> Result<PathBuf, String> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
        .ok_or_else(|| format!("{name} not found on PATH: install it with `{install}`"))
}

fn compile_hello(mpicc: &Path, out: &Path) -> Result<PathBuf, String> {
    // CARGO_MANIFEST_DIR is the bench crate's directory at build time; the benchmark runs
    // from the tree it was built in.
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("c")
        .join("hello.c");
    eprintln!(
        "startup: compiling {} with {}",
        src.display(),
        mpicc.display()
    );
    let output = Command::new(mpicc)
        .arg("-O2")
        .arg("-o")
        .arg(out)
        .arg(&src)
        .output()
        .map_err(|e| format!("cannot run {}: {e}", mpicc.display()))?;
    if !output.status.success() {
        return Err(format!(
            "{} {} failed ({}):\n{}",
            mpicc.display(),
            src.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim_end()
        ));
    }
    Ok(out.to_path_buf())
}

/// Runs `job` once and checks it; a failure becomes the error message the benchmark exits
/// with.
fn run_checked(job: &Job, ranks: u32, scratch: &Path, label: &str) -> Result<RunOutput, String> {
    let name = job.launcher.name();
    let (out, stdout) = match run_once(job, scratch) {
        Ok(ok) => ok,
        Err(RunError::Spawn(e)) => return Err(format!("{name} {label}: {e}")),
        Err(RunError::Failed {
            what,
            stdout,
            stderr,
        }) => return Err(failure(name, label, job, &what, &stdout, &stderr)),
    };
    if let Err(what) = check_hellos(&stdout, ranks) {
        return Err(failure(name, label, job, &what, &stdout, &out.stderr));
    }
    Ok(out)
}

fn failure(name: &str, label: &str, job: &Job, what: &str, stdout: &str, stderr: &str) -> String {
    let mut msg = format!("{name} {label} failed: {what}\ncommand:");
    for (k, v) in &job.env {
        let _ = write!(msg, " {k}={v}");
    }
    let _ = write!(msg, " {}", job.program.display());
    for a in &job.args {
        let _ = write!(msg, " {a}");
    }
    for (name, text) in [("stderr", stderr), ("stdout", stdout)] {
        let text = text.trim_end();
        let text = if text.is_empty() { "(empty)" } else { text };
        let _ = write!(msg, "\n--- {name} ---\n{text}");
    }
    msg
}

/// Spawns the job and times it from spawn to exit. Output goes to files rather than pipes so
/// that nothing has to drain them while the clock runs, and so that a rank outliving a killed
/// launcher cannot block us on a pipe.
fn run_once(job: &Job, scratch: &Path) -> Result<(RunOutput, String), RunError> {
    let out_path = scratch.join(format!("{}.stdout", job.launcher.name()));
    let err_path = scratch.join(format!("{}.stderr", job.launcher.name()));
    let create = |p: &Path| {
        File::create(p).map_err(|e| RunError::Spawn(format!("cannot create {}: {e}", p.display())))
    };
    let stdout_file = create(&out_path)?;
    let stderr_file = create(&err_path)?;

    let mut cmd = Command::new(&job.program);
    cmd.args(&job.args)
        .envs(job.env.iter().map(|(k, v)| (k, v)))
        // Launchers forward stdin to rank 0; in their own process group a terminal stdin would
        // stop them with SIGTTIN.
        .stdin(Stdio::null())
        .stdout(stdout_file)
        .stderr(stderr_file)
        // Its own process group, so a timeout can kill the launcher and every rank at once.
        .process_group(0);

    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| RunError::Spawn(format!("cannot start {}: {e}", job.program.display())))?;
    let pid = child.id();
    // Wait in a thread so the main thread can time out, without polling that would blur the
    // measurement; the end time is taken right where wait returns.
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let status = child.wait();
        let _ = tx.send((Instant::now(), status));
    });

    let (end, status, timed_out) = match rx.recv_timeout(RUN_TIMEOUT) {
        Ok((end, status)) => (end, status, false),
        Err(_) => {
            kill_process_group(pid);
            // SIGKILL cannot be refused, so the wait returns promptly now.
            match rx.recv_timeout(Duration::from_secs(10)) {
                Ok((end, status)) => (end, status, true),
                Err(_) => {
                    return Err(RunError::Spawn(format!(
                        "timed out after {}s and pid {pid} did not die when killed",
                        RUN_TIMEOUT.as_secs()
                    )))
                }
            }
        }
    };
    let status: ExitStatus =
        status.map_err(|e| RunError::Spawn(format!("cannot wait for pid {pid}: {e}")))?;

    let read = |p: &Path| fs::read(p).map(|b| String::from_utf8_lossy(&b).into_owned());
    let stdout = read(&out_path)
        .map_err(|e| RunError::Spawn(format!("cannot read {}: {e}", out_path.display())))?;
    let stderr = read(&err_path)
        .map_err(|e| RunError::Spawn(format!("cannot read {}: {e}", err_path.display())))?;

    if timed_out {
        return Err(RunError::Failed {
            what: format!("timed out after {}s (killed)", RUN_TIMEOUT.as_secs()),
            stdout,
            stderr,
        });
    }
    if !status.success() {
        return Err(RunError::Failed {
            what: format!("exited with {status}"),
            stdout,
            stderr,
        });
    }
    Ok((
        RunOutput {
            elapsed: end - start,
            stderr,
        },
        stdout,
    ))
}

/// SIGKILLs the process group led by `pid`: the launcher and the ranks and daemons it started.
/// std cannot signal a group, and the shell's `kill` spares the crate a libc dependency for
/// this one rare path (dash's builtin takes `-9 -PGID`, not `--`).
fn kill_process_group(pid: u32) {
    let group = Command::new("sh")
        .args(["-c", "kill -9 \"-$1\"", "sh", &pid.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
    if !matches!(group, Ok(s) if s.success()) {
        eprintln!("startup: could not kill process group {pid}; ranks may be left running");
    }
}

/// Every rank `0..ranks` printed exactly one `Hello from rank R of N on NODE` with N = ranks.
fn check_hellos(stdout: &str, ranks: u32) -> Result<(), String> {
    let mut seen = vec![0u32; ranks as usize];
    let mut count = 0usize;
    for line in stdout.lines() {
        let Some(rest) = line.trim().strip_prefix("Hello from rank ") else {
            continue;
        };
        count += 1;
        let mut words = rest.split_whitespace();
        let (Some(r), Some("of"), Some(n)) = (words.next(), words.next(), words.next()) else {
            return Err(format!("malformed hello line `{line}`"));
        };
        match (r.parse::<u32>(), n.parse::<u32>()) {
            (Ok(r), Ok(n)) if n == ranks && r < ranks => seen[r as usize] += 1,
            _ => return Err(format!("hello line `{line}` does not fit a job of {ranks}")),
        }
    }
    let missing: Vec<String> = (0..ranks)
        .filter(|&r| seen[r as usize] == 0)
        .map(|r| r.to_string())
        .collect();
    if count != ranks as usize || !missing.is_empty() {
        return Err(format!(
            "{count} hello lines, expected {ranks} (one per rank); missing ranks: [{}]",
            missing.join(", ")
        ));
    }
    Ok(())
}

/// Open MPI's complaints when the vader BTL cannot use CMA (process_vm_readv) because ptrace
/// is restricted: a warning naming the parameter, or `Read -1, expected N, errno = 1` lines.
fn complains_about_cma(stderr: &str) -> bool {
    stderr.contains("single_copy_mechanism")
        || stderr.contains("CMA support")
        || (stderr.contains("Read -1, expected") && stderr.contains("errno ="))
}

struct Stats {
    median: f64,
    min: f64,
    mean: f64,
    stdev: f64,
}

fn stats(samples: &[f64]) -> Stats {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    };
    let mean = v.iter().sum::<f64>() / n as f64;
    // Sample standard deviation (n - 1): the runs are a sample of the launcher's behaviour.
    let stdev = if n > 1 {
        (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
    } else {
        0.0
    };
    Stats {
        median,
        min: v[0],
        mean,
        stdev,
    }
}

fn format_report(opts: &Options, jobs: &[Job], samples: &[Vec<f64>], notes: &[String]) -> String {
    let all: Vec<(Launcher, Stats)> = jobs
        .iter()
        .zip(samples)
        .map(|(j, s)| (j.launcher, stats(s)))
        .collect();
    let baseline = all
        .iter()
        .find(|(l, _)| *l == Launcher::Kestrel)
        .map(|(_, s)| s.median);

    let mut r = String::new();
    let _ = writeln!(
        r,
        "startup cost: {} ranks of hello, {} timed runs per launcher after {} warm-up \
         round{}, interleaved",
        opts.ranks,
        opts.runs,
        opts.warmup,
        if opts.warmup == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        r,
        "{:<9} {:>10} {:>9} {:>9} {:>9}  ratio",
        "launcher", "median ms", "min ms", "mean ms", "stdev ms"
    );
    for (l, s) in &all {
        let ratio = match baseline {
            _ if *l == Launcher::Kestrel => "baseline".to_string(),
            Some(b) if b > 0.0 => format!("{}/kestrel = {:.1}x", l.name(), s.median / b),
            _ => "-".to_string(),
        };
        let _ = writeln!(
            r,
            "{:<9} {:>10.2} {:>9.2} {:>9.2} {:>9.2}  {ratio}",
            l.name(),
            s.median,
            s.min,
            s.mean,
            s.stdev
        );
    }
    let _ = writeln!(r, "{}", machine_line(jobs));
    for n in notes {
        let _ = writeln!(r, "{n}");
    }
    r
}

/// `machine: nproc N, kernel K | <version of each measured launcher>`.
fn machine_line(jobs: &[Job]) -> String {
    let nproc = first_lines("nproc", &[], 1).unwrap_or_else(|| {
        thread::available_parallelism()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into())
    });
    let kernel = first_lines("uname", &["-r"], 1).unwrap_or_else(|| "?".into());
    let mut line = format!("machine: nproc {nproc}, kernel {kernel}");
    for job in jobs {
        let prog = job.program.to_string_lossy();
        let version = match job.launcher {
            Launcher::Kestrel | Launcher::OpenMpi => first_lines(&prog, &["--version"], 1),
            // Hydra starts with a "HYDRA build details:" header; the version is the next line.
            Launcher::Mpich => first_lines(&prog, &["--version"], 2)
                .map(|v| format!("{} {v}", job.launcher.binary())),
        };
        let _ = write!(
            line,
            " | {}",
            version.unwrap_or_else(|| format!("{} version unknown", job.program.display()))
        );
    }
    line
}

/// The first `n` non-empty lines of a command's stdout, joined with runs of whitespace
/// squeezed to one space; None if it cannot run or prints nothing.
fn first_lines(program: &str, args: &[&str], n: usize) -> Option<String> {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let joined = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(n)
        .flat_map(str::split_whitespace)
        .collect::<Vec<_>>()
        .join(" ");
    (!joined.is_empty()).then_some(joined)
}
