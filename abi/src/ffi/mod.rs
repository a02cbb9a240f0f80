//! The C entry points: every `MPI_*` function and its `PMPI_*` twin.
//!
//! This module owns the exported symbols and nothing else: each function converts its C
//! arguments into Rust values through [`crate::mem`] and runs the call's body under
//! [`crate::api::call`], which takes the library lock and routes errors through the error
//! handlers. `PMPI_name` holds the implementation and `MPI_name` calls it, so a profiling
//! library that defines its own `MPI_name` and calls `PMPI_name` sees every call.
//!
//! Safety contract of every function here: the caller is a C program following MPI's
//! rules for the arguments (buffers valid for the data their datatype describes, arrays
//! as long as the counts say, out-parameters writable, and buffers of nonblocking calls
//! left alone until the request completes). The functions check what can be checked
//! (null pointers, handles, counts, ranks, tags) and report violations as MPI errors.
#![allow(clippy::missing_safety_doc)]
#![allow(non_snake_case)]
// C signatures decide the argument lists.
#![allow(clippy::too_many_arguments)]

use std::os::raw::c_int;

/// Defines `PMPI_name` with the body and `MPI_name` calling it.
macro_rules! mpi_fn {
    ($(#[$doc:meta])* fn $mpi:ident / $pmpi:ident ( $($a:ident : $t:ty),* $(,)? ) -> $r:ty $body:block) => {
        $(#[$doc])*
        #[no_mangle]
        pub unsafe extern "C" fn $pmpi($($a: $t),*) -> $r $body

        #[doc = concat!("`", stringify!($mpi), "`: calls [`", stringify!($pmpi), "`] (profilers define their own and call through).")]
        #[no_mangle]
        pub unsafe extern "C" fn $mpi($($a: $t),*) -> $r {
            // SAFETY: same arguments, same contract.
            unsafe { $pmpi($($a),*) }
        }
    };
}

/// Defines a function in both of MPI-4's bindings: the classic one, whose counts (and the
/// displacements of v-collectives) are C `int`s, and the large-count `_c` one, where they are
/// `MPI_Count` (and `MPI_Aint`), both 64-bit here. The body is written once: in it, `Count`
/// is the binding's count type and `NAME` the function's MPI name.
macro_rules! mpi_fn_c {
    ($(#[$doc:meta])* fn $mpi:ident / $pmpi:ident, $mpic:ident / $pmpic:ident ( $($a:ident : $t:ty),* $(,)? ) -> $r:ty $body:block) => {
        const _: () = {
            #[allow(dead_code)]
            type Count = std::os::raw::c_int;
            #[allow(dead_code)]
            const NAME: &str = stringify!($mpi);
            mpi_fn! {
                $(#[$doc])*
                #[allow(clippy::useless_conversion)] // `Count` is i64 in the other binding.
                fn $mpi / $pmpi ($($a: $t),*) -> $r $body
            }
        };
        const _: () = {
            #[allow(dead_code)]
            type Count = i64;
            #[allow(dead_code)]
            const NAME: &str = stringify!($mpic);
            mpi_fn! {
                #[doc = concat!("`", stringify!($mpic), "`: the large-count binding of `", stringify!($mpi), "`.")]
                #[allow(clippy::useless_conversion)] // `Count` is c_int in the other binding.
                fn $mpic / $pmpic ($($a: $t),*) -> $r $body
            }
        };
    };
}

pub mod coll;
mod coll_args;
mod coll_short;
pub mod comm;
pub mod comm_create;
pub mod dpm;
pub mod dtype;
pub mod dtype_ext;
pub mod env;
pub mod fortran;
pub mod icoll;
mod icoll_posted;
pub mod info;
pub mod mpich_ext;
pub mod neighbor;
pub mod p2p;
pub mod partitioned;
pub mod tool;
pub mod topo;
pub mod unsupported;
pub mod wait;
pub mod win;
mod win_direct;

/// A pointer-sized exported object (MPICH's sentinel pointers).
#[repr(transparent)]
pub struct Sentinel(pub *mut c_int);

// SAFETY: the pointers are only compared by programs, never dereferenced by the library.
unsafe impl Sync for Sentinel {}

static UNWEIGHTED_OBJ: c_int = 0;
static WEIGHTS_EMPTY_OBJ: c_int = 0;

/// A pointer-sized exported variable that another library writes: MPICH's Fortran
/// library (`libmpichfort.so.12`, used unchanged on top of Kestrel) stores the addresses
/// of its Fortran `MPI_STATUS_IGNORE` and `MPI_STATUSES_IGNORE` here in `MPI_Init`, then
/// compares its arguments against them. Interior mutability places it in writable memory.
#[repr(transparent)]
pub struct ForeignWritten(std::cell::UnsafeCell<*mut c_int>);

// SAFETY: Kestrel never reads or writes these; the Fortran library writes them once, in
// its MPI_Init wrapper before any other MPI call, and reads them afterwards.
unsafe impl Sync for ForeignWritten {}

/// `MPI_F_STATUS_IGNORE` (null, as in MPICH, until the Fortran library sets it).
#[no_mangle]
pub static MPI_F_STATUS_IGNORE: ForeignWritten =
    ForeignWritten(std::cell::UnsafeCell::new(std::ptr::null_mut()));
/// `MPI_F_STATUSES_IGNORE`.
#[no_mangle]
pub static MPI_F_STATUSES_IGNORE: ForeignWritten =
    ForeignWritten(std::cell::UnsafeCell::new(std::ptr::null_mut()));
/// `MPI_UNWEIGHTED`: a unique address for the graph topology calls.
#[no_mangle]
pub static MPI_UNWEIGHTED: Sentinel = Sentinel(&UNWEIGHTED_OBJ as *const c_int as *mut c_int);
/// `MPI_WEIGHTS_EMPTY`.
#[no_mangle]
pub static MPI_WEIGHTS_EMPTY: Sentinel = Sentinel(&WEIGHTS_EMPTY_OBJ as *const c_int as *mut c_int);

/// The typed buffer `count` elements of committed datatype `dt` at `buf`.
///
/// # Safety
/// As [`crate::mem::Region::new`]: the memory the elements cover is valid until the
/// operation using the region completes.
#[inline(always)]
pub(crate) unsafe fn region(
    buf: *const std::os::raw::c_void,
    count: impl Into<i64>,
    dt: c_int,
) -> crate::error::MpiResult<crate::mem::Region> {
    let n = crate::mem::count(count)?;
    let t = crate::state::datatype(dt, true)?;
    // SAFETY: forwarded to the caller.
    unsafe { crate::mem::Region::new(buf, n, t) }
}

/// `MPI_BYTE`.
pub(crate) const BYTE: c_int = crate::mem::BYTE;

// The rest of the data objects MPICH exports (Fortran 2008 bindings and the tool
// interface), with MPICH's sizes, so that any binary referring to them loads; Kestrel's
// own code never reads them.

/// `MPIR_F08_MPI_STATUS_IGNORE_OBJ`: an `MPI_F08_status` (5 ints).
#[no_mangle]
pub static MPIR_F08_MPI_STATUS_IGNORE_OBJ: [c_int; 5] = [0; 5];
/// `MPIR_F08_MPI_STATUSES_IGNORE_OBJ`: an array of one `MPI_F08_status`.
#[no_mangle]
pub static MPIR_F08_MPI_STATUSES_IGNORE_OBJ: [c_int; 5] = [0; 5];
/// `MPIR_F08_MPI_IN_PLACE`.
#[no_mangle]
pub static MPIR_F08_MPI_IN_PLACE: c_int = 0;
/// `MPIR_F08_MPI_BOTTOM`.
#[no_mangle]
pub static MPIR_F08_MPI_BOTTOM: c_int = 0;
/// `MPI_F08_STATUS_IGNORE`: points at its object.
#[no_mangle]
pub static MPI_F08_STATUS_IGNORE: Sentinel =
    Sentinel(&MPIR_F08_MPI_STATUS_IGNORE_OBJ as *const [c_int; 5] as *mut c_int);
/// `MPI_F08_STATUSES_IGNORE`: points at its object.
#[no_mangle]
pub static MPI_F08_STATUSES_IGNORE: Sentinel =
    Sentinel(&MPIR_F08_MPI_STATUSES_IGNORE_OBJ as *const [c_int; 5] as *mut c_int);
/// `MPIR_C_MPI_UNWEIGHTED`.
#[no_mangle]
pub static MPIR_C_MPI_UNWEIGHTED: Sentinel = Sentinel(std::ptr::null_mut());
/// `MPIR_C_MPI_WEIGHTS_EMPTY`.
#[no_mangle]
pub static MPIR_C_MPI_WEIGHTS_EMPTY: Sentinel = Sentinel(std::ptr::null_mut());
static PVAR_ALL_HANDLES_OBJ: c_int = 0;
/// `MPI_T_PVAR_ALL_HANDLES`: a unique address that no handle takes (handles carry their
/// kind above bit 48), accepted by `MPI_T_pvar_start`, `_stop` and `_reset`.
#[no_mangle]
pub static MPI_T_PVAR_ALL_HANDLES: Sentinel =
    Sentinel(&PVAR_ALL_HANDLES_OBJ as *const c_int as *mut c_int);
