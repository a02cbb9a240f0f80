//! Multi-host jobs on network-namespace test hosts: per-host daemons started through
//! `--launch-agent 'ip netns exec'`, node ids per host, combined fences, and failure on a
//! remote host.

use std::time::Duration;

use kestrel_tests::netns::Cluster;
use kestrel_tests::stranger::{listening_address, run_as, Stranger};
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

#[test]
fn two_hosts_find_each_other_through_the_daemons() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:2,{}:2", h[0], h[1]);
    let expect = format!("{0},{0},{1},{1}", h[0], h[1]);
    let check = example("modex_check");
    let mut cmd = kestrel_run(&["--host", &hosts, "--launch-agent", "ip netns exec", "-x"]);
    cmd.arg(format!("KESTREL_EXPECT_NODES={expect}"))
        .arg(&check);
    let out = run(cmd, DEADLINE);
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("modex check passed on 4 ranks"),
        "{}",
        out.show()
    );
    assert!(
        out.stdout.contains(&format!(
            "rank 3 ok: size 4, node {}, local ranks [2, 3]",
            h[1]
        )),
        "{}",
        out.show()
    );
    for host in h {
        assert!(
            cluster.pids(host).is_empty(),
            "daemon or ranks left in {host}"
        );
    }
}

#[test]
fn a_crash_on_a_remote_host_stops_every_host() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let mark = marker("remote-segv");
    let hosts = format!("{}:1,{}:2", h[0], h[1]);
    let script = r#"if [ "$PMI_RANK" = 2 ]; then sleep 0.3; kill -SEGV $$; fi; sleep 60"#;
    let out = run(
        kestrel_run(&[
            "--host",
            &hosts,
            "--launch-agent",
            "ip netns exec",
            "--",
            "sh",
            "-c",
            script,
            &mark,
        ]),
        DEADLINE,
    );
    assert_eq!(out.code, Some(139), "{}", out.show());
    assert!(out.elapsed < Duration::from_secs(6), "{:?}", out.elapsed);
    assert!(
        out.stderr.contains("rank 2 (pid ")
            && out
                .stderr
                .contains(&format!("on {}) killed by signal 11", h[1])),
        "{}",
        out.show()
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        processes_matching(&mark).is_empty(),
        "processes left behind"
    );
    for host in h {
        assert!(
            cluster.pids(host).is_empty(),
            "processes left in {host}: {:?}",
            cluster.pids(host)
        );
    }
}

#[test]
fn a_stranger_on_the_host_can_neither_join_nor_disturb_a_two_host_job() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts().to_vec();
    let stranger = Stranger::create();
    let mark = marker("stranger");
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let args = [
        "--host",
        &hosts,
        "--launch-agent",
        "ip netns exec",
        "--",
        "sh",
        "-c",
        r#"sleep 4; echo "done $PMI_RANK""#,
        &mark,
    ];
    let job = {
        let cmd = kestrel_run(&args);
        std::thread::spawn(move || run(cmd, DEADLINE))
    };
    // Both daemons authenticated once both hosts run a rank.
    let start = std::time::Instant::now();
    let head = loop {
        let ranks_up = h.iter().all(|host| cluster.pids(host).len() >= 2);
        let head = processes_matching(&mark).into_iter().find(|p| {
            std::fs::read_to_string(format!("/proc/{p}/comm"))
                .is_ok_and(|c| c.trim() == "kestrel-run")
        });
        if let (true, Some(head)) = (ranks_up, head) {
            break head;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "the job did not start"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    let (ip, port) = listening_address(head).expect("the launcher's daemon port");
    assert!(
        ip != "0.0.0.0" && ip != "*",
        "the launcher listens on every address"
    );
    let attack = run_as(
        &stranger,
        include_str!("../strangers/launcher_intruder.py"),
        &[ip.clone(), port.to_string()],
    );
    let said = String::from_utf8_lossy(&attack.stdout).into_owned();
    assert!(
        attack.status.success() && said.contains("accepted 0"),
        "the stranger got in: {said}\n{}",
        String::from_utf8_lossy(&attack.stderr)
    );
    let out = job.join().expect("job thread");
    assert!(
        out.success(),
        "the job did not survive the stranger: {}",
        out.show()
    );
    assert_eq!(lines_starting(&out.stdout, "done "), ["done 0", "done 1"]);
    assert!(
        out.stderr.contains("WARN launcher:")
            && out.stderr.contains("daemon connection refused")
            && out.stderr.contains(&format!("peer={ip}:"))
            && out.stderr.contains("did not prove this job's secret"),
        "the attempts were not logged with their address: {}",
        out.show()
    );
    for host in &h {
        assert!(cluster.pids(host).is_empty(), "processes left in {host}");
    }
}

#[test]
fn a_launcher_killed_outright_leaves_no_rank_running_on_any_host() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let mark = marker("lost-head");
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = kestrel_run(&["--host", &hosts, "--launch-agent", "ip netns exec"]);
    cmd.arg(example("fail")).args(["spin", &mark]);
    let mut launcher = start_spinning(cmd, &mark, DEADLINE);
    // SIGKILL: the launcher cleans nothing up; each host's daemon sees its connection close.
    launcher.kill().expect("kill the launcher");
    let _ = launcher.wait();
    let start = std::time::Instant::now();
    loop {
        let left: Vec<u32> = h.iter().flat_map(|host| cluster.pids(host)).collect();
        if left.is_empty() {
            break;
        }
        if start.elapsed() > Duration::from_secs(10) {
            kill_matching(&mark);
            panic!("10 s after the launcher died, processes still run on the hosts: {left:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}
