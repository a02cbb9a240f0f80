//! One-sided communication through the Rust API (`examples/rma_check`): windows of
//! `allocate_window` (shared memory on a node) and of `with_window` (active messages), on
//! one node at 1-6 ranks and across two namespace hosts (every target over the network, and
//! mixed: two ranks per host).

use std::time::Duration;

use kestrel_tests::netns::Cluster;
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(120);

fn passed(out: &Outcome, ranks: u32, how: &str) {
    assert!(
        out.success()
            && out
                .stdout
                .contains(&format!("rma_check passed on {ranks} ranks")),
        "rma_check on {ranks} ranks {how}: {}",
        out.show()
    );
}

#[test]
fn one_sided_rust_api_on_one_to_six_ranks() {
    let prog = example("rma_check");
    for ranks in [1u32, 2, 3, 4, 6] {
        let n = ranks.to_string();
        let out = run(
            kestrel_run(&["--oversubscribe", "-n", &n, prog.to_str().unwrap()]),
            DEADLINE,
        );
        passed(&out, ranks, "on one node");
    }
}

#[test]
fn one_sided_rust_api_across_namespace_hosts() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let prog = example("rma_check");
    for per_host in [1u32, 2] {
        let hosts = format!("{}:{per_host},{}:{per_host}", h[0], h[1]);
        let out = run(
            kestrel_run(&[
                "--host",
                &hosts,
                "--launch-agent",
                "ip netns exec",
                prog.to_str().unwrap(),
            ]),
            DEADLINE,
        );
        passed(&out, 2 * per_host, &format!("on {hosts}"));
    }
    for host in h {
        assert!(cluster.pids(host).is_empty(), "processes left in {host}");
    }
}
