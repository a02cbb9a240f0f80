//! Accumulates as CPU atomics, element by element, on window memory shared on the node.
//!
//! MPI makes accumulates with the same basic datatype element-wise atomic with respect to
//! each other. Elements of 1, 2, 4 or 8 bytes (every integer and floating-point type, the
//! 8-byte value/index pairs, and `MPI_REPLACE`/`MPI_NO_OP` on any such size), naturally
//! aligned, are updated here with one atomic instruction (fetch-add, fetch-and/or/xor, swap,
//! load) or a compare-exchange loop around the operation's kernel; everything else (16-byte
//! pairs, misaligned elements) takes the member's accumulate lock (`node`). Since the choice
//! depends only on the element type and address, every process picks the same mechanism for
//! a given element, local origins and the member applying remote origins' messages alike.
//!
//! It must never touch memory it was not given as checked, aligned element addresses.

use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, AtomicU8, Ordering};

use super::wire::AccOp;
use crate::op::{self, Dtype, Op};

/// The element width the atomic path uses for `dtype` under `op`, if it applies.
pub fn width(dtype: Dtype, op: AccOp) -> Option<usize> {
    let w = match dtype {
        Dtype::I8 | Dtype::U8 => 1,
        Dtype::I16 | Dtype::U16 => 2,
        Dtype::I32 | Dtype::U32 | Dtype::F32 => 4,
        Dtype::I64 | Dtype::U64 | Dtype::F64 => 8,
        Dtype::FloatInt | Dtype::TwoInt | Dtype::ShortInt => 8,
        Dtype::DoubleInt | Dtype::LongInt => return None,
        Dtype::Opaque(n) => match op {
            AccOp::Replace | AccOp::NoOp if matches!(n, 1 | 2 | 4 | 8) => n as usize,
            _ => return None,
        },
    };
    Some(w)
}

macro_rules! element {
    ($name:ident, $atomic:ty, $int:ty) => {
        /// One element at `addr`: `*addr = operand OP *addr`; returns the old value's bytes.
        ///
        /// # Safety
        /// `addr` is a naturally aligned element inside a live shared mapping, and every
        /// process accesses it only atomically while this runs (the module's contract).
        unsafe fn $name(
            addr: usize,
            op: AccOp,
            dtype: Dtype,
            operand: &[u8],
        ) -> [u8; std::mem::size_of::<$int>()] {
            // SAFETY: the caller's contract: aligned, in the mapping, accessed atomically.
            let a = unsafe { &*(addr as *const $atomic) };
            let v = operand.try_into().map(<$int>::from_ne_bytes).unwrap_or(0);
            let old = match op {
                AccOp::NoOp => a.load(Ordering::Acquire),
                AccOp::Replace => a.swap(v, Ordering::AcqRel),
                AccOp::Reduce(Op::Sum) if dtype.is_integer() => a.fetch_add(v, Ordering::AcqRel),
                AccOp::Reduce(Op::Band) if dtype.is_integer() => a.fetch_and(v, Ordering::AcqRel),
                AccOp::Reduce(Op::Bor) if dtype.is_integer() => a.fetch_or(v, Ordering::AcqRel),
                AccOp::Reduce(Op::Bxor) if dtype.is_integer() => a.fetch_xor(v, Ordering::AcqRel),
                AccOp::Reduce(o) => {
                    let mut cur = a.load(Ordering::Relaxed);
                    loop {
                        let mut next = cur.to_ne_bytes();
                        // The caller checked the op against the type; a refusal leaves the
                        // element as it was.
                        let _ = op::reduce(o, dtype, operand, &mut next);
                        match a.compare_exchange_weak(
                            cur,
                            <$int>::from_ne_bytes(next),
                            Ordering::AcqRel,
                            Ordering::Relaxed,
                        ) {
                            Ok(_) => break cur,
                            Err(seen) => cur = seen,
                        }
                    }
                }
            };
            old.to_ne_bytes()
        }
    };
}

element!(element1, AtomicU8, u8);
element!(element2, AtomicU16, u16);
element!(element4, AtomicU32, u32);
element!(element8, AtomicU64, u64);

/// Combines `data` (empty for `MPI_NO_OP`) into the `len` bytes at `addr`, element by
/// element of `w` bytes; the old bytes go to `old` when given (as long as `len`).
///
/// # Safety
/// `addr..addr + len` lies inside a live shared mapping, `addr` and `len` are multiples of
/// `w` (one of 1, 2, 4, 8), and every process accesses these bytes only atomically with this
/// width while it runs.
pub unsafe fn combine(
    addr: usize,
    len: usize,
    w: usize,
    op: AccOp,
    dtype: Dtype,
    data: &[u8],
    mut old: Option<&mut [u8]>,
) {
    for i in (0..len).step_by(w) {
        let operand = data.get(i..i + w).unwrap_or(&[]);
        let mut prev = [0u8; 8];
        // SAFETY: element `i` is aligned and inside the range (the caller's contract).
        unsafe {
            match w {
                1 => prev[..1].copy_from_slice(&element1(addr + i, op, dtype, operand)),
                2 => prev[..2].copy_from_slice(&element2(addr + i, op, dtype, operand)),
                4 => prev[..4].copy_from_slice(&element4(addr + i, op, dtype, operand)),
                _ => prev.copy_from_slice(&element8(addr + i, op, dtype, operand)),
            }
        }
        if let Some(o) = old.as_deref_mut() {
            o[i..i + w].copy_from_slice(&prev[..w]);
        }
    }
}

/// `MPI_Compare_and_swap` of one element of `w` bytes at `addr`: the old bytes go to `old`.
///
/// # Safety
/// As [`combine`], for one element.
pub unsafe fn compare_and_swap(addr: usize, w: usize, compare: &[u8], swap: &[u8], old: &mut [u8]) {
    macro_rules! cas {
        ($atomic:ty, $int:ty) => {{
            // SAFETY: the caller's contract.
            let a = unsafe { &*(addr as *const $atomic) };
            let c = compare.try_into().map(<$int>::from_ne_bytes).unwrap_or(0);
            let s = swap.try_into().map(<$int>::from_ne_bytes).unwrap_or(0);
            let prev = match a.compare_exchange(c, s, Ordering::AcqRel, Ordering::Acquire) {
                Ok(v) | Err(v) => v,
            };
            old.copy_from_slice(&prev.to_ne_bytes());
        }};
    }
    match w {
        1 => cas!(AtomicU8, u8),
        2 => cas!(AtomicU16, u16),
        4 => cas!(AtomicU32, u32),
        _ => cas!(AtomicU64, u64),
    }
}
