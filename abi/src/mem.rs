//! The program's memory: every raw pointer an MPI call receives is turned into a bounded
//! view here.
//!
//! This module owns the conversions from C pointers to Rust views: typed buffers become a
//! [`Region`] (a [`UserBuf`] over exactly the bytes the type map touches), out-parameters
//! are written through [`put`], arrays and strings are read through [`slice`] and
//! [`cstr`], and statuses through [`put_status`]. It also owns [`Staging`], library memory
//! lent to the engine while a request runs. It never decides what to do with the memory;
//! every function here checks for null where MPI allows no null and reports
//! `MPI_ERR_ARG`/`MPI_ERR_BUFFER` instead of dereferencing it.
//!
//! Everything else in the crate stays safe: [`Region`] hands out bounds-checked slices and
//! [`UserBuf`]s whose validity is the program's MPI contract (a buffer stays valid and
//! untouched until the operation using it completes), which each `unsafe fn` here states.
#![allow(unsafe_code)]

use std::os::raw::{c_char, c_int, c_void};

use kestrel_pml::buf::UserBuf;

use crate::error::{self, MpiError, MpiResult};
use crate::types::Dt;

/// `MPI_STATUS_IGNORE` / `MPI_STATUSES_IGNORE`.
pub const STATUS_IGNORE: usize = 1;
/// `MPI_IN_PLACE`.
pub const IN_PLACE: usize = usize::MAX;

/// `MPI_UNDEFINED`.
pub const UNDEFINED: c_int = -32766;

/// `MPI_ANY_SOURCE` (also the source of an empty status).
pub const ANY_SOURCE: c_int = -2;

/// `MPI_BYTE`.
pub const BYTE: c_int = 0x4c00_010d;

/// `MPI_Status`: five C ints, MPICH's layout.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MpiStatus {
    /// Low 32 bits of the byte count.
    pub count_lo: c_int,
    /// Bit 0: cancelled; bits 31–1: bits 62–32 of the byte count.
    pub count_hi_and_cancelled: c_int,
    /// `MPI_SOURCE`.
    pub source: c_int,
    /// `MPI_TAG`.
    pub tag: c_int,
    /// `MPI_ERROR`.
    pub error: c_int,
}

/// What a completed operation reports, before it is written into an [`MpiStatus`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct St {
    /// `MPI_SOURCE`.
    pub source: c_int,
    /// `MPI_TAG`.
    pub tag: c_int,
    /// The error class of this operation (`MPI_SUCCESS`, `MPI_ERR_TRUNCATE`).
    pub error: c_int,
    /// Bytes received.
    pub bytes: usize,
    /// Whether it was cancelled.
    pub cancelled: bool,
}

impl St {
    /// The status of a receive from `MPI_PROC_NULL`, or of a null or inactive request.
    pub fn empty(source: c_int) -> St {
        St {
            source,
            tag: -1,
            error: error::SUCCESS,
            bytes: 0,
            cancelled: false,
        }
    }

    /// Encodes into MPICH's layout; `with_error` also sets `MPI_ERROR`.
    pub fn encode(&self, into: &mut MpiStatus, with_error: bool) {
        let bytes = self.bytes as u64 & ((1 << 63) - 1);
        into.count_lo = bytes as u32 as c_int;
        into.count_hi_and_cancelled =
            (((bytes >> 32) << 1) as u32 | u32::from(self.cancelled)) as c_int;
        into.source = self.source;
        into.tag = self.tag;
        if with_error {
            into.error = self.error;
        }
    }

    /// Decodes MPICH's layout.
    pub fn decode(s: &MpiStatus) -> St {
        let hi = (s.count_hi_and_cancelled as u32 >> 1) as u64;
        St {
            source: s.source,
            tag: s.tag,
            error: s.error,
            bytes: ((hi << 32) | s.count_lo as u32 as u64) as usize,
            cancelled: s.count_hi_and_cancelled & 1 != 0,
        }
    }
}

/// Typed memory of the program: `count` elements of `ty` at some address.
#[derive(Debug, Clone)]
pub struct Region {
    /// Exactly the bytes the elements' type map touches.
    pub span: UserBuf,
    /// Where the buffer address lies within `span` (the type map may start below it).
    pub origin: usize,
    /// Elements.
    pub count: usize,
    /// Their type.
    pub ty: Dt,
}

/// The bytes of `count` elements of a predefined datatype at `buf`, when that is the whole
/// story: a contiguous predefined type, at least one byte, a real address. `None` for
/// everything else (derived types, empty or invalid buffers, `MPI_IN_PLACE`): the caller
/// then takes the general path through [`Region::new`], which also reports the errors.
///
/// # Safety
/// As for [`Region::new`]: `buf` holds `count` elements of `dt` for as long as the returned
/// buffer is used.
#[inline(always)]
pub unsafe fn plain_span(buf: *const c_void, count: impl Into<i64>, dt: c_int) -> Option<UserBuf> {
    let size = match crate::types::plain_size(dt) {
        Some(size) => size,
        None => contiguous_pair_size(dt)?,
    };
    let count = usize::try_from(count.into()).ok()?;
    if count == 0 || buf.is_null() || buf as usize == IN_PLACE {
        return None;
    }
    let len = count.checked_mul(size)?;
    // SAFETY: the caller guarantees these bytes are valid (see above).
    Some(unsafe { UserBuf::for_recv(buf as *mut u8, len) })
}

/// [`plain_span`]'s element size for the predefined types `types::plain_size` does not
/// answer (the value/index pairs): out of line, so the common lookup stays small enough to
/// inline into every send and receive.
#[inline(never)]
fn contiguous_pair_size(dt: c_int) -> Option<usize> {
    let t = crate::types::predefined(dt)?;
    (t.size != 0 && t.is_contiguous()).then_some(t.size)
}

/// Converts a C count (`int`, or `MPI_Count` in the large-count binding), rejecting
/// negatives with `MPI_ERR_COUNT`.
#[inline(always)]
pub fn count(n: impl Into<i64>) -> MpiResult<usize> {
    let n: i64 = n.into();
    usize::try_from(n).map_err(|_| {
        MpiError::new(
            error::ERR_COUNT,
            format!("count {n} is negative; counts must be >= 0"),
        )
    })
}

/// A count the library hands back in the binding's count type (`int`, or `MPI_Count` for
/// the large-count `_c` functions): `None` when it does not fit.
pub fn narrow<T: TryFrom<i64>>(v: impl TryInto<i64>) -> Option<T> {
    v.try_into().ok().and_then(|v| T::try_from(v).ok())
}

/// The `n` counts of a C array (`int` or `MPI_Count` entries), each checked.
///
/// # Safety
/// As [`slice`].
pub unsafe fn counts<T: Copy + Into<i64>>(
    p: *const T,
    n: usize,
    what: &str,
) -> MpiResult<Vec<usize>> {
    // SAFETY: forwarded to the caller.
    let s = unsafe { slice(p, n, what) }?;
    s.iter().map(|&c| count(c)).collect()
}

/// The `n` displacements of a C array (`int`, or `MPI_Aint` in the large-count binding).
///
/// # Safety
/// As [`slice`].
pub unsafe fn displs<T: Copy + Into<i64>>(
    p: *const T,
    n: usize,
    what: &str,
) -> MpiResult<Vec<isize>> {
    // SAFETY: forwarded to the caller.
    let s = unsafe { slice(p, n, what) }?;
    Ok(s.iter().map(|&d| d.into() as isize).collect())
}

impl Region {
    /// A view of `count` elements of `ty` at `addr`.
    ///
    /// # Safety
    /// Every byte the type map of `count` elements of `ty` at `addr` covers must be valid
    /// for reads (and for writes if the region is used to receive) until the operation
    /// using the region completes, and nothing else may write it meanwhile (MPI's buffer
    /// rules).
    #[inline(always)]
    pub unsafe fn new(addr: *const c_void, count: usize, ty: Dt) -> MpiResult<Region> {
        if ty.is_contiguous()
            && ty.size > 0
            && count > 0
            && !addr.is_null()
            && addr as usize != IN_PLACE
        {
            // The common case: the data is `count * size` bytes at `addr`.
            let len = count.checked_mul(ty.size).ok_or_else(too_far)?;
            // SAFETY: the caller guarantees these bytes are valid (see above).
            let span = unsafe { UserBuf::for_recv(addr as *mut u8, len) };
            return Ok(Region {
                span,
                origin: 0,
                count,
                ty,
            });
        }
        // SAFETY: forwarded to the caller.
        unsafe { Self::new_general(addr, count, ty) }
    }

    /// [`Region::new`] for empty, non-contiguous and invalid cases.
    ///
    /// # Safety
    /// As for [`Region::new`].
    #[inline(never)]
    unsafe fn new_general(addr: *const c_void, count: usize, ty: Dt) -> MpiResult<Region> {
        let Some((lo, len)) = ty.span(count) else {
            return Ok(Region {
                span: UserBuf::empty(),
                origin: 0,
                count,
                ty,
            });
        };
        let start = (addr as isize).wrapping_add(lo);
        if start == 0 || addr as usize == IN_PLACE {
            return Err(MpiError::new(
                error::ERR_BUFFER,
                format!(
                    "the buffer for {count} elements is {}; pass memory for the data",
                    if addr as usize == IN_PLACE {
                        "MPI_IN_PLACE, which this argument does not accept"
                    } else {
                        "a null pointer"
                    }
                ),
            ));
        }
        // SAFETY: the caller guarantees the `len` bytes the type map covers, which start at
        // `addr + lo`, are valid (see above).
        let span = unsafe { UserBuf::for_recv(start as *mut u8, len) };
        Ok(Region {
            span,
            origin: (-lo) as usize,
            count,
            ty,
        })
    }

    /// Bytes of packed data the region holds.
    pub fn packed_len(&self) -> usize {
        self.count * self.ty.size
    }

    /// Whether the memory is the packed form itself.
    pub fn is_contiguous(&self) -> bool {
        self.ty.is_contiguous()
    }

    /// The memory (contiguous regions: the data itself).
    pub fn bytes(&self) -> &[u8] {
        self.span.as_slice()
    }

    /// The memory, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        let n = self.span.len();
        self.span.slice_mut(0, n)
    }

    /// The packed form of the data.
    pub fn pack(&self) -> MpiResult<Vec<u8>> {
        if self.is_contiguous() {
            return Ok(self.bytes().to_vec());
        }
        let mut out = Vec::with_capacity(self.packed_len());
        self.ty
            .pack(self.count, self.bytes(), self.origin, &mut out)
            .map_err(|e| MpiError::new(error::ERR_INTERN, e))?;
        Ok(out)
    }

    /// Writes packed data into the region; returns the bytes used.
    pub fn unpack(&self, packed: &[u8]) -> MpiResult<usize> {
        let mut sink = self.span;
        self.ty
            .unpack(self.count, packed, &mut sink, self.origin)
            .map_err(|e| MpiError::new(error::ERR_INTERN, e))
    }
}

/// The per-rank blocks of a collective's buffer: block `r` is `counts[r]` elements of `ty`
/// at byte `displs[r]` from the buffer address.
///
/// `hull` spans every byte of every block; `origins[r]` is the offset, within it, of block
/// `r`'s own address, so `ty.pack(counts[r], hull, origins[r])` reads block `r`. For a
/// contiguous type, block `r`'s data is simply `hull[origins[r]..][..counts[r] * size]`.
#[derive(Debug)]
pub struct VBuf {
    /// Every byte of every block.
    pub hull: UserBuf,
    /// Each block's address as an offset into `hull`.
    pub origins: Vec<usize>,
    /// Elements per block.
    pub counts: Vec<usize>,
    /// The element type.
    pub ty: Dt,
}

impl VBuf {
    /// The blocks of a buffer at `addr`.
    ///
    /// # Safety
    /// Every byte each block's type map covers must be valid as for [`Region::new`]; the
    /// bytes between blocks need not be, but they must lie in the same allocation (MPI
    /// buffers with displacements are one array).
    pub unsafe fn new(
        addr: *const c_void,
        counts: &[usize],
        displs: &[isize],
        ty: Dt,
    ) -> MpiResult<VBuf> {
        let mut lo: Option<isize> = None;
        let mut hi: Option<isize> = None;
        for (&c, &d) in counts.iter().zip(displs) {
            if let Some((l, len)) = ty.span(c) {
                let a = d.checked_add(l).ok_or_else(too_far)?;
                let b = a.checked_add(len as isize).ok_or_else(too_far)?;
                lo = Some(lo.map_or(a, |v| v.min(a)));
                hi = Some(hi.map_or(b, |v| v.max(b)));
            }
        }
        let (Some(lo), Some(hi)) = (lo, hi) else {
            return Ok(VBuf {
                hull: UserBuf::empty(),
                origins: vec![0; counts.len()],
                counts: counts.to_vec(),
                ty,
            });
        };
        let start = (addr as isize).wrapping_add(lo);
        if start == 0 || addr as usize == IN_PLACE {
            return Err(MpiError::new(
                error::ERR_BUFFER,
                "the buffer is a null pointer (or MPI_IN_PLACE where not allowed) but blocks of data are expected there",
            ));
        }
        // SAFETY: the hull spans the blocks of one allocation, all valid (caller).
        let hull = unsafe { UserBuf::for_recv(start as *mut u8, (hi - lo) as usize) };
        // An empty block may lie anywhere (even before the hull): give it offset 0, which
        // every reader of its zero bytes accepts.
        let origins = counts
            .iter()
            .zip(displs)
            .map(|(&c, &d)| match ty.span(c) {
                Some(_) => (d - lo) as usize,
                None => 0,
            })
            .collect();
        Ok(VBuf {
            hull,
            origins,
            counts: counts.to_vec(),
            ty,
        })
    }

    /// Packed bytes of block `r`.
    pub fn packed_len(&self, r: usize) -> usize {
        self.counts[r] * self.ty.size
    }

    /// The packed form of block `r`.
    pub fn pack_block(&self, r: usize) -> MpiResult<Vec<u8>> {
        let mut out = Vec::with_capacity(self.packed_len(r));
        if self.counts[r] > 0 {
            self.ty
                .pack(
                    self.counts[r],
                    self.hull.as_slice(),
                    self.origins[r],
                    &mut out,
                )
                .map_err(|e| MpiError::new(error::ERR_INTERN, e))?;
        }
        Ok(out)
    }

    /// Writes block `r` from its packed form.
    pub fn unpack_block(&self, r: usize, packed: &[u8]) -> MpiResult<()> {
        if self.counts[r] == 0 {
            return Ok(());
        }
        let mut sink = self.hull;
        self.ty
            .unpack(self.counts[r], packed, &mut sink, self.origins[r])
            .map(|_| ())
            .map_err(|e| MpiError::new(error::ERR_INTERN, e))
    }
}

fn too_far() -> MpiError {
    MpiError::new(error::ERR_ARG, "displacements overflow the address space")
}

/// Library memory lent to the engine while a request runs (packed copies of
/// non-contiguous data, buffered sends).
#[derive(Debug)]
pub struct Staging(Box<[u8]>);

impl Staging {
    /// Takes ownership of `v`.
    pub fn new(v: Vec<u8>) -> Staging {
        Staging(v.into_boxed_slice())
    }

    /// `n` zero bytes.
    pub fn zeroed(n: usize) -> Staging {
        Staging(vec![0u8; n].into_boxed_slice())
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.0
    }

    /// The bytes, to refill between the runs of a persistent request (never while the
    /// engine uses them).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.0
    }

    /// A buffer the engine may read or write.
    ///
    /// # Safety
    /// The staging must not be dropped, moved out of its box, or accessed otherwise until
    /// the engine request given the buffer has completed. (Moving the `Staging` itself is
    /// fine: the bytes live in a box.)
    pub unsafe fn engine_buf(&mut self) -> UserBuf {
        // SAFETY: the box's bytes stay put while it lives; the caller keeps it alive and
        // untouched while the engine uses the buffer.
        unsafe { UserBuf::for_recv(self.0.as_mut_ptr(), self.0.len()) }
    }
}

/// `len` bytes at `offset` of `buf`, clipped to it: a sub-buffer inherits its parent's
/// validity, so this needs no further promise.
pub fn sub(buf: &UserBuf, offset: usize, len: usize) -> UserBuf {
    let mut b = *buf;
    let part = b.slice_mut(offset, len);
    // SAFETY: `part` lies inside `buf`, which the creator of `buf` promised valid for the
    // lifetime of the request using it; the sub-buffer is used by that same request.
    unsafe { UserBuf::for_recv(part.as_mut_ptr(), part.len()) }
}

/// Writes an out-parameter.
///
/// # Safety
/// `p` must be null or valid for writing a `T`.
pub unsafe fn put<T>(p: *mut T, v: T, what: &str) -> MpiResult<()> {
    if p.is_null() {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is a null pointer; pass where the result goes"),
        ));
    }
    // SAFETY: non-null and valid for writes (caller).
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Reads an in-out parameter.
///
/// # Safety
/// `p` must be null or valid for reading a `T`.
pub unsafe fn get<T: Copy>(p: *const T, what: &str) -> MpiResult<T> {
    if p.is_null() {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: non-null and valid for reads (caller).
    Ok(unsafe { p.read_unaligned() })
}

/// An array argument of `n` elements.
///
/// # Safety
/// `p` must be null or valid for reading `n` elements for the returned lifetime.
pub unsafe fn slice<'a, T>(p: *const T, n: usize, what: &str) -> MpiResult<&'a [T]> {
    if n == 0 {
        return Ok(&[]);
    }
    if p.is_null() {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is a null pointer but {n} entries are needed"),
        ));
    }
    // SAFETY: non-null, `n` elements valid for reads (caller).
    Ok(unsafe { std::slice::from_raw_parts(p, n) })
}

/// A writable array argument of `n` elements.
///
/// # Safety
/// `p` must be null or valid for reading and writing `n` elements for the returned
/// lifetime, and not otherwise referenced meanwhile.
pub unsafe fn slice_mut<'a, T>(p: *mut T, n: usize, what: &str) -> MpiResult<&'a mut [T]> {
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is a null pointer but {n} entries are needed"),
        ));
    }
    // SAFETY: non-null, `n` elements valid for reads and writes, unaliased (caller).
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

/// A NUL-terminated string argument.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string.
pub unsafe fn cstr(p: *const c_char, what: &str) -> MpiResult<String> {
    if p.is_null() {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is a null pointer"),
        ));
    }
    // SAFETY: non-null and NUL-terminated (caller).
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// Copies `s` into a C string buffer of `max` bytes (cut to `max - 1` bytes plus NUL) and
/// stores the length written (without NUL) in `len`, if given.
///
/// # Safety
/// `dst` must be null or valid for writing `max` bytes; `len` null or valid for an int.
pub unsafe fn put_cstr(
    dst: *mut c_char,
    max: usize,
    s: &str,
    len: *mut c_int,
    what: &str,
) -> MpiResult<()> {
    if dst.is_null() {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("{what} is a null pointer"),
        ));
    }
    let n = s.len().min(max.saturating_sub(1));
    // SAFETY: `dst` holds `max` bytes (caller) and `n + 1 <= max` when max > 0.
    unsafe {
        if max > 0 {
            std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, dst, n);
            dst.add(n).write(0);
        }
        if !len.is_null() {
            len.write_unaligned(n as c_int);
        }
    }
    Ok(())
}

/// Whether a status pointer asks for no status (`MPI_STATUS_IGNORE` or null).
pub fn ignores_status(p: *const MpiStatus) -> bool {
    p.is_null() || p as usize == STATUS_IGNORE
}

/// Writes a status unless `p` is `MPI_STATUS_IGNORE`.
///
/// # Safety
/// `p` must be `MPI_STATUS_IGNORE`, null, or valid for writing an `MPI_Status`.
#[inline]
pub unsafe fn put_status(p: *mut MpiStatus, st: &St, with_error: bool) {
    if ignores_status(p) {
        return;
    }
    // SAFETY: a real status pointer, valid for reads and writes (caller).
    unsafe {
        let mut s = p.read_unaligned();
        st.encode(&mut s, with_error);
        p.write_unaligned(s);
    }
}

/// Writes entry `i` of a status array unless it is `MPI_STATUSES_IGNORE`.
///
/// # Safety
/// `p` must be `MPI_STATUSES_IGNORE`, null, or valid for writing `i + 1` statuses.
pub unsafe fn put_status_at(p: *mut MpiStatus, i: usize, st: &St, with_error: bool) {
    if ignores_status(p) {
        return;
    }
    // SAFETY: entry `i` is inside the array (caller).
    unsafe { put_status(p.add(i), st, with_error) }
}

/// Sets the `MPI_ERROR` field of entry `i` of a status array unless it is
/// `MPI_STATUSES_IGNORE`.
///
/// # Safety
/// `p` must be `MPI_STATUSES_IGNORE`, null, or valid for writing `i + 1` statuses.
pub unsafe fn put_status_error_at(p: *mut MpiStatus, i: usize, code: c_int) {
    if ignores_status(p) {
        return;
    }
    // SAFETY: entry `i` is inside the array (caller); unaligned like every status access.
    unsafe {
        let e = std::ptr::addr_of_mut!((*p.add(i)).error);
        e.write_unaligned(code);
    }
}

/// Reads a status.
///
/// # Safety
/// `p` must be null or valid for reading an `MPI_Status`.
pub unsafe fn get_status(p: *const MpiStatus) -> MpiResult<St> {
    if ignores_status(p) {
        return Err(MpiError::new(
            error::ERR_ARG,
            "the status is null or MPI_STATUS_IGNORE; pass a status filled by a receive",
        ));
    }
    // SAFETY: a real status pointer (caller).
    Ok(St::decode(&unsafe { p.read_unaligned() }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_count_uses_63_bits_and_the_cancelled_bit() {
        let st = St {
            source: 3,
            tag: 9,
            error: 0,
            bytes: (5usize << 32) | 7,
            cancelled: true,
        };
        let mut s = MpiStatus::default();
        st.encode(&mut s, true);
        assert_eq!(s.count_lo, 7);
        assert_eq!(s.count_hi_and_cancelled, (5 << 1) | 1);
        assert_eq!(St::decode(&s), st);
        assert_eq!(std::mem::size_of::<MpiStatus>(), 20);
    }

    #[test]
    fn negative_counts_are_count_errors() {
        assert_eq!(count(-1).unwrap_err().class, error::ERR_COUNT);
        assert_eq!(count(5).unwrap(), 5);
    }
}
