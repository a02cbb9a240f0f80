//! Foundation of every Kestrel layer.
//!
//! This crate owns what all transports and layers above them share: the registered parameter
//! system ([`params`]), the include/exclude component lists ([`components`]), per-component
//! logging ([`logging`]) and the parameters that belong to no single transport
//! ([`core_params`]). The BTL contract joins it when the first transports land.
//!
//! It must never depend on another Kestrel crate, and it holds no process-global state: resolved
//! parameters are passed explicitly to whoever needs them.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod components;
pub mod core_params;
pub mod logging;
pub mod params;

pub use components::{Selection, SelectionError};
pub use params::{Param, ParamError, ParamKind, ParamSpec, Params, Source};
