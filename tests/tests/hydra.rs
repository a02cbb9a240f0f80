//! Interoperability with MPICH: Kestrel ranks under MPICH's hydra launcher (its PMI-1 and
//! PMI-2 servers, over an inherited socket and over a TCP port), and an MPICH-built program
//! under `kestrel-run` (our PMI server answering MPICH's own client).

use std::process::Command;
use std::time::Duration;

use kestrel_tests::*;

const DEADLINE: Duration = Duration::from_secs(60);

fn mpiexec(pmi: &str, port: bool, n: u32, program: &std::path::Path) -> Command {
    let mut c = Command::new(tool("mpiexec.mpich", "mpich"));
    if port {
        c.arg("-pmi-port");
    }
    c.args(["-n", &n.to_string()])
        .arg(program)
        .env("KESTREL_PMI", pmi);
    c
}

#[test]
fn hello_under_hydra_with_pmi1_pmi2_and_auto() {
    let hello = example("hello");
    for pmi in ["pmi1", "pmi2", "auto"] {
        let out = run(mpiexec(pmi, false, 3, &hello), DEADLINE);
        assert!(out.success(), "{pmi}: {}", out.show());
        let lines = lines_starting(&out.stdout, "Hello from rank ");
        assert_eq!(lines.len(), 3, "{pmi}: {}", out.show());
        for (r, line) in lines.iter().enumerate() {
            assert!(
                line.starts_with(&format!("Hello from rank {r} of 3 on ")),
                "{line}"
            );
        }
    }
}

#[test]
fn modex_under_hydra_over_inherited_socket_and_tcp_port() {
    let check = example("modex_check");
    for port in [false, true] {
        for pmi in ["pmi1", "pmi2"] {
            let out = run(mpiexec(pmi, port, 3, &check), DEADLINE);
            assert!(out.success(), "{pmi} port={port}: {}", out.show());
            assert!(
                out.stdout.contains("modex check passed on 3 ranks"),
                "{}",
                out.show()
            );
            assert_eq!(
                out.stdout.matches(&format!("pmi {pmi}")).count(),
                3,
                "{}",
                out.show()
            );
        }
    }
}

#[test]
fn mpich_built_program_runs_under_kestrel_run() {
    let mpicc = tool("mpicc.mpich", "libmpich-dev");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/c/hello.c");
    let dir = scratch("mpich-hello");
    let exe = dir.join("hello");
    let status = Command::new(mpicc)
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .status()
        .unwrap();
    assert!(status.success(), "mpicc.mpich failed on {}", src.display());
    let out = run(
        kestrel_run(&["--oversubscribe", "-n", "3", exe.to_str().unwrap()]),
        DEADLINE,
    );
    assert!(out.success(), "{}", out.show());
    let lines = lines_starting(&out.stdout, "Hello from rank ");
    assert_eq!(lines.len(), 3, "{}", out.show());
    assert!(
        lines[2].starts_with("Hello from rank 2 of 3"),
        "{}",
        out.show()
    );
}

#[test]
fn a_killed_mpiexec_leaves_no_rank_and_no_segment() {
    // Hydra's proxy SIGKILLs the ranks when mpiexec dies, so they cannot clean up then: they
    // removed their segments' names once every peer had mapped them, at the end of start-up.
    let mark = marker("hydra-kill");
    let mut cmd = mpiexec("pmi2", false, 4, &example("fail"));
    cmd.args(["spin", &mark])
        .stderr(std::process::Stdio::null());
    let mut child = start_spinning(cmd, &mark, DEADLINE);
    // Hydra names the job's key-value space after mpiexec's pid, and the ranks their files
    // after the key-value space.
    let ours = format!("kestrel.kvs_{}_", child.id());
    let files = || -> Vec<String> {
        job_files()
            .into_iter()
            .filter(|f| f.contains(&ours))
            .collect()
    };
    let running = files();
    let mpiexec_pid = child.id();
    let ranks = processes_matching(&mark)
        .into_iter()
        .filter(|&p| p != mpiexec_pid)
        .count();
    child.kill().expect("SIGKILL mpiexec");
    let _ = child.wait();
    let killed = std::time::Instant::now();
    while !processes_matching(&mark).is_empty() && killed.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let survivors = processes_matching(&mark);
    kill_matching(&mark);
    let left = files();
    assert_eq!(ranks, 4, "the job's ranks while it ran");
    assert!(running.is_empty(), "files while the job ran: {running:?}");
    assert!(survivors.is_empty(), "ranks survived mpiexec's SIGKILL");
    assert!(left.is_empty(), "files after mpiexec's SIGKILL: {left:?}");
}
