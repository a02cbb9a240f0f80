//! Synchronization of one-sided epochs: fence, general active target (post, start,
//! complete, wait, test) and passive target (lock, unlock, their `_all` forms, flush,
//! flush_local). Each call sends what the protocol needs and progresses the engine until
//! its condition holds (so a process waiting here still serves its own window).
//!
//! Conditions use counters only (see the module docs of `rma`): an origin sends its count
//! of operations to each target; a target is done with an origin once it has applied that
//! many. Fence: every member sends every member FENCE(ops), waits until it has applied what
//! each announced, then sends FENCE_DONE and waits for everyone's; so no member leaves a
//! fence before every operation of the epoch is applied everywhere.

use super::node::NodeMap;
use super::wire::{self, Msg};
use super::Window;
use crate::engine::{Engine, PmlError};

/// Whether `cond` holds for window `win` (true once the window is gone: nothing to wait for).
fn holds(e: &Engine, win: u16, cond: impl Fn(&Window) -> bool) -> bool {
    e.rma.wins.get(&win).is_none_or(cond)
}

impl Engine {
    /// Sends `m` to each window rank in `targets`.
    fn rma_tell(&mut self, win: u16, targets: &[u32], m: impl Fn(&Window, u32) -> Msg<'static>) {
        let msgs: Vec<(u32, Vec<u8>)> = match self.rma.wins.get(&win) {
            Some(w) => targets
                .iter()
                .map(|&t| (w.group[t as usize], wire::encode(win, &m(w, t))))
                .collect(),
            None => return,
        };
        for (proc, bytes) in msgs {
            self.rma_send(proc, bytes);
        }
    }

    fn all_ranks(&self, win: u16) -> Result<Vec<u32>, PmlError> {
        Ok((0..self.window(win)?.size()).collect())
    }

    fn check_ranks(&self, win: u16, ranks: &[u32]) -> Result<(), PmlError> {
        let n = self.window(win)?.size();
        match ranks.iter().find(|&&r| r >= n) {
            Some(r) => Err(PmlError::Invalid(format!(
                "one-sided: rank {r} is not in the window's group of {n}"
            ))),
            None => Ok(()),
        }
    }

    /// Waits until the fetching operations to `targets` have their results (progressing at
    /// least once, see [`Engine::rma_serve`]).
    fn rma_fetched(&mut self, win: u16, targets: &[u32]) {
        self.rma_serve(win);
        self.rma_wait(|e| {
            holds(e, win, |w| {
                targets.iter().all(|&t| w.fetching[t as usize] == 0)
            })
        });
    }

    /// `MPI_Win_fence` (collective over the window).
    pub fn win_fence(&mut self, win: u16) -> Result<(), PmlError> {
        self.fence(win, false)
    }

    /// The fence; `closing`: the window's last one (`MPI_Win_free`), whose barrier sets up
    /// no shared-memory segment for the window's context ([`Engine::barrier_without_setup`]).
    pub(super) fn fence(&mut self, win: u16, closing: bool) -> Result<(), PmlError> {
        if self.all_direct(win) {
            // Every operation of the epoch was a copy made before its origin got here: a
            // barrier between two full memory fences is the whole fence (and allocates
            // nothing: this is the latency path of fence-synchronized codes).
            NodeMap::sync();
            if closing {
                self.barrier_without_setup(win)?;
            } else {
                self.coll_barrier(win)?;
            }
            NodeMap::sync();
            return Ok(());
        }
        let all = self.all_ranks(win)?;
        self.rma_fetched(win, &all);
        self.rma_tell(win, &all, |w, t| Msg::Fence {
            ops: w.sent[t as usize],
        });
        self.rma_wait(|e| {
            holds(e, win, |w| {
                (0..w.group.len()).all(|o| {
                    w.fence_ops[o]
                        .front()
                        .is_some_and(|&ops| w.applied[o] >= ops)
                })
            })
        });
        let epoch = {
            let w = self.window_mut(win)?;
            for q in w.fence_ops.iter_mut() {
                q.pop_front();
            }
            w.dirty.iter_mut().for_each(|d| *d = false);
            w.fence_epoch += 1;
            w.fence_epoch
        };
        self.rma_tell(win, &all, |_, _| Msg::FenceDone);
        self.rma_wait(|e| holds(e, win, |w| w.fence_dones.iter().all(|&d| d >= epoch)));
        Ok(())
    }

    /// `MPI_Win_post`: exposes this process's window to the window ranks `group`.
    pub fn win_post(&mut self, win: u16, group: &[u32]) -> Result<(), PmlError> {
        self.check_ranks(win, group)?;
        let w = self.window_mut(win)?;
        if w.exposure.is_some() {
            return Err(PmlError::Invalid(
                "one-sided: MPI_Win_post while an exposure epoch is open (call MPI_Win_wait first)"
                    .into(),
            ));
        }
        w.exposure = Some(group.to_vec());
        self.rma_tell(win, group, |_, _| Msg::Post);
        Ok(())
    }

    /// `MPI_Win_start`: begins an access epoch to the window ranks `group` (waits for their
    /// posts).
    pub fn win_start(&mut self, win: u16, group: &[u32]) -> Result<(), PmlError> {
        self.check_ranks(win, group)?;
        self.rma_serve(win);
        let w = self.window_mut(win)?;
        if w.access.is_some() {
            return Err(PmlError::Invalid(
                "one-sided: MPI_Win_start while an access epoch is open (call MPI_Win_complete first)".into(),
            ));
        }
        w.access = Some(group.to_vec());
        for &t in group {
            w.starts[t as usize] += 1;
        }
        self.rma_wait(|e| {
            holds(e, win, |w| {
                group
                    .iter()
                    .all(|&t| w.posts[t as usize] >= w.starts[t as usize])
            })
        });
        Ok(())
    }

    /// `MPI_Win_complete`: ends the access epoch; the operations are complete at the
    /// origin, and each target will know how many to wait for.
    pub fn win_complete(&mut self, win: u16) -> Result<(), PmlError> {
        let group = self.window_mut(win)?.access.take().ok_or_else(|| {
            PmlError::Invalid("one-sided: MPI_Win_complete without MPI_Win_start".into())
        })?;
        self.rma_fetched(win, &group);
        self.rma_tell(win, &group, |w, t| Msg::Complete {
            ops: w.sent[t as usize],
        });
        Ok(())
    }

    /// Whether every origin of the exposure epoch has completed and its operations are
    /// applied.
    fn exposure_done(w: &Window) -> bool {
        w.exposure.as_ref().is_none_or(|g| {
            g.iter().all(|&o| {
                w.completes[o as usize]
                    .front()
                    .is_some_and(|&ops| w.applied[o as usize] >= ops)
            })
        })
    }

    fn end_exposure(&mut self, win: u16) -> Result<(), PmlError> {
        let w = self.window_mut(win)?;
        if let Some(g) = w.exposure.take() {
            for o in g {
                w.completes[o as usize].pop_front();
            }
        }
        Ok(())
    }

    /// `MPI_Win_wait`: ends the exposure epoch once every origin completed.
    pub fn win_wait(&mut self, win: u16) -> Result<(), PmlError> {
        if self.window(win)?.exposure.is_none() {
            return Err(PmlError::Invalid(
                "one-sided: MPI_Win_wait without MPI_Win_post".into(),
            ));
        }
        self.rma_wait(|e| holds(e, win, Self::exposure_done));
        self.end_exposure(win)
    }

    /// `MPI_Win_test`: [`Engine::win_wait`] if it would not block; false otherwise.
    pub fn win_test(&mut self, win: u16) -> Result<bool, PmlError> {
        if self.window(win)?.exposure.is_none() {
            return Err(PmlError::Invalid(
                "one-sided: MPI_Win_test without MPI_Win_post".into(),
            ));
        }
        if !Self::exposure_done(self.window(win)?) {
            self.progress();
            if !Self::exposure_done(self.window(win)?) {
                return Ok(false);
            }
        }
        self.end_exposure(win)?;
        Ok(true)
    }

    /// The window if all its members share its memory on this node: synchronization with
    /// them is lock words and memory fences only (the fast paths below).
    fn all_local_window(&mut self, win: u16) -> Option<&mut Window> {
        self.rma
            .wins
            .get_mut(&win)
            .filter(|w| w.node.as_ref().is_some_and(|n| n.all_local()))
    }

    /// `MPI_Win_lock`: waits until `target`'s lock is this process's.
    ///
    /// `nocheck` (`MPI_MODE_NOCHECK`): the program asserts that no other process holds or
    /// tries to take a conflicting lock during the epoch, so none is taken: the epoch opens
    /// at once, its operations go out unlocked, and its unlock only completes them there
    /// (a flush). MPICH and Open MPI skip the lock too, and programs rely on it: OpenCoarrays'
    /// `event wait` holds `MPI_Win_lock_all(MPI_MODE_NOCHECK)` on its own window while
    /// another image takes an exclusive lock there to post the event it waits for; a lock
    /// taken for the assertion would deadlock the two.
    pub fn win_lock(
        &mut self,
        win: u16,
        target: u32,
        exclusive: bool,
        nocheck: bool,
    ) -> Result<(), PmlError> {
        if nocheck {
            return self.open_unchecked(win, &[target]);
        }
        if let Some(w) = self.all_local_window(win) {
            let t = target as usize;
            let free = t < w.locked.len()
                && w.direct_held[t].is_none()
                && w.node
                    .as_ref()
                    .is_some_and(|n| n.try_lock(target, exclusive));
            if free {
                w.direct_held[t] = Some(exclusive);
                w.locked[t] += 1;
                return Ok(());
            }
        }
        self.lock_ranks(win, &[target], exclusive)
    }

    /// `MPI_Win_lock_all`: a shared lock on every member (none with `nocheck`, as
    /// [`Engine::win_lock`]).
    pub fn win_lock_all(&mut self, win: u16, nocheck: bool) -> Result<(), PmlError> {
        let all = self.all_ranks(win)?;
        if nocheck {
            return self.open_unchecked(win, &all);
        }
        self.lock_ranks(win, &all, false)
    }

    /// Opens a passive-target epoch on `targets` without taking their locks
    /// (`MPI_MODE_NOCHECK`).
    fn open_unchecked(&mut self, win: u16, targets: &[u32]) -> Result<(), PmlError> {
        self.check_ranks(win, targets)?;
        let w = self.window_mut(win)?;
        for &t in targets {
            w.locked[t as usize] += 1;
            w.unchecked[t as usize] += 1;
        }
        // No wait here, but a synchronization call still serves the peers once.
        self.rma_serve(win);
        Ok(())
    }

    /// Sends `m` to each of `targets` and progresses until each has answered once more:
    /// until `answers(w)[t]`, the count of that answer from `t`, has grown by one.
    fn ask_each(
        &mut self,
        win: u16,
        targets: &[u32],
        m: impl Fn(&Window, u32) -> Msg<'static>,
        answers: fn(&Window) -> &[u64],
    ) -> Result<(), PmlError> {
        let want: Vec<u64> = {
            let w = self.window(win)?;
            targets
                .iter()
                .map(|&t| answers(w)[t as usize] + 1)
                .collect()
        };
        self.rma_tell(win, targets, m);
        self.rma_wait(|e| {
            holds(e, win, |w| {
                targets
                    .iter()
                    .zip(&want)
                    .all(|(&t, &n)| answers(w)[t as usize] >= n)
            })
        });
        Ok(())
    }

    /// Splits `targets` into those on this node sharing the window's memory (direct) and
    /// the others.
    fn by_path(&self, win: u16, targets: &[u32]) -> (Vec<u32>, Vec<u32>) {
        targets
            .iter()
            .partition(|&&t| self.direct(win, t).is_some())
    }

    fn lock_ranks(&mut self, win: u16, targets: &[u32], exclusive: bool) -> Result<(), PmlError> {
        self.check_ranks(win, targets)?;
        let (direct, remote) = self.by_path(win, targets);
        for &t in &direct {
            // The lock word: taken here, progressing meanwhile (the holder may be waiting
            // for something this process must answer).
            self.rma_wait(|e| e.direct(win, t).is_none_or(|n| n.try_lock(t, exclusive)));
            self.window_mut(win)?.direct_held[t as usize] = Some(exclusive);
        }
        // Lazily (the request goes with the first operation, `rma_issue`): targets reached
        // by messages, except this process (its own lock guards its loads and stores, so it
        // must be held when the call returns) and targets already locked (nested epochs).
        let w = self.window_mut(win)?;
        let (lazy, eager): (Vec<u32>, Vec<u32>) = remote.iter().partition(|&&t| {
            w.lazy_locks && t != w.me && w.locked[t as usize] == 0 && w.lazy[t as usize].is_none()
        });
        for &t in &lazy {
            w.lazy[t as usize] = Some(exclusive);
        }
        if eager.is_empty() {
            // No wait here, but a synchronization call still serves the peers once.
            self.rma_serve(win);
        } else {
            // Every lock request, eager or in order, is answered by one GRANT: wait until
            // all this process asked for so far have come (a late in-order grant must not
            // pass for this one).
            for &t in &eager {
                w.lock_wanted[t as usize] += 1;
            }
            self.rma_tell(win, &eager, |_, _| Msg::Lock { exclusive });
            self.rma_wait(|e| {
                holds(e, win, |w| {
                    eager
                        .iter()
                        .all(|&t| w.granted[t as usize] >= w.lock_wanted[t as usize])
                })
            });
        }
        let w = self.window_mut(win)?;
        for &t in targets {
            w.locked[t as usize] += 1;
        }
        Ok(())
    }

    /// `MPI_Win_unlock`: completes the operations to `target` there and releases its lock.
    pub fn win_unlock(&mut self, win: u16, target: u32) -> Result<(), PmlError> {
        if let Some(w) = self.all_local_window(win) {
            let t = target as usize;
            if let Some(exclusive) = w.direct_held.get_mut(t).and_then(|h| h.take()) {
                NodeMap::sync();
                if let Some(n) = &w.node {
                    n.unlock(target, exclusive);
                }
                w.locked[t] -= 1;
                return Ok(());
            }
        }
        self.unlock_ranks(win, &[target])
    }

    /// `MPI_Win_unlock_all`.
    pub fn win_unlock_all(&mut self, win: u16) -> Result<(), PmlError> {
        let all = self.all_ranks(win)?;
        self.unlock_ranks(win, &all)
    }

    fn unlock_ranks(&mut self, win: u16, targets: &[u32]) -> Result<(), PmlError> {
        self.check_ranks(win, targets)?;
        if let Some(t) = targets.iter().find(|&&t| {
            self.window(win)
                .map(|w| w.locked[t as usize] == 0)
                .unwrap_or(true)
        }) {
            return Err(PmlError::Invalid(format!(
                "one-sided: MPI_Win_unlock of rank {t}, which this process has not locked"
            )));
        }
        // Epochs opened without a lock (MPI_MODE_NOCHECK) end with their operations
        // complete at the target, and nothing to release: a flush. An unlock ends such an
        // epoch when every epoch still open on the target is one.
        let (unchecked, targets): (Vec<u32>, Vec<u32>) = {
            let w = self.window(win)?;
            targets.iter().partition(|&&t| {
                let t = t as usize;
                w.unchecked[t] > 0 && w.unchecked[t] == w.locked[t]
            })
        };
        if !unchecked.is_empty() {
            self.flush_ranks(win, &unchecked)?;
            let w = self.window_mut(win)?;
            for &t in &unchecked {
                w.unchecked[t as usize] -= 1;
                w.locked[t as usize] -= 1;
            }
            if targets.is_empty() {
                return Ok(());
            }
        }
        let targets = &targets[..];
        let (direct, remote) = self.by_path(win, targets);
        if !direct.is_empty() {
            self.rma_fetched(win, &direct);
            NodeMap::sync();
            let w = self.window_mut(win)?;
            for &t in &direct {
                if let (Some(n), Some(exclusive)) = (&w.node, w.direct_held[t as usize].take()) {
                    n.unlock(t, exclusive);
                }
            }
        }
        // A lazy lock whose request never went (no operation in the epoch): nothing to
        // release there.
        let w = self.window_mut(win)?;
        let remote: Vec<u32> = remote
            .into_iter()
            .filter(|&t| w.lazy[t as usize].take().is_none())
            .collect();
        if remote.is_empty() {
            if direct.is_empty() {
                // Nothing to wait for, but a synchronization call still serves the peers.
                self.rma_serve(win);
            }
        } else {
            // UNLOCK goes before the wait for fetched results: the target answers it after
            // applying (and answering) every operation, so both arrive in one round trip.
            self.ask_each(
                win,
                &remote,
                |w, t| Msg::Unlock {
                    ops: w.sent[t as usize],
                },
                |w| &w.unlocked,
            )?;
            self.rma_fetched(win, &remote);
        }
        let w = self.window_mut(win)?;
        for &t in targets {
            w.locked[t as usize] -= 1;
            w.dirty[t as usize] = false;
        }
        Ok(())
    }

    /// `MPI_Win_flush`: the operations to `target` are complete there.
    pub fn win_flush(&mut self, win: u16, target: u32) -> Result<(), PmlError> {
        if self.local_fence(win, target) {
            return Ok(());
        }
        self.flush_ranks(win, &[target])
    }

    /// The flushes of an all-local window: direct operations are complete at the target
    /// when they return, so a memory fence is the whole flush. False when `win` is not
    /// all-local or `target` (`u32::MAX`: every rank) is not a member.
    fn local_fence(&mut self, win: u16, target: u32) -> bool {
        match self.all_local_window(win) {
            Some(w) if target == u32::MAX || (target as usize) < w.locked.len() => {
                NodeMap::sync();
                true
            }
            _ => false,
        }
    }

    /// `MPI_Win_flush_all`: every target this process sent operations to since it last
    /// flushed or unlocked it.
    pub fn win_flush_all(&mut self, win: u16) -> Result<(), PmlError> {
        if self.local_fence(win, u32::MAX) {
            return Ok(());
        }
        let dirty: Vec<u32> = {
            let w = self.window(win)?;
            (0..w.size()).filter(|&t| w.dirty[t as usize]).collect()
        };
        self.rma_fetched(win, &self.all_ranks(win)?);
        NodeMap::sync();
        self.flush_ranks(win, &dirty)
    }

    fn flush_ranks(&mut self, win: u16, targets: &[u32]) -> Result<(), PmlError> {
        self.check_ranks(win, targets)?;
        // Direct operations are complete at the target when they return; a memory fence
        // orders them before what this process does next.
        let (direct, remote) = self.by_path(win, targets);
        if !direct.is_empty() {
            self.rma_fetched(win, &direct);
            NodeMap::sync();
        }
        // Nothing was sent under a lazy lock whose request is still here.
        let w = self.window_mut(win)?;
        let remote: Vec<u32> = remote
            .into_iter()
            .filter(|&t| w.lazy[t as usize].is_none())
            .collect();
        if remote.is_empty() {
            if direct.is_empty() {
                self.rma_serve(win);
            }
            return Ok(());
        }
        // FLUSH before the wait for fetched results, as UNLOCK: one round trip.
        self.ask_each(
            win,
            &remote,
            |w, t| Msg::Flush {
                ops: w.sent[t as usize],
            },
            |w| &w.flushed,
        )?;
        self.rma_fetched(win, &remote);
        let w = self.window_mut(win)?;
        for &t in targets {
            w.dirty[t as usize] = false;
        }
        Ok(())
    }

    /// `MPI_Win_flush_local`: the operations to `target` are complete at this process (data
    /// written by puts and accumulates was copied when they started; fetches wait here).
    pub fn win_flush_local(&mut self, win: u16, target: u32) -> Result<(), PmlError> {
        if self.local_fence(win, target) {
            return Ok(());
        }
        self.check_ranks(win, &[target])?;
        self.rma_fetched(win, &[target]);
        Ok(())
    }

    /// `MPI_Win_flush_local_all`.
    pub fn win_flush_local_all(&mut self, win: u16) -> Result<(), PmlError> {
        if self.local_fence(win, u32::MAX) {
            return Ok(());
        }
        let all = self.all_ranks(win)?;
        self.rma_fetched(win, &all);
        Ok(())
    }
}
