//! The transport set: between the messaging layer and the transports, it decides which
//! components to open, bundles and decodes their cards, hands each module its peers, and
//! chooses one module per peer.
//!
//! The same two steps serve a job's start-up and a connection between jobs:
//! 1. [`open`] opens the components the `btl` parameter allows and this set needs: the
//!    process-local ones always, node-local ones when a peer shares this node, network ones
//!    when a peer is on another node or no node-local component is allowed (so
//!    `--mca btl self,usnic` forces the network on one node). The caller publishes
//!    [`Opening::bundle`] (under [`CARDS_KEY`] in the modex, or in a connect/accept frame).
//! 2. [`Opening::attach`] takes every peer's bundle and the set's key and returns the
//!    [`Attached`] modules with a route per peer: the module of highest exclusivity, then
//!    priority, among those that reach it; for a peer none reaches, every component's reason
//!    ("shm: other node; usnic: no reachable interface pair ..."), which user errors quote.
//!
//! It owns the card bundle format, the modex key names and the job key; it must never know a
//! concrete transport (those come in through the registry, `&[&dyn Component]`).

pub mod remap;

use std::fmt;

use crate::btl::{Btl, Limits};
use crate::codec::{DecodeError, Reader, Writer};
pub use crate::component::PeerCard;
use crate::component::{Component, Module, OpenContext, OpenError, Reach};
use crate::core_params;
use crate::params::Params;

/// Modex key of a process's card bundle.
pub const CARDS_KEY: &str = "transports";
/// Modex key of the job key, published by rank 0.
pub const JOB_KEY_KEY: &str = "job_key";
/// The route of a peer no module reaches.
pub const NO_ROUTE: u8 = u8::MAX;

const BUNDLE_VERSION: u8 = 1;
const BUNDLE_FRAME: &str = "transport card bundle";

/// A random non-zero 64-bit key (datagram transports drop what does not carry it).
pub fn new_job_key() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        // No urandom (a strange chroot): a key that differs between jobs is still better than
        // none; it only keeps strangers' datagrams out, it is not a secret.
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        b = (t ^ (u64::from(std::process::id()) << 32) ^ 0x9E37_79B9_7F4A_7C15).to_le_bytes();
    }
    u64::from_le_bytes(b).max(1)
}

/// The names of the registry's components, in registry order.
pub fn names(registry: &[&'static dyn Component]) -> Vec<&'static str> {
    registry.iter().map(|c| c.name()).collect()
}

/// Components opened by this process, before the peers' cards are known.
pub struct Opening {
    modules: Vec<(&'static dyn Component, Box<dyn Module>)>,
    /// Why a component is not open here, one line per component ("usnic: declined: ...").
    not_open: Vec<String>,
    me: u32,
    /// The peers this set connects.
    wanted: Vec<bool>,
}

impl fmt::Debug for Opening {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<_> = self.modules.iter().map(|(c, _)| c.name()).collect();
        f.debug_struct("Opening")
            .field("modules", &names)
            .field("not_open", &self.not_open)
            .finish()
    }
}

/// Opens the components of `registry` that the `btl` parameter allows and this set needs to
/// reach the peers `wanted` marks (a job's start-up wants every rank; a connection between
/// jobs only the other job's processes it does not reach yet). `Err` when one failed where
/// it should work (its reason names it).
pub fn open(
    registry: &[&'static dyn Component],
    params: &Params,
    cx: &OpenContext<'_>,
    wanted: &[bool],
) -> Result<Opening, String> {
    let selection = core_params::BTL.get(params);
    let mine = cx.my_node();
    let wanted = wanted.to_vec();
    let others = (0..cx.nodes.len() as u32)
        .filter(|&p| p != cx.me && wanted.get(p as usize).copied().unwrap_or(false));
    let peer_here = others.clone().any(|p| cx.nodes[p as usize] == mine);
    let peer_away = others.clone().any(|p| cx.nodes[p as usize] != mine);
    let node_local_allowed = registry
        .iter()
        .any(|c| c.reach() == Reach::Node && selection.allows(c.name()));
    let mut opening = Opening {
        modules: Vec::new(),
        not_open: Vec::new(),
        me: cx.me,
        wanted: wanted.clone(),
    };
    if let crate::components::Selection::Include(names) = &selection {
        for n in names
            .iter()
            .filter(|n| !registry.iter().any(|c| c.name() == *n))
        {
            opening.not_open.push(format!(
                "{n}: not built into this Kestrel (rebuild with the cargo feature `{n}`)"
            ));
        }
    }
    // System libraries shared by several components (libfabric) start once, with what all
    // of them need.
    for &c in registry.iter().filter(|c| selection.allows(c.name())) {
        c.before_open(params);
    }
    for &c in registry {
        let name = c.name();
        if !selection.allows(name) {
            opening
                .not_open
                .push(format!("{name}: excluded by the btl parameter"));
            continue;
        }
        let needed = match c.reach() {
            Reach::Process => true,
            Reach::Node => peer_here,
            Reach::Network => peer_away || (peer_here && !node_local_allowed),
        };
        if !needed {
            let why = match c.reach() {
                Reach::Node => "no other process on this node",
                _ => "not opened: every peer is on this node (`--mca btl self,<name>` forces it)",
            };
            opening.not_open.push(format!("{name}: {why}"));
            continue;
        }
        match c.open(params, cx) {
            Ok(m) => {
                tracing::debug!(target: "btl", component = name, "opened");
                opening.modules.push((c, m));
            }
            Err(OpenError::Declined(why)) => {
                tracing::debug!(target: "btl", component = name, "declined: {why}");
                opening.not_open.push(format!("{name}: {why}"));
            }
            Err(OpenError::Failed(why)) => return Err(format!("{name}: {why}")),
        }
    }
    Ok(opening)
}

/// Encodes a bundle of (component name, card) pairs.
pub fn encode_bundle<'a>(cards: impl IntoIterator<Item = (&'a str, Vec<u8>)>) -> Vec<u8> {
    let cards: Vec<_> = cards.into_iter().collect();
    let mut w = Writer::new();
    w.u8(BUNDLE_VERSION).u32(cards.len() as u32);
    for (name, card) in &cards {
        w.string(name).bytes(card);
    }
    w.into_vec()
}

/// Decodes a peer's bundle (checked: it comes from another process).
pub fn decode_bundle(bytes: &[u8]) -> Result<Vec<(String, Vec<u8>)>, DecodeError> {
    let mut r = Reader::new(bytes, BUNDLE_FRAME);
    let version = r.u8("version")?;
    if version != BUNDLE_VERSION {
        return Err(r.error(
            "version",
            "unknown bundle version (mixed Kestrel versions?)",
        ));
    }
    let n = r.count("cards", 8)?;
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let name = r.string("component name")?;
        let card = r.bytes("card")?;
        out.push((name, card));
    }
    r.finish("bundle")?;
    Ok(out)
}

impl Opening {
    /// This process's bundle: every opened module's card.
    pub fn bundle(&self) -> Vec<u8> {
        encode_bundle(self.modules.iter().map(|(c, m)| (c.name(), m.card())))
    }

    /// Names of the opened components.
    pub fn names(&self) -> Vec<&'static str> {
        self.modules.iter().map(|(c, _)| c.name()).collect()
    }

    /// Whether a network component is open (its peers must acknowledge what it sent before
    /// this process may leave).
    pub fn has_network(&self) -> bool {
        self.modules
            .iter()
            .any(|(c, _)| c.reach() == Reach::Network)
    }

    /// Hands every module its peers' cards. `bundles[p]` is peer `p`'s bundle (`None` where
    /// it published none, and for this process); `describe(p)` names a peer in errors
    /// ("rank 5 on h3").
    pub fn attach(
        self,
        bundles: &[Option<Vec<u8>>],
        key: u64,
        describe: &dyn Fn(u32) -> String,
    ) -> Result<Attached, String> {
        let n = bundles.len();
        let mut decoded: Vec<Vec<(String, Vec<u8>)>> = Vec::with_capacity(n);
        for (p, b) in bundles.iter().enumerate() {
            match b {
                // Bundles of peers this set does not connect are never read.
                Some(bytes)
                    if p as u32 != self.me && self.wanted.get(p).copied().unwrap_or(false) =>
                {
                    decoded.push(decode_bundle(bytes).map_err(|e| {
                        format!("the transport cards of {}: {e}", describe(p as u32))
                    })?)
                }
                _ => decoded.push(Vec::new()),
            }
        }
        // Highest exclusivity first, so that a peer a better module reaches is skipped by the
        // others (no network connection to a process on this node).
        let mut modules = self.modules;
        modules.sort_by_key(|(c, m)| std::cmp::Reverse((m.limits().exclusivity, c.priority())));
        let mut route = vec![NO_ROUTE; n];
        // Whether a peer's route is a network module: the other network modules still add
        // such a peer (the bulk route may be one of them), never one a node or process
        // module reaches.
        let mut route_is_network = vec![false; n];
        // Per peer, every module (by slot in `modules` order) that reaches it.
        let mut reached_by: Vec<Vec<usize>> = vec![Vec::new(); n];
        // Per peer, the opened modules' reasons; joined with `not_open` only for peers no
        // module reaches.
        let mut reasons: Vec<Vec<String>> = vec![Vec::new(); n];
        let mut btls: Vec<Box<dyn Module>> = Vec::with_capacity(modules.len());
        let mut names = Vec::with_capacity(modules.len());
        let mut reaches = Vec::with_capacity(modules.len());
        for (slot, (c, mut m)) in modules.into_iter().enumerate() {
            let name = c.name();
            let cards: Vec<PeerCard<'_>> = (0..n)
                .map(|p| {
                    if p as u32 == self.me {
                        // Only the loopback carries messages to this process itself.
                        return if c.reach() == Reach::Process {
                            PeerCard::Card(&[])
                        } else {
                            PeerCard::Skip
                        };
                    }
                    let taken = route[p] != NO_ROUTE
                        && !(route_is_network[p] && c.reach() == Reach::Network);
                    if c.reach() == Reach::Process
                        || !self.wanted.get(p).copied().unwrap_or(false)
                        || taken
                    {
                        return PeerCard::Skip;
                    }
                    decoded[p]
                        .iter()
                        .find(|(cn, _)| cn == name)
                        .map_or(PeerCard::Missing, |(_, card)| PeerCard::Card(card))
                })
                .collect();
            let results = m.add_peers(key, &cards);
            for (p, card) in cards.iter().enumerate() {
                if *card == PeerCard::Skip {
                    continue;
                }
                match results.get(p) {
                    Some(Ok(())) => {
                        if route[p] == NO_ROUTE {
                            route[p] = slot as u8;
                            route_is_network[p] = c.reach() == Reach::Network;
                        }
                        reached_by[p].push(slot);
                    }
                    Some(Err(why)) => reasons[p].push(format!("{name}: {why}")),
                    None => reasons[p].push(format!("{name}: gave no answer for this process")),
                }
            }
            btls.push(m);
            names.push(name);
            reaches.push(c.reach());
        }
        // Polled busiest first, as the engine walks them in order: the network (whose kernel
        // or NIC queues fill up), then shared memory, then the loopback.
        let mut order: Vec<usize> = (0..btls.len()).collect();
        order.sort_by_key(|&i| match reaches[i] {
            Reach::Network => 0,
            Reach::Node => 1,
            Reach::Process => 2,
        });
        let mut slot_of = vec![0u8; order.len()];
        for (new, &old) in order.iter().enumerate() {
            slot_of[old] = new as u8;
        }
        // Bulk data (the rendezvous stream) goes over the module of highest bandwidth among
        // those that reach the peer; ties keep the message route (first in exclusivity order).
        let bulk_route: Vec<u8> = (0..n)
            .map(|p| {
                let best = reached_by[p].iter().copied().reduce(|a, b| {
                    if btls[b].limits().bandwidth_mbps > btls[a].limits().bandwidth_mbps {
                        b
                    } else {
                        a
                    }
                });
                best.map_or(NO_ROUTE, |s| slot_of[s])
            })
            .collect();
        // The size from which a whole message is faster over the bulk route: where the two
        // transports' advertised latency plus size over bandwidth cross.
        let bulk_from: Vec<u32> = (0..n)
            .map(|p| match reached_by[p].first() {
                Some(&r) if slot_of[r] != bulk_route[p] => {
                    let b = order[bulk_route[p] as usize];
                    crossover(&btls[r].limits(), &btls[b].limits())
                }
                _ => u32::MAX,
            })
            .collect();
        for r in route.iter_mut().filter(|r| **r != NO_ROUTE) {
            *r = slot_of[*r as usize];
        }
        let mut taken: Vec<Option<Box<dyn Module>>> = btls.into_iter().map(Some).collect();
        let btls: Vec<Box<dyn Btl>> = order
            .iter()
            .map(|&i| taken[i].take().expect("each module once") as Box<dyn Btl>)
            .collect();
        let names: Vec<&'static str> = order.iter().map(|&i| names[i]).collect();
        for p in 0..n {
            if route[p] != NO_ROUTE && bulk_route[p] != route[p] {
                tracing::info!(
                    target: "btl",
                    peer = p,
                    messages = names[route[p] as usize],
                    bulk = names[bulk_route[p] as usize],
                    whole_messages_from = bulk_from[p],
                    "messages and rendezvous data take different transports"
                );
            }
        }
        let unreachable = (0..n)
            .map(|p| {
                (route[p] == NO_ROUTE).then(|| {
                    let all: Vec<&str> = self
                        .not_open
                        .iter()
                        .chain(&reasons[p])
                        .map(String::as_str)
                        .collect();
                    all.join("; ")
                })
            })
            .collect();
        Ok(Attached {
            btls,
            names,
            route,
            bulk_route,
            bulk_from,
            unreachable,
        })
    }
}

/// The message size from which `bulk` (more bandwidth) beats `messages` (less latency): where
/// latency + size / bandwidth cross; 0 when `bulk` is not slower to start, `u32::MAX` when it
/// is never faster.
pub fn crossover(messages: &Limits, bulk: &Limits) -> u32 {
    if bulk.latency_ns <= messages.latency_ns {
        return 0;
    }
    if bulk.bandwidth_mbps <= messages.bandwidth_mbps {
        return u32::MAX;
    }
    // ns per byte = 8000 / Mb/s.
    let per_byte = |mbps: u32| 8000.0 / f64::from(mbps.max(1));
    let gain = per_byte(messages.bandwidth_mbps) - per_byte(bulk.bandwidth_mbps);
    let bytes = f64::from(bulk.latency_ns - messages.latency_ns) / gain;
    bytes.min(f64::from(u32::MAX - 1)) as u32
}

/// The modules of a set with a route per peer.
pub struct Attached {
    /// The modules in polling order: network, node, process.
    pub btls: Vec<Box<dyn Btl>>,
    /// Their component names, in the same order.
    pub names: Vec<&'static str>,
    /// Per peer, the index into `btls` of the module that carries its messages, or
    /// [`NO_ROUTE`].
    pub route: Vec<u8>,
    /// Per peer, the module that carries its rendezvous data (the pipelined fragments of
    /// large messages): of the modules that reach it, the one of highest advertised
    /// bandwidth (`route` when no other does); [`NO_ROUTE`] with `route`.
    pub bulk_route: Vec<u8>,
    /// Per peer, the message size (header included) from which whole messages, eager ones
    /// too, take the bulk route: where the two routes' advertised latency plus size over
    /// bandwidth cross; `u32::MAX` when the routes are the same module.
    pub bulk_from: Vec<u32>,
    /// Per peer without a route, every component's reason; `None` for routed peers.
    pub unreachable: Vec<Option<String>>,
}

impl fmt::Debug for Attached {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Attached")
            .field("modules", &self.names)
            .field("route", &self.route)
            .field("bulk_route", &self.bulk_route)
            .finish()
    }
}

#[cfg(test)]
mod tests;
