//! Multi-host jobs on network-namespace test hosts: per-host daemons started through
//! `--launch-agent 'ip netns exec'`, node ids per host, combined fences, and failure on a
//! remote host.

use std::time::Duration;

use kestrel_tests::netns::Cluster;
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
