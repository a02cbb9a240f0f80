//! The shared-memory transport as a registered component, and its collective engine behind the
//! transport crate's [`NodeCollectives`] interface.
//!
//! Owns the mapping from the transport set's terms (an [`OpenContext`], peer cards) to
//! [`ShmBtl`]'s and [`CollSegment`]'s own; it must never hold state of its own (the component
//! and the collective engine are static values).

use std::path::{Path, PathBuf};

use kestrel_transport::component::{Component, Module, OpenContext, OpenError, Reach};
use kestrel_transport::node_coll::{Apply, NodeCollectives, NodeSegment, SegmentGeometry};
use kestrel_transport::params::{ParamSpec, Params};
use kestrel_transport::set::PeerCard;

use crate::btl::{ShmBtl, ShmCard};
use crate::coll::{CollGeometry, CollSegment, PostedRounds};
use crate::{cma, params};

/// The `shm` component.
#[derive(Debug)]
pub struct ShmComponent;

/// The collective engine of node-local communicators.
#[derive(Debug)]
pub struct ShmCollectives;

impl Component for ShmComponent {
    fn name(&self) -> &'static str {
        "shm"
    }
    fn priority(&self) -> u32 {
        0
    }
    fn reach(&self) -> Reach {
        Reach::Node
    }
    fn params(&self) -> Vec<&'static ParamSpec> {
        params::specs()
    }
    fn open(&self, params: &Params, cx: &OpenContext<'_>) -> Result<Box<dyn Module>, OpenError> {
        let file = format!("{}shm.{}", cx.file_prefix, cx.me);
        let (btl, _card) = ShmBtl::with_file_name(params, cx.me, &cx.node_peers(), &file)
            .map_err(OpenError::Failed)?;
        Ok(Box::new(btl))
    }
    fn node_collectives(&self) -> Option<&'static dyn NodeCollectives> {
        Some(&ShmCollectives)
    }
    fn counters(&self) -> &'static [kestrel_transport::btl::CounterSpec] {
        crate::btl::COUNTERS
    }
}

impl Module for ShmBtl {
    fn card(&self) -> Vec<u8> {
        self.own_card().encode()
    }
    fn add_peers(&mut self, _key: u64, cards: &[PeerCard<'_>]) -> Vec<Result<(), String>> {
        // The peers that map this segment are those this process maps: both ends of a pair on
        // one node get each other's card or both skip the pair.
        let mappers = (0..cards.len() as u32)
            .filter(|&p| self.is_local(p) && matches!(cards[p as usize], PeerCard::Card(_)))
            .count();
        let results = (0..cards.len() as u32)
            .map(|p| {
                if !self.is_local(p) {
                    return Err("other node".to_string());
                }
                let bytes = match cards[p as usize] {
                    PeerCard::Card(b) => b,
                    PeerCard::Skip => return Ok(()),
                    PeerCard::Missing => {
                        return Err(format!(
                            "process {p} on this node published no segment (shm excluded or \
                             failed there; set KESTREL_BTL the same on every rank)"
                        ))
                    }
                };
                let card =
                    ShmCard::decode(bytes).map_err(|e| format!("card of process {p}: {e}"))?;
                self.add_peer(p, &card)
            })
            .collect();
        self.expect_attaches(mappers);
        results
    }
}

impl NodeCollectives for ShmCollectives {
    fn create(
        &self,
        params: &Params,
        file_name: &str,
        g: SegmentGeometry,
        spin_yield: bool,
    ) -> Result<(String, Box<dyn NodeSegment>), String> {
        let dir = PathBuf::from(params::DIR.get(params));
        let geo = CollGeometry {
            n: g.members,
            frag: g.fragment,
            sets: g.sets,
            degree: g.degree,
        };
        let (path, seg) = CollSegment::create(&dir, file_name, geo, 0, spin_yield)?;
        Ok((path.display().to_string(), Box::new(seg)))
    }
    fn attach(
        &self,
        rendezvous: &str,
        members: usize,
        me: usize,
        spin_yield: bool,
    ) -> Result<Box<dyn NodeSegment>, String> {
        Ok(Box::new(CollSegment::attach(
            Path::new(rendezvous),
            members,
            me,
            spin_yield,
        )?))
    }
    fn unlink(&self, rendezvous: &str) {
        let _ = std::fs::remove_file(rendezvous);
    }
    fn reach_card(&self) -> Vec<u8> {
        [u64::from(std::process::id()), cma::probe_addr()]
            .map(u64::to_le_bytes)
            .concat()
    }
    fn can_reach(&self, card: &[u8]) -> bool {
        let word = |i: usize| {
            card.get(i..i + 8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_le_bytes)
        };
        match (card.len(), word(0), word(8)) {
            (16, Some(pid), Some(addr)) => {
                u32::try_from(pid).is_ok_and(|pid| cma::probe(pid, addr).is_ok())
            }
            _ => false,
        }
    }
    fn single_copy_allowed(&self, params: &Params) -> bool {
        params::SINGLE_COPY.get(params) != "none"
    }
}

impl kestrel_transport::node_coll::PostedRounds for PostedRounds {
    fn members(&self) -> usize {
        PostedRounds::members(self)
    }
    fn fits(&self, len: usize) -> bool {
        PostedRounds::fits(self, len)
    }
    fn draw(&mut self) -> u64 {
        PostedRounds::draw(self)
    }
    fn publish(&mut self, g: u64, payload: &[u8]) -> bool {
        PostedRounds::publish(self, g, payload)
    }
    fn arrived(&self, g: u64) -> bool {
        PostedRounds::arrived(self, g)
    }
    fn payload(&self, g: u64, r: usize, len: usize) -> &[u8] {
        PostedRounds::payload(self, g, r, len)
    }
    fn finish(&mut self, g: u64) {
        PostedRounds::finish(self, g)
    }
    fn shares(&self, len: usize) -> bool {
        PostedRounds::shares(self, len)
    }
    fn publish_buffers(&mut self, g: u64, send: u64, recv: u64, elem: usize) -> bool {
        PostedRounds::publish_buffers(self, g, send, recv, elem)
    }
    fn reduce_shared(
        &mut self,
        g: u64,
        len: usize,
        send: Option<&[u8]>,
        recv: &mut [u8],
        apply: kestrel_transport::node_coll::Apply<'_>,
    ) -> Result<bool, String> {
        PostedRounds::reduce_shared(self, g, len, send, recv, apply)
    }
}

impl NodeSegment for CollSegment {
    fn members(&self) -> usize {
        CollSegment::members(self)
    }
    fn set_stall_hook(&mut self, hook: kestrel_transport::node_coll::StallHook) {
        CollSegment::set_stall_hook(self, hook)
    }
    fn set_poll_hook(&mut self, hook: kestrel_transport::node_coll::PollHook) {
        CollSegment::set_poll_hook(self, hook)
    }
    fn flat(&self, len: usize) -> bool {
        CollSegment::flat(self, len)
    }
    fn flat_barrier(&mut self) {
        CollSegment::flat_barrier(self)
    }
    fn flat_bcast(&mut self, root: usize, buf: &mut [u8]) {
        CollSegment::flat_bcast(self, root, buf)
    }
    fn flat_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) {
        CollSegment::flat_allgatherv(self, send, recv, counts, displs)
    }
    fn flat_allgather(&mut self, send: &[u8], recv: &mut [u8]) {
        CollSegment::flat_allgather(self, send, recv)
    }
    fn flat_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) {
        CollSegment::flat_alltoall(self, send, recv, block)
    }
    fn fragment_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> bool {
        CollSegment::fragment_allgatherv(self, send, recv, counts, displs)
    }
    fn fragment_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: Apply<'_>,
    ) -> bool {
        CollSegment::fragment_reduce(self, root, send, recv, apply)
    }
    fn pair_reduce(
        &mut self,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        commutative: bool,
        apply: Apply<'_>,
    ) -> bool {
        CollSegment::pair_reduce(self, root, send, recv, elem, commutative, apply)
    }
    fn pipelined_allgatherv(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) {
        CollSegment::pipelined_allgatherv(self, send, recv, counts, displs)
    }
    fn pipelined_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) -> bool {
        CollSegment::pipelined_alltoall(self, send, recv, block)
    }
    fn fragment_alltoall(&mut self, send: &[u8], recv: &mut [u8], block: usize) -> bool {
        CollSegment::fragment_alltoall(self, send, recv, block)
    }
    fn fragment_scatter(
        &mut self,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> bool {
        CollSegment::fragment_scatter(self, root, send, recv, block)
    }
    fn fragment_gather(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize) -> bool {
        CollSegment::fragment_gather(self, root, send, recv, block)
    }
    fn flat_scatter(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize) {
        CollSegment::flat_scatter(self, root, send, recv, block)
    }
    fn flat_gather(&mut self, root: usize, send: &[u8], recv: &mut [u8], block: usize) {
        CollSegment::flat_gather(self, root, send, recv, block)
    }
    fn flat_reduce(&mut self, root: Option<usize>, send: &[u8], recv: &mut [u8], apply: Apply<'_>) {
        CollSegment::flat_reduce(self, root, send, recv, apply)
    }
    fn tree_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        apply: Apply<'_>,
    ) -> bool {
        CollSegment::tree_reduce(self, root, send, recv, apply)
    }
    fn posted_rounds(&self) -> Box<dyn kestrel_transport::node_coll::PostedRounds> {
        Box::new(CollSegment::posted_rounds(self))
    }
    fn enable_single_copy(&mut self, ok: bool) {
        CollSegment::enable_single_copy(self, ok)
    }
    fn single_copy(&self, len: usize) -> bool {
        CollSegment::single_copy(self, len)
    }
    fn pair_single_copy(&self, len: usize) -> bool {
        CollSegment::pair_single_copy(self, len)
    }
    fn single_copy_reduction(&self, len: usize, everyone: bool) -> bool {
        CollSegment::single_copy_reduction(self, len, everyone)
    }
    fn single_copy_reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        apply: Apply<'_>,
    ) -> Result<(), String> {
        CollSegment::single_copy_reduce(self, root, send, recv, elem, apply)
    }
    fn single_copy_bcast(&mut self, root: usize, buf: &mut [u8]) -> Result<(), String> {
        CollSegment::single_copy_bcast(self, root, buf)
    }
    fn single_copy_allgather(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        counts: &[usize],
        displs: &[usize],
    ) -> Result<(), String> {
        CollSegment::single_copy_allgather(self, send, recv, counts, displs)
    }
    fn single_copy_alltoall(
        &mut self,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<(), String> {
        CollSegment::single_copy_alltoall(self, send, recv, block)
    }
    fn single_copy_rooted(
        &mut self,
        gather: bool,
        root: usize,
        send: &[u8],
        recv: &mut [u8],
        block: usize,
    ) -> Result<bool, String> {
        CollSegment::single_copy_rooted(self, gather, root, send, recv, block)
    }
    fn barrier(&mut self) {
        CollSegment::explicit_barrier(self)
    }
    fn bcast(&mut self, root: usize, buf: &mut [u8]) {
        CollSegment::bcast(self, root, buf)
    }
    fn reduce(
        &mut self,
        root: Option<usize>,
        send: &[u8],
        recv: &mut [u8],
        elem: usize,
        apply: Apply<'_>,
    ) {
        CollSegment::reduce(self, root, send, recv, elem, apply)
    }
}
