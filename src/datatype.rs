//! What can be sent: plain-old-data types and contiguous collections of them.

/// A type whose values can travel as their bytes.
///
/// # Safety
/// Implementors must have no padding bytes, no pointers, and accept every bit pattern as a
/// valid value (a receive writes arbitrary bytes from another process into them). Kestrel
/// implements it for the primitive integer and float types and arrays of them.
pub unsafe trait Equivalence: Copy + 'static {}

macro_rules! equivalence {
    ($($t:ty),*) => {
        // SAFETY: primitive integers and floats have no padding and no invalid bit patterns.
        $(unsafe impl Equivalence for $t {})*
    };
}
equivalence!(u8, i8, u16, i16, u32, i32, u64, i64, u128, i128, usize, isize, f32, f64);

// SAFETY: an array of padding-free, all-bit-patterns-valid elements is itself such a type.
unsafe impl<T: Equivalence, const N: usize> Equivalence for [T; N] {}

/// A send buffer: its bytes.
pub trait Buffer {
    /// The bytes to send.
    fn as_bytes(&self) -> &[u8];
}

/// A receive buffer: bytes to overwrite.
pub trait BufferMut {
    /// The bytes to receive into.
    fn as_bytes_mut(&mut self) -> &mut [u8];
}

pub(crate) fn slice_bytes<T: Equivalence>(s: &[T]) -> &[u8] {
    // SAFETY: `T: Equivalence` has no padding, so every byte of the slice is initialized; the
    // view covers exactly the slice's memory and borrows it immutably.
    unsafe { std::slice::from_raw_parts(s.as_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

pub(crate) fn slice_bytes_mut<T: Equivalence>(s: &mut [T]) -> &mut [u8] {
    // SAFETY: as above, and any bytes written through the view form valid `T` values
    // (`Equivalence` admits every bit pattern); the view borrows the slice exclusively.
    unsafe { std::slice::from_raw_parts_mut(s.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(s)) }
}

impl<T: Equivalence> Buffer for T {
    fn as_bytes(&self) -> &[u8] {
        slice_bytes(std::slice::from_ref(self))
    }
}
impl<T: Equivalence> Buffer for [T] {
    fn as_bytes(&self) -> &[u8] {
        slice_bytes(self)
    }
}
impl<T: Equivalence> Buffer for Vec<T> {
    fn as_bytes(&self) -> &[u8] {
        slice_bytes(self)
    }
}
impl<T: Equivalence> BufferMut for T {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        slice_bytes_mut(std::slice::from_mut(self))
    }
}
impl<T: Equivalence> BufferMut for [T] {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        slice_bytes_mut(self)
    }
}
impl<T: Equivalence> BufferMut for Vec<T> {
    fn as_bytes_mut(&mut self) -> &mut [u8] {
        slice_bytes_mut(self)
    }
}

/// A vector of `n` zeroed values (any bit pattern is valid for `Equivalence` types).
pub(crate) fn zeroed_vec<T: Equivalence>(n: usize) -> Vec<T> {
    let mut v: Vec<T> = Vec::with_capacity(n);
    // SAFETY: `T: Equivalence` admits the all-zero bit pattern; the capacity covers `n` values
    // and writing zeros initializes them before the length is set.
    unsafe {
        std::ptr::write_bytes(v.as_mut_ptr(), 0, n);
        v.set_len(n);
    }
    v
}
