//! Serving peers while a shared-memory collective waits: the segment's wait loop calls
//! [`poll`] (a plain `fn()`, see `kestrel_transport::node_coll::PollHook`), which runs the
//! closure [`with`] installed for the duration of the segment operation on this thread.
//!
//! The messaging layer takes the segment out of its table before the operation, so the
//! closure can own the engine's other state exclusively; nothing else is reachable from
//! here. This module owns only the thread-local slot; it must never start a segment
//! operation (a closure that did would find the slot empty and simply not poll).

use std::cell::Cell;

type Poll = *mut (dyn FnMut() + 'static);

thread_local! {
    static SLOT: Cell<Option<Poll>> = const { Cell::new(None) };
}

/// Puts the previous slot back when [`with`] returns or unwinds.
struct Restore(Option<Poll>);

impl Drop for Restore {
    fn drop(&mut self) {
        SLOT.with(|s| s.set(self.0));
    }
}

/// Runs `f` with `poll` installed as what [`poll`] calls on this thread.
pub fn with<R>(poll: &mut dyn FnMut(), f: impl FnOnce() -> R) -> R {
    let ptr: *mut (dyn FnMut() + '_) = poll;
    // SAFETY: only the lifetime bound of the trait object changes. The pointer is stored in
    // the slot for the duration of this call and removed before `poll` can go out of scope
    // (`Restore` runs on return and on unwinding); [`poll`] dereferences it only while it is
    // in the slot.
    #[allow(unsafe_code)]
    let ptr: Poll = unsafe { std::mem::transmute(ptr) };
    let _restore = Restore(SLOT.with(|s| s.replace(Some(ptr))));
    f()
}

/// Calls the closure [`with`] installed, if any (not re-entered: the slot is empty while
/// it runs).
pub fn poll() {
    let Some(p) = SLOT.with(|s| s.take()) else {
        return;
    };
    let _restore = Restore(Some(p));
    // SAFETY: `p` is in the slot only while the `with` call that installed it runs, and
    // that call holds the closure mutably borrowed for its whole duration; taking it out of
    // the slot while it runs rules out a second mutable use through a nested `poll`.
    #[allow(unsafe_code)]
    unsafe {
        (*p)()
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poll_reaches_the_installed_closure_only_inside_with_and_never_reentered() {
        let mut n = 0;
        poll();
        let mut count = || {
            n += 1;
            poll();
        };
        with(&mut count, || {
            poll();
            poll();
        });
        poll();
        assert_eq!(n, 2);
    }
}
