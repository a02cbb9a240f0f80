//! The target's side: every one-sided message that arrives is decoded, checked and applied
//! here, in the origin's order (operations carry sequence numbers; early ones wait), and
//! answered where the protocol asks (results, lock grants, flush and unlock replies).
//! It owns the lock queue of each window; it must never block.

use super::wire::{self, Msg, Segment};
use super::{LockRequest, Pending, Window};
use crate::engine::Engine;

/// What applying an operation asks the engine to send back.
enum Reply {
    None,
    Result {
        token: u64,
        offset: u64,
        data: Vec<u8>,
    },
}

impl Engine {
    /// Handles the one-sided messages the transports delivered.
    pub(crate) fn rma_deliver(&mut self) -> usize {
        let mut n = 0;
        while let Some((proc, bytes)) = self.st.rma_inbox.pop_front() {
            self.rma_handle(proc, bytes);
            n += 1;
        }
        n
    }

    /// Handles one message from process `proc`.
    pub(crate) fn rma_handle(&mut self, proc: u32, bytes: Vec<u8>) {
        let win = match wire::decode(&bytes) {
            Ok((win, _)) => win,
            Err(e) => return self.rma_error(proc, &e.to_string()),
        };
        let Some(w) = self.rma.wins.get(&win) else {
            // The window may not exist here yet: keep it for the creation to replay. A
            // bound keeps a stranger's flood from growing it without end.
            let early = self.rma.early.entry(win).or_default();
            if early.len() < 1 << 16 {
                early.push((proc, bytes));
            } else {
                self.rma_error(proc, "too many messages for a window not created here");
            }
            return;
        };
        let Some(&origin) = w.rank_of.get(&proc) else {
            return self.rma_error(proc, "a message from a process outside the window");
        };
        let (_, msg) = match wire::decode(&bytes) {
            Ok(m) => m,
            Err(e) => return self.rma_error(proc, &e.to_string()),
        };
        let seq = match &msg {
            Msg::Put { seq, .. }
            | Msg::Acc { seq, .. }
            | Msg::Get { seq, .. }
            | Msg::GetAcc { seq, .. }
            | Msg::Cas { seq, .. }
            | Msg::LockInOrder { seq, .. } => Some(*seq),
            _ => None,
        };
        match seq {
            Some(seq) => self.rma_operation(win, origin, seq, bytes),
            None => self.rma_control(win, origin, msg),
        }
    }

    fn rma_error(&mut self, proc: u32, what: &str) {
        self.rma.errors += 1;
        tracing::error!(target: "osc", "dropped a one-sided message from process {proc}: {what}");
    }

    /// An operation: applied now if it is the next one from `origin`, else kept until it is.
    fn rma_operation(&mut self, win: u16, origin: u32, seq: u64, bytes: Vec<u8>) {
        let Some(w) = self.rma.wins.get_mut(&win) else {
            return;
        };
        let o = origin as usize;
        let next = w.applied[o];
        if seq < next || (seq == next && w.lock_stalled[o]) {
            let proc = w.group[o];
            return self.rma_error(proc, "an operation number seen before");
        }
        if seq > next {
            w.early[o].insert(seq, bytes);
            return;
        }
        self.rma_run(win, origin, Some(bytes));
    }

    /// Applies `origin`'s operations in order, from `first` (the next one) or the next one
    /// kept early, until one is missing or a lock request must wait for its grant; then
    /// answers what that satisfied.
    fn rma_run(&mut self, win: u16, origin: u32, first: Option<Vec<u8>>) {
        let o = origin as usize;
        let mut first = first;
        loop {
            let bytes = match first.take() {
                Some(b) => b,
                None => {
                    let Some(w) = self.rma.wins.get_mut(&win) else {
                        return;
                    };
                    let next = w.applied[o];
                    match w.early[o].remove(&next) {
                        Some(b) => b,
                        None => break,
                    }
                }
            };
            match wire::decode(&bytes) {
                Ok((_, Msg::LockInOrder { exclusive, .. })) => {
                    if !self.rma_lock_in_order(win, origin, exclusive) {
                        // Stalled here; `rma_grants` goes on when the lock is granted.
                        return;
                    }
                }
                _ => self.rma_apply(win, origin, &bytes),
            }
            let Some(w) = self.rma.wins.get_mut(&win) else {
                return;
            };
            w.applied[o] += 1;
        }
        self.rma_settle(win, origin);
    }

    /// Queues `origin`'s in-order lock request; true if it is granted now (the origin's
    /// operations go on), false if they must wait.
    fn rma_lock_in_order(&mut self, win: u16, origin: u32, exclusive: bool) -> bool {
        let Some(w) = self.rma.wins.get_mut(&win) else {
            return false;
        };
        w.lock.queue.push_back(LockRequest {
            origin,
            exclusive,
            in_order: true,
        });
        let granted = grant_waiting(w);
        let mine = !w
            .lock
            .queue
            .iter()
            .any(|r| r.origin == origin && r.in_order);
        if !mine {
            w.lock_stalled[origin as usize] = true;
        }
        self.note_word_waits(win);
        self.rma_grants(win, granted, Some(origin));
        mine
    }

    /// Tells each granted origin (GRANT), and goes on with the operations of those whose
    /// in-order request was granted, except `running` (the origin whose operations the
    /// caller is applying).
    fn rma_grants(&mut self, win: u16, granted: Vec<LockRequest>, running: Option<u32>) {
        for g in granted {
            self.rma_reply_all(win, vec![(g.origin, Msg::Grant)]);
            if !g.in_order || Some(g.origin) == running {
                continue;
            }
            let Some(w) = self.rma.wins.get_mut(&win) else {
                return;
            };
            let o = g.origin as usize;
            w.lock_stalled[o] = false;
            w.applied[o] += 1;
            self.rma_run(win, g.origin, None);
        }
    }

    /// Applies one decoded operation to the window's memory and sends its reply.
    fn rma_apply(&mut self, win: u16, origin: u32, bytes: &[u8]) {
        let Some(w) = self.rma.wins.get(&win) else {
            return;
        };
        let proc = w.group[origin as usize];
        let Ok((_, msg)) = wire::decode(bytes) else {
            return;
        };
        // Accumulate-like operations on a window shared on the node take the accumulate
        // lock its local origins take (see `direct`), so both stay element-wise atomic.
        let (reply, err) = match &w.node {
            Some(n) => apply_shared(w, n, &msg),
            None => apply(w, &msg),
        };
        if let Some(e) = err {
            self.rma_error(proc, &e);
        }
        if let Reply::Result {
            token,
            offset,
            data,
        } = reply
        {
            let m = wire::encode(
                win,
                &Msg::Result {
                    token,
                    offset,
                    data: &data,
                },
            );
            self.rma_send(proc, m);
        }
    }

    /// Answers the unlocks and flushes of `origin` that its applied operations now satisfy.
    fn rma_settle(&mut self, win: u16, origin: u32) {
        let Some(w) = self.rma.wins.get_mut(&win) else {
            return;
        };
        let applied = w.applied[origin as usize];
        let mut replies = Vec::new();
        let mut released = false;
        w.pending_flushes.retain(|&(o, ops)| {
            let ready = o == origin && applied >= ops;
            if ready {
                replies.push((o, Msg::Flushed));
            }
            !ready
        });
        let mut unlocks = Vec::new();
        w.pending_unlocks.retain(|&(o, ops)| {
            let ready = o == origin && applied >= ops;
            if ready {
                unlocks.push(o);
            }
            !ready
        });
        for o in unlocks {
            release(w, o);
            released = true;
            replies.push((o, Msg::Unlocked));
        }
        let granted = if released {
            grant_waiting(w)
        } else {
            Vec::new()
        };
        self.note_word_waits(win);
        self.rma_reply_all(win, replies);
        self.rma_grants(win, granted, None);
    }

    /// Remembers that `win`'s lock queue waits for a lock word (freed without a message).
    fn note_word_waits(&mut self, win: u16) {
        if let Some(w) = self.rma.wins.get(&win) {
            if w.node.is_some() && !w.lock.queue.is_empty() {
                self.rma.word_waits = true;
            }
        }
    }

    /// Grants what lock words freed since the last try (progress calls it while some lock
    /// queue waits for one).
    pub(crate) fn rma_retry_locks(&mut self) -> usize {
        let mut grants = Vec::new();
        let mut waiting = false;
        for (&id, w) in self.rma.wins.iter_mut() {
            if w.node.is_none() || w.lock.queue.is_empty() {
                continue;
            }
            let granted = grant_waiting(w);
            if !granted.is_empty() {
                grants.push((id, granted));
            }
            waiting |= !w.lock.queue.is_empty();
        }
        self.rma.word_waits = waiting;
        let mut n = 0;
        for (id, granted) in grants {
            n += granted.len();
            self.rma_grants(id, granted, None);
        }
        n
    }

    fn rma_reply_all(&mut self, win: u16, replies: Vec<(u32, Msg<'static>)>) {
        for (o, m) in replies {
            let Some(w) = self.rma.wins.get(&win) else {
                return;
            };
            let proc = w.group[o as usize];
            let bytes = wire::encode(win, &m);
            self.rma_send(proc, bytes);
        }
    }

    /// A synchronization message or a result.
    fn rma_control(&mut self, win: u16, origin: u32, msg: Msg<'_>) {
        let Some(w) = self.rma.wins.get_mut(&win) else {
            return;
        };
        let o = origin as usize;
        let mut replies = Vec::new();
        let mut granted = Vec::new();
        match msg {
            Msg::Result {
                token,
                offset,
                data,
            } => {
                let Some(p) = w.results.get_mut(&token) else {
                    let proc = w.group[o];
                    return self.rma_error(proc, "a result for no operation in flight");
                };
                let at = offset as usize;
                match at.checked_add(data.len()) {
                    Some(end) if end <= p.buf.len() && p.target == origin => {
                        p.buf[at..end].copy_from_slice(data);
                        p.filled += data.len();
                    }
                    _ => {
                        let proc = w.group[o];
                        return self.rma_error(proc, "a result outside its operation");
                    }
                }
                if p.filled >= p.buf.len() {
                    if let Some(mut done) = w.results.remove(&token) {
                        w.fetching[o] = w.fetching[o].saturating_sub(1);
                        if let Some(sink) = done.sink.take() {
                            sink(&done.buf);
                        }
                    }
                }
            }
            Msg::Lock { exclusive } => {
                w.lock.queue.push_back(LockRequest {
                    origin,
                    exclusive,
                    in_order: false,
                });
                granted = grant_waiting(w);
            }
            Msg::Grant => w.granted[o] += 1,
            Msg::Unlock { ops } => {
                if w.applied[o] >= ops {
                    release(w, origin);
                    replies.push((origin, Msg::Unlocked));
                    granted = grant_waiting(w);
                } else {
                    w.pending_unlocks.push((origin, ops));
                }
            }
            Msg::Unlocked => w.unlocked[o] += 1,
            Msg::Flush { ops } => {
                if w.applied[o] >= ops {
                    replies.push((origin, Msg::Flushed));
                } else {
                    w.pending_flushes.push((origin, ops));
                }
            }
            Msg::Flushed => w.flushed[o] += 1,
            Msg::Post => w.posts[o] += 1,
            Msg::Complete { ops } => w.completes[o].push_back(ops),
            Msg::Fence { ops } => w.fence_ops[o].push_back(ops),
            Msg::FenceDone => w.fence_dones[o] += 1,
            Msg::Put { .. }
            | Msg::Acc { .. }
            | Msg::Get { .. }
            | Msg::GetAcc { .. }
            | Msg::Cas { .. }
            | Msg::LockInOrder { .. } => {}
        }
        self.note_word_waits(win);
        self.rma_reply_all(win, replies);
        self.rma_grants(win, granted, None);
    }

    /// Registers a fetching operation's result buffer; returns its token.
    pub(crate) fn rma_expect(
        &mut self,
        win: u16,
        target: u32,
        len: usize,
        sink: super::Sink,
    ) -> u64 {
        self.rma.next_token += 1;
        let token = self.rma.next_token;
        if let Some(w) = self.rma.wins.get_mut(&win) {
            w.fetching[target as usize] += 1;
            w.results.insert(
                token,
                Pending {
                    target,
                    buf: vec![0; len],
                    filled: 0,
                    sink: Some(sink),
                },
            );
        }
        token
    }
}

/// Grants the lock to the waiting origins it can go to now, in arrival order.
fn grant_waiting(w: &mut Window) -> Vec<LockRequest> {
    let mut granted = Vec::new();
    while let Some(&req) = w.lock.queue.front() {
        let (o, exclusive) = (req.origin, req.exclusive);
        // A window shared on the node has one lock per member, its lock word, which local
        // origins take directly: remote origins get it through the member.
        let free = match &w.node {
            Some(n) => n.try_lock(w.me, exclusive),
            None => w.lock.exclusive.is_none() && (!exclusive || w.lock.shared == 0),
        };
        if !free {
            break;
        }
        w.lock.queue.pop_front();
        if exclusive {
            w.lock.exclusive = Some(o);
        } else {
            w.lock.shared += 1;
        }
        granted.push(req);
    }
    granted
}

fn release(w: &mut Window, origin: u32) {
    let exclusive = w.lock.exclusive == Some(origin);
    if exclusive {
        w.lock.exclusive = None;
    } else {
        w.lock.shared = w.lock.shared.saturating_sub(1);
    }
    if let Some(n) = &w.node {
        n.unlock(w.me, exclusive);
    }
}

/// [`apply`] on a window shared on the node, whose local origins update this member's memory
/// directly: accumulate-like operations take the member's accumulate lock, as theirs do, so
/// both stay element-wise atomic.
fn apply_shared(w: &Window, n: &super::node::NodeMap, msg: &Msg<'_>) -> (Reply, Option<String>) {
    match msg {
        Msg::Acc { .. } | Msg::GetAcc { .. } | Msg::Cas { .. } => {
            n.with_acc_lock(w.me, || apply(w, msg))
        }
        _ => apply(w, msg),
    }
}

/// Applies an operation to `w`'s memory; returns the reply and an error to log.
fn apply(w: &Window, msg: &Msg<'_>) -> (Reply, Option<String>) {
    let mem = &w.mem;
    match msg {
        Msg::Put { segs, data, .. } => (Reply::None, mem.write(segs, data).err().map(|e| e.0)),
        Msg::Acc {
            op,
            dtype,
            segs,
            data,
            ..
        } => (Reply::None, mem.combine(*op, *dtype, segs, data).err()),
        Msg::Get {
            token,
            offset,
            segs,
            ..
        } => {
            let mut out = Vec::with_capacity(wire::total(segs) as usize);
            let err = mem.read(segs, &mut out).err().map(|e| e.0);
            out.resize(wire::total(segs) as usize, 0);
            (
                Reply::Result {
                    token: *token,
                    offset: *offset,
                    data: out,
                },
                err,
            )
        }
        Msg::GetAcc {
            token,
            offset,
            op,
            dtype,
            segs,
            data,
            ..
        } => {
            let mut old = Vec::with_capacity(wire::total(segs) as usize);
            let mut err = mem.read(segs, &mut old).err().map(|e| e.0);
            if err.is_none() {
                err = mem.combine(*op, *dtype, segs, data).err();
            }
            old.resize(wire::total(segs) as usize, 0);
            (
                Reply::Result {
                    token: *token,
                    offset: *offset,
                    data: old,
                },
                err,
            )
        }
        Msg::Cas {
            token,
            disp,
            compare,
            swap,
            ..
        } => {
            let seg = [Segment {
                offset: *disp,
                len: compare.len() as u32,
            }];
            let mut old = Vec::with_capacity(compare.len());
            let mut err = mem.read(&seg, &mut old).err().map(|e| e.0);
            if err.is_none() && old == *compare {
                err = mem.write(&seg, swap).err().map(|e| e.0);
            }
            old.resize(compare.len(), 0);
            (
                Reply::Result {
                    token: *token,
                    offset: 0,
                    data: old,
                },
                err,
            )
        }
        _ => (Reply::None, None),
    }
}
