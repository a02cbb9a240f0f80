//! Which algorithm a blocking collective runs on a communicator: the forcing `coll_*`
//! parameter, else the tuning table (`crate::coll_table`) for the communicator's shape.
//!
//! Owns the per-context shape (`Engine::coll_scopes`: node-local, across nodes, or
//! hierarchical). Must never move data; the only collective step it may take is the
//! hierarchy's set-up (`Engine::hierarchy`), which every member reaches at the same call
//! because they all choose alike.

use std::sync::Arc;

use crate::coll_table::{Coll, Scope, HIERARCHICAL};
use crate::engine::hier::Hier;
use crate::engine::{Engine, PmlError};
use crate::params;

/// What a blocking collective runs.
pub(crate) enum Chosen {
    /// The node / leaders / node phases.
    Hier(Arc<Hier>),
    /// A message algorithm over every member (one of [`Coll::algorithms`]).
    Flat(&'static str),
}

impl Engine {
    /// The algorithm of `coll` on `ctx` (of `ranks` members) for `bytes`: the one its
    /// parameter `forced` names, else the table's. `hier_ok`: the caller can run the
    /// hierarchical phases (reductions only for commutative operations). A hierarchy that
    /// is chosen but not possible falls back to the table's message algorithm. Collective
    /// when it decides a communicator's hierarchy (every member chooses alike).
    pub(crate) fn coll_choose(
        &mut self,
        ctx: u16,
        coll: Coll,
        forced: &'static kestrel_transport::Param<String>,
        ranks: u32,
        bytes: u64,
        hier_ok: bool,
    ) -> Result<Chosen, PmlError> {
        let scope = self.coll_scope(ctx);
        let hier_ok = hier_ok && scope == Scope::Hier;
        let forced = forced.get(self.params());
        let algo = match coll.algorithm(&forced) {
            Some(a) => a,
            None => self.coll_table.choose(coll, scope, ranks, bytes, hier_ok),
        };
        let algo = if algo != HIERARCHICAL {
            algo
        } else if let Some(h) = if hier_ok { self.hierarchy(ctx)? } else { None } {
            tracing::trace!(target: "coll", ctx, coll = coll.name(), bytes, algo, "chosen");
            return Ok(Chosen::Hier(h));
        } else {
            self.coll_table.choose(coll, scope, ranks, bytes, false)
        };
        tracing::trace!(target: "coll", ctx, coll = coll.name(), bytes, algo, "chosen");
        Ok(Chosen::Flat(algo))
    }

    /// Where the members of `ctx` are (decided once per context, from the launch's nodes).
    pub(crate) fn coll_scope(&mut self, ctx: u16) -> Scope {
        if let Some(Some(s)) = self.coll_scopes.get(ctx as usize) {
            return *s;
        }
        let scope = self.compute_scope(ctx);
        let idx = ctx as usize;
        if self.coll_scopes.len() <= idx {
            self.coll_scopes.resize(idx + 1, None);
        }
        self.coll_scopes[idx] = Some(scope);
        scope
    }

    fn compute_scope(&self, ctx: u16) -> Scope {
        let Some(group) = self.context_group(ctx) else {
            return Scope::Nodes;
        };
        // Members of other jobs (DPM) are on nodes this process does not know.
        if group.iter().any(|&r| r >= self.size()) {
            return Scope::Nodes;
        }
        let first = group.first().map_or("", |&r| self.node_of(r));
        if group.iter().all(|&r| self.node_of(r) == first) {
            return Scope::Node;
        }
        let hier_possible = !self.is_inter(ctx)
            && params::HIERARCHICAL.get(self.params())
            && Hier::layout(group, |r| self.node_of(r).to_string()).is_some();
        if hier_possible {
            Scope::Hier
        } else {
            Scope::Nodes
        }
    }
}
