//! Collectives on inter-communicators, as MPI defines them: the two groups meet through their
//! leaders (local rank 0 of each group), and each group's local phase runs on the
//! inter-communicator's local context.
//!
//! * barrier: local barrier, leaders exchange, leader tells its group;
//! * bcast: the root sends to the remote leader, which broadcasts in its group; the root's
//!   other members take no part;
//! * allreduce: each group reduces to its leader, the leaders swap results, each leader
//!   broadcasts the *other* group's result;
//! * allgather: each group gathers to its leader, the leaders swap, each leader broadcasts the
//!   *other* group's data.
//!
//! Every local phase after a leader exchange starts with a status byte, so that when the other
//! group failed, every member of this group returns the error instead of waiting for data that
//! will not come.

use crate::engine::{Engine, PmlError};
use crate::op::{Dtype, Reduction};

const TAG_IBARRIER: i32 = -40;
const TAG_IBCAST: i32 = -41;
const TAG_IALLREDUCE: i32 = -42;
const TAG_IALLGATHER: i32 = -43;
const TAG_ISPLIT: i32 = -44;

pub use crate::engine::nbc::inter::InterRoot;

impl Engine {
    /// (local rank, remote size, local context) of an inter-communicator.
    fn inter_info(&self, ctx: u16) -> Result<(u32, u32, u16), PmlError> {
        let (_, remote, local_ctx) = self.inter_parts(ctx)?;
        let (me, _) = self.comm_info(local_ctx)?;
        Ok((me, remote.len() as u32, local_ctx))
    }

    /// The leader's outcome to its group; non-leaders turn a failure into an error.
    fn inter_status(
        &mut self,
        ctx: u16,
        local_ctx: u16,
        leader: Result<(), PmlError>,
    ) -> Result<(), PmlError> {
        let mut status = [u8::from(leader.is_ok())];
        let sent = self.coll_bcast(local_ctx, 0, &mut status);
        leader?;
        sent?;
        if status[0] == 1 {
            Ok(())
        } else {
            let (_, remote, _) = self.inter_parts_unchecked(ctx);
            Err(self.remote_failure(&remote))
        }
    }

    /// Like `inter_parts`, but usable on a broken context (for the error message).
    fn inter_parts_unchecked(&self, ctx: u16) -> (Vec<u32>, Vec<u32>, u16) {
        self.st
            .ctxs
            .get(ctx as usize)
            .and_then(|c| c.as_ref())
            .and_then(|c| {
                c.inter
                    .as_ref()
                    .map(|i| (i.local_group.clone(), c.group.clone(), i.local_ctx))
            })
            .unwrap_or_default()
    }

    /// `MPI_Barrier` on an inter-communicator.
    pub fn inter_barrier(&mut self, ctx: u16) -> Result<(), PmlError> {
        let (me, _, local_ctx) = self.inter_info(ctx)?;
        self.coll_barrier(local_ctx)?;
        let leader = if me == 0 {
            self.exchange(ctx, TAG_IBARRIER, &[(0, &[])], &mut [(0, &mut [])])
        } else {
            Ok(())
        };
        self.inter_status(ctx, local_ctx, leader)
    }

    /// `MPI_Bcast` on an inter-communicator; `buf` is the data at the root and the result in
    /// the other group (unused elsewhere).
    pub fn inter_bcast(
        &mut self,
        ctx: u16,
        root: InterRoot,
        buf: &mut [u8],
    ) -> Result<(), PmlError> {
        let (me, remote_size, local_ctx) = self.inter_info(ctx)?;
        match root {
            InterRoot::Root => self.exchange(ctx, TAG_IBCAST, &[(0, buf)], &mut []),
            InterRoot::RootGroup => Ok(()),
            InterRoot::Remote(r) => {
                if r >= remote_size {
                    return Err(PmlError::Invalid(format!(
                        "bcast: root {r} is outside a remote group of {remote_size}"
                    )));
                }
                let leader = if me == 0 {
                    self.exchange(ctx, TAG_IBCAST, &[], &mut [(r, &mut *buf)])
                } else {
                    Ok(())
                };
                self.inter_status(ctx, local_ctx, leader)?;
                self.coll_bcast(local_ctx, 0, buf)
            }
        }
    }

    /// `MPI_Allreduce` on an inter-communicator: `recv` gets the reduction of the *other*
    /// group's `send` buffers.
    pub fn inter_allreduce(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
        dtype: Dtype,
        op: &Reduction,
    ) -> Result<(), PmlError> {
        let (me, _, local_ctx) = self.inter_info(ctx)?;
        if recv.len() != send.len() {
            return Err(PmlError::Invalid(format!(
                "allreduce: receive buffer of {} bytes for {} bytes sent",
                recv.len(),
                send.len()
            )));
        }
        let mut partial = vec![0u8; send.len()];
        self.coll_reduce(
            local_ctx,
            0,
            send,
            if me == 0 {
                Some(&mut partial[..])
            } else {
                None
            },
            dtype,
            op,
        )?;
        let leader = if me == 0 {
            self.exchange(
                ctx,
                TAG_IALLREDUCE,
                &[(0, &partial)],
                &mut [(0, &mut *recv)],
            )
        } else {
            Ok(())
        };
        self.inter_status(ctx, local_ctx, leader)?;
        self.coll_bcast(local_ctx, 0, recv)
    }

    /// `MPI_Allgather` on an inter-communicator: `recv` (remote size × `send.len()` bytes)
    /// gets the *other* group's contributions in its rank order.
    pub fn inter_allgather(
        &mut self,
        ctx: u16,
        send: &[u8],
        recv: &mut [u8],
    ) -> Result<(), PmlError> {
        let (me, remote_size, local_ctx) = self.inter_info(ctx)?;
        let (_, local_size) = self.comm_info(local_ctx)?;
        if recv.len() != send.len() * remote_size as usize {
            return Err(PmlError::Invalid(format!(
                "allgather: receive buffer of {} bytes, {} needed ({} remote ranks × {} bytes)",
                recv.len(),
                send.len() * remote_size as usize,
                remote_size,
                send.len()
            )));
        }
        let mut mine = vec![0u8; send.len() * local_size as usize];
        self.coll_gather(
            local_ctx,
            0,
            send,
            if me == 0 { Some(&mut mine[..]) } else { None },
        )?;
        let leader = if me == 0 {
            self.exchange(ctx, TAG_IALLGATHER, &[(0, &mine)], &mut [(0, &mut *recv)])
        } else {
            Ok(())
        };
        self.inter_status(ctx, local_ctx, leader)?;
        self.coll_bcast(local_ctx, 0, recv)
    }
}

impl Engine {
    /// `MPI_Comm_dup` of an inter-communicator: a new inter-communicator over the same groups
    /// (context ids agreed across both groups through the leaders).
    pub fn inter_dup(&mut self, ctx: u16) -> Result<u16, PmlError> {
        let (local, remote, local_ctx) = self.inter_parts(ctx)?;
        let (me, _) = self.comm_info(local_ctx)?;
        let all = self.allgather_bytes(local_ctx, &self.next_ctx.to_le_bytes())?;
        let mut proposal = self.next_ctx;
        for a in &all {
            if let [lo, hi] = a[..] {
                proposal = proposal.max(u16::from_le_bytes([lo, hi]));
            }
        }
        let mut agreed = proposal.to_le_bytes();
        let leader = if me == 0 {
            let mut theirs = [0u8; 2];
            let r = self.exchange(
                ctx,
                TAG_IBARRIER,
                &[(0, &agreed)],
                &mut [(0, &mut theirs[..])],
            );
            agreed = proposal.max(u16::from_le_bytes(theirs)).to_le_bytes();
            r
        } else {
            Ok(())
        };
        self.inter_status(ctx, local_ctx, leader)?;
        self.coll_bcast(local_ctx, 0, &mut agreed)?;
        let new = u16::from_le_bytes(agreed);
        if new >= u16::MAX - 1 {
            return Err(self.out_of_context_ids(true));
        }
        self.add_inter_context(new, local, remote, new + 1);
        self.next_ctx = self.next_ctx.max(new + 2);
        Ok(new)
    }
}

/// One process's part in splitting an inter-communicator: (color or none, key, next free
/// context id), in the byte form the groups exchange.
fn split_entry(color: Option<i32>, key: i32, next: u16) -> Vec<u8> {
    let mut v = Vec::with_capacity(11);
    v.push(u8::from(color.is_some()));
    v.extend_from_slice(&color.unwrap_or(0).to_le_bytes());
    v.extend_from_slice(&key.to_le_bytes());
    v.extend_from_slice(&next.to_le_bytes());
    v
}

/// The entries of a whole group, checked (they came from other processes).
fn split_table(parts: &[Vec<u8>]) -> Result<Vec<(Option<i32>, i32, u16)>, PmlError> {
    parts
        .iter()
        .enumerate()
        .map(|(r, a)| {
            if a.len() != 11 || a[0] > 1 {
                return Err(PmlError::Transport(format!(
                    "pml: malformed split contribution from rank {r}"
                )));
            }
            let c = i32::from_le_bytes([a[1], a[2], a[3], a[4]]);
            let k = i32::from_le_bytes([a[5], a[6], a[7], a[8]]);
            let n = u16::from_le_bytes([a[9], a[10]]);
            Ok(((a[0] == 1).then_some(c), k, n))
        })
        .collect()
}

/// A group's split table as one byte string (the leaders swap these).
fn pack_table(parts: &[Vec<u8>]) -> Vec<u8> {
    parts.concat()
}

fn unpack_table(b: &[u8]) -> Result<Vec<(Option<i32>, i32, u16)>, PmlError> {
    if !b.len().is_multiple_of(11) {
        return Err(PmlError::Transport(
            "pml: malformed split table from the other group".into(),
        ));
    }
    split_table(&b.chunks(11).map(<[u8]>::to_vec).collect::<Vec<_>>())
}

impl Engine {
    /// `MPI_Comm_split` of an inter-communicator: the members of both groups with the same
    /// color form a new inter-communicator (local members ordered by (key, rank), remote
    /// ones likewise); `None` when this process passes no color, or the other group has no
    /// member of its color. Collective over both groups.
    pub fn inter_split(
        &mut self,
        ctx: u16,
        color: Option<i32>,
        key: i32,
    ) -> Result<Option<u16>, PmlError> {
        let (local, remote, local_ctx) = self.inter_parts(ctx)?;
        let (me, _) = self.comm_info(local_ctx)?;
        let mine = split_entry(color, key, self.next_ctx);
        let parts = self.allgather_bytes(local_ctx, &mine)?;
        let ours = split_table(&parts)?;
        // The leaders swap their groups' tables; each leader hands the other table on.
        let theirs_bytes = if me == 0 {
            self.send_checked(ctx, 0, TAG_ISPLIT, &pack_table(&parts), false)?;
            let (b, _) = self.recv_vec_checked(ctx, Some(0), Some(TAG_ISPLIT))?;
            for r in 1..local.len() as u32 {
                self.send_checked(local_ctx, r, TAG_ISPLIT, &b, false)?;
            }
            b
        } else {
            self.recv_vec_checked(local_ctx, Some(0), Some(TAG_ISPLIT))?
                .0
        };
        let theirs = unpack_table(&theirs_bytes)?;
        if theirs.len() != remote.len() {
            return Err(PmlError::Transport(format!(
                "pml: the other group's split table has {} entries for {} processes",
                theirs.len(),
                remote.len()
            )));
        }
        let base = ours
            .iter()
            .chain(&theirs)
            .map(|e| e.2)
            .max()
            .unwrap_or(self.next_ctx);
        let mut colors: Vec<i32> = ours.iter().chain(&theirs).filter_map(|e| e.0).collect();
        colors.sort_unstable();
        colors.dedup();
        let top = u32::from(base) + 2 * colors.len() as u32;
        if top >= u32::from(u16::MAX) {
            return Err(self.out_of_context_ids(true));
        }
        self.next_ctx = self.next_ctx.max(top as u16);
        let Some(color) = color else { return Ok(None) };
        let pick = |table: &[(Option<i32>, i32, u16)], group: &[u32]| -> Vec<u32> {
            let mut m: Vec<(i32, usize, u32)> = table
                .iter()
                .enumerate()
                .filter(|(_, e)| e.0 == Some(color))
                .map(|(r, e)| (e.1, r, group[r]))
                .collect();
            m.sort_unstable();
            m.into_iter().map(|x| x.2).collect()
        };
        let l = pick(&ours, &local);
        let r = pick(&theirs, &remote);
        if r.is_empty() {
            return Ok(None);
        }
        let idx = colors.binary_search(&color).unwrap_or(0) as u16;
        let new = base + 2 * idx;
        self.add_inter_context(new, l, r, new + 1);
        Ok(Some(new))
    }
}
