//! Communicators, groups, attributes, error handlers and info objects.
//!
//! This module owns the MPI semantics of these objects on top of the engine's contexts and
//! [`Group`]s: which communicators are predefined and cannot be freed, how `MPI_Comm_dup`
//! copies attributes through the program's copy functions and `MPI_Comm_free` deletes
//! them, the values of the predefined attributes, and group set operations. Callbacks into
//! the program run with the library lock released ([`Locked::unlocked`]). It never
//! touches raw pointers.

use std::os::raw::c_int;
use std::sync::atomic::{AtomicI32, Ordering};

use kestrel_pml::group::GroupRelation;
use kestrel_pml::Group;

use crate::callbacks;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, keyval, Kind, Obj};
use crate::mem::UNDEFINED;
use crate::state::{comm_slot, CommRec, Core, KeyvalRec, Locked};

/// `MPI_IDENT`.
pub const IDENT: c_int = 0;
/// `MPI_CONGRUENT`.
pub const CONGRUENT: c_int = 1;
/// `MPI_SIMILAR`.
pub const SIMILAR: c_int = 2;
/// `MPI_UNEQUAL`.
pub const UNEQUAL: c_int = 3;
/// `MPI_COMM_TYPE_SHARED`.
pub const COMM_TYPE_SHARED: c_int = 1;
/// `MPI_COMM_TYPE_HW_GUIDED` (MPI 4.0): the resource the info key `mpi_hw_resource_type`
/// names.
pub const COMM_TYPE_HW_GUIDED: c_int = 2;
/// `MPI_COMM_TYPE_HW_UNGUIDED` (MPI 4.0): the next hardware level strictly below the
/// communicator.
pub const COMM_TYPE_HW_UNGUIDED: c_int = 3;
/// The hardware resource Kestrel knows: one node's shared memory (MPI 4.0 requires it).
const HW_SHARED_MEMORY: &str = "mpi_shared_memory";
/// The info key of the hardware-guided splits.
const HW_RESOURCE_TYPE: &str = "mpi_hw_resource_type";
/// `MPI_MAX_OBJECT_NAME`.
pub const MAX_OBJECT_NAME: usize = 128;
/// `MPI_MAX_INFO_KEY`.
pub const MAX_INFO_KEY: usize = 255;
/// `MPI_MAX_INFO_VAL`.
pub const MAX_INFO_VAL: usize = 1024;

// Values of the predefined attributes. `MPI_Comm_get_attr` hands out their addresses, so
// they live in statics; atomics because a program may (wrongly) write through the pointer.
static TAG_UB_VALUE: AtomicI32 = AtomicI32::new(crate::p2p::TAG_UB);
static HOST_VALUE: AtomicI32 = AtomicI32::new(crate::p2p::PROC_NULL);
static IO_VALUE: AtomicI32 = AtomicI32::new(crate::p2p::ANY_SOURCE);
static WTIME_IS_GLOBAL_VALUE: AtomicI32 = AtomicI32::new(0);
static UNIVERSE_SIZE_VALUE: AtomicI32 = AtomicI32::new(1);
static LASTUSEDCODE_VALUE: AtomicI32 = AtomicI32::new(0x3fff_ffff);
static APPNUM_VALUE: AtomicI32 = AtomicI32::new(0);

/// Records the last error class or code the program added (`MPI_LASTUSEDCODE`).
pub fn set_last_used_code(v: c_int) {
    LASTUSEDCODE_VALUE.fetch_max(v, std::sync::atomic::Ordering::Relaxed);
}

/// Records the job size for `MPI_UNIVERSE_SIZE`.
pub fn set_universe_size(n: u32) {
    UNIVERSE_SIZE_VALUE.store(n as i32, Ordering::Relaxed);
}

fn attr_address(v: &'static AtomicI32) -> usize {
    v.as_ptr() as usize
}

/// The value of a predefined attribute (what Fortran reads, where C gets its address).
pub fn predefined_attr_value(kv: c_int) -> Option<c_int> {
    let addr = predefined_attr(kv)?;
    [
        &TAG_UB_VALUE,
        &HOST_VALUE,
        &IO_VALUE,
        &WTIME_IS_GLOBAL_VALUE,
        &UNIVERSE_SIZE_VALUE,
        &LASTUSEDCODE_VALUE,
        &APPNUM_VALUE,
    ]
    .into_iter()
    .find(|v| attr_address(v) == addr)
    .map(|v| v.load(Ordering::Relaxed))
}

/// Sets the language proxy of communicator key `kv` (`MPII_Keyval_set_proxy`); `false` if
/// `kv` is not a communicator key.
pub fn set_keyval_proxy(core: &mut Core, kv: c_int, proxy: crate::state::AttrProxy) -> bool {
    match keyval_slot(core, kv)
        .ok()
        .and_then(|i| core.keyvals.get_mut(i))
    {
        Some(k) => {
            k.proxy = Some(proxy);
            true
        }
        None => false,
    }
}

/// The address a predefined attribute's value is read from.
fn predefined_attr(kv: c_int) -> Option<usize> {
    Some(attr_address(match kv {
        keyval::TAG_UB => &TAG_UB_VALUE,
        keyval::HOST => &HOST_VALUE,
        keyval::IO => &IO_VALUE,
        keyval::WTIME_IS_GLOBAL => &WTIME_IS_GLOBAL_VALUE,
        keyval::UNIVERSE_SIZE => &UNIVERSE_SIZE_VALUE,
        keyval::LASTUSEDCODE => &LASTUSEDCODE_VALUE,
        keyval::APPNUM => &APPNUM_VALUE,
        _ => return None,
    }))
}

pub(crate) fn keyval_slot(core: &Core, kv: c_int) -> MpiResult<u32> {
    match handle::decode(kv, Obj::Keyval) {
        Some((Kind::Direct, i)) if core.keyvals.get(i).is_some_and(|k| !k.freed) => Ok(i),
        _ if predefined_attr(kv).is_some() => Err(MpiError::new(
            error::ERR_KEYVAL,
            format!("keyval {kv:#x} is predefined and read-only"),
        )),
        _ => Err(MpiError::new(
            error::ERR_KEYVAL,
            format!("{kv:#x} is not an attribute key (freed, or never created with MPI_Comm_create_keyval)"),
        )),
    }
}

pub(crate) fn pml_err(e: kestrel_pml::PmlError) -> MpiError {
    error::pml(error::ERR_COMM)(e)
}

/// The intra-communicator behind a handle; an inter-communicator is an error for `what`.
pub fn intra<'a>(core: &'a Core, comm: c_int, what: &str) -> MpiResult<&'a CommRec> {
    let c = core.comm(comm)?;
    if c.is_inter() {
        return Err(MpiError::new(
            error::ERR_COMM,
            format!("{what} on an inter-communicator is not supported by Kestrel; merge it into an intra-communicator with MPI_Intercomm_merge first"),
        ));
    }
    Ok(c)
}

/// `MPI_Comm_dup`: a new context with the same members; attributes go through their copy
/// functions.
pub fn dup(l: &mut Locked, comm: c_int) -> MpiResult<c_int> {
    let core = l.core()?;
    let ctx = core.comm(comm)?.ctx;
    let new_ctx = core.engine.dup(ctx).map_err(pml_err)?;
    finish_dup(l, comm, new_ctx)
}

/// The handle of `comm`'s duplicate on context `new_ctx` (agreed and added): the error
/// handler, topology and hints of `comm`, and its attributes through their copy functions.
pub fn finish_dup(l: &mut Locked, comm: c_int, new_ctx: u16) -> MpiResult<c_int> {
    let core = l.core()?;
    let eh = core.comm(comm)?.errhandler;
    let new = core.new_comm(new_ctx, eh)?;
    // A duplicate keeps the topology and the hints.
    let (topo, info) = {
        let c = core.comm(comm)?;
        (c.topo.clone(), c.info.clone())
    };
    let n = core.comm_mut(new)?;
    n.topo = topo;
    n.info = info;
    copy_attrs(l, comm, new)?;
    Ok(new)
}

/// Runs the copy functions of `from`'s attributes and attaches what they keep to `to`
/// (`MPI_Comm_dup`, `MPI_Comm_idup`).
pub fn copy_attrs(l: &mut Locked, from: c_int, to: c_int) -> MpiResult<()> {
    let core = l.core()?;
    let attrs = core.comm(from)?.attrs.clone();
    for (kv, value) in attrs {
        let core = l.core()?;
        let Some(slot) = handle::decode(kv, Obj::Keyval).map(|d| d.1) else {
            continue;
        };
        let Some(k) = core.keyvals.get(slot).copied() else {
            continue;
        };
        let Some(copy) = k.copy else { continue };
        let (rc, keep, out) =
            l.unlocked(|| callbacks::copy_attr(copy, k.proxy, from, kv, k.extra, value));
        if rc != error::SUCCESS {
            return Err(MpiError::new(
                error::class_of(rc).unwrap_or(error::ERR_OTHER),
                format!("the copy function of attribute key {kv:#x} failed with code {rc}"),
            ));
        }
        if keep {
            let core = l.core()?;
            core.comm_mut(to)?.attrs.push((kv, out));
            if let Some(k) = core.keyvals.get_mut(slot) {
                k.uses += 1;
            }
        }
    }
    Ok(())
}

/// Runs the delete function of attribute `kv` of `comm` holding `value`, and releases the key.
/// Runs the delete function of attribute `kv` (value `value`) of object `comm` (a
/// communicator or a window) and releases the key's use.
pub(crate) fn delete_one(l: &mut Locked, comm: c_int, kv: c_int, value: usize) -> MpiResult<()> {
    let core = l.core()?;
    let Some(slot) = handle::decode(kv, Obj::Keyval).map(|d| d.1) else {
        return Ok(());
    };
    let Some(k) = core.keyvals.get(slot).copied() else {
        return Ok(());
    };
    if let Some(del) = k.delete {
        let rc = l.unlocked(|| callbacks::delete_attr(del, k.proxy, comm, kv, value, k.extra));
        if rc != error::SUCCESS {
            return Err(MpiError::new(
                error::class_of(rc).unwrap_or(error::ERR_OTHER),
                format!("the delete function of attribute key {kv:#x} failed with code {rc}"),
            ));
        }
    }
    let core = l.core()?;
    release_keyval(core, slot);
    Ok(())
}

fn release_keyval(core: &mut Core, slot: u32) {
    let gone = match core.keyvals.get_mut(slot) {
        Some(k) => {
            k.uses = k.uses.saturating_sub(1);
            k.freed && k.uses == 0
        }
        None => false,
    };
    if gone {
        core.keyvals.remove(slot);
    }
}

/// Deletes every attribute of `comm` through its delete function, newest first (as MPI
/// specifies for `MPI_Comm_free` and `MPI_Comm_disconnect`).
pub fn delete_all_attrs(l: &mut Locked, comm: c_int) -> MpiResult<()> {
    let attrs = l.core()?.comm(comm)?.attrs.clone();
    for (kv, value) in attrs.into_iter().rev() {
        delete_one(l, comm, kv, value)?;
        if let Ok(c) = l.core()?.comm_mut(comm) {
            c.attrs.retain(|a| a.0 != kv);
        }
    }
    Ok(())
}

/// `MPI_Comm_free`.
pub fn free(l: &mut Locked, comm: c_int) -> MpiResult<()> {
    let core = l.core()?;
    if comm == handle::COMM_WORLD || comm == handle::COMM_SELF {
        return Err(MpiError::new(
            error::ERR_COMM,
            "MPI_COMM_WORLD and MPI_COMM_SELF cannot be freed",
        ));
    }
    core.comm(comm)?;
    delete_all_attrs(l, comm)?;
    let core = l.core()?;
    let ctx = core.comm(comm)?.ctx;
    core.engine.free_context(ctx);
    if core.parent == comm {
        core.parent = handle::COMM_NULL;
    }
    if let Some(i) = comm_slot(comm) {
        core.comms.remove(i);
    }
    Ok(())
}

/// `MPI_Comm_split`: `None` for ranks passing `MPI_UNDEFINED`.
pub fn split(core: &mut Core, comm: c_int, color: c_int, key: c_int) -> MpiResult<Option<c_int>> {
    check_color(color)?;
    if core.comm(comm)?.is_inter() {
        return split_inter(core, comm, color, key);
    }
    let (ctx, eh) = {
        let c = intra(core, comm, "MPI_Comm_split")?;
        (c.ctx, c.errhandler)
    };
    let color = (color != UNDEFINED).then_some(color);
    match core.engine.split(ctx, color, key).map_err(pml_err)? {
        Some(new_ctx) => Ok(Some(core.new_comm(new_ctx, eh)?)),
        None => Ok(None),
    }
}

/// A split color: at least 0, or `MPI_UNDEFINED`.
pub(crate) fn check_color(color: c_int) -> MpiResult<()> {
    if color < 0 && color != UNDEFINED {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("color {color} is negative; colors are >= 0 or MPI_UNDEFINED"),
        ));
    }
    Ok(())
}

/// `MPI_Comm_split_type`: `MPI_COMM_TYPE_SHARED` groups the ranks of each node; so do
/// `MPI_COMM_TYPE_HW_GUIDED` with `mpi_hw_resource_type` `mpi_shared_memory` in `info`
/// (any other resource gives `MPI_COMM_NULL`) and `MPI_COMM_TYPE_HW_UNGUIDED` where a node
/// holds only part of the communicator (it then sets `mpi_hw_resource_type` in `info`;
/// where one node holds everything there is no smaller level and every process gets
/// `MPI_COMM_NULL`).
pub fn split_type(
    core: &mut Core,
    comm: c_int,
    kind: c_int,
    key: c_int,
    info: c_int,
) -> MpiResult<Option<c_int>> {
    if core.comm(comm)?.is_inter() {
        let color = shared_color(core, comm, kind)?;
        return split_inter(core, comm, color, key);
    }
    let color = split_type_color(core, comm, kind, info)?;
    split(core, comm, color, key)
}

/// The color `MPI_Comm_split_type` of kind `kind` gives this process on intra-communicator
/// `comm` (`MPI_UNDEFINED` for none); sets `mpi_hw_resource_type` in `info` where the
/// unguided split finds a smaller level.
pub fn split_type_color(
    core: &mut Core,
    comm: c_int,
    kind: c_int,
    info: c_int,
) -> MpiResult<c_int> {
    let node_color = |core: &Core| -> MpiResult<(c_int, bool)> {
        let c = intra(core, comm, "MPI_Comm_split_type")?;
        let me = core.engine.rank();
        let node = core.engine.node_of(me).to_string();
        let here: Vec<u32> = c
            .members
            .iter()
            .copied()
            .filter(|&r| core.engine.node_of(r) == node)
            .collect();
        // The node's color: the lowest job rank on it among the members.
        let color = here.iter().copied().min().unwrap_or(me) as c_int;
        Ok((color, here.len() < c.members.len()))
    };
    let color = match kind {
        UNDEFINED => UNDEFINED,
        COMM_TYPE_SHARED => node_color(core)?.0,
        COMM_TYPE_HW_GUIDED => {
            let wanted = if info == handle::INFO_NULL {
                None
            } else {
                info_get(core, info, HW_RESOURCE_TYPE)?
            };
            if wanted.as_deref() == Some(HW_SHARED_MEMORY) {
                node_color(core)?.0
            } else {
                UNDEFINED
            }
        }
        COMM_TYPE_HW_UNGUIDED => {
            let (color, smaller) = node_color(core)?;
            if smaller {
                if info != handle::INFO_NULL {
                    info_set(core, info, HW_RESOURCE_TYPE.into(), HW_SHARED_MEMORY.into())?;
                }
                color
            } else {
                UNDEFINED
            }
        }
        other => {
            return Err(MpiError::new(
                error::ERR_ARG,
                format!("split type {other} is not supported; Kestrel knows MPI_COMM_TYPE_SHARED, MPI_COMM_TYPE_HW_GUIDED, MPI_COMM_TYPE_HW_UNGUIDED and MPI_UNDEFINED"),
            ))
        }
    };
    Ok(color)
}

/// `MPI_Comm_split` and `MPI_Comm_split_type` on an inter-communicator.
pub fn split_inter(
    core: &mut Core,
    comm: c_int,
    color: c_int,
    key: c_int,
) -> MpiResult<Option<c_int>> {
    let (ctx, eh) = {
        let c = core.comm(comm)?;
        (c.ctx, c.errhandler)
    };
    let color = (color != UNDEFINED).then_some(color);
    match core.engine.inter_split(ctx, color, key).map_err(pml_err)? {
        Some(new) => Ok(Some(core.new_comm(new, eh)?)),
        None => Ok(None),
    }
}

/// The color `MPI_Comm_split_type` gives this process on an inter-communicator: its node,
/// named by the lowest job rank there among both groups.
pub fn shared_color(core: &Core, comm: c_int, kind: c_int) -> MpiResult<c_int> {
    if kind == UNDEFINED {
        return Ok(UNDEFINED);
    }
    if kind != COMM_TYPE_SHARED {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("split type {kind} is not supported; Kestrel knows MPI_COMM_TYPE_SHARED and MPI_UNDEFINED"),
        ));
    }
    let c = core.comm(comm)?;
    let me = core.engine.rank();
    let node = core.engine.node_of(me).to_string();
    let all = c.members.iter().chain(c.remote.iter().flatten());
    Ok(all
        .copied()
        .filter(|&r| core.engine.node_of(r) == node)
        .min()
        .unwrap_or(me) as c_int)
}

/// `MPI_Comm_create`: a communicator of `group`'s members (a subset of `comm`'s).
pub fn create(core: &mut Core, comm: c_int, group: c_int) -> MpiResult<Option<c_int>> {
    let g = check_subgroup(core, comm, group)?;
    let (ctx, eh) = {
        let c = core.comm(comm)?;
        (c.ctx, c.errhandler)
    };
    let new_ctx = core.engine.agree_context(ctx).map_err(pml_err)?;
    if g.rank_of(core.engine.rank()).is_none() {
        return Ok(None);
    }
    core.engine.add_context(new_ctx, g.members().to_vec());
    Ok(Some(core.new_comm(new_ctx, eh)?))
}

/// `group` of `MPI_Comm_create` on intra-communicator `comm`: a subset of its members.
pub(crate) fn check_subgroup(core: &Core, comm: c_int, group: c_int) -> MpiResult<Group> {
    let g = core.group(group)?.clone();
    let c = intra(core, comm, "MPI_Comm_create")?;
    if let Some(stranger) = g.members().iter().find(|m| !c.members.contains(m)) {
        return Err(MpiError::new(
            error::ERR_GROUP,
            format!("the group holds process {stranger} of MPI_COMM_WORLD, which is not in the communicator; the group must be a subset of it"),
        ));
    }
    Ok(g)
}

/// `MPI_Comm_compare`.
pub fn compare(core: &Core, a: c_int, b: c_int) -> MpiResult<c_int> {
    let ca = core.comm(a)?;
    let cb = core.comm(b)?;
    if a == b {
        return Ok(IDENT);
    }
    Ok(
        match Group::new(ca.members.clone()).compare(&Group::new(cb.members.clone())) {
            GroupRelation::Identical => CONGRUENT,
            GroupRelation::Similar => SIMILAR,
            GroupRelation::Unequal => UNEQUAL,
        },
    )
}

/// The name of a communicator (`MPI_Comm_get_name`).
pub fn name(core: &Core, comm: c_int) -> MpiResult<String> {
    let c = core.comm(comm)?;
    Ok(if !c.name.is_empty() {
        c.name.clone()
    } else if comm == handle::COMM_WORLD {
        "MPI_COMM_WORLD".into()
    } else if comm == handle::COMM_SELF {
        "MPI_COMM_SELF".into()
    } else {
        String::new()
    })
}

/// `MPI_Group_compare`.
pub fn group_compare(a: &Group, b: &Group) -> c_int {
    match a.compare(b) {
        GroupRelation::Identical => IDENT,
        GroupRelation::Similar => SIMILAR,
        GroupRelation::Unequal => UNEQUAL,
    }
}

/// Checks group ranks and converts them.
pub fn group_ranks(g: &Group, ranks: &[c_int]) -> MpiResult<Vec<usize>> {
    ranks
        .iter()
        .map(|&r| {
            usize::try_from(r)
                .ok()
                .filter(|&r| r < g.size())
                .ok_or_else(|| {
                    MpiError::new(
                        error::ERR_RANK,
                        format!("rank {r} is not in a group of {}", g.size()),
                    )
                })
        })
        .collect()
}

/// `MPI_Group_range_incl`/`excl`: the ranks `(first, last, stride)` triples name.
pub fn expand_ranges(g: &Group, ranges: &[[c_int; 3]]) -> MpiResult<Vec<c_int>> {
    let mut out = Vec::new();
    for &[first, last, stride] in ranges {
        if stride == 0 {
            return Err(MpiError::new(error::ERR_ARG, "a range has stride 0"));
        }
        let mut r = first;
        while (stride > 0 && r <= last) || (stride < 0 && r >= last) {
            if r < 0 || r as usize >= g.size() {
                return Err(MpiError::new(
                    error::ERR_RANK,
                    format!("range rank {r} is not in a group of {}", g.size()),
                ));
            }
            out.push(r);
            r += stride;
        }
    }
    Ok(out)
}

/// Group set operations.
pub fn group_union(a: &Group, b: &Group) -> Group {
    let mut m = a.members().to_vec();
    m.extend(b.members().iter().filter(|x| !a.members().contains(x)));
    Group::new(m)
}

/// `MPI_Group_intersection`: members of `a` also in `b`, in `a`'s order.
pub fn group_intersection(a: &Group, b: &Group) -> Group {
    Group::new(
        a.members()
            .iter()
            .copied()
            .filter(|x| b.members().contains(x))
            .collect(),
    )
}

/// `MPI_Group_difference`: members of `a` not in `b`, in `a`'s order.
pub fn group_difference(a: &Group, b: &Group) -> Group {
    Group::new(
        a.members()
            .iter()
            .copied()
            .filter(|x| !b.members().contains(x))
            .collect(),
    )
}

/// `MPI_Comm_create_keyval`.
pub fn create_keyval(core: &mut Core, k: KeyvalRec) -> c_int {
    handle::make(Kind::Direct, Obj::Keyval, core.keyvals.insert(k))
}

/// `MPI_Comm_free_keyval`: the key goes once no attribute uses it.
pub fn free_keyval(core: &mut Core, kv: c_int) -> MpiResult<()> {
    let slot = keyval_slot(core, kv)?;
    if let Some(k) = core.keyvals.get_mut(slot) {
        k.freed = true;
        if k.uses == 0 {
            core.keyvals.remove(slot);
        }
    }
    Ok(())
}

/// `MPI_Comm_set_attr`: replaces (deleting) an existing value.
pub fn set_attr(l: &mut Locked, comm: c_int, kv: c_int, value: usize) -> MpiResult<()> {
    let core = l.core()?;
    let slot = keyval_slot(core, kv)?;
    let old = core
        .comm(comm)?
        .attrs
        .iter()
        .find(|a| a.0 == kv)
        .map(|a| a.1);
    if let Some(old) = old {
        delete_one(l, comm, kv, old)?;
    }
    let core = l.core()?;
    let c = core.comm_mut(comm)?;
    c.attrs.retain(|a| a.0 != kv);
    c.attrs.push((kv, value));
    if let Some(k) = core.keyvals.get_mut(slot) {
        k.uses += 1;
    }
    Ok(())
}

/// `MPI_Comm_get_attr`: the value, if set. Predefined keys give the address of their value.
pub fn get_attr(core: &Core, comm: c_int, kv: c_int) -> MpiResult<Option<usize>> {
    let c = core.comm(comm)?;
    if let Some(addr) = predefined_attr(kv) {
        return Ok(Some(addr));
    }
    keyval_slot(core, kv)?;
    Ok(c.attrs.iter().find(|a| a.0 == kv).map(|a| a.1))
}

/// `MPI_Comm_delete_attr`: a no-op when the attribute is not set.
pub fn delete_attr(l: &mut Locked, comm: c_int, kv: c_int) -> MpiResult<()> {
    let core = l.core()?;
    keyval_slot(core, kv)?;
    // Deleting an attribute that is not set does nothing (as with MPICH).
    let Some(value) = core
        .comm(comm)?
        .attrs
        .iter()
        .find(|a| a.0 == kv)
        .map(|a| a.1)
    else {
        return Ok(());
    };
    delete_one(l, comm, kv, value)?;
    l.core()?.comm_mut(comm)?.attrs.retain(|a| a.0 != kv);
    Ok(())
}

/// Checks an error handler handle.
pub fn check_errhandler(core: &Core, eh: c_int) -> MpiResult<()> {
    match handle::decode(eh, Obj::Errhandler) {
        Some((Kind::Builtin, 0 | 1 | 3)) => Ok(()),
        Some((Kind::Direct, i)) if core.errhandlers.get(i).is_some() => Ok(()),
        _ => Err(MpiError::new(
            error::ERR_ARG,
            format!("{eh:#x} is not an error handler"),
        )),
    }
}

fn info_slot(core: &Core, info: c_int) -> MpiResult<Option<u32>> {
    if info == handle::INFO_ENV {
        return Ok(None);
    }
    match handle::decode(info, Obj::Info) {
        Some((Kind::Direct, i)) if core.infos.get(i).is_some() => Ok(Some(i)),
        _ => Err(MpiError::new(
            error::ERR_INFO,
            format!(
                "{info:#x} is not an info object (MPI_INFO_NULL, freed, or another kind of handle)"
            ),
        )),
    }
}

/// Checks an info argument of a call that takes `MPI_INFO_NULL` too.
pub fn check_info_arg(core: &Core, info: c_int) -> MpiResult<()> {
    if info == handle::INFO_NULL {
        return Ok(());
    }
    info_slot(core, info).map(|_| ())
}

/// The pairs of an info object (`MPI_INFO_ENV` has none).
pub fn info_pairs(core: &Core, info: c_int) -> MpiResult<Vec<(String, String)>> {
    Ok(match info_slot(core, info)? {
        Some(i) => core.infos.get(i).cloned().unwrap_or_default(),
        None => Vec::new(),
    })
}

/// `MPI_Info_create` and `MPI_Info_dup`.
pub fn new_info(core: &mut Core, pairs: Vec<(String, String)>) -> c_int {
    handle::make(Kind::Direct, Obj::Info, core.infos.insert(pairs))
}

fn check_key(key: &str) -> MpiResult<()> {
    if key.is_empty() || key.len() > MAX_INFO_KEY {
        return Err(MpiError::new(
            error::ERR_INFO_KEY,
            format!(
                "info key of {} bytes; keys have 1..{MAX_INFO_KEY} bytes",
                key.len()
            ),
        ));
    }
    Ok(())
}

/// `MPI_Info_set`.
pub fn info_set(core: &mut Core, info: c_int, key: String, value: String) -> MpiResult<()> {
    check_key(&key)?;
    // An empty value is a value (MPICH accepts it, and MPI sets no lower bound).
    if value.len() > MAX_INFO_VAL {
        return Err(MpiError::new(
            error::ERR_INFO_VALUE,
            format!(
                "info value of {} bytes; values have at most {MAX_INFO_VAL} bytes",
                value.len()
            ),
        ));
    }
    let slot = info_slot(core, info)?
        .ok_or_else(|| MpiError::new(error::ERR_INFO, "MPI_INFO_ENV is read-only"))?;
    if let Some(pairs) = core.infos.get_mut(slot) {
        match pairs.iter_mut().find(|p| p.0 == key) {
            Some(p) => p.1 = value,
            None => pairs.push((key, value)),
        }
    }
    Ok(())
}

/// `MPI_Info_delete`.
pub fn info_delete(core: &mut Core, info: c_int, key: &str) -> MpiResult<()> {
    check_key(key)?;
    let slot = info_slot(core, info)?
        .ok_or_else(|| MpiError::new(error::ERR_INFO, "MPI_INFO_ENV is read-only"))?;
    let pairs = core.infos.get_mut(slot).expect("checked by info_slot");
    let before = pairs.len();
    pairs.retain(|p| p.0 != key);
    if pairs.len() == before {
        return Err(MpiError::new(
            error::ERR_INFO_NOKEY,
            format!("the info object has no key '{key}'"),
        ));
    }
    Ok(())
}

/// `MPI_Info_free`.
pub fn info_free(core: &mut Core, info: c_int) -> MpiResult<()> {
    let slot = info_slot(core, info)?
        .ok_or_else(|| MpiError::new(error::ERR_INFO, "MPI_INFO_ENV cannot be freed"))?;
    core.infos.remove(slot);
    Ok(())
}

/// The value of `key` (after checking it).
pub fn info_get(core: &Core, info: c_int, key: &str) -> MpiResult<Option<String>> {
    check_key(key)?;
    Ok(info_pairs(core, info)?
        .into_iter()
        .find(|p| p.0 == key)
        .map(|p| p.1))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_set_operations_keep_first_group_order() {
        let a = Group::new(vec![3, 1, 2]);
        let b = Group::new(vec![2, 5, 3]);
        assert_eq!(group_union(&a, &b).members(), &[3, 1, 2, 5]);
        assert_eq!(group_intersection(&a, &b).members(), &[3, 2]);
        assert_eq!(group_difference(&a, &b).members(), &[1]);
        assert_eq!(group_compare(&a, &Group::new(vec![1, 2, 3])), SIMILAR);
    }

    #[test]
    fn ranges_expand_both_ways_and_are_checked() {
        let g = Group::new((0..10).collect());
        assert_eq!(
            expand_ranges(&g, &[[0, 6, 3], [9, 7, -1]]).unwrap(),
            vec![0, 3, 6, 9, 8, 7]
        );
        assert_eq!(
            expand_ranges(&g, &[[0, 10, 5]]).unwrap_err().class,
            error::ERR_RANK
        );
        assert_eq!(
            expand_ranges(&g, &[[0, 1, 0]]).unwrap_err().class,
            error::ERR_ARG
        );
        assert_eq!(group_ranks(&g, &[-1]).unwrap_err().class, error::ERR_RANK);
    }

    #[test]
    fn predefined_attributes_point_at_their_values() {
        let p = predefined_attr(keyval::TAG_UB).unwrap();
        assert_eq!(p, TAG_UB_VALUE.as_ptr() as usize);
        assert_eq!(TAG_UB_VALUE.load(Ordering::Relaxed), i32::MAX);
        assert!(predefined_attr(0x6440_0002).is_none());
    }
}
