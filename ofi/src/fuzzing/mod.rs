//! The bodies of the ofi transport's fuzz targets (`fuzz/`, one submodule per target) and
//! their seed corpora: every byte another process sends the transport.
//!
//! * [`frame`]: the frame in front of every message ([`crate::wire::decode`]);
//! * [`card`]: the card a process publishes ([`crate::card::OfiCard::decode`]);
//! * [`liveness`]: the liveness probes and answers (`kestrel_fabric::liveness::decode`), which
//!   usnic's responders and probers read too.
//!
//! Each submodule's `fuzz_one` holds what its target checks, so that the unit tests replay the
//! committed corpus `fuzz/corpus/<target>/` without cargo-fuzz; `seed_corpus` generates that
//! corpus. This module owns those checks; it must never touch the network or libfabric, hold
//! state between calls, or panic except on a violated property.

pub mod card;
pub mod frame;
#[cfg(feature = "libfabric")]
pub mod liveness;

/// The committed corpus of `target`.
#[cfg(test)]
fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}
