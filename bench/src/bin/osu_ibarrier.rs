//! `osu_ibarrier`: OSU's nonblocking barrier overlap test (OSU Micro-Benchmarks v7.4
//! methodology and output) on Kestrel. `kestrel-run -n N target/release/osu_ibarrier
//! [options]`
//!
//! Each iteration is an `MPI_Ibarrier`-equivalent: first started and waited for at once (the
//! pure communication time), then started, overlapped with a dummy computation as long as
//! that time, and waited for. As in OSU, it runs once with the large-message counts (`-i`
//! default 100, `-x` 10), has no size column and no datatype line, and accepts `-m` and `-M`
//! without using them. Rank 0 prints the overall time, the computation, the pure
//! communication time and the overlap in percent (see `kestrel_bench::osu` and its `nbc`
//! module). At least two ranks.

use kestrel::immediate::ImmediateCollectives;
use kestrel::request::{LocalScope, Request};
use kestrel::SimpleCommunicator;
use kestrel_bench::osu;

const SPEC: osu::Spec = osu::IBARRIER;

struct Ibarrier<'w> {
    world: &'w SimpleCommunicator,
}

impl osu::NbcStart for Ibarrier<'_> {
    fn start<'a>(&'a mut self, scope: &LocalScope<'a>, _size: usize, _root: usize) -> Request<'a> {
        self.world.immediate_barrier(scope)
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
    osu::nbc_run(&world, &SPEC, &opts, &mut Ibarrier { world: &world });
    osu::exit(universe, 0);
}
