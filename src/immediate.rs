//! Nonblocking (immediate) and persistent collectives, shaped like rsmpi's
//! `immediate_*` collectives: each returns a [`Request`] of a [`LocalScope`], so the buffers
//! stay borrowed until it completes, and any number may be outstanding on one communicator
//! and completed in any order (`wait`, `test`, [`crate::request::wait_all`] ...). The engine
//! advances them whenever it makes progress, so they overlap with computation.
//!
//! ```no_run
//! use kestrel::collective::SystemOperation;
//! use kestrel::immediate::ImmediateCollectives;
//! use kestrel::{request, Communicator};
//! # let universe = kestrel::initialize().unwrap();
//! let world = universe.world();
//! let mut sum = [0u64; 1];
//! request::scope(|scope| {
//!     let r = world.immediate_all_reduce_into(scope, &[1u64], &mut sum, SystemOperation::sum());
//!     // ... compute ...
//!     r.wait();
//! });
//! ```
//!
//! Persistent collectives (MPI-4 `MPI_*_init`) are [`PersistentCollective`]s: built once,
//! then started and completed any number of times on the same buffers.

use std::marker::PhantomData;
use std::rc::Rc;

use kestrel_pml::nbc::{PostedColl, Schedule};
use kestrel_pml::ReqId;

use crate::collective::Operation;
use crate::request::{self, LocalScope, Request};
use crate::{Buffer, Communicator, Equivalence, Inner, Process, SimpleCommunicator};

pub(crate) use bound::Bound;

/// The one way a collective schedule over borrowed buffers reaches the engine.
mod bound {
    use std::marker::PhantomData;

    use kestrel_pml::nbc::{PostedColl, Schedule};
    use kestrel_pml::{Engine, PmlError};

    use super::PersistentCollective;
    use crate::request::{self, LocalScope, Request};
    use crate::SimpleCommunicator;

    /// A collective's schedule, built on a communicator over buffers borrowed for `'a`, not
    /// yet handed to the engine. Its fields are private to this module, so the schedule
    /// reaches the engine only through [`Bound::start`] (a request of a scope of `'a`) or
    /// [`Bound::keep`] (a persistent collective bound to one), and the engine never touches
    /// its buffers after `'a` ended; dropped unstarted, it never runs. The unsafe blocks that
    /// turn borrowed slices into engine buffers ([`request::send_buf`],
    /// [`request::recv_buf`]) for a schedule that goes only into a `Bound<'_, 'a>` of those
    /// borrows rely on this.
    #[must_use = "a bound schedule does nothing until started or kept"]
    pub(crate) struct Bound<'c, 'a> {
        comm: &'c SimpleCommunicator,
        sched: Schedule,
        _buffers: PhantomData<&'a mut [u8]>,
    }

    impl<'c, 'a> Bound<'c, 'a> {
        /// Builds a schedule with `f` on `comm`'s engine (released before anything else
        /// happens). A build error is fatal: its message, after `call` and `": "` when
        /// there is a `call`.
        pub(crate) fn build(
            comm: &'c SimpleCommunicator,
            call: Option<&str>,
            f: impl FnOnce(&mut Engine) -> Result<Schedule, PmlError>,
        ) -> Self {
            Self::build_as(comm, call, false, f)
        }

        /// [`Bound::build`] for a schedule started at once (`now`, the immediate forms) or
        /// kept (the persistent ones): only the first may take the node segment's posted
        /// rounds, whose numbers are drawn in build order (`Engine::set_posted_rounds`).
        pub(crate) fn build_as(
            comm: &'c SimpleCommunicator,
            call: Option<&str>,
            now: bool,
            f: impl FnOnce(&mut Engine) -> Result<Schedule, PmlError>,
        ) -> Self {
            let s = {
                let mut e = comm.inner.engine.borrow_mut();
                e.set_posted_rounds(now);
                let s = f(&mut e);
                e.set_posted_rounds(false);
                s
            };
            let sched = s.unwrap_or_else(|e| match call {
                Some(call) => comm.inner.fatal(&format!("{call}: {e}")),
                None => comm.inner.fatal(&e.to_string()),
            });
            Bound {
                comm,
                sched,
                _buffers: PhantomData,
            }
        }

        /// Starts `coll`, over buffers borrowed for `'a`, as a request of `scope` if it is
        /// one posted round of `comm`'s node segment (`Engine::nbc_posted_start`, the same
        /// engine path the C library's `MPI_I*` take); `None`: build the schedule. An error
        /// is fatal, as in [`Bound::build`].
        pub(crate) fn start_posted(
            comm: &'c SimpleCommunicator,
            scope: &LocalScope<'a>,
            call: &str,
            coll: PostedColl,
        ) -> Option<Request<'a>> {
            let started = comm
                .inner
                .engine
                .borrow_mut()
                .nbc_posted_start(comm.ctx, coll);
            match started {
                Ok(id) => Some(request::track_coll(scope, &comm.inner, comm.ctx, id?)),
                Err(e) => comm.inner.fatal(&format!("{call}: {e}")),
            }
        }

        /// Starts the schedule as a request of `scope` (the immediate forms; the blocking
        /// ones wait for it at once).
        pub(crate) fn start(self, scope: &LocalScope<'a>) -> Request<'a> {
            request::start_coll(scope, &self.comm.inner, self.comm.ctx, self.sched)
        }

        /// Keeps the schedule as a persistent collective bound to `scope`.
        pub(crate) fn keep<'s>(self, scope: &'s LocalScope<'a>) -> PersistentCollective<'a, 's> {
            PersistentCollective::new(scope, &self.comm.inner, self.sched)
        }
    }
}

/// Element counts as byte counts and packed displacements.
fn layout<T>(counts: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let s = std::mem::size_of::<T>();
    let bytes: Vec<usize> = counts.iter().map(|c| c * s).collect();
    let displs = kestrel_pml::nbc::algorithms::packed_displs(&bytes);
    (bytes, displs)
}

fn uniform(n: usize, block: usize) -> (Vec<usize>, Vec<usize>) {
    kestrel_pml::nbc::algorithms::uniform(n as u32, block)
}

// The schedules of the collectives, each built in one place; the immediate forms start
// them (`Bound::start`), the persistent ones keep them (`Bound::keep`). Every unsafe block
// below makes engine buffers of slices borrowed for 'a for a schedule that goes only into
// the `Bound<'_, 'a>` returned.

/// `MPI_(I)barrier(_init)`.
fn barrier<'c, 'a>(c: &'c SimpleCommunicator, now: bool) -> Bound<'c, 'a> {
    Bound::build_as(c, None, now, |e| e.nbc_barrier(c.ctx))
}

/// `MPI_(I)allreduce(_init)`.
fn all_reduce<'c, 'a, T: Equivalence, O: Operation<T>>(
    c: &'c SimpleCommunicator,
    send: &'a [T],
    recv: &'a mut [T],
    op: O,
    now: bool,
) -> Bound<'c, 'a> {
    let (red, dt) = op.reduction();
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build_as(c, None, now, |e| {
        e.nbc_allreduce(c.ctx, Some(s), r, dt, red)
    })
}

/// `MPI_(I)allgatherv(_init)`: `counts` and `displs` in bytes.
fn all_gather<'c, 'a, T: Equivalence>(
    c: &'c SimpleCommunicator,
    send: &'a [T],
    recv: &'a mut [T],
    (counts, displs): (Vec<usize>, Vec<usize>),
) -> Bound<'c, 'a> {
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build(c, None, |e| {
        e.nbc_allgatherv(c.ctx, Some(s), r, &counts, &displs)
    })
}

/// `MPI_(I)alltoall(_init)`: block i of `send` to rank i.
fn all_to_all<'c, 'a, T: Equivalence>(
    c: &'c SimpleCommunicator,
    send: &'a [T],
    recv: &'a mut [T],
) -> Bound<'c, 'a> {
    let n = c.size as usize;
    let (sc, sd) = uniform(n, std::mem::size_of_val(send) / n.max(1));
    let (rc, rd) = uniform(n, std::mem::size_of_val(recv) / n.max(1));
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build(c, None, |e| {
        e.nbc_alltoallv(c.ctx, Some(s), &sc, &sd, r, &rc, &rd)
    })
}

/// `MPI_(I)reduce_scatter_block(_init)`: rank r gets block r of the reduction.
fn reduce_scatter_block<'c, 'a, T: Equivalence, O: Operation<T>>(
    c: &'c SimpleCommunicator,
    send: &'a [T],
    recv: &'a mut [T],
    op: O,
) -> Bound<'c, 'a> {
    let (red, dt) = op.reduction();
    let counts = vec![std::mem::size_of_val(recv); c.size as usize];
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build(c, None, |e| {
        e.nbc_reduce_scatter(c.ctx, Some(s), r, &counts, dt, red)
    })
}

/// `MPI_(I)scan(_init)` and, `exclusive`, `MPI_(I)exscan(_init)`.
fn scan<'c, 'a, T: Equivalence, O: Operation<T>>(
    c: &'c SimpleCommunicator,
    send: &'a [T],
    recv: &'a mut [T],
    op: O,
    exclusive: bool,
) -> Bound<'c, 'a> {
    let (red, dt) = op.reduction();
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    Bound::build(c, None, |e| {
        e.nbc_scan(c.ctx, Some(s), r, dt, red, exclusive)
    })
}

/// `MPI_(I)bcast(_init)` from `root`.
fn broadcast<'c, 'a, T: Equivalence>(
    root: &Process<'c>,
    buf: &'a mut [T],
    now: bool,
) -> Bound<'c, 'a> {
    let c = root.comm;
    // SAFETY: borrowed for 'a; the schedule using it goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let b = unsafe { request::recv_buf(buf) };
    Bound::build_as(c, None, now, |e| e.nbc_bcast(c.ctx, root.rank as u32, b))
}

/// `MPI_(I)reduce(_init)` to `root`: `recv` is the root's (`None` on the other ranks).
fn reduce<'c, 'a, T: Equivalence, O: Operation<T>>(
    root: &Process<'c>,
    send: &'a [T],
    recv: Option<&'a mut [T]>,
    op: O,
) -> Bound<'c, 'a> {
    let c = root.comm;
    let (red, dt) = op.reduction();
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe {
        let r = recv.map(|r| request::recv_buf(r));
        (request::send_buf(send.as_bytes()), r)
    };
    Bound::build(c, None, |e| {
        e.nbc_reduce(c.ctx, root.rank as u32, Some(s), r, dt, red)
    })
}

/// `MPI_(I)gather(_init)` to `root`: `recv` is the root's (`None` on the other ranks) and
/// holds `size` blocks.
fn gather<'c, 'a, T: Equivalence>(
    root: &Process<'c>,
    send: &'a [T],
    recv: Option<&'a mut [T]>,
) -> Bound<'c, 'a> {
    let c = root.comm;
    let (counts, displs) = match recv {
        Some(_) => uniform(c.size as usize, std::mem::size_of_val(send)),
        None => (Vec::new(), Vec::new()),
    };
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe {
        let r = recv.map(|r| request::recv_buf(r));
        (request::send_buf(send.as_bytes()), r)
    };
    Bound::build(c, None, |e| {
        e.nbc_gatherv(c.ctx, root.rank as u32, Some(s), r, &counts, &displs)
    })
}

/// `MPI_(I)scatter(_init)` from `root`: `send` is the root's (`None` on the other ranks);
/// block r of it goes to rank r.
fn scatter<'c, 'a, T: Equivalence>(
    root: &Process<'c>,
    send: Option<&'a [T]>,
    recv: &'a mut [T],
) -> Bound<'c, 'a> {
    let c = root.comm;
    let (counts, displs) = match send {
        Some(_) => uniform(c.size as usize, std::mem::size_of_val(recv)),
        None => (Vec::new(), Vec::new()),
    };
    // SAFETY: borrowed for 'a; the schedule using them goes only into the `Bound<'_, 'a>`
    // returned, which the scope starts and tracks or a persistent collective bound to it keeps.
    let (s, r) = unsafe {
        let s = send.map(|s| request::send_buf(s.as_bytes()));
        (s, request::recv_buf(recv))
    };
    Bound::build(c, None, |e| {
        e.nbc_scatterv(c.ctx, root.rank as u32, s, &counts, &displs, Some(r))
    })
}

/// Nonblocking collectives every rank of a communicator calls.
pub trait ImmediateCollectives: Communicator {
    /// `MPI_Ibarrier`.
    fn immediate_barrier<'a>(&self, scope: &LocalScope<'a>) -> Request<'a> {
        let c = self.handle();
        Bound::start_posted(c, scope, "MPI_Ibarrier", PostedColl::Barrier)
            .unwrap_or_else(|| barrier(c, true).start(scope))
    }

    /// `MPI_Iallreduce`.
    fn immediate_all_reduce_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        let c = self.handle();
        let (red, dtype) = op.reduction();
        // SAFETY: borrowed for 'a; they go only into a request of `scope`, a scope of 'a.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let coll = PostedColl::Allreduce {
            send: Some(s),
            recv: r,
            dtype,
            op: red,
        };
        Bound::start_posted(c, scope, "MPI_Iallreduce", coll)
            .unwrap_or_else(|| all_reduce(c, send, recv, op, true).start(scope))
    }

    /// `MPI_Iallgather`: `recv` holds `size` blocks of `send.len()` elements.
    fn immediate_all_gather_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        let c = self.handle();
        let blocks = uniform(c.size as usize, std::mem::size_of_val(send));
        all_gather(c, send, recv, blocks).start(scope)
    }

    /// `MPI_Iallgatherv`: rank r contributes `counts[r]` elements, stored contiguously in
    /// rank order.
    fn immediate_all_gather_varcount_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        counts: &[usize],
    ) -> Request<'a> {
        all_gather(self.handle(), send, recv, layout::<T>(counts)).start(scope)
    }

    /// `MPI_Ialltoall`: block i of `send` goes to rank i.
    fn immediate_all_to_all_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        all_to_all(self.handle(), send, recv).start(scope)
    }

    /// `MPI_Ireduce_scatter_block`: rank r gets block r of the reduction.
    fn immediate_reduce_scatter_block_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        reduce_scatter_block(self.handle(), send, recv, op).start(scope)
    }

    /// `MPI_Iscan` (inclusive prefix reduction in rank order).
    fn immediate_scan_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        scan(self.handle(), send, recv, op, false).start(scope)
    }

    /// `MPI_Iexscan` (exclusive prefix reduction; rank 0's `recv` is left as it was).
    fn immediate_exclusive_scan_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        scan(self.handle(), send, recv, op, true).start(scope)
    }

    /// `MPI_Allreduce_init`: a persistent allreduce of `send` into `recv`.
    fn all_reduce_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        all_reduce(self.handle(), send, recv, op, false).keep(scope)
    }

    /// `MPI_Allgather_init`: a persistent allgather of `send` into `recv` (`size` blocks of
    /// `send.len()` elements).
    fn all_gather_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.handle();
        let blocks = uniform(c.size as usize, std::mem::size_of_val(send));
        all_gather(c, send, recv, blocks).keep(scope)
    }

    /// `MPI_Alltoall_init`: a persistent alltoall (block i of `send` goes to rank i).
    fn all_to_all_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        all_to_all(self.handle(), send, recv).keep(scope)
    }

    /// `MPI_Reduce_scatter_block_init`: a persistent reduce-scatter (rank r gets block r of
    /// the reduction).
    fn reduce_scatter_block_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        reduce_scatter_block(self.handle(), send, recv, op).keep(scope)
    }

    /// `MPI_Scan_init`: a persistent inclusive prefix reduction.
    fn scan_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        scan(self.handle(), send, recv, op, false).keep(scope)
    }

    /// `MPI_Exscan_init`: a persistent exclusive prefix reduction (rank 0's `recv` is left
    /// as it was).
    fn exclusive_scan_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        scan(self.handle(), send, recv, op, true).keep(scope)
    }

    /// `MPI_Barrier_init`: a persistent barrier.
    fn barrier_init<'a, 's>(&self, scope: &'s LocalScope<'a>) -> PersistentCollective<'a, 's> {
        barrier(self.handle(), false).keep(scope)
    }
}

impl<C: Communicator + ?Sized> ImmediateCollectives for C {}

/// Nonblocking rooted collectives: called on the root's [`Process`] by every rank.
pub trait ImmediateRoot<'p> {
    /// `MPI_Ibcast` from this process.
    fn immediate_broadcast_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        buf: &'a mut [T],
    ) -> Request<'a>;
    /// `MPI_Ireduce` at the root (call on the root itself).
    fn immediate_reduce_into_root<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a>;
    /// `MPI_Ireduce` from a non-root rank.
    fn immediate_reduce_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        op: O,
    ) -> Request<'a>;
    /// `MPI_Igather` at the root: `recv` holds `size` blocks.
    fn immediate_gather_into_root<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a>;
    /// `MPI_Igather` from a non-root rank.
    fn immediate_gather_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
    ) -> Request<'a>;
    /// `MPI_Iscatter` at the root: block r of `send` goes to rank r.
    fn immediate_scatter_into_root<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a>;
    /// `MPI_Iscatter` at a non-root rank.
    fn immediate_scatter_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        recv: &'a mut [T],
    ) -> Request<'a>;
    /// `MPI_Bcast_init` from this process: a persistent broadcast.
    fn broadcast_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        buf: &'a mut [T],
    ) -> PersistentCollective<'a, 's>;
    /// `MPI_Reduce_init` at the root (call on the root itself): a persistent reduce.
    fn reduce_init_root<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's>;
    /// `MPI_Reduce_init` from a non-root rank.
    fn reduce_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        op: O,
    ) -> PersistentCollective<'a, 's>;
    /// `MPI_Gather_init` at the root: `recv` holds `size` blocks.
    fn gather_init_root<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's>;
    /// `MPI_Gather_init` from a non-root rank.
    fn gather_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
    ) -> PersistentCollective<'a, 's>;
    /// `MPI_Scatter_init` at the root: block r of `send` goes to rank r.
    fn scatter_init_root<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's>;
    /// `MPI_Scatter_init` at a non-root rank.
    fn scatter_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's>;
}

impl<'p> ImmediateRoot<'p> for Process<'p> {
    fn immediate_broadcast_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        buf: &'a mut [T],
    ) -> Request<'a> {
        let c = self.comm;
        // SAFETY: borrowed for 'a; it goes only into a request of `scope`, a scope of 'a.
        let b = unsafe { request::recv_buf(buf) };
        let coll = PostedColl::Bcast {
            root: self.rank as u32,
            buf: b,
        };
        Bound::start_posted(c, scope, "MPI_Ibcast", coll)
            .unwrap_or_else(|| broadcast(self, buf, true).start(scope))
    }

    fn immediate_reduce_into_root<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        reduce(self, send, Some(recv), op).start(scope)
    }

    fn immediate_reduce_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        op: O,
    ) -> Request<'a> {
        reduce(self, send, None, op).start(scope)
    }

    fn immediate_gather_into_root<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        gather(self, send, Some(recv)).start(scope)
    }

    fn immediate_gather_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
    ) -> Request<'a> {
        gather(self, send, None).start(scope)
    }

    fn immediate_scatter_into_root<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        scatter(self, Some(send), recv).start(scope)
    }

    fn immediate_scatter_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        recv: &'a mut [T],
    ) -> Request<'a> {
        scatter(self, None, recv).start(scope)
    }

    fn broadcast_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        buf: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        broadcast(self, buf, false).keep(scope)
    }

    fn reduce_init_root<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        reduce(self, send, Some(recv), op).keep(scope)
    }

    fn reduce_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        reduce(self, send, None, op).keep(scope)
    }

    fn gather_init_root<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        gather(self, send, Some(recv)).keep(scope)
    }

    fn gather_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
    ) -> PersistentCollective<'a, 's> {
        gather(self, send, None).keep(scope)
    }

    fn scatter_init_root<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        scatter(self, Some(send), recv).keep(scope)
    }

    fn scatter_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        scatter(self, None, recv).keep(scope)
    }
}

/// A persistent collective (MPI-4 `MPI_*_init`): its buffers stay borrowed for `'a`, and
/// every [`start`](Self::start) runs it again on their current contents. The scope waits
/// for a run still under way when it ends; dropping the collective waits for its run and
/// releases it.
#[must_use = "a persistent collective does nothing until started"]
pub struct PersistentCollective<'a, 's> {
    scope: &'s LocalScope<'a>,
    inner: Rc<Inner>,
    id: ReqId,
    active: bool,
    _buffers: PhantomData<&'a mut [u8]>,
}

impl std::fmt::Debug for PersistentCollective<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PersistentCollective({:#x})", self.id)
    }
}

impl<'a, 's> PersistentCollective<'a, 's> {
    fn new(scope: &'s LocalScope<'a>, inner: &Rc<Inner>, s: Schedule) -> Self {
        let id = inner.engine.borrow_mut().coll_persist(s);
        PersistentCollective {
            scope,
            inner: inner.clone(),
            id,
            active: false,
            _buffers: PhantomData,
        }
    }

    /// `MPI_Start`: runs the collective once more (completing a run still under way first).
    pub fn start(&mut self) {
        if self.active {
            self.wait();
        }
        let r = self.inner.engine.borrow_mut().coll_start(self.id);
        r.unwrap_or_else(|e| self.inner.fatal(&e.to_string()));
        self.active = true;
        request::track(self.scope, &self.inner, self.id);
    }

    /// `MPI_Wait`: completes the run under way (returns at once when none is).
    pub fn wait(&mut self) {
        if !self.active {
            return;
        }
        self.active = false;
        let st = self.inner.engine.borrow_mut().wait(self.id);
        request::check_coll(&self.inner, self.id, st);
    }

    /// `MPI_Test`: whether the run under way completed (with one round of progress).
    pub fn test(&mut self) -> bool {
        if !self.active {
            return true;
        }
        let done = self.inner.engine.borrow_mut().test(self.id);
        match done {
            Some(st) => {
                self.active = false;
                request::check_coll(&self.inner, self.id, st);
                true
            }
            None => false,
        }
    }
}

impl Drop for PersistentCollective<'_, '_> {
    fn drop(&mut self) {
        self.wait();
        self.inner.engine.borrow_mut().coll_free(self.id);
    }
}
