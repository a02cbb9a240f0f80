//! Dynamic-process checks for `tests/tests/dpm.rs` (each mode prints `ok` lines the test
//! looks for, and `JOB=<id>` so the test can look for files the job left):
//!
//! * `server SERVICE` / `client SERVICE`: two separately launched jobs meet through the name
//!   service, exchange messages both ways, run the inter-communicator collectives, merge
//!   (server first) and allreduce over all five ranks, then disconnect and carry on alone.
//! * `parent N` / `child`: the parent job spawns N children that compute squares of the
//!   numbers they are sent and send the results back; inter-communicator collectives run
//!   across the parent/child communicator; then both disconnect.
//! * `crash-parent N` / `crash-child`: child rank 1 dies after connecting; the parent's
//!   receive from it must fail with an error, not hang.
//! * `merged-crash-parent N` / `merged-crash-child`: parents and children merge, child rank 1
//!   dies while every parent waits for a message from it over the merged communicator; the
//!   parent job must stop with the failure named, not hang or take the receive as done.
//! * `merged-scope-crash-parent N` / `merged-scope-crash-child`: the same, with the parents'
//!   receive an immediate one that nobody waits for (leaked), so the end of its
//!   `request::scope` is what completes it.
//! * `multi-parent N` / `multi-child`: `spawn_multiple` of two programs into one job.
//! * `orphan-parent N`: parent rank 1 dies while its children are connected; the parent's
//!   launcher must stop the children too.
//! * `spawn-fail`: spawning a program that does not exist is an error.
//! * `ports`: malformed port names and a closed port are errors naming what is wrong; a port
//!   of a process that is gone fails after `dpm_connect_timeout_ms`.
//! * `intercomm`: `intercomm_create` between the two halves of the world, then merge.
//!
//! Every extra argument after the mode's own is ignored (tests pass a marker to find their
//! processes).

use std::time::{Duration, Instant};

use kestrel::collective::{CommunicatorCollectives, SystemOperation};
use kestrel::dpm::{DpmError, InterCommunicator, InterRoot, MpiClass, SpawnCommand};
use kestrel::{Color, Communicator, Universe};

fn arg(i: usize) -> String {
    std::env::args().nth(i).unwrap_or_default()
}

fn die(what: &str, e: impl std::fmt::Display) -> ! {
    eprintln!("dpm_check: {what}: {e}");
    std::process::exit(3)
}

fn check(cond: bool, what: &str) {
    if !cond {
        die("check failed", what);
    }
}

fn job_line(u: &Universe) {
    if u.rank() == 0 {
        println!(
            "JOB={}",
            std::env::var("KESTREL_JOB_ID").unwrap_or_else(|_| "?".into())
        );
    }
}

/// Messages both ways and every inter-communicator collective; `server` says which side.
fn exercise(inter: &InterCommunicator, server: bool, label: &str) {
    let me = inter.rank();
    let remote = inter.remote_size();
    let local = inter.size();
    // This side's ranks send to every remote rank, then receive from every remote rank.
    let base = if server { 1000 } else { 2000 };
    let other = if server { 2000 } else { 1000 };
    let order = |send_first: bool| {
        if send_first {
            for r in 0..remote {
                let v = [base + 10 * me as u64 + r as u64];
                inter.send(r, &v[..], 7).unwrap_or_else(|e| die("send", e));
            }
        } else {
            let mut seen = vec![false; remote as usize];
            for _ in 0..remote {
                let mut v = [0u64];
                let st = inter
                    .receive_into(None, Some(7), &mut v[..])
                    .unwrap_or_else(|e| die("receive", e));
                let src = st.source_rank();
                check(
                    v[0] == other + 10 * src as u64 + me as u64,
                    "payload from the other job",
                );
                seen[src as usize] = true;
            }
            check(
                seen.iter().all(|&s| s),
                "one message from every remote rank",
            );
        }
    };
    // The server sends first; both orders are safe for eager messages, this keeps it simple.
    order(server);
    order(!server);
    // A large message each way between the leaders (rendezvous across the jobs).
    if me == 0 {
        let big: Vec<u64> = (0..(1u64 << 17)).map(|i| i * 3 + base).collect();
        let mut back = vec![0u64; big.len()];
        if server {
            inter
                .send(0, &big[..], 8)
                .unwrap_or_else(|e| die("large send", e));
            inter
                .receive_into(Some(0), Some(8), &mut back[..])
                .unwrap_or_else(|e| die("large receive", e));
        } else {
            inter
                .receive_into(Some(0), Some(8), &mut back[..])
                .unwrap_or_else(|e| die("large receive", e));
            inter
                .send(0, &big[..], 8)
                .unwrap_or_else(|e| die("large send", e));
        }
        check(
            back.iter()
                .enumerate()
                .all(|(i, &v)| v == i as u64 * 3 + other),
            "1 MiB message from the other job",
        );
    }
    inter.barrier().unwrap_or_else(|e| die("inter barrier", e));
    // Broadcast from server rank 0 to the client group.
    let mut b = [0u32; 4];
    let root = if server {
        if me == 0 {
            b = [7, 8, 9, 10];
            InterRoot::Root
        } else {
            InterRoot::RootGroup
        }
    } else {
        InterRoot::Remote(0)
    };
    inter
        .broadcast_into(root, &mut b[..])
        .unwrap_or_else(|e| die("inter bcast", e));
    if !server {
        check(b == [7, 8, 9, 10], "broadcast from server rank 0");
    }
    // Allreduce: each side gets the sum over the *other* side.
    let mine = [(me as u64 + 1) * if server { 1 } else { 10 }];
    let mut sum = [0u64];
    inter
        .all_reduce_into(&mine[..], &mut sum[..], SystemOperation::sum())
        .unwrap_or_else(|e| die("inter allreduce", e));
    let n = remote as u64;
    let expect = n * (n + 1) / 2 * if server { 10 } else { 1 };
    check(sum[0] == expect, "inter allreduce sums the other group");
    // Allgather: each side gets the other side's values in its rank order.
    let mut all = vec![0i32; remote as usize];
    inter
        .all_gather_into(&[me * if server { -1 } else { 1 }][..], &mut all)
        .unwrap_or_else(|e| die("inter allgather", e));
    let want: Vec<i32> = (0..remote).map(|r| if server { r } else { -r }).collect();
    check(all == want, "inter allgather gathers the other group");
    println!("{label} rank {me} of {local}: exchange and inter collectives ok");
}

fn server(u: &Universe, service: &str) {
    let world = u.world();
    let port = if world.rank() == 0 {
        let p = u.open_port().unwrap_or_else(|e| die("open_port", e));
        u.publish_name(service, &p)
            .unwrap_or_else(|e| die("publish_name", e));
        p
    } else {
        String::new()
    };
    let inter = world.accept(&port, 0).unwrap_or_else(|e| die("accept", e));
    check(inter.size() == world.size(), "local size");
    exercise(&inter, true, "server");
    merged(&inter, false, "server");
    inter.disconnect().unwrap_or_else(|e| die("disconnect", e));
    if world.rank() == 0 {
        u.unpublish_name(service, &port)
            .unwrap_or_else(|e| die("unpublish_name", e));
        u.close_port(&port).unwrap_or_else(|e| die("close_port", e));
    }
    alone(u, "server");
}

fn client(u: &Universe, service: &str) {
    let world = u.world();
    let port = if world.rank() == 0 {
        // The server may not have published yet.
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            match u.lookup_name(service) {
                Ok(p) => break p,
                Err(e) if e.mpi_class() == MpiClass::Name && Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                Err(e) => die("lookup_name", e),
            }
        }
    } else {
        String::new()
    };
    let inter = world
        .connect(&port, 0)
        .unwrap_or_else(|e| die("connect", e));
    exercise(&inter, false, "client");
    merged(&inter, true, "client");
    inter.disconnect().unwrap_or_else(|e| die("disconnect", e));
    alone(u, "client");
}

/// Merge (server first), then an allreduce and a ring over everybody.
fn merged(inter: &InterCommunicator, high: bool, label: &str) {
    let all = inter.merge(high).unwrap_or_else(|e| die("merge", e));
    let n = all.size();
    let r = all.rank();
    let expect_rank = if high {
        inter.remote_size() + inter.rank()
    } else {
        inter.rank()
    };
    check(n == inter.size() + inter.remote_size(), "merged size");
    check(r == expect_rank, "merged rank order (low group first)");
    let mut sum = [0u64];
    all.all_reduce_into(&[r as u64][..], &mut sum[..], SystemOperation::sum());
    check(
        sum[0] == (n as u64) * (n as u64 - 1) / 2,
        "merged allreduce",
    );
    // A ring: everybody passes its rank to the right.
    let right = (r + 1) % n;
    let left = (r + n - 1) % n;
    let mut got = [0i32];
    all.process_at_rank(right).send_receive_into(
        &[r][..],
        &all.process_at_rank(left),
        &mut got[..],
    );
    check(got[0] == left, "ring over the merged communicator");
    all.barrier();
    println!("{label} merged rank {r} of {n}: allreduce {} ok", sum[0]);
}

/// After disconnecting, the job works alone.
fn alone(u: &Universe, label: &str) {
    let world = u.world();
    let mut sum = [0u32];
    world.all_reduce_into(&[1u32][..], &mut sum[..], SystemOperation::sum());
    check(
        sum[0] == world.size() as u32,
        "world allreduce after disconnect",
    );
    println!("{label} rank {}: alone again ok", world.rank());
}

fn parent(u: &Universe, n: u32, child_mode: &str, marker: &str) {
    let world = u.world();
    let exe = std::env::current_exe().unwrap_or_else(|e| die("current_exe", e));
    let exe = exe.display().to_string();
    let cmd = |procs: u32, app: &str| {
        SpawnCommand::new(exe.clone(), procs)
            .arg(child_mode)
            .arg(marker)
            .arg(app)
            .info(
                "env",
                format!(
                    "DPM_CHECK_GREETING=hello from {}\nDPM_CHECK_N={n}",
                    world.size()
                ),
            )
            .info("wdir", "/tmp")
    };
    let children = if child_mode == "multi-child" {
        // Two programs (here: two argument lists) in one job: ranks 0..n-1 run A, n-1 runs B.
        world
            .spawn_multiple(&[cmd(n - 1, "A"), cmd(1, "B")], 0)
            .unwrap_or_else(|e| die("spawn_multiple", e))
    } else {
        world
            .spawn(&cmd(n, "A"), 0)
            .unwrap_or_else(|e| die("spawn", e))
    };
    if child_mode == "orphan-child" {
        // Rank 1 dies with the children connected; its launcher stops everything.
        if world.rank() == 1 {
            // Ends without disconnecting or finalizing (exit runs no clean-up).
            eprintln!("parent rank 1: dying on purpose");
            std::process::exit(42);
        }
        let mut v = [0u64; 2];
        let _ = children.receive_into(Some(0), Some(2), &mut v[..]);
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    check(children.remote_size() == n as i32, "children remote size");
    if child_mode == "merged-crash-child" || child_mode == "merged-scope-crash-child" {
        merged_crash_parent(&world, &children, child_mode == "merged-scope-crash-child");
        return;
    }
    // Rank 0 of the parents hands out work, every parent receives a share of the results.
    let me = world.rank();
    if me == 0 {
        for c in 0..n as i32 {
            children
                .send(c, &[c as u64 + 3][..], 1)
                .unwrap_or_else(|e| die("send work", e));
        }
    }
    let crash = child_mode == "crash-child";
    let mut got = 0;
    for c in (0..n as i32).filter(|c| c % world.size() == me) {
        let mut v = [0u64; 2];
        match children.receive_into(Some(c), Some(2), &mut v[..]) {
            Ok(_) => {
                check(
                    v[0] == (c as u64 + 3) * (c as u64 + 3),
                    "child computed the square",
                );
                check(v[1] == n as u64, "child saw DPM_CHECK_N through info env");
                got += 1;
            }
            Err(e) if crash => {
                check(e.mpi_class() == MpiClass::ProcFailed, "failure class");
                println!("parent rank {me}: child {c} failed as expected: {e}");
                let again = children.barrier();
                check(again.is_err(), "later operations fail too");
                return;
            }
            Err(e) => die("receive result", e),
        }
    }
    if crash {
        // Parent 1's children all answered; the crashed one is parent 0's share.
        println!("parent rank {me}: no crashed child in my share");
        return;
    }
    println!("parent rank {me}: {got} results ok");
    exercise(&children, true, "parent");
    children
        .disconnect()
        .unwrap_or_else(|e| die("disconnect", e));
    alone(u, "parent");
}

/// Parents and children merge; parent 0 tells child 1 to go and every parent then waits
/// for a message from it, which dies instead: the receives were posted before it died, so
/// they end with the failed peer, and that stops the parent job with the engine's account.
fn merged_crash_parent(
    world: &kestrel::SimpleCommunicator,
    children: &InterCommunicator,
    scoped: bool,
) {
    let merged = children.merge(false).unwrap_or_else(|e| die("merge", e));
    let child1 = world.size() + 1;
    if world.rank() == 0 {
        merged.process_at_rank(child1).send(&[1u64][..]);
    }
    println!(
        "parent rank {}: waiting for merged rank {child1}",
        world.rank()
    );
    let mut v = [0u64];
    if scoped {
        kestrel::request::scope(|scope| {
            let r = merged
                .process_at_rank(child1)
                .immediate_receive_into(scope, &mut v[..]);
            std::mem::forget(r);
        });
        die(
            "merged scope",
            "a scope ended over a receive from a dead child",
        );
    }
    merged.process_at_rank(child1).receive_into(&mut v[..]);
    die("merged receive", "a receive from a dead child returned");
}

/// The children's half of [`merged_crash_parent`].
fn merged_crash_child(u: &Universe) {
    let world = u.world();
    let parent = u.parent().unwrap_or_else(|| die("get_parent", "no parent"));
    let merged = parent.merge(true).unwrap_or_else(|e| die("merge", e));
    if world.rank() == 1 {
        let mut go = [0u64];
        merged.process_at_rank(0).receive_into(&mut go[..]);
        // Let the parents' receives be posted, then end without disconnecting.
        std::thread::sleep(Duration::from_millis(200));
        eprintln!("child rank 1: dying on purpose");
        std::process::exit(42);
    }
    // The other children wait here until their launcher stops them.
    std::thread::sleep(Duration::from_secs(30));
}

fn child(u: &Universe, crash: bool) {
    let world = u.world();
    let parent = u.parent().unwrap_or_else(|| die("get_parent", "no parent"));
    check(parent.size() == world.size(), "child local size");
    let cwd = std::env::current_dir().unwrap_or_default();
    check(cwd == std::path::Path::new("/tmp"), "info wdir");
    check(
        std::env::var("DPM_CHECK_GREETING").is_ok_and(|g| g.starts_with("hello")),
        "info env",
    );
    let n: u64 = std::env::var("DPM_CHECK_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut work = [0u64];
    parent
        .receive_into(Some(0), Some(1), &mut work[..])
        .unwrap_or_else(|e| die("receive work", e));
    if crash && world.rank() == 1 {
        // Ends without disconnecting or finalizing (exit runs no clean-up).
        eprintln!("child rank 1: dying on purpose");
        std::process::exit(42);
    }
    let me = world.rank();
    println!("child rank {me}: app {}", arg(3));
    let dest = me % parent.remote_size();
    parent
        .send(dest, &[work[0] * work[0], n][..], 2)
        .unwrap_or_else(|e| die("send result", e));
    if crash {
        // The other children wait here until their launcher stops them.
        let _ = parent.barrier();
        std::thread::sleep(Duration::from_secs(30));
        return;
    }
    println!("child rank {me}: result sent ok");
    exercise(&parent, false, "child");
    parent.disconnect().unwrap_or_else(|e| die("disconnect", e));
    alone(u, "child");
}

fn spawn_fail(u: &Universe) {
    let world = u.world();
    let cmd = SpawnCommand::new("/nonexistent/kestrel-no-such-program", 2);
    match world.spawn(&cmd, 0) {
        Ok(_) => die("spawn", "a missing program was spawned"),
        Err(e) => {
            check(
                matches!(e.mpi_class(), MpiClass::Spawn),
                &format!("spawn failure class, got {e}"),
            );
            println!("rank {}: spawn failed as expected: {e}", world.rank());
        }
    }
}

fn ports(u: &Universe) {
    let world = u.world();
    let me = world.rank();
    for bad in [
        "",
        "hello",
        "kestrel-port:v2:1.2.3.4:99999:1:0123456789abcdef0123456789abcdef",
        "kestrel-port:v2:1.2.3:80:1:0123456789abcdef0123456789abcdef",
        "kestrel-port:v9:1.2.3.4:80:1",
        "kestrel-port:v1:1.2.3.4:80:1",
        "kestrel-port:v2:1.2.3.4:80",
        "kestrel-port:v2:1.2.3.4:80:1",
        "kestrel-port:v2:1.2.3.4:80:1:0123",
    ] {
        match world.connect(bad, 0) {
            Err(DpmError::Port(e)) if me == 0 => {
                println!("rank 0: '{bad}' refused: {e}");
            }
            Err(e) if me != 0 && e.mpi_class() == MpiClass::Port => {}
            Err(e) => die("malformed port class", e),
            Ok(_) => die("connect", format!("malformed port '{bad}' was accepted")),
        }
    }
    // A port this process closed: refused at once, naming the port.
    let port = u.open_port().unwrap_or_else(|e| die("open_port", e));
    u.close_port(&port).unwrap_or_else(|e| die("close_port", e));
    let closed = if me == 0 { port.clone() } else { String::new() };
    let start = Instant::now();
    match world.connect(&closed, 0) {
        Err(e) if e.mpi_class() == MpiClass::Port => {
            check(
                start.elapsed() < Duration::from_secs(5),
                "closed port refused quickly",
            );
            if me == 0 {
                check(e.to_string().contains(&port), "the error names the port");
                println!("rank 0: closed port refused: {e}");
            }
        }
        Err(e) => die("closed port class", e),
        Ok(_) => die("connect", "a closed port was connected"),
    }
    // A port whose listener is gone (an unused TCP port): fails after the timeout.
    let gone = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let p = l.local_addr().unwrap().port();
        format!("kestrel-port:v2:127.0.0.1:{p}:1:0123456789abcdef0123456789abcdef")
    };
    let start = Instant::now();
    match world.connect(&gone, 0) {
        Err(e) if e.mpi_class() == MpiClass::Port => {
            if me == 0 {
                check(e.to_string().contains(&gone), "the error names the port");
                check(
                    e.to_string().contains("dpm_connect_timeout_ms"),
                    "names the timeout",
                );
                println!(
                    "rank 0: unreachable port failed after {} ms: {e}",
                    start.elapsed().as_millis()
                );
            }
        }
        Err(e) => die("unreachable port class", e),
        Ok(_) => die("connect", "a dead port was connected"),
    }
    // Accept on a port this process does not own.
    match world.accept(
        "kestrel-port:v2:127.0.0.1:9:77:0123456789abcdef0123456789abcdef",
        0,
    ) {
        Err(e) if e.mpi_class() == MpiClass::Port => {}
        other => die("accept on a foreign port", format!("{other:?}")),
    }
    // The world still works after all these failures.
    world.barrier();
    println!("rank {me}: ports ok");
}

fn intercomm(u: &Universe) {
    let world = u.world();
    let me = world.rank();
    let half = world.size() / 2;
    let low = me < half;
    let local = world
        .split_by_color(Color::with_value(i32::from(!low)))
        .unwrap_or_else(|| die("split", "no communicator"));
    let remote_leader = if low { half } else { 0 };
    let inter = local
        .intercomm_create(0, &world, remote_leader, 55)
        .unwrap_or_else(|e| die("intercomm_create", e));
    check(
        inter.remote_size() == if low { world.size() - half } else { half },
        "remote size",
    );
    exercise(&inter, low, "intercomm");
    let dup = inter.duplicate().unwrap_or_else(|e| die("dup", e));
    dup.barrier().unwrap_or_else(|e| die("dup barrier", e));
    drop(dup);
    merged(&inter, !low, "intercomm");
    inter.disconnect().unwrap_or_else(|e| die("disconnect", e));
    println!("rank {me}: intercomm ok");
}

fn main() {
    let u = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    job_line(&u);
    let mode = arg(1);
    match mode.as_str() {
        "server" => server(&u, &arg(2)),
        "client" => client(&u, &arg(2)),
        "parent" => parent(&u, arg(2).parse().unwrap_or(3), "child", &arg(3)),
        "crash-parent" => parent(&u, arg(2).parse().unwrap_or(3), "crash-child", &arg(3)),
        "multi-parent" => parent(&u, arg(2).parse().unwrap_or(3), "multi-child", &arg(3)),
        "orphan-parent" => parent(&u, arg(2).parse().unwrap_or(3), "orphan-child", &arg(3)),
        "child" | "multi-child" | "orphan-child" => child(&u, false),
        "crash-child" => child(&u, true),
        "merged-crash-parent" => parent(
            &u,
            arg(2).parse().unwrap_or(3),
            "merged-crash-child",
            &arg(3),
        ),
        "merged-scope-crash-parent" => parent(
            &u,
            arg(2).parse().unwrap_or(3),
            "merged-scope-crash-child",
            &arg(3),
        ),
        "merged-crash-child" | "merged-scope-crash-child" => merged_crash_child(&u),
        "spawn-fail" => spawn_fail(&u),
        "ports" => ports(&u),
        "intercomm" => intercomm(&u),
        other => die("usage", format!("unknown mode '{other}'")),
    }
    drop(u);
}
