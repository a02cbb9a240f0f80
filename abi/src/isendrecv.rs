//! `MPI_Isendrecv` and `MPI_Isendrecv_replace`: one request made of a receive and a send,
//! complete when both are. This module owns that pairing (and the copy `replace` sends
//! from); the point-to-point rules are `p2p`'s.

use std::os::raw::c_int;

use crate::error::MpiResult;
use crate::mem::Region;
use crate::p2p::{start_recv, start_send};
use crate::requests::{self, Mode, ReqRec, ReqState};
use crate::state::Core;

/// `MPI_Isendrecv`: the receive's request, which completes once the send has too. With
/// `replace`, the outgoing data is copied first (`MPI_Isendrecv_replace`).
#[allow(clippy::too_many_arguments)]
pub fn start(
    core: &mut Core,
    comm: c_int,
    send: &Region,
    dest: c_int,
    send_tag: c_int,
    recv: &Region,
    source: c_int,
    recv_tag: c_int,
    replace: bool,
) -> MpiResult<ReqRec> {
    let mut keep = None;
    let copy;
    let send = if replace {
        let mut plan = crate::icoll::Plan::default();
        let data = send.pack()?;
        let count = data.len();
        let (_, span) = plan.owned(data);
        copy = Region {
            span,
            origin: 0,
            count,
            ty: crate::state::datatype(crate::mem::BYTE, true)?,
        };
        keep = Some(plan);
        &copy
    } else {
        send
    };
    let mut r = start_recv(core, comm, recv, source, recv_tag)?;
    let s = match start_send(core, comm, send, dest, send_tag, Mode::Standard) {
        Ok(s) => s,
        Err(e) => {
            if let ReqState::Active(id) = r.state {
                if core.engine.cancel(id, r.ctx) {
                    let _ = requests::wait(&mut core.engine, &mut r);
                }
            }
            return Err(e);
        }
    };
    let extra = r.extra();
    extra.companion = Some(Box::new(s));
    if let Some(k) = keep {
        extra.aux = Some(Box::new(k));
    }
    Ok(r)
}
