//! Shared-memory transport (intra-node): segments, fast boxes, the receive FIFO, single copy and
//! the collective segment engine.
//!
//! Owns every byte Kestrel places in `/dev/shm` (or `KESTREL_SHM_DIR`). Files it creates are
//! named [`segment_prefix`]`(job)` followed by a suffix, so that the launcher can remove every
//! file of a job after a crash. It must never interpret bytes from another process without a
//! checked decoder.

/// The prefix of every shared-memory file of job `job_id`.
pub fn segment_prefix(job_id: &str) -> String {
    kestrel_runtime::session::shm_prefix(job_id)
}
