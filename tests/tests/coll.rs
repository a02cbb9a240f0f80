//! Collectives against a serial reference (`examples/coll_check`): every operation, op, type,
//! count, root and communicator size from 1 to 6, in place, on split sub-communicators (two at
//! once), 10,000 back-to-back operations, 8 ranks on 2 cores; through the shared-memory
//! engine and through each point-to-point algorithm.

use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(240);

fn check(ranks: u32, mca: &[(&str, &str)], mode: &[&str]) {
    let prog = example("coll_check");
    let n = ranks.to_string();
    let mut args: Vec<&str> = vec!["--oversubscribe", "-n", &n];
    for (k, v) in mca {
        args.extend_from_slice(&["--mca", k, v]);
    }
    args.push(prog.to_str().unwrap());
    args.extend_from_slice(mode);
    let out = run(kestrel_run(&args), DEADLINE);
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

#[test]
fn a_million_elements() {
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
