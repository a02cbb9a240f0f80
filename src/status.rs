//! What a completed receive or a probe reports ([`Status`]).
//!
//! It owns the translation of the engine's status into the public one and never
//! communicates.

use crate::{Equivalence, Rank, Tag, ANY_TAG, PROC_NULL};

/// What a completed receive (or a probe) reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Status {
    source: Rank,
    tag: Tag,
    bytes: usize,
    truncated_from: Option<usize>,
    cancelled: bool,
}

impl Status {
    pub(crate) fn from_pml(s: kestrel_pml::Status) -> Status {
        Status {
            source: s.source,
            tag: s.tag,
            bytes: s.count,
            truncated_from: s.truncated_from,
            cancelled: s.cancelled,
        }
    }

    pub(crate) fn null() -> Status {
        Status {
            source: PROC_NULL,
            tag: ANY_TAG,
            bytes: 0,
            truncated_from: None,
            cancelled: false,
        }
    }

    /// The sender's rank in the communicator.
    pub fn source_rank(&self) -> Rank {
        self.source
    }

    /// The message's tag.
    pub fn tag(&self) -> Tag {
        self.tag
    }

    /// Bytes received (for a probe: bytes of the message).
    pub fn count_bytes(&self) -> usize {
        self.bytes
    }

    /// Elements of `T` received.
    pub fn count<T: Equivalence>(&self) -> usize {
        self.bytes / std::mem::size_of::<T>().max(1)
    }

    /// The message was longer than the buffer (`MPI_ERR_TRUNCATE`): its full length in bytes.
    /// The buffer holds the first part; the rest was consumed and dropped.
    pub fn truncated_from(&self) -> Option<usize> {
        self.truncated_from
    }

    /// The receive was cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.cancelled
    }
}
