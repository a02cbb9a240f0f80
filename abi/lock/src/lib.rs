//! The C library's call lock and the indexed tables it guards.
//!
//! * [`call_lock`]: [`CallLock`], how an MPI call takes the library state and how a
//!   blocking call lets other threads in (its cost chosen by the thread level);
//! * [`slab`]: [`Slab`], the tables behind the handles (requests, communicators, ...).
//!
//! They live in a crate of their own so that `tests/loom.rs` can run them under loom
//! (`RUSTFLAGS="--cfg loom"`), which explores every interleaving of threads taking the lock,
//! handing it over mid-wait and changing the request table, and checks that each access to
//! the table is ordered after the previous one. `unsafe` is confined to [`call_lock`].
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod call_lock;
pub mod slab;

pub use call_lock::{CallGuard, CallLock};
pub use slab::Slab;
