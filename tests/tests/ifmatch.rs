//! `kestrel-ifmatch` on namespace hosts: `list` and `card` inside a host, and `check` across
//! hosts under `kestrel-run`, passing on a healthy cluster and naming the pair when a data
//! interface is down.

use std::process::Command;
use std::time::Duration;

use kestrel_tests::netns::Cluster;
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(90);

fn ifmatch_in(host: &str, args: &[&str]) -> Outcome {
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", host])
        .arg(bin("kestrel-ifmatch"))
        .args(args);
    run(cmd, DEADLINE)
}

fn check(hosts: &str) -> Outcome {
    let mut cmd = kestrel_run(&[
        "--host",
        hosts,
        "--launch-agent",
        "ip netns exec",
        "-x",
        "KESTREL_USNIC_IF_EXCLUDE=198.18.0.0/24",
    ]);
    cmd.arg(bin("kestrel-ifmatch"))
        .args(["check", "--timeout", "2"]);
    run(cmd, DEADLINE)
}

#[test]
fn list_and_card_describe_a_namespace_host() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let out = ifmatch_in(&h[1], &["list"]);
    assert!(out.success(), "{}", out.show());
    for want in [
        "eth1",
        "198.18.1.11/24",
        "udp/",
        "used",
        "lo",
        "excluded: loopback",
    ] {
        assert!(
            out.stdout.contains(want),
            "list lacks '{want}': {}",
            out.show()
        );
    }
    // The last host has the extra interface on a subnet of its own.
    let out = ifmatch_in(&h[1], &["card", "--node", "n1"]);
    assert!(out.success(), "{}", out.show());
    let card: serde_json::Value = serde_json::from_str(&out.stdout).expect("card is JSON");
    assert_eq!(card["version"], 1);
    assert_eq!(card["node"], "n1");
    let names: Vec<&str> = card["interfaces"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["eth0", "eth1", "eth2", "eth3"], "{}", out.stdout);
    assert!(card["routes"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["dest"] == "198.18.3.0/24"));
    // Excluding by CIDR and speed overrides apply as in a job.
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &h[0]])
        .env("KESTREL_USNIC_IF_EXCLUDE", "198.18.0.0/24")
        .env("KESTREL_USNIC_LINK_SPEED", "eth1:25000")
        .arg(bin("kestrel-ifmatch"))
        .arg("list");
    let out = run(cmd, DEADLINE);
    assert!(out.success(), "{}", out.show());
    let eth0 = out.stdout.lines().find(|l| l.starts_with("eth0")).unwrap();
    assert!(
        eth0.contains("excluded") && eth0.contains("198.18.0.0/24"),
        "{eth0}"
    );
    let eth1 = out.stdout.lines().find(|l| l.starts_with("eth1")).unwrap();
    assert!(
        eth1.contains("25000 Mb/s (KESTREL_USNIC_LINK_SPEED)"),
        "{eth1}"
    );
}

#[test]
fn check_passes_across_hosts_and_names_the_pair_when_an_interface_is_down() {
    let cluster = Cluster::up(3);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1,{}:1", h[0], h[1], h[2]);
    let out = check(&hosts);
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("all 12 paths answered both probes"),
        "{}",
        out.show()
    );

    let st = Command::new("ip")
        .args(["-n", &h[1], "link", "set", "eth2", "down"])
        .status()
        .unwrap();
    assert!(st.success());
    let out = check(&hosts);
    assert!(
        !out.success(),
        "check passed with {}'s eth2 down: {}",
        h[1],
        out.show()
    );
    assert!(out.stdout.contains("FAILED"), "{}", out.show());
    let failing: Vec<&str> = out.stdout.lines().filter(|l| l.contains("eth2")).collect();
    assert!(
        failing
            .iter()
            .any(|l| l.contains(&h[1]) && l.contains("198.18.2.11") && l.contains("down")),
        "the down interface is not named: {}",
        out.show()
    );
    assert_eq!(cluster.pids(&h[0]).len() + cluster.pids(&h[1]).len(), 0);
}
