//! Point-to-point messaging layer: communicators, matching, eager/rendezvous protocols,
//! requests, and the progress engine.
//!
//! It talks to transports only through the contract of `kestrel-transport` (the `Btl` trait,
//! the transport set that opens components from the registry it is given, and the
//! node-collectives interface), never to a concrete transport: it depends on none. Its
//! `unsafe` code is [`buf`], which holds user buffers for the duration of a request, the
//! blocking byte exchanges in `engine::exchange` that wrap their own stack buffers in it, and
//! [`engine::rma`]'s `memory`, the window memory peers' one-sided operations read and write.
#![deny(unsafe_code)]
#![warn(missing_docs)]

#[allow(unsafe_code)]
pub mod buf;
pub mod coll;
mod coll_hier;
mod coll_select;
mod coll_shm;
pub mod coll_table;
pub mod dpm;
pub mod engine;
pub mod group;
pub mod hdr;
pub mod inter;
pub mod matching;
pub mod op;
pub mod params;
mod procs;
#[allow(unsafe_code)]
mod segment_poll;
pub mod topo;

pub use engine::nbc;
pub use engine::rma;
pub use engine::{Engine, PmlError, ReqId, Status};
pub use group::Group;
