//! Communicator creation beyond `dup`, `split` and `create`: `MPI_Comm_create_group`,
//! `MPI_Comm_idup(_with_info)`, MPI-4's `MPI_Comm_create_from_group` and
//! `MPI_Intercomm_create_from_groups`, splitting inter-communicators, and the info hints
//! of communicators.
//!
//! This module owns the agreements these calls make (who takes part, with which tag) and
//! the completion of a nonblocking duplicate; the engine does the messaging. It never
//! touches raw pointers.

use std::os::raw::c_int;

use kestrel_pml::engine::CTX_WORLD;
use kestrel_pml::Group;

use crate::comm;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::requests::{ReqRec, ReqState};
use crate::state::{comm_slot, CommRec, Core};

/// The context of a communicator whose nonblocking creation has not completed.
pub const PENDING_CTX: u16 = u16::MAX;

fn pml_err(e: kestrel_pml::PmlError) -> MpiError {
    error::pml(error::ERR_COMM)(e)
}

/// An engine-internal tag for `MPI_Comm_create_group`'s agreement among the group.
fn group_tag(tag: c_int) -> i32 {
    i32::MIN + 0x4000_0000 + (tag & 0x0fff_ffff)
}

/// An engine-internal tag for the MPI-4 creators, from their string tag (FNV-1a).
fn string_tag(s: &str) -> i32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in s.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    i32::MIN + 0x5000_0000 + (h & 0x0fff_ffff) as i32
}

/// `MPI_Comm_set_info`: the hints are kept (and returned by `MPI_Comm_get_info`).
pub fn set_info(core: &mut Core, comm: c_int, info: c_int) -> MpiResult<()> {
    let pairs = if info == handle::INFO_NULL {
        Vec::new()
    } else {
        comm::info_pairs(core, info)?
    };
    core.comm_mut(comm)?.info = pairs;
    Ok(())
}

/// `MPI_Comm_get_info`: a new info object with the communicator's hints.
pub fn get_info(core: &mut Core, comm: c_int) -> MpiResult<c_int> {
    let pairs = core.comm(comm)?.info.clone();
    Ok(comm::new_info(core, pairs))
}

/// The positions of `members` (job ranks) in `within` (a communicator's members), or the
/// error naming the first stranger.
fn positions(members: &[u32], within: &[u32]) -> MpiResult<Vec<u32>> {
    members
        .iter()
        .map(|m| {
            within.iter().position(|w| w == m).map(|p| p as u32).ok_or_else(|| {
                MpiError::new(
                    error::ERR_GROUP,
                    format!("the group holds process {m} of MPI_COMM_WORLD, which is not in the communicator; the group must be a subset of it"),
                )
            })
        })
        .collect()
}

/// `MPI_Comm_create_group`: collective over the group's members only.
pub fn create_group(
    core: &mut Core,
    comm: c_int,
    group: c_int,
    tag: c_int,
) -> MpiResult<Option<c_int>> {
    let g = core.group(group)?;
    let (ctx, eh, members) = {
        let c = comm::intra(core, comm, "MPI_Comm_create_group")?;
        (c.ctx, c.errhandler, c.members.clone())
    };
    crate::p2p::send_tag(tag)?;
    if g.rank_of(core.engine.rank()).is_none() {
        if g.size() == 0 {
            return Ok(None);
        }
        return Err(MpiError::new(
            error::ERR_GROUP,
            "MPI_Comm_create_group is called by the group's members only, and this process is not one",
        ));
    }
    let among = positions(g.members(), &members)?;
    let new = core
        .engine
        .agree_context_among(ctx, &among, group_tag(tag))
        .map_err(pml_err)?;
    core.engine.add_context(new, g.members().to_vec());
    Ok(Some(core.new_comm(new, eh)?))
}

/// `MPI_Comm_create_from_group` (MPI-4): a communicator of the group's members, who all
/// call with the same string tag.
pub fn from_group(core: &mut Core, group: c_int, tag: &str, eh: c_int) -> MpiResult<c_int> {
    let g = core.group(group)?;
    if g.rank_of(core.engine.rank()).is_none() {
        return Err(MpiError::new(
            error::ERR_GROUP,
            "MPI_Comm_create_from_group is called by the group's members only, and this process is not one",
        ));
    }
    let new = core
        .engine
        .agree_context_among(CTX_WORLD, g.members(), string_tag(tag))
        .map_err(pml_err)?;
    core.engine.add_context(new, g.members().to_vec());
    core.new_comm(new, eh)
}

/// `MPI_Intercomm_create_from_groups` (MPI-4): the leaders meet through the world.
pub fn intercomm_from_groups(
    core: &mut Core,
    local: c_int,
    local_leader: c_int,
    remote: c_int,
    remote_leader: c_int,
    tag: &str,
    eh: c_int,
) -> MpiResult<c_int> {
    let lg = core.group(local)?;
    let rg = core.group(remote)?;
    let rank_in = |g: &Group, r: c_int, what: &str| -> MpiResult<u32> {
        usize::try_from(r)
            .ok()
            .and_then(|r| g.job_rank(r))
            .ok_or_else(|| {
                MpiError::new(
                    error::ERR_RANK,
                    format!("{what} {r} is outside its group of {}", g.size()),
                )
            })
    };
    rank_in(&lg, local_leader, "local leader")?;
    let remote_world = rank_in(&rg, remote_leader, "remote leader")?;
    if lg.rank_of(core.engine.rank()).is_none() {
        return Err(MpiError::new(
            error::ERR_GROUP,
            "MPI_Intercomm_create_from_groups is called by the local group's members only, and this process is not one",
        ));
    }
    let t = string_tag(tag);
    let local_ctx = core
        .engine
        .agree_context_among(CTX_WORLD, lg.members(), t)
        .map_err(pml_err)?;
    core.engine.add_context(local_ctx, lg.members().to_vec());
    let r = core.engine.intercomm_create(
        local_ctx,
        local_leader as u32,
        CTX_WORLD,
        remote_world,
        t.wrapping_add(1),
    );
    core.engine.free_context(local_ctx);
    let new = r.map_err(pml_err)?;
    core.new_comm(new, eh)
}

/// What a nonblocking duplicate needs at completion.
#[derive(Debug)]
pub struct Idup {
    /// The new communicator's handle (its context is [`PENDING_CTX`] until then).
    comm: c_int,
    /// The schedule's memory: this process's proposal and every member's (at `all`).
    plan: crate::icoll::Plan,
    all: usize,
    /// The members.
    members: Vec<u32>,
}

/// `MPI_Comm_idup(_with_info)`: the new handle (usable once the request completes) and
/// the request, which gathers every member's next free context id.
pub fn idup(
    core: &mut Core,
    comm: c_int,
    info: Vec<(String, String)>,
) -> MpiResult<(c_int, ReqRec)> {
    let (ctx, rank, members, eh) = {
        let c = core.comm(comm)?;
        if c.is_inter() {
            // Inter-communicators duplicate at once (an agreement across both groups).
            let new = {
                let ctx = c.ctx;
                core.engine.dup(ctx).map_err(pml_err)?
            };
            let eh = core.comm(comm)?.errhandler;
            let h = core.new_comm(new, eh)?;
            core.comm_mut(h)?.info = info;
            let rec = ReqRec::done(comm, new, crate::mem::St::empty(crate::p2p::ANY_SOURCE));
            return Ok((h, rec));
        }
        (c.ctx, c.rank, c.members.clone(), c.errhandler)
    };
    let n = members.len();
    let proposal = core.engine.context_proposal().map_err(pml_err)?;
    let (plan, all, mut rec) = crate::comm_threads::start_allgather(
        core,
        comm,
        ctx,
        n,
        proposal.to_le_bytes().to_vec(),
        false,
    )?;
    let slot = core.comms.insert(CommRec {
        ctx: PENDING_CTX,
        rank,
        members: members.clone(),
        remote: None,
        name: String::new(),
        errhandler: eh,
        attrs: Vec::new(),
        info,
        topo: None,
    });
    let h = handle::make(Kind::Direct, Obj::Comm, slot);
    rec.extra().aux = Some(Box::new(Idup {
        comm: h,
        plan,
        all,
        members,
    }));
    Ok((h, rec))
}

/// Completes what a finished request leaves to do: the context of a nonblocking
/// duplicate.
pub fn settle(core: &mut Core, slot: u32) -> MpiResult<()> {
    let Some(rec) = core.requests.get_mut(slot) else {
        return Ok(());
    };
    if !matches!(rec.state, ReqState::Done(_)) {
        return Ok(());
    }
    let is_idup = rec
        .extra
        .as_ref()
        .and_then(|x| x.aux.as_ref())
        .is_some_and(|a| a.is::<Idup>());
    if !is_idup {
        return Ok(());
    }
    let Some(d) = rec
        .extra
        .as_mut()
        .and_then(|x| x.aux.take())
        .and_then(|a| a.downcast::<Idup>().ok())
    else {
        return Ok(());
    };
    let agreed = d
        .plan
        .staged(d.all)
        .chunks_exact(2)
        .map(|b| u16::from_le_bytes([b[0], b[1]]))
        .max()
        .unwrap_or(PENDING_CTX);
    core.engine
        .adopt_context(agreed, d.members)
        .map_err(pml_err)?;
    if let Some(c) = comm_slot(d.comm).and_then(|i| core.comms.get_mut(i)) {
        c.ctx = agreed;
    }
    Ok(())
}
