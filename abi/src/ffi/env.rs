//! Start-up, shut-down, environment queries, errors and error handlers.

use std::os::raw::{c_char, c_int, c_void};

use crate::api;
use crate::env;
use crate::error::{self, MpiError};
use crate::handle::{self, Kind, Obj};
use crate::mem;
use crate::state::{ErrFn, Locked, Phase};

/// `MPI_MAX_PROCESSOR_NAME`.
const MAX_PROCESSOR_NAME: usize = 128;
/// `MPI_MAX_LIBRARY_VERSION_STRING`.
const MAX_LIBRARY_VERSION_STRING: usize = 8192;
/// `MPI_MAX_ERROR_STRING`.
const MAX_ERROR_STRING: usize = 512;

mpi_fn! {
    /// `MPI_Init`.
    fn MPI_Init / PMPI_Init(_argc: *mut c_int, _argv: *mut *mut *mut c_char) -> c_int {
        api::call("MPI_Init", handle::COMM_WORLD, |l| env::init(l, env::THREAD_SINGLE).map(|_| ()))
    }
}

mpi_fn! {
    /// `MPI_Init_thread`.
    fn MPI_Init_thread / PMPI_Init_thread(
        _argc: *mut c_int,
        _argv: *mut *mut *mut c_char,
        required: c_int,
        provided: *mut c_int,
    ) -> c_int {
        api::call("MPI_Init_thread", handle::COMM_WORLD, |l| {
            if !(env::THREAD_SINGLE..=env::THREAD_MULTIPLE).contains(&required) {
                return Err(MpiError::new(
                    error::ERR_ARG,
                    format!("required thread level {required} is not one of MPI_THREAD_SINGLE..MPI_THREAD_MULTIPLE"),
                ));
            }
            let got = env::init(l, required)?;
            // SAFETY: `provided` is an int out-parameter (contract).
            unsafe { mem::put(provided, got, "provided") }
        })
    }
}

fn phase_flag(flag: *mut c_int, name: &'static str, f: fn(&Phase) -> bool) -> c_int {
    let Some(mut l) = Locked::acquire() else {
        return api::reentered(name);
    };
    let v = f(l.phase());
    // SAFETY: `flag` is an int out-parameter (contract).
    match unsafe { mem::put(flag, c_int::from(v), "flag") } {
        Ok(()) => error::SUCCESS,
        Err(e) => api::raise(&mut l, name, handle::COMM_WORLD, e),
    }
}

mpi_fn! {
    /// `MPI_Initialized`.
    fn MPI_Initialized / PMPI_Initialized(flag: *mut c_int) -> c_int {
        phase_flag(flag, "MPI_Initialized", |p| !matches!(p, Phase::Before))
    }
}

mpi_fn! {
    /// `MPI_Finalized`.
    fn MPI_Finalized / PMPI_Finalized(flag: *mut c_int) -> c_int {
        phase_flag(flag, "MPI_Finalized", |p| matches!(p, Phase::After))
    }
}

mpi_fn! {
    /// `MPI_Finalize`.
    fn MPI_Finalize / PMPI_Finalize() -> c_int {
        api::call("MPI_Finalize", handle::COMM_WORLD, env::finalize)
    }
}

mpi_fn! {
    /// `MPI_Abort`: stops every process of the job with `errorcode`.
    fn MPI_Abort / PMPI_Abort(comm: c_int, errorcode: c_int) -> c_int {
        let Some(mut l) = Locked::acquire() else {
            return api::reentered("MPI_Abort");
        };
        match l.phase() {
            Phase::Running(core) => {
                let rank = core.engine.rank();
                let msg = format!("MPI_Abort was called by rank {rank} with error code {errorcode} (communicator {comm:#x})");
                eprintln!("kestrel: {msg}");
                core.runtime.abort(errorcode, &msg)
            }
            _ => std::process::exit(errorcode),
        }
    }
}

mpi_fn! {
    /// `MPI_Query_thread`.
    fn MPI_Query_thread / PMPI_Query_thread(provided: *mut c_int) -> c_int {
        api::call("MPI_Query_thread", handle::COMM_WORLD, |l| {
            let level = l.core()?.thread_level;
            // SAFETY: int out-parameter (contract).
            unsafe { mem::put(provided, level, "provided") }
        })
    }
}

mpi_fn! {
    /// `MPI_Is_thread_main`.
    fn MPI_Is_thread_main / PMPI_Is_thread_main(flag: *mut c_int) -> c_int {
        api::call("MPI_Is_thread_main", handle::COMM_WORLD, |l| {
            let main = l.core()?.main_thread == std::thread::current().id();
            // SAFETY: int out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(main), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Get_version` (allowed before `MPI_Init` and after `MPI_Finalize`).
    fn MPI_Get_version / PMPI_Get_version(version: *mut c_int, subversion: *mut c_int) -> c_int {
        // SAFETY: int out-parameters (contract).
        match unsafe { mem::put(version, env::VERSION.0, "version").and_then(|_| mem::put(subversion, env::VERSION.1, "subversion")) } {
            Ok(()) => error::SUCCESS,
            Err(e) => error::code_for(e.class, format!("MPI_Get_version: {}", e.msg)),
        }
    }
}

mpi_fn! {
    /// `MPI_Get_library_version` (allowed before `MPI_Init`).
    fn MPI_Get_library_version / PMPI_Get_library_version(version: *mut c_char, resultlen: *mut c_int) -> c_int {
        let text = env::library_version();
        // SAFETY: `version` holds MPI_MAX_LIBRARY_VERSION_STRING bytes (contract).
        match unsafe { mem::put_cstr(version, MAX_LIBRARY_VERSION_STRING, &text, resultlen, "version") } {
            Ok(()) => error::SUCCESS,
            Err(e) => error::code_for(e.class, format!("MPI_Get_library_version: {}", e.msg)),
        }
    }
}

mpi_fn! {
    /// `MPI_Get_processor_name`: the host name.
    fn MPI_Get_processor_name / PMPI_Get_processor_name(name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api::call("MPI_Get_processor_name", handle::COMM_WORLD, |_| {
            let host = kestrel_runtime::modex::hostname();
            // SAFETY: `name` holds MPI_MAX_PROCESSOR_NAME bytes (contract).
            unsafe { mem::put_cstr(name, MAX_PROCESSOR_NAME, &host, resultlen, "name") }
        })
    }
}

/// `MPI_Wtime`: seconds of the monotonic clock (not synchronized between processes, so
/// `MPI_WTIME_IS_GLOBAL` is false). Read directly, because benchmarks call it around every
/// message: `Instant::elapsed` cost ~180 instructions (about 50 ns) per call, this ~60.
fn wtime() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec to write; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

mpi_fn! {
    /// `MPI_Wtime`.
    fn MPI_Wtime / PMPI_Wtime() -> f64 {
        wtime()
    }
}

mpi_fn! {
    /// `MPI_Wtick`.
    fn MPI_Wtick / PMPI_Wtick() -> f64 {
        env::WTICK
    }
}

mpi_fn! {
    /// `MPI_Pcontrol`: profiling control; without a profiler attached it does nothing, as
    /// MPI specifies. (Declared variadic in C; the extra arguments are not read.)
    fn MPI_Pcontrol / PMPI_Pcontrol(_level: c_int) -> c_int {
        error::SUCCESS
    }
}

mpi_fn! {
    /// `MPI_Alloc_mem`: memory from the C allocator (Kestrel needs no registered memory).
    fn MPI_Alloc_mem / PMPI_Alloc_mem(size: isize, info: c_int, baseptr: *mut c_void) -> c_int {
        api::call("MPI_Alloc_mem", handle::COMM_WORLD, |l| {
            crate::comm::check_info_arg(l.core()?, info)?;
            let n = usize::try_from(size).map_err(|_| {
                MpiError::new(error::ERR_ARG, format!("size {size} is negative"))
            })?;
            // SAFETY: malloc with a positive size (1 for 0, so the pointer is unique).
            let p = unsafe { libc::malloc(n.max(1)) };
            if p.is_null() {
                return Err(MpiError::new(
                    error::ERR_NO_MEM,
                    format!("could not allocate {n} bytes"),
                ));
            }
            // SAFETY: `baseptr` is a `void **` in disguise (contract).
            unsafe { mem::put(baseptr as *mut *mut c_void, p, "baseptr") }
        })
    }
}

mpi_fn! {
    /// `MPI_Free_mem`.
    fn MPI_Free_mem / PMPI_Free_mem(base: *mut c_void) -> c_int {
        api::call("MPI_Free_mem", handle::COMM_WORLD, |_| {
            // SAFETY: `base` came from MPI_Alloc_mem, i.e. malloc (contract), or is null.
            unsafe { libc::free(base) };
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Error_string` (allowed at any time).
    fn MPI_Error_string / PMPI_Error_string(errorcode: c_int, string: *mut c_char, resultlen: *mut c_int) -> c_int {
        let Some(text) = error::string_of(errorcode) else {
            return error::code_for(error::ERR_ARG, format!("MPI_Error_string: {errorcode} is not an error code"));
        };
        // SAFETY: `string` holds MPI_MAX_ERROR_STRING bytes (contract).
        match unsafe { mem::put_cstr(string, MAX_ERROR_STRING, &text, resultlen, "string") } {
            Ok(()) => error::SUCCESS,
            Err(e) => error::code_for(e.class, format!("MPI_Error_string: {}", e.msg)),
        }
    }
}

mpi_fn! {
    /// `MPI_Error_class` (allowed at any time).
    fn MPI_Error_class / PMPI_Error_class(errorcode: c_int, errorclass: *mut c_int) -> c_int {
        let Some(class) = error::class_of(errorcode) else {
            return error::code_for(error::ERR_ARG, format!("MPI_Error_class: {errorcode} is not an error code"));
        };
        // SAFETY: int out-parameter (contract).
        match unsafe { mem::put(errorclass, class, "errorclass") } {
            Ok(()) => error::SUCCESS,
            Err(e) => error::code_for(e.class, format!("MPI_Error_class: {}", e.msg)),
        }
    }
}

mpi_fn! {
    /// `MPI_Comm_create_errhandler`.
    fn MPI_Comm_create_errhandler / PMPI_Comm_create_errhandler(f: Option<ErrFn>, errhandler: *mut c_int) -> c_int {
        api::call("MPI_Comm_create_errhandler", handle::COMM_WORLD, |l| {
            let f = f.ok_or_else(|| MpiError::new(error::ERR_ARG, "the error handler function is null"))?;
            let core = l.core()?;
            let h = handle::make(Kind::Direct, Obj::Errhandler, core.errhandlers.insert(f));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errhandler, h, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_set_errhandler`.
    fn MPI_Comm_set_errhandler / PMPI_Comm_set_errhandler(comm: c_int, errhandler: c_int) -> c_int {
        api::call("MPI_Comm_set_errhandler", comm, |l| {
            let core = l.core()?;
            crate::comm::check_errhandler(core, errhandler)?;
            core.comm_mut(comm)?.errhandler = errhandler;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_get_errhandler`.
    fn MPI_Comm_get_errhandler / PMPI_Comm_get_errhandler(comm: c_int, errhandler: *mut c_int) -> c_int {
        api::call("MPI_Comm_get_errhandler", comm, |l| {
            let eh = l.core()?.comm(comm)?.errhandler;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errhandler, eh, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Errhandler_free`: the handle becomes `MPI_ERRHANDLER_NULL`; communicators using
    /// the handler keep it.
    fn MPI_Errhandler_free / PMPI_Errhandler_free(errhandler: *mut c_int) -> c_int {
        api::call("MPI_Errhandler_free", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let eh = unsafe { mem::get(errhandler, "errhandler") }?;
            crate::comm::check_errhandler(l.core()?, eh)?;
            // SAFETY: as above.
            unsafe { mem::put(errhandler, handle::ERRHANDLER_NULL, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_call_errhandler`: runs `comm`'s handler on `errorcode`.
    fn MPI_Comm_call_errhandler / PMPI_Comm_call_errhandler(comm: c_int, errorcode: c_int) -> c_int {
        let Some(mut l) = Locked::acquire() else {
            return api::reentered("MPI_Comm_call_errhandler");
        };
        let e = MpiError::of_code(errorcode).on(comm);
        // The handler returned (a fatal one does not): the call itself succeeded.
        let _ = api::raise(&mut l, "MPI_Comm_call_errhandler", comm, e);
        error::SUCCESS
    }
}

mpi_fn! {
    /// `MPI_Errhandler_create` (MPI-1 name of `MPI_Comm_create_errhandler`).
    fn MPI_Errhandler_create / PMPI_Errhandler_create(f: Option<ErrFn>, errhandler: *mut c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { PMPI_Comm_create_errhandler(f, errhandler) }
    }
}

mpi_fn! {
    /// `MPI_Errhandler_set` (MPI-1 name of `MPI_Comm_set_errhandler`).
    fn MPI_Errhandler_set / PMPI_Errhandler_set(comm: c_int, errhandler: c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { PMPI_Comm_set_errhandler(comm, errhandler) }
    }
}

mpi_fn! {
    /// `MPI_Errhandler_get` (MPI-1 name of `MPI_Comm_get_errhandler`).
    fn MPI_Errhandler_get / PMPI_Errhandler_get(comm: c_int, errhandler: *mut c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { PMPI_Comm_get_errhandler(comm, errhandler) }
    }
}

mpi_fn! {
    /// `MPI_Add_error_class`.
    fn MPI_Add_error_class / PMPI_Add_error_class(errorclass: *mut c_int) -> c_int {
        api::call("MPI_Add_error_class", handle::COMM_WORLD, |_| {
            let c = error::add_class()?;
            crate::comm::set_last_used_code(c);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errorclass, c, "errorclass") }
        })
    }
}

mpi_fn! {
    /// `MPI_Add_error_code`.
    fn MPI_Add_error_code / PMPI_Add_error_code(errorclass: c_int, errorcode: *mut c_int) -> c_int {
        api::call("MPI_Add_error_code", handle::COMM_WORLD, |_| {
            let c = error::add_code(errorclass)?;
            crate::comm::set_last_used_code(c);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errorcode, c, "errorcode") }
        })
    }
}

mpi_fn! {
    /// `MPI_Add_error_string`.
    fn MPI_Add_error_string / PMPI_Add_error_string(errorcode: c_int, string: *const c_char) -> c_int {
        api::call("MPI_Add_error_string", handle::COMM_WORLD, |_| {
            // SAFETY: a NUL-terminated string (contract).
            let s = unsafe { mem::cstr(string, "string") }?;
            if s.len() >= MAX_ERROR_STRING {
                return Err(MpiError::new(error::ERR_ARG, format!("the string has {} bytes; at most {} fit", s.len(), MAX_ERROR_STRING - 1)));
            }
            error::add_string(errorcode, s)
        })
    }
}
