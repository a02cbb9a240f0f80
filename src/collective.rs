//! Collective operations, shaped like rsmpi's: [`CommunicatorCollectives`] on every
//! communicator, [`Root`] on the process that is a collective's root, reduction operations as
//! [`SystemOperation`] or [`UserOperation`].
//!
//! ```no_run
//! use kestrel::collective::{CommunicatorCollectives, Root, SystemOperation};
//! use kestrel::Communicator;
//! # let universe = kestrel::initialize().unwrap();
//! let world = universe.world();
//! let mut sum = [0.0f64; 3];
//! world.all_reduce_into(&[1.0, 2.0, 3.0], &mut sum, SystemOperation::sum());
//! let mut value = if world.rank() == 0 { 42u64 } else { 0 };
//! world.process_at_rank(0).broadcast_into(std::slice::from_mut(&mut value));
//! ```
//!
//! Collectives on communicators whose ranks share one node run through a shared-memory
//! segment (barrier, broadcast, reduce, allreduce); the others through point-to-point
//! algorithms chosen by size (see `kestrel-info --component coll`).

use std::rc::Rc;

use kestrel_pml::op::{Dtype, Op, Reduction, UserOp};

use crate::datatype::{zeroed_vec, BufferMut};
use crate::{Buffer, Communicator, Equivalence, Process};

/// Element types reductions understand.
pub trait Reducible: Equivalence {
    /// The reduction element type.
    const DTYPE: Dtype;
}

macro_rules! reducible {
    ($($t:ty => $d:ident),*) => { $(impl Reducible for $t { const DTYPE: Dtype = Dtype::$d; })* };
}
reducible!(i8 => I8, u8 => U8, i16 => I16, u16 => U16, i32 => I32, u32 => U32, i64 => I64, u64 => U64, f32 => F32, f64 => F64);
#[cfg(target_pointer_width = "64")]
reducible!(usize => U64, isize => I64);

macro_rules! pair {
    ($(#[$doc:meta])* $name:ident, $v:ty, $pad:ty, $d:ident) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy, PartialEq, Default)]
        // The private field is the C struct's padding (or nothing), not a non-exhaustive marker.
        #[allow(clippy::manual_non_exhaustive)]
        pub struct $name {
            /// The value compared.
            pub value: $v,
            /// The index carried along (typically a rank).
            pub index: i32,
            pad: $pad,
        }
        impl $name {
            /// A value with its index.
            pub fn new(value: $v, index: i32) -> Self {
                $name { value, index, pad: Default::default() }
            }
        }
        // SAFETY: repr(C) with an explicit padding field: no implicit padding, and every bit
        // pattern of the integer and float fields is a valid value.
        unsafe impl Equivalence for $name {}
        impl Reducible for $name {
            const DTYPE: Dtype = Dtype::$d;
        }
    };
}
pair!(
    /// `MPI_FLOAT_INT` for `MINLOC`/`MAXLOC`.
    FloatInt, f32, (), FloatInt);
pair!(
    /// `MPI_DOUBLE_INT` for `MINLOC`/`MAXLOC`.
    DoubleInt, f64, i32, DoubleInt);
pair!(
    /// `MPI_LONG_INT` for `MINLOC`/`MAXLOC`.
    LongInt, i64, i32, LongInt);
pair!(
    /// `MPI_2INT` for `MINLOC`/`MAXLOC`.
    TwoInt, i32, (), TwoInt);

/// A reduction usable with element type `T`.
pub trait Operation<T> {
    #[doc(hidden)]
    fn reduction(&self) -> (Reduction, Dtype);
}

/// MPI's predefined operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SystemOperation(Op);

impl SystemOperation {
    /// `MPI_SUM`.
    pub fn sum() -> Self {
        SystemOperation(Op::Sum)
    }
    /// `MPI_PROD`.
    pub fn product() -> Self {
        SystemOperation(Op::Prod)
    }
    /// `MPI_MIN`.
    pub fn min() -> Self {
        SystemOperation(Op::Min)
    }
    /// `MPI_MAX`.
    pub fn max() -> Self {
        SystemOperation(Op::Max)
    }
    /// `MPI_LAND`.
    pub fn logical_and() -> Self {
        SystemOperation(Op::Land)
    }
    /// `MPI_LOR`.
    pub fn logical_or() -> Self {
        SystemOperation(Op::Lor)
    }
    /// `MPI_LXOR`.
    pub fn logical_xor() -> Self {
        SystemOperation(Op::Lxor)
    }
    /// `MPI_BAND`.
    pub fn bitwise_and() -> Self {
        SystemOperation(Op::Band)
    }
    /// `MPI_BOR`.
    pub fn bitwise_or() -> Self {
        SystemOperation(Op::Bor)
    }
    /// `MPI_BXOR`.
    pub fn bitwise_xor() -> Self {
        SystemOperation(Op::Bxor)
    }
    /// `MPI_MINLOC` (pair types such as [`DoubleInt`]).
    pub fn min_loc() -> Self {
        SystemOperation(Op::Minloc)
    }
    /// `MPI_MAXLOC` (pair types).
    pub fn max_loc() -> Self {
        SystemOperation(Op::Maxloc)
    }
    /// The underlying operation.
    pub fn op(&self) -> Op {
        self.0
    }
}

impl<T: Reducible> Operation<T> for SystemOperation {
    fn reduction(&self) -> (Reduction, Dtype) {
        (Reduction::Predefined(self.0), T::DTYPE)
    }
}

/// The function of a [`UserOperation`]: `f(input, inout)`.
type UserFn<T> = dyn Fn(&[T], &mut [T]);

/// A user-defined reduction: `f(input, inout)` sets `inout[i] = input[i] op inout[i]`, where
/// `input` comes from the lower rank.
pub struct UserOperation<T> {
    commutative: bool,
    f: Rc<UserFn<T>>,
}

impl<T> std::fmt::Debug for UserOperation<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "UserOperation(commutative: {})", self.commutative)
    }
}

impl<T: Equivalence> UserOperation<T> {
    /// A commutative operation (Kestrel may combine operands in any order).
    pub fn commutative(f: impl Fn(&[T], &mut [T]) + 'static) -> Self {
        UserOperation {
            commutative: true,
            f: Rc::new(f),
        }
    }
    /// A non-commutative operation (operands are combined in rank order).
    pub fn non_commutative(f: impl Fn(&[T], &mut [T]) + 'static) -> Self {
        UserOperation {
            commutative: false,
            f: Rc::new(f),
        }
    }
}

impl<T: Equivalence> Operation<T> for UserOperation<T> {
    fn reduction(&self) -> (Reduction, Dtype) {
        let f = self.f.clone();
        let size = std::mem::size_of::<T>();
        let user = Reduction::User(UserOp {
            commutative: self.commutative,
            // Reduction buffers may be unaligned bytes: copy into aligned vectors around the
            // user's typed function.
            f: Rc::new(move |input: &[u8], inout: &mut [u8]| {
                let n = input.len() / size;
                let mut a: Vec<T> = zeroed_vec(n);
                let mut b: Vec<T> = zeroed_vec(n);
                a.as_bytes_mut().copy_from_slice(&input[..n * size]);
                b.as_bytes_mut().copy_from_slice(&inout[..n * size]);
                f(&a, &mut b);
                inout[..n * size].copy_from_slice(b.as_bytes());
            }),
        });
        (user, Dtype::Opaque(size as u32))
    }
}

fn fail<C: Communicator + ?Sized>(c: &C, e: kestrel_pml::PmlError) -> ! {
    c.handle().inner.fatal(&e.to_string())
}

/// Collectives every rank of a communicator calls.
pub trait CommunicatorCollectives: Communicator {
    /// `MPI_Allreduce`.
    fn all_reduce_into<T: Equivalence, O: Operation<T>>(&self, send: &[T], recv: &mut [T], op: O) {
        let c = self.handle();
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_allreduce(
            c.ctx,
            send.as_bytes(),
            recv.as_bytes_mut(),
            dt,
            &red,
        );
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Allreduce` with `MPI_IN_PLACE`.
    fn all_reduce_in_place<T: Equivalence, O: Operation<T>>(&self, buf: &mut [T], op: O) {
        let send = buf.to_vec();
        self.all_reduce_into(&send, buf, op)
    }

    /// `MPI_Allgather`: `recv` holds `size` blocks of `send.len()` elements.
    fn all_gather_into<T: Equivalence>(&self, send: &[T], recv: &mut [T]) {
        let c = self.handle();
        let r =
            c.inner
                .engine
                .borrow_mut()
                .coll_allgather(c.ctx, send.as_bytes(), recv.as_bytes_mut());
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Allgatherv`: rank r contributes `counts[r]` elements, stored contiguously in rank
    /// order.
    fn all_gather_varcount_into<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) {
        let c = self.handle();
        let (b, d) = bytes_and_displs::<T>(counts);
        let r = c.inner.engine.borrow_mut().coll_allgatherv(
            c.ctx,
            send.as_bytes(),
            recv.as_bytes_mut(),
            &b,
            &d,
        );
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Alltoall`: block i of `send` goes to rank i.
    fn all_to_all_into<T: Equivalence>(&self, send: &[T], recv: &mut [T]) {
        let c = self.handle();
        let r =
            c.inner
                .engine
                .borrow_mut()
                .coll_alltoall(c.ctx, send.as_bytes(), recv.as_bytes_mut());
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Alltoallv` with element counts and displacements.
    fn all_to_all_varcount_into<T: Equivalence>(
        &self,
        send: &[T],
        scounts: &[usize],
        sdispls: &[usize],
        recv: &mut [T],
        rcounts: &[usize],
        rdispls: &[usize],
    ) {
        let c = self.handle();
        let s = std::mem::size_of::<T>();
        let m = |v: &[usize]| v.iter().map(|x| x * s).collect::<Vec<_>>();
        let r = c.inner.engine.borrow_mut().coll_alltoallv(
            c.ctx,
            send.as_bytes(),
            &m(scounts),
            &m(sdispls),
            recv.as_bytes_mut(),
            &m(rcounts),
            &m(rdispls),
        );
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Reduce_scatter_block`: rank r gets block r of the reduction.
    fn reduce_scatter_block_into<T: Equivalence, O: Operation<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        let c = self.handle();
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_reduce_scatter_block(
            c.ctx,
            send.as_bytes(),
            recv.as_bytes_mut(),
            dt,
            &red,
        );
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Reduce_scatter`: rank r gets `counts[r]` elements of the reduction.
    fn reduce_scatter_into<T: Equivalence, O: Operation<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
        op: O,
    ) {
        let c = self.handle();
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_reduce_scatter(
            c.ctx,
            send.as_bytes(),
            recv.as_bytes_mut(),
            counts,
            dt,
            &red,
        );
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Scan` (inclusive prefix reduction in rank order).
    fn scan_into<T: Equivalence, O: Operation<T>>(&self, send: &[T], recv: &mut [T], op: O) {
        let c = self.handle();
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_scan(
            c.ctx,
            send.as_bytes(),
            recv.as_bytes_mut(),
            dt,
            &red,
            false,
        );
        r.unwrap_or_else(|e| fail(self, e))
    }

    /// `MPI_Exscan` (exclusive prefix reduction; rank 0's `recv` is left as it was).
    fn exclusive_scan_into<T: Equivalence, O: Operation<T>>(
        &self,
        send: &[T],
        recv: &mut [T],
        op: O,
    ) {
        let c = self.handle();
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_scan(
            c.ctx,
            send.as_bytes(),
            recv.as_bytes_mut(),
            dt,
            &red,
            true,
        );
        r.unwrap_or_else(|e| fail(self, e))
    }
}

impl<C: Communicator + ?Sized> CommunicatorCollectives for C {}

fn bytes_and_displs<T>(counts: &[usize]) -> (Vec<usize>, Vec<usize>) {
    let s = std::mem::size_of::<T>();
    let bytes: Vec<usize> = counts.iter().map(|c| c * s).collect();
    let mut displs = Vec::with_capacity(counts.len());
    let mut at = 0;
    for b in &bytes {
        displs.push(at);
        at += b;
    }
    (bytes, displs)
}

/// Collectives with a root: called on the root's [`Process`] by every rank.
pub trait Root {
    /// `MPI_Bcast` from this process.
    fn broadcast_into<T: Equivalence>(&self, buf: &mut [T]);
    /// `MPI_Reduce` at the root (call on the root itself).
    fn reduce_into_root<T: Equivalence, O: Operation<T>>(&self, send: &[T], recv: &mut [T], op: O);
    /// `MPI_Reduce` from a non-root rank.
    fn reduce_into<T: Equivalence, O: Operation<T>>(&self, send: &[T], op: O);
    /// `MPI_Gather` at the root: `recv` holds `size` blocks.
    fn gather_into_root<T: Equivalence>(&self, send: &[T], recv: &mut [T]);
    /// `MPI_Gather` from a non-root rank (whose root calls [`Root::gather_into_root`]: the
    /// equal-block collective, which may take an algorithm of its own, so a `MPI_Gatherv`
    /// root needs [`Root::gather_varcount_into`] on the others).
    fn gather_into<T: Equivalence>(&self, send: &[T]);
    /// `MPI_Gatherv` from a non-root rank (the root calls [`Root::gather_varcount_into_root`]).
    fn gather_varcount_into<T: Equivalence>(&self, send: &[T]);
    /// `MPI_Gatherv` at the root with per-rank element counts, stored contiguously.
    fn gather_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    );
    /// `MPI_Scatter` at the root: block r of `send` goes to rank r.
    fn scatter_into_root<T: Equivalence>(&self, send: &[T], recv: &mut [T]);
    /// `MPI_Scatter` at a non-root rank (whose root calls [`Root::scatter_into_root`]; a
    /// `MPI_Scatterv` root needs [`Root::scatter_varcount_into`] on the others).
    fn scatter_into<T: Equivalence>(&self, recv: &mut [T]);
    /// `MPI_Scatterv` at a non-root rank (the root calls
    /// [`Root::scatter_varcount_into_root`]).
    fn scatter_varcount_into<T: Equivalence>(&self, recv: &mut [T]);
    /// `MPI_Scatterv` at the root with per-rank element counts, taken contiguously.
    fn scatter_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
    );
}

impl Root for Process<'_> {
    fn broadcast_into<T: Equivalence>(&self, buf: &mut [T]) {
        let c = self.comm;
        let r = c
            .inner
            .engine
            .borrow_mut()
            .coll_bcast(c.ctx, self.rank as u32, buf.as_bytes_mut());
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn reduce_into_root<T: Equivalence, O: Operation<T>>(&self, send: &[T], recv: &mut [T], op: O) {
        let c = self.comm;
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_reduce(
            c.ctx,
            self.rank as u32,
            send.as_bytes(),
            Some(recv.as_bytes_mut()),
            dt,
            &red,
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn reduce_into<T: Equivalence, O: Operation<T>>(&self, send: &[T], op: O) {
        let c = self.comm;
        let (red, dt) = op.reduction();
        let r = c.inner.engine.borrow_mut().coll_reduce(
            c.ctx,
            self.rank as u32,
            send.as_bytes(),
            None,
            dt,
            &red,
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn gather_into_root<T: Equivalence>(&self, send: &[T], recv: &mut [T]) {
        let c = self.comm;
        let r = c.inner.engine.borrow_mut().coll_gather(
            c.ctx,
            self.rank as u32,
            send.as_bytes(),
            Some(recv.as_bytes_mut()),
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn gather_into<T: Equivalence>(&self, send: &[T]) {
        let c = self.comm;
        let r =
            c.inner
                .engine
                .borrow_mut()
                .coll_gather(c.ctx, self.rank as u32, send.as_bytes(), None);
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn gather_varcount_into<T: Equivalence>(&self, send: &[T]) {
        let c = self.comm;
        let mut e = c.inner.engine.borrow_mut();
        let r = e.coll_gatherv(c.ctx, self.rank as u32, send.as_bytes(), None, &[], &[]);
        drop(e);
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn gather_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        recv: &mut [T],
        counts: &[usize],
    ) {
        let c = self.comm;
        let (b, d) = bytes_and_displs::<T>(counts);
        let r = c.inner.engine.borrow_mut().coll_gatherv(
            c.ctx,
            self.rank as u32,
            send.as_bytes(),
            Some(recv.as_bytes_mut()),
            &b,
            &d,
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn scatter_into_root<T: Equivalence>(&self, send: &[T], recv: &mut [T]) {
        let c = self.comm;
        let r = c.inner.engine.borrow_mut().coll_scatter(
            c.ctx,
            self.rank as u32,
            Some(send.as_bytes()),
            recv.as_bytes_mut(),
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn scatter_into<T: Equivalence>(&self, recv: &mut [T]) {
        let c = self.comm;
        let r = c.inner.engine.borrow_mut().coll_scatter(
            c.ctx,
            self.rank as u32,
            None,
            recv.as_bytes_mut(),
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn scatter_varcount_into<T: Equivalence>(&self, recv: &mut [T]) {
        let c = self.comm;
        let mut e = c.inner.engine.borrow_mut();
        let r = e.coll_scatterv(c.ctx, self.rank as u32, None, &[], &[], recv.as_bytes_mut());
        drop(e);
        r.unwrap_or_else(|e| fail(c, e))
    }
    fn scatter_varcount_into_root<T: Equivalence>(
        &self,
        send: &[T],
        counts: &[usize],
        recv: &mut [T],
    ) {
        let c = self.comm;
        let (b, d) = bytes_and_displs::<T>(counts);
        let r = c.inner.engine.borrow_mut().coll_scatterv(
            c.ctx,
            self.rank as u32,
            Some(send.as_bytes()),
            &b,
            &d,
            recv.as_bytes_mut(),
        );
        r.unwrap_or_else(|e| fail(c, e))
    }
}
