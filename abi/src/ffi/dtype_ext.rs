//! Datatype introspection (`MPI_Type_get_contents`), `MPI_Type_create_darray`, the Fortran
//! kinds (`MPI_Type_create_f90_*`, `MPI_Type_match_size`) and `external32` packing.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::Arc;

use super::dtype::{built, construct, query, recorded, register};
use super::region;
use crate::api;
use crate::datatype_ext::{self as ext, Darray};
use crate::error::{self, MpiError, MpiResult};
use crate::mem;
use crate::state::{self, TypeEntry};
use crate::types::{self, combiner, Part, TypeInfo};

/// The contents of a derived type, with new handles for the derived types among them.
fn contents(datatype: c_int) -> MpiResult<Arc<types::Contents>> {
    let t = state::datatype(datatype, false)?;
    t.contents.clone().ok_or_else(|| {
        MpiError::new(
            error::ERR_TYPE,
            "MPI_Type_get_contents is not defined for a predefined datatype (its combiner is MPI_COMBINER_NAMED)",
        )
    })
}

/// A handle for each datatype argument: the predefined ones as they are, a new handle
/// (to be freed by the program) for each derived one.
fn type_handles(c: &types::Contents) -> Vec<c_int> {
    c.datatypes
        .iter()
        .map(|(h, info)| match info {
            None => *h,
            Some(i) => state::with_types(|t| {
                let slot = t.derived.insert(TypeEntry {
                    info: i.clone(),
                    committed: true,
                    name: String::new(),
                });
                crate::handle::make(
                    crate::handle::Kind::Indirect,
                    crate::handle::Obj::Datatype,
                    slot,
                )
            }),
        })
        .collect()
}

fn too_small(what: &str, have: i64, need: usize) -> MpiResult<()> {
    if have < need as i64 {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is {have} but the type was built with {need}; size the arrays with MPI_Type_get_envelope"),
        ));
    }
    Ok(())
}

mpi_fn! {
    /// `MPI_Type_get_contents`.
    fn MPI_Type_get_contents / PMPI_Type_get_contents(datatype: c_int, max_integers: c_int, max_addresses: c_int, max_datatypes: c_int, array_of_integers: *mut c_int, array_of_addresses: *mut isize, array_of_datatypes: *mut c_int) -> c_int {
        api::call_types("MPI_Type_get_contents", || {
            let c = contents(datatype)?;
            if !c.large.is_empty() {
                return Err(MpiError::new(error::ERR_TYPE, "the datatype was built by a large-count (_c) constructor; use MPI_Type_get_contents_c"));
            }
            too_small("max_integers", max_integers.into(), c.integers.len())?;
            too_small("max_addresses", max_addresses.into(), c.addresses.len())?;
            too_small("max_datatypes", max_datatypes.into(), c.datatypes.len())?;
            // SAFETY: the arrays hold at least the maxima given, checked above (contract).
            unsafe {
                let ints = mem::slice_mut(array_of_integers, c.integers.len(), "array_of_integers")?;
                for (o, &v) in ints.iter_mut().zip(&c.integers) {
                    *o = c_int::try_from(v).map_err(|_| MpiError::new(error::ERR_ARG, format!("integer argument {v} does not fit an int; use MPI_Type_get_contents_c")))?;
                }
                mem::slice_mut(array_of_addresses, c.addresses.len(), "array_of_addresses")?.copy_from_slice(&c.addresses);
                mem::slice_mut(array_of_datatypes, c.datatypes.len(), "array_of_datatypes")?.copy_from_slice(&type_handles(&c));
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_contents_c`: large counts for the types of the `_c` constructors.
    fn MPI_Type_get_contents_c / PMPI_Type_get_contents_c(datatype: c_int, max_integers: i64, max_addresses: i64, max_large_counts: i64, max_datatypes: i64, array_of_integers: *mut c_int, array_of_addresses: *mut isize, array_of_large_counts: *mut i64, array_of_datatypes: *mut c_int) -> c_int {
        api::call_types("MPI_Type_get_contents_c", || {
            let c = contents(datatype)?;
            too_small("max_integers", max_integers, c.integers.len())?;
            too_small("max_addresses", max_addresses, c.addresses.len())?;
            too_small("max_large_counts", max_large_counts, c.large.len())?;
            too_small("max_datatypes", max_datatypes, c.datatypes.len())?;
            // SAFETY: the arrays hold at least the maxima given, checked above (contract).
            unsafe {
                let ints = mem::slice_mut(array_of_integers, c.integers.len(), "array_of_integers")?;
                for (o, &v) in ints.iter_mut().zip(&c.integers) {
                    *o = c_int::try_from(v).map_err(|_| MpiError::new(error::ERR_ARG, format!("integer argument {v} does not fit an int")))?;
                }
                mem::slice_mut(array_of_addresses, c.addresses.len(), "array_of_addresses")?.copy_from_slice(&c.addresses);
                mem::slice_mut(array_of_large_counts, c.large.len(), "array_of_large_counts")?.copy_from_slice(&c.large);
                mem::slice_mut(array_of_datatypes, c.datatypes.len(), "array_of_datatypes")?.copy_from_slice(&type_handles(&c));
            }
            Ok(())
        })
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_darray`: this process's part of a distributed array, with the whole
    /// array's extent.
    fn MPI_Type_create_darray / PMPI_Type_create_darray, MPI_Type_create_darray_c / PMPI_Type_create_darray_c(size: c_int, rank: c_int, ndims: c_int, gsizes: *const Count, distribs: *const c_int, dargs: *const c_int, psizes: *const c_int, order: c_int, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let nd = mem::count(ndims)?;
            // SAFETY: the four arrays hold `ndims` entries (contract).
            let (g, dist, darg, ps) = unsafe {
                (
                    mem::slice(gsizes, nd, "array_of_gsizes")?,
                    mem::slice(distribs, nd, "array_of_distribs")?,
                    mem::slice(dargs, nd, "array_of_dargs")?,
                    mem::slice(psizes, nd, "array_of_psizes")?,
                )
            };
            let g64: Vec<i64> = g.iter().map(|&x| x.into()).collect();
            let a = Darray { size, rank, gsizes: &g64, distribs: dist, dargs: darg, psizes: ps, order };
            let (elements, total) = ext::darray_elements(&a)?;
            let old = state::datatype(oldtype, false)?;
            let e = old.extent();
            let parts: Vec<Part> = elements.iter().map(|&i| Part { disp: i as isize * e, count: 1, ty: &old }).collect();
            let placed = built(types::build(&parts, old.envelope))?;
            let t = types::resized(&placed, 0, total as isize * e);
            let mut args = vec![i64::from(size), i64::from(rank), nd as i64];
            args.extend(&g64);
            args.extend(dist.iter().map(|&x| i64::from(x)));
            args.extend(darg.iter().map(|&x| i64::from(x)));
            args.extend(ps.iter().map(|&x| i64::from(x)));
            args.push(i64::from(order));
            recorded(t, combiner::DARRAY, args, vec![], &[oldtype])
        })
    }
}

/// The cached handle of a Fortran-kind type, made on first use.
fn f90(
    name: &'static str,
    comb: c_int,
    p: c_int,
    r: c_int,
    base: c_int,
    newtype: *mut c_int,
) -> c_int {
    api::call_types(name, || {
        let key = (comb, p, r);
        let h = match state::with_types(|t| t.f90.get(&key).copied()) {
            Some(h) => h,
            None => {
                let old = state::datatype(base, false)?;
                let ints = match comb {
                    combiner::F90_INTEGER => vec![i64::from(r)],
                    _ => vec![i64::from(p), i64::from(r)],
                };
                let info: TypeInfo = recorded((*old).clone(), comb, ints, vec![], &[])?;
                let h = register(info, true);
                state::with_types(|t| t.f90.insert(key, h));
                h
            }
        };
        // SAFETY: out-parameter (contract).
        unsafe { mem::put(newtype, h, "newtype") }
    })
}

mpi_fn! {
    /// `MPI_Type_create_f90_integer`.
    fn MPI_Type_create_f90_integer / PMPI_Type_create_f90_integer(r: c_int, newtype: *mut c_int) -> c_int {
        match ext::f90_integer(r) {
            Ok(base) => f90("MPI_Type_create_f90_integer", combiner::F90_INTEGER, crate::complete::UNDEFINED, r, base, newtype),
            Err(e) => api::call_types("MPI_Type_create_f90_integer", || Err(e)),
        }
    }
}

mpi_fn! {
    /// `MPI_Type_create_f90_real`.
    fn MPI_Type_create_f90_real / PMPI_Type_create_f90_real(p: c_int, r: c_int, newtype: *mut c_int) -> c_int {
        match ext::f90_real_bytes(p, r) {
            Ok(b) => f90("MPI_Type_create_f90_real", combiner::F90_REAL, p, r, ext::real_of(b), newtype),
            Err(e) => api::call_types("MPI_Type_create_f90_real", || Err(e)),
        }
    }
}

mpi_fn! {
    /// `MPI_Type_create_f90_complex`.
    fn MPI_Type_create_f90_complex / PMPI_Type_create_f90_complex(p: c_int, r: c_int, newtype: *mut c_int) -> c_int {
        match ext::f90_real_bytes(p, r) {
            Ok(b) => f90("MPI_Type_create_f90_complex", combiner::F90_COMPLEX, p, r, ext::complex_of(b), newtype),
            Err(e) => api::call_types("MPI_Type_create_f90_complex", || Err(e)),
        }
    }
}

mpi_fn! {
    /// `MPI_Type_match_size`.
    fn MPI_Type_match_size / PMPI_Type_match_size(typeclass: c_int, size: c_int, datatype: *mut c_int) -> c_int {
        api::call_types("MPI_Type_match_size", || {
            let h = ext::match_size(typeclass, size)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(datatype, h, "datatype") }
        })
    }
}

/// Checks the data representation name (only "external32" has a defined layout here).
///
/// # Safety
/// `datarep` is a NUL-terminated string.
unsafe fn external32(datarep: *const c_char) -> MpiResult<()> {
    // SAFETY: forwarded to the caller.
    let rep = unsafe { mem::cstr(datarep, "datarep") }?;
    if rep != "external32" {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!(
                "data representation \"{rep}\" is unknown; MPI_Pack_external takes \"external32\""
            ),
        ));
    }
    Ok(())
}

mpi_fn_c! {
    /// `MPI_Pack_external`.
    fn MPI_Pack_external / PMPI_Pack_external, MPI_Pack_external_c / PMPI_Pack_external_c(datarep: *const c_char, inbuf: *const c_void, incount: Count, datatype: c_int, outbuf: *mut c_void, outsize: isize, position: *mut isize) -> c_int {
        api::call_types(NAME, || {
            // SAFETY: a C string; `inbuf` holds `incount` elements (contract).
            let data = unsafe {
                external32(datarep)?;
                region(inbuf, incount, datatype)?
            };
            let e = ext::to_external(&data.ty, data.count, &data.pack()?)?;
            // SAFETY: in-out parameter (contract).
            let pos = unsafe { mem::get(position, "position") }?;
            let size = mem::count(outsize as i64)?;
            let at = usize::try_from(pos).map_err(|_| MpiError::new(error::ERR_ARG, format!("position {pos} is negative")))?;
            if at + e.len() > size {
                return Err(MpiError::new(error::ERR_TRUNCATE, format!("{} external32 bytes do not fit at position {at} of a {size}-byte buffer", e.len())));
            }
            // SAFETY: `outbuf` holds `outsize` bytes (contract); the range is inside it.
            let out = unsafe { mem::slice_mut(outbuf as *mut u8, size, "outbuf") }?;
            out[at..at + e.len()].copy_from_slice(&e);
            // SAFETY: as above.
            unsafe { mem::put(position, (at + e.len()) as isize, "position") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Unpack_external`.
    fn MPI_Unpack_external / PMPI_Unpack_external, MPI_Unpack_external_c / PMPI_Unpack_external_c(datarep: *const c_char, inbuf: *const c_void, insize: isize, position: *mut isize, outbuf: *mut c_void, outcount: Count, datatype: c_int) -> c_int {
        api::call_types(NAME, || {
            // SAFETY: a C string; `outbuf` holds `outcount` elements (contract).
            let r = unsafe {
                external32(datarep)?;
                region(outbuf, outcount, datatype)?
            };
            // SAFETY: in-out parameter (contract).
            let pos = unsafe { mem::get(position, "position") }?;
            let size = mem::count(insize as i64)?;
            let at = usize::try_from(pos).map_err(|_| MpiError::new(error::ERR_ARG, format!("position {pos} is negative")))?;
            let need = ext::external_size(&r.ty, r.count);
            if at + need > size {
                return Err(MpiError::new(error::ERR_TRUNCATE, format!("unpacking {need} external32 bytes at position {at} runs past the {size}-byte input")));
            }
            // SAFETY: `inbuf` holds `insize` bytes (contract).
            let input = unsafe { mem::slice(inbuf as *const u8, size, "inbuf") }?;
            let native = ext::from_external(&r.ty, r.count, &input[at..at + need])?;
            r.unpack(&native)?;
            // SAFETY: as above.
            unsafe { mem::put(position, (at + need) as isize, "position") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Pack_external_size`.
    fn MPI_Pack_external_size / PMPI_Pack_external_size, MPI_Pack_external_size_c / PMPI_Pack_external_size_c(datarep: *const c_char, incount: Count, datatype: c_int, size: *mut isize) -> c_int {
        query(NAME, datatype, |t| {
            // SAFETY: a C string (contract).
            unsafe { external32(datarep) }?;
            Ok(ext::external_size(t, mem::count(incount)?) as isize)
        },
            // SAFETY: out-parameter (contract).
            |v| unsafe { mem::put(size, v, "size") })
    }
}

mpi_fn! {
    /// `MPI_Type_create_keyval`.
    fn MPI_Type_create_keyval / PMPI_Type_create_keyval(copy: Option<crate::state::CopyFn>, delete: Option<crate::state::DeleteFn>, keyval: *mut c_int, extra_state: *mut c_void) -> c_int {
        api::call_types("MPI_Type_create_keyval", || {
            let h = crate::type_attr::create(crate::state::KeyvalRec { copy, delete, extra: extra_state as usize, uses: 0, freed: false, proxy: None });
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(keyval, h, "keyval") }
        })
    }
}

mpi_fn! {
    /// `MPI_Type_free_keyval`.
    fn MPI_Type_free_keyval / PMPI_Type_free_keyval(keyval: *mut c_int) -> c_int {
        api::call_types("MPI_Type_free_keyval", || {
            // SAFETY: in-out parameter (contract).
            let kv = unsafe { mem::get(keyval, "keyval") }?;
            crate::type_attr::free_keyval(kv)?;
            // SAFETY: as above.
            unsafe { mem::put(keyval, crate::handle::KEYVAL_INVALID, "keyval") }
        })
    }
}

mpi_fn! {
    /// `MPI_Type_set_attr`.
    fn MPI_Type_set_attr / PMPI_Type_set_attr(datatype: c_int, keyval: c_int, attribute_val: *mut c_void) -> c_int {
        api::call_types("MPI_Type_set_attr", || {
            state::datatype(datatype, false)?;
            crate::type_attr::set(datatype, keyval, attribute_val as usize)
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_attr`.
    fn MPI_Type_get_attr / PMPI_Type_get_attr(datatype: c_int, keyval: c_int, attribute_val: *mut c_void, flag: *mut c_int) -> c_int {
        api::call_types("MPI_Type_get_attr", || {
            state::datatype(datatype, false)?;
            let v = crate::type_attr::get(datatype, keyval)?;
            // SAFETY: `attribute_val` is a `void **` in disguise; `flag` an int (contract).
            unsafe {
                if let Some(v) = v {
                    mem::put(attribute_val as *mut usize, v, "attribute_val")?;
                }
                mem::put(flag, c_int::from(v.is_some()), "flag")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Type_delete_attr`.
    fn MPI_Type_delete_attr / PMPI_Type_delete_attr(datatype: c_int, keyval: c_int) -> c_int {
        api::call_types("MPI_Type_delete_attr", || {
            state::datatype(datatype, false)?;
            crate::type_attr::delete(datatype, keyval)
        })
    }
}
