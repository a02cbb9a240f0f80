//! This rank's wait record in its session directory (`wait.<rank>`), which the launcher's agent
//! reads for hang reports, and the agent's reader of it.
//!
//! The rank writes only from the slow path of a wait: the messaging layer calls [`stalled`]
//! after a few thousand idle polls and then every as many while the wait lasts, and a record is
//! written at the first call of a stall and then at most every [`HEARTBEAT`]. A rank that
//! computes, or that never stalls, costs nothing here; a rank that is stopped keeps the record
//! it wrote last, whose heartbeat then ages. The bytes are `kestrel_transport::wait_record`'s.
//!
//! It owns the process's one record file. It never blocks a wait for long (one `pwrite` of
//! 512 bytes per heartbeat) and never fails one: a record that cannot be written is given up.

use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::{FileExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use kestrel_transport::node_coll::Stall;
use kestrel_transport::wait_record::{RecordError, WaitRecord, RECORD_LEN};

/// Longest time between two writes of a stalled rank's record.
pub const HEARTBEAT: Duration = Duration::from_millis(500);

struct Board {
    file: File,
    rank: u32,
    since_ns: u64,
    written_ns: u64,
}

static BOARD: Mutex<Option<Board>> = Mutex::new(None);

thread_local! {
    /// The node-local collective this thread is in (operation, communicator context), for a
    /// stall inside the shared-memory segment, which knows neither.
    static NODE_COLLECTIVE: Cell<(&'static str, u16)> = const { Cell::new(("collective", 0)) };
}

/// The record file of `rank` in session directory `dir`.
pub fn record_path(dir: &Path, rank: u32) -> PathBuf {
    dir.join(format!("wait.{rank}"))
}

/// Now, on the clock every process of the host shares.
pub fn monotonic_ns() -> u64 {
    match nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC) {
        Ok(t) => (t.tv_sec() as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(t.tv_nsec() as u64),
        Err(_) => 0,
    }
}

/// Opens this rank's record in `dir` (once per process; later calls change nothing). Without
/// a session directory (a singleton, another launcher) there is no record.
pub fn open(dir: &Path, rank: u32) {
    let Ok(mut board) = BOARD.lock() else { return };
    if board.is_some() {
        return;
    }
    let path = record_path(dir, rank);
    match std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(file) => {
            *board = Some(Board {
                file,
                rank,
                since_ns: 0,
                written_ns: 0,
            })
        }
        Err(e) => {
            tracing::debug!(target: "runtime", "no wait record at {}: {e}", path.display());
        }
    }
}

/// A wait has been idle for a while: `first` at the first call of this stall. `describe` says
/// what it waits for; it runs only when the record is written.
pub fn stalled(first: bool, describe: impl FnOnce() -> String) {
    let Ok(mut guard) = BOARD.try_lock() else {
        // Another thread of this rank is writing it.
        return;
    };
    let Some(board) = guard.as_mut() else { return };
    let now = monotonic_ns();
    if first || board.since_ns == 0 {
        board.since_ns = now;
    } else if now.saturating_sub(board.written_ns) < HEARTBEAT.as_nanos() as u64 {
        return;
    }
    let waiting = describe();
    if !board.write(now, waiting) {
        // A full or removed directory: stop trying.
        *guard = None;
    }
}

impl Board {
    /// Writes the record (the stall's start as kept, `now` as the heartbeat); false if the
    /// file cannot be written.
    fn write(&mut self, now: u64, waiting: String) -> bool {
        let record = WaitRecord {
            pid: std::process::id(),
            rank: self.rank,
            since_ns: self.since_ns,
            heartbeat_ns: now,
            waiting,
        };
        if self.file.write_all_at(&record.encode(), 0).is_err() {
            return false;
        }
        self.written_ns = now;
        true
    }
}

/// The stalled wait ended (something arrived, or the fence returned): the record says so,
/// so that a rank that moved on is not reported in its last wait. Writes only after a stall.
pub fn resumed() {
    let Ok(mut guard) = BOARD.try_lock() else {
        return;
    };
    let Some(board) = guard.as_mut() else { return };
    if board.since_ns == 0 {
        return;
    }
    board.since_ns = 0;
    if !board.write(monotonic_ns(), String::new()) {
        *guard = None;
    }
}

/// Names the node-local collective this thread enters (two stores; read only on a stall).
pub fn enter_node_collective(op: &'static str, ctx: u16) {
    NODE_COLLECTIVE.with(|c| c.set((op, ctx)));
}

/// The stall hook of shared-memory collective segments.
pub fn node_collective_stalled(event: Stall) {
    let first = match event {
        Stall::Began => true,
        Stall::Continues => false,
        Stall::Ended => return resumed(),
    };
    let (op, ctx) = NODE_COLLECTIVE.with(|c| c.get());
    stalled(first, || {
        format!(
            "{op} on communicator context {ctx} (node-local, shared memory): waits for the \
             other members"
        )
    });
}

/// Why a record could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// No record file (the rank never stalled with a session directory) or unreadable.
    Io(std::io::Error),
    /// The bytes are not a good record (after retries for torn reads).
    Record(RecordError),
}

impl std::fmt::Display for ReadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReadError::Io(e) => write!(f, "{e}"),
            ReadError::Record(e) => write!(f, "{e}"),
        }
    }
}

/// Reads a record, trying again when it was caught half-written.
pub fn read(path: &Path) -> Result<WaitRecord, ReadError> {
    let file = File::open(path).map_err(ReadError::Io)?;
    let mut last = RecordError::Short(0);
    for _ in 0..3 {
        let mut buf = [0u8; RECORD_LEN];
        let n = file.read_at(&mut buf, 0).map_err(ReadError::Io)?;
        match WaitRecord::decode(&buf[..n]) {
            Ok(r) => return Ok(r),
            Err(e) => last = e,
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(ReadError::Record(last))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stall_is_written_then_throttled_and_read_back() {
        let dir = std::env::temp_dir().join(format!("kestrel-wait-board-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        open(&dir, 7);
        let path = record_path(&dir, 7);
        assert!(matches!(
            read(&path),
            Err(ReadError::Record(RecordError::Short(0)))
        ));
        stalled(true, || "recv(source 1, tag 7)".into());
        let r = read(&path).unwrap();
        assert_eq!((r.rank, r.pid), (7, std::process::id()));
        assert_eq!(r.waiting, "recv(source 1, tag 7)");
        assert!(r.heartbeat_ns >= r.since_ns && r.since_ns > 0);
        // Within the heartbeat, later calls of the same stall write nothing.
        stalled(false, || panic!("described although throttled"));
        // A new stall writes at once, with a new start.
        stalled(true, || "barrier".into());
        let r2 = read(&path).unwrap();
        assert_eq!(r2.waiting, "barrier");
        assert!(r2.since_ns >= r.heartbeat_ns);
        enter_node_collective("allreduce", 3);
        node_collective_stalled(Stall::Began);
        assert!(read(&path)
            .unwrap()
            .waiting
            .starts_with("allreduce on communicator context 3"));
        // The end of a stall is written once; a resume without a stall writes nothing.
        resumed();
        let r3 = read(&path).unwrap();
        assert_eq!((r3.waiting.as_str(), r3.since_ns), ("", 0));
        std::fs::write(&path, b"").unwrap();
        resumed();
        assert!(matches!(
            read(&path),
            Err(ReadError::Record(RecordError::Short(0)))
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
