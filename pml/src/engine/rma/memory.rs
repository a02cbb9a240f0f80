//! The memory a window exposes, and the only code that reads and writes it for peers.
//!
//! A window's memory belongs to the application (`MPI_Win_create`), to the library
//! (`MPI_Win_allocate`) or is a set of regions attached later (`MPI_Win_create_dynamic`).
//! Peers' operations arrive as byte ranges ([`Segment`]s); every range is checked against
//! the exposed regions before any byte moves, so a peer's wrong offset is an error, never a
//! write outside the window. Bytes move with raw copies, never through Rust references,
//! because other processes (shared windows) and the application may touch the same memory
//! under MPI's rules, which Rust's aliasing rules do not describe. The one exception is a
//! reduction in place ([`WinMemory::combine`]): a slice over the target bytes for the length
//! of one reduction, under the accumulate lock, as the node's direct path does.

use super::wire::{AccOp, Segment};
use crate::op::{self, Dtype};

/// Accumulates up to this many bytes combine in one small stack buffer (fetch-and-op, the
/// latency tests).
const SMALL: usize = 128;

/// Longer ones combine this many bytes at a time: read onto the stack, reduced there,
/// written back, so the window's memory streams through the cache once.
const CHUNK: usize = 4096;

/// Whether the `len` bytes at address `addr` overlap `data` (an operand inside the window).
pub(super) fn overlaps(addr: usize, len: usize, data: &[u8]) -> bool {
    ranges_overlap(addr, len, data.as_ptr() as usize, data.len())
}

/// Whether `a_len` bytes at address `a` and `b_len` bytes at address `b` overlap.
pub(super) fn ranges_overlap(a: usize, a_len: usize, b: usize, b_len: usize) -> bool {
    b < a + a_len && a < b + b_len
}

/// One exposed region: start address and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Region {
    base: usize,
    len: usize,
}

/// The memory a window exposes to peers.
#[derive(Debug, Clone, Default)]
pub struct WinMemory {
    /// Fixed windows: one region, offsets relative to it. Dynamic: attached regions,
    /// offsets are addresses.
    regions: Vec<Region>,
    dynamic: bool,
}

/// A range outside the window: offset and length asked, and what the window exposes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OutOfRange(pub String);

impl WinMemory {
    /// A window of `len` bytes at `base`.
    ///
    /// # Safety
    /// `base..base + len` must stay valid for reads and writes until the window is freed,
    /// and the caller accepts that peers' operations write it during any call into the
    /// engine (MPI's rules say when the application may touch it).
    pub unsafe fn fixed(base: *mut u8, len: usize) -> WinMemory {
        WinMemory {
            regions: vec![Region {
                base: base as usize,
                len,
            }],
            dynamic: false,
        }
    }

    /// A dynamic window with no region attached yet.
    pub fn dynamic() -> WinMemory {
        WinMemory {
            regions: Vec::new(),
            dynamic: true,
        }
    }

    /// The start of a fixed window's memory (`None` for a dynamic window).
    pub fn base(&self) -> Option<usize> {
        if self.dynamic {
            None
        } else {
            self.regions.first().map(|r| r.base)
        }
    }

    /// Whether offsets are addresses (a dynamic window).
    pub fn is_dynamic(&self) -> bool {
        self.dynamic
    }

    /// Exposes `len` bytes at `base` in a dynamic window.
    ///
    /// # Safety
    /// As [`WinMemory::fixed`], until [`WinMemory::detach`] of `base`.
    pub unsafe fn attach(&mut self, base: *mut u8, len: usize) {
        self.regions.push(Region {
            base: base as usize,
            len,
        });
    }

    /// Stops exposing the region attached at `base`; false when none was.
    pub fn detach(&mut self, base: *mut u8) -> bool {
        let before = self.regions.len();
        self.regions.retain(|r| r.base != base as usize);
        self.regions.len() != before
    }

    /// The address of `seg` if it lies wholly inside an exposed region.
    fn resolve(&self, seg: Segment) -> Result<usize, OutOfRange> {
        let len = seg.len as usize;
        if self.dynamic {
            let addr = usize::try_from(seg.offset).map_err(|_| self.out_of_range(seg))?;
            for r in &self.regions {
                if addr >= r.base
                    && addr
                        .checked_add(len)
                        .is_some_and(|end| end <= r.base + r.len)
                {
                    return Ok(addr);
                }
            }
            return Err(self.out_of_range(seg));
        }
        let r = self.regions.first().ok_or_else(|| self.out_of_range(seg))?;
        let off = usize::try_from(seg.offset).map_err(|_| self.out_of_range(seg))?;
        match off.checked_add(len) {
            Some(end) if end <= r.len => Ok(r.base + off),
            _ => Err(self.out_of_range(seg)),
        }
    }

    fn out_of_range(&self, seg: Segment) -> OutOfRange {
        if self.dynamic {
            OutOfRange(format!(
                "{} bytes at address {:#x} are not in any region attached to the dynamic window ({} attached)",
                seg.len,
                seg.offset,
                self.regions.len()
            ))
        } else {
            let size = self.regions.first().map(|r| r.len).unwrap_or(0);
            OutOfRange(format!(
                "{} bytes at offset {} run past the window's {size} bytes",
                seg.len, seg.offset
            ))
        }
    }

    /// Checks every segment before anything moves.
    pub fn check(&self, segs: &[Segment]) -> Result<(), OutOfRange> {
        segs.iter().try_for_each(|&s| self.resolve(s).map(|_| ()))
    }

    /// Copies `data` into `segs` (checked first; `data` is their total length).
    pub fn write(&self, segs: &[Segment], data: &[u8]) -> Result<(), OutOfRange> {
        if segs.len() > 1 {
            // Nothing moves unless every range is inside (one range: `resolve` below).
            self.check(segs)?;
        }
        let mut at = 0;
        for &s in segs {
            let addr = self.resolve(s)?;
            let n = s.len as usize;
            let src = &data[at..at + n];
            // SAFETY: `resolve` checked that the range lies in a region the window's creator
            // promised valid for writes (`fixed`, `attach`); `src` is a separate Vec or
            // message buffer, so the ranges do not overlap.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, n);
            }
            at += n;
        }
        Ok(())
    }

    /// Copies the bytes of `segs` into `out` (checked first; `out` is their total length).
    pub fn read_into(&self, segs: &[Segment], out: &mut [u8]) -> Result<(), OutOfRange> {
        if segs.len() > 1 {
            self.check(segs)?;
        }
        let total: u64 = segs.iter().map(|s| u64::from(s.len)).sum();
        if total != out.len() as u64 {
            return Err(OutOfRange(format!(
                "{total} bytes of window ranges for a {}-byte buffer",
                out.len()
            )));
        }
        let mut at = 0;
        for &s in segs {
            let addr = self.resolve(s)?;
            let n = s.len as usize;
            let dst = &mut out[at..at + n];
            // SAFETY: as in `read`; `dst` is the caller's buffer, not window memory.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), n);
            }
            at += n;
        }
        Ok(())
    }

    /// `target = origin OP target` over `segs` with operand `data`, element by element of
    /// `dtype` (the caller holds whatever makes it atomic: the accumulate lock). Nothing
    /// changes when it fails: a range outside the window, `data` not as long as the ranges,
    /// or an operation not defined for the type.
    pub fn combine(
        &self,
        op: AccOp,
        dtype: Dtype,
        segs: &[Segment],
        data: &[u8],
    ) -> Result<(), String> {
        let o = match op {
            AccOp::NoOp => return self.check(segs).map_err(|e| e.0),
            AccOp::Replace => return self.write(segs, data).map_err(|e| e.0),
            AccOp::Reduce(o) => o,
        };
        if data.len() <= SMALL {
            let mut buf = [0u8; SMALL];
            let cur = &mut buf[..data.len()];
            self.read_into(segs, cur).map_err(|e| e.0)?;
            op::reduce(o, dtype, data, cur).map_err(|e| e.to_string())?;
            return self.write(segs, cur).map_err(|e| e.0);
        }
        let size = dtype.size();
        let whole =
            size > 0 && size <= CHUNK && segs.iter().all(|s| (s.len as usize).is_multiple_of(size));
        if !whole {
            // Ranges that split elements (or elements longer than a chunk): all at once.
            let mut cur = Vec::with_capacity(data.len());
            self.read(segs, &mut cur).map_err(|e| e.0)?;
            op::reduce(o, dtype, data, &mut cur).map_err(|e| e.to_string())?;
            return self.write(segs, &cur).map_err(|e| e.0);
        }
        self.check(segs).map_err(|e| e.0)?;
        let total: u64 = segs.iter().map(|s| u64::from(s.len)).sum();
        if total != data.len() as u64 {
            return Err(format!(
                "{total} bytes of window ranges for {} bytes of data",
                data.len()
            ));
        }
        // Whether the operation applies to the type, decided before any byte changes, so a
        // failure leaves the memory as it was.
        op::reduce(o, dtype, &[], &mut []).map_err(|e| e.to_string())?;
        let step = CHUNK / size * size;
        let mut buf = [0u8; CHUNK];
        let mut at = 0;
        for s in segs {
            let len = s.len as usize;
            let addr = self.resolve(*s).map_err(|e| e.0)?;
            let operand = &data[at..at + len];
            if !overlaps(addr, len, data) {
                // In place: one pass over the window's bytes instead of a copy out and back
                // (NWChem's accumulates spent most of their time in those two copies).
                // SAFETY: `resolve` checked that `addr..addr + len` lies in an exposed region
                // valid for writes, and it does not overlap `data`. The slice lives only for
                // this reduction, while the caller holds what makes accumulates atomic (the
                // accumulate lock every accumulate to this memory takes); another access to
                // these bytes now would conflict with the accumulate, which MPI makes the
                // program's error (the same race the copies had). It is never kept.
                #[allow(unsafe_code)]
                let target = unsafe { std::slice::from_raw_parts_mut(addr as *mut u8, len) };
                op::reduce_checked(o, dtype, operand, target);
                at += len;
                continue;
            }
            let mut done = 0;
            while done < len {
                let n = step.min(len - done);
                let part = [Segment {
                    offset: s.offset + done as u64,
                    len: n as u32,
                }];
                let cur = &mut buf[..n];
                self.read_into(&part, cur).map_err(|e| e.0)?;
                op::reduce(o, dtype, &data[at..at + n], cur).map_err(|e| e.to_string())?;
                self.write(&part, cur).map_err(|e| e.0)?;
                done += n;
                at += n;
            }
        }
        Ok(())
    }

    /// Appends the bytes of `segs` to `out` (checked first).
    pub fn read(&self, segs: &[Segment], out: &mut Vec<u8>) -> Result<(), OutOfRange> {
        self.check(segs)?;
        for &s in segs {
            let addr = self.resolve(s)?;
            let n = s.len as usize;
            let start = out.len();
            out.resize(start + n, 0);
            // SAFETY: as in `write`, the range is inside an exposed region; `out` was just
            // grown to hold it and is not window memory.
            #[allow(unsafe_code)]
            unsafe {
                std::ptr::copy_nonoverlapping(addr as *const u8, out[start..].as_mut_ptr(), n);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_outside_the_window_are_refused_before_anything_moves() {
        let mut mem = vec![0u8; 16];
        // SAFETY: `mem` outlives `w` and nothing else touches it meanwhile.
        #[allow(unsafe_code)]
        let w = unsafe { WinMemory::fixed(mem.as_mut_ptr(), mem.len()) };
        let ok = Segment { offset: 4, len: 4 };
        let past = Segment { offset: 14, len: 4 };
        assert!(w.write(&[ok, past], &[1; 8]).is_err());
        w.write(&[ok], &[7; 4]).unwrap();
        let mut out = Vec::new();
        w.read(&[Segment { offset: 0, len: 16 }], &mut out).unwrap();
        assert_eq!(&out[..8], &[0, 0, 0, 0, 7, 7, 7, 7]);
        let huge = Segment {
            offset: u64::MAX - 1,
            len: 4,
        };
        assert!(w.check(&[huge]).unwrap_err().0.contains("past the window"));
    }

    #[test]
    fn accumulates_reduce_in_place_and_change_nothing_when_the_op_does_not_apply() {
        let f = |v: &[f64]| v.iter().flat_map(|x| x.to_ne_bytes()).collect::<Vec<u8>>();
        let mut mem = f(&[1.0; 64]);
        // SAFETY: `mem` outlives `w`; only `w` touches it until the reads below.
        #[allow(unsafe_code)]
        let w = unsafe { WinMemory::fixed(mem.as_mut_ptr(), mem.len()) };
        // Two ranges past the small-buffer size: elements 0..20 and 40..60.
        let segs = [
            Segment {
                offset: 0,
                len: 160,
            },
            Segment {
                offset: 320,
                len: 160,
            },
        ];
        let data = f(&(0..40).map(f64::from).collect::<Vec<_>>());
        w.combine(AccOp::Reduce(op::Op::Sum), Dtype::F64, &segs, &data)
            .unwrap();
        // An op that does not apply to doubles fails before any byte changes.
        assert!(w
            .combine(AccOp::Reduce(op::Op::Bxor), Dtype::F64, &segs, &data)
            .is_err());
        let mut out = Vec::new();
        w.read(
            &[Segment {
                offset: 0,
                len: 512,
            }],
            &mut out,
        )
        .unwrap();
        let got: Vec<f64> = out
            .chunks_exact(8)
            .map(|c| f64::from_ne_bytes(c.try_into().unwrap()))
            .collect();
        for (i, &g) in got.iter().enumerate() {
            let want = match i {
                0..20 => 1.0 + i as f64,
                40..60 => 1.0 + (i - 20) as f64,
                _ => 1.0,
            };
            assert_eq!(g, want, "element {i}");
        }
        // An operand inside the window, overlapping the target (elements 0..20 onto 10..30),
        // takes the copy: every target element combines with the operand as it was.
        // SAFETY: `mem` outlives the slice; the copy path reads the operand before it writes.
        #[allow(unsafe_code)]
        let inside = unsafe { std::slice::from_raw_parts(mem.as_ptr(), 160) };
        w.combine(
            AccOp::Reduce(op::Op::Sum),
            Dtype::F64,
            &[Segment {
                offset: 80,
                len: 160,
            }],
            inside,
        )
        .unwrap();
        let at = |i: usize| f64::from_ne_bytes(mem[8 * i..8 * i + 8].try_into().unwrap());
        // Element 10 + k was 11 + k below 20 and 1 from 20; the operand's k is 1 + k.
        assert_eq!(at(10), 11.0 + 1.0);
        assert_eq!(at(19), 20.0 + 10.0);
        assert_eq!(at(29), 1.0 + 20.0);
    }

    #[test]
    fn a_dynamic_window_exposes_only_attached_regions() {
        let mut a = vec![0u8; 8];
        let mut w = WinMemory::dynamic();
        let addr = a.as_mut_ptr() as u64;
        assert!(w
            .check(&[Segment {
                offset: addr,
                len: 1
            }])
            .is_err());
        // SAFETY: `a` outlives the attachment (detached below).
        #[allow(unsafe_code)]
        unsafe {
            w.attach(a.as_mut_ptr(), a.len())
        };
        w.write(
            &[Segment {
                offset: addr + 2,
                len: 2,
            }],
            &[9, 9],
        )
        .unwrap();
        assert!(w
            .check(&[Segment {
                offset: addr + 6,
                len: 4
            }])
            .is_err());
        assert!(w.detach(a.as_mut_ptr()));
        assert!(w
            .check(&[Segment {
                offset: addr,
                len: 1
            }])
            .is_err());
        assert_eq!(a, [0, 0, 9, 9, 0, 0, 0, 0]);
    }
}
