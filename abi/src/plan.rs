//! How a nonblocking or persistent collective's program buffers reach its schedule.
//!
//! A schedule works on bytes. Contiguous program memory is handed to it as it is; anything
//! else (a non-contiguous datatype, a reduction over a packed or padded view, per-peer
//! datatypes) goes through library staging: filled from the program's memory when the
//! collective starts ([`Plan::fill`], again at every `MPI_Start` of a persistent request)
//! and written back when it completes ([`Plan::drain`]). The staging lives in the request
//! and never moves, so the schedule may keep pointing at it (the invariant of
//! [`crate::requests`]). This module never starts anything itself.

use kestrel_pml::buf::UserBuf;

use crate::coll::{view_data, view_store, View};
use crate::error::MpiResult;
use crate::mem::{Region, Staging, VBuf};

/// Reads the program's data into staging bytes.
type Fill = Box<dyn Fn(&mut [u8]) -> MpiResult<()>>;
/// Writes staging bytes back into the program's memory.
type Drain = Box<dyn Fn(&[u8]) -> MpiResult<()>>;

/// The staging of one collective request and how to fill and drain it.
#[derive(Default)]
pub struct Plan {
    staging: Vec<Staging>,
    fills: Vec<(usize, Fill)>,
    drains: Vec<(usize, Drain)>,
}

impl std::fmt::Debug for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Plan({} staging buffers, {} filled, {} drained)",
            self.staging.len(),
            self.fills.len(),
            self.drains.len()
        )
    }
}

/// A buffer laid out in per-rank blocks for the engine: byte counts and displacements.
pub struct Blocks {
    /// The memory the schedule uses.
    pub buf: UserBuf,
    /// Bytes per rank.
    pub counts: Vec<usize>,
    /// Offset of each rank's block in `buf`.
    pub displs: Vec<usize>,
}

fn packed_displs(counts: &[usize]) -> Vec<usize> {
    kestrel_pml::nbc::algorithms::packed_displs(counts)
}

impl Plan {
    /// Whether nothing goes through staging.
    pub fn is_direct(&self) -> bool {
        self.staging.is_empty()
    }

    fn stage(&mut self, len: usize) -> (usize, UserBuf) {
        self.staging.push(Staging::zeroed(len));
        let i = self.staging.len() - 1;
        // SAFETY: the staging lives in this plan, which the request keeps (and never drops
        // or refills) while its schedule runs: the invariant of `crate::requests`.
        let buf = unsafe { self.staging[i].engine_buf() };
        (i, buf)
    }

    /// Library memory holding `data`, for a schedule to read or write: its index (for
    /// [`Plan::staged`]) and the buffer.
    pub fn owned(&mut self, data: Vec<u8>) -> (usize, UserBuf) {
        let (i, buf) = self.stage(data.len());
        self.staging[i].bytes_mut().copy_from_slice(&data);
        (i, buf)
    }

    /// The bytes of staging `i` (once the schedule completed).
    pub fn staged(&self, i: usize) -> &[u8] {
        self.staging[i].bytes()
    }

    /// A buffer the schedule only reads: `r` as it is when contiguous (and the view is the
    /// memory itself), else its packed (or view) form.
    pub fn input(&mut self, r: &Region, view: Option<View>) -> UserBuf {
        if r.is_contiguous() && matches!(view, None | Some(View::Raw(_))) {
            return r.span;
        }
        let len = view_len(r, view);
        let (i, buf) = self.stage(len);
        let r = r.clone();
        self.fills.push((
            i,
            Box::new(move |out: &mut [u8]| {
                let data = match view {
                    Some(v) => view_data(&r, v)?,
                    None => r.pack()?,
                };
                out.copy_from_slice(&data);
                Ok(())
            }),
        ));
        buf
    }

    /// A buffer the schedule writes (and with `read`, also reads first: `MPI_IN_PLACE`).
    pub fn output(&mut self, r: &Region, view: Option<View>, read: bool) -> UserBuf {
        if r.is_contiguous() && matches!(view, None | Some(View::Raw(_))) {
            return r.span;
        }
        let len = view_len(r, view);
        let (i, buf) = self.stage(len);
        if read {
            let r = r.clone();
            self.fills.push((
                i,
                Box::new(move |out: &mut [u8]| {
                    let data = match view {
                        Some(v) => view_data(&r, v)?,
                        None => r.pack()?,
                    };
                    out.copy_from_slice(&data);
                    Ok(())
                }),
            ));
        }
        let r = r.clone();
        self.drains.push((
            i,
            Box::new(move |data: &[u8]| {
                let mut r = r.clone();
                match view {
                    Some(v) => view_store(&mut r, v, data),
                    None => r.unpack(data).map(|_| ()),
                }
            }),
        ));
        buf
    }

    /// Per-rank blocks the schedule reads.
    pub fn input_blocks(&mut self, v: &VBuf) -> Blocks {
        self.blocks(v, true, false, None)
    }

    /// Per-rank blocks the schedule writes (with `read`, filled first; `skip` is a block
    /// written back never, e.g. the root's own in-place block).
    pub fn output_blocks(&mut self, v: &VBuf, read: bool, skip: Option<usize>) -> Blocks {
        self.blocks(v, read, true, skip)
    }

    fn blocks(&mut self, v: &VBuf, read: bool, write: bool, skip: Option<usize>) -> Blocks {
        let counts: Vec<usize> = (0..v.counts.len()).map(|r| v.packed_len(r)).collect();
        if v.ty.is_contiguous() {
            return Blocks {
                buf: v.hull,
                counts,
                displs: v.origins.clone(),
            };
        }
        let displs = packed_displs(&counts);
        let total = counts.iter().sum();
        let (i, buf) = self.stage(total);
        if read {
            let (v, counts, displs) = (clone_vbuf(v), counts.clone(), displs.clone());
            self.fills.push((
                i,
                Box::new(move |out: &mut [u8]| {
                    for r in 0..counts.len() {
                        let b = v.pack_block(r)?;
                        out[displs[r]..displs[r] + counts[r]].copy_from_slice(&b);
                    }
                    Ok(())
                }),
            ));
        }
        if write {
            let (v, counts, displs) = (clone_vbuf(v), counts.clone(), displs.clone());
            self.drains.push((
                i,
                Box::new(move |data: &[u8]| {
                    for r in (0..counts.len()).filter(|&r| Some(r) != skip) {
                        v.unpack_block(r, &data[displs[r]..displs[r] + counts[r]])?;
                    }
                    Ok(())
                }),
            ));
        }
        Blocks {
            buf,
            counts,
            displs,
        }
    }

    /// Per-peer regions of their own datatypes (`MPI_Alltoallw`), packed end to end.
    pub fn region_blocks(&mut self, rs: &[Region], read: bool, write: bool) -> Blocks {
        let counts: Vec<usize> = rs.iter().map(Region::packed_len).collect();
        let displs = packed_displs(&counts);
        let (i, buf) = self.stage(counts.iter().sum());
        if read {
            let (rs, displs) = (rs.to_vec(), displs.clone());
            self.fills.push((
                i,
                Box::new(move |out: &mut [u8]| {
                    for (r, d) in rs.iter().zip(&displs) {
                        let b = r.pack()?;
                        out[*d..d + b.len()].copy_from_slice(&b);
                    }
                    Ok(())
                }),
            ));
        }
        if write {
            let (rs, counts, displs) = (rs.to_vec(), counts.clone(), displs.clone());
            self.drains.push((
                i,
                Box::new(move |data: &[u8]| {
                    for ((r, c), d) in rs.iter().zip(&counts).zip(&displs) {
                        r.unpack(&data[*d..d + c])?;
                    }
                    Ok(())
                }),
            ));
        }
        Blocks {
            buf,
            counts,
            displs,
        }
    }

    /// Copies the program's data into the staging (before a run starts).
    pub fn fill(&mut self) -> MpiResult<()> {
        for (i, f) in &self.fills {
            f(self.staging[*i].bytes_mut())?;
        }
        Ok(())
    }

    /// Writes the results back into the program's memory (after a run completed).
    pub fn drain(&self) -> MpiResult<()> {
        for (i, d) in &self.drains {
            d(self.staging[*i].bytes())?;
        }
        Ok(())
    }
}

impl crate::requests::Staged for Plan {
    fn fill(&mut self) -> MpiResult<()> {
        Plan::fill(self)
    }
    fn drain(&self) -> MpiResult<()> {
        Plan::drain(self)
    }
}

fn view_len(r: &Region, view: Option<View>) -> usize {
    match view {
        Some(View::Struct(_)) => r.count * r.ty.extent().max(0) as usize,
        _ => r.packed_len(),
    }
}

fn clone_vbuf(v: &VBuf) -> VBuf {
    VBuf {
        hull: v.hull,
        origins: v.origins.clone(),
        counts: v.counts.clone(),
        ty: v.ty.clone(),
    }
}
