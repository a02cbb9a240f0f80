//! Info objects: MPI-3.1's calls and MPI-4's `MPI_Info_get_string` and
//! `MPI_Info_create_env`.

use std::os::raw::{c_char, c_int};

use crate::api;
use crate::comm;
use crate::error::{self, MpiError};
use crate::handle;
use crate::mem;

mpi_fn! {
    /// `MPI_Info_create`.
    fn MPI_Info_create / PMPI_Info_create(info: *mut c_int) -> c_int {
        api::call("MPI_Info_create", handle::COMM_WORLD, |l| {
            let h = comm::new_info(l.core()?, Vec::new());
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(info, h, "info") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_set`.
    fn MPI_Info_set / PMPI_Info_set(info: c_int, key: *const c_char, value: *const c_char) -> c_int {
        api::call("MPI_Info_set", handle::COMM_WORLD, |l| {
            // SAFETY: NUL-terminated strings (contract).
            let (k, v) = unsafe { (mem::cstr(key, "key")?, mem::cstr(value, "value")?) };
            comm::info_set(l.core()?, info, k, v)
        })
    }
}

mpi_fn! {
    /// `MPI_Info_get`.
    fn MPI_Info_get / PMPI_Info_get(info: c_int, key: *const c_char, valuelen: c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        api::call("MPI_Info_get", handle::COMM_WORLD, |l| {
            // SAFETY: NUL-terminated string (contract).
            let k = unsafe { mem::cstr(key, "key") }?;
            let found = comm::info_get(l.core()?, info, &k)?;
            if let Some(v) = &found {
                let room = mem::count(valuelen)? + 1;
                // SAFETY: `value` holds `valuelen + 1` bytes (contract).
                unsafe { mem::put_cstr(value, room, v, std::ptr::null_mut(), "value") }?;
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_get_valuelen`.
    fn MPI_Info_get_valuelen / PMPI_Info_get_valuelen(info: c_int, key: *const c_char, valuelen: *mut c_int, flag: *mut c_int) -> c_int {
        api::call("MPI_Info_get_valuelen", handle::COMM_WORLD, |l| {
            // SAFETY: NUL-terminated string (contract).
            let k = unsafe { mem::cstr(key, "key") }?;
            let found = comm::info_get(l.core()?, info, &k)?;
            if let Some(v) = &found {
                // SAFETY: out-parameter (contract).
                unsafe { mem::put(valuelen, v.len() as c_int, "valuelen") }?;
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(found.is_some()), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_delete`.
    fn MPI_Info_delete / PMPI_Info_delete(info: c_int, key: *const c_char) -> c_int {
        api::call("MPI_Info_delete", handle::COMM_WORLD, |l| {
            // SAFETY: NUL-terminated string (contract).
            let k = unsafe { mem::cstr(key, "key") }?;
            comm::info_delete(l.core()?, info, &k)
        })
    }
}

mpi_fn! {
    /// `MPI_Info_get_nkeys`.
    fn MPI_Info_get_nkeys / PMPI_Info_get_nkeys(info: c_int, nkeys: *mut c_int) -> c_int {
        api::call("MPI_Info_get_nkeys", handle::COMM_WORLD, |l| {
            let n = comm::info_pairs(l.core()?, info)?.len() as c_int;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(nkeys, n, "nkeys") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_get_nthkey`.
    fn MPI_Info_get_nthkey / PMPI_Info_get_nthkey(info: c_int, n: c_int, key: *mut c_char) -> c_int {
        api::call("MPI_Info_get_nthkey", handle::COMM_WORLD, |l| {
            let pairs = comm::info_pairs(l.core()?, info)?;
            let k = usize::try_from(n).ok().and_then(|i| pairs.get(i)).ok_or_else(|| {
                MpiError::new(error::ERR_ARG, format!("key number {n} is outside 0..{}", pairs.len()))
            })?;
            // SAFETY: `key` holds MPI_MAX_INFO_KEY + 1 bytes (contract).
            unsafe { mem::put_cstr(key, comm::MAX_INFO_KEY + 1, &k.0, std::ptr::null_mut(), "key") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_dup`.
    fn MPI_Info_dup / PMPI_Info_dup(info: c_int, newinfo: *mut c_int) -> c_int {
        api::call("MPI_Info_dup", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let pairs = comm::info_pairs(core, info)?;
            let h = comm::new_info(core, pairs);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newinfo, h, "newinfo") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_free`.
    fn MPI_Info_free / PMPI_Info_free(info: *mut c_int) -> c_int {
        api::call("MPI_Info_free", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let h = unsafe { mem::get(info, "info") }?;
            comm::info_free(l.core()?, h)?;
            // SAFETY: as above.
            unsafe { mem::put(info, handle::INFO_NULL, "info") }
        })
    }
}

mpi_fn! {
    /// `MPI_Info_get_string` (MPI-4): `buflen` in: the buffer's size; out: the value's
    /// length plus its NUL. A buffer too small gets a truncated, NUL-terminated value.
    fn MPI_Info_get_string / PMPI_Info_get_string(info: c_int, key: *const c_char, buflen: *mut c_int, value: *mut c_char, flag: *mut c_int) -> c_int {
        api::call("MPI_Info_get_string", handle::COMM_WORLD, |l| {
            // SAFETY: NUL-terminated string; in-out int (contract).
            let (k, room) = unsafe { (mem::cstr(key, "key")?, mem::get(buflen, "buflen")?) };
            let found = comm::info_get(l.core()?, info, &k)?;
            // SAFETY: out-parameters; `value` holds `buflen` bytes when `buflen` > 0 (contract).
            unsafe {
                mem::put(flag, c_int::from(found.is_some()), "flag")?;
                if let Some(v) = found {
                    let room = usize::try_from(room).map_err(|_| MpiError::new(error::ERR_ARG, format!("buflen {room} is negative")))?;
                    if room > 0 {
                        let n = v.len().min(room - 1);
                        let out = mem::slice_mut(value as *mut u8, n + 1, "value")?;
                        out[..n].copy_from_slice(&v.as_bytes()[..n]);
                        out[n] = 0;
                    }
                    mem::put(buflen, (v.len() + 1) as c_int, "buflen")?;
                }
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Info_create_env` (MPI-4): the environment this process started in: `command`,
    /// `argv`, `maxprocs`, `wdir`, `host`, `thread_level` (from `argc`/`argv` when given,
    /// else this process's own command line).
    fn MPI_Info_create_env / PMPI_Info_create_env(argc: c_int, argv: *const *const c_char, info: *mut c_int) -> c_int {
        api::call("MPI_Info_create_env", handle::COMM_WORLD, |l| {
            let args: Vec<String> = if argv.is_null() || argc <= 0 {
                std::env::args().collect()
            } else {
                // SAFETY: `argv` holds `argc` NUL-terminated strings (contract).
                let ptrs = unsafe { mem::slice(argv, argc as usize, "argv") }?;
                ptrs.iter()
                    // SAFETY: each entry is a NUL-terminated string (contract).
                    .map(|&p| unsafe { mem::cstr(p, "argv") })
                    .collect::<Result<_, _>>()?
            };
            let mut pairs = Vec::new();
            if let Some(cmd) = args.first() {
                pairs.push(("command".to_string(), cmd.clone()));
            }
            if args.len() > 1 {
                pairs.push(("argv".to_string(), args[1..].join(" ")));
            }
            let size = l.core().map(|c| c.engine.size()).unwrap_or(1);
            pairs.push(("maxprocs".to_string(), size.to_string()));
            if let Ok(d) = std::env::current_dir() {
                pairs.push(("wdir".to_string(), d.display().to_string()));
            }
            if let Ok(h) = std::fs::read_to_string("/proc/sys/kernel/hostname") {
                pairs.push(("host".to_string(), h.trim().to_string()));
            }
            let level = l.core().map(|c| c.thread_level).unwrap_or(0);
            let name = ["MPI_THREAD_SINGLE", "MPI_THREAD_FUNNELED", "MPI_THREAD_SERIALIZED", "MPI_THREAD_MULTIPLE"];
            pairs.push(("thread_level".to_string(), name.get(level as usize).unwrap_or(&name[0]).to_string()));
            let h = comm::new_info(l.core()?, pairs);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(info, h, "info") }
        })
    }
}
