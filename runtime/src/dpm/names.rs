//! The name service behind `publish_name` / `lookup_name` / `unpublish_name`: a registry of
//! files in one directory, shared by every `kestrel-run` that uses the same directory.
//!
//! Ranks ask their launcher (PMI-2 `name-publish`, `name-lookup`, `name-unpublish`, or the
//! PMI-1 `publish_name` family); the launcher's node agent performs the operation here. The
//! directory is the `dpm_name_dir` parameter, by default `$TMPDIR/kestrel-names-<uid>` (or
//! `/tmp/...`): separate `kestrel-run` invocations on one host find each other's names
//! without further setup; across hosts, point `dpm_name_dir` at a shared file system.
//!
//! Each published service is one file, named by the hex encoding of the service name, created
//! atomically (written aside, then hard-linked into place, which fails when the name exists):
//!
//! ```text
//! kestrel-name v1
//! port=<port name>
//! job=<publishing job id>
//! pid=<pid of the publishing launcher>
//! boot=<boot id of its machine>
//! ```
//!
//! A name whose launcher is gone (same machine, process no longer running) is stale: lookups
//! ignore and remove it, and a new publish replaces it. Launchers unpublish what their jobs
//! left published when the job ends. This module never talks to ranks.

use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Longest service name (its hex encoding must fit a file name).
pub const MAX_SERVICE: usize = 120;

/// Who published a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner {
    /// The job id.
    pub job: String,
    /// The publishing launcher's pid.
    pub pid: u32,
    /// The boot id of its machine.
    pub boot: String,
}

impl Owner {
    /// This launcher, publishing for `job`.
    pub fn this_process(job: &str) -> Owner {
        Owner {
            job: job.to_string(),
            pid: std::process::id(),
            boot: crate::host::machine_id(),
        }
    }
}

/// Why a name operation failed (`MPI_ERR_NAME` / `MPI_ERR_SERVICE` in the C ABI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NameError {
    /// The service is published already.
    AlreadyPublished {
        /// The service.
        service: String,
        /// The port it is published with.
        port: String,
        /// The job that published it.
        job: String,
    },
    /// Nothing is published under the service (with that port).
    NotPublished {
        /// The service.
        service: String,
    },
    /// The service name cannot be used.
    BadService {
        /// The service.
        service: String,
        /// Why.
        why: String,
    },
    /// The registry directory failed.
    Io {
        /// The file or directory.
        path: String,
        /// The error.
        error: String,
    },
}

impl NameError {
    /// The `rc` a launcher answers a failed name operation with, so that the class survives
    /// the PMI wire (a client reads [`NOT_PUBLISHED_RC`] as "nothing there", not a failure).
    pub fn pmi_rc(&self) -> i64 {
        match self {
            NameError::AlreadyPublished { .. } => 1,
            NameError::NotPublished { .. } => NOT_PUBLISHED_RC,
            NameError::BadService { .. } => 3,
            NameError::Io { .. } => 4,
        }
    }
}

/// The PMI `rc` of [`NameError::NotPublished`].
pub const NOT_PUBLISHED_RC: i64 = 2;

impl fmt::Display for NameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NameError::AlreadyPublished { service, port, job } => write!(
                f,
                "name service: '{service}' is already published (port {port}, job {job}); \
                 unpublish it first or choose another service name"
            ),
            NameError::NotPublished { service } => write!(
                f,
                "name service: nothing is published under '{service}'; is the server running \
                 and using the same dpm_name_dir?"
            ),
            NameError::BadService { service, why } => {
                write!(f, "name service: service name '{service}' {why}")
            }
            NameError::Io { path, error } => write!(
                f,
                "name service: {path}: {error}; set dpm_name_dir (KESTREL_DPM_NAME_DIR) to a \
                 writable directory shared by the jobs"
            ),
        }
    }
}

impl std::error::Error for NameError {}

/// The registry in one directory.
#[derive(Debug, Clone)]
pub struct NameRegistry {
    dir: PathBuf,
}

/// The default directory: `$TMPDIR/kestrel-names-<uid>` (or `/tmp/...`).
pub fn default_dir() -> PathBuf {
    crate::session::session_parent().join(format!("kestrel-names-{}", nix::unistd::getuid()))
}

fn io_err(path: &Path, e: std::io::Error) -> NameError {
    NameError::Io {
        path: path.display().to_string(),
        error: e.to_string(),
    }
}

struct Entry {
    port: String,
    job: String,
    pid: u32,
    boot: String,
}

fn parse_entry(text: &str) -> Option<Entry> {
    let mut lines = text.lines();
    if lines.next()? != "kestrel-name v1" {
        return None;
    }
    let mut get = |key: &str| {
        lines
            .next()
            .and_then(|l| l.strip_prefix(key))
            .and_then(|l| l.strip_prefix('='))
            .map(String::from)
    };
    let port = get("port")?;
    let job = get("job")?;
    let pid = get("pid")?.parse().ok()?;
    let boot = get("boot")?;
    Some(Entry {
        port,
        job,
        pid,
        boot,
    })
}

impl Entry {
    /// Published by a launcher of this machine that no longer runs.
    fn is_stale(&self) -> bool {
        if self.boot != crate::host::machine_id() {
            return false;
        }
        matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.pid as i32), None),
            Err(nix::errno::Errno::ESRCH)
        )
    }
}

impl NameRegistry {
    /// The registry in `dir` (created private if missing).
    pub fn open(dir: PathBuf) -> Result<NameRegistry, NameError> {
        if !dir.is_dir() {
            fs::DirBuilder::new()
                .mode(0o700)
                .recursive(true)
                .create(&dir)
                .map_err(|e| io_err(&dir, e))?;
        }
        Ok(NameRegistry { dir })
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, service: &str) -> Result<PathBuf, NameError> {
        let bad = |why: &str| NameError::BadService {
            service: service.chars().take(200).collect(),
            why: why.to_string(),
        };
        if service.is_empty() {
            return Err(bad("is empty"));
        }
        if service.len() > MAX_SERVICE {
            return Err(bad(&format!(
                "is {} bytes long; the limit is {MAX_SERVICE}",
                service.len()
            )));
        }
        let hex: String = service.bytes().map(|b| format!("{b:02x}")).collect();
        Ok(self.dir.join(format!("svc-{hex}")))
    }

    fn read(&self, path: &Path) -> Result<Option<Entry>, NameError> {
        match fs::read_to_string(path) {
            Ok(text) => Ok(parse_entry(&text)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(io_err(path, e)),
        }
    }

    /// Publishes `port` under `service`.
    pub fn publish(&self, service: &str, port: &str, owner: &Owner) -> Result<(), NameError> {
        let path = self.file(service)?;
        if port.contains('\n') || port.is_empty() {
            return Err(NameError::BadService {
                service: service.into(),
                why: "cannot be published with an empty or multi-line port".into(),
            });
        }
        let tmp = self.dir.join(format!(
            ".tmp-{}-{}",
            std::process::id(),
            crate::session::new_job_id()
        ));
        {
            let mut f = fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(|e| io_err(&tmp, e))?;
            write!(
                f,
                "kestrel-name v1\nport={port}\njob={}\npid={}\nboot={}\n",
                owner.job, owner.pid, owner.boot
            )
            .map_err(|e| io_err(&tmp, e))?;
        }
        let result = loop {
            match fs::hard_link(&tmp, &path) {
                Ok(()) => break Ok(()),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                    match self.read(&path)? {
                        Some(old) if old.is_stale() => {
                            tracing::debug!(target: "dpm", service, "replacing a stale name of job {}", old.job);
                            let _ = fs::remove_file(&path);
                        }
                        Some(old) => {
                            break Err(NameError::AlreadyPublished {
                                service: service.into(),
                                port: old.port,
                                job: old.job,
                            })
                        }
                        // Unreadable junk under our name: take the name over.
                        None => {
                            let _ = fs::remove_file(&path);
                        }
                    }
                }
                Err(e) => break Err(io_err(&path, e)),
            }
        };
        let _ = fs::remove_file(&tmp);
        result
    }

    /// The port published under `service`, if any (stale names are removed).
    pub fn lookup(&self, service: &str) -> Result<Option<String>, NameError> {
        let path = self.file(service)?;
        match self.read(&path)? {
            Some(e) if e.is_stale() => {
                let _ = fs::remove_file(&path);
                Ok(None)
            }
            Some(e) => Ok(Some(e.port)),
            None => Ok(None),
        }
    }

    /// Removes `service` if it is published with `port` (any port when `port` is empty).
    pub fn unpublish(&self, service: &str, port: &str) -> Result<(), NameError> {
        let path = self.file(service)?;
        match self.read(&path)? {
            Some(e) if port.is_empty() || e.port == port => {
                fs::remove_file(&path).map_err(|e| io_err(&path, e))
            }
            _ => Err(NameError::NotPublished {
                service: service.into(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn registry() -> NameRegistry {
        let dir = std::env::temp_dir().join(format!(
            "kestrel-names-test-{}",
            crate::session::new_job_id()
        ));
        NameRegistry::open(dir).unwrap()
    }

    #[test]
    fn publish_lookup_unpublish() {
        let r = registry();
        let me = Owner::this_process("job1");
        assert_eq!(r.lookup("svc").unwrap(), None);
        r.publish("svc", "kestrel-port:v1:127.0.0.1:5:1", &me)
            .unwrap();
        assert_eq!(
            r.lookup("svc").unwrap().as_deref(),
            Some("kestrel-port:v1:127.0.0.1:5:1")
        );
        let e = r.publish("svc", "other", &me).unwrap_err();
        assert!(matches!(e, NameError::AlreadyPublished { .. }));
        assert!(e.to_string().contains("job job1"), "{e}");
        assert!(matches!(
            r.unpublish("svc", "wrong port").unwrap_err(),
            NameError::NotPublished { .. }
        ));
        r.unpublish("svc", "kestrel-port:v1:127.0.0.1:5:1").unwrap();
        assert_eq!(r.lookup("svc").unwrap(), None);
        assert!(r.unpublish("svc", "").is_err());
        // Names with any characters work; empty and huge ones do not.
        r.publish("a/b c;d\u{e9}", "p", &me).unwrap();
        assert_eq!(r.lookup("a/b c;d\u{e9}").unwrap().as_deref(), Some("p"));
        assert!(matches!(
            r.publish("", "p", &me).unwrap_err(),
            NameError::BadService { .. }
        ));
        assert!(r.lookup(&"x".repeat(MAX_SERVICE + 1)).is_err());
        let _ = fs::remove_dir_all(r.dir());
    }

    #[test]
    fn names_of_dead_launchers_are_stale() {
        let r = registry();
        // A pid that cannot be running: a child that already exited and was reaped.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let dead = Owner {
            job: "gone".into(),
            pid,
            boot: crate::host::machine_id(),
        };
        r.publish("svc", "old", &dead).unwrap();
        assert_eq!(r.lookup("svc").unwrap(), None);
        r.publish("svc", "old", &dead).unwrap();
        // A live publisher takes over the stale name.
        r.publish("svc", "new", &Owner::this_process("j2")).unwrap();
        assert_eq!(r.lookup("svc").unwrap().as_deref(), Some("new"));
        let _ = fs::remove_dir_all(r.dir());
    }
}
