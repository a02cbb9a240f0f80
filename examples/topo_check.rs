//! Self-checking process topologies, neighborhood collectives and subgroup communicators
//! through the Rust API. Every expected value is computed here by plain arithmetic from the
//! deterministic inputs of all ranks, never by Kestrel's topology code.
//!
//! - Cartesian: a 2-D grid from `dims_create` (periodic in dimension 0 only) and a fully
//!   periodic one: layout, coordinates and ranks both ways (periodic wrap included), every
//!   shift of -3..=3, sub-grids, a grid smaller than the world (the rank left over gets
//!   none), `cartesian_map`.
//! - Neighborhood collectives (allgather(v), alltoall(v)), blocking, immediate (eight
//!   outstanding, completed in reverse order) and persistent (restarted with new data), on
//!   the grids (with 1 or 2 ranks along a periodic dimension, a process is its own or its
//!   neighbor's neighbor twice: the block sent to the negative neighbor of dimension d must
//!   arrive in that neighbor's block 2d + 1), on `MPI_PROC_NULL` edges (blocks untouched),
//!   on a distributed graph (ring plus chords, adjacent, weighted and not, and built from
//!   edge lists) and on a graph.
//! - `split_by_subgroup_collective` (one group, then disjoint groups) and
//!   `split_by_subgroup` (a reversed group, called by members and non-members): membership,
//!   size, rank and order; `immediate_duplicate` (two under way at once).
//!
//! Prints `topo_check passed on N ranks` from rank 0; exits 1 naming the rank and the
//! mismatch otherwise.

use kestrel::collective::CommunicatorCollectives;
use kestrel::neighbor::NeighborCollectives;
use kestrel::topology::{self, TopologyCommunicator};
use kestrel::{request, Communicator, Rank, SimpleCommunicator};

fn fail(rank: i32, what: String) -> ! {
    eprintln!("topo_check: rank {rank}: {what}");
    std::process::exit(1)
}

fn same<T: PartialEq + std::fmt::Debug>(rank: i32, what: &str, got: T, want: T) {
    if got != want {
        fail(rank, format!("{what}: got {got:?}, expected {want:?}"));
    }
}

/// A grid by plain arithmetic: extents, periodicity, row-major ranks.
#[derive(Clone, Copy)]
struct Grid<'g> {
    dims: &'g [i32],
    periodic: &'g [bool],
}

impl Grid<'_> {
    fn size(&self) -> i32 {
        self.dims.iter().product()
    }

    fn coords(&self, mut r: i32) -> Vec<i32> {
        let mut c = vec![0; self.dims.len()];
        for d in (0..self.dims.len()).rev() {
            c[d] = r % self.dims[d];
            r /= self.dims[d];
        }
        c
    }

    fn rank(&self, c: &[i32]) -> i32 {
        c.iter().zip(self.dims).fold(0, |acc, (&x, &d)| acc * d + x)
    }

    /// The rank `step` away from `r` along `d`, or `None` off a non-periodic edge.
    fn step(&self, r: i32, d: usize, step: i32) -> Option<i32> {
        let mut c = self.coords(r);
        c[d] += step;
        if self.periodic[d] {
            c[d] = c[d].rem_euclid(self.dims[d]);
        } else if !(0..self.dims[d]).contains(&c[d]) {
            return None;
        }
        Some(self.rank(&c))
    }

    /// Per dimension the neighbor at -1, then the one at +1.
    fn neighbors(&self, r: i32) -> Vec<Option<i32>> {
        (0..self.dims.len())
            .flat_map(|d| [self.step(r, d, -1), self.step(r, d, 1)])
            .collect()
    }
}

/// A topology as the checks see it: this process's sources, every process's destinations,
/// and whether blocks pair by direction (grids) or in list order (graphs).
struct Hood<'h> {
    sources: Vec<Option<i32>>,
    dests_of: &'h dyn Fn(i32) -> Vec<Option<i32>>,
    directional: bool,
}

impl Hood<'_> {
    /// For each receive block: the (process, send block) it comes from.
    fn delivery(&self, me: i32) -> Vec<Option<(i32, usize)>> {
        let s = &self.sources;
        (0..s.len())
            .map(|i| {
                let p = s[i]?;
                if self.directional {
                    return Some((p, i ^ 1));
                }
                let k = s[..i].iter().filter(|&&x| x == Some(p)).count();
                let dests = (self.dests_of)(p);
                let mut to_me = (0..dests.len()).filter(|&b| dests[b] == Some(me));
                Some((p, to_me.nth(k).unwrap_or(usize::MAX)))
            })
            .collect()
    }
}

fn gather_val(p: i32, run: i64) -> Vec<i64> {
    vec![
        p as i64 * 1000 + run * 100 + 1,
        p as i64 * 1000 + run * 100 + 2,
    ]
}

fn gather_len(p: i32) -> usize {
    1 + (p % 3) as usize
}

fn gather_var(p: i32, run: i64) -> Vec<i64> {
    (0..gather_len(p))
        .map(|k| p as i64 * 1000 + run * 100 + 50 + k as i64)
        .collect()
}

fn block(p: i32, b: usize, run: i64, len: usize) -> Vec<i64> {
    (0..len)
        .map(|k| p as i64 * 100_000 + b as i64 * 1000 + run * 100 + k as i64)
        .collect()
}

fn var_len(p: i32, b: usize) -> usize {
    1 + (p as usize + b) % 3
}

const A2A: usize = 3;

/// The buffers and expected results of the four neighborhood collectives for one run.
struct Case {
    me: i32,
    run: i64,
    gsend: Vec<i64>,
    gvsend: Vec<i64>,
    gvcounts: Vec<usize>,
    asend: Vec<i64>,
    vsend: Vec<i64>,
    vscounts: Vec<usize>,
    vsdispls: Vec<usize>,
    vrcounts: Vec<usize>,
    vrdispls: Vec<usize>,
    vrlen: usize,
    want: [Vec<i64>; 4],
}

impl Case {
    fn new(hood: &Hood, me: i32, outs: usize, run: i64) -> Case {
        let ins = hood.sources.len();
        let deliv = hood.delivery(me);
        // allgather: one 2-element block per source.
        let mut g = Vec::new();
        for s in &hood.sources {
            g.extend(s.map_or(vec![-1, -1], |p| gather_val(p, run)));
        }
        // allgather varcount: source p sends gather_len(p); PROC_NULL blocks count 2.
        let gvcounts: Vec<usize> = hood
            .sources
            .iter()
            .map(|s| s.map_or(2, gather_len))
            .collect();
        let mut gv = Vec::new();
        for s in &hood.sources {
            gv.extend(s.map_or(vec![-1, -1], |p| gather_var(p, run)));
        }
        // alltoall: blocks of A2A.
        let asend: Vec<i64> = (0..outs).flat_map(|b| block(me, b, run, A2A)).collect();
        let mut a = Vec::new();
        for d in &deliv {
            a.extend(d.map_or(vec![-1; A2A], |(p, b)| block(p, b, run, A2A)));
        }
        // alltoallv: send blocks with a 1-element gap after each; receive blocks in reverse
        // order, with a gap too.
        let vscounts: Vec<usize> = (0..outs).map(|b| var_len(me, b)).collect();
        let mut vsdispls = Vec::new();
        let mut vsend = Vec::new();
        for (b, &n) in vscounts.iter().enumerate() {
            vsdispls.push(vsend.len());
            vsend.extend(block(me, b, run, n));
            vsend.push(-7);
        }
        let vrcounts: Vec<usize> = deliv
            .iter()
            .map(|d| d.map_or(1, |(p, b)| var_len(p, b)))
            .collect();
        let mut vrdispls = vec![0; ins];
        let mut at = 0;
        for i in (0..ins).rev() {
            vrdispls[i] = at;
            at += vrcounts[i] + 1;
        }
        let mut v = vec![-1i64; at];
        for (i, d) in deliv.iter().enumerate() {
            if let Some((p, b)) = d {
                let blk = block(*p, *b, run, vrcounts[i]);
                v[vrdispls[i]..vrdispls[i] + vrcounts[i]].copy_from_slice(&blk);
            }
        }
        Case {
            me,
            run,
            gsend: gather_val(me, run),
            gvsend: gather_var(me, run),
            gvcounts,
            asend,
            vsend,
            vscounts,
            vsdispls,
            vrcounts,
            vrdispls,
            vrlen: at,
            want: [g, gv, a, v],
        }
    }

    /// Receive buffers full of -1.
    fn recvs(&self) -> [Vec<i64>; 4] {
        let w = &self.want;
        [
            vec![-1; w[0].len()],
            vec![-1; w[1].len()],
            vec![-1; w[2].len()],
            vec![-1; self.vrlen],
        ]
    }

    fn check(&self, what: &str, how: &str, got: &[Vec<i64>; 4]) {
        let names = ["allgather", "allgather varcount", "alltoall", "alltoallv"];
        for k in 0..4 {
            if got[k] != self.want[k] {
                fail(
                    self.me,
                    format!(
                        "{what}: {how} neighbor {} (run {}): got {:?}, expected {:?}",
                        names[k], self.run, got[k], self.want[k]
                    ),
                );
            }
        }
    }
}

/// Every neighborhood collective on `comm`, blocking, immediate and persistent.
fn neighborhood<C: TopologyCommunicator>(comm: &C, what: &str, hood: &Hood) {
    let me = comm.rank();
    same(
        me,
        &format!("{what}: sources"),
        comm.neighbor_sources(),
        hood.sources.clone(),
    );
    let dests = (hood.dests_of)(me);
    same(
        me,
        &format!("{what}: destinations"),
        comm.neighbor_destinations(),
        dests.clone(),
    );
    same(
        me,
        &format!("{what}: in degree"),
        comm.in_degree(),
        hood.sources.len(),
    );
    same(
        me,
        &format!("{what}: out degree"),
        comm.out_degree(),
        dests.len(),
    );
    let outs = dests.len();

    // Blocking.
    let c = Case::new(hood, me, outs, 0);
    let mut r = c.recvs();
    comm.neighbor_all_gather_into(&c.gsend, &mut r[0]);
    comm.neighbor_all_gather_varcount_into(&c.gvsend, &mut r[1], &c.gvcounts);
    comm.neighbor_all_to_all_into(&c.asend, &mut r[2]);
    comm.neighbor_all_to_all_varcount_into(
        &c.vsend,
        &c.vscounts,
        &c.vsdispls,
        &mut r[3],
        &c.vrcounts,
        &c.vrdispls,
    );
    c.check(what, "blocking", &r);

    // Immediate: two runs of all four outstanding at once, completed in reverse order.
    let (c1, c2) = (Case::new(hood, me, outs, 1), Case::new(hood, me, outs, 2));
    let (mut r1, mut r2) = (c1.recvs(), c2.recvs());
    request::scope(|s| {
        let mut reqs = Vec::new();
        for (c, r) in [(&c1, &mut r1), (&c2, &mut r2)] {
            let [g, gv, a, v] = r;
            reqs.push(comm.immediate_neighbor_all_gather_into(s, &c.gsend, g));
            reqs.push(comm.immediate_neighbor_all_gather_varcount_into(
                s,
                &c.gvsend,
                gv,
                &c.gvcounts,
            ));
            reqs.push(comm.immediate_neighbor_all_to_all_into(s, &c.asend, a));
            reqs.push(comm.immediate_neighbor_all_to_all_varcount_into(
                s,
                &c.vsend,
                &c.vscounts,
                &c.vsdispls,
                v,
                &c.vrcounts,
                &c.vrdispls,
            ));
        }
        while let Some(r) = reqs.pop() {
            r.wait();
        }
    });
    c1.check(what, "immediate", &r1);
    c2.check(what, "immediate", &r2);

    // Persistent: each run with new data, started twice (completed by wait, then by test).
    for run in 3..6 {
        let c = Case::new(hood, me, outs, run);
        let mut r = c.recvs();
        {
            let [g, gv, a, v] = &mut r;
            request::scope(|s| {
                let mut ps = [
                    comm.neighbor_all_gather_init(s, &c.gsend, g),
                    comm.neighbor_all_gather_varcount_init(s, &c.gvsend, gv, &c.gvcounts),
                    comm.neighbor_all_to_all_init(s, &c.asend, a),
                    comm.neighbor_all_to_all_varcount_init(
                        s,
                        &c.vsend,
                        &c.vscounts,
                        &c.vsdispls,
                        v,
                        &c.vrcounts,
                        &c.vrdispls,
                    ),
                ];
                for p in ps.iter_mut() {
                    p.start();
                }
                for p in ps.iter_mut() {
                    p.wait();
                }
                for p in ps.iter_mut() {
                    p.start();
                }
                for p in ps.iter_mut().rev() {
                    while !p.test() {}
                }
            });
        }
        c.check(what, "persistent", &r);
    }
}

/// Layout, coordinates, shifts and neighborhood collectives of a grid of the whole world.
fn cartesian(world: &SimpleCommunicator, dims: &[i32], periodic: &[bool], what: &str) {
    let me = world.rank();
    let g = Grid { dims, periodic };
    let Some(cart) = world.create_cartesian_communicator(dims, periodic, true) else {
        fail(
            me,
            format!("{what}: a grid of the whole world left this rank out"),
        );
    };
    same(me, &format!("{what}: size"), cart.size(), world.size());
    same(
        me,
        &format!("{what}: rank (no reordering)"),
        cart.rank(),
        me,
    );
    same(
        me,
        &format!("{what}: dimensions"),
        cart.num_dimensions(),
        dims.len() as i32,
    );
    let layout = cart.get_layout();
    same(me, &format!("{what}: dims"), layout.dims.as_slice(), dims);
    same(
        me,
        &format!("{what}: periods"),
        layout.periods.as_slice(),
        periodic,
    );
    same(me, &format!("{what}: coords"), layout.coords, g.coords(me));
    for q in 0..g.size() {
        let c = cart.rank_to_coordinates(q);
        same(
            me,
            &format!("{what}: coordinates of {q}"),
            c.clone(),
            g.coords(q),
        );
        same(
            me,
            &format!("{what}: rank at {c:?}"),
            cart.coordinates_to_rank(&c),
            q,
        );
        // Periodic dimensions wrap any coordinate.
        for d in (0..dims.len()).filter(|&d| periodic[d]) {
            for k in [-2, -1, 1, 3] {
                let mut w = c.clone();
                w[d] += k * dims[d];
                same(
                    me,
                    &format!("{what}: rank at wrapped {w:?}"),
                    cart.coordinates_to_rank(&w),
                    q,
                );
            }
        }
    }
    for d in 0..dims.len() {
        for disp in -3..=3 {
            let want = (g.step(me, d, -disp), g.step(me, d, disp));
            let got = cart.shift(d as i32, disp);
            same(me, &format!("{what}: shift({d}, {disp})"), got, want);
        }
    }
    let dests_of = |p: i32| g.neighbors(p);
    let hood = Hood {
        sources: g.neighbors(me),
        dests_of: &dests_of,
        directional: true,
    };
    neighborhood(&cart, what, &hood);

    // Sub-grids: each single dimension, and none.
    for keep in 0..dims.len() {
        let retain: Vec<bool> = (0..dims.len()).map(|d| d == keep).collect();
        let sub = cart.subgroup(&retain);
        let w = format!("{what}: sub-grid of dimension {keep}");
        let c = g.coords(me);
        same(me, &format!("{w}: size"), sub.size(), dims[keep]);
        same(me, &format!("{w}: rank"), sub.rank(), c[keep]);
        let l = sub.get_layout();
        same(
            me,
            &format!("{w}: layout"),
            (l.dims, l.periods),
            (vec![dims[keep]], vec![periodic[keep]]),
        );
        // Members: the processes differing from this one along `keep` only, in order.
        let mut members = vec![0; dims[keep] as usize];
        sub.all_gather_into(&[me], &mut members);
        let want: Vec<i32> = (0..dims[keep])
            .map(|x| {
                let mut y = c.clone();
                y[keep] = x;
                g.rank(&y)
            })
            .collect();
        same(me, &format!("{w}: members"), members, want);
        let (sd, sp) = ([dims[keep]], [periodic[keep]]);
        let sg = Grid {
            dims: &sd,
            periodic: &sp,
        };
        let sub_dests = |p: i32| sg.neighbors(p);
        let sub_hood = Hood {
            sources: sg.neighbors(c[keep]),
            dests_of: &sub_dests,
            directional: true,
        };
        neighborhood(&sub, &w, &sub_hood);
    }
    let none = cart.subgroup(&vec![false; dims.len()]);
    same(
        me,
        &format!("{what}: empty sub-grid (size, dims)"),
        (none.size(), none.num_dimensions()),
        (1, 0),
    );
}

/// A 1-D non-periodic grid of all ranks but the last: that one gets no communicator.
fn smaller_grid(world: &SimpleCommunicator) {
    let (me, n) = (world.rank(), world.size());
    if n < 2 {
        return;
    }
    let dims = [n - 1];
    same(
        me,
        "cartesian_map",
        world.cartesian_map(&dims, &[false]),
        (me < n - 1).then_some(me),
    );
    let cart = world.create_cartesian_communicator(&dims, &[false], false);
    same(me, "smaller grid: membership", cart.is_some(), me < n - 1);
    let Some(cart) = cart else { return };
    same(me, "smaller grid: size", cart.size(), n - 1);
    let g = Grid {
        dims: &dims,
        periodic: &[false],
    };
    let dests_of = |p: i32| g.neighbors(p);
    let hood = Hood {
        sources: g.neighbors(me),
        dests_of: &dests_of,
        directional: true,
    };
    neighborhood(&cart, "smaller 1-D grid", &hood);
}

/// Ring plus chords: p sends to p + 1 and p + 2, receives from p - 1 and p - 2.
fn ring_dests(p: i32, n: i32) -> Vec<Option<i32>> {
    vec![Some((p + 1) % n), Some((p + 2) % n)]
}

fn dist_graphs(world: &SimpleCommunicator) {
    let (me, n) = (world.rank(), world.size());
    let dests: Vec<Rank> = ring_dests(me, n).into_iter().flatten().collect();
    let sources: Vec<Rank> = vec![(me - 1).rem_euclid(n), (me - 2).rem_euclid(n)];
    let dests_of = |p: i32| ring_dests(p, n);

    let g = world.create_dist_graph_communicator_adjacent(&sources, &dests, false);
    same(
        me,
        "dist graph: neighbors",
        g.neighbors(),
        (sources.clone(), dests.clone()),
    );
    same(
        me,
        "dist graph: unweighted",
        (g.is_weighted(), g.weights()),
        (false, None),
    );
    let hood = Hood {
        sources: sources.iter().map(|&s| Some(s)).collect(),
        dests_of: &dests_of,
        directional: false,
    };
    neighborhood(&g, "dist graph (adjacent)", &hood);
    let dup = g.duplicate();
    same(
        me,
        "dist graph duplicate: neighbors",
        dup.neighbors(),
        g.neighbors(),
    );

    let (sw, dw) = ([me * 10, me * 10 + 1], [me * 20, me * 20 + 1]);
    let w =
        world.create_dist_graph_communicator_adjacent_weighted(&sources, &sw, &dests, &dw, false);
    same(
        me,
        "weighted dist graph: weights",
        w.weights(),
        Some((sw.to_vec(), dw.to_vec())),
    );
    same(
        me,
        "weighted dist graph: neighbors",
        w.neighbors(),
        (sources.clone(), dests.clone()),
    );

    // From edge lists: this process names its own out-edges; its incoming list then holds
    // one run per process with edges into it, in rank order.
    let e = world.create_dist_graph_communicator(&[me], &[2], &dests, None, false);
    let want_sources: Vec<Rank> = (0..n)
        .flat_map(|p| {
            ring_dests(p, n)
                .into_iter()
                .flatten()
                .filter(move |&d| d == me)
                .map(move |_| p)
        })
        .collect();
    same(
        me,
        "dist graph from edges: neighbors",
        e.neighbors(),
        (want_sources.clone(), dests.clone()),
    );
    let hood = Hood {
        sources: want_sources.iter().map(|&s| Some(s)).collect(),
        dests_of: &dests_of,
        directional: false,
    };
    neighborhood(&e, "dist graph (from edges)", &hood);
}

/// A graph: a ring, node i next to i + 1 and i - 1.
fn graph(world: &SimpleCommunicator) {
    let (me, n) = (world.rank(), world.size());
    let adj = |p: i32| vec![(p + 1) % n, (p - 1).rem_euclid(n)];
    let index: Vec<i32> = (1..=n).map(|i| 2 * i).collect();
    let edges: Vec<i32> = (0..n).flat_map(adj).collect();
    same(me, "graph_map", world.graph_map(&index, &edges), Some(me));
    let Some(g) = world.create_graph_communicator(&index, &edges, false) else {
        fail(me, "a graph of the whole world left this rank out".into());
    };
    same(
        me,
        "graph: dims",
        (g.num_nodes(), g.num_edges()),
        (n, 2 * n),
    );
    let l = g.get_layout();
    same(
        me,
        "graph: layout",
        (l.index, l.edges),
        (index.clone(), edges.clone()),
    );
    for q in 0..n {
        same(
            me,
            &format!("graph: neighbors of {q}"),
            g.neighbors(q),
            adj(q),
        );
        same(
            me,
            &format!("graph: neighbor count of {q}"),
            g.neighbors_count(q),
            2,
        );
    }
    let dests_of = |p: i32| adj(p).into_iter().map(Some).collect();
    let hood = Hood {
        sources: adj(me).into_iter().map(Some).collect(),
        dests_of: &dests_of,
        directional: false,
    };
    neighborhood(&g, "graph", &hood);
}

/// Checks that `comm` holds exactly `members` (world ranks) in that order.
fn members(me: i32, what: &str, comm: &SimpleCommunicator, members: &[i32]) {
    same(
        me,
        &format!("{what}: size"),
        comm.size(),
        members.len() as i32,
    );
    let pos = members.iter().position(|&m| m == me).map(|p| p as i32);
    same(me, &format!("{what}: rank"), Some(comm.rank()), pos);
    let mut got = vec![0; members.len()];
    comm.all_gather_into(&[me], &mut got);
    same(me, &format!("{what}: members"), got.as_slice(), members);
}

fn subgroups(world: &SimpleCommunicator) {
    let (me, n) = (world.rank(), world.size());
    let all = world.group();
    let evens: Vec<usize> = (0..n as usize).step_by(2).collect();
    let odds: Vec<usize> = (1..n as usize).step_by(2).collect();
    let as_ranks = |v: &[usize]| v.iter().map(|&r| r as i32).collect::<Vec<_>>();

    // One group for everyone: the evens.
    let eg = all.incl(&evens).unwrap_or_else(|e| fail(me, e.to_string()));
    let c = world.split_by_subgroup_collective(&eg);
    same(
        me,
        "split_by_subgroup_collective (evens): membership",
        c.is_some(),
        me % 2 == 0,
    );
    if let Some(c) = &c {
        members(
            me,
            "split_by_subgroup_collective (evens)",
            c,
            &as_ranks(&evens),
        );
    }
    // Disjoint groups: each rank passes its parity's group.
    let mine = if me % 2 == 0 { &evens } else { &odds };
    let pg = all.incl(mine).unwrap_or_else(|e| fail(me, e.to_string()));
    let Some(c) = world.split_by_subgroup_collective(&pg) else {
        fail(
            me,
            "split_by_subgroup_collective (parity): no communicator".into(),
        );
    };
    members(
        me,
        "split_by_subgroup_collective (parity)",
        &c,
        &as_ranks(mine),
    );
    world.barrier();

    // MPI_Comm_create_group: the world reversed; every rank a member.
    let rev: Vec<usize> = (0..n as usize).rev().collect();
    let rg = all.incl(&rev).unwrap_or_else(|e| fail(me, e.to_string()));
    let Some(c) = world.split_by_subgroup(&rg) else {
        fail(
            me,
            "split_by_subgroup (reversed world): no communicator".into(),
        );
    };
    members(
        me,
        "split_by_subgroup (reversed world)",
        &c,
        &as_ranks(&rev),
    );
    // The odds only, with a tag; the evens call too and get None at once.
    let og = all.incl(&odds).unwrap_or_else(|e| fail(me, e.to_string()));
    let c = world.split_by_subgroup_with_tag(&og, 7);
    same(
        me,
        "split_by_subgroup_with_tag (odds): membership",
        c.is_some(),
        me % 2 == 1,
    );
    if let Some(c) = &c {
        members(me, "split_by_subgroup_with_tag (odds)", c, &as_ranks(&odds));
    }
    // A sub-communicator's subgroup: the last two ranks of the evens' communicator.
    if let Some(ec) = world.split_by_subgroup_collective(&eg) {
        let k = ec.size() as usize;
        let last: Vec<usize> = (k.saturating_sub(2)..k).collect();
        let lg = ec
            .group()
            .incl(&last)
            .unwrap_or_else(|e| fail(me, e.to_string()));
        let want: Vec<i32> = last.iter().map(|&r| evens[r] as i32).collect();
        match ec.split_by_subgroup(&lg) {
            Some(c) => members(me, "split_by_subgroup of a sub-communicator", &c, &want),
            None => same(
                me,
                "split_by_subgroup of a sub-communicator: left out",
                want.contains(&me),
                false,
            ),
        }
    }
    world.barrier();
}

/// Nonblocking duplicates: two under way at once while a collective runs on the world,
/// completed in reverse order (one by `test`); each is the world in a context of its own.
fn duplicates(world: &SimpleCommunicator) {
    let (me, n) = (world.rank(), world.size());
    let first = world.immediate_duplicate();
    let second = world.immediate_duplicate();
    let mut sum = [0i32];
    world.all_reduce_into(&[me], &mut sum, kestrel::collective::SystemOperation::sum());
    same(
        me,
        "allreduce while duplicates are under way",
        sum[0],
        n * (n - 1) / 2,
    );
    let b = second.wait();
    let mut pending = first;
    let a = loop {
        match pending.test() {
            Ok(c) => break c,
            Err(p) => pending = p,
        }
    };
    let everyone: Vec<i32> = (0..n).collect();
    members(me, "immediate_duplicate (first)", &a, &everyone);
    members(me, "immediate_duplicate (second)", &b, &everyone);
    // Same tag, same peers: each message stays in its own communicator.
    let next = (me + 1) % n;
    let prev = (me + n - 1) % n;
    let (mut x, mut y) = (0i32, 0i32);
    request::scope(|s| {
        let ra = a.process_at_rank(prev).immediate_receive_into(s, &mut x);
        let rb = b.process_at_rank(prev).immediate_receive_into(s, &mut y);
        b.process_at_rank(next).send(&(me + 200));
        a.process_at_rank(next).send(&(me + 100));
        rb.wait();
        ra.wait();
    });
    same(
        me,
        "immediate_duplicate: contexts apart",
        (x, y),
        (prev + 100, prev + 200),
    );
    // Dropped without waiting: completed and freed.
    drop(world.immediate_duplicate());
    world.barrier();
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (me, n) = (world.rank(), world.size());
    let mut dims = [0, 0];
    topology::dims_create(n as u32, &mut dims).unwrap_or_else(|e| fail(me, e.to_string()));
    same(me, "dims_create: product", dims[0] * dims[1], n);
    same(me, "dims_create: balanced", dims[0] >= dims[1], true);
    let mut fixed = [0, 1];
    topology::dims_create(n as u32, &mut fixed).unwrap_or_else(|e| fail(me, e.to_string()));
    same(me, "dims_create with a fixed entry", fixed, [n, 1]);
    if topology::dims_create(n as u32 + 1, &mut [n + 2, 0]).is_ok() {
        fail(
            me,
            "dims_create accepted a fixed entry that does not divide nnodes".into(),
        );
    }

    cartesian(
        &world,
        &dims,
        &[true, false],
        "2-D grid periodic in dimension 0",
    );
    cartesian(&world, &dims, &[true, true], "2-D periodic grid");
    cartesian(&world, &[n], &[true], "1-D ring");
    smaller_grid(&world);
    dist_graphs(&world);
    graph(&world);
    subgroups(&world);
    duplicates(&world);

    world.barrier();
    if me == 0 {
        println!("topo_check passed on {n} ranks");
    }
}
