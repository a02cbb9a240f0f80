//! The ofi transport (libfabric RDM endpoints, issue 18) between namespace hosts: the
//! point-to-point and collective suites over 2 hosts x 1 rank, 2 hosts x 2 ranks (shared memory
//! inside a host) and 4 hosts x 1 rank, with the provider named and chosen automatically; two
//! separately launched jobs meeting (DPM server/client) across hosts in the same layouts; a
//! lossy data network; the OSU benchmarks completing; a rank's crash reported as its signal;
//! large messages striped over two data links and small ones on one; a data link going down
//! mid-transfer, the active one or the striped one with another rail (the job completes) and
//! the only one (it stops, naming the pair), and one of three hosts losing a link (the others
//! keep striping over that network between themselves); a peer computing longer than the peer timeout (answering liveness
//! probes) waited for; an idle rank sleeping when its completion queues can wake it; large
//! messages read by the receiver from the sender's registered buffer (RMA), registrations
//! reused, memory mapped again at the same address read with its new contents.
//!
//! Every job excludes the management network (198.18.0.0/24), so the endpoint opens on a data
//! network, where the loss rules apply.

use std::process::Command;
use std::time::Duration;

use kestrel_tests::netns::Cluster;
use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(240);
const DATA_ONLY: &str = "KESTREL_OFI_IF_EXCLUDE=198.18.0.0/24";

/// One data network only: one rail, one pair to each peer.
const ONE_RAIL: &str = "KESTREL_OFI_IF_INCLUDE=198.18.1.0/24";

/// Large messages by RMA read (auto leaves it off over kernel TCP, where it is slower).
const RMA_ON: &str = "KESTREL_OFI_RMA=on";

/// `kestrel-run` over `hosts` ("h0:1,h1:1") with `btl`, data networks only (the first one
/// only when `extra` holds [`ONE_RAIL`]), plus `extra`.
fn job(hosts: &str, btl: &str, extra: &[&str]) -> Command {
    let networks = if extra.contains(&ONE_RAIL) {
        &[][..]
    } else {
        &["-x", DATA_ONLY][..]
    };
    let mut args = vec!["--host", hosts, "--launch-agent", "ip netns exec"];
    args.extend_from_slice(networks);
    args.extend_from_slice(&["--mca", "btl", btl]);
    args.extend_from_slice(extra);
    kestrel_run(&args)
}

const SUITES: [&[&str]; 8] = [
    &["p2p_check", "random", "4000"],
    &["p2p_check", "wildcard"],
    &["p2p_check", "truncate"],
    &["p2p_check", "probe"],
    &["p2p_check", "sizes"],
    &["p2p_check", "sync"],
    &["p2p_check", "alltoall", "4"],
    &["coll_check"],
];

fn run_suites(hosts: &str, btl: &str, extra: &[&str]) {
    for suite in SUITES {
        let mut cmd = job(hosts, btl, extra);
        cmd.arg(example(suite[0])).args(&suite[1..]);
        let out = run(cmd, DEADLINE);
        assert!(
            out.success(),
            "{suite:?} on {hosts} ({btl} {extra:?}): {}",
            out.show()
        );
        // p2p_check names its transports; across hosts they must include ofi.
        assert!(
            out.stdout.contains("passed")
                && (suite[0] != "p2p_check" || out.stdout.contains("ofi")),
            "{suite:?} on {hosts}: {}",
            out.show()
        );
    }
}

#[test]
fn suites_pass_over_ofi_on_two_hosts_by_one_and_two_and_four_hosts_by_one_and_by_rma() {
    let cluster = Cluster::up(4);
    let h = cluster.hosts();
    let two_by_one = format!("{}:1,{}:1", h[0], h[1]);
    let two_by_two = format!("{}:2,{}:2", h[0], h[1]);
    let four = format!("{}:1,{}:1,{}:1,{}:1", h[0], h[1], h[2], h[3]);
    let named = ["-x", "KESTREL_OFI_PROVIDER=tcp;ofi_rxm"];
    run_suites(&two_by_one, "self,ofi", &named);
    run_suites(&two_by_two, "self,shm,ofi", &named);
    // The provider chosen automatically (net here: auto prefers it to tcp;ofi_rxm).
    run_suites(&four, "self,ofi", &[]);
    // One data network (one rail) with RMA on: rendezvous messages are read from the
    // sender's buffer, over both providers.
    let rma = ["-x", ONE_RAIL, "-x", RMA_ON];
    run_suites(&two_by_one, "self,ofi", &rma);
    run_suites(
        &two_by_two,
        "self,shm,ofi",
        &[&rma[..], &named[..]].concat(),
    );
    cluster.assert_empty();
}

/// Two separately launched jobs meet across namespace hosts over ofi: each job on its own
/// host; both jobs spread over 2 hosts with shared memory inside a host; the jobs over 4
/// hosts with the provider chosen automatically.
#[test]
fn separately_launched_jobs_connect_across_hosts_over_ofi() {
    let cluster = Cluster::up(4);
    let h = cluster.hosts();
    let named = ["-x", "KESTREL_OFI_PROVIDER=tcp;ofi_rxm"];
    let layouts: [(String, String, &str, &[&str]); 3] = [
        (
            format!("{}:2", h[0]),
            format!("{}:3", h[1]),
            "self,ofi",
            &named,
        ),
        (
            format!("{}:1,{}:1", h[0], h[1]),
            format!("{}:1,{}:2", h[0], h[1]),
            "self,shm,ofi",
            &named,
        ),
        (
            format!("{}:1,{}:1", h[0], h[1]),
            format!("{}:1,{}:1,{}:1", h[2], h[3], h[0]),
            "self,ofi",
            &[],
        ),
    ];
    for (server, client, btl, extra) in &layouts {
        kestrel_tests::dpm::server_and_client(&|n| {
            let hosts = if n == "2" { server } else { client };
            job(hosts, btl, extra)
        });
    }
    cluster.assert_empty();
}

#[test]
fn messages_arrive_intact_and_in_order_through_five_percent_loss() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    cluster.lose(5);
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    // CI runs 20,000 messages; the closing measurements run 100,000 (KESTREL_TEST_OFI_LOSS_N).
    let n = std::env::var("KESTREL_TEST_OFI_LOSS_N").unwrap_or_else(|_| "20000".into());
    let mut cmd = job(&hosts, "self,ofi", &[]);
    cmd.arg(example("p2p_check")).args(["random", &n, "4m"]);
    let out = run(cmd, Duration::from_secs(600));
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout
            .contains("p2p_check random: passed on 2 ranks over ofi"),
        "{}",
        out.show()
    );
    cluster.assert_empty();
}

#[test]
fn osu_latency_and_bw_complete_over_ofi() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    cluster.assert_osu_sweeps_complete(|| job(&hosts, "self,ofi", &[]), DEADLINE);
    cluster.assert_empty();
}

#[test]
fn a_ranks_segfault_over_ofi_is_reported_as_signal_11() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = job(&hosts, "self,ofi", &[]);
    cmd.arg(example("fail")).arg("segv");
    let out = run(cmd, DEADLINE);
    assert!(!out.success(), "{}", out.show());
    assert!(out.stderr.contains("killed by signal 11"), "{}", out.show());
    cluster.assert_empty();
}

#[test]
fn by_default_messages_take_usnic_and_large_data_takes_ofi() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:2,{}:2", h[0], h[1]);
    for suite in [
        &["p2p_check", "sizes"][..],
        &["p2p_check", "random", "4000", "1m"],
        &["coll_check"],
    ] {
        // No btl choice: shm inside a host, usnic and ofi between them.
        let args = [
            "--host",
            &hosts,
            "--launch-agent",
            "ip netns exec",
            "-x",
            DATA_ONLY,
            "-x",
            "KESTREL_USNIC_IF_EXCLUDE=198.18.0.0/24",
            "-x",
            "KESTREL_VERBOSE=btl:info",
        ];
        let mut cmd = kestrel_run(&args);
        cmd.arg(example(suite[0])).args(&suite[1..]);
        let out = run(cmd, DEADLINE);
        assert!(out.success(), "{suite:?}: {}", out.show());
        assert!(out.stdout.contains("passed"), "{suite:?}: {}", out.show());
        if suite[0] == "p2p_check" {
            assert!(
                out.stdout.contains("ofi") && out.stdout.contains("usnic"),
                "{suite:?} does not use both network transports: {}",
                out.show()
            );
        }
        // The transport set says which peers split messages and rendezvous data.
        assert!(
            out.stderr
                .contains("messages and rendezvous data take different transports"),
            "{suite:?}: {}",
            out.show()
        );
    }
    cluster.assert_empty();
}

/// Sets `cut` of the second host down after 50 MB of a 4 MiB random transfer over both data
/// networks (every peer is reached over an eth1 pair, active, and an eth2 pair, striped) and
/// asserts the job completed on `survivor`, the dead pair named.
fn a_job_survives_losing(cut: &str, survivor: &str) {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let mut cmd = job(
        &hosts,
        "self,ofi",
        &["-x", "KESTREL_OFI_FAIL_AFTER_MS=1000"],
    );
    cmd.arg(example("p2p_check"))
        .args(["random", "20000", "4m"]);
    let cutter = cluster.cut_link_after(&h[1], cut, 50_000_000);
    let out = run(cmd, DEADLINE);
    cutter.join().expect("the link cutter");
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("p2p_check random: passed on 2 ranks"),
        "{}",
        out.show()
    );
    assert!(
        out.stderr.contains(&format!("heard nothing over {cut}"))
            && out.stderr.contains("that pair is taken as dead")
            && out
                .stderr
                .contains(&format!("the traffic moves to {survivor}")),
        "the dead pair was not detected (did the transfer end before the cut?): {}",
        out.show()
    );
    // Closing the dead rail's endpoint finds its stuck sends: expected, not a warning.
    assert!(!out.stderr.contains("fi_close failed"), "{}", out.show());
    cluster.assert_empty();
}

/// Three hosts, two data networks; the third host's second link goes down mid-transfer.
/// Every process moves its traffic with that host to the first network, and the two other
/// hosts go on striping over the second one between themselves: a pair's death is that pair's,
/// not its rail's.
#[test]
fn one_hosts_link_going_down_leaves_the_other_hosts_striping_over_that_network() {
    let cluster = Cluster::up(3);
    let h = cluster.hosts().to_vec();
    let hosts = format!("{}:1,{}:1,{}:1", h[0], h[1], h[2]);
    let mut cmd = job(
        &hosts,
        "self,ofi",
        &["-x", "KESTREL_OFI_FAIL_AFTER_MS=1000"],
    );
    cmd.arg(example("p2p_check"))
        .args(["random", "60000", "4m"]);
    // What the second host has received on eth2 when the third host's eth2 goes down: from
    // then on only the first host can send it anything there.
    let second = h[1].clone();
    let cutter = cluster.cut_link_after_then(&h[2], "eth2", 30_000_000, move || {
        kestrel_tests::netns::iface_bytes(&second, "eth2", "rx_bytes")
    });
    let out = run(cmd, DEADLINE);
    let at_cut = cutter.join().expect("the link cutter");
    let after = cluster.iface_bytes(&h[1], "eth2", "rx_bytes") - at_cut;
    assert!(out.success(), "{}", out.show());
    assert!(
        out.stdout.contains("p2p_check random: passed on 3 ranks"),
        "{}",
        out.show()
    );
    // Each of the first two processes took its pair to process 2 over eth2 as dead, and
    // process 2 both of its eth2 pairs.
    for (who, peer) in [(0, 2), (1, 2), (2, 0), (2, 1)] {
        assert!(
            out.stderr.contains(&format!(
                "process {who} heard nothing over eth2 (198.18.2.0/24) -> eth2 of process {peer}"
            )),
            "process {who}'s eth2 pair to process {peer} was not taken as dead: {}",
            out.show()
        );
    }
    for (who, peer) in [(0, 1), (1, 0)] {
        assert!(
            !out.stderr.contains(&format!(
                "process {who} heard nothing over eth2 (198.18.2.0/24) -> eth2 of process {peer}"
            )),
            "the live eth2 pair {who} -> {peer} was taken as dead: {}",
            out.show()
        );
    }
    assert!(
        after > 8 << 20,
        "the second host received only {after} bytes on eth2 after the cut: the first host \
         stopped striping to it over that network"
    );
    cluster.assert_empty();
}

#[test]
fn a_data_link_going_down_mid_transfer_moves_ofi_to_the_other_rail() {
    a_job_survives_losing("eth1", "eth2");
}

/// The striped link going down: its unacknowledged frames go again on the active pair.
#[test]
fn a_striped_data_link_going_down_leaves_the_traffic_on_the_active_rail() {
    a_job_survives_losing("eth2", "eth1");
}

/// Both data networks (eth1, eth2) pair the two hosts: messages of `ofi_stripe_min` (16 KiB)
/// and more are striped over both links by speed (equal here), smaller ones stay on the
/// active pair (eth1). Measured by the kernel's byte counters of the receiving host's links.
#[test]
fn large_messages_are_striped_over_both_data_links_and_small_ones_take_one() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let received = |iface: &str| cluster.iface_bytes(&h[1], iface, "rx_bytes");
    for (args, striped) in [
        (["-m", "1048576:1048576", "-i", "5", "-x", "1"], true),
        (["-m", "1024:1024", "-i", "200", "-x", "10"], false),
    ] {
        let before = (received("eth1"), received("eth2"));
        let mut cmd = job(&hosts, "self,ofi", &[]);
        cmd.arg(bin("osu_bw")).args(args);
        let out = run(cmd, DEADLINE);
        assert!(out.success(), "osu_bw {args:?}: {}", out.show());
        let eth1 = received("eth1") - before.0;
        let eth2 = received("eth2") - before.1;
        if striped {
            // 6 x 64 messages of 1 MiB: each link carries between a third and two thirds.
            let total = eth1 + eth2;
            assert!(total > 300 << 20, "{eth1} + {eth2} bytes");
            assert!(
                (total / 3..=total * 2 / 3).contains(&eth2),
                "1 MiB messages are not striped over both links: eth1 {eth1}, eth2 {eth2} bytes"
            );
        } else {
            assert!(
                eth2 < eth1 / 10,
                "1 KiB messages left the active pair: eth1 {eth1}, eth2 {eth2} bytes"
            );
        }
    }
    cluster.assert_empty();
}

#[test]
fn a_data_link_going_down_on_the_only_rail_stops_the_job_naming_the_pair() {
    // With the copy pipeline (frames outstanding) and with RMA reads (a read in flight).
    for rma in ["KESTREL_OFI_RMA=off", RMA_ON] {
        link_down_on_the_only_rail(rma);
    }
}

fn link_down_on_the_only_rail(rma: &str) {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let args = [
        "--host",
        &hosts,
        "--launch-agent",
        "ip netns exec",
        "-x",
        "KESTREL_OFI_IF_INCLUDE=198.18.1.0/24",
        "-x",
        "KESTREL_OFI_PEER_TIMEOUT_MS=2000",
        "-x",
        rma,
        "--mca",
        "btl",
        "self,ofi",
    ];
    let mut cmd = kestrel_run(&args);
    cmd.arg(example("p2p_check"))
        .args(["random", "20000", "4m"]);
    let cutter = cluster.cut_link_after(&h[1], "eth1", 50_000_000);
    let out = run(cmd, DEADLINE);
    let cut_at = cutter.join().expect("the link cutter");
    let after_cut = cut_at.elapsed();
    assert!(
        !out.success(),
        "{rma}: the job survived a dead link: {}",
        out.show()
    );
    assert!(
        out.stderr.contains("lost process")
            && out.stderr.contains("no acknowledgement")
            && out.stderr.contains("eth1 (")
            && out.stderr.contains("-> eth1 of process"),
        "{rma}: the error does not name the peer and the pair: {}",
        out.show()
    );
    // The peer timeout (2 s) plus the launcher taking the job down; far below TCP's own
    // give-up time (about 15 minutes).
    assert!(
        after_cut < Duration::from_secs(30),
        "{rma}: the job took {after_cut:?} after the cut to stop: {}",
        out.show()
    );
    cluster.assert_empty();
}

/// With completion queues that have a wait object (`ofi_cq_wait`), a rank waiting 2 s for a
/// peer that computes sleeps in poll(2) instead of spinning; with sleeping turned off it
/// spins (the contrast shows the measurement can tell them apart).
#[test]
fn an_idle_rank_sleeps_when_ofi_can_wake_it() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let cpu_share = |sleep_after: &str| {
        let mut cmd = job(
            &hosts,
            "self,ofi",
            &[
                "-x",
                "KESTREL_OFI_PROVIDER=tcp;ofi_rxm",
                "--mca",
                "ofi_cq_wait",
                "true",
                "--mca",
                "pml_idle_sleep_after_ms",
                sleep_after,
            ],
        );
        cmd.arg(example("idle_check")).arg("2000");
        let out = run(cmd, DEADLINE);
        assert!(out.success(), "{}", out.show());
        let line = out
            .stdout
            .lines()
            .find(|l| l.starts_with("idle_check rank 1:"))
            .unwrap_or_else(|| panic!("no report from rank 1: {}", out.show()));
        let num = |key: &str| -> f64 {
            let at = line.find(key).unwrap() + key.len();
            line[at..]
                .split_whitespace()
                .next()
                .unwrap()
                .parse()
                .unwrap()
        };
        let (waited, cpu) = (num("waited "), num("cpu "));
        assert!(waited >= 1900.0, "{line}");
        cpu / waited
    };
    let sleeping = cpu_share("10");
    let spinning = cpu_share("0");
    // 2-3 % here; 17-26 % while a sleep that timed out was followed by 1,024 polls.
    assert!(
        sleeping < 0.10,
        "the idle rank used {:.0} % of a core while sleeping was on",
        sleeping * 100.0
    );
    assert!(
        spinning > 0.5,
        "the idle rank used only {:.0} % of a core with sleeping off: the check cannot tell",
        spinning * 100.0
    );
    cluster.assert_empty();
}

/// A peer that computes for longer than the peer timeout without calling MPI, while a message
/// to it waits for its acknowledgement, is only busy: its liveness responder answers the
/// probes over the same link and the job completes (before probes, the sender stopped the
/// job after `ofi_peer_timeout_ms`, taking the peer for dead).
#[test]
fn a_peer_computing_longer_than_the_peer_timeout_is_not_taken_for_dead() {
    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    let cmd = job(
        &hosts,
        "self,ofi",
        &[
            "--mca",
            "ofi_fail_after_ms",
            "500",
            "--mca",
            "ofi_peer_timeout_ms",
            "2000",
        ],
    );
    cluster.assert_busy_peer_is_waited_for(cmd, DEADLINE);
    // The other way round over one data network, where the receiver reads the sender's
    // buffer (RMA): the read stalls while the sender computes 6 s without MPI calls (its
    // provider serves reads only when polled), and the sender's liveness answers keep the
    // receiver waiting instead of stopping the job after the 2 s peer timeout.
    let mut cmd = job(
        &hosts,
        "self,ofi",
        &[
            "-x",
            ONE_RAIL,
            "-x",
            RMA_ON,
            "--mca",
            "ofi_fail_after_ms",
            "500",
            "--mca",
            "ofi_peer_timeout_ms",
            "2000",
        ],
    );
    cmd.arg(example("idle_check")).args(["6000", "busy-sender"]);
    let out = run(cmd, DEADLINE);
    assert!(
        out.success()
            && out
                .stdout
                .contains("idle_check: busy senders waited for on 2 ranks"),
        "{}",
        out.show()
    );
    cluster.assert_empty();
}

/// The counters `tests/c/ofi_rma.c` prints for `rank`: (reads, registrations, reused).
fn rma_counters(out: &kestrel_tests::Outcome, rank: u32) -> (u64, u64, u64) {
    let prefix = format!("COUNTERS rank {rank} ");
    let line = lines_starting(&out.stdout, &prefix)
        .pop()
        .unwrap_or_else(|| panic!("no counters of rank {rank}: {}", out.show()));
    let words: Vec<&str> = line.split_whitespace().collect();
    let value = |name: &str| -> u64 {
        let i = words
            .iter()
            .position(|w| *w == name)
            .expect("named counter");
        words[i + 1].parse().expect("a number")
    };
    (value("reads"), value("registrations"), value("reused"))
}

/// Over one data network (one rail, one pair), rendezvous messages are read by the receiver
/// straight from the sender's buffer: every large message of `tests/c/ofi_rma.c` (a buffer
/// sent 20 times, a part of it, the buffer unmapped and mapped again at the same address with
/// new contents, an exchange, 8 slices in flight each way) arrives intact, the sender
/// registers its buffer once and reuses the registration for the rest. With `ofi_rma` off
/// the same program takes the copy pipeline (no read, no registration). The program passes
/// on MPICH first.
#[test]
fn large_messages_are_read_from_the_senders_registered_buffer() {
    let dir = scratch("ofi_rma");
    let src = repo().join("tests/c/ofi_rma.c");
    let on_mpich = dir.join("ofi_rma.mpich");
    let on_kestrel = dir.join("ofi_rma.kestrel");
    for (mut cc, exe) in [
        (Command::new(tool("mpicc.mpich", "libmpich-dev")), &on_mpich),
        (mpicc(), &on_kestrel),
    ] {
        let out = cc.args(["-O2", "-Wall", "-o"]).arg(exe).arg(&src).output();
        let out = out.expect("run the C compiler");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let mut mpich = Command::new(tool("mpiexec.mpich", "mpich"));
    mpich.args(["-n", "2"]).arg(&on_mpich);
    let out = run(mpich, DEADLINE);
    assert!(
        out.success() && lines_starting(&out.stdout, "PASS ofi_rma rank ").len() == 2,
        "on MPICH: {}",
        out.show()
    );

    let cluster = Cluster::up(2);
    let h = cluster.hosts();
    let hosts = format!("{}:1,{}:1", h[0], h[1]);
    for rma in ["on", "off"] {
        let setting = format!("KESTREL_OFI_RMA={rma}");
        // One data network: one rail, one pair to the peer.
        let mut cmd = kestrel_run(&[
            "--host",
            &hosts,
            "--launch-agent",
            "ip netns exec",
            "-x",
            "KESTREL_OFI_IF_INCLUDE=198.18.1.0/24",
            "-x",
            "KESTREL_TEST_OFI_RMA=1",
            "-x",
            &setting,
            "--mca",
            "btl",
            "self,ofi",
        ]);
        cmd.arg(&on_kestrel);
        let out = run(cmd, DEADLINE);
        assert!(
            out.success() && lines_starting(&out.stdout, "PASS ofi_rma rank ").len() == 2,
            "{setting}: {}",
            out.show()
        );
        let (sender_reads, sender_regs, sender_reused) = rma_counters(&out, 0);
        let (receiver_reads, receiver_regs, _) = rma_counters(&out, 1);
        if rma == "on" {
            // Rank 1 reads 20 + 1 + 1 + 1 + 8 messages, rank 0 the exchange and 8 slices.
            assert!(
                receiver_reads >= 31 && sender_reads >= 9,
                "reads {receiver_reads} and {sender_reads}: {}",
                out.show()
            );
            // Rank 0's buffer is registered once; every later message from it (the
            // remapped one included) reuses that registration.
            assert!(
                sender_regs == 1 && sender_reused >= 30,
                "registrations {sender_regs}, reused {sender_reused}: {}",
                out.show()
            );
        } else {
            assert_eq!(
                (sender_reads, receiver_reads, sender_regs, receiver_regs),
                (0, 0, 0, 0),
                "{setting}: {}",
                out.show()
            );
        }
    }
    cluster.assert_empty();
    let _ = std::fs::remove_dir_all(&dir);
}
