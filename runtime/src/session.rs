//! Names and places of a job's files: job ids, session directories and the prefix of every
//! shared-memory file, so that the launcher can remove all of them after any kind of exit.

use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// A fresh job id: 12 hex digits from the kernel's random source (with the pid and time as a
/// fallback), short enough for file names and PMI keys.
pub fn new_job_id() -> String {
    let mut bytes = [0u8; 6];
    let random = fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(&mut bytes));
    if random.is_err() {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let mixed = (nanos as u64) ^ ((std::process::id() as u64) << 32);
        bytes.copy_from_slice(&mixed.to_le_bytes()[..6]);
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The prefix of every shared-memory file of job `job_id` (`kestrel.<job>.`).
pub fn shm_prefix(job_id: &str) -> String {
    format!("kestrel.{job_id}.")
}

/// Where shared-memory files live: `KESTREL_SHM_DIR` if set, else `/dev/shm`.
pub fn shm_dir() -> PathBuf {
    std::env::var_os("KESTREL_SHM_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/dev/shm"))
}

/// The directory that holds session directories: `$TMPDIR` or `/tmp`.
pub fn session_parent() -> PathBuf {
    std::env::var_os("TMPDIR")
        .map(PathBuf::from)
        .filter(|p| p.is_absolute())
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// The session directory of job `job_id` on host number `host_index`.
pub fn session_dir(job_id: &str, host_index: usize) -> PathBuf {
    session_parent().join(format!("kestrel.{job_id}.h{host_index}"))
}

/// Creates a private (0700) session directory; an existing one is an error because job ids are
/// random and a collision means somebody else's files.
pub fn create_session_dir(path: &Path) -> io::Result<()> {
    fs::DirBuilder::new().mode(0o700).create(path)?;
    // The umask cannot widen 0700, but make the mode explicit for directories made elsewhere.
    fs::set_permissions(path, fs::Permissions::from_mode(0o700))
}

/// Removes the session directory and every shared-memory file of the job (in `/dev/shm`,
/// `KESTREL_SHM_DIR` and `extra_dirs`); returns how many
/// entries were removed. Missing files are not errors: another host of the same machine may
/// have removed them first.
pub fn remove_job_files(job_id: &str, session: Option<&Path>, extra_dirs: &[PathBuf]) -> usize {
    let mut removed = 0;
    if let Some(dir) = session {
        if fs::remove_dir_all(dir).is_ok() {
            removed += 1;
        }
    }
    let prefix = shm_prefix(job_id);
    let mut dirs = vec![shm_dir(), PathBuf::from("/dev/shm")];
    dirs.extend(extra_dirs.iter().cloned());
    dirs.dedup();
    for dir in dirs {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().starts_with(&prefix)
                && fs::remove_file(entry.path()).is_ok()
            {
                removed += 1;
            }
        }
    }
    removed
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_ids_are_distinct_hex() {
        let a = new_job_id();
        let b = new_job_id();
        assert_eq!(a.len(), 12);
        assert!(a.chars().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }

    #[test]
    fn cleanup_removes_session_and_shm_files_of_the_job_only() {
        let job = new_job_id();
        let other = new_job_id();
        let dir = session_dir(&job, 0);
        create_session_dir(&dir).unwrap();
        assert_eq!(
            fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        assert!(create_session_dir(&dir).is_err());
        fs::write(dir.join("x"), b"x").unwrap();
        let mine = Path::new("/dev/shm").join(format!("{}seg0", shm_prefix(&job)));
        let theirs = Path::new("/dev/shm").join(format!("{}seg0", shm_prefix(&other)));
        fs::write(&mine, b"x").unwrap();
        fs::write(&theirs, b"x").unwrap();
        assert_eq!(remove_job_files(&job, Some(&dir), &[]), 2);
        assert!(!dir.exists() && !mine.exists() && theirs.exists());
        fs::remove_file(theirs).unwrap();
    }
}
