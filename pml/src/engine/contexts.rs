//! Communicator contexts: registering, looking up, freeing, agreeing on new ids, dup and split.
//! Owns the context table; it must never move message data.

use super::*;

impl Engine {
    /// Registers a communicator context (its members as job ranks, in rank order) and
    /// delivers messages that arrived for it before it existed here.
    pub fn add_context(&mut self, ctx: u16, group: Vec<u32>) {
        let idx = ctx as usize;
        if self.st.ctxs.len() <= idx {
            self.st.ctxs.resize_with(idx + 1, || None);
        }
        let n = group.len();
        let me = group.iter().position(|&r| r == self.rank).unwrap_or(0) as u32;
        let broken = self.dpm.first_failed_in(&group);
        self.st.ctxs[idx] = Some(Ctx {
            matcher: MatchEngine::new(n as u32),
            group,
            me,
            send_seq: vec![0; n],
            coll_seq: 0,
            blocking_seq: 0,
            inter: None,
            broken,
        });
        self.context_added(ctx);
    }

    /// Registers an inter-communicator context: ranks address `remote` (process indices in
    /// remote rank order); `local_ctx` is created as an intra-communicator over `local`.
    pub(crate) fn add_inter_context(
        &mut self,
        ctx: u16,
        local: Vec<u32>,
        remote: Vec<u32>,
        local_ctx: u16,
    ) {
        self.add_context(local_ctx, local.clone());
        let idx = ctx as usize;
        if self.st.ctxs.len() <= idx {
            self.st.ctxs.resize_with(idx + 1, || None);
        }
        let n = remote.len();
        let me = local.iter().position(|&r| r == self.rank).unwrap_or(0) as u32;
        let broken = self
            .dpm
            .first_failed_in(&remote)
            .or_else(|| self.dpm.first_failed_in(&local));
        self.st.ctxs[idx] = Some(Ctx {
            matcher: MatchEngine::new(n as u32),
            group: remote,
            me,
            send_seq: vec![0; n],
            coll_seq: 0,
            blocking_seq: 0,
            inter: Some(InterCtx {
                local_group: local,
                local_ctx,
            }),
            broken,
        });
        self.context_added(ctx);
    }

    pub(super) fn context_added(&mut self, ctx: u16) {
        if ctx >= self.next_ctx {
            self.next_ctx = ctx + 1;
        }
        self.ctx_claims.retain(|&c| c != ctx);
        if let Some(early) = self.st.orphans.remove(&ctx) {
            for (peer, data) in early {
                self.st.on_message(peer, &data);
            }
            self.after_delivery();
        }
    }

    /// Forgets a context (`MPI_Comm_free`); for an inter-communicator also its local context.
    pub fn free_context(&mut self, ctx: u16) {
        if ctx > CTX_SELF {
            self.free_hierarchy(ctx);
            if let Some(slot) = self.coll_scopes.get_mut(ctx as usize) {
                *slot = None;
            }
            if let Some(slot) = self.coll_segments.get_mut(ctx as usize) {
                *slot = None;
            }
            if let Some(calls) = self.coll_segment_calls.get_mut(ctx as usize) {
                *calls = 0;
            }
            if let Some(slot) = self.coll_posted.get_mut(ctx as usize) {
                *slot = None;
            }
            if let Some(slot) = self.st.ctxs.get_mut(ctx as usize) {
                if let Some(inter) = slot.take().and_then(|c| c.inter) {
                    self.free_context(inter.local_ctx);
                }
            }
        }
    }

    /// The processes ranks of a context address: its members (process indices, which are job
    /// ranks for this job's processes), or the remote group of an inter-communicator.
    pub fn context_group(&self, ctx: u16) -> Option<&[u32]> {
        self.st
            .ctxs
            .get(ctx as usize)?
            .as_ref()
            .map(|c| c.group.as_slice())
    }

    /// The local group of a context: its members, or an inter-communicator's local group.
    pub fn context_local_group(&self, ctx: u16) -> Option<&[u32]> {
        let c = self.st.ctxs.get(ctx as usize)?.as_ref()?;
        Some(match &c.inter {
            Some(i) => i.local_group.as_slice(),
            None => c.group.as_slice(),
        })
    }

    /// Whether `ctx` is an inter-communicator.
    pub fn is_inter(&self, ctx: u16) -> bool {
        self.st
            .ctxs
            .get(ctx as usize)
            .and_then(|c| c.as_ref())
            .is_some_and(|c| c.inter.is_some())
    }

    /// The next number of `ctx`'s collective sequence (see [`crate::nbc`]).
    /// `blocking`: of the sequence of blocking collectives run as schedules.
    pub(crate) fn next_coll_seq(&mut self, ctx: u16, blocking: bool) -> Result<u32, PmlError> {
        self.ctx(ctx)?;
        let c = self.st.ctxs[ctx as usize].as_mut().expect("checked above");
        let seq = if blocking {
            &mut c.blocking_seq
        } else {
            &mut c.coll_seq
        };
        let s = *seq;
        *seq = s.wrapping_add(1);
        Ok(s)
    }

    pub(crate) fn ctx(&self, ctx: u16) -> Result<&Ctx, PmlError> {
        let c = self
            .st
            .ctxs
            .get(ctx as usize)
            .and_then(|c| c.as_ref())
            .ok_or_else(|| {
                PmlError::Invalid(format!(
                    "pml: communicator context {ctx} does not exist (freed?)"
                ))
            })?;
        if let Some((_, why)) = &c.broken {
            return Err(PmlError::Dpm(kestrel_runtime::dpm::DpmError::ProcFailed(
                why.clone(),
            )));
        }
        Ok(c)
    }

    /// Collective over `ctx`: a new context id agreed by all members (`MPI_Comm_dup`'s
    /// first step). See [`Engine::agree_contexts`].
    pub fn agree_context(&mut self, ctx: u16) -> Result<u16, PmlError> {
        self.agree_contexts(ctx, 1)
    }

    /// Collective over `ctx`: `count` consecutive context ids free at every member, agreed by
    /// all of them; the first. Fresh ids while they last: the largest next-free id among the
    /// members (one allgather of two bytes), so it and the ones after are unused everywhere.
    /// Once fresh ids run out (a program that keeps creating and freeing communicators: 65,533
    /// `MPI_Comm_dup`/`MPI_Comm_free` pairs), ids freed since are reused
    /// ([`Engine::agree_freed_contexts`]). Every member sees the same proposals, so all take
    /// the same branch.
    pub fn agree_contexts(&mut self, ctx: u16, count: u16) -> Result<u16, PmlError> {
        let all = self.allgather_bytes(ctx, &self.next_ctx.to_le_bytes())?;
        let best = proposals(&all)?.fold(self.next_ctx, u16::max);
        if u32::from(best) + u32::from(count) <= u32::from(u16::MAX) {
            self.next_ctx = best + count;
            return Ok(best);
        }
        self.agree_freed_contexts(ctx, count)
    }

    /// [`Engine::agree_contexts`] once fresh ids are gone: each member proposes the first run
    /// of `count` ids it has free at or after a common starting point; when all propose the
    /// same run it is free everywhere, otherwise the next round starts at the largest
    /// proposal. The starting point only grows, so the rounds end; when every id is taken
    /// at some member, the members are out of ids. A program freeing what it created agrees
    /// in one round (its members free the same ids). The fresh-id cursor stays where it is.
    fn agree_freed_contexts(&mut self, ctx: u16, count: u16) -> Result<u16, PmlError> {
        self.freed_ids_in_rounds(count, |e, mine| {
            let all = e.allgather_bytes(ctx, &mine.to_le_bytes())?;
            let (mut top, mut agreed) = (mine, true);
            for p in proposals(&all)? {
                agreed &= p == mine;
                top = top.max(p);
            }
            Ok((top, agreed))
        })
    }

    /// The rounds of [`Engine::agree_freed_contexts`] (and of [`Engine::agree_context_among`]
    /// once fresh ids are gone): `round` exchanges this member's proposal and answers the
    /// largest and whether all were equal.
    fn freed_ids_in_rounds(
        &mut self,
        count: u16,
        mut round: impl FnMut(&mut Engine, u16) -> Result<(u16, bool), PmlError>,
    ) -> Result<u16, PmlError> {
        let mut from = CTX_SELF + 1;
        loop {
            let mine = self.free_run_from(from, count).unwrap_or(u16::MAX);
            let (top, agreed) = round(self, mine)?;
            if top == u16::MAX {
                return Err(self.out_of_context_ids(false));
            }
            if agreed {
                return Ok(top);
            }
            from = top;
        }
    }

    /// The first of `count` consecutive context ids at or after `from` that this process has
    /// free: no communicator here uses one, no creation claims one, and no message waits for
    /// one (a message for a freed communicator that arrived late would otherwise reach its
    /// successor). `None` when there is no such run below `u16::MAX`, which is never an id.
    fn free_run_from(&self, from: u16, count: u16) -> Option<u16> {
        let free = |id: u16| {
            !self.st.ctxs.get(id as usize).is_some_and(Option::is_some)
                && !self.ctx_claims.contains(&id)
                && !self.st.orphans.contains_key(&id)
        };
        first_free_run(from, count, free)
    }

    /// The error of a creation that finds no context id left. `fresh_only`: the creation
    /// takes ids never used before (inter-communicators, connections, nonblocking
    /// creations), which do not come back when communicators are freed.
    pub fn out_of_context_ids(&self, fresh_only: bool) -> PmlError {
        let live = self.st.ctxs.iter().filter(|c| c.is_some()).count();
        let why = if fresh_only {
            "; this creation takes ids never used before (inter-communicators, connections and \
             nonblocking creations do), and all 65,535 have been handed out"
        } else {
            ""
        };
        PmlError::Invalid(format!(
            "pml: out of communicator context ids ({live} communicators live here, 65,535 ids \
             in all{why}); free communicators you no longer need"
        ))
    }

    /// A context id agreed by some ranks of `ctx` only (`among`, in the order the group
    /// lists them; the first one gathers and answers): `MPI_Comm_create_group` and
    /// `MPI_Comm_create_from_group`, which only the new members call. `tag` separates
    /// concurrent creations over overlapping groups (a negative, engine-internal tag).
    pub fn agree_context_among(
        &mut self,
        ctx: u16,
        among: &[u32],
        tag: i32,
    ) -> Result<u16, PmlError> {
        if among.is_empty() {
            return Err(PmlError::Invalid(
                "pml: an empty group creates no communicator".into(),
            ));
        }
        // Fresh ids while they last, then ids freed since, as `agree_contexts`.
        let (best, _) = self.among_round(ctx, among, tag, self.next_ctx)?;
        if best != u16::MAX {
            self.next_ctx = self.next_ctx.max(best + 1);
            return Ok(best);
        }
        self.freed_ids_in_rounds(1, |e, mine| e.among_round(ctx, among, tag, mine))
    }

    /// One round of [`Engine::agree_context_among`]: the first of `among` gathers the
    /// members' proposals and answers each with their largest and whether all were equal.
    fn among_round(
        &mut self,
        ctx: u16,
        among: &[u32],
        tag: i32,
        mine: u16,
    ) -> Result<(u16, bool), PmlError> {
        let me = self.ctx(ctx)?.me;
        let leader = among[0];
        if me != leader {
            self.send_checked(ctx, leader, tag, &mine.to_le_bytes(), false)?;
            let mut b = [0u8; 3];
            self.recv_checked(ctx, Some(leader), Some(tag), &mut b)?;
            return Ok((u16::from_le_bytes([b[0], b[1]]), b[2] == 1));
        }
        let (mut top, mut agreed) = (mine, true);
        for &r in &among[1..] {
            let mut b = [0u8; 2];
            self.recv_checked(ctx, Some(r), Some(tag), &mut b)?;
            let p = u16::from_le_bytes(b);
            agreed &= p == mine;
            top = top.max(p);
        }
        let [lo, hi] = top.to_le_bytes();
        for &r in &among[1..] {
            self.send_checked(ctx, r, tag, &[lo, hi, u8::from(agreed)], false)?;
        }
        Ok((top, agreed))
    }

    /// This process's proposal for a nonblocking creation's context id (its next free
    /// id, which it then reserves); the creation gathers the members' proposals and calls
    /// [`Engine::adopt_context`] with their maximum.
    ///
    /// Reserving makes a process's proposals strictly increase, so creations outstanding
    /// together over the same members (several `MPI_Comm_idup`s, then blocking creations)
    /// agree on distinct ids. Over different, overlapping member sets, two outstanding
    /// creations can still agree on one id (each maximum comes from another process):
    /// [`Engine::adopt_context`] reports that clash.
    pub fn context_proposal(&mut self) -> Result<u16, PmlError> {
        let p = self.next_ctx;
        if p == u16::MAX {
            return Err(self.out_of_context_ids(true));
        }
        self.next_ctx = p + 1;
        Ok(p)
    }

    /// The id this process proposes in a round of a creation under `MPI_THREAD_MULTIPLE`
    /// (nothing is reserved; the creation then claims the agreed maximum,
    /// [`Engine::claim_context`]): its next fresh id while fresh ids last, then its first free
    /// id at or after `after_failed`, the maximum of the round before when that round's
    /// claims failed somewhere. `u16::MAX` when it has none left.
    ///
    /// The rounds end: after a failed round every member proposes more than its maximum
    /// (a member that claimed it has moved its fresh ids past it; one that could not has it
    /// in use), except one whose claim succeeded and was given back, and at least one member
    /// failed.
    pub fn context_id_proposal(&self, after_failed: Option<u16>) -> u16 {
        if self.next_ctx != u16::MAX {
            return self.next_ctx;
        }
        self.free_run_from(after_failed.unwrap_or(CTX_SELF + 1), 1)
            .unwrap_or(u16::MAX)
    }

    /// Claims `ctx` for a creation whose members agreed on it, if this process uses it for
    /// nothing else (no communicator, no other claim): later proposals here then start past
    /// it. False: taken meanwhile (the creation agrees again). A claim ends when the context
    /// is added ([`Engine::add_context`]) or given back ([`Engine::release_context_claim`]).
    pub fn claim_context(&mut self, ctx: u16) -> bool {
        let used = self.st.ctxs.get(ctx as usize).is_some_and(Option::is_some);
        // No member uses an id before every member claimed it, so a message already waiting
        // for it belongs to a freed communicator that had it: the id is not free here.
        let stale = self.st.orphans.contains_key(&ctx);
        if used || stale || ctx == u16::MAX || self.ctx_claims.contains(&ctx) {
            return false;
        }
        self.ctx_claims.push(ctx);
        self.next_ctx = self.next_ctx.max(ctx + 1);
        true
    }

    /// Gives back a claim that no communicator here takes (another member could not claim
    /// the id, or this process is not a member of the new communicator).
    pub fn release_context_claim(&mut self, ctx: u16) {
        self.ctx_claims.retain(|&c| c != ctx);
    }

    /// Registers context `ctx` agreed by a nonblocking creation; an id this process has
    /// meanwhile used for another communicator is an error naming the clash.
    pub fn adopt_context(&mut self, ctx: u16, group: Vec<u32>) -> Result<(), PmlError> {
        if self.st.ctxs.get(ctx as usize).is_some_and(Option::is_some)
            || self.ctx_claims.contains(&ctx)
        {
            return Err(PmlError::Invalid(format!(
                "pml: context {ctx} agreed by a nonblocking communicator creation is already \
                 in use here (another communicator was created before it completed); complete \
                 MPI_Comm_idup before creating other communicators"
            )));
        }
        self.add_context(ctx, group);
        Ok(())
    }

    /// `MPI_Comm_dup`: a new context with the same members.
    pub fn dup(&mut self, ctx: u16) -> Result<u16, PmlError> {
        if self.is_inter(ctx) {
            return self.inter_dup(ctx);
        }
        let group = self.ctx(ctx)?.group.clone();
        let new = self.agree_context(ctx)?;
        self.add_context(new, group);
        Ok(new)
    }

    /// `MPI_Comm_split`: members with the same `color` form a communicator ordered by (key,
    /// old rank); `None` = `MPI_UNDEFINED` (no communicator). Returns the new context.
    pub fn split(
        &mut self,
        ctx: u16,
        color: Option<i32>,
        key: i32,
    ) -> Result<Option<u16>, PmlError> {
        let all = self.allgather_bytes(ctx, &split_contribution(color, key))?;
        let group = self.ctx(ctx)?.group.clone();
        let new = self.agree_context(ctx)?;
        let Some(color) = color else { return Ok(None) };
        let members = split_members(&group, color, all.iter().map(Vec::as_slice))?;
        self.add_context(new, members);
        Ok(Some(new))
    }

    /// A group of the members of `ctx`.
    pub fn group_of(&self, ctx: u16) -> Result<Group, PmlError> {
        Ok(Group::new(self.ctx(ctx)?.group.clone()))
    }
}

/// The first of `count` consecutive ids at or after `from` that `free` accepts, all below
/// `u16::MAX`; `None` when there is none.
fn first_free_run(from: u16, count: u16, free: impl Fn(u16) -> bool) -> Option<u16> {
    let mut start = from;
    loop {
        let end = u32::from(start) + u32::from(count);
        if end > u32::from(u16::MAX) {
            return None;
        }
        // The run restarts after its last taken id.
        match (start..end as u16).rev().find(|&id| !free(id)) {
            Some(taken) => start = taken + 1,
            None => return Some(start),
        }
    }
}

/// The two-byte context ids an allgather of [`Engine::agree_contexts`] collected.
fn proposals(all: &[Vec<u8>]) -> Result<impl Iterator<Item = u16> + '_, PmlError> {
    if all.iter().any(|a| a.len() != 2) {
        return Err(PmlError::Transport(
            "pml: a member's context id proposal is not two bytes".into(),
        ));
    }
    Ok(all.iter().map(|a| u16::from_le_bytes([a[0], a[1]])))
}

/// What a member contributes to `MPI_Comm_split`: whether it has a color, the color and the
/// key (9 bytes, [`SPLIT_CONTRIBUTION`]).
pub fn split_contribution(color: Option<i32>, key: i32) -> Vec<u8> {
    let mut mine = Vec::with_capacity(SPLIT_CONTRIBUTION);
    mine.push(u8::from(color.is_some()));
    mine.extend_from_slice(&color.unwrap_or(0).to_le_bytes());
    mine.extend_from_slice(&key.to_le_bytes());
    mine
}

/// Bytes of one [`split_contribution`].
pub const SPLIT_CONTRIBUTION: usize = 9;

/// The members (job ranks) of `color`'s new communicator, ordered by (key, old rank), from
/// every member's [`split_contribution`] in rank order of the parent `group`; a malformed
/// contribution is an error naming its rank.
pub fn split_members<'a>(
    group: &[u32],
    color: i32,
    all: impl Iterator<Item = &'a [u8]>,
) -> Result<Vec<u32>, PmlError> {
    let mut members: Vec<(i32, usize, u32)> = Vec::new();
    for (r, a) in all.enumerate() {
        let (Ok(&[has, c0, c1, c2, c3, k0, k1, k2, k3]), Some(&g)) =
            (<&[u8; SPLIT_CONTRIBUTION]>::try_from(a), group.get(r))
        else {
            return Err(PmlError::Transport(format!(
                "pml: malformed split contribution from rank {r}"
            )));
        };
        let c = i32::from_le_bytes([c0, c1, c2, c3]);
        let k = i32::from_le_bytes([k0, k1, k2, k3]);
        if has == 1 && c == color {
            members.push((k, r, g));
        }
    }
    members.sort();
    Ok(members.into_iter().map(|(_, _, g)| g).collect())
}

#[cfg(test)]
mod tests {
    use super::first_free_run;

    #[test]
    fn a_free_run_starts_after_the_last_taken_id_and_stays_below_the_sentinel() {
        let taken = [2u16, 3, 5, 8];
        let free = |id: u16| !taken.contains(&id);
        assert_eq!(first_free_run(2, 1, free), Some(4));
        assert_eq!(first_free_run(2, 2, free), Some(6));
        assert_eq!(first_free_run(2, 3, free), Some(9));
        assert_eq!(first_free_run(6, 2, free), Some(6));
        assert_eq!(first_free_run(7, 2, free), Some(9));
        // u16::MAX is never an id: the last run of two is 65533-65534.
        assert_eq!(first_free_run(65_533, 2, |_| true), Some(65_533));
        assert_eq!(first_free_run(65_534, 2, |_| true), None);
        assert_eq!(first_free_run(65_534, 1, |_| true), Some(65_534));
        assert_eq!(first_free_run(2, 1, |id| id == 65_000), Some(65_000));
        assert_eq!(first_free_run(2, 2, |id| id == 65_000), None);
    }
}
