//! The transport contract: what every byte-transfer layer (BTL) offers the messaging layer.
//!
//! A BTL moves opaque messages (an active-message tag plus bytes) between this process and
//! peers identified by their job rank. The contract, method by method:
//!
//! * [`Btl::send`] copies `header` then `payload` out before returning `Ok`: the caller may
//!   reuse both buffers at once. A message is delivered whole, at most once, to the peer's
//!   [`Btl::progress`]. Messages to one peer may be delivered out of order (the messaging
//!   layer restores MPI order with its own sequence numbers). `Err(SendError::WouldBlock)`
//!   means "no resources now": nothing was sent, and the caller keeps the message on its
//!   pending queue and retries after calling `progress` (which is what frees resources).
//!   A single send carries at most [`Limits::max_send`] bytes in all.
//! * [`Btl::progress`] hands every message that has arrived to `deliver`, in the order the
//!   transport saw them, and returns how many. The bytes passed to `deliver` are valid only
//!   during the call; `deliver` must not call back into the same BTL (queue replies instead).
//! * [`Btl::get`] (when [`Limits::get`] is true) copies bytes from a peer's memory that the
//!   peer described with [`RemoteRegion`], in one copy, synchronously.
//!
//! A BTL never interprets the messaging layer's headers, and never blocks.

use std::fmt;

/// What a transport can do and what it costs; the messaging layer picks protocols from these.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Largest header+payload sent as one eager message.
    pub eager_limit: usize,
    /// Largest header+payload of any single send (pipelined fragments).
    pub max_send: usize,
    /// One-way latency estimate, nanoseconds.
    pub latency_ns: u32,
    /// Bandwidth estimate, Mb/s.
    pub bandwidth_mbps: u32,
    /// When several transports reach a peer, the highest exclusivity wins.
    pub exclusivity: u32,
    /// Supports [`Btl::get`] (single copy from the peer's memory).
    pub get: bool,
}

/// Why a send did not happen.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Out of resources; retry after progress.
    WouldBlock,
    /// This transport cannot reach the peer.
    Unreachable {
        /// The peer.
        peer: u32,
    },
    /// The message is larger than [`Limits::max_send`].
    TooLarge {
        /// Bytes offered.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The transport failed for this peer (names the resource and the cause).
    Failed(String),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::WouldBlock => write!(f, "transport out of resources (retry after progress)"),
            SendError::Unreachable { peer } => write!(f, "transport cannot reach rank {peer}"),
            SendError::TooLarge { len, max } => {
                write!(
                    f,
                    "message of {len} bytes exceeds the transport's maximum send of {max}"
                )
            }
            SendError::Failed(why) => write!(f, "{why}"),
        }
    }
}

impl std::error::Error for SendError {}

/// A region of a process's memory that peers may read with [`Btl::get`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RemoteRegion {
    /// Address in the owner's address space.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// One delivered message.
#[derive(Debug)]
pub struct Incoming<'a> {
    /// Sender's job rank.
    pub peer: u32,
    /// Active-message tag chosen by the sender.
    pub am: u8,
    /// Header and payload as sent, contiguous.
    pub data: &'a [u8],
}

/// The byte-transfer layer contract (see the module doc for the rules).
pub trait Btl {
    /// Component name (`self`, `shm`, `usnic`).
    fn name(&self) -> &'static str;
    /// Limits and capabilities.
    fn limits(&self) -> Limits;
    /// Whether this transport can carry messages to `peer`.
    fn reaches(&self, peer: u32) -> bool;
    /// Sends `header` followed by `payload` to `peer` with active-message tag `am`.
    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError>;
    /// Delivers arrived messages; returns how many.
    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize;
    /// Whether the transport's data moves only when the kernel gets CPU time (kernel sockets,
    /// as with libfabric's `udp` provider): then a rank waiting for messages must yield the
    /// CPU between polls, or its own spinning starves the packet processing it waits for.
    fn needs_kernel_time(&self) -> bool {
        false
    }
    /// Whether everything this transport sent has been acknowledged (always, for transports
    /// whose sends complete locally).
    fn quiet(&self) -> bool {
        true
    }
    /// Called repeatedly at finalize, after the messaging layer's final barrier, until it
    /// returns true: flush what is unacknowledged. A transport must not fail the job from
    /// here on when peers stop answering (they have finalized); it returns true instead.
    fn quiesce(&mut self) -> bool {
        self.quiet()
    }
    /// Whether [`Btl::get`] from `peer` works (probed per peer where permissions can differ).
    fn can_get(&mut self, peer: u32) -> bool {
        self.limits().get && self.reaches(peer)
    }
    /// Describes `buf` so that a peer can [`Btl::get`] from it.
    fn expose(&self, buf: &[u8]) -> RemoteRegion {
        RemoteRegion {
            addr: buf.as_ptr() as u64,
            len: buf.len() as u64,
        }
    }
    /// Whether [`Btl::put`] to `peer` works.
    fn can_put(&mut self, peer: u32) -> bool {
        let _ = peer;
        false
    }
    /// Copies `local` into the peer's `remote` region starting at `offset`, in one copy.
    fn put(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &[u8],
    ) -> Result<(), SendError> {
        let _ = (remote, offset, local);
        Err(SendError::Failed(format!(
            "the {} transport has no single-copy put (asked for rank {peer})",
            self.name()
        )))
    }
    /// Copies `local.len()` bytes starting at `offset` of the peer's `remote` region.
    fn get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &mut [u8],
    ) -> Result<(), SendError> {
        let _ = (remote, offset, local);
        Err(SendError::Failed(format!(
            "the {} transport has no single-copy get (asked for rank {peer})",
            self.name()
        )))
    }
}

/// The `self` BTL: a rank sending to itself. Messages are copied into a local queue.
#[derive(Debug)]
pub struct SelfBtl {
    rank: u32,
    queue: std::collections::VecDeque<(u8, Vec<u8>)>,
    spare: Vec<Vec<u8>>,
}

impl SelfBtl {
    /// The loopback transport of `rank`.
    pub fn new(rank: u32) -> Self {
        SelfBtl {
            rank,
            queue: Default::default(),
            spare: Vec::new(),
        }
    }
}

impl Btl for SelfBtl {
    fn name(&self) -> &'static str {
        "self"
    }
    fn limits(&self) -> Limits {
        Limits {
            eager_limit: usize::MAX / 2,
            max_send: usize::MAX / 2,
            latency_ns: 0,
            bandwidth_mbps: 1_000_000,
            exclusivity: u32::MAX,
            get: false,
        }
    }
    fn reaches(&self, peer: u32) -> bool {
        peer == self.rank
    }
    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        if peer != self.rank {
            return Err(SendError::Unreachable { peer });
        }
        // Reuse delivered buffers: a rank talking to itself in a loop should not allocate.
        let mut buf = self.spare.pop().unwrap_or_default();
        buf.clear();
        buf.extend_from_slice(header);
        buf.extend_from_slice(payload);
        self.queue.push_back((am, buf));
        Ok(())
    }
    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let mut n = 0;
        // Only what was queued before this call: a delivery may lead to more self-sends.
        for _ in 0..self.queue.len() {
            let Some((am, buf)) = self.queue.pop_front() else {
                break;
            };
            deliver(Incoming {
                peer: self.rank,
                am,
                data: &buf,
            });
            self.spare.push(buf);
            n += 1;
        }
        n
    }
}

/// The conformance suite every transport must pass. A transport crate calls
/// [`conformance::run`] from its tests with a function that builds a fresh set of endpoints
/// (endpoint `i` is rank `i`); tests of capabilities the transport lacks are skipped.
pub mod conformance {
    use super::*;

    /// A delivered message as the suite records it: (receiver, sender, am tag, bytes).
    type Got = (u32, u32, u8, Vec<u8>);

    /// Drives `progress` on every endpoint until `until` holds or 100,000 rounds pass.
    fn drive(eps: &mut [Box<dyn Btl>], got: &mut Vec<Got>, until: &dyn Fn(&[Got]) -> bool) {
        for _ in 0..100_000 {
            if until(got) {
                return;
            }
            for (me, ep) in eps.iter_mut().enumerate() {
                ep.progress(&mut |m| got.push((me as u32, m.peer, m.am, m.data.to_vec())));
            }
        }
        panic!(
            "conformance: messages not delivered after 100000 progress rounds (got {})",
            got.len()
        );
    }

    fn pattern(seed: usize, len: usize) -> Vec<u8> {
        (0..len)
            .map(|i| (i.wrapping_mul(131) ^ seed) as u8)
            .collect()
    }

    /// Runs the suite against a registered component: each round opens `ranks` modules in
    /// this process as processes of one node (the component's own `open`, cards exchanged
    /// through `card`/`add_peers` as the transport set does). Returns `false`, running
    /// nothing, when the component declines here (no device), with the reason printed.
    pub fn run_component(
        component: &dyn crate::component::Component,
        params: &crate::params::Params,
        ranks: u32,
    ) -> bool {
        use crate::component::{OpenContext, OpenError};
        use crate::set::PeerCard;
        use std::sync::atomic::{AtomicU32, Ordering};
        static ROUND: AtomicU32 = AtomicU32::new(0);
        // A loopback reaches only its own process: one module is the whole suite for it.
        let ranks = match component.reach() {
            crate::component::Reach::Process => 1,
            _ => ranks,
        };
        let nodes: Vec<String> = (0..ranks).map(|_| "conformance-node".to_string()).collect();
        let open_all = || -> Result<Vec<Box<dyn crate::component::Module>>, OpenError> {
            let round = ROUND.fetch_add(1, Ordering::Relaxed);
            let prefix = format!("kestrel.conformance-{}-{round}.", std::process::id());
            let set_id = prefix.clone();
            (0..ranks)
                .map(|me| {
                    let cx = OpenContext {
                        me,
                        nodes: &nodes,
                        set_id: &set_id,
                        file_prefix: &prefix,
                    };
                    component.open(params, &cx)
                })
                .collect()
        };
        match open_all() {
            Err(OpenError::Declined(why)) => {
                eprintln!(
                    "conformance: {} declined here, skipped: {why}",
                    component.name()
                );
                return false;
            }
            Err(OpenError::Failed(why)) => {
                panic!("conformance: {} failed to open: {why}", component.name())
            }
            Ok(_) => {}
        }
        let make = || -> Vec<Box<dyn Btl>> {
            let mut mods = open_all().expect("opened once, so opens again");
            let cards: Vec<Vec<u8>> = mods.iter().map(|m| m.card()).collect();
            for (me, m) in mods.iter_mut().enumerate() {
                let peer_cards: Vec<PeerCard<'_>> = cards
                    .iter()
                    .enumerate()
                    .map(|(p, c)| {
                        if p == me {
                            PeerCard::Skip
                        } else {
                            PeerCard::Card(c)
                        }
                    })
                    .collect();
                for (p, r) in m.add_peers(0x5eed, &peer_cards).into_iter().enumerate() {
                    if let Err(why) = r {
                        assert!(
                            p == me,
                            "conformance: {} module {me} cannot reach {p}: {why}",
                            component.name()
                        );
                    }
                }
            }
            mods.into_iter().map(|m| m as Box<dyn Btl>).collect()
        };
        run(component.name(), &make);
        true
    }

    /// Runs every applicable check. `make` builds endpoints; `ranks` is how many it builds.
    pub fn run(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
        delivers_whole_messages_of_every_size(name, make);
        back_pressure_is_would_block_and_recovers(name, make);
        unreachable_and_oversized_are_errors(name, make);
        get_copies_from_exposed_memory(name, make);
    }

    fn pairs(eps: &[Box<dyn Btl>]) -> Vec<(u32, u32)> {
        let n = eps.len() as u32;
        let mut v = Vec::new();
        for a in 0..n {
            for b in 0..n {
                if eps[a as usize].reaches(b) {
                    v.push((a, b));
                }
            }
        }
        v
    }

    /// Every size from 0 to the eager limit's neighbourhood, between every reachable pair.
    pub fn delivers_whole_messages_of_every_size(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
        let mut eps = make();
        let max = eps[0].limits().max_send.min(256 * 1024);
        let eager = eps[0].limits().eager_limit.min(max);
        let mut sizes = vec![0usize, 1, 7, 8, 63, 64, 65, 1000, 4096];
        for s in [
            eager.saturating_sub(9),
            eager.saturating_sub(8),
            eager,
            max - 8,
        ] {
            sizes.push(s);
        }
        sizes.retain(|&s| s + 8 <= max);
        for (a, b) in pairs(&eps) {
            let mut want = Vec::new();
            for (i, &len) in sizes.iter().enumerate() {
                let header = (i as u64).to_le_bytes();
                let payload = pattern(i + a as usize, len);
                loop {
                    match eps[a as usize].send(b, 3, &header, &payload) {
                        Ok(()) => break,
                        Err(SendError::WouldBlock) => {
                            let mut sink = Vec::new();
                            drive(&mut eps, &mut sink, &|g: &[_]| !g.is_empty());
                            want.retain(|w: &Vec<u8>| !sink.iter().any(|(_, _, _, d)| d == w));
                        }
                        Err(e) => panic!("{name}: send {len} bytes {a}->{b}: {e}"),
                    }
                }
                let mut whole = header.to_vec();
                whole.extend_from_slice(&payload);
                want.push(whole);
            }
            let mut got = Vec::new();
            let n = want.len();
            drive(&mut eps, &mut got, &|g: &[_]| g.len() >= n);
            for (to, from, am, data) in &got {
                assert_eq!((*to, *from, *am), (b, a, 3), "{name}: wrong envelope");
                assert!(
                    want.contains(data),
                    "{name}: corrupted message of {} bytes {a}->{b}",
                    data.len()
                );
            }
            let mut seen: Vec<&Vec<u8>> = got.iter().map(|g| &g.3).collect();
            seen.sort();
            seen.dedup();
            assert_eq!(seen.len(), n, "{name}: duplicates or losses {a}->{b}");
        }
    }

    /// Flooding one peer without progress ends in WouldBlock (or the transport absorbs it all);
    /// after progress, everything sent arrives and sending works again.
    pub fn back_pressure_is_would_block_and_recovers(
        name: &str,
        make: &dyn Fn() -> Vec<Box<dyn Btl>>,
    ) {
        let mut eps = make();
        let Some(&(a, b)) = pairs(&eps)
            .iter()
            .find(|(a, b)| a != b)
            .or(pairs(&eps).first())
        else {
            return;
        };
        let len = eps[a as usize].limits().eager_limit.min(4096) - 8;
        let mut sent = 0usize;
        let mut blocked = false;
        for i in 0..20_000u64 {
            match eps[a as usize].send(b, 1, &i.to_le_bytes(), &pattern(i as usize, len)) {
                Ok(()) => sent += 1,
                Err(SendError::WouldBlock) => {
                    blocked = true;
                    break;
                }
                Err(e) => panic!("{name}: {e}"),
            }
        }
        let mut got = Vec::new();
        drive(&mut eps, &mut got, &|g: &[_]| g.len() >= sent);
        assert_eq!(got.len(), sent, "{name}: lost messages under back-pressure");
        if blocked {
            // Progress (on every endpoint: resources may come back to the sender through its
            // own progress) must make room again within a bounded number of rounds.
            let mut ok = false;
            for _ in 0..1000 {
                match eps[a as usize].send(b, 1, &[0; 8], &[1, 2, 3]) {
                    Ok(()) => {
                        ok = true;
                        break;
                    }
                    Err(SendError::WouldBlock) => {
                        for ep in eps.iter_mut() {
                            ep.progress(&mut |_| {});
                        }
                    }
                    Err(e) => panic!("{name}: send after recovery: {e}"),
                }
            }
            assert!(ok, "{name}: still blocked after 1000 progress rounds");
        }
    }

    /// Sends to an unreachable rank or above max_send fail with the matching error.
    pub fn unreachable_and_oversized_are_errors(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
        let mut eps = make();
        let far = 1_000_000;
        assert!(!eps[0].reaches(far));
        assert_eq!(
            eps[0].send(far, 1, &[], &[]),
            Err(SendError::Unreachable { peer: far }),
            "{name}"
        );
        let max = eps[0].limits().max_send;
        if max < 64 << 20 {
            let big = vec![0u8; max + 1];
            let to = pairs(&eps)[0].1;
            assert!(
                matches!(
                    eps[0].send(to, 1, &[], &big),
                    Err(SendError::TooLarge { .. })
                ),
                "{name}"
            );
        }
    }

    /// Single copy: when the transport offers get, bytes read match what was exposed.
    pub fn get_copies_from_exposed_memory(name: &str, make: &dyn Fn() -> Vec<Box<dyn Btl>>) {
        let mut eps = make();
        if !eps[0].limits().get {
            return;
        }
        let Some(&(a, b)) = pairs(&eps).iter().find(|(a, b)| a != b) else {
            return;
        };
        let source = pattern(99, 3 << 20);
        let region = eps[b as usize].expose(&source);
        let mut dest = vec![0u8; 1 << 20];
        eps[a as usize]
            .get(b, region, 1 << 20, &mut dest)
            .unwrap_or_else(|e| panic!("{name}: get: {e}"));
        assert!(
            dest == source[1 << 20..2 << 20],
            "{name}: get returned wrong bytes"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_btl_conforms() {
        conformance::run("self", &|| vec![Box::new(SelfBtl::new(0)) as Box<dyn Btl>]);
    }
}
