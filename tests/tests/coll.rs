//! Collectives against a serial reference (`examples/coll_check`): every operation, op, type,
//! count, root and communicator size from 1 to 6, in place, on split sub-communicators (two at
//! once), 10,000 back-to-back operations, 8 and 16 ranks on 2 cores (32 and 64 in closing
//! runs); through the shared-memory engine and through each point-to-point algorithm.

use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(240);

fn check(ranks: u32, mca: &[(&str, &str)], mode: &[&str]) {
    check_within(ranks, mca, mode, DEADLINE);
}

fn check_within(ranks: u32, mca: &[(&str, &str)], mode: &[&str], deadline: Duration) {
    let prog = example("coll_check");
    let n = ranks.to_string();
    let mut args: Vec<&str> = vec!["--oversubscribe", "-n", &n];
    for (k, v) in mca {
        args.extend_from_slice(&["--mca", k, v]);
    }
    args.push(prog.to_str().unwrap());
    args.extend_from_slice(mode);
    let out = run(kestrel_run(&args), deadline);
    assert!(
        out.success(),
        "coll_check {mode:?} on {ranks} ranks with {mca:?}: {}",
        out.show()
    );
    assert!(out.stdout.contains("passed"), "{}", out.show());
}

#[test]
fn every_collective_and_op_on_sizes_one_to_six_shared_memory() {
    check(6, &[], &["full"]);
}

#[test]
fn every_collective_and_op_on_sizes_one_to_six_point_to_point() {
    check(6, &[("coll_shm", "false")], &["full"]);
}

#[test]
fn forced_point_to_point_algorithms() {
    for (k, v) in [
        ("coll_allreduce", "ring"),
        ("coll_allreduce", "recursive_doubling"),
        ("coll_allreduce", "reduce_bcast"),
        ("coll_bcast", "linear"),
        ("coll_reduce", "linear"),
        ("coll_allgather", "recursive_doubling"),
        ("coll_allgather", "gather_bcast"),
        ("coll_alltoall", "linear"),
    ] {
        check(4, &[("coll_shm", "false"), (k, v)], &["full"]);
    }
}

/// The node segment on, but gather and scatter forced to messages (`auto` takes one round of
/// the segment for small blocks).
#[test]
fn forced_linear_gather_and_scatter_beside_the_segment() {
    check(
        4,
        &[("coll_gather", "linear"), ("coll_scatter", "linear")],
        &["full"],
    );
}

#[test]
fn user_defined_operations_commutative_or_not() {
    check(5, &[], &["user"]);
    check(5, &[("coll_shm", "false")], &["user"]);
}

#[test]
fn two_sub_communicators_at_the_same_time() {
    check(6, &[], &["concurrent"]);
    check(6, &[("coll_shm", "false")], &["concurrent"]);
}

#[test]
fn ten_thousand_back_to_back_collectives() {
    check(4, &[], &["repeat", "10000"]);
    check(3, &[("coll_shm", "false")], &["repeat", "10000"]);
}

#[test]
fn eight_ranks_on_two_cores() {
    check(8, &[], &["full"]);
}

/// Issue 20's large rank counts: 16 ranks, 8 to a core on the CI machine, in CI; 32 and 64
/// (16 and 32 to a core) are closing measurements, run with `KESTREL_TEST_COLL_LARGE=1`.
/// Every root of every rooted collective is a round of context switches through all ranks,
/// and the time grows much faster than the rank count: on the 2-core test machine (session
/// 30, fast core-to-core state) 32 ranks took 81 s and 64 took 748-816 s (the build of
/// session 28's start the same), hence the 64-rank deadline.
#[test]
fn sixteen_ranks_on_two_cores_and_thirty_two_and_sixty_four_in_closing_runs() {
    check(16, &[], &["full"]);
    if std::env::var("KESTREL_TEST_COLL_LARGE").is_ok_and(|v| v == "1") {
        check(32, &[], &["full"]);
        check_within(64, &[], &["full"], Duration::from_secs(1800));
    }
}

#[test]
fn a_million_elements() {
    // The segment from the first collective, so that every reduction of `large` goes
    // through it (between two members: the pair stream and single copy).
    check(2, &[("coll_shm_setup_after", "1")], &["large"]);
    check(4, &[], &["large"]);
    check(3, &[("coll_shm", "false")], &["large"]);
}

#[test]
fn shared_memory_fragments_smaller_than_messages() {
    check(
        3,
        &[
            ("coll_shm_fragment_size", "128"),
            ("coll_shm_sets", "3"),
            ("coll_shm_tree_degree", "2"),
        ],
        &["full"],
    );
}

/// Process topologies, neighborhood collectives (blocking, immediate, persistent) and
/// subgroup communicators through the Rust API (`examples/topo_check`), on 1, 2, 3, 4 and 6
/// ranks: grids with a process its own or its neighbor's neighbor twice (1 or 2 ranks along
/// a periodic dimension), prime sizes (3-by-1 grids), and a 3-by-2 grid.
#[test]
fn topologies_and_neighborhood_collectives_on_one_to_six_ranks() {
    let prog = example("topo_check");
    for ranks in [1u32, 2, 3, 4, 6] {
        let n = ranks.to_string();
        let out = run(
            kestrel_run(&["--oversubscribe", "-n", &n, prog.to_str().unwrap()]),
            Duration::from_secs(120),
        );
        assert!(
            out.success()
                && out
                    .stdout
                    .contains(&format!("topo_check passed on {ranks} ranks")),
            "topo_check on {ranks} ranks: {}",
            out.show()
        );
    }
}

/// A tuning table file (`coll_tuning_file`, issue 20) that switches algorithms by size and
/// communicator size within one job, through the message algorithms (`coll_shm=false`):
/// every answer still right, and the log shows the table's choices were taken.
#[test]
fn a_tuning_table_switches_algorithms_by_size_and_communicator_size() {
    let table =
        std::env::temp_dir().join(format!("kestrel-coll-tuning-{}.conf", std::process::id()));
    std::fs::write(
        &table,
        "# written by the coll test\n\
         kestrel-coll-tuning 1\n\
         allreduce node * 0 reduce_bcast\n\
         allreduce node * 64 ring\n\
         allreduce node 4 4K recursive_doubling\n\
         bcast node * 256 linear\n\
         reduce node 3-* 128 linear\n\
         allgather node * 0 gather_bcast\n\
         allgather node * 512 ring\n\
         alltoall node * 64 linear\n",
    )
    .unwrap();
    let prog = example("coll_check");
    let setting = format!("KESTREL_COLL_TUNING_FILE={}", table.display());
    let out = run(
        kestrel_run(&[
            "--oversubscribe",
            "-n",
            "4",
            "--mca",
            "coll_shm",
            "false",
            "-x",
            &setting,
            "-x",
            "KESTREL_VERBOSE=coll:trace",
            prog.to_str().unwrap(),
            "full",
        ]),
        DEADLINE,
    );
    let bad = std::env::temp_dir().join(format!(
        "kestrel-coll-tuning-bad-{}.conf",
        std::process::id()
    ));
    std::fs::write(
        &bad,
        "kestrel-coll-tuning 1\nallreduce node * 0 ring\nbcast node * 1K fastest\n",
    )
    .unwrap();
    let bad_setting = format!("KESTREL_COLL_TUNING_FILE={}", bad.display());
    let refused = run(
        kestrel_run(&["-n", "2", "-x", &bad_setting, prog.to_str().unwrap()]),
        DEADLINE,
    );
    let _ = std::fs::remove_file(&table);
    let _ = std::fs::remove_file(&bad);
    assert!(
        out.success() && out.stdout.contains("passed"),
        "coll_check with a tuning table: {}",
        out.show()
    );
    let logged = |coll: &str, algo: &str| {
        out.stderr.lines().any(|l| {
            l.contains("chosen")
                && l.contains(&format!("coll=\"{coll}\""))
                && l.contains(&format!("algo=\"{algo}\""))
        })
    };
    for (coll, algo) in [
        ("allreduce", "reduce_bcast"),
        ("allreduce", "ring"),
        ("allreduce", "recursive_doubling"),
        ("bcast", "binomial"),
        ("bcast", "linear"),
        ("reduce", "linear"),
        ("reduce", "binomial"),
        ("allgather", "gather_bcast"),
        ("allgather", "ring"),
        ("alltoall", "pairwise"),
        ("alltoall", "linear"),
    ] {
        assert!(logged(coll, algo), "no {coll} chose {algo}: {}", out.show());
    }
    // A malformed table stops the start, naming the file, the line and the problem.
    assert!(!refused.success(), "{}", refused.show());
    let said = format!("{}{}", refused.stderr, refused.stdout);
    assert!(
        said.contains("line 3")
            && said.contains("fastest")
            && said.contains(&bad.display().to_string()),
        "{}",
        refused.show()
    );
}

/// `hierarchical` forced on one node (no hierarchy possible) falls back to the table's
/// message algorithms.
#[test]
fn hierarchical_forced_on_one_node_runs_flat() {
    check(
        4,
        &[
            ("coll_shm", "false"),
            ("coll_barrier", "hierarchical"),
            ("coll_bcast", "hierarchical"),
            ("coll_allreduce", "hierarchical"),
            ("coll_allgather", "hierarchical"),
            ("coll_gather", "hierarchical"),
        ],
        &["full"],
    );
}
