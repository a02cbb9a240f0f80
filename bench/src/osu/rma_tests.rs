//! The one-sided benchmarks' option parser (`rma`) and output against what
//! `bench/c/osu_rma.h` (OSU 7.4's one-sided options) accepts and prints.

use super::*;

const ALL_SPECS: [RmaSpec; 9] = [
    PUT_LATENCY,
    GET_LATENCY,
    PUT_BW,
    GET_BW,
    PUT_BIBW,
    ACC_LATENCY,
    GET_ACC_LATENCY,
    FOP_LATENCY,
    CAS_LATENCY,
];

fn run(spec: &RmaSpec, args: &[&str]) -> RmaOptions {
    match rma_parse(spec, args) {
        RmaParsed::Run(o) => o,
        other => panic!("{} {args:?}: expected options, got {other:?}", spec.name),
    }
}

/// A bad `-w`, `-s` or `-T` (reported after the rank check).
fn bad_rma(spec: &RmaSpec, args: &[&str]) -> String {
    match rma_parse(spec, args) {
        RmaParsed::BadRmaOption { bad, .. } => bad.to_string(),
        other => panic!(
            "{} {args:?}: expected a bad -w/-s/-T, got {other:?}",
            spec.name
        ),
    }
}

/// A bad OSU option (reported first).
fn bad_usage(spec: &RmaSpec, args: &[&str]) -> String {
    match rma_parse(spec, args) {
        RmaParsed::BadUsage(b) => b.to_string(),
        other => panic!(
            "{} {args:?}: expected a bad usage, got {other:?}",
            spec.name
        ),
    }
}

#[test]
fn defaults_follow_osu_rma_h() {
    for spec in ALL_SPECS {
        let o = run(&spec, &[]);
        assert_eq!((o.win, o.sync), (spec.win_default, spec.sync_default));
        assert_eq!(o.types, vec![RmaType::Char], "{}", spec.name);
        assert_eq!(
            (o.opts.min_message_size, o.opts.max_message_size),
            (1, 4194304)
        );
        let counts = (
            o.opts.iterations,
            o.opts.iterations_large,
            o.opts.skip,
            o.opts.skip_large,
        );
        if spec.is_bw() {
            assert_eq!(counts, (100, 20, 10, 2), "{}", spec.name);
            assert_eq!(o.opts.window_size, 64);
        } else {
            assert_eq!(counts, (10000, 1000, 100, 10), "{}", spec.name);
        }
    }
    assert_eq!(
        (GET_ACC_LATENCY.win_default, GET_ACC_LATENCY.sync_default),
        (WinKind::Create, SyncKind::Lock)
    );
    assert_eq!(PUT_BIBW.sync_default, SyncKind::Pscw);
    assert_eq!(
        (PUT_LATENCY.win_default, PUT_LATENCY.sync_default),
        (WinKind::Allocate, SyncKind::Flush)
    );
}

#[test]
fn win_and_sync_forms() {
    let spec = PUT_LATENCY;
    for args in [
        &["-w", "create"][..],
        &["-wcreate"],
        &["--win-options=create"],
        &["--win-options", "create"],
        &["--win", "CREATE"],
        &["--win-o=Create"],
    ] {
        assert_eq!(run(&spec, args).win, WinKind::Create, "{args:?}");
    }
    for (arg, sync) in [
        ("lock", SyncKind::Lock),
        ("pscw", SyncKind::Pscw),
        ("fence", SyncKind::Fence),
        ("flush", SyncKind::Flush),
        ("FLUSH_local", SyncKind::FlushLocal),
        ("lock_all", SyncKind::LockAll),
    ] {
        assert_eq!(run(&spec, &["-s", arg]).sync, sync);
        assert_eq!(run(&spec, &[&format!("--sync={arg}")]).sync, sync);
    }
    assert_eq!(run(&spec, &["-w", "dynamic"]).win, WinKind::Dynamic);
    // The last one counts; the other options around them are parsed as usual.
    let o = run(
        &spec,
        &["-m", "8", "-s", "lock", "-i5", "-s", "fence", "-x", "1"],
    );
    assert_eq!(o.sync, SyncKind::Fence);
    assert_eq!(
        (o.opts.max_message_size, o.opts.iterations, o.opts.skip),
        (8, 5, 1)
    );
    // In a cluster: the flags before it stay options of their own.
    assert_eq!(rma_parse(&spec, &["-vwcreate"]), RmaParsed::Version);
    assert_eq!(rma_parse(&spec, &["-hw", "create"]), RmaParsed::Help);
    // An option taking a value swallows the rest of its word: -x's value is "5w".
    assert_eq!(run(&spec, &["-x5w"]).opts.skip, 5);
    // Options end at "--" or at the first operand.
    assert_eq!(run(&spec, &["--", "-w", "foo"]).win, WinKind::Allocate);
    assert_eq!(run(&spec, &["foo", "-w", "create"]).win, WinKind::Allocate);
}

#[test]
fn bad_win_sync_and_their_order() {
    let spec = PUT_LATENCY;
    assert_eq!(
        bad_rma(&spec, &["-w", "foo"]),
        "Invalid option or invalid argument [-w foo]"
    );
    assert_eq!(
        bad_rma(&spec, &["-s", "flushx"]),
        "Invalid option or invalid argument [-s flushx]"
    );
    assert_eq!(
        bad_rma(&spec, &["--win-options="]),
        "Invalid option or invalid argument [-w ]"
    );
    assert_eq!(
        bad_rma(&spec, &["-w"]),
        "Option Missing Required Argument [-w]"
    );
    assert_eq!(
        bad_rma(&spec, &["--sync-option"]),
        "Option Missing Required Argument [-s]"
    );
    // "--w" could be --warmup or --win-options.
    assert_eq!(bad_rma(&spec, &["--w", "create"]), "Invalid option [--w]");
    // The first bad option on the command line is the one reported.
    assert_eq!(
        bad_usage(&spec, &["-i", "0", "-w", "foo"]),
        "Invalid Number of Iterations [-i 0]"
    );
    assert_eq!(
        bad_rma(&spec, &["-w", "foo", "-i", "0"]),
        "Invalid option or invalid argument [-w foo]"
    );
    assert_eq!(
        bad_usage(&spec, &["-q", "-w", "foo"]),
        "Invalid option [-q]"
    );
    // Words after a bad -w are not looked at: no help, no version.
    assert_eq!(
        bad_rma(&spec, &["-w", "foo", "-h"]),
        "Invalid option or invalid argument [-w foo]"
    );
    // "-vw" without a value: the error stops the scan, and -v before it wins.
    assert_eq!(rma_parse(&spec, &["-vw"]), RmaParsed::Version);
    // Warnings of the options before a bad -w still go out.
    match rma_parse(&spec, &["-M", "5", "-w", "x"]) {
        RmaParsed::BadRmaOption { warnings, .. } => assert_eq!(
            warnings,
            vec!["Requested memory limit too low, using [1048576] instead.".to_string()]
        ),
        other => panic!("{other:?}"),
    }
}

#[test]
fn bibw_takes_active_target_only() {
    let spec = PUT_BIBW;
    assert_eq!(run(&spec, &["-s", "fence"]).sync, SyncKind::Fence);
    assert_eq!(run(&spec, &["-s", "PSCW"]).sync, SyncKind::Pscw);
    for s in ["lock", "flush", "flush_local", "lock_all"] {
        assert_eq!(
            bad_rma(&spec, &["-s", s]),
            format!("Invalid option or invalid argument [-s {s}]")
        );
    }
}

#[test]
fn types_where_taken() {
    use RmaType::*;
    assert_eq!(run(&ACC_LATENCY, &["-T", "mpi_int"]).types, vec![Int]);
    assert_eq!(
        run(&ACC_LATENCY, &["-T", "all", "-T", "MPI_LONG_LONG"]).types,
        vec![Char, Int, Float, LongLong]
    );
    assert_eq!(
        run(&FOP_LATENCY, &["--type=mpi_float", "-Tmpi_char"]).types,
        vec![Float, Char]
    );
    // strncasecmp prefixes: the value may go on.
    assert_eq!(run(&FOP_LATENCY, &["-T", "Mpi_Integer"]).types, vec![Int]);
    assert_eq!(
        run(&FOP_LATENCY, &["-T", "allx"]).types,
        vec![Char, Int, Float]
    );
    assert_eq!(
        bad_rma(&FOP_LATENCY, &["-T", "mpi_double"]),
        "Invalid option or invalid argument [-T mpi_double]"
    );
    assert_eq!(
        bad_rma(&FOP_LATENCY, &["-T", "mpi_in"]),
        "Invalid option or invalid argument [-T mpi_in]"
    );
    // cas: no floating-point type, and "all" is char and int.
    assert_eq!(run(&CAS_LATENCY, &["-T", "all"]).types, vec![Char, Int]);
    assert_eq!(
        bad_rma(&CAS_LATENCY, &["-T", "mpi_float"]),
        "Invalid option or invalid argument [-T mpi_float]"
    );
    // At most 16, as OSU's array.
    let many: Vec<&str> = ["-T", "all"].repeat(7);
    assert_eq!(run(&ACC_LATENCY, &many).types.len(), MAX_TYPES);
    // Only acc, fop and cas take -T.
    for spec in [PUT_LATENCY, GET_BW, GET_ACC_LATENCY] {
        assert_eq!(bad_usage(&spec, &["-T", "all"]), "Invalid option [-T]");
        assert_eq!(bad_usage(&spec, &["--type=all"]), "Invalid option [--type]");
    }
}

#[test]
fn window_size_for_bandwidth_only() {
    assert_eq!(run(&PUT_BW, &["-W", "4"]).opts.window_size, 4);
    assert_eq!(run(&GET_BW, &["-W8"]).opts.window_size, 8);
    assert_eq!(run(&PUT_BIBW, &["--window-size=2"]).opts.window_size, 2);
    assert_eq!(
        bad_usage(&PUT_BW, &["-W", "0"]),
        "Invalid Window Size [-W 0]"
    );
    assert_eq!(bad_usage(&PUT_LATENCY, &["-W", "4"]), "Invalid option [-W]");
    // Not a value-taking option in a latency test: the scan goes on to -w, whose missing
    // value stops it; the -W before it is reported first.
    assert_eq!(bad_usage(&PUT_LATENCY, &["-Ww"]), "Invalid option [-W]");
    // While -x's value is the rest of its word, "w" included (C's atoi: 0).
    assert_eq!(run(&PUT_LATENCY, &["-xw", "-w", "create"]).opts.skip, 0);
    // In a bandwidth test -W takes the rest of the word.
    assert_eq!(run(&PUT_BW, &["-W4w"]).opts.window_size, 4);
}

#[test]
fn sizes_and_memory_limit() {
    let o = run(&PUT_LATENCY, &[]);
    let s = o.sizes();
    assert_eq!(
        (s.len(), s.first(), s.last()),
        (23, Some(&1), Some(&4194304))
    );
    assert_eq!(
        run(&PUT_BW, &["-m", "3:50"]).sizes(),
        vec![3, 6, 12, 24, 48]
    );
    assert!(run(&PUT_LATENCY, &["-m", "0"]).sizes().is_empty());
    assert_eq!(run(&GET_LATENCY, &["-m", ":4"]).sizes(), vec![1, 2, 4]);
    assert_eq!(
        run(&PUT_BW, &["-m", "9223372036854775807"]).sizes().len(),
        63
    );
    // -M: the operation's buffers (times -W for bandwidth) must fit.
    let mut o = run(&PUT_LATENCY, &["-M", "2097152"]);
    assert_eq!(
        o.limit_to_memory(&PUT_LATENCY).as_deref(),
        Some("Warning! Limiting max message size to: 1048576. Increase -M, --mem-limit for higher message sizes.")
    );
    assert_eq!(o.opts.max_message_size, 1048576);
    let mut o = run(&CAS_LATENCY, &["-M", "2097152"]);
    assert!(o.limit_to_memory(&CAS_LATENCY).is_some());
    assert_eq!(o.opts.max_message_size, 524288);
    let mut o = run(&PUT_BW, &[]);
    assert_eq!(o.limit_to_memory(&PUT_BW), None);
    let mut o = run(&PUT_BW, &["-W", "65"]);
    assert!(o.limit_to_memory(&PUT_BW).is_some());
    assert_eq!(o.opts.max_message_size, 536870912 / 130);
}

#[test]
fn operations_locks_and_blocks() {
    use kestrel::window::LockType::*;
    assert_eq!(PUT_LATENCY.op.lock_types(), (Shared, Shared));
    assert_eq!(GET_ACC_LATENCY.op.lock_types(), (Exclusive, Exclusive));
    assert_eq!(FOP_LATENCY.op.lock_types(), (Exclusive, Shared));
    assert_eq!(CAS_LATENCY.op.lock_types(), (Exclusive, Shared));
    let blocks: Vec<usize> = ALL_SPECS.iter().map(|s| s.op.blocks()).collect();
    assert_eq!(blocks, [2, 2, 2, 2, 2, 2, 3, 3, 4]);
}

#[test]
fn only_dynamic_windows_are_refused() {
    let o = run(&PUT_BW, &["-w", "dynamic"]);
    let why = o.unsupported(&PUT_BW).expect("dynamic windows are refused");
    assert!(
        why.starts_with("osu_put_bw: -w dynamic (MPI_Win_create_dynamic) is not available")
            && why.contains("bench/c/osu_put_bw.c"),
        "{why}"
    );
    // Every benchmark runs every -s it takes (osu_get_acc_latency's flush loops included:
    // each get-accumulate in a flushed part) on both other window kinds; -w dynamic is
    // refused whatever -s says.
    let mut runs = 0;
    for spec in ALL_SPECS {
        for s in ["lock", "pscw", "fence", "lock_all", "flush", "flush_local"] {
            for w in ["create", "allocate", "dynamic"] {
                let RmaParsed::Run(o) = rma_parse(&spec, &["-s", s, "-w", w]) else {
                    assert!(spec.active_only, "{} -s {s}", spec.name);
                    continue; // bibw: passive target refused by the parser
                };
                let refused = o.unsupported(&spec);
                assert_eq!(refused.is_some(), w == "dynamic", "{} {s} {w}", spec.name);
                if let Some(why) = refused {
                    assert!(
                        why.starts_with(&format!("{}: -w dynamic ", spec.name))
                            && why.contains(&format!("bench/c/{}.c", spec.name)),
                        "{why}"
                    );
                } else {
                    runs += 1;
                }
            }
        }
    }
    // 8 benchmarks with 6 syncs and bibw with 2, on 2 window kinds.
    assert_eq!(runs, (8 * 6 + 2) * 2);
    for s in ["flush", "flush_local"] {
        let o = run(&GET_ACC_LATENCY, &["-s", s]);
        assert_eq!(o.unsupported(&GET_ACC_LATENCY), None, "-s {s}");
        assert_eq!(o.win, WinKind::Create);
    }
}

#[test]
fn help_is_osu_rma_h_text() {
    let want = "\
Usage: osu_put_bw [options]
Options:
  -w, --win-options         WIN_OPTION - Supports MPI>=3. Can be any of the follows:
                            create       use MPI_Win_create to create an MPI Window object
                            allocate     use MPI_Win_allocate to create an MPI Window object
                            dynamic      use MPI_Win_create_dynamic to create an MPI Window object
                            (default allocate)
  -s, --sync-option         SYNC_OPTION - can be any of the follows:
                            pscw          use Post/Start/Complete/Wait synchronization calls
                            fence         use MPI_Win_fence synchronization call
                            lock          use MPI_Win_lock/unlock synchronizations calls
                            flush         use MPI_Win_flush synchronization call
                            flush_local   use MPI_Win_flush_local synchronization call
                            lock_all      use MPI_Win_lock_all/unlock_all synchronization calls
                            (default flush)
  -h, --help                print this help
  -v, --version             print version info
  -m, --message-size        [MIN:]MAX - set the minimum and/or the maximum message size to MIN and/or MAX
                            bytes respectively. Examples:
                            -m 128      // min = default, max = 128
                            -m 2:128    // min = 2, max = 128
                            -m 2:       // min = 2, max = default
  -x, --warmup              ITER - set number of warmup
                            iterations to skip before timing (default 200)
  -i, --iterations          ITER - number of iterations for timing (default 10000)
  -W, --window-size         SIZE - set number of messages to send before synchronization (default 64)
  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes
                            (default 536870912)
";
    assert_eq!(rma_help_text(&PUT_BW), want);
    let get_acc = rma_help_text(&GET_ACC_LATENCY);
    assert!(get_acc.starts_with(
        "Usage: ./osu_get_acc_latency -w <win_option>  -s < sync_option> [-x ITER] [-i ITER]\n  -w, --win-options"
    ));
    assert!(get_acc.contains("(default create)\n") && get_acc.contains("(default lock)\n"));
    assert!(!get_acc.contains("-W, --window-size"));
    let bibw = rma_help_text(&PUT_BIBW);
    assert!(bibw.contains(
        "synchronization call\n                            (default pscw)\n  -h, --help"
    ));
    assert!(!bibw.contains("lock          use"));
    let cas = rma_help_text(&CAS_LATENCY);
    assert!(cas.ends_with(
        "  -T, --type                [all,mpi_char,mpi_int] - Set MPI_TYPE . Default:MPI_CHAR.
                            (also mpi_long_long: the 8-byte operation of OSU before 7.x)
  -M, --mem-limit           SIZE - set per process maximum memory consumption to SIZE bytes
                            (default 536870912)
"
    ));
    assert!(rma_help_text(&ACC_LATENCY)
        .contains("[all,mpi_char,mpi_int,mpi_float] - Set MPI_TYPE . Default:MPI_CHAR.\n"));
    assert!(!rma_help_text(&PUT_LATENCY).contains("-T, --type"));
    assert_eq!(rma_parse(&PUT_LATENCY, &["--help"]), RmaParsed::Help);
    assert_eq!(
        rma_version_text(&GET_LATENCY),
        "# OSU MPI_Get latency Test v7.4\n"
    );
}

#[test]
fn header_is_print_header_one_sided() {
    let o = run(&PUT_LATENCY, &[]);
    assert_eq!(
        rma_header(&PUT_LATENCY, &o, Some(RmaType::Char)),
        "# OSU MPI_Put Latency Test v7.4\n\
         # Window creation: MPI_Win_allocate\n\
         # Synchronization: MPI_Win_flush\n\
         # Datatype: MPI_CHAR.\n\
         # Size          Latency (us)\n"
    );
    let o = run(&GET_ACC_LATENCY, &[]);
    assert_eq!(
        rma_header(&GET_ACC_LATENCY, &o, None),
        "# OSU MPI_Get_accumulate latency Test v7.4\n\
         # Window creation: MPI_Win_create\n\
         # Synchronization: MPI_Win_lock/unlock\n\
         # Size          Latency (us)\n"
    );
    let o = run(&PUT_BIBW, &["-s", "fence", "-w", "create"]);
    assert_eq!(
        rma_header(&PUT_BIBW, &o, Some(RmaType::Char)),
        "# OSU MPI_Put Bi-directional Bandwidth Test v7.4\n\
         # Window creation: MPI_Win_create\n\
         # Synchronization: MPI_Win_fence\n\
         # Datatype: MPI_CHAR.\n\
         # Size      Bandwidth (MB/s)\n"
    );
    let names: Vec<&str> = SyncKind::ALL.iter().map(|s| s.mpi_name()).collect();
    assert_eq!(
        names,
        [
            "MPI_Win_lock/unlock",
            "MPI_Win_post/start/complete/wait",
            "MPI_Win_fence",
            "MPI_Win_flush",
            "MPI_Win_flush_local",
            "MPI_Win_lock_all/unlock_all"
        ]
    );
    let o = run(&FOP_LATENCY, &["-T", "mpi_long_long", "-w", "dynamic"]);
    assert!(rma_header(&FOP_LATENCY, &o, Some(o.types[0]))
        .contains("# Window creation: MPI_Win_create_dynamic\n# Synchronization: MPI_Win_flush\n# Datatype: MPI_LONG_LONG.\n"));
}

#[test]
fn filled_elements_are_memset_a() {
    assert_eq!(u8::filled(), 0x61);
    assert_eq!(i8::filled(), 0x61);
    assert_eq!(i32::filled(), 0x6161_6161);
    assert_eq!(i64::filled(), 0x6161_6161_6161_6161);
    assert_eq!(f32::filled().to_bits(), 0x6161_6161);
}
