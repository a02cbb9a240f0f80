//! One-sided communication: windows of typed memory that other ranks read and write, and the
//! epochs in which they may.
//!
//! A [`Window`] exposes `len` elements of an [`Equivalence`] type on each rank; displacements
//! count elements. Operations exist only on an [`Epoch`], which only the synchronization
//! methods hand out, each for the duration of a closure: [`Window::fence`] (active target,
//! collective), [`Window::lock`] and [`Window::lock_all`] (passive target), and
//! [`Window::access`] with [`Window::expose`] (general active target), and [`Window::fences`]
//! for a run of fence epochs sharing their fences. So an operation outside
//! an epoch does not compile, and the epoch's closing synchronization runs when the closure
//! returns. A get's destination stays borrowed until the epoch closes (its bytes may arrive
//! only then; [`Epoch::flushed`] closes a part of a passive epoch with a flush, freeing its
//! results there); puts and accumulates copy their data when called.
//!
//! ```no_run
//! use kestrel::window::{LockType, WindowCreation};
//! use kestrel::collective::SystemOperation;
//! use kestrel::Communicator;
//!
//! let universe = kestrel::initialize().unwrap();
//! let world = universe.world();
//! let win = world.allocate_window::<u64>(4);
//! let right = (world.rank() + 1) % world.size();
//! win.fence(|epoch| epoch.put(right, 0, &[world.rank() as u64]));
//! win.lock(0, LockType::Shared, |epoch| {
//!     epoch.accumulate(0, 1, &[1u64], SystemOperation::sum());
//! });
//! world.barrier();
//! let mut seen = [0u64; 2];
//! win.lock(0, LockType::Shared, |epoch| epoch.get(0, 0, &mut seen));
//! ```
//!
//! What the borrow checker refuses: an epoch used outside its closure, and a get's buffer
//! read before its epoch closed.
//!
//! ```compile_fail
//! # use kestrel::window::WindowCreation;
//! # let universe = kestrel::initialize().unwrap();
//! # let world = universe.world();
//! let win = world.allocate_window::<u64>(1);
//! let mut saved = None;
//! win.fence(|epoch| saved = Some(epoch));
//! ```
//!
//! ```compile_fail
//! # use kestrel::window::WindowCreation;
//! # let universe = kestrel::initialize().unwrap();
//! # let world = universe.world();
//! let win = world.allocate_window::<u64>(1);
//! let mut buf = [0u64; 1];
//! win.fence(|epoch| {
//!     epoch.get(0, 0, &mut buf);
//!     println!("{}", buf[0]);
//! });
//! ```
//!
//! while the same get with the read after the epoch compiles:
//!
//! ```no_run
//! # use kestrel::window::WindowCreation;
//! # let universe = kestrel::initialize().unwrap();
//! # let world = universe.world();
//! let win = world.allocate_window::<u64>(1);
//! let mut buf = [0u64; 1];
//! win.fence(|epoch| epoch.get(0, 0, &mut buf));
//! println!("{}", buf[0]);
//! ```
//!
//! Windows from [`WindowCreation::allocate_window`] keep their memory in the library: on one
//! node every rank maps it, and operations between those ranks are plain copies and CPU
//! atomics. [`WindowCreation::with_window`] exposes the caller's memory for the duration of a
//! closure. Errors are fatal, as everywhere in this API (MPI's default error handler). This
//! module must never let an operation outlive the borrow of the memory it writes: each
//! epoch completes every operation before its closure's borrows end.

use std::cell::Cell;
use std::marker::PhantomData;
use std::rc::Rc;

use kestrel_pml::rma::{AccOp, DirectView, Segment, WinMemory};

use crate::collective::{Reducible, SystemOperation};
use crate::{Communicator, Equivalence, Inner, Rank};

/// The kind of a passive-target lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LockType {
    /// `MPI_LOCK_EXCLUSIVE`: no other rank holds the lock meanwhile.
    Exclusive,
    /// `MPI_LOCK_SHARED`: other shared holders may hold it too.
    Shared,
}

/// A window: `len` elements of `T` on every rank of a communicator, open to one-sided
/// operations in epochs. Dropping it frees it, which is collective (every rank drops it).
pub struct Window<T: Equivalence> {
    inner: Rc<Inner>,
    id: u16,
    base: *mut T,
    len: usize,
    rank: Rank,
    size: Rank,
    /// Each rank's displacement unit in bytes (the element size it chose).
    units: Vec<u32>,
    /// An epoch of this window is open in this process (epochs do not nest).
    in_epoch: Cell<bool>,
    /// The node mapping of a window whose memory the ranks of this node share
    /// (`allocate_window`): puts, gets, accumulates and compare-and-swaps to those ranks,
    /// and the flushes of a window all on this node, work on it without the engine, as the
    /// C library's do.
    direct: Option<DirectView>,
}

/// Window creation on any communicator.
pub trait WindowCreation: Communicator {
    /// `MPI_Win_allocate` (collective): a window of `len` zeroed elements on this rank, whose
    /// memory the library keeps (shared with the other ranks of this node).
    fn allocate_window<T: Equivalence>(&self, len: usize) -> Window<T> {
        let c = self.handle();
        let bytes = (len as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        let unit = std::mem::size_of::<T>().max(1) as u32;
        let r = c
            .inner
            .engine
            .borrow_mut()
            .win_allocate(c.ctx, bytes, unit, false);
        let a = r.unwrap_or_else(|e| c.inner.fatal(&format!("allocate_window: {e}")));
        Window::new(self, a.win, a.base.cast::<T>(), len)
    }

    /// `MPI_Win_create` (collective) on `memory`, for the duration of `f`: the window is
    /// freed (collectively) when `f` returns, before the borrow of `memory` ends.
    fn with_window<T: Equivalence, R>(
        &self,
        memory: &mut [T],
        f: impl FnOnce(&Window<T>) -> R,
    ) -> R {
        let c = self.handle();
        let len = memory.len();
        let bytes = std::mem::size_of_val(memory);
        let unit = std::mem::size_of::<T>().max(1) as u32;
        // SAFETY: `memory` is borrowed exclusively until this function returns, after the
        // window is freed (the drop below, also on unwinding: a panic in `f` aborts the job
        // first, see `EpochGuard`), so peers' operations only ever write it while it lives.
        let mem = unsafe { WinMemory::fixed(memory.as_mut_ptr().cast::<u8>(), bytes) };
        let r = c
            .inner
            .engine
            .borrow_mut()
            .win_create(c.ctx, mem, bytes as u64, unit);
        let id = r.unwrap_or_else(|e| c.inner.fatal(&format!("with_window: {e}")));
        let win = Window::new(self, id, memory.as_mut_ptr(), len);
        let guard = EpochGuard(&c.inner);
        let out = f(&win);
        std::mem::forget(guard);
        drop(win);
        out
    }
}

impl<C: Communicator + ?Sized> WindowCreation for C {}

/// Aborts the job if a closure holding window operations unwinds: the operations' closing
/// synchronization would not run, and a get could write a buffer whose borrow has ended.
struct EpochGuard<'a>(&'a Rc<Inner>);

impl Drop for EpochGuard<'_> {
    fn drop(&mut self) {
        self.0
            .fatal("a panic inside a one-sided epoch or window scope: its operations cannot be completed safely");
    }
}

impl<T: Equivalence> Window<T> {
    fn new<C: Communicator + ?Sized>(comm: &C, id: u16, base: *mut T, len: usize) -> Window<T> {
        let c = comm.handle();
        let (units, direct) = {
            let e = c.inner.engine.borrow();
            let units = (0..comm.size() as u32)
                .map(|r| e.win_member(id, r).map(|m| m.disp_unit).unwrap_or(1))
                .collect();
            (units, e.win_direct_view(id).ok().flatten())
        };
        Window {
            inner: c.inner.clone(),
            id,
            base,
            len,
            rank: comm.rank(),
            size: comm.size(),
            units,
            in_epoch: Cell::new(false),
            direct,
        }
    }

    /// This process's rank in the window.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    /// Ranks in the window.
    pub fn size(&self) -> Rank {
        self.size
    }

    /// Elements this rank exposes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether this rank exposes no element.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    fn fail(&self, what: &str, e: impl std::fmt::Display) -> ! {
        self.inner.fatal(&format!("window: {what}: {e}"))
    }

    /// Runs `f` on this rank's memory under an exclusive lock of this rank (no peer's
    /// passive-target operation runs meanwhile; fence-synchronized programs call it between
    /// fences).
    pub fn with_local<R>(&self, f: impl FnOnce(&mut [T]) -> R) -> R {
        self.lock(self.rank, LockType::Exclusive, |_| {
            let s: &mut [T] = if self.len == 0 {
                &mut []
            } else {
                // SAFETY: the window's memory, `len` elements of `T` at `base`, lives as long
                // as the window; the exclusive lock of this rank keeps peers' operations out
                // for the closure's duration, and `Equivalence` admits whatever bytes they
                // left.
                unsafe { std::slice::from_raw_parts_mut(self.base, self.len) }
            };
            f(s)
        })
    }

    fn open<'b, R>(
        &'b self,
        passive: bool,
        only: Option<Rank>,
        f: impl FnOnce(&Epoch<'b, T>) -> R,
    ) -> R {
        if self.in_epoch.replace(true) {
            self.fail(
                "epochs",
                "an epoch is already open on this window (they do not nest)",
            );
        }
        let guard = EpochGuard(&self.inner);
        let out = f(&Epoch {
            win: self,
            passive,
            only,
            _results: PhantomData,
        });
        std::mem::forget(guard);
        self.in_epoch.set(false);
        out
    }

    fn engine_call(
        &self,
        what: &str,
        f: impl FnOnce(&mut kestrel_pml::Engine) -> Result<(), kestrel_pml::PmlError>,
    ) {
        let r = f(&mut self.inner.engine.borrow_mut());
        if let Err(e) = r {
            self.fail(what, e);
        }
    }

    /// An active-target epoch between two `MPI_Win_fence`s (collective): every operation
    /// of every rank in `f` is complete everywhere when it returns.
    pub fn fence<'b, R>(&'b self, f: impl FnOnce(&Epoch<'b, T>) -> R) -> R {
        self.engine_call("fence", |e| e.win_fence(self.id));
        let out = self.open(false, None, f);
        self.engine_call("fence", |e| e.win_fence(self.id));
        out
    }

    /// A run of active-target epochs that share their fences (MPI's usual fence loop): one
    /// `MPI_Win_fence` opens the run, and each [`Fences::epoch`] ends with the one fence that
    /// closes it and opens the next (collective: every rank runs as many epochs).
    pub fn fences<'s, R>(&'s self, f: impl FnOnce(&Fences<'s, T>) -> R) -> R {
        self.engine_call("fence", |e| e.win_fence(self.id));
        f(&Fences { win: self })
    }

    /// A passive-target epoch on `rank` (`MPI_Win_lock` .. `MPI_Win_unlock`): operations in
    /// `f` go to `rank` only and are complete there when it returns.
    pub fn lock<'b, R>(
        &'b self,
        rank: Rank,
        kind: LockType,
        f: impl FnOnce(&Epoch<'b, T>) -> R,
    ) -> R {
        let t = self.target(rank);
        let exclusive = kind == LockType::Exclusive;
        self.engine_call("lock", |e| e.win_lock(self.id, t, exclusive, false));
        let out = self.open(true, Some(rank), f);
        self.engine_call("unlock", |e| e.win_unlock(self.id, t));
        out
    }

    /// A passive-target epoch on every rank with shared locks (`MPI_Win_lock_all` ..
    /// `MPI_Win_unlock_all`).
    pub fn lock_all<'b, R>(&'b self, f: impl FnOnce(&Epoch<'b, T>) -> R) -> R {
        self.engine_call("lock_all", |e| e.win_lock_all(self.id, false));
        let out = self.open(true, None, f);
        self.engine_call("unlock_all", |e| e.win_unlock_all(self.id));
        out
    }

    /// A general active-target access epoch to `ranks` (`MPI_Win_start` ..
    /// `MPI_Win_complete`): each of them must [`Window::expose`] this rank.
    pub fn access<'b, R>(&'b self, ranks: &[Rank], f: impl FnOnce(&Epoch<'b, T>) -> R) -> R {
        let group: Vec<u32> = ranks.iter().map(|&r| self.target(r)).collect();
        self.engine_call("access (start)", |e| e.win_start(self.id, &group));
        let out = self.open(false, None, f);
        self.engine_call("access (complete)", |e| e.win_complete(self.id));
        out
    }

    /// Exposes this rank's memory to `ranks`' access epochs (`MPI_Win_post`); the returned
    /// exposure ends with [`Exposure::wait`] (or when dropped), once all of them completed.
    pub fn expose(&self, ranks: &[Rank]) -> Exposure<'_, T> {
        let group: Vec<u32> = ranks.iter().map(|&r| self.target(r)).collect();
        self.engine_call("expose (post)", |e| e.win_post(self.id, &group));
        Exposure { win: self }
    }

    /// A flush of a window whose members are all on this node: a memory fence, no engine
    /// call (false: not such a window).
    fn direct_flush(&self, target: Option<u32>) -> bool {
        self.direct
            .as_ref()
            .is_some_and(|v| v.flush(target.map(|t| t as i32)))
    }

    /// `MPI_Win_flush` (`target` `None`: `_all`; `local`: the `_local` forms): the direct
    /// fence when every member is on this node, else the engine's.
    fn flush_target(&self, target: Option<u32>, local: bool) {
        if self.direct_flush(target) {
            return;
        }
        let id = self.id;
        match (target, local) {
            (Some(t), false) => self.engine_call("flush", |e| e.win_flush(id, t)),
            (Some(t), true) => self.engine_call("flush_local", |e| e.win_flush_local(id, t)),
            (None, false) => self.engine_call("flush_all", |e| e.win_flush_all(id)),
            (None, true) => self.engine_call("flush_local_all", |e| e.win_flush_local_all(id)),
        }
    }

    fn target(&self, rank: Rank) -> u32 {
        if rank < 0 || rank >= self.size {
            self.fail(
                "target",
                format!("rank {rank} is not in the window's {} ranks", self.size),
            );
        }
        rank as u32
    }
}

impl<T: Equivalence> Drop for Window<T> {
    fn drop(&mut self) {
        // The view would keep the node mapping alive past the free.
        self.direct = None;
        if let Ok(mut e) = self.inner.engine.try_borrow_mut() {
            if let Err(err) = e.win_free(self.id) {
                drop(e);
                self.fail("free", err);
            }
        }
    }
}

/// The fence epochs of [`Window::fences`].
pub struct Fences<'s, T: Equivalence> {
    win: &'s Window<T>,
}

impl<T: Equivalence> Fences<'_, T> {
    /// One epoch: `f`'s operations, then the `MPI_Win_fence` that completes them everywhere
    /// (results borrowed by `f` are free when this returns).
    pub fn epoch<'e, R>(&'e self, f: impl FnOnce(&Epoch<'e, T>) -> R) -> R {
        let out = self.win.open(false, None, f);
        self.win.engine_call("fence", |e| e.win_fence(self.win.id));
        out
    }
}

/// An exposure epoch of [`Window::expose`].
pub struct Exposure<'w, T: Equivalence> {
    win: &'w Window<T>,
}

impl<T: Equivalence> Exposure<'_, T> {
    /// `MPI_Win_wait`: returns once every rank exposed to completed its access epoch.
    pub fn wait(self) {}

    /// `MPI_Win_test`: whether every rank exposed to has completed (the exposure ends if so;
    /// otherwise it is handed back).
    pub fn test(self) -> Result<(), Self> {
        let mut done = false;
        let w = self.win;
        w.engine_call("expose (test)", |e| {
            done = e.win_test(w.id)?;
            Ok(())
        });
        if done {
            std::mem::forget(self);
            Ok(())
        } else {
            Err(self)
        }
    }
}

impl<T: Equivalence> Drop for Exposure<'_, T> {
    fn drop(&mut self) {
        let w = self.win;
        w.engine_call("expose (wait)", |e| e.win_wait(w.id));
    }
}

/// The operations of one epoch. `'b` is how long result buffers stay borrowed: until the
/// epoch's closing synchronization, which completes every fetch.
pub struct Epoch<'b, T: Equivalence> {
    win: &'b Window<T>,
    passive: bool,
    /// A lock epoch's one target.
    only: Option<Rank>,
    /// Invariant in `'b`: a covariant epoch could be shortened to the closure's body, and a
    /// get's buffer read there before its bytes arrived.
    _results: PhantomData<fn(&'b ()) -> &'b ()>,
}

impl<'b, T: Equivalence> Epoch<'b, T> {
    /// Target rank and the byte range of `count` elements at element `disp` there.
    fn range(&self, rank: Rank, disp: usize, count: usize) -> (u32, u64, usize) {
        let w = self.win;
        if let Some(only) = self.only {
            if rank != only {
                w.fail(
                    "operation",
                    format!("this lock epoch is on rank {only}, not {rank}"),
                );
            }
        }
        let t = w.target(rank);
        let unit = u64::from(w.units[t as usize]);
        let bytes = count * std::mem::size_of::<T>();
        let offset = (disp as u64).saturating_mul(unit);
        (t, offset, bytes)
    }

    fn segs(offset: u64, bytes: usize) -> Vec<Segment> {
        let mut out = Vec::new();
        let (mut at, mut left) = (offset, bytes);
        while left > 0 {
            let n = left.min(1 << 30);
            out.push(Segment {
                offset: at,
                len: n as u32,
            });
            at += n as u64;
            left -= n;
        }
        out
    }

    /// The window's direct view when `t` shares its memory on this node, with `disp` as
    /// the view takes it; `None`: the engine's path.
    fn direct(&self, disp: usize) -> Option<(&DirectView, isize)> {
        Some((self.win.direct.as_ref()?, isize::try_from(disp).ok()?))
    }

    /// `MPI_Put`: writes `data` at element `disp` of `rank`'s memory.
    pub fn put(&self, rank: Rank, disp: usize, data: &[T]) {
        let (t, offset, _) = self.range(rank, disp, data.len());
        let bytes = crate::datatype::slice_bytes(data);
        if let Some((v, d)) = self.direct(disp) {
            if v.put(t as i32, d, bytes) {
                return;
            }
        }
        let w = self.win;
        let r =
            w.inner
                .engine
                .borrow_mut()
                .rma_put(w.id, t, &Self::segs(offset, bytes.len()), bytes);
        r.unwrap_or_else(|err| w.fail("put", err));
    }

    /// `MPI_Get`: reads element `disp` onwards of `rank`'s memory into `into`, which holds
    /// the bytes once the epoch has closed (for a value to decide on inside a passive epoch,
    /// see [`Epoch::get_now`]).
    pub fn get(&self, rank: Rank, disp: usize, into: &'b mut [T]) {
        self.get_into(rank, disp, into);
    }

    /// Starts a get into `into`, which the caller keeps alive and untouched until the
    /// operation completes (the epoch's end, or a local flush of `rank`).
    fn get_into(&self, rank: Rank, disp: usize, into: &mut [T]) {
        let (t, offset, n) = self.range(rank, disp, into.len());
        if let Some((v, d)) = self.direct(disp) {
            if v.get(t as i32, d, crate::datatype::slice_bytes_mut(into)) {
                return;
            }
        }
        let w = self.win;
        let mut e = w.inner.engine.borrow_mut();
        let ptr = into.as_mut_ptr().cast::<u8>();
        let r = e.rma_get(w.id, t, &Self::segs(offset, n), sink(ptr, n));
        drop(e);
        r.map(|_| ()).unwrap_or_else(|err| w.fail("get", err));
    }

    /// [`Epoch::get`] completed before it returns (passive epochs only: it ends with
    /// `MPI_Win_flush_local` of `rank`).
    pub fn get_now(&self, rank: Rank, disp: usize, into: &mut [T]) {
        self.passive_only("get_now");
        self.get_into(rank, disp, into);
        self.complete_locally(rank);
    }

    /// A part of a passive epoch whose operations go to `rank` and end with
    /// `MPI_Win_flush(rank)`: the results `f` borrowed are complete and free when this
    /// returns, so a loop can reuse one result buffer (the OSU flush loops).
    pub fn flushed<'f, R>(&'f self, rank: Rank, f: impl FnOnce(&Epoch<'f, T>) -> R) -> R {
        self.passive_only("flushed");
        self.sub_epoch(Some(rank), f, |w| {
            w.flush_target(Some(w.target(rank)), false)
        })
    }

    /// [`Epoch::flushed`] ending with `MPI_Win_flush_local(rank)`: results complete here,
    /// puts perhaps not yet at the target.
    pub fn flushed_local<'f, R>(&'f self, rank: Rank, f: impl FnOnce(&Epoch<'f, T>) -> R) -> R {
        self.passive_only("flushed_local");
        self.sub_epoch(Some(rank), f, |w| {
            w.flush_target(Some(w.target(rank)), true)
        })
    }

    /// [`Epoch::flushed`] over every rank the epoch reaches, ending with `MPI_Win_flush_all`.
    pub fn flushed_all<'f, R>(&'f self, f: impl FnOnce(&Epoch<'f, T>) -> R) -> R {
        self.passive_only("flushed_all");
        self.sub_epoch(self.only, f, |w| w.flush_target(None, false))
    }

    fn sub_epoch<'f, R>(
        &'f self,
        only: Option<Rank>,
        f: impl FnOnce(&Epoch<'f, T>) -> R,
        close: impl FnOnce(&Window<T>),
    ) -> R {
        if let (Some(outer), Some(inner)) = (self.only, only) {
            if outer != inner {
                self.win.fail(
                    "flushed",
                    format!("this lock epoch is on rank {outer}, not {inner}"),
                );
            }
        }
        let guard = EpochGuard(&self.win.inner);
        let out = f(&Epoch {
            win: self.win,
            passive: true,
            only,
            _results: PhantomData,
        });
        close(self.win);
        std::mem::forget(guard);
        out
    }

    /// `MPI_Win_flush_local` of `rank`, for the `_now` fetches.
    fn complete_locally(&self, rank: Rank) {
        self.win.flush_target(Some(self.win.target(rank)), true);
    }

    /// Flushes: only in passive epochs ([`Window::lock`], [`Window::lock_all`]).
    fn passive_only(&self, what: &str) {
        if !self.passive {
            self.win.fail(
                what,
                "flushes belong to passive-target epochs (lock, lock_all)",
            );
        }
    }

    /// `MPI_Win_flush`: every operation to `rank` so far is complete there.
    pub fn flush(&self, rank: Rank) {
        self.passive_only("flush");
        self.win.flush_target(Some(self.win.target(rank)), false);
    }

    /// `MPI_Win_flush_all`.
    pub fn flush_all(&self) {
        self.passive_only("flush_all");
        self.win.flush_target(None, false);
    }

    /// `MPI_Win_flush_local`: operations to `rank` are complete here (their buffers free).
    pub fn flush_local(&self, rank: Rank) {
        self.passive_only("flush_local");
        self.win.flush_target(Some(self.win.target(rank)), true);
    }

    /// `MPI_Win_flush_local_all`.
    pub fn flush_local_all(&self) {
        self.passive_only("flush_local_all");
        self.win.flush_target(None, true);
    }
}

impl<'b, T: Reducible> Epoch<'b, T> {
    /// Starts an accumulate (`out` `None`) or a fetching one into `out`, which the caller
    /// keeps alive and untouched until it completes (as [`Epoch::get_into`]). `count`
    /// elements at `disp`; `data` holds them, or nothing for `MPI_NO_OP`.
    #[allow(clippy::too_many_arguments)]
    fn acc_into(
        &self,
        what: &str,
        rank: Rank,
        disp: usize,
        count: usize,
        data: &[T],
        op: AccOp,
        out: Option<&mut [T]>,
    ) {
        let (t, offset, n) = self.range(rank, disp, count);
        let bytes = crate::datatype::slice_bytes(data);
        let mut out = out;
        if let Some((v, d)) = self.direct(disp) {
            let done = match out.as_deref_mut().map(crate::datatype::slice_bytes_mut) {
                // One fetched element: `fetch_and_op`'s kernels (it falls back to the rest).
                Some(old) if count == 1 => v.fetch_and_op(t as i32, d, op, T::DTYPE, bytes, old),
                old => v.accumulate(t as i32, d, n, op, T::DTYPE, bytes, old),
            };
            if done {
                return;
            }
        }
        let w = self.win;
        let mut e = w.inner.engine.borrow_mut();
        let r = match out {
            None => e.rma_accumulate(w.id, t, &Self::segs(offset, n), bytes, op, T::DTYPE),
            Some(out) => e
                .rma_get_accumulate(
                    w.id,
                    t,
                    &Self::segs(offset, n),
                    bytes,
                    op,
                    T::DTYPE,
                    sink(out.as_mut_ptr().cast::<u8>(), n),
                )
                .map(|_| ()),
        };
        drop(e);
        r.unwrap_or_else(|err| w.fail(what, err));
    }

    /// Starts a compare-and-swap whose old value goes to `out` (kept as in
    /// [`Epoch::acc_into`]).
    fn cas_into(&self, rank: Rank, disp: usize, compare: &T, swap: &T, out: &mut T) {
        let (t, offset, _) = self.range(rank, disp, 1);
        let c = crate::datatype::slice_bytes(std::slice::from_ref(compare));
        let s = crate::datatype::slice_bytes(std::slice::from_ref(swap));
        let n = std::mem::size_of::<T>();
        if let Some((v, d)) = self.direct(disp) {
            let old = crate::datatype::slice_bytes_mut(std::slice::from_mut(out));
            if v.compare_and_swap(t as i32, d, c, s, old) {
                return;
            }
        }
        let w = self.win;
        let ptr = (out as *mut T).cast::<u8>();
        let r = w
            .inner
            .engine
            .borrow_mut()
            .rma_compare_and_swap(w.id, t, offset, c, s, sink(ptr, n))
            .map(|_| ());
        r.unwrap_or_else(|err| w.fail("compare_and_swap", err));
    }

    /// `MPI_Accumulate`: combines `data` into element `disp` onwards of `rank`'s memory
    /// with `op`, element-wise atomically with respect to other accumulates.
    pub fn accumulate(&self, rank: Rank, disp: usize, data: &[T], op: SystemOperation) {
        let op = AccOp::Reduce(op.op());
        self.acc_into("accumulate", rank, disp, data.len(), data, op, None);
    }

    /// `MPI_Accumulate` with `MPI_REPLACE`: an atomic put.
    pub fn replace(&self, rank: Rank, disp: usize, data: &[T]) {
        self.acc_into(
            "replace",
            rank,
            disp,
            data.len(),
            data,
            AccOp::Replace,
            None,
        );
    }

    /// `MPI_Get_accumulate`: `result` gets the elements before `data` was combined in.
    pub fn get_accumulate(
        &self,
        rank: Rank,
        disp: usize,
        data: &[T],
        result: &'b mut [T],
        op: SystemOperation,
    ) {
        if data.len() != result.len() {
            self.win.fail(
                "get_accumulate",
                format!(
                    "{} elements of data for a result of {}",
                    data.len(),
                    result.len()
                ),
            );
        }
        let (n, op) = (data.len(), AccOp::Reduce(op.op()));
        self.acc_into("get_accumulate", rank, disp, n, data, op, Some(result));
    }

    /// `MPI_Fetch_and_op`: `result` gets the element before `value` was combined in.
    pub fn fetch_and_op(
        &self,
        rank: Rank,
        disp: usize,
        value: &T,
        result: &'b mut T,
        op: SystemOperation,
    ) {
        let data = std::slice::from_ref(value);
        let out = Some(std::slice::from_mut(result));
        self.acc_into(
            "fetch_and_op",
            rank,
            disp,
            1,
            data,
            AccOp::Reduce(op.op()),
            out,
        );
    }

    /// `MPI_Fetch_and_op` with `MPI_NO_OP`: an atomic read of one element.
    pub fn fetch(&self, rank: Rank, disp: usize, result: &'b mut T) {
        let out = Some(std::slice::from_mut(result));
        self.acc_into("fetch", rank, disp, 1, &[], AccOp::NoOp, out);
    }

    /// `MPI_Compare_and_swap`: element `disp` of `rank` becomes `swap` if it equals
    /// `compare`; `result` gets its old value.
    pub fn compare_and_swap(
        &self,
        rank: Rank,
        disp: usize,
        compare: &T,
        swap: &T,
        result: &'b mut T,
    ) {
        self.cas_into(rank, disp, compare, swap, result);
    }

    /// [`Epoch::fetch_and_op`] completed before it returns (passive epochs only): the element
    /// before `value` was combined in.
    pub fn fetch_and_op_now(&self, rank: Rank, disp: usize, value: T, op: SystemOperation) -> T {
        self.passive_only("fetch_and_op_now");
        let mut out = value;
        let (data, op) = ([value], AccOp::Reduce(op.op()));
        self.acc_into(
            "fetch_and_op",
            rank,
            disp,
            1,
            &data,
            op,
            Some(std::slice::from_mut(&mut out)),
        );
        self.complete_locally(rank);
        out
    }

    /// [`Epoch::get_accumulate`] completed before it returns (passive epochs only).
    pub fn get_accumulate_now(
        &self,
        rank: Rank,
        disp: usize,
        data: &[T],
        result: &mut [T],
        op: SystemOperation,
    ) {
        self.passive_only("get_accumulate_now");
        if data.len() != result.len() {
            self.win.fail(
                "get_accumulate_now",
                format!(
                    "{} elements of data for a result of {}",
                    data.len(),
                    result.len()
                ),
            );
        }
        let (n, op) = (data.len(), AccOp::Reduce(op.op()));
        self.acc_into("get_accumulate", rank, disp, n, data, op, Some(result));
        self.complete_locally(rank);
    }

    /// [`Epoch::fetch`] completed before it returns (passive epochs only).
    pub fn fetch_now(&self, rank: Rank, disp: usize) -> T {
        self.passive_only("fetch_now");
        let mut out = zeroed::<T>();
        self.acc_into(
            "fetch",
            rank,
            disp,
            1,
            &[],
            AccOp::NoOp,
            Some(std::slice::from_mut(&mut out)),
        );
        self.complete_locally(rank);
        out
    }

    /// [`Epoch::compare_and_swap`] completed before it returns (passive epochs only): the
    /// element's old value.
    pub fn compare_and_swap_now(&self, rank: Rank, disp: usize, compare: T, swap: T) -> T {
        self.passive_only("compare_and_swap_now");
        let mut out = compare;
        self.cas_into(rank, disp, &compare, &swap, &mut out);
        self.complete_locally(rank);
        out
    }
}

/// A value of all zero bytes (valid for every `Equivalence` type).
fn zeroed<T: Equivalence>() -> T {
    let mut v = std::mem::MaybeUninit::<T>::uninit();
    // SAFETY: `Equivalence` types accept every bit pattern, all-zero included.
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr(), 0, 1);
        v.assume_init()
    }
}

/// Where a fetch's bytes go: `n` bytes at `ptr`, a result buffer borrowed until the epoch
/// closes.
fn sink(ptr: *mut u8, n: usize) -> kestrel_pml::rma::Sink {
    Box::new(move |bytes: &[u8]| {
        let k = bytes.len().min(n);
        // SAFETY: `ptr..ptr + n` is a result buffer the epoch borrows (`'b`) until its closing
        // synchronization, which runs this sink before it returns; `bytes` is the engine's
        // buffer, so the ranges do not overlap, and `Equivalence` admits any bytes.
        unsafe { std::ptr::copy_nonoverlapping(bytes.as_ptr(), ptr, k) };
    })
}
