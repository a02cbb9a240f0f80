//! MPI-4 sessions: `MPI_Session_init` and the process sets a session names.
//!
//! Kestrel offers the two process sets MPI defines, `mpi://WORLD` and `mpi://SELF`. A
//! session opened before `MPI_Init` starts the library as `MPI_Init` does (the runtime and
//! engine are per process); communicators made from a session's groups
//! (`MPI_Comm_create_from_group`) are ordinary communicators. This module owns the session
//! table and the process sets; it never communicates.

use std::os::raw::c_int;

use kestrel_pml::Group;

use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::state::Core;

pub use crate::state::SessionRec;

/// The process sets every session offers.
pub const PSETS: [&str; 2] = ["mpi://WORLD", "mpi://SELF"];

/// The slot of a session handle.
pub fn slot(core: &Core, h: c_int) -> MpiResult<u32> {
    match handle::decode(h, Obj::Session) {
        Some((Kind::Direct, i)) if core.sessions.get(i).is_some() => Ok(i),
        _ => Err(MpiError::new(
            error::ERR_SESSION,
            if h == handle::SESSION_NULL {
                "the session is MPI_SESSION_NULL".to_string()
            } else {
                format!("{h:#x} is not a session (finalized, or another kind of handle)")
            },
        )),
    }
}

/// Opens a session.
pub fn open(core: &mut Core, errhandler: c_int, info: Vec<(String, String)>) -> c_int {
    let i = core.sessions.insert(SessionRec { errhandler, info });
    handle::make(Kind::Direct, Obj::Session, i)
}

/// The members of process set `name` (case-insensitive, as MPI asks).
pub fn pset(core: &Core, name: &str) -> MpiResult<Group> {
    match name.to_ascii_lowercase().as_str() {
        "mpi://world" => Ok(Group::new((0..core.engine.size()).collect())),
        "mpi://self" => Ok(Group::new(vec![core.engine.rank()])),
        _ => Err(MpiError::new(
            error::ERR_ARG,
            format!(
                "process set \"{name}\" does not exist; Kestrel offers {}",
                PSETS.join(" and ")
            ),
        )),
    }
}
