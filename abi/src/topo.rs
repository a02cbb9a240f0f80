//! Process topologies attached to communicators: the C library's view of
//! [`kestrel_pml::topo`] (Cartesian grids, graphs, distributed graphs).
//!
//! This module owns which topology a communicator carries and the neighbor lists that
//! neighborhood collectives use; the geometry itself is `kestrel_pml::topo`'s. It never
//! communicates.

use kestrel_pml::topo::{Cart, DistGraph, Graph};

/// A communicator's topology.
#[derive(Debug, Clone)]
pub enum Topology {
    /// `MPI_Cart_create`.
    Cart(Cart),
    /// `MPI_Graph_create`.
    Graph(Graph),
    /// `MPI_Dist_graph_create(_adjacent)`.
    DistGraph(DistGraph),
}
