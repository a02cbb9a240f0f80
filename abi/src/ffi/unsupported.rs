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
            "Kestrel's MPI library does not implement this function (one-sided \
             communication, MPI-IO and the tool interface's events and sources are not \
             provided yet); see abi/include/mpi.h for what is",
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
    MPI_Accumulate / PMPI_Accumulate,
    MPI_Accumulate_c / PMPI_Accumulate_c,
    MPI_Compare_and_swap / PMPI_Compare_and_swap,
    MPI_Fetch_and_op / PMPI_Fetch_and_op,
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
    MPI_Get / PMPI_Get,
    MPI_Get_accumulate / PMPI_Get_accumulate,
    MPI_Get_accumulate_c / PMPI_Get_accumulate_c,
    MPI_Get_c / PMPI_Get_c,
    MPI_Put / PMPI_Put,
    MPI_Put_c / PMPI_Put_c,
    MPI_Raccumulate / PMPI_Raccumulate,
    MPI_Raccumulate_c / PMPI_Raccumulate_c,
    MPI_Register_datarep / PMPI_Register_datarep,
    MPI_Register_datarep_c / PMPI_Register_datarep_c,
    MPI_Rget / PMPI_Rget,
    MPI_Rget_accumulate / PMPI_Rget_accumulate,
    MPI_Rget_accumulate_c / PMPI_Rget_accumulate_c,
    MPI_Rget_c / PMPI_Rget_c,
    MPI_Rput / PMPI_Rput,
    MPI_Rput_c / PMPI_Rput_c,
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
    MPI_Win_allocate / PMPI_Win_allocate,
    MPI_Win_allocate_c / PMPI_Win_allocate_c,
    MPI_Win_allocate_shared / PMPI_Win_allocate_shared,
    MPI_Win_allocate_shared_c / PMPI_Win_allocate_shared_c,
    MPI_Win_attach / PMPI_Win_attach,
    MPI_Win_call_errhandler / PMPI_Win_call_errhandler,
    MPI_Win_complete / PMPI_Win_complete,
    MPI_Win_create / PMPI_Win_create,
    MPI_Win_create_c / PMPI_Win_create_c,
    MPI_Win_create_dynamic / PMPI_Win_create_dynamic,
    MPI_Win_create_errhandler / PMPI_Win_create_errhandler,
    MPI_Win_create_keyval / PMPI_Win_create_keyval,
    MPI_Win_delete_attr / PMPI_Win_delete_attr,
    MPI_Win_detach / PMPI_Win_detach,
    MPI_Win_fence / PMPI_Win_fence,
    MPI_Win_flush / PMPI_Win_flush,
    MPI_Win_flush_all / PMPI_Win_flush_all,
    MPI_Win_flush_local / PMPI_Win_flush_local,
    MPI_Win_flush_local_all / PMPI_Win_flush_local_all,
    MPI_Win_free / PMPI_Win_free,
    MPI_Win_free_keyval / PMPI_Win_free_keyval,
    MPI_Win_get_attr / PMPI_Win_get_attr,
    MPI_Win_get_errhandler / PMPI_Win_get_errhandler,
    MPI_Win_get_group / PMPI_Win_get_group,
    MPI_Win_get_info / PMPI_Win_get_info,
    MPI_Win_get_name / PMPI_Win_get_name,
    MPI_Win_lock / PMPI_Win_lock,
    MPI_Win_lock_all / PMPI_Win_lock_all,
    MPI_Win_post / PMPI_Win_post,
    MPI_Win_set_attr / PMPI_Win_set_attr,
    MPI_Win_set_errhandler / PMPI_Win_set_errhandler,
    MPI_Win_set_info / PMPI_Win_set_info,
    MPI_Win_set_name / PMPI_Win_set_name,
    MPI_Win_shared_query / PMPI_Win_shared_query,
    MPI_Win_shared_query_c / PMPI_Win_shared_query_c,
    MPI_Win_start / PMPI_Win_start,
    MPI_Win_sync / PMPI_Win_sync,
    MPI_Win_test / PMPI_Win_test,
    MPI_Win_unlock / PMPI_Win_unlock,
    MPI_Win_unlock_all / PMPI_Win_unlock_all,
    MPI_Win_wait / PMPI_Win_wait,
}
