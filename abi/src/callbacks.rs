//! Calls into the program's C functions: user reduction operations, error handlers and
//! attribute copy/delete functions.
//!
//! This module owns every call through a C function pointer the program registered, and
//! the adaptation of a user reduction to the engine's `(input, inout)` byte-slice
//! convention. It never holds or releases [`crate::state::CORE`]: callers decide whether a
//! callback runs with the lock released (error handlers, attribute functions) or held
//! (reductions, which run inside the engine's collectives).
//!
//! Each call relies on the program's MPI contract: the pointer it registered is a function
//! of the documented C signature.
#![allow(unsafe_code)]

use std::os::raw::{c_int, c_void};

use kestrel_pml::op::{Reduction, UserOp};

use crate::state::{AttrProxy, CopyFn, DeleteFn, ErrFn, OpFn, OpRec};
use crate::types::Dt;

/// Calls an error handler as `f(&comm, &code)`.
pub fn error_handler(f: ErrFn, comm: c_int, code: c_int) {
    let mut comm = comm;
    let mut code = code;
    // SAFETY: `f` was registered with MPI_Comm_create_errhandler as an
    // MPI_Comm_errhandler_function; both pointers are valid for the call.
    unsafe { f(&mut comm, &mut code) };
}

/// MPICH's `MPIR_ATTR_AINT`: the attribute type a proxy is told (an address-sized
/// integer; the Fortran proxies do not look at it).
const ATTR_AINT: c_int = 1;

/// Calls an attribute copy function (through its key's proxy, if any); returns its error
/// code, whether to copy, and the value for the new object.
pub fn copy_attr(
    f: CopyFn,
    proxy: Option<AttrProxy>,
    comm: c_int,
    keyval: c_int,
    extra: usize,
    value: usize,
) -> (c_int, bool, usize) {
    let mut out: *mut c_void = std::ptr::null_mut();
    let mut flag: c_int = 0;
    if let Some(p) = proxy {
        // SAFETY: the proxy the Fortran library registered for this key, called with the
        // function it registered and MPICH's proxy arguments; `out` and `flag` are valid.
        let rc = unsafe {
            (p.copy)(
                f,
                comm,
                keyval,
                extra as *mut c_void,
                ATTR_AINT,
                value as *mut c_void,
                &mut out,
                &mut flag,
            )
        };
        return (rc, flag != 0, out as usize);
    }
    // SAFETY: `f` is the program's MPI_Comm_copy_attr_function; `out` receives a `void*`
    // (attribute_val_out is a `void**` in disguise) and `flag` an int.
    let rc = unsafe {
        f(
            comm,
            keyval,
            extra as *mut c_void,
            value as *mut c_void,
            &mut out as *mut *mut c_void as *mut c_void,
            &mut flag,
        )
    };
    (rc, flag != 0, out as usize)
}

/// Calls an attribute delete function (through its key's proxy, if any); returns its
/// error code.
pub fn delete_attr(
    f: DeleteFn,
    proxy: Option<AttrProxy>,
    comm: c_int,
    keyval: c_int,
    value: usize,
    extra: usize,
) -> c_int {
    if let Some(p) = proxy {
        // SAFETY: the Fortran library's delete proxy with the function it registered.
        return unsafe {
            (p.delete)(
                f,
                comm,
                keyval,
                ATTR_AINT,
                value as *mut c_void,
                extra as *mut c_void,
            )
        };
    }
    // SAFETY: `f` is the program's MPI_Comm_delete_attr_function.
    unsafe { f(comm, keyval, value as *mut c_void, extra as *mut c_void) }
}

/// The engine-side form of a user operation on datatype `dt` (handle `dt_handle`).
///
/// Without `packed`, the engine's buffers are arrays of `elem`-byte elements laid out as
/// the function expects them. With `packed`, they hold the packed form of a non-contiguous
/// type (`dt.size` bytes per element), which is unpacked into the type's memory layout
/// around each call.
pub fn user_reduction(op: OpRec, dt_handle: c_int, dt: Dt, packed: bool, elem: usize) -> Reduction {
    let elem = if packed { dt.size } else { elem }.max(1);
    Reduction::User(UserOp::new(
        op.commute,
        move |input: &[u8], inout: &mut [u8]| {
            let n = inout.len() / elem;
            let mut handle = dt_handle;
            if !packed {
                // The function's first argument is not const in C: give it a copy it may write.
                let mut a = input.to_vec();
                // SAFETY: `a` and `inout` hold `n` elements of the datatype in its memory layout,
                // which is what an MPI_User_function expects; `handle` is valid.
                unsafe {
                    call_user_fn(
                        op.func,
                        a.as_mut_ptr() as *mut c_void,
                        inout.as_mut_ptr() as *mut c_void,
                        n,
                        &mut handle,
                    )
                };
                return;
            }
            let Some((lo, span)) = dt.span(n) else {
                return;
            };
            let origin = (-lo) as usize;
            let mut a = vec![0u8; span];
            let mut b = vec![0u8; span];
            if dt.unpack(n, input, &mut a[..], origin).is_err()
                || dt.unpack(n, inout, &mut b[..], origin).is_err()
            {
                return;
            }
            // SAFETY: `a` and `b` hold `n` elements laid out as the datatype describes, with the
            // buffer address at `origin`; `handle` is valid.
            unsafe {
                call_user_fn(
                    op.func,
                    a.as_mut_ptr().add(origin) as *mut c_void,
                    b.as_mut_ptr().add(origin) as *mut c_void,
                    n,
                    &mut handle,
                )
            };
            let mut out = Vec::with_capacity(inout.len());
            if dt.pack(n, &b, origin, &mut out).is_ok() && out.len() == inout.len() {
                inout.copy_from_slice(&out);
            }
        },
    ))
}

/// Calls a user reduction function of either binding on `n` elements.
///
/// # Safety
/// `a` and `b` hold `n` elements of the datatype `handle` names, laid out as it describes.
unsafe fn call_user_fn(f: OpFn, a: *mut c_void, b: *mut c_void, n: usize, handle: &mut c_int) {
    match f {
        OpFn::Int(f) => {
            let mut len = n as c_int;
            // SAFETY: an MPI_User_function over valid buffers (caller) and a valid length.
            unsafe { f(a, b, &mut len, handle) }
        }
        OpFn::Count(f) => {
            let mut len = n as i64;
            // SAFETY: an MPI_User_function_c over valid buffers (caller) and a valid length.
            unsafe { f(a, b, &mut len, handle) }
        }
    }
}
