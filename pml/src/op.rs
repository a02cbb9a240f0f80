//! Reduction operations (`MPI_Op`) over raw byte buffers.
//!
//! This module owns the element types reductions understand ([`Dtype`]), the predefined
//! operations ([`Op`]) and which of them MPI defines for which type ([`Op::applies_to`]),
//! user-defined operations ([`UserOp`]), and the kernels that combine two buffers
//! ([`reduce`], [`Reduction::apply`]). The collective algorithms (reduce, allreduce,
//! reduce_scatter, scan, exscan) and the C ABI call into it; it knows nothing about
//! communicators or transports.
//!
//! Buffers hold `count` elements in native endianness and need not be aligned (they come
//! from `Vec<u8>` and shared memory), so elements are read and written with
//! `from_ne_bytes`/`to_ne_bytes` over `chunks_exact`. Dispatch on (op, type) happens once
//! per call; each (op, type) pair has its own monomorphized loop without per-element
//! branching on the op or type, which LLVM vectorizes. Bitwise ops work byte by byte,
//! since the result does not depend on the element width.
//!
//! The convention throughout is `inout[i] = input[i] OP inout[i]`, where `input` is the
//! operand from the lower rank. [`reduce`] never allocates (only its error path builds a
//! message string).

use std::fmt;
use std::rc::Rc;

mod wide;

/// Element types reductions understand.
///
/// The pair types are MPI's value/index structs for `MPI_MINLOC`/`MPI_MAXLOC`, laid out as
/// the C structs: the value at offset 0, then a C `int` (i32) index, with C padding.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dtype {
    /// `int8_t`.
    I8,
    /// `uint8_t`.
    U8,
    /// `int16_t`.
    I16,
    /// `uint16_t`.
    U16,
    /// `int32_t`.
    I32,
    /// `uint32_t`.
    U32,
    /// `int64_t`.
    I64,
    /// `uint64_t`.
    U64,
    /// `float`.
    F32,
    /// `double`.
    F64,
    /// `MPI_FLOAT_INT`: `{ float, int }`, 8 bytes, index at offset 4.
    FloatInt,
    /// `MPI_DOUBLE_INT`: `{ double, int }`, 16 bytes, index at offset 8, 4 bytes of padding.
    DoubleInt,
    /// `MPI_LONG_INT`: `{ long (i64), int }`, 16 bytes, index at offset 8, 4 bytes of padding.
    LongInt,
    /// `MPI_2INT`: `{ int, int }`, 8 bytes, index at offset 4.
    TwoInt,
    /// `MPI_SHORT_INT`: `{ short, int }`, 8 bytes, 2 bytes of padding, index at offset 4.
    ShortInt,
    /// `float _Complex`: real and imaginary `float`, 8 bytes.
    C32,
    /// `double _Complex`: real and imaginary `double`, 16 bytes.
    C64,
    /// `long double` of x86-64: the x87 80-bit extended format in 16 bytes (6 of padding).
    F80,
    /// `long double _Complex`: real and imaginary [`Dtype::F80`], 32 bytes.
    C80,
    /// `MPI_LONG_DOUBLE_INT`: `{ long double, int }`, 32 bytes, index at offset 16.
    LongDoubleInt,
    /// `MPI_2REAL` (Fortran): `{ REAL value, REAL index }`, 8 bytes, index at offset 4.
    TwoF32,
    /// `MPI_2DOUBLE_PRECISION` (Fortran): `{ DOUBLE PRECISION value, DOUBLE PRECISION
    /// index }`, 16 bytes, index at offset 8.
    TwoF64,
    /// An element of a user type of this many bytes: only user-defined operations apply, and
    /// collectives split buffers only at multiples of this size.
    Opaque(u32),
}

impl Dtype {
    /// Every element type, in declaration order.
    pub const ALL: [Dtype; 22] = [
        Dtype::I8,
        Dtype::U8,
        Dtype::I16,
        Dtype::U16,
        Dtype::I32,
        Dtype::U32,
        Dtype::I64,
        Dtype::U64,
        Dtype::F32,
        Dtype::F64,
        Dtype::FloatInt,
        Dtype::DoubleInt,
        Dtype::LongInt,
        Dtype::TwoInt,
        Dtype::ShortInt,
        Dtype::C32,
        Dtype::C64,
        Dtype::F80,
        Dtype::C80,
        Dtype::LongDoubleInt,
        Dtype::TwoF32,
        Dtype::TwoF64,
    ];

    /// Bytes per element, including any padding of the pair types.
    pub const fn size(self) -> usize {
        match self {
            Dtype::I8 | Dtype::U8 => 1,
            Dtype::I16 | Dtype::U16 => 2,
            Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
            Dtype::I64 | Dtype::U64 | Dtype::F64 | Dtype::C32 => 8,
            Dtype::FloatInt | Dtype::TwoInt | Dtype::ShortInt | Dtype::TwoF32 => 8,
            Dtype::DoubleInt | Dtype::LongInt | Dtype::C64 | Dtype::F80 | Dtype::TwoF64 => 16,
            Dtype::C80 | Dtype::LongDoubleInt => 32,
            Dtype::Opaque(n) => n as usize,
        }
    }

    /// Short name: `"i8"`, `"u8"`, ..., `"f64"`, `"float_int"`, `"double_int"`, `"long_int"`,
    /// `"2int"`, `"short_int"`.
    pub const fn name(self) -> &'static str {
        match self {
            Dtype::I8 => "i8",
            Dtype::U8 => "u8",
            Dtype::I16 => "i16",
            Dtype::U16 => "u16",
            Dtype::I32 => "i32",
            Dtype::U32 => "u32",
            Dtype::I64 => "i64",
            Dtype::U64 => "u64",
            Dtype::F32 => "f32",
            Dtype::F64 => "f64",
            Dtype::FloatInt => "float_int",
            Dtype::DoubleInt => "double_int",
            Dtype::LongInt => "long_int",
            Dtype::TwoInt => "2int",
            Dtype::ShortInt => "short_int",
            Dtype::C32 => "float_complex",
            Dtype::C64 => "double_complex",
            Dtype::F80 => "long_double",
            Dtype::C80 => "long_double_complex",
            Dtype::LongDoubleInt => "long_double_int",
            Dtype::TwoF32 => "2real",
            Dtype::TwoF64 => "2double_precision",
            Dtype::Opaque(_) => "user type",
        }
    }

    /// Whether this is a value/index pair type (for `MPI_MINLOC`/`MPI_MAXLOC`).
    pub const fn is_pair(self) -> bool {
        matches!(
            self,
            Dtype::FloatInt
                | Dtype::DoubleInt
                | Dtype::LongInt
                | Dtype::TwoInt
                | Dtype::ShortInt
                | Dtype::LongDoubleInt
                | Dtype::TwoF32
                | Dtype::TwoF64
        )
    }

    /// Whether this is a floating-point scalar type (`F32`, `F64`, `F80`).
    pub const fn is_float(self) -> bool {
        matches!(self, Dtype::F32 | Dtype::F64 | Dtype::F80)
    }

    /// Whether this is a complex type (`C32`, `C64`, `C80`).
    pub const fn is_complex(self) -> bool {
        matches!(self, Dtype::C32 | Dtype::C64 | Dtype::C80)
    }

    /// Whether this is an integer scalar type (`I8` ... `U64`).
    pub const fn is_integer(self) -> bool {
        matches!(
            self,
            Dtype::I8
                | Dtype::U8
                | Dtype::I16
                | Dtype::U16
                | Dtype::I32
                | Dtype::U32
                | Dtype::I64
                | Dtype::U64
        )
    }

    /// Byte offset of the index within a pair type (an `int`, or a value of the pair's own
    /// type for the Fortran pairs `MPI_2REAL` and `MPI_2DOUBLE_PRECISION`); `None` for scalar
    /// types.
    pub const fn index_offset(self) -> Option<usize> {
        match self {
            Dtype::FloatInt | Dtype::TwoInt | Dtype::ShortInt | Dtype::TwoF32 => Some(4),
            Dtype::DoubleInt | Dtype::LongInt | Dtype::TwoF64 => Some(8),
            Dtype::LongDoubleInt => Some(16),
            _ => None,
        }
    }
}

impl fmt::Display for Dtype {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Predefined operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// `MPI_SUM`; integers wrap on overflow.
    Sum,
    /// `MPI_PROD`; integers wrap on overflow.
    Prod,
    /// `MPI_MIN`; for floats, C's `a < b ? a : b` (see [`reduce`] for NaN behaviour).
    Min,
    /// `MPI_MAX`; for floats, C's `a > b ? a : b` (see [`reduce`] for NaN behaviour).
    Max,
    /// `MPI_LAND`: logical and (nonzero is true; the result is 0 or 1).
    Land,
    /// `MPI_LOR`: logical or (nonzero is true; the result is 0 or 1).
    Lor,
    /// `MPI_LXOR`: logical exclusive or (nonzero is true; the result is 0 or 1).
    Lxor,
    /// `MPI_BAND`: bitwise and.
    Band,
    /// `MPI_BOR`: bitwise or.
    Bor,
    /// `MPI_BXOR`: bitwise exclusive or.
    Bxor,
    /// `MPI_MINLOC`: smaller value wins; on a tie, the smaller index.
    Minloc,
    /// `MPI_MAXLOC`: larger value wins; on a tie, the smaller index.
    Maxloc,
}

impl Op {
    /// Every predefined operation, in declaration order.
    pub const ALL: [Op; 12] = [
        Op::Sum,
        Op::Prod,
        Op::Min,
        Op::Max,
        Op::Land,
        Op::Lor,
        Op::Lxor,
        Op::Band,
        Op::Bor,
        Op::Bxor,
        Op::Minloc,
        Op::Maxloc,
    ];

    /// The MPI name: `"MPI_SUM"`, `"MPI_PROD"`, ..., `"MPI_MAXLOC"`.
    pub const fn name(self) -> &'static str {
        match self {
            Op::Sum => "MPI_SUM",
            Op::Prod => "MPI_PROD",
            Op::Min => "MPI_MIN",
            Op::Max => "MPI_MAX",
            Op::Land => "MPI_LAND",
            Op::Lor => "MPI_LOR",
            Op::Lxor => "MPI_LXOR",
            Op::Band => "MPI_BAND",
            Op::Bor => "MPI_BOR",
            Op::Bxor => "MPI_BXOR",
            Op::Minloc => "MPI_MINLOC",
            Op::Maxloc => "MPI_MAXLOC",
        }
    }

    /// Whether the operation is commutative: true for every predefined operation.
    pub const fn is_commutative(self) -> bool {
        true
    }

    /// Whether MPI defines this op for this type: `Sum`/`Prod` on integers, floats and
    /// complex numbers, `Min`/`Max` on integers and floats; `Land`/`Lor`/`Lxor` and
    /// `Band`/`Bor`/`Bxor` on integers only; `Minloc`/`Maxloc` on pair types only.
    pub const fn applies_to(self, t: Dtype) -> bool {
        match self {
            Op::Sum | Op::Prod => t.is_integer() || t.is_float() || t.is_complex(),
            Op::Min | Op::Max => t.is_integer() || t.is_float(),
            Op::Land | Op::Lor | Op::Lxor | Op::Band | Op::Bor | Op::Bxor => t.is_integer(),
            Op::Minloc | Op::Maxloc => t.is_pair(),
        }
    }

    /// Why this op does not apply to other types (used in [`OpError`] reasons).
    const fn domain(self) -> &'static str {
        match self {
            Op::Sum | Op::Prod => "arithmetic ops take integer, floating-point or complex types",
            Op::Min | Op::Max => "min/max ops take integer or floating-point types",
            Op::Land | Op::Lor | Op::Lxor => "logical ops take integer types",
            Op::Band | Op::Bor | Op::Bxor => "bitwise ops take integer types",
            Op::Minloc | Op::Maxloc => "MINLOC/MAXLOC take value/index pair types",
        }
    }
}

impl fmt::Display for Op {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A reduction that cannot be performed: the op is not defined for the type, or the buffers
/// are malformed.
///
/// Displays as `"MPI_BAND is not defined for f64 (bitwise ops take integer types)"` when
/// `op` does not apply to `dtype`, otherwise as `"MPI_SUM on i32: <reason>"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpError {
    /// The operation requested.
    pub op: Op,
    /// The element type requested.
    pub dtype: Dtype,
    /// What is wrong.
    pub reason: String,
}

impl fmt::Display for OpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.op.applies_to(self.dtype) {
            write!(f, "{} on {}: {}", self.op, self.dtype, self.reason)
        } else {
            write!(
                f,
                "{} is not defined for {} ({})",
                self.op, self.dtype, self.reason
            )
        }
    }
}

impl std::error::Error for OpError {}

impl OpError {
    fn not_defined(op: Op, dtype: Dtype) -> Self {
        OpError {
            op,
            dtype,
            reason: op.domain().to_string(),
        }
    }
}

/// Checks that `op` applies to `dtype` and that both buffers hold the same whole number of
/// elements.
fn check(op: Op, dtype: Dtype, input: &[u8], inout: &[u8]) -> Result<(), OpError> {
    if !op.applies_to(dtype) {
        return Err(OpError::not_defined(op, dtype));
    }
    let reason = if input.len() != inout.len() {
        format!(
            "buffer lengths differ (input {} bytes, inout {} bytes)",
            input.len(),
            inout.len()
        )
    } else if !inout.chunks_exact(dtype.size()).remainder().is_empty() {
        format!(
            "buffer length {} is not a multiple of the element size {}",
            inout.len(),
            dtype.size()
        )
    } else {
        return Ok(());
    };
    Err(OpError { op, dtype, reason })
}

/// `inout[i] = input[i] OP inout[i]`, for every element.
///
/// Order matters only for non-commutative user ops; for predefined ops the convention still
/// holds: `input` is the operand from the lower rank. Buffers hold elements of `dtype` in
/// native endianness and need not be aligned. Never allocates on success.
///
/// Semantics:
/// * integer `Sum`/`Prod` wrap on overflow (MPI leaves it undefined);
/// * float `Min` is C's `a < b ? a : b` and `Max` is `a > b ? a : b`, with `a` from `input`
///   and `b` from `inout`: if either operand is NaN the comparison is false and the `inout`
///   element is kept unchanged (so NaN propagates only from `inout`);
/// * logical ops treat nonzero as true and store 0 or 1;
/// * `Minloc`/`Maxloc`: the smaller (larger) value wins, ties take the smaller index (the
///   value is then left as in `inout`); a NaN value never wins, so the `inout` element is
///   kept. Padding bytes of `inout` are never written; padding of `input` is ignored.
///
/// Errors (with `inout` left untouched): `op` is not defined for `dtype`; the buffer
/// lengths differ or are not a multiple of `dtype.size()`.
pub fn reduce(op: Op, dtype: Dtype, input: &[u8], inout: &mut [u8]) -> Result<(), OpError> {
    check(op, dtype, input, inout)?;
    if dispatch(op, dtype, input, inout) {
        Ok(())
    } else {
        // `check` accepted a pair `dispatch` has no kernel for; the tests rule this out.
        Err(OpError::not_defined(op, dtype))
    }
}

/// [`reduce`] for a caller that has checked what [`reduce`] checks (the op applies to the
/// type, equal lengths of whole elements): the one-sided fast path, which must decide before
/// taking its lock. False (nothing changed) only for a pair with no kernel.
pub(crate) fn reduce_checked(op: Op, dtype: Dtype, input: &[u8], inout: &mut [u8]) -> bool {
    debug_assert!(check(op, dtype, input, inout).is_ok());
    dispatch(op, dtype, input, inout)
}

/// A fixed-width scalar read and written in native endianness from unaligned bytes.
trait Elem: Copy + PartialOrd {
    const SIZE: usize;
    fn load(b: &[u8]) -> Self;
    fn store(self, b: &mut [u8]);
}

macro_rules! impl_elem {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_ne_bytes(b.try_into().expect("element width"))
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_ne_bytes());
            }
        }
    )*};
}
impl_elem!(i8, u8, i16, u16, i32, u32, i64, u64, f32, f64);

/// The element loop: `inout[i] = f(input[i], inout[i])`.
#[inline(always)]
fn zip_map<T: Elem>(input: &[u8], inout: &mut [u8], f: impl Fn(T, T) -> T) {
    if input.len() == T::SIZE && inout.len() == T::SIZE {
        // One element (fetch-and-op, one-element accumulates): no loop set-up.
        f(T::load(input), T::load(inout)).store(inout);
        return;
    }
    // Whole blocks first: a block has a constant element count, so the compiler unrolls it
    // into vector operations; a short vector (an 8-byte accumulate) is one 8-byte block
    // instead of a loop of eight iterations. Plain index loops: the iterator adapters' set-up
    // costs more than a short vector's arithmetic.
    let n = input.len().min(inout.len());
    let mut at = blocks::<T, 32>(input, inout, n, 0, &f);
    at = blocks::<T, 8>(input, inout, n, at, &f);
    while at + T::SIZE <= n {
        let e = at..at + T::SIZE;
        f(T::load(&input[e.clone()]), T::load(&inout[e.clone()])).store(&mut inout[e]);
        at += T::SIZE;
    }
}

/// Applies `f` to the whole `B`-byte blocks of `input` and `inout` from byte `at` up to
/// `n` (`B` a multiple of the element width); returns where it stopped.
#[inline(always)]
fn blocks<T: Elem, const B: usize>(
    input: &[u8],
    inout: &mut [u8],
    n: usize,
    mut at: usize,
    f: &impl Fn(T, T) -> T,
) -> usize {
    while at + B <= n {
        let a: &[u8; B] = input[at..at + B].try_into().expect("block");
        let b: &mut [u8; B] = (&mut inout[at..at + B]).try_into().expect("block");
        for k in 0..B / T::SIZE {
            let e = k * T::SIZE..(k + 1) * T::SIZE;
            f(T::load(&a[e.clone()]), T::load(&b[e.clone()])).store(&mut b[e]);
        }
        at += B;
    }
    at
}

/// Byte-wise loop for the bitwise ops (width-independent).
#[inline(always)]
fn bytes_map(input: &[u8], inout: &mut [u8], f: impl Fn(u8, u8) -> u8) {
    for (a, b) in input.iter().zip(inout.iter_mut()) {
        *b = f(*a, *b);
    }
}

/// The MINLOC/MAXLOC loop over `{ V value; I index }` structs of `SIZE` bytes with the
/// index at byte `IDX` (`I` is `i32`, or the value's type for Fortran's `MPI_2REAL` and
/// `MPI_2DOUBLE_PRECISION`). `wins(a, b)` says whether the input value strictly beats the
/// inout one; on a tie the lower index is kept. Only the value and index bytes of `inout`
/// are written.
#[inline(always)]
fn loc_map<V: Elem, I: Elem, const SIZE: usize, const IDX: usize>(
    input: &[u8],
    inout: &mut [u8],
    wins: impl Fn(V, V) -> bool,
) {
    for (a, b) in input.chunks_exact(SIZE).zip(inout.chunks_exact_mut(SIZE)) {
        let (av, bv) = (V::load(&a[..V::SIZE]), V::load(&b[..V::SIZE]));
        let at = IDX..IDX + I::SIZE;
        let (ai, bi) = (I::load(&a[at.clone()]), I::load(&b[at.clone()]));
        let take = wins(av, bv);
        let v = if take { av } else { bv };
        let i = if take || (av == bv && ai < bi) {
            ai
        } else {
            bi
        };
        v.store(&mut b[..V::SIZE]);
        i.store(&mut b[at]);
    }
}

macro_rules! int_kernel {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {
        match $op {
            Op::Sum => zip_map::<$t>($a, $b, |x, y| x.wrapping_add(y)),
            Op::Prod => zip_map::<$t>($a, $b, |x, y| x.wrapping_mul(y)),
            Op::Min => zip_map::<$t>($a, $b, |x, y| x.min(y)),
            Op::Max => zip_map::<$t>($a, $b, |x, y| x.max(y)),
            Op::Land => zip_map::<$t>($a, $b, |x, y| <$t>::from((x != 0) & (y != 0))),
            Op::Lor => zip_map::<$t>($a, $b, |x, y| <$t>::from((x != 0) | (y != 0))),
            Op::Lxor => zip_map::<$t>($a, $b, |x, y| <$t>::from((x != 0) ^ (y != 0))),
            _ => return false,
        }
    };
}

macro_rules! float_kernel {
    ($t:ty, $op:expr, $a:expr, $b:expr) => {
        match $op {
            Op::Sum => zip_map::<$t>($a, $b, |x, y| x + y),
            Op::Prod => zip_map::<$t>($a, $b, |x, y| x * y),
            Op::Min => zip_map::<$t>($a, $b, |x, y| if x < y { x } else { y }),
            Op::Max => zip_map::<$t>($a, $b, |x, y| if x > y { x } else { y }),
            _ => return false,
        }
    };
}

macro_rules! loc_kernel {
    ($v:ty, $i:ty, $size:literal, $idx:literal, $op:expr, $a:expr, $b:expr) => {
        match $op {
            Op::Minloc => loc_map::<$v, $i, $size, $idx>($a, $b, |x, y| x < y),
            Op::Maxloc => loc_map::<$v, $i, $size, $idx>($a, $b, |x, y| x > y),
            _ => return false,
        }
    };
}

/// Runs the kernel for (op, dtype); false if there is none. Lengths are already checked.
fn dispatch(op: Op, dtype: Dtype, a: &[u8], b: &mut [u8]) -> bool {
    if matches!(op, Op::Band | Op::Bor | Op::Bxor) {
        if !dtype.is_integer() {
            return false;
        }
        match op {
            Op::Band => bytes_map(a, b, |x, y| x & y),
            Op::Bor => bytes_map(a, b, |x, y| x | y),
            _ => bytes_map(a, b, |x, y| x ^ y),
        }
        return true;
    }
    match dtype {
        Dtype::I8 => int_kernel!(i8, op, a, b),
        Dtype::U8 => int_kernel!(u8, op, a, b),
        Dtype::I16 => int_kernel!(i16, op, a, b),
        Dtype::U16 => int_kernel!(u16, op, a, b),
        Dtype::I32 => int_kernel!(i32, op, a, b),
        Dtype::U32 => int_kernel!(u32, op, a, b),
        Dtype::I64 => int_kernel!(i64, op, a, b),
        Dtype::U64 => int_kernel!(u64, op, a, b),
        Dtype::F32 => float_kernel!(f32, op, a, b),
        Dtype::F64 => float_kernel!(f64, op, a, b),
        Dtype::FloatInt => loc_kernel!(f32, i32, 8, 4, op, a, b),
        Dtype::DoubleInt => loc_kernel!(f64, i32, 16, 8, op, a, b),
        Dtype::LongInt => loc_kernel!(i64, i32, 16, 8, op, a, b),
        Dtype::TwoInt => loc_kernel!(i32, i32, 8, 4, op, a, b),
        Dtype::ShortInt => loc_kernel!(i16, i32, 8, 4, op, a, b),
        Dtype::TwoF32 => loc_kernel!(f32, f32, 8, 4, op, a, b),
        Dtype::TwoF64 => loc_kernel!(f64, f64, 16, 8, op, a, b),
        Dtype::C32 => return wide::complex::<f32>(op, a, b),
        Dtype::C64 => return wide::complex::<f64>(op, a, b),
        Dtype::F80 => return wide::long_double(op, a, b),
        Dtype::C80 => return wide::long_double_complex(op, a, b),
        Dtype::LongDoubleInt => return wide::long_double_int(op, a, b),
        Dtype::Opaque(_) => return false,
    }
    true
}

/// The function type of a [`UserOp`]: `f(input, inout)`.
pub type UserFn = dyn Fn(&[u8], &mut [u8]);

/// A user-defined reduction (Rust API): a function over whole buffers plus commutativity.
///
/// `f(input, inout)` must compute `inout[i] = input[i] OP inout[i]` for every element,
/// with `input` the operand from the lower rank (the same convention as [`reduce`]).
#[derive(Clone)]
pub struct UserOp {
    /// Whether the operation is commutative (lets algorithms reorder operands).
    pub commutative: bool,
    /// The combining function, called as `f(input, inout)`.
    pub f: Rc<UserFn>,
}

impl UserOp {
    /// Wraps a function `f(input, inout)` as a user op.
    pub fn new(commutative: bool, f: impl Fn(&[u8], &mut [u8]) + 'static) -> Self {
        UserOp {
            commutative,
            f: Rc::new(f),
        }
    }
}

impl fmt::Debug for UserOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserOp")
            .field("commutative", &self.commutative)
            .finish_non_exhaustive()
    }
}

/// Either kind of reduction: predefined or user-defined.
#[derive(Clone, Debug)]
pub enum Reduction {
    /// A predefined operation.
    Predefined(Op),
    /// A user-defined operation.
    User(UserOp),
}

impl Reduction {
    /// Whether the reduction is commutative (always true for predefined ops).
    pub fn is_commutative(&self) -> bool {
        match self {
            Reduction::Predefined(op) => op.is_commutative(),
            Reduction::User(u) => u.commutative,
        }
    }

    /// `inout[i] = input[i] OP inout[i]` for every element.
    ///
    /// Predefined ops go through [`reduce`] and its checks. A user op is called with the
    /// buffers as given and always succeeds: it cannot be named in an [`OpError`], so
    /// sizing the buffers is the caller's job (checked by debug assertions).
    pub fn apply(&self, dtype: Dtype, input: &[u8], inout: &mut [u8]) -> Result<(), OpError> {
        match self {
            Reduction::Predefined(op) => reduce(*op, dtype, input, inout),
            Reduction::User(u) => {
                debug_assert_eq!(input.len(), inout.len(), "user op: buffer lengths differ");
                debug_assert_eq!(
                    inout.len() % dtype.size(),
                    0,
                    "user op: buffer length not a multiple of the element size"
                );
                (u.f)(input, inout);
                Ok(())
            }
        }
    }
}

impl From<Op> for Reduction {
    fn from(op: Op) -> Self {
        Reduction::Predefined(op)
    }
}

impl From<UserOp> for Reduction {
    fn from(u: UserOp) -> Self {
        Reduction::User(u)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic xorshift64.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn fill(&mut self, b: &mut [u8]) {
            for x in b {
                *x = self.next() as u8;
            }
        }
    }

    fn read_int(d: Dtype, b: &[u8]) -> i128 {
        match d {
            Dtype::I8 => i8::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::U8 => u8::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::I16 => i16::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::U16 => u16::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::I32 => i32::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::U32 => u32::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::I64 => i64::from_ne_bytes(b.try_into().unwrap()) as i128,
            Dtype::U64 => u64::from_ne_bytes(b.try_into().unwrap()) as i128,
            _ => unreachable!(),
        }
    }

    fn write_int(d: Dtype, v: i128, b: &mut [u8]) {
        match d {
            Dtype::I8 => b.copy_from_slice(&(v as i8).to_ne_bytes()),
            Dtype::U8 => b.copy_from_slice(&(v as u8).to_ne_bytes()),
            Dtype::I16 => b.copy_from_slice(&(v as i16).to_ne_bytes()),
            Dtype::U16 => b.copy_from_slice(&(v as u16).to_ne_bytes()),
            Dtype::I32 => b.copy_from_slice(&(v as i32).to_ne_bytes()),
            Dtype::U32 => b.copy_from_slice(&(v as u32).to_ne_bytes()),
            Dtype::I64 => b.copy_from_slice(&(v as i64).to_ne_bytes()),
            Dtype::U64 => b.copy_from_slice(&(v as u64).to_ne_bytes()),
            _ => unreachable!(),
        }
    }

    fn read_float(d: Dtype, b: &[u8]) -> f64 {
        match d {
            Dtype::F32 => f32::from_ne_bytes(b.try_into().unwrap()) as f64,
            Dtype::F64 => f64::from_ne_bytes(b.try_into().unwrap()),
            _ => unreachable!(),
        }
    }

    fn write_float(d: Dtype, v: f64, b: &mut [u8]) {
        match d {
            Dtype::F32 => b.copy_from_slice(&(v as f32).to_ne_bytes()),
            Dtype::F64 => b.copy_from_slice(&v.to_ne_bytes()),
            _ => unreachable!(),
        }
    }

    /// Layout of a pair type, written out independently of the module:
    /// (value type as a scalar Dtype, index offset).
    fn pair_layout(d: Dtype) -> (Dtype, usize) {
        match d {
            Dtype::FloatInt => (Dtype::F32, 4),
            Dtype::DoubleInt => (Dtype::F64, 8),
            Dtype::LongInt => (Dtype::I64, 8),
            Dtype::TwoInt => (Dtype::I32, 4),
            Dtype::ShortInt => (Dtype::I16, 4),
            Dtype::LongDoubleInt => (Dtype::F80, 16),
            Dtype::TwoF32 => (Dtype::F32, 4),
            Dtype::TwoF64 => (Dtype::F64, 8),
            _ => unreachable!(),
        }
    }

    /// The index type of a pair: `int`, or the value's own for the Fortran pairs.
    fn index_type(d: Dtype) -> Dtype {
        match d {
            Dtype::TwoF32 => Dtype::F32,
            Dtype::TwoF64 => Dtype::F64,
            _ => Dtype::I32,
        }
    }

    /// Writes index `i` of pair type `d` at `o`.
    fn write_index(d: Dtype, i: i32, o: &mut [u8]) {
        let t = index_type(d);
        if t.is_float() {
            write_float(t, f64::from(i), &mut o[..t.size()]);
        } else {
            o[..4].copy_from_slice(&i.to_ne_bytes());
        }
    }

    /// Whether index `a` of pair type `d` is below index `b`.
    fn index_below(d: Dtype, a: &[u8], b: &[u8]) -> bool {
        let t = index_type(d);
        if t.is_float() {
            read_float(t, &a[..t.size()]) < read_float(t, &b[..t.size()])
        } else {
            idx(a, 0) < idx(b, 0)
        }
    }

    /// The types whose kernels live in `wide` (tested there).
    fn wide(d: Dtype) -> bool {
        d.is_complex() || matches!(d, Dtype::F80 | Dtype::LongDoubleInt)
    }

    fn idx(b: &[u8], off: usize) -> i32 {
        i32::from_ne_bytes(b[off..off + 4].try_into().unwrap())
    }

    /// Straightforward per-element reference: the expected `inout` after the reduction.
    fn reference(op: Op, d: Dtype, input: &[u8], inout: &[u8]) -> Vec<u8> {
        let n = d.size();
        let mut out = inout.to_vec();
        for ((a, b), o) in input.chunks(n).zip(inout.chunks(n)).zip(out.chunks_mut(n)) {
            if d.is_integer() {
                let (x, y) = (read_int(d, a), read_int(d, b));
                let r = match op {
                    Op::Sum => x.wrapping_add(y),
                    Op::Prod => x.wrapping_mul(y),
                    Op::Min => x.min(y),
                    Op::Max => x.max(y),
                    Op::Land => (x != 0 && y != 0) as i128,
                    Op::Lor => (x != 0 || y != 0) as i128,
                    Op::Lxor => ((x != 0) != (y != 0)) as i128,
                    Op::Band => x & y,
                    Op::Bor => x | y,
                    Op::Bxor => x ^ y,
                    _ => unreachable!(),
                };
                write_int(d, r, o);
            } else if d.is_float() {
                // f32 results computed in f64 and rounded once are correctly rounded.
                let (x, y) = (read_float(d, a), read_float(d, b));
                match op {
                    Op::Sum => write_float(d, x + y, o),
                    Op::Prod => write_float(d, x * y, o),
                    Op::Min => o.copy_from_slice(if x < y { a } else { b }),
                    Op::Max => o.copy_from_slice(if x > y { a } else { b }),
                    _ => unreachable!(),
                }
            } else {
                let (vt, off) = pair_layout(d);
                let vs = vt.size();
                let (lt, gt, eq) = if vt.is_float() {
                    let (x, y) = (read_float(vt, &a[..vs]), read_float(vt, &b[..vs]));
                    (x < y, x > y, x == y)
                } else {
                    let (x, y) = (read_int(vt, &a[..vs]), read_int(vt, &b[..vs]));
                    (x < y, x > y, x == y)
                };
                let a_wins = match op {
                    Op::Minloc => lt,
                    Op::Maxloc => gt,
                    _ => unreachable!(),
                };
                let is = index_type(d).size();
                if a_wins || (eq && index_below(d, &a[off..], &b[off..])) {
                    o[off..off + is].copy_from_slice(&a[off..off + is]);
                }
                if a_wins {
                    o[..vs].copy_from_slice(&a[..vs]);
                }
            }
        }
        out
    }

    /// One random element: mixes full-range bits with zeros, small values (ties, logical
    /// truth values) and float specials.
    fn gen_elem(rng: &mut Rng, d: Dtype, o: &mut [u8]) {
        if d.is_integer() {
            match rng.below(4) {
                0 => write_int(d, 0, o),
                1 => write_int(d, rng.below(7) as i128 - 3, o),
                _ => rng.fill(o),
            }
        } else if d.is_float() {
            const SPECIAL: [f64; 9] = [
                0.0,
                -0.0,
                1.0,
                -1.0,
                2.5,
                f64::INFINITY,
                f64::NEG_INFINITY,
                f64::NAN,
                1e300,
            ];
            match rng.below(8) {
                0 => write_float(d, SPECIAL[rng.below(9) as usize], o),
                1 => write_float(d, rng.below(7) as f64 - 3.0, o),
                2 => rng.fill(o),
                _ => {
                    let v = (rng.next() >> 11) as f64 / (1u64 << 53) as f64;
                    write_float(d, (v - 0.5) * 2000.0, o)
                }
            }
        } else {
            rng.fill(o); // padding gets garbage too
            let (vt, off) = pair_layout(d);
            let vs = vt.size();
            if rng.below(4) != 0 {
                // small values so ties are frequent
                if vt.is_float() {
                    let v = if rng.below(16) == 0 {
                        f64::NAN
                    } else {
                        rng.below(5) as f64 - 2.0
                    };
                    write_float(vt, v, &mut o[..vs]);
                } else {
                    write_int(vt, rng.below(5) as i128 - 2, &mut o[..vs]);
                }
            }
            let i = rng.below(6) as i32 - 1;
            write_index(d, i, &mut o[off..]);
        }
    }

    fn gen_buf(rng: &mut Rng, d: Dtype, count: usize, offset: usize) -> Vec<u8> {
        let mut v = vec![0u8; offset + count * d.size()];
        rng.fill(&mut v[..offset]);
        for e in v[offset..].chunks_mut(d.size()) {
            gen_elem(rng, d, e);
        }
        v
    }

    /// Byte equality, except that Sum/Prod on floats accept any NaN for a NaN (payloads of
    /// NaN results are not specified).
    fn assert_matches(op: Op, d: Dtype, got: &[u8], want: &[u8], ctx: &str) {
        if d.is_float() && matches!(op, Op::Sum | Op::Prod) {
            for (i, (g, w)) in got.chunks(d.size()).zip(want.chunks(d.size())).enumerate() {
                let (g, w) = (read_float(d, g), read_float(d, w));
                assert!(
                    g.to_bits() == w.to_bits() || (g.is_nan() && w.is_nan()),
                    "{ctx}: element {i}: got {g}, want {w}"
                );
            }
        } else if got != want {
            let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap() / d.size();
            panic!(
                "{ctx}: element {i}: got {:?}, want {:?}",
                &got[i * d.size()..(i + 1) * d.size()],
                &want[i * d.size()..(i + 1) * d.size()]
            );
        }
    }

    #[test]
    fn dtype_properties() {
        let sizes = [
            1, 1, 2, 2, 4, 4, 8, 8, 4, 8, 8, 16, 16, 8, 8, 8, 16, 16, 32, 32, 8, 16,
        ];
        let mut names = std::collections::HashSet::new();
        for (d, s) in Dtype::ALL.iter().zip(sizes) {
            assert_eq!(d.size(), s, "{d:?}");
            assert!(names.insert(d.name()));
            let kinds = [d.is_pair(), d.is_float(), d.is_integer(), d.is_complex()];
            assert_eq!(kinds.iter().filter(|k| **k).count(), 1, "{d:?}");
            assert_eq!(d.index_offset().is_some(), d.is_pair());
            if d.is_pair() {
                assert_eq!(d.index_offset(), Some(pair_layout(*d).1));
            }
            assert_eq!(d.to_string(), d.name());
        }
        assert_eq!(Dtype::TwoInt.name(), "2int");
        assert_eq!(Dtype::ShortInt.name(), "short_int");
    }

    #[test]
    fn op_names_and_commutativity() {
        let mut names = std::collections::HashSet::new();
        for op in Op::ALL {
            assert!(op.name().starts_with("MPI_"));
            assert!(names.insert(op.name()));
            assert!(op.is_commutative());
            assert!(Reduction::Predefined(op).is_commutative());
            assert_eq!(op.to_string(), op.name());
        }
        assert_eq!(Op::Sum.name(), "MPI_SUM");
        assert_eq!(Op::Maxloc.name(), "MPI_MAXLOC");
    }

    #[test]
    fn applies_to_table() {
        for op in Op::ALL {
            for d in Dtype::ALL {
                let want = match op {
                    Op::Sum | Op::Prod => !d.is_pair(),
                    Op::Min | Op::Max => !d.is_pair() && !d.is_complex(),
                    Op::Land | Op::Lor | Op::Lxor | Op::Band | Op::Bor | Op::Bxor => {
                        !d.is_pair() && !d.is_float() && !d.is_complex()
                    }
                    Op::Minloc | Op::Maxloc => d.is_pair(),
                };
                assert_eq!(op.applies_to(d), want, "{op:?} {d:?}");
            }
        }
    }

    /// Element counts for the reference comparison: none, one, and every count that ends
    /// just before, on or just after an 8- or 32-byte block for 1- to 8-byte elements.
    const COUNTS: [usize; 17] = [0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 41, 1000];

    #[test]
    fn every_applicable_pair_matches_reference() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        let mut checked = 0;
        for op in Op::ALL {
            // The complex and long double kernels have their own tests (`wide`).
            for d in Dtype::ALL.into_iter().filter(|d| !wide(*d)) {
                if !op.applies_to(d) {
                    continue;
                }
                // Around the kernels' 8- and 32-byte blocks for every element width.
                for count in COUNTS {
                    // (input offset, inout offset): aligned, and misaligned both ways.
                    for (oa, ob) in [(0usize, 0usize), (1, 1), (1, 3), (5, 0)] {
                        let a = gen_buf(&mut rng, d, count, oa);
                        let mut b = gen_buf(&mut rng, d, count, ob);
                        let want = reference(op, d, &a[oa..], &b[ob..]);
                        let before = b[..ob].to_vec();
                        reduce(op, d, &a[oa..], &mut b[ob..]).unwrap();
                        let ctx = format!("{op:?} {d:?} count {count} offsets {oa},{ob}");
                        assert_matches(op, d, &b[ob..], &want, &ctx);
                        assert_eq!(b[..ob], before[..], "{ctx}: wrote before the buffer");
                        checked += 1;
                    }
                }
            }
        }
        // 4 arith ops x 10 scalars + 6 logical/bitwise x 8 ints + 2 loc x 7 pairs = 102 pairs.
        assert_eq!(checked, 102 * COUNTS.len() * 4);
    }

    #[test]
    fn non_applicable_pairs_error_and_leave_inout_alone() {
        let mut n = 0;
        for op in Op::ALL {
            for d in Dtype::ALL {
                if op.applies_to(d) {
                    continue;
                }
                let a = vec![1u8; 3 * d.size()];
                let mut b = vec![7u8; 3 * d.size()];
                let e = reduce(op, d, &a, &mut b).unwrap_err();
                assert_eq!((e.op, e.dtype), (op, d));
                assert!(
                    e.to_string().contains(" is not defined for "),
                    "{}",
                    e.to_string()
                );
                assert!(b.iter().all(|x| *x == 7));
                let r = Reduction::Predefined(op).apply(d, &a, &mut b);
                assert_eq!(r, Err(e));
                n += 1;
            }
        }
        assert_eq!(n, 12 * 22 - 114);
    }

    #[test]
    fn length_errors() {
        for op in Op::ALL {
            for d in Dtype::ALL {
                if !op.applies_to(d) {
                    continue;
                }
                let s = d.size();
                let a = vec![1u8; 2 * s];
                let mut b = vec![9u8; 3 * s];
                let e = reduce(op, d, &a, &mut b).unwrap_err();
                assert!(e.reason.contains("lengths differ"), "{e}");
                assert!(b.iter().all(|x| *x == 9));
                let mut b = vec![9u8; 2 * s];
                let e = reduce(op, d, &a, &mut b[..2 * s - 1]).unwrap_err();
                assert!(e.reason.contains("lengths differ"), "{e}");
                if s > 1 {
                    let e = reduce(op, d, &a[..2 * s - 1], &mut b[..2 * s - 1]).unwrap_err();
                    assert!(e.reason.contains("not a multiple"), "{e}");
                    assert!(b.iter().all(|x| *x == 9));
                }
            }
        }
    }

    #[test]
    fn error_messages() {
        let e = reduce(Op::Band, Dtype::F64, &[0; 8], &mut [0; 8]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "MPI_BAND is not defined for f64 (bitwise ops take integer types)"
        );
        let e = reduce(Op::Land, Dtype::F32, &[0; 4], &mut [0; 4]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "MPI_LAND is not defined for f32 (logical ops take integer types)"
        );
        let e = reduce(Op::Minloc, Dtype::I32, &[0; 4], &mut [0; 4]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "MPI_MINLOC is not defined for i32 (MINLOC/MAXLOC take value/index pair types)"
        );
        let e = reduce(Op::Sum, Dtype::I32, &[0; 4], &mut [0; 8]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "MPI_SUM on i32: buffer lengths differ (input 4 bytes, inout 8 bytes)"
        );
        let e = reduce(Op::Sum, Dtype::I32, &[0; 6], &mut [0; 6]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "MPI_SUM on i32: buffer length 6 is not a multiple of the element size 4"
        );
    }

    fn pair(d: Dtype, v: f64, i: i32, pad: u8) -> Vec<u8> {
        let (vt, off) = pair_layout(d);
        let mut b = vec![pad; d.size()];
        if vt.is_float() {
            write_float(vt, v, &mut b[..vt.size()]);
        } else {
            write_int(vt, v as i128, &mut b[..vt.size()]);
        }
        write_index(d, i, &mut b[off..]);
        b
    }

    #[test]
    fn minloc_maxloc_rules() {
        for d in Dtype::ALL.into_iter().filter(|d| d.is_pair() && !wide(*d)) {
            // (op, input (v, i), inout (v, i), expected (v, i))
            let cases = [
                (Op::Minloc, (1.0, 5), (2.0, 0), (1.0, 5)),
                (Op::Minloc, (3.0, 0), (2.0, 9), (2.0, 9)),
                (Op::Minloc, (2.0, 4), (2.0, 3), (2.0, 3)),
                (Op::Minloc, (2.0, 3), (2.0, 4), (2.0, 3)),
                (Op::Minloc, (-2.0, -1), (-2.0, 0), (-2.0, -1)),
                (Op::Maxloc, (1.0, 5), (2.0, 0), (2.0, 0)),
                (Op::Maxloc, (3.0, 7), (2.0, 1), (3.0, 7)),
                (Op::Maxloc, (2.0, 4), (2.0, 3), (2.0, 3)),
                (Op::Maxloc, (2.0, 3), (2.0, 4), (2.0, 3)),
            ];
            for (op, (av, ai), (bv, bi), (wv, wi)) in cases {
                let a = pair(d, av, ai, 0xCD);
                let mut b = pair(d, bv, bi, 0xAB);
                reduce(op, d, &a, &mut b).unwrap();
                assert_eq!(b, pair(d, wv, wi, 0xAB), "{op:?} {d:?} {av},{ai} {bv},{bi}");
            }
        }
    }

    #[test]
    fn pair_padding_untouched_and_ignored() {
        for (d, pad) in [
            (Dtype::DoubleInt, 12..16),
            (Dtype::LongInt, 12..16),
            (Dtype::ShortInt, 2..4),
        ] {
            for op in [Op::Minloc, Op::Maxloc] {
                // Input wins, inout wins, and a tie: every path of the loop runs.
                let mut a = Vec::new();
                let mut b = Vec::new();
                for (av, bv) in [(1.0, 2.0), (2.0, 1.0), (1.0, 1.0)] {
                    a.extend(pair(d, av, 1, 0xCD));
                    b.extend(pair(d, bv, 2, 0xAB));
                }
                let mut a2 = a.clone();
                for e in a2.chunks_mut(d.size()) {
                    e[pad.clone()].fill(0x11);
                }
                let mut b2 = b.clone();
                reduce(op, d, &a, &mut b).unwrap();
                reduce(op, d, &a2, &mut b2).unwrap();
                assert_eq!(b, b2, "input padding must not matter");
                for e in b.chunks(d.size()) {
                    assert!(e[pad.clone()].iter().all(|x| *x == 0xAB), "{d:?} {e:?}");
                }
            }
        }
    }

    #[test]
    fn float_min_max_nan_keeps_inout() {
        let f = |v: f64| v.to_ne_bytes();
        for op in [Op::Min, Op::Max] {
            let mut b = f(1.0);
            reduce(op, Dtype::F64, &f(f64::NAN), &mut b).unwrap();
            assert_eq!(f64::from_ne_bytes(b), 1.0);
            let mut b = f(f64::NAN);
            reduce(op, Dtype::F64, &f(1.0), &mut b).unwrap();
            assert!(f64::from_ne_bytes(b).is_nan());
        }
        let mut b = 3.0f32.to_ne_bytes();
        reduce(Op::Min, Dtype::F32, &(-1.0f32).to_ne_bytes(), &mut b).unwrap();
        assert_eq!(f32::from_ne_bytes(b), -1.0);
    }

    #[test]
    fn integer_wrapping_and_logical_normalization() {
        let mut b = 1i32.to_ne_bytes();
        reduce(Op::Sum, Dtype::I32, &i32::MAX.to_ne_bytes(), &mut b).unwrap();
        assert_eq!(i32::from_ne_bytes(b), i32::MIN);
        let mut b = [16u8];
        reduce(Op::Prod, Dtype::U8, &[16], &mut b).unwrap();
        assert_eq!(b, [0]);
        let mut b = (-3i16).to_ne_bytes();
        reduce(Op::Land, Dtype::I16, &5i16.to_ne_bytes(), &mut b).unwrap();
        assert_eq!(i16::from_ne_bytes(b), 1);
        let mut b = 0u64.to_ne_bytes();
        reduce(Op::Lxor, Dtype::U64, &(1u64 << 40).to_ne_bytes(), &mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), 1);
        let mut b = (-1i64).to_ne_bytes();
        reduce(Op::Min, Dtype::U64, &5u64.to_ne_bytes(), &mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), 5);
        reduce(Op::Min, Dtype::I64, &5i64.to_ne_bytes(), &mut b).unwrap();
        assert_eq!(u64::from_ne_bytes(b), 5);
    }

    #[test]
    fn unaligned_at_every_offset() {
        for off in 0..8 {
            let mut a = vec![0u8; off + 8 * 33];
            let mut b = vec![0u8; off + 8 * 33];
            for i in 0..33 {
                let s = off + 8 * i;
                a[s..s + 8].copy_from_slice(&(i as f64).to_ne_bytes());
                b[s..s + 8].copy_from_slice(&(0.5 * i as f64).to_ne_bytes());
            }
            reduce(Op::Sum, Dtype::F64, &a[off..], &mut b[off..]).unwrap();
            for i in 0..33 {
                let s = off + 8 * i;
                let v = f64::from_ne_bytes(b[s..s + 8].try_into().unwrap());
                assert_eq!(v, 1.5 * i as f64);
            }
        }
    }

    #[test]
    fn user_ops_and_reduction() {
        // Non-commutative: inout = input - inout (i32).
        let sub = UserOp::new(false, |a: &[u8], b: &mut [u8]| {
            for (x, y) in a.chunks_exact(4).zip(b.chunks_exact_mut(4)) {
                let r = i32::from_ne_bytes(x.try_into().unwrap())
                    - i32::from_ne_bytes(y.try_into().unwrap());
                y.copy_from_slice(&r.to_ne_bytes());
            }
        });
        assert_eq!(format!("{sub:?}"), "UserOp { commutative: false, .. }");
        let r = Reduction::from(sub.clone());
        assert!(!r.is_commutative());
        assert!(format!("{r:?}").contains("commutative: false"));
        let a: Vec<u8> = [10i32, 20].iter().flat_map(|x| x.to_ne_bytes()).collect();
        let mut b: Vec<u8> = [1i32, 2].iter().flat_map(|x| x.to_ne_bytes()).collect();
        r.clone().apply(Dtype::I32, &a, &mut b).unwrap();
        let got: Vec<i32> = b
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [9, 18]);
        assert!(UserOp::new(true, |_: &[u8], _: &mut [u8]| {}).commutative);

        let p = Reduction::from(Op::Max);
        assert!(p.is_commutative());
        p.apply(Dtype::I32, &a, &mut b).unwrap();
        let got: Vec<i32> = b
            .chunks(4)
            .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, [10, 20]);
    }
}
