//! Process topologies: the arithmetic behind `MPI_Dims_create`, Cartesian grids
//! (`MPI_Cart_*`), graphs (`MPI_Graph_*`), distributed graphs (`MPI_Dist_graph_*`) and the
//! neighbor lists that the neighborhood collectives exchange with.
//!
//! It owns: validating topology arguments (errors name the argument and the fix), rank and
//! coordinate arithmetic, shifts, `MPI_Cart_sub`'s colors and keys, the identity maps,
//! neighbor lists in MPI's order, and MPICH 4.0.2's answers wherever MPI leaves a choice
//! ([`dims_create`]'s factorization, [`dist_graph_create`]'s order, which block a repeated
//! neighbor fills: [`RepeatOrder`]), each checked against MPICH and pinned by the tests. One
//! exception: on a Cartesian grid where a process is a neighbor twice, Kestrel pairs blocks
//! by direction as the MPI-4.0 errata require ([`RepeatOrder::Directional`]); MPICH 4.0.2
//! does not.
//!
//! It must never communicate, block, do I/O, hold global state or use `unsafe`: the C
//! library and the Rust API do the exchanges (the allgather of `MPI_Dist_graph_create`, the
//! split of `MPI_Cart_sub`) and call these functions before or after them. It allocates
//! only the values it returns (and one divisor list in [`dims_create`]).

use std::fmt;

mod dims;
pub use dims::dims_create;

/// The largest number of entries of `dims` that [`dims_create`] fills (MPICH's limit).
pub const DIMS_CREATE_MAX_FREE: usize = 20;

/// The MPI error class of a [`TopoError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorClass {
    /// `MPI_ERR_ARG`.
    Arg,
    /// `MPI_ERR_DIMS`.
    Dims,
    /// `MPI_ERR_RANK`.
    Rank,
    /// `MPI_ERR_TOPOLOGY`.
    Topology,
}

/// A topology argument that MPI (or MPICH) rejects. A `&'static str` first field names the
/// MPI function, without `MPI_`, in lower case (`"cart_rank"`); the docs list the fields
/// in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TopoError {
    /// (call, index, value): `dims[index]` is `value`, negative, or 0 in a grid.
    Dim(&'static str, usize, i32),
    /// (nnodes, product): `dims_create`'s positive entries (their product saturates at
    /// `u64::MAX`) do not divide `nnodes`.
    Indivisible(u64, u64),
    /// (free): more than [`DIMS_CREATE_MAX_FREE`] entries of `dims_create`'s `dims` are 0.
    TooManyFree(usize),
    /// (free): `dims_create`'s `nnodes` is 0 and `free` (>= 2) entries are 0.
    NoNodes(usize),
    /// (nnodes): `dims_create`'s `nnodes` exceeds an MPI `int`.
    NodesTooLarge(u64),
    /// (call): the topology has more processes than an MPI `int` numbers.
    Overflow(&'static str),
    /// (call, array, length, needed length): an array has the wrong length.
    Length(&'static str, &'static str, usize, usize),
    /// (call, needed, available): the topology needs more processes than the communicator
    /// has.
    TooLarge(&'static str, u32, u32),
    /// (call, rank, size): a rank argument outside a topology (or communicator) of `size`.
    Rank(&'static str, i64, u32),
    /// (index, value, extent): `cart_rank`'s `coords[index]` is outside its non-periodic
    /// dimension of `extent` processes.
    Coord(usize, i32, u32),
    /// (direction, ndims): `cart_shift`'s direction is not a dimension of the grid.
    Direction(i64, usize),
    /// (i, value, previous): `graph_create`'s `index[i]` is negative or less than
    /// `index[i - 1]`.
    Index(usize, i32, i32),
    /// (call, rank, array, index, value, size): `array[index]` is `value`, not a node of a
    /// graph (or process of a communicator) of `size`; `rank` is whose arguments hold it
    /// when every rank's are checked.
    Node(&'static str, Option<u32>, &'static str, usize, i32, u32),
    /// (rank, i, value): `dist_graph_create`: that rank's `degrees[i]` is negative.
    Degree(u32, usize, i32),
    /// `dist_graph_create_adjacent`: one weight array is `MPI_UNWEIGHTED`, the other not.
    WeightsMixed,
}

impl TopoError {
    /// The class MPICH 4.0.2 reports (where MPICH accepts the argument, MPI's nearest).
    pub fn class(&self) -> ErrorClass {
        match self {
            TopoError::Dim("dims_create", ..)
            | TopoError::Indivisible(..)
            | TopoError::TooManyFree(_)
            | TopoError::NoNodes(_)
            | TopoError::NodesTooLarge(_)
            | TopoError::TooLarge("cart_map", ..) => ErrorClass::Dims,
            TopoError::Rank(..) => ErrorClass::Rank,
            TopoError::WeightsMixed => ErrorClass::Topology,
            _ => ErrorClass::Arg,
        }
    }
}

impl fmt::Display for TopoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const MAX: i32 = i32::MAX;
        let msg = match *self {
            TopoError::Dim(call, i, 0) => {
                format!("{call}: dims[{i}] is 0; every dimension needs at least one process")
            }
            TopoError::Dim(call, i, v) => format!(
                "{call}: dims[{i}] is {v}; an entry counts processes (dims_create fills the \
                 0 entries) and is never negative"
            ),
            TopoError::Indivisible(n, p) => format!(
                "dims_create: the positive entries of dims multiply to {p}, which does not \
                 divide nnodes = {n}; fix only entries whose product divides nnodes, or set \
                 them to 0"
            ),
            TopoError::TooManyFree(free) => format!(
                "dims_create: {free} entries of dims are 0, more than the \
                 {DIMS_CREATE_MAX_FREE} it fills; set the extra dimensions to 1"
            ),
            TopoError::NoNodes(free) => format!(
                "dims_create: nnodes is 0 and {free} entries of dims are 0; pass nnodes >= 1 \
                 (0 processes have no shape to choose)"
            ),
            TopoError::NodesTooLarge(n) => format!(
                "dims_create: nnodes = {n} is more than an MPI int holds ({MAX}); use fewer"
            ),
            TopoError::Overflow(call) => format!(
                "{call}: the topology has more than {MAX} processes, more than an MPI int \
                 numbers; make it smaller"
            ),
            TopoError::Length(call, what, got, want) => format!(
                "{call}: {what} has {got} entries but needs {want}; pass one per {}",
                match what {
                    "periods" | "coords" | "remain_dims" => "dimension",
                    "degrees" | "sourceweights" => "source",
                    "destweights" => "destination",
                    _ => "edge",
                }
            ),
            TopoError::TooLarge(call, needed, available) => format!(
                "{call}: the topology needs {needed} processes but the communicator has \
                 {available}; make it smaller (dims_create fits dims to a size) or use a \
                 larger communicator"
            ),
            TopoError::Rank(call, rank, size) => format!(
                "{call}: rank {rank} is not in a topology of {size} processes; use 0..{size}"
            ),
            TopoError::Coord(i, v, extent) => format!(
                "cart_rank: coords[{i}] is {v}, but dimension {i} is not periodic and has \
                 {extent} processes; use 0..{extent} or make the dimension periodic"
            ),
            TopoError::Direction(d, 0) => format!(
                "cart_shift: direction {d} names no dimension: a 0-dimensional grid has none"
            ),
            TopoError::Direction(d, n) => format!(
                "cart_shift: direction {d} is not a dimension of this {n}-dimensional grid; \
                 use 0..{n}"
            ),
            TopoError::Index(i, v, _) if v < 0 => format!(
                "graph_create: index[{i}] is {v}; index holds running edge counts, never \
                 negative"
            ),
            TopoError::Index(i, v, prev) => format!(
                "graph_create: index[{i}] is {v}, less than index[{}] = {prev}; index holds \
                 running edge counts (index[i] = edges of nodes 0..=i), so it never decreases",
                i - 1
            ),
            TopoError::Node(call, of, what, i, v, size) => {
                let of = of.map(|p| format!("rank {p}'s ")).unwrap_or_default();
                let unit = ["processes", "nodes"][usize::from(call == "graph_create")];
                format!(
                    "{call}: {of}{what}[{i}] is {v}, but there are {size} {unit}; use 0..{size}"
                )
            }
            TopoError::Degree(p, i, v) => format!(
                "dist_graph_create: rank {p}'s degrees[{i}] is {v}; a degree counts edges \
                 and is never negative"
            ),
            TopoError::WeightsMixed => "dist_graph_create_adjacent: one of sourceweights and \
                                        destweights is MPI_UNWEIGHTED and the other is not; \
                                        pass weights for both or for neither"
                .to_string(),
        };
        f.write_str(&msg)
    }
}

impl std::error::Error for TopoError {}

fn check_len(c: &'static str, w: &'static str, got: usize, want: usize) -> Result<(), TopoError> {
    (got == want)
        .then_some(())
        .ok_or(TopoError::Length(c, w, got, want))
}

fn check_rank(call: &'static str, rank: u32, size: u32) -> Result<(), TopoError> {
    (rank < size)
        .then_some(())
        .ok_or(TopoError::Rank(call, rank.into(), size))
}

// Neighbor lists.

/// A process's neighbors in the order the neighborhood collectives use (`None` is
/// `MPI_PROC_NULL`: no message, the block is left alone).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Neighborhood {
    /// Where received blocks come from: block `i` from `sources[i]`.
    pub sources: Vec<Option<u32>>,
    /// Where sent blocks go: block `i` to `dests[i]`.
    pub dests: Vec<Option<u32>>,
}

impl Neighborhood {
    fn symmetric(list: Vec<Option<u32>>) -> Neighborhood {
        let (sources, dests) = (list.clone(), list);
        Neighborhood { sources, dests }
    }
}

/// How the blocks of a neighborhood collective pair up when a process appears more than
/// once in a list (a periodic dimension of 1 or 2 processes, a repeated graph edge). When
/// all messages of one collective between two processes share a tag, the k-th block one
/// sends to the other meets the k-th receive the other posted for it.
///
/// Kestrel: graphs pair [`RepeatOrder::InOrder`], Cartesian grids
/// [`RepeatOrder::Directional`] (one tag per direction), for every neighborhood collective.
///
/// MPICH 4.0.2 posts `MPI_Neighbor_alltoall`'s (and `MPI_Ineighbor_alltoall`'s) receives
/// in reverse list order ([`RepeatOrder::Reversed`]) and those of the `v` and `w` variants
/// in list order ([`RepeatOrder::InOrder`]); in the allgathers all blocks from one process
/// are equal, so the order does not show. On a periodic 1x1 grid `MPI_Neighbor_alltoall`
/// puts send blocks 0,1,2,3 into receive blocks 3,2,1,0 and `MPI_Neighbor_alltoallv` into
/// 0,1,2,3.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RepeatOrder {
    /// The k-th block sent to a process fills the k-th block received from it.
    InOrder,
    /// The k-th block sent to a process fills the k-th from the end of those received
    /// from it.
    Reversed,
    /// Cartesian neighborhoods (MPI-4.0 errata, mpi-forum/mpi-issues#153): the block sent
    /// to list position `i` (the negative or positive neighbor of dimension `i / 2`) fills
    /// the receiver's block `i ^ 1`, the opposite direction of the same dimension.
    Directional,
}

impl RepeatOrder {
    /// MPICH 4.0.2's `MPI_Neighbor_alltoall` (`Reversed`).
    pub const ALLTOALL: RepeatOrder = RepeatOrder::Reversed;
    /// MPICH 4.0.2's `MPI_Neighbor_alltoallv` and `MPI_Neighbor_alltoallw` (`InOrder`).
    pub const ALLTOALLV: RepeatOrder = RepeatOrder::InOrder;

    /// The order (block indices) in which to post the receives of `n` blocks so that,
    /// with the sends posted in list order, blocks pair up this way.
    /// (`Directional` pairs by tag, not order: list order.)
    pub fn recv_post_order(self, n: usize) -> impl Iterator<Item = usize> {
        let rev = self == RepeatOrder::Reversed;
        (0..n).map(move |i| if rev { n - 1 - i } else { i })
    }
}

/// What a neighborhood alltoall delivers: `delivery(hoods, order)[q][i]` is the (process,
/// send block) whose data lands in receive block `i` of process `q`, given every process's
/// [`Neighborhood`] by rank. `None` for an `MPI_PROC_NULL` source, a source outside
/// `hoods`, or a receive no send meets (inconsistent lists, which would hang an exchange).
pub fn delivery(hoods: &[Neighborhood], order: RepeatOrder) -> Vec<Vec<Option<(u32, usize)>>> {
    let rev = order == RepeatOrder::Reversed;
    let block = |q: usize, i: usize| -> Option<(u32, usize)> {
        let srcs = &hoods[q].sources;
        let p = srcs[i]?;
        if order == RepeatOrder::Directional {
            let b = i ^ 1;
            let dests = &hoods.get(p as usize)?.dests;
            return (dests.get(b) == Some(&Some(q as u32))).then_some((p, b));
        }
        // Receive number j of the m that q expects from p meets p's send number k to q.
        let j = srcs[..i].iter().filter(|&&s| s == Some(p)).count();
        let m = j + srcs[i..].iter().filter(|&&s| s == Some(p)).count();
        let k = if rev { m - 1 - j } else { j };
        let dests = &hoods.get(p as usize)?.dests;
        let me = Some(q as u32);
        let mut to_q = (0..dests.len()).filter(|&b| dests[b] == me);
        Some((p, to_q.nth(k)?))
    };
    (0..hoods.len())
        .map(|q| (0..hoods[q].sources.len()).map(|i| block(q, i)).collect())
        .collect()
}

// Cartesian grids.

/// Where a process goes in `MPI_Cart_sub`'s split: processes with the same `color` form
/// one sub-grid, ordered by `key` (also the rank in it); `color` `None` is
/// `MPI_UNDEFINED` (the process gets `MPI_COMM_NULL`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Split {
    /// The sub-grid, or `None` for `MPI_UNDEFINED`.
    pub color: Option<u32>,
    /// The rank in the sub-grid.
    pub key: u32,
}

/// A Cartesian grid (`MPI_Cart_create`): `dims[i]` processes along dimension `i`, which
/// wraps around when `periods[i]`. Ranks are row-major (the last dimension varies
/// fastest). A grid of no dimensions has one process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cart {
    dims: Vec<u32>,
    wrap: Vec<bool>,
    size: u32,
}

impl Cart {
    /// A grid; every dimension needs a process, and the grid at most `i32::MAX`.
    pub fn new(dims: Vec<u32>, periods: Vec<bool>) -> Result<Cart, TopoError> {
        check_len("cart_create", "periods", periods.len(), dims.len())?;
        if let Some(i) = dims.iter().position(|&d| d == 0) {
            return Err(TopoError::Dim("cart_create", i, 0));
        }
        let size = dims.iter().try_fold(1u32, |acc, &d| acc.checked_mul(d));
        let size = size.filter(|&s| s <= i32::MAX as u32);
        let (size, wrap) = (size.ok_or(TopoError::Overflow("cart_create"))?, periods);
        Ok(Cart { dims, wrap, size })
    }

    /// A grid from `MPI_Cart_create`'s arrays (`periods[i]` non-zero: periodic). Stricter
    /// than MPICH 4.0.2, which accepts 0 and negative entries of `dims` as long as their
    /// product is no larger than the communicator.
    pub fn from_c(dims: &[i32], periods: &[i32]) -> Result<Cart, TopoError> {
        if let Some((i, &v)) = dims.iter().enumerate().find(|(_, &v)| v < 0) {
            return Err(TopoError::Dim("cart_create", i, v));
        }
        let dims = dims.iter().map(|&v| v as u32).collect();
        Cart::new(dims, periods.iter().map(|&p| p != 0).collect())
    }

    /// Processes along each dimension.
    pub fn dims(&self) -> &[u32] {
        &self.dims
    }

    /// Whether each dimension wraps around.
    pub fn periods(&self) -> &[bool] {
        &self.wrap
    }

    /// Number of dimensions.
    pub fn ndims(&self) -> usize {
        self.dims.len()
    }

    /// Number of processes (the product of `dims`; 1 with no dimensions).
    pub fn size(&self) -> u32 {
        self.size
    }

    /// Coordinates of `rank` (`MPI_Cart_coords`).
    pub fn coords(&self, rank: u32) -> Result<Vec<u32>, TopoError> {
        check_rank("cart_coords", rank, self.size)?;
        Ok((0..self.dims.len()).map(|d| self.coord(rank, d)).collect())
    }

    /// The coordinate of a valid `rank` along a valid `dim`.
    fn coord(&self, rank: u32, dim: usize) -> u32 {
        (rank / self.stride(dim)) % self.dims[dim]
    }

    /// Ranks between neighbors along `dim`.
    fn stride(&self, dim: usize) -> u32 {
        self.dims[dim + 1..].iter().product()
    }

    /// The rank at `coords` (`MPI_Cart_rank`): a periodic dimension wraps any coordinate,
    /// negative ones included; a non-periodic one must hold it.
    pub fn rank(&self, coords: &[i32]) -> Result<u32, TopoError> {
        check_len("cart_rank", "coords", coords.len(), self.dims.len())?;
        let mut rank = 0u32;
        for (i, &c) in coords.iter().enumerate() {
            let d = self.dims[i];
            let c = if self.wrap[i] {
                i64::from(c).rem_euclid(d.into()) as u32
            } else if (0..i64::from(d)).contains(&i64::from(c)) {
                c as u32
            } else {
                return Err(TopoError::Coord(i, c, d));
            };
            rank = rank * d + c;
        }
        Ok(rank)
    }

    /// The rank `disp` steps from a valid `rank` along `dim`; `None` off a non-periodic
    /// edge.
    fn step(&self, rank: u32, dim: usize, disp: i64) -> Option<u32> {
        let (d, c) = (i64::from(self.dims[dim]), i64::from(self.coord(rank, dim)));
        let to = match c + disp {
            to if self.wrap[dim] => to.rem_euclid(d),
            to if (0..d).contains(&to) => to,
            _ => return None,
        };
        Some((i64::from(rank) + (to - c) * i64::from(self.stride(dim))) as u32)
    }

    /// `MPI_Cart_shift`: (source, dest) = the ranks `-disp` and `+disp` steps from `rank`
    /// along `dim`, `None` (`MPI_PROC_NULL`) off a non-periodic edge; `rank` twice for a
    /// displacement of 0.
    pub fn shift(
        &self,
        rank: u32,
        dim: usize,
        disp: i32,
    ) -> Result<(Option<u32>, Option<u32>), TopoError> {
        check_rank("cart_shift", rank, self.size)?;
        if dim >= self.dims.len() {
            return Err(TopoError::Direction(dim as i64, self.dims.len()));
        }
        let disp = i64::from(disp);
        Ok((self.step(rank, dim, -disp), self.step(rank, dim, disp)))
    }

    /// The neighbors of `rank` for the neighborhood collectives: per dimension, the
    /// process at -1 then the one at +1, for the sources and, in the same order, for the
    /// destinations (MPICH 4.0.2's order for both). A periodic dimension of 1 or 2
    /// processes lists one process twice; [`RepeatOrder`] says how its blocks pair up.
    pub fn neighbors(&self, rank: u32) -> Result<Neighborhood, TopoError> {
        check_rank("cart_neighbors", rank, self.size)?;
        let list: Vec<Option<u32>> = (0..self.dims.len())
            .flat_map(|d| [self.step(rank, d, -1), self.step(rank, d, 1)])
            .collect();
        Ok(Neighborhood::symmetric(list))
    }

    /// The sub-grid `MPI_Cart_sub` gives: the dimensions with `remain[i]`, in order (none:
    /// a 0-dimensional grid of one process).
    pub fn sub(&self, remain: &[bool]) -> Result<Cart, TopoError> {
        check_len("cart_sub", "remain_dims", remain.len(), self.dims.len())?;
        fn kept<T: Copy>(v: &[T], remain: &[bool]) -> Vec<T> {
            let pairs = v.iter().zip(remain);
            pairs.filter_map(|(&x, &k)| k.then_some(x)).collect()
        }
        Cart::new(kept(&self.dims, remain), kept(&self.wrap, remain))
    }

    /// Where `rank` goes in `MPI_Cart_sub`'s split. The color numbers the coordinates of
    /// the dropped dimensions and the key those of the kept ones, both row-major: the
    /// processes that differ only in kept dimensions share a sub-grid, in which the rank
    /// is the row-major rank of the kept coordinates.
    ///
    /// With every `remain` false, MPICH 4.0.2 gives the 0-dimensional grid to rank 0 only
    /// and `MPI_COMM_NULL` to every other process (MPI describes one per process); this
    /// answers the same: color `Some(0)` for rank 0, `None` for the others.
    pub fn sub_split(&self, rank: u32, remain: &[bool]) -> Result<Split, TopoError> {
        check_len("cart_sub", "remain_dims", remain.len(), self.dims.len())?;
        check_rank("cart_sub", rank, self.size)?;
        if !remain.contains(&true) {
            let color = (rank == 0).then_some(0);
            return Ok(Split { color, key: 0 });
        }
        let (mut color, mut key) = (0u32, 0u32);
        for (dim, &d) in self.dims.iter().enumerate() {
            let n = if remain[dim] { &mut key } else { &mut color };
            *n = *n * d + self.coord(rank, dim);
        }
        let color = Some(color);
        Ok(Split { color, key })
    }

    /// Checks that a communicator of `comm_size` processes holds the grid
    /// (`MPI_Cart_create`).
    pub fn fits(&self, comm_size: u32) -> Result<(), TopoError> {
        fits("cart_create", self.size, comm_size)
    }

    /// `MPI_Cart_map` for process `rank` of a communicator of `comm_size`: the identity
    /// (MPICH's): `Some(rank)` for the first `size()` processes, `None` (`MPI_UNDEFINED`)
    /// for the rest.
    pub fn map(&self, comm_size: u32, rank: u32) -> Result<Option<u32>, TopoError> {
        id_map("cart_map", self.size, comm_size, rank)
    }
}

fn fits(call: &'static str, needed: u32, available: u32) -> Result<(), TopoError> {
    (needed <= available)
        .then_some(())
        .ok_or(TopoError::TooLarge(call, needed, available))
}

/// An identity map of `n` processes, for process `rank` of a communicator of `size`.
fn id_map(call: &'static str, n: u32, size: u32, rank: u32) -> Result<Option<u32>, TopoError> {
    fits(call, n, size)?;
    check_rank(call, rank, size)?;
    Ok((rank < n).then_some(rank))
}

// Graphs.

/// A graph topology (`MPI_Graph_create`): node `i`'s neighbors are
/// `edges[index[i-1]..index[i]]` (from 0 for node 0). Self-loops and repeated edges are
/// allowed, as in MPI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    index: Vec<i32>,
    edges: Vec<i32>,
}

impl Graph {
    /// A graph of `index.len()` nodes: `index` non-negative and non-decreasing, `edges` of
    /// exactly `index[last]` entries, each a node. Stricter than MPICH 4.0.2, which checks
    /// edges against the communicator's size only (and accepts one equal to it).
    pub fn new(index: Vec<i32>, edges: Vec<i32>) -> Result<Graph, TopoError> {
        let mut prev = 0;
        for (i, &v) in index.iter().enumerate() {
            if v < prev {
                return Err(TopoError::Index(i, v, prev));
            }
            prev = v;
        }
        check_len("graph_create", "edges", edges.len(), prev as usize)?;
        let nnodes = u32::try_from(index.len()).unwrap_or(u32::MAX);
        if nnodes > i32::MAX as u32 {
            return Err(TopoError::Overflow("graph_create"));
        }
        check_nodes("graph_create", None, "edges", &edges, nnodes)?;
        Ok(Graph { index, edges })
    }

    /// Number of nodes.
    pub fn nnodes(&self) -> u32 {
        self.index.len() as u32
    }

    /// Number of edges (`MPI_Graphdims_get`).
    pub fn nedges(&self) -> usize {
        self.edges.len()
    }

    /// The `index` array (`MPI_Graph_get`).
    pub fn index(&self) -> &[i32] {
        &self.index
    }

    /// The `edges` array (`MPI_Graph_get`).
    pub fn edges(&self) -> &[i32] {
        &self.edges
    }

    fn adjacent(&self, call: &'static str, rank: u32) -> Result<&[i32], TopoError> {
        check_rank(call, rank, self.nnodes())?;
        let r = rank as usize;
        let start = r.checked_sub(1).map_or(0, |p| self.index[p] as usize);
        Ok(&self.edges[start..self.index[r] as usize])
    }

    /// The neighbors of `rank`, in `edges` order (`MPI_Graph_neighbors`).
    pub fn neighbors(&self, rank: u32) -> Result<&[i32], TopoError> {
        self.adjacent("graph_neighbors", rank)
    }

    /// The number of neighbors of `rank` (`MPI_Graph_neighbors_count`).
    pub fn neighbors_count(&self, rank: u32) -> Result<u32, TopoError> {
        Ok(self.adjacent("graph_neighbors_count", rank)?.len() as u32)
    }

    /// The neighbors of `rank` for the neighborhood collectives: sources and destinations
    /// are both the adjacency list.
    pub fn neighborhood(&self, rank: u32) -> Result<Neighborhood, TopoError> {
        let list: Vec<_> = self
            .neighbors(rank)?
            .iter()
            .map(|&e| Some(e as u32))
            .collect();
        Ok(Neighborhood::symmetric(list))
    }

    /// Checks that a communicator of `comm_size` processes holds the graph
    /// (`MPI_Graph_create`).
    pub fn fits(&self, comm_size: u32) -> Result<(), TopoError> {
        fits("graph_create", self.nnodes(), comm_size)
    }

    /// `MPI_Graph_map` for process `rank` of a communicator of `comm_size`: the identity
    /// (MPICH's), `None` (`MPI_UNDEFINED`) past the last node.
    pub fn map(&self, comm_size: u32, rank: u32) -> Result<Option<u32>, TopoError> {
        id_map("graph_map", self.nnodes(), comm_size, rank)
    }
}

/// Checks that every entry of `list` is in `0..size`.
fn check_nodes(
    call: &'static str,
    of: Option<u32>,
    what: &'static str,
    list: &[i32],
    size: u32,
) -> Result<(), TopoError> {
    match list.iter().position(|&v| v < 0 || v as u32 >= size) {
        Some(i) => Err(TopoError::Node(call, of, what, i, list[i], size)),
        None => Ok(()),
    }
}

// Distributed graphs.

/// One process's part of a distributed graph: the processes it receives from and sends to,
/// in `MPI_Dist_graph_neighbors` order (also the neighborhood collectives' order), with
/// weights when the graph is weighted. Repeated edges and self-edges are kept.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DistGraph {
    /// Processes this one receives from (`MPI_Dist_graph_neighbors`' `sources`).
    pub sources: Vec<u32>,
    /// Weights of the incoming edges, if the graph is weighted.
    pub source_weights: Option<Vec<i32>>,
    /// Processes this one sends to (`MPI_Dist_graph_neighbors`' `destinations`).
    pub dests: Vec<u32>,
    /// Weights of the outgoing edges, if the graph is weighted.
    pub dest_weights: Option<Vec<i32>>,
}

/// One process's arguments to the non-adjacent `MPI_Dist_graph_create`: for each `i`, edges
/// from `sources[i]` to the next `degrees[i]` entries of `destinations`, weighted by the
/// same entries of `weights` (`None`: `MPI_UNWEIGHTED`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EdgeList<'a> {
    /// Source processes.
    pub sources: &'a [i32],
    /// Edges from each source.
    pub degrees: &'a [i32],
    /// Destinations: `degrees[0]` for `sources[0]`, then `degrees[1]` for `sources[1]`...
    pub destinations: &'a [i32],
    /// One weight per destination, or `None` for `MPI_UNWEIGHTED`.
    pub weights: Option<&'a [i32]>,
}

impl EdgeList<'_> {
    /// Validates the list as rank `of`'s arguments in a communicator of `size`.
    fn check(&self, of: u32, size: u32) -> Result<(), TopoError> {
        const CALL: &str = "dist_graph_create";
        check_len(CALL, "degrees", self.degrees.len(), self.sources.len())?;
        check_nodes(CALL, Some(of), "sources", self.sources, size)?;
        if let Some(i) = self.degrees.iter().position(|&d| d < 0) {
            return Err(TopoError::Degree(of, i, self.degrees[i]));
        }
        let edges = self.degrees.iter().map(|&d| d as usize).sum();
        check_len(CALL, "destinations", self.destinations.len(), edges)?;
        check_nodes(CALL, Some(of), "destinations", self.destinations, size)?;
        let weights = self.weights.map_or(edges, <[i32]>::len);
        check_len(CALL, "weights", weights, edges)
    }

    /// The edges of a checked list, in argument order: (source, destination, weight; 0
    /// when unweighted).
    fn edges(&self) -> impl Iterator<Item = (u32, u32, i32)> + '_ {
        let mut next = 0usize;
        self.sources
            .iter()
            .zip(self.degrees)
            .flat_map(move |(&s, &deg)| {
                let start = next;
                next += deg as usize;
                (start..next).map(move |i| {
                    let w = self.weights.map_or(0, |w| w[i]);
                    (s as u32, self.destinations[i] as u32, w)
                })
            })
    }
}

impl DistGraph {
    /// `MPI_Dist_graph_create_adjacent`: this process's lists as given, in a communicator
    /// of `comm_size`; both weight arrays are given, or neither. Stricter than MPICH
    /// 4.0.2, which does not check that the ranks are in the communicator; weights are
    /// not checked (MPICH accepts negative ones).
    pub fn adjacent(
        comm_size: u32,
        sources: &[i32],
        source_weights: Option<&[i32]>,
        dests: &[i32],
        dest_weights: Option<&[i32]>,
    ) -> Result<DistGraph, TopoError> {
        const CALL: &str = "dist_graph_create_adjacent";
        if source_weights.is_some() != dest_weights.is_some() {
            return Err(TopoError::WeightsMixed);
        }
        check_nodes(CALL, None, "sources", sources, comm_size)?;
        check_nodes(CALL, None, "destinations", dests, comm_size)?;
        if let (Some(sw), Some(dw)) = (source_weights, dest_weights) {
            check_len(CALL, "sourceweights", sw.len(), sources.len())?;
            check_len(CALL, "destweights", dw.len(), dests.len())?;
        }
        let ranks = |v: &[i32]| v.iter().map(|&r| r as u32).collect();
        Ok(DistGraph {
            sources: ranks(sources),
            source_weights: source_weights.map(<[i32]>::to_vec),
            dests: ranks(dests),
            dest_weights: dest_weights.map(<[i32]>::to_vec),
        })
    }

    /// Process `rank`'s lists from the non-adjacent `MPI_Dist_graph_create`, given every
    /// process's arguments (`all[p]` is rank `p`'s). See [`dist_graph_create`] for the
    /// order.
    pub fn from_edges(rank: u32, all: &[EdgeList]) -> Result<DistGraph, TopoError> {
        let size = check_all(all)?;
        check_rank("dist_graph_create", rank, size)?;
        let mut g = DistGraph::empty(all[rank as usize].weights.is_some());
        for (s, d, w) in all.iter().flat_map(EdgeList::edges) {
            if d == rank {
                g.push(true, s, w);
            }
            if s == rank {
                g.push(false, d, w);
            }
        }
        Ok(g)
    }

    fn empty(weighted: bool) -> DistGraph {
        let (source_weights, dest_weights) = (weighted.then(Vec::new), weighted.then(Vec::new));
        DistGraph {
            source_weights,
            dest_weights,
            ..DistGraph::default()
        }
    }

    /// Appends an incoming (`source`) or outgoing edge.
    fn push(&mut self, source: bool, peer: u32, w: i32) {
        let (list, weights) = if source {
            (&mut self.sources, &mut self.source_weights)
        } else {
            (&mut self.dests, &mut self.dest_weights)
        };
        list.push(peer);
        if let Some(ws) = weights {
            ws.push(w);
        }
    }

    /// Whether the graph has weights (`MPI_Dist_graph_neighbors_count`'s `weighted`).
    pub fn weighted(&self) -> bool {
        self.source_weights.is_some()
    }

    /// The neighbors for the neighborhood collectives: the sources and destinations as
    /// they are.
    pub fn neighborhood(&self) -> Neighborhood {
        let some = |v: &[u32]| v.iter().map(|&r| Some(r)).collect();
        Neighborhood {
            sources: some(&self.sources),
            dests: some(&self.dests),
        }
    }
}

/// Checks every process's arguments; returns the communicator's size.
fn check_all(all: &[EdgeList]) -> Result<u32, TopoError> {
    let size = u32::try_from(all.len()).unwrap_or(u32::MAX);
    if size > i32::MAX as u32 {
        return Err(TopoError::Overflow("dist_graph_create"));
    }
    for (p, list) in all.iter().enumerate() {
        list.check(p as u32, size)?;
    }
    Ok(size)
}

/// The non-adjacent `MPI_Dist_graph_create`: every process's lists, given every process's
/// arguments (`all[p]` is rank `p`'s, as an allgather delivers them).
///
/// The order is MPICH 4.0.2's: a process's incoming (outgoing) list is one run per process
/// that named edges into (out of) it, each run in that process's argument order. MPICH
/// appends the runs as its messages arrive, which varies from run to run; this appends
/// them in rank order (MPICH's answer when they arrive in that order), the same every
/// time. A process's lists are weighted when its own call passed weights; edges from calls
/// without weights then weigh 0 (as in MPICH).
pub fn dist_graph_create(all: &[EdgeList]) -> Result<Vec<DistGraph>, TopoError> {
    check_all(all)?;
    let mut graphs: Vec<_> = all
        .iter()
        .map(|l| DistGraph::empty(l.weights.is_some()))
        .collect();
    for (s, d, w) in all.iter().flat_map(EdgeList::edges) {
        graphs[d as usize].push(true, s, w);
        graphs[s as usize].push(false, d, w);
    }
    Ok(graphs)
}

#[cfg(test)]
mod tests;
