//! The interface between the messaging layer's collectives and a shared-memory collective
//! engine: a segment that every member of a node-local communicator maps, with barrier,
//! broadcast, gather and reduction rounds on it.
//!
//! The messaging layer decides when a communicator gets a segment and carries the set-up
//! exchange (the creator's rendezvous name, every member's reachability card) over its own
//! point-to-point path; the engine behind [`NodeCollectives`] owns the memory, its layout and
//! the single-copy machinery. Buffers are bytes and reductions a callback, so the engine never
//! knows an MPI datatype. This module owns only the interface; it must never know a layout.

use crate::params::Params;

/// The shape of a new segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentGeometry {
    /// Members.
    pub members: usize,
    /// Bytes per pipelined fragment (a multiple of 64).
    pub fragment: usize,
    /// Alternating buffer sets (>= 2).
    pub sets: usize,
    /// Barrier tree degree (>= 2).
    pub degree: usize,
}

impl SegmentGeometry {
    /// Most bytes the fragment slots of one segment take, over every set and member.
    pub const SLOTS_BUDGET: usize = 4 << 20;
    /// Least fragment the budget lowers a requested one to.
    pub const FRAGMENT_FLOOR: usize = 64 << 10;

    /// The fragment of a segment of `members` members and `sets` sets when `requested`
    /// bytes were asked for (`coll_shm_fragment_size`): as asked, lowered in large groups so
    /// that the slots stay within [`Self::SLOTS_BUDGET`], but never below
    /// [`Self::FRAGMENT_FLOOR`] for that (a smaller request stays as it is); a multiple of
    /// 64. Why large fragments in small groups: a pipelined broadcast or sliced reduction
    /// meets at a barrier per fragment, which on oversubscribed cores costs a turn of the
    /// scheduler (4 ranks on 2 cores, `osu_bcast` 1 MiB 236-240 us with 64 KiB fragments,
    /// 144-157 with 256 KiB; `osu_allreduce` 693-778 against 295-396; 8 ranks `osu_bcast`
    /// 334-403 against 214-220), and a 2-member stream of a whole 1 MiB operand then fits
    /// its ring (`osu_reduce` 1 MiB 98-116 against 60-65 us).
    pub fn fragment_within_budget(requested: usize, members: usize, sets: usize) -> usize {
        let fitting = Self::SLOTS_BUDGET / members.saturating_mul(sets).max(1) / 64 * 64;
        (requested.div_ceil(64) * 64).min(fitting.max(Self::FRAGMENT_FLOOR))
    }
}

/// Combines `input` into `inout` element-wise (one reduction step).
pub type Apply<'a> = &'a mut dyn FnMut(&[u8], &mut [u8]);

/// The posted rounds of a segment: a nonblocking collective publishes its block when it starts
/// and completes once every member's is there.
pub trait PostedRounds: Send {
    /// Members.
    fn members(&self) -> usize;
    /// Whether a round carries blocks of `len` bytes in this group (the limits of
    /// [`NodeSegment::flat`]).
    fn fits(&self, len: usize) -> bool;
    /// Draws the number of the next round. Every member draws in the order it starts its
    /// nonblocking collectives, so all draw the same number for the same collective.
    fn draw(&mut self) -> u64;
    /// Publishes this member's `payload` for round `g`; false, publishing nothing, while
    /// another member still reads the round that used the same line (call again later;
    /// never wait for it).
    fn publish(&mut self, g: u64, payload: &[u8]) -> bool;
    /// Whether every member has published round `g`.
    fn arrived(&self, g: u64) -> bool;
    /// Member `r`'s first `len` bytes of round `g`, between [`PostedRounds::arrived`] and
    /// [`PostedRounds::finish`].
    fn payload(&self, g: u64, r: usize, len: usize) -> &[u8];
    /// This member is done with round `g`; rounds may finish in any order.
    fn finish(&mut self, g: u64);
    /// Whether an allreduce of `len` bytes can run as a shared round: the members publish
    /// their buffers' addresses instead of a payload and whoever is in the library reduces
    /// for all ([`PostedRounds::publish_buffers`], [`PostedRounds::reduce_shared`]). The same
    /// answer on every member. None by default.
    fn shares(&self, _len: usize) -> bool {
        false
    }
    /// Publishes this member's contribution and result buffer addresses for shared round `g`
    /// (the same address when in place) and the bytes of its elements; false as
    /// [`PostedRounds::publish`]. The buffers must stay valid until
    /// [`PostedRounds::reduce_shared`] answers true.
    fn publish_buffers(&mut self, g: u64, _send: u64, _recv: u64, _elem: usize) -> bool {
        panic!("PostedRounds::publish_buffers (round {g}): this engine has no shared rounds (shares() is false)")
    }
    /// Works on shared round `g` (every member arrived) until no chunk is left to claim:
    /// an allreduce of `len` bytes, `send` this member's contribution
    /// (`None`: in place, in `recv`). True once the whole round is done, by anyone; false
    /// while others still work (call again). Errors come only once the round is done.
    fn reduce_shared(
        &mut self,
        g: u64,
        _len: usize,
        _send: Option<&[u8]>,
        _recv: &mut [u8],
        _apply: Apply<'_>,
    ) -> Result<bool, String> {
        Err(format!(
            "PostedRounds::reduce_shared (round {g}): this engine has no shared rounds"
        ))
    }
}

/// A shared-memory collective engine, found through [`crate::component::Component`].
pub trait NodeCollectives: Sync {
    /// Creates a segment (by the communicator's lowest rank, member 0) under a file name of
    /// one path component; returns the name the other members attach by.
    fn create(
        &self,
        params: &Params,
        file_name: &str,
        geometry: SegmentGeometry,
        spin_yield: bool,
    ) -> Result<(String, Box<dyn NodeSegment>), String>;

    /// Attaches member `me` of `members` to the segment created under `rendezvous`, checking
    /// that its geometry fits the communicator.
    fn attach(
        &self,
        rendezvous: &str,
        members: usize,
        me: usize,
        spin_yield: bool,
    ) -> Result<Box<dyn NodeSegment>, String>;

    /// Removes the rendezvous name once every member attached (the mapping stays).
    fn unlink(&self, rendezvous: &str);

    /// What peers need to test whether they can copy from this process's memory.
    fn reach_card(&self) -> Vec<u8>;

    /// Whether this process can copy from the memory of the process that sent `card`.
    fn can_reach(&self, card: &[u8]) -> bool;

    /// Whether the parameters allow single-copy algorithms.
    fn single_copy_allowed(&self, params: &Params) -> bool;
}

/// What a segment operation tells its [`StallHook`] about a long wait for the other members.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stall {
    /// The wait has lasted a few thousand polls.
    Began,
    /// It still lasts (again every few thousand polls).
    Continues,
    /// A wait that had begun to stall is over.
    Ended,
}

/// Called by a segment operation about its long waits. The messaging layer uses it to keep
/// the rank's wait record (hang reports).
pub type StallHook = fn(Stall);

/// Called by a segment operation every few polls of a wait, so that the waiting process still
/// serves its peers (one-sided operations that target it, messages they wait for). The
/// messaging layer sets it; it must never start a segment operation itself.
pub type PollHook = fn();

/// One member's handle on a communicator's segment. Every member calls the same operations in
/// the same order with the same sizes (MPI's collective rule).
pub trait NodeSegment: Send {
    /// Members.
    fn members(&self) -> usize;
    /// Sets what a long wait in this segment calls (see [`StallHook`]); none by default.
    fn set_stall_hook(&mut self, _hook: StallHook) {}
    /// Sets what a wait in this segment calls every few polls (see [`PollHook`]); none by
    /// default.
    fn set_poll_hook(&mut self, _hook: PollHook) {}
    /// Whether blocks of `len` bytes take the one-round path through the inline lines.
    fn flat(&self, len: usize) -> bool;
    /// A barrier in one round.
    fn flat_barrier(&mut self);
    /// A broadcast of a small `buf` in one round.
    fn flat_bcast(&mut self, root: usize, buf: &mut [u8]);
    /// An allgatherv of small blocks in one round.
    fn flat_allgatherv(&mut self, send: &[u8], recv: &mut [u8], counts: &[usize], displs: &[usize]);
    /// An allgather of equal small blocks in one round: `recv` gets every member's `send`
    /// block in rank order (its own included; `send` must pass [`NodeSegment::flat`]).
    fn flat_allgather(&mut self, send: &[u8], recv: &mut [u8]);
    /// An alltoall of small blocks in one round: `send` holds one `block`-byte block per
    /// member, `recv` gets block `me` of every member's `send` (the whole `send` must pass
    /// [`NodeSegment::flat`]).
    fn flat_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize);
    /// An allgatherv of blocks of at most a fragment each through the segment's fragment
    /// slots (`recv` holds this member's own block already); false, nothing done, when a block
    /// is larger (the same answer on every member).
    fn fragment_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> bool;
    /// An allgatherv of blocks of any size through the fragment slots, a fragment of every
    /// block per round (arguments as [`NodeSegment::fragment_allgatherv`]).
    fn pipelined_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    );
    /// An alltoall of blocks of any size through the fragment slots, in rounds of
    /// `fragment / members` bytes of every block; false, nothing done, in groups too large
    /// for it to win (the same answer on every member).
    fn pipelined_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) -> bool;
    /// An alltoall through the fragment slots when all of a member's `block`-byte blocks fit
    /// one slot; false, nothing done, otherwise (the same answer on every member).
    fn fragment_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) -> bool;
    /// A scatter of equal blocks of up to a fragment (and 16 KiB) through the fragment slots
    /// (arguments as [`NodeSegment::flat_scatter`]); false, nothing done, when the block is
    /// larger (the same answer on every member).
    fn fragment_scatter(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize)
        -> bool;
    /// A gather of equal blocks of up to a fragment through the fragment slots (arguments
    /// as [`NodeSegment::flat_gather`]); false, nothing done, when the block is larger.
    fn fragment_gather(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize) -> bool;
    /// A reduction of operands of up to 16 KiB (and a fragment; a rooted one in groups of 3
    /// to 16, up to a fragment) through the fragment slots in one round: every member that
    /// wants the result (`root`, or all when `None`) combines every operand itself, in rank
    /// order; false, nothing done, for longer operands (the same answer on every member).
    fn fragment_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: Apply<'_>,
    ) -> bool;
    /// A reduce between exactly two members, streamed through the segment's data slots (the
    /// other member copies each piece in, the root combines it out, in place where the rank
    /// order allows: the operation is `commutative` or the root is rank 1); false, nothing
    /// done, for other groups and short operands (the same answer on both members).
    fn pair_reduce(
        &mut self,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        commutative: bool,
        apply: Apply<'_>,
    ) -> bool;
    /// A scatter of small equal blocks in one round: `send` (at the root) holds one
    /// `block`-byte block per member, `recv` gets this member's (the root's own unless `recv`
    /// is empty, in place); the other members' blocks together (`block` × (members - 1))
    /// must pass [`NodeSegment::flat`].
    fn flat_scatter(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize);
    /// A gather of small equal blocks in one round: the root's `recv` gets every member's
    /// `block`-byte `send` block in rank order (its own unless its `send` is empty, in
    /// place); one block must pass [`NodeSegment::flat`] (each member's is in its own line).
    fn flat_gather(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize);
    /// A reduction of a small block in one round (to `root`, or to all with `None`).
    fn flat_reduce(&mut self, root: Option<usize>, send: &[u8], recv: &mut [u8], apply: Apply<'_>);
    /// A small reduction of a commutative operation over the segment's barrier tree (to
    /// `root`, or to all with `None`) in groups too large for [`NodeSegment::flat`]; `false`,
    /// with nothing done, where it does not apply (the same answer on every member).
    fn tree_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: Apply<'_>,
    ) -> bool;
    /// The handle on the segment's posted rounds (call once per segment): the nonblocking
    /// form of the one-round exchange, through lines of its own, usable while a blocking
    /// operation holds the segment.
    fn posted_rounds(&self) -> Box<dyn PostedRounds>;
    /// Turns single copy on (every member must be able to reach every other).
    fn enable_single_copy(&mut self, ok: bool);
    /// Whether `len` bytes take the single-copy path.
    fn single_copy(&self, len: usize) -> bool;
    /// Whether a reduction, allgather or alltoall of `len` bytes in all between exactly two
    /// members takes the single-copy path where [`NodeSegment::single_copy`] would not yet
    /// (the same answer on every member).
    fn pair_single_copy(&self, len: usize) -> bool;
    /// Whether a reduction of `len` bytes takes the single-copy path: a reduce
    /// (`everyone` false) or an allreduce (the same answer on every member).
    fn single_copy_reduction(&self, len: usize, everyone: bool) -> bool;
    /// A reduction reading peers' buffers directly.
    fn single_copy_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        apply: Apply<'_>,
    ) -> Result<(), String>;
    /// A broadcast reading the root's buffer directly.
    fn single_copy_bcast(&mut self, root: usize, buf: &mut [u8]) -> Result<(), String>;
    /// An allgatherv reading peers' blocks directly (`recv` holds this member's own already).
    fn single_copy_allgather(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), String>;
    /// An alltoall reading block `me` of every peer's send buffer directly.
    fn single_copy_alltoall(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<(), String>;
    /// A gather (`gather` true: every member writes its `send` block into the root's `recv`)
    /// or a scatter (false: every member reads its block of the root's `send` into `recv`)
    /// straight from the program buffers; arguments as [`NodeSegment::flat_gather`] and
    /// [`NodeSegment::flat_scatter`] (empty at the root: in place). Ok(false), nothing done,
    /// where the messages or fragment slots are faster (the same answer on every member).
    fn single_copy_rooted(
        &mut self,
        gather: bool,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<bool, String>;
    /// The program's barrier (one flat round in small groups, the segment's tree in larger
    /// ones; where members yield, after a broadcast or scatter, two rounds through rank 0,
    /// which leaves first).
    fn barrier(&mut self);
    /// A pipelined broadcast through the segment's fragments.
    fn bcast(&mut self, root: usize, buf: &mut [u8]);
    /// A pipelined reduction through the segment's fragments.
    fn reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        apply: Apply<'_>,
    );
}

#[cfg(test)]
mod tests {
    use super::SegmentGeometry;

    /// Small groups get the fragment asked for; larger ones a smaller one, so that the slots
    /// stay within the budget, down to the floor; a request below the floor is kept.
    #[test]
    fn the_fragment_shrinks_with_the_group_down_to_the_floor() {
        let kib = |k: usize| k << 10;
        let f = SegmentGeometry::fragment_within_budget;
        assert_eq!(f(kib(256), 2, 2), kib(256));
        assert_eq!(f(kib(256), 8, 2), kib(256));
        assert_eq!(f(kib(256), 16, 2), kib(128));
        assert_eq!(f(kib(256), 32, 2), kib(64));
        assert_eq!(f(kib(256), 64, 2), kib(64));
        assert_eq!(f(kib(256), 2, 64), kib(64));
        assert_eq!(f(128, 64, 2), 128);
        assert_eq!(f(100, 2, 2), 128);
        for n in 2..300 {
            let frag = f(kib(256), n, 2);
            assert!(frag.is_multiple_of(64));
            assert!(
                n * 2 * frag <= SegmentGeometry::SLOTS_BUDGET || frag == kib(64),
                "{n} members: {frag}"
            );
        }
    }
}
