//! Attributes of datatypes (`MPI_Type_create_keyval`, `MPI_Type_set_attr`, ...): their
//! keys, the values each type holds, and the copy and delete functions `MPI_Type_dup` and
//! `MPI_Type_free` run.
//!
//! Datatype calls take no library lock but the datatype table's, so these keys live there
//! too, apart from communicator keys (a type key is an indirect keyval handle, a
//! communicator key a direct one, so neither is taken for the other). The program's
//! functions run with the table unlocked: they may call datatype functions themselves.
//! This module never touches raw pointers.

use std::os::raw::c_int;

use crate::callbacks;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::state::{self, KeyvalRec};

fn slot(kv: c_int) -> MpiResult<u32> {
    let bad = || {
        MpiError::new(
            error::ERR_KEYVAL,
            format!("{kv:#x} is not a datatype attribute key (MPI_Type_create_keyval)"),
        )
    };
    match handle::decode(kv, Obj::Keyval) {
        Some((Kind::Indirect, i)) => state::with_types(|t| {
            t.keyvals
                .get(i)
                .filter(|k| !k.freed)
                .map(|_| i)
                .ok_or_else(bad)
        }),
        _ => Err(bad()),
    }
}

/// `MPI_Type_create_keyval`.
pub fn create(k: KeyvalRec) -> c_int {
    let i = state::with_types(|t| t.keyvals.insert(k));
    handle::make(Kind::Indirect, Obj::Keyval, i)
}

/// Sets the language proxy of datatype key `kv` (`MPII_Keyval_set_proxy`); `false` if
/// `kv` is not a datatype key.
pub fn set_proxy(kv: c_int, proxy: state::AttrProxy) -> bool {
    let Ok(i) = slot(kv) else { return false };
    state::with_types(|t| match t.keyvals.get_mut(i) {
        Some(k) => {
            k.proxy = Some(proxy);
            true
        }
        None => false,
    })
}

/// `MPI_Type_free_keyval`: the key goes once no type holds it.
pub fn free_keyval(kv: c_int) -> MpiResult<()> {
    let i = slot(kv)?;
    state::with_types(|t| {
        if let Some(k) = t.keyvals.get_mut(i) {
            k.freed = true;
            if k.uses == 0 {
                t.keyvals.remove(i);
            }
        }
    });
    Ok(())
}

/// Runs the delete function of `kv` for `value` held by `datatype`, and releases the key.
fn delete_one(datatype: c_int, kv: c_int, value: usize) -> MpiResult<()> {
    let Some((_, i)) = handle::decode(kv, Obj::Keyval) else {
        return Ok(());
    };
    let k = state::with_types(|t| t.keyvals.get(i).copied());
    if let Some(del) = k.and_then(|k| k.delete) {
        let rc = callbacks::delete_attr(
            del,
            k.and_then(|k| k.proxy),
            datatype,
            kv,
            value,
            k.map_or(0, |k| k.extra),
        );
        if rc != error::SUCCESS {
            return Err(MpiError::new(
                error::class_of(rc).unwrap_or(error::ERR_OTHER),
                format!(
                    "the delete function of datatype attribute key {kv:#x} failed with code {rc}"
                ),
            ));
        }
    }
    state::with_types(|t| {
        let gone = match t.keyvals.get_mut(i) {
            Some(k) => {
                k.uses = k.uses.saturating_sub(1);
                k.freed && k.uses == 0
            }
            None => false,
        };
        if gone {
            t.keyvals.remove(i);
        }
    });
    Ok(())
}

/// `MPI_Type_set_attr`: a value already set is deleted first.
pub fn set(datatype: c_int, kv: c_int, value: usize) -> MpiResult<()> {
    let i = slot(kv)?;
    let old = state::with_types(|t| {
        let list = t.attrs.entry(datatype).or_default();
        list.iter()
            .position(|a| a.0 == kv)
            .map(|p| list.remove(p).1)
    });
    if let Some(v) = old {
        delete_one(datatype, kv, v)?;
    }
    state::with_types(|t| {
        t.attrs.entry(datatype).or_default().push((kv, value));
        if let Some(k) = t.keyvals.get_mut(i) {
            k.uses += 1;
        }
    });
    Ok(())
}

/// `MPI_Type_get_attr`.
pub fn get(datatype: c_int, kv: c_int) -> MpiResult<Option<usize>> {
    slot(kv)?;
    Ok(state::with_types(|t| {
        t.attrs
            .get(&datatype)
            .and_then(|l| l.iter().find(|a| a.0 == kv).map(|a| a.1))
    }))
}

/// `MPI_Type_delete_attr`.
pub fn delete(datatype: c_int, kv: c_int) -> MpiResult<()> {
    slot(kv)?;
    let old = state::with_types(|t| {
        let list = t.attrs.get_mut(&datatype)?;
        list.iter()
            .position(|a| a.0 == kv)
            .map(|p| list.remove(p).1)
    });
    match old {
        Some(v) => delete_one(datatype, kv, v),
        None => Err(MpiError::new(
            error::ERR_KEYVAL,
            format!("datatype {datatype:#x} holds no attribute with key {kv:#x}"),
        )),
    }
}

/// Deletes every attribute of a type being freed, newest first.
pub fn delete_all(datatype: c_int) -> MpiResult<()> {
    let list = state::with_types(|t| t.attrs.remove(&datatype)).unwrap_or_default();
    for (kv, v) in list.into_iter().rev() {
        delete_one(datatype, kv, v)?;
    }
    Ok(())
}

/// Copies the attributes of `from` to its duplicate `to` through their copy functions.
pub fn copy_all(from: c_int, to: c_int) -> MpiResult<()> {
    let list = state::with_types(|t| t.attrs.get(&from).cloned()).unwrap_or_default();
    for (kv, v) in list {
        let Some((_, i)) = handle::decode(kv, Obj::Keyval) else {
            continue;
        };
        let Some(k) = state::with_types(|t| t.keyvals.get(i).copied()) else {
            continue;
        };
        let Some(copy) = k.copy else { continue };
        let (rc, keep, out) = callbacks::copy_attr(copy, k.proxy, from, kv, k.extra, v);
        if rc != error::SUCCESS {
            return Err(MpiError::new(
                error::class_of(rc).unwrap_or(error::ERR_OTHER),
                format!(
                    "the copy function of datatype attribute key {kv:#x} failed with code {rc}"
                ),
            ));
        }
        if keep {
            state::with_types(|t| {
                t.attrs.entry(to).or_default().push((kv, out));
                if let Some(k) = t.keyvals.get_mut(i) {
                    k.uses += 1;
                }
            });
        }
    }
    Ok(())
}
