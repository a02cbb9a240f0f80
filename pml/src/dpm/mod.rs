//! Dynamic processes in the messaging layer: processes of other jobs, connect/accept,
//! inter-communicators, merge, disconnect, and what happens when a connected process fails.
//!
//! **Process indices.** Every process the engine can talk to has an index: this job's ranks
//! first (index = job rank), then processes of other jobs in the order connections brought
//! them. Contexts, routes and transports address processes by index only. A process of
//! another job is identified by (job id, rank in that job); meeting it again through a second
//! connection reuses its index.
//!
//! **Transports of a connection.** The processes of both groups form a *union* numbered
//! accepting group first, then connecting group. For the pairs a connection introduces, each
//! process opens fresh transport instances through the transport set
//! (`kestrel_transport::set`, the same code path as a job's start-up) over the union, keyed
//! by the connection id: typically a shared-memory instance for the union's processes on its
//! node and a network instance for the others. `kestrel_transport::set::remap::Remapped`
//! translates between union indices and process indices, so the transports themselves never
//! see either job's ranks. Their card bundles travel in the out-of-band exchange, once per
//! process.
//!
//! Split by concern: `establish` (the connect/accept protocol), `transports` (the new pairs'
//! transports and lifelines), `link` (how the roots talk), `intercomm` (merge, disconnect,
//! finalize), `outcome` (the byte forms members exchange).
//!
//! **The protocol** (collective over the local communicator; the roots talk over TCP, or over
//! a shared communicator for `intercomm_create`): gather the local group's identities, node
//! ids, lifeline contacts and free context ids; `Connect` → `Accept` (or `Refuse`); everyone
//! creates its instances; `Cards` both ways; everyone attaches the remote cards and opens
//! lifelines; `Ready` both ways. Each root broadcasts every outcome to its group, so all
//! members return the same result. The new inter-communicator uses context id C (free on
//! every member of both groups); each group's local phase of inter-communicator collectives
//! uses C+1 among itself.
//!
//! **Failures.** Each newly connected pair keeps a lifeline (see
//! `kestrel_runtime::dpm::lifeline`). When one ends without a goodbye, the engine marks the
//! process failed: every context with it as a member breaks, its pending operations complete
//! with [`crate::Status::failed_peer`] set, and later operations on it return
//! [`PmlError::Dpm`] with `DpmError::ProcFailed`. This module never blocks without progressing
//! the engine, and never waits without a deadline except where MPI itself waits forever
//! (accept, and receives a program posted).

use std::net::TcpStream;
use std::time::{Duration, Instant};

use kestrel_runtime::dpm::listener::connect_any;
use kestrel_runtime::dpm::oob::{write_frame, FrameError};
use kestrel_runtime::dpm::{
    DpmError, LifelineEvent, Listener, OobMsg, PortEvent, PortName, PortRole, ProcInfo,
};
use kestrel_transport::set::remap::Retired;
use kestrel_transport::set::{self, NO_ROUTE};

use crate::engine::{Engine, PmlError};
use crate::procs::{Connection, Gone};

mod establish;
mod intercomm;
mod link;
mod outcome;
mod transports;

pub use outcome::{decode_outcome, encode_outcome};

/// Tag of the broadcasts inside connect/accept.
const TAG_DPM_BCAST: i32 = -30;
/// Tag of merge's leader exchange.
const TAG_MERGE: i32 = -31;

fn dpm_err(e: DpmError) -> PmlError {
    PmlError::Dpm(e)
}

/// How the two roots talk.
enum Link {
    /// Over the TCP connection of a port.
    Tcp {
        stream: TcpStream,
        peer: String,
        buf: Vec<u8>,
    },
    /// Over a communicator both roots belong to (`intercomm_create`).
    Comm { ctx: u16, peer: u32, tag: i32 },
}

/// Which side of a connection a call is.
enum Role<'a> {
    Accept(&'a str),
    Connect(&'a str),
    Create {
        peer_ctx: u16,
        remote_leader: u32,
        tag: i32,
    },
}

/// The result the roots broadcast after their first exchange.
struct Agreed {
    conn: u64,
    acceptor: bool,
    remote: Vec<ProcInfo>,
    ctx: u16,
}

impl Engine {
    /// Why process `p` failed or left, if it did.
    pub fn failure_of(&self, p: u32) -> Option<&str> {
        self.dpm.gone_reason(p)
    }

    /// The error for an operation that ended because process `p` failed.
    pub(crate) fn failure_error(&self, p: u32) -> PmlError {
        let why = self
            .dpm
            .gone_reason(p)
            .map(String::from)
            .unwrap_or_else(|| format!("process {p} failed"));
        dpm_err(DpmError::ProcFailed(why))
    }

    /// (job id, rank in that job) of process `p`.
    pub fn process_identity(&self, p: u32) -> (String, u32) {
        self.dpm.identity(p)
    }

    /// Applies what the lifeline watcher saw.
    pub(crate) fn apply_lifeline_events(&mut self) {
        let events = self.dpm.lifelines.take_events();
        if events.is_empty() {
            return;
        }
        // Messages a failed process sent before it died may still sit in a transport:
        // deliver them before its operations fail.
        self.progress();
        for ev in events {
            match ev {
                LifelineEvent::Failed { proc, why } => {
                    tracing::warn!(target: "dpm", "{why}");
                    self.process_gone(proc, true, why)
                }
                LifelineEvent::Departed { proc } => {
                    let (job, rank) = self.dpm.identity(proc);
                    self.process_gone(
                        proc,
                        false,
                        format!("rank {rank} of job {job} has disconnected or finalized"),
                    )
                }
            }
        }
    }

    /// Process `p` is gone. A failure breaks every context it belongs to and fails the
    /// operations pending on them; a departure only stops sends to it.
    fn process_gone(&mut self, p: u32, failed: bool, why: String) {
        if p < self.size() {
            return;
        }
        if let Some(g) = self.dpm.gone.get(&p) {
            if g.failed || !failed {
                return;
            }
        }
        self.dpm.gone.insert(
            p,
            Gone {
                failed,
                why: why.clone(),
            },
        );
        let mut broken = Vec::new();
        if failed {
            for (i, c) in self.st.ctxs.iter_mut().enumerate() {
                let Some(c) = c.as_mut() else { continue };
                let member = c.group.contains(&p)
                    || c.inter.as_ref().is_some_and(|x| x.local_group.contains(&p));
                if member && c.broken.is_none() {
                    c.broken = Some((p, why.clone()));
                    broken.push(i as u16);
                }
            }
        }
        self.st.fail_pending(p, &broken);
        // Its exposed rendezvous buffers are released now: nothing from it will end them, and
        // a registration would otherwise outlive the send.
        self.release_buffers_of(p);
        if let Some(r) = self.route.get_mut(p as usize) {
            *r = NO_ROUTE;
        }
        if let Some(r) = self.bulk_route.get_mut(p as usize) {
            *r = NO_ROUTE;
        }
        if let Some(f) = self.bulk_from.get_mut(p as usize) {
            *f = u32::MAX;
        }
        self.refresh_polling();
        // A connection whose processes are all gone takes its transports with it: a network
        // instance would otherwise keep resending to the dead and, after
        // usnic_peer_timeout_ms, end this process.
        if let Some(i) = self.dpm.conns.iter().position(|c| c.procs.contains(&p)) {
            if self.dpm.conns[i]
                .procs
                .iter()
                .all(|q| self.dpm.gone.contains_key(q))
            {
                let c = self.dpm.conns.remove(i);
                self.dpm.lifelines.retire(&c.procs);
                for &s in &c.btls {
                    self.btls[s] = Box::new(Retired::after(&*self.btls[s]));
                }
                tracing::debug!(target: "dpm", conn = format_args!("{:x}", c.id), "every process of the connection is gone; its transports are closed");
            }
        }
    }

    fn add_process(&mut self, info: &ProcInfo) -> u32 {
        let idx = self.route.len() as u32;
        self.route.push(NO_ROUTE);
        self.bulk_route.push(NO_ROUTE);
        self.bulk_from.push(u32::MAX);
        self.nodes.push(info.node.clone());
        self.unreachable.push(None);
        self.dpm.foreign.push((info.job.clone(), info.rank));
        self.dpm.known.insert((info.job.clone(), info.rank), idx);
        idx
    }
}

#[cfg(test)]
mod tests;
