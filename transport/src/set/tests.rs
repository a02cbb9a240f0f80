use super::*;
use crate::btl::{Incoming, Limits, SendError};
use crate::component::SelfComponent;
use crate::params::ParamSpec;

/// A transport that reaches the peers whose card says "ok", and records what it was given.
struct Fake {
    name: &'static str,
    reach: Reach,
    exclusivity: u32,
    priority: u32,
    decline: Option<&'static str>,
    fail: bool,
    bandwidth_mbps: u32,
}

struct FakeModule {
    name: &'static str,
    exclusivity: u32,
    bandwidth_mbps: u32,
    reached: Vec<u32>,
}

impl Btl for FakeModule {
    fn name(&self) -> &'static str {
        self.name
    }
    fn limits(&self) -> Limits {
        Limits {
            eager_limit: 64,
            max_send: 64,
            latency_ns: 1,
            bandwidth_mbps: self.bandwidth_mbps,
            exclusivity: self.exclusivity,
            get: false,
        }
    }
    fn reaches(&self, peer: u32) -> bool {
        self.reached.contains(&peer)
    }
    fn send(&mut self, peer: u32, _: u8, _: &[u8], _: &[u8]) -> Result<(), SendError> {
        Err(SendError::Unreachable { peer })
    }
    fn progress(&mut self, _: &mut dyn FnMut(Incoming<'_>)) -> usize {
        0
    }
}

impl Module for FakeModule {
    fn card(&self) -> Vec<u8> {
        b"ok".to_vec()
    }
    fn add_peers(&mut self, _key: u64, cards: &[PeerCard<'_>]) -> Vec<Result<(), String>> {
        cards
            .iter()
            .enumerate()
            .map(|(p, c)| match c {
                PeerCard::Card(b"ok") => {
                    self.reached.push(p as u32);
                    Ok(())
                }
                PeerCard::Card(_) => Err("card says no".into()),
                PeerCard::Missing => Err("no card".into()),
                PeerCard::Skip => Err("skipped".into()),
            })
            .collect()
    }
}

impl Component for Fake {
    fn name(&self) -> &'static str {
        self.name
    }
    fn priority(&self) -> u32 {
        self.priority
    }
    fn reach(&self) -> Reach {
        self.reach
    }
    fn params(&self) -> Vec<&'static ParamSpec> {
        Vec::new()
    }
    fn open(&self, _: &Params, _: &OpenContext<'_>) -> Result<Box<dyn Module>, OpenError> {
        if self.fail {
            return Err(OpenError::Failed("device vanished".into()));
        }
        if let Some(why) = self.decline {
            return Err(OpenError::Declined(why.into()));
        }
        Ok(Box::new(FakeModule {
            name: self.name,
            exclusivity: self.exclusivity,
            bandwidth_mbps: self.bandwidth_mbps,
            reached: Vec::new(),
        }))
    }
}

fn fake(name: &'static str, reach: Reach, exclusivity: u32) -> &'static Fake {
    Box::leak(Box::new(Fake {
        name,
        reach,
        exclusivity,
        priority: 0,
        decline: None,
        fail: false,
        bandwidth_mbps: 1,
    }))
}

fn params(btl: &str) -> Params {
    let btl = btl.to_string();
    let lookup = move |var: &str| (var == "KESTREL_BTL").then(|| btl.clone());
    Params::resolve(&crate::core_params::specs(), &lookup, &[]).unwrap()
}

fn nodes(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| s.to_string()).collect()
}

fn cx<'a>(me: u32, nodes: &'a [String]) -> OpenContext<'a> {
    OpenContext {
        me,
        nodes,
        set_id: "job",
        file_prefix: "kestrel.job.",
    }
}

/// Every process opens with `registry`; each attaches with all bundles.
fn attach_all(
    registry: &[&'static dyn Component],
    btl: &str,
    nodes: &[String],
) -> Vec<Result<Attached, String>> {
    let p = params(btl);
    let wanted = vec![true; nodes.len()];
    let openings: Vec<Opening> = (0..nodes.len() as u32)
        .map(|me| open(registry, &p, &cx(me, nodes), &wanted).unwrap())
        .collect();
    let bundles: Vec<Option<Vec<u8>>> = openings.iter().map(|o| Some(o.bundle())).collect();
    openings
        .into_iter()
        .map(|o| o.attach(&bundles, 7, &|p| format!("rank {p}")))
        .collect()
}

#[test]
fn each_peer_takes_the_most_exclusive_module_that_reaches_it() {
    let shm = fake("shm", Reach::Node, 1000);
    let net = fake("usnic", Reach::Network, 10);
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, shm, net];
    let n = nodes(&["a", "a", "b"]);
    let sets = attach_all(&registry, "self,shm,usnic", &n);
    let a0 = sets[0].as_ref().unwrap();
    assert_eq!(a0.names, vec!["usnic", "shm", "self"]);
    let name = |a: &Attached, p: usize| a.names[a.route[p] as usize];
    assert_eq!(name(a0, 0), "self");
    assert_eq!(name(a0, 1), "shm");
    assert_eq!(name(a0, 2), "usnic");
    // The process alone on node b opens no shared memory at all.
    let a2 = sets[2].as_ref().unwrap();
    assert_eq!(a2.names, vec!["usnic", "self"]);
    assert_eq!(name(a2, 0), "usnic");
}

#[test]
fn a_peer_a_better_module_reaches_is_skipped_by_the_others() {
    let shm = fake("shm", Reach::Node, 1000);
    let net = fake("usnic", Reach::Network, 10);
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, shm, net];
    let n = nodes(&["a", "a", "b"]);
    let sets = attach_all(&registry, "self,shm,usnic", &n);
    let a0 = sets[0].as_ref().unwrap();
    let net_slot = a0.names.iter().position(|&n| n == "usnic").unwrap();
    assert!(
        !a0.btls[net_slot].reaches(1),
        "the network module was given a node-local peer"
    );
    assert!(a0.btls[net_slot].reaches(2));
}

#[test]
fn rendezvous_data_takes_the_fastest_network_module_and_messages_the_most_exclusive() {
    let shm = fake("shm", Reach::Node, 1000);
    let datagrams = fake("usnic", Reach::Network, 10);
    let stream = Box::leak(Box::new(Fake {
        name: "ofi",
        reach: Reach::Network,
        exclusivity: 5,
        priority: 0,
        decline: None,
        fail: false,
        bandwidth_mbps: 10_000,
    }));
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, shm, datagrams, stream];
    let n = nodes(&["a", "a", "b"]);
    let sets = attach_all(&registry, "self,shm,usnic,ofi", &n);
    let a0 = sets[0].as_ref().unwrap();
    let name = |r: &Vec<u8>, p: usize| a0.names[r[p] as usize];
    assert_eq!(name(&a0.route, 2), "usnic");
    assert_eq!(name(&a0.bulk_route, 2), "ofi");
    // Both network modules hold the remote peer; neither holds the node-local one.
    for net in ["usnic", "ofi"] {
        let slot = a0.names.iter().position(|&x| x == net).unwrap();
        assert!(a0.btls[slot].reaches(2), "{net}");
        assert!(
            !a0.btls[slot].reaches(1),
            "{net} was given a node-local peer"
        );
    }
    assert_eq!(name(&a0.route, 1), "shm");
    assert_eq!(name(&a0.bulk_route, 1), "shm");
    // Same advertised latency (1 ns), more bandwidth: whole messages go over ofi from 0 bytes;
    // peers with one module never switch.
    assert_eq!(a0.bulk_from[2], 0);
    assert_eq!(a0.bulk_from[1], u32::MAX);
    assert_eq!(name(&a0.bulk_route, 0), "self");
    // Forcing one network transport leaves it both routes.
    let forced = attach_all(&registry, "self,usnic", &n);
    let f = forced[0].as_ref().unwrap();
    assert_eq!(f.names[f.bulk_route[2] as usize], "usnic");
}

#[test]
fn priority_breaks_a_tie_in_exclusivity() {
    let low = fake("usnic", Reach::Network, 10);
    let high = Box::leak(Box::new(Fake {
        name: "ofi",
        reach: Reach::Network,
        exclusivity: 10,
        priority: 5,
        decline: None,
        fail: false,
        bandwidth_mbps: 1,
    }));
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, low, high];
    let n = nodes(&["a", "b"]);
    let sets = attach_all(&registry, "^shm", &n);
    let a = sets[0].as_ref().unwrap();
    assert_eq!(a.names[a.route[1] as usize], "ofi");
}

#[test]
fn an_unreachable_peer_carries_every_components_reason() {
    let shm = fake("shm", Reach::Node, 1000);
    let net = Box::leak(Box::new(Fake {
        name: "usnic",
        reach: Reach::Network,
        exclusivity: 10,
        priority: 0,
        decline: Some("no usable network interface"),
        fail: false,
        bandwidth_mbps: 1,
    }));
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, shm, net];
    let n = nodes(&["a", "b"]);
    let sets = attach_all(&registry, "self,shm,usnic", &n);
    let a = sets[0].as_ref().unwrap();
    assert_eq!(a.route[1], NO_ROUTE);
    assert_eq!(
        a.unreachable[1].as_deref(),
        Some("shm: no other process on this node; usnic: no usable network interface")
    );
    assert_eq!(a.unreachable[0], None);
}

#[test]
fn network_opens_on_one_node_only_when_no_node_local_transport_is_allowed() {
    let shm = fake("shm", Reach::Node, 1000);
    let net = fake("usnic", Reach::Network, 10);
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, shm, net];
    let n = nodes(&["a", "a"]);
    let both = attach_all(&registry, "self,shm,usnic", &n);
    assert_eq!(both[0].as_ref().unwrap().names, vec!["shm", "self"]);
    let forced = attach_all(&registry, "self,usnic", &n);
    let a = forced[0].as_ref().unwrap();
    assert_eq!(a.names, vec!["usnic", "self"]);
    assert_eq!(a.names[a.route[1] as usize], "usnic");
    let excluded = attach_all(&registry, "^shm", &n);
    assert_eq!(excluded[1].as_ref().unwrap().names, vec!["usnic", "self"]);
}

#[test]
fn excluded_and_missing_components_are_named_in_the_reason() {
    let shm = fake("shm", Reach::Node, 1000);
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, shm];
    let n = nodes(&["a", "b"]);
    let sets = attach_all(&registry, "self,shm,usnic", &n);
    let why = sets[0].as_ref().unwrap().unreachable[1].clone().unwrap();
    assert!(why.contains("usnic: not built into this Kestrel"), "{why}");
    let sets = attach_all(&registry, "self", &n);
    let why = sets[0].as_ref().unwrap().unreachable[1].clone().unwrap();
    assert!(why.contains("shm: excluded by the btl parameter"), "{why}");
}

#[test]
fn a_failed_component_stops_the_set_naming_it() {
    let bad = Box::leak(Box::new(Fake {
        name: "shm",
        reach: Reach::Node,
        exclusivity: 1000,
        priority: 0,
        decline: None,
        fail: true,
        bandwidth_mbps: 1,
    }));
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, bad];
    let n = nodes(&["a", "a"]);
    let e = open(&registry, &params("self,shm"), &cx(0, &n), &[true, true]).unwrap_err();
    assert_eq!(e, "shm: device vanished");
}

#[test]
fn peers_not_wanted_are_not_connected() {
    let net = fake("usnic", Reach::Network, 10);
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, net];
    let n = nodes(&["a", "b", "c"]);
    let p = params("self,usnic");
    let o: Vec<Opening> = (0..3)
        .map(|me| open(&registry, &p, &cx(me, &n), &[true, false, true]).unwrap())
        .collect();
    let bundles: Vec<_> = o.iter().map(|o| Some(o.bundle())).collect();
    let a = o
        .into_iter()
        .next()
        .unwrap()
        .attach(&bundles, 1, &|p| format!("rank {p}"))
        .unwrap();
    assert_eq!(a.route[1], NO_ROUTE);
    assert_ne!(a.route[2], NO_ROUTE);
    // Only an unwanted peer on another node: the network is not opened for it.
    let o = open(&registry, &p, &cx(0, &n), &[true, false, false]).unwrap();
    assert_eq!(o.names(), vec!["self"]);
}

#[test]
fn a_missing_card_is_a_reason_not_an_error() {
    let net = fake("usnic", Reach::Network, 10);
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent, net];
    let n = nodes(&["a", "b"]);
    let p = params("self,usnic");
    let o = open(&registry, &p, &cx(0, &n), &[true, true]).unwrap();
    let theirs = encode_bundle([("self", Vec::new())]);
    let a = o
        .attach(&[None, Some(theirs)], 1, &|p| format!("rank {p}"))
        .unwrap();
    assert_eq!(a.unreachable[1].as_deref(), Some("usnic: no card"));
}

#[test]
fn a_malformed_bundle_names_the_peer() {
    let registry: Vec<&'static dyn Component> = vec![&SelfComponent];
    let n = nodes(&["a", "b"]);
    let o = open(&registry, &params("self"), &cx(0, &n), &[true, true]).unwrap();
    let e = o
        .attach(&[None, Some(vec![1, 0, 0, 0, 9])], 1, &|p| {
            format!("rank {p} on b")
        })
        .unwrap_err();
    assert!(
        e.starts_with("the transport cards of rank 1 on b: malformed transport card bundle"),
        "{e}"
    );
}

#[test]
fn bundles_round_trip_and_garbage_never_panics() {
    let b = encode_bundle([("shm", b"card".to_vec()), ("usnic", vec![0; 300])]);
    let d = decode_bundle(&b).unwrap();
    assert_eq!(d[0], ("shm".to_string(), b"card".to_vec()));
    assert_eq!(d[1].1.len(), 300);
    for cut in 0..b.len() {
        assert!(decode_bundle(&b[..cut]).is_err(), "cut at {cut}");
    }
    let mut x: u64 = 0x2545_f491_4f6c_dd1d;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 40) as usize;
        let bytes: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8).collect();
        let _ = decode_bundle(&bytes);
    }
    assert!(decode_bundle(&[2, 0, 0, 0, 0]).is_err());
}

#[test]
fn job_keys_are_non_zero_and_differ() {
    let a = new_job_key();
    let b = new_job_key();
    assert!(a != 0 && b != 0 && a != b);
}

#[test]
fn the_crossover_is_where_latency_plus_size_over_bandwidth_meet() {
    let limits = |latency_ns, bandwidth_mbps| Limits {
        eager_limit: 1 << 16,
        max_send: 1 << 16,
        latency_ns,
        bandwidth_mbps,
        exclusivity: 1,
        get: false,
    };
    // usnic over udp against ofi over tcp: 2 µs more to start, 1 ns/B less per byte
    // (2 ns/B at 4,000 Mb/s, 0.8 ns/B at 10,000): they meet at 1,666 bytes.
    let x = crossover(&limits(20_000, 4_000), &limits(22_000, 10_000));
    assert!((1_660..=1_670).contains(&x), "{x}");
    // Faster to start and no slower: always the bulk module; slower in both: never.
    assert_eq!(
        crossover(&limits(20_000, 4_000), &limits(3_000, 100_000)),
        0
    );
    assert_eq!(
        crossover(&limits(3_000, 100_000), &limits(20_000, 4_000)),
        u32::MAX
    );
}
