//! A window's node-wide shared mapping: the memory of every member on this node, and one
//! control slot per member, mapped by each of them, so that operations between processes of
//! one node are plain copies (accumulates under a per-member lock), with no message
//! (windows of `MPI_Win_allocate` and `MPI_Win_allocate_shared`).
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
use std::sync::Arc;

use super::wire::AccOp;
use crate::op::{self, Dtype, Op};

use super::memory::WinMemory;
use super::stream::{self, StreamRun, STREAM_MIN};

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
    /// Keeps the mapping while the window or a [`DirectView`] of it lives.
    map: Arc<Mapping>,
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
            map: Arc::new(Mapping { addr, len }),
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

    /// A [`DirectView`] of the mapping, with each member's displacement unit (`units`,
    /// window-rank order).
    pub fn view(&self, units: &[u32], stream_after: usize) -> DirectView {
        let members = self
            .places
            .iter()
            .zip(units)
            .map(|(p, &u)| match p {
                Some(p) => ViewMember {
                    addr: self.addr + p.mem,
                    len: p.len,
                    unit: u as usize,
                    acc: self.addr + p.ctrl + 8,
                },
                None => ViewMember {
                    addr: 0,
                    len: 0,
                    unit: u as usize,
                    acc: 0,
                },
            })
            .collect();
        DirectView {
            _map: self.map.clone(),
            members,
            all_local: self.all_local(),
            put_run: StreamRun::default(),
            get_run: StreamRun::default(),
            stream_after,
        }
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
        take_acc_lock(w);
        let out = f();
        w.store(0, Ordering::Release);
        out
    }

    /// Orders this process's earlier copies into the mapping before its later accesses and
    /// messages (flush, unlock, fence, `MPI_Win_sync`).
    pub fn sync() {
        fence(Ordering::SeqCst);
    }
}

/// Takes an accumulate lock word (module docs): spins, yielding the core after a while (the
/// holder only copies and combines a bounded range).
fn take_acc_lock(w: &AtomicU32) {
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
}

/// The mapping `NodeMap::map` made, unmapped when its last holder drops.
#[derive(Debug)]
struct Mapping {
    addr: usize,
    len: usize,
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr..addr + len` is the mapping `map` made, unmapped once, here: the
        // window and every view of it are gone, so nothing refers to it any more.
        unsafe { libc::munmap(self.addr as *mut libc::c_void, self.len) };
    }
}

/// One member in a [`DirectView`]: where its memory lies in this process (`addr` 0: not on
/// this node), how long it is, and its displacement unit.
#[derive(Debug, Clone, Copy)]
struct ViewMember {
    addr: usize,
    len: usize,
    unit: usize,
    /// Its accumulate lock word's address.
    acc: usize,
}

/// Bytes of a short accumulate's stack buffer (fetch-and-op, the latency tests); longer ones
/// combine [`CHUNK`] bytes at a time.
const SHORT: usize = 64;
const CHUNK: usize = 4096;

/// What the C library keeps of a node-shared window so that a put, a get or a flush to a
/// member on this node is a bounds check and a copy: no engine call, no lookup by id. It
/// holds the mapping, so its copies stay inside mapped memory even if the window is freed
/// first. Every check fails towards "not direct" (`false`/`None`): the caller then takes the
/// general path, which reports errors.
#[derive(Debug, Clone)]
pub struct DirectView {
    _map: Arc<Mapping>,
    members: Box<[ViewMember]>,
    all_local: bool,
    /// Runs of large puts into a member's memory and of large gets into local memory, and
    /// the bytes a run writes before its further transfers stream past the caches (0:
    /// never; see [`stream`]).
    put_run: StreamRun,
    get_run: StreamRun,
    stream_after: usize,
}

/// `target = data OP target` for the `data.len()` bytes at address `at` (inside a member's
/// memory, the caller holding its accumulate lock), through `buf` (as long as `data`).
fn combine_at(at: usize, o: Op, dtype: Dtype, data: &[u8], buf: &mut [u8]) {
    // SAFETY: the caller checked that `at..at + data.len()` lies in a member's memory in the
    // mapping and holds that member's accumulate lock; `buf` is the caller's stack buffer.
    unsafe { std::ptr::copy(at as *const u8, buf.as_mut_ptr(), buf.len()) };
    // The caller checked the operation, type and whole elements (`accumulate`'s `fits`);
    // were there no kernel, the memory would be left as it was.
    if op::reduce_checked(o, dtype, data, buf) {
        // SAFETY: as above, writing back.
        unsafe { std::ptr::copy(buf.as_ptr(), at as *mut u8, buf.len()) };
    }
}

/// A fetch-and-add of one element at a window address: the old value into the third
/// argument, the second added to it.
type FetchKernel = fn(usize, &[u8], &mut [u8]);

macro_rules! fetch_add_kernel {
    ($name:ident, $t:ty, $add:expr) => {
        /// Fetch-and-add of one unaligned element (see [`FetchKernel`]); the caller checked
        /// that `at` holds one inside a member's memory, that `x` and `old` are one element
        /// long, and holds the member's accumulate lock.
        fn $name(at: usize, x: &[u8], old: &mut [u8]) {
            const SIZE: usize = std::mem::size_of::<$t>();
            debug_assert!(x.len() == SIZE && old.len() == SIZE);
            let p = at as *mut $t;
            // SAFETY: `at..at + SIZE` lies in a member's memory of the mapping and every
            // accumulate to it holds the lock the caller holds; unaligned accesses, as a
            // displacement may put the element anywhere. Both reads come before the writes,
            // so an origin or result buffer inside the window reads the value before.
            let (now, add) = unsafe {
                (
                    p.read_unaligned(),
                    (x.as_ptr() as *const $t).read_unaligned(),
                )
            };
            // SAFETY: as above, writing the element back.
            unsafe { p.write_unaligned($add(now, add)) };
            old.copy_from_slice(&now.to_ne_bytes());
        }
    };
}

fetch_add_kernel!(fetch_add_u8, u8, u8::wrapping_add);
fetch_add_kernel!(fetch_add_u16, u16, u16::wrapping_add);
fetch_add_kernel!(fetch_add_u32, u32, u32::wrapping_add);
fetch_add_kernel!(fetch_add_u64, u64, u64::wrapping_add);
fetch_add_kernel!(fetch_add_f32, f32, |a: f32, b: f32| b + a);
fetch_add_kernel!(fetch_add_f64, f64, |a: f64, b: f64| b + a);

/// A compare-and-swap of one element at a window address: its old value into `old`, replaced
/// by `swap` if it equals `compare` (bitwise, as MPI compares).
type CasKernel = fn(usize, &[u8], &[u8], &mut [u8]);

macro_rules! cas_kernel {
    ($name:ident, $t:ty) => {
        /// Compare-and-swap of one unaligned element (see [`CasKernel`]), under the same
        /// conditions as the fetch-and-add kernels.
        fn $name(at: usize, compare: &[u8], swap: &[u8], old: &mut [u8]) {
            const SIZE: usize = std::mem::size_of::<$t>();
            let word = |b: &[u8]| <$t>::from_ne_bytes(b.try_into().unwrap_or([0; SIZE]));
            let (compare, swap) = (word(compare), word(swap));
            let p = at as *mut $t;
            // SAFETY: as in the fetch-and-add kernels.
            let now = unsafe { p.read_unaligned() };
            if now == compare {
                // SAFETY: as above, writing.
                unsafe { p.write_unaligned(swap) };
            }
            old.copy_from_slice(&now.to_ne_bytes());
        }
    };
}

cas_kernel!(cas_u8, u8);
cas_kernel!(cas_u16, u16);
cas_kernel!(cas_u32, u32);
cas_kernel!(cas_u64, u64);

/// [`CasKernel`] of any length (16-byte and odd-sized predefined types).
fn cas_bytes(at: usize, compare: &[u8], swap: &[u8], old: &mut [u8]) {
    // SAFETY: as in the fetch-and-add kernels: the range is inside a member's memory, under
    // its accumulate lock.
    unsafe { std::ptr::copy(at as *const u8, old.as_mut_ptr(), old.len()) };
    if old == compare {
        // SAFETY: as above, writing.
        unsafe { std::ptr::copy(swap.as_ptr(), at as *mut u8, swap.len()) };
    }
}

impl DirectView {
    /// The address of `n` bytes at displacement `disp` of member `t`, if it is on this node
    /// and the range lies inside its memory.
    #[inline]
    fn range(&self, t: i32, disp: isize, n: usize) -> Option<usize> {
        let m = self.members.get(usize::try_from(t).ok()?)?;
        let off = usize::try_from(disp).ok()?.checked_mul(m.unit)?;
        (m.addr != 0 && off.checked_add(n)? <= m.len).then_some(m.addr + off)
    }

    /// `MPI_Put` of `src` to displacement `disp` of member `t`; false (nothing written) if
    /// `t` is not on this node or the range is not inside its memory.
    #[inline]
    pub fn put(&self, t: i32, disp: isize, src: &[u8]) -> bool {
        let Some(dst) = self.range(t, disp, src.len()) else {
            return false;
        };
        // SAFETY: `range` checked that `dst..dst + len` lies in member `t`'s memory inside
        // the mapping `_map` keeps. Other processes touch it only through copies and atomics,
        // never Rust references; conflicting accesses are the program's error under MPI's
        // rules. The origin may lie in the window too (`copy_in_run` allows overlap).
        unsafe { self.copy_in_run(&self.put_run, dst as *mut u8, src.as_ptr(), src.len()) };
        true
    }

    /// Copies `len` bytes from `src` to `dst` (overlap allowed), streaming past the caches
    /// when the transfer is large and continues a long `run` (see [`stream`]).
    ///
    /// # Safety
    /// As [`std::ptr::copy`].
    #[inline]
    unsafe fn copy_in_run(&self, run: &StreamRun, dst: *mut u8, src: *const u8, len: usize) {
        if len >= STREAM_MIN && run.streams(dst as usize, len, self.stream_after) {
            // SAFETY: forwarded; `stream::copy` checks for overlap itself.
            unsafe { stream::copy(dst, src, len) };
        } else {
            // SAFETY: forwarded.
            unsafe { std::ptr::copy(src, dst, len) };
        }
    }

    /// `MPI_Get` into `dst` from displacement `disp` of member `t`, as [`DirectView::put`].
    #[inline]
    pub fn get(&self, t: i32, disp: isize, dst: &mut [u8]) -> bool {
        let Some(src) = self.range(t, disp, dst.len()) else {
            return false;
        };
        // SAFETY: as `put`, reading.
        unsafe { self.copy_in_run(&self.get_run, dst.as_mut_ptr(), src as *const u8, dst.len()) };
        true
    }

    /// `MPI_Accumulate` (`old` `None`), `MPI_Get_accumulate` or `MPI_Fetch_and_op` of `len`
    /// bytes at displacement `disp` of member `t`, under its accumulate lock as every other
    /// accumulate to it (local or applied for a remote origin), so each element is updated
    /// atomically. `data` is the operand (`len` bytes, empty for `MPI_NO_OP`); `old` gets
    /// the bytes before. False, nothing done, when `t` is not on this node, the range is not
    /// inside its memory, the operation is not defined for the type or the lengths do not
    /// hold whole elements: the general path reports those.
    #[allow(clippy::too_many_arguments)]
    pub fn accumulate(
        &self,
        t: i32,
        disp: isize,
        len: usize,
        op: AccOp,
        dtype: Dtype,
        data: &[u8],
        old: Option<&mut [u8]>,
    ) -> bool {
        let Some(at) = self.range(t, disp, len) else {
            return false;
        };
        let size = dtype.size();
        let fits = match op {
            AccOp::NoOp => data.is_empty(),
            AccOp::Replace => data.len() == len,
            AccOp::Reduce(o) => {
                data.len() == len && o.applies_to(dtype) && size > 0 && len.is_multiple_of(size)
            }
        };
        if !fits || old.as_ref().is_some_and(|o| o.len() != len) {
            return false;
        }
        // SAFETY: `range` found member `t`, so its control slot is in the mapping `_map`
        // keeps; the word is 4-byte aligned and only ever accessed atomically (module docs).
        let lock = unsafe { &*(self.members[t as usize].acc as *const AtomicU32) };
        take_acc_lock(lock);
        if let Some(o) = old {
            // SAFETY: `at..at + len` is inside member `t`'s memory (`range`); `o` is the
            // caller's buffer. Every accumulate to this memory holds the lock taken above.
            unsafe { std::ptr::copy(at as *const u8, o.as_mut_ptr(), len) };
        }
        match op {
            AccOp::NoOp => {}
            // SAFETY: as above, writing.
            AccOp::Replace => unsafe { std::ptr::copy(data.as_ptr(), at as *mut u8, len) },
            AccOp::Reduce(o) if !super::memory::overlaps(at, len, data) => {
                // In place: one pass over the window's bytes instead of a copy out and back.
                // SAFETY: `at..at + len` is inside member `t`'s memory (`range`) and does not
                // overlap `data`. The reference lives only for this reduction, while this
                // process holds the member's accumulate lock, which every other accumulate to
                // the member takes too; other accesses to these bytes now would conflict
                // with the accumulate, which MPI makes the program's error (the same race a
                // copy would have). The slice is never kept.
                let target = unsafe { std::slice::from_raw_parts_mut(at as *mut u8, len) };
                op::reduce_checked(o, dtype, data, target);
            }
            AccOp::Reduce(o) if len <= SHORT => {
                let mut buf = [0u8; SHORT];
                combine_at(at, o, dtype, data, &mut buf[..len]);
            }
            AccOp::Reduce(o) => {
                let step = CHUNK / size * size;
                let mut buf = [0u8; CHUNK];
                for (i, part) in data.chunks(step).enumerate() {
                    combine_at(at + i * step, o, dtype, part, &mut buf[..part.len()]);
                }
            }
        }
        lock.store(0, Ordering::Release);
        true
    }

    /// `MPI_Fetch_and_op` of one element of `dtype` at displacement `disp` of member `t`:
    /// its value before into `old`, combined with `data` (empty for `MPI_NO_OP`), under the
    /// member's accumulate lock like every accumulate. Sums of integers and floats, the
    /// latency path of shared counters and queues, take a kernel of their own;
    /// everything else goes through [`DirectView::accumulate`]. False as there.
    #[inline]
    pub fn fetch_and_op(
        &self,
        t: i32,
        disp: isize,
        op: AccOp,
        dtype: Dtype,
        data: &[u8],
        old: &mut [u8],
    ) -> bool {
        let len = old.len();
        let kernel: Option<FetchKernel> = match (op, dtype) {
            _ if data.len() != len || dtype.size() != len => None,
            (AccOp::Reduce(Op::Sum), Dtype::I8 | Dtype::U8) => Some(fetch_add_u8),
            (AccOp::Reduce(Op::Sum), Dtype::I16 | Dtype::U16) => Some(fetch_add_u16),
            (AccOp::Reduce(Op::Sum), Dtype::I32 | Dtype::U32) => Some(fetch_add_u32),
            (AccOp::Reduce(Op::Sum), Dtype::I64 | Dtype::U64) => Some(fetch_add_u64),
            (AccOp::Reduce(Op::Sum), Dtype::F32) => Some(fetch_add_f32),
            (AccOp::Reduce(Op::Sum), Dtype::F64) => Some(fetch_add_f64),
            _ => None,
        };
        let (Some(kernel), Some(at)) = (kernel, self.range(t, disp, len)) else {
            return self.accumulate(t, disp, len, op, dtype, data, Some(old));
        };
        // SAFETY: as in `accumulate`.
        let lock = unsafe { &*(self.members[t as usize].acc as *const AtomicU32) };
        take_acc_lock(lock);
        kernel(at, data, old);
        lock.store(0, Ordering::Release);
        true
    }

    /// `MPI_Compare_and_swap` of one element at displacement `disp` of member `t` (the old
    /// value into `old`), under its accumulate lock; false as [`DirectView::accumulate`].
    pub fn compare_and_swap(
        &self,
        t: i32,
        disp: isize,
        compare: &[u8],
        swap: &[u8],
        old: &mut [u8],
    ) -> bool {
        let len = compare.len();
        let Some(at) = self.range(t, disp, len) else {
            return false;
        };
        if swap.len() != len || old.len() != len {
            return false;
        }
        let kernel: CasKernel = match len {
            1 => cas_u8,
            2 => cas_u16,
            4 => cas_u32,
            8 => cas_u64,
            _ => cas_bytes,
        };
        // SAFETY: as in `accumulate`.
        let lock = unsafe { &*(self.members[t as usize].acc as *const AtomicU32) };
        take_acc_lock(lock);
        kernel(at, compare, swap, old);
        lock.store(0, Ordering::Release);
        true
    }

    /// `MPI_Win_flush(t)` (`t` `None`: `_all`, and the `_local` forms) of a window whose
    /// members are all on this node: direct operations are complete when they return, so a
    /// memory fence is the whole flush. False if the window has a member elsewhere or `t`
    /// is not a member.
    #[inline]
    pub fn flush(&self, t: Option<i32>) -> bool {
        let member = t.is_none_or(|t| usize::try_from(t).is_ok_and(|t| t < self.members.len()));
        if self.all_local && member {
            NodeMap::sync();
            return true;
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::super::wire::Segment;
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
    fn views_put_and_get_inside_a_member_and_refuse_everything_else() {
        let (a, b, _) = two_views(&[16, 8], false);
        let (va, vb) = (a.view(&[4, 1], 0), b.view(&[4, 1], 0));
        assert!(va.put(0, 2, &[1, 2, 3, 4]));
        let mut out = [0u8; 4];
        assert!(vb.get(0, 2, &mut out));
        assert_eq!(out, [1, 2, 3, 4], "displacement 2 of unit 4 is byte 8");
        assert!(!va.put(0, 3, &[0; 5]), "past the member's end");
        assert!(!va.put(1, 0, &[0; 9]), "past the second member's end");
        assert!(!va.put(2, 0, &[0]), "not a member");
        assert!(!va.put(-1, 0, &[0]) && !va.put(0, -1, &[0]));
        assert!(va.put(1, 7, &[9]) && vb.get(1, 7, &mut out[..1]) && out[0] == 9);
        assert!(va.flush(Some(1)) && va.flush(None) && !va.flush(Some(2)));
    }

    /// A run of large puts into consecutive memory streams past its first `stream_after`
    /// bytes, and so does a run of large gets into consecutive local memory: the data
    /// arrives exactly either way.
    #[test]
    fn runs_of_large_puts_and_gets_stream_and_stay_exact() {
        let piece = super::STREAM_MIN;
        let (a, b, _) = two_views(&[(4 * piece) as u64], false);
        let (va, vb) = (a.view(&[1], piece), b.view(&[1], piece));
        let data: Vec<u8> = (0..4 * piece).map(|i| (i * 13 + 1) as u8).collect();
        for k in 0..4 {
            let part = &data[k * piece..(k + 1) * piece];
            assert!(va.put(0, (k * piece) as isize, part), "put {k}");
        }
        assert!(va.flush(Some(0)));
        let mut back = vec![0u8; 4 * piece];
        for (k, chunk) in back.chunks_mut(piece).enumerate() {
            assert!(vb.get(0, (k * piece) as isize, chunk), "get {k}");
        }
        assert!(back == data, "streamed puts and gets must copy exactly");
    }

    #[test]
    fn view_accumulates_are_exact_against_each_other_and_the_engines_lock() {
        use crate::op::Op;
        let (a, b, _) = two_views(&[64], true);
        let (va, vb) = (a.view(&[8], 0), b.view(&[8], 0));
        let seg = [Segment { offset: 8, len: 8 }];
        std::thread::scope(|s| {
            for v in [&va, &vb] {
                s.spawn(move || {
                    for _ in 0..20_000 {
                        let one = 1i64.to_ne_bytes();
                        assert!(v.accumulate(
                            0,
                            1,
                            8,
                            AccOp::Reduce(Op::Sum),
                            Dtype::I64,
                            &one,
                            None
                        ));
                        let half = 0.5f64.to_ne_bytes();
                        assert!(v.accumulate(
                            0,
                            2,
                            8,
                            AccOp::Reduce(Op::Sum),
                            Dtype::F64,
                            &half,
                            None
                        ));
                    }
                });
            }
            // The engine's path for remote origins (`with_acc_lock` + `combine`) on the same
            // element.
            let mem = a.member(0).unwrap().clone();
            let a = &a;
            s.spawn(move || {
                for _ in 0..20_000 {
                    a.with_acc_lock(0, || {
                        mem.combine(
                            AccOp::Reduce(Op::Sum),
                            Dtype::I64,
                            &seg,
                            &1i64.to_ne_bytes(),
                        )
                        .unwrap()
                    });
                }
            });
        });
        let mut old = [0u8; 8];
        assert!(va.accumulate(0, 1, 8, AccOp::NoOp, Dtype::I64, &[], Some(&mut old)));
        assert_eq!(i64::from_ne_bytes(old), 60_000);
        assert!(vb.accumulate(0, 2, 8, AccOp::NoOp, Dtype::F64, &[], Some(&mut old)));
        assert_eq!(f64::from_ne_bytes(old), 20_000.0);
        let mut prev = [0u8; 8];
        let (c, w) = (60_000i64.to_ne_bytes(), 7i64.to_ne_bytes());
        assert!(vb.compare_and_swap(0, 1, &c, &w, &mut prev));
        assert_eq!(i64::from_ne_bytes(prev), 60_000);
        assert!(va.compare_and_swap(0, 1, &c, &9i64.to_ne_bytes(), &mut prev));
        assert_eq!(
            i64::from_ne_bytes(prev),
            7,
            "a failed compare leaves the value"
        );
        // Refused, nothing changed: an operation not defined for the type, a partial
        // element, a range past the end, a result buffer of the wrong length.
        let x = [1u8; 8];
        assert!(!va.accumulate(0, 1, 8, AccOp::Reduce(Op::Band), Dtype::F64, &x, None));
        assert!(!va.accumulate(0, 1, 6, AccOp::Reduce(Op::Sum), Dtype::I64, &x[..6], None));
        assert!(!va.accumulate(0, 8, 8, AccOp::Replace, Dtype::I64, &x, None));
        assert!(!va.accumulate(0, 1, 8, AccOp::Replace, Dtype::I64, &x, Some(&mut [0u8; 4])));
        assert!(va.accumulate(0, 1, 8, AccOp::NoOp, Dtype::I64, &[], Some(&mut old)));
        assert_eq!(i64::from_ne_bytes(old), 7);
    }

    /// `fetch_and_op`'s sum kernels (and the compare-and-swap ones) against each other and the general accumulate on the
    /// same element, from two views in two threads: every fetched value is distinct (no
    /// increment lost or seen twice); unaligned elements, wrapping, floats, and the
    /// operations and lengths that fall back to (or are refused by) `accumulate`.
    #[test]
    fn fetch_and_op_and_cas_kernels_are_exact_and_fall_back_for_the_rest() {
        use crate::op::Op;
        let (a, b, _) = two_views(&[64], true);
        let (va, vb) = (a.view(&[1], 0), b.view(&[1], 0));
        let sum = AccOp::Reduce(Op::Sum);
        let seen: Vec<Vec<i64>> = std::thread::scope(|s| {
            let hs: Vec<_> = [&va, &vb]
                .into_iter()
                .map(|v| {
                    s.spawn(move || {
                        let mut seen = Vec::new();
                        for i in 0..20_000 {
                            let mut old = [0u8; 8];
                            let one = 1i64.to_ne_bytes();
                            if i % 4 == 3 {
                                // The general path on the same element (offset 3: unaligned).
                                assert!(v.accumulate(
                                    0,
                                    3,
                                    8,
                                    sum,
                                    Dtype::I64,
                                    &one,
                                    Some(&mut old)
                                ));
                            } else {
                                assert!(v.fetch_and_op(0, 3, sum, Dtype::I64, &one, &mut old));
                            }
                            seen.push(i64::from_ne_bytes(old));
                        }
                        seen
                    })
                })
                .collect();
            hs.into_iter().map(|h| h.join().unwrap()).collect()
        });
        let mut all: Vec<i64> = seen.concat();
        all.sort_unstable();
        assert_eq!(all, (0..40_000).collect::<Vec<_>>());
        let mut old = [0u8; 8];
        assert!(va.fetch_and_op(0, 3, AccOp::NoOp, Dtype::I64, &[], &mut old));
        assert_eq!(i64::from_ne_bytes(old), 40_000);
        // u8 wraps; f32 adds; i32 max falls back to the general kernel.
        let mut b1 = [0u8; 1];
        assert!(va.fetch_and_op(0, 20, AccOp::Replace, Dtype::U8, &[250], &mut b1));
        assert!(va.fetch_and_op(0, 20, sum, Dtype::U8, &[10], &mut b1));
        assert_eq!(b1, [250]);
        assert!(vb.fetch_and_op(0, 20, AccOp::NoOp, Dtype::U8, &[], &mut b1));
        assert_eq!(b1, [4]);
        let mut f = [0u8; 4];
        assert!(va.fetch_and_op(
            0,
            24,
            AccOp::Replace,
            Dtype::F32,
            &1.5f32.to_ne_bytes(),
            &mut f
        ));
        assert!(vb.fetch_and_op(0, 24, sum, Dtype::F32, &2.25f32.to_ne_bytes(), &mut f));
        assert_eq!(f32::from_ne_bytes(f), 1.5);
        assert!(va.fetch_and_op(
            0,
            24,
            AccOp::Reduce(Op::Max),
            Dtype::I32,
            &0i32.to_ne_bytes(),
            &mut f
        ));
        assert_eq!(f32::from_ne_bytes(f), 3.75);
        // Compare-and-swap of each kernel's width and of 16 bytes, unaligned: swapped only
        // on an equal compare.
        for len in [1usize, 2, 4, 8, 16] {
            let (zero, ones, twos) = (vec![0u8; len], vec![1u8; len], vec![2u8; len]);
            let mut prev = vec![9u8; len];
            assert!(va.fetch_and_op(
                0,
                33,
                AccOp::Replace,
                Dtype::Opaque(len as u32),
                &zero,
                &mut prev.clone()
            ));
            assert!(vb.compare_and_swap(0, 33, &ones, &twos, &mut prev));
            assert_eq!(prev, zero, "{len}: value before");
            assert!(va.compare_and_swap(0, 33, &zero, &ones, &mut prev));
            assert_eq!(prev, zero);
            assert!(vb.compare_and_swap(0, 33, &zero, &twos, &mut prev));
            assert_eq!(
                prev, ones,
                "{len}: the first swap happened, the second did not"
            );
        }
        // Refused as `accumulate` refuses: a range past the end, an operand of another length,
        // an operation not defined for the type.
        assert!(!va.fetch_and_op(0, 60, sum, Dtype::I64, &[0; 8], &mut old));
        assert!(!va.fetch_and_op(0, 0, sum, Dtype::I64, &[0; 4], &mut old));
        assert!(!va.fetch_and_op(0, 0, AccOp::Reduce(Op::Band), Dtype::F64, &[0; 8], &mut old));
    }

    #[test]
    fn long_view_accumulates_combine_in_place_and_from_inside_the_window() {
        use crate::op::Op;
        let n = 3 * CHUNK + 24; // several chunks and a tail
        let (a, _b, _) = two_views(&[2 * n as u64], true);
        let v = a.view(&[1], 0);
        let ones: Vec<u8> = (0..n).map(|i| (i % 7) as u8).collect();
        assert!(v.put(0, 0, &ones));
        // From this process's memory: in place.
        let twos = vec![2u8; n];
        assert!(v.accumulate(0, 0, n, AccOp::Reduce(Op::Sum), Dtype::U8, &twos, None));
        // From the window itself (its second half, overlapping nothing) and then from an
        // overlapping range: chunk by chunk through the stack.
        assert!(v.put(0, n as isize, &vec![1u8; n]));
        let base = a.base(0).unwrap();
        // SAFETY: the member's memory is `2n` bytes from `base`, mapped while `a` lives; no
        // other access runs now.
        let second = unsafe { std::slice::from_raw_parts(base.add(n), n) };
        assert!(v.accumulate(0, 0, n, AccOp::Reduce(Op::Sum), Dtype::U8, second, None));
        // SAFETY: as above, the first `n + 8` bytes.
        let shifted = unsafe { std::slice::from_raw_parts(base.add(8), n) }.to_vec();
        let overlapping = unsafe { std::slice::from_raw_parts(base.add(8), n) };
        assert!(v.accumulate(
            0,
            0,
            n,
            AccOp::Reduce(Op::Sum),
            Dtype::U8,
            overlapping,
            None
        ));
        let mut out = vec![0u8; n];
        assert!(v.get(0, 0, &mut out));
        for i in 0..n {
            let before = (i % 7) as u8 + 3;
            assert_eq!(out[i], before.wrapping_add(shifted[i]), "byte {i}");
        }
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
