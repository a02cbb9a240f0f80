//! Datatype constructors, queries, and packing.

use std::os::raw::{c_char, c_int, c_void};
use std::sync::Arc;

use super::region;
use crate::api;
use crate::comm::MAX_OBJECT_NAME;
use crate::complete::UNDEFINED;
use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::mem;
use crate::state::{self, TypeEntry};
use crate::types::{self, combiner, Contents, Dt, Envelope, Part, TypeInfo};

/// Registers a derived type; returns its handle.
pub(super) fn register(info: TypeInfo, committed: bool) -> c_int {
    let slot = state::with_types(|t| {
        t.derived.insert(TypeEntry {
            info: Arc::new(info),
            committed,
            name: String::new(),
        })
    });
    handle::make(Kind::Indirect, Obj::Datatype, slot)
}

pub(super) fn built(r: Result<TypeInfo, types::BuildError>) -> MpiResult<TypeInfo> {
    r.map_err(|e| MpiError::new(error::ERR_ARG, e.0))
}

fn env(combiner: c_int, integers: usize, addresses: usize, datatypes: usize) -> Envelope {
    Envelope {
        combiner,
        integers: integers as c_int,
        addresses: addresses as c_int,
        datatypes: datatypes as c_int,
    }
}

/// Records a constructor's arguments in `t` (`MPI_Type_get_contents`); its envelope
/// follows from them.
pub(super) fn recorded(
    mut t: TypeInfo,
    combiner: c_int,
    integers: Vec<i64>,
    addresses: Vec<isize>,
    datatypes: &[c_int],
) -> MpiResult<TypeInfo> {
    let datatypes = datatypes
        .iter()
        .map(|&h| {
            Ok(match state::datatype(h, false)? {
                Dt::Static(_) => (h, None),
                Dt::Shared(a) => (h, Some(a)),
            })
        })
        .collect::<MpiResult<Vec<_>>>()?;
    // A derived type, even when it copies a predefined one (MPI_Type_dup): freeable,
    // and its envelope is its constructor's.
    t.predefined = None;
    t.envelope = env(combiner, integers.len(), addresses.len(), datatypes.len());
    t.contents = Some(Arc::new(Contents {
        combiner,
        integers,
        addresses,
        datatypes,
        large: Vec::new(),
    }));
    Ok(t)
}

fn ints<T: Copy + Into<i64>>(head: &[i64], arrays: &[&[T]]) -> Vec<i64> {
    let mut v = Vec::with_capacity(head.len() + arrays.iter().map(|a| a.len()).sum::<usize>());
    v.extend_from_slice(head);
    for a in arrays {
        v.extend(a.iter().map(|&x| x.into()));
    }
    v
}

fn too_many() -> MpiError {
    MpiError::new(
        error::ERR_ARG,
        format!(
            "the type would have more than {} separate blocks; build it from fewer, larger pieces",
            types::MAX_BLOCKS
        ),
    )
}

fn blocklen(b: impl Into<i64>) -> MpiResult<usize> {
    let b: i64 = b.into();
    usize::try_from(b)
        .map_err(|_| MpiError::new(error::ERR_ARG, format!("block length {b} is negative")))
}

/// Runs a constructor body and stores the new type's handle in `newtype`.
pub(super) fn construct(
    name: &'static str,
    newtype: *mut c_int,
    body: impl FnOnce() -> MpiResult<TypeInfo>,
) -> c_int {
    api::call_types(name, || {
        let mut info = body()?;
        if name.ends_with("_c") {
            // The large-count binding reports its counts as large counts.
            if let Some(c) = info.contents.take() {
                let c = Arc::unwrap_or_clone(c).into_large();
                info.envelope.integers = c.integers.len() as c_int;
                info.envelope.addresses = c.addresses.len() as c_int;
                info.contents = Some(Arc::new(c));
            }
        }
        let h = register(info, false);
        // SAFETY: out-parameter (contract of the calling entry point).
        unsafe { mem::put(newtype, h, "newtype") }
    })
}

mpi_fn_c! {
    /// `MPI_Type_contiguous`.
    fn MPI_Type_contiguous / PMPI_Type_contiguous, MPI_Type_contiguous_c / PMPI_Type_contiguous_c(count: Count, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let n = mem::count(count)?;
            let old = state::datatype(oldtype, false)?;
            let t = built(types::build(&[Part { disp: 0, count: n, ty: &old }], env(combiner::CONTIGUOUS, 1, 0, 1)))?;
            recorded(t, combiner::CONTIGUOUS, vec![count.into()], vec![], &[oldtype])
        })
    }
}

fn strided(
    count: i64,
    blocklength: i64,
    stride_bytes: impl Fn(&Dt) -> isize,
    old: c_int,
    e: Envelope,
) -> MpiResult<TypeInfo> {
    let n = mem::count(count)?;
    let b = blocklen(blocklength)?;
    let old = state::datatype(old, false)?;
    let stride = stride_bytes(&old);
    if b > 0 && stride == b as isize * old.extent() {
        // Blocks back to back: a contiguous run of `n * b` elements.
        let total = n.checked_mul(b).ok_or_else(too_many)?;
        return built(types::build(
            &[Part {
                disp: 0,
                count: total,
                ty: &old,
            }],
            e,
        ));
    }
    if n > types::MAX_BLOCKS {
        return Err(too_many());
    }
    let parts: Vec<Part> = (0..n)
        .map(|i| Part {
            disp: (i as isize).wrapping_mul(stride),
            count: b,
            ty: &old,
        })
        .collect();
    built(types::build(&parts, e))
}

mpi_fn_c! {
    /// `MPI_Type_vector`: `stride` in extents of `oldtype`.
    fn MPI_Type_vector / PMPI_Type_vector, MPI_Type_vector_c / PMPI_Type_vector_c(count: Count, blocklength: Count, stride: Count, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let t = strided(count.into(), blocklength.into(), |t| stride as isize * t.extent(), oldtype, env(combiner::VECTOR, 3, 0, 1))?;
            recorded(t, combiner::VECTOR, vec![count.into(), blocklength.into(), stride.into()], vec![], &[oldtype])
        })
    }
}

fn hvector(
    name: &'static str,
    count: i64,
    blocklength: i64,
    stride: isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    construct(name, newtype, || {
        let t = strided(
            count,
            blocklength,
            |_| stride,
            oldtype,
            env(combiner::HVECTOR, 2, 1, 1),
        )?;
        recorded(
            t,
            combiner::HVECTOR,
            vec![count, blocklength],
            vec![stride],
            &[oldtype],
        )
    })
}

mpi_fn_c! {
    /// `MPI_Type_create_hvector`: `stride` in bytes.
    fn MPI_Type_create_hvector / PMPI_Type_create_hvector, MPI_Type_create_hvector_c / PMPI_Type_create_hvector_c(count: Count, blocklength: Count, stride: isize, oldtype: c_int, newtype: *mut c_int) -> c_int {
        hvector(NAME, count.into(), blocklength.into(), stride, oldtype, newtype)
    }
}

/// Blocks at displacements (in extents of `old` when `scaled`, else bytes).
fn indexed(
    n: usize,
    lens: &[usize],
    displs: &[isize],
    old: c_int,
    scaled: bool,
    e: Envelope,
) -> MpiResult<TypeInfo> {
    let old = state::datatype(old, false)?;
    let unit = if scaled { old.extent() } else { 1 };
    let parts: Vec<Part> = (0..n)
        .map(|i| Part {
            disp: displs[i].wrapping_mul(unit),
            count: lens[i],
            ty: &old,
        })
        .collect();
    built(types::build(&parts, e))
}

mpi_fn_c! {
    /// `MPI_Type_indexed`.
    fn MPI_Type_indexed / PMPI_Type_indexed, MPI_Type_indexed_c / PMPI_Type_indexed_c(count: Count, blocklengths: *const Count, displacements: *const Count, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let n = mem::count(count)?;
            // SAFETY: both arrays hold `count` ints (contract).
            let (bl, ds) = unsafe { (mem::slice(blocklengths, n, "array_of_blocklengths")?, mem::slice(displacements, n, "array_of_displacements")?) };
            let lens = bl.iter().map(|&b| blocklen(b)).collect::<MpiResult<Vec<_>>>()?;
            let displs: Vec<isize> = ds.iter().map(|&d| d as isize).collect();
            let t = indexed(n, &lens, &displs, oldtype, true, env(combiner::INDEXED, 2 * n + 1, 0, 1))?;
            recorded(t, combiner::INDEXED, ints(&[count.into()], &[bl, ds]), vec![], &[oldtype])
        })
    }
}

/// `MPI_Type_create_hindexed` with either binding's block lengths.
///
/// # Safety
/// Both arrays hold `count` entries.
unsafe fn hindexed<T: Copy + Into<i64>>(
    name: &'static str,
    count: i64,
    blocklengths: *const T,
    displacements: *const isize,
    oldtype: c_int,
    newtype: *mut c_int,
) -> c_int {
    construct(name, newtype, || {
        let n = mem::count(count)?;
        // SAFETY: both arrays hold `count` entries (caller).
        let (bl, ds) = unsafe {
            (
                mem::slice(blocklengths, n, "array_of_blocklengths")?,
                mem::slice(displacements, n, "array_of_displacements")?,
            )
        };
        let lens = bl
            .iter()
            .map(|&b| blocklen(b))
            .collect::<MpiResult<Vec<_>>>()?;
        let t = indexed(
            n,
            &lens,
            ds,
            oldtype,
            false,
            env(combiner::HINDEXED, n + 1, n, 1),
        )?;
        recorded(
            t,
            combiner::HINDEXED,
            ints(&[count], &[bl]),
            ds.to_vec(),
            &[oldtype],
        )
    })
}

mpi_fn_c! {
    /// `MPI_Type_create_hindexed`.
    fn MPI_Type_create_hindexed / PMPI_Type_create_hindexed, MPI_Type_create_hindexed_c / PMPI_Type_create_hindexed_c(count: Count, blocklengths: *const Count, displacements: *const isize, oldtype: c_int, newtype: *mut c_int) -> c_int {
        // SAFETY: both arrays hold `count` entries (contract).
        unsafe { hindexed(NAME, count.into(), blocklengths, displacements, oldtype, newtype) }
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_indexed_block`.
    fn MPI_Type_create_indexed_block / PMPI_Type_create_indexed_block, MPI_Type_create_indexed_block_c / PMPI_Type_create_indexed_block_c(count: Count, blocklength: Count, displacements: *const Count, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let n = mem::count(count)?;
            let b = blocklen(blocklength)?;
            // SAFETY: `displacements` holds `count` ints (contract).
            let ds = unsafe { mem::slice(displacements, n, "array_of_displacements") }?;
            let displs: Vec<isize> = ds.iter().map(|&d| d as isize).collect();
            let t = indexed(n, &vec![b; n], &displs, oldtype, true, env(combiner::INDEXED_BLOCK, n + 2, 0, 1))?;
            recorded(t, combiner::INDEXED_BLOCK, ints(&[count.into(), blocklength.into()], &[ds]), vec![], &[oldtype])
        })
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_hindexed_block`.
    fn MPI_Type_create_hindexed_block / PMPI_Type_create_hindexed_block, MPI_Type_create_hindexed_block_c / PMPI_Type_create_hindexed_block_c(count: Count, blocklength: Count, displacements: *const isize, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let n = mem::count(count)?;
            let b = blocklen(blocklength)?;
            // SAFETY: `displacements` holds `count` entries (contract).
            let ds = unsafe { mem::slice(displacements, n, "array_of_displacements") }?;
            let t = indexed(n, &vec![b; n], ds, oldtype, false, env(combiner::HINDEXED_BLOCK, 2, n, 1))?;
            recorded(t, combiner::HINDEXED_BLOCK, vec![count.into(), blocklength.into()], ds.to_vec(), &[oldtype])
        })
    }
}

/// `MPI_Type_create_struct` with either binding's block lengths.
///
/// # Safety
/// The three arrays hold `count` entries.
unsafe fn structure<T: Copy + Into<i64>>(
    name: &'static str,
    count: i64,
    blocklengths: *const T,
    displacements: *const isize,
    types_: *const c_int,
    newtype: *mut c_int,
) -> c_int {
    construct(name, newtype, || {
        let n = mem::count(count)?;
        // SAFETY: the three arrays hold `count` entries (caller).
        let (bl, ds, ts) = unsafe {
            (
                mem::slice(blocklengths, n, "array_of_blocklengths")?,
                mem::slice(displacements, n, "array_of_displacements")?,
                mem::slice(types_, n, "array_of_types")?,
            )
        };
        let members = ts
            .iter()
            .map(|&t| state::datatype(t, false))
            .collect::<MpiResult<Vec<Dt>>>()?;
        let lens = bl
            .iter()
            .map(|&b| blocklen(b))
            .collect::<MpiResult<Vec<_>>>()?;
        let parts: Vec<Part> = (0..n)
            .map(|i| Part {
                disp: ds[i],
                count: lens[i],
                ty: &members[i],
            })
            .collect();
        let mut t = built(types::build(&parts, env(combiner::STRUCT, n + 1, n, n)))?;
        types::pad_struct(&mut t);
        recorded(t, combiner::STRUCT, ints(&[count], &[bl]), ds.to_vec(), ts)
    })
}

mpi_fn_c! {
    /// `MPI_Type_create_struct`: the extent is padded to the largest member alignment.
    fn MPI_Type_create_struct / PMPI_Type_create_struct, MPI_Type_create_struct_c / PMPI_Type_create_struct_c(count: Count, blocklengths: *const Count, displacements: *const isize, types_: *const c_int, newtype: *mut c_int) -> c_int {
        // SAFETY: the three arrays hold `count` entries (contract).
        unsafe { structure(NAME, count.into(), blocklengths, displacements, types_, newtype) }
    }
}

mpi_fn_c! {
    /// `MPI_Type_create_subarray`.
    fn MPI_Type_create_subarray / PMPI_Type_create_subarray, MPI_Type_create_subarray_c / PMPI_Type_create_subarray_c(ndims: c_int, sizes: *const Count, subsizes: *const Count, starts: *const Count, order: c_int, oldtype: c_int, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let nd = mem::count(ndims)?;
            if nd == 0 {
                return Err(MpiError::new(error::ERR_ARG, "ndims must be at least 1"));
            }
            // SAFETY: the three arrays hold `ndims` ints (contract).
            let (sz, sub, st) = unsafe {
                (mem::slice(sizes, nd, "array_of_sizes")?, mem::slice(subsizes, nd, "array_of_subsizes")?, mem::slice(starts, nd, "array_of_starts")?)
            };
            let old = state::datatype(oldtype, false)?;
            // Dimension indices from the fastest-varying to the slowest.
            let dims: Vec<usize> = match order {
                56 => (0..nd).rev().collect(),
                57 => (0..nd).collect(),
                o => return Err(MpiError::new(error::ERR_ARG, format!("order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"))),
            };
            for d in 0..nd {
                if sz[d] <= 0 || sub[d] < 0 || st[d] < 0 || st[d] + sub[d] > sz[d] {
                    return Err(MpiError::new(
                        error::ERR_ARG,
                        format!("dimension {d}: size {}, subsize {}, start {} do not describe a subarray", sz[d], sub[d], st[d]),
                    ));
                }
            }
            if sub.iter().any(|&x| x as usize > types::MAX_BLOCKS) {
                return Err(too_many());
            }
            let ext = old.extent();
            let mut args = ints(&[nd as i64], &[sz, sub, st]);
            args.push(i64::from(order));
            if let Some(r) = subarray_by_rows(&old, sz, sub, st, &dims)? {
                return recorded(r, combiner::SUBARRAY, args, vec![], &[oldtype]);
            }
            let mut stride = ext;
            let mut offset = 0isize;
            let mut t: TypeInfo = (*old).clone();
            for (k, &d) in dims.iter().enumerate() {
                let e = env(combiner::SUBARRAY, 3 * nd + 2, 0, 1);
                let parts: Vec<Part> = if k == 0 {
                    vec![Part { disp: 0, count: sub[d] as usize, ty: &t }]
                } else {
                    (0..sub[d] as isize).map(|i| Part { disp: i * stride, count: 1, ty: &t }).collect()
                };
                let next = built(types::build(&parts, e))?;
                offset += st[d] as isize * stride;
                stride *= sz[d] as isize;
                t = next;
            }
            let placed = built(types::build(&[Part { disp: offset, count: 1, ty: &t }], env(combiner::SUBARRAY, 3 * nd + 2, 0, 1)))?;
            let r = types::resized_owned(placed, 0, stride);
            recorded(r, combiner::SUBARRAY, args, vec![], &[oldtype])
        })
    }
}

/// Rows a subarray is built from in one pass ([`subarray_by_rows`]); larger ones take the
/// dimension-by-dimension construction.
const SUBARRAY_ROWS_MAX: usize = 1 << 16;

/// A subarray as one type map of rows (runs of `sub[dims[0]]` elements of `old`, one per
/// index of the outer dimensions) built in a single pass, resized to the whole array; `None`
/// when it is empty or has more than [`SUBARRAY_ROWS_MAX`] rows. The dimension-by-dimension
/// construction built a whole type per dimension: about 9,900 instructions for an 8 x 8
/// patch, which ARMCI-MPI (NWChem's Global Arrays) creates for every strided get, put and
/// accumulate. `dims` lists the dimensions from the fastest-varying; the arguments were
/// checked.
fn subarray_by_rows<C: Copy + Into<i64>>(
    old: &TypeInfo,
    sz: &[C],
    sub: &[C],
    st: &[C],
    dims: &[usize],
) -> MpiResult<Option<TypeInfo>> {
    // Element `d` of an `int` or `MPI_Count` argument array.
    let at = |a: &[C], d: usize| a[d].into();
    let (row, outer) = (at(sub, dims[0]), &dims[1..]);
    let rows = outer
        .iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(at(sub, d) as usize))
        .filter(|&r| r > 0 && r <= SUBARRAY_ROWS_MAX && row > 0);
    let Some(rows) = rows else {
        return Ok(None);
    };
    let ext = old.extent();
    let overflow = || {
        MpiError::new(
            error::ERR_ARG,
            "the subarray's displacements overflow the address space",
        )
    };
    // Byte stride of each dimension, from the fastest-varying.
    let mut strides = Vec::with_capacity(dims.len());
    let mut stride = ext;
    for &d in dims {
        strides.push(stride);
        stride = stride
            .checked_mul(at(sz, d) as isize)
            .ok_or_else(overflow)?;
    }
    let whole = stride;
    let base = dims
        .iter()
        .zip(&strides)
        .try_fold(0isize, |acc, (&d, &s)| {
            acc.checked_add((at(st, d) as isize).checked_mul(s)?)
        })
        .ok_or_else(overflow)?;
    // A mixed-radix counter over the outer dimensions, the second-fastest varying first.
    let mut index = vec![0isize; outer.len()];
    let mut parts = Vec::with_capacity(rows);
    let mut disp = base;
    for _ in 0..rows {
        parts.push(types::Part {
            disp,
            count: row as usize,
            ty: old,
        });
        for (k, &d) in outer.iter().enumerate() {
            index[k] += 1;
            disp += strides[k + 1];
            if index[k] < at(sub, d) as isize {
                break;
            }
            disp -= index[k] * strides[k + 1];
            index[k] = 0;
        }
    }
    let t = built(types::build(
        &parts,
        env(combiner::SUBARRAY, 3 * dims.len() + 2, 0, 1),
    ))?;
    Ok(Some(types::resized_owned(t, 0, whole)))
}

mpi_fn_c! {
    /// `MPI_Type_create_resized`.
    fn MPI_Type_create_resized / PMPI_Type_create_resized, MPI_Type_create_resized_c / PMPI_Type_create_resized_c(oldtype: c_int, lb: isize, extent: isize, newtype: *mut c_int) -> c_int {
        construct(NAME, newtype, || {
            let old = state::datatype(oldtype, false)?;
            recorded(types::resized(&old, lb, extent), combiner::RESIZED, vec![], vec![lb, extent], &[oldtype])
        })
    }
}

mpi_fn! {
    /// `MPI_Type_dup`: the copy is committed if the original is.
    fn MPI_Type_dup / PMPI_Type_dup(oldtype: c_int, newtype: *mut c_int) -> c_int {
        api::call_types("MPI_Type_dup", || {
            let old = state::datatype(oldtype, false)?;
            let committed = old.predefined.is_some() || state::datatype(oldtype, true).is_ok();
            let info = recorded((*old).clone(), combiner::DUP, vec![], vec![], &[oldtype])?;
            let h = register(info, committed);
            crate::type_attr::copy_all(oldtype, h)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newtype, h, "newtype") }
        })
    }
}

fn derived_slot(h: c_int) -> Option<u32> {
    match handle::decode(h, Obj::Datatype) {
        Some((Kind::Indirect, i)) => Some(i),
        _ => None,
    }
}

mpi_fn! {
    /// `MPI_Type_commit`.
    fn MPI_Type_commit / PMPI_Type_commit(datatype: *mut c_int) -> c_int {
        api::call_types("MPI_Type_commit", || {
            // SAFETY: in parameter (contract).
            let h = unsafe { mem::get(datatype, "datatype") }?;
            state::datatype(h, false)?;
            if let Some(i) = derived_slot(h) {
                state::with_types(|t| {
                    if let Some(e) = t.derived.get_mut(i) {
                        e.committed = true;
                    }
                });
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Type_free`: operations already using the type keep it.
    fn MPI_Type_free / PMPI_Type_free(datatype: *mut c_int) -> c_int {
        api::call_types("MPI_Type_free", || {
            // SAFETY: in-out parameter (contract).
            let h = unsafe { mem::get(datatype, "datatype") }?;
            // One pass under the type table's lock in the common case (a derived type with
            // no attributes, which ARMCI-MPI frees after every strided operation); the entry
            // is dropped after the lock.
            enum Found {
                Removed(Option<state::TypeEntry>),
                F90,
                Attributes(u32),
                Other,
            }
            let found = match derived_slot(h) {
                Some(i) => state::with_types(|t| {
                    if t.derived.get(i).is_none() {
                        Found::Other
                    } else if t.f90.values().any(|&f| f == h) {
                        Found::F90
                    } else if t.attrs.contains_key(&h) {
                        Found::Attributes(i)
                    } else {
                        Found::Removed(t.derived.remove(i))
                    }
                }),
                None => Found::Other,
            };
            match found {
                Found::Removed(entry) => drop(entry),
                Found::F90 => {
                    return Err(MpiError::new(error::ERR_TYPE, "the types MPI_Type_create_f90_* returns are predefined and cannot be freed"));
                }
                Found::Attributes(i) => {
                    crate::type_attr::delete_all(h)?;
                    state::with_types(|t| t.derived.remove(i));
                }
                Found::Other => {
                    // Predefined, or no datatype at all: the lookup names which.
                    let t = state::datatype(h, false)?;
                    if t.predefined.is_some() {
                        return Err(MpiError::new(error::ERR_TYPE, "predefined datatypes cannot be freed"));
                    }
                    return Err(MpiError::new(error::ERR_TYPE, format!("{h:#x} is not a datatype that MPI_Type_free can free")));
                }
            }
            // SAFETY: as above.
            unsafe { mem::put(datatype, handle::DATATYPE_NULL, "datatype") }
        })
    }
}

/// How many large-count arguments the type's constructor took (`_c` constructors only).
pub(super) fn large_counts(t: &Dt) -> usize {
    t.contents.as_ref().map_or(0, |c| c.large.len())
}

pub(super) fn query<T>(
    name: &'static str,
    datatype: c_int,
    f: impl FnOnce(&Dt) -> MpiResult<T>,
    out: impl FnOnce(T) -> MpiResult<()>,
) -> c_int {
    api::call_types(name, || {
        let t = state::datatype(datatype, false)?;
        out(f(&t)?)
    })
}

mpi_fn_c! {
    /// `MPI_Type_size`: `MPI_UNDEFINED` when it does not fit an int.
    fn MPI_Type_size / PMPI_Type_size, MPI_Type_size_c / PMPI_Type_size_c(datatype: c_int, size: *mut Count) -> c_int {
        query(NAME, datatype, |t| Ok(mem::narrow::<Count>(t.size).unwrap_or(Count::from(UNDEFINED))),
            // SAFETY: out-parameter (contract).
            |v| unsafe { mem::put(size, v, "size") })
    }
}

mpi_fn! {
    /// `MPI_Type_size_x`.
    fn MPI_Type_size_x / PMPI_Type_size_x(datatype: c_int, size: *mut i64) -> c_int {
        query("MPI_Type_size_x", datatype, |t| Ok(t.size as i64),
            // SAFETY: out-parameter (contract).
            |v| unsafe { mem::put(size, v, "size") })
    }
}

mpi_fn_c! {
    /// `MPI_Type_get_extent`.
    fn MPI_Type_get_extent / PMPI_Type_get_extent, MPI_Type_get_extent_c / PMPI_Type_get_extent_c(datatype: c_int, lb: *mut isize, extent: *mut isize) -> c_int {
        query(NAME, datatype, |t| Ok((t.lb, t.extent())),
            // SAFETY: out-parameters (contract).
            |(a, b)| unsafe { mem::put(lb, a, "lb").and_then(|_| mem::put(extent, b, "extent")) })
    }
}

mpi_fn! {
    /// `MPI_Type_get_extent_x`.
    fn MPI_Type_get_extent_x / PMPI_Type_get_extent_x(datatype: c_int, lb: *mut i64, extent: *mut i64) -> c_int {
        query("MPI_Type_get_extent_x", datatype, |t| Ok((t.lb as i64, t.extent() as i64)),
            // SAFETY: out-parameters (contract).
            |(a, b)| unsafe { mem::put(lb, a, "lb").and_then(|_| mem::put(extent, b, "extent")) })
    }
}

mpi_fn_c! {
    /// `MPI_Type_get_true_extent`.
    fn MPI_Type_get_true_extent / PMPI_Type_get_true_extent, MPI_Type_get_true_extent_c / PMPI_Type_get_true_extent_c(datatype: c_int, true_lb: *mut isize, true_extent: *mut isize) -> c_int {
        query(NAME, datatype, |t| Ok((t.true_lb, t.true_ub - t.true_lb)),
            // SAFETY: out-parameters (contract).
            |(a, b)| unsafe { mem::put(true_lb, a, "true_lb").and_then(|_| mem::put(true_extent, b, "true_extent")) })
    }
}

mpi_fn! {
    /// `MPI_Type_get_true_extent_x`.
    fn MPI_Type_get_true_extent_x / PMPI_Type_get_true_extent_x(datatype: c_int, true_lb: *mut i64, true_extent: *mut i64) -> c_int {
        query("MPI_Type_get_true_extent_x", datatype, |t| Ok((t.true_lb as i64, (t.true_ub - t.true_lb) as i64)),
            // SAFETY: out-parameters (contract).
            |(a, b)| unsafe { mem::put(true_lb, a, "true_lb").and_then(|_| mem::put(true_extent, b, "true_extent")) })
    }
}

mpi_fn! {
    /// `MPI_Type_get_envelope`.
    fn MPI_Type_get_envelope / PMPI_Type_get_envelope(datatype: c_int, num_integers: *mut c_int, num_addresses: *mut c_int, num_datatypes: *mut c_int, combiner_: *mut c_int) -> c_int {
        query("MPI_Type_get_envelope", datatype, |t| {
                if large_counts(t) > 0 {
                    return Err(MpiError::new(error::ERR_TYPE, "the datatype was built by a large-count (_c) constructor; use MPI_Type_get_envelope_c"));
                }
                Ok(t.envelope)
            },
            // SAFETY: out-parameters (contract).
            |e| unsafe {
                mem::put(num_integers, e.integers, "num_integers")?;
                mem::put(num_addresses, e.addresses, "num_addresses")?;
                mem::put(num_datatypes, e.datatypes, "num_datatypes")?;
                mem::put(combiner_, e.combiner, "combiner")
            })
    }
}

mpi_fn! {
    /// `MPI_Type_get_envelope_c`: types from the `_c` constructors have large counts.
    fn MPI_Type_get_envelope_c / PMPI_Type_get_envelope_c(datatype: c_int, num_integers: *mut i64, num_addresses: *mut i64, num_large_counts: *mut i64, num_datatypes: *mut i64, combiner_: *mut c_int) -> c_int {
        query("MPI_Type_get_envelope_c", datatype, |t| Ok((t.envelope, large_counts(t))),
            // SAFETY: out-parameters (contract).
            |(e, large)| unsafe {
                mem::put(num_integers, i64::from(e.integers), "num_integers")?;
                mem::put(num_addresses, i64::from(e.addresses), "num_addresses")?;
                mem::put(num_large_counts, large as i64, "num_large_counts")?;
                mem::put(num_datatypes, i64::from(e.datatypes), "num_datatypes")?;
                mem::put(combiner_, e.combiner, "combiner")
            })
    }
}

mpi_fn! {
    /// `MPI_Type_set_name`.
    fn MPI_Type_set_name / PMPI_Type_set_name(datatype: c_int, type_name: *const c_char) -> c_int {
        api::call_types("MPI_Type_set_name", || {
            state::datatype(datatype, false)?;
            // SAFETY: NUL-terminated string (contract).
            let mut n = unsafe { mem::cstr(type_name, "type_name") }?;
            n.truncate(MAX_OBJECT_NAME - 1);
            state::with_types(|t| match derived_slot(datatype).and_then(|i| t.derived.get_mut(i)) {
                Some(e) => e.name = n,
                None => {
                    t.renamed.insert(datatype, n);
                }
            });
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Type_get_name`: predefined types are named as in C (`MPI_INT`).
    fn MPI_Type_get_name / PMPI_Type_get_name(datatype: c_int, type_name: *mut c_char, resultlen: *mut c_int) -> c_int {
        api::call_types("MPI_Type_get_name", || {
            state::datatype(datatype, false)?;
            let n = state::with_types(|t| match derived_slot(datatype).and_then(|i| t.derived.get(i)) {
                Some(e) => e.name.clone(),
                None => t
                    .renamed
                    .get(&datatype)
                    .cloned()
                    .or_else(|| types::predefined_name(datatype).map(str::to_string))
                    .unwrap_or_default(),
            });
            // SAFETY: `type_name` holds MPI_MAX_OBJECT_NAME bytes (contract).
            unsafe { mem::put_cstr(type_name, MAX_OBJECT_NAME, &n, resultlen, "type_name") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Pack`.
    fn MPI_Pack / PMPI_Pack, MPI_Pack_c / PMPI_Pack_c(inbuf: *const c_void, incount: Count, datatype: c_int, outbuf: *mut c_void, outsize: Count, position: *mut Count, comm: c_int) -> c_int {
        api::call(NAME, comm, |l| {
            l.core()?.comm(comm)?;
            // SAFETY: `inbuf` holds `incount` elements (contract).
            let r = unsafe { region(inbuf, incount, datatype) }?;
            let data = r.pack()?;
            // SAFETY: in-out parameter (contract).
            let pos = unsafe { mem::get(position, "position") }?;
            let size = mem::count(outsize)?;
            let at = usize::try_from(pos).map_err(|_| MpiError::new(error::ERR_ARG, format!("position {pos} is negative")))?;
            if at + data.len() > size {
                return Err(MpiError::new(
                    error::ERR_TRUNCATE,
                    format!("{} packed bytes do not fit at position {at} of a {size}-byte buffer", data.len()),
                ));
            }
            // SAFETY: `outbuf` holds `outsize` bytes (contract); the range is inside it.
            let out = unsafe { mem::slice_mut(outbuf as *mut u8, size, "outbuf") }?;
            out[at..at + data.len()].copy_from_slice(&data);
            // SAFETY: as above.
            let end = mem::narrow::<Count>(at + data.len()).ok_or_else(|| MpiError::new(error::ERR_ARG, "the position does not fit the count type"))?;
            // SAFETY: as above.
            unsafe { mem::put(position, end, "position") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Unpack`.
    fn MPI_Unpack / PMPI_Unpack, MPI_Unpack_c / PMPI_Unpack_c(inbuf: *const c_void, insize: Count, position: *mut Count, outbuf: *mut c_void, outcount: Count, datatype: c_int, comm: c_int) -> c_int {
        api::call(NAME, comm, |l| {
            l.core()?.comm(comm)?;
            // SAFETY: `outbuf` holds `outcount` elements (contract).
            let r = unsafe { region(outbuf, outcount, datatype) }?;
            // SAFETY: in-out parameter (contract).
            let pos = unsafe { mem::get(position, "position") }?;
            let size = mem::count(insize)?;
            let at = usize::try_from(pos).map_err(|_| MpiError::new(error::ERR_ARG, format!("position {pos} is negative")))?;
            let need = r.packed_len();
            if at + need > size {
                return Err(MpiError::new(
                    error::ERR_TRUNCATE,
                    format!("unpacking {need} bytes at position {at} runs past the {size}-byte input"),
                ));
            }
            // SAFETY: `inbuf` holds `insize` bytes (contract).
            let input = unsafe { mem::slice(inbuf as *const u8, size, "inbuf") }?;
            r.unpack(&input[at..at + need])?;
            // SAFETY: as above.
            let end = mem::narrow::<Count>(at + need).ok_or_else(|| MpiError::new(error::ERR_ARG, "the position does not fit the count type"))?;
            // SAFETY: as above.
            unsafe { mem::put(position, end, "position") }
        })
    }
}

mpi_fn_c! {
    /// `MPI_Pack_size`.
    fn MPI_Pack_size / PMPI_Pack_size, MPI_Pack_size_c / PMPI_Pack_size_c(incount: Count, datatype: c_int, comm: c_int, size: *mut Count) -> c_int {
        api::call(NAME, comm, |l| {
            l.core()?.comm(comm)?;
            let n = mem::count(incount)?;
            let t = state::datatype(datatype, false)?;
            let bytes = mem::narrow::<Count>(n * t.size).ok_or_else(|| {
                MpiError::new(error::ERR_ARG, "the packed size does not fit the count type; use MPI_Pack_size_c")
            })?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(size, bytes, "size") }
        })
    }
}

mpi_fn! {
    /// `MPI_Get_address`.
    fn MPI_Get_address / PMPI_Get_address(location: *const c_void, address: *mut isize) -> c_int {
        api::call_types("MPI_Get_address", || {
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(address, location as isize, "address") }
        })
    }
}

mpi_fn! {
    /// `MPI_Aint_add`.
    fn MPI_Aint_add / PMPI_Aint_add(base: isize, disp: isize) -> isize {
        base.wrapping_add(disp)
    }
}

mpi_fn! {
    /// `MPI_Aint_diff`.
    fn MPI_Aint_diff / PMPI_Aint_diff(addr1: isize, addr2: isize) -> isize {
        addr1.wrapping_sub(addr2)
    }
}

// MPI-1 names removed in MPI-3, still called by older programs (and exported by MPICH).

mpi_fn! {
    /// `MPI_Type_hvector` (MPI-1 name of `MPI_Type_create_hvector`).
    fn MPI_Type_hvector / PMPI_Type_hvector(count: c_int, blocklength: c_int, stride: isize, oldtype: c_int, newtype: *mut c_int) -> c_int {
        hvector("MPI_Type_hvector", count.into(), blocklength.into(), stride, oldtype, newtype)
    }
}

mpi_fn! {
    /// `MPI_Type_hindexed` (MPI-1 name of `MPI_Type_create_hindexed`).
    fn MPI_Type_hindexed / PMPI_Type_hindexed(count: c_int, blocklengths: *const c_int, displacements: *const isize, oldtype: c_int, newtype: *mut c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { hindexed("MPI_Type_hindexed", count.into(), blocklengths, displacements, oldtype, newtype) }
    }
}

mpi_fn! {
    /// `MPI_Type_struct` (MPI-1 name of `MPI_Type_create_struct`).
    fn MPI_Type_struct / PMPI_Type_struct(count: c_int, blocklengths: *const c_int, displacements: *const isize, types_: *const c_int, newtype: *mut c_int) -> c_int {
        // SAFETY: same contract.
        unsafe { structure("MPI_Type_struct", count.into(), blocklengths, displacements, types_, newtype) }
    }
}

mpi_fn! {
    /// `MPI_Address` (MPI-1 name of `MPI_Get_address`).
    fn MPI_Address / PMPI_Address(location: *const c_void, address: *mut isize) -> c_int {
        // SAFETY: same contract.
        unsafe { PMPI_Get_address(location, address) }
    }
}

mpi_fn! {
    /// `MPI_Type_extent` (MPI-1).
    fn MPI_Type_extent / PMPI_Type_extent(datatype: c_int, extent: *mut isize) -> c_int {
        query("MPI_Type_extent", datatype, |t| Ok(t.extent()),
            // SAFETY: out-parameter (contract).
            |v| unsafe { mem::put(extent, v, "extent") })
    }
}

mpi_fn! {
    /// `MPI_Type_lb` (MPI-1).
    fn MPI_Type_lb / PMPI_Type_lb(datatype: c_int, displacement: *mut isize) -> c_int {
        query("MPI_Type_lb", datatype, |t| Ok(t.lb),
            // SAFETY: out-parameter (contract).
            |v| unsafe { mem::put(displacement, v, "displacement") })
    }
}

mpi_fn! {
    /// `MPI_Type_ub` (MPI-1).
    fn MPI_Type_ub / PMPI_Type_ub(datatype: c_int, displacement: *mut isize) -> c_int {
        query("MPI_Type_ub", datatype, |t| Ok(t.ub),
            // SAFETY: out-parameter (contract).
            |v| unsafe { mem::put(displacement, v, "displacement") })
    }
}
