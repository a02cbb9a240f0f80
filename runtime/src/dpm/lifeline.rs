//! Lifelines: how a process learns that a process of another job died.
//!
//! Processes of one job share a launcher, which stops the whole job when one of them fails.
//! Processes of different jobs (connected through a port, or parent and spawned child) have
//! no such referee, so every newly connected pair keeps an idle TCP socket open: the kernel
//! closes it when either process ends, however it ends. Before a process leaves on purpose
//! (disconnect, finalize) it writes one byte, [`BYE`], on each of its lifelines; so at the
//! other end, end-of-file after a `BYE` means "departed" and end-of-file (or a reset) without
//! one means "failed".
//!
//! One watcher thread per process polls all lifelines and records [`LifelineEvent`]s; the
//! messaging engine checks [`Lifelines::has_news`] (one atomic load) in its idle loop and
//! fails the operations that involve a failed process. Sockets are closed by the watcher
//! thread only, so a descriptor it polls is never reused under it.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The byte a process writes on a lifeline before it leaves on purpose.
pub const BYE: u8 = b'B';

/// How long one poll of the watcher lasts (also how soon a new lifeline is watched).
const POLL_MS: u16 = 50;

/// What happened to the process at the other end of a lifeline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LifelineEvent {
    /// It ended without saying goodbye.
    Failed {
        /// The process (as the registering side numbers it).
        proc: u32,
        /// What the socket reported, with the lifeline's label.
        why: String,
    },
    /// It said goodbye and closed.
    Departed {
        /// The process.
        proc: u32,
    },
}

struct Line {
    id: u64,
    proc: u32,
    label: String,
    stream: Arc<TcpStream>,
    bye_received: bool,
    /// Set by `retire`; the watcher closes the socket.
    retired: bool,
    /// The other end closed (after or without BYE).
    ended: bool,
}

#[derive(Default)]
struct Shared {
    lines: Mutex<Vec<Line>>,
    events: Mutex<Vec<LifelineEvent>>,
    news: AtomicBool,
    next_id: AtomicU64,
    watching: AtomicBool,
}

/// The lifelines of this process.
#[derive(Clone, Default)]
pub struct Lifelines {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Lifelines {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.shared.lines.lock().map(|l| l.len()).unwrap_or(0);
        write!(f, "Lifelines({n})")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Lifelines {
    /// No lifelines yet; the watcher thread starts with the first one.
    pub fn new() -> Lifelines {
        Lifelines::default()
    }

    /// Watches `stream` as the lifeline to process `proc`; `label` names the remote process in
    /// messages (`rank 2 of job 4f3a...`).
    pub fn add(&self, proc: u32, stream: TcpStream, label: String) -> std::io::Result<()> {
        stream.set_nonblocking(true)?;
        let id = self.shared.next_id.fetch_add(1, Ordering::Relaxed);
        lock(&self.shared.lines).push(Line {
            id,
            proc,
            label,
            stream: Arc::new(stream),
            bye_received: false,
            retired: false,
            ended: false,
        });
        if !self.shared.watching.swap(true, Ordering::AcqRel) {
            let weak = Arc::downgrade(&self.shared);
            std::thread::Builder::new()
                .name("kestrel-lifelines".into())
                .spawn(move || watch(weak))?;
        }
        Ok(())
    }

    /// Whether events are waiting (cheap: one atomic load).
    #[inline]
    pub fn has_news(&self) -> bool {
        self.shared.news.load(Ordering::Acquire)
    }

    /// The events recorded since the last call.
    pub fn take_events(&self) -> Vec<LifelineEvent> {
        self.shared.news.store(false, Ordering::Release);
        std::mem::take(&mut *lock(&self.shared.events))
    }

    /// Writes [`BYE`] on the lifelines to `procs`.
    pub fn say_bye(&self, procs: &[u32]) {
        let lines = lock(&self.shared.lines);
        for l in lines
            .iter()
            .filter(|l| procs.contains(&l.proc) && !l.retired)
        {
            // One byte on an idle socket does not block; a failure means the peer is gone,
            // which its own end reports.
            let _ = (&*l.stream).write_all(&[BYE]);
        }
    }

    /// Waits until each of `procs` said goodbye (or its lifeline ended), calling `idle`
    /// between checks; returns the processes that did neither before `deadline`.
    pub fn wait_bye(&self, procs: &[u32], deadline: Instant, idle: &mut dyn FnMut()) -> Vec<u32> {
        loop {
            let pending: Vec<u32> = {
                let lines = lock(&self.shared.lines);
                procs
                    .iter()
                    .copied()
                    .filter(|p| {
                        lines
                            .iter()
                            .any(|l| l.proc == *p && !l.bye_received && !l.ended && !l.retired)
                    })
                    .collect()
            };
            if pending.is_empty() || Instant::now() >= deadline {
                return pending;
            }
            idle();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Stops watching the lifelines to `procs` and closes them.
    pub fn retire(&self, procs: &[u32]) {
        let mut lines = lock(&self.shared.lines);
        for l in lines.iter_mut().filter(|l| procs.contains(&l.proc)) {
            l.retired = true;
        }
    }

    /// Processes with a lifeline that is still watched.
    pub fn watched(&self) -> Vec<u32> {
        lock(&self.shared.lines)
            .iter()
            .filter(|l| !l.retired && !l.ended)
            .map(|l| l.proc)
            .collect()
    }
}

fn watch(weak: Weak<Shared>) {
    use nix::poll::{poll, PollFd, PollFlags, PollTimeout};
    let mut buf = [0u8; 64];
    loop {
        let Some(shared) = weak.upgrade() else { return };
        let snapshot: Vec<(u64, Arc<TcpStream>)> = {
            let mut lines = lock(&shared.lines);
            lines.retain(|l| !l.retired);
            lines
                .iter()
                .filter(|l| !l.ended)
                .map(|l| (l.id, l.stream.clone()))
                .collect()
        };
        if snapshot.is_empty() {
            drop(shared);
            std::thread::sleep(Duration::from_millis(u64::from(POLL_MS)));
            continue;
        }
        let mut fds: Vec<PollFd<'_>> = snapshot
            .iter()
            .map(|(_, s)| PollFd::new(s.as_fd(), PollFlags::POLLIN))
            .collect();
        if poll(&mut fds, PollTimeout::from(POLL_MS)).is_err() {
            std::thread::sleep(Duration::from_millis(1));
            continue;
        }
        let ready: Vec<bool> = fds
            .iter()
            .map(|f| f.revents().is_some_and(|r| !r.is_empty()))
            .collect();
        drop(fds);
        for ((id, stream), ready) in snapshot.iter().zip(ready) {
            if !ready {
                continue;
            }
            // Read everything there is: BYE bytes, then maybe end-of-file.
            let mut saw_bye = false;
            let outcome: Option<Result<(), String>> = loop {
                match (&**stream).read(&mut buf) {
                    Ok(0) => break Some(Ok(())),
                    Ok(n) => {
                        if buf[..n].contains(&BYE) {
                            saw_bye = true;
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break None,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => break Some(Err(e.to_string())),
                }
            };
            let mut lines = lock(&shared.lines);
            let Some(line) = lines.iter_mut().find(|l| l.id == *id) else {
                continue;
            };
            if saw_bye {
                line.bye_received = true;
            }
            let Some(end) = outcome else { continue };
            line.ended = true;
            if line.retired {
                continue;
            }
            let event = match (line.bye_received, end) {
                (true, _) => LifelineEvent::Departed { proc: line.proc },
                (false, Ok(())) => LifelineEvent::Failed {
                    proc: line.proc,
                    why: format!(
                        "{} ended without disconnecting (its lifeline closed)",
                        line.label
                    ),
                },
                (false, Err(e)) => LifelineEvent::Failed {
                    proc: line.proc,
                    why: format!("{} is unreachable (its lifeline failed: {e})", line.label),
                },
            };
            tracing::debug!(target: "dpm", ?event, "lifeline event");
            lock(&shared.events).push(event);
            shared.news.store(true, Ordering::Release);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (a, b)
    }

    fn wait_events(l: &Lifelines, n: usize) -> Vec<LifelineEvent> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut all = Vec::new();
        while all.len() < n && Instant::now() < deadline {
            if l.has_news() {
                all.extend(l.take_events());
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        all
    }

    #[test]
    fn end_without_bye_is_a_failure_and_with_bye_a_departure() {
        let watcher = Lifelines::new();
        let (mine1, theirs1) = pair();
        let (mine2, theirs2) = pair();
        watcher.add(1, mine1, "rank 1 of job x".into()).unwrap();
        watcher.add(2, mine2, "rank 2 of job x".into()).unwrap();
        assert!(!watcher.has_news());
        drop(theirs1);
        let other = Lifelines::new();
        other.add(9, theirs2, "peer".into()).unwrap();
        other.say_bye(&[9]);
        other.retire(&[9]);
        let mut ev = wait_events(&watcher, 2);
        ev.sort_by_key(|e| match e {
            LifelineEvent::Failed { proc, .. } | LifelineEvent::Departed { proc } => *proc,
        });
        assert_eq!(ev.len(), 2, "{ev:?}");
        match &ev[0] {
            LifelineEvent::Failed { proc: 1, why } => {
                assert!(
                    why.contains("rank 1 of job x") && why.contains("without"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ev[1], LifelineEvent::Departed { proc: 2 });
        assert!(watcher.watched().is_empty());
    }

    #[test]
    fn goodbyes_are_awaited_with_a_deadline() {
        let a = Lifelines::new();
        let b = Lifelines::new();
        let (x, y) = pair();
        a.add(1, x, "b".into()).unwrap();
        b.add(7, y, "a".into()).unwrap();
        let start = Instant::now();
        let pending = a.wait_bye(
            &[1],
            Instant::now() + Duration::from_millis(100),
            &mut || {},
        );
        assert_eq!(pending, vec![1]);
        assert!(start.elapsed() >= Duration::from_millis(100));
        b.say_bye(&[7]);
        let pending = a.wait_bye(&[1], Instant::now() + Duration::from_secs(5), &mut || {});
        assert!(pending.is_empty());
        // Our goodbye, then our close: a departure at the other end, nothing on ours.
        a.say_bye(&[1]);
        a.retire(&[1]);
        assert_eq!(
            wait_events(&b, 1),
            vec![LifelineEvent::Departed { proc: 7 }]
        );
        b.retire(&[7]);
        std::thread::sleep(Duration::from_millis(150));
        assert!(!a.has_news());
    }
}
