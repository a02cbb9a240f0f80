//! Nonblocking (`MPI_I*`) and persistent (`MPI_*_init`) collectives, and the blocking
//! collectives of inter-communicators that run the same schedules to completion.
//!
//! This module owns the translation of a collective's MPI arguments into an engine schedule
//! ([`kestrel_pml::nbc`]) plus the [`Plan`] that carries non-contiguous data in and out of
//! it, and wraps both in a request: started at once ([`Start::Now`]), or kept inactive for
//! `MPI_Start` ([`Start::Persistent`]). Every check that could differ between ranks is made
//! from arguments all ranks share, before anything is sent. It never touches raw pointers
//! (the entry points in `ffi` made [`Region`]s and [`VBuf`]s of them) and never waits,
//! except in [`run_blocking`].

use std::os::raw::c_int;

use kestrel_pml::inter::InterRoot;
use kestrel_pml::nbc::Schedule;
use kestrel_pml::PmlError;

use crate::coll::{self, Red, View};
use crate::error::{self, MpiError, MpiResult};
use crate::mem::{Region, VBuf};
use crate::requests::{self, Persistent, ReqRec, ReqState};
use crate::state::Core;

pub mod neighbor;

pub use crate::plan::{Blocks, Plan};

/// When a collective request runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// Now: `MPI_I*`.
    Now,
    /// At each `MPI_Start`: `MPI_*_init`.
    Persistent,
}

/// Builds a schedule with `f`, letting it take the node segment's posted rounds only when it
/// starts now: their numbers are drawn in build order, and persistent collectives may be
/// started in different orders on different ranks.
fn build(
    core: &mut Core,
    start: Start,
    f: impl FnOnce(&mut kestrel_pml::Engine) -> Result<Schedule, PmlError>,
) -> Result<Schedule, PmlError> {
    core.engine.set_posted_rounds(start == Start::Now);
    let s = f(&mut core.engine);
    core.engine.set_posted_rounds(false);
    s
}

/// Wraps a built schedule and its plan in a request.
fn launch(
    core: &mut Core,
    comm: c_int,
    start: Start,
    mut plan: Plan,
    sched: Result<Schedule, PmlError>,
) -> MpiResult<ReqRec> {
    let sched = sched.map_err(coll::coll_err)?;
    let ctx = core.comm(comm)?.ctx;
    let mut rec = ReqRec::new(comm, ctx, false);
    match start {
        Start::Now => {
            plan.fill()?;
            let id = core.engine.coll_run(sched);
            rec.state = ReqState::Active(id);
            if !plan.is_direct() {
                rec.extra().coll = Some(Box::new(plan));
            }
        }
        Start::Persistent => {
            let id = core.engine.coll_persist(sched);
            let extra = rec.extra();
            extra.persistent = Some(Persistent::Coll { id });
            extra.coll = Some(Box::new(plan));
        }
    }
    Ok(rec)
}

/// Runs a collective request to completion (the blocking inter-communicator collectives).
pub fn run_blocking(l: &mut crate::state::Locked, mut rec: ReqRec) -> MpiResult<()> {
    let st = crate::blocking::wait_rec(l, &mut rec)?;
    requests::status_error(&st, rec.comm)
}

fn bytes_per_elem(r: &Region, view: View) -> usize {
    match view {
        View::Struct(_) => r.ty.extent().max(0) as usize,
        View::Raw(_) | View::Packed(_) => r.ty.size,
    }
}

/// `MPI_Ibarrier` / `MPI_Barrier_init`.
pub fn barrier(core: &mut Core, comm: c_int, start: Start) -> MpiResult<ReqRec> {
    let c = core.comm(comm)?;
    let ctx = c.ctx;
    let s = if c.is_inter() {
        core.engine.nbc_inter_barrier(ctx)
    } else {
        build(core, start, |e| e.nbc_barrier(ctx))
    };
    launch(core, comm, start, Plan::default(), s)
}

/// `MPI_Ibcast` / `MPI_Bcast_init`.
pub fn bcast(
    core: &mut Core,
    comm: c_int,
    r: &Region,
    root: c_int,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let s = if let Some((ctx, remote)) = coll::inter_of(core, comm)? {
        let root = coll::inter_root(root, remote)?;
        let buf = match root {
            InterRoot::Root => plan.input(r, None),
            InterRoot::RootGroup => kestrel_pml::buf::UserBuf::empty(),
            InterRoot::Remote(_) => plan.output(r, None, false),
        };
        core.engine.nbc_inter_bcast(ctx, root, buf)
    } else {
        let (ctx, me, n) = coll::ctx_of(core, comm)?;
        let root = coll::check_root(root, n)?;
        let buf = if me == root {
            plan.input(r, None)
        } else {
            plan.output(r, None, false)
        };
        build(core, start, |e| e.nbc_bcast(ctx, root, buf))
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Ireduce` / `MPI_Reduce_init` (`send` `None`: `MPI_IN_PLACE` at the root; `recv`
/// matters at the root).
pub fn reduce(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: Option<&Region>,
    red: &Red,
    root: c_int,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let v = Some(red.view);
    let d = red.view.dtype();
    let op = red.reduction.clone();
    let s = if let Some((ctx, remote)) = coll::inter_of(core, comm)? {
        let root = coll::inter_root(root, remote)?;
        let (sb, rb) = match root {
            InterRoot::Root => (None, recv.map(|r| plan.output(r, v, false))),
            InterRoot::RootGroup => (None, None),
            InterRoot::Remote(_) => {
                let s = send.ok_or_else(|| coll::no_inter_in_place("MPI_Reduce"))?;
                (Some(plan.input(s, v)), None)
            }
        };
        core.engine.nbc_inter_reduce(ctx, root, sb, rb, d, op)
    } else {
        let (ctx, me, n) = coll::ctx_of(core, comm)?;
        let root = coll::check_root(root, n)?;
        let rb = if me == root {
            let r = recv.ok_or_else(|| {
                MpiError::new(error::ERR_BUFFER, "the root needs a receive buffer")
            })?;
            Some(plan.output(r, v, send.is_none()))
        } else {
            None
        };
        if send.is_none() && me != root {
            return Err(MpiError::new(
                error::ERR_BUFFER,
                "MPI_IN_PLACE is only allowed as the root's send buffer",
            ));
        }
        let sb = send.map(|s| plan.input(s, v));
        core.engine.nbc_reduce(ctx, root, sb, rb, d, op)
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Iallreduce` / `MPI_Allreduce_init` (`send` `None`: `MPI_IN_PLACE`).
pub fn allreduce(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: &Region,
    red: &Red,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let v = Some(red.view);
    let d = red.view.dtype();
    let op = red.reduction.clone();
    let s = if let Some((ctx, _)) = coll::inter_of(core, comm)? {
        let s = send.ok_or_else(|| coll::no_inter_in_place("MPI_Allreduce"))?;
        let sb = plan.input(s, v);
        let rb = plan.output(recv, v, false);
        core.engine.nbc_inter_allreduce(ctx, sb, rb, d, op)
    } else {
        let (ctx, _, _) = coll::ctx_of(core, comm)?;
        let rb = plan.output(recv, v, send.is_none());
        let sb = send.map(|s| plan.input(s, v));
        build(core, start, |e| e.nbc_allreduce(ctx, sb, rb, d, op))
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Iscan` / `MPI_Iexscan` and their `_init` forms.
pub fn scan(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: &Region,
    red: &Red,
    exclusive: bool,
    start: Start,
) -> MpiResult<ReqRec> {
    let (ctx, _, _) = coll::ctx_of(core, comm)?;
    let mut plan = Plan::default();
    let v = Some(red.view);
    // Filled even when not in place: rank 0's buffer of an exscan keeps its contents.
    let rb = plan.output(recv, v, true);
    let sb = send.map(|s| plan.input(s, v));
    let s = core.engine.nbc_scan(
        ctx,
        sb,
        rb,
        red.view.dtype(),
        red.reduction.clone(),
        exclusive,
    );
    launch(core, comm, start, plan, s)
}

/// `MPI_Ireduce_scatter(_block)` and their `_init` forms. `input` holds every rank's
/// elements (the send buffer; or, with `in_place`, the receive buffer); `recv` this rank's
/// share; `counts` elements per rank.
#[allow(clippy::too_many_arguments)]
pub fn reduce_scatter(
    core: &mut Core,
    comm: c_int,
    input: &Region,
    in_place: bool,
    recv: &Region,
    counts: &[usize],
    red: &Red,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let v = Some(red.view);
    let per = bytes_per_elem(input, red.view);
    let bytes: Vec<usize> = counts.iter().map(|c| c * per).collect();
    let d = red.view.dtype();
    let op = red.reduction.clone();
    let s = if let Some((ctx, _)) = coll::inter_of(core, comm)? {
        if in_place {
            return Err(coll::no_inter_in_place("MPI_Reduce_scatter"));
        }
        let sb = plan.input(input, v);
        let rb = plan.output(recv, v, false);
        core.engine
            .nbc_inter_reduce_scatter(ctx, sb, rb, &bytes, d, op)
    } else {
        let (ctx, _, n) = coll::ctx_of(core, comm)?;
        if counts.len() != n as usize {
            return Err(MpiError::new(
                error::ERR_COUNT,
                format!("{} counts for {n} ranks", counts.len()),
            ));
        }
        if in_place {
            let rb = plan.output(input, v, true);
            core.engine.nbc_reduce_scatter(ctx, None, rb, &bytes, d, op)
        } else {
            let sb = plan.input(input, v);
            let rb = plan.output(recv, v, false);
            core.engine
                .nbc_reduce_scatter(ctx, Some(sb), rb, &bytes, d, op)
        }
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Igather(v)` and their `_init` forms (`send` `None`: `MPI_IN_PLACE` at the root).
pub fn gatherv(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: Option<&VBuf>,
    root: c_int,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let s = if let Some((ctx, remote)) = coll::inter_of(core, comm)? {
        let root = coll::inter_root(root, remote)?;
        let (sb, blocks) = match root {
            InterRoot::Root => {
                let v = recv.ok_or_else(|| {
                    MpiError::new(error::ERR_BUFFER, "the root needs a receive buffer")
                })?;
                coll::check_blocks(v, remote, "gather on an inter-communicator")?;
                (None, Some(plan.output_blocks(v, false, None)))
            }
            InterRoot::RootGroup => (None, None),
            InterRoot::Remote(_) => {
                let s = send.ok_or_else(|| coll::no_inter_in_place("MPI_Gather"))?;
                (Some(plan.input(s, None)), None)
            }
        };
        let (rb, counts, displs) = split(blocks);
        core.engine
            .nbc_inter_gatherv(ctx, root, sb, rb, &counts, &displs)
    } else {
        let (ctx, me, n) = coll::ctx_of(core, comm)?;
        let root = coll::check_root(root, n)?;
        if send.is_none() && me != root {
            return Err(MpiError::new(
                error::ERR_BUFFER,
                "MPI_IN_PLACE is only for the root",
            ));
        }
        let blocks = if me == root {
            let v = recv.ok_or_else(|| {
                MpiError::new(error::ERR_BUFFER, "the root needs a receive buffer")
            })?;
            coll::check_blocks(v, n, "gather")?;
            // In place, the root's own block is in the receive buffer already.
            let skip = send.is_none().then_some(me as usize);
            Some(plan.output_blocks(v, send.is_none(), skip))
        } else {
            None
        };
        let sb = send.map(|s| plan.input(s, None));
        let (rb, counts, displs) = split(blocks);
        core.engine.nbc_gatherv(ctx, root, sb, rb, &counts, &displs)
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Iscatter(v)` and their `_init` forms (`recv` `None`: `MPI_IN_PLACE` at the root).
pub fn scatterv(
    core: &mut Core,
    comm: c_int,
    send: Option<&VBuf>,
    recv: Option<&Region>,
    root: c_int,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let s = if let Some((ctx, remote)) = coll::inter_of(core, comm)? {
        let root = coll::inter_root(root, remote)?;
        let (blocks, rb) = match root {
            InterRoot::Root => {
                let v = send.ok_or_else(|| {
                    MpiError::new(error::ERR_BUFFER, "the root needs a send buffer")
                })?;
                coll::check_blocks(v, remote, "scatter on an inter-communicator")?;
                (Some(plan.input_blocks(v)), None)
            }
            InterRoot::RootGroup => (None, None),
            InterRoot::Remote(_) => {
                let r = recv.ok_or_else(|| coll::no_inter_in_place("MPI_Scatter"))?;
                (None, Some(plan.output(r, None, false)))
            }
        };
        let (sb, counts, displs) = split(blocks);
        core.engine
            .nbc_inter_scatterv(ctx, root, sb, &counts, &displs, rb)
    } else {
        let (ctx, me, n) = coll::ctx_of(core, comm)?;
        let root = coll::check_root(root, n)?;
        if recv.is_none() && me != root {
            return Err(MpiError::new(
                error::ERR_BUFFER,
                "MPI_IN_PLACE is only for the root",
            ));
        }
        let blocks = if me == root {
            let v = send
                .ok_or_else(|| MpiError::new(error::ERR_BUFFER, "the root needs a send buffer"))?;
            coll::check_blocks(v, n, "scatter")?;
            Some(plan.input_blocks(v))
        } else {
            None
        };
        let rb = recv.map(|r| plan.output(r, None, false));
        let (sb, counts, displs) = split(blocks);
        core.engine
            .nbc_scatterv(ctx, root, sb, &counts, &displs, rb)
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Iallgather(v)` and their `_init` forms (`send` `None`: `MPI_IN_PLACE`).
pub fn allgatherv(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: &VBuf,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let s = if let Some((ctx, remote)) = coll::inter_of(core, comm)? {
        let s = send.ok_or_else(|| coll::no_inter_in_place("MPI_Allgather"))?;
        coll::check_blocks(recv, remote, "allgather on an inter-communicator")?;
        let sb = plan.input(s, None);
        let b = plan.output_blocks(recv, false, None);
        core.engine
            .nbc_inter_allgatherv(ctx, sb, b.buf, &b.counts, &b.displs)
    } else {
        let (ctx, _, n) = coll::ctx_of(core, comm)?;
        coll::check_blocks(recv, n, "allgather")?;
        let b = plan.output_blocks(recv, send.is_none(), None);
        let sb = send.map(|s| plan.input(s, None));
        core.engine
            .nbc_allgatherv(ctx, sb, b.buf, &b.counts, &b.displs)
    };
    launch(core, comm, start, plan, s)
}

/// `MPI_Ialltoall(v)` and their `_init` forms (`send` `None`: `MPI_IN_PLACE`).
pub fn alltoallv(
    core: &mut Core,
    comm: c_int,
    send: Option<&VBuf>,
    recv: &VBuf,
    start: Start,
) -> MpiResult<ReqRec> {
    let mut plan = Plan::default();
    let peers = core.comm(comm)?.peer_count() as u32;
    coll::check_blocks(recv, peers, "alltoall")?;
    if let Some(s) = send {
        coll::check_blocks(s, peers, "alltoall")?;
    }
    let r = plan.output_blocks(recv, send.is_none(), None);
    let sb = send.map(|s| plan.input_blocks(s));
    let s = alltoall_blocks(core, comm, sb, r)?;
    launch(core, comm, start, plan, s)
}

/// `MPI_Ialltoallw` / `MPI_Alltoallw_init` / `MPI_Alltoallw`: one region (with its own
/// datatype) per peer on each side (`send` `None`: `MPI_IN_PLACE`).
pub fn alltoallw(
    core: &mut Core,
    comm: c_int,
    send: Option<&[Region]>,
    recv: &[Region],
    start: Start,
) -> MpiResult<ReqRec> {
    let peers = core.comm(comm)?.peer_count() as usize;
    if recv.len() != peers || send.is_some_and(|s| s.len() != peers) {
        return Err(MpiError::new(
            error::ERR_COUNT,
            format!("alltoallw: {} blocks for {peers} peers", recv.len()),
        ));
    }
    let mut plan = Plan::default();
    let r = plan.region_blocks(recv, send.is_none(), true);
    let sb = send.map(|s| plan.region_blocks(s, true, false));
    let s = alltoall_blocks(core, comm, sb, r)?;
    launch(core, comm, start, plan, s)
}

fn alltoall_blocks(
    core: &mut Core,
    comm: c_int,
    send: Option<Blocks>,
    recv: Blocks,
) -> MpiResult<Result<Schedule, PmlError>> {
    Ok(if let Some((ctx, _)) = coll::inter_of(core, comm)? {
        let s = send.ok_or_else(|| coll::no_inter_in_place("MPI_Alltoall"))?;
        core.engine.nbc_inter_alltoallv(
            ctx,
            s.buf,
            &s.counts,
            &s.displs,
            recv.buf,
            &recv.counts,
            &recv.displs,
        )
    } else {
        let (ctx, _, _) = coll::ctx_of(core, comm)?;
        let (sb, sc, sd) = split(send);
        core.engine
            .nbc_alltoallv(ctx, sb, &sc, &sd, recv.buf, &recv.counts, &recv.displs)
    })
}

/// An optional [`Blocks`] as the engine's optional buffer and layout.
fn split(b: Option<Blocks>) -> (Option<kestrel_pml::buf::UserBuf>, Vec<usize>, Vec<usize>) {
    match b {
        Some(b) => (Some(b.buf), b.counts, b.displs),
        None => (None, Vec::new(), Vec::new()),
    }
}
