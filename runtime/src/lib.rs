//! Kestrel's runtime: how ranks are started and find each other.
//!
//! * [`client`]: PMI-1 and PMI-2 clients (and the singleton), over [`wire`] codecs.
//! * [`spawn_request`]: what a rank asks its launcher to start, as a PMI-2 `spawn` command.
//! * [`fuzzing`]: the bodies of the cargo-fuzz targets of its decoders (PMI wire, launcher
//!   frames, connect/accept frames, port names) and their seed corpora.
//! * [`modex`]: the rank-side [`Runtime`]: identity, blob publish/lookup, barrier, allgather,
//!   abort.
//! * [`launcher`]: the `kestrel-run` launcher: PMI server, per-host daemons, failure handling.
//! * [`slurm`], [`hosts`]: where ranks go; [`host`]: what this machine is (name, boot id, CPUs).
//! * [`session`]: job ids and the files a job leaves, so they can be removed; [`stale`]: what
//!   dead jobs left, found and removed.
//! * [`dpm`]: dynamic processes: port names, the out-of-band listener, lifelines, names.
//! * [`mac`]: keyed proofs (HMAC-SHA256) of a shared secret, for the launcher and DPM ports.
//! * [`wait_board`]: this rank's record of the wait it is stalled in, for hang reports.
//!
//! This crate must never depend on a transport: transports publish their business cards
//! through [`Runtime`], not the other way round. Its only `unsafe` code is in `sys`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod client;
pub use kestrel_transport::codec;
pub mod dpm;
pub mod fuzzing;
pub mod host;
pub mod hosts;
pub mod launcher;
pub mod mac;
pub mod modex;
pub mod params;
pub mod session;
pub mod slurm;
pub mod spawn_request;
pub mod stale;
#[allow(unsafe_code)]
mod sys;
pub mod wait_board;
pub mod wire;

pub use modex::{Runtime, RuntimeError};
