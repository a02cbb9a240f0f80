//! The one-sided OSU benchmarks in Rust (`bench/src/bin/osu_put_latency.rs` ...
//! `osu_cas_latency.rs`, on `kestrel::window`) against their C twins (`bench/c/osu_*.c` with
//! `osu_rma.h`, built with Kestrel's `mpicc`): for every benchmark, every synchronization it
//! takes and both window creations, the same header lines byte for byte and one row per size
//! in the same layout (osu_get_acc_latency's flush and flush_local loops included); the same
//! usage, version and error texts; and the Rust programs' clear refusal of what
//! `kestrel::window` cannot express (`-w dynamic`), where the C twin runs.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(90);

/// Each benchmark with the `-s` values it takes (`osu_rma.h`).
const BENCHES: [(&str, &[&str]); 9] = [
    ("osu_put_latency", ALL_SYNCS),
    ("osu_get_latency", ALL_SYNCS),
    ("osu_put_bw", ALL_SYNCS),
    ("osu_get_bw", ALL_SYNCS),
    ("osu_put_bibw", &["pscw", "fence"]),
    ("osu_acc_latency", ALL_SYNCS),
    ("osu_get_acc_latency", ALL_SYNCS),
    ("osu_fop_latency", ALL_SYNCS),
    ("osu_cas_latency", ALL_SYNCS),
];
const ALL_SYNCS: &[&str] = &["lock", "pscw", "fence", "flush", "flush_local", "lock_all"];

/// Small sizes and counts: sizes 1 to 64 bytes, 10 timed and 2 warm-up iterations.
const SMALL: [&str; 6] = ["-m", "1:64", "-i", "10", "-x", "2"];

/// Compiles `bench/c/NAME.c` with Kestrel's `mpicc` into `dir/NAME`.
fn compile_c_twin(name: &str, dir: &Path) -> PathBuf {
    let exe = dir.join(name);
    let out = Command::new(repo().join("abi/bin/mpicc"))
        .env("KESTREL_TARGET_DIR", target_dir())
        .args(["-O2", "-Wall", "-o"])
        .arg(&exe)
        .arg(repo().join("bench/c").join(format!("{name}.c")))
        .output()
        .expect("run abi/bin/mpicc");
    assert!(
        out.status.success(),
        "compiling bench/c/{name}.c failed (is target/release/libmpich.so built?):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Runs `exe args` on two ranks under kestrel-run's own 60 s timeout.
fn two_ranks(exe: &Path, args: &[&str]) -> Outcome {
    let mut all = vec!["-n", "2", "--timeout", "60", exe.to_str().unwrap()];
    all.extend_from_slice(args);
    run(kestrel_run(&all), DEADLINE)
}

/// The output's lines that are not result rows (rows start with the size).
fn text_lines(stdout: &str) -> Vec<&str> {
    stdout
        .lines()
        .filter(|l| !l.starts_with(|c: char| c.is_ascii_digit()))
        .collect()
}

/// The result rows' sizes, each row checked to be `%-10d%18.2f`.
fn row_sizes(stdout: &str, what: &str) -> Vec<u64> {
    stdout
        .lines()
        .filter(|l| l.starts_with(|c: char| c.is_ascii_digit()))
        .map(|row| {
            let field = row.get(10..).unwrap_or("");
            let v = field.trim_start();
            assert!(
                row.len() == 28
                    && field.starts_with(' ')
                    && v.split_once('.').is_some_and(|(_, d)| d.len() == 2)
                    && v.parse::<f64>().is_ok_and(|x| x.is_finite() && x >= 0.0),
                "{what}: row {row:?} is not %-10d%18.2f"
            );
            row[..10].trim_end().parse().expect("a size")
        })
        .collect()
}

/// Stderr without the launcher's own lines (which name pids).
fn own_stderr(out: &Outcome) -> Vec<&str> {
    out.stderr
        .lines()
        .filter(|l| !l.starts_with("kestrel-run:"))
        .collect()
}

/// The Rust program `name` and its C twin with `args`, run at the same time (each run is
/// mostly start-up and teardown, not CPU).
fn both(name: &str, c_exe: &Path, args: &[&str]) -> (Outcome, Outcome) {
    let rust_exe = bin(name);
    std::thread::scope(|s| {
        let rust = s.spawn(|| two_ranks(&rust_exe, args));
        let c = two_ranks(c_exe, args);
        (rust.join().expect("the Rust run"), c)
    })
}

/// One comparison: the Rust program and its C twin with `args`, both succeeding with the same
/// text lines and the same sizes, `rows` of them (each size: 1 to 64 in powers of two).
fn same_output(name: &str, c_exe: &Path, args: &[&str], rows: usize) -> Outcome {
    let what = format!("{name} {}", args.join(" "));
    let (rust, c) = both(name, c_exe, args);
    assert!(rust.success(), "Rust {what}: {}", rust.show());
    assert!(c.success(), "C {what}: {}", c.show());
    assert_eq!(
        text_lines(&rust.stdout),
        text_lines(&c.stdout),
        "{what}: the header lines differ\n--- Rust\n{}--- C\n{}",
        rust.stdout,
        c.stdout
    );
    let sizes = row_sizes(&rust.stdout, &format!("Rust {what}"));
    assert_eq!(
        sizes,
        row_sizes(&c.stdout, &format!("C {what}")),
        "{what}: rows differ\n--- Rust\n{}--- C\n{}",
        rust.stdout,
        c.stdout
    );
    assert_eq!(sizes.len(), rows, "{what}: {}", rust.show());
    assert_eq!(own_stderr(&rust), own_stderr(&c), "{what}: stderr differs");
    rust
}

#[test]
fn one_sided_rust_benchmarks_print_what_their_c_twins_print() {
    let started = Instant::now();
    let dir = scratch("osu-rma");
    for (name, syncs) in BENCHES {
        let c_exe = compile_c_twin(name, &dir);
        // fop and cas: one row, the element's size; the others: sizes 1, 2, 4, ..., 64.
        let rows = if name == "osu_fop_latency" || name == "osu_cas_latency" {
            1
        } else {
            7
        };
        for &sync in syncs {
            for win in ["allocate", "create"] {
                let mut args = SMALL.to_vec();
                args.extend(["-s", sync, "-w", win]);
                same_output(name, &c_exe, &args, rows);
            }
        }
        // The types: each -T prints its own header (and, for fop and cas, its own row).
        if matches!(
            name,
            "osu_acc_latency" | "osu_fop_latency" | "osu_cas_latency"
        ) {
            let mut args = SMALL.to_vec();
            args.extend(["-T", "all", "-T", "mpi_long_long"]);
            // acc: 7 sizes for char, 5 for int and float (4 bytes up), 4 for long long.
            let (types, rows) = match name {
                "osu_acc_latency" => (4, 7 + 5 + 5 + 4),
                "osu_fop_latency" => (4, 4),
                _ => (3, 3),
            };
            let rust = same_output(name, &c_exe, &args, rows);
            let datatypes = lines_starting(&rust.stdout, "# Datatype: ");
            assert_eq!(datatypes.len(), types, "{name}: {}", rust.show());
        }
        // Usage and a bad value (all: the usage differs between them), version and a missing
        // value (one of them): the same texts on the same streams.
        let mut cases = vec![&["-h"][..], &["-w", "foo"]];
        if name == "osu_put_latency" {
            cases.extend([&["-v"][..], &["-i", "3", "-s"]]);
        }
        for args in cases {
            let (rust, c) = both(name, &c_exe, args);
            assert_eq!(
                (rust.code, &rust.stdout, own_stderr(&rust)),
                (c.code, &c.stdout, own_stderr(&c)),
                "{name} {args:?}\n--- Rust\n{}\n--- C\n{}",
                rust.show(),
                c.show()
            );
        }
        // No dynamic windows in kestrel::window: a clear refusal, not another window.
        let rust = two_ranks(&bin(name), &["-w", "dynamic", "-m", "1"]);
        let said = own_stderr(&rust).join("\n");
        assert!(
            rust.code == Some(1)
                && rust.stdout.is_empty()
                && said.starts_with(&format!(
                    "{name}: -w dynamic (MPI_Win_create_dynamic) is not available"
                ))
                && said.contains(&format!("bench/c/{name}.c")),
            "{name} -w dynamic: {}",
            rust.show()
        );
    }
    eprintln!("one-sided Rust/C comparison took {:?}", started.elapsed());
}
