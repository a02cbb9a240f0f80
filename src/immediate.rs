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

use kestrel_pml::nbc::Schedule;
use kestrel_pml::{PmlError, ReqId};

use crate::collective::Operation;
use crate::request::{self, LocalScope, Request};
use crate::{Buffer, Communicator, Equivalence, Inner, Process, SimpleCommunicator};

fn built(c: &SimpleCommunicator, s: Result<Schedule, PmlError>) -> Schedule {
    s.unwrap_or_else(|e| c.inner.fatal(&e.to_string()))
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

/// Nonblocking collectives every rank of a communicator calls.
pub trait ImmediateCollectives: Communicator {
    /// `MPI_Ibarrier`.
    fn immediate_barrier<'a>(&self, scope: &LocalScope<'a>) -> Request<'a> {
        let c = self.handle();
        let s = c.inner.engine.borrow_mut().nbc_barrier(c.ctx);
        request::start_coll(scope, &c.inner, c.ctx, built(c, s))
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
        let (red, dt) = op.reduction();
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_allreduce(c.ctx, Some(s), r, dt, red);
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    /// `MPI_Iallgather`: `recv` holds `size` blocks of `send.len()` elements.
    fn immediate_all_gather_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        let c = self.handle();
        let (counts, displs) = uniform(c.size as usize, std::mem::size_of_val(send));
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_allgatherv(c.ctx, Some(s), r, &counts, &displs);
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
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
        let c = self.handle();
        let (b, d) = layout::<T>(counts);
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_allgatherv(c.ctx, Some(s), r, &b, &d);
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    /// `MPI_Ialltoall`: block i of `send` goes to rank i.
    fn immediate_all_to_all_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        let c = self.handle();
        let n = c.size as usize;
        let (sc, sd) = uniform(n, std::mem::size_of_val(send) / n.max(1));
        let (rc, rd) = uniform(n, std::mem::size_of_val(recv) / n.max(1));
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched =
            c.inner
                .engine
                .borrow_mut()
                .nbc_alltoallv(c.ctx, Some(s), &sc, &sd, r, &rc, &rd);
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    /// `MPI_Ireduce_scatter_block`: rank r gets block r of the reduction.
    fn immediate_reduce_scatter_block_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        let c = self.handle();
        let (red, dt) = op.reduction();
        let counts = vec![std::mem::size_of_val(recv); c.size as usize];
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched =
            c.inner
                .engine
                .borrow_mut()
                .nbc_reduce_scatter(c.ctx, Some(s), r, &counts, dt, red);
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    /// `MPI_Iscan` (inclusive prefix reduction in rank order).
    fn immediate_scan_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        immediate_scan(self.handle(), scope, send, recv, op, false)
    }

    /// `MPI_Iexscan` (exclusive prefix reduction; rank 0's `recv` is left as it was).
    fn immediate_exclusive_scan_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        immediate_scan(self.handle(), scope, send, recv, op, true)
    }

    /// `MPI_Allreduce_init`: a persistent allreduce of `send` into `recv`.
    fn all_reduce_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        let c = self.handle();
        let (red, dt) = op.reduction();
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_allreduce(c.ctx, Some(s), r, dt, red);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
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
        let (counts, displs) = uniform(c.size as usize, std::mem::size_of_val(send));
        // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
        // bound to the scope in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_allgatherv(c.ctx, Some(s), r, &counts, &displs);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    /// `MPI_Alltoall_init`: a persistent alltoall (block i of `send` goes to rank i).
    fn all_to_all_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.handle();
        let n = c.size as usize;
        let (sc, sd) = uniform(n, std::mem::size_of_val(send) / n.max(1));
        let (rc, rd) = uniform(n, std::mem::size_of_val(recv) / n.max(1));
        // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
        // bound to the scope in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched =
            c.inner
                .engine
                .borrow_mut()
                .nbc_alltoallv(c.ctx, Some(s), &sc, &sd, r, &rc, &rd);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
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
        let c = self.handle();
        let (red, dt) = op.reduction();
        let counts = vec![std::mem::size_of_val(recv); c.size as usize];
        // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
        // bound to the scope in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched =
            c.inner
                .engine
                .borrow_mut()
                .nbc_reduce_scatter(c.ctx, Some(s), r, &counts, dt, red);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    /// `MPI_Scan_init`: a persistent inclusive prefix reduction.
    fn scan_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        scan_init(self.handle(), scope, send, recv, op, false)
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
        scan_init(self.handle(), scope, send, recv, op, true)
    }

    /// `MPI_Barrier_init`: a persistent barrier.
    fn barrier_init<'a, 's>(&self, scope: &'s LocalScope<'a>) -> PersistentCollective<'a, 's> {
        let c = self.handle();
        let s = c.inner.engine.borrow_mut().nbc_barrier(c.ctx);
        PersistentCollective::new(scope, &c.inner, built(c, s))
    }
}

impl<C: Communicator + ?Sized> ImmediateCollectives for C {}

fn immediate_scan<'a, T: Equivalence, O: Operation<T>>(
    c: &SimpleCommunicator,
    scope: &LocalScope<'a>,
    send: &'a [T],
    recv: &'a mut [T],
    op: O,
    exclusive: bool,
) -> Request<'a> {
    let (red, dt) = op.reduction();
    // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
    // (or kept by a persistent collective bound to it) in this same call.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    let sched = c
        .inner
        .engine
        .borrow_mut()
        .nbc_scan(c.ctx, Some(s), r, dt, red, exclusive);
    request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
}

fn scan_init<'a, 's, T: Equivalence, O: Operation<T>>(
    c: &SimpleCommunicator,
    scope: &'s LocalScope<'a>,
    send: &'a [T],
    recv: &'a mut [T],
    op: O,
    exclusive: bool,
) -> PersistentCollective<'a, 's> {
    let (red, dt) = op.reduction();
    // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
    // bound to the scope in this same call.
    let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
    let sched = c
        .inner
        .engine
        .borrow_mut()
        .nbc_scan(c.ctx, Some(s), r, dt, red, exclusive);
    PersistentCollective::new(scope, &c.inner, built(c, sched))
}

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
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let b = unsafe { request::recv_buf(buf) };
        let s = c
            .inner
            .engine
            .borrow_mut()
            .nbc_bcast(c.ctx, self.rank as u32, b);
        request::start_coll(scope, &c.inner, c.ctx, built(c, s))
    }

    fn immediate_reduce_into_root<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> Request<'a> {
        let c = self.comm;
        let (red, dt) = op.reduction();
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c.inner.engine.borrow_mut().nbc_reduce(
            c.ctx,
            self.rank as u32,
            Some(s),
            Some(r),
            dt,
            red,
        );
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    fn immediate_reduce_into<'a, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        op: O,
    ) -> Request<'a> {
        let c = self.comm;
        let (red, dt) = op.reduction();
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let s = unsafe { request::send_buf(send.as_bytes()) };
        let sched =
            c.inner
                .engine
                .borrow_mut()
                .nbc_reduce(c.ctx, self.rank as u32, Some(s), None, dt, red);
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    fn immediate_gather_into_root<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        let c = self.comm;
        let (counts, displs) = uniform(c.size as usize, std::mem::size_of_val(send));
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c.inner.engine.borrow_mut().nbc_gatherv(
            c.ctx,
            self.rank as u32,
            Some(s),
            Some(r),
            &counts,
            &displs,
        );
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    fn immediate_gather_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
    ) -> Request<'a> {
        let c = self.comm;
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let s = unsafe { request::send_buf(send.as_bytes()) };
        let sched = c.inner.engine.borrow_mut().nbc_gatherv(
            c.ctx,
            self.rank as u32,
            Some(s),
            None,
            &[],
            &[],
        );
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    fn immediate_scatter_into_root<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> Request<'a> {
        let c = self.comm;
        let (counts, displs) = uniform(c.size as usize, std::mem::size_of_val(recv));
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let sched = c.inner.engine.borrow_mut().nbc_scatterv(
            c.ctx,
            self.rank as u32,
            Some(s),
            &counts,
            &displs,
            Some(r),
        );
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    fn immediate_scatter_into<'a, T: Equivalence>(
        &self,
        scope: &LocalScope<'a>,
        recv: &'a mut [T],
    ) -> Request<'a> {
        let c = self.comm;
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let r = unsafe { request::recv_buf(recv) };
        let sched = c.inner.engine.borrow_mut().nbc_scatterv(
            c.ctx,
            self.rank as u32,
            None,
            &[],
            &[],
            Some(r),
        );
        request::start_coll(scope, &c.inner, c.ctx, built(c, sched))
    }

    fn broadcast_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        buf: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        // SAFETY: borrowed for 'a; the schedule using them is started and tracked by the scope
        // (or kept by a persistent collective bound to it) in this same call.
        let b = unsafe { request::recv_buf(buf) };
        let s = c
            .inner
            .engine
            .borrow_mut()
            .nbc_bcast(c.ctx, self.rank as u32, b);
        PersistentCollective::new(scope, &c.inner, built(c, s))
    }

    fn reduce_init_root<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        let (red, dt) = op.reduction();
        // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
        // bound to the scope in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let root = self.rank as u32;
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_reduce(c.ctx, root, Some(s), Some(r), dt, red);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    fn reduce_init<'a, 's, T: Equivalence, O: Operation<T>>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        op: O,
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        let (red, dt) = op.reduction();
        // SAFETY: borrowed for 'a; the schedule using it is kept by a persistent collective
        // bound to the scope in this same call.
        let s = unsafe { request::send_buf(send.as_bytes()) };
        let root = self.rank as u32;
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_reduce(c.ctx, root, Some(s), None, dt, red);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    fn gather_init_root<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        let (counts, displs) = uniform(c.size as usize, std::mem::size_of_val(send));
        // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
        // bound to the scope in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let root = self.rank as u32;
        let sched = c.inner.engine.borrow_mut().nbc_gatherv(
            c.ctx,
            root,
            Some(s),
            Some(r),
            &counts,
            &displs,
        );
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    fn gather_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        // SAFETY: borrowed for 'a; the schedule using it is kept by a persistent collective
        // bound to the scope in this same call.
        let s = unsafe { request::send_buf(send.as_bytes()) };
        let root = self.rank as u32;
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_gatherv(c.ctx, root, Some(s), None, &[], &[]);
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    fn scatter_init_root<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        send: &'a [T],
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        let (counts, displs) = uniform(c.size as usize, std::mem::size_of_val(recv));
        // SAFETY: borrowed for 'a; the schedule using them is kept by a persistent collective
        // bound to the scope in this same call.
        let (s, r) = unsafe { (request::send_buf(send.as_bytes()), request::recv_buf(recv)) };
        let root = self.rank as u32;
        let sched = c.inner.engine.borrow_mut().nbc_scatterv(
            c.ctx,
            root,
            Some(s),
            &counts,
            &displs,
            Some(r),
        );
        PersistentCollective::new(scope, &c.inner, built(c, sched))
    }

    fn scatter_init<'a, 's, T: Equivalence>(
        &self,
        scope: &'s LocalScope<'a>,
        recv: &'a mut [T],
    ) -> PersistentCollective<'a, 's> {
        let c = self.comm;
        // SAFETY: borrowed for 'a; the schedule using it is kept by a persistent collective
        // bound to the scope in this same call.
        let r = unsafe { request::recv_buf(recv) };
        let root = self.rank as u32;
        let sched = c
            .inner
            .engine
            .borrow_mut()
            .nbc_scatterv(c.ctx, root, None, &[], &[], Some(r));
        PersistentCollective::new(scope, &c.inner, built(c, sched))
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
    pub(crate) fn new(scope: &'s LocalScope<'a>, inner: &Rc<Inner>, s: Schedule) -> Self {
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
