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
//!   peer described with [`RemoteRegion`] ([`Btl::expose`]), in one copy, synchronously. A
//!   transport whose reads finish later ([`Btl::gets_finish_later`], RMA over a network)
//!   starts them with [`Btl::start_get`] and reports them in [`Btl::take_finished_gets`]
//!   instead; the exposing side keeps polling until the reader says it is done, then calls
//!   [`Btl::release`].
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
    /// Address in the owner's address space (for a registration-based transport: the
    /// address its peers name the first byte by).
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
    /// The transport's access key for the region; 0 where peers read by address alone
    /// (shared memory's single copy).
    pub key: u64,
}

/// Memory of this process that a [`Btl::start_get`] writes into after the call returns.
///
/// Plain numbers, so that transports stay free of `unsafe`; the duty lies with whoever
/// builds one (the messaging layer, from a receive request's buffer): the range must be
/// writable memory that nothing else reads or writes until [`Btl::take_finished_gets`]
/// reports the get.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LocalRegion {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u64,
}

/// A counter a transport keeps, declared by its component ([`crate::component::Component::counters`])
/// so that tools can list it before any module opens; the C library exposes each as an MPI_T
/// performance variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CounterSpec {
    /// Lower-snake-case name starting with the component's name (`usnic_segments_resent`),
    /// as [`Btl::counters`] reports it.
    pub name: &'static str,
    /// One line saying what it counts.
    pub description: &'static str,
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

/// Whether a rank that found nothing to do may sleep until a transport has news: the answer
/// of [`Btl::prepare_sleep`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SleepReadiness {
    /// Nothing arrives that the descriptors this transport added would not announce (none
    /// when nothing can arrive unasked, as for `self`).
    Ready,
    /// News may be pending already (completions the descriptors would not announce, sends
    /// waiting for a slot): poll again before sleeping.
    Busy,
    /// This transport cannot wake a sleeper (shared memory is only seen by polling): the
    /// rank must keep polling while it is in use.
    Unable,
}

/// The byte-transfer layer contract (see the module doc for the rules).
pub trait Btl {
    /// Component name (`self`, `shm`, `usnic`).
    fn name(&self) -> &'static str;
    /// Limits and capabilities. `eager_limit` and `max_send` are fixed for the transport's
    /// life: the engine reads them once.
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
    /// Called when the rank has had nothing to do for a while and would sleep in `poll(2)`:
    /// add the descriptors that become readable when this transport has news to `fds` and
    /// answer [`SleepReadiness::Ready`], or say why not. A transport may use the call to send
    /// what it would otherwise send on a timer (acknowledgements) so that peers do not wait
    /// for a sleeper. The sleep is bounded (`pml_idle_sleep_ms`), so timers still run.
    /// Default: [`SleepReadiness::Unable`].
    fn prepare_sleep(&mut self, fds: &mut Vec<std::os::fd::RawFd>) -> SleepReadiness {
        let _ = fds;
        SleepReadiness::Unable
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
    /// The transport's counters since it opened, by the names its component declares
    /// ([`crate::component::Component::counters`]); counters never decrease. Computed when
    /// asked (a tool reads them), so keeping them must cost nothing on the send and receive
    /// paths beyond a plain increment. Default: none.
    fn counters(&self) -> Vec<(&'static str, u64)> {
        Vec::new()
    }
    /// Whether [`Btl::get`] from `peer` works (probed per peer where permissions can differ).
    fn can_get(&mut self, peer: u32) -> bool {
        self.limits().get && self.reaches(peer)
    }
    /// Whether [`Btl::get`] from `peer` also works on memory the peer never exposed, named
    /// by its address alone (single copy between processes of one node; one-sided windows'
    /// direct path relies on it). Registration-based transports answer false.
    fn can_get_unexposed(&mut self, peer: u32) -> bool {
        self.can_get(peer)
    }
    /// Describes `buf` so that a peer can [`Btl::get`] from it; `None` when it cannot be
    /// offered now (a registration failed: the message takes the copy pipeline). The caller
    /// keeps `buf` alive and unchanged until it calls [`Btl::release`] with it.
    fn expose(&mut self, buf: &[u8]) -> Option<RemoteRegion> {
        Some(RemoteRegion {
            addr: buf.as_ptr() as u64,
            len: buf.len() as u64,
            key: 0,
        })
    }
    /// The peer is done reading `buf`, exposed earlier: a transport may drop what exposing
    /// it took (a registration). Default: nothing to do.
    fn release(&mut self, buf: &[u8]) {
        let _ = buf;
    }
    /// Whether this transport's gets finish after the call that starts them
    /// ([`Btl::start_get`], [`Btl::take_finished_gets`]) instead of inside [`Btl::get`].
    fn gets_finish_later(&self) -> bool {
        false
    }
    /// Starts copying `local.len` bytes from `offset` of the peer's `remote` region into
    /// `local`; the outcome comes under `ticket` from [`Btl::take_finished_gets`].
    /// `Err(SendError::WouldBlock)`: nothing started now (gets in flight fill the transport,
    /// or it is still connecting to the peer); retry after progress.
    fn start_get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: LocalRegion,
        ticket: u64,
    ) -> Result<(), SendError> {
        let _ = (remote, offset, local, ticket);
        Err(SendError::Failed(format!(
            "the {} transport has no start_get: its gets finish inside get (asked for rank {peer})",
            self.name()
        )))
    }
    /// Hands every get started with [`Btl::start_get`] that finished since the last call to
    /// `report`, with its ticket and outcome (an error leaves `local` in an unknown state
    /// but no longer written). Called from the messaging layer's progress, outside
    /// [`Btl::progress`].
    fn take_finished_gets(&mut self, report: &mut dyn FnMut(u64, Result<(), SendError>)) {
        let _ = report;
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
    fn prepare_sleep(&mut self, _fds: &mut Vec<std::os::fd::RawFd>) -> SleepReadiness {
        // Only this rank sends here, and not while it sleeps.
        if self.queue.is_empty() {
            SleepReadiness::Ready
        } else {
            SleepReadiness::Busy
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn self_btl_conforms() {
        crate::conformance::run("self", &|| vec![Box::new(SelfBtl::new(0)) as Box<dyn Btl>]);
    }
}
