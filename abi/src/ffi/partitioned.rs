//! MPI-4 partitioned communication: `MPI_Psend_init`, `MPI_Precv_init`, `MPI_Pready`,
//! `MPI_Pready_range`, `MPI_Pready_list`, `MPI_Parrived`.

use std::os::raw::{c_int, c_void};

use super::region;
use crate::api;
use crate::error::{self, MpiError};
use crate::handle;
use crate::mem;
use crate::partitioned;
use crate::requests::Persistent;

/// The whole buffer of `partitions` partitions of `count` elements each.
///
/// # Safety
/// `buf` holds them, and stays valid while the request exists (contract).
unsafe fn whole(
    buf: *const c_void,
    partitions: c_int,
    count: i64,
    dt: c_int,
) -> Result<(crate::mem::Region, usize), MpiError> {
    let p = mem::count(partitions)?;
    let n = i64::try_from(p)
        .ok()
        .and_then(|p| p.checked_mul(count))
        .ok_or_else(|| MpiError::new(error::ERR_COUNT, "partitions × count overflows"))?;
    // SAFETY: forwarded to the caller.
    Ok((unsafe { region(buf, n, dt) }?, p))
}

mpi_fn! {
    /// `MPI_Psend_init`.
    fn MPI_Psend_init / PMPI_Psend_init(buf: *const c_void, partitions: c_int, count: i64, datatype: c_int, dest: c_int, tag: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        api::call("MPI_Psend_init", comm, |l| {
            // SAFETY: the buffer holds every partition while the request lives (contract).
            let (region, partitions) = unsafe { whole(buf, partitions, count, datatype) }?;
            let h = partitioned::init(l.core()?, comm, Persistent::Psend { region, peer: dest, tag, partitions })?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(request, h, "request") }
        })
    }
}

mpi_fn! {
    /// `MPI_Precv_init`.
    fn MPI_Precv_init / PMPI_Precv_init(buf: *mut c_void, partitions: c_int, count: i64, datatype: c_int, source: c_int, tag: c_int, comm: c_int, _info: c_int, request: *mut c_int) -> c_int {
        api::call("MPI_Precv_init", comm, |l| {
            // SAFETY: the buffer holds every partition while the request lives (contract).
            let (region, partitions) = unsafe { whole(buf, partitions, count, datatype) }?;
            let h = partitioned::init(l.core()?, comm, Persistent::Precv { region, peer: source, tag, partitions })?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(request, h, "request") }
        })
    }
}

mpi_fn! {
    /// `MPI_Pready`.
    fn MPI_Pready / PMPI_Pready(partition: c_int, request: c_int) -> c_int {
        api::call("MPI_Pready", handle::COMM_WORLD, |l| partitioned::ready(l.core()?, request, [partition]))
    }
}

mpi_fn! {
    /// `MPI_Pready_range` (inclusive).
    fn MPI_Pready_range / PMPI_Pready_range(partition_low: c_int, partition_high: c_int, request: c_int) -> c_int {
        api::call("MPI_Pready_range", handle::COMM_WORLD, |l| partitioned::ready(l.core()?, request, partition_low..=partition_high))
    }
}

mpi_fn! {
    /// `MPI_Pready_list`.
    fn MPI_Pready_list / PMPI_Pready_list(length: c_int, array_of_partitions: *const c_int, request: c_int) -> c_int {
        api::call("MPI_Pready_list", handle::COMM_WORLD, |l| {
            // SAFETY: `length` ints (contract).
            let parts = unsafe { mem::slice(array_of_partitions, mem::count(length)?, "array_of_partitions") }?.to_vec();
            partitioned::ready(l.core()?, request, parts)
        })
    }
}

mpi_fn! {
    /// `MPI_Parrived`.
    fn MPI_Parrived / PMPI_Parrived(request: c_int, partition: c_int, flag: *mut c_int) -> c_int {
        api::call("MPI_Parrived", handle::COMM_WORLD, |l| {
            let got = partitioned::arrived(l.core()?, request, partition)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(got), "flag") }
        })
    }
}
