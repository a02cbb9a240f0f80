//! The nonblocking collectives (`src/bin/osu_i*.rs`): OSU 7.4's overlap method, shared by
//! the eight programs so that each holds only its buffers and the call that starts its
//! collective ([`NbcStart`]).
//!
//! # Method (OSU 7.4's `osu_i*.c` and `osu_util_mpi.c`)
//!
//! For each size ([`nbc_run`]), after a barrier:
//!
//! 1. **Pure communication**: `-x` + `-i` times { t0; start; wait; t1; barrier }, summing
//!    t1 - t0 over the timed iterations. Its mean is the rank's *pure communication* latency.
//! 2. A barrier; the compute target is set to that latency; a barrier.
//! 3. **Overlap**: `-x` + `-i` times { t0; *init* (start the collective, timed); *compute*
//!    ([`DummyCompute::dummy_compute`]: a busy loop of OSU's 25 × 25 `float` kernel,
//!    `compute_on_host`, until its measured time reaches the target, with `-t N` split in N
//!    parts each followed by a timed test of the request); *wait* (timed); t1; barrier },
//!    summing the overall (t1 - t0), compute, test, wait and init times.
//! 4. A barrier, then OSU's `calculate_and_print_stats` ([`nbc_stats`]): the per-iteration
//!    means in microseconds are summed to rank 0 (test, pure communication, overall,
//!    compute, wait, init), the pure communication latency also reduced with `MIN` and `MAX`,
//!    and every sum divided by the ranks; a barrier. The compute column is compute minus
//!    test, and the overlap is `max(0, 100 - (overall - compute) / pure_comm * 100)`
//!    ([`nbc_overlap`]).
//!
//! The roots are OSU 7.4's ([`nbc_root`]): ireduce rotates the root every iteration in both
//! loops, ibcast rotates it in the pure-communication loop and uses rank 0 in the overlap
//! loop (as OSU 7.4's `osu_ibcast.c` does), igather and iscatter use rank 0.
//!
//! `osu_ibarrier` has no sizes: it runs once with the large counts (`-i`/`-x` default to
//! 100 and 10, OSU's `iterations_large` and `skip_large`), without the barrier after each
//! pure-communication iteration (as OSU's `osu_ibarrier.c`).
//!
//! # Output (rank 0)
//!
//! ```text
//!
//! # OSU MPI Non-blocking Allreduce Latency Test v7.4
//! # Overall = Coll. Init + Compute + MPI_Test + MPI_Wait
//!
//! # Datatype: MPI_CHAR.
//! # Size           Overall(us)       Compute(us)    Pure Comm.(us)        Overlap(%)
//! 1                       3.08              1.63              1.50              3.52
//! ```
//!
//! OSU's `print_preamble_nbc`, `print_only_header_nbc` and `print_stats_nbc`: the column
//! header is `%-10s` `# Size` then `%18s` per column; rows are `%-10d` then `%18.2f` per
//! value. With `-f` the columns are Overall, Compute, Coll. Init, MPI_Test, MPI_Wait, Pure
//! Comm., Min Comm., Max Comm. and Overlap (no iteration count, unlike the blocking tests).
//! `osu_ibarrier` has no datatype line and no size: its header starts `# Overall(us)` and
//! its row `%13.2f`.
//!
//! It times, computes and reduces; it prints only the result rows (the preamble and header
//! come from [`coll_begin`](super::coll_begin)).

use std::fmt::Write as _;
use std::time::Instant;

use kestrel::collective::{Root as _, SystemOperation};
use kestrel::request::{self, LocalScope, Request};
use kestrel::{Communicator as _, SimpleCommunicator};

use super::{Coll, Options, Spec, FIELD_WIDTH, FLOAT_PRECISION};

/// How a program starts its nonblocking collective.
pub trait NbcStart {
    /// Starts the collective on messages of `size` bytes (per rank and block) with root
    /// `root` (ignored by collectives without a root), as a request of `scope`.
    fn start<'a>(&'a mut self, scope: &LocalScope<'a>, size: usize, root: usize) -> Request<'a>;
}

/// Which of the two timing loops an iteration belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Start and wait, nothing between.
    Pure,
    /// Start, compute, wait.
    Overlap,
}

/// The root of iteration `i` of `phase` with `nprocs` ranks, as OSU 7.4 chooses it: as the
/// blocking tests ([`Coll::root`]), except that ibcast's overlap loop keeps rank 0.
pub fn nbc_root(coll: Coll, phase: Phase, i: usize, nprocs: usize) -> usize {
    match (coll, phase) {
        (Coll::Bcast, Phase::Overlap) => 0,
        _ => coll.root(i, nprocs),
    }
}

/// Side of OSU's dummy computation matrix (`DIM`).
const DIM: usize = 25;

/// OSU's dummy computation: `compute_on_host` on a 25 × 25 `float` matrix, repeated until a
/// target time has passed. The arrays start as OSU's `allocate_host_arrays` sets them
/// (`x` = `y` = 1, `a` = 2); their values do not change the time a kernel takes.
pub struct DummyCompute {
    a: [[f32; DIM]; DIM],
    x: [f32; DIM],
    y: [f32; DIM],
}

impl Default for DummyCompute {
    fn default() -> Self {
        DummyCompute {
            a: [[2.0; DIM]; DIM],
            x: [1.0; DIM],
            y: [1.0; DIM],
        }
    }
}

impl DummyCompute {
    /// One `compute_on_host`: `x[i] = x[i] + a[i][j] * a[j][i] + y[j]` for every i, j.
    fn kernel(&mut self) {
        // The optimizer may neither drop the kernel nor carry values across calls.
        let s = std::hint::black_box(&mut *self);
        for i in 0..DIM {
            for j in 0..DIM {
                s.x[i] = s.x[i] + s.a[i][j] * s.a[j][i] + s.y[j];
            }
        }
        std::hint::black_box(&mut s.x);
    }

    /// OSU's `do_compute_cpu`: kernels, each timed, until their summed time reaches `secs`
    /// (none when `secs` <= 0).
    pub fn busy(&mut self, secs: f64) {
        let mut elapsed = 0.0f64;
        while elapsed < secs {
            let t = Instant::now();
            self.kernel();
            elapsed += t.elapsed().as_secs_f64();
        }
    }

    /// OSU's `dummy_compute` (`do_compute_and_probe` on the CPU): computes for `secs`; with
    /// `probes` > 0 in `probes` parts, each followed by a test of `req` (`MPI_Test`; a
    /// completed request is gone, and later tests of it cost nothing, as `MPI_Test` on
    /// `MPI_REQUEST_NULL`). Returns the seconds spent in the tests and the request if it has
    /// not completed.
    pub fn dummy_compute<'a>(
        &mut self,
        secs: f64,
        probes: usize,
        mut req: Option<Request<'a>>,
    ) -> (f64, Option<Request<'a>>) {
        if probes == 0 {
            self.busy(secs);
            return (0.0, req);
        }
        let part = secs / probes as f64;
        let mut test_time = 0.0f64;
        for _ in 0..probes {
            self.busy(part);
            let t = Instant::now();
            if let Some(r) = req.take() {
                req = r.test().err();
            }
            test_time += t.elapsed().as_secs_f64();
        }
        (test_time, req)
    }
}

/// One rank's sums over the timed iterations of the overlap loop, in seconds.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct NbcSums {
    /// Start to completion.
    pub overall: f64,
    /// The dummy computation, tests included.
    pub compute: f64,
    /// The tests (`-t`).
    pub test: f64,
    /// The wait.
    pub wait: f64,
    /// Starting the collective.
    pub init: f64,
}

/// A row of a nonblocking test: averages over the ranks of the per-iteration means, in
/// microseconds (what OSU's `print_stats_nbc` receives).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct NbcStats {
    /// Overall time of an overlapped iteration.
    pub overall: f64,
    /// Time of the dummy computation, tests included (OSU's `cpu_time`).
    pub cpu: f64,
    /// Time of the tests.
    pub test: f64,
    /// Time in the wait.
    pub wait: f64,
    /// Time starting the collective.
    pub init: f64,
    /// Pure communication latency (average over the ranks).
    pub comm: f64,
    /// Smallest rank's pure communication latency.
    pub min_comm: f64,
    /// Largest rank's pure communication latency.
    pub max_comm: f64,
}

impl NbcStats {
    /// The compute column: computation without the tests.
    pub fn compute(&self) -> f64 {
        self.cpu - self.test
    }

    /// The overlap column ([`nbc_overlap`]).
    pub fn overlap(&self) -> f64 {
        nbc_overlap(self.overall, self.compute(), self.comm)
    }
}

/// OSU's overlap in percent: `MAX(0, 100 - ((overall - compute) / pure_comm * 100))`, with
/// C's `MAX` (a NaN from a zero `pure_comm` stays NaN, as in OSU).
pub fn nbc_overlap(overall: f64, compute: f64, pure_comm: f64) -> f64 {
    let v = 100.0 - ((overall - compute) / pure_comm) * 100.0;
    if 0.0 > v {
        0.0
    } else {
        v
    }
}

/// The column header of a nonblocking test (OSU's `print_only_header_nbc`), with its newline.
pub fn nbc_column_header(spec: &Spec, opts: &Options) -> String {
    let w = FIELD_WIDTH;
    let mut s = if spec.has_sizes() {
        format!("{:<10}{:>w$}", "# Size", "Overall(us)")
    } else {
        String::from("# Overall(us)")
    };
    let columns: &[&str] = if opts.show_full {
        &[
            "Compute(us)",
            "Coll. Init(us)",
            "MPI_Test(us)",
            "MPI_Wait(us)",
            "Pure Comm.(us)",
            "Min Comm.(us)",
            "Max Comm.(us)",
            "Overlap(%)",
        ]
    } else {
        &["Compute(us)", "Pure Comm.(us)", "Overlap(%)"]
    };
    for c in columns {
        let _ = write!(s, "{c:>w$}");
    }
    s.push('\n');
    s
}

/// A result row of a nonblocking test (OSU's `print_stats_nbc`): `%-10d%18.2f` (ibarrier:
/// `%13.2f`) for the size and overall time, then `%18.2f` for compute, pure communication
/// and overlap, or with `-f` for compute, init, test, wait, pure communication, its minimum
/// and maximum, and overlap; and a newline.
pub fn nbc_row(spec: &Spec, opts: &Options, size: usize, st: &NbcStats) -> String {
    let (w, p) = (FIELD_WIDTH, FLOAT_PRECISION);
    let mut s = if spec.has_sizes() {
        format!("{size:<10}{:>w$.p$}", st.overall)
    } else {
        format!("{:>13.p$}", st.overall)
    };
    let values = if opts.show_full {
        vec![
            st.compute(),
            st.init,
            st.test,
            st.wait,
            st.comm,
            st.min_comm,
            st.max_comm,
            st.overlap(),
        ]
    } else {
        vec![st.compute(), st.comm, st.overlap()]
    };
    for v in values {
        let _ = write!(s, "{v:>w$.p$}");
    }
    s.push('\n');
    s
}

/// OSU's `calculate_and_print_stats` without the printing, called by every rank with its
/// sums over `iterations` timed iterations and its pure communication latency in
/// microseconds: reductions to rank 0 (`SUM` of the per-iteration means, `MIN` and `MAX` of
/// the latency), then a barrier. Rank 0 gets the averages over the ranks; the others `None`.
pub fn nbc_stats(
    world: &SimpleCommunicator,
    sums: &NbcSums,
    latency_us: f64,
    iterations: usize,
) -> Option<NbcStats> {
    let per = |secs: f64| secs * 1e6 / iterations as f64;
    // OSU's order: test, pure communication, overall, compute, wait, init.
    let send = [
        per(sums.test),
        latency_us,
        per(sums.overall),
        per(sums.compute),
        per(sums.wait),
        per(sums.init),
    ];
    let lat = [latency_us];
    let root = world.process_at_rank(0);
    if world.rank() != 0 {
        root.reduce_into(&send[..], SystemOperation::sum());
        root.reduce_into(&lat[..], SystemOperation::min());
        root.reduce_into(&lat[..], SystemOperation::max());
        world.barrier();
        return None;
    }
    let (mut sum, mut min, mut max) = ([0.0f64; 6], [0.0f64], [0.0f64]);
    root.reduce_into_root(&send[..], &mut sum[..], SystemOperation::sum());
    root.reduce_into_root(&lat[..], &mut min[..], SystemOperation::min());
    root.reduce_into_root(&lat[..], &mut max[..], SystemOperation::max());
    world.barrier();
    let n = f64::from(world.size());
    Some(NbcStats {
        test: sum[0] / n,
        comm: sum[1] / n,
        overall: sum[2] / n,
        cpu: sum[3] / n,
        wait: sum[4] / n,
        init: sum[5] / n,
        min_comm: min[0],
        max_comm: max[0],
    })
}

/// Measures one size (steps 1 to 4 of the method) with `iterations` timed and `skip`
/// warm-up iterations; rank 0 gets the row's values.
pub fn nbc_measure<S: NbcStart>(
    world: &SimpleCommunicator,
    coll: Coll,
    opts: &Options,
    op: &mut S,
    size: usize,
    (iterations, skip): (usize, usize),
    compute: &mut DummyCompute,
) -> Option<NbcStats> {
    let nprocs = world.size() as usize;
    // osu_ibarrier has no barrier between its pure-communication iterations.
    let barriers = coll != Coll::Barrier;
    if barriers {
        world.barrier();
    }
    let mut timer = 0.0f64;
    for i in 0..iterations + skip {
        let root = nbc_root(coll, Phase::Pure, i, nprocs);
        let t_start = Instant::now();
        request::scope(|s| {
            op.start(s, size, root).wait();
        });
        let elapsed = t_start.elapsed().as_secs_f64();
        if barriers {
            world.barrier();
        }
        if i >= skip {
            timer += elapsed;
        }
    }
    world.barrier();
    let latency_us = timer * 1e6 / iterations as f64;
    let target = timer / iterations as f64;
    world.barrier();

    let mut sums = NbcSums::default();
    for i in 0..iterations + skip {
        let root = nbc_root(coll, Phase::Overlap, i, nprocs);
        let t_start = Instant::now();
        let (init, tcomp, test, wait) = request::scope(|s| {
            let t = Instant::now();
            let req = op.start(s, size, root);
            let init = t.elapsed().as_secs_f64();
            let t = Instant::now();
            let (test, req) = compute.dummy_compute(target, opts.num_probes, Some(req));
            let tcomp = t.elapsed().as_secs_f64();
            let t = Instant::now();
            if let Some(r) = req {
                r.wait();
            }
            (init, tcomp, test, t.elapsed().as_secs_f64())
        });
        let overall = t_start.elapsed().as_secs_f64();
        world.barrier();
        if i >= skip {
            sums.overall += overall;
            sums.compute += tcomp;
            sums.test += test;
            sums.wait += wait;
            sums.init += init;
        }
    }
    world.barrier();
    nbc_stats(world, &sums, latency_us, iterations)
}

/// The whole test after [`coll_begin`](super::coll_begin): every size of `opts` (ibarrier:
/// one run with the large counts), rank 0 printing a row for each.
pub fn nbc_run<S: NbcStart>(world: &SimpleCommunicator, spec: &Spec, opts: &Options, op: &mut S) {
    let coll = spec.coll().expect("a nonblocking collective");
    let mut compute = DummyCompute::default();
    if !spec.has_sizes() {
        let counts = (opts.iterations_large, opts.skip_large);
        if let Some(st) = nbc_measure(world, coll, opts, op, 0, counts, &mut compute) {
            print!("{}", nbc_row(spec, opts, 0, &st));
        }
        return;
    }
    for size in opts.sizes(spec) {
        let counts = (opts.iterations_for(size), opts.skip_for(size));
        if let Some(st) = nbc_measure(world, coll, opts, op, size, counts, &mut compute) {
            print!("{}", nbc_row(spec, opts, size, &st));
        }
    }
}
