//! `kestrel-run --cleanup-after-exit JOB`: the launcher's guard, which removes the job's files
//! on this host when the launcher dies without doing it (SIGKILL, a crash, an OOM kill).
//!
//! The launcher starts it first thing, in its own process group, with a pipe on its standard
//! input. Ranks die with the launcher (`PR_SET_PDEATHSIG`), but their shared-memory segments
//! and the session directory would stay. The guard waits for the pipe to end: a launcher that
//! finished normally writes [`DONE`] first (it removed the files itself; the guard sweeps once
//! more and leaves at once); a launcher that died just closes it (the kernel does), and the
//! guard sweeps now and again after [`SETTLE`], for segments a dying rank was creating. It
//! owns nothing else and never signals a process.

use std::io::Read;
use std::path::PathBuf;
use std::time::Duration;

use super::args::GuardOptions;
use crate::session;

/// What a launcher that cleaned up itself writes before closing the pipe.
pub const DONE: &[u8] = b"done\n";
/// How long after the launcher's death the guard sweeps a second time.
pub const SETTLE: Duration = Duration::from_millis(300);

/// Waits for the launcher, then removes the job's files. Returns the exit code.
pub fn run(opts: GuardOptions) -> i32 {
    let mut said = Vec::new();
    let mut buf = [0u8; 64];
    let mut stdin = std::io::stdin().lock();
    loop {
        match stdin.read(&mut buf) {
            Ok(0) => break,
            Ok(n) if said.len() < 64 => said.extend_from_slice(&buf[..n]),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    let removed = sweep(&opts);
    if said != DONE {
        std::thread::sleep(SETTLE);
        let later = sweep(&opts);
        if removed + later > 0 {
            eprintln!(
                "kestrel-run: the launcher of job {} ended without cleaning up; removed {} of its files",
                opts.job_id,
                removed + later
            );
        }
    }
    0
}

/// Removes the job's segments and every session directory of it on this host.
fn sweep(opts: &GuardOptions) -> usize {
    let mut removed = session::remove_job_files(&opts.job_id, None, &opts.dirs);
    let prefix = format!("kestrel.{}.h", opts.job_id);
    if let Ok(entries) = std::fs::read_dir(session::session_parent()) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let host = name.strip_prefix(&prefix);
            if host.is_some_and(|h| !h.is_empty() && h.bytes().all(|b| b.is_ascii_digit()))
                && std::fs::remove_dir_all(e.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

/// The launcher's handle on its guard: dropping it without [`Guard::finish`] (a panic) is
/// the same as dying.
pub struct Guard {
    child: std::process::Child,
}

impl Guard {
    /// Starts the guard of job `job_id` (`dirs`: extra shared-memory directories), running
    /// `exe --cleanup-after-exit`. `None` when it cannot start (logged; the job runs without).
    pub fn start(exe: &std::path::Path, job_id: &str, dirs: &[PathBuf]) -> Option<Guard> {
        let mut cmd = std::process::Command::new(exe);
        cmd.arg("--cleanup-after-exit").arg(job_id);
        for d in dirs {
            cmd.arg("--cleanup-dir").arg(d);
        }
        use std::os::unix::process::CommandExt;
        // Its own group: a Ctrl-C at the terminal, or a test killing the job's group, must not
        // stop the clean-up.
        cmd.stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .process_group(0);
        match cmd.spawn() {
            Ok(child) => Some(Guard { child }),
            Err(e) => {
                tracing::warn!(target: "launcher", "cannot start the clean-up guard ({e}); a killed launcher will leave the job's files");
                None
            }
        }
    }

    /// The launcher cleaned up: tells the guard, and waits (briefly) for it to leave.
    pub fn finish(mut self) {
        if let Some(mut stdin) = self.child.stdin.take() {
            use std::io::Write;
            let _ = stdin.write_all(DONE);
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(1);
        while std::time::Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}
