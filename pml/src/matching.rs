//! MPI message matching and ordering for one communicator.
//!
//! This module owns two decisions and nothing else:
//!
//! * **Ordering.** Senders stamp every message with a per-source 16-bit sequence number.
//!   Transports and multiple rails may deliver messages out of order; the engine parks early
//!   arrivals and releases messages strictly in sequence order per source, which is what MPI's
//!   non-overtaking rule requires.
//! * **Matching.** A released message goes to the earliest-posted receive whose selector
//!   matches it, or waits in the unexpected queue; a newly posted receive (or a probe) takes the
//!   earliest-released matching unexpected message.
//!
//! The engine must never perform I/O, never look at or copy payload bytes (the payload `M` is
//! an opaque handle it only moves), and never allocate on the in-order fast path (in-order
//! arrival, matching specific receive at the head of its queue, no wildcard receives). A
//! misbehaving peer produces a [`MatchError`], never a panic.

use std::collections::{BTreeMap, VecDeque};
use std::error::Error;
use std::fmt;

/// Envelope of a message as stamped by the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Envelope {
    /// Rank of the sender within the communicator.
    pub source: u32,
    /// Message tag; negative tags are reserved for internal (collective) traffic.
    pub tag: i32,
    /// Per-source sequence number, starting at 0 and wrapping after 65535.
    pub seq: u16,
}

/// Caller-chosen identifier of a posted receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RecvId(pub u64);

/// Receive selectors: `None` = `MPI_ANY_SOURCE` / `MPI_ANY_TAG`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Selector {
    /// Required source rank, or `None` for any source.
    pub source: Option<u32>,
    /// Required tag, or `None` for any non-negative tag.
    pub tag: Option<i32>,
}

impl Selector {
    /// Whether a message with envelope `env` satisfies this selector.
    ///
    /// `MPI_ANY_TAG` matches only tags `>= 0`: negative tags carry collective traffic that a
    /// user's wildcard receive must never steal. A specific tag (negative or not) matches only
    /// an equal tag; a specific source matches only an equal source.
    pub fn matches(&self, env: &Envelope) -> bool {
        self.source.is_none_or(|s| s == env.source) && tag_matches(self.tag, env.tag)
    }
}

/// Tag half of [`Selector::matches`], used where the source is already known to match.
#[inline]
fn tag_matches(sel: Option<i32>, tag: i32) -> bool {
    match sel {
        Some(t) => t == tag,
        None => tag >= 0,
    }
}

/// Why an arrival was rejected (a misbehaving peer, never a panic).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchError {
    /// The envelope names a rank that is not part of the communicator.
    SourceOutOfRange {
        /// Source rank claimed by the envelope.
        source: u32,
        /// Size of the communicator.
        size: u32,
    },
    /// The sequence number was already released, or is already parked.
    DuplicateSequence {
        /// Source rank of the message.
        source: u32,
        /// The repeated sequence number.
        seq: u16,
    },
    /// Too many out-of-order messages from this source are waiting for predecessors.
    TooManyParked {
        /// Source rank of the message.
        source: u32,
        /// Maximum number of parked messages per source.
        limit: usize,
    },
}

impl fmt::Display for MatchError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MatchError::SourceOutOfRange { source, size } => write!(
                f,
                "message from source {source} is outside the communicator (size {size})"
            ),
            MatchError::DuplicateSequence { source, seq } => write!(
                f,
                "source {source} sent sequence number {seq} twice \
                 (already delivered or already waiting out of order)"
            ),
            MatchError::TooManyParked { source, limit } => write!(
                f,
                "source {source} has {limit} out-of-order messages waiting for predecessors; \
                 refusing more"
            ),
        }
    }
}

impl Error for MatchError {}

/// Per-source cap on parked messages. Sequence comparison is meaningful only within half the
/// 16-bit space, so no more than this many messages can ever legitimately be ahead.
const PARK_LIMIT: usize = 65536 / 2 - 1;

/// A posted receive; its source is implied by the queue it sits in.
#[derive(Debug)]
struct Posted {
    id: RecvId,
    tag: Option<i32>,
    /// Posting order; comparable across the specific and wildcard queues.
    stamp: u64,
}

/// A released message no receive wanted yet.
#[derive(Debug)]
struct Unexpected<M> {
    env: Envelope,
    msg: M,
    /// Global release order, so `ANY_SOURCE` receives can pick the oldest across sources.
    stamp: u64,
}

/// Sentinel for "not in the active-sources list".
const NOT_ACTIVE: usize = usize::MAX;

/// Everything the engine knows about one source rank.
#[derive(Debug)]
struct SourceState<M> {
    /// Count of messages released so far; its low 16 bits are the expected sequence number.
    /// Kept as 64 bits so parked keys stay ordered across 16-bit wrap-around.
    released: u64,
    /// Early arrivals keyed by the absolute release count they will have.
    parked: BTreeMap<u64, (Envelope, M)>,
    /// Receives posted for this source specifically, in posting order.
    posted: VecDeque<Posted>,
    /// Released, unmatched messages from this source, in release order.
    unexpected: VecDeque<Unexpected<M>>,
    /// Position in `MatchEngine::active`, or `NOT_ACTIVE` when `unexpected` is empty.
    active_pos: usize,
}

impl<M> SourceState<M> {
    fn new() -> Self {
        SourceState {
            released: 0,
            parked: BTreeMap::new(),
            posted: VecDeque::new(),
            unexpected: VecDeque::new(),
            active_pos: NOT_ACTIVE,
        }
    }
}

/// The matching engine of one communicator.
///
/// `M` is the payload handle (for example a buffer descriptor); the engine never inspects it.
#[derive(Debug)]
pub struct MatchEngine<M> {
    comm_size: u32,
    park_limit: usize,
    /// Lazily grown and lazily boxed: a large communicator where few ranks talk to us should
    /// cost a pointer per rank, not a full state.
    sources: Vec<Option<Box<SourceState<M>>>>,
    /// `MPI_ANY_SOURCE` receives, in posting order.
    wildcard: VecDeque<Posted>,
    /// Receives naming a rank outside the communicator: they can never match, but MPI still
    /// lets them be cancelled, so they are kept rather than dropped.
    dead: VecDeque<Posted>,
    /// Sources with a non-empty unexpected queue, so `ANY_SOURCE` lookups do not scan every
    /// rank of a large communicator.
    active: Vec<u32>,
    next_post: u64,
    next_release: u64,
    posted_count: usize,
    unexpected_count: usize,
    parked_count: usize,
}

impl<M> MatchEngine<M> {
    /// Creates an engine for a communicator of `comm_size` ranks.
    pub fn new(comm_size: u32) -> Self {
        Self::with_park_limit(comm_size, PARK_LIMIT)
    }

    /// Lets tests reach `TooManyParked`, which the real limit makes unreachable: the limit
    /// equals the number of distinct sequence numbers that can be ahead of the expected one.
    fn with_park_limit(comm_size: u32, park_limit: usize) -> Self {
        MatchEngine {
            comm_size,
            park_limit,
            sources: Vec::new(),
            wildcard: VecDeque::new(),
            dead: VecDeque::new(),
            active: Vec::new(),
            next_post: 0,
            next_release: 0,
            posted_count: 0,
            unexpected_count: 0,
            parked_count: 0,
        }
    }

    /// Posts a receive. If an unexpected message matches, removes it and returns it instead of
    /// queueing the receive.
    ///
    /// Among matching unexpected messages, the one released earliest wins (across all sources
    /// for an `ANY_SOURCE` selector). A selector naming a rank outside the communicator never
    /// matches but is still queued so that it can be cancelled.
    #[inline]
    pub fn post(&mut self, id: RecvId, sel: Selector) -> Option<(Envelope, M)> {
        if self.unexpected_count > 0 {
            if let Some(found) = self.take(sel) {
                return Some(found);
            }
        }
        let posted = Posted {
            id,
            tag: sel.tag,
            stamp: self.next_post,
        };
        self.next_post += 1;
        match sel.source {
            None => self.wildcard.push_back(posted),
            Some(s) if s < self.comm_size => self.state_mut(s).posted.push_back(posted),
            Some(_) => self.dead.push_back(posted),
        }
        self.posted_count += 1;
        None
    }

    /// A message arrives (possibly out of order). Every message that becomes matchable in
    /// order is either matched to the earliest-posted matching receive (pushed to `matched` as
    /// `(RecvId, Envelope, M)`, in order) or queued as unexpected. `matched` is appended to,
    /// not cleared.
    ///
    /// On error the message is dropped and the engine state is unchanged.
    pub fn arrive(
        &mut self,
        env: Envelope,
        msg: M,
        matched: &mut Vec<(RecvId, Envelope, M)>,
    ) -> Result<(), MatchError> {
        if env.source >= self.comm_size {
            return Err(MatchError::SourceOutOfRange {
                source: env.source,
                size: self.comm_size,
            });
        }
        let park_limit = self.park_limit;
        let state = self.state_mut(env.source);
        let ahead = env.seq.wrapping_sub(state.released as u16) as i16;
        if ahead < 0 {
            return Err(MatchError::DuplicateSequence {
                source: env.source,
                seq: env.seq,
            });
        }
        if ahead > 0 {
            let key = state.released + ahead as u64;
            if state.parked.contains_key(&key) {
                return Err(MatchError::DuplicateSequence {
                    source: env.source,
                    seq: env.seq,
                });
            }
            if state.parked.len() >= park_limit {
                return Err(MatchError::TooManyParked {
                    source: env.source,
                    limit: park_limit,
                });
            }
            state.parked.insert(key, (env, msg));
            self.parked_count += 1;
            return Ok(());
        }

        state.released += 1;
        let drain = !state.parked.is_empty();
        self.release(env, msg, matched);
        if drain {
            self.release_parked(env.source, matched);
        }
        Ok(())
    }

    /// The fast path of [`MatchEngine::arrive`] for a message that is next in its source's
    /// order with nothing parked behind it: when a posted receive matches, consumes that
    /// receive and the sequence number and returns the receive's id, so the caller can copy
    /// the payload straight from the transport into the user's buffer. Otherwise (out of
    /// order, parked successors, no matching receive) changes nothing and returns `None`: call
    /// `arrive` with an owned payload.
    #[inline]
    pub fn match_in_order(&mut self, env: Envelope) -> Result<Option<RecvId>, MatchError> {
        // The common case of a ping-pong or a stream, kept to a handful of loads: no wildcard
        // receive posted, and the head of this source's queue takes the message.
        if self.wildcard.is_empty() && env.source < self.comm_size {
            if let Some(Some(state)) = self.sources.get_mut(env.source as usize) {
                if env.seq == state.released as u16 && state.parked.is_empty() {
                    match state.posted.front() {
                        Some(p) if tag_matches(p.tag, env.tag) => {
                            let id = p.id;
                            state.posted.pop_front();
                            state.released += 1;
                            self.next_release += 1;
                            self.posted_count -= 1;
                            return Ok(Some(id));
                        }
                        // Nothing posted: the message is unexpected, nothing to search.
                        None => return Ok(None),
                        Some(_) => {}
                    }
                }
            }
        }
        self.match_in_order_searching(env)
    }

    /// [`MatchEngine::match_in_order`] when the head of the queue does not settle it.
    fn match_in_order_searching(&mut self, env: Envelope) -> Result<Option<RecvId>, MatchError> {
        if env.source >= self.comm_size {
            return Err(MatchError::SourceOutOfRange {
                source: env.source,
                size: self.comm_size,
            });
        }
        let wild = first_match(&self.wildcard, env.tag);
        let state = self.state_mut(env.source);
        if env.seq != state.released as u16 || !state.parked.is_empty() {
            return Ok(None);
        }
        let specific = first_match(&state.posted, env.tag);
        let posted = match (specific, wild) {
            (Some((sp, ss)), Some((_, ws))) if ss < ws => state.posted.remove(sp),
            (Some((sp, _)), None) => state.posted.remove(sp),
            (_, Some((wp, _))) => self.wildcard.remove(wp),
            (None, None) => return Ok(None),
        };
        let Some(p) = posted else { return Ok(None) };
        self.state_mut(env.source).released += 1;
        self.next_release += 1;
        self.posted_count -= 1;
        Ok(Some(p.id))
    }

    /// The unexpected message a receive with `sel` would get now, without removing it
    /// (`MPI_Iprobe`).
    pub fn probe(&self, sel: Selector) -> Option<(Envelope, &M)> {
        let (source, pos) = self.find_unexpected(sel)?;
        let u = self.state(source)?.unexpected.get(pos)?;
        Some((u.env, &u.msg))
    }

    /// Removes and returns what [`probe`](Self::probe) would return (`MPI_Mprobe` /
    /// `MPI_Improbe`).
    pub fn take(&mut self, sel: Selector) -> Option<(Envelope, M)> {
        let (source, pos) = self.find_unexpected(sel)?;
        let u = self.remove_unexpected(source, pos)?;
        Some((u.env, u.msg))
    }

    /// Cancels a posted receive that has not matched; false if unknown or already matched.
    ///
    /// If several outstanding receives share `id`, the earliest posted one is cancelled.
    /// Cancellation is rare, so this scans the posted queues rather than paying for an index on
    /// every post and match.
    pub fn cancel(&mut self, id: RecvId) -> bool {
        /// Where the earliest receive with the id lives.
        enum Queue {
            Wildcard,
            Dead,
            Source(usize),
        }
        fn first_with(q: &VecDeque<Posted>, id: RecvId) -> Option<(usize, u64)> {
            q.iter()
                .enumerate()
                .find(|(_, p)| p.id == id)
                .map(|(i, p)| (i, p.stamp))
        }

        let mut best: Option<(Queue, usize, u64)> = None;
        let mut consider = |queue: Queue, hit: Option<(usize, u64)>| {
            if let Some((pos, stamp)) = hit {
                if best.as_ref().is_none_or(|b| stamp < b.2) {
                    best = Some((queue, pos, stamp));
                }
            }
        };
        consider(Queue::Wildcard, first_with(&self.wildcard, id));
        consider(Queue::Dead, first_with(&self.dead, id));
        for (i, slot) in self.sources.iter().enumerate() {
            if let Some(state) = slot {
                consider(Queue::Source(i), first_with(&state.posted, id));
            }
        }

        let removed = match best {
            None => None,
            Some((Queue::Wildcard, pos, _)) => self.wildcard.remove(pos),
            Some((Queue::Dead, pos, _)) => self.dead.remove(pos),
            Some((Queue::Source(i), pos, _)) => self
                .sources
                .get_mut(i)
                .and_then(|slot| slot.as_mut())
                .and_then(|state| state.posted.remove(pos)),
        };
        if removed.is_some() {
            self.posted_count -= 1;
            true
        } else {
            false
        }
    }

    /// Number of posted receives waiting for a message.
    pub fn posted_len(&self) -> usize {
        self.posted_count
    }

    /// Up to `max` posted receives' selectors, oldest first (for hang reports; a scan).
    pub fn posted_selectors(&self, max: usize) -> Vec<Selector> {
        let mut all: Vec<(u64, Selector)> = Vec::new();
        for (source, state) in self.sources.iter().enumerate() {
            if let Some(state) = state {
                all.extend(state.posted.iter().map(|p| {
                    let sel = Selector {
                        source: Some(source as u32),
                        tag: p.tag,
                    };
                    (p.stamp, sel)
                }));
            }
        }
        all.extend(self.wildcard.iter().map(|p| {
            let sel = Selector {
                source: None,
                tag: p.tag,
            };
            (p.stamp, sel)
        }));
        all.sort_by_key(|(stamp, _)| *stamp);
        all.into_iter().take(max).map(|(_, sel)| sel).collect()
    }

    /// Number of released messages waiting for a receive.
    pub fn unexpected_len(&self) -> usize {
        self.unexpected_count
    }

    /// Number of out-of-order arrivals waiting for their predecessors.
    pub fn parked_len(&self) -> usize {
        self.parked_count
    }

    fn state(&self, source: u32) -> Option<&SourceState<M>> {
        self.sources.get(source as usize)?.as_deref()
    }

    /// Callers have already checked `source < comm_size`.
    fn state_mut(&mut self, source: u32) -> &mut SourceState<M> {
        source_state(&mut self.sources, source)
    }

    /// Releases parked messages of `source` that have become in order.
    fn release_parked(&mut self, source: u32, matched: &mut Vec<(RecvId, Envelope, M)>) {
        loop {
            let state = self.state_mut(source);
            let next = state.released;
            match state.parked.first_key_value() {
                Some((&key, _)) if key == next => {}
                _ => return,
            }
            let Some((_, (env, msg))) = state.parked.pop_first() else {
                return;
            };
            state.released += 1;
            self.parked_count -= 1;
            self.release(env, msg, matched);
        }
    }

    /// Hands an in-order message to the earliest-posted matching receive, or queues it.
    fn release(&mut self, env: Envelope, msg: M, matched: &mut Vec<(RecvId, Envelope, M)>) {
        let stamp = self.next_release;
        self.next_release += 1;

        let wild = first_match(&self.wildcard, env.tag);
        let state = self.state_mut(env.source);
        let specific = first_match(&state.posted, env.tag);
        let posted = match (specific, wild) {
            (Some((sp, ss)), Some((_, ws))) if ss < ws => state.posted.remove(sp),
            (Some((sp, _)), None) => state.posted.remove(sp),
            (_, Some((wp, _))) => self.wildcard.remove(wp),
            (None, None) => None,
        };
        if let Some(p) = posted {
            self.posted_count -= 1;
            matched.push((p.id, env, msg));
            return;
        }

        let state = source_state(&mut self.sources, env.source);
        let was_empty = state.unexpected.is_empty();
        state.unexpected.push_back(Unexpected { env, msg, stamp });
        if was_empty {
            state.active_pos = self.active.len();
            self.active.push(env.source);
        }
        self.unexpected_count += 1;
    }

    /// Locates the earliest-released unexpected message matching `sel` as (source, position).
    fn find_unexpected(&self, sel: Selector) -> Option<(u32, usize)> {
        let first_in = |source: u32| -> Option<(usize, u64)> {
            let state = self.state(source)?;
            state
                .unexpected
                .iter()
                .enumerate()
                .find(|(_, u)| tag_matches(sel.tag, u.env.tag))
                .map(|(i, u)| (i, u.stamp))
        };
        match sel.source {
            Some(source) => first_in(source).map(|(pos, _)| (source, pos)),
            None => self
                .active
                .iter()
                .filter_map(|&source| first_in(source).map(|(pos, stamp)| (source, pos, stamp)))
                .min_by_key(|&(_, _, stamp)| stamp)
                .map(|(source, pos, _)| (source, pos)),
        }
    }

    fn remove_unexpected(&mut self, source: u32, pos: usize) -> Option<Unexpected<M>> {
        let state = self.sources.get_mut(source as usize)?.as_mut()?;
        let u = state.unexpected.remove(pos)?;
        self.unexpected_count -= 1;
        if state.unexpected.is_empty() {
            let slot = state.active_pos;
            state.active_pos = NOT_ACTIVE;
            self.deactivate(slot);
        }
        Some(u)
    }

    /// Drops entry `slot` of the active list, fixing up the index of the entry moved into it.
    fn deactivate(&mut self, slot: usize) {
        if slot >= self.active.len() {
            return;
        }
        self.active.swap_remove(slot);
        if let Some(&moved) = self.active.get(slot) {
            if let Some(Some(state)) = self.sources.get_mut(moved as usize) {
                state.active_pos = slot;
            }
        }
    }
}

/// Per-source state, created on first use; a free function so callers can keep borrowing
/// the engine's other fields. Callers have already checked the source against the
/// communicator size, which bounds the growth. Inlined (every posted receive and every
/// searched arrival looks its source up here), with the creation out of line.
#[inline]
fn source_state<M>(
    sources: &mut Vec<Option<Box<SourceState<M>>>>,
    source: u32,
) -> &mut SourceState<M> {
    let i = source as usize;
    if sources.get(i).is_none_or(Option::is_none) {
        create_source_state(sources, i);
    }
    sources[i].as_deref_mut().expect("created above")
}

/// The first message or receive of source `i`: its state, the vector grown to cover it.
#[cold]
fn create_source_state<M>(sources: &mut Vec<Option<Box<SourceState<M>>>>, i: usize) {
    if i >= sources.len() {
        sources.resize_with(i + 1, || None);
    }
    sources[i].get_or_insert_with(|| Box::new(SourceState::new()));
}

/// Position and posting stamp of the first receive in `q` accepting `tag`; the queue is in
/// posting order, so the first hit is also the earliest posted.
#[inline]
fn first_match(q: &VecDeque<Posted>, tag: i32) -> Option<(usize, u64)> {
    q.iter()
        .enumerate()
        .find(|(_, p)| tag_matches(p.tag, tag))
        .map(|(i, p)| (i, p.stamp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(source: u32, tag: i32, seq: u16) -> Envelope {
        Envelope { source, tag, seq }
    }

    fn sel(source: Option<u32>, tag: Option<i32>) -> Selector {
        Selector { source, tag }
    }

    type Matched = Vec<(RecvId, Envelope, u64)>;

    fn arrive(e: &mut MatchEngine<u64>, en: Envelope, msg: u64) -> Matched {
        let mut out = Vec::new();
        e.arrive(en, msg, &mut out).expect("arrival accepted");
        out
    }

    #[test]
    fn fast_path_agrees_with_arrive() {
        let mut e: MatchEngine<u64> = MatchEngine::new(2);
        assert_eq!(e.post(RecvId(1), sel(Some(0), Some(5))), None);
        assert_eq!(e.post(RecvId(2), sel(None, None)), None);
        // In order, a specific receive posted first: taken without a payload.
        assert_eq!(e.match_in_order(env(0, 5, 0)), Ok(Some(RecvId(1))));
        // In order, only the wildcard matches.
        assert_eq!(e.match_in_order(env(0, 7, 1)), Ok(Some(RecvId(2))));
        // Out of order: nothing happens, `arrive` parks it.
        assert_eq!(e.match_in_order(env(0, 7, 3)), Ok(None));
        let mut m = Vec::new();
        e.arrive(env(0, 7, 3), 30, &mut m).unwrap();
        assert_eq!(e.parked_len(), 1);
        // In order but something is parked behind it: the slow path must release both.
        assert_eq!(e.match_in_order(env(0, 7, 2)), Ok(None));
        e.arrive(env(0, 7, 2), 20, &mut m).unwrap();
        assert_eq!((e.unexpected_len(), e.parked_len()), (2, 0));
        // No matching receive: None, and the message still arrives normally afterwards.
        assert_eq!(e.match_in_order(env(1, 9, 0)), Ok(None));
        e.arrive(env(1, 9, 0), 90, &mut m).unwrap();
        assert_eq!(e.take(sel(Some(1), Some(9))).map(|(_, v)| v), Some(90));
        assert!(e.match_in_order(env(5, 0, 0)).is_err());
    }

    #[test]
    fn in_order_specific_match() {
        let mut e = MatchEngine::new(4);
        assert!(e.post(RecvId(1), sel(Some(2), Some(7))).is_none());
        assert!(e.post(RecvId(2), sel(Some(2), Some(7))).is_none());
        assert_eq!(e.posted_len(), 2);
        let mut out = vec![(RecvId(99), env(0, 0, 0), 0)];
        e.arrive(env(2, 7, 0), 10, &mut out).unwrap();
        e.arrive(env(2, 7, 1), 11, &mut out).unwrap();
        assert_eq!(
            out,
            vec![
                (RecvId(99), env(0, 0, 0), 0),
                (RecvId(1), env(2, 7, 0), 10),
                (RecvId(2), env(2, 7, 1), 11),
            ],
            "matched must be appended to"
        );
        assert_eq!(
            (e.posted_len(), e.unexpected_len(), e.parked_len()),
            (0, 0, 0)
        );
    }

    #[test]
    fn wildcard_source_and_tag() {
        let mut e = MatchEngine::new(3);
        e.post(RecvId(1), sel(None, Some(5)));
        e.post(RecvId(2), sel(Some(1), None));
        e.post(RecvId(3), sel(None, None));
        // Tag 5 from rank 1: RecvId(1) was posted first and matches.
        assert_eq!(
            arrive(&mut e, env(1, 5, 0), 1),
            vec![(RecvId(1), env(1, 5, 0), 1)]
        );
        // Tag 6 from rank 1: RecvId(2) (specific source, any tag).
        assert_eq!(
            arrive(&mut e, env(1, 6, 1), 2),
            vec![(RecvId(2), env(1, 6, 1), 2)]
        );
        // Tag 0 from rank 2: only the fully wild receive remains.
        assert_eq!(
            arrive(&mut e, env(2, 0, 0), 3),
            vec![(RecvId(3), env(2, 0, 0), 3)]
        );

        // Unexpected first, then wildcard posts pick the earliest released across sources.
        assert!(arrive(&mut e, env(2, 4, 1), 4).is_empty());
        assert!(arrive(&mut e, env(0, 4, 0), 5).is_empty());
        assert!(arrive(&mut e, env(1, 9, 2), 6).is_empty());
        assert_eq!(e.post(RecvId(4), sel(None, None)), Some((env(2, 4, 1), 4)));
        assert_eq!(
            e.post(RecvId(5), sel(None, Some(9))),
            Some((env(1, 9, 2), 6))
        );
        assert_eq!(
            e.post(RecvId(6), sel(Some(0), None)),
            Some((env(0, 4, 0), 5))
        );
        assert_eq!(e.unexpected_len(), 0);
        assert_eq!(e.posted_len(), 0);
    }

    #[test]
    fn any_tag_skips_negative_tags() {
        let any_tag = sel(Some(0), None);
        let wild = sel(None, None);
        assert!(!any_tag.matches(&env(0, -1, 0)));
        assert!(!wild.matches(&env(0, -1, 0)));
        assert!(sel(Some(0), Some(-1)).matches(&env(0, -1, 0)));
        assert!(!sel(Some(1), Some(-1)).matches(&env(0, -1, 0)));

        let mut e = MatchEngine::new(1);
        e.post(RecvId(1), any_tag);
        e.post(RecvId(2), wild);
        assert!(arrive(&mut e, env(0, -3, 0), 1).is_empty());
        assert_eq!(e.unexpected_len(), 1);
        assert!(e.probe(wild).is_none());
        assert!(e.take(any_tag).is_none());
        assert_eq!(
            e.post(RecvId(3), sel(None, Some(-3))),
            Some((env(0, -3, 0), 1))
        );
        assert_eq!(e.posted_len(), 2);
        e.post(RecvId(4), sel(Some(0), Some(-3)));
        assert_eq!(
            arrive(&mut e, env(0, -3, 1), 2),
            vec![(RecvId(4), env(0, -3, 1), 2)]
        );
    }

    #[test]
    fn posting_order_across_wildcard_and_specific() {
        let mut e = MatchEngine::new(2);
        e.post(RecvId(1), sel(None, None));
        e.post(RecvId(2), sel(Some(1), Some(3)));
        assert_eq!(
            arrive(&mut e, env(1, 3, 0), 1),
            vec![(RecvId(1), env(1, 3, 0), 1)]
        );
        assert_eq!(
            arrive(&mut e, env(1, 3, 1), 2),
            vec![(RecvId(2), env(1, 3, 1), 2)]
        );

        // And the other way round: specific first wins over a later wildcard.
        e.post(RecvId(3), sel(Some(1), Some(3)));
        e.post(RecvId(4), sel(None, None));
        assert_eq!(
            arrive(&mut e, env(1, 3, 2), 3),
            vec![(RecvId(3), env(1, 3, 2), 3)]
        );
        assert_eq!(
            arrive(&mut e, env(1, 3, 3), 4),
            vec![(RecvId(4), env(1, 3, 3), 4)]
        );
    }

    #[test]
    fn out_of_order_arrivals_parked_then_released_in_order() {
        let mut e = MatchEngine::new(2);
        for i in 0..4 {
            e.post(RecvId(i), sel(Some(1), None));
        }
        assert!(arrive(&mut e, env(1, 0, 2), 2).is_empty());
        assert!(arrive(&mut e, env(1, 0, 3), 3).is_empty());
        assert!(arrive(&mut e, env(1, 0, 1), 1).is_empty());
        assert_eq!(e.parked_len(), 3);
        assert_eq!(e.posted_len(), 4);
        let out = arrive(&mut e, env(1, 0, 0), 0);
        let got: Vec<(u64, u16, u64)> = out.iter().map(|(r, v, m)| (r.0, v.seq, *m)).collect();
        assert_eq!(got, vec![(0, 0, 0), (1, 1, 1), (2, 2, 2), (3, 3, 3)]);
        assert_eq!(e.parked_len(), 0);

        // Parked messages that find no receive become unexpected in sequence order.
        assert!(arrive(&mut e, env(1, 0, 5), 5).is_empty());
        assert!(arrive(&mut e, env(1, 0, 4), 4).is_empty());
        assert_eq!(e.unexpected_len(), 2);
        assert_eq!(e.take(sel(None, None)), Some((env(1, 0, 4), 4)));
        assert_eq!(e.take(sel(None, None)), Some((env(1, 0, 5), 5)));
    }

    #[test]
    fn wrap_around_delivers_in_sequence_order() {
        const N: u64 = 70_000;
        let mut e = MatchEngine::new(1);
        let mut out = Vec::new();
        let mut next_post = 0u64;
        // Deliver in reversed pairs (1,0,3,2,...) so parking straddles the 16-bit wrap.
        let mut i = 0u64;
        while i < N {
            for k in [i + 1, i] {
                if k < N {
                    e.post(RecvId(next_post), sel(Some(0), None));
                    next_post += 1;
                    e.arrive(env(0, 1, k as u16), k, &mut out).unwrap();
                }
            }
            i += 2;
        }
        assert_eq!(out.len() as u64, N);
        for (k, (id, en, msg)) in out.iter().enumerate() {
            assert_eq!(*msg, k as u64);
            assert_eq!(en.seq, k as u16);
            assert_eq!(id.0, k as u64);
        }
        assert_eq!(
            (e.posted_len(), e.unexpected_len(), e.parked_len()),
            (0, 0, 0)
        );
        // After wrapping, an old sequence number is a duplicate again.
        let mut sink = Vec::new();
        let behind = (N as u16).wrapping_sub(1);
        assert_eq!(
            e.arrive(env(0, 1, behind), 0, &mut sink),
            Err(MatchError::DuplicateSequence {
                source: 0,
                seq: behind
            })
        );
    }

    #[test]
    fn cancel() {
        let mut e = MatchEngine::new(2);
        e.post(RecvId(1), sel(Some(0), None));
        e.post(RecvId(2), sel(None, None));
        e.post(RecvId(3), sel(Some(0), None));
        e.post(RecvId(4), sel(Some(9), None)); // Outside the communicator: never matches.
        assert_eq!(e.posted_len(), 4);
        assert!(e.cancel(RecvId(1)));
        assert!(!e.cancel(RecvId(1)));
        assert!(!e.cancel(RecvId(77)));
        assert_eq!(
            arrive(&mut e, env(0, 0, 0), 1),
            vec![(RecvId(2), env(0, 0, 0), 1)]
        );
        assert!(!e.cancel(RecvId(2)), "already matched");
        assert!(e.cancel(RecvId(4)));
        assert!(e.cancel(RecvId(3)));
        assert_eq!(e.posted_len(), 0);
        assert!(arrive(&mut e, env(0, 0, 1), 2).is_empty());
        assert_eq!(e.unexpected_len(), 1);

        // With a duplicated id, the earliest posted one goes first.
        e.post(RecvId(5), sel(None, Some(8)));
        e.post(RecvId(5), sel(Some(1), Some(8)));
        assert!(e.cancel(RecvId(5)));
        assert_eq!(
            arrive(&mut e, env(1, 8, 0), 3),
            vec![(RecvId(5), env(1, 8, 0), 3)]
        );
        assert_eq!(e.posted_len(), 0);
    }

    #[test]
    fn probe_does_not_remove_take_does() {
        let mut e = MatchEngine::new(2);
        assert!(e.probe(sel(None, None)).is_none());
        arrive(&mut e, env(1, 3, 0), 30);
        arrive(&mut e, env(0, 4, 0), 40);
        assert_eq!(e.probe(sel(None, None)), Some((env(1, 3, 0), &30)));
        assert_eq!(e.probe(sel(None, None)), Some((env(1, 3, 0), &30)));
        assert_eq!(e.probe(sel(None, Some(4))), Some((env(0, 4, 0), &40)));
        assert_eq!(e.probe(sel(Some(1), Some(4))), None);
        assert_eq!(e.unexpected_len(), 2);
        assert_eq!(e.take(sel(Some(0), None)), Some((env(0, 4, 0), 40)));
        assert_eq!(e.unexpected_len(), 1);
        assert_eq!(e.probe(sel(Some(0), None)), None);
        assert_eq!(e.take(sel(None, None)), Some((env(1, 3, 0), 30)));
        assert_eq!(e.take(sel(None, None)), None);
        assert_eq!(e.unexpected_len(), 0);
    }

    #[test]
    fn duplicate_and_out_of_range_errors() {
        let mut e: MatchEngine<u64> = MatchEngine::new(2);
        let mut out = Vec::new();
        let err = e.arrive(env(2, 0, 0), 0, &mut out).unwrap_err();
        assert_eq!(err, MatchError::SourceOutOfRange { source: 2, size: 2 });
        let text = err.to_string();
        assert!(
            text.contains("source 2") && text.contains("size 2"),
            "{text}"
        );
        assert!(e
            .arrive(env(u32::MAX, 0, 0), 0, &mut out)
            .is_err_and(|x| matches!(x, MatchError::SourceOutOfRange { .. })));

        e.arrive(env(0, 0, 0), 0, &mut out).unwrap();
        let err = e.arrive(env(0, 0, 0), 0, &mut out).unwrap_err();
        assert_eq!(err, MatchError::DuplicateSequence { source: 0, seq: 0 });
        assert!(err.to_string().contains("source 0"));
        e.arrive(env(0, 0, 5), 5, &mut out).unwrap();
        assert_eq!(
            e.arrive(env(0, 0, 5), 5, &mut out),
            Err(MatchError::DuplicateSequence { source: 0, seq: 5 })
        );
        // Exactly half the sequence space behind counts as behind.
        assert_eq!(
            e.arrive(env(0, 0, 1 + 32768), 0, &mut out),
            Err(MatchError::DuplicateSequence {
                source: 0,
                seq: 32769
            })
        );
        // Farthest legitimate look-ahead is accepted.
        e.arrive(env(0, 0, 1 + 32767), 0, &mut out).unwrap();
        assert_eq!(e.parked_len(), 2);
        assert_eq!(e.unexpected_len(), 1);
        assert!(out.is_empty());
    }

    #[test]
    fn too_many_parked() {
        let mut e: MatchEngine<u64> = MatchEngine::with_park_limit(1, 2);
        let mut out = Vec::new();
        e.arrive(env(0, 0, 1), 1, &mut out).unwrap();
        e.arrive(env(0, 0, 2), 2, &mut out).unwrap();
        let err = e.arrive(env(0, 0, 3), 3, &mut out).unwrap_err();
        assert_eq!(
            err,
            MatchError::TooManyParked {
                source: 0,
                limit: 2
            }
        );
        assert!(err.to_string().contains("source 0"));
        e.arrive(env(0, 0, 0), 0, &mut out).unwrap();
        assert_eq!(e.unexpected_len(), 3);
        e.arrive(env(0, 0, 3), 3, &mut out).unwrap();
        assert_eq!(e.unexpected_len(), 4);
        assert_eq!(MatchEngine::<u64>::new(1).park_limit, 32767);
    }

    // ---- Property test against a naive reference model ----

    /// Linear-scan model of the documented semantics.
    struct Model {
        comm_size: u32,
        park_limit: usize,
        expected: HashMap<u32, u16>,
        parked: HashMap<u32, HashMap<u16, (Envelope, u64)>>,
        unexpected: Vec<(Envelope, u64)>,
        posted: Vec<(RecvId, Selector)>,
    }

    /// Independent restatement of the selector rule, so the model does not share the code
    /// under test.
    fn model_matches(sel: &Selector, env: &Envelope) -> bool {
        let source_ok = match sel.source {
            None => true,
            Some(s) => s == env.source,
        };
        let tag_ok = match sel.tag {
            None => env.tag >= 0,
            Some(t) => t == env.tag,
        };
        source_ok && tag_ok
    }

    impl Model {
        fn new(comm_size: u32, park_limit: usize) -> Self {
            Model {
                comm_size,
                park_limit,
                expected: HashMap::new(),
                parked: HashMap::new(),
                unexpected: Vec::new(),
                posted: Vec::new(),
            }
        }

        fn release(&mut self, env: Envelope, msg: u64, out: &mut Matched) {
            match self.posted.iter().position(|(_, s)| model_matches(s, &env)) {
                Some(i) => {
                    let (id, _) = self.posted.remove(i);
                    out.push((id, env, msg));
                }
                None => self.unexpected.push((env, msg)),
            }
        }

        fn arrive(&mut self, env: Envelope, msg: u64, out: &mut Matched) -> Result<(), MatchError> {
            if env.source >= self.comm_size {
                return Err(MatchError::SourceOutOfRange {
                    source: env.source,
                    size: self.comm_size,
                });
            }
            let expected = *self.expected.get(&env.source).unwrap_or(&0);
            let ahead = env.seq.wrapping_sub(expected) as i16;
            let parked = self.parked.entry(env.source).or_default();
            if ahead > 0 {
                if parked.contains_key(&env.seq) {
                    return Err(MatchError::DuplicateSequence {
                        source: env.source,
                        seq: env.seq,
                    });
                }
                if parked.len() >= self.park_limit {
                    return Err(MatchError::TooManyParked {
                        source: env.source,
                        limit: self.park_limit,
                    });
                }
                parked.insert(env.seq, (env, msg));
                return Ok(());
            }
            if ahead < 0 {
                return Err(MatchError::DuplicateSequence {
                    source: env.source,
                    seq: env.seq,
                });
            }
            let mut next = expected;
            let mut current = Some((env, msg));
            while let Some((en, m)) = current {
                self.release(en, m, out);
                next = next.wrapping_add(1);
                current = self
                    .parked
                    .get_mut(&env.source)
                    .and_then(|p| p.remove(&next));
            }
            self.expected.insert(env.source, next);
            Ok(())
        }

        fn probe(&self, sel: Selector) -> Option<(Envelope, u64)> {
            self.unexpected
                .iter()
                .find(|(e, _)| model_matches(&sel, e))
                .copied()
        }

        fn take(&mut self, sel: Selector) -> Option<(Envelope, u64)> {
            let i = self
                .unexpected
                .iter()
                .position(|(e, _)| model_matches(&sel, e))?;
            Some(self.unexpected.remove(i))
        }

        fn post(&mut self, id: RecvId, sel: Selector) -> Option<(Envelope, u64)> {
            let got = self.take(sel);
            if got.is_none() {
                self.posted.push((id, sel));
            }
            got
        }

        fn cancel(&mut self, id: RecvId) -> bool {
            match self.posted.iter().position(|(r, _)| *r == id) {
                Some(i) => {
                    self.posted.remove(i);
                    true
                }
                None => false,
            }
        }

        fn parked_len(&self) -> usize {
            self.parked.values().map(HashMap::len).sum()
        }
    }

    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Self {
            // Xorshift must not start at zero.
            Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
        }
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            self.0 = x;
            x
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// One sender: messages generated in sequence order but handed out from a small window in
    /// random order, which is the reordering a multi-rail transport produces.
    #[derive(Default)]
    struct Sender {
        next_seq: u16,
        window: Vec<Envelope>,
        sent: Vec<Envelope>,
    }

    const WINDOW: usize = 8;

    fn random_selector(rng: &mut Rng, sources: u32) -> Selector {
        let source = match rng.below(8) {
            0..=2 => None,
            // Occasionally name a rank outside the communicator.
            3 => Some(sources + rng.below(2) as u32),
            _ => Some(rng.below(u64::from(sources)) as u32),
        };
        let tag = match rng.below(3) {
            0 => None,
            _ => Some(rng.below(6) as i32 - 2),
        };
        Selector { source, tag }
    }

    fn run_scenario(seed: u64) {
        let mut rng = Rng::new(seed);
        let sources = 1 + rng.below(5) as u32;
        let park_limit = if rng.below(4) == 0 {
            1 + rng.below(4) as usize
        } else {
            PARK_LIMIT
        };
        let mut engine: MatchEngine<u64> = MatchEngine::with_park_limit(sources, park_limit);
        let mut model = Model::new(sources, park_limit);
        let mut senders: Vec<Sender> = (0..sources).map(|_| Sender::default()).collect();
        let mut outstanding: Vec<RecvId> = Vec::new();
        let mut next_id = 0u64;
        let mut next_msg = 0u64;

        for op in 0..300 {
            let ctx = format!("seed {seed} op {op}");
            match rng.below(100) {
                0..=29 => {
                    let s = random_selector(&mut rng, sources);
                    // Rarely reuse an id, to exercise duplicate-id cancel.
                    let id = if rng.below(20) == 0 && next_id > 0 {
                        RecvId(rng.below(next_id))
                    } else {
                        next_id += 1;
                        RecvId(next_id - 1)
                    };
                    let got = engine.post(id, s);
                    let want = model.post(id, s);
                    assert_eq!(got, want, "{ctx}: post {id:?} {s:?}");
                    if got.is_none() {
                        outstanding.push(id);
                    }
                }
                30..=64 => {
                    let src = rng.below(u64::from(sources)) as usize;
                    let Some(sender) = senders.get_mut(src) else {
                        panic!("{ctx}: bad sender index");
                    };
                    while sender.window.len() < WINDOW {
                        let tag = rng.below(6) as i32 - 2;
                        sender.window.push(env(src as u32, tag, sender.next_seq));
                        sender.next_seq = sender.next_seq.wrapping_add(1);
                    }
                    // Favour the oldest message so that parked runs drain regularly.
                    let pick = if rng.below(2) == 0 {
                        0
                    } else {
                        rng.below(WINDOW as u64) as usize
                    };
                    let en = sender.window.remove(pick);
                    next_msg += 1;
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let r1 = engine.arrive(en, next_msg, &mut got);
                    let r2 = model.arrive(en, next_msg, &mut want);
                    assert_eq!(r1, r2, "{ctx}: arrive {en:?} result");
                    assert_eq!(got, want, "{ctx}: arrive {en:?} matches");
                    match r1 {
                        // The sender retransmits later, as a flow-controlled peer would.
                        Err(MatchError::TooManyParked { .. }) => sender.window.insert(0, en),
                        _ => sender.sent.push(en),
                    }
                    for (id, _, _) in &got {
                        if let Some(i) = outstanding.iter().position(|o| o == id) {
                            outstanding.remove(i);
                        }
                    }
                }
                65..=74 => {
                    let s = random_selector(&mut rng, sources);
                    let got = engine.probe(s).map(|(e, m)| (e, *m));
                    assert_eq!(got, model.probe(s), "{ctx}: probe {s:?}");
                }
                75..=84 => {
                    let s = random_selector(&mut rng, sources);
                    assert_eq!(engine.take(s), model.take(s), "{ctx}: take {s:?}");
                }
                85..=94 => {
                    let id = if outstanding.is_empty() || rng.below(5) == 0 {
                        RecvId(rng.below(next_id + 2))
                    } else {
                        let i = rng.below(outstanding.len() as u64) as usize;
                        outstanding.get(i).copied().unwrap_or(RecvId(0))
                    };
                    let got = engine.cancel(id);
                    assert_eq!(got, model.cancel(id), "{ctx}: cancel {id:?}");
                    if got {
                        if let Some(i) = outstanding.iter().position(|o| *o == id) {
                            outstanding.remove(i);
                        }
                    }
                }
                _ => {
                    // A misbehaving peer: replayed message or a rank outside the communicator.
                    let src = rng.below(u64::from(sources) + 1) as u32;
                    let replay = senders
                        .get(src as usize)
                        .and_then(|s| s.sent.last().copied());
                    let en = match replay {
                        Some(e) if rng.below(2) == 0 => e,
                        _ => env(src + sources, 0, rng.below(4) as u16),
                    };
                    let (mut got, mut want) = (Vec::new(), Vec::new());
                    let r1 = engine.arrive(en, u64::MAX, &mut got);
                    let r2 = model.arrive(en, u64::MAX, &mut want);
                    assert!(r1.is_err(), "{ctx}: bad arrival {en:?} accepted");
                    assert_eq!(r1, r2, "{ctx}: bad arrival {en:?}");
                    assert!(
                        got.is_empty() && want.is_empty(),
                        "{ctx}: bad arrival matched"
                    );
                }
            }
            assert_eq!(engine.posted_len(), model.posted.len(), "{ctx}: posted_len");
            assert_eq!(
                engine.unexpected_len(),
                model.unexpected.len(),
                "{ctx}: unexpected_len"
            );
            assert_eq!(engine.parked_len(), model.parked_len(), "{ctx}: parked_len");
            let any = sel(None, None);
            assert_eq!(
                engine.probe(any).map(|(e, m)| (e, *m)),
                model.probe(any),
                "{ctx}: probe any"
            );
        }
    }

    #[test]
    fn matches_reference_model() {
        for seed in 1..=500 {
            run_scenario(seed);
        }
    }
}
