//! `kestrel-run` end to end on this host: placement, environment, output, and every way a job
//! can end badly (each must stop the whole job promptly and leave no process or file behind).

use std::process::Command;
use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(30);

fn hello_lines(stdout: &str, n: u32) -> Vec<String> {
    let mut lines = lines_starting(stdout, "Hello from rank ");
    lines.dedup();
    let want: Vec<String> = (0..n)
        .map(|r| format!("Hello from rank {r} of {n} on "))
        .collect();
    assert_eq!(lines.len(), n as usize, "{stdout}");
    for (line, prefix) in lines.iter().zip(&want) {
        assert!(line.starts_with(prefix), "{line} vs {prefix}");
    }
    lines
}

#[test]
fn hello_on_four_ranks() {
    let hello = example("hello");
    let out = run(
        kestrel_run(&["--oversubscribe", "-n", "4", hello.to_str().unwrap()]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    hello_lines(&out.stdout, 4);
}

#[test]
fn hello_as_a_singleton() {
    let out = run(Command::new(example("hello")), DEADLINE);
    assert!(out.success(), "{}", out.show());
    hello_lines(&out.stdout, 1);
}

#[test]
fn modex_blobs_allgather_and_node_ids() {
    let check = example("modex_check");
    let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout).unwrap();
    let expect = vec![host.trim().to_string(); 5].join(",");
    for pmi in ["pmi1", "pmi2"] {
        let mut cmd = kestrel_run(&["--oversubscribe", "-n", "5", check.to_str().unwrap()]);
        cmd.env("KESTREL_PMI", pmi)
            .env("KESTREL_EXPECT_NODES", &expect);
        let out = run(cmd, DEADLINE);
        assert!(out.success(), "{pmi}: {}", out.show());
        assert!(
            out.stdout.contains("modex check passed on 5 ranks"),
            "{}",
            out.show()
        );
        assert_eq!(
            out.stdout.matches(&format!("pmi {pmi}")).count(),
            5,
            "{}",
            out.show()
        );
    }
}

#[test]
fn segfault_in_one_rank_stops_the_job_and_cleans_up() {
    let mark = marker("segv");
    // Rank 0 reports where the job's files are and makes a shared-memory file, as a transport
    // would; rank 1 crashes; the others would sleep for a minute.
    let script = r#"
        if [ "$PMI_RANK" = 0 ]; then
            echo "JOB=$KESTREL_JOB_ID SESSION=$KESTREL_SESSION_DIR"
            : > "/dev/shm/kestrel.$KESTREL_JOB_ID.seg0"
        fi
        sleep 0.3
        if [ "$PMI_RANK" = 1 ]; then kill -SEGV $$; fi
        sleep 60"#;
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "3",
            "--",
            "sh",
            "-c",
            script,
            &mark,
        ]),
        DEADLINE,
    );
    assert!(!out.success() && !out.timed_out, "{}", out.show());
    assert!(
        out.elapsed < Duration::from_secs(5),
        "took {:?}",
        out.elapsed
    );
    assert!(
        out.stderr.contains("rank 1 (pid ")
            && out
                .stderr
                .contains("killed by signal 11 (Segmentation fault)"),
        "{}",
        out.show()
    );
    assert_eq!(out.code, Some(128 + 11));
    let line = out
        .stdout
        .lines()
        .find(|l| l.starts_with("JOB="))
        .expect("rank 0 reported");
    let job = line
        .split_whitespace()
        .next()
        .unwrap()
        .trim_start_matches("JOB=");
    let session = line.split("SESSION=").nth(1).unwrap();
    assert!(!job.is_empty() && !session.is_empty(), "{line}");
    assert!(
        !std::path::Path::new(session).exists(),
        "session dir {session} left behind"
    );
    let left: Vec<String> = job_files()
        .into_iter()
        .filter(|f| f.contains(job))
        .collect();
    assert!(left.is_empty(), "job files left behind: {left:?}");
    assert!(
        processes_matching(&mark).is_empty(),
        "rank processes left behind"
    );
}

#[test]
fn conflicting_mca_values_are_refused_naming_both() {
    let out = run(
        kestrel_run(&[
            "-n", "2", "--mca", "btl", "shm", "--mca", "btl", "usnic", "true",
        ]),
        DEADLINE,
    );
    assert!(!out.success());
    assert!(
        out.stderr.contains("'shm'") && out.stderr.contains("'usnic'"),
        "{}",
        out.show()
    );
}

#[test]
fn unknown_btl_is_refused_listing_the_known_ones() {
    let mut cmd = Command::new(example("hello"));
    cmd.env("KESTREL_BTL", "shm,bogus");
    let out = run(cmd, DEADLINE);
    assert!(!out.success());
    assert!(
        out.stderr.contains("'bogus'") && out.stderr.contains("self, shm, usnic"),
        "{}",
        out.show()
    );
}

#[test]
fn mca_values_are_checked_by_the_launcher_and_reach_the_ranks() {
    let hello = example("hello");
    let out = run(
        kestrel_run(&["-n", "2", "--mca", "btl", "^usnic", hello.to_str().unwrap()]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    let out = run(
        kestrel_run(&["-n", "2", "--mca", "btl", "tcp", hello.to_str().unwrap()]),
        DEADLINE,
    );
    assert!(!out.success());
    assert!(
        out.stderr.contains("--mca btl") && out.stderr.contains("'tcp'"),
        "{}",
        out.show()
    );
    // The launcher checks every name and value before a rank starts.
    for args in [["blt", "shm"], ["shm_frag_size", "abc"]] {
        let out = run(
            kestrel_run(&[
                "-n",
                "1",
                "--mca",
                args[0],
                args[1],
                hello.to_str().unwrap(),
            ]),
            DEADLINE,
        );
        assert_eq!(out.code, Some(2), "{}", out.show());
        assert!(!out.stdout.contains("Hello"), "{}", out.show());
        assert!(
            out.stderr.starts_with("kestrel-run: parameter")
                && (out
                    .stderr
                    .contains("'blt' does not exist; did you mean btl?")
                    || out
                        .stderr
                        .contains("value 'abc' (from --mca shm_frag_size)")),
            "{}",
            out.show()
        );
    }
}

#[test]
fn kestrel_info_lists_parameters_as_text_and_json() {
    let out = run(Command::new(bin("kestrel-info")), DEADLINE);
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("btl") && out.stdout.contains("Transports to use"),
        "{}",
        out.stdout
    );
    let out = run(
        {
            let mut c = Command::new(bin("kestrel-info"));
            c.arg("--json").env("KESTREL_PMI", "pmi1");
            c
        },
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    let doc: serde_json::Value =
        serde_json::from_str(&out.stdout).expect("kestrel-info --json parses");
    let params = doc["parameters"].as_array().unwrap();
    let pmi = params
        .iter()
        .find(|p| p["name"] == "pmi")
        .expect("pmi listed");
    assert_eq!(
        (pmi["value"].as_str(), pmi["source"].as_str()),
        (Some("pmi1"), Some("environment"))
    );
    assert!(params
        .iter()
        .all(|p| !p["description"].as_str().unwrap().is_empty()));
    let mut c = Command::new(bin("kestrel-info"));
    c.args(["--json", "--component", "launcher"]);
    let out = run(c, DEADLINE);
    let doc: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert!(doc["parameters"]
        .as_array()
        .unwrap()
        .iter()
        .all(|p| p["component"] == "launcher"));
}

#[test]
fn timeout_names_the_ranks_still_running() {
    let mark = marker("timeout");
    let out = run(
        kestrel_run(&["--timeout", "1", "-n", "2", "sh", "-c", "sleep 30", &mark]),
        DEADLINE,
    );
    assert_eq!(out.code, Some(124), "{}", out.show());
    assert!(out.elapsed < Duration::from_secs(5), "{:?}", out.elapsed);
    assert!(
        out.stderr.contains("--timeout")
            && out.stderr.contains("rank 0 (pid")
            && out.stderr.contains("rank 1 (pid"),
        "{}",
        out.show()
    );
    assert!(processes_matching(&mark).is_empty());
}

#[test]
fn abort_stops_the_job_with_its_code_and_message() {
    let fail = example("fail");
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "3",
            fail.to_str().unwrap(),
            "abort",
            "7",
        ]),
        DEADLINE,
    );
    assert_eq!(out.code, Some(7), "{}", out.show());
    assert!(
        out.stderr.contains("rank 1 (pid")
            && out
                .stderr
                .contains("aborted the job with code 7: rank 1 found inconsistent input"),
        "{}",
        out.show()
    );
}

#[test]
fn leaving_without_finalize_does_not_hang_the_others() {
    let fail = example("fail");
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "3",
            fail.to_str().unwrap(),
            "early-exit",
        ]),
        DEADLINE,
    );
    assert_eq!(out.code, Some(1), "{}", out.show());
    assert!(
        out.stderr.contains("rank 1") && out.stderr.contains("without finalizing"),
        "{}",
        out.show()
    );
    assert!(out.elapsed < Duration::from_secs(5));
}

#[test]
fn missing_program_is_reported_with_a_hint() {
    let out = run(kestrel_run(&["-n", "2", "/nonexistent/prog"]), DEADLINE);
    assert_eq!(out.code, Some(127), "{}", out.show());
    assert!(
        out.stderr.contains("cannot start '/nonexistent/prog'") && out.stderr.contains("not found"),
        "{}",
        out.show()
    );
}

#[test]
fn tag_output_prefixes_every_line() {
    let out = run(
        kestrel_run(&[
            "--tag-output",
            "-n",
            "2",
            "sh",
            "-c",
            "echo out; echo err >&2",
        ]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    assert_eq!(
        lines_starting(&out.stdout, "[1,"),
        vec!["[1,0]<stdout>:out", "[1,1]<stdout>:out"]
    );
    assert_eq!(
        lines_starting(&out.stderr, "[1,"),
        vec!["[1,0]<stderr>:err", "[1,1]<stderr>:err"]
    );
}

#[test]
fn environment_reaches_every_rank() {
    std::env::set_var("KESTREL_TEST_FROM_LAUNCHER", "here");
    let script = "echo \"$PMI_RANK/$PMI_SIZE $KESTREL_LOCAL_RANK/$KESTREL_LOCAL_SIZE $FOO $KESTREL_TEST_FROM_LAUNCHER \
                  $KESTREL_MCA_VERBOSE node=$KESTREL_NODE_ID auto=${KESTREL_AUTO_YIELD_WHEN_IDLE:-unset} fd=${PMI_FD:+set}\"";
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "3",
            "-x",
            "FOO=bar",
            "-x",
            "KESTREL_TEST_FROM_LAUNCHER",
            "--mca",
            "verbose",
            "pmi:debug",
            "sh",
            "-c",
            script,
        ]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let auto = if cores < 3 { "true" } else { "unset" };
    let host = String::from_utf8(Command::new("hostname").output().unwrap().stdout).unwrap();
    let mut lines: Vec<&str> = out.stdout.lines().collect();
    lines.sort();
    for (r, line) in lines.iter().enumerate() {
        assert_eq!(
            *line,
            format!(
                "{r}/3 {r}/3 bar here pmi:debug node={} auto={auto} fd=set",
                host.trim()
            ),
            "{}",
            out.show()
        );
    }
    // An explicit choice wins over the launcher's.
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "3",
            "--mca",
            "yield_when_idle",
            "false",
            "sh",
            "-c",
            "echo ${KESTREL_AUTO_YIELD_WHEN_IDLE:-unset}",
        ]),
        DEADLINE,
    );
    assert_eq!(
        out.stdout.lines().collect::<Vec<_>>(),
        vec!["unset"; 3],
        "{}",
        out.show()
    );
}

#[test]
fn slots_bound_ranks_unless_oversubscribed() {
    let out = run(
        kestrel_run(&["--host", "localhost:1", "-n", "2", "true"]),
        DEADLINE,
    );
    assert!(!out.success());
    assert!(
        out.stderr.contains("only 1 slots") && out.stderr.contains("--oversubscribe"),
        "{}",
        out.show()
    );
    let out = run(
        kestrel_run(&[
            "--host",
            "localhost:1",
            "--oversubscribe",
            "-n",
            "2",
            "true",
        ]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    let dir = std::env::temp_dir().join(marker("hostfile"));
    std::fs::write(&dir, "localhost slots=2\nlocalhost slots=x\n").unwrap();
    let out = run(
        kestrel_run(&["--hostfile", dir.to_str().unwrap(), "true"]),
        DEADLINE,
    );
    std::fs::remove_file(&dir).unwrap();
    assert!(
        out.stderr.contains("line 2") && out.stderr.contains("slots"),
        "{}",
        out.show()
    );
}

#[test]
fn rank_zero_reads_the_launchers_standard_input() {
    let mut cmd = kestrel_run(&[
        "-n",
        "2",
        "sh",
        "-c",
        "if [ $PMI_RANK = 0 ]; then cat; else cat; echo none; fi",
    ]);
    let input = std::env::temp_dir().join(marker("stdin"));
    std::fs::write(&input, "line from stdin\n").unwrap();
    let file = std::fs::File::open(&input).unwrap();
    cmd.stdin(file);
    // `run` would replace stdin: spawn by hand with a deadline of our own.
    let child = cmd.stdout(std::process::Stdio::piped()).spawn().unwrap();
    let out = child.wait_with_output().unwrap();
    std::fs::remove_file(&input).unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success());
    assert_eq!(lines_starting(&text, ""), vec!["line from stdin", "none"]);
}

#[test]
fn sigint_to_the_launcher_stops_every_rank() {
    let mark = marker("sigint");
    let mut cmd = kestrel_run(&["-n", "2", "sh", "-c", "sleep 60", &mark]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Wait until both ranks run.
    let start = std::time::Instant::now();
    while processes_matching(&mark).len() < 3 && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let t = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            panic!("kestrel-run did not stop after SIGINT");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(130));
    assert!(t.elapsed() < Duration::from_secs(3), "{:?}", t.elapsed());
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert!(err.contains("interrupted by SIGINT"), "{err}");
    assert!(processes_matching(&mark).is_empty());
}

#[test]
fn bind_to_core_gives_each_rank_its_own_core() {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let n = cores.min(4);
    let out = run(
        kestrel_run(&[
            "--bind-to",
            "core",
            "--oversubscribe",
            "-n",
            &n.to_string(),
            "sh",
            "-c",
            "echo $PMI_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)",
        ]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    let mut seen: Vec<String> = out
        .stdout
        .lines()
        .map(|l| l.split_whitespace().nth(1).unwrap_or("").to_string())
        .collect();
    seen.sort();
    seen.dedup();
    assert_eq!(
        seen.len(),
        n,
        "each rank on a distinct single core: {}",
        out.stdout
    );
    assert!(
        seen.iter().all(|s| !s.contains('-') && !s.contains(',')),
        "{}",
        out.stdout
    );
}

/// What each rank of `launch` reports: (rank, its allowed cpus as the kernel lists them), and
/// kestrel-run's `--report-bindings` lines.
fn allowed_cpus(launch: Command) -> (Vec<(u32, String)>, Vec<String>) {
    let out = run(launch, DEADLINE);
    assert!(out.success(), "{}", out.show());
    let mut ranks: Vec<(u32, String)> = out
        .stdout
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.to_string()))
        })
        .collect();
    ranks.sort();
    (ranks, lines_starting(&out.stderr, "kestrel-run: rank "))
}

/// The number of cpus in a `Cpus_allowed_list` ("0-3,6" has 5).
fn cpu_count(list: &str) -> usize {
    list.split(',')
        .map(|part| match part.split_once('-') {
            Some((a, b)) => b.parse::<usize>().unwrap() - a.parse::<usize>().unwrap() + 1,
            None => 1,
        })
        .sum()
}

#[test]
fn threaded_ranks_get_omp_num_threads_cores_and_the_bindings_are_reported() {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let show = "echo $PMI_RANK $(grep Cpus_allowed_list /proc/self/status | cut -f2)";
    // One rank asking for every core gets them all; the report says so.
    let mut one = kestrel_run(&["--report-bindings", "-n", "1", "sh", "-c", show]);
    one.env("OMP_NUM_THREADS", cores.to_string());
    let (ranks, report) = allowed_cpus(one);
    assert_eq!(cpu_count(&ranks[0].1), cores, "{ranks:?}");
    assert_eq!(report.len(), 1, "{report:?}");
    assert!(
        report[0].ends_with(&format!("bound to cpus {}", ranks[0].1)),
        "{report:?} against {ranks:?}"
    );
    // Two ranks asking for every core each get their half, apart (with two cores or more).
    if cores >= 2 {
        let mut two = kestrel_run(&["-n", "2", "-x", &format!("OMP_NUM_THREADS={cores}")]);
        two.args(["sh", "-c", show]);
        let (ranks, _) = allowed_cpus(two);
        assert_eq!(ranks.len(), 2, "{ranks:?}");
        assert_ne!(ranks[0].1, ranks[1].1, "{ranks:?}");
        for (_, list) in &ranks {
            assert_eq!(cpu_count(list), cores / 2, "{ranks:?}");
        }
        // --cpus-per-rank 1 overrides it.
        let mut pinned = kestrel_run(&["--cpus-per-rank", "1", "-n", "2", "sh", "-c", show]);
        pinned.env("OMP_NUM_THREADS", cores.to_string());
        let (ranks, _) = allowed_cpus(pinned);
        assert!(ranks.iter().all(|(_, l)| cpu_count(l) == 1), "{ranks:?}");
    }
    // Oversubscribed ranks are not bound, and the report says that too.
    let (ranks, report) = allowed_cpus(kestrel_run(&[
        "--report-bindings",
        "--oversubscribe",
        "-n",
        &(cores + 1).to_string(),
        "sh",
        "-c",
        show,
    ]));
    assert!(
        ranks.iter().all(|(_, l)| cpu_count(l) == cores),
        "{ranks:?}"
    );
    assert_eq!(report.len(), cores + 1, "{report:?}");
    assert!(
        report.iter().all(|l| l.ends_with("not bound")),
        "{report:?}"
    );
}

#[test]
fn a_launch_agent_that_fails_is_explained() {
    let out = run(
        kestrel_run(&[
            "--host",
            "nosuchhost:1",
            "--launch-agent",
            "false",
            "-n",
            "1",
            "true",
        ]),
        DEADLINE,
    );
    assert_eq!(out.code, Some(2), "{}", out.show());
    assert!(
        out.stderr.contains("nosuchhost") && out.stderr.contains("ended before connecting back"),
        "{}",
        out.show()
    );
    assert!(out.elapsed < Duration::from_secs(10));
}

#[test]
fn ranks_do_not_outlive_a_killed_launcher() {
    // `exec` makes the rank itself the sleeper; its unusual duration identifies it.
    let secs = format!(
        "{}.{}",
        500 + std::process::id() % 400,
        std::process::id() % 97
    );
    let script =
        format!("[ \"$PMI_RANK\" = 0 ] && echo \"$KESTREL_SESSION_DIR\"; exec sleep {secs}");
    let mut cmd = kestrel_run(&["-n", "2", "sh", "-c", &script]);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let mut child = cmd.spawn().unwrap();
    let mut session = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(child.stdout.take().unwrap()),
        &mut session,
    )
    .unwrap();
    let session = session.trim().to_string();
    assert!(
        session.starts_with('/'),
        "rank 0 did not report its session directory"
    );
    let needle = format!("sleep {secs}");
    let launcher = child.id();
    // Every process whose command line holds the script: the launcher (left out), a rank
    // still in `sh` or a forked launcher child not yet exec'd; and the ranks once they sleep.
    let ranks = || -> Vec<u32> {
        processes_matching(&needle)
            .into_iter()
            .filter(|&p| p != launcher)
            .collect()
    };
    // Only a rank that has exec'd `sleep` counts as started: a loaded CI machine may take
    // seconds to schedule the second rank's `sh`.
    let sleeping = || -> usize {
        ranks()
            .into_iter()
            .filter(|p| {
                std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\0"))
            })
            .count()
    };
    let start = std::time::Instant::now();
    while sleeping() < 2 && start.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(sleeping(), 2, "ranks did not start: {:?}", ranks());
    child.kill().unwrap();
    child.wait().unwrap();
    let t = std::time::Instant::now();
    while !ranks().is_empty() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors = ranks();
    // A launcher killed outright cannot remove its session directory: the test does.
    let _ = std::fs::remove_dir_all(&session);
    assert!(
        survivors.is_empty(),
        "ranks survived SIGKILL of kestrel-run"
    );
}

/// Files of job `job` (segments and session directories).
fn files_of(job: &str) -> Vec<String> {
    job_files()
        .into_iter()
        .filter(|f| f.contains(&format!("kestrel.{job}.")))
        .collect()
}

/// Starts `n` ranks of `fail spin` as job `job` (stderr piped) and waits until start-up is
/// over on every rank.
fn start_spinning_job(n: usize, job: &str, mark: &str) -> std::process::Child {
    let n_text = n.to_string();
    let mut cmd = kestrel_run(&[
        "--oversubscribe",
        "-n",
        &n_text,
        "--job-id",
        job,
        &example("fail").display().to_string(),
        "spin",
        mark,
    ]);
    cmd.stderr(std::process::Stdio::piped());
    start_spinning(cmd, mark, Duration::from_secs(20))
}

#[test]
fn a_launcher_killed_by_sigkill_leaves_no_rank_segment_or_session_directory() {
    let mark = marker("sigkill");
    let job = mark.replace('.', "-");
    let mut child = start_spinning_job(4, &job, &mark);
    // The ranks removed their segments' names once every peer had mapped them: only the
    // session directory is left for the launcher's guard.
    let session = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    assert_eq!(
        files_of(&job),
        vec![format!("{session}/kestrel.{job}.h0")],
        "after start-up"
    );
    child.kill().expect("SIGKILL the launcher");
    let _ = child.wait();
    let killed = std::time::Instant::now();
    loop {
        let left_files = files_of(&job);
        let left_procs = processes_matching(&mark);
        if left_files.is_empty() && left_procs.is_empty() {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(3),
            "3 s after SIGKILL: files {left_files:?}, processes {left_procs:?}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut err = String::new();
    use std::io::Read;
    let _ = child.stderr.take().unwrap().read_to_string(&mut err);
    assert!(
        err.contains(&format!(
            "the launcher of job {job} ended without cleaning up"
        )),
        "{err}"
    );
}

#[test]
fn a_missing_shm_directory_is_named_as_missing() {
    let mut cmd = kestrel_run(&["-n", "2", &example("hello").display().to_string()]);
    cmd.env("KESTREL_SHM_DIR", "/nonexistent-kestrel-shm-dir");
    let out = run(cmd, DEADLINE);
    assert!(!out.success(), "{}", out.show());
    assert!(
        out.stderr
            .contains("the directory /nonexistent-kestrel-shm-dir does not exist")
            && !out.stderr.contains("shm: shm:"),
        "{}",
        out.show()
    );
}

#[test]
fn cleanup_removes_what_dead_jobs_left_and_nothing_of_live_ones() {
    let mark = marker("stale");
    let live = format!("{mark}-live");
    let dead = format!("{mark}-dead");
    let mut job = start_spinning_job(2, &live, &mark);
    // The live job's own segments lost their names once start-up was over; a segment of it
    // that a live process maps (this test process) must survive the sweep as its session
    // directory must.
    let mapped_segment = format!("/dev/shm/kestrel.{live}.shm.mapped");
    let mapped_file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&mapped_segment)
        .unwrap();
    mapped_file.set_len(4096).unwrap();
    let page = std::num::NonZeroUsize::new(4096).unwrap();
    // SAFETY: a fresh private mapping of a 4096-byte file this test owns; nothing reads or
    // writes through it, and it is unmapped below before the file is removed.
    let mapping = unsafe {
        nix::sys::mman::mmap(
            None,
            page,
            nix::sys::mman::ProtFlags::PROT_READ,
            nix::sys::mman::MapFlags::MAP_SHARED,
            &mapped_file,
            0,
        )
    }
    .expect("map the live job's segment");
    // What a dead job left: a segment nobody maps and a session directory whose owner is gone
    // (a pid that has exited), both older than the sweep's minimum age; and a fresh segment.
    let gone = {
        let mut c = Command::new("true").spawn().unwrap();
        let pid = c.id();
        c.wait().unwrap();
        pid
    };
    let parent = std::env::var("TMPDIR").unwrap_or_else(|_| "/tmp".into());
    let stale_segment = format!("/dev/shm/kestrel.{dead}.shm.0");
    let stale_session = format!("{parent}/kestrel.{dead}.h0");
    let fresh_segment = format!("/dev/shm/kestrel.{dead}-fresh.shm.0");
    std::fs::write(&stale_segment, b"x").unwrap();
    std::fs::write(&fresh_segment, b"x").unwrap();
    std::fs::create_dir(&stale_session).unwrap();
    std::fs::write(format!("{stale_session}/owner"), format!("{gone} 12345\n")).unwrap();
    // Age everything, the live job's files too: only being mapped or owned keeps them.
    let mut aged = vec![stale_segment.clone(), stale_session.clone()];
    aged.extend(files_of(&live));
    let ok = Command::new("touch")
        .args(["-d", "1 minute ago"])
        .args(&aged)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "touch -d");
    let out = run(kestrel_run(&["--cleanup"]), DEADLINE);
    let live_left = files_of(&live);
    // SAFETY: the mapping made above, of `page` bytes, used by nothing else.
    let _ = unsafe { nix::sys::mman::munmap(mapping, page.get()) };
    let _ = std::fs::remove_file(&mapped_segment);
    let _ = nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(job.id() as i32),
        nix::sys::signal::Signal::SIGTERM,
    );
    let _ = job.wait();
    let fresh_left = std::path::Path::new(&fresh_segment).exists();
    let _ = std::fs::remove_file(&fresh_segment);
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains(&format!("removed {stale_segment}"))
            && out.stdout.contains(&format!("removed {stale_session}")),
        "{}",
        out.show()
    );
    assert!(
        !std::path::Path::new(&stale_segment).exists()
            && !std::path::Path::new(&stale_session).exists()
    );
    assert!(
        fresh_left,
        "a segment younger than the minimum age was removed"
    );
    assert!(
        live_left.contains(&mapped_segment)
            && live_left
                .iter()
                .any(|f| f.ends_with(&format!("kestrel.{live}.h0")))
            && !out.stdout.contains(&live),
        "the live job lost files: {live_left:?}\n{}",
        out.show()
    );
    assert!(
        files_of(&live).is_empty(),
        "the live job did not clean up after SIGTERM"
    );
}
