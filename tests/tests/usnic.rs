//! The network transport between namespace hosts (issue 5 acceptance): benchmarks and the
//! point-to-point and collective suites across hosts, a lossy data network, a rail going down
//! mid-transfer, a misconfigured MTU, a stranger spraying datagrams at the endpoints, and a
//! peer computing longer than the timeouts (answering liveness probes) waited for.
//!
//! Every job excludes the management network (198.18.0.0/24) so that traffic crosses the two
//! data networks, where the loss rules and link changes apply.

use std::process::Command;
use std::time::Duration;

use kestrel_tests::netns::Cluster;
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(240);
const DATA_ONLY: &str = "KESTREL_USNIC_IF_EXCLUDE=198.18.0.0/24";

/// `kestrel-run` over `hosts` ("h0:1,h1:1"), data networks only, plus `extra` launcher args.
/// The transports are self, shm and usnic unless `extra` names others: by default the ofi
/// transport would carry the large messages these tests send through usnic.
fn job(hosts: &str, extra: &[&str]) -> Command {
    let mut args = vec![
        "--host",
        hosts,
        "--launch-agent",
        "ip netns exec",
        "-x",
        DATA_ONLY,
    ];
    if !extra.contains(&"btl") {
        args.extend_from_slice(&["--mca", "btl", "self,shm,usnic"]);
    }
    args.extend_from_slice(extra);
    kestrel_run(&args)
}

#[test]
fn osu_latency_and_bw_complete_between_two_hosts() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    cluster.assert_osu_sweeps_complete(|| job(&hosts, &["--mca", "btl", "self,usnic"]), DEADLINE);
    cluster.assert_empty();
}

#[test]
fn p2p_and_collective_suites_pass_on_four_ranks_over_two_and_four_hosts() {
    let cluster = Cluster::up(4);
    let h = cluster.hosts();
    let two = format!("{}:2,{}:2", h[0], h[1]);
    let four = format!("{}:1,{}:1,{}:1,{}:1", h[0], h[1], h[2], h[3]);
    let suites: [&[&str]; 8] = [
        &["p2p_check", "random", "4000"],
        &["p2p_check", "wildcard"],
        &["p2p_check", "truncate"],
        &["p2p_check", "probe"],
        &["p2p_check", "sizes"],
        &["p2p_check", "sync"],
        &["p2p_check", "alltoall", "4"],
        &["coll_check"],
    ];
    for hosts in [&two, &four] {
        for suite in suites {
            let mut cmd = job(hosts, &[]);
            cmd.arg(example(suite[0])).args(&suite[1..]);
            let out = run(cmd, DEADLINE);
            assert!(out.success(), "{suite:?} on {hosts}: {}", out.show());
            // p2p_check names its transports; across hosts they must include usnic.
            assert!(
                out.stdout.contains("passed")
                    && (suite[0] != "p2p_check" || out.stdout.contains("usnic")),
                "{suite:?} on {hosts}: {}",
                out.show()
            );
        }
    }
    cluster.assert_empty();
}

#[test]
fn a_hundred_thousand_messages_arrive_intact_through_five_percent_loss() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    cluster.lose(5);
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = job(&hosts, &["-x", "KESTREL_USNIC_STATS=1"]);
    cmd.arg(example("p2p_check"))
        .args(["random", "100000", "4m"]);
    let out = run(cmd, Duration::from_secs(600));
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("p2p_check random: passed on 2 ranks"),
        "{}",
        out.show()
    );
    // The loss rule really dropped traffic, and the transport really resent it.
    let dropped = cluster.loss_drops(&h[0]) + cluster.loss_drops(&h[1]);
    assert!(
        dropped > 1000,
        "only {dropped} datagrams dropped: is the rule active?"
    );
    let resent: u64 = stats_column(&out.stderr, 6);
    assert!(
        resent > 0,
        "no resends with {dropped} drops: {}",
        out.show()
    );
    eprintln!("5 % loss: {dropped} datagrams dropped, {resent} resent");
    cluster.assert_empty();
}

/// Sum over the stats lines of column `resent` ("T+F" summed) of the `usnic_stats` report.
fn stats_column(stderr: &str, col: usize) -> u64 {
    stderr
        .lines()
        .filter(|l| l.trim_start().starts_with("rank ") && l.contains("->"))
        .filter_map(|l| l.split_whitespace().nth(col))
        .map(|f| {
            f.split('+')
                .filter_map(|n| n.parse::<u64>().ok())
                .sum::<u64>()
        })
        .sum()
}

#[test]
fn a_rail_going_down_mid_transfer_moves_the_traffic_to_the_other() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = job(
        &hosts,
        &[
            "-x",
            "KESTREL_USNIC_STATS=1",
            "-x",
            "KESTREL_USNIC_FAIL_AFTER_MS=1000",
        ],
    );
    cmd.arg(example("p2p_check"))
        .args(["random", "20000", "4m"]);
    // Cut once the transfer is well under way on eth1 (50 MB received there).
    let cutter = cluster.cut_link_after(&h[1], "eth1", 50_000_000);
    let out = run(cmd, DEADLINE);
    cutter.join().expect("the link cutter");
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("p2p_check random: passed on 2 ranks"),
        "{}",
        out.show()
    );
    assert!(
        out.stderr.contains("failed: no acknowledgement"),
        "the dead rail was not detected (did the transfer end before the cut?): {}",
        out.show()
    );
    assert!(out.stderr.contains(" dead "), "{}", out.show());
    cluster.assert_empty();
}

#[test]
fn a_path_that_drops_large_datagrams_is_diagnosed_as_an_mtu_mismatch() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    // The bridge port of h1's eth2 takes small frames only: the interfaces both say 1500.
    let port = format!("kv{}e2", h[1]);
    let st = Command::new("ip")
        .args(["link", "set", &port, "mtu", "1000"])
        .status()
        .unwrap();
    assert!(st.success());
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = job(&hosts, &["-x", "KESTREL_USNIC_PROBE_TIMEOUT_MS=1500"]);
    cmd.arg(example("p2p_check")).args(["random", "4000"]);
    let out = run(cmd, DEADLINE);
    assert!(out.success(), "{}", out.show());
    assert!(out.stderr.contains("MTU mismatch"), "{}", out.show());
    cluster.assert_empty();
}

#[test]
fn datagrams_from_a_stranger_only_move_the_bad_datagram_counter() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = job(&hosts, &["-x", "KESTREL_USNIC_STATS=1"]);
    cmd.arg(example("p2p_check")).args(["random", "20000"]);
    let (from, target) = (h[0].clone(), h[1].clone());
    let sprayer = std::thread::spawn(move || spray(&from, &target, Duration::from_secs(3)));
    let out = run(cmd, DEADLINE);
    let sent = sprayer.join().unwrap();
    assert!(out.success(), "{}", out.show());
    assert!(sent > 0, "no endpoint was found to spray at");
    let bad: u64 = out
        .stderr
        .lines()
        .filter(|l| l.contains("bad datagrams"))
        .filter_map(|l| l.split("bad datagrams ").nth(1))
        .filter_map(|r| r.split_whitespace().next())
        .filter_map(|n| n.parse::<u64>().ok())
        .sum();
    assert!(
        bad > 0,
        "{sent} stray datagrams sent but none counted: {}",
        out.show()
    );
    eprintln!("stranger sent {sent} datagrams, {bad} counted as bad");
    cluster.assert_empty();
}

/// From inside host `from` (a stranger to the job), sends random datagrams to every UDP port
/// bound on `host`'s data addresses, for `how_long`; returns how many were sent.
fn spray(from: &str, host: &str, how_long: Duration) -> u64 {
    let start = std::time::Instant::now();
    let mut sent = 0;
    while start.elapsed() < how_long {
        let Ok(out) = Command::new("ip")
            .args(["netns", "exec", host, "ss", "-Hunl"])
            .output()
        else {
            break;
        };
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        let targets: Vec<(String, String)> = text
            .lines()
            .filter_map(|l| l.split_whitespace().nth(3))
            .filter(|a| a.starts_with("198.18.1.") || a.starts_with("198.18.2."))
            .filter_map(|a| a.rsplit_once(':'))
            .map(|(ip, port)| (ip.to_string(), port.to_string()))
            .collect();
        if targets.is_empty() {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let mut script = String::from("for i in 1 2 3 4 5 6 7 8 9 10; do\n");
        for (ip, port) in &targets {
            script.push_str(&format!(
                "head -c $((RANDOM % 1400)) /dev/urandom > /dev/udp/{ip}/{port}\n"
            ));
        }
        script.push_str("done\n");
        let ok = Command::new("ip")
            .args(["netns", "exec", from, "bash", "-c", &script])
            .status()
            .is_ok_and(|s| s.success());
        if ok {
            sent += 10 * targets.len() as u64;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    sent
}

/// A peer that computes for longer than the peer timeout (and the first-contact probe
/// timeout) without calling MPI, while a message to it waits for its acknowledgement, is only
/// busy: its liveness responder answers over the same link, so the sender waits, and the
/// busy rank, back, does not take the silence it did not listen to for a dead path. Before
/// the probes either side stopped the job.
#[test]
fn a_peer_computing_longer_than_the_peer_timeout_is_not_taken_for_dead() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let cmd = job(
        &hosts,
        &[
            "--mca",
            "usnic_fail_after_ms",
            "500",
            "--mca",
            "usnic_peer_timeout_ms",
            "2000",
            "--mca",
            "usnic_probe_timeout_ms",
            "2000",
        ],
    );
    cluster.assert_busy_peer_is_waited_for(cmd, DEADLINE);
    cluster.assert_empty();
}
