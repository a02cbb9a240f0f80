//! The origin's side of the operations: checks against what the target exposes, then either
//! the direct path (a target on this node sharing the window's memory: `direct`) or
//! splitting into messages that fit the transport, numbering, sending. Data to write is copied into
//! the messages when an operation starts, so puts and accumulates are locally complete at
//! once; fetching operations complete when their results arrive (`target`). It must never
//! wait.

use kestrel_transport::btl::{RemoteRegion, SendError};
use kestrel_transport::set::NO_ROUTE;

use super::wire::{self, AccOp, Msg, Segment, FIXED_MAX, SEGMENT_LEN};
use super::{direct, RmaOp, Sink, RMA_DONE};
use crate::engine::{Engine, Out, PmlError};
use crate::op::Dtype;

/// The largest message this module sends, whatever the transport allows (keeps one
/// operation from holding a transport's buffers for long).
const MESSAGE_MAX: usize = 256 * 1024;

/// A part of an operation: its target ranges and where its data lies in the operation's
/// packed bytes.
struct Part {
    segs: Vec<Segment>,
    start: usize,
    end: usize,
}

/// Splits `segs` into parts whose segments and data take at most `room` bytes, cutting
/// ranges only at multiples of `elem` bytes.
fn split(segs: &[Segment], elem: usize, room: usize) -> Vec<Part> {
    let elem = elem.max(1);
    let mut parts = Vec::new();
    let mut cur = Part {
        segs: Vec::new(),
        start: 0,
        end: 0,
    };
    for s in segs {
        let mut off = s.offset;
        let mut left = s.len as usize;
        while left > 0 {
            let used = (cur.segs.len() + 1) * SEGMENT_LEN + (cur.end - cur.start);
            let space = room.saturating_sub(used) / elem * elem;
            if space == 0 {
                let next = cur.end;
                parts.push(std::mem::replace(
                    &mut cur,
                    Part {
                        segs: Vec::new(),
                        start: next,
                        end: next,
                    },
                ));
                continue;
            }
            let take = left.min(space);
            cur.segs.push(Segment {
                offset: off,
                len: take as u32,
            });
            cur.end += take;
            off += take as u64;
            left -= take;
        }
    }
    if !cur.segs.is_empty() || parts.is_empty() {
        parts.push(cur);
    }
    parts
}

impl Engine {
    /// Room for segments and data in one message to `proc`.
    fn rma_room(&self, proc: u32) -> usize {
        let b = self.route.get(proc as usize).copied().unwrap_or(NO_ROUTE);
        let max = if b == NO_ROUTE {
            MESSAGE_MAX
        } else {
            self.btls[b as usize].limits().max_send.min(MESSAGE_MAX)
        };
        // At least one element of the widest type and one segment.
        max.saturating_sub(FIXED_MAX).max(64)
    }

    /// Sends a one-sided message to process `proc` (queued behind earlier ones when the
    /// transport is full).
    pub(crate) fn rma_send(&mut self, proc: u32, msg: Vec<u8>) {
        if proc == self.rank() {
            // To this process: handled now, not looped back through the self transport. A
            // loop-back made an operation on one's own window complete only at the next
            // progress, after messages from peers that the same progress call delivered
            // first: mpi4py.util.sync's queue mutex resets its own "next" slot, then links
            // into the queue at another rank, and the successor's link could land before the
            // reset and be overwritten (a hang in test_util_sync about one run in 12).
            self.rma_handle(proc, msg);
            return;
        }
        let b = self.route.get(proc as usize).copied().unwrap_or(NO_ROUTE);
        if b == NO_ROUTE {
            self.rma.errors += 1;
            tracing::error!(target: "osc", "no transport reaches process {proc}: a one-sided message is lost");
            return;
        }
        if self.st.outbox.is_empty() {
            match self.btls[b as usize].send(proc, wire::AM_RMA, &msg, &[]) {
                Ok(()) => return,
                Err(SendError::WouldBlock) => {}
                Err(e) => {
                    self.rma.errors += 1;
                    tracing::error!(target: "osc", "one-sided message to process {proc} failed: {e}");
                    return;
                }
            }
        }
        self.st.outbox.push_back(Out::Rma { peer: proc, msg });
    }

    /// The process of `target`, after checking that `segs` lie in its window (fixed windows;
    /// a dynamic window's target checks its attached regions itself).
    fn rma_target(&self, win: u16, target: u32, segs: &[Segment]) -> Result<u32, PmlError> {
        let w = self.window(win)?;
        let proc = *w.group.get(target as usize).ok_or_else(|| {
            PmlError::Invalid(format!(
                "one-sided: target rank {target} is not in the window's group of {}",
                w.size()
            ))
        })?;
        if !w.mem.is_dynamic() {
            let size = w.members[target as usize].size;
            for s in segs {
                if s.offset
                    .checked_add(u64::from(s.len))
                    .is_none_or(|end| end > size)
                {
                    return Err(PmlError::Invalid(format!(
                        "one-sided: {} bytes at byte {} of rank {target}'s window run past its {size} bytes",
                        s.len, s.offset
                    )));
                }
            }
        }
        Ok(proc)
    }

    /// The transport and the target's memory for a single-copy put (`put`) or get of `len`
    /// bytes: a fixed window that is the program's memory (not shared on the node), a peer
    /// whose transport copies across processes (`Btl::can_put`/`can_get`, probed once per
    /// peer), an operation of at least `pml_rma_single_copy_min` bytes. The copy completes
    /// at the call, so no synchronization waits for it.
    fn single_copy(
        &mut self,
        win: u16,
        target: u32,
        proc: u32,
        len: usize,
        put: bool,
    ) -> Option<(usize, RemoteRegion)> {
        let w = self.rma.wins.get(&win)?;
        if (len as u64) < w.single_copy_min || w.node.is_some() || w.mem.is_dynamic() {
            return None;
        }
        let m = *w.members.get(target as usize)?;
        if m.base == 0 || proc == self.rank() {
            return None;
        }
        let b = *self.route.get(proc as usize)?;
        if b == NO_ROUTE {
            return None;
        }
        let btl = &mut self.btls[b as usize];
        let able = if put {
            btl.can_put(proc)
        } else {
            btl.can_get_unexposed(proc)
        };
        if !able {
            return None;
        }
        self.rma_lock_held(win, target, proc);
        Some((
            b as usize,
            RemoteRegion {
                addr: m.base,
                len: m.size,
                key: 0,
            },
        ))
    }

    /// Sends the request of a lazy lock on `target` (process `proc`), if one is waiting: a
    /// LOCK_IN_ORDER numbered as the next operation, so the target applies the epoch's
    /// operations only once it has granted it.
    fn rma_send_lazy_lock(&mut self, win: u16, target: u32, proc: u32) {
        let Some(w) = self.rma.wins.get_mut(&win) else {
            return;
        };
        let t = target as usize;
        let Some(exclusive) = w.lazy[t].take() else {
            return;
        };
        let seq = w.sent[t];
        w.sent[t] += 1;
        w.dirty[t] = true;
        w.lock_wanted[t] += 1;
        let msg = wire::encode(win, &Msg::LockInOrder { seq, exclusive });
        self.rma_send(proc, msg);
    }

    /// Waits until every lock this process asked `target` for is granted: a single copy
    /// bypasses the target's order, so a lazy lock must really be held first.
    fn rma_lock_held(&mut self, win: u16, target: u32, proc: u32) {
        self.rma_send_lazy_lock(win, target, proc);
        let t = target as usize;
        self.rma_wait(|e| {
            e.rma
                .wins
                .get(&win)
                .is_none_or(|w| w.granted[t] >= w.lock_wanted[t])
        });
    }

    /// Numbers and sends the parts of an operation to `target`, building each message with
    /// `build(seq, part)`.
    fn rma_issue(
        &mut self,
        win: u16,
        target: u32,
        proc: u32,
        parts: Vec<Part>,
        mut build: impl FnMut(u64, &Part) -> Vec<u8>,
    ) {
        self.rma_send_lazy_lock(win, target, proc);
        for part in parts {
            let Some(w) = self.rma.wins.get_mut(&win) else {
                return;
            };
            let seq = w.sent[target as usize];
            w.sent[target as usize] += 1;
            w.dirty[target as usize] = true;
            let msg = build(seq, &part);
            self.rma_send(proc, msg);
        }
    }

    /// `MPI_Put`: writes `data` (the packed origin bytes) into `segs` of `target`'s window.
    pub fn rma_put(
        &mut self,
        win: u16,
        target: u32,
        segs: &[Segment],
        data: &[u8],
    ) -> Result<(), PmlError> {
        check_len(segs, data.len())?;
        let proc = self.rma_target(win, target, segs)?;
        if let Some(n) = self.direct(win, target) {
            return direct::put(n, target, segs, data);
        }
        if let Some((b, region)) = self.single_copy(win, target, proc, data.len(), true) {
            let mut at = 0;
            let mut copied = true;
            for s in segs {
                let part = &data[at..at + s.len as usize];
                if self.btls[b].put(proc, region, s.offset, part).is_err() {
                    copied = false;
                    break;
                }
                at += s.len as usize;
            }
            if copied {
                return Ok(());
            }
            // A refused copy (the transport's probe passed, the kernel said no): the
            // message path below writes every byte again.
        }
        let parts = split(segs, 1, self.rma_room(proc));
        self.rma_issue(win, target, proc, parts, |seq, p| {
            wire::encode(
                win,
                &Msg::Put {
                    seq,
                    segs: p.segs.clone(),
                    data: &data[p.start..p.end],
                },
            )
        });
        Ok(())
    }

    /// `MPI_Accumulate`: combines `data` into `segs` of `target`'s window with `op`, element
    /// type `dtype`.
    pub fn rma_accumulate(
        &mut self,
        win: u16,
        target: u32,
        segs: &[Segment],
        data: &[u8],
        op: AccOp,
        dtype: Dtype,
    ) -> Result<(), PmlError> {
        check_acc(segs, data.len(), op, dtype)?;
        let proc = self.rma_target(win, target, segs)?;
        if let Some(n) = self.direct(win, target) {
            return direct::accumulate(n, target, segs, data, op, dtype, false).map(|_| ());
        }
        let parts = split(segs, dtype.size(), self.rma_room(proc));
        self.rma_issue(win, target, proc, parts, |seq, p| {
            wire::encode(
                win,
                &Msg::Acc {
                    seq,
                    op,
                    dtype,
                    segs: p.segs.clone(),
                    data: &data[p.start..p.end],
                },
            )
        });
        Ok(())
    }

    /// `MPI_Get`: reads `segs` of `target`'s window; `sink` gets the bytes.
    pub fn rma_get(
        &mut self,
        win: u16,
        target: u32,
        segs: &[Segment],
        sink: Sink,
    ) -> Result<RmaOp, PmlError> {
        let proc = self.rma_target(win, target, segs)?;
        let len = wire::total(segs) as usize;
        if len == 0 {
            sink(&[]);
            return Ok(RMA_DONE);
        }
        if let Some(n) = self.direct(win, target) {
            sink(&direct::get(n, target, segs)?);
            return Ok(RMA_DONE);
        }
        if let Some((b, region)) = self.single_copy(win, target, proc, len, false) {
            let mut buf = vec![0u8; len];
            let mut at = 0;
            let mut copied = true;
            for s in segs {
                let part = &mut buf[at..at + s.len as usize];
                if self.btls[b].get(proc, region, s.offset, part).is_err() {
                    copied = false;
                    break;
                }
                at += s.len as usize;
            }
            if copied {
                sink(&buf);
                return Ok(RMA_DONE);
            }
        }
        let token = self.rma_expect(win, target, len, sink);
        let parts = split(segs, 1, self.rma_room(proc));
        self.rma_issue(win, target, proc, parts, |seq, p| {
            wire::encode(
                win,
                &Msg::Get {
                    seq,
                    token,
                    offset: p.start as u64,
                    segs: p.segs.clone(),
                },
            )
        });
        Ok(RmaOp(token))
    }

    /// `MPI_Get_accumulate` (and `MPI_Fetch_and_op`): `sink` gets the old contents of `segs`,
    /// which are then combined with `data` (empty for `MPI_NO_OP`).
    #[allow(clippy::too_many_arguments)]
    pub fn rma_get_accumulate(
        &mut self,
        win: u16,
        target: u32,
        segs: &[Segment],
        data: &[u8],
        op: AccOp,
        dtype: Dtype,
        sink: Sink,
    ) -> Result<RmaOp, PmlError> {
        let len = wire::total(segs) as usize;
        if op != AccOp::NoOp {
            check_acc(segs, data.len(), op, dtype)?;
        } else {
            check_acc(segs, len, AccOp::Replace, dtype)?;
        }
        let proc = self.rma_target(win, target, segs)?;
        if len == 0 {
            sink(&[]);
            return Ok(RMA_DONE);
        }
        if let Some(n) = self.direct(win, target) {
            sink(&direct::accumulate(n, target, segs, data, op, dtype, true)?);
            return Ok(RMA_DONE);
        }
        let token = self.rma_expect(win, target, len, sink);
        // The answer carries as many bytes as the request's data: budget for both.
        let parts = split(segs, dtype.size(), self.rma_room(proc));
        self.rma_issue(win, target, proc, parts, |seq, p| {
            wire::encode(
                win,
                &Msg::GetAcc {
                    seq,
                    token,
                    offset: p.start as u64,
                    op,
                    dtype,
                    segs: p.segs.clone(),
                    data: if op == AccOp::NoOp {
                        &[]
                    } else {
                        &data[p.start..p.end]
                    },
                },
            )
        });
        Ok(RmaOp(token))
    }

    /// `MPI_Compare_and_swap`: one element of `compare.len()` bytes at byte `disp` of
    /// `target`'s window; `sink` gets its old value.
    pub fn rma_compare_and_swap(
        &mut self,
        win: u16,
        target: u32,
        disp: u64,
        compare: &[u8],
        swap: &[u8],
        sink: Sink,
    ) -> Result<RmaOp, PmlError> {
        if compare.len() != swap.len() || compare.is_empty() || compare.len() > 16 {
            return Err(PmlError::Invalid(
                "one-sided: compare-and-swap takes one element of 1-16 bytes".into(),
            ));
        }
        let seg = [Segment {
            offset: disp,
            len: compare.len() as u32,
        }];
        let proc = self.rma_target(win, target, &seg)?;
        if let Some(n) = self.direct(win, target) {
            sink(&direct::compare_and_swap(n, target, disp, compare, swap)?);
            return Ok(RMA_DONE);
        }
        let token = self.rma_expect(win, target, compare.len(), sink);
        let part = Part {
            segs: seg.to_vec(),
            start: 0,
            end: compare.len(),
        };
        self.rma_issue(win, target, proc, vec![part], |seq, _| {
            wire::encode(
                win,
                &Msg::Cas {
                    seq,
                    token,
                    disp,
                    compare,
                    swap,
                },
            )
        });
        Ok(RmaOp(token))
    }
}

fn check_len(segs: &[Segment], data: usize) -> Result<(), PmlError> {
    if wire::total(segs) != data as u64 {
        return Err(PmlError::Invalid(format!(
            "one-sided: {data} bytes of data for target ranges of {} bytes (origin and target \
             type signatures differ)",
            wire::total(segs)
        )));
    }
    Ok(())
}

fn check_acc(segs: &[Segment], data: usize, op: AccOp, dtype: Dtype) -> Result<(), PmlError> {
    check_len(segs, data)?;
    if segs
        .iter()
        .any(|s| !(s.len as usize).is_multiple_of(dtype.size()))
    {
        return Err(PmlError::Invalid(format!(
            "one-sided: an accumulate's target ranges must hold whole {} elements",
            dtype.name()
        )));
    }
    if let AccOp::Reduce(o) = op {
        if !o.applies_to(dtype) {
            return Err(PmlError::Invalid(format!(
                "one-sided: {} is not defined for {}",
                o.name(),
                dtype.name()
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_fit_the_room_and_cut_only_at_element_boundaries() {
        let segs = [
            Segment {
                offset: 0,
                len: 1000,
            },
            Segment {
                offset: 5000,
                len: 8,
            },
        ];
        let parts = split(&segs, 8, 200);
        let mut covered = 0;
        for p in &parts {
            assert!(p.segs.len() * SEGMENT_LEN + (p.end - p.start) <= 200);
            assert_eq!(p.start, covered);
            covered = p.end;
            for s in &p.segs {
                assert_eq!(s.len % 8, 0);
            }
        }
        assert_eq!(covered, 1008);
        let one = split(&segs[1..], 1, 1 << 20);
        assert_eq!(one.len(), 1);
        assert!(split(&[], 1, 100).len() == 1);
    }
}
