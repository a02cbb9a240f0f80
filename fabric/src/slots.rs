//! The memory the provider reads and writes: page-aligned pools of equal buffer slots, and one
//! `fi_context2` per slot at a stable address.
//!
//! This module owns allocation, slot addressing and freeing. It must never form a reference
//! to a whole pool (the provider may be writing into slots it owns) nor free memory while an
//! endpoint can still touch it (the endpoint's field order guarantees that).

use std::ffi::c_void;
use std::mem::size_of;
use std::ptr::{self, NonNull};

use kestrel_libfabric_sys as sys;

/// Buffer slots start on cache-line boundaries.
const SLOT_ALIGN: usize = 64;

/// A page-aligned buffer split into equal slots, handed to the provider by raw pointer.
///
/// The memory is an anonymous private mapping: page aligned (which registration on some NICs
/// prefers), zero, and not touched until used, so the 16 MiB an ofi endpoint reserves at its
/// defaults costs neither a memset at start-up (measured 16.8 M instructions, 16% of a short
/// osu_latency run) nor resident memory for slots a job never fills.
///
/// No reference to the whole pool is ever formed: the provider may be writing into slots it owns
/// (posted receives) while the wrapper reads a slot it owns (a completed one).
pub(super) struct Pool {
    base: NonNull<u8>,
    len: usize,
    stride: usize,
    slots: usize,
}

impl Pool {
    pub(super) fn new(slots: usize, slot_bytes: usize) -> Option<Pool> {
        let stride = slot_bytes.div_ceil(SLOT_ALIGN).checked_mul(SLOT_ALIGN)?;
        let len = stride.checked_mul(slots)?.max(1);
        // SAFETY: a fresh anonymous private mapping; no existing memory is named or replaced.
        let mapped = unsafe {
            libc::mmap(
                ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return None;
        }
        let base = NonNull::new(mapped.cast::<u8>())?;
        Some(Pool {
            base,
            len,
            stride,
            slots,
        })
    }

    pub(super) fn slot_ptr(&self, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.slots);
        // SAFETY: slot < slots, so the offset stays inside the allocation.
        unsafe { self.base.as_ptr().add(slot * self.stride) }
    }

    /// The start of the allocation (for memory registration; no reference is formed).
    pub(super) fn base_ptr(&self) -> *mut u8 {
        self.base.as_ptr()
    }

    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: mapped in `new` with this length, unmapped once; the endpoint and memory
        // registrations using it are closed before (field order in MsgEndpoint).
        unsafe {
            libc::munmap(self.base.as_ptr().cast(), self.len);
        }
    }
}

/// One `fi_context2` per slot, at stable addresses the provider may write into.
pub(super) struct Contexts {
    base: NonNull<sys::fi_context2>,
    len: usize,
}

impl Contexts {
    pub(super) fn new(len: usize) -> Contexts {
        let boxed: Box<[sys::fi_context2]> = (0..len.max(1))
            .map(|_| sys::fi_context2::default())
            .collect();
        let len = boxed.len();
        let raw = Box::into_raw(boxed) as *mut sys::fi_context2;
        Contexts {
            // SAFETY: Box::into_raw never returns null.
            base: unsafe { NonNull::new_unchecked(raw) },
            len,
        }
    }

    pub(super) fn ptr(&self, index: usize) -> *mut c_void {
        debug_assert!(index < self.len);
        // SAFETY: index < len keeps the pointer inside the array.
        unsafe { self.base.as_ptr().add(index) as *mut c_void }
    }

    /// Maps a completion's context back to its index, without dereferencing it.
    pub(super) fn index_of(&self, context: *mut c_void) -> Option<usize> {
        let offset = (context as usize).checked_sub(self.base.as_ptr() as usize)?;
        let size = size_of::<sys::fi_context2>();
        (offset % size == 0 && offset / size < self.len).then_some(offset / size)
    }
}

impl Drop for Contexts {
    fn drop(&mut self) {
        let slice = ptr::slice_from_raw_parts_mut(self.base.as_ptr(), self.len);
        // SAFETY: rebuilds the Box leaked in `new` (same pointer and length), once, after the
        // endpoint that referenced the contexts has been closed.
        drop(unsafe { Box::from_raw(slice) });
    }
}
