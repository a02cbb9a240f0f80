//! Reads of a peer's registered memory (`FI_RMA`, `fi_read`) on a reliable endpoint: the
//! registrations this process offers its peers ([`MemoryRegion`]), and the reads it posts
//! into its own memory, reported when their completions arrive.
//!
//! This module owns the registrations (closed before the domain, see [`MsgEndpoint`]'s field
//! order) and the read contexts. It must never wait for a read: [`MsgEndpoint::poll`] reaps
//! their completions with every other, and the owner collects them with
//! [`MsgEndpoint::take_finished_reads`].
//!
//! The provider decides how a peer names registered memory, and the wrapper honours both
//! ways: by virtual address (`FI_MR_VIRT_ADDR`) or by offset from the registration's start,
//! with the key the provider picked (`FI_MR_PROV_KEY`) or one this endpoint chose (unique in
//! its domain). With `FI_MR_LOCAL`, the local side of a read is registered for the read's
//! duration.
//!
//! Anyone who can reach the provider's port (a TCP listener for `tcp;ofi_rxm` and `net`) can
//! ask to read a registration whose key it names, without passing through the transport's
//! framing. Keys this endpoint chooses therefore start at a random 64-bit value (from the
//! kernel's random source, then counting up), so a stranger cannot guess one; they travel in
//! clear in the messaging layer's RNDV header, like the set's key, and are no defence against
//! someone who reads the wire. A provider that picks keys itself (`FI_MR_PROV_KEY`) is
//! trusted with them.

use std::ffi::c_void;
use std::ptr;

use kestrel_libfabric_sys as sys;

use super::MsgEndpoint;
use crate::error::{FabricError, SendError, Site};
use crate::fid::Fid;
use crate::slots::Contexts;

/// Reads in flight at once per endpoint; a further read waits ([`SendError::Full`]).
pub const READ_DEPTH: usize = 64;

/// Keys below this are left to the buffer pools (1 and 2).
const RESERVED_KEYS: u64 = 1 << 16;

/// A random first key, within the provider's key size (`mr_key_size` bytes), above the
/// reserved ones.
fn first_key(key_bytes: usize) -> std::io::Result<u64> {
    use std::io::Read;
    let mut raw = [0u8; 8];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut raw)?;
    let mask = match key_bytes {
        0 | 8.. => u64::MAX,
        n => (1u64 << (8 * n)) - 1,
    };
    // Half the key space above the start, so counting up never wraps into the reserved keys.
    Ok((u64::from_le_bytes(raw) & (mask >> 1)).max(RESERVED_KEYS))
}

/// Memory registered for peers to read: what a peer needs to name it, and the handle that
/// closes it ([`MsgEndpoint::deregister`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryRegion {
    id: usize,
    key: u64,
    remote_base: u64,
    len: usize,
}

impl MemoryRegion {
    /// The key a peer passes to its read.
    pub fn key(&self) -> u64 {
        self.key
    }

    /// The address a peer reads byte `offset` of the region at (the virtual address or the
    /// offset, as the provider wants it).
    pub fn remote_addr(&self, offset: usize) -> u64 {
        self.remote_base + offset as u64
    }

    /// Registered bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for an empty registration.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// One read in flight: the owner's ticket and the local registration it needed.
#[derive(Debug, Clone, Copy)]
struct Read {
    ticket: u64,
    local: Option<usize>,
}

/// The endpoint's RMA state (present when the provider granted `FI_RMA`).
pub(super) struct Rma {
    regions: Vec<Option<Fid<sys::fid_mr>>>,
    free_regions: Vec<usize>,
    next_key: u64,
    mr_mode: i32,
    contexts: Contexts,
    free_contexts: Vec<usize>,
    reads: Vec<Option<Read>>,
    finished: Vec<(u64, Result<(), FabricError>)>,
}

impl Rma {
    /// The RMA state of an endpoint whose domain has `mr_mode` and keys of `key_bytes`
    /// bytes; `Err` when the kernel's random source cannot be read.
    pub(super) fn new(mr_mode: i32, key_bytes: usize) -> std::io::Result<Rma> {
        Ok(Rma {
            regions: Vec::new(),
            free_regions: Vec::new(),
            next_key: first_key(key_bytes)?,
            mr_mode,
            contexts: Contexts::new(READ_DEPTH),
            free_contexts: (0..READ_DEPTH).rev().collect(),
            reads: vec![None; READ_DEPTH],
            finished: Vec::new(),
        })
    }

    /// Marks every registration as given up with reads possibly pending (see
    /// [`MsgEndpoint::abandon`]).
    pub(super) fn abandon(&mut self) {
        for mr in self.regions.iter_mut().flatten() {
            mr.expect_busy();
        }
    }

    /// The read a completion's context belongs to, if it is one of ours.
    pub(super) fn read_of(&self, context: *mut c_void) -> Option<usize> {
        self.contexts.index_of(context)
    }

    /// Records the completion of read `index` (its context returns to the free list, its
    /// local registration closes).
    pub(super) fn finish(&mut self, index: usize, result: Result<(), FabricError>) {
        let Some(read) = self.reads[index].take() else {
            return;
        };
        if let Some(local) = read.local {
            self.close(local);
        }
        self.free_contexts.push(index);
        self.finished.push((read.ticket, result));
    }

    fn close(&mut self, id: usize) {
        if self.regions[id].take().is_some() {
            self.free_regions.push(id);
        }
    }

    fn register(
        &mut self,
        domain: &Fid<sys::fid_domain>,
        addr: *const u8,
        len: usize,
        access: u64,
        site: &Site,
    ) -> Result<MemoryRegion, FabricError> {
        let requested_key = self.next_key;
        let mut raw = ptr::null_mut();
        // SAFETY: the domain is open; `addr..addr + len` is memory the caller keeps valid
        // while registered (MsgEndpoint::register_for_peers and read document the duty).
        let ret = unsafe {
            sys::fi_mr_reg(
                domain.as_ptr(),
                addr as *const c_void,
                len,
                access,
                0,
                requested_key,
                0,
                &mut raw,
                ptr::null_mut(),
            )
        };
        let mr = Fid::adopt("fi_mr_reg", site, ret, raw).map_err(|e| {
            e.with_fix("raise the locked-memory limit (ulimit -l), or set KESTREL_OFI_RMA=false to send large messages through the copy pipeline")
        })?;
        let key = if self.mr_mode & sys::FI_MR_PROV_KEY as i32 != 0 {
            // SAFETY: the registration is open; fi_mr_key only reads it.
            unsafe { sys::fi_mr_key(mr.as_ptr()) }
        } else {
            self.next_key += 1;
            requested_key
        };
        let remote_base = if self.mr_mode & sys::FI_MR_VIRT_ADDR as i32 != 0 {
            addr as u64
        } else {
            0
        };
        let id = match self.free_regions.pop() {
            Some(id) => {
                self.regions[id] = Some(mr);
                id
            }
            None => {
                self.regions.push(Some(mr));
                self.regions.len() - 1
            }
        };
        Ok(MemoryRegion {
            id,
            key,
            remote_base,
            len,
        })
    }
}

impl MsgEndpoint {
    /// Whether this endpoint can read its peers' registered memory.
    pub fn can_read(&self) -> bool {
        self.rma.is_some()
    }

    /// Whether registering memory pins its pages (`FI_MR_ALLOCATED`): a registration then
    /// holds the pages it was made on, and must not outlive the buffer's use (memory freed
    /// and mapped again at the same address would be other pages). Without it, a
    /// registration names addresses, read as they are at read time.
    pub fn registrations_pin(&self) -> bool {
        self.rma
            .as_ref()
            .is_some_and(|r| r.mr_mode & sys::FI_MR_ALLOCATED as i32 != 0)
    }

    /// Registers `buf` so that peers can read it ([`MsgEndpoint::read`] on their side).
    ///
    /// The caller keeps `buf` alive and unmoved until [`MsgEndpoint::deregister`] (or the
    /// endpoint's end): a peer's read may come at any time before. The provider reads it
    /// inside this endpoint's [`MsgEndpoint::poll`], so the owner keeps polling while peers
    /// read.
    pub fn register_for_peers(&mut self, buf: &[u8]) -> Result<MemoryRegion, FabricError> {
        // Borrowed, not cloned: the fields used below are disjoint from it.
        let site = &self.site;
        let Some(rma) = self.rma.as_mut() else {
            return Err(FabricError::local(
                "fi_mr_reg",
                site,
                "the provider offers no RMA on this endpoint".into(),
            ));
        };
        rma.register(
            &self._domain,
            buf.as_ptr(),
            buf.len(),
            sys::FI_REMOTE_READ as u64,
            site,
        )
    }

    /// Closes a registration made by [`MsgEndpoint::register_for_peers`].
    pub fn deregister(&mut self, region: MemoryRegion) {
        if let Some(rma) = self.rma.as_mut() {
            rma.close(region.id);
        }
    }

    /// Posts a read of `len` bytes at `remote_addr` (key `key`) of peer `from` into this
    /// process's memory at `local_addr`; its outcome is reported under `ticket` by
    /// [`MsgEndpoint::take_finished_reads`] once its completion arrives.
    ///
    /// `local_addr..local_addr + len` must be memory the caller owns, writable, and neither
    /// read nor written by anyone else until that report: the provider writes it in the
    /// meantime. (This is the contract of the messaging layer's receive buffers, which hold
    /// the memory of a request that completes only after the report.)
    ///
    /// `Err(SendError::Full)`: every read context is in flight, or the provider's queue is
    /// full; poll and retry.
    pub fn read(
        &mut self,
        from: super::PeerAddr,
        local_addr: u64,
        len: usize,
        remote_addr: u64,
        key: u64,
        ticket: u64,
    ) -> Result<(), SendError> {
        let site = &self.site;
        let ep = self.ep.as_ptr();
        let Some(rma) = self.rma.as_mut() else {
            return Err(SendError::Fabric(FabricError::local(
                "fi_read",
                site,
                "the provider offers no RMA on this endpoint".into(),
            )));
        };
        let Some(&index) = rma.free_contexts.last() else {
            return Err(SendError::Full);
        };
        let local = if rma.mr_mode & sys::FI_MR_LOCAL as i32 != 0 {
            Some(
                rma.register(
                    &self._domain,
                    local_addr as *const u8,
                    len,
                    sys::FI_READ as u64,
                    site,
                )
                .map_err(SendError::Fabric)?,
            )
        } else {
            None
        };
        let desc = match local {
            Some(region) => {
                let mr = rma.regions[region.id]
                    .as_ref()
                    .expect("a region just registered is open");
                // SAFETY: the registration is open; fi_mr_desc only reads it.
                unsafe { sys::fi_mr_desc(mr.as_ptr()) }
            }
            None => ptr::null_mut(),
        };
        // SAFETY: the endpoint is open and has FI_RMA; the caller guarantees the local range
        // stays valid and untouched until the completion (see above); the context is free
        // and lives as long as the endpoint (Rma drops after the endpoint closes).
        let ret = unsafe {
            sys::fi_read(
                ep,
                local_addr as *mut c_void,
                len,
                desc,
                from.0,
                remote_addr,
                key,
                rma.contexts.ptr(index),
            )
        };
        match ret {
            0 => {
                rma.free_contexts.pop();
                rma.reads[index] = Some(Read {
                    ticket,
                    local: local.map(|r| r.id),
                });
                Ok(())
            }
            r => {
                if let Some(region) = local {
                    rma.close(region.id);
                }
                if r == -(sys::FI_EAGAIN as isize) {
                    Err(SendError::Full)
                } else {
                    Err(SendError::Fabric(FabricError::from_code(
                        "fi_read", site, r as i64,
                    )))
                }
            }
        }
    }

    /// Reads posted and not yet completed.
    pub fn reads_in_flight(&self) -> usize {
        self.rma
            .as_ref()
            .map_or(0, |r| READ_DEPTH - r.free_contexts.len())
    }

    /// Hands every read whose completion arrived since the last call to `report`, with its
    /// ticket and outcome (an error names the provider's reason).
    pub fn take_finished_reads(&mut self, mut report: impl FnMut(u64, Result<(), FabricError>)) {
        if let Some(rma) = self.rma.as_mut() {
            for (ticket, result) in rma.finished.drain(..) {
                report(ticket, result);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::{rdm_interfaces, FabricInterface, MsgEndpoint, Owner};

    const OWNER: Owner = Owner {
        component: "ofi",
        provider_variable: "KESTREL_OFI_PROVIDER",
    };

    fn loopback_rdm() -> FabricInterface {
        rdm_interfaces(OWNER, Some("tcp;ofi_rxm"), true)
            .expect("tcp;ofi_rxm lists domains")
            .into_iter()
            .find(|i| i.domain() == "lo" && i.rma())
            .expect("tcp;ofi_rxm offers loopback with FI_RMA")
    }

    /// Polls both endpoints until `reader` reports a finished read.
    fn finish(owner: &mut MsgEndpoint, reader: &mut MsgEndpoint) -> (u64, bool) {
        for _ in 0..2_000_000 {
            owner.poll(|_| {}).expect("owner polls");
            reader.poll(|_| {}).expect("reader polls");
            let mut done = None;
            reader.take_finished_reads(|t, r| done = Some((t, r.is_ok())));
            if let Some(d) = done {
                return d;
            }
        }
        panic!("the read never finished");
    }

    /// Posts a read, polling both endpoints while the provider says to retry (`ofi_rxm`
    /// connects on the first operation to a peer).
    #[allow(clippy::too_many_arguments)]
    fn post(
        owner: &mut MsgEndpoint,
        reader: &mut MsgEndpoint,
        from: crate::PeerAddr,
        to: u64,
        len: usize,
        at: u64,
        key: u64,
        ticket: u64,
    ) {
        for _ in 0..2_000_000 {
            match reader.read(from, to, len, at, key, ticket) {
                Ok(()) => return,
                Err(crate::SendError::Full) => {
                    owner.poll(|_| {}).expect("owner polls");
                    reader.poll(|_| {}).expect("reader polls");
                }
                Err(e) => panic!("posting a read: {e}"),
            }
        }
        panic!("the provider never took the read");
    }

    /// Two endpoints on loopback that know each other: (owner, reader, the owner as the
    /// reader names it).
    fn pair() -> (MsgEndpoint, MsgEndpoint, crate::PeerAddr) {
        let iface = loopback_rdm();
        let mut owner = MsgEndpoint::open_sized(&iface, 8, 4096, false, true).expect("open");
        let mut reader = MsgEndpoint::open_sized(&iface, 8, 4096, false, true).expect("open");
        assert!(owner.can_read() && reader.can_read());
        let at_owner = reader.insert_peer(&owner.address()).expect("insert");
        owner.insert_peer(&reader.address()).expect("insert");
        (owner, reader, at_owner)
    }

    fn source() -> Vec<u8> {
        (0..3 << 20)
            .map(|i: usize| (i * 7 + (i >> 16)) as u8)
            .collect()
    }

    #[test]
    fn a_peer_reads_registered_memory_at_any_offset_as_often_as_it_likes() {
        let (mut owner, mut reader, at_owner) = pair();
        let source = source();
        let region = owner.register_for_peers(&source).expect("register");
        assert_eq!(region.len(), source.len());
        let mut dest = vec![0u8; 1 << 20];
        let to = dest.as_mut_ptr() as u64;
        for (ticket, offset) in [(7u64, 1usize << 20), (8, 12345), (9, 2 << 20)] {
            let (o, r) = (&mut owner, &mut reader);
            let at = region.remote_addr(offset);
            post(o, r, at_owner, to, dest.len(), at, region.key(), ticket);
            assert_eq!(reader.reads_in_flight(), 1);
            assert_eq!(finish(&mut owner, &mut reader), (ticket, true));
            assert_eq!(reader.reads_in_flight(), 0);
            assert!(
                dest == source[offset..offset + (1 << 20)],
                "read the wrong bytes at {offset}"
            );
        }
        owner.deregister(region);
    }

    /// A read naming another key, or a registration closed since, fails and writes nothing.
    /// (`tcp;ofi_rxm` then drops the connection, which the next operation opens again: such
    /// a read is a bug or a stranger, never the transport's normal path.)
    #[test]
    fn a_read_with_a_wrong_or_closed_key_fails_and_writes_nothing() {
        let source = source();
        for closed in [false, true] {
            let (mut owner, mut reader, at_owner) = pair();
            let region = owner.register_for_peers(&source).expect("register");
            let key = if closed {
                owner.deregister(region);
                region.key()
            } else {
                region.key() ^ 1
            };
            let mut dest = vec![0u8; 4096];
            let to = dest.as_mut_ptr() as u64;
            let (o, r) = (&mut owner, &mut reader);
            post(
                o,
                r,
                at_owner,
                to,
                dest.len(),
                region.remote_addr(0),
                key,
                3,
            );
            assert_eq!(
                finish(&mut owner, &mut reader),
                (3, false),
                "closed {closed}"
            );
            assert!(
                dest.iter().all(|&b| b == 0),
                "closed {closed}: bytes were written"
            );
            if !closed {
                owner.deregister(region);
            }
        }
    }

    #[test]
    fn chosen_keys_start_at_random_and_stay_within_the_key_size() {
        let a = super::first_key(8).unwrap();
        let b = super::first_key(8).unwrap();
        assert_ne!(a, b, "two draws of 63 random bits agree");
        assert!((super::RESERVED_KEYS..1 << 63).contains(&a));
        for _ in 0..32 {
            let k = super::first_key(4).unwrap();
            assert!((super::RESERVED_KEYS..1 << 31).contains(&k), "{k:#x}");
        }
    }
}
