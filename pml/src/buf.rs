//! User buffers held by the messaging layer while a request is in flight.
//!
//! A nonblocking operation must read or write the user's memory after the call that started
//! it has returned. The Rust API guarantees, through request scopes, that the memory outlives
//! the request; this module turns that guarantee into bounds-checked safe accessors. It is the
//! only `unsafe` code of the crate.

/// Memory the messaging layer may read (send) or write (receive) until the request completes.
#[derive(Debug, Clone, Copy)]
pub struct UserBuf {
    ptr: *mut u8,
    len: usize,
}

// SAFETY: the engine runs on the thread that owns the request; the pointer is only
// dereferenced through the accessors below, within the lifetime the creator guaranteed.
unsafe impl Send for UserBuf {}

impl UserBuf {
    /// An empty buffer.
    pub const fn empty() -> Self {
        UserBuf {
            ptr: std::ptr::NonNull::dangling().as_ptr(),
            len: 0,
        }
    }

    /// Wraps memory for reading only (a send buffer).
    ///
    /// # Safety
    /// The caller must ensure that `len` bytes at `ptr` stay valid for reads, and are not
    /// written by anyone else, until the request using this buffer has completed.
    pub unsafe fn for_send(ptr: *const u8, len: usize) -> Self {
        UserBuf {
            ptr: ptr as *mut u8,
            len,
        }
    }

    /// Wraps memory that lives for the whole process, for reading (a send buffer of a unit
    /// test, which needs no `unsafe`).
    #[cfg(test)]
    pub(crate) fn for_static_send(data: &'static [u8]) -> Self {
        UserBuf {
            ptr: data.as_ptr() as *mut u8,
            len: data.len(),
        }
    }

    /// Wraps memory for writing (a receive buffer).
    ///
    /// # Safety
    /// The caller must ensure that `len` bytes at `ptr` stay valid for writes, and are not
    /// accessed by anyone else, until the request using this buffer has completed.
    pub unsafe fn for_recv(ptr: *mut u8, len: usize) -> Self {
        UserBuf { ptr, len }
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The bytes (send buffers).
    pub fn as_slice(&self) -> &[u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: valid for reads for the request's lifetime (constructor contract).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// Copies `src` to `offset`, clipped to the buffer; returns the bytes copied.
    pub fn write_at(&self, offset: usize, src: &[u8]) -> usize {
        if offset >= self.len {
            return 0;
        }
        let n = src.len().min(self.len - offset);
        let dst = self.ptr.wrapping_add(offset);
        // SAFETY: `offset + n <= len`, valid for writes (constructor contract), and `src` is
        // never a view of the same user buffer (it comes from a transport or the engine). The
        // small common lengths are constant-size copies (a few moves, no call to `memcpy`: an
        // eager message's delivery).
        unsafe {
            match n {
                8 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 8),
                4 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 4),
                16 => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, 16),
                n => std::ptr::copy_nonoverlapping(src.as_ptr(), dst, n),
            }
        }
        n
    }

    /// The first `len` bytes (clipped to the buffer) as a transport's target for a get that
    /// finishes later. [`kestrel_transport::btl::LocalRegion`]'s duty (nothing else touches
    /// the memory until the get is reported) is this buffer's constructor contract, as long
    /// as the request it belongs to completes only after that report, which the engine
    /// ensures (a receive reading by RMA stays incomplete until then).
    pub fn local_region(&self, len: usize) -> kestrel_transport::btl::LocalRegion {
        kestrel_transport::btl::LocalRegion {
            addr: self.ptr as u64,
            len: len.min(self.len) as u64,
        }
    }

    /// A mutable view of `[offset, offset+len)` clipped to the buffer (for single-copy gets).
    pub fn slice_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        if offset >= self.len {
            return &mut [];
        }
        let n = len.min(self.len - offset);
        // SAFETY: in bounds, valid for writes, and exclusively ours (constructor contract).
        unsafe { std::slice::from_raw_parts_mut(self.ptr.add(offset), n) }
    }
}
