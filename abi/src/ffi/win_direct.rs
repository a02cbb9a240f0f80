//! The node-local fast path of the one-sided operations: when the target shares the window's
//! memory on this node (windows of `MPI_Win_allocate` and `MPI_Win_allocate_shared`) and
//! origin and target use the same predefined datatype and count, the call works on the
//! node's mapping through the [`DirectView`] the window record keeps, without the engine:
//! a put or a get is a bounds check and a copy, a flush of an all-local window a memory
//! fence, an accumulate or compare-and-swap a copy-and-combine under the target's
//! accumulate lock. No datatype walk, packing, segment list or allocation.
//!
//! Every function runs under the library lock ([`crate::api::direct`]) and returns false
//! when the call does not qualify (another window flavor, a target on another node, a derived
//! or pair type, an argument the general path must report on); the caller then takes the
//! general path, which validates everything. It never reports an error: a call either
//! completes here or is left, untouched, to the general path.

use std::os::raw::{c_int, c_void};

use kestrel_pml::op::Dtype;
use kestrel_pml::rma::{AccOp, DirectView};

use crate::state::Core;
use crate::types;

/// `MPI_REPLACE` and `MPI_NO_OP`.
const OP_REPLACE: c_int = 0x5800_000d;
const OP_NO_OP: c_int = 0x5800_000e;

/// The element size, reduction element type and bytes of `count` elements of `dt` when
/// origin and target agree on a predefined, contiguous, non-pair type.
fn simple(
    count: i64,
    dt: c_int,
    target_count: i64,
    target_dt: c_int,
) -> Option<(usize, Option<Dtype>, usize)> {
    if dt != target_dt || count != target_count || count < 0 {
        return None;
    }
    let (size, d) = types::contiguous_scalar(dt)?;
    Some((size, d, size.checked_mul(usize::try_from(count).ok()?)?))
}

/// The operation and element type of an accumulate on a type of `size`-byte elements whose
/// reduction type is `d`.
fn acc_op(op: c_int, d: Option<Dtype>, size: usize) -> Option<(AccOp, Dtype)> {
    match op {
        OP_REPLACE => Some((AccOp::Replace, d.unwrap_or(Dtype::Opaque(size as u32)))),
        OP_NO_OP => Some((AccOp::NoOp, d.unwrap_or(Dtype::Opaque(size as u32)))),
        _ => {
            let p = crate::coll::predefined_op(op)?;
            let d = d?;
            p.applies_to(d).then_some((AccOp::Reduce(p), d))
        }
    }
}

fn bytes<'a>(p: *const c_void, n: usize) -> Option<&'a [u8]> {
    if n == 0 {
        return Some(&[]);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: the calling MPI function's contract: `p` holds the `n` bytes of its
    // contiguous predefined elements, unchanged for the call (it is copied before return).
    Some(unsafe { std::slice::from_raw_parts(p as *const u8, n) })
}

fn bytes_mut<'a>(p: *mut c_void, n: usize) -> Option<&'a mut [u8]> {
    if n == 0 {
        return Some(&mut []);
    }
    if p.is_null() {
        return None;
    }
    // SAFETY: as `bytes`, for a result buffer the program lends the call to write; a direct
    // operation completes before the call returns, so nothing writes it later.
    Some(unsafe { std::slice::from_raw_parts_mut(p as *mut u8, n) })
}

/// The origin's `n` bytes of an accumulate (none for `MPI_NO_OP`, whose origin buffer MPI
/// ignores).
fn operand<'a>(acc: AccOp, origin: *const c_void, n: usize) -> Option<&'a [u8]> {
    if acc == AccOp::NoOp {
        Some(&[])
    } else {
        bytes(origin, n)
    }
}

/// The window's direct view and the bytes of a put or get that qualifies.
fn transfer(
    core: &Core,
    count: i64,
    dt: c_int,
    target_count: i64,
    target_dt: c_int,
    win: c_int,
) -> Option<(&DirectView, usize)> {
    let view = core.win(win).ok()?.direct.as_ref()?;
    Some((view, simple(count, dt, target_count, target_dt)?.2))
}

/// `MPI_Put`: a bounds check and a copy.
#[allow(clippy::too_many_arguments)]
pub(super) fn put(
    core: &Core,
    origin: *const c_void,
    count: i64,
    dt: c_int,
    target: c_int,
    disp: isize,
    target_count: i64,
    target_dt: c_int,
    win: c_int,
) -> bool {
    let Some((view, n)) = transfer(core, count, dt, target_count, target_dt, win) else {
        return false;
    };
    bytes(origin, n).is_some_and(|data| view.put(target, disp, data))
}

/// `MPI_Get`: a bounds check and a copy.
#[allow(clippy::too_many_arguments)]
pub(super) fn get(
    core: &Core,
    origin: *mut c_void,
    count: i64,
    dt: c_int,
    target: c_int,
    disp: isize,
    target_count: i64,
    target_dt: c_int,
    win: c_int,
) -> bool {
    let Some((view, n)) = transfer(core, count, dt, target_count, target_dt, win) else {
        return false;
    };
    bytes_mut(origin, n).is_some_and(|out| view.get(target, disp, out))
}

/// `MPI_Win_flush`, `_all` (`target` `None`) and the `_local` forms of a window whose
/// members are all on this node: a memory fence. False otherwise.
pub(super) fn flush(core: &Core, win: c_int, target: Option<c_int>) -> bool {
    core.win(win)
        .ok()
        .and_then(|w| w.direct.as_ref())
        .is_some_and(|view| view.flush(target))
}

/// `MPI_Accumulate` (`result` null) and `MPI_Get_accumulate` / `MPI_Fetch_and_op`: origin,
/// result and target all `count` elements of `dt`, under the target's accumulate lock.
#[allow(clippy::too_many_arguments)]
pub(super) fn accumulate(
    core: &Core,
    origin: *const c_void,
    result: *mut c_void,
    fetch: bool,
    count: i64,
    dt: c_int,
    target: c_int,
    disp: isize,
    op: c_int,
    win: c_int,
) -> bool {
    let acc = || {
        let view = core.win(win).ok()?.direct.as_ref()?;
        let (size, d, n) = simple(count, dt, count, dt)?;
        let (acc, d) = acc_op(op, d, size)?;
        if acc == AccOp::NoOp && !fetch {
            return None;
        }
        let data = operand(acc, origin, n)?;
        let old = if fetch {
            Some(bytes_mut(result, n)?)
        } else {
            None
        };
        Some(view.accumulate(target, disp, n, acc, d, data, old))
    };
    acc().unwrap_or(false)
}

/// `MPI_Fetch_and_op`: one element of `dt`, under the target's accumulate lock (the sums
/// of the common types through a kernel of their own, [`DirectView::fetch_and_op`]).
#[allow(clippy::too_many_arguments)]
pub(super) fn fetch_and_op(
    core: &Core,
    origin: *const c_void,
    result: *mut c_void,
    dt: c_int,
    target: c_int,
    disp: isize,
    op: c_int,
    win: c_int,
) -> bool {
    let fop = || {
        let view = core.win(win).ok()?.direct.as_ref()?;
        let (size, d) = types::contiguous_scalar(dt)?;
        let (acc, d) = acc_op(op, d, size)?;
        let data = operand(acc, origin, size)?;
        Some(view.fetch_and_op(target, disp, acc, d, data, bytes_mut(result, size)?))
    };
    fop().unwrap_or(false)
}

/// `MPI_Compare_and_swap`: one element of `dt`, under the target's accumulate lock.
#[allow(clippy::too_many_arguments)]
pub(super) fn compare_and_swap(
    core: &Core,
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    dt: c_int,
    target: c_int,
    disp: isize,
    win: c_int,
) -> bool {
    let cas = || {
        let view = core.win(win).ok()?.direct.as_ref()?;
        let n = simple(1, dt, 1, dt)?.2;
        let (swap, cmp, old) = (bytes(origin, n)?, bytes(compare, n)?, bytes_mut(result, n)?);
        Some(view.compare_and_swap(target, disp, cmp, swap, old))
    };
    cas().unwrap_or(false)
}
