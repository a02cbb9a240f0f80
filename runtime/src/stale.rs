//! Finding and removing what dead jobs of this user left: shared-memory segments nobody maps
//! and session directories whose owning launcher or daemon is gone (`kestrel-run --cleanup`,
//! and every launcher at start).
//!
//! A session directory names its owner in the file [`OWNER_FILE`] (pid and start time, so a
//! reused pid does not count as alive); one without it, or whose owner is someone else's, is
//! left alone. A segment (`kestrel.*` in `/dev/shm` or `KESTREL_SHM_DIR`) is stale when no
//! process maps it (`/proc/*/maps`) and it is older than [`MIN_AGE`], so a job starting right
//! now keeps the segment it just created. This module only removes files of the calling user
//! and never signals a process.

use std::collections::HashSet;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::session;

/// The file in a session directory that names its owner: `pid starttime`.
pub const OWNER_FILE: &str = "owner";
/// Files younger than this are never stale.
pub const MIN_AGE: Duration = Duration::from_secs(10);

/// Writes this process as the owner of session directory `dir`.
pub fn claim(dir: &Path) -> std::io::Result<()> {
    let me = std::process::id();
    let start = start_time(me).unwrap_or(0);
    fs::write(dir.join(OWNER_FILE), format!("{me} {start}\n"))
}

/// Field 22 of `/proc/PID/stat`: when the process started (clock ticks after boot).
fn start_time(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses: count from the last ')'.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Whether the owner recorded in `dir` still runs; `None` when the directory names none.
fn owner_alive(dir: &Path) -> Option<bool> {
    let text = fs::read_to_string(dir.join(OWNER_FILE)).ok()?;
    let mut words = text.split_whitespace();
    let pid: u32 = words.next()?.parse().ok()?;
    let start: u64 = words.next()?.parse().ok()?;
    Some(start_time(pid) == Some(start))
}

/// Every file some process maps (from the `/proc/*/maps` this user may read).
fn mapped_files() -> HashSet<PathBuf> {
    let mut out = HashSet::new();
    let Ok(procs) = fs::read_dir("/proc") else {
        return out;
    };
    for p in procs.flatten() {
        if !p
            .file_name()
            .to_string_lossy()
            .bytes()
            .all(|b| b.is_ascii_digit())
        {
            continue;
        }
        let Ok(maps) = fs::read_to_string(p.path().join("maps")) else {
            continue;
        };
        for line in maps.lines() {
            // The path is the sixth field; a deleted file ends in " (deleted)".
            if let Some(at) = line.find('/') {
                out.insert(PathBuf::from(line[at..].trim_end_matches(" (deleted)")));
            }
        }
    }
    out
}

fn old_enough(meta: &fs::Metadata) -> bool {
    meta.modified()
        .ok()
        .and_then(|m| m.elapsed().ok())
        .is_some_and(|age| age >= MIN_AGE)
}

/// Removes this user's stale Kestrel files in `shm_dirs` and the session parent; returns what
/// it removed (paths).
pub fn sweep(shm_dirs: &[PathBuf]) -> Vec<PathBuf> {
    let uid = nix::unistd::getuid().as_raw();
    let mine = |m: &fs::Metadata| m.uid() == uid;
    let mut removed = Vec::new();
    let mut segments = Vec::new();
    let mut dirs: Vec<PathBuf> = shm_dirs.to_vec();
    dirs.push(session::shm_dir());
    dirs.push(PathBuf::from("/dev/shm"));
    dirs.sort();
    dirs.dedup();
    for dir in &dirs {
        for e in fs::read_dir(dir).into_iter().flatten().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let Ok(meta) = e.metadata() else { continue };
            if name.starts_with("kestrel.") && meta.is_file() && mine(&meta) && old_enough(&meta) {
                segments.push(e.path());
            }
        }
    }
    if !segments.is_empty() {
        let mapped = mapped_files();
        for s in segments {
            if !mapped.contains(&s) && fs::remove_file(&s).is_ok() {
                removed.push(s);
            }
        }
    }
    for e in fs::read_dir(session::session_parent())
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(meta) = e.metadata() else { continue };
        if !(name.starts_with("kestrel.") && meta.is_dir() && mine(&meta) && old_enough(&meta)) {
            continue;
        }
        if owner_alive(&e.path()) == Some(false) && fs::remove_dir_all(e.path()).is_ok() {
            removed.push(e.path());
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_made_up_owner_is_not() {
        let dir = std::env::temp_dir().join(format!("kestrel-stale-test-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        claim(&dir).unwrap();
        assert_eq!(owner_alive(&dir), Some(true));
        fs::write(dir.join(OWNER_FILE), format!("{} 1\n", std::process::id())).unwrap();
        assert_eq!(
            owner_alive(&dir),
            Some(false),
            "a reused pid counts as dead"
        );
        fs::write(dir.join(OWNER_FILE), "garbage").unwrap();
        assert_eq!(owner_alive(&dir), None);
        fs::remove_dir_all(&dir).unwrap();
    }
}
