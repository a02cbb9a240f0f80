//! Process topologies attached to communicators: the C library's view of
//! [`kestrel_pml::topo`] (Cartesian grids, graphs, distributed graphs).
//!
//! This module owns which topology a communicator carries, the creation calls (a split of
//! the old communicator; reordering is the identity, as MPICH's), the exchange of edge
//! lists `MPI_Dist_graph_create` needs, and the neighbor lists of the neighborhood
//! collectives; the geometry is `kestrel_pml::topo`'s. It never touches raw pointers.

use std::os::raw::c_int;
use std::sync::Arc;

use kestrel_pml::topo::{Cart, DistGraph, EdgeList, ErrorClass, Graph, Neighborhood, TopoError};
use kestrel_transport::codec::{Reader, Writer};

use crate::comm;
use crate::error::{self, MpiError, MpiResult};
use crate::state::{Core, Locked};

/// `MPI_GRAPH`.
pub const GRAPH: c_int = 1;
/// `MPI_CART`.
pub const CART: c_int = 2;
/// `MPI_DIST_GRAPH`.
pub const DIST_GRAPH: c_int = 3;
/// `MPI_ERR_TOPOLOGY`.
pub const ERR_TOPOLOGY: c_int = 10;
/// `MPI_ERR_DIMS`.
pub const ERR_DIMS: c_int = 11;

pub use crate::state::Topology;

impl Topology {
    /// `MPI_Topo_test`'s answer.
    pub fn kind(&self) -> c_int {
        match self {
            Topology::Cart(_) => CART,
            Topology::Graph(_) => GRAPH,
            Topology::DistGraph(_) => DIST_GRAPH,
        }
    }
}

/// A topology error as an MPI error of its class.
pub fn err(e: TopoError) -> MpiError {
    let class = match e.class() {
        ErrorClass::Arg => error::ERR_ARG,
        ErrorClass::Dims => ERR_DIMS,
        ErrorClass::Rank => error::ERR_RANK,
        ErrorClass::Topology => ERR_TOPOLOGY,
    };
    MpiError::new(class, e.to_string())
}

/// The topology of `comm`, which must be of the kind `want` names (`None`: any).
pub fn of(core: &Core, comm: c_int, want: Option<c_int>, what: &str) -> MpiResult<Arc<Topology>> {
    let t = core.comm(comm)?.topo.clone().ok_or_else(|| {
        MpiError::new(
            ERR_TOPOLOGY,
            format!("{what}: the communicator has no process topology"),
        )
    })?;
    if let Some(k) = want {
        if t.kind() != k {
            let name = |k| match k {
                CART => "Cartesian",
                GRAPH => "graph",
                _ => "distributed graph",
            };
            return Err(MpiError::new(
                ERR_TOPOLOGY,
                format!(
                    "{what} needs a {} topology; the communicator has a {} one",
                    name(k),
                    name(t.kind())
                ),
            ));
        }
    }
    Ok(t)
}

/// A topology communicator: the first `n` processes of `comm` in rank order (reordering
/// is the identity), with `topo` attached; `None` for the processes beyond it.
fn attach(l: &mut Locked, comm: c_int, n: u32, topo: Topology) -> MpiResult<Option<c_int>> {
    let rank = comm::intra(l.core()?, comm, "a topology constructor")?.rank;
    let color = if (rank as u32) < n {
        0
    } else {
        crate::mem::UNDEFINED
    };
    let new = crate::comm_threads::split_at_level(l, comm, color, rank)?;
    if let Some(h) = new {
        l.core()?.comm_mut(h)?.topo = Some(Arc::new(topo));
    }
    Ok(new)
}

/// `MPI_Cart_create`.
pub fn cart_create(l: &mut Locked, comm: c_int, cart: Cart) -> MpiResult<Option<c_int>> {
    let size = comm::intra(l.core()?, comm, "MPI_Cart_create")?.size() as u32;
    cart.fits(size).map_err(err)?;
    let n = cart.size();
    attach(l, comm, n, Topology::Cart(cart))
}

/// `MPI_Graph_create`.
pub fn graph_create(l: &mut Locked, comm: c_int, graph: Graph) -> MpiResult<Option<c_int>> {
    let size = comm::intra(l.core()?, comm, "MPI_Graph_create")?.size() as u32;
    graph.fits(size).map_err(err)?;
    let n = graph.nnodes();
    attach(l, comm, n, Topology::Graph(graph))
}

/// `MPI_Dist_graph_create_adjacent`.
pub fn dist_graph_adjacent(l: &mut Locked, comm: c_int, g: DistGraph) -> MpiResult<c_int> {
    let size = comm::intra(l.core()?, comm, "MPI_Dist_graph_create_adjacent")?.size() as u32;
    attach(l, comm, size, Topology::DistGraph(g))?
        .ok_or_else(|| MpiError::new(error::ERR_INTERN, "a distributed graph keeps every process"))
}

/// One process's edges of `MPI_Dist_graph_create`, owned.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Edges {
    /// Source nodes.
    pub sources: Vec<i32>,
    /// Out-degree of each source.
    pub degrees: Vec<i32>,
    /// Destinations, `degrees[i]` per source.
    pub destinations: Vec<i32>,
    /// Weights, one per destination, when given.
    pub weights: Option<Vec<i32>>,
}

fn encode(e: &Edges) -> Vec<u8> {
    let mut w = Writer::new();
    let list = |w: &mut Writer, v: &[i32]| {
        w.u32(v.len() as u32);
        for x in v {
            w.i32(*x);
        }
    };
    list(&mut w, &e.sources);
    list(&mut w, &e.degrees);
    list(&mut w, &e.destinations);
    w.u8(u8::from(e.weights.is_some()));
    list(&mut w, e.weights.as_deref().unwrap_or(&[]));
    w.into_vec()
}

/// Another process's edges (checked: the bytes came from it).
fn decode(b: &[u8], limit: usize) -> MpiResult<Edges> {
    let bad = |e: kestrel_transport::codec::DecodeError| {
        MpiError::new(
            error::ERR_INTERN,
            format!("a process sent malformed graph edges: {e}"),
        )
    };
    let mut r = Reader::new(b, "distributed graph edges");
    let list = |r: &mut Reader, what: &'static str| -> MpiResult<Vec<i32>> {
        // A count larger than the bytes left is refused before anything is allocated.
        let n = r.count(what, 4).map_err(bad)?;
        if n > limit {
            return Err(MpiError::new(
                error::ERR_INTERN,
                format!("a process sent {n} {what}, more than {limit}"),
            ));
        }
        (0..n).map(|_| r.i32(what).map_err(bad)).collect()
    };
    let sources = list(&mut r, "sources")?;
    let degrees = list(&mut r, "degrees")?;
    let destinations = list(&mut r, "destinations")?;
    let weighted = r.u8("weighted").map_err(bad)? == 1;
    let w = list(&mut r, "weights")?;
    r.finish("distributed graph edges").map_err(bad)?;
    Ok(Edges {
        sources,
        degrees,
        destinations,
        weights: weighted.then_some(w),
    })
}

/// `MPI_Dist_graph_create`: every process's edges go to every process, which keeps its
/// own in and out neighbors.
pub fn dist_graph_create(l: &mut Locked, comm: c_int, mine: &Edges) -> MpiResult<c_int> {
    let core = l.core()?;
    let (ctx, rank, size) = {
        let c = comm::intra(core, comm, "MPI_Dist_graph_create")?;
        (c.ctx, c.rank as u32, c.size() as usize)
    };
    let all = core
        .engine
        .allgather_bytes(ctx, &encode(mine))
        .map_err(error::pml(error::ERR_COMM))?;
    // No process names more edges than this many times the communicator size.
    let limit = 1 << 24;
    let edges = all
        .iter()
        .map(|b| decode(b, limit.max(size)))
        .collect::<MpiResult<Vec<Edges>>>()?;
    let lists: Vec<EdgeList> = edges
        .iter()
        .map(|e| EdgeList {
            sources: &e.sources,
            degrees: &e.degrees,
            destinations: &e.destinations,
            weights: e.weights.as_deref(),
        })
        .collect();
    let g = DistGraph::from_edges(rank, &lists).map_err(err)?;
    attach(l, comm, size as u32, Topology::DistGraph(g))?
        .ok_or_else(|| MpiError::new(error::ERR_INTERN, "a distributed graph keeps every process"))
}

/// Whether `comm` has a Cartesian topology.
pub fn is_cart(core: &Core, comm: c_int) -> bool {
    core.comm(comm)
        .ok()
        .and_then(|c| c.topo.as_ref())
        .is_some_and(|t| matches!(**t, Topology::Cart(_)))
}

/// The neighbors of this process for the neighborhood collectives.
pub fn neighborhood(core: &Core, comm: c_int) -> MpiResult<Neighborhood> {
    let t = of(core, comm, None, "a neighborhood collective")?;
    let rank = core.comm(comm)?.rank as u32;
    match &*t {
        Topology::Cart(c) => c.neighbors(rank).map_err(err),
        Topology::Graph(g) => g.neighborhood(rank).map_err(err),
        Topology::DistGraph(d) => Ok(d.neighborhood()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_lists_round_trip_and_reject_truncation() {
        let e = Edges {
            sources: vec![0, 3],
            degrees: vec![2, 1],
            destinations: vec![1, 2, -5],
            weights: Some(vec![7, 8, 9]),
        };
        let b = encode(&e);
        assert_eq!(decode(&b, 100).unwrap(), e);
        for cut in 0..b.len() {
            assert!(decode(&b[..cut], 100).is_err(), "cut at {cut}");
        }
        assert!(decode(&b, 1).is_err(), "over the limit");
    }
}
