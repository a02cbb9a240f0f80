//! A second local user for security tests: created by the test, removed with its processes
//! when the guard drops, and what it can find out about our listeners.

use std::process::Command;

/// A second local user, created for the test and removed after it (with its processes).
pub struct Stranger(pub String);

impl Stranger {
    /// Creates the user (the test needs root).
    pub fn create() -> Stranger {
        let name = format!("kstranger{}", std::process::id() % 1_000_000);
        let _ = Command::new("userdel").arg(&name).status();
        let ok = Command::new("useradd")
            .args([
                "--system",
                "--no-create-home",
                "--shell",
                "/usr/sbin/nologin",
                &name,
            ])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "useradd {name} failed (the test needs root)");
        Stranger(name)
    }
}

impl Drop for Stranger {
    fn drop(&mut self) {
        let _ = Command::new("pkill")
            .args(["-KILL", "-u", &self.0])
            .status();
        let _ = Command::new("userdel").arg(&self.0).status();
    }
}

/// An address and port `pid` listens on for TCP (from `ss`).
pub fn listening_address(pid: u32) -> Option<(String, u16)> {
    listening_addresses(pid).into_iter().next()
}

/// Every TCP address and port `pid` listens on (from `ss`).
pub fn listening_addresses(pid: u32) -> Vec<(String, u16)> {
    let Ok(out) = Command::new("ss").args(["-ltnpH"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| l.contains(&format!("pid={pid},")))
        .filter_map(|l| {
            let (ip, port) = l.split_whitespace().nth(3)?.rsplit_once(':')?;
            Some((ip.to_string(), port.parse().ok()?))
        })
        .collect()
}

/// Runs the Python program `source` (after the shared framing of `tests/strangers/wire.py`)
/// with `args` as the stranger, from `/`.
pub fn run_as(stranger: &Stranger, source: &str, args: &[String]) -> std::process::Output {
    let program = format!("{}\n{source}", include_str!("../strangers/wire.py"));
    Command::new("runuser")
        .args(["-u", &stranger.0, "--", "/usr/bin/python3", "-c", &program])
        .args(args)
        .current_dir("/")
        .output()
        .expect("run a program as the second user")
}
