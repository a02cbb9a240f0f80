//! Communicator creation beyond dup/split/create (`MPI_Comm_create_group`,
//! `MPI_Comm_idup`, MPI-4's creators from groups), communicator info hints, and MPI-4
//! sessions.

use std::os::raw::{c_char, c_int};

use crate::api::{self, Handler};
use crate::comm;
use crate::comm_create;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem;
use crate::session;
use crate::state::{Core, ErrFn};

fn info_of(core: &Core, info: c_int) -> MpiResult<Vec<(String, String)>> {
    if info == handle::INFO_NULL {
        return Ok(Vec::new());
    }
    comm::info_pairs(core, info)
}

mpi_fn! {
    /// `MPI_Comm_set_info`.
    fn MPI_Comm_set_info / PMPI_Comm_set_info(comm: c_int, info: c_int) -> c_int {
        api::call("MPI_Comm_set_info", comm, |l| comm_create::set_info(l.core()?, comm, info))
    }
}

mpi_fn! {
    /// `MPI_Comm_get_info`: a new info object (the program frees it).
    fn MPI_Comm_get_info / PMPI_Comm_get_info(comm: c_int, info_used: *mut c_int) -> c_int {
        api::call("MPI_Comm_get_info", comm, |l| {
            let h = comm_create::get_info(l.core()?, comm)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(info_used, h, "info_used") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_create_group`: collective over the group's members only.
    fn MPI_Comm_create_group / PMPI_Comm_create_group(comm: c_int, group: c_int, tag: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_create_group", comm, |l| {
            let new = comm_create::create_group(l.core()?, comm, group, tag)?.unwrap_or(handle::COMM_NULL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new, "newcomm") }
        })
    }
}

fn idup(
    name: &'static str,
    comm: c_int,
    info: c_int,
    newcomm: *mut c_int,
    request: *mut c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        let pairs = info_of(core, info)?;
        let (h, rec) = comm_create::idup(core, comm, pairs)?;
        let r = core.insert_request(rec);
        // Attributes are copied and the topology kept at the call, as MPI_Comm_dup does.
        let topo = core.comm(comm)?.topo.clone();
        core.comm_mut(h)?.topo = topo;
        comm::copy_attrs(l, comm, h)?;
        // SAFETY: out-parameters (contract).
        unsafe {
            mem::put(newcomm, h, "newcomm")?;
            mem::put(request, r, "request")
        }
    })
}

mpi_fn! {
    /// `MPI_Comm_idup`: the new communicator is usable once the request completes.
    fn MPI_Comm_idup / PMPI_Comm_idup(comm: c_int, newcomm: *mut c_int, request: *mut c_int) -> c_int {
        idup("MPI_Comm_idup", comm, handle::INFO_NULL, newcomm, request)
    }
}

mpi_fn! {
    /// `MPI_Comm_idup_with_info`.
    fn MPI_Comm_idup_with_info / PMPI_Comm_idup_with_info(comm: c_int, info: c_int, newcomm: *mut c_int, request: *mut c_int) -> c_int {
        idup("MPI_Comm_idup_with_info", comm, info, newcomm, request)
    }
}

/// The errhandler a communicator made from a group starts with.
fn creator_errhandler(core: &Core, eh: c_int) -> MpiResult<c_int> {
    if eh == handle::ERRHANDLER_NULL {
        return Ok(handle::ERRORS_ARE_FATAL);
    }
    comm::check_errhandler(core, eh)?;
    Ok(eh)
}

mpi_fn! {
    /// `MPI_Comm_create_from_group` (MPI-4).
    fn MPI_Comm_create_from_group / PMPI_Comm_create_from_group(group: c_int, stringtag: *const c_char, info: c_int, errhandler: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_create_from_group", handle::COMM_WORLD, |l| {
            // SAFETY: a NUL-terminated string (contract).
            let tag = unsafe { mem::cstr(stringtag, "stringtag") }?;
            let core = l.core()?;
            let pairs = info_of(core, info)?;
            let eh = creator_errhandler(core, errhandler)?;
            let h = comm_create::from_group(core, group, &tag, eh)?;
            core.comm_mut(h)?.info = pairs;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, h, "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Intercomm_create_from_groups` (MPI-4).
    fn MPI_Intercomm_create_from_groups / PMPI_Intercomm_create_from_groups(local_group: c_int, local_leader: c_int, remote_group: c_int, remote_leader: c_int, stringtag: *const c_char, info: c_int, errhandler: c_int, newintercomm: *mut c_int) -> c_int {
        api::call("MPI_Intercomm_create_from_groups", handle::COMM_WORLD, |l| {
            // SAFETY: a NUL-terminated string (contract).
            let tag = unsafe { mem::cstr(stringtag, "stringtag") }?;
            let core = l.core()?;
            let pairs = info_of(core, info)?;
            let eh = creator_errhandler(core, errhandler)?;
            let h = comm_create::intercomm_from_groups(core, local_group, local_leader, remote_group, remote_leader, &tag, eh)?;
            core.comm_mut(h)?.info = pairs;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newintercomm, h, "newintercomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_init` (MPI-4): before `MPI_Init` it starts the library.
    fn MPI_Session_init / PMPI_Session_init(info: c_int, errhandler: c_int, session: *mut c_int) -> c_int {
        api::call("MPI_Session_init", handle::COMM_WORLD, |l| {
            if l.core().is_err() {
                crate::env::init(l, crate::env::THREAD_SINGLE)?;
            }
            let core = l.core()?;
            let pairs = info_of(core, info)?;
            let eh = creator_errhandler(core, errhandler)?;
            let h = session::open(core, eh, pairs);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(session, h, "session") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_finalize`.
    fn MPI_Session_finalize / PMPI_Session_finalize(session: *mut c_int) -> c_int {
        api::call("MPI_Session_finalize", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let h = unsafe { mem::get(session, "session") }?;
            let core = l.core()?;
            let i = session::slot(core, h)?;
            core.sessions.remove(i);
            // SAFETY: as above.
            unsafe { mem::put(session, handle::SESSION_NULL, "session") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_get_num_psets`.
    fn MPI_Session_get_num_psets / PMPI_Session_get_num_psets(session: c_int, _info: c_int, npset_names: *mut c_int) -> c_int {
        api::call("MPI_Session_get_num_psets", handle::COMM_WORLD, |l| {
            session::slot(l.core()?, session)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(npset_names, session::PSETS.len() as c_int, "npset_names") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_get_nth_pset`: `pset_len` 0 asks for the length (with its NUL).
    fn MPI_Session_get_nth_pset / PMPI_Session_get_nth_pset(session: c_int, _info: c_int, n: c_int, pset_len: *mut c_int, pset_name: *mut c_char) -> c_int {
        api::call("MPI_Session_get_nth_pset", handle::COMM_WORLD, |l| {
            session::slot(l.core()?, session)?;
            let name = usize::try_from(n).ok().and_then(|i| session::PSETS.get(i)).ok_or_else(|| {
                MpiError::new(error::ERR_ARG, format!("process set {n} does not exist (there are {})", session::PSETS.len()))
            })?;
            // SAFETY: in-out int (contract).
            let room = unsafe { mem::get(pset_len, "pset_len") }?;
            if room <= 0 {
                // SAFETY: as above.
                return unsafe { mem::put(pset_len, name.len() as c_int + 1, "pset_len") };
            }
            let k = name.len().min(room as usize - 1);
            // SAFETY: `pset_name` holds `pset_len` bytes (contract).
            let out = unsafe { mem::slice_mut(pset_name as *mut u8, k + 1, "pset_name") }?;
            out[..k].copy_from_slice(&name.as_bytes()[..k]);
            out[k] = 0;
            // SAFETY: as above.
            unsafe { mem::put(pset_len, name.len() as c_int + 1, "pset_len") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_get_info`.
    fn MPI_Session_get_info / PMPI_Session_get_info(session: c_int, info_used: *mut c_int) -> c_int {
        api::call("MPI_Session_get_info", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let i = session::slot(core, session)?;
            let pairs = core.sessions.get(i).map(|s| s.info.clone()).unwrap_or_default();
            let h = comm::new_info(core, pairs);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(info_used, h, "info_used") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_get_pset_info`: `mpi_size` of the process set.
    fn MPI_Session_get_pset_info / PMPI_Session_get_pset_info(session: c_int, pset_name: *const c_char, info: *mut c_int) -> c_int {
        api::call("MPI_Session_get_pset_info", handle::COMM_WORLD, |l| {
            // SAFETY: a NUL-terminated string (contract).
            let name = unsafe { mem::cstr(pset_name, "pset_name") }?;
            let core = l.core()?;
            session::slot(core, session)?;
            let g = session::pset(core, &name)?;
            let h = comm::new_info(core, vec![("mpi_size".to_string(), g.size().to_string())]);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(info, h, "info") }
        })
    }
}

mpi_fn! {
    /// `MPI_Group_from_session_pset`.
    fn MPI_Group_from_session_pset / PMPI_Group_from_session_pset(session: c_int, pset_name: *const c_char, newgroup: *mut c_int) -> c_int {
        api::call("MPI_Group_from_session_pset", handle::COMM_WORLD, |l| {
            // SAFETY: a NUL-terminated string (contract).
            let name = unsafe { mem::cstr(pset_name, "pset_name") }?;
            let core = l.core()?;
            session::slot(core, session)?;
            let g = session::pset(core, &name)?;
            let h = core.new_group(g);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newgroup, h, "newgroup") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_create_errhandler`.
    fn MPI_Session_create_errhandler / PMPI_Session_create_errhandler(f: Option<ErrFn>, errhandler: *mut c_int) -> c_int {
        api::call("MPI_Session_create_errhandler", handle::COMM_WORLD, |l| {
            let f = f.ok_or_else(|| MpiError::new(error::ERR_ARG, "the error handler function is null"))?;
            let core = l.core()?;
            let h = handle::make(Kind::Direct, Obj::Errhandler, core.errhandlers.insert(f));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errhandler, h, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_set_errhandler`.
    fn MPI_Session_set_errhandler / PMPI_Session_set_errhandler(session: c_int, errhandler: c_int) -> c_int {
        api::call("MPI_Session_set_errhandler", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let i = session::slot(core, session)?;
            comm::check_errhandler(core, errhandler)?;
            if let Some(s) = core.sessions.get_mut(i) {
                s.errhandler = errhandler;
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Session_get_errhandler`.
    fn MPI_Session_get_errhandler / PMPI_Session_get_errhandler(session: c_int, errhandler: *mut c_int) -> c_int {
        api::call("MPI_Session_get_errhandler", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let i = session::slot(core, session)?;
            let eh = core.sessions.get(i).map(|s| s.errhandler).unwrap_or(handle::ERRORS_ARE_FATAL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(errhandler, eh, "errhandler") }
        })
    }
}

mpi_fn! {
    /// `MPI_Session_call_errhandler`: runs the session's handler on `errorcode`.
    fn MPI_Session_call_errhandler / PMPI_Session_call_errhandler(session: c_int, errorcode: c_int) -> c_int {
        let mut handler = None;
        let rc = api::call("MPI_Session_call_errhandler", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let i = session::slot(core, session)?;
            let eh = core.sessions.get(i).map(|s| s.errhandler).unwrap_or(handle::ERRORS_ARE_FATAL);
            handler = Some(api::handler_of(core, eh));
            Ok(())
        });
        if rc != error::SUCCESS {
            return rc;
        }
        match handler {
            Some(Handler::User(f)) => {
                let mut s = session;
                let mut code = errorcode;
                // SAFETY: a session error handler: f(session*, code*) (contract of
                // MPI_Session_create_errhandler).
                unsafe { f(&mut s, &mut code) };
                error::SUCCESS
            }
            Some(Handler::Return) | None => error::SUCCESS,
            Some(Handler::Fatal) => api::call("MPI_Session_call_errhandler", handle::COMM_WORLD, |_| {
                Err(MpiError::new(error::class_of(errorcode).unwrap_or(error::ERR_OTHER), error::string_of(errorcode).unwrap_or_default()))
            }),
        }
    }
}
