//! `osu_ireduce`: OSU's nonblocking reduce overlap test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel. `kestrel-run -n N target/release/osu_ireduce
//! [options]`
//!
//! Each iteration is an `MPI_Ireduce`-equivalent (`MPI_SUM` of `size` C chars, `MPI_CHAR`)
//! to a root that rotates every iteration (`i % ranks`, as OSU 7.4 forces): first started
//! and waited for at once (the pure communication time), then started, overlapped with a
//! dummy computation as long as that time, and waited for. Rank 0 prints the overall time,
//! the computation, the pure communication time and the overlap in percent (see
//! `kestrel_bench::osu` and its `nbc` module). Sizes 1 B to 1 MiB in powers of two. At least
//! two ranks.

use kestrel::collective::SystemOperation;
use kestrel::immediate::ImmediateRoot;
use kestrel::request::{LocalScope, Request};
use kestrel::{Communicator, SimpleCommunicator};
use kestrel_bench::osu;

const SPEC: osu::Spec = osu::IREDUCE;

struct Ireduce<'w> {
    world: &'w SimpleCommunicator,
    s_buf: osu::AlignedBuf,
    r_buf: osu::AlignedBuf,
}

impl osu::NbcStart for Ireduce<'_> {
    fn start<'a>(&'a mut self, scope: &LocalScope<'a>, size: usize, root: usize) -> Request<'a> {
        let sb = &self.s_buf.as_i8_slice()[..size];
        let root_process = self.world.process_at_rank(root as i32);
        if self.world.rank() as usize == root {
            let rb = &mut self.r_buf.as_mut_i8_slice()[..size];
            root_process.immediate_reduce_into_root(scope, sb, rb, SystemOperation::sum())
        } else {
            root_process.immediate_reduce_into(scope, sb, SystemOperation::sum())
        }
    }
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match osu::coll_begin(&SPEC, &world, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    let max = opts.sizes(&SPEC).last().copied().unwrap_or(0);
    let mut op = Ireduce {
        world: &world,
        s_buf: osu::AlignedBuf::new(max),
        r_buf: osu::AlignedBuf::new(max),
    };
    op.s_buf.as_mut_slice().fill(1);
    osu::nbc_run(&world, &SPEC, &opts, &mut op);
    osu::exit(universe, 0);
}
