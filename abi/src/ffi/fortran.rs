//! The entry points MPICH's Fortran library (`libmpichfort.so.12`) calls besides the C
//! API, so that Fortran programs built with MPICH's `mpif90` run on Kestrel with MPICH's
//! own Fortran library on top: attribute access with Fortran's integer attribute values
//! (`MPII_*_get_attr`, `MPII_*_set_attr`), the proxies through which Kestrel calls
//! Fortran attribute copy and delete functions (`MPII_Keyval_set_proxy`), and Fortran
//! generalized-request callbacks (`MPII_Grequest_set_lang_f77`).
//!
//! The signatures are MPICH 4.0's internal ones, as `libmpichfort.so.12` calls them. The
//! attribute type argument is MPICH's `MPIR_Attr_type`: [`ATTR_PTR`] (C's `void *`),
//! [`ATTR_AINT`] (`INTEGER(KIND=MPI_ADDRESS_KIND)`) or [`ATTR_INT`] (a default `INTEGER`,
//! MPI-1's `MPI_ATTR_GET`/`MPI_ATTR_PUT`). Values are stored as address-sized integers
//! whatever the language, so a value set in one language reads back in the other as the
//! same bits; predefined attributes read in Fortran give their value, not its address.
//! This module only translates arguments; the attribute tables belong to `comm` and
//! `type_attr`.

use std::os::raw::{c_int, c_void};

use crate::api;
use crate::comm;
use crate::error::{self, MpiError, MpiResult};
use crate::handle;
use crate::mem;
use crate::requests;
use crate::state::{self, AttrProxy, CopyProxy, DeleteProxy};

/// `MPIR_ATTR_PTR`.
pub const ATTR_PTR: c_int = 0;
/// `MPIR_ATTR_AINT`.
pub const ATTR_AINT: c_int = 1;
/// `MPIR_ATTR_INT`.
pub const ATTR_INT: c_int = 3;

/// Writes an attribute value found as `value` in the form `outtype` asks for.
///
/// # Safety
/// `out` points at a `void *` (`ATTR_PTR`), an `MPI_Aint` (`ATTR_AINT`) or an `int`
/// (`ATTR_INT`), as the Fortran library passes.
unsafe fn put_value(out: *mut c_void, value: usize, outtype: c_int) -> MpiResult<()> {
    // SAFETY: forwarded to the caller.
    unsafe {
        match outtype {
            ATTR_PTR | ATTR_AINT => mem::put(out as *mut usize, value, "attribute_val"),
            ATTR_INT => mem::put(out as *mut c_int, value as c_int, "attribute_val"),
            t => Err(bad_type(t)),
        }
    }
}

fn bad_type(t: c_int) -> MpiError {
    MpiError::new(
        error::ERR_ARG,
        format!("attribute type {t} is not MPIR_ATTR_PTR (0), _AINT (1) or _INT (3)"),
    )
}

fn check_type(t: c_int) -> MpiResult<()> {
    match t {
        ATTR_PTR | ATTR_AINT | ATTR_INT => Ok(()),
        t => Err(bad_type(t)),
    }
}

/// The C key of a predefined attribute named by its Fortran key: MPICH's Fortran
/// `MPI_TAG_UB`, `MPI_HOST`, ... are the C values plus one. Other keys are unchanged.
fn c_keyval(kv: c_int) -> c_int {
    let fortran_predefined = comm::predefined_attr_value(kv).is_none()
        && kv
            .checked_sub(1)
            .is_some_and(|c| comm::predefined_attr_value(c).is_some());
    if fortran_predefined {
        kv - 1
    } else {
        kv
    }
}

/// `MPII_Comm_get_attr`: `MPI_Comm_get_attr` (and `MPI_Attr_get`) for any language.
///
/// # Safety
/// As [`put_value`] for `attribute_val`; `flag` points at an int.
#[no_mangle]
pub unsafe extern "C" fn MPII_Comm_get_attr(
    comm: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    outtype: c_int,
) -> c_int {
    api::call("MPI_Comm_get_attr", comm, |l| {
        check_type(outtype)?;
        let core = l.core()?;
        let keyval = if outtype == ATTR_PTR {
            keyval
        } else {
            c_keyval(keyval)
        };
        let mut v = comm::get_attr(core, comm, keyval)?;
        if outtype != ATTR_PTR {
            if let Some(value) = comm::predefined_attr_value(keyval) {
                v = Some(value as isize as usize);
            }
        }
        // SAFETY: out-parameters (contract).
        unsafe {
            if let Some(v) = v {
                put_value(attribute_val, v, outtype)?;
            }
            mem::put(flag, c_int::from(v.is_some()), "flag")
        }
    })
}

/// `MPII_Comm_set_attr`: `MPI_Comm_set_attr` (and `MPI_Attr_put`) for any language; an
/// `int` value arrives sign-extended to the pointer's width.
#[no_mangle]
pub extern "C" fn MPII_Comm_set_attr(
    comm: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    attrtype: c_int,
) -> c_int {
    api::call("MPI_Comm_set_attr", comm, |l| {
        check_type(attrtype)?;
        comm::set_attr(l, comm, c_keyval(keyval), attribute_val as usize)
    })
}

/// `MPII_Type_get_attr`.
///
/// # Safety
/// As [`MPII_Comm_get_attr`].
#[no_mangle]
pub unsafe extern "C" fn MPII_Type_get_attr(
    datatype: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    outtype: c_int,
) -> c_int {
    api::call_types("MPI_Type_get_attr", || {
        check_type(outtype)?;
        state::datatype(datatype, false)?;
        let v = crate::type_attr::get(datatype, keyval)?;
        // SAFETY: out-parameters (contract).
        unsafe {
            if let Some(v) = v {
                put_value(attribute_val, v, outtype)?;
            }
            mem::put(flag, c_int::from(v.is_some()), "flag")
        }
    })
}

/// `MPII_Type_set_attr`.
#[no_mangle]
pub extern "C" fn MPII_Type_set_attr(
    datatype: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    attrtype: c_int,
) -> c_int {
    api::call_types("MPI_Type_set_attr", || {
        check_type(attrtype)?;
        state::datatype(datatype, false)?;
        crate::type_attr::set(datatype, keyval, attribute_val as usize)
    })
}

/// `MPII_Win_get_attr`: `MPI_Win_get_attr` for any language. Fortran passes the predefined
/// keys as the C value plus one and gets their values themselves, not their addresses.
///
/// # Safety
/// As [`MPII_Comm_get_attr`].
#[no_mangle]
pub unsafe extern "C" fn MPII_Win_get_attr(
    win: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    flag: *mut c_int,
    outtype: c_int,
) -> c_int {
    api::call("MPI_Win_get_attr", win, |l| {
        check_type(outtype)?;
        let core = l.core()?;
        let w = core.win(win)?;
        let c_key = if outtype != ATTR_PTR && crate::win::predefined_attr(w, keyval - 1).is_some() {
            keyval - 1
        } else {
            keyval
        };
        let v = match crate::win::predefined_attr(w, c_key) {
            Some(p) if outtype == ATTR_PTR => Some(p as usize),
            Some(_) => crate::win::predefined_value(w, c_key).map(|v| v as usize),
            None => {
                comm::keyval_slot(core, keyval)?;
                w.attrs.iter().find(|a| a.0 == keyval).map(|a| a.1)
            }
        };
        // SAFETY: out-parameters (contract).
        unsafe {
            if let Some(v) = v {
                put_value(attribute_val, v, outtype)?;
            }
            mem::put(flag, c_int::from(v.is_some()), "flag")
        }
    })
}

/// `MPII_Win_set_attr`: `MPI_Win_set_attr` for any language.
#[no_mangle]
pub extern "C" fn MPII_Win_set_attr(
    win: c_int,
    keyval: c_int,
    attribute_val: *mut c_void,
    attrtype: c_int,
) -> c_int {
    api::call("MPI_Win_set_attr", win, |l| {
        check_type(attrtype)?;
        crate::win::set_attr(l, win, keyval, attribute_val as usize)
    })
}

/// `MPII_Keyval_set_proxy`: the key's copy and delete functions are called through these
/// proxies (the Fortran library registers Fortran subroutines as the functions). A key
/// that is neither a communicator nor a datatype key is reported and left alone.
#[no_mangle]
pub extern "C" fn MPII_Keyval_set_proxy(keyval: c_int, copy: CopyProxy, delete: DeleteProxy) {
    let proxy = AttrProxy { copy, delete };
    if crate::type_attr::set_proxy(keyval, proxy) {
        return;
    }
    api::call("MPII_Keyval_set_proxy", handle::COMM_WORLD, |l| {
        if comm::set_keyval_proxy(l.core()?, keyval, proxy) {
            return Ok(());
        }
        Err(MpiError::new(
            error::ERR_KEYVAL,
            format!("{keyval:#x} is not a communicator or datatype attribute key"),
        ))
    });
}

/// `MPII_Grequest_set_lang_f77`: the generalized request's callbacks are Fortran
/// subroutines (see [`crate::grequest::Extra`]).
#[no_mangle]
pub extern "C" fn MPII_Grequest_set_lang_f77(request: c_int) {
    api::call("MPI_Grequest_start", handle::COMM_WORLD, |l| {
        let g = requests::slot(request)
            .and_then(|i| l.core().ok()?.requests.get_mut(i))
            .and_then(|r| r.extra.as_mut())
            .and_then(|x| x.grequest.as_mut())
            .ok_or_else(|| {
                MpiError::new(
                    error::ERR_REQUEST,
                    format!("{request:#x} is not a generalized request"),
                )
            })?;
        g.extra.fortran = true;
        Ok(())
    });
}
