//! The node-local fast path of the one-sided operations: when the target shares the window's
//! memory on this node (windows of `MPI_Win_allocate` and `MPI_Win_allocate_shared`) and
//! origin and target use the same predefined datatype and count, the call works on the
//! node's mapping through the [`DirectView`] the window record keeps, without the engine:
//! a put or a get is a bounds check and a copy, a flush of an all-local window a memory
//! fence, an accumulate or compare-and-swap a copy-and-combine under the target's
//! accumulate lock. No datatype walk, packing, segment list or allocation.
//!
//! Every function returns `None` when the call does not qualify (another window flavor, a
//! target on another node, a derived or pair type, an argument the general path must report
//! on); the caller then takes the general path, which validates everything. It must never
//! report an error the general path would report differently.

use std::os::raw::{c_int, c_void};

use kestrel_pml::op::Dtype;
use kestrel_pml::rma::{AccOp, DirectView};

use crate::error::MpiResult;
use crate::state::Core;
use crate::types;

/// `MPI_REPLACE` and `MPI_NO_OP`.
const OP_REPLACE: c_int = 0x5800_000d;
const OP_NO_OP: c_int = 0x5800_000e;

/// Bytes of `count` elements of `dt` when origin and target agree on a predefined,
/// contiguous, non-pair type.
fn simple(count: i64, dt: c_int, target_count: i64, target_dt: c_int) -> Option<usize> {
    if dt != target_dt || count != target_count || count < 0 {
        return None;
    }
    let t = types::predefined(dt)?;
    if t.pair.is_some() || t.size == 0 || t.ub - t.lb != t.size as isize {
        return None;
    }
    t.size.checked_mul(usize::try_from(count).ok()?)
}

/// The operation and element type of an accumulate on predefined type `dt`.
fn acc_op(op: c_int, dt: c_int, size: usize) -> Option<(AccOp, Dtype)> {
    let d = types::reduction_type(dt);
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
    Some((view, simple(count, dt, target_count, target_dt)?))
}

/// `MPI_Put`: a bounds check and a copy.
#[allow(clippy::too_many_arguments)]
pub(super) fn put(
    core: &mut Core,
    origin: *const c_void,
    count: i64,
    dt: c_int,
    target: c_int,
    disp: isize,
    target_count: i64,
    target_dt: c_int,
    win: c_int,
) -> Option<MpiResult<()>> {
    let (view, n) = transfer(core, count, dt, target_count, target_dt, win)?;
    view.put(target, disp, bytes(origin, n)?).then_some(Ok(()))
}

/// `MPI_Get`: a bounds check and a copy.
#[allow(clippy::too_many_arguments)]
pub(super) fn get(
    core: &mut Core,
    origin: *mut c_void,
    count: i64,
    dt: c_int,
    target: c_int,
    disp: isize,
    target_count: i64,
    target_dt: c_int,
    win: c_int,
) -> Option<MpiResult<()>> {
    let (view, n) = transfer(core, count, dt, target_count, target_dt, win)?;
    view.get(target, disp, bytes_mut(origin, n)?)
        .then_some(Ok(()))
}

/// `MPI_Win_flush`, `_all` (`target` `None`) and the `_local` forms of a window whose
/// members are all on this node: a memory fence. `None` otherwise.
pub(super) fn flush(core: &mut Core, win: c_int, target: Option<c_int>) -> Option<MpiResult<()>> {
    let view = core.win(win).ok()?.direct.as_ref()?;
    view.flush(target).then_some(Ok(()))
}

/// `MPI_Accumulate` (`result` null) and `MPI_Get_accumulate` / `MPI_Fetch_and_op`: origin,
/// result and target all `count` elements of `dt`, under the target's accumulate lock.
#[allow(clippy::too_many_arguments)]
pub(super) fn accumulate(
    core: &mut Core,
    origin: *const c_void,
    result: *mut c_void,
    fetch: bool,
    count: i64,
    dt: c_int,
    target: c_int,
    disp: isize,
    op: c_int,
    win: c_int,
) -> Option<MpiResult<()>> {
    let view = core.win(win).ok()?.direct.as_ref()?;
    let n = simple(count, dt, count, dt)?;
    let size = n / usize::try_from(count).ok()?.max(1);
    let (acc, d) = acc_op(op, dt, size)?;
    if acc == AccOp::NoOp && !fetch {
        return None;
    }
    let data = if acc == AccOp::NoOp {
        &[][..]
    } else {
        bytes(origin, n)?
    };
    let old = if fetch {
        Some(bytes_mut(result, n)?)
    } else {
        None
    };
    view.accumulate(target, disp, n, acc, d, data, old)
        .then_some(Ok(()))
}

/// `MPI_Compare_and_swap`: one element of `dt`, under the target's accumulate lock.
#[allow(clippy::too_many_arguments)]
pub(super) fn compare_and_swap(
    core: &mut Core,
    origin: *const c_void,
    compare: *const c_void,
    result: *mut c_void,
    dt: c_int,
    target: c_int,
    disp: isize,
    win: c_int,
) -> Option<MpiResult<()>> {
    let view = core.win(win).ok()?.direct.as_ref()?;
    let n = simple(1, dt, 1, dt)?;
    let (swap, cmp, old) = (bytes(origin, n)?, bytes(compare, n)?, bytes_mut(result, n)?);
    view.compare_and_swap(target, disp, cmp, swap, old)
        .then_some(Ok(()))
}
