//! MPI-4 partitioned communication (`MPI_Psend_init`, `MPI_Precv_init`, `MPI_Pready*`,
//! `MPI_Parrived`): a persistent send of a buffer in partitions that the program marks
//! ready one by one, and the matching receive.
//!
//! Kestrel moves the whole buffer as one message once the last partition is ready, and a
//! partition has arrived once the whole message has (MPI allows both: partitions may be
//! transferred together). This module owns the partition bookkeeping; the message is an
//! ordinary send and receive of `p2p`. It never touches raw pointers.

use std::os::raw::c_int;

use crate::error::{self, MpiError, MpiResult};
use crate::p2p;
use crate::requests::{self, Mode, Persistent, ReqRec, ReqState};
use crate::state::Core;

/// `MPI_Psend_init` / `MPI_Precv_init`: an inactive persistent request.
pub fn init(core: &mut Core, comm: c_int, p: Persistent) -> MpiResult<c_int> {
    let c = core.comm(comm)?;
    let ctx = c.ctx;
    let recv = match &p {
        Persistent::Psend { peer, tag, .. } => {
            p2p::dest_rank(c, *peer)?;
            p2p::send_tag(*tag)?;
            false
        }
        Persistent::Precv { peer, tag, .. } => {
            p2p::source_rank(c, *peer)?;
            p2p::recv_tag(*tag)?;
            true
        }
        _ => {
            return Err(MpiError::new(
                error::ERR_INTERN,
                "a partitioned request from another persistent kind",
            ))
        }
    };
    let mut rec = ReqRec::new(comm, ctx, recv);
    rec.extra().persistent = Some(p);
    Ok(core.insert_request(rec))
}

fn slot_of(core: &Core, h: c_int) -> MpiResult<u32> {
    requests::slot(h)
        .filter(|&i| core.requests.get(i).is_some())
        .ok_or_else(|| requests::bad_request(h))
}

/// `MPI_Pready`, `MPI_Pready_range`, `MPI_Pready_list`: marks partitions ready; the
/// message leaves with the last one.
pub fn ready(core: &mut Core, h: c_int, parts: impl IntoIterator<Item = c_int>) -> MpiResult<()> {
    let i = slot_of(core, h)?;
    let (comm, region, peer, tag) = {
        let r = core.requests.get_mut(i).expect("checked");
        let Some(Persistent::Psend {
            region,
            peer,
            tag,
            partitions,
        }) = r.persistent().cloned()
        else {
            return Err(MpiError::new(
                error::ERR_REQUEST,
                format!("{h:#x} is not a partitioned send (MPI_Psend_init)"),
            ));
        };
        if !matches!(r.state, ReqState::Partitioned) {
            return Err(MpiError::new(
                error::ERR_REQUEST,
                "the partitioned send is not started, or all its partitions were ready already; call MPI_Start first",
            ));
        }
        let ready = &mut r.extra().ready;
        for p in parts {
            let k = usize::try_from(p)
                .ok()
                .filter(|&k| k < partitions)
                .ok_or_else(|| {
                    MpiError::new(
                        error::ERR_ARG,
                        format!("partition {p} is outside 0..{partitions}"),
                    )
                })?;
            ready[k] = true;
        }
        if !ready.iter().all(|&x| x) {
            return Ok(());
        }
        (r.comm, region, peer, tag)
    };
    let mut fresh = p2p::start_send(core, comm, &region, peer, tag, Mode::Standard)?;
    let r = core.requests.get_mut(i).expect("checked");
    let extra = r.extra.take();
    r.state = std::mem::replace(&mut fresh.state, ReqState::Inactive);
    let mut x = extra.unwrap_or_default();
    x.ready.clear();
    if let Some(f) = fresh.extra.take() {
        x.staging = f.staging;
    }
    r.extra = Some(x);
    Ok(())
}

/// `MPI_Parrived`: whether partition `partition` arrived (after one round of progress).
pub fn arrived(core: &mut Core, h: c_int, partition: c_int) -> MpiResult<bool> {
    let i = slot_of(core, h)?;
    let partitions = match core.requests.get(i).and_then(|r| r.persistent()) {
        Some(Persistent::Precv { partitions, .. }) => *partitions,
        _ => {
            return Err(MpiError::new(
                error::ERR_REQUEST,
                format!("{h:#x} is not a partitioned receive (MPI_Precv_init)"),
            ))
        }
    };
    if usize::try_from(partition).map_or(true, |p| p >= partitions) {
        return Err(MpiError::new(
            error::ERR_ARG,
            format!("partition {partition} is outside 0..{partitions}"),
        ));
    }
    core.engine.progress();
    let Core {
        engine, requests, ..
    } = core;
    let r = requests.get_mut(i).expect("checked");
    if matches!(r.state, ReqState::Inactive) {
        return Err(MpiError::new(
            error::ERR_REQUEST,
            "the partitioned receive is not started; call MPI_Start first",
        ));
    }
    requests::poll(engine, r)
}
