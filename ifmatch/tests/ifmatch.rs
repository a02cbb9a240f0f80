#![cfg(feature = "libfabric")]
//! Golden tests of `kestrel-ifmatch explain`: the built binary runs on the fixture cards in
//! `tests/fixtures/` and its exit code, stdout and stderr are compared with the transcripts in
//! `tests/fixtures/golden/`. After an intended change of output, regenerate them with
//! `KESTREL_BLESS=1 cargo test -p kestrel-ifmatch --test ifmatch` and review the diff.
//!
//! Properties that matter more than wording (mirrored pairings from both sides, exit codes,
//! error messages naming file and field) are also asserted directly.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_kestrel-ifmatch");
/// Far above the few milliseconds a run takes; a hang fails the test instead of blocking it.
const RUN_LIMIT: Duration = Duration::from_secs(60);

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn run_with(args: &[&str], configure: impl FnOnce(&mut Command)) -> Run {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .current_dir(fixtures())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    configure(&mut cmd);
    let mut child = cmd.spawn().expect("start kestrel-ifmatch");
    let drain = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            pipe.read_to_string(&mut text).expect("output is UTF-8");
            text
        })
    };
    let stdout = drain(Box::new(child.stdout.take().expect("piped stdout")));
    let stderr = drain(Box::new(child.stderr.take().expect("piped stderr")));
    let deadline = Instant::now() + RUN_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for kestrel-ifmatch") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("kestrel-ifmatch {args:?} did not finish within {RUN_LIMIT:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Run {
        code: status
            .code()
            .expect("kestrel-ifmatch exited, not killed by a signal"),
        stdout: stdout.join().expect("stdout reader"),
        stderr: stderr.join().expect("stderr reader"),
    }
}

fn run(args: &[&str]) -> Run {
    run_with(args, |_| {})
}

/// Runs the binary and compares its transcript with `golden/<name>.txt` (or writes it when
/// `KESTREL_BLESS` is set).
fn golden(name: &str, args: &[&str]) -> Run {
    let r = run(args);
    let transcript = format!(
        "$ kestrel-ifmatch{}\nexit code: {}\n--- stdout\n{}--- stderr\n{}",
        args.iter().map(|a| format!(" {a}")).collect::<String>(),
        r.code,
        r.stdout,
        r.stderr
    );
    let path = fixtures().join("golden").join(format!("{name}.txt"));
    if std::env::var_os("KESTREL_BLESS").is_some() {
        std::fs::write(&path, &transcript).expect("write golden file");
        return r;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "golden file {} cannot be read ({e}); create it with KESTREL_BLESS=1",
            path.display()
        )
    });
    if expected != transcript {
        let line = expected
            .lines()
            .zip(transcript.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| expected.lines().count().min(transcript.lines().count()));
        panic!(
            "output differs from {} at line {}:\n  expected: {:?}\n  actual:   {:?}\n\
             full output:\n{transcript}\nif the change is intended, rerun with KESTREL_BLESS=1 \
             and review the diff",
            path.display(),
            line + 1,
            expected.lines().nth(line).unwrap_or("<end>"),
            transcript.lines().nth(line).unwrap_or("<end>"),
        );
    }
    r
}

fn json(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.extend(["--format", "json"]);
    let r = run(&all);
    serde_json::from_str(&r.stdout).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e})"))
}

/// (local name, remote name) of each chosen pair in a JSON report.
fn pair_names(report: &Value, field: &str) -> Vec<(String, String)> {
    report[field]
        .as_array()
        .expect("pairs array")
        .iter()
        .map(|p| {
            (
                p["local_name"].as_str().unwrap().to_string(),
                p["remote_name"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn names(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn equal_subnets_pair_namesakes() {
    let r = golden(
        "equal-subnets",
        &["explain", "equal-subnets-h0.json", "equal-subnets-h1.json"],
    );
    assert_eq!(r.code, 0);
    let report = json(&["explain", "equal-subnets-h0.json", "equal-subnets-h1.json"]);
    assert_eq!(
        pair_names(&report, "pairs"),
        names(&[("eth1", "eth1"), ("eth2", "eth2")])
    );
    assert_eq!(report["sides_agree"], true);
}

#[test]
fn an_extra_unreachable_subnet_stays_unpaired() {
    let r = golden(
        "extra-subnet",
        &["explain", "extra-subnet-h0.json", "equal-subnets-h1.json"],
    );
    assert_eq!(r.code, 0);
    let report = json(&["explain", "extra-subnet-h0.json", "equal-subnets-h1.json"]);
    assert_eq!(
        pair_names(&report, "pairs"),
        names(&[("eth1", "eth1"), ("eth2", "eth2")])
    );
    let unpaired = &report["unpaired_local"][0];
    assert_eq!(unpaired["name"], "eth3");
    assert_eq!(unpaired["reason"], "no_reachable_partner");
}

#[test]
fn faster_link_wins_in_the_same_subnet() {
    let r = golden(
        "faster-link",
        &["explain", "speed-h0.json", "speed-h1.json"],
    );
    assert_eq!(r.code, 0);
    let report = json(&["explain", "speed-h0.json", "speed-h1.json"]);
    assert_eq!(pair_names(&report, "pairs"), names(&[("eth2", "eth1")]));
    assert_eq!(
        report["unpaired_local"][0]["reason"],
        "partners_taken_by_better_pairs"
    );
}

#[test]
fn same_subnet_beats_a_faster_routed_pair() {
    let r = golden(
        "same-subnet-beats-routed",
        &["explain", "routed-h0.json", "routed-h1.json"],
    );
    assert_eq!(r.code, 0);
    let report = json(&["explain", "routed-h0.json", "routed-h1.json"]);
    assert_eq!(pair_names(&report, "pairs"), names(&[("eth1", "eth1")]));
    // The routed pair is really faster, so the subnet bit is what decides.
    let routed = &report["candidates"][1]["local_view"];
    assert_eq!(routed["same_subnet"], false);
    assert_eq!(routed["min_speed_gbps"], 100);
    assert_eq!(report["candidates"][0]["local_view"]["min_speed_gbps"], 10);
}

#[test]
fn equal_weight_ties_resolve_identically_from_both_sides() {
    let from_h0 = golden("tie-from-h0", &["explain", "tie-h0.json", "tie-h1.json"]);
    let from_h1 = golden(
        "tie-from-h1",
        &[
            "explain",
            "tie-h1.json",
            "tie-h0.json",
            "--local-rank",
            "1",
            "--remote-rank",
            "0",
        ],
    );
    assert_eq!((from_h0.code, from_h1.code), (0, 0));

    let a = json(&["explain", "tie-h0.json", "tie-h1.json"]);
    let b = json(&[
        "explain",
        "tie-h1.json",
        "tie-h0.json",
        "--local-rank",
        "1",
        "--remote-rank",
        "0",
    ]);
    // Every reachable pair has the same weight, so only the tie rule decides.
    let weights: Vec<&Value> = a["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| &c["local_view"]["weight"])
        .filter(|w| !w.is_null())
        .collect();
    assert_eq!(weights.len(), 7);
    assert!(weights.iter().all(|w| *w == weights[0]));

    let mut mirrored: Vec<(String, String)> = pair_names(&b, "pairs")
        .into_iter()
        .map(|(local, remote)| (remote, local))
        .collect();
    mirrored.sort();
    assert_eq!(pair_names(&a, "pairs"), mirrored);
    assert_eq!(pair_names(&a, "pairs").len(), 3);
    assert_eq!(
        (&a["sides_agree"], &b["sides_agree"]),
        (&Value::Bool(true), &Value::Bool(true))
    );

    // With the ranks the other way round, h1 is the left side and the tie breaks differently:
    // the mirrored agreement above comes from the canonical orientation, not from luck.
    let swapped = json(&[
        "explain",
        "tie-h0.json",
        "tie-h1.json",
        "--local-rank",
        "1",
        "--remote-rank",
        "0",
    ]);
    assert_ne!(pair_names(&swapped, "pairs"), pair_names(&a, "pairs"));
}

#[test]
fn asymmetric_metrics_warn_and_name_both_pairings() {
    let r = golden(
        "asymmetric-metrics",
        &["explain", "asym-h0.json", "asym-h1.json"],
    );
    assert_eq!(r.code, 0);
    assert!(r
        .stdout
        .contains("warning: the two sides could decide differently"));
    let report = json(&["explain", "asym-h0.json", "asym-h1.json"]);
    assert_eq!(report["sides_agree"], false);
    assert_eq!(
        pair_names(&report, "pairs"),
        names(&[("eth1", "eth1"), ("eth2", "eth2")])
    );
    assert_eq!(
        pair_names(&report, "remote_view_pairs"),
        names(&[("eth1", "eth2"), ("eth2", "eth1")])
    );
    let warning = report["warnings"][0].as_str().unwrap();
    assert!(
        warning.contains("h0:eth1<->h1:eth1, h0:eth2<->h1:eth2"),
        "{warning}"
    );
    assert!(
        warning.contains("h0:eth1<->h1:eth2, h0:eth2<->h1:eth1"),
        "{warning}"
    );
    // Tool formats repeat the warning on stderr for the person running them.
    let dot = run(&["explain", "asym-h0.json", "asym-h1.json", "--format", "dot"]);
    assert!(dot
        .stderr
        .contains("warning: the two sides could decide differently"));
}

#[test]
fn no_reachable_pair_exits_3_with_a_reason() {
    let r = golden(
        "no-reachable-pair",
        &["explain", "isolated-h0.json", "isolated-h1.json"],
    );
    assert_eq!(r.code, 3);
    assert!(r
        .stderr
        .contains("no reachable interface pair between h0 and h1"));
    let report = json(&["explain", "isolated-h0.json", "isolated-h1.json"]);
    assert_eq!(report["no_reachable_pair"], true);
    assert_eq!(report["pairs"], Value::Array(vec![]));
}

#[test]
fn malformed_and_unknown_version_cards_name_the_file_and_the_field() {
    for (file, field) in [
        ("bad-prefix.json", "interfaces[1].prefix_len"),
        ("bad-version.json", "version"),
        ("bad-field.json", "interfaces[0].link_speed_mpbs"),
        ("bad-address.json", "interfaces[0].ipv4"),
        ("bad-missing.json", "interfaces[0].mtu"),
        ("bad-route.json", "routes[1].interface"),
    ] {
        let name = file.trim_end_matches(".json");
        let as_local = golden(name, &["explain", file, "equal-subnets-h1.json"]);
        let as_remote = run(&["explain", "equal-subnets-h0.json", file]);
        for r in [&as_local, &as_remote] {
            assert_eq!(r.code, 2, "{file}");
            assert_eq!(r.stdout, "", "{file}: nothing on stdout");
            assert!(
                r.stderr.contains(&format!("'{file}': field {field}: ")),
                "{file}: {}",
                r.stderr
            );
        }
    }
    let r = golden(
        "bad-syntax",
        &["explain", "bad-syntax.json", "equal-subnets-h1.json"],
    );
    assert_eq!(r.code, 2);
    assert!(r
        .stderr
        .contains("'bad-syntax.json': not valid JSON (line 6, column 3"));
    let r = run(&["explain", "equal-subnets-h0.json", "no-such-card.json"]);
    assert_eq!(r.code, 2);
    assert!(r
        .stderr
        .contains("'no-such-card.json': cannot read the file"));
}

#[test]
fn json_and_dot_formats() {
    let r = golden(
        "asymmetric-metrics-json",
        &[
            "explain",
            "asym-h0.json",
            "asym-h1.json",
            "--format",
            "json",
        ],
    );
    assert_eq!(r.code, 0);
    let report: Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(report["format"], "kestrel-ifmatch-explain");
    assert_eq!(report["version"], 1);

    let r = golden(
        "extra-subnet-dot",
        &[
            "explain",
            "extra-subnet-h0.json",
            "equal-subnets-h1.json",
            "--format=dot",
        ],
    );
    assert_eq!(r.code, 0);
    // Chosen edges are bold, the others are not.
    let bold: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.contains("style=bold"))
        .collect();
    assert_eq!(bold.len(), 2);
    assert!(bold[0].starts_with("  l0 -- r0") && bold[1].starts_with("  l1 -- r1"));
}

#[test]
fn usage_errors_exit_2_and_usage_lists_every_command() {
    let r = golden("usage", &[]);
    assert_eq!(r.code, 2);
    let help = run(&["--help"]);
    assert_eq!(help.code, 0);
    assert_eq!(help.stdout, r.stderr);
    assert!(help
        .stdout
        .contains("kestrel-ifmatch explain LOCAL.json REMOTE.json"));
    for command in ["list", "card", "check"] {
        assert!(help.stdout.contains(&format!("kestrel-ifmatch {command}")));
    }
    assert!(!help.stdout.contains("kestrel-ifmatch frobnicate"));
    for args in [
        &["frobnicate"][..],
        &["explain", "equal-subnets-h0.json"],
        &[
            "explain",
            "equal-subnets-h0.json",
            "equal-subnets-h1.json",
            "--format",
            "svg",
        ],
        &[
            "explain",
            "equal-subnets-h0.json",
            "equal-subnets-h1.json",
            "--local-rank",
            "1",
        ],
    ] {
        let r = run(args);
        assert_eq!(r.code, 2, "{args:?}");
        assert!(
            r.stderr.starts_with("kestrel-ifmatch"),
            "{args:?}: {}",
            r.stderr
        );
        assert_eq!(r.stdout, "");
    }
}

/// A scratch directory for one test, removed at the end.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir =
            std::env::temp_dir().join(format!("kestrel-ifmatch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create scratch directory");
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn png_without_graphviz_says_how_to_install_it() {
    let scratch = Scratch::new("nodot");
    let png = scratch.0.join("graph.png");
    let args = [
        "explain",
        "equal-subnets-h0.json",
        "equal-subnets-h1.json",
        "--png",
        png.to_str().unwrap(),
    ];
    // An empty PATH: no `dot` to find.
    let r = run_with(&args, |cmd| {
        cmd.env("PATH", &scratch.0);
    });
    assert_eq!(r.code, 1);
    assert!(
        r.stderr.contains("apt-get install graphviz"),
        "{}",
        r.stderr
    );
    assert!(
        r.stdout.contains("chosen pairing"),
        "the report is still printed"
    );
    assert!(!png.exists());
}

#[test]
fn png_with_graphviz_writes_an_image() {
    let has_dot = std::env::var_os("PATH")
        .map(|paths| std::env::split_paths(&paths).any(|p| p.join("dot").is_file()))
        .unwrap_or(false);
    if !has_dot {
        eprintln!(
            "skipped: Graphviz's dot is not installed (the missing-dot path is tested above)"
        );
        return;
    }
    let scratch = Scratch::new("dot");
    let png = scratch.0.join("graph.png");
    let r = run(&[
        "explain",
        "asym-h0.json",
        "asym-h1.json",
        "--png",
        png.to_str().unwrap(),
    ]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let bytes = std::fs::read(&png).expect("dot wrote the PNG");
    assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
}

/// `--transport ofi`: this host's RDM domains with the transport's verdicts, its card, and two
/// cards explained, all under the `KESTREL_OFI_*` parameters (loopback named, so that a
/// domain is used on any machine).
#[test]
fn the_ofi_transport_lists_its_domains_prints_its_card_and_explains_a_pairing() {
    let lo = |cmd: &mut Command| {
        cmd.env("KESTREL_OFI_IF_INCLUDE", "127.0.0.1/32");
    };
    let list = run_with(&["list", "--transport", "ofi", "--json"], lo);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let doc: Value = serde_json::from_str(&list.stdout).expect("list --json is JSON");
    let domains = doc["domains"].as_array().expect("a domains array");
    let used: Vec<&Value> = domains.iter().filter(|d| d["used"] == true).collect();
    assert_eq!(
        used.len(),
        1,
        "exactly the loopback domain: {}",
        list.stdout
    );
    assert_eq!(used[0]["ipv4"], "127.0.0.1");
    assert!(
        domains
            .iter()
            .filter(|d| d["used"] == false)
            .all(|d| d["reason"].as_str().is_some_and(|r| !r.is_empty())),
        "every excluded domain says why: {}",
        list.stdout
    );

    let card = run_with(&["card", "--transport", "ofi", "--node", "n0"], lo);
    assert_eq!(card.code, 0, "{}", card.stderr);
    let dir = std::env::temp_dir().join(format!("ifmatch-ofi-card-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("n0.json");
    std::fs::write(&file, &card.stdout).unwrap();
    let path = file.to_str().unwrap();
    let explained = run(&["explain", "--transport", "ofi", path, path]);
    assert_eq!(explained.code, 0, "{}", explained.stderr);
    assert!(
        explained.stdout.contains("lo") && explained.stdout.contains("carries the traffic"),
        "{}",
        explained.stdout
    );
    // A usnic card given to the ofi explanation is refused, naming the field.
    let wrong = run(&[
        "explain",
        "--transport",
        "ofi",
        "equal-subnets-h0.json",
        path,
    ]);
    assert_eq!(wrong.code, 2, "{}", wrong.stdout);
    assert!(wrong.stderr.contains("transport"), "{}", wrong.stderr);
    std::fs::remove_dir_all(&dir).unwrap();
    let bad = run(&["check", "--transport", "ofi"]);
    assert_eq!(bad.code, 2);
}
