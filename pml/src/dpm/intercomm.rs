//! What inter-communicators do once they exist: merge, the parts collectives need, disconnect,
//! releasing the transports of connections nobody uses any more, and finalize. Owns the end
//! of a connection; it must never start one.

use kestrel_transport::set::remap::Retired;

use super::*;

impl Engine {
    /// `MPI_Intercomm_merge`: an intra-communicator of both groups, the group whose members
    /// pass `high = false` first (ties: the group whose first member has the smaller (job,
    /// rank)). Collective over both groups.
    pub fn intercomm_merge(&mut self, ctx: u16, high: bool) -> Result<u16, PmlError> {
        let (local, remote, local_ctx) = self.inter_parts(ctx)?;
        let (me, _) = self.comm_info(local_ctx)?;
        let all = self.allgather_bytes(local_ctx, &self.next_ctx.to_le_bytes())?;
        let mut proposal = self.next_ctx;
        for a in &all {
            if let [lo, hi] = a[..] {
                proposal = proposal.max(u16::from_le_bytes([lo, hi]));
            }
        }
        let mut decision = [0u8; 4];
        if me == 0 {
            let mut mine = vec![u8::from(high)];
            mine.extend_from_slice(&proposal.to_le_bytes());
            let mut theirs = [0u8; 3];
            let r = self.exchange(ctx, TAG_MERGE, &[(0, &mine)], &mut [(0, &mut theirs[..])]);
            match r {
                Ok(()) => {
                    let their_high = theirs[0] == 1;
                    let their_proposal = u16::from_le_bytes([theirs[1], theirs[2]]);
                    let first = if high != their_high {
                        !high
                    } else {
                        self.dpm.identity(local[0]) < self.dpm.identity(remote[0])
                    };
                    let new = proposal.max(their_proposal);
                    decision = [
                        1,
                        u8::from(first),
                        new.to_le_bytes()[0],
                        new.to_le_bytes()[1],
                    ];
                }
                Err(e) => {
                    let _ = self.coll_bcast(local_ctx, 0, &mut decision);
                    return Err(e);
                }
            }
        }
        self.coll_bcast(local_ctx, 0, &mut decision)?;
        if decision[0] != 1 {
            return Err(self.remote_failure(&remote));
        }
        let new = u16::from_le_bytes([decision[2], decision[3]]);
        if new == u16::MAX {
            return Err(self.out_of_context_ids(true));
        }
        let group = if decision[1] == 1 {
            [local, remote].concat()
        } else {
            [remote, local].concat()
        };
        self.add_context(new, group);
        Ok(new)
    }

    /// (local group, remote group, local context) of an inter-communicator.
    pub(crate) fn inter_parts(&self, ctx: u16) -> Result<(Vec<u32>, Vec<u32>, u16), PmlError> {
        let c = self.ctx(ctx)?;
        match &c.inter {
            Some(i) => Ok((i.local_group.clone(), c.group.clone(), i.local_ctx)),
            None => Err(PmlError::Invalid(format!(
                "pml: context {ctx} is not an inter-communicator"
            ))),
        }
    }

    /// The error for a local group whose leader saw the other group fail.
    pub(crate) fn remote_failure(&self, remote: &[u32]) -> PmlError {
        match self.dpm.first_failed_in(remote) {
            Some((_, why)) => dpm_err(DpmError::ProcFailed(why)),
            None => dpm_err(DpmError::ProcFailed(
                "the other group of the inter-communicator failed (its leader reported it)".into(),
            )),
        }
    }

    /// `MPI_Comm_disconnect` of an inter-communicator: waits for both groups, frees the
    /// context, and closes the connections no communicator uses any more (goodbye on their
    /// lifelines, transports retired). Collective over both groups.
    pub fn disconnect(&mut self, ctx: u16) -> Result<(), PmlError> {
        let r = if self.is_inter(ctx) {
            self.inter_barrier(ctx)
        } else {
            self.coll_barrier(ctx)
        };
        self.free_context(ctx);
        self.release_unused_connections();
        r
    }

    /// Closes connections whose processes no context uses.
    pub(super) fn release_unused_connections(&mut self) {
        let mut i = 0;
        while i < self.dpm.conns.len() {
            let used = self.dpm.conns[i].procs.iter().any(|p| {
                self.st.ctxs.iter().flatten().any(|c| {
                    c.group.contains(p)
                        || c.inter.as_ref().is_some_and(|x| x.local_group.contains(p))
                })
            });
            if used {
                i += 1;
                continue;
            }
            let c = self.dpm.conns.remove(i);
            // Flush what the transports still owe (data, and acks the peers wait for) while
            // the peers still listen: after the goodbye a peer may be gone, and a send to a
            // closed endpoint never completes (measured: 16 s of spinning over ofi before
            // this ran first). Both sides are in this function, so both make progress.
            let deadline = Instant::now() + self.connect_timeout();
            while !c.btls.iter().all(|&s| self.btls[s].quiesce()) {
                if Instant::now() >= deadline {
                    tracing::debug!(target: "dpm", conn = format_args!("{:x}", c.id), "transports still busy at the deadline; closing them anyway");
                    break;
                }
                self.progress();
            }
            let lifelines = self.dpm.lifelines.clone();
            lifelines.say_bye(&c.procs);
            let deadline = Instant::now() + self.connect_timeout();
            let mut idle = 0u32;
            let late = lifelines.wait_bye(&c.procs, deadline, &mut || self.idle_step(&mut idle));
            if !late.is_empty() {
                tracing::debug!(target: "dpm", ?late, "no goodbye from these processes before the deadline");
            }
            lifelines.retire(&c.procs);
            for &s in &c.btls {
                self.btls[s] = Box::new(Retired::after(&*self.btls[s]));
            }
            for &p in &c.procs {
                let (job, rank) = self.dpm.identity(p);
                self.dpm.known.remove(&(job.clone(), rank));
                self.process_gone(
                    p,
                    false,
                    format!("rank {rank} of job {job} is disconnected"),
                );
            }
            tracing::debug!(target: "dpm", conn = format_args!("{:x}", c.id), "connection closed");
        }
    }

    /// At finalize: goodbye on every lifeline, then close them.
    pub(crate) fn dpm_finalize(&mut self) {
        let procs = self.dpm.lifelines.watched();
        if !procs.is_empty() {
            self.dpm.lifelines.say_bye(&procs);
            self.dpm.lifelines.retire(&procs);
        }
    }
}
