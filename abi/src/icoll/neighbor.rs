//! Neighborhood collectives (`MPI_Neighbor_*`, blocking, nonblocking and persistent): the
//! neighbor lists of the communicator's topology, and the blocks of each side, handed to
//! the engine's neighborhood schedule.

use std::os::raw::c_int;

use kestrel_pml::nbc::algorithms::Layout;
use kestrel_pml::nbc::neighbor::Neighbors;

use super::{launch, Plan, Start};
use crate::error::{self, MpiError, MpiResult};
use crate::mem::{Region, VBuf};
use crate::requests::ReqRec;
use crate::state::Core;
use crate::topo;

fn blocks_match(what: &str, have: usize, want: usize) -> MpiResult<()> {
    if have != want {
        return Err(MpiError::new(
            error::ERR_COUNT,
            format!("{what}: {have} blocks for {want} neighbors"),
        ));
    }
    Ok(())
}

/// `MPI_Neighbor_allgather(v)`: `send` to every destination; `recv` one block per source.
pub fn allgatherv(
    core: &mut Core,
    comm: c_int,
    send: &Region,
    recv: &VBuf,
    start: Start,
) -> MpiResult<ReqRec> {
    let nb = topo::neighborhood(core, comm)?;
    blocks_match("neighbor allgather", recv.counts.len(), nb.sources.len())?;
    let ctx = core.comm(comm)?.ctx;
    let mut plan = Plan::default();
    let s = plan.input(send, None);
    // Filled first: the blocks of MPI_PROC_NULL neighbors come back unchanged.
    let r = plan.output_blocks(recv, true, None);
    let n = Neighbors {
        sources: &nb.sources,
        dests: &nb.dests,
        directional: topo::is_cart(core, comm),
    };
    let layout = Layout {
        counts: &r.counts,
        displs: &r.displs,
    };
    let sched = core
        .engine
        .nbc_neighbor_allgatherv(ctx, n, s, r.buf, layout);
    launch(core, comm, start, plan, sched)
}

/// The blocks of a neighbor all-to-all, either of one datatype per side (`MPI_Neighbor_alltoall(v)`) or one per neighbor (`w`).
pub enum Side<'a> {
    /// Blocks of one datatype.
    Blocks(&'a VBuf),
    /// One region per neighbor.
    Regions(&'a [Region]),
}

/// `MPI_Neighbor_alltoall(v,w)`: block `i` of `send` to destination `i`, block `i` of
/// `recv` from source `i`.
pub fn alltoall(
    core: &mut Core,
    comm: c_int,
    send: Side<'_>,
    recv: Side<'_>,
    start: Start,
) -> MpiResult<ReqRec> {
    let nb = topo::neighborhood(core, comm)?;
    let ctx = core.comm(comm)?.ctx;
    let mut plan = Plan::default();
    let count = |s: &Side<'_>| match s {
        Side::Blocks(v) => v.counts.len(),
        Side::Regions(r) => r.len(),
    };
    blocks_match("neighbor alltoall (send)", count(&send), nb.dests.len())?;
    blocks_match(
        "neighbor alltoall (receive)",
        count(&recv),
        nb.sources.len(),
    )?;
    let s = match send {
        Side::Blocks(v) => plan.input_blocks(v),
        Side::Regions(r) => plan.region_blocks(r, true, false),
    };
    // Filled first: the blocks of MPI_PROC_NULL neighbors come back unchanged.
    let r = match recv {
        Side::Blocks(v) => plan.output_blocks(v, true, None),
        Side::Regions(r) => plan.region_blocks(r, true, true),
    };
    let n = Neighbors {
        sources: &nb.sources,
        dests: &nb.dests,
        directional: topo::is_cart(core, comm),
    };
    let sl = Layout {
        counts: &s.counts,
        displs: &s.displs,
    };
    let rl = Layout {
        counts: &r.counts,
        displs: &r.displs,
    };
    let sched = core
        .engine
        .nbc_neighbor_alltoallv(ctx, n, s.buf, sl, r.buf, rl);
    launch(core, comm, start, plan, sched)
}
