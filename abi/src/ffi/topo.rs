//! Process topologies: Cartesian grids, graphs and distributed graphs, and
//! `MPI_Dims_create`.

use std::os::raw::c_int;

use kestrel_pml::topo::{self, Cart, DistGraph, Graph};

use super::{MPI_UNWEIGHTED, MPI_WEIGHTS_EMPTY};
use crate::api;
use crate::error::{self, MpiError, MpiResult};
use crate::handle;
use crate::mem;
use crate::topo::{self as t, Edges, Topology, CART, DIST_GRAPH, GRAPH};

fn rank_of(core: &crate::state::Core, comm: c_int) -> MpiResult<u32> {
    Ok(core.comm(comm)?.rank as u32)
}

mpi_fn! {
    /// `MPI_Dims_create` (MPICH 4.0.2's answers).
    fn MPI_Dims_create / PMPI_Dims_create(nnodes: c_int, ndims: c_int, dims: *mut c_int) -> c_int {
        api::call_types("MPI_Dims_create", || {
            let n = u32::try_from(nnodes).map_err(|_| MpiError::new(error::ERR_ARG, format!("nnodes {nnodes} is negative")))?;
            // SAFETY: `dims` holds `ndims` ints (contract).
            let d = unsafe { mem::slice_mut(dims, mem::count(ndims)?, "dims") }?;
            topo::dims_create(n, d).map_err(t::err)
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_create` (reordering is the identity).
    fn MPI_Cart_create / PMPI_Cart_create(comm_old: c_int, ndims: c_int, dims: *const c_int, periods: *const c_int, _reorder: c_int, comm_cart: *mut c_int) -> c_int {
        api::call("MPI_Cart_create", comm_old, |l| {
            let nd = mem::count(ndims)?;
            // SAFETY: both arrays hold `ndims` ints (contract).
            let (d, p) = unsafe { (mem::slice(dims, nd, "dims")?, mem::slice(periods, nd, "periods")?) };
            let cart = Cart::from_c(d, p).map_err(t::err)?;
            let new = t::cart_create(l, comm_old, cart)?.unwrap_or(handle::COMM_NULL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(comm_cart, new, "comm_cart") }
        })
    }
}

mpi_fn! {
    /// `MPI_Cartdim_get`.
    fn MPI_Cartdim_get / PMPI_Cartdim_get(comm: c_int, ndims: *mut c_int) -> c_int {
        api::call("MPI_Cartdim_get", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(CART), "MPI_Cartdim_get")?;
            let Topology::Cart(c) = &*tp else { unreachable!("checked") };
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(ndims, c.ndims() as c_int, "ndims") }
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_get`.
    fn MPI_Cart_get / PMPI_Cart_get(comm: c_int, maxdims: c_int, dims: *mut c_int, periods: *mut c_int, coords: *mut c_int) -> c_int {
        api::call("MPI_Cart_get", comm, |l| {
            let core = l.core()?;
            let tp = t::of(core, comm, Some(CART), "MPI_Cart_get")?;
            let Topology::Cart(c) = &*tp else { unreachable!("checked") };
            let nd = c.ndims().min(mem::count(maxdims)?);
            let xs = c.coords(rank_of(core, comm)?).map_err(t::err)?;
            // SAFETY: the arrays hold `maxdims` ints (contract).
            unsafe {
                let (d, p, x) = (mem::slice_mut(dims, nd, "dims")?, mem::slice_mut(periods, nd, "periods")?, mem::slice_mut(coords, nd, "coords")?);
                for i in 0..nd {
                    d[i] = c.dims()[i] as c_int;
                    p[i] = c_int::from(c.periods()[i]);
                    x[i] = xs[i] as c_int;
                }
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_rank` (periodic dimensions wrap any coordinate).
    fn MPI_Cart_rank / PMPI_Cart_rank(comm: c_int, coords: *const c_int, rank: *mut c_int) -> c_int {
        api::call("MPI_Cart_rank", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(CART), "MPI_Cart_rank")?;
            let Topology::Cart(c) = &*tp else { unreachable!("checked") };
            // SAFETY: `coords` holds ndims ints (contract).
            let x = unsafe { mem::slice(coords, c.ndims(), "coords") }?;
            let r = c.rank(x).map_err(t::err)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(rank, r as c_int, "rank") }
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_coords`.
    fn MPI_Cart_coords / PMPI_Cart_coords(comm: c_int, rank: c_int, maxdims: c_int, coords: *mut c_int) -> c_int {
        api::call("MPI_Cart_coords", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(CART), "MPI_Cart_coords")?;
            let Topology::Cart(c) = &*tp else { unreachable!("checked") };
            let r = u32::try_from(rank).map_err(|_| MpiError::new(error::ERR_RANK, format!("rank {rank} is negative")))?;
            let xs = c.coords(r).map_err(t::err)?;
            let n = xs.len().min(mem::count(maxdims)?);
            // SAFETY: `coords` holds `maxdims` ints (contract).
            let out = unsafe { mem::slice_mut(coords, n, "coords") }?;
            for (o, x) in out.iter_mut().zip(xs) {
                *o = x as c_int;
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_shift`.
    fn MPI_Cart_shift / PMPI_Cart_shift(comm: c_int, direction: c_int, disp: c_int, rank_source: *mut c_int, rank_dest: *mut c_int) -> c_int {
        api::call("MPI_Cart_shift", comm, |l| {
            let core = l.core()?;
            let tp = t::of(core, comm, Some(CART), "MPI_Cart_shift")?;
            let Topology::Cart(c) = &*tp else { unreachable!("checked") };
            let dim = usize::try_from(direction).map_err(|_| MpiError::new(error::ERR_ARG, format!("direction {direction} is negative")))?;
            let (s, d) = c.shift(rank_of(core, comm)?, dim, disp).map_err(t::err)?;
            let or_null = |x: Option<u32>| x.map_or(crate::p2p::PROC_NULL, |r| r as c_int);
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(rank_source, or_null(s), "rank_source")?;
                mem::put(rank_dest, or_null(d), "rank_dest")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_sub`.
    fn MPI_Cart_sub / PMPI_Cart_sub(comm: c_int, remain_dims: *const c_int, newcomm: *mut c_int) -> c_int {
        api::call("MPI_Cart_sub", comm, |l| {
            let core = l.core()?;
            let tp = t::of(core, comm, Some(CART), "MPI_Cart_sub")?;
            let Topology::Cart(c) = &*tp else { unreachable!("checked") };
            // SAFETY: `remain_dims` holds ndims ints (contract).
            let keep: Vec<bool> = unsafe { mem::slice(remain_dims, c.ndims(), "remain_dims") }?.iter().map(|&x| x != 0).collect();
            let sub = c.sub(&keep).map_err(t::err)?;
            let split = c.sub_split(rank_of(core, comm)?, &keep).map_err(t::err)?;
            let color = split.color.map_or(crate::complete::UNDEFINED, |c| c as c_int);
            let new = crate::comm_threads::split_at_level(l, comm, color, split.key as c_int)?;
            if let Some(h) = new {
                l.core()?.comm_mut(h)?.topo = Some(std::sync::Arc::new(Topology::Cart(sub)));
            }
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newcomm, new.unwrap_or(handle::COMM_NULL), "newcomm") }
        })
    }
}

mpi_fn! {
    /// `MPI_Cart_map` (the identity).
    fn MPI_Cart_map / PMPI_Cart_map(comm: c_int, ndims: c_int, dims: *const c_int, periods: *const c_int, newrank: *mut c_int) -> c_int {
        api::call("MPI_Cart_map", comm, |l| {
            let core = l.core()?;
            let nd = mem::count(ndims)?;
            // SAFETY: both arrays hold `ndims` ints (contract).
            let (d, p) = unsafe { (mem::slice(dims, nd, "dims")?, mem::slice(periods, nd, "periods")?) };
            let cart = Cart::from_c(d, p).map_err(t::err)?;
            let c = core.comm(comm)?;
            let r = cart.map(c.size() as u32, c.rank as u32).map_err(t::err)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newrank, r.map_or(crate::complete::UNDEFINED, |x| x as c_int), "newrank") }
        })
    }
}

/// A graph from `MPI_Graph_create`'s arrays.
///
/// # Safety
/// `index` holds `nnodes` ints and `edges` as many as its last entry says.
unsafe fn graph_arg(nnodes: c_int, index: *const c_int, edges: *const c_int) -> MpiResult<Graph> {
    let n = mem::count(nnodes)?;
    // SAFETY: forwarded to the caller.
    let idx = unsafe { mem::slice(index, n, "index") }?.to_vec();
    let ne = mem::count(idx.last().copied().unwrap_or(0))?;
    // SAFETY: forwarded to the caller.
    let e = unsafe { mem::slice(edges, ne, "edges") }?.to_vec();
    Graph::new(idx, e).map_err(t::err)
}

mpi_fn! {
    /// `MPI_Graph_create` (reordering is the identity).
    fn MPI_Graph_create / PMPI_Graph_create(comm_old: c_int, nnodes: c_int, index: *const c_int, edges: *const c_int, _reorder: c_int, comm_graph: *mut c_int) -> c_int {
        api::call("MPI_Graph_create", comm_old, |l| {
            // SAFETY: the arrays hold what `nnodes` and `index` say (contract).
            let g = unsafe { graph_arg(nnodes, index, edges) }?;
            let new = t::graph_create(l, comm_old, g)?.unwrap_or(handle::COMM_NULL);
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(comm_graph, new, "comm_graph") }
        })
    }
}

mpi_fn! {
    /// `MPI_Graphdims_get`.
    fn MPI_Graphdims_get / PMPI_Graphdims_get(comm: c_int, nnodes: *mut c_int, nedges: *mut c_int) -> c_int {
        api::call("MPI_Graphdims_get", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(GRAPH), "MPI_Graphdims_get")?;
            let Topology::Graph(g) = &*tp else { unreachable!("checked") };
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(nnodes, g.nnodes() as c_int, "nnodes")?;
                mem::put(nedges, g.nedges() as c_int, "nedges")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Graph_get`.
    fn MPI_Graph_get / PMPI_Graph_get(comm: c_int, maxindex: c_int, maxedges: c_int, index: *mut c_int, edges: *mut c_int) -> c_int {
        api::call("MPI_Graph_get", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(GRAPH), "MPI_Graph_get")?;
            let Topology::Graph(g) = &*tp else { unreachable!("checked") };
            let ni = g.index().len().min(mem::count(maxindex)?);
            let ne = g.edges().len().min(mem::count(maxedges)?);
            // SAFETY: the arrays hold `maxindex` and `maxedges` ints (contract).
            unsafe {
                mem::slice_mut(index, ni, "index")?.copy_from_slice(&g.index()[..ni]);
                mem::slice_mut(edges, ne, "edges")?.copy_from_slice(&g.edges()[..ne]);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Graph_neighbors_count`.
    fn MPI_Graph_neighbors_count / PMPI_Graph_neighbors_count(comm: c_int, rank: c_int, nneighbors: *mut c_int) -> c_int {
        api::call("MPI_Graph_neighbors_count", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(GRAPH), "MPI_Graph_neighbors_count")?;
            let Topology::Graph(g) = &*tp else { unreachable!("checked") };
            let r = u32::try_from(rank).map_err(|_| MpiError::new(error::ERR_RANK, format!("rank {rank} is negative")))?;
            let n = g.neighbors_count(r).map_err(t::err)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(nneighbors, n as c_int, "nneighbors") }
        })
    }
}

mpi_fn! {
    /// `MPI_Graph_neighbors`.
    fn MPI_Graph_neighbors / PMPI_Graph_neighbors(comm: c_int, rank: c_int, maxneighbors: c_int, neighbors: *mut c_int) -> c_int {
        api::call("MPI_Graph_neighbors", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(GRAPH), "MPI_Graph_neighbors")?;
            let Topology::Graph(g) = &*tp else { unreachable!("checked") };
            let r = u32::try_from(rank).map_err(|_| MpiError::new(error::ERR_RANK, format!("rank {rank} is negative")))?;
            let nb = g.neighbors(r).map_err(t::err)?;
            let n = nb.len().min(mem::count(maxneighbors)?);
            // SAFETY: `neighbors` holds `maxneighbors` ints (contract).
            unsafe { mem::slice_mut(neighbors, n, "neighbors") }?.copy_from_slice(&nb[..n]);
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_Graph_map` (the identity).
    fn MPI_Graph_map / PMPI_Graph_map(comm: c_int, nnodes: c_int, index: *const c_int, edges: *const c_int, newrank: *mut c_int) -> c_int {
        api::call("MPI_Graph_map", comm, |l| {
            // SAFETY: the arrays hold what `nnodes` and `index` say (contract).
            let g = unsafe { graph_arg(nnodes, index, edges) }?;
            let c = l.core()?.comm(comm)?;
            let r = g.map(c.size() as u32, c.rank as u32).map_err(t::err)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(newrank, r.map_or(crate::complete::UNDEFINED, |x| x as c_int), "newrank") }
        })
    }
}

/// Weights from a C array: `None` for `MPI_UNWEIGHTED`, empty for `MPI_WEIGHTS_EMPTY`.
///
/// # Safety
/// `w` is one of the two sentinels or holds `n` ints.
unsafe fn weights(w: *const c_int, n: usize) -> MpiResult<Option<Vec<i32>>> {
    if std::ptr::eq(w, MPI_UNWEIGHTED.0) || (w.is_null() && n == 0) {
        return Ok(None);
    }
    if std::ptr::eq(w, MPI_WEIGHTS_EMPTY.0) {
        return Ok(Some(Vec::new()));
    }
    // SAFETY: forwarded to the caller.
    Ok(Some(unsafe { mem::slice(w, n, "weights") }?.to_vec()))
}

mpi_fn! {
    /// `MPI_Dist_graph_create_adjacent`.
    fn MPI_Dist_graph_create_adjacent / PMPI_Dist_graph_create_adjacent(comm_old: c_int, indegree: c_int, sources: *const c_int, sourceweights: *const c_int, outdegree: c_int, destinations: *const c_int, destweights: *const c_int, _info: c_int, _reorder: c_int, comm_dist_graph: *mut c_int) -> c_int {
        api::call("MPI_Dist_graph_create_adjacent", comm_old, |l| {
            let core = l.core()?;
            let (ni, no) = (mem::count(indegree)?, mem::count(outdegree)?);
            // SAFETY: the arrays hold `indegree` and `outdegree` entries, or are the weight
            // sentinels (contract).
            let (s, sw, d, dw) = unsafe {
                (mem::slice(sources, ni, "sources")?, weights(sourceweights, ni)?, mem::slice(destinations, no, "destinations")?, weights(destweights, no)?)
            };
            let size = core.comm(comm_old)?.size() as u32;
            let g = DistGraph::adjacent(size, s, sw.as_deref(), d, dw.as_deref()).map_err(t::err)?;
            let new = t::dist_graph_adjacent(l, comm_old, g)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(comm_dist_graph, new, "comm_dist_graph") }
        })
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_create`: edges given by any process; every process learns its own.
    fn MPI_Dist_graph_create / PMPI_Dist_graph_create(comm_old: c_int, n: c_int, sources: *const c_int, degrees: *const c_int, destinations: *const c_int, weights_: *const c_int, _info: c_int, _reorder: c_int, comm_dist_graph: *mut c_int) -> c_int {
        api::call("MPI_Dist_graph_create", comm_old, |l| {
            l.core()?;
            let k = mem::count(n)?;
            // SAFETY: `sources` and `degrees` hold `n` ints, `destinations` (and the weights
            // unless a sentinel) as many as the degrees add up to (contract).
            let e = unsafe {
                let src = mem::slice(sources, k, "sources")?.to_vec();
                let deg = mem::slice(degrees, k, "degrees")?.to_vec();
                let total = deg.iter().try_fold(0usize, |a, &d| Ok::<_, MpiError>(a + mem::count(d)?))?;
                let dst = mem::slice(destinations, total, "destinations")?.to_vec();
                let w = weights(weights_, total)?;
                Edges { sources: src, degrees: deg, destinations: dst, weights: w }
            };
            let new = t::dist_graph_create(l, comm_old, &e)?;
            // SAFETY: out-parameter (contract).
            unsafe { mem::put(comm_dist_graph, new, "comm_dist_graph") }
        })
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_neighbors_count`.
    fn MPI_Dist_graph_neighbors_count / PMPI_Dist_graph_neighbors_count(comm: c_int, indegree: *mut c_int, outdegree: *mut c_int, weighted: *mut c_int) -> c_int {
        api::call("MPI_Dist_graph_neighbors_count", comm, |l| {
            let core = l.core()?;
            let tp = t::of(core, comm, None, "MPI_Dist_graph_neighbors_count")?;
            let (i, o, w) = match &*tp {
                Topology::DistGraph(g) => (g.sources.len(), g.dests.len(), g.weighted()),
                // MPICH answers for graphs too: both degrees are the neighbor count.
                Topology::Graph(g) => {
                    let n = g.neighbors_count(core.comm(comm)?.rank as u32).map_err(t::err)? as usize;
                    (n, n, false)
                }
                Topology::Cart(_) => return Err(t::of(core, comm, Some(DIST_GRAPH), "MPI_Dist_graph_neighbors_count").err().unwrap_or_else(|| MpiError::new(t::ERR_TOPOLOGY, "not a graph"))),
            };
            // SAFETY: out-parameters (contract).
            unsafe {
                mem::put(indegree, i as c_int, "indegree")?;
                mem::put(outdegree, o as c_int, "outdegree")?;
                mem::put(weighted, c_int::from(w), "weighted")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_Dist_graph_neighbors`.
    fn MPI_Dist_graph_neighbors / PMPI_Dist_graph_neighbors(comm: c_int, maxindegree: c_int, sources: *mut c_int, sourceweights: *mut c_int, maxoutdegree: c_int, destinations: *mut c_int, destweights: *mut c_int) -> c_int {
        api::call("MPI_Dist_graph_neighbors", comm, |l| {
            let tp = t::of(l.core()?, comm, Some(DIST_GRAPH), "MPI_Dist_graph_neighbors")?;
            let Topology::DistGraph(g) = &*tp else { unreachable!("checked") };
            let ni = g.sources.len().min(mem::count(maxindegree)?);
            let no = g.dests.len().min(mem::count(maxoutdegree)?);
            let put = |p: *mut c_int, v: &[u32], n: usize, what: &str| -> MpiResult<()> {
                // SAFETY: the array holds at least `n` ints (contract: the maxima).
                let out = unsafe { mem::slice_mut(p, n, what) }?;
                for (o, x) in out.iter_mut().zip(v) {
                    *o = *x as c_int;
                }
                Ok(())
            };
            put(sources, &g.sources, ni, "sources")?;
            put(destinations, &g.dests, no, "destinations")?;
            let wput = |p: *mut c_int, w: Option<&[i32]>, n: usize, what: &str| -> MpiResult<()> {
                if std::ptr::eq(p, MPI_UNWEIGHTED.0) || p.is_null() {
                    return Ok(());
                }
                if let Some(w) = w {
                    // SAFETY: as above.
                    unsafe { mem::slice_mut(p, n.min(w.len()), what) }?.copy_from_slice(&w[..n.min(w.len())]);
                }
                Ok(())
            };
            wput(sourceweights, g.source_weights.as_deref(), ni, "sourceweights")?;
            wput(destweights, g.dest_weights.as_deref(), no, "destweights")
        })
    }
}
