//! An engine's start-up (transports through the transport set, cards through the runtime's
//! modex) and finalize. Owns the order of those steps; it must never pick a transport itself:
//! that is the transport set's decision.

use std::collections::{HashMap, VecDeque};

use kestrel_runtime::Runtime;
use kestrel_transport::component::{Component, OpenContext};
use kestrel_transport::core_params;
use kestrel_transport::params::Params;
use kestrel_transport::set;

use super::*;

impl Engine {
    /// Sets up the transports the `btl` parameter allows from `registry` through the
    /// transport set, exchanges their cards through the runtime (one fence, on every rank),
    /// and routes every rank.
    pub fn new(
        params: &Params,
        rt: &mut Runtime,
        registry: &'static [&'static dyn Component],
    ) -> Result<Engine, PmlError> {
        // A malformed tuning table stops the start here, naming its file and line, rather
        // than each collective falling back to other choices than the other processes.
        crate::coll_table::Table::from_params(params)
            .map_err(|e| PmlError::Invalid(e.to_string()))?;
        let rank = rt.rank();
        let size = rt.size();
        let runtime_err = |e: kestrel_runtime::RuntimeError| PmlError::Runtime(e.to_string());
        let nodes = rt.node_ids().map_err(runtime_err)?.to_vec();
        let job_id = rt.job_id().to_string();
        let job_tag = file_safe(&job_id);
        let file_prefix = format!("kestrel.{job_tag}.");
        let cx = OpenContext {
            me: rank,
            nodes: &nodes,
            set_id: &job_id,
            file_prefix: &file_prefix,
        };
        let opening = set::open(registry, params, &cx, &vec![true; size as usize])
            .map_err(PmlError::Transport)?;
        let network_flush = opening.has_network();
        rt.put(set::CARDS_KEY, &opening.bundle())
            .map_err(runtime_err)?;
        if rank == 0 {
            rt.put(set::JOB_KEY_KEY, &set::new_job_key().to_le_bytes())
                .map_err(runtime_err)?;
        }
        rt.fence().map_err(runtime_err)?;
        let key = rt
            .get(0, set::JOB_KEY_KEY)
            .map_err(runtime_err)?
            .and_then(|k| <[u8; 8]>::try_from(&k[..]).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| {
                PmlError::Transport(
                    "transport set: rank 0 published no job key (a rank of another Kestrel \
                     version?)"
                        .into(),
                )
            })?;
        let mut bundles = Vec::with_capacity(size as usize);
        for p in 0..size {
            bundles.push(if p == rank {
                None
            } else {
                rt.get(p, set::CARDS_KEY).map_err(runtime_err)?
            });
        }
        let describe = |p: u32| format!("rank {p} on {}", nodes[p as usize]);
        let transports = opening
            .attach(&bundles, key, &describe)
            .map_err(PmlError::Transport)?;
        Ok(Engine::with_transports(
            params,
            EngineSetup {
                rank,
                size,
                nodes,
                job_id,
                transports,
                network_flush,
                registry,
            },
        ))
    }

    /// An engine over transports set up elsewhere (by [`Engine::new`], or by a test over
    /// in-memory transports).
    pub fn with_transports(params: &Params, setup: EngineSetup) -> Engine {
        let EngineSetup {
            rank,
            size,
            nodes,
            job_id,
            transports,
            network_flush,
            registry,
        } = setup;
        let set::Attached {
            btls,
            names,
            route,
            bulk_route,
            bulk_from,
            unreachable,
        } = transports;
        let selected = names.join(",");
        tracing::debug!(target: "pml", rank, btls = %selected, "transports ready");
        let kernel_time = btls.iter().any(|b| b.needs_kernel_time());
        let eager_limits = btls.iter().map(|b| b.limits().eager_limit).collect();
        let node_coll = registry.iter().find_map(|c| c.node_collectives());
        let mut e = Engine {
            rank,
            size,
            btls,
            eager_limits,
            route,
            bulk_route,
            bulk_from,
            poll_skip: Vec::new(),
            poll_hot: Vec::new(),
            nodes,
            unreachable,
            network_flush,
            registry,
            node_coll,
            st: State {
                ctxs: Vec::new(),
                orphans: HashMap::new(),
                reqs: Vec::new(),
                free_reqs: Vec::new(),
                outbox: VecDeque::new(),
                gets: Vec::new(),
                puts: Vec::new(),
                remote_reads: Vec::new(),
                released: Vec::new(),
                matched: Vec::new(),
                probed: Vec::new(),
                scratch: Vec::new(),
                protocol_errors: 0,
                counters: Default::default(),
                detached: Vec::new(),
                spares: Default::default(),
                rma_inbox: VecDeque::new(),
            },
            next_ctx: 2,
            ctx_claims: Vec::new(),
            // A rank polling a kernel-driven transport yields between polls even with a
            // core of its own: the packets it waits for are processed on the same cores.
            yield_when_idle: core_params::YIELD_WHEN_IDLE.get(params) || kernel_time,
            spin_before_yield: crate::params::SPIN_BEFORE_YIELD.get(params) as u32,
            sleep: super::sleep::IdleSleep::from_params(params),
            selected,
            params: params.clone(),
            split_copy_min: crate::params::SPLIT_COPY_MIN.get(params),
            job_tag: file_safe(&job_id),
            coll_segments: Vec::new(),
            coll_segment_calls: Vec::new(),
            coll_hier: Vec::new(),
            coll_scopes: Vec::new(),
            coll_table: crate::coll_table::Table::from_params(params).unwrap_or_else(|e| {
                tracing::warn!(target: "coll", "{e}; using the built-in table");
                crate::coll_table::Table::builtin(crate::params::ALLREDUCE_RING_MIN.get(params))
            }),
            coll_posted: Vec::new(),
            alltoall_auto: None,
            scatter_gather_auto: None,
            nbc: Default::default(),
            rma: Default::default(),
            dpm: crate::procs::DpmState::new(&job_id, size),
        };
        e.add_context(CTX_WORLD, (0..size).collect());
        e.add_context(CTX_SELF, vec![rank]);
        e.refresh_polling();
        e
    }

    /// Completes all queued sends, then waits for every rank (through the runtime, which does
    /// not need the transports) so that no peer still reads our memory when it goes away.
    pub fn finalize(&mut self, rt: &mut Runtime) -> Result<(), PmlError> {
        let mut idle = 0;
        while !self.st.outbox.is_empty()
            || self.st.reqs.iter().any(|s| matches!(&s.req, Some(Req::Send { state, .. }) if !matches!(state, SendState::Done)))
        {
            self.idle_step(&mut idle);
            if idle > 10_000_000 {
                break;
            }
        }
        // A transport that acknowledges its data (usnic) may still owe a peer a resend after
        // the last send completed here. Every rank's receives are complete once all ranks
        // reach this barrier, so what is left to flush afterwards is only acknowledgements
        // and resends that peers still progressing will answer.
        // `network_flush` is the same on every rank (it depends on the node list and the btl
        // parameter only), so either every rank enters this barrier or none does.
        if self.network_flush {
            self.coll_barrier(CTX_WORLD)?;
        }
        // Transports of connections to other jobs flush too: those jobs keep running and
        // must get what this process sent before it leaves.
        if self.network_flush || self.dpm.has_connections() {
            let mut idle = 0;
            while !self.btls.iter_mut().all(|b| b.quiesce()) {
                self.idle_step(&mut idle);
            }
        }
        self.dpm_finalize();
        rt.barrier().map_err(|e| PmlError::Runtime(e.to_string()))?;
        self.coll_segments.clear();
        self.coll_segment_calls.clear();
        self.coll_hier.clear();
        self.coll_scopes.clear();
        self.coll_posted.clear();
        self.btls.clear();
        self.eager_limits.clear();
        Ok(())
    }
}
