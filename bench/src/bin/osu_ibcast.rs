//! `osu_ibcast`: OSU's nonblocking broadcast overlap test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel. `kestrel-run -n N target/release/osu_ibcast [options]`
//!
//! Each iteration is an `MPI_Ibcast`-equivalent of `size` bytes (`MPI_CHAR`): first started
//! and waited for at once (the pure communication time, the root rotating every iteration as
//! OSU 7.4 forces), then started from rank 0 (as OSU 7.4's overlap loop does), overlapped
//! with a dummy computation as long as that time, and waited for. Rank 0 prints the overall
//! time, the computation, the pure communication time and the overlap in percent (see
//! `kestrel_bench::osu` and its `nbc` module). Sizes 1 B to 1 MiB in powers of two. At least
//! two ranks.

use kestrel::immediate::ImmediateRoot;
use kestrel::request::{LocalScope, Request};
use kestrel::{Communicator, SimpleCommunicator};
use kestrel_bench::osu;

const SPEC: osu::Spec = osu::IBCAST;

struct Ibcast<'w> {
    world: &'w SimpleCommunicator,
    buf: osu::AlignedBuf,
}

impl osu::NbcStart for Ibcast<'_> {
    fn start<'a>(&'a mut self, scope: &LocalScope<'a>, size: usize, root: usize) -> Request<'a> {
        let b = &mut self.buf.as_mut_slice()[..size];
        self.world
            .process_at_rank(root as i32)
            .immediate_broadcast_into(scope, b)
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
    let mut op = Ibcast {
        world: &world,
        buf: osu::AlignedBuf::new(max),
    };
    op.buf.as_mut_slice().fill(u8::from(world.rank() == 0));
    osu::nbc_run(&world, &SPEC, &opts, &mut op);
    osu::exit(universe, 0);
}
