//! The request table: allocation with generation-checked ids, completion queries, waits,
//! and failing the requests a departed process leaves behind. Owns request lifetime; it must
//! never interpret a message.

use super::*;

impl Engine {
    /// Completes `id` if done, without progress: `Some(status)` frees the request.
    /// Inlined: the C library's wait and test paths call it once per request, and a call
    /// returns the status through memory.
    #[inline]
    pub fn try_complete(&mut self, id: ReqId) -> Option<Status> {
        if id == DONE {
            return Some(Status::default());
        }
        if crate::engine::nbc::is_coll(id) {
            return self.coll_try_complete(id);
        }
        self.st.take_done(id)
    }

    /// [`Engine::try_complete`] of a point-to-point request for a caller that wants no
    /// status: `Some(ended_badly)` (a truncated receive, or an operation whose peer failed)
    /// when `id` completed (it is then freed), `None` while it is
    /// pending or when `id` names no point-to-point request (callers check
    /// [`crate::nbc::is_coll`] first, as the C library's plain paths do). Only one flag
    /// leaves the request, so the C library's `MPI_Waitall` without statuses moves no status.
    #[inline]
    pub fn try_complete_quiet(&mut self, id: ReqId) -> Option<bool> {
        if id == DONE {
            return Some(false);
        }
        self.st.take_done_quiet(id)
    }

    /// Whether `id` is complete (without freeing it).
    pub fn is_complete(&self, id: ReqId) -> bool {
        if id == DONE {
            return true;
        }
        if crate::engine::nbc::is_coll(id) {
            return self.coll_is_complete(id);
        }
        match self.st.req(id) {
            Some(Req::Send { state, .. }) => matches!(state, SendState::Done),
            Some(Req::Recv { state, .. }) => matches!(state, RecvState::Done),
            None => true,
        }
    }

    /// Whether `id` names a point-to-point request that completed and was freed (taken by
    /// [`Engine::try_complete`] or a wait): waiting for it again would never end. Immediate
    /// completions ([`DONE`]) and collective requests answer waits by themselves.
    pub fn is_freed(&self, id: ReqId) -> bool {
        id != DONE && !crate::engine::nbc::is_coll(id) && self.st.req(id).is_none()
    }

    /// `MPI_Test`: one round of progress, then completes `id` if done.
    pub fn test(&mut self, id: ReqId) -> Option<Status> {
        if let Some(s) = self.try_complete(id) {
            return Some(s);
        }
        self.progress();
        self.try_complete(id)
    }

    /// Progresses until `id` completes.
    pub fn wait(&mut self, id: ReqId) -> Status {
        let mut idle = 0u32;
        loop {
            if let Some(s) = self.try_complete(id) {
                return s;
            }
            self.idle_step(&mut idle);
        }
    }
}

impl State {
    /// See [`Engine::has_work_in_flight`]: the state's part.
    pub(crate) fn has_work_in_flight(&self) -> bool {
        self.reqs.len() > self.free_reqs.len()
            || !self.detached.is_empty()
            || !self.outbox.is_empty()
            || !self.gets.is_empty()
            || !self.remote_reads.is_empty()
            || !self.released.is_empty()
            || !self.puts.is_empty()
            || !self.rma_inbox.is_empty()
    }

    /// Peers (job ranks) of the send requests not finished yet, in table order.
    pub(crate) fn unfinished_send_peers(&self) -> Vec<u32> {
        self.reqs
            .iter()
            .filter_map(|slot| match &slot.req {
                Some(Req::Send { peer, state, .. }) if !matches!(state, SendState::Done) => {
                    Some(*peer)
                }
                _ => None,
            })
            .collect()
    }

    /// Completes the pending operations that failed process `p` ends: sends to it, receives
    /// posted on the contexts in `broken` (and split copies it was part of), and drops queued
    /// work for it. Transfers with live peers already under way are left to finish, so no
    /// peer writes into a buffer its owner was told is free. The exposed buffers of rendezvous
    /// sends to `p` join `released`, for the caller to release.
    pub(crate) fn fail_pending(&mut self, p: u32, broken: &[u16]) {
        let mut cancel = Vec::new();
        for (idx, slot) in self.reqs.iter_mut().enumerate() {
            let id = (u64::from(slot.gen) << 32) | idx as u64;
            match &mut slot.req {
                Some(Req::Send {
                    peer,
                    buf,
                    state,
                    failed,
                }) if *peer == p && !matches!(state, SendState::Done) => {
                    // A rendezvous send may have exposed (registered) its buffer, and the
                    // FIN that would release it never comes now.
                    if let Some(btl) = state.exposed_by() {
                        self.released.push(Exposed {
                            peer: p,
                            btl,
                            buf: *buf,
                        });
                    }
                    *state = SendState::Done;
                    *failed = Some(p);
                }
                Some(Req::Recv {
                    ctx, state, status, ..
                }) if broken.contains(ctx) => {
                    let ends = match state {
                        RecvState::Posted => {
                            cancel.push((*ctx, id));
                            true
                        }
                        RecvState::Pipeline { .. } => true,
                        RecvState::Split { peer, .. } => *peer == p,
                        RecvState::Done => false,
                    };
                    if ends {
                        *state = RecvState::Done;
                        status.failed_peer = Some(p);
                    }
                }
                _ => {}
            }
        }
        for (ctx, id) in cancel {
            if let Some(c) = self.ctxs.get_mut(ctx as usize).and_then(Option::as_mut) {
                c.matcher.cancel(RecvId(id));
            }
        }
        self.outbox.retain(|o| match o {
            Out::Msg { peer, .. } | Out::Stream { peer, .. } | Out::Rma { peer, .. } => *peer != p,
        });
        self.gets.retain(|g| g.peer != p);
        self.puts.retain(|x| x.peer != p);
    }

    pub(super) fn alloc(&mut self, req: Req) -> ReqId {
        let idx = match self.free_reqs.pop() {
            Some(i) => i,
            None => {
                self.reqs.push(Slot { gen: 0, req: None });
                (self.reqs.len() - 1) as u32
            }
        };
        let slot = &mut self.reqs[idx as usize];
        slot.gen = slot.gen.wrapping_add(1) & 0x7fff_ffff;
        slot.req = Some(req);
        (u64::from(slot.gen) << 32) | u64::from(idx)
    }

    pub(super) fn req(&self, id: ReqId) -> Option<&Req> {
        let slot = self.reqs.get((id & 0xffff_ffff) as usize)?;
        (u64::from(slot.gen) == id >> 32).then_some(())?;
        slot.req.as_ref()
    }

    pub(super) fn req_mut(&mut self, id: ReqId) -> Option<&mut Req> {
        let slot = self.reqs.get_mut((id & 0xffff_ffff) as usize)?;
        (u64::from(slot.gen) == id >> 32).then_some(())?;
        slot.req.as_mut()
    }

    /// Frees the finished request `id` once `report` has read, in place, what the caller
    /// needs of it (the record is large and this runs once per completed message, so it is
    /// never moved out); `None` while it runs, or when `id` names nothing.
    #[inline(always)]
    fn take_finished<T>(&mut self, id: ReqId, report: impl FnOnce(&Req) -> Option<T>) -> Option<T> {
        let idx = (id & 0xffff_ffff) as usize;
        let slot = self.reqs.get_mut(idx)?;
        if u64::from(slot.gen) != id >> 32 {
            return None;
        }
        let out = report(slot.req.as_ref()?)?;
        slot.req = None;
        self.free_reqs.push(idx as u32);
        Some(out)
    }

    /// [`State::take_done`] reporting only whether the operation ended badly (a truncated
    /// receive, or a failed peer).
    #[inline]
    pub(super) fn take_done_quiet(&mut self, id: ReqId) -> Option<bool> {
        self.take_finished(id, |r| match r {
            Req::Send {
                state: SendState::Done,
                failed,
                ..
            } => Some(failed.is_some()),
            Req::Recv {
                state: RecvState::Done,
                status,
                ..
            } => Some(status.truncated_from.is_some() || status.failed_peer.is_some()),
            _ => None,
        })
    }

    /// The status of `id` if it is done, freeing it.
    #[inline]
    pub(super) fn take_done(&mut self, id: ReqId) -> Option<Status> {
        self.take_finished(id, |r| match r {
            Req::Send {
                state: SendState::Done,
                failed,
                ..
            } => Some(Status {
                failed_peer: *failed,
                ..Status::default()
            }),
            Req::Recv {
                state: RecvState::Done,
                status,
                ..
            } => Some(*status),
            _ => None,
        })
    }
}
