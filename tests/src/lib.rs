//! Helpers for Kestrel's multi-process integration tests.
//!
//! Tests run the release binaries (`cargo build --release --workspace --examples --bins` first;
//! `ci/test.sh` does). Every process a test starts runs in its own process group under a
//! deadline and is killed with its whole group on expiry or when the guard drops, so a failing
//! test leaves nothing behind.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::io::Read;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub mod dpm;
pub mod netns;
pub mod slurm;
pub mod stranger;

/// `target/<profile>` of the running test binary.
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/release/deps/<test> → target/release
    exe.parent()
        .and_then(Path::parent)
        .expect("test binary lives in target/<profile>/deps")
        .to_path_buf()
}

/// The repository's root directory.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the repository")
        .to_path_buf()
}

/// Kestrel's `mpicc` (`abi/bin/mpicc`), pointed at the running tests' target directory.
pub fn mpicc() -> Command {
    let mut c = Command::new(repo().join("abi/bin/mpicc"));
    c.env("KESTREL_TARGET_DIR", target_dir());
    c
}

/// The directory holding Kestrel's `libmpich.so.12` (its links made by `mpicc --libdir`):
/// an unmodified MPICH binary runs on Kestrel with it first on `LD_LIBRARY_PATH`.
pub fn libdir() -> PathBuf {
    let out = mpicc().arg("--libdir").output().expect("run abi/bin/mpicc");
    assert!(
        out.status.success(),
        "mpicc --libdir failed (is target/release/libmpich.so built? cargo build --release -p kestrel-abi): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A fresh scratch directory for one test (named by [`marker`]), removed when the returned
/// guard drops: when the test ends, passed or failed (a panic unwinds through it).
pub fn scratch(tag: &str) -> Scratch {
    let d = std::env::temp_dir().join(marker(tag));
    std::fs::create_dir_all(&d).unwrap();
    Scratch(d)
}

/// A scratch directory that [`scratch`] made; removed on drop.
pub struct Scratch(PathBuf);

impl std::ops::Deref for Scratch {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl AsRef<Path> for Scratch {
    fn as_ref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The programs a Debian package installed in `dir` whose file names `keep` accepts, sorted;
/// a missing directory fails naming `package` to install.
pub fn installed_programs(dir: &Path, package: &str, keep: impl Fn(&str) -> bool) -> Vec<PathBuf> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; apt-get install {package} (ci/setup.sh installs it)",
            dir.display()
        )
    });
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_file())
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(&keep))
        .collect();
    out.sort();
    out
}

/// Path of a workspace binary, with a clear failure when it was not built.
pub fn bin(name: &str) -> PathBuf {
    let p = target_dir().join(name);
    assert!(
        p.exists(),
        "{} is missing: build with `cargo build --release --workspace --examples --bins` (ci/test.sh does)",
        p.display()
    );
    p
}

/// Path of an example of the `kestrel` crate.
pub fn example(name: &str) -> PathBuf {
    bin(&format!("examples/{name}"))
}

/// Path of a system tool, failing with the package that provides it.
pub fn tool(name: &str, package: &str) -> PathBuf {
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("{name} is not installed: apt-get install {package} (ci/setup.sh installs it)");
}

/// What a finished command did.
#[derive(Debug)]
pub struct Outcome {
    /// Exit code, if it exited.
    pub code: Option<i32>,
    /// Signal, if it was killed.
    pub signal: Option<i32>,
    /// Standard output.
    pub stdout: String,
    /// Standard error.
    pub stderr: String,
    /// Wall time.
    pub elapsed: Duration,
    /// Whether the deadline expired and the test killed it.
    pub timed_out: bool,
}

impl Outcome {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.code == Some(0)
    }

    /// A description for assertion messages.
    pub fn show(&self) -> String {
        format!(
            "code {:?} signal {:?} timed_out {} after {:?}\n--- stdout\n{}--- stderr\n{}",
            self.code, self.signal, self.timed_out, self.elapsed, self.stdout, self.stderr
        )
    }
}

/// Runs `cmd` in a new process group with a deadline; on expiry the whole group is killed.
pub fn run(mut cmd: Command, deadline: Duration) -> Outcome {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
    let pgid = child.id() as i32;
    let mut out = child.stdout.take().expect("piped stdout");
    let mut err = child.stderr.take().expect("piped stderr");
    let out_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let err_t = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let mut timed_out = false;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        if start.elapsed() > deadline {
            timed_out = true;
            kill_group(pgid);
            break child.wait().expect("wait after kill");
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    let elapsed = start.elapsed();
    // Anything the command left in its group goes too, so pipes close and nothing lingers.
    kill_group(pgid);
    Outcome {
        code: status.code(),
        signal: status.signal(),
        stdout: out_t.join().unwrap_or_default(),
        stderr: err_t.join().unwrap_or_default(),
        elapsed,
        timed_out,
    }
}

fn kill_group(pgid: i32) {
    let _ = nix::sys::signal::killpg(
        nix::unistd::Pid::from_raw(pgid),
        nix::sys::signal::Signal::SIGKILL,
    );
}

/// A `Command` for `kestrel-run` with `args`.
pub fn kestrel_run(args: &[&str]) -> Command {
    let mut c = Command::new(bin("kestrel-run"));
    c.args(args);
    c
}

/// Names of job files (`kestrel.*`) in /dev/shm and the session parent.
pub fn job_files() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let parent = std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| "/tmp".into());
    for dir in [PathBuf::from("/dev/shm"), parent] {
        if let Ok(rd) = std::fs::read_dir(&dir) {
            for e in rd.flatten() {
                let name = e.file_name().to_string_lossy().into_owned();
                if name.starts_with("kestrel.") {
                    out.insert(format!("{}/{name}", dir.display()));
                }
            }
        }
    }
    out
}

/// Pids of processes whose command line contains `needle` (other than this test process).
pub fn processes_matching(needle: &str) -> Vec<u32> {
    let me = std::process::id();
    let mut out = Vec::new();
    if let Ok(rd) = std::fs::read_dir("/proc") {
        for e in rd.flatten() {
            let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            if pid == me {
                continue;
            }
            if let Ok(cmdline) = std::fs::read(e.path().join("cmdline")) {
                let text = String::from_utf8_lossy(&cmdline).replace('\0', " ");
                if text.contains(needle) {
                    out.push(pid);
                }
            }
        }
    }
    out
}

/// SIGKILLs every process whose command line contains `needle` (a failed test's leftovers).
pub fn kill_matching(needle: &str) {
    for pid in processes_matching(needle) {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Lines of `text` that start with `prefix`, sorted.
pub fn lines_starting(text: &str, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with(prefix))
        .map(String::from)
        .collect();
    v.sort();
    v
}

/// A unique marker for command lines, so a test can find its own processes.
pub fn marker(tag: &str) -> String {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("kt-{tag}-{}-{n}", std::process::id())
}

/// Starts `cmd` (with its stdout piped) as a `fail spin` job and waits until its rank 0 says
/// start-up is over (`fail: spinning on N ranks`). On a deadline or an early end it kills the
/// job's processes (those mentioning `mark`) and panics with what it saw.
pub fn start_spinning(mut cmd: Command, mark: &str, deadline: Duration) -> std::process::Child {
    let mut child = cmd
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the spinning job");
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("fail: spinning on ") && tx.send(()).is_err() {
                break;
            }
        }
    });
    if rx.recv_timeout(deadline).is_err() {
        let _ = child.kill();
        let _ = child.wait();
        kill_matching(mark);
        panic!("the spinning job ({mark}) did not report its start within {deadline:?}");
    }
    child
}
