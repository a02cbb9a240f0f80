//! Buffers kept for reuse, so that steady traffic does not allocate per message.
//!
//! This module owns the free list and its bounds. It must never hand out a buffer still in
//! use, nor keep more than [`POOL_BUFFERS`] buffers or any larger than [`POOL_MAX_CAPACITY`].

/// Buffers kept for reuse, so that steady traffic does not allocate.
pub(super) const POOL_BUFFERS: usize = 256;
/// Larger buffers are freed rather than kept (a 4 MiB reassembly buffer is not worth holding).
pub(super) const POOL_MAX_CAPACITY: usize = 64 << 10;

#[derive(Debug, Default)]
pub(super) struct BufferPool {
    free: Vec<Vec<u8>>,
}

impl BufferPool {
    pub(super) fn take(&mut self, len: usize) -> Vec<u8> {
        match self.free.pop() {
            Some(mut v) => {
                v.clear();
                v.reserve(len);
                v
            }
            None => Vec::with_capacity(len),
        }
    }

    pub(super) fn give(&mut self, v: Vec<u8>) {
        if v.capacity() != 0 && v.capacity() <= POOL_MAX_CAPACITY && self.free.len() < POOL_BUFFERS
        {
            self.free.push(v);
        }
    }
}
