//! `osu_iallgather`: OSU's nonblocking allgather overlap test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel. `kestrel-run -n N target/release/osu_iallgather
//! [options]`
//!
//! Each iteration is an `MPI_Iallgather`-equivalent of `size` bytes per rank (`MPI_CHAR`):
//! first started and waited for at once (the pure communication time), then started,
//! overlapped with a dummy computation as long as that time, and waited for. Rank 0 prints
//! the overall time, the computation, the pure communication time and the overlap in percent
//! (see `kestrel_bench::osu` and its `nbc` module). Sizes 1 B to 1 MiB in powers of two. At
//! least two ranks.

use kestrel::immediate::ImmediateCollectives;
use kestrel::request::{LocalScope, Request};
use kestrel::{Communicator, SimpleCommunicator};
use kestrel_bench::osu;

const SPEC: osu::Spec = osu::IALLGATHER;

struct Iallgather<'w> {
    world: &'w SimpleCommunicator,
    nprocs: usize,
    s_buf: osu::AlignedBuf,
    r_buf: osu::AlignedBuf,
}

impl osu::NbcStart for Iallgather<'_> {
    fn start<'a>(&'a mut self, scope: &LocalScope<'a>, size: usize, _root: usize) -> Request<'a> {
        let sb = &self.s_buf.as_slice()[..size];
        let rb = &mut self.r_buf.as_mut_slice()[..size * self.nprocs];
        self.world.immediate_all_gather_into(scope, sb, rb)
    }
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let nprocs = world.size() as usize;
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match osu::coll_begin(&SPEC, &world, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    let max = opts.sizes(&SPEC).last().copied().unwrap_or(0);
    let mut op = Iallgather {
        world: &world,
        nprocs,
        s_buf: osu::AlignedBuf::new(max),
        r_buf: osu::AlignedBuf::new(max * nprocs),
    };
    op.s_buf.as_mut_slice().fill(1);
    osu::nbc_run(&world, &SPEC, &opts, &mut op);
    osu::exit(universe, 0);
}
