//! `kestrel-reliable`: the reliable-datagram core of the usnic transport: one reliable, ordered
//! message channel per (peer, rail) over datagrams that can be lost, duplicated, reordered or
//! padded.
//!
//! This crate has no libfabric dependency and is re-exported by `kestrel-usnic` as
//! `kestrel_usnic::reliable`. It owns the protocol and nothing of the I/O: it is sans-IO
//! (quinn-proto style). The transport decodes each received datagram with [`wire::decode`] (dropping and counting
//! what fails: wrong key, bad length, unknown kind), routes it by `(src_rank, src_rail,
//! dst_rail)` to its [`Connection`], and sends what [`Connection::poll_transmit`] writes. Time
//! enters only as `Instant` arguments. This crate must never do I/O, read the clock, or
//! contain `unsafe` code.
//!
//! * [`wire`]: the 32-byte header, its checked decoder and its encoder;
//! * [`config`]: [`Config`], its limits, and the registered `usnic_*` parameters it comes from;
//! * [`conn`]: the per-(peer, rail) state machine ([`Connection`]);
//! * [`timer`]: its named timers ([`TimerTable`]: delayed ACK, retransmission, tail-loss
//!   probe, path failure);
//! * [`event`]: what it reports to its driver ([`Event::PathFailed`]);
//! * [`congestion`]: its congestion window (NewReno: slow start, additive increase, halving on
//!   loss, collapse and undo on timeout);
//! * [`fuzzing`]: the body of the `decode_header` fuzz target and its seed corpus;
//! * [`sim`]: a two-ended simulated link with virtual time, loss, duplication, reordering,
//!   delay, an MTU, a finite receive buffer with its drain rate, and process stalls, used by
//!   the tests and reusable by benchmarks.

#![forbid(unsafe_code)]

pub mod config;
pub mod congestion;
pub mod conn;
pub mod event;
pub mod fuzzing;
pub mod sim;
pub mod timer;
pub mod wire;

pub use config::{CcAlgorithm, Config, ConfigError};
pub use conn::{ConnStats, Connection, SendError};
pub use event::{Event, FailureLimit};
pub use timer::{Timer, TimerTable};
pub use wire::{decode, encode, Body, DataFields, Header, WireError, HEADER_LEN};

#[cfg(test)]
mod tests;
