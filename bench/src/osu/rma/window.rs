//! What the timed loops work on: the element types ([`RmaElem`]), page-aligned buffers filled
//! as C's `memset`, the window of each size as `-w` says, and the part of a passive epoch that
//! `-s flush` or `-s flush_local` closes.

use kestrel::collective::Reducible;
use kestrel::window::{Epoch, Window, WindowCreation};
use kestrel::{Equivalence, Rank, SimpleCommunicator};

use super::{SyncKind, WinKind};

/// An element type of the one-sided windows: what `-T` names (and `u8` for the byte-wise puts
/// and gets).
pub trait RmaElem: Reducible + PartialEq {
    /// The element C's `memset(p, 'a', n)` leaves.
    fn filled() -> Self;
}

impl RmaElem for u8 {
    fn filled() -> u8 {
        b'a'
    }
}

impl RmaElem for i8 {
    fn filled() -> i8 {
        i8::from_ne_bytes([b'a'])
    }
}

impl RmaElem for i32 {
    fn filled() -> i32 {
        i32::from_ne_bytes([b'a'; 4])
    }
}

impl RmaElem for f32 {
    fn filled() -> f32 {
        f32::from_ne_bytes([b'a'; 4])
    }
}

impl RmaElem for i64 {
    fn filled() -> i64 {
        i64::from_ne_bytes([b'a'; 8])
    }
}

/// Elements of `T` starting at a 4096-byte boundary (OSU's `posix_memalign`), filled with
/// `'a'` bytes.
pub(super) struct PageBuf<T> {
    storage: Vec<T>,
    offset: usize,
    len: usize,
}

impl<T: RmaElem> PageBuf<T> {
    pub(super) fn filled(len: usize) -> PageBuf<T> {
        const PAGE: usize = 4096;
        let per_page = (PAGE / std::mem::size_of::<T>()).max(1);
        let storage = vec![T::filled(); len + per_page];
        let offset = storage.as_ptr().align_offset(PAGE).min(per_page);
        PageBuf {
            storage,
            offset,
            len,
        }
    }

    pub(super) fn as_slice(&self) -> &[T] {
        &self.storage[self.offset..self.offset + self.len]
    }

    pub(super) fn as_mut_slice(&mut self) -> &mut [T] {
        &mut self.storage[self.offset..self.offset + self.len]
    }
}

/// A window of `len` elements per rank as `-w` says, filled with `'a'` bytes, for the
/// duration of `f` (freed collectively when it returns).
pub(super) fn with_rma_window<T: RmaElem, R>(
    world: &SimpleCommunicator,
    kind: WinKind,
    len: usize,
    f: impl FnOnce(&Window<T>) -> R,
) -> R {
    match kind {
        WinKind::Create => {
            let mut memory = PageBuf::<T>::filled(len);
            world.with_window(memory.as_mut_slice(), f)
        }
        WinKind::Allocate => {
            let win = world.allocate_window::<T>(len);
            win.with_local(|m| m.fill(T::filled()));
            f(&win)
        }
        WinKind::Dynamic => unreachable!("rma_begin refuses -w dynamic"),
    }
}

/// The operations of `f` (in a lock epoch `e` of `target`) completed as the flush loops' `-s`
/// says: an [`Epoch::flushed`] part (`MPI_Win_flush`) or an [`Epoch::flushed_local`] one
/// (`MPI_Win_flush_local`); either way the results `f` borrowed are free when it returns.
pub(super) fn flush_part<'f, 'b: 'f, T: Equivalence, R>(
    e: &'f Epoch<'b, T>,
    sync: SyncKind,
    target: Rank,
    f: impl FnOnce(&Epoch<'f, T>) -> R,
) -> R {
    match sync {
        SyncKind::Flush => e.flushed(target, f),
        SyncKind::FlushLocal => e.flushed_local(target, f),
        _ => unreachable!("only the flush loops have flushed parts"),
    }
}
