//! Dynamic processes: ports, connect/accept, the name service, spawn, inter-communicator
//! merge, creation and disconnect.

use std::os::raw::{c_char, c_int};

use crate::api;
use crate::comm;
use crate::dpm::{self, SpawnCmd, MAX_PORT_NAME};
use crate::error::{self, MpiError, MpiResult};
use crate::handle;
use crate::mem;
use crate::state::Core;

/// More arguments than any launcher command line takes: a bound on walking an `argv`
/// array whose terminating null pointer is missing.
const MAX_SPAWN_ARGS: usize = 1 << 16;

/// The strings of a null-terminated `argv` array (`MPI_ARGV_NULL`: none).
///
/// # Safety
/// `argv` is null or a null-terminated array of NUL-terminated strings.
unsafe fn argv_strings(argv: *const *const c_char) -> MpiResult<Vec<String>> {
    let mut out = Vec::new();
    if argv.is_null() {
        return Ok(out);
    }
    for i in 0..MAX_SPAWN_ARGS {
        // SAFETY: the array is null-terminated (contract) and entry `i - 1` was not null.
        let p = unsafe { argv.add(i).read() };
        if p.is_null() {
            return Ok(out);
        }
        // SAFETY: a NUL-terminated string (contract).
        out.push(unsafe { mem::cstr(p, "argv entry") }?);
    }
    Err(MpiError::new(
        error::ERR_ARG,
        format!("argv has no terminating NULL within {MAX_SPAWN_ARGS} entries; end it with a null pointer"),
    ))
}

/// The key/value pairs of an info argument (`MPI_INFO_NULL`: none).
fn info_of(core: &Core, info: c_int) -> MpiResult<Vec<(String, String)>> {
    if info == handle::INFO_NULL {
        return Ok(Vec::new());
    }
    comm::info_pairs(core, info)
}

/// Whether this process is `root` of `comm`.
fn is_root(core: &Core, comm: c_int, root: c_int) -> MpiResult<bool> {
    Ok(core.comm(comm)?.rank == root)
}

/// A port name argument: read where it matters (`needed`), else `""` (others may pass
/// anything, NULL included).
///
/// # Safety
/// When `needed`, `port` is null or a NUL-terminated string.
unsafe fn port_arg(port: *const c_char, needed: bool) -> MpiResult<String> {
    if !needed {
        return Ok(String::new());
    }
    // SAFETY: forwarded to the caller.
    unsafe { mem::cstr(port, "port_name") }
}

/// Fills `n` entries of `errcodes` with `code` unless it is `MPI_ERRCODES_IGNORE`.
///
/// # Safety
/// `errcodes` is null or holds `n` ints.
unsafe fn put_errcodes(errcodes: *mut c_int, n: usize, code: c_int) -> MpiResult<()> {
    if errcodes.is_null() {
        return Ok(());
    }
    // SAFETY: `n` ints (contract).
    let codes = unsafe { mem::slice_mut(errcodes, n, "array_of_errcodes") }?;
    codes.fill(code);
    Ok(())
}

mpi_fn! {
    /// `MPI_Open_port` (info hints are accepted and not used).
    fn MPI_Open_port / PMPI_Open_port(info: c_int, port_name: *mut c_char) -> c_int {
        api::call("MPI_Open_port", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            comm::check_info_arg(core, info)?;
            let port = dpm::open_port(core)?;
            // SAFETY: `port_name` holds MPI_MAX_PORT_NAME bytes (contract).
            unsafe { mem::put_cstr(port_name, MAX_PORT_NAME, &port, std::ptr::null_mut(), "port_name") }
        })
    }
}

mpi_fn! {
    /// `MPI_Close_port`.
    fn MPI_Close_port / PMPI_Close_port(port_name: *const c_char) -> c_int {
        api::call("MPI_Close_port", handle::COMM_WORLD, |l| {
            // SAFETY: NUL-terminated string (contract).
            let port = unsafe { mem::cstr(port_name, "port_name") }?;
            dpm::close_port(l.core()?, &port)
        })
    }
}

/// `MPI_Comm_accept` and `MPI_Comm_connect`.
///
/// # Safety
/// `port_name` is a string at `root`; `newcomm` is writable.
unsafe fn accept_or_connect(
    name: &'static str,
    port_name: *const c_char,
    info: c_int,
    root: c_int,
    comm: c_int,
    newcomm: *mut c_int,
    accepting: bool,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        let at_root = is_root(core, comm, root)?;
        if at_root {
            comm::check_info_arg(core, info)?;
        }
        // SAFETY: a string at the root (contract).
        let port = unsafe { port_arg(port_name, at_root) }?;
        let new = dpm::accept_or_connect(core, comm, &port, root, accepting)?;
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(newcomm, new, "newcomm") }
    })
}

mpi_fn! {
    /// `MPI_Comm_accept`: `port_name` and `info` matter at `root` only.
    fn MPI_Comm_accept / PMPI_Comm_accept(port_name: *const c_char, info: c_int, root: c_int, comm: c_int, newcomm: *mut c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { accept_or_connect("MPI_Comm_accept", port_name, info, root, comm, newcomm, true) }
    }
}

mpi_fn! {
    /// `MPI_Comm_connect`: `port_name` and `info` matter at `root` only.
    fn MPI_Comm_connect / PMPI_Comm_connect(port_name: *const c_char, info: c_int, root: c_int, comm: c_int, newcomm: *mut c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { accept_or_connect("MPI_Comm_connect", port_name, info, root, comm, newcomm, false) }
    }
}

mpi_fn! {
    /// `MPI_Comm_disconnect`.
    fn MPI_Comm_disconnect / PMPI_Comm_disconnect(comm: *mut c_int) -> c_int {
        // SAFETY: in-out parameter (contract).
        let h = unsafe { mem::get(comm, "comm") }.unwrap_or(handle::COMM_NULL);
        api::call("MPI_Comm_disconnect", h, |l| {
            // SAFETY: as above.
            unsafe { mem::get(comm, "comm") }?;
            dpm::disconnect(l, h)?;
            // SAFETY: as above.
            unsafe { mem::put(comm, handle::COMM_NULL, "comm") }
        })
    }
}

/// The common part of the two spawn calls: `cmds` is `Some` at the root only.
///
/// # Safety
/// `intercomm` writable; `errcodes` null or holding as many ints as processes are spawned.
unsafe fn spawn_common(
    name: &'static str,
    comm: c_int,
    root: c_int,
    read_cmds: impl FnOnce(&Core) -> MpiResult<Vec<SpawnCmd>>,
    intercomm: *mut c_int,
    errcodes: *mut c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let core = l.core()?;
        let cmds = if is_root(core, comm, root)? {
            Some(read_cmds(core)?)
        } else {
            None
        };
        let asked: usize = cmds.iter().flatten().map(|c| c.procs as usize).sum();
        match dpm::spawn(core, comm, cmds.as_deref(), root) {
            Ok(new) => {
                let n = core.comm(new)?.peer_count() as usize;
                // SAFETY: one int per spawned process (contract).
                unsafe { put_errcodes(errcodes, n, error::SUCCESS) }?;
                // SAFETY: out-parameter (contract).
                unsafe { mem::put(intercomm, new, "intercomm") }
            }
            Err(e) => {
                // Only the root knows how many processes were asked for.
                // SAFETY: as above.
                unsafe { put_errcodes(errcodes, asked, e.class) }?;
                // SAFETY: out-parameter (contract); MPI returns MPI_COMM_NULL on failure.
                let _ = unsafe { mem::put(intercomm, handle::COMM_NULL, "intercomm") };
                Err(e)
            }
        }
    })
}

/// A checked `maxprocs`.
fn procs(n: c_int) -> MpiResult<u32> {
    u32::try_from(n).ok().filter(|&n| n > 0).ok_or_else(|| {
        MpiError::new(
            error::ERR_ARG,
            format!("maxprocs {n}: spawn at least 1 process"),
        )
    })
}

mpi_fn! {
    /// `MPI_Comm_spawn`: `command`, `argv`, `maxprocs` and `info` (keys `host`, `wdir`,
    /// `env`) matter at `root` only.
    fn MPI_Comm_spawn / PMPI_Comm_spawn(command: *const c_char, argv: *const *const c_char, maxprocs: c_int, info: c_int, root: c_int, comm: c_int, intercomm: *mut c_int, array_of_errcodes: *mut c_int) -> c_int {
        // SAFETY: the contract of MPI_Comm_spawn.
        unsafe {
            spawn_common("MPI_Comm_spawn", comm, root, |core| {
                Ok(vec![SpawnCmd {
                    // SAFETY: NUL-terminated strings at the root (contract).
                    program: mem::cstr(command, "command")?,
                    args: argv_strings(argv)?,
                    procs: procs(maxprocs)?,
                    info: info_of(core, info)?,
                }])
            }, intercomm, array_of_errcodes)
        }
    }
}

mpi_fn! {
    /// `MPI_Comm_spawn_multiple`: one job running `count` commands (ranks in command
    /// order); the arrays matter at `root` only. The launcher takes the info keys of the
    /// first command for the whole job.
    fn MPI_Comm_spawn_multiple / PMPI_Comm_spawn_multiple(count: c_int, array_of_commands: *const *const c_char, array_of_argv: *const *const *const c_char, array_of_maxprocs: *const c_int, array_of_info: *const c_int, root: c_int, comm: c_int, intercomm: *mut c_int, array_of_errcodes: *mut c_int) -> c_int {
        // SAFETY: the contract of MPI_Comm_spawn_multiple.
        unsafe {
            spawn_common("MPI_Comm_spawn_multiple", comm, root, |core| {
                let n = usize::try_from(count).ok().filter(|&n| n > 0).ok_or_else(|| {
                    MpiError::new(error::ERR_ARG, format!("count {count}: spawn at least 1 command"))
                })?;
                // SAFETY: arrays of `count` entries at the root (contract).
                let cmds = mem::slice(array_of_commands, n, "array_of_commands")?;
                let maxprocs = mem::slice(array_of_maxprocs, n, "array_of_maxprocs")?;
                let infos = mem::slice(array_of_info, n, "array_of_info")?;
                let argvs: &[*const *const c_char] = if array_of_argv.is_null() {
                    &[]
                } else {
                    mem::slice(array_of_argv, n, "array_of_argv")?
                };
                (0..n)
                    .map(|i| {
                        Ok(SpawnCmd {
                            program: mem::cstr(cmds[i], "array_of_commands entry")?,
                            args: match argvs.get(i) {
                                Some(&a) => argv_strings(a)?,
                                None => Vec::new(),
                            },
                            procs: procs(maxprocs[i])?,
                            info: info_of(core, infos[i])?,
                        })
                    })
                    .collect()
            }, intercomm, array_of_errcodes)
        }
    }
}

mpi_fn! {
    /// `MPI_Intercomm_merge`: the group passing `high = 0` comes first.
    fn MPI_Intercomm_merge / PMPI_Intercomm_merge(intercomm: c_int, high: c_int, newintracomm: *mut c_int) -> c_int {
        api::call("MPI_Intercomm_merge", intercomm, |l| {
            let new = dpm::merge(l.core()?, intercomm, high != 0)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newintracomm, new, "newintracomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Intercomm_create`: `peer_comm` and `remote_leader` matter at `local_leader` only.
    fn MPI_Intercomm_create / PMPI_Intercomm_create(local_comm: c_int, local_leader: c_int, peer_comm: c_int, remote_leader: c_int, tag: c_int, newintercomm: *mut c_int) -> c_int {
        api::call("MPI_Intercomm_create", local_comm, |l| {
            let new = dpm::intercomm_create(l.core()?, local_comm, local_leader, peer_comm, remote_leader, tag)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newintercomm, new, "newintercomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Publish_name` (info hints are accepted and not used).
    fn MPI_Publish_name / PMPI_Publish_name(service_name: *const c_char, info: c_int, port_name: *const c_char) -> c_int {
        api::call("MPI_Publish_name", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            comm::check_info_arg(core, info)?;
            // SAFETY: NUL-terminated strings (contract).
            let (service, port) = unsafe { (mem::cstr(service_name, "service_name")?, mem::cstr(port_name, "port_name")?) };
            dpm::publish_name(core, &service, &port)
        })
    }
}

mpi_fn! {
    /// `MPI_Lookup_name`: `MPI_ERR_NAME` when nothing is published under the name.
    fn MPI_Lookup_name / PMPI_Lookup_name(service_name: *const c_char, info: c_int, port_name: *mut c_char) -> c_int {
        api::call("MPI_Lookup_name", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            comm::check_info_arg(core, info)?;
            // SAFETY: NUL-terminated string (contract).
            let service = unsafe { mem::cstr(service_name, "service_name") }?;
            let port = dpm::lookup_name(core, &service)?;
            // SAFETY: `port_name` holds MPI_MAX_PORT_NAME bytes (contract).
            unsafe { mem::put_cstr(port_name, MAX_PORT_NAME, &port, std::ptr::null_mut(), "port_name") }
        })
    }
}

mpi_fn! {
    /// `MPI_Unpublish_name`.
    fn MPI_Unpublish_name / PMPI_Unpublish_name(service_name: *const c_char, info: c_int, port_name: *const c_char) -> c_int {
        api::call("MPI_Unpublish_name", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            comm::check_info_arg(core, info)?;
            // SAFETY: NUL-terminated string (contract); the port is not needed to find
            // the service, so it is not read.
            let service = unsafe { mem::cstr(service_name, "service_name") }?;
            let _ = port_name;
            dpm::unpublish_name(core, &service)
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_join`: `fd` is a connected stream socket whose other end calls it too.
    fn MPI_Comm_join / PMPI_Comm_join(fd: c_int, intercomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_join", handle::COMM_SELF, |l| {
            use std::os::fd::FromRawFd;
            // SAFETY: `fd` is an open socket the program owns (contract); the `File` only
            // borrows it: ManuallyDrop keeps it from closing the descriptor.
            let mut sock = std::mem::ManuallyDrop::new(unsafe { std::fs::File::from_raw_fd(fd) });
            let h = crate::dpm::join(l.core()?, &mut *sock)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(intercomm, h, "intercomm") }
        })
    }
}
