//! Test hosts as network namespaces, made by `ci/netns-cluster.sh` and removed when the guard
//! drops. Clusters share the management subnet, so one cluster exists at a time: the guard
//! holds an exclusive lock on `/tmp/kestrel-netns.lock` for its lifetime.

use std::fs::File;
use std::path::PathBuf;
use std::process::Command;

/// A cluster of namespace hosts; dropping it removes them.
pub struct Cluster {
    prefix: String,
    hosts: Vec<String>,
    _lock: File,
}

/// `kestrel-run` across namespace hosts (`"h0:1,h1:1"`), reached with `ip netns exec`, with a
/// 100 s job timeout, then `extra` options.
pub fn job_on(hosts: &str, extra: &[&str]) -> Command {
    let mut args = vec![
        "--host",
        hosts,
        "--launch-agent",
        "ip netns exec",
        "--timeout",
        "100",
    ];
    args.extend_from_slice(extra);
    crate::kestrel_run(&args)
}

/// `ci/netns-cluster.sh`.
pub fn script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../ci/netns-cluster.sh")
}

impl Cluster {
    /// Creates `n` hosts. Panics with the script's message when that is impossible (not root,
    /// iproute2 missing).
    pub fn up(n: usize) -> Cluster {
        crate::tool("ip", "iproute2");
        let lock = File::create("/tmp/kestrel-netns.lock").expect("create the netns lock file");
        lock.lock().expect("lock the netns lock file");
        // Unique per cluster, not just per test process: a namespace deleted by `down` can
        // linger in the kernel for a while (with the root-side interface names).
        static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let prefix = format!(
            "k{}{}",
            std::process::id() % 100_000,
            (b'a' + (serial % 26) as u8) as char
        );
        // A cluster of ours from a killed earlier run would hold the subnet: remove it.
        let _ = Command::new(script()).args(["down", &prefix]).status();
        let out = Command::new(script())
            .args(["up", &prefix, &n.to_string()])
            .output()
            .expect("run ci/netns-cluster.sh");
        assert!(
            out.status.success(),
            "ci/netns-cluster.sh up failed (tests need root and iproute2): {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let hosts = (0..n).map(|i| format!("{prefix}h{i}")).collect();
        Cluster {
            prefix,
            hosts,
            _lock: lock,
        }
    }

    /// Pids of the processes running in host `name`'s namespace.
    pub fn pids(&self, name: &str) -> Vec<u32> {
        let out = Command::new("ip").args(["netns", "pids", name]).output();
        out.map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
    }

    /// Makes every data interface of every host drop `percent` % of the UDP and TCP packets
    /// it receives (`ci/netns-cluster.sh loss`).
    pub fn lose(&self, percent: u32) {
        for host in &self.hosts {
            let st = Command::new(script())
                .args(["loss", host, &percent.to_string()])
                .status()
                .expect("run netns-cluster.sh loss");
            assert!(st.success(), "could not install the loss rule on {host}");
        }
    }

    /// Asserts, after a short grace period, that no process is left in any host.
    pub fn assert_empty(&self) {
        std::thread::sleep(std::time::Duration::from_millis(100));
        for h in &self.hosts {
            assert!(self.pids(h).is_empty(), "processes left in {h}");
        }
    }

    /// Packets the loss rule of `host` (`ci/netns-cluster.sh loss`) dropped so far.
    pub fn loss_drops(&self, host: &str) -> u64 {
        let out = Command::new("ip")
            .args([
                "netns",
                "exec",
                host,
                "nft",
                "list",
                "table",
                "inet",
                "kestrel_loss",
            ])
            .output()
            .expect("run nft");
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace()
            .skip_while(|w| *w != "packets")
            .nth(1)
            .and_then(|n| n.parse().ok())
            .unwrap_or(0)
    }

    /// Runs the quick OSU latency and bandwidth sweeps with `job` (a launcher command for the
    /// two ranks, to which the benchmark and its arguments are appended) and asserts each
    /// completed with at least ten result rows.
    pub fn assert_osu_sweeps_complete(
        &self,
        job: impl Fn() -> Command,
        deadline: std::time::Duration,
    ) {
        for (name, args) in [
            ("osu_latency", ["-m", "0:65536", "-i", "200", "-x", "20"]),
            ("osu_bw", ["-m", "1:4194304", "-i", "20", "-x", "2"]),
        ] {
            let mut cmd = job();
            cmd.arg(crate::bin(name)).args(args);
            let out = crate::run(cmd, deadline);
            assert!(out.success(), "{name}: {}", out.show());
            let rows = out
                .stdout
                .lines()
                .filter(|l| l.split_whitespace().count() == 2 && !l.starts_with('#'))
                .count();
            assert!(rows >= 10, "{name} printed {rows} rows: {}", out.show());
        }
    }

    /// Runs `examples/idle_check 6000 busy-peer` with `job` (a launcher command for two ranks,
    /// given timeouts shorter than the 6 s the peer computes) and asserts the job completed:
    /// the busy peer was waited for, not taken for dead.
    pub fn assert_busy_peer_is_waited_for(&self, mut job: Command, deadline: std::time::Duration) {
        job.arg(crate::example("idle_check"))
            .args(["6000", "busy-peer"]);
        let out = crate::run(job, deadline);
        assert!(out.success(), "{}", out.show());
        assert!(
            out.stdout
                .contains("idle_check: busy peers answered on 2 ranks"),
            "{}",
            out.show()
        );
    }

    /// Sets `iface` of `host` down from a thread, once `host` has received `bytes` more on it
    /// than now (or after 30 s): cut once a transfer is well under way, not after a fixed
    /// delay a fast machine could outrun. The thread returns when it cut the link.
    pub fn cut_link_after(
        &self,
        host: &str,
        iface: &str,
        bytes: u64,
    ) -> std::thread::JoinHandle<std::time::Instant> {
        self.cut_link_after_then(host, iface, bytes, std::time::Instant::now)
    }

    /// [`Cluster::cut_link_after`], and right after the cut the thread runs `then` (a reading
    /// of the counters at that moment, say) and returns its result.
    pub fn cut_link_after_then<T: Send + 'static>(
        &self,
        host: &str,
        iface: &str,
        bytes: u64,
        then: impl FnOnce() -> T + Send + 'static,
    ) -> std::thread::JoinHandle<T> {
        let (host, iface) = (host.to_string(), iface.to_string());
        std::thread::spawn(move || {
            let start = std::time::Instant::now();
            let received = || iface_bytes(&host, &iface, "rx_bytes");
            let base = received();
            while received() < base + bytes && start.elapsed() < std::time::Duration::from_secs(30)
            {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let status = Command::new(script())
                .args(["link", &host, &iface, "down"])
                .status()
                .expect("run ci/netns-cluster.sh link");
            assert!(status.success(), "setting {iface} of {host} down failed");
            then()
        })
    }

    /// The kernel's `counter` (`rx_bytes`, `tx_bytes`, ...) of `iface` in `host`.
    pub fn iface_bytes(&self, host: &str, iface: &str, counter: &str) -> u64 {
        iface_bytes(host, iface, counter)
    }

    /// Host names (= namespace names = node ids).
    pub fn hosts(&self) -> &[String] {
        &self.hosts
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = Command::new(script()).args(["down", &self.prefix]).status();
    }
}

/// The kernel's `counter` of `iface` in namespace `host` (0 when it cannot be read).
pub fn iface_bytes(host: &str, iface: &str, counter: &str) -> u64 {
    let path = format!("/sys/class/net/{iface}/statistics/{counter}");
    let out = Command::new("ip")
        .args(["netns", "exec", host, "cat", &path])
        .output()
        .expect("read the interface's counter");
    String::from_utf8_lossy(&out.stdout)
        .trim()
        .parse()
        .unwrap_or(0)
}
