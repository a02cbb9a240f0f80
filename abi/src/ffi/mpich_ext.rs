//! MPICH's `MPIX_` extensions that `libmpich.so.12` exports (and MPICH's Fortran library
//! links against): the GPU-support queries, answered for Kestrel, which moves host memory
//! only; and the fault-tolerance (ULFM), error-removal and generalized-request-class
//! extensions, which Kestrel does not implement: they fail with
//! `MPI_ERR_UNSUPPORTED_OPERATION`, naming themselves, so a binary that calls them learns
//! what is missing.

use std::os::raw::c_int;

use crate::api;
use crate::error::{self, MpiError};
use crate::handle;
use crate::mem;

/// `MPIX_GPU_SUPPORT_CUDA`, `_ZE` and `_HIP`: the GPU kinds MPICH asks about.
const GPU_KINDS: [c_int; 3] = [0, 1, 2];

mpi_fn! {
    /// `MPIX_GPU_query_support`: Kestrel supports no GPU memory (`is_supported` 0).
    fn MPIX_GPU_query_support / PMPIX_GPU_query_support(gpu_type: c_int, is_supported: *mut c_int) -> c_int {
        api::call("MPIX_GPU_query_support", handle::COMM_WORLD, |_| {
            if !GPU_KINDS.contains(&gpu_type) {
                return Err(MpiError::new(error::ERR_ARG, format!("GPU type {gpu_type} is not MPIX_GPU_SUPPORT_CUDA, _ZE or _HIP")));
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(is_supported, 0, "is_supported") }
        })
    }
}

/// `MPIX_Query_cuda_support`: 0, Kestrel does not read CUDA device memory.
#[no_mangle]
pub extern "C" fn MPIX_Query_cuda_support() -> c_int {
    0
}
/// `PMPIX_Query_cuda_support`.
#[no_mangle]
pub extern "C" fn PMPIX_Query_cuda_support() -> c_int {
    0
}
/// `MPIX_Query_hip_support`: 0.
#[no_mangle]
pub extern "C" fn MPIX_Query_hip_support() -> c_int {
    0
}
/// `PMPIX_Query_hip_support`.
#[no_mangle]
pub extern "C" fn PMPIX_Query_hip_support() -> c_int {
    0
}
/// `MPIX_Query_ze_support`: 0.
#[no_mangle]
pub extern "C" fn MPIX_Query_ze_support() -> c_int {
    0
}
/// `PMPIX_Query_ze_support`.
#[no_mangle]
pub extern "C" fn PMPIX_Query_ze_support() -> c_int {
    0
}

/// Raises the "not implemented" error of extension `name`.
fn not_implemented(name: &'static str) -> c_int {
    api::call(name, handle::COMM_WORLD, |_| {
        Err(MpiError::new(
            error::ERR_UNSUPPORTED_OPERATION,
            "Kestrel's MPI library does not implement this MPICH extension (fault \
             tolerance, error removal and generalized request classes are not provided)",
        ))
    })
}

/// Exports `MPIX_name` and `PMPIX_name` as [`not_implemented`] (arguments undeclared: the
/// caller owns them under the C calling convention, and none is read).
macro_rules! not_implemented {
    ($($mpi:ident / $pmpi:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($pmpi), "`: not implemented.")]
            #[no_mangle]
            pub extern "C" fn $pmpi() -> c_int {
                not_implemented(stringify!($mpi))
            }
            #[doc = concat!("`", stringify!($mpi), "`: not implemented.")]
            #[no_mangle]
            pub extern "C" fn $mpi() -> c_int {
                not_implemented(stringify!($mpi))
            }
        )*
    };
}

not_implemented! {
    MPIX_Comm_agree / PMPIX_Comm_agree,
    MPIX_Comm_failure_ack / PMPIX_Comm_failure_ack,
    MPIX_Comm_failure_get_acked / PMPIX_Comm_failure_get_acked,
    MPIX_Comm_revoke / PMPIX_Comm_revoke,
    MPIX_Comm_shrink / PMPIX_Comm_shrink,
    MPIX_Delete_error_class / PMPIX_Delete_error_class,
    MPIX_Delete_error_code / PMPIX_Delete_error_code,
    MPIX_Delete_error_string / PMPIX_Delete_error_string,
    MPIX_Grequest_class_allocate / PMPIX_Grequest_class_allocate,
    MPIX_Grequest_class_create / PMPIX_Grequest_class_create,
    MPIX_Grequest_start / PMPIX_Grequest_start,
}
