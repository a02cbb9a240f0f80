//! The node-local path: windows whose memory the library allocates live in a node-wide
//! mapping ([`super::node`]), and operations on members of this node are copies under the
//! same checks as the target's own, accumulates run under the member's accumulate lock, and
//! passive-target locks are the member's lock word; no message is sent and no target
//! progress is needed. Members on other nodes still go through active messages, so one
//! window can mix both (the target applies remote accumulates under the same lock, and
//! grants remote lockers the same lock word: see `target`).
//!
//! It owns window allocation (`MPI_Win_allocate`, `MPI_Win_allocate_shared`). It must never
//! touch a member that is not on this node, and never wait without progressing the engine.

use super::memory::WinMemory;
use super::node::{self, DirectView, NodeMap, Place};
use super::wire::{self, AccOp, Segment};
use crate::engine::{Engine, PmlError};
use crate::op::Dtype;

/// A window from [`Engine::win_allocate`]: its id and this member's memory.
#[derive(Debug, Clone, Copy)]
pub struct Allocated {
    /// The window id.
    pub win: u16,
    /// Where this member's memory starts.
    pub base: *mut u8,
}

impl Engine {
    /// Creates a window over communicator `ctx` whose memory the library allocates
    /// (collective): `size` zeroed bytes for this member, in a mapping every member on this
    /// node shares, so operations between them are copies. `shared` (`MPI_Win_allocate_shared`)
    /// asks for every member on this node and the members' memory back to back.
    pub fn win_allocate(
        &mut self,
        ctx: u16,
        size: u64,
        disp_unit: u32,
        shared: bool,
    ) -> Result<Allocated, PmlError> {
        let group = self
            .context_group(ctx)
            .ok_or_else(|| PmlError::Invalid(format!("window: no communicator {ctx}")))?
            .to_vec();
        let (me, n) = self.comm_info(ctx)?;
        let here = self.node_of(self.rank()).to_string();
        let local: Vec<u32> = (0..n)
            .filter(|&r| self.node_of(group[r as usize]) == here)
            .collect();
        if shared && local.len() != n as usize {
            let p = group
                .iter()
                .find(|&&p| self.node_of(p) != here)
                .copied()
                .unwrap_or(0);
            return Err(PmlError::Invalid(format!(
                "MPI_Win_allocate_shared needs every member on one node, but process {p} is on \
                 {} and this one on {here}; split the communicator with \
                 MPI_Comm_split_type(MPI_COMM_TYPE_SHARED) first",
                self.node_of(p)
            )));
        }
        let sizes: Vec<u64> = self
            .allgather_bytes(ctx, &size.to_be_bytes())?
            .iter()
            .map(|b| u64::from_be_bytes(b.as_slice().try_into().unwrap_or([0; 8])))
            .collect();
        let local_sizes: Vec<u64> = local.iter().map(|&r| sizes[r as usize]).collect();
        let Some((places, len)) = node::layout(&local_sizes, shared) else {
            return Err(PmlError::Invalid(format!(
                "window: the members' sizes on node {here} add up past the address space"
            )));
        };
        // The lowest member of each node creates the file; the others learn its name.
        let leader = local[0];
        self.rma.mappings += 1;
        let path = kestrel_runtime::session::shm_dir().join(format!(
            "kestrel.{}.win{ctx:x}-{}-{}",
            self.job_tag(),
            std::process::id(),
            self.rma.mappings
        ));
        let mut note = Vec::new();
        if me == leader {
            match node::create_file(&path, len) {
                Ok(()) => note.push(1),
                Err(e) => {
                    note.push(0);
                    note.extend_from_slice(e.as_bytes());
                }
            }
            if note[0] == 1 {
                note.extend_from_slice(path.as_os_str().as_encoded_bytes());
            }
        }
        let notes = self.allgather_bytes(ctx, &note)?;
        let theirs = &notes[leader as usize];
        let mut places_by_rank: Vec<Option<Place>> = vec![None; n as usize];
        for (i, &r) in local.iter().enumerate() {
            places_by_rank[r as usize] = Some(places[i]);
        }
        let mapped = match theirs.split_first() {
            Some((1, p)) => {
                let p = std::path::PathBuf::from(String::from_utf8_lossy(p).into_owned());
                NodeMap::map(&p, len, places_by_rank)
            }
            Some((_, why)) => Err(String::from_utf8_lossy(why).into_owned()),
            None => Err("the node's first member sent no mapping".into()),
        };
        let oks = self.allgather_bytes(ctx, &[u8::from(mapped.is_ok())])?;
        if me == leader {
            // Every member of the node has mapped it (or given up): the name can go.
            let _ = std::fs::remove_file(&path);
        }
        let map = match mapped {
            Ok(m) if oks.iter().all(|o| o == &[1]) => m,
            Ok(_) => {
                return Err(PmlError::Runtime(
                    "window: another member could not map its node's window memory".into(),
                ))
            }
            Err(e) => {
                return Err(PmlError::Runtime(format!(
                    "window: cannot share the window's memory on node {here}: {e}"
                )))
            }
        };
        let base = map.base(me).unwrap_or(std::ptr::null_mut());
        // SAFETY: this member's range of the mapping, which the window keeps (in `node`)
        // until it is freed.
        #[allow(unsafe_code)]
        let mem = unsafe { WinMemory::fixed(base, size as usize) };
        let win = self.win_create(ctx, mem, size, disp_unit)?;
        let w = self.window_mut(win)?;
        w.direct_held = vec![None; n as usize];
        w.node = Some(map);
        tracing::debug!(target: "osc", win, local = local.len(), len, "window memory shared on the node");
        Ok(Allocated { win, base })
    }

    /// Where member `rank`'s memory starts in this process, if the window's memory is
    /// shared with it on this node (`MPI_Win_shared_query`).
    pub fn win_shared_base(&self, win: u16, rank: u32) -> Result<Option<*mut u8>, PmlError> {
        Ok(self.window(win)?.node.as_ref().and_then(|n| n.base(rank)))
    }

    /// What the C library and the Rust API keep of `win` for their direct puts, gets,
    /// accumulates, compare-and-swaps and flushes (`None`: the window's memory is not shared
    /// on the node).
    pub fn win_direct_view(&self, win: u16) -> Result<Option<DirectView>, PmlError> {
        let w = self.window(win)?;
        let units: Vec<u32> = w.members.iter().map(|m| m.disp_unit).collect();
        let after = super::stream::stream_after(self.params());
        Ok(w.node.as_ref().map(|n| n.view(&units, after)))
    }

    /// The node mapping, if operations on `target` of `win` are direct.
    pub(super) fn direct(&self, win: u16, target: u32) -> Option<&NodeMap> {
        self.rma
            .wins
            .get(&win)?
            .node
            .as_ref()
            .filter(|n| n.member(target).is_some())
    }
}

fn range(e: super::memory::OutOfRange) -> PmlError {
    PmlError::Invalid(format!("one-sided: {}", e.0))
}

/// The memory of a member `direct` found on the node.
fn member(n: &NodeMap, t: u32) -> Result<&WinMemory, PmlError> {
    n.member(t)
        .ok_or_else(|| PmlError::Invalid(format!("one-sided: rank {t} is not on this node")))
}

/// `MPI_Put` to a member on this node.
pub(super) fn put(n: &NodeMap, t: u32, segs: &[Segment], data: &[u8]) -> Result<(), PmlError> {
    member(n, t)?.write(segs, data).map_err(range)
}

/// `MPI_Get` from a member on this node.
pub(super) fn get(n: &NodeMap, t: u32, segs: &[Segment]) -> Result<Vec<u8>, PmlError> {
    let mut out = Vec::with_capacity(wire::total(segs) as usize);
    member(n, t)?.read(segs, &mut out).map_err(range)?;
    Ok(out)
}

/// `MPI_Accumulate` (`old` false) or `MPI_Get_accumulate` (`old` true: returns the bytes
/// before the operation) on a member on this node, under its accumulate lock.
pub(super) fn accumulate(
    n: &NodeMap,
    t: u32,
    segs: &[Segment],
    data: &[u8],
    op: AccOp,
    dtype: Dtype,
    old: bool,
) -> Result<Vec<u8>, PmlError> {
    let mem = member(n, t)?;
    let mut before = if old {
        vec![0u8; wire::total(segs) as usize]
    } else {
        Vec::new()
    };
    n.with_acc_lock(t, || {
        if old {
            mem.read_into(segs, &mut before).map_err(range)?;
        }
        mem.combine(op, dtype, segs, data)
            .map_err(|e| PmlError::Invalid(format!("one-sided: accumulate on rank {t}: {e}")))?;
        Ok(before)
    })
}

/// `MPI_Compare_and_swap` on a member on this node: returns the old value.
pub(super) fn compare_and_swap(
    n: &NodeMap,
    t: u32,
    disp: u64,
    compare: &[u8],
    swap: &[u8],
) -> Result<Vec<u8>, PmlError> {
    let mem = member(n, t)?;
    let seg = [Segment {
        offset: disp,
        len: compare.len() as u32,
    }];
    n.with_acc_lock(t, || {
        let mut old = Vec::with_capacity(compare.len());
        mem.read(&seg, &mut old).map_err(range)?;
        if old == compare {
            mem.write(&seg, swap).map_err(range)?;
        }
        Ok(old)
    })
}
