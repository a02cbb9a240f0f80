//! Communicator creation under `MPI_THREAD_MULTIPLE`: `MPI_Comm_dup(_with_info)`,
//! `MPI_Comm_split(_type)` and `MPI_Comm_create` on intra-communicators, from any number of
//! threads at once on different parents.
//!
//! This module owns the agreement on a new communicator's context id between threads and
//! processes. Below `MULTIPLE` the creations run the engine's blocking exchanges under the
//! library lock; with several threads that deadlocks: a thread creating from communicator A
//! holds the lock while it waits for a peer whose thread creating from B holds that peer's
//! lock, waiting for this process. Here every exchange is a schedule of the blocking
//! sequence waited for with the lock let go between polls ([`crate::blocking`]), and the id
//! is agreed in rounds:
//!
//! 1. **Proposal**: an allgather over the parent of (whether it is this creation's turn here,
//!    this process's next free id: a fresh one while they last, then one freed since, see
//!    [`Engine::context_id_proposal`]). A process gives the turn to at most one creation at a
//!    time, and only to the registered creation with the smallest (parent context, local
//!    serial): the creation on the lowest parent eventually holds the turn on all its members
//!    at once (a member lets its turn go after every round), so some creation always
//!    succeeds and none waits for a turn (without it, a process answers "not my turn" and the
//!    round fails on all members alike). The round fails unless every member had the turn.
//! 2. **Claim**: every member claims the maximum proposal ([`Engine::claim_context`]); it
//!    fails where a creation that does not take turns (an `MPI_Comm_idup`, an inter-
//!    communicator, `MPI_Comm_create_group`) took the id meanwhile. An allgather of the
//!    outcomes: all claimed, the id is agreed; else the claims are given back and the
//!    creation proposes again.
//!
//! It never blocks on a turn and never holds the library lock across a wait. Creations
//! that do not take turns (the ones named in 2, and `MPI_Comm_create_group`'s agreement among
//! the group) still block under the lock, as documented in `docs/architecture.md`.
//!
//! [`Engine::claim_context`]: kestrel_pml::engine::Engine::claim_context
//! [`Engine::context_id_proposal`]: kestrel_pml::engine::Engine::context_id_proposal

use std::os::raw::c_int;

use kestrel_pml::engine::contexts::{split_contribution, split_members, SPLIT_CONTRIBUTION};

use crate::comm::{self, pml_err};
use crate::error::MpiResult;
use crate::plan::Plan;
use crate::requests::{self, ReqRec, ReqState};
use crate::state::{Core, Locked};

/// The parent's context, size and error handler; `None` for an inter-communicator (whose
/// creations keep the blocking path).
fn parent(core: &Core, comm: c_int) -> MpiResult<Option<(u16, usize, c_int)>> {
    let c = core.comm(comm)?;
    Ok((!c.is_inter()).then_some((c.ctx, c.members.len(), c.errhandler)))
}

/// Starts an allgather of every member's `mine` (of one length on all) over
/// intra-communicator `comm` (context `ctx`, `n` members) as a schedule (of the blocking
/// collectives' sequence when `blocking`): the plan owning its buffers (keep it until the
/// request completes), the staging index of the result (every member's bytes in rank order)
/// and the running request. Also `MPI_Comm_idup`'s exchange.
pub(crate) fn start_allgather(
    core: &mut Core,
    comm: c_int,
    ctx: u16,
    n: usize,
    mine: Vec<u8>,
    blocking: bool,
) -> MpiResult<(Plan, usize, ReqRec)> {
    let width = mine.len();
    let mut plan = Plan::default();
    let (_, send) = plan.owned(mine);
    let (all, recv) = plan.owned(vec![0; width * n]);
    let (counts, displs) = kestrel_pml::nbc::algorithms::uniform(n as u32, width);
    core.engine.set_blocking_sequence(blocking);
    let sched = core
        .engine
        .nbc_allgatherv(ctx, Some(send), recv, &counts, &displs);
    core.engine.set_blocking_sequence(false);
    let id = core.engine.coll_run(sched.map_err(pml_err)?);
    let mut rec = ReqRec::new(comm, ctx, false);
    rec.state = ReqState::Active(id);
    Ok((plan, all, rec))
}

/// [`start_allgather`] on the blocking sequence, waited for with the lock let go between
/// polls: every member's `mine` in rank order.
fn allgather_waiting(
    l: &mut Locked,
    comm: c_int,
    ctx: u16,
    n: usize,
    mine: Vec<u8>,
) -> MpiResult<Vec<u8>> {
    let (plan, all, mut rec) = start_allgather(l.core()?, comm, ctx, n, mine, true)?;
    // `plan` owns the schedule's buffers and outlives the wait.
    let st = crate::blocking::wait_rec(l, &mut rec)?;
    requests::status_error(&st, comm)?;
    Ok(plan.staged(all).to_vec())
}

/// A context id every member of `comm` agreed on and claimed (see the module
/// documentation); the caller adds the context or gives the claim back.
fn agree(l: &mut Locked, comm: c_int, ctx: u16, n: usize) -> MpiResult<u16> {
    let key = l.core()?.creations.register(ctx);
    let r = agree_in_rounds(l, comm, ctx, n, key);
    if let Ok(core) = l.core() {
        core.creations.unregister(key);
    }
    r
}

fn agree_in_rounds(
    l: &mut Locked,
    comm: c_int,
    ctx: u16,
    n: usize,
    key: (u16, u64),
) -> MpiResult<u16> {
    let mut after_failed = None;
    loop {
        let core = l.core()?;
        let turn = core.creations.take_turn(key);
        let proposal = if turn {
            core.engine.context_id_proposal(after_failed)
        } else {
            0
        };
        let mut mine = vec![u8::from(turn)];
        mine.extend_from_slice(&proposal.to_le_bytes());
        let all = allgather_waiting(l, comm, ctx, n, mine)?;
        let everyone = all.chunks_exact(3).all(|c| c[0] == 1);
        if !everyone {
            l.core()?.creations.end_turn(key);
            // Another creation holds a turn somewhere: let its threads run first.
            std::thread::yield_now();
            continue;
        }
        let agreed = all
            .chunks_exact(3)
            .map(|c| u16::from_le_bytes([c[1], c[2]]))
            .max()
            .unwrap_or(0);
        if agreed == u16::MAX {
            let core = l.core()?;
            core.creations.end_turn(key);
            return Err(pml_err(core.engine.out_of_context_ids(false)));
        }
        let claimed = l.core()?.engine.claim_context(agreed);
        let outcomes = allgather_waiting(l, comm, ctx, n, vec![u8::from(claimed)])?;
        let core = l.core()?;
        core.creations.end_turn(key);
        if outcomes.iter().all(|&b| b == 1) {
            return Ok(agreed);
        }
        if claimed {
            core.engine.release_context_claim(agreed);
        }
        after_failed = Some(agreed);
    }
}

/// `MPI_Comm_dup(_with_info)` under `MPI_THREAD_MULTIPLE` (an inter-communicator takes the
/// blocking path).
pub fn dup(l: &mut Locked, comm: c_int) -> MpiResult<c_int> {
    let Some((ctx, n, _)) = parent(l.core()?, comm)? else {
        return comm::dup(l, comm);
    };
    let group = l.core()?.engine.group_of(ctx).map_err(pml_err)?;
    let new = agree(l, comm, ctx, n)?;
    l.core()?.engine.add_context(new, group.members().to_vec());
    comm::finish_dup(l, comm, new)
}

/// `MPI_Comm_split` under `MPI_THREAD_MULTIPLE` (an inter-communicator takes the blocking
/// path): the new communicator, `None` for `MPI_UNDEFINED`.
pub fn split(l: &mut Locked, comm: c_int, color: c_int, key: c_int) -> MpiResult<Option<c_int>> {
    let Some((ctx, n, eh)) = parent(l.core()?, comm)? else {
        return comm::split(l.core()?, comm, color, key);
    };
    comm::check_color(color)?;
    let color = (color != crate::mem::UNDEFINED).then_some(color);
    let all = allgather_waiting(l, comm, ctx, n, split_contribution(color, key))?;
    let group = l.core()?.engine.group_of(ctx).map_err(pml_err)?;
    let new = agree(l, comm, ctx, n)?;
    let core = l.core()?;
    let Some(color) = color else {
        core.engine.release_context_claim(new);
        return Ok(None);
    };
    let members = split_members(group.members(), color, all.chunks_exact(SPLIT_CONTRIBUTION))
        .map_err(pml_err);
    let members = match members {
        Ok(m) => m,
        Err(e) => {
            core.engine.release_context_claim(new);
            return Err(e);
        }
    };
    core.engine.add_context(new, members);
    Ok(Some(core.new_comm(new, eh)?))
}

/// `MPI_Comm_split` at the program's thread level: [`split`] under `MPI_THREAD_MULTIPLE`,
/// the blocking [`comm::split`] below it (also the topology constructors' split).
pub fn split_at_level(
    l: &mut Locked,
    comm: c_int,
    color: c_int,
    key: c_int,
) -> MpiResult<Option<c_int>> {
    if l.multithreaded() {
        split(l, comm, color, key)
    } else {
        comm::split(l.core()?, comm, color, key)
    }
}

/// `MPI_Comm_create` under `MPI_THREAD_MULTIPLE` (an inter-communicator takes the blocking
/// path): the new communicator, `None` where this process is not in `group`.
pub fn create(l: &mut Locked, comm: c_int, group: c_int) -> MpiResult<Option<c_int>> {
    let Some((ctx, n, eh)) = parent(l.core()?, comm)? else {
        return comm::create(l.core()?, comm, group);
    };
    let g = comm::check_subgroup(l.core()?, comm, group)?;
    let new = agree(l, comm, ctx, n)?;
    let core = l.core()?;
    if g.rank_of(core.engine.rank()).is_none() {
        core.engine.release_context_claim(new);
        return Ok(None);
    }
    core.engine.add_context(new, g.members().to_vec());
    Ok(Some(core.new_comm(new, eh)?))
}
