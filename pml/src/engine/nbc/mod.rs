//! Nonblocking and persistent collectives: schedules of rounds that the progress engine
//! advances while the program computes.
//!
//! A [`Schedule`] is built once from a collective's arguments (see [`algorithms`] for the
//! rounds of each operation and [`inter`] for inter-communicators) and then run by
//! [`Engine::progress`]: a round's local steps (copies, reductions) run first, in order, then
//! its sends and receives are posted; the next round starts when every request of the
//! current one completed. A round without messages runs through at once, so one call can
//! take a schedule through several rounds. Nothing waits: a schedule that cannot go on stays
//! where it is until a later progress call.
//!
//! Requests: a running schedule has a [`ReqId`] with [`COLL_BIT`] set, so
//! [`Engine::try_complete`], [`Engine::test`] and [`Engine::wait`] complete it like any other
//! request, and callers keep one request type. A persistent schedule (MPI-4's
//! `MPI_*_init`) keeps its rounds and buffers between runs: [`Engine::coll_start`] runs it
//! again, [`Engine::coll_free`] releases it.
//!
//! Matching: every schedule draws a tag from its communicator's collective sequence (all
//! members build collectives in the same order, so they draw the same tag), from a range no
//! user tag and no blocking collective uses. Messages of one schedule between two ranks are
//! posted in the same order on both sides, which MPI's non-overtaking rule turns into
//! matching. Blocking collectives run as schedules (the C library does that under
//! `MPI_THREAD_MULTIPLE`) draw from a second sequence and tag range
//! ([`Engine::set_blocking_sequence`]), so that, like the blocking algorithms with their fixed
//! tags, they never pair with a nonblocking collective still outstanding on the communicator
//! (MPICH's `MPIX_Comm_iagree` then `MPI_Barrier` on one rank, the other order on another,
//! as mpi4py's suite does). A persistent schedule keeps its tag: a run starts only after the previous one
//! completed on this rank, and the peer's messages of the next run queue behind this run's.
//!
//! Buffers: a schedule reads and writes the program's memory through [`UserBuf`]s, whose
//! validity until completion the caller guarantees (C: MPI's rules; Rust: request scopes),
//! and owns its temporaries, which never move or resize while it exists. This module must
//! never block, and never touch memory outside those buffers.

use crate::buf::UserBuf;
use crate::engine::{Engine, PmlError, ReqId, Status, DONE};
use crate::op::{Dtype, Reduction};

pub mod algorithms;
pub mod inter;
pub mod neighbor;
mod posted;

pub use posted::PostedColl;
use posted::{PostedRound, PostedWait};

/// The bit that marks a request id as a collective schedule's.
pub const COLL_BIT: u64 = 1 << 63;

/// The first tag of the collective sequence: tags `[TAG_BASE, TAG_BASE + TAG_SPAN)` are
/// drawn in turn (far from the fixed negative tags of blocking collectives, and negative,
/// so `MPI_ANY_TAG` never takes them).
const TAG_BASE: i32 = i32::MIN;
const TAG_SPAN: u32 = 1 << 30;
/// The tag range of the blocking collectives' sequence: `[-2^30, -2^29)`, after the
/// nonblocking range and still far from the fixed tags.
const BLOCKING_TAG_BASE: i32 = i32::MIN + (1 << 30);
const BLOCKING_TAG_SPAN: u32 = 1 << 29;

/// A byte range of one of a schedule's buffers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Span {
    buf: u16,
    /// Offset in bytes.
    pub off: usize,
    /// Length in bytes.
    pub len: usize,
}

impl Span {
    /// `[off, off + len)` of this span.
    pub fn sub(self, off: usize, len: usize) -> Span {
        debug_assert!(off + len <= self.len, "span {self:?}: sub({off}, {len})");
        Span {
            buf: self.buf,
            off: self.off + off,
            len,
        }
    }

    /// Block `i` of blocks of `size` bytes.
    pub fn block(self, i: usize, size: usize) -> Span {
        self.sub(i * size, size)
    }

    fn overlaps(self, o: Span) -> bool {
        self.buf == o.buf && self.off < o.off + o.len && o.off < self.off + self.len
    }
}

/// Memory a schedule works on.
enum Buf {
    /// The program's memory, read only.
    Read(UserBuf),
    /// The program's memory, read and written.
    Write(UserBuf),
    /// The schedule's own: `len` bytes at `at` of its temporary arena.
    Temp { at: usize },
}

#[derive(Debug, Clone, Copy)]
enum Step {
    /// `tag` indexes the schedule's tags ([`Schedule::tags`]).
    Send {
        ctx: u16,
        peer: u32,
        data: Span,
        tag: u8,
    },
    Recv {
        ctx: u16,
        peer: u32,
        into: Span,
        tag: u8,
    },
    Copy {
        from: Span,
        to: Span,
    },
    /// `inout = input OP inout` (`input` is the lower-ranked operand).
    Reduce {
        input: Span,
        inout: Span,
    },
    /// `inout = inout OP input` (`inout` is the lower-ranked operand).
    ReduceLow {
        inout: Span,
        input: Span,
    },
    /// A posted round of a node segment ([`posted`]): publishes this rank's block, and
    /// completes the round once every member's is there.
    Posted(PostedRound),
}

/// A collective as rounds of steps, with its buffers; built by the functions of
/// [`algorithms`], [`inter`] and [`neighbor`] through a [`Builder`]. A handle on boxed
/// data: moving a schedule moves a pointer, and a completed schedule's memory (its step,
/// buffer and temporary vectors) is kept by the engine for the next one it builds.
pub struct Schedule(Box<Sched>);

impl Schedule {
    /// Rounds in the schedule (for tests and logging).
    pub fn rounds(&self) -> usize {
        self.0.rounds.len()
    }
}

impl std::fmt::Debug for Schedule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Schedule")
            .field("tags", &self.0.tags)
            .field("rounds", &self.0.rounds.len())
            .field("steps", &self.0.steps.len())
            .finish_non_exhaustive()
    }
}

/// A schedule's data.
#[derive(Default)]
struct Sched {
    /// The tags its messages use: one per schedule, or one per direction when a message
    /// between two ranks must be told apart by more than its order (Cartesian
    /// neighborhoods where a neighbor is met twice).
    tags: Vec<i32>,
    bufs: Vec<Buf>,
    steps: Vec<Step>,
    /// Round `r` is `steps[rounds[r]..rounds[r + 1]]` (the last ends at `steps.len()`).
    rounds: Vec<usize>,
    reduction: Option<(Reduction, Dtype)>,
    run: Run,
    /// The temporaries' memory, sized while the schedule is built and never resized after
    /// (requests point into it).
    arena: Vec<u8>,
    /// Room for a reduction whose result goes to the other operand (reused).
    scratch: Vec<u8>,
}

/// How many finished schedules the engine keeps for reuse, and the largest temporary
/// arena one may keep (bigger ones are dropped with it).
const POOL: usize = 16;
const POOL_ARENA_MAX: usize = 4 << 20;

impl Sched {
    /// Empties the schedule for reuse, keeping its vectors' capacity.
    fn reset(&mut self) {
        self.tags.clear();
        self.bufs.clear();
        self.steps.clear();
        self.rounds.clear();
        self.rounds.push(0);
        self.reduction = None;
        self.arena.clear();
        self.run.phase = Phase::Inactive;
        self.run.next_round = 0;
        self.run.pending.clear();
        self.run.error = None;
        self.run.status = Status::default();
        self.run.persistent = false;
        self.run.free_when_done = false;
        self.run.posted = None;
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
enum Phase {
    #[default]
    Inactive,
    Running,
    Done,
}

/// A request of the round under way.
#[derive(Debug, Clone, Copy)]
struct Posted {
    id: ReqId,
    /// For a receive: its context, peer and expected length.
    recv: Option<(u16, u32, usize)>,
}

#[derive(Debug, Default)]
struct Run {
    phase: Phase,
    next_round: usize,
    /// Requests of the round under way.
    pending: Vec<Posted>,
    error: Option<PmlError>,
    /// How the error shows in the request's status.
    status: Status,
    persistent: bool,
    /// `coll_free` was called while it ran: release it when it completes.
    free_when_done: bool,
    /// The posted round the round under way waits for.
    posted: Option<PostedWait>,
}

/// Builds a [`Schedule`]: buffers first, then steps, round by round.
pub struct Builder {
    s: Box<Sched>,
}

impl Builder {
    /// A builder over `s` (new or reused, emptied) with the schedule's tags.
    fn new(mut s: Box<Sched>, tags: impl Iterator<Item = i32>) -> Builder {
        s.reset();
        s.tags.extend(tags);
        Builder { s }
    }

    fn add(&mut self, b: Buf, len: usize) -> Span {
        self.s.bufs.push(b);
        Span {
            buf: (self.s.bufs.len() - 1) as u16,
            off: 0,
            len,
        }
    }

    /// The program's memory that the schedule only reads.
    pub fn input(&mut self, b: UserBuf) -> Span {
        let len = b.len();
        self.add(Buf::Read(b), len)
    }

    /// The program's memory that the schedule writes (and may read back).
    pub fn output(&mut self, b: UserBuf) -> Span {
        let len = b.len();
        self.add(Buf::Write(b), len)
    }

    /// A temporary of `len` bytes, zeroed.
    pub fn temp(&mut self, len: usize) -> Span {
        let at = self.s.arena.len();
        self.s.arena.resize(at + len, 0);
        self.add(Buf::Temp { at }, len)
    }

    /// The reduction that [`Builder::reduce`] steps apply.
    pub fn set_reduction(&mut self, op: Reduction, dtype: Dtype) {
        self.s.reduction = Some((op, dtype));
    }

    /// Whether the reduction set is commutative.
    pub fn commutative(&self) -> bool {
        self.s
            .reduction
            .as_ref()
            .is_none_or(|(op, _)| op.is_commutative())
    }

    /// Sends `data` to rank `peer` of `ctx` in the current round.
    pub fn send(&mut self, ctx: u16, peer: u32, data: Span) {
        self.send_tagged(ctx, peer, data, 0);
    }

    /// Sends `data` with the schedule's tag number `tag` (see [`Engine::coll_builder_tags`]).
    pub fn send_tagged(&mut self, ctx: u16, peer: u32, data: Span, tag: u8) {
        debug_assert!(usize::from(tag) < self.s.tags.len());
        self.s.steps.push(Step::Send {
            ctx,
            peer,
            data,
            tag,
        });
    }

    /// Receives exactly `into.len` bytes from rank `peer` of `ctx` in the current round.
    pub fn recv(&mut self, ctx: u16, peer: u32, into: Span) {
        self.recv_tagged(ctx, peer, into, 0);
    }

    /// Receives into `into` with the schedule's tag number `tag`.
    pub fn recv_tagged(&mut self, ctx: u16, peer: u32, into: Span, tag: u8) {
        debug_assert!(self.writable(into), "receive into a read-only buffer");
        debug_assert!(usize::from(tag) < self.s.tags.len());
        self.s.steps.push(Step::Recv {
            ctx,
            peer,
            into,
            tag,
        });
    }

    /// Copies `from` to `to` (same length, not overlapping) at the start of the round.
    pub fn copy(&mut self, from: Span, to: Span) {
        debug_assert_eq!(from.len, to.len);
        if from == to || from.len == 0 {
            return;
        }
        debug_assert!(!from.overlaps(to) && self.writable(to));
        self.s.steps.push(Step::Copy { from, to });
    }

    /// `inout = input OP inout`, where `input` holds the lower ranks' contribution.
    pub fn reduce(&mut self, input: Span, inout: Span) {
        debug_assert!(!input.overlaps(inout) && self.writable(inout));
        self.s.steps.push(Step::Reduce { input, inout });
    }

    /// `inout = inout OP input`, where `inout` holds the lower ranks' contribution.
    pub fn reduce_low(&mut self, inout: Span, input: Span) {
        debug_assert!(!input.overlaps(inout) && self.writable(inout));
        self.s.steps.push(Step::ReduceLow { inout, input });
    }

    /// Ends the current round: later steps wait for its messages.
    pub fn round(&mut self) {
        if self.s.rounds.last() != Some(&self.s.steps.len()) {
            self.s.rounds.push(self.s.steps.len());
        }
    }

    fn writable(&self, s: Span) -> bool {
        !matches!(self.s.bufs.get(s.buf as usize), Some(Buf::Read(_)))
    }

    /// The finished schedule.
    pub fn finish(mut self) -> Schedule {
        if self.s.rounds.len() > 1 && self.s.rounds.last() == Some(&self.s.steps.len()) {
            self.s.rounds.pop();
        }
        let most = self
            .s
            .rounds
            .iter()
            .enumerate()
            .map(|(r, &start)| {
                let end = self
                    .s
                    .rounds
                    .get(r + 1)
                    .copied()
                    .unwrap_or(self.s.steps.len());
                self.s.steps[start..end]
                    .iter()
                    .filter(|s| matches!(s, Step::Send { .. } | Step::Recv { .. }))
                    .count()
            })
            .max()
            .unwrap_or(0);
        self.s.run.pending.reserve(most);
        Schedule(self.s)
    }
}

impl Sched {
    fn round_steps(&self, r: usize) -> std::ops::Range<usize> {
        let start = self.rounds[r];
        let end = self.rounds.get(r + 1).copied().unwrap_or(self.steps.len());
        start..end
    }

    fn read(&self, s: Span) -> &[u8] {
        match &self.bufs[s.buf as usize] {
            Buf::Read(b) | Buf::Write(b) => &b.as_slice()[s.off..s.off + s.len],
            Buf::Temp { at } => &self.arena[at + s.off..at + s.off + s.len],
        }
    }

    /// The address of `s`'s first byte (program memory or the arena).
    fn ptr(&mut self, s: Span) -> *mut u8 {
        match &mut self.bufs[s.buf as usize] {
            Buf::Read(b) | Buf::Write(b) => {
                let mut b = *b;
                b.slice_mut(s.off, s.len).as_mut_ptr()
            }
            Buf::Temp { at } => self.arena[*at + s.off..*at + s.off + s.len].as_mut_ptr(),
        }
    }

    /// The program buffer or temporary behind `s`, as a request may use it until the
    /// schedule's round completes: the schedule owns it (temporaries never move), or the
    /// caller guaranteed it (program memory).
    fn user_buf(&mut self, s: Span, write: bool) -> UserBuf {
        match &mut self.bufs[s.buf as usize] {
            Buf::Read(b) => {
                debug_assert!(!write, "a receive into a send buffer");
                sub_buf(*b, s.off, s.len)
            }
            Buf::Write(b) => sub_buf(*b, s.off, s.len),
            Buf::Temp { at } => {
                let at = *at;
                let v = &mut self.arena[at + s.off..at + s.off + s.len];
                // SAFETY: the arena is owned by this schedule and sized once, while it is
                // built; it is never resized, reused or freed before every request of the
                // round using it has completed (a schedule is released or reused only when
                // complete, and an error waits for its outstanding requests), and no other
                // step touches the span meanwhile.
                #[allow(unsafe_code)]
                unsafe {
                    UserBuf::for_recv(v.as_mut_ptr(), v.len())
                }
            }
        }
    }

    /// Runs a local step.
    fn local(&mut self, step: Step) -> Result<(), PmlError> {
        match step {
            Step::Copy { from, to } => {
                self.writable(to)?;
                let (src, dst) = (self.ptr(from), self.ptr(to));
                // SAFETY: both spans lie in memory this schedule may use (program buffers the
                // caller guaranteed, or its arena), `to` is writable (checked above), and
                // `copy` allows the spans to overlap.
                #[allow(unsafe_code)]
                unsafe {
                    std::ptr::copy(src, dst, from.len.min(to.len))
                };
                Ok(())
            }
            Step::Reduce { input, inout } => self.apply(input, inout, false),
            Step::ReduceLow { inout, input } => self.apply(input, inout, true),
            Step::Send { .. } | Step::Recv { .. } | Step::Posted(_) => Ok(()),
        }
    }

    /// Fails unless the schedule may write `s`.
    fn writable(&self, s: Span) -> Result<(), PmlError> {
        match self.bufs[s.buf as usize] {
            Buf::Read(_) => Err(PmlError::Invalid(
                "collective schedule: a step writes into a send buffer (a Kestrel bug)".into(),
            )),
            _ => Ok(()),
        }
    }

    /// `inout = input OP inout`, or with `low` `inout = inout OP input`.
    fn apply(&mut self, input: Span, inout: Span, low: bool) -> Result<(), PmlError> {
        if input.overlaps(inout) || input.len != inout.len {
            return Err(PmlError::Invalid(
                "collective schedule: a reduction over overlapping spans (a Kestrel bug)".into(),
            ));
        }
        self.writable(inout)?;
        let (a, b) = (self.ptr(input), self.ptr(inout));
        let mut scratch = std::mem::take(&mut self.scratch);
        let Some((op, dtype)) = &self.reduction else {
            return Err(PmlError::Invalid(
                "collective schedule: a reduction step without an operation (a Kestrel bug)".into(),
            ));
        };
        // SAFETY: the two spans are in memory this schedule may use (program buffers the
        // caller guaranteed, or its arena, which no one resizes while it runs), have the
        // same length and do not overlap (checked above), and `inout` is writable; nothing
        // else touches them during this step.
        #[allow(unsafe_code)]
        let (input, out) = unsafe {
            (
                std::slice::from_raw_parts(a as *const u8, input.len),
                std::slice::from_raw_parts_mut(b, inout.len),
            )
        };
        let r = if low {
            // inout = inout OP input: compute into a copy of the input, then move it back.
            scratch.clear();
            scratch.extend_from_slice(input);
            op.apply(*dtype, out, &mut scratch)
                .map(|()| out.copy_from_slice(&scratch))
        } else {
            op.apply(*dtype, input, out)
        };
        self.scratch = scratch;
        r.map_err(|e| PmlError::Invalid(format!("collective: {e}")))
    }
}

/// `[off, off + len)` of a program buffer.
fn sub_buf(b: UserBuf, off: usize, len: usize) -> UserBuf {
    let mut b = b;
    let s = b.slice_mut(off, len);
    debug_assert_eq!(s.len(), len);
    // SAFETY: a part of memory the creator of `b` guaranteed for the request's duration.
    #[allow(unsafe_code)]
    unsafe {
        UserBuf::for_recv(s.as_mut_ptr(), s.len())
    }
}

/// The schedules of one engine.
#[derive(Default)]
pub(crate) struct Table {
    slots: Vec<(u32, Option<Box<Sched>>)>,
    /// Finished schedules' memory, for the next ones built ([`POOL`] at most): boxes, as
    /// a [`Schedule`] holds its data, so reuse moves a pointer.
    #[allow(clippy::vec_box)]
    pool: Vec<Box<Sched>>,
    /// The allreduce algorithm parameters, once read.
    pub(crate) allreduce_tuning: Option<(usize, usize)>,
    /// Builders draw from the blocking collectives' sequence ([`Engine::set_blocking_sequence`]).
    blocking_sequence: bool,
    /// Builders may use the node segment's posted rounds ([`Engine::set_posted_rounds`]).
    posted_rounds: bool,
    /// `coll_shm_posted`, once read.
    posted_param: Option<bool>,
    free: Vec<u32>,
    /// Slots of running schedules.
    running: Vec<u32>,
    /// Errors of completed schedules not yet taken by [`Engine::coll_error`].
    errors: Vec<(ReqId, PmlError)>,
}

impl Table {
    fn insert(&mut self, s: Schedule) -> ReqId {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let slot = &mut self.slots[idx as usize];
        slot.0 = slot.0.wrapping_add(1) & 0x7fff_ffff;
        slot.1 = Some(s.0);
        COLL_BIT | (u64::from(slot.0) << 32) | u64::from(idx)
    }

    fn index(&self, id: ReqId) -> Option<usize> {
        let idx = (id & 0xffff_ffff) as usize;
        let (gen, s) = self.slots.get(idx)?;
        (id & COLL_BIT != 0 && u64::from(*gen) == (id & !COLL_BIT) >> 32 && s.is_some())
            .then_some(idx)
    }

    fn get(&self, id: ReqId) -> Option<&Sched> {
        let i = self.index(id)?;
        self.slots[i].1.as_deref()
    }

    fn remove(&mut self, idx: usize) {
        if let Some(mut s) = self.slots[idx].1.take() {
            if self.pool.len() < POOL {
                // Program memory must not outlive the request: forget it now.
                s.bufs.clear();
                if s.arena.capacity() > POOL_ARENA_MAX {
                    s.arena = Vec::new();
                }
                self.pool.push(s);
            }
        }
        self.free.push(idx as u32);
    }

    /// Whether any schedule runs (checked on every progress call).
    #[inline(always)]
    pub(crate) fn is_idle(&self) -> bool {
        self.running.is_empty()
    }
}

/// Whether `id` names a collective schedule.
#[inline(always)]
pub fn is_coll(id: ReqId) -> bool {
    id & COLL_BIT != 0 && id != DONE
}

impl Engine {
    /// A builder for a new schedule on communicator context `ctx`: draws the next tag of its
    /// collective sequence (every member must build its collectives in the same order).
    pub fn coll_builder(&mut self, ctx: u16) -> Result<Builder, PmlError> {
        self.coll_builder_tags(ctx, 1)
    }

    /// A builder whose steps may use `n` tags (1 to 255), drawn in turn from the
    /// collective sequence: every member must ask for the same `n`.
    pub fn coll_builder_tags(&mut self, ctx: u16, n: usize) -> Result<Builder, PmlError> {
        debug_assert!((1..=255).contains(&n));
        let n = n.max(1) as u32;
        let blocking = self.nbc.blocking_sequence;
        let first = self.next_coll_seq(ctx, blocking)?;
        for _ in 1..n {
            self.next_coll_seq(ctx, blocking)?;
        }
        let (base, span) = if blocking {
            (BLOCKING_TAG_BASE, BLOCKING_TAG_SPAN)
        } else {
            (TAG_BASE, TAG_SPAN)
        };
        let tags = (0..n).map(move |k| base + (first.wrapping_add(k) % span) as i32);
        let s = self.nbc.pool.pop().unwrap_or_default();
        Ok(Builder::new(s, tags))
    }

    /// While `on`, schedules built draw their tags from the communicator's sequence of
    /// blocking collectives (see the module documentation): set around building a blocking
    /// collective that runs as a schedule.
    pub fn set_blocking_sequence(&mut self, on: bool) {
        self.nbc.blocking_sequence = on;
    }

    /// While `on`, small barrier, bcast and allreduce schedules built on a communicator with
    /// a node segment use one of its posted rounds (see `nbc::posted`). Posted rounds are drawn
    /// as schedules are built, so set it only around building schedules that start at once
    /// ([`Engine::coll_run`]: `MPI_I*`), never persistent ones, whose starts need not come in
    /// the same order on every rank.
    pub fn set_posted_rounds(&mut self, on: bool) {
        self.nbc.posted_rounds = on;
    }

    /// Starts a schedule; returns its request.
    pub fn coll_run(&mut self, s: Schedule) -> ReqId {
        let id = self.nbc.insert(s);
        self.coll_launch(id);
        id
    }

    /// Keeps a schedule as a persistent request (MPI-4 `MPI_*_init`), not started.
    pub fn coll_persist(&mut self, mut s: Schedule) -> ReqId {
        s.0.run.persistent = true;
        self.nbc.insert(s)
    }

    /// `MPI_Start` of a persistent collective request.
    pub fn coll_start(&mut self, id: ReqId) -> Result<(), PmlError> {
        match self.nbc.get(id).map(|s| s.run.phase) {
            Some(Phase::Inactive) => {
                self.coll_launch(id);
                Ok(())
            }
            Some(_) => Err(PmlError::Invalid(
                "MPI_Start: the persistent collective request is still active; complete it \
                 (MPI_Wait/MPI_Test) before starting it again"
                    .into(),
            )),
            None => Err(PmlError::Invalid(format!(
                "MPI_Start: {id:#x} is not a persistent collective request (freed?)"
            ))),
        }
    }

    /// Releases a persistent collective request (at once if inactive, else when it
    /// completes), or a completed nonblocking one nobody will wait for.
    pub fn coll_free(&mut self, id: ReqId) {
        let Some(i) = self.nbc.index(id) else { return };
        let s = self.nbc.slots[i].1.as_mut().expect("indexed");
        if s.run.phase == Phase::Running {
            s.run.free_when_done = true;
        } else {
            self.nbc.remove(i);
        }
    }

    /// The error a completed collective request ended with, once
    /// [`Engine::try_complete`] returned its status (taken: a second call returns `None`).
    pub fn coll_error(&mut self, id: ReqId) -> Option<PmlError> {
        let i = self.nbc.errors.iter().position(|(r, _)| *r == id)?;
        Some(self.nbc.errors.swap_remove(i).1)
    }

    /// Whether the persistent collective request `id` is running.
    pub fn coll_is_active(&self, id: ReqId) -> bool {
        self.nbc
            .get(id)
            .is_some_and(|s| s.run.phase != Phase::Inactive)
    }

    fn coll_launch(&mut self, id: ReqId) {
        let i = self.nbc.index(id).expect("just checked");
        let s = self.nbc.slots[i].1.as_mut().expect("indexed");
        s.run.phase = Phase::Running;
        s.run.next_round = 0;
        s.run.error = None;
        s.run.status = Status::default();
        self.nbc.running.push(i as u32);
        // Go as far as the messages already here allow: a round whose receives find their
        // data waiting completes within this call.
        self.advance(i);
        if self.nbc.slots[i]
            .1
            .as_ref()
            .is_some_and(|s| s.run.phase != Phase::Running)
        {
            self.nbc.running.retain(|&r| r as usize != i);
        }
    }

    /// Advances every running schedule; returns how many moved.
    #[inline(never)]
    pub(crate) fn progress_colls(&mut self) -> usize {
        let mut moved = 0;
        let mut k = 0;
        while k < self.nbc.running.len() {
            let i = self.nbc.running[k] as usize;
            moved += self.advance(i);
            let done = self.nbc.slots[i]
                .1
                .as_ref()
                .is_none_or(|s| s.run.phase != Phase::Running);
            if done {
                self.nbc.running.swap_remove(k);
            } else {
                k += 1;
            }
        }
        moved
    }

    /// Takes schedule `i` as far as it can go now; returns the rounds completed.
    fn advance(&mut self, i: usize) -> usize {
        // The common case while polling: the round still waits for a message. Checked in
        // place, without taking the schedule out of its slot.
        match self.nbc.slots[i].1.as_deref() {
            Some(s) if s.run.phase == Phase::Running => {
                if s.run.posted.is_none() && s.run.pending.iter().any(|p| !self.is_complete(p.id)) {
                    return 0;
                }
            }
            _ => return 0,
        }
        let Some(mut s) = self.nbc.slots[i].1.take() else {
            return 0;
        };
        let mut rounds = 0;
        loop {
            if !self.posted_progress(&mut s) {
                break;
            }
            if s.run.pending.iter().any(|p| !self.is_complete(p.id)) {
                break;
            }
            let mut pending = std::mem::take(&mut s.run.pending);
            for p in pending.drain(..) {
                let st = self.try_complete(p.id).unwrap_or_default();
                self.check_step(&mut s.run, st, p.recv);
            }
            // Keep the allocation for the next round.
            s.run.pending = pending;
            if s.run.error.is_some() || s.run.next_round == s.rounds.len() {
                s.run.phase = Phase::Done;
                rounds += 1;
                break;
            }
            let r = s.run.next_round;
            s.run.next_round += 1;
            rounds += 1;
            for k in s.round_steps(r) {
                let step = s.steps[k];
                if let Err(e) = self.post_step(&mut s, step) {
                    self.fail_schedule(&mut s, e);
                    break;
                }
            }
        }
        self.nbc.slots[i].1 = Some(s);
        if self.nbc.slots[i]
            .1
            .as_ref()
            .is_some_and(|s| s.run.phase == Phase::Done && s.run.free_when_done)
        {
            self.nbc.remove(i);
        }
        rounds
    }

    fn post_step(&mut self, s: &mut Sched, step: Step) -> Result<(), PmlError> {
        match step {
            Step::Send {
                ctx,
                peer,
                data,
                tag,
            } if !self.is_eager(ctx, peer, data.len) && self.detached_room(data.len) => {
                // A rendezvous the round does not wait for: the engine sends a copy in the
                // background, so this schedule goes on even if the peer reads it late (while
                // the copies in flight stay bounded; past that the round waits for the send,
                // so a root whose rounds only send cannot run ahead of its peers without end).
                let tag = s.tags[usize::from(tag)];
                self.isend_detached(ctx, peer, tag, s.read(data))?;
            }
            Step::Send {
                ctx,
                peer,
                data,
                tag,
            } => {
                let b = s.user_buf(data, false);
                let id = self.isend(ctx, peer, s.tags[usize::from(tag)], b, false)?;
                if id != DONE {
                    s.run.pending.push(Posted { id, recv: None });
                }
            }
            Step::Recv {
                ctx,
                peer,
                into,
                tag,
            } => {
                let b = s.user_buf(into, true);
                let id = self.irecv(ctx, Some(peer), Some(s.tags[usize::from(tag)]), b)?;
                s.run.pending.push(Posted {
                    id,
                    recv: Some((ctx, peer, into.len)),
                });
            }
            Step::Posted(round) => {
                s.run.posted = Some(PostedWait {
                    round,
                    published: false,
                });
            }
            local => s.local(local)?,
        }
        Ok(())
    }

    /// Records what a completed request of the round says about the schedule.
    fn check_step(&mut self, run: &mut Run, st: Status, expect: Option<(u16, u32, usize)>) {
        if run.error.is_some() {
            return;
        }
        if let Some(p) = st.failed_peer {
            run.status.failed_peer = Some(p);
            run.error = Some(self.failure_error(p));
            return;
        }
        if st.cancelled {
            return;
        }
        if let Some((_, peer, len)) = expect {
            let got = st.truncated_from.unwrap_or(st.count);
            if got != len {
                if got > len {
                    run.status.truncated_from = Some(got);
                }
                run.error = Some(PmlError::Invalid(format!(
                    "collective: rank {peer} sent {got} bytes where {len} were expected; every \
                     rank must pass matching counts, types and roots, and start its \
                     collectives in the same order"
                )));
            }
        }
    }

    /// Stops a schedule after an error: no further rounds; its outstanding receives are
    /// cancelled, and it completes once nothing of the round is in flight.
    fn fail_schedule(&mut self, s: &mut Sched, e: PmlError) {
        if s.run.error.is_none() {
            s.run.error = Some(e);
        }
        for p in &s.run.pending {
            if let Some((ctx, _, _)) = p.recv {
                self.cancel(p.id, ctx);
            }
        }
        s.run.next_round = s.rounds.len();
    }

    /// Completes collective request `id` if its schedule is done.
    pub(crate) fn coll_try_complete(&mut self, id: ReqId) -> Option<Status> {
        let Some(i) = self.nbc.index(id) else {
            return Some(Status::default());
        };
        let s = self.nbc.slots[i].1.as_mut().expect("indexed");
        match s.run.phase {
            Phase::Running => return None,
            // An inactive persistent request completes at once with an empty status.
            Phase::Inactive => return Some(Status::default()),
            Phase::Done => {}
        }
        let status = s.run.status;
        if let Some(e) = s.run.error.take() {
            // Errors of completed requests nobody asks about are not kept forever.
            if self.nbc.errors.len() >= 64 {
                self.nbc.errors.remove(0);
            }
            self.nbc.errors.push((id, e));
        }
        let status = Status {
            op_failed: self.nbc.errors.iter().any(|(r, _)| *r == id),
            ..status
        };
        if s.run.persistent {
            s.run.phase = Phase::Inactive;
        } else {
            self.nbc.remove(i);
        }
        Some(status)
    }

    /// Whether collective request `id` is done (true for unknown ids).
    #[cold]
    pub(crate) fn coll_is_complete(&self, id: ReqId) -> bool {
        self.nbc
            .get(id)
            .is_none_or(|s| s.run.phase != Phase::Running)
    }
}
