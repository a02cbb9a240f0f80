//! Performance variables: sessions, handles and reading the counters.
//!
//! This module owns the session and handle rules of MPI_T for Kestrel's counters, which are
//! all continuous (always counting: they cannot be started or stopped) and read-only (they
//! cannot be written or reset). It reads the engine's counters under the library's call
//! lock, taken alone (never with MPI_T's lock held), and must never change them.

use std::os::raw::c_int;

use super::catalog::{self, Pvar};
use super::{
    err, handle_id, index, initialized, make_handle, ready, HandleKind, Life, ToolError,
    ToolResult, ERR_INVALID, ERR_INVALID_HANDLE, ERR_INVALID_NAME, ERR_INVALID_SESSION,
    ERR_PVAR_NO_STARTSTOP, ERR_PVAR_NO_WRITE,
};

/// The handle argument of start, stop and reset.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// `MPI_T_PVAR_ALL_HANDLES`: every handle of the session.
    All,
    /// One handle.
    One(usize),
}

/// `MPI_T_pvar_get_num`.
pub fn num() -> ToolResult<c_int> {
    ready()?;
    Ok(catalog::catalog().pvars.len() as c_int)
}

/// `MPI_T_pvar_get_info`: performance variable `i`.
pub fn info(i: c_int) -> ToolResult<&'static Pvar> {
    ready()?;
    let pvars = &catalog::catalog().pvars;
    Ok(&pvars[index("performance variable", i, pvars.len(), "MPI_T_pvar_get_num")?])
}

/// `MPI_T_pvar_get_index`: the variable named `name` of class `class`.
pub fn index_of(name: &str, class: c_int) -> ToolResult<c_int> {
    ready()?;
    let pvars = &catalog::catalog().pvars;
    match pvars.iter().position(|p| p.name == name) {
        Some(i) if pvars[i].class == class => Ok(i as c_int),
        Some(i) => Err(err(
            ERR_INVALID_NAME,
            format!(
                "performance variable '{name}' is of class {} (MPI_T_PVAR_CLASS_COUNTER), not {class}",
                pvars[i].class
            ),
        )),
        None => Err(err(
            ERR_INVALID_NAME,
            format!(
                "no performance variable is named '{name}'; they are Kestrel's counters \
                 (pml_*, and each transport's: {})",
                pvars
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )),
    }
}

/// `MPI_T_pvar_session_create`.
pub fn session_create() -> ToolResult<usize> {
    let mut st = initialized()?;
    let id = st.next_id();
    st.sessions.insert(id, Default::default());
    Ok(make_handle(HandleKind::Session, id))
}

/// `MPI_T_pvar_session_free`: frees the session and its handles.
pub fn session_free(session: usize) -> ToolResult<()> {
    let mut st = initialized()?;
    handle_id(HandleKind::Session, session)
        .and_then(|id| st.sessions.remove(&id))
        .map(|_| ())
        .ok_or_else(bad_session)
}

fn bad_session() -> ToolError {
    err(
        ERR_INVALID_SESSION,
        "the session is not one MPI_T_pvar_session_create returned (freed, \
         MPI_T_PVAR_SESSION_NULL, released by the last MPI_T_finalize, or another kind of handle)",
    )
}

fn bad_handle() -> ToolError {
    err(
        ERR_INVALID_HANDLE,
        "the performance variable handle is not one MPI_T_pvar_handle_alloc returned in this \
         session (freed, MPI_T_PVAR_HANDLE_NULL, allocated in another session, or another kind \
         of handle)",
    )
}

/// `MPI_T_pvar_handle_alloc`: a handle on variable `i` in `session`, and its count (1).
pub fn handle_alloc(session: usize, i: c_int) -> ToolResult<(usize, c_int)> {
    info(i)?;
    let mut st = initialized()?;
    let sid = handle_id(HandleKind::Session, session)
        .filter(|id| st.sessions.contains_key(id))
        .ok_or_else(bad_session)?;
    let id = st.next_id();
    st.sessions
        .get_mut(&sid)
        .expect("checked above")
        .insert(id, i as usize);
    Ok((make_handle(HandleKind::Pvar, id), 1))
}

/// `MPI_T_pvar_handle_free`.
pub fn handle_free(session: usize, h: usize) -> ToolResult<()> {
    let mut st = initialized()?;
    let handles = handle_id(HandleKind::Session, session)
        .and_then(|id| st.sessions.get_mut(&id))
        .ok_or_else(bad_session)?;
    handle_id(HandleKind::Pvar, h)
        .and_then(|id| handles.remove(&id))
        .map(|_| ())
        .ok_or_else(bad_handle)
}

/// The variable behind handle `h` of `session` (`None` for `MPI_T_PVAR_ALL_HANDLES`, once
/// the session is checked).
fn lookup(session: usize, target: Target) -> ToolResult<Option<&'static Pvar>> {
    let st = initialized()?;
    let handles = handle_id(HandleKind::Session, session)
        .and_then(|id| st.sessions.get(&id))
        .ok_or_else(bad_session)?;
    match target {
        Target::All => Ok(None),
        Target::One(h) => {
            let i = handle_id(HandleKind::Pvar, h)
                .and_then(|id| handles.get(&id).copied())
                .ok_or_else(bad_handle)?;
            Ok(Some(&catalog::catalog().pvars[i]))
        }
    }
}

/// `MPI_T_pvar_start` and `MPI_T_pvar_stop`: every variable is continuous, so one handle is
/// an error and all handles of the session have nothing to do.
pub fn start_stop(session: usize, target: Target, call: &str) -> ToolResult<()> {
    match lookup(session, target)? {
        None => Ok(()),
        Some(p) => Err(err(
            ERR_PVAR_NO_STARTSTOP,
            format!(
                "performance variable '{}' is continuous: it counts from MPI_Init on and \
                 cannot be {call}ed; read it twice and take the difference",
                p.name
            ),
        )),
    }
}

/// `MPI_T_pvar_reset`: every variable is read-only, so one handle is an error and all
/// handles of the session have nothing to reset.
pub fn reset(session: usize, target: Target) -> ToolResult<()> {
    match lookup(session, target)? {
        None => Ok(()),
        Some(p) => Err(read_only(p)),
    }
}

/// `MPI_T_pvar_write` and `MPI_T_pvar_readreset`: refused (read-only variables).
pub fn write(session: usize, h: usize) -> ToolResult<()> {
    match lookup(session, Target::One(h))? {
        Some(p) => Err(read_only(p)),
        None => Err(bad_handle()),
    }
}

fn read_only(p: &Pvar) -> ToolError {
    err(
        ERR_PVAR_NO_WRITE,
        format!(
            "performance variable '{}' is read-only: it cannot be written or reset; read it \
             twice and take the difference",
            p.name
        ),
    )
}

/// `MPI_T_pvar_read`: the counter's value (0 before `MPI_Init`, the value at
/// `MPI_Finalize` after it).
pub fn read(session: usize, h: usize) -> ToolResult<u64> {
    let Some(p) = lookup(session, Target::One(h))? else {
        return Err(bad_handle());
    };
    if let Some(v) = settled(p.name) {
        return Ok(v);
    }
    // MPI_T's lock is released here: the call lock is taken alone.
    let Some(mut l) = crate::state::Locked::acquire() else {
        return Err(err(
            ERR_INVALID,
            format!(
                "performance variable '{}' was read from inside a user reduction function, \
                 where the engine is busy; read it before or after the reduction",
                p.name
            ),
        ));
    };
    if let crate::state::Phase::Running(core) = l.phase() {
        return Ok(value_in(&core.engine.counters(), p.name));
    }
    drop(l);
    // MPI_Finalize ran in between.
    Ok(settled(p.name).unwrap_or(0))
}

/// The value of counter `name` when MPI is not running (`None` while it runs).
fn settled(name: &str) -> Option<u64> {
    let st = super::state();
    match &st.life {
        Life::Before => Some(0),
        Life::After(_, counters) => Some(value_in(counters, name)),
        Life::Running(_) => None,
    }
}

/// Counter `name` among `counters` (0 when no transport reports it: not opened).
fn value_in(counters: &[(&'static str, u64)], name: &str) -> u64 {
    counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}
