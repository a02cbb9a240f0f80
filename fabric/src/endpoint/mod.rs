//! One open datagram endpoint ([`MsgEndpoint`]): the address vector, the send slots (with
//! the sends the provider refused for now, retried in order), the posted receive buffers, and
//! the completion queue that returns both.
//!
//! This module owns the data path. It must never interpret datagram contents (received bytes
//! go up exactly as they arrived), never block, and never leave a receive slot unposted
//! beyond the next [`MsgEndpoint::poll`]. Opening the endpoint is `open`'s concern.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::fmt;
use std::mem::MaybeUninit;
use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::ptr;

use kestrel_libfabric_sys as sys;

use super::error::{c_string, FabricError, SendError, Site};
use super::fid::Fid;
use super::info::{sockaddr_in_from_bytes, OwnedInfo};
use super::slots::{Contexts, Pool};

pub(super) mod open;
mod rma;

pub use rma::{MemoryRegion, READ_DEPTH};

/// Completions taken from the CQ per `fi_cq_read` call.
const CQ_BATCH: usize = 16;

/// A peer inserted into an endpoint's address vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerAddr(sys::fi_addr_t);

impl PeerAddr {
    /// The libfabric address handle (`fi_addr_t`), for logs.
    pub fn raw(self) -> u64 {
        self.0
    }
}

/// A datagram that hit `-FI_EAGAIN` in `fi_send`, kept in its slot to be retried in order.
#[derive(Debug, Clone, Copy)]
struct PendingSend {
    slot: usize,
    len: usize,
    to: PeerAddr,
}

/// A datagram endpoint on one interface, with its own CQ, AV and buffer pools.
///
/// Send slots are indices `0..tx_depth` of the context array, receive slots
/// `tx_depth..tx_depth + rx_depth`; every receive slot is posted while the endpoint is open,
/// except while its payload is being handed to the caller inside [`MsgEndpoint::poll`] and,
/// on a reliable endpoint, from then until the next poll.
pub struct MsgEndpoint {
    // Field order is drop order: the endpoint goes first (it references everything below), then
    // the AV and CQ bound to it, the registrations of the pools, the domain and the fabric.
    // The pools and contexts outlive every object that could still touch them.
    ep: Fid<sys::fid_ep>,
    av: Fid<sys::fid_av>,
    cq: Fid<sys::fid_cq>,
    tx_mr: Option<Fid<sys::fid_mr>>,
    rx_mr: Option<Fid<sys::fid_mr>>,
    /// Registrations peers read and reads in flight (`FI_RMA` providers only).
    rma: Option<rma::Rma>,
    _domain: Fid<sys::fid_domain>,
    _fabric: Fid<sys::fid_fabric>,
    tx_pool: Pool,
    rx_pool: Pool,
    contexts: Contexts,
    _info: OwnedInfo,
    tx_desc: *mut c_void,
    rx_desc: *mut c_void,
    tx_free: Vec<usize>,
    pending: VecDeque<PendingSend>,
    /// Receive slots to post again, oldest first: refused by the provider for now, or (reliable
    /// endpoints) delivered during the last poll.
    unposted: Vec<usize>,
    /// Reliable endpoints post a delivered slot again at the start of the next poll rather than
    /// at once: the repost (`fi_recv`, about 200 instructions into `net`) then no longer sits
    /// between a message's arrival and the answer the caller sends to it, and the provider keeps
    /// what arrives meanwhile. Datagram endpoints repost at once: a datagram finding no posted
    /// buffer is dropped.
    defer_reposts: bool,
    tx_depth: usize,
    rx_depth: usize,
    prefix: usize,
    max_datagram: usize,
    rx_capacity: usize,
    address: Vec<u8>,
    site: Site,
    /// The CQ's wait descriptor (owned by the CQ), when it was opened with one and works.
    wait_fd: Option<RawFd>,
    /// Looks in a row at a readable wait descriptor with nothing pending.
    spurious_wakes: u32,
}

/// Looks at a wait descriptor that is readable with nothing pending before an endpoint stops
/// offering it (see [`MsgEndpoint::may_sleep`]).
pub const SPURIOUS_WAKE_LIMIT: u32 = 8;

// SAFETY: libfabric objects have no thread affinity at any threading level; every call goes
// through `&mut self` (or `&self` for read-only state), so the endpoint is used by one thread at
// a time. The raw descriptors are provider handles with the same lifetime as the endpoint.
unsafe impl Send for MsgEndpoint {}

impl fmt::Debug for MsgEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MsgEndpoint")
            .field("provider", &self.site.provider)
            .field("interface", &self.site.interface)
            .field("address", &sockaddr_in_from_bytes(&self.address))
            .field("tx_depth", &self.tx_depth)
            .field("rx_depth", &self.rx_depth)
            .field("prefix", &self.prefix)
            .field("max_datagram", &self.max_datagram)
            .finish()
    }
}

impl MsgEndpoint {
    /// The endpoint's address as the provider names it (`fi_getname`): opaque bytes that peers
    /// pass to [`MsgEndpoint::insert_peer`].
    pub fn address(&self) -> Vec<u8> {
        self.address.clone()
    }

    /// The endpoint's IPv4 socket address, when the provider's address format is a
    /// `sockaddr_in` (`udp`, `usnic`).
    pub fn socket_addr(&self) -> Option<SocketAddrV4> {
        sockaddr_in_from_bytes(&self.address)
    }

    /// Provider name.
    pub fn provider(&self) -> &str {
        &self.site.provider
    }

    /// Interface (libfabric domain) name.
    pub fn interface(&self) -> &str {
        &self.site.interface
    }

    /// Send slots.
    pub fn tx_depth(&self) -> usize {
        self.tx_depth
    }

    /// Receive buffers.
    pub fn rx_depth(&self) -> usize {
        self.rx_depth
    }

    /// True when the buffer pools are registered with the domain (`FI_MR_LOCAL` providers).
    pub fn is_registered(&self) -> bool {
        self.tx_mr.is_some() && self.rx_mr.is_some()
    }

    /// The descriptor that becomes readable when the completion queue may have news, when the
    /// endpoint was opened with one. Sleep on it only after [`MsgEndpoint::may_sleep`] said so.
    pub fn wait_fd(&self) -> Option<RawFd> {
        self.wait_fd
    }

    /// Whether the owner may now sleep on [`MsgEndpoint::wait_fd`] (`fi_trywait`): false while
    /// completions may be pending that the descriptor would not announce, and always false
    /// without a descriptor or with sends waiting for a slot (their retry needs polling).
    ///
    /// A descriptor that is readable although `fi_trywait` found nothing pending would wake a
    /// sleeper at once, every time: after [`SPURIOUS_WAKE_LIMIT`] such looks in a row the
    /// endpoint stops offering it (seen with libfabric 1.17's `net` provider, whose wait
    /// descriptor stays readable; `tcp;ofi_rxm`'s works).
    pub fn may_sleep(&mut self) -> bool {
        let Some(fd) = self.wait_fd else {
            return false;
        };
        if !self.pending.is_empty() || !self.unposted.is_empty() {
            return false;
        }
        let mut fids = [self.cq.fid()];
        // SAFETY: the fabric and CQ are open; the array lives across the call.
        let ret = unsafe { sys::fi_trywait(self._fabric.as_ptr(), fids.as_mut_ptr(), 1) };
        if ret != 0 {
            return false;
        }
        let mut probe = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one live pollfd, exclusively borrowed; a zero timeout never blocks.
        let readable = unsafe { libc::poll(&mut probe, 1, 0) } != 0;
        if !readable {
            self.spurious_wakes = 0;
            return true;
        }
        self.spurious_wakes += 1;
        if self.spurious_wakes >= SPURIOUS_WAKE_LIMIT {
            tracing::debug!(
                target: "fabric",
                provider = %self.site.provider,
                interface = %self.site.interface,
                "the completion queue's wait descriptor stays readable with nothing pending; this endpoint is polled instead"
            );
            self.wait_fd = None;
        }
        false
    }

    /// The owner gives this endpoint up with sends still pending (its link died): closing it
    /// later may find them busy, which is then expected rather than warned about.
    pub fn abandon(&mut self) {
        self.ep.expect_busy();
        self.av.expect_busy();
        self.cq.expect_busy();
        if let Some(mr) = self.tx_mr.as_mut() {
            mr.expect_busy();
        }
        if let Some(mr) = self.rx_mr.as_mut() {
            mr.expect_busy();
        }
        if let Some(rma) = self.rma.as_mut() {
            rma.abandon();
        }
        self._domain.expect_busy();
        self._fabric.expect_busy();
    }

    /// Send slots neither in flight nor waiting for a retry.
    pub fn free_tx_slots(&self) -> usize {
        self.tx_free.len()
    }

    /// Usable payload bytes per datagram (after any provider prefix).
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    /// Adds a peer's address (bytes from its [`MsgEndpoint::address`]) to the address vector.
    /// The bytes come from another process, so their length and family are checked first.
    pub fn insert_peer(&mut self, raw: &[u8]) -> Result<PeerAddr, FabricError> {
        let bad = |msg: String| {
            FabricError::local("fi_av_insert", &self.site, msg).with_fix(
                "the peer's address is corrupt or from another provider; give every rank the \
                 same KESTREL_USNIC_PROVIDER",
            )
        };
        if raw.len() != self.address.len() {
            return Err(bad(format!(
                "peer address is {} bytes, this provider's addresses are {}",
                raw.len(),
                self.address.len()
            )));
        }
        if sockaddr_in_from_bytes(&self.address).is_some() && sockaddr_in_from_bytes(raw).is_none()
        {
            return Err(bad("peer address is not an IPv4 socket address".into()));
        }
        let mut handle: sys::fi_addr_t = sys::FI_ADDR_UNSPEC;
        // SAFETY: raw holds exactly one address of this provider's length (checked above); the
        // AV is synchronous (no EQ bound), so `handle` is written before the call returns.
        let ret = unsafe {
            sys::fi_av_insert(
                self.av.as_ptr(),
                raw.as_ptr() as *const c_void,
                1,
                &mut handle,
                0,
                ptr::null_mut(),
            )
        };
        if ret != 1 || handle == sys::FI_ADDR_UNSPEC {
            let code = if ret < 0 {
                ret
            } else {
                -(sys::FI_EINVAL as i32)
            };
            return Err(FabricError::from_code(
                "fi_av_insert",
                &self.site,
                code.into(),
            ));
        }
        Ok(PeerAddr(handle))
    }

    /// Writes one datagram into a free send slot and posts it to `to`. `fill` gets the slot's
    /// payload area (`max_datagram` bytes) and returns how many bytes it wrote.
    ///
    /// `Ok` means the provider has the datagram, or (after a provider `-FI_EAGAIN`) that it
    /// waits in its slot and goes out, in order, on the next `send_with` or `poll`.
    pub fn send_with(
        &mut self,
        to: PeerAddr,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<(), SendError> {
        self.flush_pending()?;
        let slot = self.tx_free.pop().ok_or(SendError::Full)?;
        let payload = self.tx_pool.slot_ptr(slot).wrapping_add(self.prefix);
        // SAFETY: `slot` came off the free list, so neither the provider nor any other borrow
        // uses it; the payload area lies within the slot (stride >= prefix + max_datagram).
        let area = unsafe { std::slice::from_raw_parts_mut(payload, self.max_datagram) };
        let len = fill(area);
        if len > self.max_datagram {
            self.tx_free.push(slot);
            return Err(SendError::Oversized {
                len,
                max: self.max_datagram,
            });
        }
        let send = PendingSend { slot, len, to };
        if !self.pending.is_empty() {
            self.pending.push_back(send);
            return Ok(());
        }
        match self.post_send(send) {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.pending.push_back(send);
                Ok(())
            }
            Err(e) => {
                self.tx_free.push(slot);
                Err(SendError::Fabric(e))
            }
        }
    }

    /// Posts one send; `Ok(false)` when the provider said `-FI_EAGAIN`.
    fn post_send(&mut self, send: PendingSend) -> Result<bool, FabricError> {
        // SAFETY: the slot is owned by this send until its completion; buffer, length, context
        // and descriptor all stay valid until then (the pools and contexts outlive the endpoint).
        let ret = unsafe {
            sys::fi_send(
                self.ep.as_ptr(),
                self.tx_pool.slot_ptr(send.slot) as *const c_void,
                self.prefix + send.len,
                self.tx_desc,
                send.to.0,
                self.contexts.ptr(send.slot),
            )
        };
        match ret {
            0 => Ok(true),
            r if r == -(sys::FI_EAGAIN as isize) => Ok(false),
            r => Err(FabricError::from_code("fi_send", &self.site, r as i64)),
        }
    }

    /// Retries datagrams the provider refused with `-FI_EAGAIN`, oldest first. A hard error
    /// drops that datagram (the reliability layer resends) and is returned.
    fn flush_pending(&mut self) -> Result<(), FabricError> {
        while let Some(&send) = self.pending.front() {
            match self.post_send(send) {
                Ok(true) => {
                    self.pending.pop_front();
                }
                Ok(false) => return Ok(()),
                Err(e) => {
                    self.pending.pop_front();
                    self.tx_free.push(send.slot);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    /// Posts receive `slot`; a slot the provider refuses (for now or for good) waits in
    /// `unposted` for the next poll.
    fn post_receive(&mut self, slot: usize) -> Result<(), FabricError> {
        match self.try_post_receive(slot) {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.unposted.push(slot);
                Ok(())
            }
            Err(e) => {
                self.unposted.push(slot);
                Err(e)
            }
        }
    }

    /// Posts the receive slots in `unposted`, oldest first, until the provider refuses one;
    /// the rest stay for the next poll.
    fn repost_unposted(&mut self) -> Result<(), FabricError> {
        let mut posted = 0;
        let mut result = Ok(());
        while let Some(&slot) = self.unposted.get(posted) {
            match self.try_post_receive(slot) {
                Ok(true) => posted += 1,
                Ok(false) => break,
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        self.unposted.drain(..posted);
        result
    }

    /// Posts receive `slot`: `Ok(false)` when the provider said `-FI_EAGAIN`.
    fn try_post_receive(&mut self, slot: usize) -> Result<bool, FabricError> {
        // SAFETY: the receive slot is not posted and not borrowed; buffer, context and
        // descriptor stay valid until its completion (they outlive the endpoint).
        let ret = unsafe {
            sys::fi_recv(
                self.ep.as_ptr(),
                self.rx_pool.slot_ptr(slot) as *mut c_void,
                self.prefix + self.rx_capacity,
                self.rx_desc,
                sys::FI_ADDR_UNSPEC,
                self.contexts.ptr(self.tx_depth + slot),
            )
        };
        match ret {
            0 => Ok(true),
            r if r == -(sys::FI_EAGAIN as isize) => Ok(false),
            r => Err(FabricError::from_code("fi_recv", &self.site, r as i64)),
        }
    }

    /// Drains the completion queue: send completions free their slots, each received datagram's
    /// payload (after any prefix) goes to `on_datagram` and its buffer is posted again (on a
    /// reliable endpoint, at the start of the next call). Returns
    /// the number of datagrams delivered. At most `tx_depth + rx_depth` completions are taken
    /// per call, so a flood of incoming datagrams cannot keep the caller here forever.
    ///
    /// An error completion frees or reposts its slot and is returned as the error; completions
    /// behind it stay queued for the next call.
    pub fn poll(&mut self, mut on_datagram: impl FnMut(&[u8])) -> Result<usize, FabricError> {
        if !self.unposted.is_empty() {
            self.repost_unposted()?;
        }

        let budget = self.tx_depth + self.rx_depth;
        let mut taken = 0;
        let mut delivered = 0;
        let mut entries = [MaybeUninit::<sys::fi_cq_msg_entry>::uninit(); CQ_BATCH];
        while taken < budget {
            let want = CQ_BATCH.min(budget - taken);
            // SAFETY: the CQ was opened with FI_CQ_FORMAT_MSG, so each entry the provider writes
            // is an fi_cq_msg_entry; `entries` has room for `want` of them.
            let ret = unsafe {
                sys::fi_cq_read(self.cq.as_ptr(), entries.as_mut_ptr() as *mut c_void, want)
            };
            if ret == -(sys::FI_EAGAIN as isize) {
                break;
            }
            if ret == -(sys::FI_EAVAIL as isize) {
                match self.read_error_completion() {
                    // A failed read is reported to its owner, the endpoint goes on.
                    None => {
                        taken += 1;
                        continue;
                    }
                    Some(e) => return Err(e),
                }
            }
            if ret < 0 {
                return Err(FabricError::from_code("fi_cq_read", &self.site, ret as i64));
            }
            let n = (ret as usize).min(want);
            taken += n.max(1);
            for entry in &entries[..n] {
                // SAFETY: fi_cq_read reported `n` initialised entries at the front.
                let entry = unsafe { entry.assume_init() };
                if self.complete(entry, &mut on_datagram)? {
                    delivered += 1;
                }
            }
            if n < want {
                break;
            }
        }
        self.flush_pending()?;
        Ok(delivered)
    }

    /// Handles one successful completion; true when it delivered a datagram.
    fn complete(
        &mut self,
        entry: sys::fi_cq_msg_entry,
        on_datagram: &mut impl FnMut(&[u8]),
    ) -> Result<bool, FabricError> {
        if let Some(rma) = self.rma.as_mut() {
            if let Some(read) = rma.read_of(entry.op_context) {
                rma.finish(read, Ok(()));
                return Ok(false);
            }
        }
        let index = self.contexts.index_of(entry.op_context).ok_or_else(|| {
            FabricError::local(
                "fi_cq_read",
                &self.site,
                "a completion carried a context this endpoint never posted".into(),
            )
        })?;
        if index < self.tx_depth {
            self.tx_free.push(index);
            return Ok(false);
        }
        let slot = index - self.tx_depth;
        let len = entry.len.min(self.prefix + self.rx_capacity);
        // With a prefix, completions no longer than it are provider traffic, not ours.
        let has_payload = if self.prefix > 0 {
            len > self.prefix
        } else {
            true
        };
        if has_payload {
            let start = self.rx_pool.slot_ptr(slot).wrapping_add(self.prefix);
            // SAFETY: the receive completed, so the provider no longer writes this slot until we
            // post it again below; `len` is clamped to the posted length, within the slot.
            let payload = unsafe { std::slice::from_raw_parts(start, len - self.prefix) };
            on_datagram(payload);
        }
        if self.defer_reposts {
            self.unposted.push(slot);
        } else {
            self.post_receive(slot)?;
        }
        Ok(has_payload)
    }

    /// Reads the error completion `fi_cq_read` announced, returns its slot, and describes it;
    /// `None` when it was a read's (recorded for [`MsgEndpoint::take_finished_reads`]).
    fn read_error_completion(&mut self) -> Option<FabricError> {
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: `err` is a zeroed fi_cq_err_entry (err_data null, so the provider uses its own
        // storage for error data, valid until the next CQ call).
        let ret = unsafe { sys::fi_cq_readerr(self.cq.as_ptr(), &mut err, 0) };
        if ret < 0 {
            return Some(FabricError::from_code(
                "fi_cq_readerr",
                &self.site,
                ret as i64,
            ));
        }
        // SAFETY: prov_errno and err_data come from the entry just read, as fi_cq_strerror
        // expects; with a null buffer it returns a provider-owned string, copied at once.
        let provider_text = unsafe {
            c_string(sys::fi_cq_strerror(
                self.cq.as_ptr(),
                err.prov_errno,
                err.err_data,
                ptr::null_mut(),
                0,
            ))
        };
        let read = self.rma.as_ref().and_then(|r| r.read_of(err.op_context));
        let kind = match self.contexts.index_of(err.op_context) {
            _ if read.is_some() => "read completion",
            Some(i) if i < self.tx_depth => {
                self.tx_free.push(i);
                "send completion"
            }
            Some(i) => {
                let slot = i - self.tx_depth;
                if let Err(e) = self.post_receive(slot) {
                    tracing::warn!(target: "fabric", error = %e, "reposting a receive failed");
                }
                "receive completion"
            }
            None => "completion",
        };
        let mut error = FabricError::from_code(kind, &self.site, err.err.into());
        if !provider_text.is_empty() {
            error.message = format!("{} ({provider_text})", error.message);
        }
        tracing::debug!(target: "fabric", error = %error, "error completion");
        if let (Some(index), Some(rma)) = (read, self.rma.as_mut()) {
            rma.finish(index, Err(error));
            return None;
        }
        Some(error)
    }
}
