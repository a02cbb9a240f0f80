//! The transports and lifelines of a connection's new pairs: opened through the transport set
//! over the union of both groups (the same code path as a job's start-up), routed through
//! [`Remapped`] instances, and abandoned together when the connection fails. Owns the slots
//! a connection adds; it must never know a concrete transport.

use kestrel_runtime::dpm::listener::{connect_any, parse_contact, read_frame_after_challenge};
use kestrel_runtime::dpm::ProcInfo;
use kestrel_transport::component::OpenContext;
use kestrel_transport::set::remap::{Remapped, Retired};
use kestrel_transport::set::{self, NO_ROUTE};

use super::*;

impl Engine {
    /// Opens this process's transports for the new pairs through the transport set (the
    /// same code path as a job's start-up, over the union of both groups).
    pub(super) fn prepare_transports(
        &mut self,
        conn: u64,
        union: &[ProcInfo],
        my_u: u32,
        new_remote: &[(u32, usize)],
    ) -> Result<set::Opening, String> {
        let nodes: Vec<String> = union.iter().map(|p| p.node.clone()).collect();
        let mut wanted = vec![false; union.len()];
        wanted[my_u as usize] = true;
        for &(_, u) in new_remote {
            wanted[u] = true;
        }
        let set_id = format!("dpm-{conn:x}");
        let file_prefix = format!("kestrel.{}.dpm{conn:x}.", self.job_tag());
        let cx = OpenContext {
            me: my_u,
            nodes: &nodes,
            set_id: &set_id,
            file_prefix: &file_prefix,
        };
        set::open(self.registry, self.params(), &cx, &wanted)
    }

    /// Hands the union's cards to this process's transports and routes the new processes
    /// through them.
    pub(super) fn attach_transports(
        &mut self,
        conn: u64,
        prepared: set::Opening,
        union: &[ProcInfo],
        my_u: u32,
        union_cards: &[Vec<u8>],
        new_remote: &[(u32, usize)],
    ) -> Result<Vec<usize>, String> {
        let bundles: Vec<Option<Vec<u8>>> = union_cards
            .iter()
            .enumerate()
            .map(|(u, c)| (u as u32 != my_u).then(|| c.clone()))
            .collect();
        let describe = |u: u32| {
            let p = &union[u as usize];
            format!("rank {} of job {} (node {})", p.rank, p.job, p.node)
        };
        let attached = prepared.attach(&bundles, conn.max(1), &describe)?;
        if self.btls.len() + attached.btls.len() >= NO_ROUTE as usize {
            return Err("too many transport instances (connections) in this process; disconnect the ones no longer needed".into());
        }
        let mut slots = Vec::new();
        for (i, btl) in attached.btls.into_iter().enumerate() {
            let pairs: Vec<(u32, u32)> = new_remote
                .iter()
                .filter(|&&(_, u)| {
                    attached.route[u] == i as u8 || attached.bulk_route[u] == i as u8
                })
                .map(|&(p, u)| (p, u as u32))
                .collect();
            let slot = self.btls.len();
            if btl.needs_kernel_time() {
                // A connection over kernel UDP (usnic) needs the yields a job started with it
                // gets (`Engine::yield_when_idle`).
                self.yield_when_idle = true;
            }
            self.eager_limits.push(btl.limits().eager_limit);
            self.btls.push(Box::new(Remapped::new(btl, &pairs)));
            for &(p, u) in &pairs {
                if attached.route[u as usize] == i as u8 {
                    self.route[p as usize] = slot as u8;
                }
                if attached.bulk_route[u as usize] == i as u8 {
                    self.bulk_route[p as usize] = slot as u8;
                    self.bulk_from[p as usize] = attached.bulk_from[u as usize];
                }
            }
            slots.push(slot);
        }
        for &(p, u) in new_remote {
            if self.route[p as usize] == NO_ROUTE {
                let why = attached.unreachable[u].clone().unwrap_or_default();
                self.unreachable[p as usize] = Some(why.clone());
                return Err(format!(
                    "no transport reaches {}: {why}",
                    describe(u as u32)
                ));
            }
        }
        self.refresh_polling();
        tracing::debug!(target: "dpm", conn = format_args!("{conn:x}"), slots = ?slots, "connection transports attached");
        Ok(slots)
    }

    /// The connecting side opens a lifeline to each new remote process; the accepting side
    /// waits for them.
    pub(super) fn open_lifelines(
        &mut self,
        conn: u64,
        acceptor: bool,
        union: &[ProcInfo],
        new_remote: &[(u32, usize)],
        timeout: Duration,
    ) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let label = |u: usize| format!("rank {} of job {}", union[u].rank, union[u].job);
        if acceptor {
            let expected: Vec<(String, u32)> = new_remote
                .iter()
                .map(|&(_, u)| (union[u].job.clone(), union[u].rank))
                .collect();
            let got = {
                let mut idle = 0u32;
                let listener = self.dpm.listener.take().ok_or("no out-of-band listener")?;
                let r = listener
                    .wait_lifelines(conn, &expected, deadline, &mut || self.idle_step(&mut idle));
                self.dpm.listener = Some(listener);
                r
            };
            let streams = got.map_err(|missing| {
                let names: Vec<String> = missing
                    .iter()
                    .map(|(j, r)| format!("rank {r} of job {j}"))
                    .collect();
                format!(
                    "no lifeline from {} within {} ms (dpm_connect_timeout_ms)",
                    names.join(", "),
                    timeout.as_millis()
                )
            })?;
            for (stream, &(p, u)) in streams.into_iter().zip(new_remote) {
                self.dpm
                    .lifelines
                    .add(p, stream, label(u))
                    .map_err(|e| format!("lifeline to {}: {e}", label(u)))?;
            }
        } else {
            let (job, rank) = (self.dpm.job.clone(), self.rank());
            for &(p, u) in new_remote {
                let addrs =
                    parse_contact(&union[u].contact).map_err(|e| format!("{}: {e}", label(u)))?;
                let mut idle = 0u32;
                let mut stream =
                    connect_any(&addrs, deadline, &mut || self.idle_step(&mut idle))
                        .map_err(|e| format!("cannot open a lifeline to {}: {e}", label(u)))?;
                let left = deadline
                    .saturating_duration_since(Instant::now())
                    .max(Duration::from_millis(1));
                let _ = stream.set_read_timeout(Some(left));
                write_frame(
                    &mut stream,
                    &OobMsg::Lifeline {
                        conn,
                        job: job.clone(),
                        rank,
                    },
                )
                .and_then(|()| match read_frame_after_challenge(&mut stream)? {
                    OobMsg::LifelineOk => Ok(()),
                    _ => Err(FrameError::Closed),
                })
                .map_err(|e| format!("lifeline to {}: {e}", label(u)))?;
                let _ = stream.set_read_timeout(None);
                self.dpm
                    .lifelines
                    .add(p, stream, label(u))
                    .map_err(|e| format!("lifeline to {}: {e}", label(u)))?;
            }
        }
        Ok(())
    }

    /// Undoes a connection whose set-up failed.
    pub(super) fn abandon(&mut self, new_remote: &[(u32, usize)], slots: &[usize]) {
        let procs: Vec<u32> = new_remote.iter().map(|&(p, _)| p).collect();
        self.dpm.lifelines.say_bye(&procs);
        self.dpm.lifelines.retire(&procs);
        for &slot in slots {
            self.btls[slot] = Box::new(Retired::after(&*self.btls[slot]));
        }
        for &p in &procs {
            let (job, rank) = self.dpm.identity(p);
            self.dpm.known.remove(&(job, rank));
            self.process_gone(p, false, "its connection could not be set up".into());
        }
    }
}
