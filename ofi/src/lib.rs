//! Inter-node transport over libfabric reliable-datagram endpoints (`FI_EP_RDM` with `FI_MSG`):
//! `tcp;ofi_rxm` on any Ethernet, and on clusters the providers of their fabric (`verbs;ofi_rxm`,
//! `efa`, `psm3`, `cxi`). The provider delivers every message whole and reliably, so unlike
//! usnic this transport retransmits nothing in normal operation: it frames each message with the
//! sender, the set's key and a frame number, and hands it to the provider. The numbers and the
//! acknowledgements that come back only detect a pair of endpoints that went silent (a link
//! down) and, with several pairs to a peer, move its traffic to another one. Where the provider
//! offers RMA, a large message is read by its receiver straight from the sender's registered
//! buffer instead of travelling through the send slots.
//!
//! Module map (see `docs/architecture.md`, "The ofi transport"):
//! * [`params`]: the transport's registered parameters (`ofi_*`);
//! * [`wire`]: the frame in front of every message (version, tag, sender, key), encoded and
//!   checked;
//! * [`paths`]: the pairs of endpoints that reach each peer, frame numbering, acknowledgements,
//!   failure detection and failover (sans-IO);
//! * [`registrations`]: the send buffers registered for peers' RMA reads, and which to keep
//!   for reuse (sans-IO);
//! * [`card`]: what a process publishes so peers reach it (provider, domain, address);
//! * [`select`]: which provider and domain a process uses (`ofi_provider`, interface filters);
//! * [`btl`]: the transport itself ([`btl::OfiBtl`]);
//! * [`component`]: the registered component;
//! * [`fuzzing`]: the bodies and seed corpora of the fuzz targets over what peers send.
//!
//! It has no `unsafe`: every libfabric call goes through `kestrel-fabric`.

#![forbid(unsafe_code)]

#[cfg(feature = "libfabric")]
pub mod btl;
pub mod card;
#[cfg(feature = "libfabric")]
pub mod component;
pub mod fuzzing;
pub mod params;
pub mod paths;
pub mod registrations;
#[cfg(feature = "libfabric")]
pub mod select;
pub mod wire;
