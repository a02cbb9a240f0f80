//! The latency tests' timed loops (`osu_rma.h`'s `rma_latency` and `rma_latency_sizes`): one
//! operation per synchronization, from rank 0 to rank 1 (fence and pscw: then from rank 1 to
//! rank 0), issuing the calls of the C loop per `-s`, and the rows they print.

use std::time::Instant;

use kestrel::collective::SystemOperation;
use kestrel::window::{Epoch, Window};
use kestrel::{Communicator as _, Rank, SimpleCommunicator};

use super::window::{flush_part, with_rma_window, PageBuf};
use super::{RmaElem, RmaOp, RmaOptions, RmaSpec, SyncKind};
use crate::osu::row;

/// One latency operation's buffers (OSU's `allocate_memory_one_sided`): origin, compare and
/// result of `count` elements as the operation uses them.
struct LatencyBufs<T> {
    origin: PageBuf<T>,
    compare: PageBuf<T>,
    result: PageBuf<T>,
}

impl<T: RmaElem> LatencyBufs<T> {
    fn new(op: RmaOp, count: usize) -> LatencyBufs<T> {
        let n = |yes: bool| if yes { count } else { 0 };
        LatencyBufs {
            origin: PageBuf::filled(n(op.has_origin())),
            compare: PageBuf::filled(n(op == RmaOp::CompareAndSwap)),
            result: PageBuf::filled(n(op.has_result())),
        }
    }
}

/// One operation to `target` at displacement 0 (the C files' own function), its result (if
/// any) into `result`, which stays borrowed as long as `e` holds its results.
fn issue<'b, T: RmaElem>(
    e: &Epoch<'b, T>,
    op: RmaOp,
    target: Rank,
    origin: &[T],
    compare: &[T],
    result: &'b mut [T],
) {
    let sum = SystemOperation::sum;
    match op {
        RmaOp::Put => e.put(target, 0, origin),
        RmaOp::Get => e.get(target, 0, result),
        RmaOp::Accumulate => e.accumulate(target, 0, origin, sum()),
        RmaOp::GetAccumulate => e.get_accumulate(target, 0, origin, result, sum()),
        RmaOp::FetchAndOp => e.fetch_and_op(target, 0, &origin[0], &mut result[0], sum()),
        RmaOp::CompareAndSwap => {
            e.compare_and_swap(target, 0, &compare[0], &origin[0], &mut result[0])
        }
    }
}

/// OSU's `run_*_with_<sync>` for the latency tests on `win`: `warm` untimed then `iters` timed
/// operations of `bufs`, with the calls of `osu_rma.h`'s `rma_latency` (see the module
/// documentation of `rma`). Returns rank 0's microseconds per operation (halved for fence and
/// pscw; 0 on rank 1); a barrier ends it.
fn latency_loop<T: RmaElem>(
    world: &SimpleCommunicator,
    spec: &RmaSpec,
    sync: SyncKind,
    win: &Window<T>,
    bufs: &mut LatencyBufs<T>,
    iters: usize,
    warm: usize,
) -> f64 {
    let rank = world.rank();
    let (op, total) = (spec.op, iters + warm);
    let (lock, flush_lock) = op.lock_types();
    let origin = bufs.origin.as_slice();
    let compare = bufs.compare.as_slice();
    let result = bufs.result.as_mut_slice();
    let (mut t_start, mut t_end) = (None::<Instant>, None::<Instant>);
    let mut factor = 1.0;
    match sync {
        SyncKind::Lock if rank == 0 => {
            // lock, operation, unlock.
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock(1, lock, |e| issue(e, op, 1, origin, compare, result));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Flush | SyncKind::FlushLocal if rank == 0 => {
            // lock; per iteration operation, flush (or flush_local); unlock after the clock.
            (t_start, t_end) = win.lock(1, flush_lock, |e| {
                let mut start = None;
                for i in 0..total {
                    if i == warm {
                        start = Some(Instant::now());
                    }
                    flush_part(e, sync, 1, |p| issue(p, op, 1, origin, compare, result));
                }
                (start, Some(Instant::now()))
            });
        }
        SyncKind::LockAll if rank == 0 => {
            // lock_all, operation, unlock_all.
            for i in 0..total {
                if i == warm {
                    t_start = Some(Instant::now());
                }
                win.lock_all(|e| issue(e, op, 1, origin, compare, result));
            }
            t_end = Some(Instant::now());
        }
        SyncKind::Lock | SyncKind::Flush | SyncKind::FlushLocal | SyncKind::LockAll => {}
        SyncKind::Fence => {
            // Per iteration 3 fences: rank 0 fence, operation, fence, fence; rank 1 fence,
            // fence, operation, fence. In one run of fence epochs: its opening fence is the
            // first iteration's first one, each later iteration's first one closes an empty
            // epoch, and each iteration's two others close its operation's epoch and the
            // empty one (the order swapped on rank 1).
            factor = 0.5;
            world.barrier();
            if rank == 0 && warm == 0 {
                t_start = Some(Instant::now());
            }
            win.fences(|f| {
                for i in 0..total {
                    if i > 0 {
                        if rank == 0 && i == warm {
                            t_start = Some(Instant::now());
                        }
                        f.epoch(|_| ());
                    }
                    if rank == 0 {
                        f.epoch(|e| issue(e, op, 1, origin, compare, result));
                        f.epoch(|_| ());
                    } else {
                        f.epoch(|_| ());
                        f.epoch(|e| issue(e, op, 0, origin, compare, result));
                    }
                }
            });
            t_end = Some(Instant::now());
        }
        SyncKind::Pscw => {
            // Rank 0 start, operation, complete, post, wait; rank 1 post, wait, start,
            // operation, complete.
            factor = 0.5;
            world.barrier();
            for i in 0..total {
                if rank == 0 {
                    win.access(&[1], |e| {
                        if i == warm {
                            t_start = Some(Instant::now());
                        }
                        issue(e, op, 1, origin, compare, result);
                    });
                    win.expose(&[1]).wait();
                } else {
                    win.expose(&[0]).wait();
                    win.access(&[0], |e| issue(e, op, 0, origin, compare, result));
                }
            }
            t_end = Some(Instant::now());
        }
    }
    world.barrier();
    match (t_start, t_end) {
        (Some(s), Some(e)) if rank == 0 => (e - s).as_secs_f64() * 1e6 * factor / iters as f64,
        _ => 0.0,
    }
}

/// The latency of every `-m` size for element type `T` (sizes below one element skipped), each
/// with a fresh window of `size` bytes, printed by rank 0 as OSU does (the header is the
/// caller's).
pub fn rma_latency_sizes<T: RmaElem>(world: &SimpleCommunicator, spec: &RmaSpec, o: &RmaOptions) {
    let elem = std::mem::size_of::<T>();
    for size in o.sizes() {
        if size < elem {
            continue;
        }
        let count = size / elem;
        let (iters, warm) = (o.opts.iterations_for(size), o.opts.skip_for(size));
        let mut bufs = LatencyBufs::<T>::new(spec.op, count);
        let lat = with_rma_window::<T, _>(world, o.win, size.div_ceil(elem), |win| {
            latency_loop(world, spec, o.sync, win, &mut bufs, iters, warm)
        });
        if world.rank() == 0 {
            print!("{}", row(size, lat));
        }
    }
}

/// osu_fop_latency's and osu_cas_latency's one row for element type `T`: a window of the `-m`
/// maximum (at least one element) and the latency of one-element operations, printed by rank
/// 0 against the element's size.
pub fn rma_atomic_latency<T: RmaElem>(world: &SimpleCommunicator, spec: &RmaSpec, o: &RmaOptions) {
    let elem = std::mem::size_of::<T>();
    let (iters, warm) = (o.opts.iterations_for(elem), o.opts.skip_for(elem));
    let mut bufs = LatencyBufs::<T>::new(spec.op, 1);
    let len = o.opts.max_message_size.max(elem).div_ceil(elem);
    let lat = with_rma_window::<T, _>(world, o.win, len, |win| {
        latency_loop(world, spec, o.sync, win, &mut bufs, iters, warm)
    });
    if world.rank() == 0 {
        print!("{}", row(elem, lat));
    }
}
