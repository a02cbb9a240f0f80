//! Interface matching: which local interface talks to which interface of a peer.
//!
//! This module owns the edge weight of a (local, remote) interface pair, the bipartite graph
//! for one peer, and the solver that picks the pairs. It is a pure function of two business
//! cards and two (job, rank) identities: it must never read the host's routing table, talk to
//! the peer or keep state, so that a peer holding the same inputs computes the same answer and
//! `kestrel-ifmatch explain` can replay it from card files.
//!
//! # Weight
//!
//! A [`Weight`] is a 64-bit integer compared as a number, so its fields rank by bit position
//! (most significant first):
//!
//! | bits | field |
//! |---|---|
//! | 48 | same subnet: both interfaces have the same prefix length and the same network |
//! | 40–47 | min(link speed of both ends) in Gb/s, rounded down, clamped to 255; an unknown speed counts as 0 Gb/s |
//! | 32 | reachable: always 1 on an edge |
//! | 0–31 | `u32::MAX` − route metric (same subnet or on-link: metric 0) |
//!
//! An unknown speed counts as 0 so that a pair whose speed is known never loses to one whose
//! speed is a guess; operators with virtual NICs set the speed override parameter instead.
//!
//! # Reachability
//!
//! The viewer (the process computing the pairing) decides with its own routing view: a pair is
//! reachable when it is the same subnet, or when the viewer interface's own subnet contains
//! the other address (on-link, metric 0), or when a route of the viewer's table leaving through
//! that interface contains the other address (a default route `0.0.0.0/0` counts). Among those
//! the longest prefix wins, then the lower metric, then on-link before table order. Unreachable
//! pairs get no edge at all (Open MPI adds them with weight 0 and can pair them; Kestrel does
//! not).
//!
//! # Solver and tie rule
//!
//! [`max_weight_matching`] solves min-cost max-flow on source → left → right → sink with
//! capacity 1 everywhere and cost −weight on the interface arcs, by successive shortest paths
//! with Bellman-Ford. That maximises the **number of pairs first**, then the total weight among
//! pairings of that size: a third rail beats two heavier rails alone.
//!
//! Ties are broken by the algorithm alone, so any two callers with the same graph get the same
//! pairs. Precisely: interface edges are first sorted by (left, right, heavier first); arcs are
//! numbered source→left in left order, then the interface arcs, then right→sink in right order,
//! each arc immediately followed by its residual reverse arc. Each Bellman-Ford round scans the
//! arcs in that order and moves a vertex's distance and predecessor only on a strictly smaller
//! distance; rounds repeat until one changes nothing. The path to the sink recorded that way is
//! augmented; the search repeats until the sink is unreachable.
//!
//! # Canonical orientation
//!
//! Both peers must build the same graph. The process with the lower (job id, rank) — job ids
//! compared as byte strings — always supplies the left vertices. Weights come from the caller's
//! own routing view; when both views agree (symmetric routes), both peers therefore solve the
//! identical graph and get mirrored answers. When they do not, the handshake keeps the lower
//! side's pairing and `kestrel-ifmatch explain` shows both.

use std::cmp::Reverse;
use std::fmt;
use std::net::Ipv4Addr;

use crate::card::{network_of, CardInterface, CardRoute, HostCard};

/// Bit position of the same-subnet flag.
const SAME_SUBNET_SHIFT: u32 = 48;
/// Bit position of the lowest bit of the min-speed field.
const SPEED_SHIFT: u32 = 40;
/// Bit position of the reachable flag.
const REACHABLE_SHIFT: u32 = 32;

/// The weight of an edge; larger is better. See the module docs for the bit layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Weight(u64);

/// A [`Weight`] taken apart into its fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WeightParts {
    /// Both interfaces have the same prefix length and network.
    pub same_subnet: bool,
    /// min(link speed of both ends) in Gb/s, clamped to 255; unknown counts as 0.
    pub min_speed_gbps: u8,
    /// The pair is reachable (always true on an edge of the graph).
    pub reachable: bool,
    /// The route metric (0 for same subnet and on-link pairs); lower is better.
    pub metric: u32,
}

impl Weight {
    /// Assembles a weight from its fields.
    pub fn from_parts(parts: WeightParts) -> Weight {
        Weight(
            (u64::from(parts.same_subnet) << SAME_SUBNET_SHIFT)
                | (u64::from(parts.min_speed_gbps) << SPEED_SHIFT)
                | (u64::from(parts.reachable) << REACHABLE_SHIFT)
                | u64::from(u32::MAX - parts.metric),
        )
    }

    /// The fields of this weight.
    pub fn parts(self) -> WeightParts {
        WeightParts {
            same_subnet: (self.0 >> SAME_SUBNET_SHIFT) & 1 == 1,
            min_speed_gbps: (self.0 >> SPEED_SHIFT) as u8,
            reachable: (self.0 >> REACHABLE_SHIFT) & 1 == 1,
            metric: u32::MAX - self.0 as u32,
        }
    }

    /// The raw 64-bit value (below 2^49, so it is exact in a JSON number).
    pub fn value(self) -> u64 {
        self.0
    }
}

impl fmt::Display for Weight {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// A link speed in whole Gb/s as the weight uses it: rounded down, clamped to 255, unknown = 0.
pub fn speed_gbps(link_speed_mbps: Option<u32>) -> u8 {
    link_speed_mbps.map_or(0, |mbps| (mbps / 1000).min(255) as u8)
}

/// How the viewer reaches the other interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Via {
    /// Same prefix length and network on both ends.
    SameSubnet,
    /// The viewer interface's subnet contains the other address, with a different prefix
    /// length on the other end (usually a misconfiguration worth seeing).
    OnLink {
        /// The viewer interface's network.
        network: Ipv4Addr,
        /// The viewer interface's prefix length.
        prefix_len: u8,
    },
    /// A route of the viewer's table.
    Route {
        /// Index of the route in the viewer's table.
        index: usize,
        /// The route's destination network.
        dest: Ipv4Addr,
        /// The route's prefix length.
        dest_prefix_len: u8,
        /// The route's metric.
        metric: u32,
    },
}

impl fmt::Display for Via {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Via::SameSubnet => write!(f, "same subnet"),
            Via::OnLink {
                network,
                prefix_len,
            } => write!(
                f,
                "on-link in {network}/{prefix_len} (prefix lengths differ)"
            ),
            Via::Route {
                dest,
                dest_prefix_len,
                metric,
                ..
            } => write!(f, "route {dest}/{dest_prefix_len} metric {metric}"),
        }
    }
}

/// An edge of the graph: its weight and how the viewer reaches the other end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Edge {
    /// The edge weight.
    pub weight: Weight,
    /// Same subnet, on-link or the route used.
    pub via: Via,
}

/// Why a pair has no edge: different subnets and no route through the viewer's interface.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unreachable {
    /// The viewer's interface.
    pub viewer_if: String,
    /// The viewer interface's network.
    pub viewer_network: Ipv4Addr,
    /// The viewer interface's prefix length.
    pub viewer_prefix_len: u8,
    /// The other interface's address.
    pub other_addr: Ipv4Addr,
    /// How many routes of the viewer's table leave through `viewer_if`.
    pub routes_via_if: usize,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is outside {}'s subnet {}/{} and ",
            self.other_addr, self.viewer_if, self.viewer_network, self.viewer_prefix_len
        )?;
        match self.routes_via_if {
            0 => write!(f, "no route leaves through {}", self.viewer_if),
            n => write!(
                f,
                "none of the {n} route{} leaving through {} contains it",
                if n == 1 { "" } else { "s" },
                self.viewer_if
            ),
        }
    }
}

impl std::error::Error for Unreachable {}

/// The edge from `viewer_if` to `other_if` as the viewer sees it with its own routes.
pub fn edge(
    viewer_routes: &[CardRoute],
    viewer_if: &CardInterface,
    other_if: &CardInterface,
) -> Result<Edge, Unreachable> {
    let parts = |same_subnet, metric| {
        Weight::from_parts(WeightParts {
            same_subnet,
            min_speed_gbps: speed_gbps(viewer_if.link_speed_mbps)
                .min(speed_gbps(other_if.link_speed_mbps)),
            reachable: true,
            metric,
        })
    };
    let viewer_network = network_of(viewer_if.ipv4, viewer_if.prefix_len);
    if viewer_if.prefix_len == other_if.prefix_len
        && viewer_network == network_of(other_if.ipv4, other_if.prefix_len)
    {
        return Ok(Edge {
            weight: parts(true, 0),
            via: Via::SameSubnet,
        });
    }

    // Candidates as (prefix_len, metric, via); the best is the longest prefix, then the lowest
    // metric, then the first found (on-link, then table order).
    let mut best: Option<(u8, u32, Via)> = None;
    let mut consider = |prefix_len: u8, metric: u32, via: Via| {
        let better = match &best {
            None => true,
            Some((p, m, _)) => prefix_len > *p || (prefix_len == *p && metric < *m),
        };
        if better {
            best = Some((prefix_len, metric, via));
        }
    };
    if network_of(other_if.ipv4, viewer_if.prefix_len) == viewer_network {
        consider(
            viewer_if.prefix_len,
            0,
            Via::OnLink {
                network: viewer_network,
                prefix_len: viewer_if.prefix_len,
            },
        );
    }
    let mut routes_via_if = 0;
    for (index, route) in viewer_routes.iter().enumerate() {
        if route.interface != viewer_if.name {
            continue;
        }
        routes_via_if += 1;
        if network_of(other_if.ipv4, route.dest_prefix_len)
            == network_of(route.dest, route.dest_prefix_len)
        {
            consider(
                route.dest_prefix_len,
                route.metric,
                Via::Route {
                    index,
                    dest: route.dest,
                    dest_prefix_len: route.dest_prefix_len,
                    metric: route.metric,
                },
            );
        }
    }
    match best {
        Some((_, metric, via)) => Ok(Edge {
            weight: parts(false, metric),
            via,
        }),
        None => Err(Unreachable {
            viewer_if: viewer_if.name.clone(),
            viewer_network,
            viewer_prefix_len: viewer_if.prefix_len,
            other_addr: other_if.ipv4,
            routes_via_if,
        }),
    }
}

/// The weight of the edge from `viewer_if` to `other_if` in the viewer's routing view, or why
/// there is no edge.
pub fn edge_weight(
    viewer_routes: &[CardRoute],
    viewer_if: &CardInterface,
    other_if: &CardInterface,
) -> Result<Weight, Unreachable> {
    edge(viewer_routes, viewer_if, other_if).map(|e| e.weight)
}

// ---------------------------------------------------------------------------------------------
// Solver

/// An edge of a bipartite graph given to [`max_weight_matching`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchEdge {
    /// Left vertex index.
    pub left: usize,
    /// Right vertex index.
    pub right: usize,
    /// Edge weight.
    pub weight: Weight,
}

/// One arc of the flow network; arcs come in pairs `2k` (forward) and `2k + 1` (residual).
struct Arc {
    from: usize,
    to: usize,
    capacity: u8,
    cost: i128,
}

/// Maximum-cardinality, then maximum-weight matching (see the module docs for the semantic and
/// the tie rule). Returns (left, right) pairs sorted by left index. The result depends only on
/// the set of edges, not on their order in `edges`.
///
/// # Panics
/// If an edge names a vertex outside `0..left_count` or `0..right_count` (a caller bug: graphs
/// are built from validated cards).
pub fn max_weight_matching(
    left_count: usize,
    right_count: usize,
    edges: &[MatchEdge],
) -> Vec<(usize, usize)> {
    for e in edges {
        assert!(
            e.left < left_count && e.right < right_count,
            "matching edge ({}, {}) outside a {left_count}x{right_count} graph",
            e.left,
            e.right
        );
    }
    let mut sorted = edges.to_vec();
    sorted.sort_by_key(|e| (e.left, e.right, Reverse(e.weight)));

    let source = 0;
    let left_vertex = |l: usize| 1 + l;
    let right_vertex = |r: usize| 1 + left_count + r;
    let sink = 1 + left_count + right_count;
    let vertex_count = sink + 1;

    let mut arcs: Vec<Arc> = Vec::with_capacity(2 * (left_count + sorted.len() + right_count));
    let add = |arcs: &mut Vec<Arc>, from: usize, to: usize, cost: i128| {
        arcs.push(Arc {
            from,
            to,
            capacity: 1,
            cost,
        });
        arcs.push(Arc {
            from: to,
            to: from,
            capacity: 0,
            cost: -cost,
        });
    };
    for l in 0..left_count {
        add(&mut arcs, source, left_vertex(l), 0);
    }
    let first_edge_arc = arcs.len();
    for e in &sorted {
        add(
            &mut arcs,
            left_vertex(e.left),
            right_vertex(e.right),
            -i128::from(e.weight.value()),
        );
    }
    let end_edge_arc = arcs.len();
    for r in 0..right_count {
        add(&mut arcs, right_vertex(r), sink, 0);
    }

    // Each augmentation adds one pair, so at most min(left, right) searches succeed.
    for _ in 0..left_count.min(right_count) {
        let Some(path_end) = shortest_path(&arcs, vertex_count, source, sink) else {
            break;
        };
        let mut v = sink;
        let mut steps = 0;
        while v != source {
            let a = path_end[v].unwrap_or_else(|| unreachable!("a settled vertex has a parent"));
            arcs[a].capacity -= 1;
            arcs[a ^ 1].capacity += 1;
            v = arcs[a].from;
            steps += 1;
            // A parent cycle would mean a negative cycle, impossible with successive shortest
            // paths on a bipartite network; the bound keeps a bug from looping forever.
            assert!(
                steps <= vertex_count,
                "augmenting path longer than the graph"
            );
        }
    }

    let mut pairs: Vec<(usize, usize)> = (first_edge_arc..end_edge_arc)
        .step_by(2)
        .filter(|&a| arcs[a].capacity == 0)
        .map(|a| (arcs[a].from - 1, arcs[a].to - 1 - left_count))
        .collect();
    pairs.sort_unstable();
    pairs
}

/// Bellman-Ford from `source` over arcs with residual capacity: the parent arc of every vertex
/// reached, or `None` when `sink` cannot be reached.
fn shortest_path(
    arcs: &[Arc],
    vertex_count: usize,
    source: usize,
    sink: usize,
) -> Option<Vec<Option<usize>>> {
    let mut dist: Vec<Option<i128>> = vec![None; vertex_count];
    let mut parent: Vec<Option<usize>> = vec![None; vertex_count];
    dist[source] = Some(0);
    for _round in 1..vertex_count {
        let mut changed = false;
        for (a, arc) in arcs.iter().enumerate() {
            if arc.capacity == 0 {
                continue;
            }
            let Some(d) = dist[arc.from] else { continue };
            let candidate = d + arc.cost;
            if dist[arc.to].is_none_or(|old| candidate < old) {
                dist[arc.to] = Some(candidate);
                parent[arc.to] = Some(a);
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    dist[sink].map(|_| parent)
}

// ---------------------------------------------------------------------------------------------
// Pairing two processes

/// A process's identity and card, as the matching needs them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessCard {
    /// The job id (compared as a byte string for the canonical orientation).
    pub job: String,
    /// The rank within the job.
    pub rank: u32,
    /// The process's business card.
    pub card: HostCard,
}

/// True when `my` supplies the left vertices: its (job, rank) is the lower one (on equal
/// identities, `my` is left).
pub fn is_left(my: &ProcessCard, peer: &ProcessCard) -> bool {
    (my.job.as_bytes(), my.rank) <= (peer.job.as_bytes(), peer.rank)
}

/// One (local, remote) interface pair of the graph, seen from the local process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// Local interface index.
    pub local_if: usize,
    /// Remote interface index.
    pub remote_if: usize,
    /// The edge, or why there is none.
    pub edge: Result<Edge, Unreachable>,
}

/// Every (local, remote) pair, local-major, with its edge in `my` routing view.
pub fn candidates(my: &ProcessCard, peer: &ProcessCard) -> Vec<Candidate> {
    let routes = my.card.routes.as_deref().unwrap_or(&[]);
    let mut out = Vec::with_capacity(my.card.interfaces.len() * peer.card.interfaces.len());
    for (local_if, mine) in my.card.interfaces.iter().enumerate() {
        for (remote_if, theirs) in peer.card.interfaces.iter().enumerate() {
            out.push(Candidate {
                local_if,
                remote_if,
                edge: edge(routes, mine, theirs),
            });
        }
    }
    out
}

/// A chosen interface pair, in the caller's terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    /// Local interface index.
    pub local_if: usize,
    /// Remote interface index.
    pub remote_if: usize,
    /// The edge weight in the caller's view.
    pub weight: Weight,
}

/// Why an interface got no partner.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UnpairedReason {
    /// No interface on the other side is reachable from it.
    NoReachablePartner,
    /// Every interface it can reach is paired with another one, because the chosen pairing
    /// (more pairs first, then more total weight) is better with them there.
    PartnersTakenByBetterPairs {
        /// The reachable interfaces on the other side (their indices), all paired elsewhere.
        partners: Vec<usize>,
    },
}

/// The result of [`pair`]: chosen pairs and every interface left out, with the reason.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pairing {
    /// Chosen pairs, sorted by local interface.
    pub pairs: Vec<Pair>,
    /// Local interfaces without a partner, by index.
    pub unpaired_local: Vec<(usize, UnpairedReason)>,
    /// Remote interfaces without a partner, by index.
    pub unpaired_remote: Vec<(usize, UnpairedReason)>,
}

impl Pairing {
    /// The same pairing seen from the other side (local and remote swapped).
    pub fn mirrored(&self) -> Pairing {
        let mut pairs: Vec<Pair> = self
            .pairs
            .iter()
            .map(|p| Pair {
                local_if: p.remote_if,
                remote_if: p.local_if,
                weight: p.weight,
            })
            .collect();
        pairs.sort_by_key(|p| p.local_if);
        Pairing {
            pairs,
            unpaired_local: self.unpaired_remote.clone(),
            unpaired_remote: self.unpaired_local.clone(),
        }
    }

    /// The (local, remote) index pairs, without weights.
    pub fn index_pairs(&self) -> Vec<(usize, usize)> {
        self.pairs
            .iter()
            .map(|p| (p.local_if, p.remote_if))
            .collect()
    }
}

/// Pairs `my` interfaces with `peer`'s: the canonical graph (lower (job, rank) on the left),
/// weights from `my` routing view, the result in `my` terms.
pub fn pair(my: &ProcessCard, peer: &ProcessCard) -> Pairing {
    let cands = candidates(my, peer);
    let local_count = my.card.interfaces.len();
    let remote_count = peer.card.interfaces.len();
    let left = is_left(my, peer);
    let edges: Vec<MatchEdge> = cands
        .iter()
        .filter_map(|c| {
            let weight = c.edge.as_ref().ok()?.weight;
            let (l, r) = if left {
                (c.local_if, c.remote_if)
            } else {
                (c.remote_if, c.local_if)
            };
            Some(MatchEdge {
                left: l,
                right: r,
                weight,
            })
        })
        .collect();
    let (left_count, right_count) = if left {
        (local_count, remote_count)
    } else {
        (remote_count, local_count)
    };
    let solved = max_weight_matching(left_count, right_count, &edges);

    let weight_of = |local_if: usize, remote_if: usize| {
        cands[local_if * remote_count + remote_if]
            .edge
            .as_ref()
            .map(|e| e.weight)
            .ok()
    };
    let mut pairs: Vec<Pair> = solved
        .into_iter()
        .filter_map(|(l, r)| {
            let (local_if, remote_if) = if left { (l, r) } else { (r, l) };
            Some(Pair {
                local_if,
                remote_if,
                weight: weight_of(local_if, remote_if)?,
            })
        })
        .collect();
    pairs.sort_by_key(|p| p.local_if);

    let mut local_partner = vec![None; local_count];
    let mut remote_partner = vec![None; remote_count];
    for p in &pairs {
        local_partner[p.local_if] = Some(p.remote_if);
        remote_partner[p.remote_if] = Some(p.local_if);
    }
    let reason = |reachable: Vec<usize>| {
        if reachable.is_empty() {
            UnpairedReason::NoReachablePartner
        } else {
            UnpairedReason::PartnersTakenByBetterPairs {
                partners: reachable,
            }
        }
    };
    let unpaired_local = (0..local_count)
        .filter(|&l| local_partner[l].is_none())
        .map(|l| {
            let reachable = (0..remote_count)
                .filter(|&r| weight_of(l, r).is_some())
                .collect();
            (l, reason(reachable))
        })
        .collect();
    let unpaired_remote = (0..remote_count)
        .filter(|&r| remote_partner[r].is_none())
        .map(|r| {
            let reachable = (0..local_count)
                .filter(|&l| weight_of(l, r).is_some())
                .collect();
            (r, reason(reachable))
        })
        .collect();

    tracing::debug!(
        target: "usnic",
        node = %my.card.node,
        peer_node = %peer.card.node,
        peer_rank = peer.rank,
        left,
        pairs = ?pairs.iter().map(|p| (p.local_if, p.remote_if)).collect::<Vec<_>>(),
        "interface pairing"
    );
    Pairing {
        pairs,
        unpaired_local,
        unpaired_remote,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn itf(name: &str, addr: [u8; 4], prefix_len: u8, speed: Option<u32>) -> CardInterface {
        CardInterface {
            name: name.to_string(),
            ipv4: Ipv4Addr::from(addr),
            prefix_len,
            link_speed_mbps: speed,
            mtu: 9000,
        }
    }

    fn route(dest: [u8; 4], prefix: u8, interface: &str, metric: u32) -> CardRoute {
        CardRoute {
            dest: Ipv4Addr::from(dest),
            dest_prefix_len: prefix,
            interface: interface.to_string(),
            metric,
        }
    }

    fn w(same_subnet: bool, gbps: u8, metric: u32) -> Weight {
        Weight::from_parts(WeightParts {
            same_subnet,
            min_speed_gbps: gbps,
            reachable: true,
            metric,
        })
    }

    #[test]
    fn weight_layout_and_parts_round_trip() {
        let parts = WeightParts {
            same_subnet: true,
            min_speed_gbps: 25,
            reachable: true,
            metric: 100,
        };
        let weight = Weight::from_parts(parts);
        assert_eq!(
            weight.value(),
            (1 << 48) | (25 << 40) | (1 << 32) | u64::from(u32::MAX - 100)
        );
        assert_eq!(weight.parts(), parts);
        assert_eq!(weight.to_string(), "0x00011901ffffff9b");
        // Field precedence: subnet over speed over metric.
        assert!(w(true, 0, u32::MAX) > w(false, 255, 0));
        assert!(w(false, 26, u32::MAX) > w(false, 25, 0));
        assert!(w(false, 25, 1) > w(false, 25, 2));
    }

    #[test]
    fn speeds_round_down_clamp_and_unknown_is_zero() {
        assert_eq!(speed_gbps(None), 0);
        assert_eq!(speed_gbps(Some(100)), 0);
        assert_eq!(speed_gbps(Some(10_000)), 10);
        assert_eq!(speed_gbps(Some(25_999)), 25);
        assert_eq!(speed_gbps(Some(400_000)), 255);
        let a = itf("eth1", [198, 18, 1, 1], 24, Some(100_000));
        let b = itf("eth1", [198, 18, 1, 2], 24, Some(10_000));
        let c = itf("eth1", [198, 18, 1, 3], 24, None);
        assert_eq!(edge_weight(&[], &a, &b).unwrap().parts().min_speed_gbps, 10);
        assert_eq!(edge_weight(&[], &a, &c).unwrap().parts().min_speed_gbps, 0);
    }

    #[test]
    fn same_subnet_needs_equal_prefix_and_network() {
        let me = itf("eth1", [198, 18, 1, 10], 24, Some(25_000));
        let peer = itf("eth1", [198, 18, 1, 20], 24, Some(25_000));
        let e = edge(&[], &me, &peer).unwrap();
        assert_eq!(e.via, Via::SameSubnet);
        assert_eq!(e.weight, w(true, 25, 0));

        // My /16 contains the peer's /24 address: reachable on-link, not the same subnet.
        let wide = itf("eth1", [198, 18, 0, 10], 16, Some(25_000));
        let e = edge(&[], &wide, &peer).unwrap();
        assert_eq!(
            e.via,
            Via::OnLink {
                network: Ipv4Addr::new(198, 18, 0, 0),
                prefix_len: 16
            }
        );
        assert_eq!(e.weight, w(false, 25, 0));
        // The other way round the /24 does not contain the /16 address.
        let e = edge(&[], &peer, &wide).unwrap_err();
        assert_eq!(
            e.to_string(),
            "198.18.0.10 is outside eth1's subnet 198.18.1.0/24 and no route leaves through eth1"
        );
    }

    #[test]
    fn routes_must_leave_through_the_viewer_interface() {
        let me = itf("eth1", [198, 18, 1, 10], 24, Some(10_000));
        let peer = itf("eth2", [198, 18, 2, 20], 24, Some(10_000));
        let via_other = [route([198, 18, 2, 0], 24, "eth2", 5)];
        let e = edge(&via_other, &me, &peer).unwrap_err();
        assert_eq!(e.routes_via_if, 0);
        let via_me = [route([198, 18, 3, 0], 24, "eth1", 5)];
        let e = edge(&via_me, &me, &peer).unwrap_err();
        assert_eq!(
            e.to_string(),
            "198.18.2.20 is outside eth1's subnet 198.18.1.0/24 and none of the 1 route \
             leaving through eth1 contains it"
        );
        let good = [route([198, 18, 2, 0], 24, "eth1", 100)];
        assert_eq!(edge_weight(&good, &me, &peer), Ok(w(false, 10, 100)));
    }

    #[test]
    fn longest_prefix_then_lowest_metric_and_default_routes_count() {
        let me = itf("eth1", [198, 18, 1, 10], 24, Some(10_000));
        let peer = itf("eth2", [198, 18, 2, 20], 24, Some(10_000));
        let table = [
            route([0, 0, 0, 0], 0, "eth1", 1),
            route([198, 18, 0, 0], 15, "eth1", 50),
            route([198, 18, 2, 0], 24, "eth1", 300),
            route([198, 18, 2, 0], 24, "eth1", 200),
            route([198, 18, 2, 16], 28, "eth9", 1),
        ];
        let e = edge(&table, &me, &peer).unwrap();
        assert_eq!(
            e.via,
            Via::Route {
                index: 3,
                dest: Ipv4Addr::new(198, 18, 2, 0),
                dest_prefix_len: 24,
                metric: 200
            }
        );
        let far = itf("eth2", [203, 0, 113, 5], 24, Some(10_000));
        let e = edge(&table, &me, &far).unwrap();
        assert_eq!(e.weight, w(false, 10, 1));
        assert!(matches!(e.via, Via::Route { index: 0, .. }));
    }

    // -----------------------------------------------------------------------------------------
    // Solver against brute force.

    /// SplitMix64: a tiny seeded generator so the property tests are reproducible.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
    }

    /// The best (pairs, total weight) over every matching, by exhaustive search.
    fn brute_force(left: usize, right: usize, edges: &[MatchEdge]) -> (usize, u128) {
        let mut weight = vec![vec![None::<u64>; right]; left];
        for e in edges {
            let slot = &mut weight[e.left][e.right];
            *slot = Some(slot.map_or(e.weight.value(), |w| w.max(e.weight.value())));
        }
        fn go(l: usize, used: &mut Vec<bool>, weight: &[Vec<Option<u64>>]) -> (usize, u128) {
            if l == weight.len() {
                return (0, 0);
            }
            let mut best = go(l + 1, used, weight);
            for r in 0..used.len() {
                if let (false, Some(w)) = (used[r], weight[l][r]) {
                    used[r] = true;
                    let (n, t) = go(l + 1, used, weight);
                    used[r] = false;
                    best = best.max((n + 1, t + u128::from(w)));
                }
            }
            best
        }
        go(0, &mut vec![false; right], &weight)
    }

    fn random_weight(rng: &mut Rng, tie_prone: bool) -> Weight {
        if tie_prone {
            // Few distinct values, so many equal-weight alternatives.
            let choices = [w(true, 10, 0), w(true, 25, 0), w(false, 25, 100)];
            choices[rng.below(3) as usize]
        } else {
            w(rng.below(2) == 1, rng.below(256) as u8, rng.next() as u32)
        }
    }

    fn random_graph(rng: &mut Rng) -> (usize, usize, Vec<MatchEdge>) {
        let left = rng.below(7) as usize;
        let right = rng.below(7) as usize;
        let density = 1 + rng.below(100);
        let tie_prone = rng.below(2) == 0;
        let mut edges = Vec::new();
        for l in 0..left {
            for r in 0..right {
                if rng.below(100) < density {
                    edges.push(MatchEdge {
                        left: l,
                        right: r,
                        weight: random_weight(rng, tie_prone),
                    });
                }
            }
        }
        (left, right, edges)
    }

    #[test]
    fn solver_matches_brute_force_on_random_graphs_up_to_6x6() {
        let mut rng = Rng(0x1f_ace);
        let mut with_ties = 0;
        for case in 0..4000 {
            let (left, right, mut edges) = random_graph(&mut rng);
            let pairs = max_weight_matching(left, right, &edges);

            // A matching: every vertex at most once, every pair an edge.
            let mut seen_l = vec![false; left];
            let mut seen_r = vec![false; right];
            let mut total = 0u128;
            for &(l, r) in &pairs {
                assert!(!seen_l[l] && !seen_r[r], "case {case}: vertex used twice");
                seen_l[l] = true;
                seen_r[r] = true;
                let e = edges.iter().find(|e| (e.left, e.right) == (l, r));
                total += u128::from(e.expect("pair is an edge").weight.value());
            }
            assert_eq!(
                (pairs.len(), total),
                brute_force(left, right, &edges),
                "case {case}: {left}x{right} {edges:?}"
            );

            // Deterministic, and independent of the order the edges are given in.
            assert_eq!(max_weight_matching(left, right, &edges), pairs);
            for i in (1..edges.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                edges.swap(i, j);
            }
            assert_eq!(
                max_weight_matching(left, right, &edges),
                pairs,
                "case {case}"
            );
            if edges.len() > pairs.len() + 1 {
                with_ties += 1;
            }
        }
        assert!(
            with_ties > 1000,
            "the generator should produce alternatives"
        );
    }

    #[test]
    fn cardinality_comes_before_weight() {
        // One heavy edge (0,0) against two light ones (0,1) + (1,0): two pairs win.
        let edges = [
            MatchEdge {
                left: 0,
                right: 0,
                weight: w(true, 255, 0),
            },
            MatchEdge {
                left: 0,
                right: 1,
                weight: w(false, 0, u32::MAX),
            },
            MatchEdge {
                left: 1,
                right: 0,
                weight: w(false, 0, u32::MAX),
            },
        ];
        assert_eq!(max_weight_matching(2, 2, &edges), vec![(0, 1), (1, 0)]);
        assert_eq!(max_weight_matching(0, 3, &[]), vec![]);
    }

    // -----------------------------------------------------------------------------------------
    // Pairing two processes.

    fn process(job: &str, rank: u32, node: &str, interfaces: Vec<CardInterface>) -> ProcessCard {
        ProcessCard {
            job: job.to_string(),
            rank,
            card: HostCard {
                version: 1,
                node: node.to_string(),
                interfaces,
                routes: None,
            },
        }
    }

    #[test]
    fn unpaired_reasons() {
        let me = process(
            "j",
            0,
            "h0",
            vec![
                itf("eth1", [198, 18, 1, 10], 24, Some(25_000)),
                itf("eth2", [198, 18, 1, 11], 24, Some(10_000)),
                itf("eth3", [198, 19, 7, 10], 24, Some(10_000)),
            ],
        );
        let peer = process(
            "j",
            1,
            "h1",
            vec![
                itf("eth1", [198, 18, 1, 20], 24, Some(25_000)),
                itf("eth2", [198, 18, 2, 20], 24, Some(25_000)),
            ],
        );
        let p = pair(&me, &peer);
        assert_eq!(p.index_pairs(), vec![(0, 0)]);
        assert_eq!(p.pairs[0].weight, w(true, 25, 0));
        assert_eq!(
            p.unpaired_local,
            vec![
                (
                    1,
                    UnpairedReason::PartnersTakenByBetterPairs { partners: vec![0] }
                ),
                (2, UnpairedReason::NoReachablePartner),
            ]
        );
        assert_eq!(
            p.unpaired_remote,
            vec![(1, UnpairedReason::NoReachablePartner)]
        );
        // The peer's view mirrors it (inputs are symmetric: no routes).
        assert_eq!(pair(&peer, &me), p.mirrored());
    }

    /// Two cards on shared /24 subnets with symmetric route metrics between subnets, so both
    /// views give every pair the same weight, and speeds from a small set, so ties abound.
    fn random_symmetric_pair(rng: &mut Rng) -> (ProcessCard, ProcessCard) {
        let subnets = 1 + rng.below(4) as u8;
        let mut metric = [[0u32; 4]; 4];
        let mut routed = [[false; 4]; 4];
        for i in 0..4 {
            for j in i + 1..4 {
                let m = [10, 100, 100][rng.below(3) as usize];
                let present = rng.below(3) != 0;
                (metric[i][j], metric[j][i]) = (m, m);
                (routed[i][j], routed[j][i]) = (present, present);
            }
        }
        let card = |rng: &mut Rng, host: u8, node: &str, rank: u32, job: &str| {
            let count = rng.below(5) as usize;
            let mut interfaces = Vec::new();
            let mut routes = Vec::new();
            for k in 0..count {
                let s = rng.below(u64::from(subnets)) as u8;
                let name = format!("eth{k}");
                let speed = [None, Some(10_000), Some(25_000)][rng.below(3) as usize];
                interfaces.push(itf(
                    &name,
                    [198, 18, s, 10 + host * 16 + k as u8],
                    24,
                    speed,
                ));
                for t in 0..subnets {
                    if t != s && routed[usize::from(s)][usize::from(t)] {
                        let m = metric[usize::from(s)][usize::from(t)];
                        routes.push(route([198, 18, t, 0], 24, &name, m));
                    }
                }
            }
            let mut p = process(job, rank, node, interfaces);
            p.card.routes = Some(routes);
            p
        };
        let jobs = ["job-a", "job-b"];
        let job_a = jobs[rng.below(2) as usize];
        let job_b = jobs[rng.below(2) as usize];
        let (rank_a, rank_b) = (rng.below(4) as u32, rng.below(4) as u32);
        let a = card(rng, 0, "h0", rank_a, job_a);
        let mut b = card(rng, 1, "h1", rank_b, job_b);
        if (a.job.as_str(), a.rank) == (b.job.as_str(), b.rank) {
            b.rank += 1;
        }
        (a, b)
    }

    #[test]
    fn both_orientations_give_mirrored_answers() {
        let mut rng = Rng(0xb1_ca5e);
        let mut contested = 0;
        for case in 0..3000 {
            let (a, b) = random_symmetric_pair(&mut rng);
            // The generator promises symmetric views; check it so the test stays honest.
            let from_a = candidates(&a, &b);
            let from_b = candidates(&b, &a);
            for c in &from_a {
                let back = &from_b[c.remote_if * a.card.interfaces.len() + c.local_if];
                assert_eq!(
                    c.edge.as_ref().map(|e| e.weight).ok(),
                    back.edge.as_ref().map(|e| e.weight).ok()
                );
            }
            let pa = pair(&a, &b);
            let pb = pair(&b, &a);
            assert_eq!(pa, pb.mirrored(), "case {case}: {a:?} {b:?}");
            let edges = from_a.iter().filter(|c| c.edge.is_ok()).count();
            if edges > pa.pairs.len() {
                contested += 1;
            }
        }
        assert!(contested > 500, "the generator should produce real choices");
    }

    /// Three routed interfaces per side, every reachable pair at the same weight, and the first
    /// and the last interfaces unable to reach their namesakes: a graph whose equal-weight optimum depends on
    /// which side is left, so only the canonical orientation makes the two views agree.
    fn routed_tie_pair() -> (ProcessCard, ProcessCard) {
        let card = |job: &str, rank: u32, node: &str, mine: u8, theirs: u8| {
            let names = ["eth1", "eth2", "eth3"];
            let interfaces = (0..3)
                .map(|k| itf(names[k], [198, 18, mine + k as u8, 10], 24, Some(10_000)))
                .collect();
            let mut p = process(job, rank, node, interfaces);
            // eth1 cannot reach the peer's eth1, eth3 not the peer's eth3; eth2 reaches all
            // three through one wider route.
            p.card.routes = Some(vec![
                route([198, 18, theirs + 1, 0], 24, "eth1", 100),
                route([198, 18, theirs + 2, 0], 24, "eth1", 100),
                route([198, 18, theirs & 0xf0, 0], 20, "eth2", 100),
                route([198, 18, theirs, 0], 24, "eth3", 100),
                route([198, 18, theirs + 1, 0], 24, "eth3", 100),
            ]);
            p
        };
        (card("j", 0, "h0", 17, 33), card("j", 1, "h1", 33, 17))
    }

    #[test]
    fn equal_weight_ties_follow_the_canonical_left_side() {
        let (a, b) = routed_tie_pair();
        let weights: Vec<Option<Weight>> = candidates(&a, &b)
            .iter()
            .map(|c| c.edge.as_ref().ok().map(|e| e.weight))
            .collect();
        for (k, weight) in weights.iter().enumerate() {
            let expected = (k != 0 && k != 8).then(|| w(false, 10, 100));
            assert_eq!(*weight, expected, "candidate {k}");
        }

        let from_a = pair(&a, &b);
        assert_eq!(from_a.pairs.len(), 3);
        assert_eq!(pair(&b, &a).mirrored(), from_a);
        // The same two cards with the ranks swapped: b is left now and the tie breaks the
        // other way, yet both views still agree with each other.
        let (mut a1, mut b0) = (a.clone(), b.clone());
        a1.rank = 1;
        b0.rank = 0;
        let swapped = pair(&a1, &b0);
        assert_eq!(pair(&b0, &a1).mirrored(), swapped);
        assert_ne!(swapped.index_pairs(), from_a.index_pairs());
    }
}
