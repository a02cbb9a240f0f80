//! `osu_igather`: OSU's nonblocking gather overlap test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel. `kestrel-run -n N target/release/osu_igather
//! [options]`
//!
//! Each iteration is an `MPI_Igather`-equivalent of `size` bytes per rank (`MPI_CHAR`) to
//! rank 0 (OSU's default root): first started and waited for at once (the pure
//! communication time), then started, overlapped with a dummy computation as long as that
//! time, and waited for. Rank 0 prints the overall time, the computation, the pure
//! communication time and the overlap in percent (see `kestrel_bench::osu` and its `nbc`
//! module). Sizes 1 B to 1 MiB in powers of two. At least two ranks.

use kestrel::immediate::ImmediateRoot;
use kestrel::request::{LocalScope, Request};
use kestrel::{Communicator, SimpleCommunicator};
use kestrel_bench::osu;

const SPEC: osu::Spec = osu::IGATHER;

struct Igather<'w> {
    world: &'w SimpleCommunicator,
    nprocs: usize,
    s_buf: osu::AlignedBuf,
    r_buf: osu::AlignedBuf,
}

impl osu::NbcStart for Igather<'_> {
    fn start<'a>(&'a mut self, scope: &LocalScope<'a>, size: usize, root: usize) -> Request<'a> {
        let sb = &self.s_buf.as_slice()[..size];
        let root_process = self.world.process_at_rank(root as i32);
        if self.world.rank() as usize == root {
            let rb = &mut self.r_buf.as_mut_slice()[..size * self.nprocs];
            root_process.immediate_gather_into_root(scope, sb, rb)
        } else {
            root_process.immediate_gather_into(scope, sb)
        }
    }
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, nprocs) = (world.rank() as usize, world.size() as usize);
    let args: Vec<String> = std::env::args().skip(1).collect();
    let opts = match osu::coll_begin(&SPEC, &world, &args) {
        Ok(o) => o,
        Err(code) => osu::exit(universe, code),
    };
    let max = opts.sizes(&SPEC).last().copied().unwrap_or(0);
    let root = osu::nbc_root(osu::Coll::Gather, osu::Phase::Pure, 0, nprocs);
    let mut op = Igather {
        world: &world,
        nprocs,
        s_buf: osu::AlignedBuf::new(max),
        r_buf: osu::AlignedBuf::new(if rank == root { max * nprocs } else { 0 }),
    };
    op.s_buf.as_mut_slice().fill(1);
    osu::nbc_run(&world, &SPEC, &opts, &mut op);
    osu::exit(universe, 0);
}
