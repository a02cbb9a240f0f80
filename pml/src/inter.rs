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

/// A broadcast root on an inter-communicator (`MPI_ROOT`, `MPI_PROC_NULL`, or a remote rank).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InterRoot {
    /// This process is the root (`MPI_ROOT`).
    Root,
    /// This process is in the root's group but not the root (`MPI_PROC_NULL`).
    RootGroup,
    /// The root is this rank of the remote group.
    Remote(u32),
}

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
            return Err(PmlError::Invalid("pml: out of communicator context ids (65534 in use); free communicators you no longer need".into()));
        }
        self.add_inter_context(new, local, remote, new + 1);
        self.next_ctx = self.next_ctx.max(new + 2);
        Ok(new)
    }
}
