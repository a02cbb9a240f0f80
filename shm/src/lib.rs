//! Shared-memory transport (intra-node): segments, fast boxes, the receive queue, single copy.
//!
//! Owns every byte Kestrel places in `/dev/shm` (or `KESTREL_SHM_DIR`). Files it creates are
//! named `kestrel.<job>.` followed by a suffix, so that the launcher can remove every file of a
//! job after a crash. Every value read from another process's memory goes through a checked
//! decoder ([`segment::read_header`], [`segment::FragRef::decode`],
//! [`segment::decode_frag_word`], the fast-box header check) before it is trusted.
//!
//! The checks of its fuzz targets (peer segment headers and what is read through them, peer
//! cards) and their seed corpora live in [`fuzzing`].
//!
//! `unsafe` lives only in [`mem`] (the mapping); the ring and queue algorithms in [`fifo`] and
//! [`fbox`] are safe code over the [`mem::SharedMem`] trait, which loom models in tests.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod btl;
pub mod card;
pub mod cma;
pub mod coll;
pub mod component;
pub mod fbox;
pub mod fifo;
pub mod fuzzing;
#[allow(unsafe_code)]
pub mod mem;
pub mod params;
pub mod segment;

pub use btl::{ShmBtl, ShmCard};

/// Where the shm transport puts a job's segments, and the bytes the point-to-point segments of
/// `local_size` ranks on one node take there (each rank's segment grows with the node's
/// ranks). The launcher checks this against the free space before it starts any rank;
/// collective segments come on top and are checked when a communicator creates one.
pub fn job_footprint(
    params: &kestrel_transport::params::Params,
    local_size: usize,
) -> (std::path::PathBuf, u64) {
    let per_rank = btl::segment_geometry(params, local_size).layout().total as u64;
    (
        std::path::PathBuf::from(params::DIR.get(params)),
        per_rank.saturating_mul(local_size as u64),
    )
}
pub use component::{ShmCollectives, ShmComponent};

#[cfg(all(test, not(loom)))]
mod tests {
    use kestrel_transport::params::Params;

    #[test]
    fn memory_per_rank_is_bounded_whatever_the_node_size() {
        let params = Params::defaults(&crate::params::specs());
        let mib = |b: u64| b as f64 / (1u64 << 20) as f64;
        let per_rank: Vec<(usize, f64)> = [2usize, 16, 32, 64, 128, 256]
            .iter()
            .map(|&n| (n, mib(super::job_footprint(&params, n).1) / n as f64))
            .collect();
        for &(n, each) in &per_rank {
            assert!(
                each <= 4.0,
                "{n} ranks: {each:.2} MiB per rank ({per_rank:?})"
            );
        }
        eprintln!("MiB per rank by node size: {per_rank:?}");
        // 16 ranks fit a container's 64 MiB /dev/shm with room for the world's collective
        // segment (about 2 MiB).
        assert!(
            mib(super::job_footprint(&params, 16).1) <= 60.0,
            "{per_rank:?}"
        );
        // Growth per rank from 16 to 256 ranks is the receive queue's only.
        assert!(per_rank[5].1 - per_rank[1].1 < 0.6, "{per_rank:?}");
    }
}
