//! Kestrel on Slurm (issue 9), on a private one-node cluster made by `ci/slurm-cluster`:
//! direct launch with `srun --mpi=pmi2` (Slurm's own PMI-2 server, and its PMI-1 side),
//! `kestrel-run` inside `salloc` (its per-host daemon started with `srun`) and inside an
//! `sbatch` script (the batch host's ranks started in-process), and the error for tasks that
//! `srun` started without a PMI plugin. Every test tears its cluster down, also on failure, and
//! checks that no process, state directory or job file is left.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use kestrel_tests::slurm::Cluster;
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(90);

fn path(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}

/// The hello lines of an `n`-rank job: exactly ranks 0..n, each once, all on `node`.
fn assert_hello(out: &Outcome, n: u32, node: &str) {
    assert!(out.success(), "{}", out.show());
    let lines = lines_starting(&out.stdout, "Hello from rank ");
    let mut want: Vec<String> = (0..n)
        .map(|r| format!("Hello from rank {r} of {n} on {node}"))
        .collect();
    want.sort();
    assert_eq!(lines, want, "{}", out.show());
}

fn assert_passed(out: &Outcome, line: &str) {
    assert!(
        out.success() && out.stdout.contains(line),
        "expected '{line}':\n{}",
        out.show()
    );
}

fn assert_clean(cluster: Cluster, mark: &str) {
    let files = cluster.job_files();
    let left = cluster.shut_down();
    assert!(files.is_empty(), "job files left behind: {files:?}");
    assert!(left.is_empty(), "the cluster left: {left:?}");
    assert!(
        processes_matching(mark).is_empty(),
        "processes of the test's jobs left behind"
    );
}

#[test]
fn direct_launch_with_srun_pmi2() {
    // A node name other than the host name: the ranks' node id must come from Slurm.
    let Some(cluster) = Cluster::up("direct_launch_with_srun_pmi2", Some("ktnode0")) else {
        return;
    };
    let node = cluster.node().to_string();
    let mark = marker("srun");
    let srun = |program: &str, args: &[&str]| {
        let mut c = cluster.command("srun");
        c.args(["--mpi=pmi2", "-n", "4", path(&example(program))])
            .args(args)
            .arg(&mark);
        c
    };

    assert_hello(&run(srun("hello", &[]), DEADLINE), 4, &node);

    let out = run(srun("p2p_check", &["random", "2000"]), DEADLINE);
    assert_passed(&out, "p2p_check random: passed on 4 ranks over ");
    assert!(out.stdout.contains("shm"), "{}", out.show());
    let out = run(srun("coll_check", &["repeat", "300"]), DEADLINE);
    assert_passed(&out, "coll_check repeat: passed on 4 ranks");

    // Slurm's plugin also answers PMI-1; blobs larger than one PMI value, allgathers and the
    // node layout come out the same through both.
    let nodes = [node.as_str(); 4].join(",");
    for pmi in ["pmi2", "pmi1"] {
        let mut c = srun("modex_check", &[]);
        c.env("KESTREL_PMI", pmi)
            .env("KESTREL_EXPECT_NODES", &nodes);
        let out = run(c, DEADLINE);
        assert_passed(&out, "modex check passed on 4 ranks");
        assert_eq!(
            out.stdout.matches(&format!("pmi {pmi}")).count(),
            4,
            "{}",
            out.show()
        );
    }

    // A task that fails takes its step down (KillOnBadExit, as MPI sites set it) instead of
    // leaving the others waiting in a PMI fence...
    let mut c = cluster.command("srun");
    let fail_one = r#"if [ "$SLURM_PROCID" = 1 ]; then exit 3; fi; exec "$0" "$1""#;
    c.args(["--mpi=pmi2", "-n", "2", "sh", "-c", fail_one])
        .args([path(&example("hello")), &mark]);
    let out = run(c, DEADLINE);
    assert!(!out.success() && !out.timed_out, "{}", out.show());
    assert!(
        out.elapsed < Duration::from_secs(15),
        "took {:?}",
        out.elapsed
    );
    // ...and ranks that exit without finalizing leave segment files that only the job's
    // epilog (ci/slurm-epilog) can remove.
    let out = run(srun("p2p_check", &["no-such-mode"]), DEADLINE);
    assert!(
        !out.success() && out.stderr.contains("unknown mode"),
        "{}",
        out.show()
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while !cluster.job_files().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(
        cluster.job_files().is_empty(),
        "the epilog left {:?}",
        cluster.job_files()
    );

    // Ranks remove their segments' names once start-up is over, so an srun killed outright
    // (its step's tasks are killed with it) leaves nothing even before the epilog runs.
    let mut c = srun("fail", &["spin"]);
    c.stderr(std::process::Stdio::null());
    let mut job = start_spinning(c, &mark, DEADLINE);
    let running = cluster.job_files();
    job.kill().expect("SIGKILL srun");
    let _ = job.wait();
    let killed = std::time::Instant::now();
    while !processes_matching(&mark).is_empty() && killed.elapsed() < Duration::from_secs(20) {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert!(running.is_empty(), "files while the job ran: {running:?}");
    assert!(
        processes_matching(&mark).is_empty(),
        "ranks outlived srun by 20 s"
    );
    assert_clean(cluster, &mark);
}

#[test]
fn srun_without_a_pmi_plugin_fails_fast_with_the_command_that_works() {
    let Some(cluster) = Cluster::up("srun_without_a_pmi_plugin", None) else {
        return;
    };
    let mark = marker("nopmi");
    let hello = example("hello");
    let mut c = cluster.command("srun");
    c.args(["--mpi=none", "-n", "2", path(&hello), &mark]);
    let out = run(c, DEADLINE);
    assert!(!out.success() && !out.timed_out, "{}", out.show());
    assert!(
        out.elapsed < Duration::from_secs(15),
        "took {:?}",
        out.elapsed
    );
    for needle in [
        "task 0 of 2 of Slurm step ",
        "without a PMI plugin",
        &format!("srun --mpi=pmi2 -n 2 {}", path(&hello)),
        "MpiDefault=pmi2",
    ] {
        assert!(
            out.stderr.contains(needle),
            "lacks '{needle}':\n{}",
            out.show()
        );
    }
    assert!(!out.stdout.contains("Hello from"), "{}", out.show());

    // One task without PMI is a genuine singleton.
    let mut c = cluster.command("srun");
    c.args(["--mpi=none", "-n", "1", path(&hello), &mark]);
    assert_hello(&run(c, DEADLINE), 1, cluster.node());
    assert_clean(cluster, &mark);
}

#[test]
fn kestrel_run_inside_salloc_uses_the_allocation_and_srun() {
    // The node's Slurm name is not this host's name, so kestrel-run sees it as remote (as
    // from a login node) and must start its daemon there with srun.
    let Some(cluster) = Cluster::up("kestrel_run_inside_salloc", Some("ktnode0")) else {
        return;
    };
    let node = cluster.node().to_string();
    let mark = marker("salloc");
    let run_bin = bin("kestrel-run");
    let salloc = |n: &str, args: &[&str]| {
        let mut c = cluster.command("salloc");
        c.args(["-Q", "-n", n, path(&run_bin)]).args(args);
        c
    };

    // No -n: the allocation's 4 slots decide, and its host names the ranks' node.
    let hello = example("hello");
    assert_hello(
        &run(salloc("4", &[path(&hello), &mark]), DEADLINE),
        4,
        &node,
    );

    // Each rank tells where it runs and then becomes hello: inside the daemon's srun step,
    // with a session directory and job id whose files must be gone afterwards.
    let report = r#"echo "JOB=$KESTREL_JOB_ID SESSION=$KESTREL_SESSION_DIR STEP=$SLURM_STEP_ID"; exec "$0" "$1""#;
    let out = run(
        salloc("4", &["sh", "-c", report, path(&hello), &mark]),
        DEADLINE,
    );
    assert_hello(&out, 4, &node);
    let reports = lines_starting(&out.stdout, "JOB=");
    assert_eq!(reports.len(), 4, "{}", out.show());
    for line in &reports {
        assert_eq!(line, &reports[0], "one job, one host: {}", out.show());
    }
    let field = |name: &str| {
        reports[0]
            .split_whitespace()
            .find_map(|w| w.strip_prefix(name))
            .unwrap_or("")
            .to_string()
    };
    let (job, session, step) = (field("JOB="), field("SESSION="), field("STEP="));
    assert!(!job.is_empty() && !session.is_empty(), "{}", out.show());
    assert!(
        !step.is_empty(),
        "the ranks did not run inside an srun step, so the daemon was not started by srun: {}",
        out.show()
    );
    assert!(!Path::new(&session).exists(), "{session} left behind");
    let left: Vec<String> = job_files()
        .into_iter()
        .filter(|f| f.contains(&job))
        .collect();
    assert!(left.is_empty(), "files of job {job} left behind: {left:?}");

    let p2p = example("p2p_check");
    let out = run(
        salloc("4", &[path(&p2p), "random", "2000", &mark]),
        DEADLINE,
    );
    assert_passed(&out, "p2p_check random: passed on 4 ranks over ");
    let coll = example("coll_check");
    let out = run(
        salloc("4", &[path(&coll), "repeat", "300", &mark]),
        DEADLINE,
    );
    assert_passed(&out, "coll_check repeat: passed on 4 ranks");

    // The allocation's slots bind: 4 ranks do not fit in 2.
    let out = run(salloc("2", &["-n", "4", path(&hello), &mark]), DEADLINE);
    assert!(!out.success() && !out.timed_out, "{}", out.show());
    assert!(
        out.stderr.contains(&format!("only 2 slots ({node}:2)"))
            && out.stderr.contains("--oversubscribe"),
        "{}",
        out.show()
    );
    assert_clean(cluster, &mark);
}

#[test]
fn kestrel_run_in_an_sbatch_script() {
    // The batch script runs on the allocation's node, which is this host: ranks start
    // in-process, no daemon. The script also runs hello alone: a batch script carries
    // SLURM_NTASKS=4 and SLURM_PROCID=0 but is no task of a step, so that is a singleton.
    let Some(cluster) = Cluster::up("kestrel_run_in_an_sbatch_script", None) else {
        return;
    };
    let node = cluster.node().to_string();
    let mark = marker("sbatch");
    let output = std::env::temp_dir().join(format!("{mark}.out"));
    let script = format!(
        "{run} {hello} {mark} || exit 1\n{hello} {mark}\n",
        run = path(&bin("kestrel-run")),
        hello = path(&example("hello")),
    );
    let mut c: Command = cluster.command("sbatch");
    c.args([
        "-Q",
        "-n",
        "4",
        "--wait",
        "-o",
        path(&output),
        "--wrap",
        &script,
    ]);
    let out = run(c, DEADLINE);
    let printed = std::fs::read_to_string(&output).unwrap_or_default();
    let _ = std::fs::remove_file(&output);
    assert!(out.success(), "{}\n--- job output\n{printed}", out.show());
    let job = Outcome {
        code: Some(0),
        signal: None,
        stdout: printed
            .lines()
            .filter(|l| l.contains(" of 4 "))
            .map(|l| format!("{l}\n"))
            .collect(),
        stderr: String::new(),
        elapsed: out.elapsed,
        timed_out: false,
    };
    assert_hello(&job, 4, &node);
    assert!(
        printed.contains(&format!("Hello from rank 0 of 1 on {node}")),
        "the singleton did not run:\n{printed}"
    );
    assert_clean(cluster, &mark);
}

#[test]
fn two_namespace_hosts_form_one_slurm_cluster() {
    // One slurmd per network-namespace host, slurmctld beside them: srun starts ranks on both
    // hosts and Slurm's PMI-2 tree joins their fences; kestrel-run inside the allocation
    // reaches both hosts with srun; messages between the hosts go over the usnic transport.
    let hosts = kestrel_tests::netns::Cluster::up(2);
    let Some(cluster) = Cluster::on_netns_hosts("two_namespace_hosts", &hosts) else {
        return;
    };
    let n = cluster.nodes().to_vec();
    let expect = format!("{0},{0},{1},{1}", n[0], n[1]);
    let mark = marker("slurm-netns");
    let check = example("modex_check");
    let last_rank = format!("rank 3 ok: size 4, node {}, local ranks [2, 3]", n[1]);

    let mut c = cluster.command("srun");
    c.args([
        "--mpi=pmi2",
        "-N",
        "2",
        "--ntasks-per-node=2",
        path(&check),
        &mark,
    ])
    .env("KESTREL_EXPECT_NODES", &expect);
    let out = run(c, DEADLINE);
    assert_passed(&out, "modex check passed on 4 ranks");
    assert!(out.stdout.contains(&last_rank), "{}", out.show());

    let mut c = cluster.command("salloc");
    c.args([
        "-Q",
        "-N",
        "2",
        "--ntasks-per-node=2",
        path(&bin("kestrel-run")),
    ])
    .args(["-x", "KESTREL_EXPECT_NODES", path(&check), &mark])
    .env("KESTREL_EXPECT_NODES", &expect);
    let out = run(c, DEADLINE);
    assert_passed(&out, "modex check passed on 4 ranks");
    assert!(out.stdout.contains(&last_rank), "{}", out.show());

    // Point-to-point and collectives across the two hosts, over the data networks.
    for args in [&["random", "2000"][..], &["alltoall", "4"][..]] {
        let mut c = cluster.command("srun");
        c.args([
            "--mpi=pmi2",
            "-N",
            "2",
            "--ntasks-per-node=2",
            path(&example("p2p_check")),
        ])
        .args(args)
        .arg(&mark)
        .env("KESTREL_USNIC_IF_EXCLUDE", "198.18.0.0/24");
        let out = run(c, DEADLINE);
        assert!(
            out.success() && out.stdout.contains("passed on 4 ranks over usnic"),
            "{}",
            out.show()
        );
    }

    assert_clean(cluster, &mark);
    for h in hosts.hosts() {
        assert!(hosts.pids(h).is_empty(), "processes left in {h}");
    }
}
