//! Hierarchical collectives (issue 20) between namespace hosts: `coll_check` (every
//! collective, op, type, root, in place, split sub-communicators, against serial references)
//! over 2 hosts x 2 ranks, 2 hosts x 3 ranks and an uneven 1 + 2 + 3 layout with the default
//! transports, where communicators spanning hosts run node / leaders / node phases; the same
//! with `coll_hierarchical=false` (flat algorithms) for comparison; 4 hosts x 1 rank stays
//! flat (one member per node), which the ofi suites cover; a tuning table that keeps the
//! hierarchy for small messages and goes flat for large ones.

use std::process::Command;
use std::time::Duration;

use kestrel_tests::netns::Cluster;
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(300);

/// `kestrel-run` of `coll_check` over `hosts` ("h0:2,h1:2") on the data networks, with the
/// `coll` component's decisions logged.
fn coll_check(hosts: &str, extra: &[&str]) -> Command {
    let ranks: u32 = hosts
        .split(',')
        .map(|h| h.rsplit(':').next().unwrap().parse::<u32>().unwrap())
        .sum();
    let n = ranks.to_string();
    let mut args = vec![
        "--oversubscribe",
        "-n",
        &n,
        "--host",
        hosts,
        "--launch-agent",
        "ip netns exec",
        "-x",
        "KESTREL_OFI_IF_EXCLUDE=198.18.0.0/24",
        "-x",
        "KESTREL_USNIC_IF_EXCLUDE=198.18.0.0/24",
        "-x",
        "KESTREL_VERBOSE=coll:debug",
    ];
    args.extend_from_slice(extra);
    let prog = example("coll_check");
    args.push(prog.to_str().unwrap());
    kestrel_run(&args)
}

/// How many "hierarchical collectives" decisions the job logged (one per member per
/// communicator that goes hierarchical).
fn hierarchies(out: &Outcome) -> usize {
    out.stderr
        .lines()
        .chain(out.stdout.lines())
        .filter(|l| l.contains("hierarchical collectives"))
        .count()
}

#[test]
fn every_collective_is_right_through_node_and_leader_phases() {
    let cluster = Cluster::up(3);
    let h = cluster.hosts();
    for (hosts, ranks) in [
        (format!("{}:2,{}:2", h[0], h[1]), 4),
        (format!("{}:3,{}:3", h[0], h[1]), 6),
        (format!("{}:1,{}:2,{}:3", h[0], h[1], h[2]), 6),
    ] {
        let out = run(coll_check(&hosts, &[]), DEADLINE);
        assert!(
            out.success() && out.stdout.contains("passed"),
            "coll_check on {hosts}: {}",
            out.show()
        );
        // The world communicator at least, on every member.
        let n = hierarchies(&out);
        assert!(
            n >= ranks,
            "coll_check on {hosts}: {n} hierarchical communicators logged, expected at least \
             one per rank ({ranks}): {}",
            out.show()
        );
    }
    // Each node's members not consecutive in the communicator: the reordering paths of the
    // hierarchical gathers and scatters (block placement above makes them the identity).
    let hosts = format!("{}:2,{}:2", h[0], h[1]);
    let mut cmd = coll_check(&hosts, &[]);
    cmd.arg("interleaved");
    let out = run(cmd, DEADLINE);
    assert!(
        out.success() && out.stdout.contains("interleaved: passed"),
        "coll_check interleaved on {hosts}: {}",
        out.show()
    );
    assert!(hierarchies(&out) >= 2 * 4, "{}", out.show());
    // Forced flat: the same answers, and no hierarchy.
    let hosts = format!("{}:2,{}:2", h[0], h[1]);
    let out = run(
        coll_check(&hosts, &["--mca", "coll_hierarchical", "false"]),
        DEADLINE,
    );
    assert!(
        out.success() && out.stdout.contains("passed"),
        "coll_check flat on {hosts}: {}",
        out.show()
    );
    assert_eq!(hierarchies(&out), 0, "{}", out.show());

    // A tuning table that keeps the hierarchy for small messages and runs flat algorithms
    // over every member for large ones, in the same communicators: still right, both taken.
    let table = std::env::temp_dir().join(format!(
        "kestrel-coll-tuning-hier-{}.conf",
        std::process::id()
    ));
    std::fs::write(
        &table,
        "kestrel-coll-tuning 1\n\
         allreduce hier * 1K ring\n\
         bcast hier 4 256 linear\n\
         reduce hier * 512 binomial\n\
         allgather hier * 2K ring\n\
         gather hier * 64 linear\n",
    )
    .unwrap();
    let setting = format!("KESTREL_COLL_TUNING_FILE={}", table.display());
    let out = run(
        coll_check(
            &hosts,
            &["-x", &setting, "-x", "KESTREL_VERBOSE=coll:trace"],
        ),
        DEADLINE,
    );
    let _ = std::fs::remove_file(&table);
    assert!(
        out.success() && out.stdout.contains("passed"),
        "coll_check with a tuning table on {hosts}: {}",
        out.show()
    );
    assert!(hierarchies(&out) >= 4, "{}", out.show());
    for (coll, algo) in [
        ("allreduce", "ring"),
        ("allreduce", "hierarchical"),
        ("bcast", "linear"),
        ("bcast", "hierarchical"),
        ("reduce", "binomial"),
        ("allgather", "ring"),
        ("gather", "linear"),
        ("gather", "hierarchical"),
    ] {
        let taken = out.stderr.lines().any(|l| {
            l.contains("chosen")
                && l.contains(&format!("coll=\"{coll}\""))
                && l.contains(&format!("algo=\"{algo}\""))
        });
        assert!(taken, "no {coll} chose {algo}: {}", out.show());
    }
}
