//! Shared-memory transport (intra-node): segments, fast boxes, the receive queue, single copy.
//!
//! Owns every byte Kestrel places in `/dev/shm` (or `KESTREL_SHM_DIR`). Files it creates are
//! named `kestrel.<job>.` followed by a suffix, so that the launcher can remove every file of a
//! job after a crash. Every value read from another process's memory goes through a checked
//! decoder ([`segment::read_header`], [`segment::FragRef::decode`],
//! [`segment::decode_frag_word`], the fast-box header check) before it is trusted.
//!
//! `unsafe` lives only in [`mem`] (the mapping); the ring and queue algorithms in [`fifo`] and
//! [`fbox`] are safe code over the [`mem::SharedMem`] trait, which loom models in tests.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod btl;
pub mod cma;
pub mod coll;
pub mod component;
pub mod fbox;
pub mod fifo;
#[allow(unsafe_code)]
pub mod mem;
pub mod params;
pub mod segment;

pub use btl::{ShmBtl, ShmCard};
pub use component::{ShmCollectives, ShmComponent};
