//! Dynamic-process checks shared by the test files: the server/client meeting of
//! `examples/dpm_check` (two separately launched jobs, 2 and 3 ranks) and the clean-up checks
//! after it. Where the jobs run (one host, namespace hosts) and over which transport is the
//! caller's choice: it passes the launcher command for each side.

use std::process::Command;
use std::time::Duration;

use crate::{example, job_files, marker, processes_matching, run, Outcome};

/// How long one side of a meeting may take.
pub const DEADLINE: Duration = Duration::from_secs(120);

/// `examples/dpm_check`.
pub fn prog() -> String {
    example("dpm_check").display().to_string()
}

/// A private name-service directory for one test, removed when the test ends (passed or
/// failed).
pub fn name_dir(tag: &str) -> crate::Scratch {
    crate::scratch(tag)
}

/// Job ids the ranks printed (`JOB=`) and the launcher named (`kestrel-run: job <id> (`).
pub fn job_ids(out: &Outcome) -> Vec<String> {
    let mut ids: Vec<String> = out
        .stdout
        .lines()
        .filter_map(|l| l.strip_prefix("JOB="))
        .map(String::from)
        .collect();
    for l in out.stderr.lines() {
        if let Some(id) = l
            .strip_prefix("kestrel-run: job ")
            .and_then(|r| r.split(' ').next())
        {
            if !ids.iter().any(|i| i == id) {
                ids.push(id.to_string());
            }
        }
    }
    ids
}

/// Nothing of `jobs` left in /dev/shm or the session directory, no process with `mark`.
pub fn assert_clean(jobs: &[String], mark: &str) {
    // Launchers remove files as they exit; give stragglers a moment.
    let start = std::time::Instant::now();
    loop {
        let left: Vec<String> = job_files()
            .into_iter()
            .filter(|f| jobs.iter().any(|j| f.contains(j.as_str())))
            .collect();
        let procs = processes_matching(mark);
        if left.is_empty() && procs.is_empty() {
            return;
        }
        if start.elapsed() > Duration::from_secs(5) {
            panic!("left behind: files {left:?}, processes {procs:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A server job of 2 ranks and a client job of 3 meet through the name service, exchange
/// messages, run the inter-communicator collectives, merge, allreduce, disconnect and go on
/// alone; nothing is left behind. `launch(ranks)` is the launcher command (options only) for
/// a job of `ranks` ranks; this function adds the name service and the program.
pub fn server_and_client(launch: &dyn Fn(&str) -> Command) {
    let mark = marker("dpm-sc");
    let dir = name_dir("names");
    let service = format!("svc-{mark}");
    let dir_s = dir.display().to_string();
    let side = |n: &str, mode: &str| {
        let mut c = launch(n);
        c.args(["--mca", "dpm_name_dir", &dir_s]);
        c.arg(prog()).args([mode, service.as_str(), mark.as_str()]);
        c
    };
    let server_cmd = side("2", "server");
    let client_cmd = side("3", "client");
    let server = std::thread::spawn(move || run(server_cmd, DEADLINE));
    // The client looks the name up until the server has published it.
    let client = run(client_cmd, DEADLINE);
    let server = server.join().unwrap();
    assert!(server.success(), "server: {}", server.show());
    assert!(client.success(), "client: {}", client.show());
    for r in 0..2 {
        assert!(
            server.stdout.contains(&format!(
                "server rank {r} of 2: exchange and inter collectives ok"
            )),
            "{}",
            server.show()
        );
        assert!(
            server
                .stdout
                .contains(&format!("server merged rank {r} of 5: allreduce 10 ok")),
            "{}",
            server.show()
        );
        assert!(server
            .stdout
            .contains(&format!("server rank {r}: alone again ok")));
    }
    for r in 0..3 {
        assert!(
            client.stdout.contains(&format!(
                "client rank {r} of 3: exchange and inter collectives ok"
            )),
            "{}",
            client.show()
        );
        assert!(
            client.stdout.contains(&format!(
                "client merged rank {} of 5: allreduce 10 ok",
                r + 2
            )),
            "{}",
            client.show()
        );
        assert!(client
            .stdout
            .contains(&format!("client rank {r}: alone again ok")));
    }
    // The server unpublished its name.
    let names: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert!(
        names.is_empty(),
        "names left in {}: {names:?}",
        dir.display()
    );
    let mut jobs = job_ids(&server);
    jobs.extend(job_ids(&client));
    assert_eq!(jobs.len(), 2, "{jobs:?}");
    assert_clean(&jobs, &mark);
}
