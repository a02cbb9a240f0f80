//! Nonblocking and persistent collectives through the Rust API (`examples/nbc_check`):
//! every immediate collective against the blocking one on 1 to 6 ranks, many outstanding at
//! once completed out of order, persistent ones restarted with new data; and overlap: a
//! rank computing without MPI calls does not hold its peer's allreduce back.

use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(120);

/// One job at a time: the overlap test measures a peer's wait, which another job sharing
/// the two cores would lengthen.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn nbc_check(ranks: u32, args: &[&str]) -> Outcome {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let prog = example("nbc_check");
    let n = ranks.to_string();
    let mut all = vec![
        "--oversubscribe",
        "-n",
        &n,
        "--timeout",
        "100",
        prog.to_str().unwrap(),
    ];
    all.extend_from_slice(args);
    let out = run(kestrel_run(&all), DEADLINE);
    assert!(
        out.success() && out.stdout.contains("nbc_check passed"),
        "nbc_check {args:?} on {ranks} ranks: {}",
        out.show()
    );
    out
}

#[test]
fn every_immediate_and_persistent_collective_matches_the_blocking_one_on_one_to_six_ranks() {
    for ranks in 1..=6 {
        nbc_check(ranks, &["full"]);
    }
}

/// The extra latency (µs) each waiting rank reported: its wait minus the same allreduce's
/// time when nobody computes.
fn extra_latencies(stdout: &str) -> Vec<f64> {
    stdout
        .lines()
        .filter(|l| l.starts_with("nbc_check overlap"))
        .filter_map(|l| {
            let rest = l.split("extra ").nth(1)?;
            rest.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

#[test]
fn a_peer_is_not_held_back_by_a_rank_that_computes_without_mpi_calls() {
    // Rank 0 starts the allreduce, computes 100 ms without MPI calls, then waits. Were the
    // schedule run inside the wait, its peer would wait about those 100 ms; the bound on
    // the extra latency is 40 ms (it is tens of microseconds on a quiet machine; the margin
    // is for a loaded CI machine, where a waiting rank can lose its core for a while). Two ranks: every size (the rendezvous of 1 MiB
    // included, sent in the background). Three and four ranks: small messages, whose
    // schedule has nothing left for rank 0 to forward after its first round (larger ones
    // need rank 0 to progress again: see docs/architecture.md).
    let cases: &[(u32, &str)] = &[(2, "8"), (2, "65536"), (2, "1048576"), (3, "8"), (4, "8")];
    for &(ranks, bytes) in cases {
        let out = nbc_check(ranks, &["overlap", bytes]);
        let extra = extra_latencies(&out.stdout);
        assert_eq!(
            extra.len(),
            ranks as usize - 1,
            "one line per waiting rank: {}",
            out.show()
        );
        for e in extra {
            assert!(
                e < 40_000.0,
                "{bytes} B on {ranks} ranks: a peer waited {e:.0} us more than without the \
                 computation: {}",
                out.show()
            );
        }
    }
}
