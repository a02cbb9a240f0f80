//! The floor under any shared-memory latency: two processes bouncing one cache line.
//!
//! Process A stores an odd counter into a word of a shared mapping and spins until process B
//! stores the next (even) value; half the round trip is the one-way latency of a cache-line
//! transfer between the two cores. Kestrel's 8-byte `osu_latency` is compared with this
//! number. Usage: `cacheline_pingpong [ITERATIONS]` (default 1,000,000); the two processes
//! are pinned to CPUs 0 and 1 when the machine has them.

use std::sync::atomic::Ordering::{Acquire, Release};
use std::time::Instant;

use kestrel_shm::mem::{Mapping, SharedMem};

fn pin(cpu: usize) {
    let mut set = nix::sched::CpuSet::new();
    if set.set(cpu).is_ok() {
        let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set);
    }
}

fn map(path: &str) -> Mapping {
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .unwrap_or_else(|e| {
            eprintln!("cacheline_pingpong: cannot open {path}: {e}");
            std::process::exit(1)
        });
    Mapping::map(&f, 4096).unwrap_or_else(|e| {
        eprintln!("cacheline_pingpong: cannot map {path}: {e}");
        std::process::exit(1)
    })
}

fn bounce(mem: &Mapping, iters: u64, first: bool) {
    // Word 0 carries the counter; it sits alone in its cache line.
    for i in 0..iters {
        let (send, wait) = if first {
            (2 * i + 1, 2 * i + 2)
        } else {
            (2 * i + 2, 2 * i + 1)
        };
        if first {
            mem.store(0, send, Release);
            while mem.load(0, Acquire) != wait {
                std::hint::spin_loop();
            }
        } else {
            while mem.load(0, Acquire) != wait {
                std::hint::spin_loop();
            }
            mem.store(0, send, Release);
        }
    }
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--child") {
        let iters: u64 = args[3].parse().unwrap_or(0);
        // A killed parent must not leave its partner spinning.
        let _ = nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL);
        pin(1);
        bounce(&map(&args[2]), iters, false);
        return;
    }
    let iters: u64 = args
        .get(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1_000_000);
    // An anonymous memory file that the child inherits (no close-on-exec) and opens through
    // /proc: nothing is left in /dev/shm even when the benchmark is killed.
    let fd = nix::sys::memfd::memfd_create(
        c"kestrel-cacheline",
        nix::sys::memfd::MemFdCreateFlag::empty(),
    )
    .unwrap_or_else(|e| {
        eprintln!("cacheline_pingpong: cannot create a memory file: {e}");
        std::process::exit(1)
    });
    let path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&fd));
    let file = std::fs::File::from(fd);
    if let Err(e) = file.set_len(4096) {
        eprintln!("cacheline_pingpong: cannot size the memory file: {e}");
        std::process::exit(1);
    }
    let mem = map(&path);
    let exe = std::env::current_exe().expect("own path");
    let mut child = std::process::Command::new(exe)
        .args(["--child", &path, &iters.to_string()])
        .spawn()
        .expect("start the second process");
    pin(0);
    // Let the child map the file and start spinning before the clock starts.
    std::thread::sleep(std::time::Duration::from_millis(100));
    let t = Instant::now();
    bounce(&mem, iters, true);
    let elapsed = t.elapsed();
    let _ = child.wait();
    drop(file);
    let one_way_ns = elapsed.as_secs_f64() * 1e9 / (2.0 * iters as f64);
    println!("# Cache-line ping-pong between two processes ({iters} round trips)");
    println!(
        "one-way latency: {:.1} ns ({:.3} us)",
        one_way_ns,
        one_way_ns / 1000.0
    );
}
