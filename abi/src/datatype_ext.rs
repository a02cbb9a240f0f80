//! Datatype calls beyond the constructors of `ffi::dtype`, in safe Rust: the type map of
//! `MPI_Type_create_darray`, the Fortran-kind types (`MPI_Type_create_f90_*`,
//! `MPI_Type_match_size`), and the `external32` representation of `MPI_Pack_external`.
//!
//! This module owns the arithmetic and byte conversions; the entry points in
//! `ffi::dtype_ext` convert pointers and register the results. It never touches raw memory.

use std::os::raw::c_int;

use crate::error::{self, MpiError, MpiResult};
use crate::types::{Dt, TypeInfo};

/// `MPI_DISTRIBUTE_BLOCK`.
pub const DISTRIBUTE_BLOCK: c_int = 121;
/// `MPI_DISTRIBUTE_CYCLIC`.
pub const DISTRIBUTE_CYCLIC: c_int = 122;
/// `MPI_DISTRIBUTE_NONE`.
pub const DISTRIBUTE_NONE: c_int = 123;
/// `MPI_DISTRIBUTE_DFLT_DARG`.
pub const DISTRIBUTE_DFLT_DARG: c_int = -49767;
/// `MPI_ORDER_C`.
pub const ORDER_C: c_int = 56;
/// `MPI_ORDER_FORTRAN`.
pub const ORDER_FORTRAN: c_int = 57;

/// `MPI_Type_create_darray`'s arguments.
#[derive(Debug, Clone)]
pub struct Darray<'a> {
    /// Processes in the grid.
    pub size: c_int,
    /// This process's rank in it (row-major).
    pub rank: c_int,
    /// Global extent of each dimension.
    pub gsizes: &'a [i64],
    /// `MPI_DISTRIBUTE_*` per dimension.
    pub distribs: &'a [c_int],
    /// Distribution argument per dimension.
    pub dargs: &'a [c_int],
    /// Processes per dimension.
    pub psizes: &'a [c_int],
    /// `MPI_ORDER_C` or `MPI_ORDER_FORTRAN`.
    pub order: c_int,
}

fn arg(msg: String) -> MpiError {
    MpiError::new(error::ERR_ARG, msg)
}

/// The global indices this process owns in one dimension.
fn owned(
    d: usize,
    gsize: i64,
    distrib: c_int,
    darg: c_int,
    psize: i64,
    coord: i64,
) -> MpiResult<Vec<i64>> {
    match distrib {
        DISTRIBUTE_NONE => {
            if psize != 1 {
                return Err(arg(format!(
                    "dimension {d}: MPI_DISTRIBUTE_NONE needs 1 process there, not {psize}"
                )));
            }
            Ok((0..gsize).collect())
        }
        DISTRIBUTE_BLOCK => {
            let b = if darg == DISTRIBUTE_DFLT_DARG {
                (gsize + psize - 1) / psize
            } else {
                i64::from(darg)
            };
            if b <= 0 || b * psize < gsize {
                return Err(arg(format!(
                    "dimension {d}: a block of {b} over {psize} processes does not cover {gsize} elements"
                )));
            }
            let lo = (coord * b).min(gsize);
            let hi = ((coord + 1) * b).min(gsize);
            Ok((lo..hi).collect())
        }
        DISTRIBUTE_CYCLIC => {
            let b = if darg == DISTRIBUTE_DFLT_DARG {
                1
            } else {
                i64::from(darg)
            };
            if b <= 0 {
                return Err(arg(format!(
                    "dimension {d}: cyclic block size {b} must be positive"
                )));
            }
            Ok((0..gsize).filter(|i| (i / b) % psize == coord).collect())
        }
        other => Err(arg(format!(
            "dimension {d}: distribution {other} is not MPI_DISTRIBUTE_BLOCK, _CYCLIC or _NONE"
        ))),
    }
}

/// The byte displacements (in elements of the old type's extent) of every element this
/// process owns, in type-map order (which is increasing memory order), and the element
/// count of the whole global array.
pub fn darray_elements(a: &Darray<'_>) -> MpiResult<(Vec<i64>, i64)> {
    let nd = a.gsizes.len();
    if nd == 0 {
        return Err(arg("ndims must be at least 1".into()));
    }
    let grid: i64 = a.psizes.iter().map(|&p| i64::from(p)).product();
    if a.psizes.iter().any(|&p| p <= 0) || grid != i64::from(a.size) {
        return Err(arg(format!(
            "the process grid {:?} does not have size {} processes",
            a.psizes, a.size
        )));
    }
    if a.rank < 0 || a.rank >= a.size {
        return Err(MpiError::new(
            error::ERR_RANK,
            format!("rank {} outside a grid of {}", a.rank, a.size),
        ));
    }
    if a.gsizes.iter().any(|&g| g <= 0) {
        return Err(arg(format!("global sizes {:?} must be positive", a.gsizes)));
    }
    // The process grid is row-major whatever the array order.
    let mut coords = vec![0i64; nd];
    let mut r = i64::from(a.rank);
    for d in (0..nd).rev() {
        let p = i64::from(a.psizes[d]);
        coords[d] = r % p;
        r /= p;
    }
    let per_dim: Vec<Vec<i64>> = (0..nd)
        .map(|d| {
            owned(
                d,
                a.gsizes[d],
                a.distribs[d],
                a.dargs[d],
                i64::from(a.psizes[d]),
                coords[d],
            )
        })
        .collect::<MpiResult<_>>()?;
    // Strides in elements: the fastest dimension is the last (C) or the first (Fortran).
    let dims: Vec<usize> = match a.order {
        ORDER_C => (0..nd).collect(),
        ORDER_FORTRAN => (0..nd).rev().collect(),
        o => {
            return Err(arg(format!(
                "order {o} is neither MPI_ORDER_C nor MPI_ORDER_FORTRAN"
            )))
        }
    };
    let mut stride = vec![0i64; nd];
    let mut s = 1i64;
    for &d in dims.iter().rev() {
        stride[d] = s;
        s = s
            .checked_mul(a.gsizes[d])
            .ok_or_else(|| arg("the global array is too large".into()))?;
    }
    let total = s;
    let count: usize = per_dim.iter().map(Vec::len).product();
    if count > crate::types::MAX_BLOCKS * 16 {
        return Err(arg(format!(
            "this process would own {count} separate elements; Kestrel builds darray types of at most {}",
            crate::types::MAX_BLOCKS * 16
        )));
    }
    // Slowest dimension outermost: lexicographic over `dims`.
    let mut out = vec![0i64];
    for &d in &dims {
        let mut next = Vec::with_capacity(out.len() * per_dim[d].len());
        for base in &out {
            for i in &per_dim[d] {
                next.push(base + i * stride[d]);
            }
        }
        out = next;
    }
    Ok((out, total))
}

/// Fortran `INTEGER(KIND=r)` etc.: the predefined handle `MPI_Type_create_f90_*` names.
pub fn f90_integer(r: c_int) -> MpiResult<c_int> {
    Ok(match r {
        x if x == crate::mem::UNDEFINED || x <= 2 => 0x4c00_012d, // MPI_INTEGER1
        3..=4 => 0x4c00_022f,                                     // MPI_INTEGER2
        5..=9 => 0x4c00_0430,                                     // MPI_INTEGER4
        10..=18 => 0x4c00_0831,                                   // MPI_INTEGER8
        _ => {
            return Err(arg(format!(
                "no integer kind has a decimal range of {r} digits (at most 18)"
            )))
        }
    })
}

/// The real kind with precision `p` and range `r` (`MPI_UNDEFINED`: any): 4, 8 or 16 bytes.
pub fn f90_real_bytes(p: c_int, r: c_int) -> MpiResult<usize> {
    let u = crate::mem::UNDEFINED;
    let p = if p == u { 0 } else { p };
    let r = if r == u { 0 } else { r };
    if p <= 6 && r <= 37 {
        Ok(4)
    } else if p <= 15 && r <= 307 {
        Ok(8)
    } else if p <= 33 && r <= 4931 {
        Ok(16)
    } else {
        Err(arg(format!("no real kind has precision {p} and range {r}")))
    }
}

/// `MPI_REAL4`/`8`/`16` by size.
pub fn real_of(bytes: usize) -> c_int {
    match bytes {
        4 => 0x4c00_0427,
        8 => 0x4c00_0829,
        _ => 0x4c00_102b,
    }
}

/// `MPI_COMPLEX8`/`16`/`32` by the size of one part.
pub fn complex_of(part: usize) -> c_int {
    match part {
        4 => 0x4c00_0828,
        8 => 0x4c00_102a,
        _ => 0x4c00_202c,
    }
}

/// `MPI_TYPECLASS_*`.
pub const TYPECLASS_REAL: c_int = 1;
/// `MPI_TYPECLASS_INTEGER`.
pub const TYPECLASS_INTEGER: c_int = 2;
/// `MPI_TYPECLASS_COMPLEX`.
pub const TYPECLASS_COMPLEX: c_int = 3;

/// `MPI_Type_match_size`: a predefined type of class `class` and `size` bytes.
pub fn match_size(class: c_int, size: c_int) -> MpiResult<c_int> {
    let h = match (class, size) {
        (TYPECLASS_REAL, 4) => real_of(4),
        (TYPECLASS_REAL, 8) => real_of(8),
        (TYPECLASS_REAL, 16) => real_of(16),
        (TYPECLASS_INTEGER, 1) => 0x4c00_012d,
        (TYPECLASS_INTEGER, 2) => 0x4c00_022f,
        (TYPECLASS_INTEGER, 4) => 0x4c00_0430,
        (TYPECLASS_INTEGER, 8) => 0x4c00_0831,
        (TYPECLASS_COMPLEX, 8) => complex_of(4),
        (TYPECLASS_COMPLEX, 16) => complex_of(8),
        (TYPECLASS_COMPLEX, 32) => complex_of(16),
        (TYPECLASS_REAL | TYPECLASS_INTEGER | TYPECLASS_COMPLEX, s) => {
            return Err(arg(format!(
                "no predefined type of class {class} has {s} bytes"
            )))
        }
        (c, _) => {
            return Err(arg(format!(
                "type class {c} is not MPI_TYPECLASS_REAL, _INTEGER or _COMPLEX"
            )))
        }
    };
    Ok(h)
}

/// Types narrower in external32 than here (as MPI's table and MPICH have them): `MPI_LONG`
/// and `MPI_UNSIGNED_LONG` take 4 bytes, `MPI_WCHAR` 2; (handle, bytes, signed).
const EXTERNAL_NARROW: &[(c_int, usize, bool)] = &[
    (0x4c00_0807, 4, true),
    (0x4c00_0808, 4, false),
    (0x4c00_040e, 2, false),
];

/// How one basic element travels in external32: its bytes there, the unit whose byte
/// order is reversed (a complex number's parts separately), and sign extension when a
/// narrowed integer comes back.
fn external_form(handle: c_int, native: usize) -> (usize, usize, Option<bool>) {
    if let Some(&(_, ext, signed)) = EXTERNAL_NARROW.iter().find(|(h, ..)| *h == handle) {
        return (ext, ext, Some(signed));
    }
    let name = crate::types::predefined_name(handle).unwrap_or("");
    let unit = if name.contains("COMPLEX") {
        native / 2
    } else {
        native
    };
    (native, unit.max(1), None)
}

/// Bytes of `count` elements of `t` in external32.
pub fn external_size(t: &TypeInfo, count: usize) -> usize {
    let per: usize = t
        .runs
        .iter()
        .map(|r| r.count * external_form(r.basic.handle, r.basic.size).0)
        .sum();
    per * count
}

/// Converts the native packed form of `count` elements of `t` into external32.
pub fn to_external(t: &Dt, count: usize, packed: &[u8]) -> MpiResult<Vec<u8>> {
    let mut out = Vec::with_capacity(external_size(t, count));
    let mut at = 0usize;
    for _ in 0..count {
        for r in &t.runs {
            let (ext, unit, narrow) = external_form(r.basic.handle, r.basic.size);
            for _ in 0..r.count {
                let native = packed
                    .get(at..at + r.basic.size)
                    .ok_or_else(|| MpiError::new(error::ERR_INTERN, "packed data too short"))?;
                at += r.basic.size;
                let bytes: &[u8] = if narrow.is_some() {
                    &native[..ext]
                } else {
                    native
                };
                for chunk in bytes.chunks(unit) {
                    out.extend(chunk.iter().rev());
                }
                debug_assert!(bytes.len() == ext);
            }
        }
    }
    Ok(out)
}

/// Converts external32 data of `count` elements of `t` back into the native packed form.
pub fn from_external(t: &Dt, count: usize, ext_data: &[u8]) -> MpiResult<Vec<u8>> {
    let mut out = Vec::with_capacity(count * t.size);
    let mut at = 0usize;
    for _ in 0..count {
        for r in &t.runs {
            let (ext, unit, narrow) = external_form(r.basic.handle, r.basic.size);
            for _ in 0..r.count {
                let e = ext_data.get(at..at + ext).ok_or_else(|| {
                    MpiError::new(error::ERR_TRUNCATE, "the external32 input is too short")
                })?;
                at += ext;
                let start = out.len();
                for chunk in e.chunks(unit) {
                    out.extend(chunk.iter().rev());
                }
                if let Some(signed) = narrow {
                    let neg = signed && out[start + ext - 1] & 0x80 != 0;
                    out.extend(std::iter::repeat_n(
                        if neg { 0xff } else { 0 },
                        r.basic.size - ext,
                    ));
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn block_and_cyclic_darrays_own_the_right_elements() {
        // 8 x 6 array on a 2 x 3 grid, block x cyclic(1), C order; rank 4 = coords (1, 1).
        let a = Darray {
            size: 6,
            rank: 4,
            gsizes: &[8, 6],
            distribs: &[DISTRIBUTE_BLOCK, DISTRIBUTE_CYCLIC],
            dargs: &[DISTRIBUTE_DFLT_DARG, DISTRIBUTE_DFLT_DARG],
            psizes: &[2, 3],
            order: ORDER_C,
        };
        let (els, total) = darray_elements(&a).unwrap();
        assert_eq!(total, 48);
        // Rows 4..8, columns 1 and 4.
        let expect: Vec<i64> = (4..8).flat_map(|r| [r * 6 + 1, r * 6 + 4]).collect();
        assert_eq!(els, expect);
        // Fortran order: the first dimension is fastest.
        let f = Darray {
            order: ORDER_FORTRAN,
            ..a.clone()
        };
        let (els, _) = darray_elements(&f).unwrap();
        let expect: Vec<i64> = [1i64, 4]
            .iter()
            .flat_map(|c| (4..8).map(move |r| r + c * 8))
            .collect();
        assert_eq!(els, expect);
        assert!(darray_elements(&Darray {
            psizes: &[2, 2],
            ..a
        })
        .is_err());
    }

    #[test]
    fn fortran_kinds_and_match_size() {
        assert_eq!(f90_integer(9).unwrap(), 0x4c00_0430);
        assert_eq!(f90_integer(18).unwrap(), 0x4c00_0831);
        assert!(f90_integer(19).is_err());
        assert_eq!(f90_real_bytes(6, 37).unwrap(), 4);
        assert_eq!(f90_real_bytes(15, crate::mem::UNDEFINED).unwrap(), 8);
        assert_eq!(match_size(TYPECLASS_REAL, 8).unwrap(), real_of(8));
        assert!(match_size(TYPECLASS_INTEGER, 3).is_err());
    }
}
