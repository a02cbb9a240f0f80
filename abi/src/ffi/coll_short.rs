//! The short path of the blocking `MPI_Bcast`, `MPI_Reduce`, `MPI_Allreduce`,
//! `MPI_Allgather`, `MPI_Alltoall`, `MPI_Gather` and `MPI_Scatter` on intra-communicators: `count` elements of a predefined contiguous type (and a predefined
//! operation that applies to it) go to the engine as the program's bytes, with no `Region`,
//! no reduction view and no copy. The engine calls are the very ones the general path
//! (`crate::coll`) makes for such buffers, so members may take either path.
//!
//! Every function returns `None` when the call does not qualify (an inter-communicator, a
//! derived or pair type, a user operation, no data, a null or aliased buffer, an in-place
//! reduction, a root outside the communicator: anything the general path must check or
//! report), having done nothing; the caller then takes the general path. Once the engine is
//! called its result is the call's.

use std::os::raw::{c_int, c_void};

use kestrel_pml::op::{Dtype, Reduction};

use super::coll::in_place;
use crate::coll::{self, coll_err};
use crate::error::MpiResult;
use crate::state::Core;
use crate::types;

/// Bytes of `count` elements of `datatype` when it is a predefined contiguous type, with its
/// reduction element type; `None` for anything else and for no data.
pub(super) fn contiguous(count: i64, datatype: c_int) -> Option<(usize, Option<Dtype>)> {
    let (size, d) = types::contiguous_scalar(datatype)?;
    let n = usize::try_from(count).ok().filter(|&n| n > 0)?;
    Some((size.checked_mul(n)?, d))
}

/// The context, rank and size of the intra-communicator `comm`.
pub(super) fn intra(core: &Core, comm: c_int) -> Option<(u16, u32, u32)> {
    let c = core.comm(comm).ok()?;
    (!c.is_inter()).then(|| (c.ctx, c.rank as u32, c.size() as u32))
}

/// The bytes of `count` elements of `datatype` and the reduction `op` on them, when the type
/// is predefined and contiguous and the operation predefined and defined for it.
pub(super) fn reduction(
    count: i64,
    datatype: c_int,
    op: c_int,
) -> Option<(usize, Reduction, Dtype)> {
    let (len, d) = contiguous(count, datatype)?;
    let d = d?;
    let p = coll::predefined_op(op).filter(|p| p.applies_to(d))?;
    Some((len, Reduction::Predefined(p), d))
}

/// `MPI_Bcast`.
///
/// # Safety
/// `buffer` holds `count` elements of `datatype` (the contract of `MPI_Bcast`).
pub(super) unsafe fn bcast(
    core: &mut Core,
    buffer: *mut c_void,
    count: i64,
    datatype: c_int,
    root: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let (len, _) = contiguous(count, datatype)?;
    let (ctx, _, n) = intra(core, comm)?;
    let root = u32::try_from(root).ok().filter(|&r| r < n)?;
    if buffer.is_null() || in_place(buffer) {
        return None;
    }
    // SAFETY: `len` bytes at `buffer` (caller), used only during this call.
    let buf = unsafe { std::slice::from_raw_parts_mut(buffer.cast::<u8>(), len) };
    Some(core.engine.coll_bcast(ctx, root, buf).map_err(coll_err))
}

/// `MPI_Reduce` (not in place).
///
/// # Safety
/// `sendbuf`, and `recvbuf` at the root, hold `count` elements of `datatype` (the contract
/// of `MPI_Reduce`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn reduce(
    core: &mut Core,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    root: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let (len, red, d) = reduction(count, datatype, op)?;
    let (ctx, me, n) = intra(core, comm)?;
    let root = u32::try_from(root).ok().filter(|&r| r < n)?;
    if sendbuf.is_null() || in_place(sendbuf) {
        return None;
    }
    let at_root = me == root;
    if at_root && (recvbuf.is_null() || in_place(recvbuf) || sendbuf == recvbuf.cast_const()) {
        return None;
    }
    // SAFETY: `len` bytes at `sendbuf` (caller), read during this call only.
    let input = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), len) };
    // SAFETY: at the root, `len` bytes at `recvbuf` (caller), not overlapping `sendbuf`
    // (MPI forbids aliasing them; the same start address is declined above), written during
    // this call only.
    let out = at_root.then(|| unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), len) });
    Some(
        core.engine
            .coll_reduce(ctx, root, input, out, d, &red)
            .map_err(coll_err),
    )
}

/// `MPI_Allreduce`; in place for at most [`IN_PLACE_MAX`] bytes.
///
/// # Safety
/// `recvbuf`, and `sendbuf` unless it is `MPI_IN_PLACE`, hold `count` elements of
/// `datatype` (the contract of `MPI_Allreduce`).
pub(super) unsafe fn allreduce(
    core: &mut Core,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let (len, red, d) = reduction(count, datatype, op)?;
    let (ctx, _, _) = intra(core, comm)?;
    if recvbuf.is_null()
        || in_place(recvbuf)
        || sendbuf.is_null()
        || sendbuf == recvbuf.cast_const()
    {
        return None;
    }
    // SAFETY: `len` bytes at `recvbuf` (caller), written during this call only.
    let out = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), len) };
    if in_place(sendbuf) {
        if len > IN_PLACE_MAX {
            return None;
        }
        // The contribution is the receive buffer's contents: a copy on the stack.
        let mut mine = [0u8; IN_PLACE_MAX];
        mine[..len].copy_from_slice(out);
        return Some(
            core.engine
                .coll_allreduce(ctx, &mine[..len], out, d, &red)
                .map_err(coll_err),
        );
    }
    // SAFETY: `len` bytes at `sendbuf` (caller), not overlapping `recvbuf` (MPI forbids
    // aliasing them; the same start address is declined above), read during this call only.
    let input = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), len) };
    Some(
        core.engine
            .coll_allreduce(ctx, input, out, d, &red)
            .map_err(coll_err),
    )
}

/// The buffers of `MPI_Allgather` and `MPI_Alltoall` as the engine takes them: the context,
/// this member's send bytes (one block, or `n` blocks when `send_all`) and the `n` blocks of
/// the receive buffer; `None` when a type is not predefined and contiguous, the blocks differ
/// in size, `comm` is an inter-communicator, or a buffer is null, `MPI_IN_PLACE` or
/// overlapping the other (all left to the general path).
///
/// # Safety
/// The buffers hold what the counts describe (the contract of both calls), and stay
/// untouched by anyone else for `'a` (the call).
unsafe fn rootless<'a>(
    core: &Core,
    (sendbuf, sendcount, sendtype): (*const c_void, i64, c_int),
    (recvbuf, recvcount, recvtype): (*mut c_void, i64, c_int),
    comm: c_int,
    send_all: bool,
) -> Option<(u16, &'a [u8], &'a mut [u8])> {
    let (block, _) = contiguous(sendcount, sendtype)?;
    if contiguous(recvcount, recvtype)?.0 != block {
        return None;
    }
    let (ctx, _, n) = intra(core, comm)?;
    let len = block.checked_mul(n as usize)?;
    let send_len = if send_all { len } else { block };
    if sendbuf.is_null() || in_place(sendbuf) || recvbuf.is_null() {
        return None;
    }
    if overlap((sendbuf, send_len), (recvbuf.cast_const(), len)) {
        return None;
    }
    // SAFETY: `send_len` bytes at `sendbuf` and `len` at `recvbuf` (caller), which do not
    // overlap (checked above); read and written during this call only.
    Some(unsafe {
        (
            ctx,
            std::slice::from_raw_parts(sendbuf.cast::<u8>(), send_len),
            std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), len),
        )
    })
}

/// `MPI_Alltoall` (not in place).
///
/// # Safety
/// `sendbuf` holds `size` blocks of `sendcount` elements of `sendtype`, `recvbuf` as many of
/// `recvcount` elements of `recvtype` (the contract of `MPI_Alltoall`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn alltoall(
    core: &mut Core,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let send = (sendbuf, sendcount, sendtype);
    let recv = (recvbuf, recvcount, recvtype);
    // SAFETY: the caller's contract is `rootless`'s.
    let (ctx, send, recv) = unsafe { rootless(core, send, recv, comm, true) }?;
    Some(core.engine.coll_alltoall(ctx, send, recv).map_err(coll_err))
}

/// `MPI_Allgather` (not in place): the engine's equal-block allgather, as the general path
/// takes for `MPI_Allgather` too.
///
/// # Safety
/// `sendbuf` holds `sendcount` elements of `sendtype`, `recvbuf` `size` blocks of
/// `recvcount` elements of `recvtype` (the contract of `MPI_Allgather`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn allgather(
    core: &mut Core,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let send = (sendbuf, sendcount, sendtype);
    let recv = (recvbuf, recvcount, recvtype);
    // SAFETY: the caller's contract is `rootless`'s.
    let (ctx, send, recv) = unsafe { rootless(core, send, recv, comm, false) }?;
    Some(
        core.engine
            .coll_allgather(ctx, send, recv)
            .map_err(coll_err),
    )
}

/// A rooted collective's context, rank, size, root and this member's block.
struct Rooted {
    ctx: u16,
    me: u32,
    n: u32,
    root: u32,
    block: usize,
}

/// [`Rooted`] for `comm` and `root` with this member's block of `count` elements of
/// `datatype` at `buf`, which must be a real buffer (not null, not in place).
fn rooted(
    core: &Core,
    comm: c_int,
    root: c_int,
    count: i64,
    datatype: c_int,
    buf: *const c_void,
) -> Option<Rooted> {
    let (block, _) = contiguous(count, datatype)?;
    let (ctx, me, n) = intra(core, comm)?;
    let root = u32::try_from(root).ok().filter(|&r| r < n)?;
    (!buf.is_null() && !in_place(buf)).then_some(Rooted {
        ctx,
        me,
        n,
        root,
        block,
    })
}

/// Whether two (address, length) ranges share a byte.
fn overlap(a: (*const c_void, usize), b: (*const c_void, usize)) -> bool {
    let (a0, b0) = (a.0 as usize, b.0 as usize);
    a0 < b0 + b.1 && b0 < a0 + a.1
}

/// `MPI_Gather` (not in place): `sendcount` elements of `sendtype` from every rank, into
/// `recvbuf` at the root, whose `recvcount` elements of `recvtype` must be as many bytes.
///
/// # Safety
/// `sendbuf` holds `sendcount` elements of `sendtype`, and `recvbuf` at the root `n` blocks
/// of `recvcount` elements of `recvtype` (the contract of `MPI_Gather`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn gather(
    core: &mut Core,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let Rooted {
        ctx,
        me,
        n,
        root,
        block,
    } = rooted(core, comm, root, sendcount, sendtype, sendbuf)?;
    // SAFETY: `block` bytes at `sendbuf` (caller), read during this call only.
    let send = unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), block) };
    if me != root {
        return Some(
            core.engine
                .coll_gather(ctx, root, send, None)
                .map_err(coll_err),
        );
    }
    let total = block.checked_mul(n as usize)?;
    if contiguous(recvcount, recvtype)?.0 != block || recvbuf.is_null() {
        return None;
    }
    if overlap((sendbuf, block), (recvbuf.cast_const(), total)) {
        return None;
    }
    // SAFETY: `total` bytes at `recvbuf` (caller), not overlapping `send` (checked above),
    // written during this call only.
    let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), total) };
    Some(
        core.engine
            .coll_gather(ctx, root, send, Some(recv))
            .map_err(coll_err),
    )
}

/// `MPI_Scatter` (not in place): `sendcount` elements of `sendtype` per rank from `sendbuf` at
/// the root, into every rank's `recvbuf` of `recvcount` elements of `recvtype`.
///
/// # Safety
/// `sendbuf` at the root holds `n` blocks of `sendcount` elements of `sendtype`, and
/// `recvbuf` `recvcount` elements of `recvtype` (the contract of `MPI_Scatter`).
#[allow(clippy::too_many_arguments)]
pub(super) unsafe fn scatter(
    core: &mut Core,
    sendbuf: *const c_void,
    sendcount: i64,
    sendtype: c_int,
    recvbuf: *mut c_void,
    recvcount: i64,
    recvtype: c_int,
    root: c_int,
    comm: c_int,
) -> Option<MpiResult<()>> {
    let Rooted {
        ctx,
        me,
        n,
        root,
        block,
    } = rooted(core, comm, root, recvcount, recvtype, recvbuf.cast_const())?;
    let send = if me == root {
        let total = block.checked_mul(n as usize)?;
        if contiguous(sendcount, sendtype)?.0 != block || sendbuf.is_null() {
            return None;
        }
        if overlap((sendbuf, total), (recvbuf.cast_const(), block)) {
            return None;
        }
        // SAFETY: `total` bytes at `sendbuf` (caller), read during this call only and not
        // overlapping `recvbuf` (checked above).
        Some(unsafe { std::slice::from_raw_parts(sendbuf.cast::<u8>(), total) })
    } else {
        None
    };
    // SAFETY: `block` bytes at `recvbuf` (caller), written during this call only.
    let recv = unsafe { std::slice::from_raw_parts_mut(recvbuf.cast::<u8>(), block) };
    Some(
        core.engine
            .coll_scatter(ctx, root, send, recv)
            .map_err(coll_err),
    )
}

/// The largest in-place allreduce the short path copies on the stack.
const IN_PLACE_MAX: usize = 256;
