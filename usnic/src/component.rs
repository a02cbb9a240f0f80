//! The usnic transport as a registered component.
//!
//! Owns the mapping from the transport set's terms (an [`OpenContext`], the set's key, peer
//! cards) to [`UsnicBtl`]'s; it must never hold state of its own.

use kestrel_transport::component::{Component, Module, OpenContext, OpenError, Reach};
use kestrel_transport::params::{ParamSpec, Params};
use kestrel_transport::set::PeerCard;

use crate::btl::UsnicBtl;
use crate::card::ModexCard;
use crate::params;

/// The `usnic` component: libfabric datagram endpoints, one per usable interface.
#[derive(Debug)]
pub struct UsnicComponent;

impl Component for UsnicComponent {
    fn name(&self) -> &'static str {
        "usnic"
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
        // libfabric is linked into every Kestrel process, and its psm provider libraries take
        // the crash signals at load time: a rank's segfault must stay a segfault.
        crate::fabric::restore_crash_signals();
    }
    fn before_open(&self, params: &Params) {
        // A bad provider word is reported by `open`; here it just requests nothing.
        if let Some(choice) = crate::discovery::ProviderChoice::parse(&params::PROVIDER.get(params))
        {
            crate::fabric::request_providers(choice.providers().iter().copied());
        }
    }
    fn open(&self, params: &Params, cx: &OpenContext<'_>) -> Result<Box<dyn Module>, OpenError> {
        match UsnicBtl::new(params, cx.me, cx.set_id, cx.my_node()) {
            Ok(Some(b)) => Ok(Box::new(b)),
            Ok(None) => Err(OpenError::Declined(format!(
                "no usable network interface on node {} (run `kestrel-ifmatch list` there to \
                 see why)",
                cx.my_node()
            ))),
            Err(e) => Err(OpenError::Failed(e)),
        }
    }
}

impl Module for UsnicBtl {
    fn card(&self) -> Vec<u8> {
        UsnicBtl::card(self).encode()
    }
    fn add_peers(&mut self, key: u64, cards: &[PeerCard<'_>]) -> Vec<Result<(), String>> {
        self.set_key(key);
        cards
            .iter()
            .enumerate()
            .map(|(p, c)| match c {
                PeerCard::Skip => Ok(()),
                PeerCard::Missing => Err(format!(
                    "process {p} opened no usnic interface (run `kestrel-ifmatch list` on its \
                     node to see why)"
                )),
                PeerCard::Card(bytes) => {
                    let card = ModexCard::decode(bytes)
                        .map_err(|e| format!("card of process {p}: {e}"))?;
                    self.add_peer(p as u32, card).map_err(|why| {
                        tracing::debug!(target: "usnic", "{why}");
                        // The set prefixes every reason with the component's name.
                        why.strip_prefix("usnic: ")
                            .map(str::to_string)
                            .unwrap_or(why)
                    })
                }
            })
            .collect()
    }
}
