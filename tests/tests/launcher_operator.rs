//! What an operator of a shared machine relies on from `kestrel-run`: a start bounded by the
//! host's slots and limits and stoppable at any rank count, output lines that stay whole, hang
//! reports that name a stopped rank and what the others wait for, and shared memory that grows
//! linearly with the ranks (16 ranks in a container-sized 64 MiB `/dev/shm`).

use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

/// Waits for `child` at most `limit`; `None` if it still runs.
fn wait_at_most(
    child: &mut std::process::Child,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let t = std::time::Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return Some(s);
        }
        if t.elapsed() > limit {
            return None;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sigterm(child: &std::process::Child) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    )
    .unwrap();
}

/// SIGTERMs the launcher and waits at most 2 s for it; past that, kills it and every process
/// carrying `mark` and fails the test.
fn stop_within_two_seconds(
    child: &mut std::process::Child,
    mark: &str,
) -> std::process::ExitStatus {
    sigterm(child);
    match wait_at_most(child, Duration::from_secs(2)) {
        Some(status) => status,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            kill_matching(mark);
            panic!("kestrel-run did not stop within 2 s of SIGTERM");
        }
    }
}

fn stderr_of(child: &mut std::process::Child) -> String {
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    err
}

#[test]
fn more_ranks_than_cores_is_refused_at_once_without_oversubscribe() {
    let hello = example("hello");
    let t = std::time::Instant::now();
    let out = run(
        kestrel_run(&["-n", "100000", hello.to_str().unwrap()]),
        DEADLINE,
    );
    let took = t.elapsed();
    assert_eq!(out.code, Some(2), "{}", out.show());
    assert!(
        out.stderr.contains("100000 ranks requested but this host")
            && out.stderr.contains("slot")
            && out.stderr.contains("--oversubscribe"),
        "{}",
        out.show()
    );
    assert!(took < Duration::from_secs(1), "took {took:?}");
    // One rank per core is the default count, and fits.
    let out = run(kestrel_run(&[hello.to_str().unwrap()]), DEADLINE);
    assert!(out.success(), "{}", out.show());
}

#[test]
fn an_oversubscribed_giant_job_is_refused_on_a_limit_or_stopped_by_sigterm() {
    let mark = marker("giant");
    let mut child = kestrel_run(&[
        "--oversubscribe",
        "-n",
        "100000",
        "sh",
        "-c",
        "sleep 60",
        &mark,
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let status = match wait_at_most(&mut child, Duration::from_secs(1)) {
        Some(s) => s,
        None => stop_within_two_seconds(&mut child, &mark),
    };
    let err = stderr_of(&mut child);
    assert!(!status.success(), "{err}");
    assert!(
        err.contains("cannot start 100000 ranks on") || err.contains("interrupted by SIGTERM"),
        "{err}"
    );
    assert!(!err.contains("did not stop after SIGKILL"), "{err}");
    assert!(processes_matching(&mark).is_empty(), "{err}");
}

#[test]
fn sigterm_during_a_large_start_up_stops_it_within_two_seconds() {
    let mark = marker("startup");
    // No shared memory, so the machine's limits allow it; the ranks only sleep.
    let mut child = kestrel_run(&[
        "--oversubscribe",
        "-n",
        "1000",
        "--mca",
        "btl",
        "self",
        "sh",
        "-c",
        "sleep 60",
        &mark,
    ])
    .stdout(std::process::Stdio::null())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let t = std::time::Instant::now();
    while processes_matching(&mark).len() < 20 && t.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = stop_within_two_seconds(&mut child, &mark);
    let err = stderr_of(&mut child);
    assert_eq!(status.code(), Some(143), "{err}");
    assert!(err.contains("interrupted by SIGTERM"), "{err}");
    assert!(!err.contains("did not stop after SIGKILL"), "{err}");
    assert!(processes_matching(&mark).is_empty(), "{err}");
}

#[test]
fn output_lines_of_ranks_are_forwarded_whole() {
    // Each line is written in three pieces; four ranks write at once to both streams.
    let script = "for i in $(seq 300); do printf 'rank%s-' $PMI_RANK; printf 'middle-'; \
                  printf 'end\\n'; printf 'err%s-' $PMI_RANK >&2; printf 'middle-' >&2; \
                  printf 'end\\n' >&2; done";
    let out = run(
        kestrel_run(&["--oversubscribe", "-n", "4", "sh", "-c", script]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    for (text, word) in [(&out.stdout, "rank"), (&out.stderr, "err")] {
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 1200, "{}", out.show());
        for line in lines {
            let rank = line
                .strip_prefix(word)
                .and_then(|l| l.strip_suffix("-middle-end"))
                .unwrap_or_else(|| panic!("broken line {line:?}"));
            assert!(matches!(rank, "0" | "1" | "2" | "3"), "{line:?}");
        }
    }
}

/// The state letter of process `pid` (`/proc/PID/stat`), if it exists.
fn state_of(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(
        stat.rsplit_once(')')?
            .1
            .split_whitespace()
            .next()?
            .to_string(),
    )
}

#[test]
fn a_timeout_report_names_the_stopped_rank_and_what_the_others_wait_for() {
    let mark = marker("hang");
    let fail = example("fail");
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "3",
            "--timeout",
            "3",
            fail.to_str().unwrap(),
            "stop",
            &mark,
        ]),
        DEADLINE,
    );
    assert_eq!(out.code, Some(124), "{}", out.show());
    let err = &out.stderr;
    assert!(
        err.contains("state of the job's running ranks (--timeout 3.0 s expired):"),
        "{err}"
    );
    let row = |rank: u32| -> String {
        err.lines()
            .find(|l| l.split_whitespace().next() == Some(&rank.to_string()))
            .unwrap_or_else(|| panic!("no row for rank {rank}: {err}"))
            .to_string()
    };
    assert!(row(1).contains("STOPPED"), "{err}");
    assert!(
        row(0).contains("recv from source 1, tag 7, communicator context 0"),
        "{err}"
    );
    // Rank 2 is in the barrier (its set-up or the segment), on the same communicator.
    assert!(row(2).contains("communicator context 0"), "{err}");
    assert!(processes_matching(&mark).is_empty(), "{err}");
}

#[test]
fn sigusr1_prints_the_report_and_the_job_goes_on() {
    let mark = marker("usr1");
    let fail = example("fail");
    let mut child = kestrel_run(&["-n", "2", fail.to_str().unwrap(), "stop", &mark])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stderr)
            .lines()
            .map_while(Result::ok)
        {
            let _ = tx.send(line);
        }
    });
    let t = std::time::Instant::now();
    let stopped = loop {
        let found = processes_matching(&mark)
            .into_iter()
            .find(|&p| state_of(p).as_deref() == Some("T"));
        if let Some(p) = found {
            break p;
        }
        if t.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            kill_matching(&mark);
            panic!("rank 1 never stopped");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // Let rank 0 stall long enough to write its record.
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGUSR1,
    )
    .unwrap();
    let mut report = Vec::new();
    while report.len() < 4 {
        match rx.recv_timeout(Duration::from_secs(10)) {
            Ok(line) if !report.is_empty() || line.contains("(SIGUSR1)") => report.push(line),
            Ok(_) => {}
            Err(_) => break,
        }
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(stopped as i32),
        nix::sys::signal::Signal::SIGCONT,
    )
    .unwrap();
    let status = wait_at_most(&mut child, Duration::from_secs(20));
    if status.is_none() {
        let _ = child.kill();
        kill_matching(&mark);
    }
    let text = report.join("\n");
    assert!(
        text.contains("state of the job's running ranks (SIGUSR1):"),
        "{text}"
    );
    assert!(
        report
            .iter()
            .any(|l| l.contains("STOPPED") && l.contains(&stopped.to_string())),
        "{text}"
    );
    assert!(
        report
            .iter()
            .any(|l| l.contains("recv from source 1, tag 7")),
        "{text}"
    );
    assert_eq!(
        status.map(|s| s.code()),
        Some(Some(0)),
        "the job did not go on: {text}"
    );
}

/// A tmpfs of `size` mounted for one test, unmounted (and its directory removed) on drop.
struct SmallTmpfs(std::path::PathBuf);

impl SmallTmpfs {
    fn mount(size: &str) -> SmallTmpfs {
        let dir = std::env::temp_dir().join(marker("tmpfs"));
        std::fs::create_dir_all(&dir).unwrap();
        let out = std::process::Command::new("mount")
            .args([
                "-t",
                "tmpfs",
                "-o",
                &format!("size={size},mode=1777"),
                "tmpfs",
            ])
            .arg(&dir)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "mount a {size} tmpfs (the test needs root): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        SmallTmpfs(dir)
    }
}

impl Drop for SmallTmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg(&self.0).status();
        let _ = std::fs::remove_dir(&self.0);
    }
}

#[test]
fn sixteen_ranks_run_in_a_64_mib_shared_memory_directory() {
    let tmpfs = SmallTmpfs::mount("64m");
    let dir = tmpfs.0.display().to_string();
    // Point-to-point between every pair (fast boxes) and the world's collective segment.
    for (program, args) in [("ring", vec![]), ("coll_check", vec!["repeat", "20"])] {
        let exe = example(program).display().to_string();
        let mut argv = vec!["--oversubscribe", "-n", "16", "-x"];
        let shm_dir = format!("KESTREL_SHM_DIR={dir}");
        argv.push(&shm_dir);
        argv.push(&exe);
        argv.extend(args.iter().copied());
        let out = run(kestrel_run(&argv), Duration::from_secs(240));
        assert!(out.success(), "{program}: {}", out.show());
    }
    let left: Vec<_> = std::fs::read_dir(&tmpfs.0).unwrap().flatten().collect();
    assert!(left.is_empty(), "files left in the tmpfs: {left:?}");
}
