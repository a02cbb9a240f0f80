//! The named timers of one connection (quinn-proto's `TimerTable` pattern): a fixed set of
//! timers, each either stopped or armed at an instant of the caller's (possibly virtual) time.
//!
//! This module owns the table and nothing of what the timers mean: [`crate::conn`] decides
//! when each one is armed and what happens when it expires. It must never read the clock,
//! hold more than one deadline per timer, or order expiries other than by [`Timer::ALL`].

use std::time::Instant;

/// One timer of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Timer {
    /// A delayed acknowledgement is due (`ack_delay` after the first unacknowledged segment).
    Ack,
    /// The oldest transmission still unanswered is older than the retransmission timeout.
    Retransmit,
    /// A tail-loss probe is due (nothing heard and nothing sent for the probe timeout).
    TailProbe,
    /// No acknowledgement progress, with data outstanding, for the path's failure limit
    /// (`fail_after`, or `peer_timeout` on the peer's sole path): the path has failed.
    PathFailure,
}

impl Timer {
    /// Every timer, in the order [`TimerTable::expired`] reports them.
    pub const ALL: [Timer; 4] = [
        Timer::Ack,
        Timer::Retransmit,
        Timer::TailProbe,
        Timer::PathFailure,
    ];

    fn index(self) -> usize {
        match self {
            Timer::Ack => 0,
            Timer::Retransmit => 1,
            Timer::TailProbe => 2,
            Timer::PathFailure => 3,
        }
    }
}

/// The deadline of every [`Timer`], `None` while stopped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TimerTable {
    deadlines: [Option<Instant>; Timer::ALL.len()],
}

impl TimerTable {
    /// Arms `timer` at `at` (replacing any earlier deadline).
    pub fn set(&mut self, timer: Timer, at: Instant) {
        self.deadlines[timer.index()] = Some(at);
    }

    /// Arms `timer` at `at`, or stops it with `None`.
    pub fn set_or_stop(&mut self, timer: Timer, at: Option<Instant>) {
        self.deadlines[timer.index()] = at;
    }

    /// Stops `timer`.
    pub fn stop(&mut self, timer: Timer) {
        self.deadlines[timer.index()] = None;
    }

    /// The deadline of `timer`, if armed.
    pub fn get(&self, timer: Timer) -> Option<Instant> {
        self.deadlines[timer.index()]
    }

    /// `timer` is armed and its deadline is not after `now`.
    pub fn is_expired(&self, timer: Timer, now: Instant) -> bool {
        self.get(timer).is_some_and(|t| t <= now)
    }

    /// The earliest deadline of any armed timer.
    pub fn next_timeout(&self) -> Option<Instant> {
        self.deadlines.iter().flatten().min().copied()
    }

    /// The timers expired at `now`, in [`Timer::ALL`] order.
    pub fn expired(&self, now: Instant) -> impl Iterator<Item = Timer> + '_ {
        Timer::ALL
            .into_iter()
            .filter(move |&t| self.is_expired(t, now))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn next_timeout_is_the_earliest_armed_deadline() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut table = TimerTable::default();
        assert_eq!(table.next_timeout(), None);
        table.set(Timer::PathFailure, t0 + ms(3000));
        table.set(Timer::Retransmit, t0 + ms(5));
        table.set(Timer::Ack, t0 + ms(1));
        assert_eq!(table.next_timeout(), Some(t0 + ms(1)));
        table.stop(Timer::Ack);
        assert_eq!(table.next_timeout(), Some(t0 + ms(5)));
        table.set_or_stop(Timer::Retransmit, None);
        assert_eq!(table.next_timeout(), Some(t0 + ms(3000)));
        assert_eq!(table.get(Timer::TailProbe), None);
    }

    #[test]
    fn expiry_is_inclusive_and_in_table_order() {
        let t0 = Instant::now();
        let ms = Duration::from_millis;
        let mut table = TimerTable::default();
        table.set(Timer::PathFailure, t0 + ms(10));
        table.set(Timer::Ack, t0 + ms(10));
        table.set(Timer::TailProbe, t0 + ms(11));
        assert!(table.expired(t0 + ms(9)).next().is_none());
        assert!(!table.is_expired(Timer::Ack, t0 + ms(9)));
        assert!(table.is_expired(Timer::Ack, t0 + ms(10)));
        let due: Vec<Timer> = table.expired(t0 + ms(10)).collect();
        assert_eq!(due, [Timer::Ack, Timer::PathFailure]);
        let due: Vec<Timer> = table.expired(t0 + ms(20)).collect();
        assert_eq!(due, [Timer::Ack, Timer::TailProbe, Timer::PathFailure]);
    }
}
