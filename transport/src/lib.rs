//! Foundation of every Kestrel layer.
//!
//! This crate owns what all transports and layers above them share: the registered parameter
//! system ([`params`]), the include/exclude component lists ([`components`]), per-component
//! logging ([`logging`]) and the parameters that belong to no single transport
//! ([`core_params`]), the one binary codec for cards and frames ([`codec`]), and the transport contract every BTL implements ([`btl`]), with its
//! conformance suite and the `self` loopback transport; the component side of that contract
//! ([`component`]), the transport set that opens components and routes peers ([`set`]), and
//! the interface to a shared-memory collective engine ([`node_coll`]), and the bytes of the
//! record a stalled rank leaves for its launcher's hang reports ([`wait_record`]).
//!
//! It must never depend on another Kestrel crate, and it holds no process-global state: resolved
//! parameters are passed explicitly to whoever needs them.
//!
//! For the other crates' tests it also keeps the seed-corpus conventions of the fuzz targets
//! ([`fuzz_corpus`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod btl;
pub mod codec;
pub mod component;
pub mod components;
pub mod conformance;
pub mod core_params;
pub mod fuzz_corpus;
pub mod logging;
pub mod node_coll;
pub mod params;
pub mod set;
pub mod wait_record;

pub use btl::{Btl, CounterSpec, Incoming, Limits, RemoteRegion, SelfBtl, SendError};
pub use components::{Selection, SelectionError};
pub use params::{Param, ParamError, ParamKind, ParamSpec, Params, Source};
