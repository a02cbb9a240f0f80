//! The collective segment engine: barrier, broadcast and reductions for communicators whose
//! members all share this node, through one shared segment per communicator.
//!
//! Layout (every field on its own cache line where it has its own writer):
//!
//! | region | size | written by | read by |
//! |---|---|---|---|
//! | header | 128 | creator (once; byte 48: whether the program's barrier may go through a root), `attach_count` by attachers (atomic add); `sleepers` (byte 64): members going to sleep and waking (SeqCst add) | attachers; `sleepers`: every releasing store |
//! | control block of rank r | 128 | `arrive` (word 0): r, Release; `release` (byte 64): r's tree parent, Release; the 56 bytes after each word: [`CollSegment::tree_reduce`]'s partial (r, plain, before `arrive`) and result (the parent, plain, before `release`) | `arrive` and the partial: r's parent (Acquire, then plain); `release` and the result: r (Acquire, then plain) |
//! | data slots | `sets` × n × `frag` | slot (s, r): rank r (plain, before its `arrive` or its flat round), or a scatter's root; in a pair stream all slots are one ring, written by the writer (plain, before its stream counter) | the operation's readers, after the barrier or flat round that follows; in a pair stream the reader, after the writer's stream counter (Acquire); rewritten only once every reader has published a later round ([`fragment`]) |
//! | result area | `sets` × `frag` | slice i: rank i (plain, before its `arrive`) | everyone, after the next barrier |
//! | inline lines | n × 2 × 512 | line (r, parity): rank r, payload plain, then the generation (word 0), Release | everyone, generation Acquire, then the payload |
//! | posted lines | n × 8 × 512 | line (r, k): rank r, payload plain, then the posted generation (word 0), Release | everyone, generation Acquire, then the payload |
//! | finished words | n × 512 | word 0 of line r: rank r, the highest posted generation up to which it finished reading, Release; byte 256 of line r: rank r's stream counter, the pair-stream fragments it wrote or took out ([`pair`]), Release | word 0: any rank about to rewrite a posted line, Acquire; the stream counter: r's partner in a pair stream, Acquire |
//!
//! Every operation is a sequence of barriers with a generation number that grows by one per
//! barrier on every rank, so a flag written for generation g can never be mistaken for g+1.
//! Barrier: in groups of up to 16, one flat round of the inline lines below (every member
//! publishes its generation and reads the others'); in larger groups, fan-in then fan-out
//! over a k-ary tree (degree `tree_degree`), each rank spinning on its own `release` word and
//! on its children's `arrive` words. Data of fragment f uses buffer
//! set f mod `sets`; a set is rewritten only after a later barrier or round proves that every
//! rank that reads it has finished, so consecutive operations never race.
//!
//! Reductions are split into per-rank slices: after the contributions are in, rank i reduces
//! slice i over all contributions in rank order (deterministic for floating point, correct for
//! non-commutative operations), so all ranks reduce in parallel.
//!
//! Small operations on small groups take one round instead: each rank has two inline lines
//! (used alternately by a second generation counter), writes its payload and then the
//! generation into its line (Release), and reads the lines it needs once they show the
//! generation (Acquire): every line for barrier, allreduce, allgather and alltoall; the root
//! every line and the others none for reduce and gather (they go on at once); every member
//! the root's line and the root none for bcast and scatter. A rank rewrites a line two
//! operations later, and only after every member that read it then has published the
//! operation in between, which each does only after it finished reading the earlier one, so
//! no reader can see a line overwritten under it.
//!
//! Nonblocking collectives use posted rounds ([`PostedRounds`]): the same one-round exchange split
//! into publish, poll and finish, through lines and a generation of their own.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::{Acquire, Relaxed, Release, SeqCst};

use kestrel_transport::node_coll::Stall;

use crate::mem::{Mapping, SharedMem};

mod flat;
mod fragment;
mod pair;
mod posted;
mod single_copy;

use flat::Readers;

pub use posted::PostedRounds;

const MAGIC: u64 = u64::from_le_bytes(*b"KSTRLCOL");
const HEADER: usize = 128;
const CONTROL: usize = 128;
const ATTACH: usize = 32;
/// Header word: 1 when the program's barrier may take two rounds through a root
/// ([`CollSegment::explicit_barrier`]), the creator's choice (its members yield), so that every
/// member takes the same rounds even where one of them yields and another does not.
const ROOTED_BARRIERS: usize = 48;
/// Header word counting the members asleep in [`CollSegment::wait_word`] (on a line of its
/// own: written only by members going to sleep and waking, read by every releasing store of
/// a segment whose members yield).
const SLEEPERS: usize = 64;
/// Yields a waiting member of an oversubscribed node makes before it sleeps on the word
/// (futex) instead: a member that yields in a loop still takes turns on the cores the
/// members it waits for need.
const SLEEP_AFTER_YIELDS: u32 = 200;
/// Longest single sleep: the member wakes at least this often to run its poll hook.
const SLEEP_MAX: std::time::Duration = std::time::Duration::from_micros(500);
/// Bytes of one inline line: a generation word, then up to [`INLINE_MAX`] payload bytes. A
/// reader pulls only the cache lines its payload covers, so small payloads cost the same in a
/// long line; 512 (was 128) lets 256-byte reductions and broadcasts and 32-64-byte blocks of
/// alltoall, gather and scatter on 4 ranks take one round (4 ranks on 2 cores: reduce 256 B
/// 2.9 -> 0.45-0.79 us, allreduce 256 B 3.1 -> 2.2, alltoall 64 B 4.5 -> 1.5).
const INLINE_LINE: usize = 512;
/// Largest payload of the single-round inline operations.
pub const INLINE_MAX: usize = INLINE_LINE - 8;
/// Largest communicator for the single-round (flat) operations: every rank reads every
/// other rank's line, which is cheaper than a tree only while the group is small.
pub const FLAT_MAX_RANKS: usize = 16;
/// Largest reduction of [`CollSegment::tree_reduce`]: the bytes of a control line beside its
/// word.
pub const TREE_PAYLOAD_MAX: usize = 56;
/// Smallest reduction that goes through the members' buffers with single copy.
pub const SINGLE_COPY_MIN: usize = 64 << 10;

/// Largest block of the scatter through fragment slots (the gather, allgather and alltoall
/// there take blocks up to a fragment: see [`fragment`]): above it, two
/// copies of every block through lines another core just wrote cost more than single copy
/// or a rendezvous (2 ranks: allgather 64 KiB 13.3 us through the slots, 10.5-13 with
/// single copy; scatter 32 KiB 6.9 us in the fast core-to-core state but 22-52 in the slow
/// one, where 16 KiB takes 11-12).
pub const FRAGMENT_BLOCK_MAX: usize = 16 << 10;

/// Polls of a wait before the poll hook is first called.
pub const POLL_AFTER: u32 = 256;
/// Polls between two calls of the poll hook.
pub const POLL_EVERY: u32 = 64;
/// Spins of a wait between calls of the stall hook (the first after a few milliseconds).
const STALL_SPINS: u32 = 1 << 14;
/// Spins between two calls of the stall hook once a wait has stalled (each a clock read in the
/// hook; the record is rewritten at most every 500 ms).
const STALL_TICK: u32 = 1 << 10;

/// Sizes of a collective segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CollGeometry {
    /// Members.
    pub n: usize,
    /// Bytes per fragment slot.
    pub frag: usize,
    /// Alternating buffer sets (>= 2).
    pub sets: usize,
    /// Barrier tree degree (>= 2).
    pub degree: usize,
}

impl CollGeometry {
    fn slots_off(&self) -> usize {
        HEADER + self.n * CONTROL
    }
    fn result_off(&self) -> usize {
        self.slots_off() + self.sets * self.n * self.frag
    }
    fn inline_off(&self) -> usize {
        self.result_off() + self.sets * self.frag
    }
    fn posted_off(&self) -> usize {
        self.inline_off() + self.n * 2 * INLINE_LINE
    }
    fn finished_off(&self) -> usize {
        self.posted_off() + self.n * posted::LINES * INLINE_LINE
    }
    /// Total bytes.
    pub fn total(&self) -> usize {
        self.finished_off() + self.n * INLINE_LINE
    }
}

/// One rank's handle on a communicator's collective segment.
pub struct CollSegment {
    /// Shared with the segment's [`PostedRounds`] handle, which works on lines of its own.
    map: std::sync::Arc<Mapping>,
    geo: CollGeometry,
    me: usize,
    gen: u64,
    fragments: u64,
    /// Fragments of pair streams this member took part in (see [`pair`]).
    streamed: u64,
    /// How this member stores when it writes a pair stream.
    stream_stores: pair::StoreChoice,
    flat_gen: u64,
    /// Who read the lines of the last two flat rounds, by parity (see `flat_round`).
    flat_readers: [Readers; 2],
    /// Whether the last flat round waited for every member's publication.
    flat_saw_all: bool,
    /// Fragment sets that members may still be reading after a one-way round (bit s for set
    /// s; see [`CollSegment::claim_set`]).
    sets_in_reading: u64,
    /// For each set in `sets_in_reading`: the flat generation of the round after which it
    /// is read, and who reads it.
    set_reads: Vec<(u64, Readers)>,
    /// Whether [`CollSegment::explicit_barrier`] may go through a root (the segment header's
    /// word, the same on every member).
    rooted_barriers: bool,
    spin_yield: bool,
    /// Called when a wait has spun [`STALL_SPINS`] times, then every [`STALL_TICK`] spins.
    stall_hook: Option<kestrel_transport::node_coll::StallHook>,
    poll_hook: Option<kestrel_transport::node_coll::PollHook>,
    scratch: Vec<u8>,
    /// Every member may read and write every other member's memory (process_vm_readv/writev).
    cma: bool,
}

impl std::fmt::Debug for CollSegment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "CollSegment(rank {} of {}, {} B fragments)",
            self.me, self.geo.n, self.geo.frag
        )
    }
}

impl CollSegment {
    /// Creates the segment file (by the communicator's lowest rank).
    pub fn create(
        dir: &Path,
        name: &str,
        geo: CollGeometry,
        me: usize,
        spin_yield: bool,
    ) -> Result<(PathBuf, CollSegment), String> {
        let (path, map) = create_file(dir, name, geo.total(), geo.n)?;
        map.store(0, MAGIC, Relaxed);
        map.store(8, geo.n as u64, Relaxed);
        map.store(16, geo.frag as u64, Relaxed);
        map.store(24, geo.sets as u64, Relaxed);
        map.store(40, geo.degree as u64, Relaxed);
        map.store(ROOTED_BARRIERS, spin_yield as u64, Relaxed);
        Ok((path, CollSegment::new(map, geo, me, spin_yield)))
    }

    /// Attaches to a segment created by another member, checking its header.
    pub fn attach(
        path: &Path,
        n: usize,
        me: usize,
        spin_yield: bool,
    ) -> Result<CollSegment, String> {
        let map = crate::segment::attach(path)
            .map_err(|e| format!("shm coll: cannot map {}: {e}", path.display()))?;
        let bad = |why: &str| {
            Err(format!(
                "shm coll: segment {} is unusable: {why}",
                path.display()
            ))
        };
        if map.size() < HEADER || map.load(0, Relaxed) != MAGIC {
            return bad("no collective segment magic");
        }
        let geo = CollGeometry {
            n: map.load(8, Relaxed) as usize,
            frag: map.load(16, Relaxed) as usize,
            sets: map.load(24, Relaxed) as usize,
            degree: map.load(40, Relaxed) as usize,
        };
        if geo.n != n
            || geo.frag == 0
            || !geo.frag.is_multiple_of(64)
            || !(2..=64).contains(&geo.sets)
            || geo.degree < 2
        {
            return bad("geometry does not match the communicator");
        }
        if geo.total() > map.size() {
            return bad("file smaller than its geometry");
        }
        map.fetch_add(ATTACH, 1, Relaxed);
        Ok(CollSegment::new(map, geo, me, spin_yield))
    }

    fn new(map: Mapping, geo: CollGeometry, me: usize, spin_yield: bool) -> CollSegment {
        let rooted_barriers = map.load(ROOTED_BARRIERS, Relaxed) == 1;
        CollSegment {
            map: std::sync::Arc::new(map),
            geo,
            me,
            gen: 0,
            fragments: 0,
            streamed: 0,
            stream_stores: pair::StoreChoice::default(),
            flat_gen: 0,
            flat_readers: [Readers::All; 2],
            flat_saw_all: true,
            sets_in_reading: 0,
            set_reads: vec![(0, Readers::All); geo.sets],
            rooted_barriers,
            spin_yield,
            stall_hook: None,
            poll_hook: None,
            scratch: Vec::new(),
            cma: false,
        }
    }

    /// The root's published buffer address and process id, in one round only the non-roots
    /// wait in (for the root's line; the root waits for nobody): what the single-copy
    /// operations whose copies all go to or from the root's buffer need.
    fn root_address(&mut self, root: usize, addr: u64) -> (u64, u32) {
        let mut theirs = (addr, std::process::id());
        self.flat_round(
            &address_line(addr),
            16,
            Readers::OfRoot(root),
            &mut |r, b| {
                if r == root {
                    theirs = read_address_line(b);
                }
            },
        );
        theirs
    }

    /// The closing round of a single-copy operation on the root's buffer: every member
    /// reports its copy done and only the root waits for all (it must keep its buffer until
    /// then); the others go on at once instead of waiting for each other.
    fn copies_done_at_root(&mut self, root: usize) {
        self.flat_round(&[], 0, Readers::Root(root), &mut |_, _| {});
    }

    /// One round publishing `addr` (a buffer of this process) with this process's pid; returns
    /// every member's (address, pid) in rank order.
    fn exchange_addresses(&mut self, addr: u64) -> Vec<(u64, u32)> {
        let mut members = vec![(0u64, 0u32); self.geo.n];
        self.flat_round(&address_line(addr), 16, Readers::All, &mut |r, b| {
            members[r] = read_address_line(b);
        });
        members
    }

    /// Members that have attached (the creator unlinks the file once all did).
    pub fn attached(&self) -> u64 {
        self.map.load(ATTACH, Acquire)
    }

    /// Bytes per fragment.
    pub fn fragment_size(&self) -> usize {
        self.geo.frag
    }

    fn ctl(&self, r: usize) -> usize {
        HEADER + r * CONTROL
    }

    fn slot(&self, set: usize, r: usize) -> usize {
        self.geo.slots_off() + (set * self.geo.n + r) * self.geo.frag
    }

    fn result(&self, set: usize) -> usize {
        self.geo.result_off() + set * self.geo.frag
    }

    /// Sets what a long wait calls (the rank's wait record).
    pub fn set_stall_hook(&mut self, hook: kestrel_transport::node_coll::StallHook) {
        self.stall_hook = Some(hook);
    }

    /// Sets what a wait calls every [`POLL_EVERY`] polls after the first [`POLL_AFTER`] (and
    /// at every poll once the wait yields the CPU between polls).
    pub fn set_poll_hook(&mut self, hook: kestrel_transport::node_coll::PollHook) {
        self.poll_hook = Some(hook);
    }

    fn wait_word(&self, off: usize, at_least: u64) {
        let mut spins = 0u32;
        while self.map.load(off, Acquire) < at_least {
            spins = spins.saturating_add(1);
            // Not in the first polls (the common, fast case), then regularly: a member that
            // waits here for a slow peer still serves one-sided operations targeting it.
            let yielding = (self.spin_yield && spins > 64) || spins > 20_000;
            if spins >= POLL_AFTER && (yielding || spins.is_multiple_of(POLL_EVERY)) {
                if let Some(poll) = self.poll_hook {
                    poll();
                }
            }
            // Saturated after hours of waiting: then every poll asks (the board throttles by time).
            if (spins >= STALL_SPINS && spins.is_multiple_of(STALL_TICK)) || spins == u32::MAX {
                if let Some(hook) = self.stall_hook {
                    hook(if spins == STALL_SPINS {
                        Stall::Began
                    } else {
                        Stall::Continues
                    });
                }
            }
            if self.spin_yield && spins > 64 + SLEEP_AFTER_YIELDS {
                self.sleep_on(off, at_least);
            } else if yielding {
                std::thread::yield_now();
            } else if spins > 1_000 {
                // Not in the first polls: PAUSE would add its tens of nanoseconds to latency.
                std::hint::spin_loop();
            }
        }
        if spins >= STALL_SPINS {
            if let Some(hook) = self.stall_hook {
                hook(Stall::Ended);
            }
        }
    }

    /// Sleeps on the word at `off` until a [`CollSegment::release_store`] there, or
    /// [`SLEEP_MAX`]. The sleeper count is raised before the last look at the word and the
    /// releaser looks at the count after its store (both sequentially consistent), so either
    /// this member sees the store or the releaser sees the sleeper and wakes it.
    fn sleep_on(&self, off: usize, at_least: u64) {
        self.map.fetch_add(SLEEPERS, 1, SeqCst);
        let now = self.map.load(off, SeqCst);
        if now < at_least {
            self.map.futex_wait(off, now as u32, SLEEP_MAX);
        }
        self.map.fetch_add(SLEEPERS, u64::MAX, SeqCst);
    }

    /// Stores `g` into the word at `off` (Release) for members that wait on it, waking any
    /// asleep there.
    fn release_store(&self, off: usize, g: u64) {
        self.map.store(off, g, Release);
        // Members sleep only where they yield, which their launch decides for all of a node
        // alike; a member that does not yield still wakes sleepers it happens to see (without
        // the fence a wake can be missed, and the sleeper wakes after SLEEP_MAX). The count's
        // line is only read while nobody sleeps, so looking costs a cached load.
        if self.spin_yield {
            std::sync::atomic::fence(SeqCst);
        }
        if self.map.load(SLEEPERS, Relaxed) > 0 {
            self.map.futex_wake(off);
        }
    }

    /// Members of the communicator.
    pub fn members(&self) -> usize {
        self.geo.n
    }

    /// A barrier: one flat round in groups of up to [`FLAT_MAX_RANKS`] (one cache-line
    /// transfer on the critical path), the tree otherwise.
    pub fn barrier(&mut self) {
        if self.geo.n <= FLAT_MAX_RANKS {
            self.flat_barrier();
        } else {
            self.tree_barrier();
        }
    }

    /// The program's barrier (`MPI_Barrier`), where the operations' own barriers are
    /// [`CollSegment::barrier`]: the same, except where members yield (the segment's
    /// creator does: every member must take the same rounds) and the last operation was a
    /// broadcast or scatter from one root. Then every member signals rank 0 and rank 0
    /// releases them ([`CollSegment::flat_rooted_barrier`]), so rank 0 leaves first, as
    /// Open MPI's linear and tree barriers let it. Where ranks share cores, the members
    /// waiting in a flat barrier leave in whatever order the scheduler runs them, and a root
    /// that leaves late makes every member of its next broadcast wait for it to be run,
    /// while one that leaves first has published when they arrive (4 ranks on 2 cores,
    /// `osu_scatter` 8-128 B 1.1-2.2 -> 0.09-0.21 us, Open MPI 0.15-1.19; the C loop of
    /// `MPI_Scatter` and `MPI_Barrier` 7.3-9.2 -> 4.4-6.6 us a pair, Open MPI 5.0-6.3).
    /// Rank 0, not the last root: where the root rotates, as in `osu_bcast`, releasing the
    /// last one first cost 1.8-2.8 us against 1.3-1.8 through rank 0 (Open MPI 1.7-3.0).
    /// After any other operation the flat round stays: a member that leaves first waits in
    /// the next symmetric operation for the others (with every barrier through rank 0,
    /// `osu_gather` 8 B lost 0.6-1.2 us, and `osu_alltoall` 8-64 B was slower in two runs
    /// of three).
    pub fn explicit_barrier(&mut self) {
        // The readers of the last flat round (a broadcast's or scatter's: the root's line).
        let last = self.flat_readers[(self.flat_gen % 2) as usize];
        let from_root = matches!(last, Readers::OfRoot(_));
        if from_root && self.rooted_barriers && self.geo.n <= FLAT_MAX_RANKS {
            self.flat_rooted_barrier(0);
        } else {
            self.barrier();
        }
    }

    /// Fan-in then fan-out over the k-ary tree rooted at rank 0.
    fn tree_barrier(&mut self) {
        self.gen += 1;
        let g = self.gen;
        let (n, d, me) = (self.geo.n, self.geo.degree, self.me);
        let children = (me * d + 1)..((me * d + d).min(n - 1) + 1);
        for c in children.clone() {
            self.wait_word(self.ctl(c), g);
        }
        if me != 0 {
            self.release_store(self.ctl(me), g);
            self.wait_word(self.ctl(me) + 64, g);
        }
        for c in children {
            self.release_store(self.ctl(c) + 64, g);
        }
    }

    /// A small reduction of a commutative operation in a group above [`FLAT_MAX_RANKS`]
    /// members, over the barrier tree: each rank combines its children's partial results
    /// (beside their `arrive` words) with its own operand and passes the partial up beside
    /// its own; rank 0's total goes down beside the `release` words. One tree barrier's
    /// cache-line transfers, where [`CollSegment::reduce`] takes two barriers and the slot
    /// copies (32 ranks on 2 cores, 8 B allreduce: 131 us against a 63 us barrier). The total
    /// is computed once, so every rank gets the same bits. Operands combine out of rank order:
    /// commutative operations only. `false`, with nothing done: more than
    /// [`TREE_PAYLOAD_MAX`] bytes, or a group that [`FLAT_MAX_RANKS`] covers (the same
    /// answer on every member).
    pub fn tree_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) -> bool {
        let len = send.len();
        if self.geo.n <= FLAT_MAX_RANKS || len == 0 || len > TREE_PAYLOAD_MAX {
            return false;
        }
        self.gen += 1;
        let g = self.gen;
        let (n, d, me) = (self.geo.n, self.geo.degree, self.me);
        let children = (me * d + 1)..((me * d + d).min(n - 1) + 1);
        let mut acc = [0u8; TREE_PAYLOAD_MAX];
        let mut theirs = [0u8; TREE_PAYLOAD_MAX];
        acc[..len].copy_from_slice(send);
        for c in children.clone() {
            self.wait_word(self.ctl(c), g);
            self.map.read_bytes(self.ctl(c) + 8, &mut theirs[..len]);
            apply(&theirs[..len], &mut acc[..len]);
        }
        if me != 0 {
            // The partial is read by the parent only after it sees `arrive` = g, and
            // rewritten (next operation) only after the parent's `release` = g, which it
            // sends once it has read every child.
            self.map.write_bytes(self.ctl(me) + 8, &acc[..len]);
            self.release_store(self.ctl(me), g);
            self.wait_word(self.ctl(me) + 64, g);
            self.map.read_bytes(self.ctl(me) + 72, &mut acc[..len]);
        }
        for c in children {
            self.map.write_bytes(self.ctl(c) + 72, &acc[..len]);
            self.release_store(self.ctl(c) + 64, g);
        }
        if root.is_none() || root == Some(me) {
            recv[..len].copy_from_slice(&acc[..len]);
        }
        true
    }

    /// The fragment set of the next fragment operation whose largest block is `largest`
    /// bytes, drawn now; `None`, nothing drawn, when that exceeds a fragment or
    /// [`FRAGMENT_BLOCK_MAX`] (the same answer on every member).
    fn fragment_set(&mut self, largest: usize) -> Option<usize> {
        if largest > self.geo.frag.min(FRAGMENT_BLOCK_MAX) {
            return None;
        }
        Some(self.next_fragment_set())
    }

    /// The fragment set of the next fragment operation, drawn now (the caller checked that
    /// its blocks fit a slot).
    fn next_fragment_set(&mut self) -> usize {
        let set = (self.fragments % self.geo.sets as u64) as usize;
        self.fragments += 1;
        set
    }

    /// Broadcast of `buf` from `root`, fragment by fragment (in small groups the root goes on
    /// once it has written a fragment; see [`CollSegment::publish_set`]).
    pub fn bcast(&mut self, root: usize, buf: &mut [u8]) {
        let frag = self.geo.frag;
        let mut at = 0;
        loop {
            let end = (at + frag).min(buf.len());
            let set = self.next_fragment_set();
            if self.me == root {
                self.claim_set(set);
                self.map.write_bytes(self.slot(set, root), &buf[at..end]);
            }
            self.publish_set(set, Readers::OfRoot(root));
            if self.me != root {
                self.map.read_bytes(self.slot(set, root), &mut buf[at..end]);
            }
            at = end;
            if at >= buf.len() {
                break;
            }
        }
    }

    /// Reduction of every member's `send` (`elem` bytes per element): all ranks get it when
    /// `root` is `None`, else only `root` (into `recv`). `apply(input, inout)` combines with
    /// the lower rank's operand as `input`.
    pub fn reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        apply: &mut dyn FnMut(&[u8], &mut [u8]),
    ) {
        let n = self.geo.n;
        let me = self.me;
        let want = root.is_none() || root == Some(me);
        let frag = (self.geo.frag / elem) * elem;
        // The widest slice a rank reduces (whole elements), in buffers kept between calls:
        // sized by the message, not the fragment, and never zeroed (every byte used is
        // written first). A 128-byte reduction used to allocate and zero two fragment-wide
        // buffers here, 2 us of its 2.2.
        let slice = frag.min(send.len()).div_ceil(elem).div_ceil(n) * elem + elem;
        let mut buffers = std::mem::take(&mut self.scratch);
        if buffers.len() < 2 * slice {
            buffers.resize(2 * slice, 0);
        }
        let (acc, tmp) = buffers.split_at_mut(slice);
        let mut at = 0;
        loop {
            let end = (at + frag).min(send.len());
            let len = end - at;
            let set = self.next_fragment_set();
            self.claim_set(set);
            self.map.write_bytes(self.slot(set, me), &send[at..end]);
            self.barrier();
            // My slice of this fragment, in whole elements.
            let elems = len / elem;
            let (s0, s1) = (elems * me / n * elem, elems * (me + 1) / n * elem);
            if s1 > s0 {
                let w = s1 - s0;
                combine_in_rank_order(
                    n,
                    me,
                    &send[at + s0..at + s1],
                    &mut acc[..w],
                    tmp,
                    |r, dst| self.map.read_bytes(self.slot(set, r) + s0, dst),
                    apply,
                );
                self.map.write_bytes(self.result(set) + s0, &acc[..w]);
                if want {
                    recv[at + s0..at + s1].copy_from_slice(&acc[..w]);
                }
            }
            self.barrier();
            if want {
                // The other ranks' slices; mine is already in place.
                self.map
                    .read_bytes(self.result(set), &mut recv[at..at + s0]);
                self.map
                    .read_bytes(self.result(set) + s1, &mut recv[at + s1..end]);
            }
            at = end;
            if at >= send.len() {
                break;
            }
        }
        self.scratch = buffers;
    }
}

/// Combines the operands of members `0..n` into `acc` in MPI's rank order: the last
/// member's operand first, then each lower one into it with `apply(input, inout)`, the lower
/// rank's as `input`, so non-commutative operations keep their order. `own` is this
/// member's operand (`me`); `read(r, dst)` copies member r's into `dst`: remote operands are
/// copied out first, as a wide sequential copy pulls another core's lines far faster than
/// the element loop would. `operand` holds one such copy; it is used, and must be at least
/// `acc.len()` bytes, only for a member below `n - 1` other than `me`.
fn combine_in_rank_order(
    n: usize,
    me: usize,
    own: &[u8],
    acc: &mut [u8],
    operand: &mut [u8],
    mut read: impl FnMut(usize, &mut [u8]),
    apply: &mut dyn FnMut(&[u8], &mut [u8]),
) {
    if me == n - 1 {
        acc.copy_from_slice(own);
    } else {
        read(n - 1, acc);
    }
    for r in (0..n - 1).rev() {
        if r == me {
            apply(own, acc);
        } else {
            let operand = &mut operand[..acc.len()];
            read(r, operand);
            apply(operand, acc);
        }
    }
}

fn create_file(dir: &Path, name: &str, len: usize, n: usize) -> Result<(PathBuf, Mapping), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let path = dir.join(name);
    if let Ok(free) = crate::segment::free_bytes(dir) {
        if free < len as u64 {
            return Err(format!(
                "shm coll: {} has {} bytes free, the collective segment of a {n}-rank communicator needs {len}; \
                 enlarge it (docker --shm-size) or set KESTREL_SHM_DIR, or lower coll_shm_fragment_size",
                dir.display(),
                free
            ));
        }
    }
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| {
            format!(
                "shm coll: cannot create {}: {e}; set KESTREL_SHM_DIR to a writable tmpfs",
                path.display()
            )
        })?;
    if let Err(e) =
        nix::fcntl::posix_fallocate(std::os::fd::AsRawFd::as_raw_fd(&file), 0, len as i64)
    {
        let _ = std::fs::remove_file(&path);
        return Err(format!(
            "shm coll: cannot reserve {len} bytes for {} ({e}); enlarge {} or set KESTREL_SHM_DIR",
            path.display(),
            dir.display()
        ));
    }
    let map = Mapping::map(&file, len).map_err(|e| {
        let _ = std::fs::remove_file(&path);
        format!("shm coll: cannot map {}: {e}", path.display())
    })?;
    Ok((path, map))
}

/// A published buffer address and this process's id, as the single-copy rounds carry them
/// (16 bytes, little-endian).
fn address_line(addr: u64) -> [u8; 16] {
    let mut line = [0u8; 16];
    line[..8].copy_from_slice(&addr.to_le_bytes());
    line[8..].copy_from_slice(&u64::from(std::process::id()).to_le_bytes());
    line
}

/// The (address, pid) of a line written by [`address_line`].
fn read_address_line(b: &[u8]) -> (u64, u32) {
    let word = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or([0; 8]));
    (word(0), word(8) as u32)
}

#[cfg(test)]
#[cfg(not(loom))]
mod tests {
    use super::*;

    pub(super) fn group(n: usize, frag: usize) -> (PathBuf, Vec<CollSegment>) {
        group_yielding(n, frag, |_| true)
    }

    /// [`group`] whose member `me` yields when waiting where `yields(me)` says so.
    fn group_yielding(
        n: usize,
        frag: usize,
        yields: impl Fn(usize) -> bool,
    ) -> (PathBuf, Vec<CollSegment>) {
        let geo = CollGeometry {
            n,
            frag,
            sets: 2,
            degree: 2,
        };
        // Tests run in parallel threads of one process and may ask for the same shape: a
        // per-process serial keeps their segment names apart.
        static SERIAL: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let serial = SERIAL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("kestrel.colltest{}x{n}x{frag}.{serial}", std::process::id());
        let (path, first) =
            CollSegment::create(Path::new("/dev/shm"), &name, geo, 0, yields(0)).unwrap();
        let mut segs = vec![first];
        for me in 1..n {
            segs.push(CollSegment::attach(&path, n, me, yields(me)).unwrap());
        }
        assert_eq!(segs[0].attached(), n as u64 - 1);
        std::fs::remove_file(&path).unwrap();
        (path, segs)
    }

    /// Runs `f` as member `me` on a thread of its own. A member that panics stops the whole
    /// test process at once (after the panic message): the other members would otherwise
    /// wait for it in their next barrier forever, and the failure would show as a hang.
    pub(super) fn spawn_member<R: Send + 'static>(
        me: usize,
        f: impl FnOnce() -> R + Send + 'static,
    ) -> std::thread::JoinHandle<R> {
        std::thread::spawn(move || {
            match std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)) {
                Ok(r) => r,
                Err(_) => {
                    eprintln!(
                        "member {me} of a collective test failed (message above); the other \
                         members would wait for it forever, so the test process stops"
                    );
                    std::process::exit(101)
                }
            }
        })
    }

    /// Runs `body(me, segment)` on a thread per member and waits for all.
    pub(super) fn on_every_member(
        segs: Vec<CollSegment>,
        body: impl Fn(usize, CollSegment) + Send + Sync + Clone + 'static,
    ) {
        let handles: Vec<_> = segs
            .into_iter()
            .enumerate()
            .map(|(me, seg)| {
                let body = body.clone();
                spawn_member(me, move || body(me, seg))
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
    }

    /// Byte-wise wrapping sum: a commutative operation whose result is easy to predict.
    pub(super) fn wrapping_sum(input: &[u8], inout: &mut [u8]) {
        for (i, o) in input.iter().zip(inout.iter_mut()) {
            *o = o.wrapping_add(*i);
        }
    }

    /// The tree reduction of groups above the flat limit, interleaved with tree barriers and
    /// slot reductions on the same control words: sums of distinct values, to all and to
    /// every root, over 3-byte to 56-byte operands; declined where it does not apply.
    #[test]
    fn tree_reductions_agree_in_large_groups() {
        let n = FLAT_MAX_RANKS + 4;
        let (_, segs) = group(n, 256);
        on_every_member(segs, move |me, mut seg| {
            let mut sum = wrapping_sum;
            let mut none = [0u8; 0];
            assert!(!seg.tree_reduce(
                None,
                &[0u8; TREE_PAYLOAD_MAX + 1],
                &mut [0u8; TREE_PAYLOAD_MAX + 1],
                &mut sum
            ));
            for round in 0..200usize {
                let len = 3 + round % (TREE_PAYLOAD_MAX - 2);
                let send: Vec<u8> = (0..len).map(|i| (me * 7 + i + round) as u8).collect();
                let want: Vec<u8> = (0..len)
                    .map(|i| {
                        (0..n)
                            .map(|r| (r * 7 + i + round) as u8)
                            .fold(0u8, u8::wrapping_add)
                    })
                    .collect();
                let root = if round % 2 == 0 {
                    None
                } else {
                    Some(round % n)
                };
                let mut recv = vec![0u8; len];
                let target: &mut [u8] = if root.is_none() || root == Some(me) {
                    &mut recv
                } else {
                    &mut none
                };
                assert!(seg.tree_reduce(root, &send, target, &mut sum));
                if root.is_none() || root == Some(me) {
                    assert_eq!(recv, want, "rank {me} round {round} root {root:?}");
                }
                if round % 3 == 0 {
                    seg.barrier();
                }
                if round % 5 == 0 {
                    let mut all = vec![0u8; len];
                    seg.reduce(None, &send, &mut all, 1, &mut sum);
                    assert_eq!(all, want, "slot reduce round {round}");
                }
            }
        });
        let (_, small) = group(2, 256);
        let mut seg = small.into_iter().next().unwrap();
        assert!(!seg.tree_reduce(None, &[1], &mut [0], &mut |_, _| {}));
    }

    /// Flat rounds whose members read different lines (rooted reduce and gather, where the
    /// others run ahead; bcast and scatter, where the root does), mixed with full rounds and
    /// the program's barriers (rooted after a bcast or scatter, as the creator yields, though
    /// every other member does not), in a sequence every member derives alike: every value
    /// arrives intact, so no line is rewritten while a reader still needs it, and no member
    /// leaves a barrier before every member has entered it.
    #[test]
    fn rooted_flat_rounds_never_overwrite_a_line_still_read() {
        for n in [2usize, 3, 5] {
            let (_, segs) = group_yielding(n, 128, |me| me % 2 == 0);
            let entered = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
            let rounds_taken = std::sync::Arc::new(std::sync::Mutex::new(vec![0u64; n]));
            let taken = rounds_taken.clone();
            on_every_member(segs, move |me, mut seg| {
                let mut barriers = 0;
                let mut sum = wrapping_sum;
                for round in 0..3000usize {
                    let root = (round / 5 + round) % n;
                    let v = |r: usize| (r * 31 + round) as u8;
                    match round % 5 {
                        0 => {
                            let mut b = vec![if me == root { v(root) } else { 0 }; 24];
                            seg.flat_bcast(root, &mut b);
                            assert!(b.iter().all(|&x| x == v(root)), "bcast {round}");
                        }
                        1 => {
                            let mut out = vec![0u8; 8];
                            seg.flat_reduce(Some(root), &[v(me); 8], &mut out, &mut sum);
                            if me == root {
                                let want = (0..n).map(v).fold(0u8, u8::wrapping_add);
                                assert_eq!(out, vec![want; 8], "reduce {round}");
                            }
                        }
                        2 => {
                            let mut all = vec![0u8; 4 * n];
                            seg.flat_gather(root, &[v(me); 4], &mut all, 4);
                            if me == root {
                                for r in 0..n {
                                    assert_eq!(all[r * 4..r * 4 + 4], [v(r); 4], "gather {round}");
                                }
                            }
                        }
                        3 => {
                            let send: Vec<u8> = (0..n).flat_map(|r| [v(r); 4]).collect();
                            let mut mine = vec![0u8; 4];
                            seg.flat_scatter(root, &send, &mut mine, 4);
                            assert_eq!(mine, vec![v(me); 4], "scatter {round}");
                        }
                        _ => {
                            if round % 10 == 4 {
                                seg.flat_barrier();
                            } else {
                                // The last to enter is sometimes late by a scheduling quantum.
                                if me == n - 1 && round % 100 == 9 {
                                    std::thread::sleep(std::time::Duration::from_millis(2));
                                }
                                entered.fetch_add(1, SeqCst);
                                barriers += 1;
                                seg.explicit_barrier();
                                assert!(entered.load(SeqCst) >= barriers * n, "barrier {round}");
                            }
                        }
                    }
                }
                taken.lock().unwrap()[me] = seg.flat_gen;
            });
            // Every member took the same rounds (a member that chose its barrier by its own
            // yielding would have taken one round where the others took two).
            let taken = rounds_taken.lock().unwrap();
            assert!(
                taken.iter().all(|&g| g == taken[0]),
                "n {n}: rounds {taken:?}"
            );
        }
    }

    /// A member that waits long on a yielding segment sleeps on the word (the sleeper count
    /// shows it) and comes back with the operation complete once the late member arrives.
    #[test]
    fn a_long_wait_sleeps_and_is_woken() {
        for n in [2usize, FLAT_MAX_RANKS + 1] {
            let (_, segs) = group(n, 128);
            let mut segs = segs.into_iter();
            let mut late = segs.next().unwrap();
            let early: Vec<_> = segs
                .map(|mut seg| {
                    std::thread::spawn(move || {
                        seg.barrier();
                        let mut b = vec![0u8; 8];
                        seg.bcast(0, &mut b);
                        b
                    })
                })
                .collect();
            // Every early member must be asleep before the late one arrives.
            while late.map.load(SLEEPERS, SeqCst) < (n - 1) as u64 {
                std::thread::yield_now();
            }
            late.barrier();
            let mut b = vec![7u8; 8];
            late.bcast(0, &mut b);
            for h in early {
                assert_eq!(h.join().unwrap(), vec![7u8; 8], "n {n}");
            }
            assert_eq!(late.map.load(SLEEPERS, SeqCst), 0);
        }
    }

    #[test]
    fn threads_agree_on_bcast_scatter_gather_and_ordered_reductions() {
        for n in [1usize, 2, 3, 5] {
            let (_, segs) = group(n, 128);
            let handles: Vec<_> = segs
                .into_iter()
                .enumerate()
                .map(|(me, mut seg)| {
                    spawn_member(me, move || {
                        for round in 0..50u64 {
                            seg.barrier();
                            let mut b = if me == 1 % n {
                                vec![round as u8; 300]
                            } else {
                                vec![0u8; 300]
                            };
                            seg.bcast(1 % n, &mut b);
                            assert!(b.iter().all(|&x| x == round as u8), "bcast round {round}");
                            // A non-commutative "op": concatenate digits in rank order, as u64
                            // elements: result = sum over r of (r+1) * 10^(n-1-r).
                            let count = 100;
                            let send: Vec<u8> = (0..count)
                                .flat_map(|_| (me as u64 + 1).to_ne_bytes())
                                .collect();
                            let mut recv = vec![0u8; send.len()];
                            let mut apply = |input: &[u8], inout: &mut [u8]| {
                                for (i, o) in input.chunks_exact(8).zip(inout.chunks_exact_mut(8)) {
                                    let a = u64::from_ne_bytes(i.try_into().unwrap());
                                    let b = u64::from_ne_bytes((&*o).try_into().unwrap());
                                    let digits = if b == 0 { 1 } else { b.ilog10() + 1 };
                                    o.copy_from_slice(&(a * 10u64.pow(digits) + b).to_ne_bytes());
                                }
                            };
                            seg.reduce(None, &send, &mut recv, 8, &mut apply);
                            // The single-round versions on a prefix of the same data.
                            seg.flat_barrier();
                            let mut small = vec![0u8; 64];
                            seg.flat_reduce(None, &send[..64], &mut small, &mut apply);
                            assert_eq!(small, recv[..64], "flat reduce n {n} round {round}");
                            let mut fb = if me == 0 {
                                vec![round as u8 + 1; 100]
                            } else {
                                vec![0u8; 100]
                            };
                            seg.flat_bcast(0, &mut fb);
                            assert!(fb.iter().all(|&x| x == round as u8 + 1), "flat bcast");
                            // Allgatherv through the fragment slots (128 bytes): blocks of 20 (r + 1)
                            // bytes in reverse rank order; one over the limit is declined.
                            let counts: Vec<usize> = (0..n).map(|r| 20 * (r + 1)).collect();
                            let mut displs = vec![0; n];
                            let mut total = 0;
                            for r in (0..n).rev() {
                                displs[r] = total;
                                total += counts[r];
                            }
                            let block = |r: usize| vec![(r as u8 + 1) ^ round as u8; counts[r]];
                            let mut all = vec![0u8; total];
                            all[displs[me]..displs[me] + counts[me]].copy_from_slice(&block(me));
                            assert!(seg.fragment_allgatherv(
                                &block(me),
                                &mut all,
                                &counts,
                                &displs
                            ));
                            for r in 0..n {
                                assert_eq!(all[displs[r]..displs[r] + counts[r]], block(r));
                            }
                            let over = vec![1 << 20; n];
                            assert!(!seg.fragment_allgatherv(&[], &mut [], &over, &displs));
                            // Scatter and gather of 7-byte blocks from rotating roots, the
                            // root in place every other round.
                            let root = round as usize % n;
                            let in_place = round % 2 == 1;
                            let blocks: Vec<u8> = (0..7 * n)
                                .map(|i| (i as u8).wrapping_mul(round as u8))
                                .collect();
                            let mut mine = vec![0u8; 7];
                            let send = if me == root { &blocks[..] } else { &[][..] };
                            let dst = if me == root && in_place {
                                &mut [][..]
                            } else {
                                &mut mine[..]
                            };
                            seg.flat_scatter(root, send, dst, 7);
                            if !(me == root && in_place) {
                                assert_eq!(mine, blocks[7 * me..7 * me + 7], "flat scatter");
                            }
                            let mut all = vec![0u8; if me == root { 7 * n } else { 0 }];
                            if me == root && in_place {
                                all[7 * me..7 * me + 7]
                                    .copy_from_slice(&blocks[7 * me..7 * me + 7]);
                            }
                            let own = if me == root && in_place {
                                &[][..]
                            } else {
                                &blocks[7 * me..7 * me + 7]
                            };
                            seg.flat_gather(root, own, &mut all, 7);
                            if me == root {
                                assert_eq!(all, blocks, "flat gather n {n} round {round}");
                            }
                            // The same through the fragment slots (blocks of 40 bytes).
                            let big: Vec<u8> = (0..40 * n)
                                .map(|i| (i as u8).wrapping_add(round as u8))
                                .collect();
                            let mut mine = vec![0u8; 40];
                            let send = if me == root { &big[..] } else { &[][..] };
                            assert!(seg.fragment_scatter(root, send, &mut mine, 40));
                            assert_eq!(mine, big[40 * me..40 * me + 40], "fragment scatter");
                            let mut all = vec![0u8; if me == root { 40 * n } else { 0 }];
                            assert!(seg.fragment_gather(root, &mine, &mut all, 40));
                            if me == root {
                                assert_eq!(all, big, "fragment gather n {n} round {round}");
                            }
                            assert!(!seg.fragment_gather(root, &[], &mut [], 1 << 20));
                            // Alltoall through the fragment slots: block d of member s
                            // holds s, d and the round; all of a member's blocks (n x 24
                            // bytes) fit the 128-byte slot up to 5 members.
                            let a2a =
                                |s: usize, d: usize| vec![(s * 16 + d) as u8 ^ round as u8; 24];
                            let send: Vec<u8> = (0..n).flat_map(|d| a2a(me, d)).collect();
                            let mut got = vec![0u8; 24 * n];
                            assert!(seg.fragment_alltoall(&send, &mut got, 24));
                            let want: Vec<u8> = (0..n).flat_map(|s| a2a(s, me)).collect();
                            assert_eq!(got, want, "fragment alltoall n {n} round {round}");
                            assert!(!seg.fragment_alltoall(&[], &mut [], 1 << 20));
                            // The one-barrier reduction of the same operands (`send` is the
                            // alltoall's now), rooted and to all, in rank order like the
                            // sliced one: a slot-sized prefix, and the whole declined.
                            let operand: Vec<u8> = (0..count)
                                .flat_map(|_| (me as u64 + 1).to_ne_bytes())
                                .collect();
                            for to in [Some(root), None] {
                                let mut out = vec![0u8; 128];
                                assert!(seg.fragment_reduce(
                                    to,
                                    &operand[..128],
                                    &mut out,
                                    &mut apply
                                ));
                                if to.is_none_or(|r| r == me) {
                                    assert_eq!(out, recv[..128], "fragment reduce n {n} {to:?}");
                                }
                            }
                            let mut out = vec![0u8; operand.len()];
                            assert!(!seg.fragment_reduce(None, &operand, &mut out, &mut apply));
                            let want: u64 = (0..n as u64).fold(0, |acc, r| acc * 10 + r + 1);
                            for c in recv.chunks_exact(8) {
                                assert_eq!(
                                    u64::from_ne_bytes(c.try_into().unwrap()),
                                    want,
                                    "n {n} round {round}"
                                );
                            }
                        }
                    })
                })
                .collect();
            for h in handles {
                h.join().unwrap();
            }
        }
    }
}
