//! Collective schedules of inter-communicators, as MPI defines them: data moves between
//! the two groups, and local phases run on the inter-communicator's local context with
//! the intra-communicator rounds of [`super::algorithms`].
//!
//! * barrier: the local group gathers at its leader (local rank 0), the leaders exchange,
//!   each leader releases its group;
//! * bcast, gather(v), scatter(v): the root talks to every member of the other group
//!   directly;
//! * allgather(v), alltoall(v): every member exchanges with every member of the other
//!   group directly;
//! * reduce: the other group reduces to its leader, which sends the result to the root;
//! * allreduce: each group reduces to its leader, the leaders swap results, each leader
//!   broadcasts the *other* group's result in its group;
//! * reduce_scatter: as allreduce up to the swap, then each leader scatters the other
//!   group's result in its group.
//!
//! The blocking inter-communicator collectives the C library lacks a dedicated algorithm
//! for run these schedules to completion. This module only describes rounds.

use crate::buf::UserBuf;
use crate::engine::{Engine, PmlError};
use crate::op::{Dtype, Reduction};

use super::algorithms::{self, check_layout, Comm, Layout};
use super::{Builder, Schedule};

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

/// What a schedule of an inter-communicator needs to know about it.
struct Parts {
    /// This process's rank in its (local) group.
    me: u32,
    local_size: u32,
    remote_size: u32,
    local_ctx: u16,
}

impl Parts {
    /// The local group as a communicator of the intra-communicator algorithms.
    fn local(&self) -> Comm {
        Comm {
            ctx: self.local_ctx,
            me: self.me,
            n: self.local_size,
        }
    }
}

impl Engine {
    fn inter_sched(&mut self, ctx: u16) -> Result<(Parts, Builder), PmlError> {
        let (local, remote, local_ctx) = self.inter_parts(ctx)?;
        let me = local.iter().position(|&r| r == self.rank()).unwrap_or(0) as u32;
        let b = self.coll_builder(ctx)?;
        Ok((
            Parts {
                me,
                local_size: local.len() as u32,
                remote_size: remote.len() as u32,
                local_ctx,
            },
            b,
        ))
    }

    /// `MPI_Ibarrier` on an inter-communicator.
    pub fn nbc_inter_barrier(&mut self, ctx: u16) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        let empty = b.temp(0);
        if p.me == 0 {
            for r in 1..p.local_size {
                b.recv(p.local_ctx, r, empty);
            }
            b.round();
            b.send(ctx, 0, empty);
            b.recv(ctx, 0, empty);
            b.round();
            for r in 1..p.local_size {
                b.send(p.local_ctx, r, empty);
            }
        } else {
            b.send(p.local_ctx, 0, empty);
            b.round();
            b.recv(p.local_ctx, 0, empty);
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Ibcast` on an inter-communicator (`buf` is read at the root, written in the
    /// other group, unused in the root's group).
    pub fn nbc_inter_bcast(
        &mut self,
        ctx: u16,
        root: InterRoot,
        buf: UserBuf,
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        match root {
            InterRoot::Root => {
                let s = b.input(buf);
                for r in 0..p.remote_size {
                    b.send(ctx, r, s);
                }
            }
            InterRoot::RootGroup => {}
            InterRoot::Remote(r) => {
                check_remote("bcast", r, p.remote_size)?;
                let o = b.output(buf);
                b.recv(ctx, r, o);
            }
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Igatherv` on an inter-communicator: the root gets `counts[r]` bytes from every
    /// rank `r` of the other group at `displs[r]` of `recv`.
    pub fn nbc_inter_gatherv(
        &mut self,
        ctx: u16,
        root: InterRoot,
        send: Option<UserBuf>,
        recv: Option<UserBuf>,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        match root {
            InterRoot::Root => {
                let recv = recv.ok_or_else(|| missing("gather", "receive"))?;
                check_layout("gather", recv.len(), counts, displs, p.remote_size)?;
                let o = b.output(recv);
                for r in 0..p.remote_size {
                    b.recv(ctx, r, o.sub(displs[r as usize], counts[r as usize]));
                }
            }
            InterRoot::RootGroup => {}
            InterRoot::Remote(r) => {
                check_remote("gather", r, p.remote_size)?;
                let s = b.input(send.ok_or_else(|| missing("gather", "send"))?);
                b.send(ctx, r, s);
            }
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Iscatterv` on an inter-communicator: the root sends `counts[r]` bytes at
    /// `displs[r]` of `send` to every rank `r` of the other group.
    #[allow(clippy::too_many_arguments)]
    pub fn nbc_inter_scatterv(
        &mut self,
        ctx: u16,
        root: InterRoot,
        send: Option<UserBuf>,
        counts: &[usize],
        displs: &[usize],
        recv: Option<UserBuf>,
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        match root {
            InterRoot::Root => {
                let send = send.ok_or_else(|| missing("scatter", "send"))?;
                check_layout("scatter", send.len(), counts, displs, p.remote_size)?;
                let s = b.input(send);
                for r in 0..p.remote_size {
                    b.send(ctx, r, s.sub(displs[r as usize], counts[r as usize]));
                }
            }
            InterRoot::RootGroup => {}
            InterRoot::Remote(r) => {
                check_remote("scatter", r, p.remote_size)?;
                let o = b.output(recv.ok_or_else(|| missing("scatter", "receive"))?);
                b.recv(ctx, r, o);
            }
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Iallgatherv` on an inter-communicator: `recv[displs[r]..][..counts[r]]` gets the
    /// contribution of rank `r` of the other group.
    pub fn nbc_inter_allgatherv(
        &mut self,
        ctx: u16,
        send: UserBuf,
        recv: UserBuf,
        counts: &[usize],
        displs: &[usize],
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        check_layout("allgather", recv.len(), counts, displs, p.remote_size)?;
        let s = b.input(send);
        let o = b.output(recv);
        for r in 0..p.remote_size {
            b.recv(ctx, r, o.sub(displs[r as usize], counts[r as usize]));
        }
        for r in 0..p.remote_size {
            b.send(ctx, r, s);
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Ialltoallv` on an inter-communicator: block `r` of `send` to rank `r` of the
    /// other group, block `r` of `recv` from it.
    #[allow(clippy::too_many_arguments)]
    pub fn nbc_inter_alltoallv(
        &mut self,
        ctx: u16,
        send: UserBuf,
        scounts: &[usize],
        sdispls: &[usize],
        recv: UserBuf,
        rcounts: &[usize],
        rdispls: &[usize],
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        check_layout(
            "alltoall (send)",
            send.len(),
            scounts,
            sdispls,
            p.remote_size,
        )?;
        check_layout(
            "alltoall (receive)",
            recv.len(),
            rcounts,
            rdispls,
            p.remote_size,
        )?;
        let s = b.input(send);
        let o = b.output(recv);
        for r in 0..p.remote_size as usize {
            b.recv(ctx, r as u32, o.sub(rdispls[r], rcounts[r]));
        }
        for r in 0..p.remote_size as usize {
            b.send(ctx, r as u32, s.sub(sdispls[r], scounts[r]));
        }
        b.round();
        Ok(b.finish())
    }

    /// `MPI_Ireduce` on an inter-communicator: the root gets the reduction of the other
    /// group's `send` buffers.
    #[allow(clippy::too_many_arguments)]
    pub fn nbc_inter_reduce(
        &mut self,
        ctx: u16,
        root: InterRoot,
        send: Option<UserBuf>,
        recv: Option<UserBuf>,
        dtype: Dtype,
        op: Reduction,
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        b.set_reduction(op, dtype);
        match root {
            InterRoot::Root => {
                let o = b.output(recv.ok_or_else(|| missing("reduce", "receive"))?);
                b.recv(ctx, 0, o);
                b.round();
            }
            InterRoot::RootGroup => {}
            InterRoot::Remote(r) => {
                check_remote("reduce", r, p.remote_size)?;
                let s = b.input(send.ok_or_else(|| missing("reduce", "send"))?);
                let partial = (p.me == 0).then(|| b.temp(s.len));
                algorithms::reduce(&mut b, p.local(), 0, s, partial);
                b.round();
                if let Some(part) = partial {
                    b.send(ctx, r, part);
                    b.round();
                }
            }
        }
        Ok(b.finish())
    }

    /// `MPI_Iallreduce` on an inter-communicator: `recv` gets the reduction of the other
    /// group's `send` buffers.
    pub fn nbc_inter_allreduce(
        &mut self,
        ctx: u16,
        send: UserBuf,
        recv: UserBuf,
        dtype: Dtype,
        op: Reduction,
    ) -> Result<Schedule, PmlError> {
        if send.len() != recv.len() {
            return Err(PmlError::Invalid(format!(
                "allreduce: receive buffer of {} bytes for {} bytes sent",
                recv.len(),
                send.len()
            )));
        }
        let (p, mut b) = self.inter_sched(ctx)?;
        b.set_reduction(op, dtype);
        let s = b.input(send);
        let o = b.output(recv);
        let partial = (p.me == 0).then(|| b.temp(s.len));
        algorithms::reduce(&mut b, p.local(), 0, s, partial);
        b.round();
        if let Some(part) = partial {
            b.send(ctx, 0, part);
            b.recv(ctx, 0, o);
            b.round();
        }
        algorithms::bcast(&mut b, p.local(), 0, o);
        Ok(b.finish())
    }

    /// `MPI_Ireduce_scatter` on an inter-communicator: the reduction of the other group's
    /// `send` buffers (the sum of `counts` bytes each), block `r` (`counts[r]` bytes) to
    /// rank `r` of this group.
    pub fn nbc_inter_reduce_scatter(
        &mut self,
        ctx: u16,
        send: UserBuf,
        recv: UserBuf,
        counts: &[usize],
        dtype: Dtype,
        op: Reduction,
    ) -> Result<Schedule, PmlError> {
        let (p, mut b) = self.inter_sched(ctx)?;
        if counts.len() != p.local_size as usize {
            return Err(PmlError::Invalid(format!(
                "reduce_scatter: {} counts for a group of {}",
                counts.len(),
                p.local_size
            )));
        }
        let total: usize = counts.iter().sum();
        if send.len() != total {
            return Err(PmlError::Invalid(format!(
                "reduce_scatter: send buffer of {} bytes where the counts add up to {total}",
                send.len()
            )));
        }
        b.set_reduction(op, dtype);
        let s = b.input(send);
        let o = b.output(recv);
        let partial = (p.me == 0).then(|| b.temp(total));
        let theirs = (p.me == 0).then(|| b.temp(total));
        algorithms::reduce(&mut b, p.local(), 0, s, partial);
        b.round();
        if let (Some(part), Some(t)) = (partial, theirs) {
            b.send(ctx, 0, part);
            b.recv(ctx, 0, t);
            b.round();
        }
        let displs = algorithms::packed_displs(counts);
        let layout = Layout {
            counts,
            displs: &displs,
        };
        algorithms::scatterv(&mut b, p.local(), 0, theirs, layout, Some(o));
        Ok(b.finish())
    }
}

fn check_remote(what: &str, r: u32, remote_size: u32) -> Result<(), PmlError> {
    if r >= remote_size {
        return Err(PmlError::Invalid(format!(
            "{what}: root {r} is outside a remote group of {remote_size}"
        )));
    }
    Ok(())
}

fn missing(what: &str, which: &str) -> PmlError {
    PmlError::Invalid(format!("{what}: a {which} buffer is needed here"))
}
