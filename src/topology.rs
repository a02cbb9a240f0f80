//! Process topologies (MPI chapter 7), shaped like rsmpi's `mpi::topology`: Cartesian grids
//! ([`CartesianCommunicator`]), graphs ([`GraphCommunicator`]) and distributed graphs
//! ([`DistributedGraphCommunicator`]), created by [`Communicator`] methods
//! ([`Communicator::create_cartesian_communicator`] and its siblings), and
//! [`dims_create`]. Each topology communicator is a communicator: point-to-point and the
//! collectives work on it, and so do the neighborhood collectives of [`crate::neighbor`].
//!
//! ```no_run
//! use kestrel::topology::{self, TopologyCommunicator};
//! use kestrel::Communicator;
//! # let universe = kestrel::initialize().unwrap();
//! let world = universe.world();
//! let mut dims = [0, 0];
//! topology::dims_create(world.size() as u32, &mut dims).unwrap();
//! let grid = world
//!     .create_cartesian_communicator(&dims, &[true, false], false)
//!     .expect("the grid holds every rank");
//! let (from_below, to_above) = grid.shift(0, 1);
//! let coords = grid.get_layout().coords;
//! # let _ = (from_below, to_above, coords, grid.neighbor_sources());
//! ```
//!
//! It owns: which topology a communicator carries (a topology communicator is a
//! [`SimpleCommunicator`] made by a split of the old one, plus the topology value), the
//! creation calls (reordering is the identity, as in MPICH and Kestrel's C library: rank
//! `r` of the old communicator is rank `r` of the new one), the exchange of edge lists
//! that [`Communicator::create_dist_graph_communicator`] needs, and each process's neighbor
//! lists for the neighborhood collectives. The geometry (coordinates, shifts, sub-grid
//! colors, `MPI_Dims_create`'s factorization, argument checks and their messages) is
//! `kestrel_pml::topo`'s.
//!
//! It must never redo that arithmetic, move message data itself (the engine's split,
//! duplicate and allgather do), or use `unsafe`.

use kestrel_pml::topo::{Cart, DistGraph, EdgeList, Graph, Neighborhood};

pub use kestrel_pml::topo::TopoError;

use crate::{Color, Communicator, Rank, SimpleCommunicator};

/// `MPI_Dims_create`: fills the 0 entries of `dims` with a balanced factorization of
/// `nnodes` divided by the product of the positive entries (which stay as they are), the
/// largest first, exactly as MPICH 4.0.2 answers. A free function (rsmpi has none): it
/// needs no communicator, so a bad argument comes back as the error, whose message names
/// the argument and the fix.
pub fn dims_create(nnodes: u32, dims: &mut [i32]) -> Result<(), TopoError> {
    kestrel_pml::topo::dims_create(nnodes, dims)
}

/// A topology error of a call on `c`: fatal, as MPI's default error handler.
fn fail(c: &SimpleCommunicator, call: &str, e: TopoError) -> ! {
    c.inner.fatal(&format!("{call}: {e}"))
}

/// A rank argument of `call` (`topo`: its name in `kestrel_pml::topo`) on a topology of
/// `size` processes.
fn checked_rank(
    c: &SimpleCommunicator,
    call: &str,
    topo: &'static str,
    rank: Rank,
    size: u32,
) -> u32 {
    match u32::try_from(rank) {
        Ok(r) if r < size => r,
        _ => fail(c, call, TopoError::Rank(topo, rank.into(), size)),
    }
}

fn ranks(list: &[u32]) -> Vec<Rank> {
    list.iter().map(|&r| r as Rank).collect()
}

/// The first `n` ranks of `c`, in order (collective over `c`); `None` for the others.
fn first(c: &SimpleCommunicator, n: u32) -> Option<SimpleCommunicator> {
    let me = c.rank();
    let color = if (me as u32) < n {
        Color::with_value(0)
    } else {
        Color::undefined()
    };
    c.split_by_color_with_key(color, me)
}

/// A communicator with a process topology: the neighbors its neighborhood collectives
/// ([`crate::neighbor::NeighborCollectives`]) exchange with. Implemented by
/// [`CartesianCommunicator`], [`GraphCommunicator`] and [`DistributedGraphCommunicator`].
pub trait TopologyCommunicator: Communicator {
    #[doc(hidden)]
    fn neighborhood(&self) -> &Neighborhood;

    #[doc(hidden)]
    fn is_cartesian(&self) -> bool {
        false
    }

    /// Where the blocks of a neighborhood collective come from: receive block `i` from
    /// `neighbor_sources()[i]`, in MPI's order (for a grid, per dimension the neighbor at
    /// -1 then the one at +1; `None` is `MPI_PROC_NULL`, past the edge of a non-periodic
    /// dimension, whose block is left as it was).
    fn neighbor_sources(&self) -> Vec<Option<Rank>> {
        let list = &self.neighborhood().sources;
        list.iter().map(|r| r.map(|r| r as Rank)).collect()
    }

    /// Where the blocks of a neighborhood collective go: send block `i` to
    /// `neighbor_destinations()[i]` (`None`: `MPI_PROC_NULL`, nothing is sent).
    fn neighbor_destinations(&self) -> Vec<Option<Rank>> {
        let list = &self.neighborhood().dests;
        list.iter().map(|r| r.map(|r| r as Rank)).collect()
    }

    /// The number of receive blocks of a neighborhood collective (`indegree` of
    /// `MPI_Dist_graph_neighbors_count`; `2 * ndims` on a grid).
    fn in_degree(&self) -> usize {
        self.neighborhood().sources.len()
    }

    /// The number of send blocks of a neighborhood collective.
    fn out_degree(&self) -> usize {
        self.neighborhood().dests.len()
    }
}

// Cartesian grids.

/// The shape of a [`CartesianCommunicator`] and this process's place in it
/// (`MPI_Cart_get`): one entry per dimension in each vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CartesianLayout {
    /// `dims[i]` processes along dimension `i`.
    pub dims: Vec<i32>,
    /// `periods[i]`: dimension `i` wraps around (its last process neighbors its first).
    pub periods: Vec<bool>,
    /// This process's coordinate along each dimension.
    pub coords: Vec<i32>,
}

/// A communicator whose ranks form an n-dimensional grid (`MPI_Cart_create`), created by
/// [`Communicator::create_cartesian_communicator`]. Ranks are row-major: the last dimension
/// varies fastest.
pub struct CartesianCommunicator {
    comm: SimpleCommunicator,
    cart: Cart,
    hood: Neighborhood,
}

impl std::fmt::Debug for CartesianCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CartesianCommunicator({:?}, {:?})", self.comm, self.cart)
    }
}

impl Communicator for CartesianCommunicator {
    fn handle(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl TopologyCommunicator for CartesianCommunicator {
    fn neighborhood(&self) -> &Neighborhood {
        &self.hood
    }

    fn is_cartesian(&self) -> bool {
        true
    }
}

impl CartesianCommunicator {
    fn new(comm: SimpleCommunicator, cart: Cart, call: &str) -> CartesianCommunicator {
        let hood = cart
            .neighbors(comm.rank() as u32)
            .unwrap_or_else(|e| fail(&comm, call, e));
        CartesianCommunicator { comm, cart, hood }
    }

    /// The number of dimensions (`MPI_Cartdim_get`).
    pub fn num_dimensions(&self) -> i32 {
        self.cart.ndims() as i32
    }

    /// The grid's extents and periodicity, and this process's coordinates (`MPI_Cart_get`).
    pub fn get_layout(&self) -> CartesianLayout {
        CartesianLayout {
            dims: ranks(self.cart.dims()),
            periods: self.cart.periods().to_vec(),
            coords: self.rank_to_coordinates(self.comm.rank()),
        }
    }

    /// The coordinates of `rank` (`MPI_Cart_coords`); a rank outside the grid is fatal.
    pub fn rank_to_coordinates(&self, rank: Rank) -> Vec<i32> {
        const CALL: &str = "rank_to_coordinates (MPI_Cart_coords)";
        let r = checked_rank(&self.comm, CALL, "cart_coords", rank, self.cart.size());
        let coords = self.cart.coords(r);
        ranks(&coords.unwrap_or_else(|e| fail(&self.comm, CALL, e)))
    }

    /// The rank at `coords` (`MPI_Cart_rank`): one coordinate per dimension; a periodic
    /// dimension wraps any coordinate (negative ones too), a non-periodic one must hold it
    /// (fatal otherwise).
    pub fn coordinates_to_rank(&self, coords: &[i32]) -> Rank {
        const CALL: &str = "coordinates_to_rank (MPI_Cart_rank)";
        let r = self.cart.rank(coords);
        r.unwrap_or_else(|e| fail(&self.comm, CALL, e)) as Rank
    }

    /// `MPI_Cart_shift`: the ranks `displacement` steps below and above this process along
    /// `dimension`, as (source, destination) of a shift towards the positive direction;
    /// `None` (`MPI_PROC_NULL`) past the edge of a non-periodic dimension.
    pub fn shift(&self, dimension: i32, displacement: i32) -> (Option<Rank>, Option<Rank>) {
        const CALL: &str = "shift (MPI_Cart_shift)";
        let ndims = self.cart.ndims();
        let dim = usize::try_from(dimension).unwrap_or_else(|_| {
            fail(
                &self.comm,
                CALL,
                TopoError::Direction(dimension.into(), ndims),
            )
        });
        let r = self.cart.shift(self.comm.rank() as u32, dim, displacement);
        let (s, d) = r.unwrap_or_else(|e| fail(&self.comm, CALL, e));
        (s.map(|r| r as Rank), d.map(|r| r as Rank))
    }

    /// `MPI_Cart_sub` (collective): the sub-grid of the dimensions with `retain[i]`, made of
    /// the processes whose coordinates differ from this one's only along them; ranks in it
    /// are row-major over the kept coordinates. With no dimension retained, every process
    /// gets a zero-dimensional grid of itself alone, as MPI says (MPICH 4.0.2 and Kestrel's
    /// C library give one to rank 0 only).
    pub fn subgroup(&self, retain: &[bool]) -> CartesianCommunicator {
        const CALL: &str = "subgroup (MPI_Cart_sub)";
        let me = self.comm.rank() as u32;
        let sub = self.cart.sub(retain);
        let sub = sub.unwrap_or_else(|e| fail(&self.comm, CALL, e));
        let split = if retain.contains(&true) {
            let s = self.cart.sub_split(me, retain);
            s.unwrap_or_else(|e| fail(&self.comm, CALL, e))
        } else {
            kestrel_pml::topo::Split {
                color: Some(me),
                key: 0,
            }
        };
        let color = Color::with_value(split.color.unwrap_or(me) as i32);
        let comm = self.comm.split_by_color_with_key(color, split.key as i32);
        let comm = comm.unwrap_or_else(|| {
            self.comm
                .inner
                .fatal("subgroup: a sub-grid split left this process out")
        });
        CartesianCommunicator::new(comm, sub, CALL)
    }

    /// `MPI_Comm_dup` (collective): the same ranks and grid in a new communication context.
    /// (The [`Communicator::duplicate`] of the trait gives a plain communicator.)
    pub fn duplicate(&self) -> CartesianCommunicator {
        let comm = Communicator::duplicate(&self.comm);
        let (cart, hood) = (self.cart.clone(), self.hood.clone());
        CartesianCommunicator { comm, cart, hood }
    }
}

/// `MPI_Cart_create` (see [`Communicator::create_cartesian_communicator`]).
pub(crate) fn cart_create(
    c: &SimpleCommunicator,
    dims: &[i32],
    periodic: &[bool],
) -> Option<CartesianCommunicator> {
    const CALL: &str = "create_cartesian_communicator (MPI_Cart_create)";
    let periods: Vec<i32> = periodic.iter().map(|&p| i32::from(p)).collect();
    let cart = Cart::from_c(dims, &periods).unwrap_or_else(|e| fail(c, CALL, e));
    let fits = cart.fits(c.size() as u32);
    fits.unwrap_or_else(|e| fail(c, CALL, e));
    let comm = first(c, cart.size())?;
    Some(CartesianCommunicator::new(comm, cart, CALL))
}

/// `MPI_Cart_map` (see [`Communicator::cartesian_map`]).
pub(crate) fn cart_map(c: &SimpleCommunicator, dims: &[i32], periodic: &[bool]) -> Option<Rank> {
    const CALL: &str = "cartesian_map (MPI_Cart_map)";
    let periods: Vec<i32> = periodic.iter().map(|&p| i32::from(p)).collect();
    let cart = Cart::from_c(dims, &periods).unwrap_or_else(|e| fail(c, CALL, e));
    let r = cart.map(c.size() as u32, c.rank() as u32);
    r.unwrap_or_else(|e| fail(c, CALL, e)).map(|r| r as Rank)
}

// Graphs.

/// The edges of a [`GraphCommunicator`] (`MPI_Graph_get`): node `i`'s neighbors are
/// `edges[index[i - 1]..index[i]]` (from 0 for node 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphLayout {
    /// Running edge counts: `index[i]` edges belong to nodes `0..=i`.
    pub index: Vec<i32>,
    /// The neighbors of every node, node after node.
    pub edges: Vec<i32>,
}

/// A communicator whose ranks are the nodes of a graph (`MPI_Graph_create`), created by
/// [`Communicator::create_graph_communicator`]. Every process knows the whole graph.
pub struct GraphCommunicator {
    comm: SimpleCommunicator,
    graph: Graph,
    hood: Neighborhood,
}

impl std::fmt::Debug for GraphCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "GraphCommunicator({:?}, {:?})", self.comm, self.graph)
    }
}

impl Communicator for GraphCommunicator {
    fn handle(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl TopologyCommunicator for GraphCommunicator {
    fn neighborhood(&self) -> &Neighborhood {
        &self.hood
    }
}

impl GraphCommunicator {
    /// The number of nodes (`MPI_Graphdims_get`'s `nnodes`, the communicator's size).
    pub fn num_nodes(&self) -> i32 {
        self.graph.nnodes() as i32
    }

    /// The number of edges (`MPI_Graphdims_get`'s `nedges`).
    pub fn num_edges(&self) -> i32 {
        self.graph.nedges() as i32
    }

    /// The whole graph (`MPI_Graph_get`).
    pub fn get_layout(&self) -> GraphLayout {
        GraphLayout {
            index: self.graph.index().to_vec(),
            edges: self.graph.edges().to_vec(),
        }
    }

    /// The neighbors of `rank`, in edge order (`MPI_Graph_neighbors`); a rank outside the
    /// graph is fatal.
    pub fn neighbors(&self, rank: Rank) -> Vec<Rank> {
        const CALL: &str = "neighbors (MPI_Graph_neighbors)";
        let size = self.graph.nnodes();
        let r = checked_rank(&self.comm, CALL, "graph_neighbors", rank, size);
        let n = self
            .graph
            .neighbors(r)
            .unwrap_or_else(|e| fail(&self.comm, CALL, e));
        n.to_vec()
    }

    /// The number of neighbors of `rank` (`MPI_Graph_neighbors_count`).
    pub fn neighbors_count(&self, rank: Rank) -> i32 {
        self.neighbors(rank).len() as i32
    }

    /// `MPI_Comm_dup` (collective): the same ranks and graph in a new communication context.
    pub fn duplicate(&self) -> GraphCommunicator {
        let comm = Communicator::duplicate(&self.comm);
        let (graph, hood) = (self.graph.clone(), self.hood.clone());
        GraphCommunicator { comm, graph, hood }
    }
}

/// `MPI_Graph_create` (see [`Communicator::create_graph_communicator`]).
pub(crate) fn graph_create(
    c: &SimpleCommunicator,
    index: &[i32],
    edges: &[i32],
) -> Option<GraphCommunicator> {
    const CALL: &str = "create_graph_communicator (MPI_Graph_create)";
    let graph = Graph::new(index.to_vec(), edges.to_vec()).unwrap_or_else(|e| fail(c, CALL, e));
    graph
        .fits(c.size() as u32)
        .unwrap_or_else(|e| fail(c, CALL, e));
    let comm = first(c, graph.nnodes())?;
    let hood = graph.neighborhood(comm.rank() as u32);
    let hood = hood.unwrap_or_else(|e| fail(c, CALL, e));
    Some(GraphCommunicator { comm, graph, hood })
}

/// `MPI_Graph_map` (see [`Communicator::graph_map`]).
pub(crate) fn graph_map(c: &SimpleCommunicator, index: &[i32], edges: &[i32]) -> Option<Rank> {
    const CALL: &str = "graph_map (MPI_Graph_map)";
    let graph = Graph::new(index.to_vec(), edges.to_vec()).unwrap_or_else(|e| fail(c, CALL, e));
    let r = graph.map(c.size() as u32, c.rank() as u32);
    r.unwrap_or_else(|e| fail(c, CALL, e)).map(|r| r as Rank)
}

// Distributed graphs.

/// A communicator with a distributed graph topology (`MPI_Dist_graph_create(_adjacent)`):
/// each process knows only its own incoming and outgoing edges. Created by
/// [`Communicator::create_dist_graph_communicator_adjacent`] or
/// [`Communicator::create_dist_graph_communicator`].
pub struct DistributedGraphCommunicator {
    comm: SimpleCommunicator,
    graph: DistGraph,
    hood: Neighborhood,
}

/// The name MPI's functions use for a [`DistributedGraphCommunicator`].
pub type DistGraphCommunicator = DistributedGraphCommunicator;

impl std::fmt::Debug for DistributedGraphCommunicator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DistributedGraphCommunicator({:?}, {:?})",
            self.comm, self.graph
        )
    }
}

impl Communicator for DistributedGraphCommunicator {
    fn handle(&self) -> &SimpleCommunicator {
        &self.comm
    }
}

impl TopologyCommunicator for DistributedGraphCommunicator {
    fn neighborhood(&self) -> &Neighborhood {
        &self.hood
    }
}

impl DistributedGraphCommunicator {
    fn new(comm: SimpleCommunicator, graph: DistGraph) -> DistributedGraphCommunicator {
        let hood = graph.neighborhood();
        DistributedGraphCommunicator { comm, graph, hood }
    }

    /// `MPI_Dist_graph_neighbors`: (sources, destinations): the ranks this process
    /// receives from and sends to, in the order the neighborhood collectives use; repeated
    /// edges and self-edges are kept.
    pub fn neighbors(&self) -> (Vec<Rank>, Vec<Rank>) {
        (ranks(&self.graph.sources), ranks(&self.graph.dests))
    }

    /// The weights of the edges of [`neighbors`](Self::neighbors), (incoming, outgoing),
    /// or `None` for an unweighted graph (`MPI_Dist_graph_neighbors`' weights).
    pub fn weights(&self) -> Option<(Vec<i32>, Vec<i32>)> {
        let g = &self.graph;
        Some((g.source_weights.clone()?, g.dest_weights.clone()?))
    }

    /// Whether the graph has weights (`MPI_Dist_graph_neighbors_count`'s `weighted`).
    pub fn is_weighted(&self) -> bool {
        self.graph.weighted()
    }

    /// `MPI_Comm_dup` (collective): the same ranks and edges in a new communication context.
    pub fn duplicate(&self) -> DistributedGraphCommunicator {
        let comm = Communicator::duplicate(&self.comm);
        DistributedGraphCommunicator::new(comm, self.graph.clone())
    }
}

/// `MPI_Dist_graph_create_adjacent` (see
/// [`Communicator::create_dist_graph_communicator_adjacent`]).
pub(crate) fn dist_graph_adjacent(
    c: &SimpleCommunicator,
    sources: &[Rank],
    destinations: &[Rank],
    weights: Option<(&[i32], &[i32])>,
) -> DistributedGraphCommunicator {
    const CALL: &str = "create_dist_graph_communicator_adjacent (MPI_Dist_graph_create_adjacent)";
    let (sw, dw) = (weights.map(|w| w.0), weights.map(|w| w.1));
    let g = DistGraph::adjacent(c.size() as u32, sources, sw, destinations, dw);
    let g = g.unwrap_or_else(|e| fail(c, CALL, e));
    DistributedGraphCommunicator::new(Communicator::duplicate(c), g)
}

/// `MPI_Dist_graph_create` (see [`Communicator::create_dist_graph_communicator`]): every
/// process's edges go to every process (an allgather), which keeps its own in and out
/// edges.
pub(crate) fn dist_graph_create(
    c: &SimpleCommunicator,
    sources: &[Rank],
    degrees: &[i32],
    destinations: &[Rank],
    weights: Option<&[i32]>,
) -> DistributedGraphCommunicator {
    const CALL: &str = "create_dist_graph_communicator (MPI_Dist_graph_create)";
    let mine = EdgeList {
        sources,
        degrees,
        destinations,
        weights,
    };
    let all = c
        .inner
        .engine
        .borrow_mut()
        .allgather_bytes(c.ctx, &encode(&mine));
    let all = all.unwrap_or_else(|e| c.inner.fatal(&format!("{CALL}: {e}")));
    let lists: Vec<Edges> = all
        .iter()
        .enumerate()
        .map(|(r, b)| {
            decode(b).unwrap_or_else(|| {
                c.inner
                    .fatal(&format!("{CALL}: rank {r} sent malformed graph edges"))
            })
        })
        .collect();
    let views: Vec<EdgeList> = lists.iter().map(Edges::view).collect();
    let g = DistGraph::from_edges(c.rank() as u32, &views);
    let g = g.unwrap_or_else(|e| fail(c, CALL, e));
    DistributedGraphCommunicator::new(Communicator::duplicate(c), g)
}

/// One process's arguments to `MPI_Dist_graph_create`, as received.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Edges {
    sources: Vec<i32>,
    degrees: Vec<i32>,
    destinations: Vec<i32>,
    weights: Option<Vec<i32>>,
}

impl Edges {
    fn view(&self) -> EdgeList<'_> {
        EdgeList {
            sources: &self.sources,
            degrees: &self.degrees,
            destinations: &self.destinations,
            weights: self.weights.as_deref(),
        }
    }
}

/// An edge list as little-endian `i32`s: the lengths of `sources` and `destinations`,
/// whether weighted, then `sources`, `degrees`, `destinations` and the weights, if any.
fn encode(e: &EdgeList) -> Vec<u8> {
    let head = [
        e.sources.len() as i32,
        e.destinations.len() as i32,
        i32::from(e.weights.is_some()),
    ];
    let weights = e.weights.unwrap_or(&[]);
    let all = [&head[..], e.sources, e.degrees, e.destinations, weights];
    all.iter()
        .flat_map(|v| v.iter())
        .flat_map(|x| x.to_le_bytes())
        .collect()
}

/// The edge list [`encode`] made, or `None` when the bytes are not one.
fn decode(b: &[u8]) -> Option<Edges> {
    if !b.len().is_multiple_of(4) {
        return None;
    }
    let v: Vec<i32> = b
        .chunks_exact(4)
        .map(|c| i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    let (&[ns, nd, weighted], rest) = (v.get(..3)?, &v[3..]) else {
        return None;
    };
    let (ns, nd) = (usize::try_from(ns).ok()?, usize::try_from(nd).ok()?);
    let nw = match weighted {
        0 => 0,
        1 => nd,
        _ => return None,
    };
    if rest.len() != (2 * ns).checked_add(nd)?.checked_add(nw)? {
        return None;
    }
    let (sources, rest) = rest.split_at(ns);
    let (degrees, rest) = rest.split_at(ns);
    let (destinations, weights) = rest.split_at(nd);
    Some(Edges {
        sources: sources.to_vec(),
        degrees: degrees.to_vec(),
        destinations: destinations.to_vec(),
        weights: (weighted == 1).then(|| weights.to_vec()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn edge_lists_round_trip_weighted_or_not() {
        let weights = [7, 8, 9];
        for w in [None, Some(&weights[..])] {
            let e = EdgeList {
                sources: &[0, 3],
                degrees: &[2, 1],
                destinations: &[1, 2, 5],
                weights: w,
            };
            let d = decode(&encode(&e)).expect("decodes");
            assert_eq!(d.view(), e);
        }
        let empty = EdgeList {
            sources: &[],
            degrees: &[],
            destinations: &[],
            weights: None,
        };
        assert_eq!(decode(&encode(&empty)).expect("decodes").view(), empty);
    }

    #[test]
    fn malformed_edge_lists_are_refused() {
        let e = EdgeList {
            sources: &[0, 3],
            degrees: &[2, 1],
            destinations: &[1, 2, 5],
            weights: Some(&[7, 8, 9]),
        };
        let b = encode(&e);
        for cut in 0..b.len() {
            assert!(decode(&b[..cut]).is_none(), "cut at {cut}");
        }
        let mut longer = b.clone();
        longer.extend_from_slice(&0i32.to_le_bytes());
        assert!(decode(&longer).is_none(), "trailing entry");
        let mut bad_flag = b.clone();
        bad_flag[8] = 2;
        assert!(decode(&bad_flag).is_none(), "weighted flag 2");
        let mut negative = b;
        negative[0..4].copy_from_slice(&(-1i32).to_le_bytes());
        assert!(decode(&negative).is_none(), "negative length");
    }
}
