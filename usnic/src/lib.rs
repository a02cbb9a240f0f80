//! Inter-node transport over libfabric datagram endpoints (`usnic` or `udp` provider):
//! interface discovery, weighted bipartite interface matching, the reliable-datagram core and
//! multi-rail striping. The `kestrel-ifmatch` diagnostics command is its own crate (`ifmatch/`).
//!
//! Module map (see `docs/architecture.md`, "Interface matching" and "Reliability"):
//! * [`params`]: the transport's registered parameters;
//! * [`discovery`]: which local interfaces the transport may use, and why others are excluded;
//! * [`card`]: the business card (JSON for people and tools, binary for the modex);
//! * [`fuzzing`]: the bodies of the fuzz targets of both card encodings, and their seeds;
//! * [`matching`]: edge weights and the min-cost max-flow pairing of local and remote interfaces;
//! * [`reliable`]: the sans-IO reliable-datagram core (wire header, window, ACKs, reassembly),
//!   re-exported from the `kestrel-reliable` crate;
//! * [`fabric`]: the safe wrapper over libfabric, re-exported from the `kestrel-fabric` crate
//!   (with `kestrel-libfabric-sys`, the only place with libfabric `unsafe`);
//! * [`netdev`]: interface facts from the caller's own network namespace (one `ioctl`, the
//!   crate's only other `unsafe`).

#[cfg(feature = "libfabric")]
pub mod btl;
#[cfg(feature = "libfabric")]
pub mod card;
#[cfg(feature = "libfabric")]
pub mod component;
#[cfg(feature = "libfabric")]
pub mod discovery;
/// The safe wrapper over libfabric, its own crate (`kestrel-fabric`, shared with the `ofi`
/// transport); kept here so `kestrel_usnic::fabric::...` paths keep working.
#[cfg(feature = "libfabric")]
pub use kestrel_fabric as fabric;
#[cfg(feature = "libfabric")]
pub mod fuzzing;
#[cfg(feature = "libfabric")]
pub mod matching;
#[cfg(feature = "libfabric")]
pub mod netdev;
pub mod params;

/// The sans-IO reliable-datagram core, its own crate (`kestrel-reliable`, no libfabric); kept
/// here so `kestrel_usnic::reliable::...` paths keep working.
pub use kestrel_reliable as reliable;
