//! `kestrel-run`: start a Kestrel (or any PMI) job. See `kestrel-run --help`.
//!
//! The launcher is `kestrel_runtime::launcher`; this binary tells it what only the layers
//! above the runtime know: every parameter a rank reads (so `--mca` is checked before any rank
//! starts) and how much shared memory the shm transport will take on a host.

use std::path::PathBuf;

use kestrel::Params;
use kestrel_runtime::launcher::Layers;

/// The shm transport's segment directory and its bytes for `local_ranks` ranks on one host,
/// when the job may use it (`btl` allows `shm`) and there is more than one rank there.
fn shm_footprint(params: &Params, local_ranks: u32) -> Option<(PathBuf, u64)> {
    let btl = kestrel_transport::core_params::BTL.get(params);
    if local_ranks < 2 || !btl.allows("shm") {
        return None;
    }
    Some(kestrel_shm::job_footprint(params, local_ranks as usize))
}

fn main() {
    let layers = Layers {
        specs: kestrel::all_param_specs(),
        shm_footprint,
    };
    let code = kestrel_runtime::launcher::main(std::env::args().collect(), layers);
    std::process::exit(code);
}
