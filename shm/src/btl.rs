//! The shared-memory BTL: messages between ranks of one node.
//!
//! Small messages go through a per-pair fast box once a pair has exchanged
//! `shm_fbox_threshold` messages (until then, and when a fast box is full, through fragments
//! and the receiver's queue). Large messages are the messaging layer's business: it uses
//! [`Btl::get`] (single copy with `process_vm_readv`) where [`Btl::can_get`] says it works, or
//! streams fragments otherwise.

use std::path::PathBuf;
use std::sync::atomic::Ordering::{Acquire, Relaxed};
use std::sync::Arc;

use kestrel_transport::btl::{Btl, Incoming, Limits, RemoteRegion, SendError};
use kestrel_transport::params::Params;

pub use crate::card::ShmCard;
use crate::mem::{Mapping, SharedMem};
use crate::segment::{self, kind, FragRef, Geometry, Layout, PeerHeader};
use crate::{cma, fbox, fifo, params};

/// Single-copy policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SingleCopy {
    Auto,
    Cma,
    Off,
}

struct Peer {
    map: Arc<Mapping>,
    header: PeerHeader,
    global: u32,
    cma: bool,
}

/// A fast box this process reads. `global` and `map` repeat the sender's [`Peer`] entry on
/// purpose: the idle sweep then touches one struct per fast box, not three.
struct Inbox {
    /// The sender's local index and job rank.
    local: usize,
    global: u32,
    /// The sender's segment, which holds the ring.
    map: Arc<Mapping>,
    cons: fbox::Consumer,
    /// `ShmBtl::sends` when this box last delivered: unchanged at the next delivery means the
    /// sender is streaming to a rank that does not answer (see `drain_inbox`).
    sends_at_delivery: u64,
}

#[derive(Default)]
struct OutBox {
    producer: Option<fbox::Producer>,
    sends: u64,
    denied: bool,
}

/// The shared-memory transport of one process.
pub struct ShmBtl {
    rank: u32,
    me_local: usize,
    globals: Vec<u32>,
    /// Local index of each job rank on this node (`NOT_LOCAL` for the others), indexed by
    /// job rank: looked up on every send, so no hashing.
    local_of: Vec<u32>,
    me: Mapping,
    layout: Layout,
    path: PathBuf,
    cards: Vec<Option<String>>,
    peers: Vec<Option<Peer>>,
    queue: fifo::Consumer,
    free: Vec<u32>,
    /// Fast-box slots of this segment not yet given to a peer.
    free_fbox_slots: Vec<u32>,
    pending_returns: Vec<(usize, u64)>,
    out: Vec<OutBox>,
    inboxes: Vec<Inbox>,
    single_copy: SingleCopy,
    fbox_threshold: u64,
    limits: Limits,
    fallback_announced: bool,
    corrupt: u64,
    /// Messages this process has sent to any local peer (free-running).
    sends: u64,
}

impl std::fmt::Debug for ShmBtl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ShmBtl")
            .field("rank", &self.rank)
            .field("local", &self.me_local)
            .field("segment", &self.path)
            .finish()
    }
}

const NOT_LOCAL: u32 = u32::MAX;

/// The counters the shm transport reports (`Btl::counters`), in this order. They come from
/// state the transport keeps anyway, so the fast-box path does no extra work for them.
pub const COUNTERS: &[kestrel_transport::btl::CounterSpec] = &[
    kestrel_transport::btl::CounterSpec {
        name: "shm_queue_sends",
        description: "Messages sent as fragments through a receiver's queue (those no fast box took).",
    },
    kestrel_transport::btl::CounterSpec {
        name: "shm_fast_boxes_out",
        description: "Fast boxes this process writes (one per peer, set up after shm_fbox_threshold messages).",
    },
    kestrel_transport::btl::CounterSpec {
        name: "shm_fast_boxes_in",
        description: "Fast boxes this process reads.",
    },
    kestrel_transport::btl::CounterSpec {
        name: "shm_corrupt_messages",
        description: "Malformed messages read from shared memory and dropped (memory corruption in a peer).",
    },
];

/// The sizes of each rank's segment on a node of `local_size` ranks with these parameters.
pub fn segment_geometry(params: &Params, local_size: usize) -> Geometry {
    let frag_count = params::FRAG_COUNT.get(params) as usize;
    // Every fragment of every local rank (plus its returns) fits in any queue at once, so a
    // queue is full only transiently.
    let fifo_capacity = (2 * frag_count * local_size).next_power_of_two().max(64);
    // A pool of outgoing fast boxes, not one per peer: per-rank memory stays bounded on a
    // large node (at most shm_fbox_max, and never more than there are peers).
    let fbox_slots = (params::FBOX_MAX.get(params) as usize)
        .min(local_size.saturating_sub(1))
        .min(segment::MAX_FBOX_SLOTS);
    Geometry {
        local_size,
        fifo_capacity,
        fbox_size: (params::FBOX_SIZE.get(params) as usize).next_power_of_two(),
        fbox_slots,
        frag_count,
        // A fragment starts with a header word that is accessed atomically: a size that is not
        // a multiple of 8 would misalign every other one, so it is rounded up.
        frag_size: (params::FRAG_SIZE.get(params) as usize).next_multiple_of(8),
    }
}

impl ShmBtl {
    /// The card peers need to map this process's segment.
    pub fn own_card(&self) -> ShmCard {
        ShmCard {
            local_rank: self.me_local as u32,
            path: self.path.display().to_string(),
        }
    }

    /// Whether `rank` is on this node (one of the ranks the segment was created for).
    pub fn is_local(&self, rank: u32) -> bool {
        self.local(rank).is_some()
    }

    fn local(&self, rank: u32) -> Option<usize> {
        match self.local_of.get(rank as usize) {
            Some(&l) if l != NOT_LOCAL => Some(l as usize),
            _ => None,
        }
    }

    /// Creates this rank's segment. `node_ranks` are the job ranks on this node in increasing
    /// order (this rank among them); `job_id` names the files.
    pub fn new(
        params: &Params,
        rank: u32,
        node_ranks: &[u32],
        job_id: &str,
    ) -> Result<(ShmBtl, ShmCard), String> {
        let safe_job = kestrel_transport::component::file_safe(job_id);
        Self::with_file_name(
            params,
            rank,
            node_ranks,
            &format!("kestrel.{safe_job}.shm.{rank}"),
        )
    }

    /// [`ShmBtl::new`] with the segment's file name given (one path component, which should
    /// start with `kestrel.<job>.` so the launcher's clean-up finds it). Peers are identified
    /// by the numbers in `node_ranks`, whatever numbering the caller uses, as long as every
    /// process of the node agrees on their order.
    pub fn with_file_name(
        params: &Params,
        rank: u32,
        node_ranks: &[u32],
        file_name: &str,
    ) -> Result<(ShmBtl, ShmCard), String> {
        if file_name.is_empty() || file_name.contains('/') || file_name.contains('\0') {
            return Err(format!(
                "shm: segment file name '{file_name}' must be one non-empty path component"
            ));
        }
        let me_local = node_ranks.iter().position(|&r| r == rank).ok_or_else(|| {
            format!("shm: rank {rank} is not among its node's ranks {node_ranks:?}")
        })?;
        let local_size = node_ranks.len();
        let geometry = segment_geometry(params, local_size);
        let frag_size = geometry.frag_size;
        let fifo_capacity = geometry.fifo_capacity;
        let layout = geometry.layout();
        let dir = PathBuf::from(params::DIR.get(params));
        let (path, me) = segment::create(&dir, file_name, &layout).map_err(|e| e.0)?;
        let fbox_max = params::FBOX_MAX.get(params) as usize;
        segment::write_header(
            &me,
            &layout,
            me_local,
            std::process::id(),
            cma::probe_addr(),
            fbox_max,
        );
        let single_copy = match params::SINGLE_COPY.get(params).as_str() {
            "cma" => SingleCopy::Cma,
            "none" => SingleCopy::Off,
            _ => SingleCopy::Auto,
        };
        let eager = (params::EAGER_LIMIT.get(params) as usize).min(frag_size);
        let card = ShmCard {
            local_rank: me_local as u32,
            path: path.display().to_string(),
        };
        let btl = ShmBtl {
            rank,
            me_local,
            globals: node_ranks.to_vec(),
            local_of: {
                let max = node_ranks.iter().copied().max().unwrap_or(0) as usize;
                let mut v = vec![NOT_LOCAL; max + 1];
                for (i, &r) in node_ranks.iter().enumerate() {
                    v[r as usize] = i as u32;
                }
                v
            },
            queue: fifo::Consumer::new(layout.fifo_off, fifo_capacity),
            free: (0..geometry.frag_count as u32).rev().collect(),
            free_fbox_slots: (0..geometry.fbox_slots as u32).rev().collect(),
            pending_returns: Vec::new(),
            out: (0..local_size).map(|_| OutBox::default()).collect(),
            inboxes: Vec::new(),
            cards: vec![None; local_size],
            peers: (0..local_size).map(|_| None).collect(),
            me,
            layout,
            path,
            single_copy,
            fbox_threshold: params::FBOX_THRESHOLD.get(params) as u64,
            limits: Limits {
                eager_limit: eager,
                max_send: frag_size,
                latency_ns: 300,
                bandwidth_mbps: 40_000,
                exclusivity: 1000,
                get: single_copy != SingleCopy::Off,
            },
            fallback_announced: false,
            corrupt: 0,
            sends: 0,
        };
        tracing::debug!(target: "shm", segment = %btl.path.display(), bytes = layout.total, local_size, "segment created");
        Ok((btl, card))
    }

    /// Records a local peer's card (from the modex).
    pub fn add_peer(&mut self, rank: u32, card: &ShmCard) -> Result<(), String> {
        let local = self
            .local(rank)
            .ok_or_else(|| format!("shm: rank {rank} published a card but is not on this node"))?;
        if card.local_rank as usize != local {
            return Err(format!(
                "shm: rank {rank} says it is local rank {} but the node order makes it {local}",
                card.local_rank
            ));
        }
        self.cards[local] = Some(card.path.clone());
        // Mapped now, not at the first message: once every peer has mapped a segment its name
        // is removed, so a job killed outright (SIGKILL of mpiexec or srun, whose ranks get no
        // chance to clean up) leaves no file once start-up is over.
        self.attach(local)
    }

    /// Tells this process's segment how many local peers will map it (those whose cards
    /// [`ShmBtl::add_peer`] was given: the transport set hands cards symmetrically), once,
    /// after the last `add_peer`. The segment's name is removed as soon as all of them have
    /// mapped it, by whichever of them or this call comes last.
    pub fn expect_attaches(&mut self, peers: usize) {
        let before = self.me.fetch_add(
            segment::ATTACH_COUNT,
            segment::ATTACH_DONE - peers as u64,
            Relaxed,
        );
        if before + segment::ATTACH_DONE - peers as u64 == segment::ATTACH_DONE {
            let _ = std::fs::remove_file(&self.path);
        }
    }

    /// Messages from peers that were malformed and dropped (a sign of memory corruption).
    pub fn corrupt_messages(&self) -> u64 {
        self.corrupt
    }

    /// Maps local peer `local`'s segment unless it is already mapped (the common case, kept
    /// inline on the send path).
    #[inline]
    fn attach(&mut self, local: usize) -> Result<(), String> {
        if self.peers[local].is_some() {
            return Ok(());
        }
        self.attach_new(local)
    }

    #[inline(never)]
    fn attach_new(&mut self, local: usize) -> Result<(), String> {
        if self.peers[local].is_some() {
            return Ok(());
        }
        let global = self.globals[local];
        let path = self.cards[local].clone().ok_or_else(|| {
            format!("shm: no segment card from local rank {local} (rank {global})")
        })?;
        let map = segment::attach(std::path::Path::new(&path)).map_err(|e| {
            format!("shm: cannot map the segment {path} of rank {global}: {e}; was it removed while the job ran (a cleaner of /dev/shm)?")
        })?;
        let header = segment::read_header(&map, self.globals.len())
            .map_err(|e| format!("shm: segment {path} of rank {global} is unusable: {e}"))?;
        if header.owner != local {
            return Err(format!(
                "shm: segment {path} belongs to local rank {}, expected {local}",
                header.owner
            ));
        }
        // The last of the expected mappers removes the name (see `expect_attaches`): from then
        // on nothing is left in the directory even if every process of the job is killed.
        if map.fetch_add(segment::ATTACH_COUNT, 1, Relaxed) + 1 == segment::ATTACH_DONE {
            let _ = std::fs::remove_file(&path);
        }
        let cma = match self.single_copy {
            SingleCopy::Off => false,
            SingleCopy::Auto | SingleCopy::Cma => match cma::probe(header.pid, header.probe_addr) {
                Ok(()) => true,
                Err(e) if self.single_copy == SingleCopy::Cma => {
                    return Err(format!(
                        "shm: single copy to rank {global} (pid {}) is not permitted ({e}), and \
                         KESTREL_SHM_SINGLE_COPY=cma requires it; allow ptrace between the ranks \
                         (kernel.yama.ptrace_scope=0, or CAP_SYS_PTRACE in containers) or set \
                         KESTREL_SHM_SINGLE_COPY=auto",
                        header.pid
                    ));
                }
                Err(e) => {
                    if !self.fallback_announced {
                        self.fallback_announced = true;
                        tracing::info!(target: "shm", "single copy (process_vm_readv) to rank {global} refused ({e}); large messages use the pipelined copy through shared memory");
                    }
                    false
                }
            },
        };
        self.peers[local] = Some(Peer {
            map: Arc::new(map),
            header,
            global,
            cma,
        });
        Ok(())
    }

    fn maybe_setup_fbox(&mut self, local: usize) {
        let fbox_size = self.layout.geometry.fbox_size;
        let ob = &mut self.out[local];
        if ob.producer.is_some() || ob.denied || ob.sends < self.fbox_threshold {
            return;
        }
        let Some(peer) = self.peers[local].as_ref() else {
            return;
        };
        let Some(&slot) = self.free_fbox_slots.last() else {
            // Every box of this rank's pool carries traffic to another peer.
            ob.denied = true;
            return;
        };
        let Some(&idx) = self.free.last() else { return };
        // Take one unit of the receiver's fast-box budget, which bounds its polling work.
        let mut avail = peer.map.load(segment::FBOX_AVAILABLE, Acquire);
        loop {
            if avail == 0 {
                ob.denied = true;
                return;
            }
            match peer.map.compare_exchange(
                segment::FBOX_AVAILABLE,
                avail,
                avail - 1,
                Relaxed,
                Acquire,
            ) {
                Ok(_) => break,
                Err(now) => avail = now,
            }
        }
        let off = self.layout.frag(idx as usize);
        // The set-up fragment names the slot of this segment that carries the box.
        self.me
            .write_bytes(off + segment::FRAG_HEADER, &u64::from(slot).to_le_bytes());
        self.me
            .store(off, segment::frag_word(8, 0, kind::FBOX_SETUP), Relaxed);
        let item = FragRef {
            returning: false,
            owner: self.me_local,
            index: idx as usize,
        }
        .encode();
        let pl = &peer.header.layout;
        if fifo::push(&*peer.map, pl.fifo_off, pl.geometry.fifo_capacity, item).is_err() {
            peer.map.fetch_add(segment::FBOX_AVAILABLE, 1, Relaxed);
            return;
        }
        self.free.pop();
        self.free_fbox_slots.pop();
        ob.producer = Some(fbox::Producer::new(
            self.layout.fbox(slot as usize),
            fbox_size,
        ));
        tracing::debug!(target: "shm", to = self.globals[local], "fast box set up");
    }

    /// Checks a single-copy access of `len` bytes at `offset` of `remote` and returns the
    /// peer's pid.
    fn single_copy_peer(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        len: usize,
        what: &str,
    ) -> Result<u32, SendError> {
        let l = match self.local(peer) {
            Some(l) if l != self.me_local => l,
            _ => return Err(SendError::Unreachable { peer }),
        };
        if offset + len as u64 > remote.len {
            return Err(SendError::Failed(format!(
                "shm: {what} of {len} bytes at offset {offset} exceeds the {}-byte region rank {peer} exposed",
                remote.len
            )));
        }
        self.attach(l).map_err(SendError::Failed)?;
        self.peers[l]
            .as_ref()
            .map(|p| p.header.pid)
            .ok_or(SendError::Unreachable { peer })
    }

    /// Delivers what fast box `i` holds. In a conversation it stops at the first header in a
    /// cache line not read yet: the sender zeroed it when it published the last entry, so
    /// reading it now would wait for a line transfer that finds nothing, on the critical path
    /// of every ping-pong.
    #[inline]
    fn drain_inbox(&mut self, i: usize, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let sends = self.sends;
        let inbox = &mut self.inboxes[i];
        let mut n = 0;
        let mut corrupt = None;
        for _ in 0..64 {
            match inbox.cons.peek(&*inbox.map) {
                Ok(Some(e)) => {
                    deliver(Incoming {
                        peer: inbox.global,
                        am: (e.tag & 0xff) as u8,
                        data: inbox.map.bytes(e.offset, e.len),
                    });
                    inbox.cons.consume(e);
                    n += 1;
                    // A lone message that ends a line in a conversation (this process sent
                    // something since the box last delivered, as a ping-pong's reply): the
                    // next header starts a line the sender zeroed and will write again only
                    // after our answer, and reading it now would put a line transfer before
                    // that answer. A stream goes on: more entries in this drain, or none
                    // sent in between (a receiver taking a window of messages), where
                    // stopping at every line cost a third of the message rate at 32 B.
                    if n == 1 && sends != inbox.sends_at_delivery && inbox.cons.next_is_new_line() {
                        break;
                    }
                }
                Ok(None) => break,
                Err(c) => {
                    corrupt = Some(c.header);
                    break;
                }
            }
        }
        if n > 0 {
            inbox.sends_at_delivery = sends;
        }
        inbox.cons.publish(&*inbox.map);
        if let Some(h) = corrupt {
            let from = inbox.local;
            self.report_corrupt(from, format!("fast-box header {h:#x}"));
        }
        n
    }

    /// Takes fragments and returned fragments off this process's queue and retries returns
    /// that found the owner's queue full.
    #[inline(never)]
    fn drain_queue(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let mut n = 0;
        let mut corrupt = Vec::new();
        for _ in 0..64 {
            let Some(item) = self.queue.pop(&self.me) else {
                break;
            };
            let Some(r) = FragRef::decode(item, self.globals.len()) else {
                corrupt.push((self.me_local, format!("queue item {item:#x}")));
                continue;
            };
            if r.returning {
                if r.owner == self.me_local && r.index < self.layout.geometry.frag_count {
                    self.free.push(r.index as u32);
                } else {
                    corrupt.push((r.owner, format!("returned fragment {item:#x} is not ours")));
                }
                continue;
            }
            if let Err(e) = self.attach(r.owner) {
                tracing::error!(target: "shm", "{e}");
                continue;
            }
            let Some(peer) = self.peers[r.owner].as_ref() else {
                continue;
            };
            let pl = peer.header.layout;
            if r.index >= pl.geometry.frag_count {
                corrupt.push((
                    r.owner,
                    format!("fragment index {} of {}", r.index, pl.geometry.frag_count),
                ));
                continue;
            }
            let off = pl.frag(r.index);
            match segment::decode_frag_word(peer.map.load(off, Relaxed), pl.geometry.frag_size) {
                Some((len, am, kind::DATA)) => {
                    deliver(Incoming {
                        peer: peer.global,
                        am,
                        data: peer.map.bytes(off + segment::FRAG_HEADER, len),
                    });
                    n += 1;
                }
                Some((8, _, kind::FBOX_SETUP)) => {
                    let mut word = [0u8; 8];
                    peer.map.read_bytes(off + segment::FRAG_HEADER, &mut word);
                    let slot = u64::from_le_bytes(word);
                    let known = self.inboxes.iter().any(|i| i.local == r.owner);
                    if slot < pl.geometry.fbox_slots as u64 && !known {
                        let cons =
                            fbox::Consumer::new(pl.fbox(slot as usize), pl.geometry.fbox_size);
                        self.inboxes.push(Inbox {
                            local: r.owner,
                            global: peer.global,
                            map: peer.map.clone(),
                            cons,
                            sends_at_delivery: 0,
                        });
                    } else {
                        corrupt.push((
                            r.owner,
                            format!(
                                "fast-box set-up for slot {slot} of {} (second set-up: {known})",
                                pl.geometry.fbox_slots
                            ),
                        ));
                    }
                }
                Some((len, _, kind)) => {
                    corrupt.push((r.owner, format!("fragment of kind {kind} with {len} bytes")))
                }
                None => corrupt.push((
                    r.owner,
                    format!("fragment header {:#x}", peer.map.load(off, Relaxed)),
                )),
            }
            let back = FragRef {
                returning: true,
                ..r
            }
            .encode();
            if fifo::push(&*peer.map, pl.fifo_off, pl.geometry.fifo_capacity, back).is_err() {
                self.pending_returns.push((r.owner, back));
            }
        }
        if !self.pending_returns.is_empty() {
            let pending = std::mem::take(&mut self.pending_returns);
            for (owner, back) in pending {
                let Some(peer) = self.peers[owner].as_ref() else {
                    continue;
                };
                let pl = &peer.header.layout;
                if fifo::push(&*peer.map, pl.fifo_off, pl.geometry.fifo_capacity, back).is_err() {
                    self.pending_returns.push((owner, back));
                }
            }
        }
        for (from, what) in corrupt {
            self.report_corrupt(from, what);
        }
        n
    }

    /// The send path for messages a fast box does not take: a fragment of this process's
    /// segment, referenced through the receiver's queue.
    fn send_through_queue(
        &mut self,
        local: usize,
        peer: u32,
        am: u8,
        header: &[u8],
        payload: &[u8],
    ) -> Result<(), SendError> {
        let len = header.len() + payload.len();
        if len > self.limits.max_send {
            return Err(SendError::TooLarge {
                len,
                max: self.limits.max_send,
            });
        }
        self.attach(local).map_err(SendError::Failed)?;
        let Some(idx) = self.free.pop() else {
            return Err(SendError::WouldBlock);
        };
        let off = self.layout.frag(idx as usize);
        self.me.write_bytes(off + segment::FRAG_HEADER, header);
        self.me
            .write_bytes(off + segment::FRAG_HEADER + header.len(), payload);
        self.me
            .store(off, segment::frag_word(len, am, kind::DATA), Relaxed);
        let item = FragRef {
            returning: false,
            owner: self.me_local,
            index: idx as usize,
        }
        .encode();
        let Some(peer_seg) = self.peers[local].as_ref() else {
            self.free.push(idx);
            return Err(SendError::Failed(format!(
                "shm: rank {peer} is not attached"
            )));
        };
        let pl = &peer_seg.header.layout;
        if fifo::push(&*peer_seg.map, pl.fifo_off, pl.geometry.fifo_capacity, item).is_err() {
            self.free.push(idx);
            return Err(SendError::WouldBlock);
        }
        self.out[local].sends += 1;
        self.maybe_setup_fbox(local);
        Ok(())
    }

    #[cold]
    fn report_corrupt(&mut self, from: usize, what: String) {
        self.corrupt += 1;
        tracing::error!(target: "shm", "dropped a malformed message from rank {}: {what}; this points to memory corruption in that process", self.globals[from]);
    }
}

fn single_copy_error(call: &str, peer: u32, pid: u32, e: nix::Error) -> SendError {
    SendError::Failed(format!(
        "shm: {call} rank {peer} (pid {pid}) failed: {e}; if it is EPERM, ptrace is restricted: \
         set KESTREL_SHM_SINGLE_COPY=none"
    ))
}

impl Drop for ShmBtl {
    fn drop(&mut self) {
        // Normally the last attaching peer removed the name already.
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Btl for ShmBtl {
    fn name(&self) -> &'static str {
        "shm"
    }

    fn limits(&self) -> Limits {
        self.limits
    }

    fn reaches(&self, peer: u32) -> bool {
        peer != self.rank && self.local(peer).is_some()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        let v = [
            self.out.iter().map(|o| o.sends).sum(),
            self.out.iter().filter(|o| o.producer.is_some()).count() as u64,
            self.inboxes.len() as u64,
            self.corrupt,
        ];
        COUNTERS.iter().map(|c| c.name).zip(v).collect()
    }

    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let local = match self.local(peer) {
            Some(l) if l != self.me_local => l,
            _ => return Err(SendError::Unreachable { peer }),
        };
        self.sends = self.sends.wrapping_add(1);
        // A fast box exists only once the peer is attached, and takes only messages far
        // below `max_send`: the common small send is this one branch.
        if let Some(p) = self.out[local].producer.as_mut() {
            if p.push(&self.me, 0x100 | u16::from(am), &[header, payload])
                .is_ok()
            {
                return Ok(());
            }
        }
        self.send_through_queue(local, peer, am, header, payload)
    }

    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        // The idle sweep is what a waiting rank runs over and over: keep it to one load per
        // fast box and one for the queue head, with the rest out of line.
        let mut n = 0;
        for i in 0..self.inboxes.len() {
            n += self.drain_inbox(i, deliver);
        }
        if self.queue.ready(&self.me) || !self.pending_returns.is_empty() {
            n += self.drain_queue(deliver);
        }
        n
    }

    fn can_get(&mut self, peer: u32) -> bool {
        match self.local(peer) {
            Some(l) if l != self.me_local => {
                self.attach(l).is_ok() && self.peers[l].as_ref().is_some_and(|p| p.cma)
            }
            _ => false,
        }
    }

    fn can_put(&mut self, peer: u32) -> bool {
        // process_vm_writev needs the same permission as process_vm_readv.
        self.can_get(peer)
    }

    fn put(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &[u8],
    ) -> Result<(), SendError> {
        let pid = self.single_copy_peer(peer, remote, offset, local.len(), "put")?;
        cma::write(pid, remote.addr + offset, local)
            .map_err(|e| single_copy_error("process_vm_writev to", peer, pid, e))
    }

    fn get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &mut [u8],
    ) -> Result<(), SendError> {
        let pid = self.single_copy_peer(peer, remote, offset, local.len(), "get")?;
        cma::read(pid, remote.addr + offset, local)
            .map_err(|e| single_copy_error("process_vm_readv from", peer, pid, e))
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use kestrel_transport::conformance;
    use std::collections::HashMap;

    fn params(extra: &[(&str, &str)]) -> Params {
        let map: HashMap<String, String> = extra
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Params::resolve(&crate::params::specs(), &|k| map.get(k).cloned(), &[]).unwrap()
    }

    /// `n` endpoints of one node inside this process (single copy reads our own memory).
    fn node(n: u32, extra: &[(&str, &str)]) -> Vec<Box<dyn Btl>> {
        node_of_job(
            n,
            extra,
            &format!("test{}x{}", std::process::id(), NEXT.fetch_add(1, Relaxed)),
        )
    }

    fn node_of_job(n: u32, extra: &[(&str, &str)], job: &str) -> Vec<Box<dyn Btl>> {
        let p = params(extra);
        let ranks: Vec<u32> = (0..n).collect();
        let mut btls = Vec::new();
        let mut cards = Vec::new();
        for r in 0..n {
            let (b, c) = ShmBtl::new(&p, r, &ranks, job).unwrap();
            btls.push(b);
            cards.push(c);
        }
        for b in &mut btls {
            for (r, c) in cards.iter().enumerate() {
                if r as u32 != b.rank {
                    b.add_peer(r as u32, c).unwrap();
                }
            }
            b.expect_attaches(n as usize - 1);
        }
        btls.into_iter()
            .map(|b| Box::new(b) as Box<dyn Btl>)
            .collect()
    }

    #[test]
    fn an_odd_fragment_size_keeps_every_fragment_aligned() {
        // Four fragments in flight at once: with 5001-byte fragments unrounded, the second
        // one's header word was misaligned and the first access to it panicked.
        let mut eps = node(
            2,
            &[
                ("KESTREL_SHM_FRAG_SIZE", "5001"),
                ("KESTREL_SHM_FBOX_THRESHOLD", "1000"),
            ],
        );
        for i in 0..4u8 {
            eps[0].send(1, i, b"hdr", &[i; 5000 - 3]).unwrap();
        }
        let mut got = Vec::new();
        for _ in 0..100 {
            eps[1].progress(&mut |m| got.push((m.am, m.data.len())));
            eps[0].progress(&mut |_| {});
        }
        assert_eq!(got, (0..4u8).map(|i| (i, 5000)).collect::<Vec<_>>());
    }

    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

    #[test]
    fn conforms_with_fast_boxes() {
        conformance::run("shm", &|| node(3, &[]));
    }

    #[test]
    fn conforms_without_fast_boxes_or_single_copy() {
        conformance::run("shm (queue only)", &|| {
            node(
                2,
                &[
                    ("KESTREL_SHM_FBOX_MAX", "0"),
                    ("KESTREL_SHM_SINGLE_COPY", "none"),
                ],
            )
        });
    }

    #[test]
    fn counters_report_the_declared_names_and_fast_boxes_after_the_threshold() {
        let mut eps = node(2, &[("KESTREL_SHM_FBOX_THRESHOLD", "2")]);
        let names: Vec<&str> = COUNTERS.iter().map(|c| c.name).collect();
        let get = |b: &dyn Btl, name: &str| {
            let c = b.counters();
            assert_eq!(c.iter().map(|(n, _)| *n).collect::<Vec<_>>(), names);
            c.iter().find(|(n, _)| *n == name).unwrap().1
        };
        assert_eq!(get(&*eps[0], "shm_queue_sends"), 0);
        for _ in 0..4 {
            eps[0].send(1, 1, b"hdr", b"payload").unwrap();
            eps[1].progress(&mut |_| {});
            eps[0].progress(&mut |_| {});
        }
        // The first two go through the queue; then a fast box takes over.
        assert_eq!(get(&*eps[0], "shm_queue_sends"), 2);
        assert_eq!(get(&*eps[0], "shm_fast_boxes_out"), 1);
        assert_eq!(get(&*eps[1], "shm_fast_boxes_in"), 1);
        assert_eq!(get(&*eps[1], "shm_corrupt_messages"), 0);
    }

    #[test]
    fn a_full_fast_box_pool_leaves_the_other_peers_on_the_queue() {
        // One slot per sender: rank 0's traffic to ranks 1, 2 and 3 all arrives, only the
        // first peer past the threshold gets a box, and the segments stay the pool's size.
        let mut eps = node(
            4,
            &[
                ("KESTREL_SHM_FBOX_THRESHOLD", "1"),
                ("KESTREL_SHM_FBOX_MAX", "1"),
            ],
        );
        let get =
            |b: &dyn Btl, name: &str| b.counters().iter().find(|(n, _)| *n == name).unwrap().1;
        let mut got = vec![0u32; 4];
        for round in 0..6u8 {
            for to in 1..4u32 {
                eps[0].send(to, 1, b"h", &[round]).unwrap();
                for (r, ep) in eps.iter_mut().enumerate().skip(1) {
                    ep.progress(&mut |m| {
                        assert_eq!((m.peer, m.data[1]), (0, round));
                        got[r] += 1;
                    });
                }
                eps[0].progress(&mut |_| {});
            }
        }
        assert_eq!(got, vec![0, 6, 6, 6]);
        assert_eq!(get(&*eps[0], "shm_fast_boxes_out"), 1);
        let ins: u64 = (1..4).map(|r| get(&*eps[r], "shm_fast_boxes_in")).sum();
        assert_eq!(ins, 1);
        assert_eq!(
            (1..4)
                .map(|r| get(&*eps[r], "shm_corrupt_messages"))
                .sum::<u64>(),
            0
        );
    }

    #[test]
    fn segments_are_unlinked_once_every_expected_peer_mapped_them() {
        // A job of its own: other tests of this process create segments concurrently.
        let job = format!("unlink{}", std::process::id());
        let names = || -> usize {
            std::fs::read_dir("/dev/shm")
                .unwrap()
                .flatten()
                .filter(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with(&format!("kestrel.{job}."))
                })
                .count()
        };
        let p = params(&[]);
        let ranks = [0u32, 1, 2];
        let made: Vec<(ShmBtl, ShmCard)> = ranks
            .iter()
            .map(|&r| ShmBtl::new(&p, r, &ranks, &job).unwrap())
            .collect();
        let (mut btls, cards): (Vec<ShmBtl>, Vec<ShmCard>) = made.into_iter().unzip();
        assert_eq!(names(), 3);
        // Rank 0 maps both peers and says it expects 2 mappers before anyone mapped it.
        btls[0].add_peer(1, &cards[1]).unwrap();
        btls[0].add_peer(2, &cards[2]).unwrap();
        btls[0].expect_attaches(2);
        assert_eq!(names(), 3, "nobody has mapped every segment yet");
        // Rank 1 maps both (its own count arrives before its expectation)...
        btls[1].add_peer(0, &cards[0]).unwrap();
        btls[1].add_peer(2, &cards[2]).unwrap();
        assert_eq!(names(), 3, "rank 0's segment still lacks rank 2");
        btls[1].expect_attaches(2);
        // ...and rank 2's first mapping completes rank 0's count, its last its own
        // expectation rank 1's.
        btls[2].add_peer(0, &cards[0]).unwrap();
        assert_eq!(names(), 2, "rank 0's segment has all its mappers");
        btls[2].add_peer(1, &cards[1]).unwrap();
        assert_eq!(names(), 1, "rank 1's segment has all its mappers");
        btls[2].expect_attaches(2);
        assert_eq!(
            names(),
            0,
            "every segment is unlinked once start-up is over"
        );
        // The mappings still carry traffic.
        let mut eps: Vec<Box<dyn Btl>> = btls
            .into_iter()
            .map(|b| Box::new(b) as Box<dyn Btl>)
            .collect();
        eps[2].send(0, 1, b"x", b"").unwrap();
        let mut got = 0;
        for _ in 0..100 {
            eps[0].progress(&mut |_| got += 1);
        }
        assert_eq!(got, 1);
    }
}
