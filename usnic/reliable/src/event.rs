//! What a connection reports to its driver besides data: [`Event`]s, taken with
//! [`crate::Connection::poll_event`].
//!
//! This module owns the vocabulary only. The connection decides when an event happens (path
//! failure is its [`crate::timer::Timer::PathFailure`]); the driver decides what to do about
//! it (move the messages to another path, end the job). It must never carry I/O handles or
//! anything the driver could use to reach into the connection.

use std::fmt;
use std::time::Duration;

use crate::config::{FAIL_AFTER_MS, PEER_TIMEOUT_MS};

/// Something the driver must react to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// No acknowledgement progress for `limit` while data was outstanding: the connection has
    /// failed. It sends no more data and refuses new messages ([`crate::SendError::Failed`]);
    /// [`crate::Connection::take_unacknowledged`] hands back every message not fully
    /// acknowledged, for another path. Reported once per connection.
    PathFailed {
        /// The limit that was exceeded, and which parameter set it.
        limit: FailureLimit,
        /// Segments unacknowledged when it failed.
        unacknowledged: usize,
    },
}

/// The silence a path was allowed before it failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureLimit {
    /// `usnic_fail_after_ms`: other working paths to the peer remained.
    FailAfter(Duration),
    /// `usnic_peer_timeout_ms`: the connection was its peer's sole working path.
    PeerTimeout(Duration),
}

impl FailureLimit {
    /// The silence allowed.
    pub fn duration(self) -> Duration {
        match self {
            FailureLimit::FailAfter(d) | FailureLimit::PeerTimeout(d) => d,
        }
    }

    /// The registered parameter that sets it (`usnic_fail_after_ms`, `usnic_peer_timeout_ms`).
    pub fn param(self) -> &'static str {
        match self {
            FailureLimit::FailAfter(_) => FAIL_AFTER_MS.spec().name,
            FailureLimit::PeerTimeout(_) => PEER_TIMEOUT_MS.spec().name,
        }
    }
}

impl fmt::Display for FailureLimit {
    /// "no acknowledgement for 3000 ms (usnic_fail_after_ms)".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "no acknowledgement for {} ms ({})",
            self.duration().as_millis(),
            self.param()
        )
    }
}
