//! Inter-node transport over libfabric reliable-datagram endpoints (`FI_EP_RDM` with `FI_MSG`):
//! `tcp;ofi_rxm` on any Ethernet, and on clusters the providers of their fabric (`verbs;ofi_rxm`,
//! `efa`, `psm3`, `cxi`). The provider delivers every message whole and reliably, so unlike
//! usnic this transport has no reliability protocol of its own: it frames each message with the
//! sender and the set's key and hands it to the provider.
//!
//! Module map (see `docs/architecture.md`, "The ofi transport"):
//! * [`params`]: the transport's registered parameters (`ofi_*`);
//! * [`wire`]: the frame in front of every message (version, tag, sender, key), encoded and
//!   checked;
//! * [`card`]: what a process publishes so peers reach it (provider, domain, address);
//! * [`select`]: which provider and domain a process uses (`ofi_provider`, interface filters);
//! * [`btl`]: the transport itself ([`btl::OfiBtl`]);
//! * [`component`]: the registered component.
//!
//! It has no `unsafe`: every libfabric call goes through `kestrel-fabric`.

#![forbid(unsafe_code)]

#[cfg(feature = "libfabric")]
pub mod btl;
pub mod card;
#[cfg(feature = "libfabric")]
pub mod component;
pub mod params;
#[cfg(feature = "libfabric")]
pub mod select;
pub mod wire;
