//! Point-to-point semantics through the launcher and the shared-memory transport, with single
//! copy on (where permitted) and forced off. Each scenario is a self-checking mode of
//! `examples/p2p_check`.

use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(120);

fn check(ranks: u32, single_copy: &str, mode: &[&str]) {
    let prog = example("p2p_check");
    let n = ranks.to_string();
    let mut args = vec![
        "--oversubscribe",
        "-n",
        &n,
        "--mca",
        "shm_single_copy",
        single_copy,
        prog.to_str().unwrap(),
    ];
    args.extend_from_slice(mode);
    let out = run(kestrel_run(&args), DEADLINE);
    assert!(
        out.success(),
        "p2p_check {mode:?} on {ranks} ranks, single copy {single_copy}: {}",
        out.show()
    );
    assert!(out.stdout.contains("passed"), "{}", out.show());
    assert!(
        out.stdout.contains("shm"),
        "expected the shm transport: {}",
        out.show()
    );
}

macro_rules! scenario {
    ($name:ident, $ranks:expr, $($mode:expr),+) => {
        mod $name {
            #[test]
            fn single_copy() {
                super::check($ranks, "auto", &[$($mode),+]);
            }
            #[test]
            fn copy_pipeline() {
                super::check($ranks, "none", &[$($mode),+]);
            }
        }
    };
}

scenario!(
    ten_thousand_random_messages_keep_order_and_contents,
    2,
    "random",
    "10000"
);
scenario!(random_messages_between_three_ranks, 3, "random", "3000");
scenario!(wildcard_source_and_tag, 4, "wildcard");
scenario!(truncation_consumes_the_message, 2, "truncate");
scenario!(probe_and_matched_probe, 2, "probe");
scenario!(sizes_around_the_eager_limit_up_to_64_mib, 2, "sizes");
scenario!(thousand_outstanding_requests, 2, "outstanding");
scenario!(eight_ranks_all_to_all_on_two_cores, 8, "alltoall", "10");
scenario!(synchronous_send_waits_for_the_match, 2, "sync");
scenario!(cancel_an_unmatched_receive, 2, "cancel");
scenario!(
    a_request_returned_out_of_its_scope_is_harmless_and_waiting_for_it_panics,
    2,
    "escape"
);
scenario!(dup_and_split_communicators, 5, "comms");
scenario!(proc_null_moves_nothing, 2, "procnull");
scenario!(sendrecv_ring_does_not_deadlock, 3, "sendrecv");

#[test]
fn rust_examples_run_on_two_and_three_ranks() {
    for (prog, n) in [
        ("pingpong", "2"),
        ("pingpong", "3"),
        ("ring", "2"),
        ("ring", "3"),
    ] {
        let p = example(prog);
        let out = run(
            kestrel_run(&["--oversubscribe", "-n", n, p.to_str().unwrap()]),
            DEADLINE,
        );
        assert!(out.success(), "{prog} -n {n}: {}", out.show());
        assert!(out.stdout.starts_with(prog), "{}", out.show());
    }
}

/// Killing a rank in the middle of 64 MiB transfers stops the job and leaves no shared memory.
fn kill_mid_transfer(single_copy: &str) {
    let prog = example("p2p_check");
    let mut child = kestrel_run(&[
        "-n",
        "2",
        "--mca",
        "shm_single_copy",
        single_copy,
        prog.to_str().unwrap(),
        "stream",
    ])
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut victim = None;
    let mut job = String::new();
    for _ in 0..2 {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut out, &mut line).unwrap();
        // "stream: rank R pid P job J"
        let words: Vec<&str> = line.split_whitespace().collect();
        job = words.get(6).unwrap_or(&"").to_string();
        if words.get(2) == Some(&"1") {
            victim = words.get(4).and_then(|p| p.parse::<i32>().ok());
        }
    }
    let victim = victim.expect("rank 1 reported its pid");
    assert!(!job.is_empty(), "ranks did not report the job id");
    std::thread::sleep(Duration::from_millis(500));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let start = std::time::Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "job did not stop after a rank was killed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
    assert_eq!(status.code(), Some(137), "{err}");
    assert!(err.contains("rank 1") && err.contains("signal 9"), "{err}");
    let left: Vec<String> = job_files()
        .into_iter()
        .filter(|f| f.contains(&job))
        .collect();
    assert!(left.is_empty(), "files of the job left behind: {left:?}");
}

#[test]
fn killing_a_rank_mid_transfer_aborts_and_cleans_up_single_copy() {
    kill_mid_transfer("auto");
}

#[test]
fn killing_a_rank_mid_transfer_aborts_and_cleans_up_copy_pipeline() {
    kill_mid_transfer("none");
}

#[test]
fn split_copies_of_every_large_size_are_intact() {
    // Split copies (receiver reads half, sender writes half) from 4 KiB up, so the random and
    // truncation scenarios exercise them on many sizes and offsets.
    for mode in [&["random", "2000"][..], &["truncate"][..], &["sizes"][..]] {
        let prog = example("p2p_check");
        let mut args = vec![
            "-n",
            "2",
            "--mca",
            "pml_split_copy_min",
            "4096",
            prog.to_str().unwrap(),
        ];
        args.extend_from_slice(mode);
        let out = run(kestrel_run(&args), DEADLINE);
        assert!(out.success(), "{mode:?}: {}", out.show());
    }
}

/// `MPI_THREAD_MULTIPLE` through the Rust API (`kestrel::threads`, `examples/threads_check`):
/// four threads per rank, 100,000 ordered messages, shared wildcard receives, concurrent
/// collectives on duplicates; on 2 ranks and on 3 (the third joins the collectives).
#[test]
fn rust_api_threads_share_communicators_on_two_and_three_ranks() {
    let prog = example("threads_check");
    for ranks in [2u32, 3] {
        let n = ranks.to_string();
        let out = run(
            kestrel_run(&[
                "--oversubscribe",
                "-n",
                &n,
                "--timeout",
                "100",
                prog.to_str().unwrap(),
            ]),
            Duration::from_secs(120),
        );
        assert!(
            out.success()
                && out
                    .stdout
                    .contains(&format!("threads_check passed on {ranks} ranks")),
            "threads_check on {ranks} ranks: {}",
            out.show()
        );
    }
}
