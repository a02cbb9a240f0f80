//! Communicators of a subgroup: `MPI_Comm_create` (collective over the old communicator,
//! [`Communicator::split_by_subgroup_collective`]) and `MPI_Comm_create_group` (collective
//! over the group's members only, [`Communicator::split_by_subgroup`]).
//!
//! It owns who takes part in each creation and with which tag; the engine agrees on the
//! context id and registers it. It never moves message data itself and holds no state.

use crate::{Communicator, Group, SimpleCommunicator, Tag};

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
