//! One-sided communication: windows, their operations and their synchronization, carried
//! as active messages (tag [`wire::AM_RMA`]) over whatever transport reaches each target, so
//! it works over shared memory, usnic and every later transport alike.
//!
//! Design (Open MPI's `osc/pt2pt` in spirit): the origin sends each operation as one or more
//! messages that name byte ranges of the target's window; the target applies them in its
//! progress loop, in the order the origin issued them (a per-(origin, target) sequence
//! number restores it), so accumulates from one origin are ordered and element-wise atomic
//! with respect to every other one-sided operation. Fetching operations (get,
//! get-accumulate, compare-and-swap) are answered with RESULT messages. Synchronization
//! counts: every message that names a sequence number is an operation, and UNLOCK, FLUSH,
//! COMPLETE and FENCE carry how many the origin has sent, so the target knows when all of
//! them are applied without any ordering from the transport.
//!
//! * [`wire`]: the messages and their checked decoding.
//! * [`memory`]: the window's exposed memory, the only `unsafe` code here.
//! * `target`: applying what arrives (operations, locks, epochs).
//! * `origin`: starting operations, splitting them to fit the transport.
//! * `node`, `direct`: the node-local path. Windows whose memory the library allocates
//!   share it on each node, and operations on members of this node are copies and locked
//!   combines with no message (`node` holds the mapping and its lock words; it and
//!   `memory` are the only `unsafe` code here).
//! * `sync`: fence, post/start/complete/wait, lock/unlock, flush.
//!
//! A window is identified by the context id of a communicator duplicated for it, which
//! every member agreed on at creation. Datatypes are the caller's business: operations take
//! target byte ranges and packed origin bytes, and fetched bytes are handed to a [`Sink`].
//! This module must never block without progressing the engine, and never touch window
//! memory except through [`memory::WinMemory`].

#![deny(unsafe_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};

use crate::engine::{Engine, PmlError};

#[allow(unsafe_code)]
mod direct;
#[allow(unsafe_code)]
pub mod memory;
#[allow(unsafe_code)]
mod node;
mod origin;
#[allow(unsafe_code)]
mod stream;
mod sync;
mod target;
pub mod wire;

pub use direct::Allocated;
pub use memory::WinMemory;
pub use node::DirectView;
pub use wire::{AccOp, Segment};

/// Receives the bytes a fetching operation read, once all of them arrived (in the packed
/// order of the operation's target ranges).
pub type Sink = Box<dyn FnOnce(&[u8])>;

/// A fetching operation in flight: [`Engine::rma_done`] tells when its sink ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RmaOp(pub u64);

/// An operation that needed no answer (its data was copied when it started).
pub const RMA_DONE: RmaOp = RmaOp(0);

/// What a window's creation exchanged about one member.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberInfo {
    /// Bytes of its window (0 for a dynamic window).
    pub size: u64,
    /// Its displacement unit.
    pub disp_unit: u32,
    /// Its base address (0 for a dynamic window).
    pub base: u64,
}

/// A fetching operation waiting for its bytes.
struct Pending {
    target: u32,
    buf: Vec<u8>,
    filled: usize,
    sink: Option<Sink>,
}

/// A target's lock (passive-target synchronization), as the target keeps it.
#[derive(Default)]
struct LockState {
    exclusive: Option<u32>,
    shared: u32,
    queue: VecDeque<LockRequest>,
}

/// A lock request waiting in a target's queue.
#[derive(Debug, Clone, Copy)]
struct LockRequest {
    origin: u32,
    exclusive: bool,
    /// A LOCK_IN_ORDER: the origin's operations after it wait for the grant.
    in_order: bool,
}

/// One window of this process.
pub(crate) struct Window {
    /// The process index of each member (window rank order).
    group: Vec<u32>,
    rank_of: HashMap<u32, u32>,
    me: u32,
    mem: WinMemory,
    members: Vec<MemberInfo>,
    // Origin side, per target.
    sent: Vec<u64>,
    /// Operations sent since the last flush or unlock of that target.
    dirty: Vec<bool>,
    fetching: Vec<u32>,
    granted: Vec<u64>,
    unlocked: Vec<u64>,
    flushed: Vec<u64>,
    posts: Vec<u64>,
    starts: Vec<u64>,
    access: Option<Vec<u32>>,
    exposure: Option<Vec<u32>>,
    /// Targets this process holds a lock on (count of lock epochs, for lock_all + lock).
    locked: Vec<u32>,
    /// Per target: how many of the `locked` epochs were opened with `MPI_MODE_NOCHECK`,
    /// which take no lock at all (see [`Engine::win_lock`]).
    unchecked: Vec<u32>,
    /// Per target: a lock taken lazily (`Some(exclusive)`) whose request is not sent yet;
    /// the first operation to the target sends it (LOCK_IN_ORDER).
    lazy: Vec<Option<bool>>,
    /// Per target: the `granted` count at which the last in-order lock request is granted
    /// (what a single copy, which bypasses the target's order, waits for).
    lock_wanted: Vec<u64>,
    /// `pml_rma_lazy_lock`.
    lazy_locks: bool,
    // Target side, per origin.
    applied: Vec<u64>,
    /// The origin's next operation is a lock request (LOCK_IN_ORDER) not granted yet: its
    /// operations wait in `early`.
    lock_stalled: Vec<bool>,
    early: Vec<BTreeMap<u64, Vec<u8>>>,
    lock: LockState,
    pending_unlocks: Vec<(u32, u64)>,
    pending_flushes: Vec<(u32, u64)>,
    completes: Vec<VecDeque<u64>>,
    fence_ops: Vec<VecDeque<u64>>,
    fence_dones: Vec<u64>,
    fence_epoch: u64,
    results: HashMap<u64, Pending>,
    /// The node-wide mapping of a window whose memory the library allocated.
    node: Option<node::NodeMap>,
    /// Per target on this node: the kind of lock this process holds on its lock word
    /// (`Some(true)` exclusive).
    direct_held: Vec<Option<bool>>,
    /// Puts and gets from this many bytes to node-local targets of a fixed window not shared
    /// on the node are single copies (`pml_rma_single_copy_min`).
    single_copy_min: u64,
}

impl Window {
    fn new(group: Vec<u32>, me: u32, mem: WinMemory, members: Vec<MemberInfo>) -> Window {
        let n = group.len();
        let rank_of = group
            .iter()
            .enumerate()
            .map(|(r, &p)| (p, r as u32))
            .collect();
        Window {
            group,
            rank_of,
            me,
            mem,
            members,
            sent: vec![0; n],
            dirty: vec![false; n],
            fetching: vec![0; n],
            granted: vec![0; n],
            unlocked: vec![0; n],
            flushed: vec![0; n],
            posts: vec![0; n],
            starts: vec![0; n],
            access: None,
            exposure: None,
            locked: vec![0; n],
            unchecked: vec![0; n],
            lazy: vec![None; n],
            lock_wanted: vec![0; n],
            lazy_locks: false,
            applied: vec![0; n],
            lock_stalled: vec![false; n],
            early: (0..n).map(|_| BTreeMap::new()).collect(),
            lock: LockState::default(),
            pending_unlocks: Vec::new(),
            pending_flushes: Vec::new(),
            completes: vec![VecDeque::new(); n],
            fence_ops: vec![VecDeque::new(); n],
            fence_dones: vec![0; n],
            fence_epoch: 0,
            results: HashMap::new(),
            node: None,
            direct_held: vec![None; n],
            single_copy_min: u64::MAX,
        }
    }

    fn size(&self) -> u32 {
        self.group.len() as u32
    }
}

/// The windows of one process by id: a short list searched in order (a process has few
/// windows; a search of a few ids costs less than hashing one on every operation).
#[derive(Default)]
pub(crate) struct WinTable(Vec<(u16, Window)>);

impl WinTable {
    fn get(&self, id: &u16) -> Option<&Window> {
        self.0.iter().find(|(i, _)| i == id).map(|(_, w)| w)
    }

    fn get_mut(&mut self, id: &u16) -> Option<&mut Window> {
        self.0.iter_mut().find(|(i, _)| i == id).map(|(_, w)| w)
    }

    fn contains_key(&self, id: &u16) -> bool {
        self.get(id).is_some()
    }

    fn insert(&mut self, id: u16, w: Window) {
        self.remove(&id);
        self.0.push((id, w));
    }

    fn remove(&mut self, id: &u16) -> Option<Window> {
        let i = self.0.iter().position(|(i, _)| i == id)?;
        Some(self.0.swap_remove(i).1)
    }

    fn iter_mut(&mut self) -> impl Iterator<Item = (&u16, &mut Window)> {
        self.0.iter_mut().map(|(i, w)| (&*i, w))
    }
}

/// The windows of one process, and messages for windows it has not created yet.
#[derive(Default)]
pub(crate) struct Windows {
    wins: WinTable,
    /// Messages that arrived before this process finished creating their window (a faster
    /// member may start operations as soon as its own creation returns).
    early: HashMap<u16, Vec<(u32, Vec<u8>)>>,
    next_token: u64,
    /// Messages that failed to decode or named a range outside a window.
    pub(crate) errors: u64,
    /// Node-wide mappings this process created (names them uniquely).
    mappings: u64,
    /// Some window's lock queue waits for its lock word, which a local origin frees
    /// without a message: progress retries the grants.
    pub(crate) word_waits: bool,
}

impl Engine {
    /// Creates a window over communicator `ctx` (collective): every member passes its own
    /// memory and displacement unit. Returns the window's id.
    pub fn win_create(
        &mut self,
        ctx: u16,
        mem: WinMemory,
        size: u64,
        disp_unit: u32,
    ) -> Result<u16, PmlError> {
        if disp_unit == 0 {
            return Err(PmlError::Invalid(
                "window: the displacement unit must be positive".into(),
            ));
        }
        let win = self.dup(ctx)?;
        let group = self
            .context_group(win)
            .ok_or_else(|| PmlError::Invalid(format!("window: no communicator {ctx}")))?
            .to_vec();
        let (me, _) = self.comm_info(win)?;
        let base = if mem.is_dynamic() { 0 } else { mem_base(&mem) };
        let mine = [
            size.to_be_bytes().as_slice(),
            &disp_unit.to_be_bytes(),
            &base.to_be_bytes(),
        ]
        .concat();
        let all = self.allgather_bytes(win, &mine)?;
        let mut members = Vec::with_capacity(all.len());
        for (r, b) in all.iter().enumerate() {
            if b.len() != 20 {
                return Err(PmlError::Invalid(format!(
                    "window: member {r} sent a {}-byte description (mixed Kestrel versions?)",
                    b.len()
                )));
            }
            let word = |i: usize| u64::from_be_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
            members.push(MemberInfo {
                size: word(0),
                disp_unit: u32::from_be_bytes(b[8..12].try_into().unwrap_or([0; 4])),
                base: word(12),
            });
        }
        let mut w = Window::new(group, me, mem, members);
        w.single_copy_min = crate::params::RMA_SINGLE_COPY_MIN.get(self.params());
        w.lazy_locks = crate::params::RMA_LAZY_LOCK.get(self.params());
        self.rma.wins.insert(win, w);
        if let Some(early) = self.rma.early.remove(&win) {
            for (proc, bytes) in early {
                self.rma_handle(proc, bytes);
            }
        }
        tracing::debug!(target: "osc", win, members = all.len(), "window created");
        Ok(win)
    }

    /// Registers window `win` without the collective exchange of [`Engine::win_create`]: the
    /// caller already knows every member's description (`group`: each member's process
    /// index). For set-ups that exchanged them themselves, such as the simulated cluster of
    /// the engine's tests; `win` must be an id no communicator of this process uses.
    pub fn win_register(
        &mut self,
        win: u16,
        group: Vec<u32>,
        mem: WinMemory,
        members: Vec<MemberInfo>,
    ) -> Result<(), PmlError> {
        let me = group
            .iter()
            .position(|&p| p == self.rank())
            .ok_or_else(|| PmlError::Invalid("window: this process is not in the group".into()))?
            as u32;
        if members.len() != group.len() || self.rma.wins.contains_key(&win) {
            return Err(PmlError::Invalid(format!(
                "window {win}: exists already, or the descriptions do not match the group"
            )));
        }
        self.rma
            .wins
            .insert(win, Window::new(group, me, mem, members));
        if let Some(early) = self.rma.early.remove(&win) {
            for (proc, bytes) in early {
                self.rma_handle(proc, bytes);
            }
        }
        Ok(())
    }

    /// Handles `bytes` as a one-sided message from process `proc`, as if a transport had
    /// delivered it (tests and fuzzing feed forged messages through here).
    pub fn rma_inject(&mut self, proc: u32, bytes: Vec<u8>) {
        self.rma_handle(proc, bytes);
    }

    /// Messages dropped as malformed or naming memory outside a window.
    pub fn rma_errors(&self) -> u64 {
        self.rma.errors
    }

    /// What member `rank` of window `win` exposes (size, displacement unit, base address).
    pub fn win_member(&self, win: u16, rank: u32) -> Result<MemberInfo, PmlError> {
        let w = self.window(win)?;
        w.members
            .get(rank as usize)
            .copied()
            .ok_or_else(|| PmlError::Invalid(format!("window: rank {rank} is not a member")))
    }

    /// This process's rank in window `win` and the window's size.
    pub fn win_rank(&self, win: u16) -> Result<(u32, u32), PmlError> {
        let w = self.window(win)?;
        Ok((w.me, w.size()))
    }

    /// Exposes `len` bytes at `base` in dynamic window `win`.
    ///
    /// # Safety
    /// As [`WinMemory::attach`].
    #[allow(unsafe_code)]
    pub unsafe fn win_attach(
        &mut self,
        win: u16,
        base: *mut u8,
        len: usize,
    ) -> Result<(), PmlError> {
        let w = self.window_mut(win)?;
        if !w.mem.is_dynamic() {
            return Err(PmlError::Invalid(
                "window: MPI_Win_attach needs a window made by MPI_Win_create_dynamic".into(),
            ));
        }
        // SAFETY: the caller's promise, passed on.
        unsafe { w.mem.attach(base, len) };
        Ok(())
    }

    /// Stops exposing the region attached at `base`.
    pub fn win_detach(&mut self, win: u16, base: *mut u8) -> Result<(), PmlError> {
        let w = self.window_mut(win)?;
        if !w.mem.detach(base) {
            return Err(PmlError::Invalid(format!(
                "window: nothing is attached at {base:p}"
            )));
        }
        Ok(())
    }

    /// Frees window `win` (collective): completes every operation on it, as a fence does,
    /// then forgets it.
    pub fn win_free(&mut self, win: u16) -> Result<(), PmlError> {
        self.fence(win, true)?;
        self.rma.wins.remove(&win);
        self.free_context(win);
        Ok(())
    }

    fn window(&self, win: u16) -> Result<&Window, PmlError> {
        self.rma
            .wins
            .get(&win)
            .ok_or_else(|| PmlError::Invalid(format!("window {win} does not exist")))
    }

    fn window_mut(&mut self, win: u16) -> Result<&mut Window, PmlError> {
        self.rma
            .wins
            .get_mut(&win)
            .ok_or_else(|| PmlError::Invalid(format!("window {win} does not exist")))
    }

    /// Whether `win`'s operations on every member are direct (all members on this node,
    /// memory shared): synchronization then needs no message but a barrier.
    fn all_direct(&self, win: u16) -> bool {
        self.rma
            .wins
            .get(&win)
            .and_then(|w| w.node.as_ref())
            .is_some_and(|n| n.all_local())
    }

    /// Whether fetching operation `op` has delivered its bytes.
    pub fn rma_done(&self, win: u16, op: RmaOp) -> bool {
        op == RMA_DONE
            || self
                .rma
                .wins
                .get(&win)
                .is_none_or(|w| !w.results.contains_key(&op.0))
    }

    /// Progresses once unless every operation on `win` is direct: a process that spins on
    /// its own window (a compare-and-swap lock it finds taken, with operations and flushes
    /// on itself, which complete at the call) must still serve the peers whose release it
    /// waits for. Every synchronization call starts with it.
    fn rma_serve(&mut self, win: u16) {
        if !self.all_direct(win) {
            self.progress();
        }
    }

    /// Progresses until `done` holds.
    fn rma_wait(&mut self, mut done: impl FnMut(&Engine) -> bool) {
        let mut idle = 0;
        while !done(self) {
            self.idle_step(&mut idle);
        }
    }
}

/// The base address of a fixed window's memory.
fn mem_base(mem: &WinMemory) -> u64 {
    mem.base().map(|b| b as u64).unwrap_or(0)
}
