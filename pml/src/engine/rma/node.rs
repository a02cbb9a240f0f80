//! A window's node-wide shared mapping: the memory of every member on this node, and one
//! control slot per member, mapped by each of them, so that operations between processes of
//! one node are plain copies and CPU atomics, with no message (windows of `MPI_Win_allocate`
//! and `MPI_Win_allocate_shared`).
//!
//! Layout of the mapping (one file in the shared-memory directory, unlinked once every
//! member of the node mapped it): one 64-byte control slot per local member, in window-rank
//! order, then, from the next page, the members' memory in the same order, either back to
//! back (`MPI_Win_allocate_shared`'s contiguous default) or each from a page boundary.
//!
//! A control slot, written and read by every process of the node that maps the window:
//!
//! | word | field | writers | readers | ordering |
//! |---|---|---|---|---|
//! | 0 (u64) | `lock`: bit 63 exclusive holder, bits 0-31 shared holders | a local origin locking the member for itself; the member itself for remote origins (their LOCK messages) | the same | acquire when taken, release when given back |
//! | 1 (u32, at byte 8) | `acc`: accumulate spin lock, 0 free, 1 held | whoever applies an accumulate, get-accumulate or compare-and-swap to the member's memory (a local origin directly, the member for remote origins) | the same | acquire when taken, release when given back |
//!
//! The rest of the slot is zero and unused (room, and no false sharing between members'
//! locks). A fresh file is zero: every lock free. The words hold only bits; no value read
//! from them is used as a length, an index or an address, so a corrupt peer can make a lock
//! wait or pass, never make this process touch memory outside the mapping.
//!
//! This module owns the mapping and is the only code that makes references into it. It must
//! never block: lock attempts return at once, and the accumulate lock is held only while a
//! bounded copy-and-combine runs.

use std::sync::atomic::{fence, AtomicU32, AtomicU64, Ordering};

use super::atomics;
use super::memory::{OutOfRange, WinMemory};
use super::wire::{AccOp, Segment};
use crate::op::Dtype;

/// Bytes of one member's control slot.
pub const SLOT: usize = 64;
const PAGE: usize = 4096;
const EXCLUSIVE: u64 = 1 << 63;

/// Where one local member's control slot and memory lie in the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Offset of the control slot.
    pub ctrl: usize,
    /// Offset of the memory.
    pub mem: usize,
    /// Bytes of memory.
    pub len: usize,
}

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// The places of the local members whose sizes are `sizes` (window-rank order) and the
/// mapping's length; `None` if the sizes do not fit in the address space.
pub fn layout(sizes: &[u64], contiguous: bool) -> Option<(Vec<Place>, usize)> {
    let mut at = round_up(sizes.len() * SLOT, PAGE);
    let mut places = Vec::with_capacity(sizes.len());
    for (i, &s) in sizes.iter().enumerate() {
        let len = usize::try_from(s).ok()?;
        if !contiguous {
            at = round_up(at, PAGE);
        }
        places.push(Place {
            ctrl: i * SLOT,
            mem: at,
            len,
        });
        at = at.checked_add(len)?;
    }
    Some((places, round_up(at.max(1), PAGE)))
}

/// Creates the mapping's file (`len` zero bytes, readable by this user only); it must not
/// exist yet.
pub fn create_file(path: &std::path::Path, len: usize) -> Result<(), String> {
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("cannot create {}: {e}", path.display()))?;
    f.set_len(len as u64).map_err(|e| {
        let _ = std::fs::remove_file(path);
        format!(
            "cannot size {} to {len} bytes: {e} (is the shared-memory directory full?)",
            path.display()
        )
    })
}

/// A window's node-wide mapping, as one member sees it.
#[derive(Debug)]
pub struct NodeMap {
    /// The mapping's address (an integer: the engine is `Send`; the mapping is process-wide).
    addr: usize,
    len: usize,
    /// Per window rank: its place, if it is on this node.
    places: Vec<Option<Place>>,
    /// Per window rank: its memory, as the checked copies of [`WinMemory`] see it.
    mems: Vec<Option<WinMemory>>,
}

impl NodeMap {
    /// Maps the file at `path` (at least `len` bytes); `places[r]` is window rank `r`'s place
    /// if it is on this node.
    pub fn map(
        path: &std::path::Path,
        len: usize,
        places: Vec<Option<Place>>,
    ) -> Result<NodeMap, String> {
        use std::os::fd::AsRawFd;
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| format!("cannot open {}: {e}", path.display()))?;
        let have = f
            .metadata()
            .map_err(|e| format!("{}: {e}", path.display()))?
            .len();
        let outside =
            |p: &Place| p.ctrl + SLOT > len || p.mem.checked_add(p.len).is_none_or(|end| end > len);
        if have < len as u64 || places.iter().flatten().any(outside) {
            return Err(format!(
                "{} has {have} bytes, less than the {len} its members need",
                path.display()
            ));
        }
        // SAFETY: a fresh shared mapping of `len` bytes of a file at least that long, at an
        // address the kernel picks; nothing else in this process refers to it.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(format!(
                "cannot map {} ({len} bytes): {}",
                path.display(),
                std::io::Error::last_os_error()
            ));
        }
        let addr = p as usize;
        let mems = places
            .iter()
            .map(|p| {
                p.map(|p| {
                    // SAFETY: the member's range lies inside the mapping (checked above),
                    // which lives until `self` drops; every process that touches it does so
                    // under MPI's rules, through copies, never Rust references.
                    unsafe { WinMemory::fixed((addr + p.mem) as *mut u8, p.len) }
                })
            })
            .collect();
        Ok(NodeMap {
            addr,
            len,
            places,
            mems,
        })
    }

    /// Window rank `r`'s memory if `r` is on this node.
    pub fn member(&self, r: u32) -> Option<&WinMemory> {
        self.mems.get(r as usize).and_then(|m| m.as_ref())
    }

    /// Where window rank `r`'s memory starts in this process, if `r` is on this node.
    pub fn base(&self, r: u32) -> Option<*mut u8> {
        self.place(r).map(|p| (self.addr + p.mem) as *mut u8)
    }

    /// Whether every rank of the window is on this node.
    pub fn all_local(&self) -> bool {
        self.places.iter().all(|p| p.is_some())
    }

    fn place(&self, r: u32) -> Option<Place> {
        self.places.get(r as usize).copied().flatten()
    }

    fn lock_word(&self, r: u32) -> Option<&AtomicU64> {
        let p = self.place(r)?;
        // SAFETY: the slot lies inside the mapping (checked in `map`), is 64-byte aligned
        // (the mapping is page-aligned and slots are 64 bytes apart), and every process
        // that maps it accesses the word only atomically (table in the module docs). The
        // reference lives no longer than `self`, which keeps the mapping.
        Some(unsafe { &*((self.addr + p.ctrl) as *const AtomicU64) })
    }

    fn acc_word(&self, r: u32) -> Option<&AtomicU32> {
        let p = self.place(r)?;
        // SAFETY: as `lock_word`, 8 bytes further into the same slot (4-byte aligned).
        Some(unsafe { &*((self.addr + p.ctrl + 8) as *const AtomicU32) })
    }

    /// Takes rank `r`'s window lock if it is free for this kind; false if not (or `r` is not
    /// on this node).
    pub fn try_lock(&self, r: u32, exclusive: bool) -> bool {
        let Some(w) = self.lock_word(r) else {
            return false;
        };
        if exclusive {
            w.compare_exchange(0, EXCLUSIVE, Ordering::Acquire, Ordering::Relaxed)
                .is_ok()
        } else {
            // Count in, then back out if an exclusive holder was there: readers never wait
            // for each other, and an exclusive taker sees a non-zero word and retries.
            if w.fetch_add(1, Ordering::Acquire) & EXCLUSIVE == 0 {
                return true;
            }
            w.fetch_sub(1, Ordering::Relaxed);
            false
        }
    }

    /// Gives back a lock [`NodeMap::try_lock`] took.
    pub fn unlock(&self, r: u32, exclusive: bool) {
        if let Some(w) = self.lock_word(r) {
            // A subtraction, not a store of 0: a reader's momentary count-in must survive.
            w.fetch_sub(if exclusive { EXCLUSIVE } else { 1 }, Ordering::Release);
        }
    }

    /// Runs `f` holding rank `r`'s accumulate lock (`f` alone if `r` is not on this node).
    /// Spins, yielding the core after a while: the holder only copies and combines.
    pub fn with_acc_lock<R>(&self, r: u32, f: impl FnOnce() -> R) -> R {
        let Some(w) = self.acc_word(r) else {
            return f();
        };
        let mut tries = 0u32;
        while w
            .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            tries += 1;
            if tries > 64 {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
        let out = f();
        w.store(0, Ordering::Release);
        out
    }

    /// Applies an accumulate to rank `r`'s memory with CPU atomics, element by element (see
    /// `atomics`); the old bytes go to `old` when given. `None` when its elements cannot be
    /// (type, width or alignment) and nothing changed: the caller takes the accumulate lock.
    pub fn atomic_accumulate(
        &self,
        r: u32,
        segs: &[Segment],
        op: AccOp,
        dtype: Dtype,
        data: &[u8],
        mut old: Option<&mut [u8]>,
    ) -> Option<Result<(), OutOfRange>> {
        let w = atomics::width(dtype, op)?;
        let mem = self.member(r)?;
        if let [s] = segs {
            // One range (every fetch-and-op): one lookup.
            let n = s.len as usize;
            let a = match mem.address(*s) {
                Ok(a) if a.is_multiple_of(w) && n.is_multiple_of(w) => a,
                Ok(_) => return None,
                Err(e) => return Some(Err(e)),
            };
            if (op != AccOp::NoOp && data.len() != n) || old.as_ref().is_some_and(|o| o.len() != n)
            {
                return Some(Err(OutOfRange(format!(
                    "{n} bytes of window range for {} bytes of data",
                    data.len()
                ))));
            }
            let operand = if op == AccOp::NoOp { &[][..] } else { data };
            // SAFETY: as below.
            unsafe { atomics::combine(a, n, w, op, dtype, operand, old) };
            return Some(Ok(()));
        }
        let mut total = 0usize;
        for s in segs {
            match mem.address(*s) {
                Ok(a) if a.is_multiple_of(w) && (s.len as usize).is_multiple_of(w) => {
                    total += s.len as usize
                }
                Ok(_) => return None,
                Err(e) => return Some(Err(e)),
            }
        }
        if (op != AccOp::NoOp && data.len() != total)
            || old.as_ref().is_some_and(|o| o.len() != total)
        {
            return Some(Err(OutOfRange(format!(
                "{total} bytes of window ranges for {} bytes of data",
                data.len()
            ))));
        }
        let mut at = 0;
        for s in segs {
            let (a, n) = (mem.address(*s).ok()?, s.len as usize);
            let operand = if op == AccOp::NoOp {
                &[][..]
            } else {
                &data[at..at + n]
            };
            let out = old.as_deref_mut().map(|o| &mut o[at..at + n]);
            // SAFETY: `a..a + n` was checked to lie in rank `r`'s memory in this mapping,
            // aligned to `w` with a whole number of elements; every process updates elements
            // of this type and address only through `atomics` (module docs there).
            unsafe { atomics::combine(a, n, w, op, dtype, operand, out) };
            at += n;
        }
        Some(Ok(()))
    }

    /// `MPI_Compare_and_swap` on rank `r`'s memory as one atomic instruction (elements of 1,
    /// 2, 4 or 8 aligned bytes); `None` otherwise, nothing changed.
    pub fn atomic_compare_and_swap(
        &self,
        r: u32,
        offset: u64,
        compare: &[u8],
        swap: &[u8],
        old: &mut [u8],
    ) -> Option<Result<(), OutOfRange>> {
        let w = compare.len();
        if !matches!(w, 1 | 2 | 4 | 8) || swap.len() != w || old.len() != w {
            return None;
        }
        let seg = Segment {
            offset,
            len: w as u32,
        };
        let a = match self.member(r)?.address(seg) {
            Ok(a) if a % w == 0 => a,
            Ok(_) => return None,
            Err(e) => return Some(Err(e)),
        };
        // SAFETY: as in `atomic_accumulate`, one element.
        unsafe { atomics::compare_and_swap(a, w, compare, swap, old) };
        Some(Ok(()))
    }

    /// Orders this process's earlier copies into the mapping before its later accesses and
    /// messages (flush, unlock, fence, `MPI_Win_sync`).
    pub fn sync() {
        fence(Ordering::SeqCst);
    }
}

impl Drop for NodeMap {
    fn drop(&mut self) {
        // SAFETY: `addr..addr + len` is the mapping `map` made, unmapped once, here; the
        // window is freed (its last fence completed every operation), so no copy uses it.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn two_views(sizes: &[u64], contiguous: bool) -> (NodeMap, NodeMap, std::path::PathBuf) {
        let (places, len) = layout(sizes, contiguous).unwrap();
        // Tests run in parallel threads of one process: a counter keeps their files apart.
        static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("kestrel-nodemap-test-{}-{n}", std::process::id()));
        let _ = std::fs::remove_file(&path);
        create_file(&path, len).unwrap();
        let p: Vec<Option<Place>> = places.into_iter().map(Some).collect();
        let a = NodeMap::map(&path, len, p.clone()).unwrap();
        let b = NodeMap::map(&path, len, p).unwrap();
        std::fs::remove_file(&path).unwrap();
        (a, b, path)
    }

    #[test]
    fn layouts_put_slots_first_and_memory_where_asked() {
        let (p, len) = layout(&[10, 0, 5000], false).unwrap();
        assert_eq!(
            p[0],
            Place {
                ctrl: 0,
                mem: 4096,
                len: 10
            }
        );
        assert_eq!(p[1].mem, 8192);
        assert_eq!(
            p[2],
            Place {
                ctrl: 128,
                mem: 8192,
                len: 5000
            }
        );
        assert_eq!(len, 16384);
        let (p, len) = layout(&[10, 6], true).unwrap();
        assert_eq!((p[0].mem, p[1].mem, len), (4096, 4106, 8192));
        assert!(layout(&[u64::MAX, 1], true).is_none());
    }

    #[test]
    fn two_mappings_see_each_others_copies_and_locks() {
        let (a, b, _) = two_views(&[16, 16], false);
        let seg = [Segment { offset: 8, len: 4 }];
        a.member(1).unwrap().write(&seg, &[1, 2, 3, 4]).unwrap();
        let mut out = Vec::new();
        b.member(1).unwrap().read(&seg, &mut out).unwrap();
        assert_eq!(out, [1, 2, 3, 4]);
        assert!(b
            .member(1)
            .unwrap()
            .check(&[Segment { offset: 14, len: 4 }])
            .is_err());

        assert!(a.try_lock(0, true));
        assert!(!b.try_lock(0, false) && !b.try_lock(0, true));
        assert!(b.try_lock(1, false) && a.try_lock(1, false));
        assert!(!a.try_lock(1, true));
        a.unlock(0, true);
        assert!(b.try_lock(0, false));
        b.unlock(0, false);
        a.unlock(1, false);
        b.unlock(1, false);
        assert!(a.try_lock(1, true));
        a.unlock(1, true);
        assert!(
            !a.try_lock(7, true),
            "a rank not on the node is never locked here"
        );
    }

    #[test]
    fn atomic_accumulates_are_exact_across_mappings_and_refuse_what_they_cannot_do() {
        use crate::op::Op;
        let (a, b, _) = two_views(&[64], true);
        let seg = [Segment { offset: 8, len: 8 }];
        std::thread::scope(|s| {
            for view in [&a, &b] {
                s.spawn(move || {
                    for _ in 0..20_000 {
                        let r = view.atomic_accumulate(
                            0,
                            &seg,
                            AccOp::Reduce(Op::Sum),
                            Dtype::I64,
                            &1i64.to_ne_bytes(),
                            None,
                        );
                        r.unwrap().unwrap();
                        let f = view.atomic_accumulate(
                            0,
                            &[Segment { offset: 16, len: 8 }],
                            AccOp::Reduce(Op::Sum),
                            Dtype::F64,
                            &0.5f64.to_ne_bytes(),
                            None,
                        );
                        f.unwrap().unwrap();
                    }
                });
            }
        });
        let mut old = [0u8; 8];
        a.atomic_accumulate(0, &seg, AccOp::NoOp, Dtype::I64, &[], Some(&mut old))
            .unwrap()
            .unwrap();
        assert_eq!(i64::from_ne_bytes(old), 40_000);
        a.atomic_accumulate(
            0,
            &[Segment { offset: 16, len: 8 }],
            AccOp::NoOp,
            Dtype::F64,
            &[],
            Some(&mut old),
        )
        .unwrap()
        .unwrap();
        assert_eq!(f64::from_ne_bytes(old), 20_000.0);
        let mut prev = [0u8; 8];
        b.atomic_compare_and_swap(
            0,
            8,
            &40_000i64.to_ne_bytes(),
            &7i64.to_ne_bytes(),
            &mut prev,
        )
        .unwrap()
        .unwrap();
        assert_eq!(i64::from_ne_bytes(prev), 40_000);
        a.atomic_compare_and_swap(0, 8, &1i64.to_ne_bytes(), &9i64.to_ne_bytes(), &mut prev)
            .unwrap()
            .unwrap();
        assert_eq!(
            i64::from_ne_bytes(prev),
            7,
            "a failed compare leaves the value"
        );
        // Misaligned, 16-byte pairs: not for atomics (nothing changes); past the end: an error.
        let odd = [Segment { offset: 3, len: 8 }];
        assert!(a
            .atomic_accumulate(0, &odd, AccOp::Replace, Dtype::I64, &[0; 8], None)
            .is_none());
        let pair = [Segment { offset: 0, len: 16 }];
        assert!(a
            .atomic_accumulate(
                0,
                &pair,
                AccOp::Reduce(Op::Maxloc),
                Dtype::DoubleInt,
                &[0; 16],
                None
            )
            .is_none());
        let past = [Segment { offset: 64, len: 8 }];
        assert!(a
            .atomic_accumulate(0, &past, AccOp::Replace, Dtype::I64, &[0; 8], None)
            .unwrap()
            .is_err());
    }

    #[test]
    fn the_accumulate_lock_makes_read_modify_write_exact_across_threads() {
        let (a, b, _) = two_views(&[8], true);
        let mem_a = a.member(0).unwrap().clone();
        let seg = [Segment { offset: 0, len: 8 }];
        std::thread::scope(|s| {
            for view in [&a, &b] {
                let mem = view.member(0).unwrap().clone();
                s.spawn(move || {
                    for _ in 0..20_000 {
                        view.with_acc_lock(0, || {
                            let mut cur = Vec::new();
                            mem.read(&seg, &mut cur).unwrap();
                            let v = u64::from_ne_bytes(cur[..8].try_into().unwrap()) + 1;
                            mem.write(&seg, &v.to_ne_bytes()).unwrap();
                        });
                    }
                });
            }
        });
        let mut out = Vec::new();
        mem_a.read(&seg, &mut out).unwrap();
        assert_eq!(u64::from_ne_bytes(out[..8].try_into().unwrap()), 40_000);
    }
}
