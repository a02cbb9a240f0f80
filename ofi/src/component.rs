//! The ofi transport as a registered component.
//!
//! Owns the mapping from the transport set's terms (an [`OpenContext`], the set's key, peer
//! cards) to [`OfiBtl`]'s; it must never hold state of its own.

use kestrel_transport::component::{Component, Module, OpenContext, OpenError, PeerCard, Reach};
use kestrel_transport::params::{ParamSpec, Params};

use crate::btl::{OfiBtl, Opened};
use crate::card::OfiCard;
use crate::params;

/// The `ofi` component: one libfabric RDM endpoint per process.
#[derive(Debug)]
pub struct OfiComponent;

impl Component for OfiComponent {
    fn name(&self) -> &'static str {
        "ofi"
    }
    fn priority(&self) -> u32 {
        0
    }
    fn reach(&self) -> Reach {
        Reach::Network
    }
    fn params(&self) -> Vec<&'static ParamSpec> {
        params::specs()
    }
    fn counters(&self) -> &'static [kestrel_transport::btl::CounterSpec] {
        crate::btl::COUNTERS
    }
    fn prepare_process(&self) {
        // The same libfabric as usnic's: a rank's segfault must stay a segfault.
        kestrel_fabric::restore_crash_signals();
    }
    fn before_open(&self, params: &Params) {
        // A bad provider word is reported by `open`; here it just requests nothing.
        if let Ok(policy) = crate::select::Policy::from_params(params) {
            match policy.provider.name() {
                Some(name) => kestrel_fabric::request_providers([name]),
                None => {
                    kestrel_fabric::request_providers(crate::select::AUTO_ORDER.iter().copied())
                }
            }
        }
        let shared = params::RXM_SHARED_RX.get(params);
        kestrel_fabric::request_default("FI_OFI_RXM_USE_SRX", if shared { "1" } else { "0" });
    }
    fn open(&self, params: &Params, cx: &OpenContext<'_>) -> Result<Box<dyn Module>, OpenError> {
        let node_only = cx.nodes.iter().all(|n| n == cx.my_node());
        match OfiBtl::open(params, cx.me, node_only) {
            Ok(Opened::Ready(b)) => Ok(b),
            Ok(Opened::Declined(why)) => Err(OpenError::Declined(format!(
                "{why} (on node {})",
                cx.my_node()
            ))),
            Err(e) => Err(OpenError::Failed(e)),
        }
    }
}

impl Module for OfiBtl {
    fn card(&self) -> Vec<u8> {
        OfiBtl::card(self).encode()
    }
    fn add_peers(&mut self, key: u64, cards: &[PeerCard<'_>]) -> Vec<Result<(), String>> {
        self.set_key(key);
        cards
            .iter()
            .enumerate()
            .map(|(p, c)| match c {
                PeerCard::Skip => Ok(()),
                PeerCard::Missing => Err(format!(
                    "process {p} opened no ofi endpoint (KESTREL_VERBOSE=btl:debug on its node \
                     says why)"
                )),
                PeerCard::Card(bytes) => {
                    let card =
                        OfiCard::decode(bytes).map_err(|e| format!("card of process {p}: {e}"))?;
                    self.add_peer(p as u32, &card)
                }
            })
            .collect()
    }
}
