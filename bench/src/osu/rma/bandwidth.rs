//! The bandwidth tests' timed loops (`osu_rma.h`'s `rma_bandwidth` and `rma_bandwidth_sizes`):
//! per iteration `-W` puts or gets to consecutive places of the target, then the `-s`
//! synchronization, issuing the calls of the C loop, and the rows they print.

use std::time::Instant;

use kestrel::window::{Epoch, LockType, Window};
use kestrel::{Communicator as _, Rank, SimpleCommunicator};

use super::window::{flush_part, with_rma_window, PageBuf};
use super::{RmaElem, RmaOp, RmaOptions, RmaSpec, SyncKind};
use crate::osu::{bandwidth_mb_s, row};

/// `window` puts or gets of `size` elements between `buf` and consecutive places of `target`
/// (the gets' destinations borrowed as long as `e` holds its results).
fn window_ops<'b, T: RmaElem>(
    e: &Epoch<'b, T>,
    op: RmaOp,
    target: Rank,
    buf: &'b mut [T],
    size: usize,
    window: usize,
) {
    match op {
        RmaOp::Put => {
            for (j, chunk) in buf.chunks(size).take(window).enumerate() {
                e.put(target, j * size, chunk);
            }
        }
        RmaOp::Get => {
            for (j, chunk) in buf.chunks_mut(size).take(window).enumerate() {
                e.get(target, j * size, chunk);
            }
        }
        _ => unreachable!("the bandwidth tests put or get"),
    }
}

/// OSU's `run_*_with_<sync>` for the bandwidth tests on `win`: `warm` untimed then `iters`
/// timed iterations of `-W` operations of `size` bytes from `buf`, with the calls of
/// `osu_rma.h`'s `rma_bandwidth` (see the module documentation of `rma`). Returns rank 0's
/// seconds; a barrier ends it.
#[allow(clippy::too_many_arguments)]
fn bandwidth_loop(
    world: &SimpleCommunicator,
    spec: &RmaSpec,
    o: &RmaOptions,
    win: &Window<u8>,
    buf: &mut [u8],
    size: usize,
    iters: usize,
    warm: usize,
) -> f64 {
    let (rank, peer) = (world.rank(), 1 - world.rank());
    let (op, total, w) = (spec.op, iters + warm, o.opts.window_size);
    let bidir = spec.bidirectional;
    let (mut t_start, mut t_end) = (None::<Instant>, None::<Instant>);
    match o.sync {
        SyncKind::Lock if rank == 0 => {
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock(1, LockType::Shared, |e| window_ops(e, op, 1, buf, size, w));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Flush | SyncKind::FlushLocal if rank == 0 => {
            // lock; per iteration the W operations in flight, then one flush (or
            // flush_local); unlock after the clock.
            (t_start, t_end) = win.lock(1, LockType::Shared, |e| {
                let mut start = None;
                for i in 0..total {
                    if i == warm {
                        start = Some(Instant::now());
                    }
                    flush_part(e, o.sync, 1, |p| window_ops(p, op, 1, buf, size, w));
                }
                (start, Some(Instant::now()))
            });
        }
        SyncKind::LockAll if rank == 0 => {
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock_all(|e| window_ops(e, op, 1, buf, size, w));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Lock | SyncKind::Flush | SyncKind::FlushLocal | SyncKind::LockAll => {}
        SyncKind::Fence => {
            // Per iteration fence, operations (rank 0's; both ranks' when bidirectional),
            // fence: an epoch of its own, as C's loop shares no fence between iterations.
            world.barrier();
            for i in 0..total {
                if rank == 0 && i == warm {
                    t_start = Some(Instant::now());
                }
                win.fence(|e| {
                    if rank == 0 || bidir {
                        window_ops(e, op, peer, buf, size, w);
                    }
                });
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Pscw => {
            world.barrier();
            for i in 0..total {
                if bidir {
                    if rank == 0 && i == warm {
                        t_start = Some(Instant::now());
                    }
                    let exposure = win.expose(&[peer]);
                    win.access(&[peer], |e| window_ops(e, op, peer, buf, size, w));
                    exposure.wait();
                } else if rank == 0 {
                    win.access(&[1], |e| {
                        if i == warm {
                            t_start = Some(Instant::now());
                        }
                        window_ops(e, op, 1, buf, size, w);
                    });
                } else {
                    win.expose(&[0]).wait();
                }
            }
            t_end = Some(Instant::now());
        }
    }
    world.barrier();
    match (t_start, t_end) {
        (Some(s), Some(e)) => (e - s).as_secs_f64(),
        _ => 0.0,
    }
}

/// The bandwidth of every `-m` size, each with a fresh window of `size * W` bytes, printed by
/// rank 0 as OSU does: `size / 1e6 * iterations * W / time` MB/s (doubled when
/// bidirectional). The header is the caller's.
pub fn rma_bandwidth_sizes(world: &SimpleCommunicator, spec: &RmaSpec, o: &RmaOptions) {
    let w = o.opts.window_size;
    for size in o.sizes() {
        let (iters, warm) = (o.opts.iterations_for(size), o.opts.skip_for(size));
        let bytes = size.saturating_mul(w);
        let mut buf = PageBuf::<u8>::filled(bytes);
        let t = with_rma_window::<u8, _>(world, o.win, bytes, |win| {
            bandwidth_loop(world, spec, o, win, buf.as_mut_slice(), size, iters, warm)
        });
        if world.rank() == 0 {
            let bw = bandwidth_mb_s(size, iters * w, t);
            print!(
                "{}",
                row(size, if spec.bidirectional { bw * 2.0 } else { bw })
            );
        }
    }
}
