//! The ofi card: what a process publishes so that its peers can reach it.
//!
//! ```text
//! u8      version (2)
//! string  provider, as fi_info names it ("tcp;ofi_rxm")
//! u32     endpoints, 1..=MAX_ENDPOINTS, each:
//!   string  fabric name (the subnet for tcp: "198.18.1.0/24")
//!   string  domain name (the interface for tcp: "eth1")
//!   bytes   endpoint address (fi_getname), 1..=MAX_ADDR_LEN bytes, opaque
//!   u32     link speed in Mb/s (sysfs), 0 when unknown
//!   u32     liveness responder IPv4 address (big-endian), 0 when none
//!   u16     liveness responder UDP port, 0 when none (both 0 or both set)
//! ```
//!
//! # Pairing
//!
//! [`pairing`] decides which endpoint pairs carry two processes' traffic, as usnic's interface
//! matching does: endpoints on the same fabric are edges weighted like usnic's
//! ([`kestrel_usnic::matching::Weight`]: same subnet, then the slower end's speed in Gb/s;
//! an unknown speed counts as 0), the maximum-cardinality, maximum-weight matching
//! ([`kestrel_usnic::matching::max_weight_matching`]) picks the primary pairs, and the
//! remaining same-fabric edges follow as standbys. The lower-numbered process supplies the
//! left vertices and the order is computed in that orientation, so both ends list the same
//! pairs in the same order (the first carries the traffic, the others take over on failure).
//!
//! Written with the project codec (`kestrel_transport::codec`, u32-prefixed strings and
//! bytes) and read back with its bounded reader. The card comes from another process: this
//! module owns its layout and checks every length and count; it must never interpret the
//! address (only the provider that wrote it can).

use std::net::{Ipv4Addr, SocketAddrV4};

use kestrel_transport::codec::{DecodeError, Reader, Writer};
#[cfg(feature = "libfabric")]
use kestrel_usnic::matching::{max_weight_matching, speed_gbps, MatchEdge, Weight, WeightParts};

/// The card version this build writes and reads.
pub const VERSION: u8 = 2;

/// Longest endpoint address accepted (providers' addresses are at most a few dozen bytes).
pub const MAX_ADDR_LEN: usize = 512;

/// Longest provider, fabric or domain name accepted.
pub const MAX_NAME_LEN: usize = 256;

/// Most endpoints (domains) one process may publish.
pub const MAX_ENDPOINTS: usize = 32;

const FRAME: &str = "ofi card";

/// One endpoint of a card: the domain it is open on and its address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardEndpoint {
    /// Fabric name (the subnet for tcp): endpoints on the same fabric pair first.
    pub fabric: String,
    /// Domain name (the interface for tcp).
    pub domain: String,
    /// The endpoint's address, opaque.
    pub address: Vec<u8>,
    /// The link speed of the domain's interface in Mb/s, 0 when unknown.
    pub speed_mbps: u32,
    /// The process's liveness responder on this endpoint's interface
    /// (`kestrel_fabric::liveness`), when it runs one.
    pub probe: Option<SocketAddrV4>,
}

/// One process's ofi endpoints, as its peers see them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfiCard {
    /// Provider name (`tcp;ofi_rxm`), the same for every endpoint.
    pub provider: String,
    /// The endpoints, in the publisher's rail order.
    pub endpoints: Vec<CardEndpoint>,
}

/// A pair of endpoints between this process and a peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndpointPair {
    /// This process's rail (endpoint index, in its own card's order).
    pub rail: usize,
    /// The index of the peer's endpoint in the peer's card.
    pub remote: usize,
    /// One of the matching's pairs (each endpoint in at most one): large messages are striped
    /// over these. The others are standbys, used only after a failure.
    pub primary: bool,
    /// The slower end's link speed in Mb/s (0 when either end does not know its own).
    pub speed_mbps: u32,
}

impl OfiCard {
    /// The card's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(VERSION)
            .string(&self.provider)
            .u32(self.endpoints.len() as u32);
        for e in &self.endpoints {
            w.string(&e.fabric)
                .string(&e.domain)
                .bytes(&e.address)
                .u32(e.speed_mbps);
            let (ip, port) = e.probe.map_or((0, 0), |a| (u32::from(*a.ip()), a.port()));
            w.u32(ip).u16(port);
        }
        w.into_vec()
    }

    /// Decodes a peer's card, checking every field.
    pub fn decode(bytes: &[u8]) -> Result<OfiCard, DecodeError> {
        let mut r = Reader::new(bytes, FRAME);
        let version = r.u8("version")?;
        if version != VERSION {
            return Err(r.error(
                "version",
                "unknown ofi card version (mixed Kestrel versions?)",
            ));
        }
        let name = |r: &mut Reader<'_>, what: &'static str| {
            let s = r.string(what)?;
            if s.is_empty() || s.len() > MAX_NAME_LEN {
                return Err(r.error(what, "empty or longer than 256 bytes"));
            }
            Ok(s)
        };
        let provider = name(&mut r, "provider")?;
        // Each endpoint takes at least three 4-byte lengths and one address byte.
        let n = r.count("endpoints", 13)?;
        if n == 0 || n > MAX_ENDPOINTS {
            return Err(r.error("endpoints", "none, or more than 32"));
        }
        let mut endpoints = Vec::with_capacity(n);
        for _ in 0..n {
            let fabric = name(&mut r, "fabric")?;
            let domain = name(&mut r, "domain")?;
            let address = r.bytes("address")?;
            if address.is_empty() || address.len() > MAX_ADDR_LEN {
                return Err(r.error("address", "empty or longer than 512 bytes"));
            }
            let speed_mbps = r.u32("speed")?;
            let probe = match (r.u32("probe address")?, r.u16("probe port")?) {
                (0, 0) => None,
                (ip, port) if ip != 0 && port != 0 => {
                    Some(SocketAddrV4::new(Ipv4Addr::from(ip), port))
                }
                _ => {
                    return Err(r.error("probe port", "address and port must be both set or both 0"))
                }
            };
            endpoints.push(CardEndpoint {
                fabric,
                domain,
                address,
                speed_mbps,
                probe,
            });
        }
        r.finish("card")?;
        Ok(OfiCard {
            provider,
            endpoints,
        })
    }
}

/// The weight of pairing endpoints `a` and `b` (the same fabric), usnic's layout.
#[cfg(feature = "libfabric")]
pub fn pair_weight(a: &CardEndpoint, b: &CardEndpoint) -> Weight {
    let gbps = |e: &CardEndpoint| speed_gbps((e.speed_mbps > 0).then_some(e.speed_mbps));
    Weight::from_parts(WeightParts {
        same_subnet: true,
        min_speed_gbps: gbps(a).min(gbps(b)),
        reachable: true,
        metric: 0,
    })
}

/// The speed of a pair: its slower end's, 0 when either end does not know.
#[cfg(feature = "libfabric")]
fn pair_speed_mbps(a: &CardEndpoint, b: &CardEndpoint) -> u32 {
    if a.speed_mbps == 0 || b.speed_mbps == 0 {
        0
    } else {
        a.speed_mbps.min(b.speed_mbps)
    }
}

/// The pairs between the process of card `mine` and the process of card `peer`, in the order
/// both ends use (see the module docs), as (my rail, peer endpoint); `i_am_lower` when this
/// process has the lower number of the two. `routed` (the second value) when no fabric is
/// shared: then my first endpoint to the peer's first, across routers.
#[cfg(feature = "libfabric")]
pub fn pairing(mine: &OfiCard, peer: &OfiCard, i_am_lower: bool) -> (Vec<EndpointPair>, bool) {
    let (left, right) = if i_am_lower {
        (&mine.endpoints, &peer.endpoints)
    } else {
        (&peer.endpoints, &mine.endpoints)
    };
    let mut edges = Vec::new();
    for (l, le) in left.iter().enumerate() {
        for (r, re) in right.iter().enumerate() {
            if le.fabric == re.fabric {
                edges.push(MatchEdge {
                    left: l,
                    right: r,
                    weight: pair_weight(le, re),
                });
            }
        }
    }
    if edges.is_empty() {
        if mine.endpoints.is_empty() || peer.endpoints.is_empty() {
            return (Vec::new(), false);
        }
        let speed_mbps = pair_speed_mbps(&mine.endpoints[0], &peer.endpoints[0]);
        return (
            vec![EndpointPair {
                rail: 0,
                remote: 0,
                primary: true,
                speed_mbps,
            }],
            true,
        );
    }
    let primary = max_weight_matching(left.len(), right.len(), &edges);
    // Heavier first; among equals, by the left endpoint's fabric name, then by index: the
    // same keys at both ends.
    let rank = |e: &MatchEdge| {
        (
            std::cmp::Reverse(e.weight),
            left[e.left].fabric.clone(),
            e.left,
            e.right,
        )
    };
    let (mut first, mut standby): (Vec<MatchEdge>, Vec<MatchEdge>) = edges
        .into_iter()
        .partition(|e| primary.contains(&(e.left, e.right)));
    first.sort_by_key(rank);
    standby.sort_by_key(rank);
    let primaries = first.len();
    let pairs = first
        .into_iter()
        .chain(standby)
        .enumerate()
        .map(|(i, e)| {
            let (rail, remote) = if i_am_lower {
                (e.left, e.right)
            } else {
                (e.right, e.left)
            };
            EndpointPair {
                rail,
                remote,
                primary: i < primaries,
                speed_mbps: pair_speed_mbps(&left[e.left], &right[e.right]),
            }
        })
        .collect();
    (pairs, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[cfg(feature = "libfabric")]
    fn ep(fabric: &str, domain: &str, speed_mbps: u32) -> CardEndpoint {
        CardEndpoint {
            fabric: fabric.into(),
            domain: domain.into(),
            address: vec![1],
            speed_mbps,
            probe: None,
        }
    }

    #[cfg(feature = "libfabric")]
    fn of(endpoints: Vec<CardEndpoint>) -> OfiCard {
        OfiCard {
            provider: "tcp;ofi_rxm".into(),
            endpoints,
        }
    }

    /// (lower's endpoint, upper's endpoint) pairs in list order.
    #[cfg(feature = "libfabric")]
    type Pairs = Vec<(usize, usize)>;

    #[cfg(feature = "libfabric")]
    /// Both ends' lists, the upper one's mirrored back into the lower one's terms.
    fn both(lower: &OfiCard, upper: &OfiCard) -> (Pairs, Pairs) {
        let (a, ra) = pairing(lower, upper, true);
        let (b, rb) = pairing(upper, lower, false);
        assert_eq!(ra, rb);
        (
            a.iter().map(|p| (p.rail, p.remote)).collect(),
            b.iter().map(|p| (p.remote, p.rail)).collect(),
        )
    }

    #[cfg(feature = "libfabric")]
    #[test]
    fn shared_fabrics_pair_by_speed_then_name_and_both_ends_agree() {
        let lower = of(vec![
            ep("10.2.0.0/16", "eth2", 25_000),
            ep("10.9.0.0/16", "eth9", 100_000),
            ep("10.1.0.0/16", "eth1", 25_000),
            ep("10.3.0.0/16", "eth3", 100_000),
        ]);
        let upper = of(vec![
            ep("10.1.0.0/16", "eth1", 25_000),
            ep("10.2.0.0/16", "eth2", 25_000),
            ep("10.3.0.0/16", "eth3", 10_000),
        ]);
        let (a, b) = both(&lower, &upper);
        assert_eq!(a, b);
        // 10.3 is the slowest pair (10 Gb/s at one end); 10.1 and 10.2 tie at 25, by name.
        assert_eq!(a, vec![(2, 0), (0, 1), (3, 2)]);
        let (pairs, routed) = pairing(&lower, &of(vec![ep("192.168.0.0/24", "ib0", 0)]), true);
        assert!(routed);
        assert_eq!(
            pairs,
            vec![EndpointPair {
                rail: 0,
                remote: 0,
                primary: true,
                speed_mbps: 0,
            }]
        );
    }

    #[cfg(feature = "libfabric")]
    #[test]
    fn two_nics_on_one_subnet_pair_one_to_one_with_the_cross_pairs_as_standbys() {
        let host = |s0, s1| {
            of(vec![
                ep("10.0.0.0/24", "eth0", s0),
                ep("10.0.0.0/24", "eth1", s1),
            ])
        };
        // Equal speeds: a perfect matching first (each NIC used once), then the cross pairs.
        let (a, b) = both(&host(100_000, 100_000), &host(100_000, 100_000));
        assert_eq!(a, b);
        assert_eq!(a.len(), 4);
        let (mine, _) = pairing(&host(100_000, 100_000), &host(100_000, 100_000), true);
        let flags: Vec<_> = mine.iter().map(|p| (p.primary, p.speed_mbps)).collect();
        assert_eq!(
            flags,
            vec![
                (true, 100_000),
                (true, 100_000),
                (false, 100_000),
                (false, 100_000)
            ]
        );
        let primary: Vec<_> = a[..2].to_vec();
        assert!(
            primary[0].0 != primary[1].0 && primary[0].1 != primary[1].1,
            "{a:?}"
        );
        // A slow NIC on one side: its pairs come last, the fast pair first.
        let (a, b) = both(&host(100_000, 1_000), &host(100_000, 100_000));
        assert_eq!(a, b);
        assert_eq!(a[0].0, 0, "the fast NIC's pair first ({a:?})");
        assert_eq!(
            a[1].0, 1,
            "the slow NIC is still used: cardinality first ({a:?})"
        );
    }

    #[cfg(feature = "libfabric")]
    #[test]
    fn an_unknown_speed_ranks_below_a_known_one() {
        let lower = of(vec![
            ep("10.1.0.0/16", "eth1", 0),
            ep("10.2.0.0/16", "eth2", 1_000),
        ]);
        let upper = of(vec![
            ep("10.1.0.0/16", "eth1", 0),
            ep("10.2.0.0/16", "eth2", 1_000),
        ]);
        let (a, _) = both(&lower, &upper);
        assert_eq!(a, vec![(1, 1), (0, 0)]);
    }

    fn card() -> OfiCard {
        OfiCard {
            provider: "tcp;ofi_rxm".into(),
            endpoints: vec![
                CardEndpoint {
                    fabric: "198.18.1.0/24".into(),
                    domain: "eth1".into(),
                    address: vec![2, 0, 0x9c, 0x40, 198, 18, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0],
                    speed_mbps: 10_000,
                    probe: Some(SocketAddrV4::new(Ipv4Addr::new(198, 18, 1, 2), 40000)),
                },
                CardEndpoint {
                    fabric: "198.18.2.0/24".into(),
                    domain: "eth2".into(),
                    address: vec![2, 0, 0x9c, 0x41, 198, 18, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0],
                    speed_mbps: 0,
                    probe: None,
                },
            ],
        }
    }

    #[test]
    fn cards_round_trip() {
        let c = card();
        assert_eq!(OfiCard::decode(&c.encode()).unwrap(), c);
    }

    #[test]
    fn every_truncation_and_bad_field_is_an_error() {
        let bytes = card().encode();
        for len in 0..bytes.len() {
            assert!(
                OfiCard::decode(&bytes[..len]).is_err(),
                "prefix of {len} bytes"
            );
        }
        let mut trailing = bytes.clone();
        trailing.push(0);
        assert!(OfiCard::decode(&trailing).is_err());
        let mut v = bytes.clone();
        v[0] = VERSION + 1;
        assert_eq!(OfiCard::decode(&v).unwrap_err().what, "version");
        let mut empty_addr = card();
        empty_addr.endpoints[1].address.clear();
        assert_eq!(
            OfiCard::decode(&empty_addr.encode()).unwrap_err().what,
            "address"
        );
        let mut long_name = card();
        long_name.endpoints[0].domain = "x".repeat(MAX_NAME_LEN + 1);
        assert_eq!(
            OfiCard::decode(&long_name.encode()).unwrap_err().what,
            "domain"
        );
        let mut none = card();
        none.endpoints.clear();
        assert_eq!(
            OfiCard::decode(&none.encode()).unwrap_err().what,
            "endpoints"
        );
        let mut huge = vec![VERSION];
        huge.extend_from_slice(&u32::MAX.to_be_bytes());
        assert!(
            OfiCard::decode(&huge).is_err(),
            "a length past the end is refused"
        );
    }
}
