//! Control variables: their handles, reads and writes.
//!
//! This module owns what a control variable's value is at each point of the library's life
//! (see [`super`]) and the rules for writing one. It must never change a parameter the
//! library already runs with: once `MPI_Init` resolved them, writes are refused.

use std::os::raw::c_int;

use kestrel_transport::params::{ParamKind, Params, Value};

use super::catalog::{self, Cvar, TEXT_LEN};
use super::{
    err, handle_id, index, initialized, make_handle, ready, HandleKind, Life, ToolResult,
    ERR_CVAR_SET_NEVER, ERR_CVAR_SET_NOT_NOW, ERR_INVALID, ERR_INVALID_HANDLE, ERR_INVALID_NAME,
};

/// A control variable's value in its MPI datatype.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CvarValue {
    /// `MPI_INT` (booleans: 0 or 1).
    Int(c_int),
    /// `MPI_COUNT`.
    Count(i64),
    /// `MPI_UNSIGNED_LONG_LONG`.
    Unsigned(u64),
    /// `MPI_CHAR`: the text, without its NUL.
    Text(String),
}

/// `MPI_T_cvar_get_num`.
pub fn num() -> ToolResult<c_int> {
    ready()?;
    Ok(catalog::catalog().cvars.len() as c_int)
}

/// `MPI_T_cvar_get_info`: control variable `i`.
pub fn info(i: c_int) -> ToolResult<&'static Cvar> {
    ready()?;
    let cvars = &catalog::catalog().cvars;
    Ok(&cvars[index("control variable", i, cvars.len(), "MPI_T_cvar_get_num")?])
}

/// `MPI_T_cvar_get_index`.
pub fn index_of(name: &str) -> ToolResult<c_int> {
    ready()?;
    catalog::catalog()
        .cvars
        .iter()
        .position(|c| c.spec.name == name)
        .map(|i| i as c_int)
        .ok_or_else(|| {
            err(
                ERR_INVALID_NAME,
                format!(
                    "no control variable is named '{name}'; the names are Kestrel's parameters \
                     (kestrel-info lists them)"
                ),
            )
        })
}

/// `MPI_T_cvar_handle_alloc`: a handle on control variable `i` and its element count.
pub fn handle_alloc(i: c_int) -> ToolResult<(usize, c_int)> {
    let cvar = info(i)?;
    let mut st = initialized()?;
    let id = st.next_id();
    st.cvar_handles.insert(id, i as usize);
    Ok((make_handle(HandleKind::Cvar, id), cvar.count))
}

/// `MPI_T_cvar_handle_free`.
pub fn handle_free(h: usize) -> ToolResult<()> {
    let mut st = initialized()?;
    handle_id(HandleKind::Cvar, h)
        .and_then(|id| st.cvar_handles.remove(&id))
        .map(|_| ())
        .ok_or_else(bad_handle)
}

fn bad_handle() -> super::ToolError {
    err(
        ERR_INVALID_HANDLE,
        "the control variable handle is not one MPI_T_cvar_handle_alloc returned (freed, \
         MPI_T_CVAR_HANDLE_NULL, released by the last MPI_T_finalize, or another kind of handle)",
    )
}

/// The control variable behind handle `h`.
pub fn of_handle(h: usize) -> ToolResult<&'static Cvar> {
    let st = initialized()?;
    let i = handle_id(HandleKind::Cvar, h)
        .and_then(|id| st.cvar_handles.get(&id).copied())
        .ok_or_else(bad_handle)?;
    Ok(&catalog::catalog().cvars[i])
}

/// `MPI_T_cvar_read`.
pub fn read(h: usize) -> ToolResult<CvarValue> {
    let cvar = of_handle(h)?;
    let st = initialized()?;
    let name = cvar.spec.name;
    let running = match &st.life {
        Life::Running(p) | Life::After(p, _) => Some(running_value(p, cvar)),
        Life::Before => None,
    };
    let value = match running {
        Some(v) => v,
        None => {
            let writes = st.writes.clone();
            drop(st);
            before_init_value(cvar, &writes)?
        }
    };
    let value = match value {
        Some(v) => v,
        // A parameter the library was not started with cannot happen (the same registry
        // is resolved at MPI_Init); read its default rather than fail.
        None => cvar
            .spec
            .parse(cvar.spec.default)
            .map_err(|e| err(ERR_INVALID, format!("the default of '{name}': {e}")))?,
    };
    Ok(to_cvar_value(value))
}

/// What `MPI_Init` would resolve for `cvar` now.
fn before_init_value(
    cvar: &Cvar,
    writes: &std::collections::BTreeMap<&'static str, String>,
) -> ToolResult<Option<Value>> {
    let name = cvar.spec.name;
    let p = Params::resolve(&[cvar.spec], &|var| super::lookup(writes, var), &[]).map_err(|e| {
        err(
            ERR_INVALID,
            format!(
                "control variable '{name}' has no valid value: {e}; MPI_Init would fail the                  same way, so fix that variable or write a valid value with MPI_T_cvar_write"
            ),
        )
    })?;
    Ok(p.get(name).map(|r| r.value.clone()))
}

fn running_value(p: &Params, cvar: &Cvar) -> Option<Value> {
    p.get(cvar.spec.name).map(|r| r.value.clone())
}

fn to_cvar_value(v: Value) -> CvarValue {
    match v {
        Value::Bool(b) => CvarValue::Int(c_int::from(b)),
        Value::Int(i) => CvarValue::Count(i),
        Value::Size(s) => CvarValue::Unsigned(s),
        Value::Str(s) => CvarValue::Text(s),
        Value::Choice(w) => CvarValue::Text(w.to_string()),
        Value::Components(sel) => CvarValue::Text(match sel {
            kestrel_transport::Selection::Include(names) => names.join(","),
            kestrel_transport::Selection::Exclude(names) => format!("^{}", names.join(",")),
        }),
    }
}

/// `MPI_T_cvar_write`: validates `v` and keeps it for `MPI_Init`.
pub fn write(h: usize, v: CvarValue) -> ToolResult<()> {
    let cvar = of_handle(h)?;
    let spec = cvar.spec;
    let name = spec.name;
    let mut st = initialized()?;
    match st.life {
        Life::Before => {}
        Life::Running(_) => {
            return Err(err(
                ERR_CVAR_SET_NOT_NOW,
                format!(
                    "control variable '{name}' is read once at MPI_Init and cannot change while \
                     MPI runs; write it between MPI_T_init_thread and MPI_Init, or set {} \
                     (kestrel-run --mca {name} VALUE) for the next run",
                    spec.env_var()
                ),
            ))
        }
        Life::After(..) => {
            return Err(err(
                ERR_CVAR_SET_NEVER,
                format!(
                    "control variable '{name}' cannot change after MPI_Finalize (MPI cannot be \
                     initialized again); set {} for the next run",
                    spec.env_var()
                ),
            ))
        }
    }
    let raw = match (spec.kind, v) {
        (ParamKind::Bool, CvarValue::Int(0)) => "false".to_string(),
        (ParamKind::Bool, CvarValue::Int(1)) => "true".to_string(),
        (ParamKind::Bool, CvarValue::Int(other)) => {
            return Err(err(
                ERR_INVALID,
                format!(
                    "control variable '{name}' is a boolean: write 0 (false) or 1 (true), not \
                     {other}"
                ),
            ))
        }
        (ParamKind::Int { .. }, CvarValue::Count(i)) => i.to_string(),
        (ParamKind::Size { .. }, CvarValue::Unsigned(s)) => s.to_string(),
        (ParamKind::Str | ParamKind::Choice(_) | ParamKind::Components(_), CvarValue::Text(t)) => {
            if t.len() >= TEXT_LEN {
                return Err(err(
                    ERR_INVALID,
                    format!(
                        "the value for control variable '{name}' has {} bytes; at most {} fit \
                         (set {} in the environment for longer values)",
                        t.len(),
                        TEXT_LEN - 1,
                        spec.env_var()
                    ),
                ));
            }
            t
        }
        (_, other) => {
            return Err(err(
                ERR_INVALID,
                format!("control variable '{name}' does not take a value like {other:?}"),
            ))
        }
    };
    spec.parse(&raw).map_err(|reason| {
        err(
            ERR_INVALID,
            format!("control variable '{name}': value '{raw}' is not valid: {reason}"),
        )
    })?;
    st.writes.insert(name, raw);
    Ok(())
}
