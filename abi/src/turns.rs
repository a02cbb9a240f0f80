//! Whose turn it is to agree on a context id: the creations of communicators under
//! `MPI_THREAD_MULTIPLE` that wait on this process, and the one holding the turn (the rule
//! is in [`crate::comm_threads`]). It owns only this bookkeeping, kept in the library state,
//! and never communicates.

use std::collections::BTreeSet;

/// The creations of this process waiting for a context id, and whose turn it is.
#[derive(Debug, Default)]
pub struct Creations {
    serial: u64,
    /// Registered creations by (parent context, serial): the first may take the turn.
    waiting: BTreeSet<(u16, u64)>,
    /// The creation holding the turn (its serial).
    turn: Option<u64>,
}

impl Creations {
    pub(crate) fn register(&mut self, parent: u16) -> (u16, u64) {
        self.serial += 1;
        let key = (parent, self.serial);
        self.waiting.insert(key);
        key
    }

    pub(crate) fn take_turn(&mut self, key: (u16, u64)) -> bool {
        if self.turn.is_none() && self.waiting.first() == Some(&key) {
            self.turn = Some(key.1);
            return true;
        }
        false
    }

    pub(crate) fn end_turn(&mut self, key: (u16, u64)) {
        if self.turn == Some(key.1) {
            self.turn = None;
        }
    }

    pub(crate) fn unregister(&mut self, key: (u16, u64)) {
        self.end_turn(key);
        self.waiting.remove(&key);
    }
}

#[cfg(test)]
mod tests {
    use super::Creations;

    #[test]
    fn the_turn_goes_to_the_lowest_parent_and_is_held_by_one_creation() {
        let mut c = Creations::default();
        let high = c.register(9);
        let low = c.register(4);
        assert!(!c.take_turn(high), "a creation on a higher parent waits");
        assert!(c.take_turn(low));
        assert!(!c.take_turn(low), "the turn is taken once per round");
        c.end_turn(high);
        assert!(
            !c.take_turn(high),
            "ending another creation's turn changes nothing"
        );
        c.unregister(low);
        assert!(
            c.take_turn(high),
            "once the lowest is done, the next one gets the turn"
        );
    }
}
