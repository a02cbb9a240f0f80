//! Collective calls: `MPI_IN_PLACE`, datatypes and reduction operations around the
//! engine's byte-oriented collectives.
//!
//! This module owns the translation of MPI's collective arguments into the engine's:
//! typed buffers become byte slices (the memory itself for contiguous types, packed copies
//! otherwise), `MPI_IN_PLACE` becomes a copy of the data the call finds in the receive
//! buffer, and an `MPI_Op` becomes a [`Reduction`] over a view of the data its element
//! type supports. Every check that could differ between ranks' decisions is made from
//! arguments all ranks share, before any communication, so a rejected call fails on every
//! rank instead of leaving the others waiting. It never touches raw pointers.

use std::borrow::Cow;
use std::os::raw::c_int;

use kestrel_pml::inter::InterRoot;
use kestrel_pml::op::{Dtype, Op, Reduction};

use crate::callbacks;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem::{Region, VBuf};
use crate::state::Core;
use crate::types::{self, Dt, ReduceView};

pub(crate) fn coll_err(e: kestrel_pml::PmlError) -> MpiError {
    error::pml(error::ERR_ARG)(e)
}

/// How a reduction sees the data.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    /// The memory of a contiguous type, as is.
    Raw(Dtype),
    /// The packed form of a non-contiguous type.
    Packed(Dtype),
    /// The memory layout of a value/index pair type, padding included, rebuilt in a
    /// temporary array (the pair's packed form has no padding).
    Struct(Dtype),
}

impl View {
    /// The element type the reduction sees.
    pub fn dtype(self) -> Dtype {
        match self {
            View::Raw(d) | View::Packed(d) | View::Struct(d) => d,
        }
    }
}

/// A resolved `MPI_Op` for one datatype.
#[derive(Debug, Clone)]
pub struct Red {
    /// The engine's reduction.
    pub reduction: Reduction,
    /// How the data is presented to it.
    pub view: View,
}

/// The predefined operation of an `MPI_Op` handle (`MPI_MAX` = 1 ... `MPI_MAXLOC` = 12).
/// The predefined reduction behind an operation handle.
pub(crate) fn predefined_op(op: c_int) -> Option<Op> {
    match handle::decode(op, Obj::Op)? {
        (Kind::Builtin, i) => Some(match i {
            1 => Op::Max,
            2 => Op::Min,
            3 => Op::Sum,
            4 => Op::Prod,
            5 => Op::Land,
            6 => Op::Band,
            7 => Op::Lor,
            8 => Op::Bor,
            9 => Op::Lxor,
            10 => Op::Bxor,
            11 => Op::Minloc,
            12 => Op::Maxloc,
            _ => return None,
        }),
        _ => None,
    }
}

/// A name for a datatype in messages.
pub fn type_name(h: c_int) -> String {
    types::predefined_name(h)
        .map(str::to_string)
        .unwrap_or_else(|| format!("datatype {h:#x}"))
}

/// Resolves `op` for datatype `dt` (handle `dt_h`).
pub fn resolve_op(core: &Core, op: c_int, dt_h: c_int, dt: &Dt) -> MpiResult<Red> {
    if let Some(p) = predefined_op(op) {
        let view = match dt.reduce_view() {
            Some(ReduceView::Raw(d)) if dt.pair.is_some() => View::Struct(d),
            Some(ReduceView::Raw(d)) => View::Raw(d),
            Some(ReduceView::Packed(d)) => View::Packed(d),
            None => {
                return Err(MpiError::new(
                    error::ERR_OP,
                    format!(
                        "{} is not supported for {}: predefined operations need integer, floating-point or value/index pair elements, all of one type",
                        p.name(),
                        type_name(dt_h)
                    ),
                ))
            }
        };
        if !p.applies_to(view.dtype()) {
            return Err(MpiError::new(
                error::ERR_OP,
                format!(
                    "{} is not defined for {} (elements of {})",
                    p.name(),
                    type_name(dt_h),
                    view.dtype()
                ),
            ));
        }
        return Ok(Red {
            reduction: Reduction::Predefined(p),
            view,
        });
    }
    if let Some(u) = core.user_op(op) {
        let ext = dt.extent().max(0) as usize;
        let (view, packed, elem) = if dt.pair.is_some() {
            (View::Struct(Dtype::Opaque(ext as u32)), false, ext)
        } else if dt.is_contiguous() {
            (View::Raw(Dtype::Opaque(dt.size as u32)), false, dt.size)
        } else {
            (View::Packed(Dtype::Opaque(dt.size as u32)), true, dt.size)
        };
        if dt.size == 0 {
            return Err(MpiError::new(
                error::ERR_TYPE,
                "a user operation needs a datatype with data in it",
            ));
        }
        return Ok(Red {
            reduction: callbacks::user_reduction(u, dt_h, dt.clone(), packed, elem),
            view,
        });
    }
    Err(MpiError::new(
        error::ERR_OP,
        match op {
            0x5800_000d | 0x5800_000e => {
                "MPI_REPLACE and MPI_NO_OP are for one-sided accumulates, not collectives"
                    .to_string()
            }
            h if h == handle::OP_NULL => "the operation is MPI_OP_NULL".to_string(),
            h => format!("{h:#x} is not an operation (freed, or another kind of handle)"),
        },
    ))
}

/// The data of `r` as the view wants it.
pub(crate) fn view_data(r: &Region, view: View) -> MpiResult<Vec<u8>> {
    match view {
        View::Raw(_) => Ok(r.bytes().to_vec()),
        View::Packed(_) => r.pack(),
        View::Struct(_) => {
            let ext = r.ty.extent() as usize;
            let mut arr = vec![0u8; r.count * ext];
            r.ty.unpack(r.count, &r.pack()?, &mut arr[..], 0)
                .map_err(|e| MpiError::new(error::ERR_INTERN, e))?;
            Ok(arr)
        }
    }
}

/// Writes `data` (in the view's form) into `r`.
pub(crate) fn view_store(r: &mut Region, view: View, data: &[u8]) -> MpiResult<()> {
    match view {
        View::Raw(_) => {
            r.bytes_mut().copy_from_slice(data);
            Ok(())
        }
        View::Packed(_) => r.unpack(data).map(|_| ()),
        View::Struct(_) => {
            let mut packed = Vec::with_capacity(r.packed_len());
            r.ty.pack(r.count, data, 0, &mut packed)
                .map_err(|e| MpiError::new(error::ERR_INTERN, e))?;
            r.unpack(&packed).map(|_| ())
        }
    }
}

/// Context, rank and size of an intra-communicator; an inter-communicator is an error
/// (the engine's intra-communicator algorithms would address remote ranks).
pub(crate) fn ctx_of(core: &Core, comm: c_int) -> MpiResult<(u16, u32, u32)> {
    let c = core.comm(comm)?;
    if c.is_inter() {
        return Err(MpiError::new(
            error::ERR_COMM,
            "this collective is not supported on inter-communicators; Kestrel provides \
             MPI_Barrier, MPI_Bcast, MPI_Allreduce and MPI_Allgather there (merge with \
             MPI_Intercomm_merge for the others)",
        ));
    }
    Ok((c.ctx, c.rank as u32, c.size() as u32))
}

/// The context and remote size of `comm` when it is an inter-communicator.
pub(crate) fn inter_of(core: &Core, comm: c_int) -> MpiResult<Option<(u16, u32)>> {
    let c = core.comm(comm)?;
    Ok(c.remote.as_ref().map(|r| (c.ctx, r.len() as u32)))
}

/// `MPI_ROOT`: the root of a broadcast on an inter-communicator.
pub const ROOT: c_int = -3;

/// The engine's root of an inter-communicator broadcast: `MPI_ROOT` at the root,
/// `MPI_PROC_NULL` in the rest of its group, the root's rank in the other group.
pub(crate) fn inter_root(root: c_int, remote_size: u32) -> MpiResult<InterRoot> {
    match root {
        ROOT => Ok(InterRoot::Root),
        crate::p2p::PROC_NULL => Ok(InterRoot::RootGroup),
        r if r >= 0 && (r as u32) < remote_size => Ok(InterRoot::Remote(r as u32)),
        r => Err(MpiError::new(
            error::ERR_ROOT,
            format!(
                "root {r} on an inter-communicator: the root passes MPI_ROOT, the rest of its \
                 group MPI_PROC_NULL, the other group the root's rank in 0..{}",
                remote_size.saturating_sub(1)
            ),
        )),
    }
}

pub(crate) fn no_inter_in_place(what: &str) -> MpiError {
    MpiError::new(
        error::ERR_BUFFER,
        format!("MPI_IN_PLACE is not allowed in {what} on an inter-communicator"),
    )
}

pub(crate) fn check_root(root: c_int, n: u32) -> MpiResult<u32> {
    if root < 0 || root as u32 >= n {
        return Err(MpiError::new(
            error::ERR_ROOT,
            format!(
                "root {root} is outside a communicator of {n} ranks; every rank must name the same root in 0..{}",
                n.saturating_sub(1)
            ),
        ));
    }
    Ok(root as u32)
}

/// `MPI_Barrier`.
pub fn barrier(core: &mut Core, comm: c_int) -> MpiResult<()> {
    if let Some((ctx, _)) = inter_of(core, comm)? {
        return core.engine.inter_barrier(ctx).map_err(coll_err);
    }
    let (ctx, _, _) = ctx_of(core, comm)?;
    core.engine.coll_barrier(ctx).map_err(coll_err)
}

/// `MPI_Bcast`.
pub fn bcast(core: &mut Core, comm: c_int, r: &mut Region, root: c_int) -> MpiResult<()> {
    if let Some((ctx, remote_size)) = inter_of(core, comm)? {
        return inter_bcast(core, ctx, r, inter_root(root, remote_size)?);
    }
    let (ctx, me, n) = ctx_of(core, comm)?;
    let root = check_root(root, n)?;
    if r.is_contiguous() {
        return core
            .engine
            .coll_bcast(ctx, root, r.bytes_mut())
            .map_err(coll_err);
    }
    let mut data = if me == root {
        r.pack()?
    } else {
        vec![0u8; r.packed_len()]
    };
    core.engine
        .coll_bcast(ctx, root, &mut data)
        .map_err(coll_err)?;
    if me != root {
        r.unpack(&data)?;
    }
    Ok(())
}

/// `MPI_Bcast` on an inter-communicator: the root's data goes to every member of the other
/// group; the root's own group takes no part.
fn inter_bcast(core: &mut Core, ctx: u16, r: &mut Region, root: InterRoot) -> MpiResult<()> {
    match root {
        InterRoot::RootGroup => Ok(()),
        _ if r.is_contiguous() => core
            .engine
            .inter_bcast(ctx, root, r.bytes_mut())
            .map_err(coll_err),
        InterRoot::Root => {
            let mut data = r.pack()?;
            core.engine
                .inter_bcast(ctx, root, &mut data)
                .map_err(coll_err)
        }
        InterRoot::Remote(_) => {
            let mut data = vec![0u8; r.packed_len()];
            core.engine
                .inter_bcast(ctx, root, &mut data)
                .map_err(coll_err)?;
            r.unpack(&data).map(|_| ())
        }
    }
}

/// `MPI_Reduce`: `send` is `None` for `MPI_IN_PLACE` (root only); `recv` matters at the root.
pub fn reduce(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: Option<&mut Region>,
    red: &Red,
    root: c_int,
) -> MpiResult<()> {
    let (ctx, me, n) = ctx_of(core, comm)?;
    let root = check_root(root, n)?;
    let d = red.view.dtype();
    if me != root {
        let Some(s) = send else {
            return Err(MpiError::new(
                error::ERR_BUFFER,
                "MPI_IN_PLACE is only allowed as the root's send buffer",
            ));
        };
        let data = send_view(s, red.view)?;
        return core
            .engine
            .coll_reduce(ctx, root, &data, None, d, &red.reduction)
            .map_err(coll_err);
    }
    let recv =
        recv.ok_or_else(|| MpiError::new(error::ERR_BUFFER, "the root needs a receive buffer"))?;
    if let (None, View::Raw(_)) = (send, red.view) {
        return in_place(core, recv, |e, input, io| {
            e.coll_reduce(ctx, root, input, Some(io), d, &red.reduction)
        });
    }
    let input = match send {
        Some(s) => send_view(s, red.view)?,
        None => Cow::Owned(view_data(recv, red.view)?),
    };
    if let View::Raw(_) = red.view {
        return core
            .engine
            .coll_reduce(ctx, root, &input, Some(recv.bytes_mut()), d, &red.reduction)
            .map_err(coll_err);
    }
    let mut out = vec![0u8; input.len()];
    core.engine
        .coll_reduce(ctx, root, &input, Some(&mut out), d, &red.reduction)
        .map_err(coll_err)?;
    view_store(recv, red.view, &out)
}

/// An `MPI_IN_PLACE` reduction of contiguous data: `run(engine, input, io)` with the input a
/// copy of the receive buffer in the engine's kept scratch (a fresh vector would fault its
/// pages in on every call).
fn in_place(
    core: &mut Core,
    recv: &mut Region,
    run: impl FnOnce(&mut kestrel_pml::Engine, &[u8], &mut [u8]) -> Result<(), kestrel_pml::PmlError>,
) -> MpiResult<()> {
    let io = recv.bytes_mut();
    core.engine
        .with_scratch(io.len(), |e, input| {
            input.copy_from_slice(io);
            run(e, input, io)
        })
        .map_err(coll_err)
}

/// The send data of a reduction, borrowing contiguous memory where possible.
fn send_view(s: &Region, view: View) -> MpiResult<std::borrow::Cow<'_, [u8]>> {
    Ok(match view {
        View::Raw(_) => Cow::Borrowed(s.bytes()),
        _ => Cow::Owned(view_data(s, view)?),
    })
}

/// `MPI_Allreduce` (`send` `None` for `MPI_IN_PLACE`).
pub fn allreduce(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: &mut Region,
    red: &Red,
) -> MpiResult<()> {
    if let Some((ctx, _)) = inter_of(core, comm)? {
        // Each group receives the reduction of the other group's data.
        let send = send.ok_or_else(|| no_inter_in_place("MPI_Allreduce"))?;
        let input = send_view(send, red.view)?;
        let d = red.view.dtype();
        if let View::Raw(_) = red.view {
            return core
                .engine
                .inter_allreduce(ctx, &input, recv.bytes_mut(), d, &red.reduction)
                .map_err(coll_err);
        }
        let mut out = vec![0u8; input.len()];
        core.engine
            .inter_allreduce(ctx, &input, &mut out, d, &red.reduction)
            .map_err(coll_err)?;
        return view_store(recv, red.view, &out);
    }
    let (ctx, _, _) = ctx_of(core, comm)?;
    let d = red.view.dtype();
    if let (None, View::Raw(_)) = (send, red.view) {
        return in_place(core, recv, |e, input, io| {
            e.coll_allreduce(ctx, input, io, d, &red.reduction)
        });
    }
    let input = match send {
        Some(s) => send_view(s, red.view)?,
        None => Cow::Owned(view_data(recv, red.view)?),
    };
    if let View::Raw(_) = red.view {
        return core
            .engine
            .coll_allreduce(ctx, &input, recv.bytes_mut(), d, &red.reduction)
            .map_err(coll_err);
    }
    let mut out = vec![0u8; input.len()];
    core.engine
        .coll_allreduce(ctx, &input, &mut out, d, &red.reduction)
        .map_err(coll_err)?;
    view_store(recv, red.view, &out)
}

/// `MPI_Scan` and `MPI_Exscan` (`send` `None` for `MPI_IN_PLACE`).
pub fn scan(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: &mut Region,
    red: &Red,
    exclusive: bool,
) -> MpiResult<()> {
    let (ctx, _, _) = ctx_of(core, comm)?;
    let d = red.view.dtype();
    let input = match send {
        Some(s) => send_view(s, red.view)?,
        None => Cow::Owned(view_data(recv, red.view)?),
    };
    if let View::Raw(_) = red.view {
        return core
            .engine
            .coll_scan(ctx, &input, recv.bytes_mut(), d, &red.reduction, exclusive)
            .map_err(coll_err);
    }
    // Starting from the current contents keeps rank 0's buffer of an exscan as it was.
    let mut out = view_data(recv, red.view)?;
    core.engine
        .coll_scan(ctx, &input, &mut out, d, &red.reduction, exclusive)
        .map_err(coll_err)?;
    view_store(recv, red.view, &out)
}

/// `MPI_Reduce_scatter` (`counts` per rank) and `MPI_Reduce_scatter_block`. `input` is the
/// region of all `sum(counts)` input elements (the send buffer, or the receive buffer for
/// `MPI_IN_PLACE`); `recv` receives this rank's share.
pub fn reduce_scatter(
    core: &mut Core,
    comm: c_int,
    input: &Region,
    recv: &mut Region,
    counts: &[usize],
    red: &Red,
) -> MpiResult<()> {
    let (ctx, me, n) = ctx_of(core, comm)?;
    if counts.len() != n as usize {
        return Err(MpiError::new(
            error::ERR_COUNT,
            format!("{} counts for {n} ranks", counts.len()),
        ));
    }
    let d = red.view.dtype();
    // Per-rank element counts in units of the view's element.
    let per_elem = match red.view {
        View::Struct(_) => 1,
        View::Raw(_) | View::Packed(_) => input.ty.size / d.size().max(1),
    };
    let counts_v: Vec<usize> = counts.iter().map(|c| c * per_elem).collect();
    let data = view_data(input, red.view)?;
    let mut out = vec![0u8; counts_v[me as usize] * d.size()];
    core.engine
        .coll_reduce_scatter(ctx, &data, &mut out, &counts_v, d, &red.reduction)
        .map_err(coll_err)?;
    view_store(recv, red.view, &out)
}

/// Byte counts and displacements of a [`VBuf`] for the engine, and the buffer they index:
/// the hull itself for contiguous types, else a packed copy (`packed` set).
struct Laid {
    counts: Vec<usize>,
    displs: Vec<usize>,
    packed: Option<Vec<u8>>,
}

fn lay_out(v: &VBuf, fill: bool) -> MpiResult<Laid> {
    let counts: Vec<usize> = (0..v.counts.len()).map(|r| v.packed_len(r)).collect();
    if v.ty.is_contiguous() {
        return Ok(Laid {
            counts,
            displs: v.origins.clone(),
            packed: None,
        });
    }
    let mut displs = Vec::with_capacity(counts.len());
    let mut at = 0;
    for c in &counts {
        displs.push(at);
        at += c;
    }
    let mut packed = Vec::with_capacity(at);
    if fill {
        for r in 0..counts.len() {
            packed.extend_from_slice(&v.pack_block(r)?);
        }
    } else {
        packed.resize(at, 0);
    }
    Ok(Laid {
        counts,
        displs,
        packed: Some(packed),
    })
}

fn store_blocks(v: &VBuf, laid: &Laid, skip: Option<usize>) -> MpiResult<()> {
    if let Some(p) = &laid.packed {
        for r in 0..v.counts.len() {
            if Some(r) != skip {
                v.unpack_block(r, &p[laid.displs[r]..laid.displs[r] + laid.counts[r]])?;
            }
        }
    }
    Ok(())
}

/// This rank's contribution to a gather: its send buffer (borrowed when contiguous), or in
/// place its own block of the receive buffer.
fn own_block<'a>(send: Option<&'a Region>, recv: &VBuf, me: u32) -> MpiResult<Cow<'a, [u8]>> {
    Ok(match send {
        Some(s) if s.is_contiguous() => Cow::Borrowed(s.bytes()),
        Some(s) => Cow::Owned(s.pack()?),
        None => Cow::Owned(recv.pack_block(me as usize)?),
    })
}

fn hull_mut(v: &mut VBuf) -> &mut [u8] {
    let n = v.hull.len();
    v.hull.slice_mut(0, n)
}

pub(crate) fn check_blocks(v: &VBuf, n: u32, what: &str) -> MpiResult<()> {
    if v.counts.len() != n as usize {
        return Err(MpiError::new(
            error::ERR_COUNT,
            format!("{what}: {} blocks for {n} ranks", v.counts.len()),
        ));
    }
    Ok(())
}

/// `MPI_Gather(v)`: `send` `None` for `MPI_IN_PLACE` (root); `recv` at the root.
/// `equal`: `MPI_Gather`, whose blocks have one byte size on every rank, so every rank takes
/// the engine's equal-block `coll_gather` (the node segment's one round for small blocks).
pub fn gatherv(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: Option<&mut VBuf>,
    root: c_int,
    equal: bool,
) -> MpiResult<()> {
    let (ctx, me, n) = ctx_of(core, comm)?;
    let root = check_root(root, n)?;
    if me != root {
        let s = send
            .ok_or_else(|| MpiError::new(error::ERR_BUFFER, "MPI_IN_PLACE is only for the root"))?;
        let data = if s.is_contiguous() {
            Cow::Borrowed(s.bytes())
        } else {
            Cow::Owned(s.pack()?)
        };
        let r = if equal {
            core.engine.coll_gather(ctx, root, &data, None)
        } else {
            core.engine.coll_gatherv(ctx, root, &data, None, &[], &[])
        };
        return r.map_err(coll_err);
    }
    let v =
        recv.ok_or_else(|| MpiError::new(error::ERR_BUFFER, "the root needs a receive buffer"))?;
    check_blocks(v, n, "gather")?;
    let own = own_block(send, v, me)?;
    let mut laid = lay_out(v, false)?;
    if equal {
        let target = match laid.packed.as_mut() {
            Some(p) => &mut p[..],
            None => hull_mut(v),
        };
        let (counts, displs) = (&laid.counts, &laid.displs);
        // The others send blocks of the receive type's size: the root takes part with a block
        // of that size whatever its own (so that nobody waits for it), then reports the
        // mismatch.
        let b = counts.first().copied().unwrap_or(0);
        let fitted: Cow<[u8]> = if own.len() == b {
            Cow::Borrowed(&own)
        } else {
            let mut v = own.to_vec();
            v.resize(b, 0);
            Cow::Owned(v)
        };
        equal_blocks("MPI_Gather", b, counts, displs, target, |run| {
            core.engine
                .coll_gather(ctx, root, &fitted, Some(run))
                .map_err(coll_err)
        })?;
        check_equal("MPI_Gather", b, &[own.len()])?;
        return store_blocks(v, &laid, None);
    }
    match laid.packed.as_mut() {
        None => core
            .engine
            .coll_gatherv(
                ctx,
                root,
                &own,
                Some(hull_mut(v)),
                &laid.counts,
                &laid.displs,
            )
            .map_err(coll_err)?,
        Some(p) => core
            .engine
            .coll_gatherv(ctx, root, &own, Some(p), &laid.counts, &laid.displs)
            .map_err(coll_err)?,
    }
    store_blocks(v, &laid, None)
}

/// `MPI_Scatter(v)`: `send` at the root; `recv` `None` for `MPI_IN_PLACE` (root).
/// `equal`: `MPI_Scatter`, whose blocks have one byte size on every rank, so every rank takes
/// the engine's equal-block `coll_scatter` (the node segment's one round for small blocks).
pub fn scatterv(
    core: &mut Core,
    comm: c_int,
    send: Option<&VBuf>,
    mut recv: Option<&mut Region>,
    root: c_int,
    equal: bool,
) -> MpiResult<()> {
    let (ctx, me, n) = ctx_of(core, comm)?;
    let root = check_root(root, n)?;
    if me != root {
        let r = recv
            .ok_or_else(|| MpiError::new(error::ERR_BUFFER, "MPI_IN_PLACE is only for the root"))?;
        let run = |engine: &mut kestrel_pml::Engine, out: &mut [u8]| {
            if equal {
                engine.coll_scatter(ctx, root, None, out)
            } else {
                engine.coll_scatterv(ctx, root, None, &[], &[], out)
            }
            .map_err(coll_err)
        };
        if r.is_contiguous() {
            return run(&mut core.engine, r.bytes_mut());
        }
        let mut data = vec![0u8; r.packed_len()];
        run(&mut core.engine, &mut data)?;
        return r.unpack(&data).map(|_| ());
    }
    let v = send.ok_or_else(|| MpiError::new(error::ERR_BUFFER, "the root needs a send buffer"))?;
    check_blocks(v, n, "scatter")?;
    let laid = lay_out(v, true)?;
    let src: &[u8] = match &laid.packed {
        Some(p) => p,
        None => v.hull.as_slice(),
    };
    let mine = laid.counts[me as usize];
    if equal {
        let mut own = vec![0u8; mine];
        let out = match recv.as_deref_mut() {
            Some(r) if r.is_contiguous() && r.packed_len() == mine => r.bytes_mut(),
            // In place (`None`): the root's own block stays where it is; the engine copies it
            // into scratch, which tells it the block size.
            _ => &mut own[..],
        };
        let (counts, displs) = (&laid.counts, &laid.displs);
        let mut src_run = Vec::new();
        let run = equal_run(mine, counts, displs, src, &mut src_run, "MPI_Scatter")?;
        core.engine
            .coll_scatter(ctx, root, Some(run), out)
            .map_err(coll_err)?;
        return match recv {
            Some(r) if !(r.is_contiguous() && r.packed_len() == mine) => r.unpack(&own).map(|_| ()),
            _ => Ok(()),
        };
    }
    if let Some(r) = recv.as_deref_mut().filter(|r| r.is_contiguous()) {
        if r.packed_len() == mine {
            // The root's own block goes straight into its receive buffer.
            return core
                .engine
                .coll_scatterv(
                    ctx,
                    root,
                    Some(src),
                    &laid.counts,
                    &laid.displs,
                    r.bytes_mut(),
                )
                .map_err(coll_err);
        }
    }
    let mut own = vec![0u8; mine];
    core.engine
        .coll_scatterv(ctx, root, Some(src), &laid.counts, &laid.displs, &mut own)
        .map_err(coll_err)?;
    match recv {
        Some(r) => {
            if own.len() != r.packed_len() {
                return Err(MpiError::new(
                    error::ERR_TRUNCATE,
                    format!(
                        "the root's own block has {} bytes but its receive buffer takes {}",
                        own.len(),
                        r.packed_len()
                    ),
                ));
            }
            r.unpack(&own).map(|_| ())
        }
        None => Ok(()),
    }
}

/// `MPI_Allgather(v)`: `send` `None` for `MPI_IN_PLACE` (own block already in `recv`).
/// `equal`: `MPI_Allgather`, whose
/// blocks have one byte size and lie back to back (in the hull or the packed copy) on every
/// rank, so every rank takes the engine's equal-block `coll_allgather` (the node segment's
/// one round for small blocks, the hierarchy across nodes), as the short path does.
pub fn allgatherv(
    core: &mut Core,
    comm: c_int,
    send: Option<&Region>,
    recv: &mut VBuf,
    equal: bool,
) -> MpiResult<()> {
    if inter_of(core, comm)?.is_some() {
        return Err(MpiError::new(
            error::ERR_INTERN,
            "allgather on an inter-communicator runs as a schedule (icoll), not here (a Kestrel bug)",
        ));
    }
    let (ctx, me, n) = ctx_of(core, comm)?;
    check_blocks(recv, n, "allgather")?;
    let own = own_block(send, recv, me)?;
    let mut laid = lay_out(recv, false)?;
    let block = own.len();
    let back_to_back = laid.counts.iter().all(|&c| c == block)
        && laid.displs.iter().enumerate().all(|(r, &d)| d == r * block);
    let total = block * n as usize;
    let Laid {
        counts,
        displs,
        packed,
    } = &mut laid;
    let buf = match packed.as_mut() {
        None => hull_mut(recv),
        Some(p) => p.as_mut_slice(),
    };
    if equal && back_to_back && buf.len() >= total {
        core.engine
            .coll_allgather(ctx, &own, &mut buf[..total])
            .map_err(coll_err)?;
    } else {
        core.engine
            .coll_allgatherv(ctx, &own, buf, counts, displs)
            .map_err(coll_err)?;
    }
    store_blocks(recv, &laid, None)
}

/// `MPI_Alltoall(v)`: `send` `None` for `MPI_IN_PLACE` (the data comes from `recv`).
/// `equal`: `MPI_Alltoall`, whose blocks have one byte size on every rank, so every rank may
/// take the engine's equal-block algorithm (the node segment's one round for small blocks).
pub fn alltoallv(
    core: &mut Core,
    comm: c_int,
    send: Option<&VBuf>,
    recv: &mut VBuf,
    equal: bool,
) -> MpiResult<()> {
    let (ctx, _, n) = ctx_of(core, comm)?;
    check_blocks(recv, n, "alltoall")?;
    // In place: the outgoing blocks are read before anything is received.
    let (scounts, sdispls, sdata) = match send {
        Some(s) => {
            check_blocks(s, n, "alltoall")?;
            let laid = lay_out(s, true)?;
            let data = match laid.packed {
                Some(p) => Cow::Owned(p),
                None => Cow::Borrowed(s.hull.as_slice()),
            };
            (laid.counts, laid.displs, data)
        }
        None => {
            let laid = lay_out(recv, true)?;
            let data = match laid.packed {
                Some(p) => p,
                None => recv.hull.as_slice().to_vec(),
            };
            (laid.counts, laid.displs, Cow::Owned(data))
        }
    };
    let mut laid = lay_out(recv, false)?;
    if equal {
        return alltoall_equal(core, ctx, &sdata, &scounts, &sdispls, recv, laid);
    }
    match laid.packed.as_mut() {
        None => core
            .engine
            .coll_alltoallv(
                ctx,
                &sdata,
                &scounts,
                &sdispls,
                hull_mut(recv),
                &laid.counts,
                &laid.displs,
            )
            .map_err(coll_err)?,
        Some(p) => core
            .engine
            .coll_alltoallv(
                ctx,
                &sdata,
                &scounts,
                &sdispls,
                p,
                &laid.counts,
                &laid.displs,
            )
            .map_err(coll_err)?,
    }
    store_blocks(recv, &laid, None)
}

/// Every block `b` bytes, as MPI requires of `MPI_Gather`/`MPI_Scatter` (the root checks what
/// the others cannot see).
fn check_equal(what: &str, b: usize, counts: &[usize]) -> MpiResult<()> {
    if counts.iter().any(|&c| c != b) {
        return Err(MpiError::new(
            error::ERR_TRUNCATE,
            format!(
                "{what}: the root's blocks and a rank's block differ in size; every block must \
                 carry the same type signature"
            ),
        ));
    }
    Ok(())
}

/// The root's `n` equal blocks of `b` bytes of `data` (at `displs`) as one run: borrowed when
/// they lie so already, else gathered into `buf`.
fn equal_run<'a>(
    b: usize,
    counts: &[usize],
    displs: &[usize],
    data: &'a [u8],
    buf: &'a mut Vec<u8>,
    what: &str,
) -> MpiResult<&'a [u8]> {
    check_equal(what, b, counts)?;
    let total = b * counts.len();
    if displs.iter().enumerate().all(|(r, &d)| d == r * b) && data.len() >= total {
        return Ok(&data[..total]);
    }
    buf.clear();
    for &d in displs {
        buf.extend_from_slice(&data[d..d + b]);
    }
    Ok(&buf[..])
}

/// Runs `gather` into the root's `n` equal blocks of `b` bytes of `target` (at `displs`): in
/// place when they lie as one run already, else through a run copied out after.
fn equal_blocks(
    what: &str,
    b: usize,
    counts: &[usize],
    displs: &[usize],
    target: &mut [u8],
    gather: impl FnOnce(&mut [u8]) -> MpiResult<()>,
) -> MpiResult<()> {
    check_equal(what, b, counts)?;
    let total = b * counts.len();
    if displs.iter().enumerate().all(|(r, &d)| d == r * b) && target.len() >= total {
        return gather(&mut target[..total]);
    }
    let mut run = vec![0u8; total];
    gather(&mut run)?;
    for (r, &d) in displs.iter().enumerate() {
        target[d..d + b].copy_from_slice(&run[r * b..(r + 1) * b]);
    }
    Ok(())
}

/// `MPI_Alltoall` through the engine's equal-block algorithm: the blocks gathered into one
/// run of `n` blocks where they are not laid out so already, and scattered back after.
fn alltoall_equal(
    core: &mut Core,
    ctx: u16,
    sdata: &[u8],
    scounts: &[usize],
    sdispls: &[usize],
    recv: &mut VBuf,
    mut laid: Laid,
) -> MpiResult<()> {
    let b = scounts.first().copied().unwrap_or(0);
    if scounts.iter().chain(&laid.counts).any(|&c| c != b) {
        return Err(MpiError::new(
            error::ERR_TRUNCATE,
            "MPI_Alltoall: the send and receive blocks differ in size; every block must carry \
             the same type signature",
        ));
    }
    let runs = |displs: &[usize]| displs.iter().enumerate().all(|(r, &d)| d == r * b);
    let send: Cow<[u8]> = if runs(sdispls) && sdata.len() >= b * scounts.len() {
        Cow::Borrowed(&sdata[..b * scounts.len()])
    } else {
        Cow::Owned(
            sdispls
                .iter()
                .flat_map(|&d| &sdata[d..d + b])
                .copied()
                .collect(),
        )
    };
    let total = b * laid.counts.len();
    let in_place_runs = runs(&laid.displs);
    let target = match laid.packed.as_mut() {
        Some(p) => &mut p[..],
        None => hull_mut(recv),
    };
    if in_place_runs && target.len() >= total {
        core.engine
            .coll_alltoall(ctx, &send, &mut target[..total])
            .map_err(coll_err)?;
    } else {
        let mut out = vec![0u8; total];
        core.engine
            .coll_alltoall(ctx, &send, &mut out)
            .map_err(coll_err)?;
        for (r, &d) in laid.displs.iter().enumerate() {
            target[d..d + b].copy_from_slice(&out[r * b..(r + 1) * b]);
        }
    }
    store_blocks(recv, &laid, None)
}

/// `MPI_Reduce_local`: `inout = input op inout`.
pub fn reduce_local(input: &Region, inout: &mut Region, red: &Red) -> MpiResult<()> {
    let a = view_data(input, red.view)?;
    let mut b = view_data(inout, red.view)?;
    red.reduction
        .apply(red.view.dtype(), &a, &mut b)
        .map_err(|e| MpiError::new(error::ERR_OP, e.to_string()))?;
    view_store(inout, red.view, &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c64(re: f64, im: f64) -> Vec<u8> {
        [re.to_ne_bytes(), im.to_ne_bytes()].concat()
    }

    #[test]
    fn complex_types_reduce_as_complex_numbers() {
        // MPI_C_DOUBLE_COMPLEX, MPI_DOUBLE_COMPLEX (Fortran) and MPI_CXX_DOUBLE_COMPLEX.
        for h in [0x4c00_1041, 0x4c00_1022, 0x4c00_1035] {
            let d = types::reduction_type(h).unwrap();
            let a = c64(1.0, 2.0);
            let mut b = c64(3.0, -1.0);
            // (1 + 2i)(3 - i) = 3 - i + 6i + 2 = 5 + 5i
            kestrel_pml::op::reduce(Op::Prod, d, &a, &mut b).unwrap();
            assert_eq!(b, c64(5.0, 5.0), "{h:#x}");
            assert!(kestrel_pml::op::reduce(Op::Max, d, &a, &mut b).is_err());
        }
    }

    #[test]
    fn predefined_ops_map_to_mpich_handles() {
        assert_eq!(predefined_op(0x5800_0003), Some(Op::Sum));
        assert_eq!(predefined_op(0x5800_000c), Some(Op::Maxloc));
        assert_eq!(predefined_op(0x5800_000d), None);
        assert_eq!(predefined_op(0x1800_0000), None);
    }
}
