//! The short path of the small nonblocking barrier, bcast and allreduce: when the
//! communicator's node segment would run the collective as one posted round
//! ([`kestrel_pml::Engine::nbc_posted_start`]) and the buffers are `count` elements of a
//! predefined contiguous type (with a predefined operation that applies to it), the call
//! hands the program's buffers to the engine as they are: no argument plan, no schedule
//! built step by step, no copy of the contribution.
//!
//! Every function returns `Ok(None)` when the call does not qualify (an inter-communicator,
//! a derived or pair type, a user operation, an empty or missing buffer, an argument the
//! general path must report on), and the caller takes the general path, which validates
//! everything; the engine draws nothing then, so members may take either path. The only
//! error reported here is one the engine finds in the communicator (a failed peer).

use std::os::raw::{c_int, c_void};

use kestrel_pml::buf::UserBuf;
use kestrel_pml::nbc::PostedColl;

use super::coll::in_place;
use super::coll_short::{contiguous, intra, reduction};
use crate::coll::coll_err;
use crate::error::MpiResult;
use crate::requests::{ReqRec, ReqState};
use crate::state::Core;

/// Starts `coll` on the intra-communicator `comm` if it is one posted round.
fn start(core: &mut Core, comm: c_int, coll: PostedColl) -> MpiResult<Option<ReqRec>> {
    let Some((ctx, _, _)) = intra(core, comm) else {
        return Ok(None);
    };
    let Some(id) = core.engine.nbc_posted_start(ctx, coll).map_err(coll_err)? else {
        return Ok(None);
    };
    let mut rec = ReqRec::new(comm, ctx, false);
    rec.state = ReqState::Active(id);
    Ok(Some(rec))
}

/// `MPI_Ibarrier`.
pub(super) fn barrier(core: &mut Core, comm: c_int) -> MpiResult<Option<ReqRec>> {
    start(core, comm, PostedColl::Barrier)
}

/// `MPI_Ibcast`.
///
/// # Safety
/// `buffer` holds `count` elements of `datatype` until the request completes (the contract
/// of `MPI_Ibcast`).
pub(super) unsafe fn bcast(
    core: &mut Core,
    buffer: *mut c_void,
    count: i64,
    datatype: c_int,
    root: c_int,
    comm: c_int,
) -> MpiResult<Option<ReqRec>> {
    let (Some((len, _)), Ok(root)) = (contiguous(count, datatype), u32::try_from(root)) else {
        return Ok(None);
    };
    if buffer.is_null() || in_place(buffer) {
        return Ok(None);
    }
    // SAFETY: `len` bytes at `buffer`, valid (and read at the root, written elsewhere) until
    // completion (caller).
    let buf = unsafe { UserBuf::for_recv(buffer.cast(), len) };
    start(core, comm, PostedColl::Bcast { root, buf })
}

/// `MPI_Iallreduce`.
///
/// # Safety
/// `recvbuf`, and `sendbuf` unless it is `MPI_IN_PLACE`, hold `count` elements of
/// `datatype` until the request completes (the contract of `MPI_Iallreduce`).
pub(super) unsafe fn allreduce(
    core: &mut Core,
    sendbuf: *const c_void,
    recvbuf: *mut c_void,
    count: i64,
    datatype: c_int,
    op: c_int,
    comm: c_int,
) -> MpiResult<Option<ReqRec>> {
    let Some((len, op, dtype)) = reduction(count, datatype, op) else {
        return Ok(None);
    };
    if recvbuf.is_null() || in_place(recvbuf) || sendbuf.is_null() || sendbuf == recvbuf {
        return Ok(None);
    }
    // SAFETY: `len` bytes at each buffer, valid until completion (caller); the receive
    // buffer is written, the send buffer only read.
    let (send, recv) = unsafe {
        (
            (!in_place(sendbuf)).then(|| UserBuf::for_send(sendbuf.cast(), len)),
            UserBuf::for_recv(recvbuf.cast(), len),
        )
    };
    start(
        core,
        comm,
        PostedColl::Allreduce {
            send,
            recv,
            dtype,
            op,
        },
    )
}
