//! `MPI_THREAD_MULTIPLE` in the Rust API: a universe whose communicators any thread may use
//! at any time.
//!
//! [`crate::initialize`] gives a [`crate::Universe`] whose communicators are neither `Send`
//! nor `Sync` (the engine sits in a `RefCell`), so the compiler keeps them on one thread.
//! [`initialize_multithreaded`] gives a [`SharedUniverse`] instead: its
//! [`SharedCommunicator`]s are `Send + Sync + Clone`, so the level a program asked for is the
//! level the type system enforces. Each call takes the engine's lock only for its
//! non-blocking steps; a blocking call polls with the lock released between polls (and
//! yields the core when another thread waits for the lock, or when more threads wait than
//! the rank has cores), so progress is made by whichever thread waits and no thread holds
//! the engine across a blocking wait. Collectives run as schedules (every rank must use this
//! API for a given communicator). Errors abort the job, as MPI's default handler does.
//!
//! This module owns the lock around the engine and the runtime of a multithreaded universe.
//! It never holds that lock while waiting for a message, except in
//! [`SharedCommunicator::duplicate`] (agreeing on a context id), which a program calls before
//! its threads use the new communicator.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use kestrel_pml::buf::UserBuf;
use kestrel_pml::engine::{ReqId, DONE};
use kestrel_pml::Engine;
use kestrel_runtime::Runtime;

use crate::collective::Operation;
use crate::datatype::{Buffer, BufferMut, Equivalence};
use crate::{Error, Rank, Status, Tag};

/// The engine, made storable in a `Mutex` shared between threads.
struct EngineCell(Engine);

// SAFETY: the engine is not `Send` only because its transports hold raw pointers into
// shared memory and a running collective may hold a reduction in an `Rc`. Nothing in it is
// tied to the thread that created it (no thread-locals, no thread-affine handles), and it is
// reached only through the `Mutex` of `Shared`, one thread at a time. Reductions that enter
// it from this module are `Send` (see `SharedCommunicator::all_reduce_into`).
unsafe impl Send for EngineCell {}

/// The runtime, for the same reason and under the same discipline as [`EngineCell`].
struct RuntimeCell(Runtime);

// SAFETY: as for `EngineCell`: the runtime holds the launcher connection and no
// thread-affine state, and is reached only through its `Mutex`.
unsafe impl Send for RuntimeCell {}

struct Shared {
    engine: Mutex<EngineCell>,
    runtime: Mutex<RuntimeCell>,
    /// Threads waiting to take `engine`.
    waiting: AtomicU32,
    /// Threads inside a blocking wait.
    blocked: AtomicU32,
    rank: Rank,
    size: Rank,
}

impl Shared {
    /// The engine, counting this thread among the waiters while it is taken.
    fn engine(&self) -> MutexGuard<'_, EngineCell> {
        if let Ok(g) = self.engine.try_lock() {
            return g;
        }
        self.waiting.fetch_add(1, Ordering::Relaxed);
        let g = self.engine.lock().unwrap_or_else(|p| p.into_inner());
        self.waiting.fetch_sub(1, Ordering::Relaxed);
        g
    }

    /// MPI's default error handler: report and abort the whole job.
    fn fatal(&self, msg: &str) -> ! {
        eprintln!("kestrel: rank {}: {msg}", self.rank);
        match self.runtime.try_lock() {
            Ok(mut rt) => rt.0.abort(1, msg),
            Err(_) => std::process::exit(1),
        }
    }

    /// Waits for engine request `id`, polling with the engine released between polls.
    fn wait(&self, id: ReqId) -> kestrel_pml::Status {
        let mut idle = 0u32;
        let mut counted = false;
        let status = loop {
            let wants_yield = {
                let mut e = self.engine();
                if let Some(s) = e.0.try_complete(id) {
                    break s;
                }
                // The engine's own yield (an oversubscribed rank) comes below, released.
                e.0.idle_poll(&mut idle)
            };
            if !counted {
                counted = true;
                self.blocked.fetch_add(1, Ordering::Relaxed);
            }
            // The engine is free here. A thread waiting for it, or more waiting threads than
            // this rank has cores, needs the core more than another empty poll does.
            if wants_yield
                || self.waiting.load(Ordering::Relaxed) > 0
                || (idle > 0 && self.blocked.load(Ordering::Relaxed) > cores_per_rank())
            {
                std::thread::yield_now();
            }
        };
        if counted {
            self.blocked.fetch_sub(1, Ordering::Relaxed);
        }
        status
    }
}

/// Cores per rank on this node: the cores this process may run on, shared by the node's ranks
/// (`MPI_LOCALNRANKS`, which kestrel-run and hydra set). A waiting thread yields its core
/// when more threads wait than this (here and in the C library's blocking waits).
pub fn cores_per_rank() -> u32 {
    static CORES: OnceLock<u32> = OnceLock::new();
    *CORES.get_or_init(|| {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
        let ranks = std::env::var("MPI_LOCALNRANKS")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(1)
            .max(1);
        (cores / ranks).max(1)
    })
}

/// A running library whose communicators any thread may use (`MPI_THREAD_MULTIPLE`);
/// finalized when dropped or by [`SharedUniverse::finalize`], once every thread is done.
pub struct SharedUniverse {
    shared: Arc<Shared>,
    finalized: bool,
}

impl std::fmt::Debug for SharedUniverse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedUniverse(rank {} of {})",
            self.shared.rank, self.shared.size
        )
    }
}

/// Starts the library with `MPI_THREAD_MULTIPLE`: the communicators of the universe returned
/// are `Send + Sync`. Like [`crate::initialize`], under `kestrel-run` (or as a singleton).
/// A job spawned by another (`MPI_Comm_spawn`) is not connected back to its parent here.
pub fn initialize_multithreaded() -> Result<SharedUniverse, Error> {
    let inner = crate::environment::start()?;
    let mut engine = inner.engine.into_inner();
    // A thread sleeping in poll(2) would hold the engine the other threads wait for.
    engine.forbid_idle_sleep();
    let runtime = inner.runtime.into_inner();
    let (rank, size) = (engine.rank() as Rank, engine.size() as Rank);
    Ok(SharedUniverse {
        shared: Arc::new(Shared {
            engine: Mutex::new(EngineCell(engine)),
            runtime: Mutex::new(RuntimeCell(runtime)),
            waiting: AtomicU32::new(0),
            blocked: AtomicU32::new(0),
            rank,
            size,
        }),
        finalized: false,
    })
}

impl SharedUniverse {
    /// `MPI_COMM_WORLD`.
    pub fn world(&self) -> SharedCommunicator {
        SharedCommunicator {
            shared: Arc::clone(&self.shared),
            ctx: kestrel_pml::engine::CTX_WORLD,
            rank: self.shared.rank,
            size: self.shared.size,
        }
    }

    /// `MPI_Finalize`; every other thread must be done with MPI.
    pub fn finalize(mut self) -> Result<(), Error> {
        self.finalized = true;
        self.do_finalize()
    }

    fn do_finalize(&mut self) -> Result<(), Error> {
        let mut rt = self
            .shared
            .runtime
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        self.shared
            .engine()
            .0
            .finalize(&mut rt.0)
            .map_err(Error::Messaging)?;
        Ok(rt.0.finalize()?)
    }
}

impl Drop for SharedUniverse {
    fn drop(&mut self) {
        if !self.finalized {
            self.finalized = true;
            if let Err(e) = self.do_finalize() {
                tracing::warn!(target: "pml", "finalize failed: {e}");
            }
        }
    }
}

/// A communicator of a [`SharedUniverse`]: `Send + Sync + Clone`, usable from any thread.
#[derive(Clone)]
pub struct SharedCommunicator {
    shared: Arc<Shared>,
    ctx: u16,
    rank: Rank,
    size: Rank,
}

impl std::fmt::Debug for SharedCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "SharedCommunicator(context {}, rank {} of {})",
            self.ctx, self.rank, self.size
        )
    }
}

impl SharedCommunicator {
    /// This process's rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Ranks in the communicator.
    pub fn size(&self) -> Rank {
        self.size
    }

    fn peer(&self, r: Rank) -> u32 {
        if r < 0 || r >= self.size {
            self.shared.fatal(&format!(
                "rank {r} is outside the communicator of {} ranks",
                self.size
            ));
        }
        r as u32
    }

    fn user_tag(&self, tag: Tag) -> Tag {
        if tag < 0 {
            self.shared.fatal(&format!(
                "tag {tag} is negative; user tags must be >= 0 (negative tags are reserved for collectives)"
            ));
        }
        tag
    }

    /// `MPI_Send` to `dest` with `tag`.
    pub fn send_with_tag<B: Buffer + ?Sized>(&self, dest: Rank, buf: &B, tag: Tag) {
        let (dest, tag) = (self.peer(dest), self.user_tag(tag));
        let data = buf.as_bytes();
        // SAFETY: the send completes (below) before `data`'s borrow ends.
        let ubuf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
        let started = self
            .shared
            .engine()
            .0
            .isend(self.ctx, dest, tag, ubuf, false);
        let id = started.unwrap_or_else(|e| self.shared.fatal(&e.to_string()));
        if id != DONE {
            self.shared.wait(id);
        }
    }

    /// `MPI_Recv` from `source` (`None`: `MPI_ANY_SOURCE`) with `tag` (`None`: `MPI_ANY_TAG`).
    pub fn receive_into_with_tag<B: BufferMut + ?Sized>(
        &self,
        source: Option<Rank>,
        buf: &mut B,
        tag: Option<Tag>,
    ) -> Status {
        let source = source.map(|s| self.peer(s));
        let tag = tag.map(|t| self.user_tag(t));
        let data = buf.as_bytes_mut();
        // SAFETY: the receive completes (below) before `data`'s borrow ends.
        let ubuf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
        let started = self.shared.engine().0.irecv(self.ctx, source, tag, ubuf);
        let id = started.unwrap_or_else(|e| self.shared.fatal(&e.to_string()));
        Status::from_pml(self.shared.wait(id))
    }

    /// `MPI_Barrier`.
    pub fn barrier(&self) {
        let id = {
            let mut e = self.shared.engine();
            let s =
                e.0.nbc_barrier(self.ctx)
                    .unwrap_or_else(|err| self.shared.fatal(&err.to_string()));
            e.0.coll_run(s)
        };
        self.wait_coll(id);
    }

    /// `MPI_Allreduce` of `send` into `recv` with `op` (a `Send` operation: the predefined
    /// ones, or a user function that may run on any thread).
    pub fn all_reduce_into<T: Equivalence, O: Operation<T> + Send>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        let (red, dt) = op.reduction();
        // SAFETY: both buffers stay borrowed until the schedule completes (below).
        let (s, r) = unsafe {
            (
                crate::request::send_buf(send.as_bytes()),
                crate::request::recv_buf(recv),
            )
        };
        let id = {
            let mut e = self.shared.engine();
            let sched =
                e.0.nbc_allreduce(self.ctx, Some(s), r, dt, red)
                    .unwrap_or_else(|err| self.shared.fatal(&err.to_string()));
            e.0.coll_run(sched)
        };
        self.wait_coll(id);
    }

    fn wait_coll(&self, id: ReqId) {
        self.shared.wait(id);
        if let Some(err) = self.shared.engine().0.coll_error(id) {
            self.shared.fatal(&err.to_string());
        }
    }

    /// `MPI_Comm_dup` (collective): call it before threads use the new communicator; it
    /// holds the engine while the members agree on a context id.
    pub fn duplicate(&self) -> SharedCommunicator {
        let ctx = self
            .shared
            .engine()
            .0
            .dup(self.ctx)
            .unwrap_or_else(|e| self.shared.fatal(&e.to_string()));
        SharedCommunicator {
            shared: Arc::clone(&self.shared),
            ctx,
            rank: self.rank,
            size: self.size,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_communicators_and_universes_are_send_and_sync() {
        // A compile-time property: this test does not build if they stop being so. (The
        // single-threaded `SimpleCommunicator` holds an `Rc` and so is neither.)
        fn send_sync<T: Send + Sync>() {}
        send_sync::<SharedCommunicator>();
        send_sync::<SharedUniverse>();
    }
}
