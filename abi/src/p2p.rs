//! Point-to-point calls: argument checks, send modes, buffered sends, probes.
//!
//! This module owns the MPI meaning of ranks and tags (`MPI_PROC_NULL`, `MPI_ANY_SOURCE`,
//! `MPI_ANY_TAG`, the tag upper bound), the four send modes, and the buffered-send area
//! of `MPI_Buffer_attach`. It works on [`Region`]s the entry points built; it never
//! touches raw pointers and never raises errors through handlers.

use std::os::raw::c_int;

use kestrel_pml::buf::UserBuf;
use kestrel_pml::engine::Engine;

use crate::blocking::{wait_engine, wait_rec, Begun, BlockingStart, Waiter};

use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem::{self, Region, St};
use crate::requests::{self, Mode, ReqRec, ReqState};
use crate::state::{CommRec, Core, Locked, MsgRec};

/// `MPI_PROC_NULL`.
pub const PROC_NULL: c_int = -1;
/// `MPI_ANY_SOURCE`.
pub const ANY_SOURCE: c_int = crate::mem::ANY_SOURCE;
/// `MPI_ANY_TAG`.
pub const ANY_TAG: c_int = -1;
/// The largest tag (`MPI_TAG_UB`): the engine carries 31-bit tags.
pub const TAG_UB: c_int = i32::MAX;
/// `MPI_BSEND_OVERHEAD`: what each buffered message costs in the attached buffer on top of
/// its data (MPICH's value, which programs size their buffers with).
pub const BSEND_OVERHEAD: usize = 96;

/// What point-to-point ranks of `c` number, for messages.
fn scope(c: &CommRec) -> &'static str {
    if c.is_inter() {
        "the remote group (ranks on an inter-communicator name remote processes)"
    } else {
        "a communicator"
    }
}

/// A checked destination (a remote rank on an inter-communicator): `None` for
/// `MPI_PROC_NULL`.
#[inline(always)]
pub fn dest_rank(c: &CommRec, dest: c_int) -> MpiResult<Option<u32>> {
    if dest == PROC_NULL {
        return Ok(None);
    }
    let n = c.peer_count();
    if dest < 0 || dest >= n {
        return Err(MpiError::new(
            error::ERR_RANK,
            format!(
                "rank {dest} is outside {} of {n} ranks; use 0..{} or MPI_PROC_NULL",
                scope(c),
                n - 1
            ),
        ));
    }
    Ok(Some(dest as u32))
}

/// A checked source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// `MPI_PROC_NULL`.
    Null,
    /// `MPI_ANY_SOURCE`.
    Any,
    /// A rank.
    Rank(u32),
}

impl Source {
    /// The engine's selector (`None` = any).
    pub fn selector(self) -> Option<u32> {
        match self {
            Source::Rank(r) => Some(r),
            _ => None,
        }
    }
}

/// Checks a source rank.
#[inline(always)]
pub fn source_rank(c: &CommRec, source: c_int) -> MpiResult<Source> {
    match source {
        PROC_NULL => Ok(Source::Null),
        ANY_SOURCE => Ok(Source::Any),
        s if s >= 0 && s < c.peer_count() => Ok(Source::Rank(s as u32)),
        s => Err(MpiError::new(
            error::ERR_RANK,
            format!(
                "source rank {s} is outside {} of {} ranks; use 0..{}, MPI_ANY_SOURCE or MPI_PROC_NULL",
                scope(c),
                c.peer_count(),
                c.peer_count() - 1
            ),
        )),
    }
}

/// Checks a send tag.
#[inline(always)]
pub fn send_tag(tag: c_int) -> MpiResult<c_int> {
    if tag < 0 {
        return Err(MpiError::new(
            error::ERR_TAG,
            format!("tag {tag} is negative; send tags are 0..MPI_TAG_UB"),
        ));
    }
    Ok(tag)
}

/// Checks a receive tag (`None` = `MPI_ANY_TAG`).
#[inline(always)]
pub fn recv_tag(tag: c_int) -> MpiResult<Option<c_int>> {
    match tag {
        ANY_TAG => Ok(None),
        t if t >= 0 => Ok(Some(t)),
        t => Err(MpiError::new(
            error::ERR_TAG,
            format!("tag {t} is negative; receive tags are 0..MPI_TAG_UB or MPI_ANY_TAG"),
        )),
    }
}

/// The context and rank of a send in its common form: a real rank and a valid tag.
#[inline(always)]
fn plain_dest(c: &CommRec, dest: c_int, tag: c_int) -> Option<(u16, u32)> {
    (dest >= 0 && dest < c.peer_count() && tag >= 0).then_some((c.ctx, dest as u32))
}

/// The context and selectors of a receive in its common form: a real rank or
/// `MPI_ANY_SOURCE`, a valid tag or `MPI_ANY_TAG`.
#[inline(always)]
fn plain_match(
    c: &CommRec,
    source: c_int,
    tag: c_int,
) -> Option<(u16, Option<u32>, Option<c_int>)> {
    let source = match source {
        ANY_SOURCE => None,
        s if s >= 0 && s < c.peer_count() => Some(s as u32),
        _ => return None,
    };
    let tag = match tag {
        ANY_TAG => None,
        t if t >= 0 => Some(t),
        _ => return None,
    };
    Some((c.ctx, source, tag))
}

/// `MPI_Send` in its common form (see [`isend_plain`]), started for
/// [`crate::api::call_blocking`] (which finishes it with [`sent`]); `None` when the arguments
/// are anything else, before anything was sent: the caller takes the general path ([`send`]).
pub struct PlainSend {
    /// The communicator handle.
    pub comm: c_int,
    /// The contiguous bytes.
    pub span: UserBuf,
    /// The destination rank.
    pub dest: c_int,
    /// The tag.
    pub tag: c_int,
}

impl BlockingStart for PlainSend {
    #[inline(always)]
    fn start(self, core: &mut Core) -> Option<Begun> {
        let (ctx, dest) = plain_dest(core.comm(self.comm).ok()?, self.dest, self.tag)?;
        let id = core
            .engine
            .isend(ctx, dest, self.tag, self.span, false)
            .ok()?;
        Some(if id == kestrel_pml::engine::DONE {
            Begun::Done(Ok(()))
        } else {
            Begun::Waiting(id)
        })
    }
}

/// `MPI_Recv` in its common form (see [`irecv_plain`]), started for
/// [`crate::api::call_blocking`]; `None` as for [`PlainSend`].
#[inline(always)]
pub fn recv_plain(
    core: &mut Core,
    comm: c_int,
    span: UserBuf,
    source: c_int,
    tag: c_int,
) -> Option<Begun> {
    let (ctx, source, tag) = plain_match(core.comm(comm).ok()?, source, tag)?;
    let id = core.engine.irecv(ctx, source, tag, span).ok()?;
    Some(Begun::Waiting(id))
}

/// `MPI_Isend` in its common form, in one pass: contiguous bytes of a predefined type
/// ([`crate::mem::plain_span`]) to a real rank with a valid tag. `None` when the arguments
/// are anything else or the engine refuses: the caller then takes the general path
/// ([`start_send`]), which reports the error. Returns the request's handle.
#[inline(always)]
pub fn isend_plain(
    core: &mut Core,
    comm: c_int,
    span: UserBuf,
    dest: c_int,
    tag: c_int,
) -> Option<c_int> {
    let (ctx, dest) = plain_dest(core.comm(comm).ok()?, dest, tag)?;
    let id = core.engine.isend(ctx, dest, tag, span, false).ok()?;
    if id == kestrel_pml::engine::DONE {
        return Some(handle::COMPLETED_SEND);
    }
    Some(core.insert_request(ReqRec {
        state: ReqState::Active(id),
        comm,
        ctx,
        recv: false,
        extra: None,
    }))
}

/// `MPI_Irecv` in its common form (see [`isend_plain`]): a real rank or `MPI_ANY_SOURCE`,
/// a valid tag or `MPI_ANY_TAG`. Returns the request's handle.
#[inline(always)]
pub fn irecv_plain(
    core: &mut Core,
    comm: c_int,
    span: UserBuf,
    source: c_int,
    tag: c_int,
) -> Option<c_int> {
    let (ctx, source, tag) = plain_match(core.comm(comm).ok()?, source, tag)?;
    let id = core.engine.irecv(ctx, source, tag, span).ok()?;
    Some(core.insert_request(ReqRec {
        state: ReqState::Active(id),
        comm,
        ctx,
        recv: true,
        extra: None,
    }))
}

/// Starts a send; the request may already be complete.
pub fn start_send(
    core: &mut Core,
    comm: c_int,
    region: &Region,
    dest: c_int,
    tag: c_int,
    mode: Mode,
) -> MpiResult<ReqRec> {
    let c = core.comm(comm)?;
    let ctx = c.ctx;
    let dest = dest_rank(c, dest)?;
    let tag = send_tag(tag)?;
    let Some(dest) = dest else {
        return Ok(ReqRec::done(comm, ctx, St::empty(PROC_NULL)));
    };
    match mode {
        Mode::Buffered => {
            bsend(core, ctx, dest, tag, region)?;
            Ok(ReqRec::done(comm, ctx, St::default()))
        }
        Mode::Sync => requests::start_send(&mut core.engine, comm, ctx, dest, tag, region, true),
        Mode::Standard | Mode::Ready => {
            requests::start_send(&mut core.engine, comm, ctx, dest, tag, region, false)
        }
    }
}

/// `MPI_Send` and the other blocking sends.
pub fn send(
    l: &mut Locked,
    comm: c_int,
    region: &Region,
    dest: c_int,
    tag: c_int,
    mode: Mode,
) -> MpiResult<()> {
    let core = l.core()?;
    if region.is_contiguous() && mode != Mode::Buffered {
        // The common case without a request record: the engine sends the user's memory.
        let c = core.comm(comm)?;
        let ctx = c.ctx;
        let dest = dest_rank(c, dest)?;
        let tag = send_tag(tag)?;
        let Some(dest) = dest else { return Ok(()) };
        let id = core
            .engine
            .isend(ctx, dest, tag, region.span, mode == Mode::Sync)
            .map_err(error::pml(error::ERR_RANK))?;
        if id != kestrel_pml::engine::DONE {
            let s = wait_engine(l, id)?;
            sent(&l.core()?.engine, &s)?;
        }
        return Ok(());
    }
    let mut rec = start_send(core, comm, region, dest, tag, mode)?;
    if rec.is_active() {
        let st = wait_rec(l, &mut rec)?;
        check_status(&st, 0)?;
    }
    Ok(())
}

/// Starts a receive; the request may already be complete (`MPI_PROC_NULL`).
pub fn start_recv(
    core: &mut Core,
    comm: c_int,
    region: &Region,
    source: c_int,
    tag: c_int,
) -> MpiResult<ReqRec> {
    let c = core.comm(comm)?;
    let ctx = c.ctx;
    let source = source_rank(c, source)?;
    let tag = recv_tag(tag)?;
    if source == Source::Null {
        return Ok(ReqRec::done(comm, ctx, St::empty(PROC_NULL)));
    }
    requests::start_recv(&mut core.engine, comm, ctx, source.selector(), tag, region)
}

pub use crate::requests::check_status;

/// The error of a completed blocking send: a failed peer ends it badly.
#[inline]
pub fn sent(engine: &Engine, s: &kestrel_pml::engine::Status) -> MpiResult<()> {
    if s.failed_peer.is_none() {
        return Ok(());
    }
    check_status(&requests::status_of(engine, *s), 0)
}

/// `MPI_Recv`: the status, truncated or not (the caller reports it, then the error).
pub fn recv(
    l: &mut Locked,
    comm: c_int,
    region: &Region,
    source: c_int,
    tag: c_int,
) -> MpiResult<St> {
    let core = l.core()?;
    let st = if region.is_contiguous() {
        let c = core.comm(comm)?;
        let ctx = c.ctx;
        let source = source_rank(c, source)?;
        let tag = recv_tag(tag)?;
        if source == Source::Null {
            return Ok(St::empty(PROC_NULL));
        }
        let id = core
            .engine
            .irecv(ctx, source.selector(), tag, region.span)
            .map_err(error::pml(error::ERR_RANK))?;
        let s = wait_engine(l, id)?;
        requests::status_of(&l.core()?.engine, s)
    } else {
        let mut rec = start_recv(core, comm, region, source, tag)?;
        wait_rec(l, &mut rec)?
    };
    Ok(st)
}

/// `MPI_Sendrecv`: both run at once.
#[allow(clippy::too_many_arguments)]
pub fn sendrecv(
    l: &mut Locked,
    comm: c_int,
    send: &Region,
    dest: c_int,
    send_tag: c_int,
    recv: &Region,
    source: c_int,
    recv_tag: c_int,
) -> MpiResult<St> {
    let core = l.core()?;
    let mut r = start_recv(core, comm, recv, source, recv_tag)?;
    let mut s = match start_send(core, comm, send, dest, send_tag, Mode::Standard) {
        Ok(s) => s,
        Err(e) => {
            // The receive was posted: take it back before reporting.
            if let ReqState::Active(id) = r.state {
                if core.engine.cancel(id, r.ctx) {
                    let _ = requests::wait(&mut core.engine, &mut r);
                }
            }
            return Err(e);
        }
    };
    let sent = wait_rec(l, &mut s)?;
    let st = wait_rec(l, &mut r)?;
    check_status(&sent, 0)?;
    check_status(&st, recv.packed_len())?;
    Ok(st)
}

/// `MPI_Probe` (blocking) and `MPI_Iprobe`.
pub fn probe(
    l: &mut Locked,
    comm: c_int,
    source: c_int,
    tag: c_int,
    block: bool,
) -> MpiResult<Option<St>> {
    let c = l.core()?.comm(comm)?;
    let ctx = c.ctx;
    let source = source_rank(c, source)?;
    let tag = recv_tag(tag)?;
    if source == Source::Null {
        return Ok(Some(St::empty(PROC_NULL)));
    }
    let mut w = Waiter::default();
    loop {
        let found = l
            .core()?
            .engine
            .iprobe(ctx, source.selector(), tag)
            .map_err(error::pml(error::ERR_COMM))?;
        if let Some(s) = found {
            return Ok(Some(requests::status_of(&l.core()?.engine, s)));
        }
        if !block {
            return Ok(None);
        }
        w.step(l)?;
    }
}

/// `MPI_Mprobe` (blocking) and `MPI_Improbe`: the message handle and its status.
pub fn mprobe(
    l: &mut Locked,
    comm: c_int,
    source: c_int,
    tag: c_int,
    block: bool,
) -> MpiResult<Option<(c_int, St)>> {
    let c = l.core()?.comm(comm)?;
    let ctx = c.ctx;
    let source = source_rank(c, source)?;
    let tag = recv_tag(tag)?;
    if source == Source::Null {
        return Ok(Some((handle::MESSAGE_NO_PROC, St::empty(PROC_NULL))));
    }
    let mut w = Waiter::default();
    loop {
        let core = l.core()?;
        let found = core
            .engine
            .improbe(ctx, source.selector(), tag)
            .map_err(error::pml(error::ERR_COMM))?;
        if let Some((h, s)) = found {
            let slot = core.messages.insert(MsgRec { handle: h, comm });
            return Ok(Some((
                handle::make(Kind::Indirect, Obj::Request, slot),
                requests::status_of(&core.engine, s),
            )));
        }
        if !block {
            return Ok(None);
        }
        w.step(l)?;
    }
}

/// `MPI_Mrecv`/`MPI_Imrecv`: starts receiving a matched message.
pub fn start_mrecv(core: &mut Core, message: c_int, region: &Region) -> MpiResult<ReqRec> {
    if message == handle::MESSAGE_NO_PROC {
        return Ok(ReqRec::done(handle::COMM_NULL, 0, St::empty(PROC_NULL)));
    }
    let slot = match handle::decode(message, Obj::Request) {
        Some((Kind::Indirect, i)) => Some(i),
        _ => None,
    };
    let msg = slot.and_then(|i| core.messages.remove(i)).ok_or_else(|| {
        MpiError::new(
            error::ERR_REQUEST,
            format!("{message:#x} is not a matched message (already received, or not from MPI_Mprobe/MPI_Improbe)"),
        )
    })?;
    let ctx = core.comm(msg.comm).map(|c| c.ctx).unwrap_or(0);
    requests::start_mrecv(&mut core.engine, msg.comm, ctx, msg.handle, region)
}

/// `MPI_Buffer_attach`.
pub fn buffer_attach(
    core: &mut Core,
    buf: kestrel_pml::buf::UserBuf,
    addr: usize,
) -> MpiResult<()> {
    if core.bsend.buf.is_some() {
        return Err(MpiError::new(
            error::ERR_BUFFER,
            "a buffer is already attached; detach it with MPI_Buffer_detach first",
        ));
    }
    core.bsend.buf = Some(buf);
    core.bsend.addr = addr;
    Ok(())
}

/// `MPI_Buffer_detach`: waits for the buffered sends, then returns the buffer's address and
/// size.
pub fn buffer_detach(core: &mut Core) -> MpiResult<(usize, usize)> {
    let Some(buf) = core.bsend.buf else {
        return Err(MpiError::new(
            error::ERR_BUFFER,
            "no buffer is attached (MPI_Buffer_attach)",
        ));
    };
    let mut idle = 0u32;
    loop {
        reap_bsends(core);
        if core.bsend.pending.is_empty() {
            break;
        }
        core.engine.idle_step(&mut idle);
    }
    core.bsend.buf = None;
    Ok((core.bsend.addr, buf.len()))
}

fn reap_bsends(core: &mut Core) {
    let Core { bsend, engine, .. } = core;
    bsend
        .pending
        .retain(|&(id, _, _)| engine.try_complete(id).is_none());
}

/// First fit of `need` bytes among the pending sends' reservations.
fn bsend_place(
    pending: &[(kestrel_pml::ReqId, usize, usize)],
    size: usize,
    need: usize,
) -> Option<usize> {
    let mut taken: Vec<(usize, usize)> = pending.iter().map(|&(_, o, l)| (o, l)).collect();
    taken.sort_unstable();
    let mut at = 0;
    for (o, l) in taken {
        if o >= at + need {
            return Some(at);
        }
        at = at.max(o + l);
    }
    (at + need <= size).then_some(at)
}

fn bsend(core: &mut Core, ctx: u16, dest: u32, tag: c_int, region: &Region) -> MpiResult<()> {
    let Some(area) = core.bsend.buf else {
        return Err(MpiError::new(
            error::ERR_BUFFER,
            "no buffer is attached for buffered sends; call MPI_Buffer_attach first",
        ));
    };
    let len = region.packed_len();
    let need = len + BSEND_OVERHEAD;
    let mut at = bsend_place(&core.bsend.pending, area.len(), need);
    if at.is_none() {
        core.engine.progress();
        reap_bsends(core);
        at = bsend_place(&core.bsend.pending, area.len(), need);
    }
    let Some(at) = at else {
        let used: usize = core.bsend.pending.iter().map(|p| p.2).sum();
        return Err(MpiError::new(
            error::ERR_BUFFER,
            format!(
                "the buffered message needs {need} bytes ({len} of data + MPI_BSEND_OVERHEAD) but the attached buffer has {} of {} bytes free; attach a larger buffer",
                area.len() - used,
                area.len()
            ),
        ));
    };
    let data = mem::sub(&area, at, len);
    if region.is_contiguous() {
        data.write_at(0, region.bytes());
    } else {
        data.write_at(0, &region.pack()?);
    }
    let id = requests::start_send_raw(&mut core.engine, ctx, dest, tag, data)?;
    if id != kestrel_pml::engine::DONE {
        core.bsend.pending.push((id, at, need));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bsend_first_fit_uses_gaps_and_the_tail() {
        assert_eq!(bsend_place(&[], 100, 100), Some(0));
        assert_eq!(bsend_place(&[], 100, 101), None);
        let p = [(1, 0, 10), (2, 30, 10)];
        assert_eq!(bsend_place(&p, 100, 20), Some(10));
        assert_eq!(bsend_place(&p, 100, 21), Some(40));
        assert_eq!(bsend_place(&p, 60, 21), None);
    }

    #[test]
    fn ranks_on_an_inter_communicator_name_the_remote_group() {
        let c = CommRec {
            ctx: 9,
            rank: 1,
            members: vec![0, 1],
            remote: Some(vec![5, 6, 7]),
            name: String::new(),
            errhandler: 0,
            attrs: Vec::new(),
            info: Vec::new(),
            topo: None,
        };
        assert_eq!(dest_rank(&c, 2).unwrap(), Some(2));
        let e = dest_rank(&c, 3).unwrap_err();
        assert_eq!(e.class, error::ERR_RANK);
        assert!(e.msg.contains("remote group"), "{}", e.msg);
        assert_eq!(source_rank(&c, 2).unwrap(), Source::Rank(2));
        assert_eq!(source_rank(&c, 3).unwrap_err().class, error::ERR_RANK);
    }

    #[test]
    fn tags_and_ranks_are_checked() {
        let c = CommRec {
            ctx: 0,
            rank: 0,
            members: vec![0, 1],
            remote: None,
            name: String::new(),
            errhandler: 0,
            attrs: Vec::new(),
            info: Vec::new(),
            topo: None,
        };
        assert_eq!(dest_rank(&c, 1).unwrap(), Some(1));
        assert_eq!(dest_rank(&c, PROC_NULL).unwrap(), None);
        assert_eq!(dest_rank(&c, 2).unwrap_err().class, error::ERR_RANK);
        assert_eq!(
            dest_rank(&c, ANY_SOURCE).unwrap_err().class,
            error::ERR_RANK
        );
        assert_eq!(source_rank(&c, ANY_SOURCE).unwrap(), Source::Any);
        assert_eq!(source_rank(&c, -3).unwrap_err().class, error::ERR_RANK);
        assert_eq!(send_tag(-1).unwrap_err().class, error::ERR_TAG);
        assert_eq!(recv_tag(ANY_TAG).unwrap(), None);
        assert_eq!(recv_tag(-7).unwrap_err().class, error::ERR_TAG);
    }
}
