//! Sleeping when idle: a rank that has found nothing to do for `pml_idle_sleep_after_ms`
//! sleeps in `poll(2)` on its transports' wait descriptors (at most `pml_idle_sleep_ms` at a
//! time) instead of spinning, when every transport it uses can wake it
//! ([`Btl::prepare_sleep`]). A rank whose peers compute for seconds then costs no CPU, while a
//! ping-pong or a collective loop never waits long enough to sleep.
//!
//! This module owns the decision and the `poll(2)` call (its one `unsafe` statement). It must
//! never sleep while something other than a transport may need this rank: collective
//! schedules in progress, detached requests, shared-memory collective segments in use, or a
//! thread of a multithreaded process waiting for the engine.

use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use kestrel_transport::btl::SleepReadiness;
use kestrel_transport::params::Params;

use super::Engine;

/// Idle steps between two looks at the clock (the first one starts the idle stretch).
pub(super) const SLEEP_CHECK: u32 = 1 << 10;

/// Idle steps between a sleep that ended with nothing to do and the next one. The transports
/// need a few polls after a wake (their timers, a completion that raced the timeout); a full
/// [`SLEEP_CHECK`] of polls after every `pml_idle_sleep_ms` timeout kept an idle rank over
/// `tcp;ofi_rxm` at 17-26 % of a core.
const RESLEEP_CHECK: u32 = 1 << 3;

/// The sleeping policy and its scratch space.
#[derive(Debug, Default)]
pub(crate) struct IdleSleep {
    /// Idle time before the first sleep; `None`: never sleep.
    after: Option<Duration>,
    /// Longest single sleep, in milliseconds (`poll(2)`'s timeout).
    max_ms: i32,
    /// The engine looks at sleeping when `idle & check_mask == 0`: every [`SLEEP_CHECK`]
    /// idle steps, every [`RESLEEP_CHECK`] once it has slept in this idle stretch, never when
    /// sleeping is off (`u32::MAX`: the idle count is never 0 there).
    check_mask: u32,
    /// When the current idle stretch began.
    since: Option<Instant>,
    /// Descriptors of the coming sleep (kept to reuse the allocation).
    fds: Vec<libc::pollfd>,
    raw: Vec<RawFd>,
}

impl IdleSleep {
    pub(crate) fn from_params(params: &Params) -> IdleSleep {
        let after = crate::params::IDLE_SLEEP_AFTER_MS.get(params);
        IdleSleep {
            after: (after > 0).then(|| Duration::from_millis(after as u64)),
            max_ms: crate::params::IDLE_SLEEP_MS.get(params) as i32,
            check_mask: if after > 0 { SLEEP_CHECK - 1 } else { u32::MAX },
            ..IdleSleep::default()
        }
    }

    /// Whether the wait that has been idle for `idle` steps should look at sleeping now.
    #[inline]
    pub(crate) fn due(&self, idle: u32) -> bool {
        idle & self.check_mask == 0
    }

    /// Turns sleeping off for good (a multithreaded process: a sleeper would hold the engine
    /// other threads wait for).
    pub(crate) fn disable(&mut self) {
        self.after = None;
        self.check_mask = u32::MAX;
    }
}

impl Engine {
    /// Never sleep when idle from now on (see [`IdleSleep::disable`]).
    pub fn forbid_idle_sleep(&mut self) {
        self.sleep.disable();
    }

    /// Called when [`IdleSleep::due`] for a wait idle `idle` steps: starts the idle stretch
    /// on the first call (`idle == SLEEP_CHECK`), and once it is long enough sleeps if every
    /// transport agrees.
    #[cold]
    pub(super) fn maybe_sleep(&mut self, idle: u32) {
        let Some(after) = self.sleep.after else {
            return;
        };
        if idle < SLEEP_CHECK {
            // Work arrived since the last sleep and a new idle stretch began: back to the
            // normal pace, which starts that stretch at SLEEP_CHECK.
            self.sleep.check_mask = SLEEP_CHECK - 1;
            return;
        }
        let first = idle == SLEEP_CHECK;
        let now = Instant::now();
        let since = match self.sleep.since {
            Some(s) if !first => s,
            _ => {
                self.sleep.since = Some(now);
                return;
            }
        };
        if now.duration_since(since) < after {
            return;
        }
        if !self.nbc.is_idle()
            || !self.st.detached.is_empty()
            || self
                .coll_segments
                .iter()
                .any(|s| matches!(s, Some(Some(_))))
        {
            tracing::trace!(target: "pml", "not sleeping: collectives or detached requests in progress, or a node segment in use");
            return;
        }
        let mut raw = std::mem::take(&mut self.sleep.raw);
        raw.clear();
        let mut all_ready = true;
        for b in self.btls.iter_mut() {
            let r = b.prepare_sleep(&mut raw);
            if r != SleepReadiness::Ready {
                tracing::trace!(target: "pml", transport = b.name(), readiness = ?r, "not sleeping");
                all_ready = false;
                break;
            }
        }
        if all_ready && !raw.is_empty() {
            let fds = &mut self.sleep.fds;
            fds.clear();
            fds.extend(raw.iter().map(|&fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            }));
            // SAFETY: `fds` is a live, exclusively borrowed array of `fds.len()` pollfd structs;
            // poll(2) only writes their `revents`. The descriptors belong to open transports
            // (a stale one would make poll report POLLNVAL, not touch memory).
            #[allow(unsafe_code)]
            let _ = unsafe {
                libc::poll(
                    fds.as_mut_ptr(),
                    fds.len() as libc::nfds_t,
                    self.sleep.max_ms,
                )
            };
            // Whatever woke it, the next few polls tell; if they find nothing, sleep again.
            self.sleep.check_mask = RESLEEP_CHECK - 1;
        }
        self.sleep.raw = raw;
    }
}
