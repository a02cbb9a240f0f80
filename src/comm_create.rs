//! Communicator creation beyond `duplicate` and `split_by_color`: communicators of a
//! subgroup, `MPI_Comm_create` (collective over the old communicator,
//! [`Communicator::split_by_subgroup_collective`]) and `MPI_Comm_create_group` (collective
//! over the group's members only, [`Communicator::split_by_subgroup`]), and the nonblocking
//! duplicate `MPI_Comm_idup` ([`Communicator::immediate_duplicate`], a
//! [`PendingDuplicate`]).
//!
//! It owns who takes part in each creation and with which tag, and the memory of a
//! duplicate under way; the engine agrees on context ids, runs the exchange and registers
//! the context. It never moves message data itself and holds no state between calls.

use std::rc::Rc;

use kestrel_pml::ReqId;

use crate::{request, Communicator, Group, Inner, SimpleCommunicator, Tag};

/// An engine-internal tag for `MPI_Comm_create_group`'s agreement among the group (the
/// range Kestrel's C library uses for the same call).
fn group_tag(tag: Tag) -> i32 {
    i32::MIN + 0x4000_0000 + (tag & 0x0fff_ffff)
}

/// The positions in `c` of the group's members; a member outside `c` is fatal.
fn positions(c: &SimpleCommunicator, call: &str, group: &Group) -> Vec<u32> {
    let members = c.group();
    let members = members.members();
    group
        .members()
        .iter()
        .map(|m| match members.iter().position(|x| x == m) {
            Some(p) => p as u32,
            None => c.inner.fatal(&format!(
                "{call}: the group holds process {m} of the world, which is not in the \
                 communicator; build the group from the communicator's own group \
                 (Communicator::group) so that it is a subset of it"
            )),
        })
        .collect()
}

/// `MPI_Comm_create` (see [`Communicator::split_by_subgroup_collective`]).
pub(crate) fn create(c: &SimpleCommunicator, group: &Group) -> Option<SimpleCommunicator> {
    const CALL: &str = "split_by_subgroup_collective (MPI_Comm_create)";
    positions(c, CALL, group);
    let mut e = c.inner.engine.borrow_mut();
    let new = e
        .agree_context(c.ctx)
        .unwrap_or_else(|err| c.inner.fatal(&format!("{CALL}: {err}")));
    group.rank_of(e.rank())?;
    e.add_context(new, group.members().to_vec());
    drop(e);
    Some(SimpleCommunicator::from_context(&c.inner, new))
}

/// `MPI_Comm_create_group` (see [`Communicator::split_by_subgroup_with_tag`]).
pub(crate) fn create_group(
    c: &SimpleCommunicator,
    group: &Group,
    tag: Tag,
) -> Option<SimpleCommunicator> {
    const CALL: &str = "split_by_subgroup (MPI_Comm_create_group)";
    if tag < 0 {
        c.inner.fatal(&format!(
            "{CALL}: tag {tag} is negative; use a tag >= 0 (the same on every member)"
        ));
    }
    let me = c.inner.engine.borrow().rank();
    group.rank_of(me)?;
    let among = positions(c, CALL, group);
    let mut e = c.inner.engine.borrow_mut();
    let new = e
        .agree_context_among(c.ctx, &among, group_tag(tag))
        .unwrap_or_else(|err| c.inner.fatal(&format!("{CALL}: {err}")));
    e.add_context(new, group.members().to_vec());
    drop(e);
    Some(SimpleCommunicator::from_context(&c.inner, new))
}

/// A nonblocking duplicate under way (`MPI_Comm_idup`, from
/// [`Communicator::immediate_duplicate`]): every member's proposal for the new context id
/// travels in a nonblocking allgather, which the engine advances while the program works;
/// [`wait`](Self::wait) completes it and gives the communicator. Complete it before
/// creating other communicators over the same processes (a blocking creation meanwhile may
/// take the id it agrees on: [`wait`](Self::wait) then stops the job naming the clash).
/// Dropping it without waiting completes it and frees the new communicator.
#[must_use = "a pending duplicate must be waited for to give its communicator"]
pub struct PendingDuplicate {
    inner: Rc<Inner>,
    id: ReqId,
    members: Vec<u32>,
    /// This process's proposal (2 bytes), then every member's (2 per member). The engine
    /// reads and writes it until the request completes; it is freed only after that (a
    /// leaked value leaks it too, so it stays valid).
    ids: Vec<u8>,
    done: bool,
}

impl std::fmt::Debug for PendingDuplicate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PendingDuplicate({:#x})", self.id)
    }
}

/// `MPI_Comm_idup` (see [`Communicator::immediate_duplicate`]).
pub(crate) fn idup(c: &SimpleCommunicator) -> PendingDuplicate {
    const CALL: &str = "immediate_duplicate (MPI_Comm_idup)";
    let fatal = |e: kestrel_pml::PmlError| -> ! { c.inner.fatal(&format!("{CALL}: {e}")) };
    let members = c.group().members().to_vec();
    let n = members.len();
    let mut e = c.inner.engine.borrow_mut();
    let proposal = e.context_proposal().unwrap_or_else(|err| fatal(err));
    let mut ids = vec![0u8; 2 + 2 * n];
    ids[..2].copy_from_slice(&proposal.to_le_bytes());
    let (mine, all) = ids.split_at_mut(2);
    let (counts, displs) = kestrel_pml::nbc::algorithms::uniform(n as u32, 2);
    // SAFETY: both halves are the heap buffer of `ids`, which the returned value owns (moving
    // the vector does not move the buffer) and frees only after the request completed
    // (`wait` or drop); a leaked value leaks the buffer, which then stays valid.
    let (s, r) = unsafe { (request::send_buf(mine), request::recv_buf(all)) };
    let sched = e.nbc_allgatherv(c.ctx, Some(s), r, &counts, &displs);
    let id = e.coll_run(sched.unwrap_or_else(|err| fatal(err)));
    PendingDuplicate {
        inner: c.inner.clone(),
        id,
        members,
        ids,
        done: false,
    }
}

impl PendingDuplicate {
    /// Completes the exchange and registers the agreed context: the largest proposal.
    fn finish(&mut self) -> u16 {
        self.done = true;
        let st = self.inner.engine.borrow_mut().wait(self.id);
        request::check_coll(&self.inner, self.id, st);
        let agreed = self.ids[2..]
            .chunks_exact(2)
            .map(|b| u16::from_le_bytes([b[0], b[1]]))
            .max()
            .unwrap_or(u16::MAX);
        let members = std::mem::take(&mut self.members);
        let r = self
            .inner
            .engine
            .borrow_mut()
            .adopt_context(agreed, members);
        r.unwrap_or_else(|e| {
            self.inner
                .fatal(&format!("immediate_duplicate (MPI_Comm_idup): {e}"))
        });
        agreed
    }

    /// `MPI_Wait` of the duplicate: blocks until every member's proposal arrived, and
    /// gives the new communicator.
    pub fn wait(mut self) -> SimpleCommunicator {
        let ctx = self.finish();
        SimpleCommunicator::from_context(&self.inner, ctx)
    }

    /// `MPI_Test`: the communicator if the exchange completed (after one round of
    /// progress), else the pending duplicate back.
    pub fn test(self) -> Result<SimpleCommunicator, PendingDuplicate> {
        self.inner.engine.borrow_mut().progress();
        if self.inner.engine.borrow().is_complete(self.id) {
            Ok(self.wait())
        } else {
            Err(self)
        }
    }
}

impl Drop for PendingDuplicate {
    fn drop(&mut self) {
        if !self.done {
            let ctx = self.finish();
            if let Ok(mut e) = self.inner.engine.try_borrow_mut() {
                e.free_context(ctx);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::group_tag;

    #[test]
    fn group_tags_are_negative_and_distinct_for_small_tags() {
        let tags: Vec<i32> = (0..100).chain([0x0fff_ffff]).map(group_tag).collect();
        assert!(tags.iter().all(|&t| t < 0));
        let mut sorted = tags.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(sorted.len(), tags.len());
    }
}
