//! Small nonblocking collectives as one posted round of the communicator's node segment
//! (`kestrel_transport::node_coll::PostedRounds`, whose handle the engine keeps beside the
//! segment, in `coll_posted`): the rank publishes its block when the collective starts and
//! completes it once every member's block is there, with no message. A member busy computing
//! holds nobody back: it published when it started, and nothing is left for it to forward.
//!
//! A schedule takes this path when [`Engine::set_posted_rounds`] is on, the communicator's
//! segment exists (set up by its first blocking collective on every member alike), it has at
//! most the segment's flat group size, and the block fits a line (`PostedRounds::fits`), all
//! the same on every member, which therefore draw the same round. A round that cannot be
//! published yet (a member still reads the round that used the line before) is tried again
//! at each progress; it never waits. This module owns the round's step; it must never block.

use super::{Builder, Phase, Sched, Schedule, Span, Step};
use crate::buf::UserBuf;
use crate::engine::{Engine, PmlError, ReqId};
use crate::op::{Dtype, Reduction};
use crate::params;

/// What a posted round computes from the members' blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PostedKind {
    /// Nothing: every member got there.
    Barrier,
    /// The root publishes the buffer, the others copy it.
    Bcast {
        /// The root's rank.
        root: u32,
        /// Whether this rank is the root.
        is_root: bool,
    },
    /// Every member publishes its contribution and reduces all of them, in rank order, into
    /// the buffer; or, `shared` (blocks too large for a line, single copy on), every member
    /// publishes its buffers' addresses and whoever is in the library reduces chunks for
    /// all (`PostedRounds::reduce_shared`).
    Allreduce {
        /// Through the members' buffers rather than the lines.
        shared: bool,
    },
}

/// A schedule's step: posted round `round` of `ctx`'s segment.
#[derive(Debug, Clone, Copy)]
pub(super) struct PostedRound {
    ctx: u16,
    round: u64,
    kind: PostedKind,
    /// The block published (none: an empty one).
    publish: Option<Span>,
    /// Where the result goes (none: nowhere).
    result: Option<Span>,
}

/// A small nonblocking collective that [`Engine::nbc_posted_start`] runs as one posted round
/// when it can, with the program's buffers as they are.
#[derive(Debug, Clone)]
pub enum PostedColl {
    /// `MPI_Ibarrier`.
    Barrier,
    /// `MPI_Ibcast` of `buf` from `root` (read at the root, written elsewhere).
    Bcast {
        /// The root's rank.
        root: u32,
        /// The buffer.
        buf: UserBuf,
    },
    /// `MPI_Iallreduce` of `send` (`None`: in place, `recv` holds the contribution) into
    /// `recv`.
    Allreduce {
        /// The contribution, unless in place.
        send: Option<UserBuf>,
        /// The result (and the contribution when in place).
        recv: UserBuf,
        /// The element type.
        dtype: Dtype,
        /// The operation.
        op: Reduction,
    },
}

/// The posted round a running schedule waits for.
#[derive(Debug, Clone, Copy)]
pub(super) struct PostedWait {
    pub(super) round: PostedRound,
    pub(super) published: bool,
}

impl Builder {
    /// A round of posted round `round` of `ctx`'s segment (from [`Engine::posted_round`]):
    /// `buf` is the block this rank publishes (the root's for a broadcast, a contribution
    /// for an allreduce) and where the result goes.
    pub(super) fn posted(&mut self, ctx: u16, round: u64, kind: PostedKind, buf: Option<Span>) {
        let reads_only = matches!(
            kind,
            PostedKind::Barrier | PostedKind::Bcast { is_root: true, .. }
        );
        debug_assert!(reads_only || buf.is_some_and(|b| self.writable(b)));
        let (publish, result) = match kind {
            PostedKind::Barrier => (None, None),
            PostedKind::Bcast { is_root: true, .. } => (buf, None),
            PostedKind::Bcast { is_root: false, .. } => (None, buf),
            PostedKind::Allreduce { .. } => (buf, buf),
        };
        self.s.steps.push(Step::Posted(PostedRound {
            ctx,
            round,
            kind,
            publish,
            result,
        }));
    }
}

impl Engine {
    /// The posted round a schedule for a block of `len` bytes on `ctx` takes, drawn now, and
    /// whether it is shared (only for a `reduction`, see [`PostedKind::Allreduce`]); `None`
    /// when it takes messages (see the module documentation).
    pub(super) fn posted_round(
        &mut self,
        ctx: u16,
        len: usize,
        reduction: bool,
    ) -> Option<(u64, bool)> {
        if !self.nbc.posted_rounds {
            return None;
        }
        let shared = self.posted_allowed(ctx, len, reduction)?;
        Some((self.draw_posted(ctx), shared))
    }

    /// Draws the next posted round of `ctx`, whose handle [`Engine::posted_allowed`] found.
    fn draw_posted(&mut self, ctx: u16) -> u64 {
        self.coll_posted[usize::from(ctx)]
            .as_mut()
            .expect("posted_allowed found the handle")
            .draw()
    }

    /// Whether a collective of a `len`-byte block on `ctx` that starts now takes a posted
    /// round, and if so whether a shared one (a `reduction` too large for a line); the same
    /// answer on every member.
    fn posted_allowed(&mut self, ctx: u16, len: usize, reduction: bool) -> Option<bool> {
        if self.nbc.blocking_sequence {
            return None;
        }
        let on = match self.nbc.posted_param {
            Some(on) => on,
            None => {
                let on = params::SHM_POSTED.get(self.params());
                self.nbc.posted_param = Some(on);
                on
            }
        };
        match self.coll_posted.get(usize::from(ctx)) {
            Some(Some(p)) if on && p.members() >= 2 => {
                if p.fits(len) {
                    Some(false)
                } else if reduction && p.shares(len) {
                    Some(true)
                } else {
                    None
                }
            }
            _ => None,
        }
    }

    /// Starts `coll` on `ctx` as one posted round if the general path would take one
    /// ([`Engine::nbc_barrier`], [`Engine::nbc_bcast`] and [`Engine::nbc_allreduce`] with posted
    /// rounds on): it draws the same sequence number and round, so members may mix both paths,
    /// but builds no steps and copies nothing before publishing. `Ok(None)`: it does not
    /// qualify, nothing was drawn, build the schedule. Only for collectives that start now
    /// (`MPI_I*`); arguments the general path would reject also give `Ok(None)`, so that it
    /// reports them.
    pub fn nbc_posted_start(
        &mut self,
        ctx: u16,
        coll: PostedColl,
    ) -> Result<Option<ReqId>, PmlError> {
        let (len, reduction) = match &coll {
            PostedColl::Barrier => (0, false),
            PostedColl::Bcast { buf, .. } => (buf.len(), false),
            PostedColl::Allreduce { send, recv, .. } => {
                if send.is_some_and(|s| s.len() != recv.len()) {
                    return Ok(None);
                }
                (recv.len(), true)
            }
        };
        let Some(shared) = self.posted_allowed(ctx, len, reduction) else {
            return Ok(None);
        };
        let (me, n) = self.comm_info(ctx)?;
        if matches!(coll, PostedColl::Bcast { root, .. } if root >= n) {
            return Ok(None);
        }
        // The general path's builder draws one number of the sequence (its tags, which a
        // posted round does not use).
        self.next_coll_seq(ctx, false)?;
        let round = self.draw_posted(ctx);
        let mut b = Builder::new(self.nbc.pool.pop().unwrap_or_default(), std::iter::empty());
        let (kind, publish, result) = match coll {
            PostedColl::Barrier => (PostedKind::Barrier, None, None),
            PostedColl::Bcast { root, buf } => {
                let is_root = me == root;
                let kind = PostedKind::Bcast { root, is_root };
                if is_root {
                    (kind, Some(b.input(buf)), None)
                } else {
                    (kind, None, Some(b.output(buf)))
                }
            }
            PostedColl::Allreduce {
                send,
                recv,
                dtype,
                op,
            } => {
                b.set_reduction(op, dtype);
                let r = b.output(recv);
                let p = send.map_or(r, |s| b.input(s));
                (PostedKind::Allreduce { shared }, Some(p), Some(r))
            }
        };
        let mut s = b.s;
        s.run.posted = Some(PostedWait {
            round: PostedRound {
                ctx,
                round,
                kind,
                publish,
                result,
            },
            published: false,
        });
        // What `coll_launch` would do, without its general loop: publish now, and complete
        // now if every member is there already.
        s.run.phase = Phase::Running;
        if self.posted_progress(&mut s) {
            s.run.phase = Phase::Done;
        }
        let done = s.run.phase == Phase::Done;
        let id = self.nbc.insert(Schedule(s));
        if !done {
            // The slot is the id's low half (`Table::insert`).
            self.nbc.running.push(id as u32);
        }
        Ok(Some(id))
    }

    /// Takes the posted round `s` waits for as far as it goes: true once there is none (done,
    /// or failed into the schedule's error), false while it waits for a line or a member.
    pub(super) fn posted_progress(&mut self, s: &mut Sched) -> bool {
        let Some(PostedWait {
            round: w,
            mut published,
        }) = s.run.posted
        else {
            return true;
        };
        let Some(Some(seg)) = self.coll_posted.get_mut(usize::from(w.ctx)) else {
            s.run.posted = None;
            s.run.error.get_or_insert(PmlError::Invalid(format!(
                "collective: the shared-memory segment of context {} is gone while a \
                 nonblocking collective on it runs (was the communicator freed before the \
                 collective completed?)",
                w.ctx
            )));
            return true;
        };
        if !published {
            let ok = match (w.kind, w.result) {
                (PostedKind::Allreduce { shared: true }, Some(r)) => {
                    let recv = s.ptr(r) as u64;
                    let send = w.publish.map_or(recv, |p| s.ptr(p) as u64);
                    let elem = s.reduction.as_ref().map_or(1, |(_, d)| d.size());
                    seg.publish_buffers(w.round, send, recv, elem)
                }
                _ => {
                    let payload = match w.publish {
                        None => &[][..],
                        Some(b) => s.read(b),
                    };
                    seg.publish(w.round, payload)
                }
            };
            if !ok {
                return false;
            }
            published = true;
            s.run.posted = Some(PostedWait {
                round: w,
                published,
            });
        }
        if !seg.arrived(w.round) {
            return false;
        }
        let n = seg.members();
        let r = match (w.kind, w.result) {
            (PostedKind::Barrier, _) | (_, None) => Ok(()),
            (PostedKind::Bcast { root, .. }, Some(b)) => {
                let from = seg.payload(w.round, root as usize, b.len);
                out(s, b).copy_from_slice(from);
                Ok(())
            }
            (PostedKind::Allreduce { shared: true }, Some(b)) => {
                let recv = out(s, b);
                let send = w.publish.filter(|&p| p != b).map(|p| s.read(p));
                let Some((op, dtype)) = &s.reduction else {
                    unreachable!("an allreduce schedule sets its reduction")
                };
                let mut failed = None;
                let mut apply = |a: &[u8], acc: &mut [u8]| {
                    if let Err(e) = op.apply(*dtype, a, acc) {
                        failed.get_or_insert(e);
                    }
                };
                match seg.reduce_shared(w.round, b.len, send, recv, &mut apply) {
                    // Others still reduce chunks into this member's buffers.
                    Ok(false) => return false,
                    Ok(true) => failed.map_or(Ok(()), |e| {
                        Err(PmlError::Invalid(format!("collective: {e}")))
                    }),
                    Err(e) => Err(PmlError::Invalid(format!("collective: {e}"))),
                }
            }
            (PostedKind::Allreduce { shared: false }, Some(b)) => {
                let acc = out(s, b);
                acc.copy_from_slice(seg.payload(w.round, n - 1, b.len));
                match &s.reduction {
                    Some((op, dtype)) => (0..n - 1)
                        .rev()
                        .try_for_each(|r| op.apply(*dtype, seg.payload(w.round, r, b.len), acc)),
                    None => Ok(()),
                }
                .map_err(|e| PmlError::Invalid(format!("collective: {e}")))
            }
        };
        // Finished even on an error: the members reuse the line after everyone is done.
        seg.finish(w.round);
        s.run.posted = None;
        if let Err(e) = r {
            s.run.error.get_or_insert(e);
        }
        true
    }
}

/// The bytes of `b`, which the schedule writes, unbound from `s` so that the schedule's
/// reduction can be borrowed beside them.
fn out<'a>(s: &mut Sched, b: Span) -> &'a mut [u8] {
    let p = s.ptr(b);
    // SAFETY: `b` lies in memory this schedule may write (a program buffer the caller
    // guaranteed until completion, or its arena, never resized while it runs; the builder
    // gave it as the posted round's result), and nothing else touches it during this step.
    // The slice is used only within `posted_progress`, not kept.
    #[allow(unsafe_code)]
    unsafe {
        std::slice::from_raw_parts_mut(p, b.len)
    }
}
