//! The OSU option parser and output formats against what OSU 7.4 accepts and prints.

use super::*;

fn run(spec: &Spec, args: &[&str]) -> Options {
    match parse(spec, args) {
        Parsed::Run(o) => o,
        other => panic!("{args:?}: expected options, got {other:?}"),
    }
}

fn bad_usage(spec: &Spec, args: &[&str]) -> String {
    match parse(spec, args) {
        Parsed::BadUsage(b) => b.to_string(),
        other => panic!("{args:?}: expected a bad usage, got {other:?}"),
    }
}

#[test]
fn defaults_follow_osu() {
    let lat = run(&LATENCY, &[]);
    assert_eq!(
        (
            lat.min_message_size,
            lat.max_message_size,
            lat.iterations,
            lat.skip
        ),
        (0, 4194304, 10000, 100)
    );
    assert_eq!((lat.iterations_large, lat.skip_large), (1000, 10));
    let bw = run(&BW, &[]);
    assert_eq!(
        (
            bw.min_message_size,
            bw.iterations,
            bw.skip,
            bw.iterations_large,
            bw.skip_large
        ),
        (1, 100, 10, 20, 2)
    );
    assert_eq!(
        (bw.window_size, bw.max_mem_limit, bw.print_rate),
        (64, 536870912, true)
    );
    assert_eq!(bw.iterations_for(8192), 100);
    assert_eq!(bw.iterations_for(8193), 20);
    assert_eq!(bw.skip_for(16384), 2);
    assert_eq!(lat.skip_for(8192), 100);
}

#[test]
fn sizes_are_osu_loops() {
    let lat = run(&LATENCY, &[]);
    let s = lat.sizes(&LATENCY);
    assert_eq!(s.first(), Some(&1));
    assert_eq!(s.last(), Some(&4194304));
    assert_eq!(s.len(), 23);
    let bw = run(&BW, &["-m", "3:50"]);
    assert_eq!(bw.sizes(&BW), vec![3, 6, 12, 24, 48]);
    let lat = run(&LATENCY, &["-m", "0"]);
    assert!(lat.sizes(&LATENCY).is_empty());
    let lat = run(&LATENCY, &["-m", "1"]);
    assert_eq!(lat.sizes(&LATENCY), vec![1]);
    let huge = run(&BW, &["-m", "9223372036854775807"]);
    assert_eq!(huge.sizes(&BW).len(), 63);
}

#[test]
fn message_size_forms() {
    let o = run(&LATENCY, &["-m", "128"]);
    assert_eq!((o.min_message_size, o.max_message_size), (0, 128));
    let o = run(&LATENCY, &["-m", "2:128"]);
    assert_eq!((o.min_message_size, o.max_message_size), (2, 128));
    let o = run(&BW, &["-m", "2:"]);
    assert_eq!((o.min_message_size, o.max_message_size), (2, 4194304));
    let o = run(&BW, &["-m", ":64"]);
    assert_eq!((o.min_message_size, o.max_message_size), (1, 64));
    // As in OSU: a bad minimum next to a good maximum is ignored.
    let o = run(&BW, &["-m", "0:64"]);
    assert_eq!((o.min_message_size, o.max_message_size), (1, 64));
    let o = run(&BW, &["--message-size=8:16"]);
    assert_eq!((o.min_message_size, o.max_message_size), (8, 16));
    assert_eq!(
        bad_usage(&BW, &["-m", "1:2:3"]),
        "Invalid Message Size [-m 1:2:3]"
    );
    assert_eq!(bad_usage(&BW, &["-m", ":"]), "Invalid Message Size [-m :]");
    assert_eq!(
        bad_usage(&BW, &["-m", "-5"]),
        "Invalid Message Size [-m -5]"
    );
    assert_eq!(
        bad_usage(&BW, &["-m", "0:"]),
        "Invalid Message Size [-m 0:]"
    );
}

#[test]
fn iterations_warmup_window() {
    let o = run(&BW, &["-i", "7", "-x", "0", "-W", "3"]);
    assert_eq!(
        (o.iterations, o.iterations_large, o.skip, o.skip_large),
        (7, 7, 0, 0)
    );
    assert_eq!(o.window_size, 3);
    let o = run(&BW, &["-i5", "--warmup", "2", "--window-size=9"]);
    assert_eq!((o.iterations, o.skip, o.window_size), (5, 2, 9));
    let o = run(&LATENCY, &["--iter", "12", "--warm=1"]);
    assert_eq!((o.iterations, o.skip), (12, 1));
    assert_eq!(
        bad_usage(&LATENCY, &["-i", "0"]),
        "Invalid Number of Iterations [-i 0]"
    );
    assert_eq!(
        bad_usage(&LATENCY, &["-i", "abc"]),
        "Invalid Number of Iterations [-i abc]"
    );
    assert_eq!(
        bad_usage(&LATENCY, &["-x", "-1"]),
        "Invalid Number of Warmup Iterations [-x -1]"
    );
    assert_eq!(bad_usage(&BW, &["-W", "0"]), "Invalid Window Size [-W 0]");
    // C atoi: leading digits count.
    assert_eq!(run(&LATENCY, &["-i", "12abc"]).iterations, 12);
}

#[test]
fn rejected_options() {
    // -f/--full exist only for OSU's collectives.
    for spec in [LATENCY, BW, BIBW, MBW_MR, MULTI_LAT] {
        assert_eq!(bad_usage(&spec, &["-f"]), "Invalid option [-f]");
        assert_eq!(bad_usage(&spec, &["--full"]), "Invalid option [--full]");
    }
    assert_eq!(bad_usage(&LATENCY, &["-W", "4"]), "Invalid option [-W]");
    assert_eq!(
        bad_usage(&LATENCY, &["--window-size=4"]),
        "Invalid option [--window-size]"
    );
    assert_eq!(bad_usage(&BW, &["-p", "1"]), "Invalid option [-p]");
    assert_eq!(
        bad_usage(&BW, &["-i"]),
        "Option Missing Required Argument [-i]"
    );
    assert_eq!(
        bad_usage(&BW, &["--iterations"]),
        "Option Missing Required Argument [-i]"
    );
    assert_eq!(bad_usage(&BW, &["--help=1"]), "Invalid option [-h]");
    // --m is ambiguous (message-size, mem-limit).
    assert_eq!(bad_usage(&BW, &["--m", "4"]), "Invalid option [--m]");
    assert_eq!(bad_usage(&BW, &["-i", "3", "-q"]), "Invalid option [-q]");
}

#[test]
fn full_where_accepted() {
    let spec = Spec {
        full: true,
        ..LATENCY
    };
    let o = run(&spec, &["-f"]);
    assert!(o.show_full);
    assert!(run(&spec, &["--full"]).show_full);
    assert_eq!(
        column_header(&spec, &o),
        "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
    );
    assert!(help_text(&spec, false).contains("  -f, --full                print full format"));
}

#[test]
fn help_version_and_stops() {
    assert_eq!(parse(&LATENCY, &["-h"]), Parsed::Help);
    assert_eq!(parse(&LATENCY, &["--help"]), Parsed::Help);
    assert_eq!(parse(&LATENCY, &["-v"]), Parsed::Version);
    assert_eq!(parse(&LATENCY, &["--vers"]), Parsed::Version);
    assert_eq!(parse(&LATENCY, &["-hv"]), Parsed::Help);
    assert_eq!(parse(&LATENCY, &["-i", "3", "-v"]), Parsed::Version);
    // Options end at the first non-option word or at "--".
    assert_eq!(run(&LATENCY, &["extra", "-i", "0"]).iterations, 10000);
    assert_eq!(run(&LATENCY, &["--", "-i", "0"]).iterations, 10000);
    // An option argument may start with '-'.
    assert_eq!(
        bad_usage(&LATENCY, &["-i", "-m", "8"]),
        "Invalid Number of Iterations [-i -m]"
    );
    assert_eq!(run(&LATENCY, &["-m", "-i"]).max_message_size, 0);
}

#[test]
fn mem_limit() {
    let mut o = run(&BW, &["-M", "1000"]);
    assert_eq!(o.max_mem_limit, 1048576);
    assert_eq!(
        o.warnings,
        vec!["Requested memory limit too low, using [1048576] instead.".to_string()]
    );
    let w = o
        .limit_to_memory(&BW)
        .expect("4 MiB x 65 does not fit in 1 MiB");
    assert_eq!(o.max_message_size, 1048576 / 65);
    assert_eq!(
        w,
        "Warning! Limiting max message size to: 16131. Increase -M, --mem-limit for higher message sizes."
    );
    assert_eq!(o.sizes(&BW).last(), Some(&8192));
    let mut o = run(&LATENCY, &["--mem-limit", "16777216"]);
    assert!(o.warnings.is_empty());
    assert_eq!(o.limit_to_memory(&LATENCY), None);
    assert_eq!(o.max_message_size, 4194304);
    let mut o = run(&BW, &[]);
    assert_eq!(o.limit_to_memory(&BW), None, "the defaults fit in 512 MiB");
    let mut o = run(&BW, &["-W", "200"]);
    assert!(o.limit_to_memory(&BW).is_some());
    assert_eq!(o.sizes(&BW).last(), Some(&2097152));
}

#[test]
fn mbw_mr_options() {
    let o = run(&MBW_MR, &["-p", "2", "-R", "0", "-W", "8"]);
    assert_eq!((o.pairs, o.print_rate, o.window_size), (Some(2), false, 8));
    assert_eq!(
        bad_usage(&MBW_MR, &["-R", "2"]),
        "Invalid Print Rate [-R 2]"
    );
    assert_eq!(
        bad_usage(&MBW_MR, &["-p", "0"]),
        "Invalid Number of Pairs [-p 0]"
    );
    assert_eq!(run(&MBW_MR, &[]).min_message_size, 1);
}

#[test]
fn golden_output() {
    let o = Options::defaults(&LATENCY);
    assert_eq!(version_text(&LATENCY), "# OSU MPI Latency Test v7.4\n");
    assert_eq!(
        format!(
            "{}{}",
            preamble(&LATENCY, &o, 1),
            column_header(&LATENCY, &o)
        ),
        "\n# OSU MPI Latency Test v7.4\n# Datatype: MPI_CHAR.\n# Size       Avg Latency(us)\n"
    );
    let o = Options::defaults(&BW);
    assert_eq!(
        format!("{}{}", preamble(&BW, &o, 1), column_header(&BW, &o)),
        "\n# OSU MPI Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n# Size      Bandwidth (MB/s)\n"
    );
    assert_eq!(
        preamble(&BIBW, &o, 1),
        "\n# OSU MPI Bi-Directional Bandwidth Test v7.4\n# Datatype: MPI_CHAR.\n"
    );
    assert_eq!(
        preamble(&MULTI_LAT, &o, 1),
        "\n# OSU MPI Multi Latency Test v7.4\n# Datatype: MPI_CHAR.\n"
    );
    let o = Options::defaults(&MBW_MR);
    assert_eq!(
        format!("{}{}", preamble(&MBW_MR, &o, 3), column_header(&MBW_MR, &o)),
        "\n# OSU MPI Multiple Bandwidth / Message Rate Test v7.4\n\
         # [ pairs: 3 ] [ window size: 64 ]\n# Datatype: MPI_CHAR.\n\
         # Size                  MB/s        Messages/s\n"
    );
    let no_rate = run(&MBW_MR, &["-R", "0"]);
    assert_eq!(
        column_header(&MBW_MR, &no_rate),
        "# Size                  MB/s\n"
    );
    assert_eq!(row(1, 0.2149), "1                       0.21\n");
    assert_eq!(row(4194304, 23647.654), "4194304             23647.65\n");
    assert_eq!(row(8, 0.125), "8                       0.12\n");
    assert_eq!(
        row2(1, 2.3649, 2356892.444),
        "1                       2.36        2356892.44\n"
    );
    assert_eq!(row(2, f64::INFINITY), "2                        inf\n");
}

#[test]
fn golden_help() {
    assert_eq!(
        help_text(&LATENCY, true),
        "Usage: osu_latency [options]\n\
         Options:\n  \
         -h, --help                print this help\n  \
         -v, --version             print version info\n  \
         -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n                            \
         bytes respectively. Examples:\n                            \
         -m 128      // min = default, max = 128\n                            \
         -m 2:128    // min = 2, max = 128\n                            \
         -m 2:       // min = 2, max = default\n  \
         -x, --warmup              ITER - set number of warmup\n                            \
         iterations to skip before timing (default 200)\n  \
         -i, --iterations          ITER - number of iterations for timing (default 10000)\n  \
         -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n                            \
         (default 536870912)\n"
    );
    let bw = help_text(&BW, false);
    assert!(bw.contains(
        "  -W, --window-size         SIZE - set number of messages to send before synchronization (default 64)\n"
    ));
    let mbw = help_text(&MBW_MR, true);
    assert!(mbw.starts_with("Usage: osu_mbw_mr [options]\nOptions:\n  -p, --num-pairs "));
    assert!(mbw.ends_with("        the README for more information.\n"));
    assert!(!help_text(&MBW_MR, false).contains("Note:"));
}

const COLLECTIVES: [Spec; 8] = [
    BARRIER, BCAST, REDUCE, ALLREDUCE, ALLGATHER, ALLTOALL, GATHER, SCATTER,
];

#[test]
fn collective_defaults_and_options() {
    for spec in COLLECTIVES {
        let o = run(&spec, &[]);
        assert_eq!(
            (
                o.min_message_size,
                o.max_message_size,
                o.iterations,
                o.skip,
                o.iterations_large,
                o.skip_large
            ),
            (1, 1048576, 1000, 100, 100, 10),
            "{}",
            spec.name
        );
        assert!(!o.show_full);
        assert!(run(&spec, &["-f"]).show_full);
        assert!(run(&spec, &["--full", "-i", "5"]).show_full);
        assert_eq!(bad_usage(&spec, &["-W", "2"]), "Invalid option [-W]");
        assert_eq!(
            bad_usage(&spec, &["-i", "0"]),
            "Invalid Number of Iterations [-i 0]"
        );
    }
    let o = run(&ALLREDUCE, &["-m", "4:64", "-x", "3", "-i", "7"]);
    assert_eq!(o.sizes(&ALLREDUCE), vec![4, 8, 16, 32, 64]);
    assert_eq!((o.iterations_for(16384), o.skip_for(16384)), (7, 3));
    let o = run(&BCAST, &[]);
    let s = o.sizes(&BCAST);
    assert_eq!(
        (s.first(), s.last(), s.len()),
        (Some(&1), Some(&1048576), 21)
    );
    assert_eq!(
        (o.iterations_for(8192), o.iterations_for(16384)),
        (1000, 100)
    );
    assert_eq!((o.skip_for(8192), o.skip_for(16384)), (100, 10));
    // The barrier takes -m and -M (as OSU's option string does) and ignores them.
    assert_eq!(
        run(&BARRIER, &["-m", "64", "-M", "2000000"]).max_message_size,
        64
    );
}

#[test]
fn collective_roots_and_memory() {
    assert_eq!(
        (0..5).map(|i| Coll::Bcast.root(i, 3)).collect::<Vec<_>>(),
        vec![0, 1, 2, 0, 1]
    );
    assert_eq!(Coll::Reduce.root(7, 4), 3);
    assert_eq!(Coll::Gather.root(7, 4), 0);
    assert_eq!(Coll::Scatter.root(1, 2), 0);
    assert_eq!(Coll::Bcast.buffer_bytes(10, 4), 10);
    assert_eq!(Coll::Allreduce.buffer_bytes(10, 4), 20);
    assert_eq!(Coll::Gather.buffer_bytes(10, 4), 50);
    assert_eq!(Coll::Alltoall.buffer_bytes(10, 4), 80);
    assert_eq!(Coll::Barrier.buffer_bytes(10, 4), 0);
    let mut o = run(&ALLTOALL, &["-M", "1048576"]);
    let w = o
        .limit_to_memory_ranks(&ALLTOALL, 4)
        .expect("8 MiB does not fit in 1 MiB");
    assert_eq!(o.max_message_size, 131072);
    assert!(w.starts_with("Warning! Limiting max message size to: 131072."));
    assert_eq!(o.sizes(&ALLTOALL).last(), Some(&131072));
    let mut o = run(&ALLREDUCE, &[]);
    assert_eq!(o.limit_to_memory_ranks(&ALLREDUCE, 64), None);
    let mut o = run(&BARRIER, &["-M", "1", "-m", "99999999"]);
    assert_eq!(o.limit_to_memory_ranks(&BARRIER, 8), None);
}

#[test]
fn golden_collective_output() {
    let o = run(&ALLREDUCE, &[]);
    assert_eq!(
        version_text(&ALLREDUCE),
        "# OSU MPI Allreduce Latency Test v7.4\n"
    );
    assert_eq!(
        format!(
            "{}{}",
            preamble(&ALLREDUCE, &o, 1),
            column_header(&ALLREDUCE, &o)
        ),
        "\n# OSU MPI Allreduce Latency Test v7.4\n# Datatype: MPI_CHAR.\n\
         # Size       Avg Latency(us)\n"
    );
    let st = CollStats {
        avg: 1.2349,
        min: 0.994,
        max: 12345.678,
    };
    assert_eq!(
        coll_row(&ALLREDUCE, &o, 4, &st, 1000),
        "4                       1.23\n"
    );
    assert_eq!(
        coll_row(&ALLREDUCE, &o, 1048576, &st, 100),
        "1048576                 1.23\n"
    );
    let full = run(&ALLREDUCE, &["-f"]);
    assert_eq!(
        column_header(&ALLREDUCE, &full),
        "# Size       Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
    );
    assert_eq!(
        coll_row(&ALLREDUCE, &full, 16384, &st, 100),
        "16384                   1.23              0.99          12345.68         100\n"
    );
    for (spec, title) in [
        (BCAST, "OSU MPI Broadcast Latency Test"),
        (REDUCE, "OSU MPI Reduce Latency Test"),
        (ALLGATHER, "OSU MPI Allgather Latency Test"),
        (
            ALLTOALL,
            "OSU MPI All-to-All Personalized Exchange Latency Test",
        ),
        (GATHER, "OSU MPI Gather Latency Test"),
        (SCATTER, "OSU MPI Scatter Latency Test"),
    ] {
        assert_eq!(
            preamble(&spec, &o, 1),
            format!("\n# {title} v7.4\n# Datatype: MPI_CHAR.\n")
        );
        assert_eq!(column_header(&spec, &o), "# Size       Avg Latency(us)\n");
    }
}

#[test]
fn golden_barrier_output() {
    let o = run(&BARRIER, &[]);
    assert_eq!(
        format!(
            "{}{}",
            preamble(&BARRIER, &o, 1),
            column_header(&BARRIER, &o)
        ),
        "\n# OSU MPI Barrier Latency Test v7.4\n# Avg Latency(us)\n"
    );
    let st = CollStats {
        avg: 1.526,
        min: 1.5,
        max: 1.556,
    };
    assert_eq!(coll_row(&BARRIER, &o, 0, &st, 1000), "             1.53\n");
    let full = run(&BARRIER, &["-f"]);
    assert_eq!(
        column_header(&BARRIER, &full),
        "# Avg Latency(us)   Min Latency(us)   Max Latency(us)  Iterations\n"
    );
    assert_eq!(
        coll_row(&BARRIER, &full, 0, &st, 1000),
        "             1.53              1.50              1.56        1000\n"
    );
}

#[test]
fn golden_collective_help() {
    assert_eq!(
        help_text(&ALLREDUCE, false),
        "Usage: osu_allreduce [options]\n\
         Options:\n  \
         -h, --help                print this help\n  \
         -v, --version             print version info\n  \
         -f, --full                print full format listing (MIN/MAX latency and ITERATIONS\n                            \
         displayed in addition to AVERAGE latency)\n  \
         -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX\n                            \
         bytes respectively. Examples:\n                            \
         -m 128      // min = default, max = 128\n                            \
         -m 2:128    // min = 2, max = 128\n                            \
         -m 2:       // min = 2, max = default\n  \
         -i, --iterations          ITER - set iterations per message size to ITER (default 1000 for small\n                            \
         messages, 100 for large messages)\n  \
         -x, --warmup              ITER - set number of warmup\n                            \
         iterations to skip before timing (default 200)\n  \
         -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes\n                            \
         (default 536870912)\n"
    );
    let barrier = help_text(&BARRIER, false);
    assert!(barrier.starts_with("Usage: osu_barrier [options]\nOptions:\n  -h, --help "));
    assert!(!barrier.contains("--message-size"));
    assert!(!barrier.contains("--mem-limit"));
    assert!(barrier.contains("  -f, --full "));
    assert!(barrier.contains("  -i, --iterations "));
}

#[test]
fn arithmetic() {
    assert_eq!(latency_us(2.0e-6 * 10.0, 10), 1.0);
    assert_eq!(mean_us(3.0e-6 * 10.0, 10), 3.0);
    assert_eq!(bandwidth_mb_s(1_000_000, 64 * 10, 64.0), 10.0);
    assert_eq!(c_atoll("  +42x"), 42);
    assert_eq!(c_atoll("-7"), -7);
    assert_eq!(c_atoll("x"), 0);
    assert_eq!(c_atoi("4294967297"), 1);
    let mut b = AlignedBuf::new(10000);
    assert_eq!(b.as_slice().as_ptr() as usize % 4096, 0);
    assert_eq!(b.as_mut_slice().len(), 10000);
    b.as_mut_i8_slice()[3] = -1;
    assert_eq!(b.as_slice()[3], 255);
    assert_eq!(b.as_i8_slice().len(), 10000);
}

#[test]
fn nonblocking_options_follow_osu() {
    let o = run(&IALLREDUCE, &[]);
    assert_eq!(
        (
            o.min_message_size,
            o.max_message_size,
            o.iterations,
            o.skip,
            o.iterations_large,
            o.skip_large,
            o.num_probes
        ),
        (1, 1048576, 1000, 100, 100, 10, 0)
    );
    assert_eq!(run(&IBARRIER, &["-t", "100"]).num_probes, 100);
    assert_eq!(run(&IALLTOALL, &["--num-test-calls=7"]).num_probes, 7);
    assert_eq!(
        bad_usage(&IREDUCE, &["-t", "-1"]),
        "Invalid Number of Probes [-t -1]"
    );
    // Only the nonblocking tests have -t (OSU's blocking option strings lack it).
    assert_eq!(bad_usage(&ALLREDUCE, &["-t", "3"]), "Invalid option [-t]");
    let f = run(&IGATHER, &["-f", "-m", "8", "-i", "10", "-x", "2"]);
    assert!(f.show_full);
    assert_eq!((f.max_message_size, f.iterations, f.skip), (8, 10, 2));
    assert_eq!(f.sizes(&IGATHER), vec![1, 2, 4, 8]);
    // -M is checked against what the test allocates, as for the blocking ones.
    let mut m = run(&IALLTOALL, &["-M", "1048576"]);
    m.limit_to_memory_ranks(&IALLTOALL, 4);
    assert_eq!(m.max_message_size, 131072);
}

#[test]
fn nonblocking_help_lists_num_test_calls_last() {
    let h = help_text(&IALLREDUCE, false);
    assert!(h.starts_with("Usage: osu_iallreduce [options]\nOptions:\n  -h, --help "));
    let m = h.find("  -M, --mem-limit ").unwrap();
    let t = h.find("  -t, --num-test-calls      Non-blocking collectives-> CALLS - set the number of MPI_Test() calls during the dummy computation,\n").unwrap();
    assert!(m < t, "{h}");
    assert!(h.ends_with("                            -t 2:       // not defined\n"));
    let b = help_text(&IBARRIER, false);
    assert!(b.contains("  -t, --num-test-calls "));
    assert!(!b.contains("--message-size") && !b.contains("--mem-limit"));
    assert_eq!(
        version_text(&IBCAST),
        "# OSU MPI Non-Blocking Broadcast Latency Test v7.4\n"
    );
}

#[test]
fn nbc_overlap_formula() {
    // 100 - ((overall - compute) / pure_comm * 100), never below 0.
    assert!((nbc_overlap(3.08, 1.63, 1.50) - 3.333_333).abs() < 1e-5);
    assert_eq!(nbc_overlap(10.0, 5.0, 5.0), 0.0);
    assert_eq!(nbc_overlap(10.0, 5.0, 4.0), 0.0);
    assert_eq!(nbc_overlap(5.0, 5.0, 4.0), 100.0);
    assert_eq!(nbc_overlap(6.0, 5.0, 4.0), 75.0);
    // The compute column and the overlap leave the tests out of the computation.
    let st = NbcStats {
        overall: 6.0,
        cpu: 5.5,
        test: 0.5,
        wait: 0.9,
        init: 0.1,
        comm: 4.0,
        min_comm: 3.5,
        max_comm: 4.5,
    };
    assert_eq!(st.compute(), 5.0);
    assert_eq!(st.overlap(), 75.0);
}

#[test]
fn golden_nonblocking_output() {
    let o = run(&IALLREDUCE, &[]);
    assert_eq!(
        format!(
            "{}{}",
            preamble(&IALLREDUCE, &o, 1),
            column_header(&IALLREDUCE, &o)
        ),
        "\n# OSU MPI Non-blocking Allreduce Latency Test v7.4\n\
         # Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\
         \n\
         # Datatype: MPI_CHAR.\n\
         # Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n"
    );
    let st = NbcStats {
        overall: 3.084,
        cpu: 1.634,
        test: 0.0,
        wait: 1.2,
        init: 0.25,
        comm: 1.5,
        min_comm: 1.456,
        max_comm: 1.544,
    };
    assert_eq!(
        nbc_row(&IALLREDUCE, &o, 1, &st),
        "1                       3.08              1.63              1.50              3.33\n"
    );
    let full = run(&IALLREDUCE, &["-f"]);
    assert_eq!(
        column_header(&IALLREDUCE, &full),
        "# Size           Overall(us)       Compute(us)    Coll. Init(us)      MPI_Test(us)      \
         MPI_Wait(us)    Pure Comm.(us)     Min Comm.(us)     Max Comm.(us)        Overlap(%)\n"
    );
    assert_eq!(
        nbc_row(&IALLREDUCE, &full, 1048576, &st),
        "1048576                 3.08              1.63              0.25              0.00              \
         1.20              1.50              1.46              1.54              3.33\n"
    );
    let b = run(&IBARRIER, &[]);
    assert_eq!(
        format!(
            "{}{}",
            preamble(&IBARRIER, &b, 1),
            column_header(&IBARRIER, &b)
        ),
        "\n# OSU MPI Non-blocking Barrier Latency Test v7.4\n\
         # Overall = Coll. Init + Compute + MPI_Test + MPI_Wait\n\
         \n\
         # Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)\n"
    );
    assert_eq!(
        nbc_row(&IBARRIER, &b, 0, &st),
        "         3.08              1.63              1.50              3.33\n"
    );
}

#[test]
fn nonblocking_roots_and_dummy_compute() {
    assert_eq!(nbc_root(Coll::Bcast, Phase::Pure, 5, 3), 2);
    assert_eq!(nbc_root(Coll::Bcast, Phase::Overlap, 5, 3), 0);
    assert_eq!(nbc_root(Coll::Reduce, Phase::Overlap, 5, 3), 2);
    assert_eq!(nbc_root(Coll::Gather, Phase::Pure, 5, 3), 0);
    assert_eq!(nbc_root(Coll::Scatter, Phase::Overlap, 5, 3), 0);
    let mut c = DummyCompute::default();
    let t = std::time::Instant::now();
    c.busy(0.002);
    assert!(t.elapsed().as_secs_f64() >= 0.002);
    let t = std::time::Instant::now();
    c.busy(0.0);
    c.busy(-1.0);
    assert!(t.elapsed().as_secs_f64() < 0.001);
    let (test, req) = c.dummy_compute(0.001, 4, None);
    assert!(req.is_none() && test >= 0.0);
}

#[test]
fn latency_mt_threads_follow_osu() {
    assert_eq!(run(&LATENCY_MT, &[]).threads, (1, 2));
    assert_eq!(run(&LATENCY_MT, &["-t", "4"]).threads, (1, 4));
    assert_eq!(run(&LATENCY_MT, &["-t", "3:5"]).threads, (3, 5));
    assert_eq!(
        bad_usage(&LATENCY_MT, &["-t", "0"]),
        "Invalid Number of Threads [-t 0]"
    );
    assert_eq!(
        bad_usage(&LATENCY_MT, &["-t", "2:"]),
        "Invalid Number of Threads [-t 2:]"
    );
    assert_eq!(
        bad_usage(&LATENCY_MT, &["-t", "129:1"]),
        "Invalid Number of Threads [-t 129:1]"
    );
    // The nonblocking collectives keep -t as their MPI_Test count.
    assert_eq!(run(&IALLREDUCE, &["-t", "7"]).num_probes, 7);
}
