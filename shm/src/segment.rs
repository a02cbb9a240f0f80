//! A process's segment: the file, its layout, its header, and the checked decoding of a peer's
//! header and fragment references.
//!
//! Layout (offsets in bytes, every region 64-byte aligned):
//!
//! | region | offset | size | owner writes | peers write |
//! |---|---|---|---|---|
//! | header | 0 | 256 | all fields at creation; `attach_count` once after the modex (atomic RMW) | `attach_count`, `fbox_available` (atomic RMW) |
//! | receive queue | `fifo_off` | [`fifo::footprint`] | consumer state | producers (see `fifo`) |
//! | fast boxes | `fbox_off` | `fbox_slots` × [`fbox::footprint`] | a box it set up carries owner → the one peer it named in the set-up fragment | that peer writes `consumed` of its box |
//! | fragments | `frag_off` | `frag_count` × (64 + `frag_size`) | header and payload of a fragment it owns | nothing |
//!
//! Header words (u64 at 8·k): 0 magic, 1 version, 2 owner local rank, 3 total size,
//! 4 fifo_off, 5 fifo capacity, 6 fbox_off, 7 fbox ring size, 8 local size, 9 frag_off,
//! 10 frag count, 11 frag size, 12 owner pid, 13 single-copy probe address,
//! 14 `attach_count` (each peer adds 1 after mapping; the owner adds [`ATTACH_DONE`] minus the
//! number of peers that will map it once the modex told it; the addition that makes the word
//! exactly [`ATTACH_DONE`] is the last one, and its maker unlinks the file), 15
//! `fbox_available` (receivers' budget of incoming fast boxes, decremented by a sender that
//! sets one up), 16 `fbox_slots` (outgoing fast boxes the owner may set up, at most
//! `shm_fbox_max` and one per peer). Everything except words 14-15 is written once before the
//! segment's name is published, so peers read it with plain loads after the PMI fence.
//!
//! Memory per rank is therefore bounded whatever the node's size: the fast boxes are a pool of
//! `fbox_slots` rings (not one per peer), the fragments are the rank's own; only the receive
//! queue (16 bytes per slot, `2 × frag_count × local_size` slots) grows with the node, so a
//! node's total grows linearly with its rank count. A sender takes a slot when a peer has had
//! `shm_fbox_threshold` messages and the receiver still has budget; its `FBOX_SETUP` fragment
//! carries the slot index (8 bytes, checked against the peer's `fbox_slots`).
//!
//! A fragment reference (the items of receive queues) is
//! `RETURN (bit 63) | owner local rank (bits 32-47) | fragment index (bits 0-31)`.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;

use crate::mem::{Mapping, SharedMem};
use crate::{fbox, fifo};

const MAGIC: u64 = u64::from_le_bytes(*b"KSTRLSHM");
/// 3: `attach_count` counts towards [`ATTACH_DONE`] (2 compared it with the node's size).
const VERSION: u64 = 3;
/// Bytes of the segment header.
pub const HEADER: usize = 256;
/// Offset of `attach_count`.
pub const ATTACH_COUNT: usize = 14 * 8;
/// The value of `attach_count` when every expected peer mapped the segment and the owner said
/// how many to expect (no count of peers reaches it alone: a node has fewer than 2^32 ranks).
pub const ATTACH_DONE: u64 = 1 << 32;
/// Offset of `fbox_available`.
pub const FBOX_AVAILABLE: usize = 15 * 8;
/// Offset of `fbox_slots`.
const FBOX_SLOTS: usize = 16 * 8;
/// Most fast-box slots a segment may have (bounds a peer's claim).
pub const MAX_FBOX_SLOTS: usize = 4096;
/// Bytes of a fragment header.
pub const FRAG_HEADER: usize = 64;
/// Bit marking a reference on its way back to its owner.
pub const RETURN: u64 = 1 << 63;

/// Fragment kinds (byte 5 of the fragment header word).
pub mod kind {
    /// A message for the messaging layer.
    pub const DATA: u8 = 1;
    /// The sender set up a fast box toward the receiver.
    pub const FBOX_SETUP: u8 = 2;
}

fn align64(n: usize) -> usize {
    (n + 63) & !63
}

/// Sizes that shape a segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// Ranks on the node.
    pub local_size: usize,
    /// Receive queue slots (a power of two).
    pub fifo_capacity: usize,
    /// Fast-box ring bytes (a power of two).
    pub fbox_size: usize,
    /// Fast boxes in the owner's pool (outgoing boxes it may set up).
    pub fbox_slots: usize,
    /// Fragments owned.
    pub frag_count: usize,
    /// Payload bytes per fragment.
    pub frag_size: usize,
}

/// Where each region of a segment is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// The sizes.
    pub geometry: Geometry,
    /// Receive queue offset.
    pub fifo_off: usize,
    /// First fast box offset.
    pub fbox_off: usize,
    /// First fragment offset.
    pub frag_off: usize,
    /// Total bytes.
    pub total: usize,
}

impl Geometry {
    /// The layout of a segment with these sizes.
    pub fn layout(&self) -> Layout {
        let fifo_off = HEADER;
        let fbox_off = align64(fifo_off + fifo::footprint(self.fifo_capacity));
        let frag_off = align64(fbox_off + self.fbox_slots * fbox::footprint(self.fbox_size));
        let total = align64(frag_off + self.frag_count * (FRAG_HEADER + self.frag_size));
        Layout {
            geometry: *self,
            fifo_off,
            fbox_off,
            frag_off,
            total,
        }
    }
}

impl Layout {
    /// Offset of fast-box slot `slot` (below `fbox_slots`).
    pub fn fbox(&self, slot: usize) -> usize {
        self.fbox_off + slot * fbox::footprint(self.geometry.fbox_size)
    }

    /// Offset of fragment `index`.
    pub fn frag(&self, index: usize) -> usize {
        self.frag_off + index * (FRAG_HEADER + self.geometry.frag_size)
    }
}

/// A peer's segment header that does not describe a usable segment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHeader(pub String);

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// What a peer's header says, after checking that it is self-consistent and fits the mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerHeader {
    /// Its layout.
    pub layout: Layout,
    /// Its owner's local rank.
    pub owner: usize,
    /// Its owner's pid.
    pub pid: u32,
    /// Address of the owner's single-copy probe word.
    pub probe_addr: u64,
}

/// Writes the header of a new segment (before anyone else can map it).
pub fn write_header(
    mem: &impl SharedMem,
    layout: &Layout,
    owner: usize,
    pid: u32,
    probe_addr: u64,
    fbox_max: usize,
) {
    let g = layout.geometry;
    let words = [
        MAGIC,
        VERSION,
        owner as u64,
        layout.total as u64,
        layout.fifo_off as u64,
        g.fifo_capacity as u64,
        layout.fbox_off as u64,
        g.fbox_size as u64,
        g.local_size as u64,
        layout.frag_off as u64,
        g.frag_count as u64,
        g.frag_size as u64,
        u64::from(pid),
        probe_addr,
        0,
        fbox_max as u64,
        g.fbox_slots as u64,
    ];
    for (i, w) in words.iter().enumerate() {
        mem.store(i * 8, *w, Relaxed);
    }
    fifo::init(mem, layout.fifo_off, g.fifo_capacity);
}

/// Decodes and checks a peer's header against the size of its mapping and the node's size.
pub fn read_header(mem: &impl SharedMem, local_size: usize) -> Result<PeerHeader, BadHeader> {
    let w = |i: usize| mem.load(i * 8, Relaxed);
    let bad = |why: &str| Err(BadHeader(why.to_string()));
    if mem.size() < HEADER {
        return bad("segment smaller than its header");
    }
    if w(0) != MAGIC {
        return bad("no Kestrel segment magic (another program's file, or not yet initialized)");
    }
    if w(1) != VERSION {
        return Err(BadHeader(format!(
            "segment version {} but this Kestrel speaks {VERSION}",
            w(1)
        )));
    }
    let as_usize = |v: u64| usize::try_from(v).unwrap_or(usize::MAX);
    let geometry = Geometry {
        local_size: as_usize(w(8)),
        fifo_capacity: as_usize(w(5)),
        fbox_size: as_usize(w(7)),
        fbox_slots: as_usize(mem.load(FBOX_SLOTS, Relaxed)),
        frag_count: as_usize(w(10)),
        frag_size: as_usize(w(11)),
    };
    if geometry.local_size != local_size {
        return Err(BadHeader(format!(
            "segment made for {} local ranks, this node has {local_size}",
            geometry.local_size
        )));
    }
    if !geometry.fifo_capacity.is_power_of_two() || geometry.fifo_capacity > 1 << 24 {
        return bad("receive queue capacity is not a sane power of two");
    }
    if !geometry.fbox_size.is_power_of_two() || !(256..=1 << 30).contains(&geometry.fbox_size) {
        return bad("fast-box size is not a sane power of two");
    }
    if geometry.fbox_slots > MAX_FBOX_SLOTS || geometry.fbox_slots >= local_size.max(1) {
        return bad("fast-box slot count is out of range");
    }
    if geometry.frag_count > 1 << 24 || geometry.frag_size > 1 << 30 {
        return bad("fragment geometry is out of range");
    }
    // Every fragment starts with a header word loaded atomically: the fragment stride must
    // keep the 8-byte alignment of the region.
    if !geometry.frag_size.is_multiple_of(8) {
        return bad("fragment size is not a multiple of 8 (misaligned fragment headers)");
    }
    let layout = geometry.layout();
    let (fifo_off, fbox_off, frag_off, total) = (
        as_usize(w(4)),
        as_usize(w(6)),
        as_usize(w(9)),
        as_usize(w(3)),
    );
    if (fifo_off, fbox_off, frag_off, total)
        != (
            layout.fifo_off,
            layout.fbox_off,
            layout.frag_off,
            layout.total,
        )
    {
        return bad("region offsets do not match the geometry");
    }
    if layout.total > mem.size() {
        return Err(BadHeader(format!(
            "segment claims {} bytes but the file has {}",
            layout.total,
            mem.size()
        )));
    }
    let owner = as_usize(w(2));
    if owner >= local_size {
        return bad("owner local rank out of range");
    }
    Ok(PeerHeader {
        layout,
        owner,
        pid: u32::try_from(w(12)).unwrap_or(0),
        probe_addr: w(13),
    })
}

/// A fragment reference, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FragRef {
    /// Returning to its owner.
    pub returning: bool,
    /// Owner's local rank.
    pub owner: usize,
    /// Index in the owner's fragment array.
    pub index: usize,
}

impl FragRef {
    /// Encodes the reference.
    pub fn encode(&self) -> u64 {
        (if self.returning { RETURN } else { 0 }) | ((self.owner as u64) << 32) | self.index as u64
    }

    /// Decodes a queue item; fails on bits that no sender sets or an owner off the node.
    pub fn decode(v: u64, local_size: usize) -> Option<FragRef> {
        if v & !(RETURN | (0xffff << 32) | 0xffff_ffff) != 0 {
            return None;
        }
        let owner = ((v >> 32) & 0xffff) as usize;
        (owner < local_size).then_some(FragRef {
            returning: v & RETURN != 0,
            owner,
            index: (v & 0xffff_ffff) as usize,
        })
    }
}

/// The first word of a fragment header: `len (0-31) | am (32-39) | kind (40-47)`.
pub fn frag_word(len: usize, am: u8, kind: u8) -> u64 {
    len as u64 | (u64::from(am) << 32) | (u64::from(kind) << 40)
}

/// Decodes a fragment header word against the fragment size.
pub fn decode_frag_word(w: u64, frag_size: usize) -> Option<(usize, u8, u8)> {
    let len = (w & 0xffff_ffff) as usize;
    let am = (w >> 32) as u8;
    let kind = (w >> 40) as u8;
    (w >> 48 == 0 && len <= frag_size && (kind == kind::DATA || kind == kind::FBOX_SETUP))
        .then_some((len, am, kind))
}

/// Why a segment could not be created.
#[derive(Debug)]
pub struct CreateError(pub String);

impl std::fmt::Display for CreateError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0)
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1 << 20) as f64)
}

/// Free bytes in the file system holding `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let st = nix::sys::statvfs::statvfs(dir).map_err(std::io::Error::from)?;
    Ok(st.blocks_available() as u64 * st.fragment_size() as u64)
}

/// Creates, sizes and maps a new segment file (mode 0600), reserving its pages so that a full
/// file system is an error now rather than SIGBUS later.
pub fn create(dir: &Path, name: &str, layout: &Layout) -> Result<(PathBuf, Mapping), CreateError> {
    let path = dir.join(name);
    let need_all = layout.total as u64 * layout.geometry.local_size as u64;
    if let Ok(free) = free_bytes(dir) {
        if free < layout.total as u64 {
            return Err(CreateError(format!(
                "{} has {} free, the shm transport needs {} for {} local ranks ({} each); \
                 enlarge it (docker --shm-size, or mount -o remount,size=... {}) or set \
                 KESTREL_SHM_DIR to a larger tmpfs directory",
                dir.display(),
                mib(free),
                mib(need_all),
                layout.geometry.local_size,
                mib(layout.total as u64),
                dir.display()
            )));
        }
    }
    let file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&path)
        .map_err(|e| {
            let fix = if !dir.exists() {
                format!(
                    "the directory {} does not exist; create it or set KESTREL_SHM_DIR to an \
                     existing tmpfs directory",
                    dir.display()
                )
            } else {
                "make the directory writable or set KESTREL_SHM_DIR to a writable tmpfs \
                 directory"
                    .to_string()
            };
            CreateError(format!(
                "cannot create segment {}: {e}; {fix}",
                path.display()
            ))
        })?;
    let reserve = nix::fcntl::posix_fallocate(
        std::os::fd::AsRawFd::as_raw_fd(&file),
        0,
        layout.total as i64,
    );
    if let Err(e) = reserve {
        let _ = std::fs::remove_file(&path);
        let free = free_bytes(dir)
            .map(mib)
            .unwrap_or_else(|_| "unknown".into());
        return Err(CreateError(format!(
            "cannot reserve {} for segment {} ({e}); {} has {free} free and {} local ranks \
             need {}; enlarge it (docker --shm-size) or set KESTREL_SHM_DIR to a larger tmpfs",
            mib(layout.total as u64),
            path.display(),
            dir.display(),
            layout.geometry.local_size,
            mib(need_all)
        )));
    }
    let map = Mapping::map(&file, layout.total).map_err(|e| {
        let _ = std::fs::remove_file(&path);
        CreateError(format!("cannot map segment {}: {e}", path.display()))
    })?;
    Ok((path, map))
}

/// Maps a peer's segment.
pub fn attach(path: &Path) -> std::io::Result<Mapping> {
    let file = OpenOptions::new().read(true).write(true).open(path)?;
    let len = file.metadata()?.len() as usize;
    Mapping::map(&file, len)
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    fn geo() -> Geometry {
        Geometry {
            local_size: 3,
            fifo_capacity: 256,
            fbox_size: 4096,
            fbox_slots: 2,
            frag_count: 8,
            frag_size: 4096,
        }
    }

    #[test]
    fn header_round_trips_and_rejects_inconsistency() {
        let layout = geo().layout();
        let name = format!("kestrel.test{}.hdr", std::process::id());
        let (path, map) = create(Path::new("/dev/shm"), &name, &layout).unwrap();
        write_header(&map, &layout, 1, 42, 0xdead, 32);
        let h = read_header(&map, 3).unwrap();
        assert_eq!(
            (h.layout, h.owner, h.pid, h.probe_addr),
            (layout, 1, 42, 0xdead)
        );
        assert!(read_header(&map, 4).is_err(), "wrong node size accepted");
        map.store(FBOX_SLOTS, 3, Relaxed);
        assert!(read_header(&map, 3).unwrap_err().0.contains("slot count"));
        map.store(FBOX_SLOTS, 1, Relaxed);
        assert!(read_header(&map, 3).unwrap_err().0.contains("offsets"));
        map.store(FBOX_SLOTS, 2, Relaxed);
        map.store(9 * 8, 12345, Relaxed);
        assert!(read_header(&map, 3).unwrap_err().0.contains("offsets"));
        map.store(0, 0, Relaxed);
        assert!(read_header(&map, 3).unwrap_err().0.contains("magic"));
        let mode = std::fs::metadata(&path).unwrap();
        assert_eq!(
            std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
            0o600
        );
        std::fs::remove_file(path).unwrap();
    }

    #[test]
    fn frag_refs_and_words_are_checked() {
        let r = FragRef {
            returning: true,
            owner: 2,
            index: 7,
        };
        assert_eq!(FragRef::decode(r.encode(), 3), Some(r));
        assert_eq!(FragRef::decode(r.encode(), 2), None);
        assert_eq!(FragRef::decode(1 << 50, 3), None);
        assert_eq!(
            decode_frag_word(frag_word(100, 9, kind::DATA), 4096),
            Some((100, 9, kind::DATA))
        );
        assert_eq!(decode_frag_word(frag_word(5000, 9, kind::DATA), 4096), None);
        assert_eq!(decode_frag_word(frag_word(1, 9, 77), 4096), None);
    }

    #[test]
    fn a_full_directory_is_an_error_naming_the_fix() {
        // A tmpfs too small for the segment: use a size the machine's /dev/shm cannot have.
        let mut g = geo();
        g.frag_count = 1 << 20;
        g.frag_size = 1 << 20;
        let layout = g.layout();
        let e = create(
            Path::new("/dev/shm"),
            &format!("kestrel.test{}.big", std::process::id()),
            &layout,
        )
        .unwrap_err();
        assert!(
            e.0.contains("KESTREL_SHM_DIR") && e.0.contains("free"),
            "{}",
            e.0
        );
        let e = create(Path::new("/nonexistent-dir"), "x", &geo().layout()).unwrap_err();
        assert!(
            e.0.contains("cannot create") && e.0.contains("KESTREL_SHM_DIR"),
            "{}",
            e.0
        );
    }
}
