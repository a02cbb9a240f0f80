//! Functions of MPICH's library that Kestrel does not implement: each fails with
//! `MPI_ERR_UNSUPPORTED_OPERATION` through `MPI_COMM_WORLD`'s error handler, naming itself,
//! so that a binary built against MPICH loads and learns what is missing when it calls it,
//! instead of failing to start or silently succeeding.

use std::os::raw::c_int;

use crate::api;
use crate::error::{self, MpiError};
use crate::handle;

/// Raises the "not implemented" error of function `name`.
fn unsupported(name: &'static str) -> c_int {
    api::call(name, handle::COMM_WORLD, |_| {
        Err(MpiError::new(
            error::ERR_UNSUPPORTED_OPERATION,
            "Kestrel's MPI library does not implement this function (MPI-IO and the \
             tool interface's events and sources are not provided yet); see abi/include/mpi.h for what is",
        ))
    })
}

/// Exports `MPI_name` and `PMPI_name` as [`unsupported`]. The arguments are not declared:
/// under the C calling convention the caller owns them, and none is read. Every one of
/// these functions returns an `int` in C, which is what the error code is.
macro_rules! unsupported {
    ($($mpi:ident / $pmpi:ident),* $(,)?) => {
        $(
            #[doc = concat!("`", stringify!($pmpi), "`: not implemented.")]
            #[no_mangle]
            pub extern "C" fn $pmpi() -> c_int {
                unsupported(stringify!($mpi))
            }
            #[doc = concat!("`", stringify!($mpi), "`: not implemented.")]
            #[no_mangle]
            pub extern "C" fn $mpi() -> c_int {
                unsupported(stringify!($mpi))
            }
        )*
    };
}

/// `MPI_File_f2c` returns a file handle (a pointer), not an error code: it raises the error
/// and returns `MPI_FILE_NULL`.
#[no_mangle]
pub extern "C" fn PMPI_File_f2c(_file: c_int) -> *mut std::os::raw::c_void {
    unsupported("MPI_File_f2c");
    std::ptr::null_mut()
}

/// `MPI_File_f2c`: see [`PMPI_File_f2c`].
#[no_mangle]
pub extern "C" fn MPI_File_f2c(file: c_int) -> *mut std::os::raw::c_void {
    PMPI_File_f2c(file)
}

// The names are MPICH 4.0's exported MPI functions that Kestrel lacks.
unsupported! {
    MPI_File_c2f / PMPI_File_c2f,
    MPI_File_call_errhandler / PMPI_File_call_errhandler,
    MPI_File_close / PMPI_File_close,
    MPI_File_create_errhandler / PMPI_File_create_errhandler,
    MPI_File_delete / PMPI_File_delete,
    MPI_File_get_amode / PMPI_File_get_amode,
    MPI_File_get_atomicity / PMPI_File_get_atomicity,
    MPI_File_get_byte_offset / PMPI_File_get_byte_offset,
    MPI_File_get_errhandler / PMPI_File_get_errhandler,
    MPI_File_get_group / PMPI_File_get_group,
    MPI_File_get_info / PMPI_File_get_info,
    MPI_File_get_position / PMPI_File_get_position,
    MPI_File_get_position_shared / PMPI_File_get_position_shared,
    MPI_File_get_size / PMPI_File_get_size,
    MPI_File_get_type_extent / PMPI_File_get_type_extent,
    MPI_File_get_type_extent_c / PMPI_File_get_type_extent_c,
    MPI_File_get_view / PMPI_File_get_view,
    MPI_File_iread / PMPI_File_iread,
    MPI_File_iread_all / PMPI_File_iread_all,
    MPI_File_iread_all_c / PMPI_File_iread_all_c,
    MPI_File_iread_at / PMPI_File_iread_at,
    MPI_File_iread_at_all / PMPI_File_iread_at_all,
    MPI_File_iread_at_all_c / PMPI_File_iread_at_all_c,
    MPI_File_iread_at_c / PMPI_File_iread_at_c,
    MPI_File_iread_c / PMPI_File_iread_c,
    MPI_File_iread_shared / PMPI_File_iread_shared,
    MPI_File_iread_shared_c / PMPI_File_iread_shared_c,
    MPI_File_iwrite / PMPI_File_iwrite,
    MPI_File_iwrite_all / PMPI_File_iwrite_all,
    MPI_File_iwrite_all_c / PMPI_File_iwrite_all_c,
    MPI_File_iwrite_at / PMPI_File_iwrite_at,
    MPI_File_iwrite_at_all / PMPI_File_iwrite_at_all,
    MPI_File_iwrite_at_all_c / PMPI_File_iwrite_at_all_c,
    MPI_File_iwrite_at_c / PMPI_File_iwrite_at_c,
    MPI_File_iwrite_c / PMPI_File_iwrite_c,
    MPI_File_iwrite_shared / PMPI_File_iwrite_shared,
    MPI_File_iwrite_shared_c / PMPI_File_iwrite_shared_c,
    MPI_File_open / PMPI_File_open,
    MPI_File_preallocate / PMPI_File_preallocate,
    MPI_File_read / PMPI_File_read,
    MPI_File_read_all / PMPI_File_read_all,
    MPI_File_read_all_begin / PMPI_File_read_all_begin,
    MPI_File_read_all_begin_c / PMPI_File_read_all_begin_c,
    MPI_File_read_all_c / PMPI_File_read_all_c,
    MPI_File_read_all_end / PMPI_File_read_all_end,
    MPI_File_read_at / PMPI_File_read_at,
    MPI_File_read_at_all / PMPI_File_read_at_all,
    MPI_File_read_at_all_begin / PMPI_File_read_at_all_begin,
    MPI_File_read_at_all_begin_c / PMPI_File_read_at_all_begin_c,
    MPI_File_read_at_all_c / PMPI_File_read_at_all_c,
    MPI_File_read_at_all_end / PMPI_File_read_at_all_end,
    MPI_File_read_at_c / PMPI_File_read_at_c,
    MPI_File_read_c / PMPI_File_read_c,
    MPI_File_read_ordered / PMPI_File_read_ordered,
    MPI_File_read_ordered_begin / PMPI_File_read_ordered_begin,
    MPI_File_read_ordered_begin_c / PMPI_File_read_ordered_begin_c,
    MPI_File_read_ordered_c / PMPI_File_read_ordered_c,
    MPI_File_read_ordered_end / PMPI_File_read_ordered_end,
    MPI_File_read_shared / PMPI_File_read_shared,
    MPI_File_read_shared_c / PMPI_File_read_shared_c,
    MPI_File_seek / PMPI_File_seek,
    MPI_File_seek_shared / PMPI_File_seek_shared,
    MPI_File_set_atomicity / PMPI_File_set_atomicity,
    MPI_File_set_errhandler / PMPI_File_set_errhandler,
    MPI_File_set_info / PMPI_File_set_info,
    MPI_File_set_size / PMPI_File_set_size,
    MPI_File_set_view / PMPI_File_set_view,
    MPI_File_sync / PMPI_File_sync,
    MPI_File_write / PMPI_File_write,
    MPI_File_write_all / PMPI_File_write_all,
    MPI_File_write_all_begin / PMPI_File_write_all_begin,
    MPI_File_write_all_begin_c / PMPI_File_write_all_begin_c,
    MPI_File_write_all_c / PMPI_File_write_all_c,
    MPI_File_write_all_end / PMPI_File_write_all_end,
    MPI_File_write_at / PMPI_File_write_at,
    MPI_File_write_at_all / PMPI_File_write_at_all,
    MPI_File_write_at_all_begin / PMPI_File_write_at_all_begin,
    MPI_File_write_at_all_begin_c / PMPI_File_write_at_all_begin_c,
    MPI_File_write_at_all_c / PMPI_File_write_at_all_c,
    MPI_File_write_at_all_end / PMPI_File_write_at_all_end,
    MPI_File_write_at_c / PMPI_File_write_at_c,
    MPI_File_write_c / PMPI_File_write_c,
    MPI_File_write_ordered / PMPI_File_write_ordered,
    MPI_File_write_ordered_begin / PMPI_File_write_ordered_begin,
    MPI_File_write_ordered_begin_c / PMPI_File_write_ordered_begin_c,
    MPI_File_write_ordered_c / PMPI_File_write_ordered_c,
    MPI_File_write_ordered_end / PMPI_File_write_ordered_end,
    MPI_File_write_shared / PMPI_File_write_shared,
    MPI_File_write_shared_c / PMPI_File_write_shared_c,
    MPI_Register_datarep / PMPI_Register_datarep,
    MPI_Register_datarep_c / PMPI_Register_datarep_c,
    MPI_T_category_get_events / PMPI_T_category_get_events,
    MPI_T_category_get_num_events / PMPI_T_category_get_num_events,
    MPI_T_event_callback_get_info / PMPI_T_event_callback_get_info,
    MPI_T_event_callback_set_info / PMPI_T_event_callback_set_info,
    MPI_T_event_copy / PMPI_T_event_copy,
    MPI_T_event_get_index / PMPI_T_event_get_index,
    MPI_T_event_get_info / PMPI_T_event_get_info,
    MPI_T_event_get_num / PMPI_T_event_get_num,
    MPI_T_event_get_source / PMPI_T_event_get_source,
    MPI_T_event_get_timestamp / PMPI_T_event_get_timestamp,
    MPI_T_event_handle_alloc / PMPI_T_event_handle_alloc,
    MPI_T_event_handle_free / PMPI_T_event_handle_free,
    MPI_T_event_handle_get_info / PMPI_T_event_handle_get_info,
    MPI_T_event_handle_set_info / PMPI_T_event_handle_set_info,
    MPI_T_event_read / PMPI_T_event_read,
    MPI_T_event_register_callback / PMPI_T_event_register_callback,
    MPI_T_event_set_dropped_handler / PMPI_T_event_set_dropped_handler,
    MPI_T_source_get_info / PMPI_T_source_get_info,
    MPI_T_source_get_num / PMPI_T_source_get_num,
    MPI_T_source_get_timestamp / PMPI_T_source_get_timestamp,
}
