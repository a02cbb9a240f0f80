//! Communicators, groups and attributes.

use std::os::raw::{c_char, c_int, c_void};

use crate::api;
use crate::comm;
use crate::complete::UNDEFINED;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem;
use crate::state::{CopyFn, Core, DeleteFn, KeyvalRec};

mpi_fn! {
    /// `MPI_Comm_rank`.
    fn MPI_Comm_rank / PMPI_Comm_rank(comm: c_int, rank: *mut c_int) -> c_int {
        api::call("MPI_Comm_rank", comm, |l| {
            let r = l.core()?.comm(comm)?.rank;
            // SAFETY: int out-parameter (contract).
            unsafe { mem::put(rank, r, "rank") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_size`.
    fn MPI_Comm_size / PMPI_Comm_size(comm: c_int, size: *mut c_int) -> c_int {
        api::call("MPI_Comm_size", comm, |l| {
            let n = l.core()?.comm(comm)?.size();
            // SAFETY: int out-parameter (contract).
            unsafe { mem::put(size, n, "size") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_dup`.
    fn MPI_Comm_dup / PMPI_Comm_dup(comm: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_dup", comm, |l| {
            let new = if api::multithreaded() {
                crate::comm_threads::dup(l, comm)?
            } else {
                comm::dup(l, comm)?
            };
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new, "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_dup_with_info` (hints are accepted and not used).
    fn MPI_Comm_dup_with_info / PMPI_Comm_dup_with_info(comm: c_int, info: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_dup_with_info", comm, |l| {
            comm::check_info_arg(l.core()?, info)?;
            let new = if api::multithreaded() {
                crate::comm_threads::dup(l, comm)?
            } else {
                comm::dup(l, comm)?
            };
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new, "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_split`.
    fn MPI_Comm_split / PMPI_Comm_split(comm: c_int, color: c_int, key: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_split", comm, |l| {
            let new = crate::comm_threads::split_at_level(l, comm, color, key)?;
            let new = new.unwrap_or(handle::COMM_NULL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new, "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_split_type`.
    fn MPI_Comm_split_type / PMPI_Comm_split_type(comm: c_int, split_type: c_int, key: c_int, info: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_split_type", comm, |l| {
            let core = l.core()?;
            comm::check_info_arg(core, info)?;
            let new = if api::multithreaded() && !core.comm(comm)?.is_inter() {
                let color = comm::split_type_color(core, comm, split_type, info)?;
                crate::comm_threads::split(l, comm, color, key)?
            } else {
                comm::split_type(core, comm, split_type, key, info)?
            };
            let new = new.unwrap_or(handle::COMM_NULL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new, "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_create`.
    fn MPI_Comm_create / PMPI_Comm_create(comm: c_int, group: c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Comm_create", comm, |l| {
            let new = if api::multithreaded() {
                crate::comm_threads::create(l, comm, group)?
            } else {
                comm::create(l.core()?, comm, group)?
            };
            let new = new.unwrap_or(handle::COMM_NULL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new, "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_free`.
    fn MPI_Comm_free / PMPI_Comm_free(comm: *mut c_int) -> c_int {
        // SAFETY: in-out parameter (contract).
        let h = match unsafe { mem::get(comm, "comm") } {
            Ok(h) => h,
            Err(_) => handle::COMM_NULL,
        };
        api::call("MPI_Comm_free", h, |l| {
            // SAFETY: as above.
            unsafe { mem::get(comm, "comm") }?;
            comm::free(l, h)?;
            // SAFETY: as above.
            unsafe { mem::put(comm, handle::COMM_NULL, "comm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_compare`.
    fn MPI_Comm_compare / PMPI_Comm_compare(comm1: c_int, comm2: c_int, result: *mut c_int) -> c_int {
        api::call("MPI_Comm_compare", comm1, |l| {
            let r = comm::compare(l.core()?, comm1, comm2)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(result, r, "result") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_group`.
    fn MPI_Comm_group / PMPI_Comm_group(comm: c_int, group: *mut c_int) -> c_int {
        api::call("MPI_Comm_group", comm, |l| {
            let core = l.core()?;
            let members = core.comm(comm)?.members.clone();
            let g = core.new_group(kestrel_pml::Group::new(members));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(group, g, "group") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_set_name`.
    fn MPI_Comm_set_name / PMPI_Comm_set_name(comm: c_int, name: *const c_char) -> c_int {
        api::call("MPI_Comm_set_name", comm, |l| {
            // SAFETY: NUL-terminated string (contract).
            let mut n = unsafe { mem::cstr(name, "comm_name") }?;
            n.truncate(comm::MAX_OBJECT_NAME - 1);
            l.core()?.comm_mut(comm)?.name = n;
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_get_name`.
    fn MPI_Comm_get_name / PMPI_Comm_get_name(comm: c_int, name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api::call("MPI_Comm_get_name", comm, |l| {
            let n = comm::name(l.core()?, comm)?;
            // SAFETY: `name` holds MPI_MAX_OBJECT_NAME bytes (contract).
            unsafe { mem::put_cstr(name, comm::MAX_OBJECT_NAME, &n, resultlen, "comm_name") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_test_inter`.
    fn MPI_Comm_test_inter / PMPI_Comm_test_inter(comm: c_int, flag: *mut c_int) -> c_int {
        api::call("MPI_Comm_test_inter", comm, |l| {
            let inter = l.core()?.comm(comm)?.is_inter();
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(flag, c_int::from(inter), "flag") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_remote_size`.
    fn MPI_Comm_remote_size / PMPI_Comm_remote_size(comm: c_int, size: *mut c_int) -> c_int {
        api::call("MPI_Comm_remote_size", comm, |l| {
            let n = remote_of(l.core()?, comm, "MPI_Comm_remote_size")?.len() as c_int;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(size, n, "size") }
        })
    }
}

mpi_fn! {
    /// `MPI_Comm_remote_group`.
    fn MPI_Comm_remote_group / PMPI_Comm_remote_group(comm: c_int, group: *mut c_int) -> c_int {
        api::call("MPI_Comm_remote_group", comm, |l| {
            let core = l.core()?;
            let members = remote_of(core, comm, "MPI_Comm_remote_group")?.to_vec();
            let g = core.new_group(kestrel_pml::Group::new(members));
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(group, g, "group") }
        })
    }
}

/// The remote group of an inter-communicator.
fn remote_of<'a>(core: &'a Core, comm: c_int, what: &str) -> MpiResult<&'a [u32]> {
    core.comm(comm)?.remote.as_deref().ok_or_else(|| {
        MpiError::new(
            error::ERR_COMM,
            format!("{what} needs an inter-communicator; this one is an intra-communicator (MPI_Comm_test_inter tells them apart)"),
        )
    })
}

mpi_fn! {
    /// `MPI_Comm_get_parent`: the inter-communicator to the job that spawned this one,
    /// `MPI_COMM_NULL` when none (or after it was freed or disconnected).
    fn MPI_Comm_get_parent / PMPI_Comm_get_parent(parent: *mut c_int) -> c_int {
        api::call("MPI_Comm_get_parent", handle::COMM_WORLD, |l| {
            let p = l.core()?.parent;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(parent, p, "parent") }
        })
    }
}

mpi_fn! {
    /// `MPI_Topo_test`: `MPI_UNDEFINED` (no communicator has a topology).
    fn MPI_Topo_test / PMPI_Topo_test(comm: c_int, status: *mut c_int) -> c_int {
        api::call("MPI_Topo_test", comm, |l| {
            let kind = l.core()?.comm(comm)?.topo.as_ref().map_or(UNDEFINED, |t| t.kind());
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(status, kind, "status") }
        })
    }
}

fn group_arg(core: &Core, g: c_int) -> MpiResult<kestrel_pml::Group> {
    core.group(g)
}

mpi_fn! {
    /// `MPI_Group_size`.
    fn MPI_Group_size / PMPI_Group_size(group: c_int, size: *mut c_int) -> c_int {
        api::call("MPI_Group_size", handle::COMM_WORLD, |l| {
            let n = group_arg(l.core()?, group)?.size() as c_int;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(size, n, "size") }
        })
    }
}

mpi_fn! {
    /// `MPI_Group_rank`: `MPI_UNDEFINED` for non-members.
    fn MPI_Group_rank / PMPI_Group_rank(group: c_int, rank: *mut c_int) -> c_int {
        api::call("MPI_Group_rank", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let me = core.engine.rank();
            let r = group_arg(core, group)?.rank_of(me).map_or(UNDEFINED, |r| r as c_int);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(rank, r, "rank") }
        })
    }
}

fn group_from_ranks(
    name: &'static str,
    group: c_int,
    ranks: Vec<c_int>,
    excl: bool,
    newgroup: *mut c_int,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        let core = l.core()?;
        let g = group_arg(core, group)?;
        let rs = comm::group_ranks(&g, &ranks)?;
        let made = if excl { g.excl(&rs) } else { g.incl(&rs) }
            .map_err(|e| MpiError::new(error::ERR_RANK, e.0))?;
        let h = core.new_group(made);
        // SAFETY: out-parameter (contract of the calling entry point).
        unsafe { mem::put(newgroup, h, "newgroup") }
    })
}

mpi_fn! {
    /// `MPI_Group_incl`.
    fn MPI_Group_incl / PMPI_Group_incl(group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) -> c_int {
        // SAFETY: `ranks` holds `n` ints (contract).
        let rs = match mem::count(n).and_then(|n| unsafe { mem::slice(ranks, n, "ranks") }) {
            Ok(r) => r.to_vec(),
            Err(e) => return api::call("MPI_Group_incl", handle::COMM_WORLD, |_| Err(e)),
        };
        group_from_ranks("MPI_Group_incl", group, rs, false, newgroup)
    }
}

mpi_fn! {
    /// `MPI_Group_excl`.
    fn MPI_Group_excl / PMPI_Group_excl(group: c_int, n: c_int, ranks: *const c_int, newgroup: *mut c_int) -> c_int {
        // SAFETY: `ranks` holds `n` ints (contract).
        let rs = match mem::count(n).and_then(|n| unsafe { mem::slice(ranks, n, "ranks") }) {
            Ok(r) => r.to_vec(),
            Err(e) => return api::call("MPI_Group_excl", handle::COMM_WORLD, |_| Err(e)),
        };
        group_from_ranks("MPI_Group_excl", group, rs, true, newgroup)
    }
}

fn group_ranges(
    name: &'static str,
    group: c_int,
    n: c_int,
    ranges: *const [c_int; 3],
    excl: bool,
    newgroup: *mut c_int,
) -> c_int {
    let mut expanded = None;
    let rc = api::call(name, handle::COMM_WORLD, |l| {
        // SAFETY: `ranges` holds `n` triples (contract of the calling entry point).
        let rs = unsafe { mem::slice(ranges, mem::count(n)?, "ranges") }?;
        let g = group_arg(l.core()?, group)?;
        expanded = Some(comm::expand_ranges(&g, rs)?);
        Ok(())
    });
    match expanded {
        Some(ranks) => group_from_ranks(name, group, ranks, excl, newgroup),
        None => rc,
    }
}

mpi_fn! {
    /// `MPI_Group_range_incl`.
    fn MPI_Group_range_incl / PMPI_Group_range_incl(group: c_int, n: c_int, ranges: *const [c_int; 3], newgroup: *mut c_int) -> c_int {
        group_ranges("MPI_Group_range_incl", group, n, ranges, false, newgroup)
    }
}

mpi_fn! {
    /// `MPI_Group_range_excl`.
    fn MPI_Group_range_excl / PMPI_Group_range_excl(group: c_int, n: c_int, ranges: *const [c_int; 3], newgroup: *mut c_int) -> c_int {
        group_ranges("MPI_Group_range_excl", group, n, ranges, true, newgroup)
    }
}

mpi_fn! {
    /// `MPI_Group_translate_ranks`: `MPI_UNDEFINED` for processes not in `group2`.
    fn MPI_Group_translate_ranks / PMPI_Group_translate_ranks(group1: c_int, n: c_int, ranks1: *const c_int, group2: c_int, ranks2: *mut c_int) -> c_int {
        api::call("MPI_Group_translate_ranks", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let g1 = group_arg(core, group1)?;
            let g2 = group_arg(core, group2)?;
            let n = mem::count(n)?;
            // SAFETY: `ranks1` holds `n` ints (contract).
            let rs = unsafe { mem::slice(ranks1, n, "ranks1") }?;
            let mut out = Vec::with_capacity(n);
            for &r in rs {
                if r == crate::p2p::PROC_NULL {
                    out.push(crate::p2p::PROC_NULL);
                    continue;
                }
                let job = usize::try_from(r).ok().and_then(|r| g1.job_rank(r)).ok_or_else(|| {
                    MpiError::new(error::ERR_RANK, format!("rank {r} is not in a group of {}", g1.size()))
                })?;
                out.push(g2.rank_of(job).map_or(UNDEFINED, |x| x as c_int));
            }
            // SAFETY: `ranks2` holds `n` ints (contract).
            let dst = unsafe { mem::slice_mut(ranks2, n, "ranks2") }?;
            dst.copy_from_slice(&out);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Group_compare`.
    fn MPI_Group_compare / PMPI_Group_compare(group1: c_int, group2: c_int, result: *mut c_int) -> c_int {
        api::call("MPI_Group_compare", handle::COMM_WORLD, |l| {
            let core = l.core()?;
            let r = comm::group_compare(&group_arg(core, group1)?, &group_arg(core, group2)?);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(result, r, "result") }
        })
    }
}

fn group_op(
    name: &'static str,
    a: c_int,
    b: c_int,
    newgroup: *mut c_int,
    f: fn(&kestrel_pml::Group, &kestrel_pml::Group) -> kestrel_pml::Group,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        let core = l.core()?;
        let g = f(&group_arg(core, a)?, &group_arg(core, b)?);
        let h = core.new_group(g);
        // SAFETY: out-parameter (contract of the calling entry point).
        unsafe { mem::put(newgroup, h, "newgroup") }
    })
}

mpi_fn! {
    /// `MPI_Group_union`.
    fn MPI_Group_union / PMPI_Group_union(group1: c_int, group2: c_int, newgroup: *mut c_int) -> c_int {
        group_op("MPI_Group_union", group1, group2, newgroup, comm::group_union)
    }
}

mpi_fn! {
    /// `MPI_Group_intersection`.
    fn MPI_Group_intersection / PMPI_Group_intersection(group1: c_int, group2: c_int, newgroup: *mut c_int) -> c_int {
        group_op("MPI_Group_intersection", group1, group2, newgroup, comm::group_intersection)
    }
}

mpi_fn! {
    /// `MPI_Group_difference`.
    fn MPI_Group_difference / PMPI_Group_difference(group1: c_int, group2: c_int, newgroup: *mut c_int) -> c_int {
        group_op("MPI_Group_difference", group1, group2, newgroup, comm::group_difference)
    }
}

mpi_fn! {
    /// `MPI_Group_free`.
    fn MPI_Group_free / PMPI_Group_free(group: *mut c_int) -> c_int {
        api::call("MPI_Group_free", handle::COMM_WORLD, |l| {
            // SAFETY: in-out parameter (contract).
            let g = unsafe { mem::get(group, "group") }?;
            let core = l.core()?;
            core.group(g)?;
            if let Some((Kind::Direct, i)) = handle::decode(g, Obj::Group) {
                core.groups.remove(i);
            }
            // SAFETY: as above.
            unsafe { mem::put(group, handle::GROUP_NULL, "group") }
        })
    }
}

fn create_keyval(
    name: &'static str,
    copy: Option<CopyFn>,
    delete: Option<DeleteFn>,
    keyval: *mut c_int,
    extra: *mut c_void,
) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        let h = comm::create_keyval(
            l.core()?,
            KeyvalRec {
                copy,
                delete,
                extra: extra as usize,
                uses: 0,
                freed: false,
                proxy: None,
            },
        );
        // SAFETY: out-parameter (contract of the calling entry point).
        unsafe { mem::put(keyval, h, "keyval") }
    })
}

mpi_fn! {
    /// `MPI_Comm_create_keyval`.
    fn MPI_Comm_create_keyval / PMPI_Comm_create_keyval(copy: Option<CopyFn>, delete: Option<DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        create_keyval("MPI_Comm_create_keyval", copy, delete, keyval, extra)
    }
}

mpi_fn! {
    /// `MPI_Keyval_create` (the MPI-1 name).
    fn MPI_Keyval_create / PMPI_Keyval_create(copy: Option<CopyFn>, delete: Option<DeleteFn>, keyval: *mut c_int, extra: *mut c_void) -> c_int {
        create_keyval("MPI_Keyval_create", copy, delete, keyval, extra)
    }
}

fn free_keyval(name: &'static str, keyval: *mut c_int) -> c_int {
    api::call(name, handle::COMM_WORLD, |l| {
        // SAFETY: in-out parameter (contract of the calling entry point).
        let kv = unsafe { mem::get(keyval, "keyval") }?;
        comm::free_keyval(l.core()?, kv)?;
        // SAFETY: as above.
        unsafe { mem::put(keyval, handle::KEYVAL_INVALID, "keyval") }
    })
}

mpi_fn! {
    /// `MPI_Comm_free_keyval`.
    fn MPI_Comm_free_keyval / PMPI_Comm_free_keyval(keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Comm_free_keyval", keyval)
    }
}

mpi_fn! {
    /// `MPI_Keyval_free`.
    fn MPI_Keyval_free / PMPI_Keyval_free(keyval: *mut c_int) -> c_int {
        free_keyval("MPI_Keyval_free", keyval)
    }
}

mpi_fn! {
    /// `MPI_Comm_set_attr`.
    fn MPI_Comm_set_attr / PMPI_Comm_set_attr(comm: c_int, keyval: c_int, value: *mut c_void) -> c_int {
        api::call("MPI_Comm_set_attr", comm, |l| comm::set_attr(l, comm, keyval, value as usize))
    }
}

mpi_fn! {
    /// `MPI_Attr_put`.
    fn MPI_Attr_put / PMPI_Attr_put(comm: c_int, keyval: c_int, value: *mut c_void) -> c_int {
        api::call("MPI_Attr_put", comm, |l| comm::set_attr(l, comm, keyval, value as usize))
    }
}

fn get_attr(
    name: &'static str,
    comm: c_int,
    keyval: c_int,
    value: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    api::call(name, comm, |l| {
        let v = comm::get_attr(l.core()?, comm, keyval)?;
        if let Some(v) = v {
            // SAFETY: `value` is a `void **` in disguise (contract of the calling entry point).
            unsafe { mem::put(value as *mut usize, v, "attribute_val") }?;
        }
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(flag, c_int::from(v.is_some()), "flag") }
    })
}

mpi_fn! {
    /// `MPI_Comm_get_attr`.
    fn MPI_Comm_get_attr / PMPI_Comm_get_attr(comm: c_int, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Comm_get_attr", comm, keyval, value, flag)
    }
}

mpi_fn! {
    /// `MPI_Attr_get`.
    fn MPI_Attr_get / PMPI_Attr_get(comm: c_int, keyval: c_int, value: *mut c_void, flag: *mut c_int) -> c_int {
        get_attr("MPI_Attr_get", comm, keyval, value, flag)
    }
}

mpi_fn! {
    /// `MPI_Comm_delete_attr`.
    fn MPI_Comm_delete_attr / PMPI_Comm_delete_attr(comm: c_int, keyval: c_int) -> c_int {
        api::call("MPI_Comm_delete_attr", comm, |l| comm::delete_attr(l, comm, keyval))
    }
}

mpi_fn! {
    /// `MPI_Attr_delete`.
    fn MPI_Attr_delete / PMPI_Attr_delete(comm: c_int, keyval: c_int) -> c_int {
        api::call("MPI_Attr_delete", comm, |l| comm::delete_attr(l, comm, keyval))
    }
}

/// `MPI_COMM_DUP_FN` (MPICH's name): the new communicator shares the attribute value.
#[no_mangle]
pub unsafe extern "C" fn MPIR_Dup_fn(
    _oldcomm: c_int,
    _keyval: c_int,
    _extra_state: *mut c_void,
    attribute_val_in: *mut c_void,
    attribute_val_out: *mut c_void,
    flag: *mut c_int,
) -> c_int {
    // SAFETY: MPI passes a `void **` for the value out and an int for the flag.
    unsafe {
        (attribute_val_out as *mut *mut c_void).write_unaligned(attribute_val_in);
        flag.write_unaligned(1);
    }
    error::SUCCESS
}
