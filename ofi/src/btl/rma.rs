//! The ofi transport's RMA rendezvous: a large message's sender registers its buffer
//! ([`OfiBtl::expose_buffer`], reusing a registration that covers it), the receiver reads it
//! over its active pair to the sender ([`OfiBtl::start_read`]) straight into the receive
//! buffer, and the messaging layer's FIN tells the sender to release it. No byte goes
//! through a send slot or a receive buffer.
//!
//! Used only where the provider grants `FI_RMA`, `ofi_rma` is on, this process has one rail
//! and the peer is reached over one pair of endpoints: a read is bound to one pair, so
//! several NIC pairs keep the striped copy pipeline (whose bandwidth adds up over them), and a
//! read on a pair that dies has nowhere to move (the peer is then lost, as with one pair).
//!
//! This module owns the reads in flight and the registrations' bookkeeping calls. It must
//! never wait for a read: they finish in [`OfiBtl::progress`] and are reported through
//! [`OfiBtl::finished_reads`].

use kestrel_fabric::{FabricError, MemoryRegion, SendError as FabricSendError, READ_DEPTH};
use kestrel_transport::btl::{LocalRegion, RemoteRegion, SendError};

use super::OfiBtl;

/// One get of the messaging layer in flight: its parts (one read each, at most the
/// provider's message size) still to complete.
#[derive(Debug)]
pub(super) struct ReadInFlight {
    ticket: u64,
    peer: u32,
    rail: usize,
    parts_left: usize,
    bytes: u64,
    failed: Option<String>,
}

impl OfiBtl {
    /// Whether gets from `peer` go by RMA read (see the module documentation).
    pub(super) fn reads_from(&self, peer: u32) -> bool {
        self.rma
            && self
                .peers
                .get(peer as usize)
                .and_then(Option::as_ref)
                .is_some_and(|st| st.pairs().len() == 1 && !st.pairs()[0].dead)
    }

    /// Registers `buf` for peers to read (or counts one more use of a registration that
    /// covers it). `None` without RMA, or when the provider refuses (then the message takes
    /// the copy pipeline).
    pub(super) fn expose_buffer(&mut self, buf: &[u8]) -> Option<RemoteRegion> {
        if !self.rma || buf.is_empty() {
            return None;
        }
        let start = buf.as_ptr() as u64;
        let len = buf.len() as u64;
        let (region, offset) = match self.exposed.acquire(start, len) {
            Some(hit) => {
                self.counters.registrations_reused += 1;
                hit
            }
            None => {
                let region = match self.rails[0].endpoint.register_for_peers(buf) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::debug!(target: "ofi", error = %e, len, "registration refused: this message takes the copy pipeline");
                        return None;
                    }
                };
                self.exposed.insert(start, len, region);
                self.counters.registrations += 1;
                (region, 0)
            }
        };
        Some(RemoteRegion {
            addr: region.remote_addr(offset as usize),
            len,
            key: region.key(),
        })
    }

    /// A peer is done with `buf`: one use fewer of its registration, and the registrations
    /// no longer kept are closed.
    pub(super) fn release_buffer(&mut self, buf: &[u8]) {
        if !self.rma {
            return;
        }
        let endpoint = &mut self.rails[0].endpoint;
        self.exposed.release(
            buf.as_ptr() as u64,
            buf.len() as u64,
            |region: MemoryRegion| endpoint.deregister(region),
        );
    }

    /// Posts the reads of `local.len` bytes from `offset` of `peer`'s `remote` region into
    /// `local`, reported under `ticket`.
    pub(super) fn start_read(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: LocalRegion,
        ticket: u64,
    ) -> Result<(), SendError> {
        if !self.reads_from(peer) {
            return Err(SendError::Failed(format!(
                "ofi: no RMA read from process {peer} (one rail, one pair and a provider with FI_RMA are needed)"
            )));
        }
        if offset
            .checked_add(local.len)
            .is_none_or(|end| end > remote.len)
        {
            return Err(SendError::Failed(format!(
                "ofi: a read of {} bytes at offset {offset} exceeds the {}-byte region process {peer} exposed",
                local.len, remote.len
            )));
        }
        let st = self.peers[peer as usize]
            .as_mut()
            .expect("reads_from checked");
        let pair = &st.pairs()[0];
        let rail = pair.rail;
        let addr = pair.addr;
        let chunk = self.rails[rail].max_read.max(1) as u64;
        let endpoint = &mut self.rails[rail].endpoint;
        let parts = local.len.div_ceil(chunk).max(1) as usize;
        if parts > READ_DEPTH {
            return Err(SendError::Failed(format!(
                "ofi: a read of {} bytes needs {parts} reads of at most {chunk}, more than the {READ_DEPTH} an endpoint has",
                local.len
            )));
        }
        if parts > READ_DEPTH - endpoint.reads_in_flight() {
            return Err(SendError::WouldBlock);
        }
        let mut posted = 0;
        let mut failed = None;
        for k in 0..parts as u64 {
            let at = k * chunk;
            let len = chunk.min(local.len - at);
            match endpoint.read(
                addr,
                local.addr + at,
                len as usize,
                remote.addr + offset + at,
                remote.key,
                ticket,
            ) {
                Ok(()) => posted += 1,
                Err(FabricSendError::Full) if posted == 0 => return Err(SendError::WouldBlock),
                Err(e) => {
                    failed = Some(format!("ofi: posting a read from process {peer}: {e}"));
                    break;
                }
            }
        }
        if posted == 0 {
            return Err(SendError::Failed(
                failed.unwrap_or_else(|| "ofi: no read posted".into()),
            ));
        }
        st.read_started();
        self.counters.rma_reads += 1;
        self.reads.push(ReadInFlight {
            ticket,
            peer,
            rail,
            parts_left: posted,
            bytes: local.len,
            failed,
        });
        Ok(())
    }

    /// Hands every get whose reads all completed to `report`.
    pub(super) fn finished_reads(&mut self, report: &mut dyn FnMut(u64, Result<(), SendError>)) {
        let OfiBtl {
            rails,
            reads,
            peers,
            counters,
            ..
        } = self;
        for (index, rail) in rails.iter_mut().enumerate() {
            rail.endpoint
                .take_finished_reads(|ticket, outcome: Result<(), FabricError>| {
                    let Some(i) = reads
                        .iter()
                        .position(|r| r.ticket == ticket && r.rail == index)
                    else {
                        return;
                    };
                    let r = &mut reads[i];
                    r.parts_left -= 1;
                    if let Err(e) = outcome {
                        r.failed.get_or_insert(format!(
                            "ofi: a read from process {} failed: {e}",
                            r.peer
                        ));
                    }
                    if r.parts_left > 0 {
                        return;
                    }
                    let r = reads.swap_remove(i);
                    if let Some(st) = peers.get_mut(r.peer as usize).and_then(Option::as_mut) {
                        st.read_finished();
                    }
                    match r.failed {
                        None => {
                            counters.rma_bytes_read += r.bytes;
                            report(r.ticket, Ok(()));
                        }
                        Some(why) => report(r.ticket, Err(SendError::Failed(why))),
                    }
                });
        }
    }

    /// Whether a peer may still read a buffer of ours or a read of ours is in flight.
    pub(super) fn rma_busy(&self) -> bool {
        !self.reads.is_empty() || self.exposed.in_use()
    }
}
