//! Round-trip estimation and the retransmission timeout (RFC 6298) of one connection.
//!
//! This module owns the smoothed round trip, its variance and the timer backoff. It must
//! never decide what is lost or when to resend: the sender asks it for the timeout.

use std::time::Duration;

use crate::config::Config;

/// Backoff doublings beyond which the timeout is at `rto_max` anyway.
pub(super) const MAX_BACKOFF: u32 = 16;

/// Round-trip estimation after RFC 6298.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct RttEstimator {
    pub(super) srtt: Option<Duration>,
    pub(super) rttvar: Duration,
    pub(super) backoff: u32,
}

impl RttEstimator {
    pub(super) fn sample(&mut self, rtt: Duration) {
        // A valid measurement replaces whatever the backoff guessed.
        self.backoff = 0;
        match self.srtt {
            None => {
                self.srtt = Some(rtt);
                self.rttvar = rtt / 2;
            }
            Some(srtt) => {
                let err = srtt.abs_diff(rtt);
                self.rttvar = (self.rttvar * 3 + err) / 4;
                self.srtt = Some((srtt * 7 + rtt) / 8);
            }
        }
    }

    /// The path delivers: drop the backoff, unless no round trip was ever measured. Then the
    /// backed-off timeout is kept until a sample exists (RFC 6298 5.7), or a first timeout
    /// shorter than the path's round trip would retransmit every segment before its ACK and
    /// Karn's rule would never let a sample through.
    pub(super) fn progress(&mut self) {
        if self.srtt.is_some() {
            self.backoff = 0;
        }
    }

    pub(super) fn rto(&self, cfg: &Config) -> Duration {
        let base = match self.srtt {
            None => cfg.rto_initial,
            Some(srtt) => (srtt + self.rttvar * 4).clamp(cfg.rto_min, cfg.rto_max),
        };
        base.saturating_mul(1 << self.backoff.min(MAX_BACKOFF))
            .min(cfg.rto_max)
    }
}
