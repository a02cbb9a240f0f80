//! The ofi card: what a process publishes so that its peers can reach it.
//!
//! ```text
//! u8      version (1)
//! string  provider, as fi_info names it ("tcp;ofi_rxm")
//! u32     endpoints, 1..=MAX_ENDPOINTS, each:
//!   string  fabric name (the subnet for tcp: "198.18.1.0/24")
//!   string  domain name (the interface for tcp: "eth1")
//!   bytes   endpoint address (fi_getname), 1..=MAX_ADDR_LEN bytes, opaque
//! ```
//!
//! Written with the project codec (`kestrel_transport::codec`, u32-prefixed strings and
//! bytes) and read back with its bounded reader. The card comes from another process: this
//! module owns its layout and checks every length and count; it must never interpret the
//! address (only the provider that wrote it can).

use kestrel_transport::codec::{DecodeError, Reader, Writer};

/// The card version this build writes and reads.
pub const VERSION: u8 = 1;

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
}

impl OfiCard {
    /// How a process whose rails are on `my_fabrics` (in rail order) pairs with the process
    /// of this card: every local rail whose fabric one of the peer's endpoints is on, with the
    /// peer's first endpoint on that fabric, in fabric-name order (the same at both ends, so
    /// both start on the same pair). `routed` (the second value) when no fabric is shared:
    /// then rail 0 to the peer's first endpoint, across routers.
    pub fn pairs_for(&self, my_fabrics: &[&str]) -> (Vec<EndpointPair>, bool) {
        let mut mine: Vec<usize> = (0..my_fabrics.len()).collect();
        mine.sort_by(|&a, &b| my_fabrics[a].cmp(my_fabrics[b]).then(a.cmp(&b)));
        let pairs: Vec<EndpointPair> = mine
            .into_iter()
            .filter_map(|rail| {
                self.endpoints
                    .iter()
                    .position(|e| e.fabric == my_fabrics[rail])
                    .map(|remote| EndpointPair { rail, remote })
            })
            .collect();
        if pairs.is_empty() && !my_fabrics.is_empty() && !self.endpoints.is_empty() {
            return (vec![EndpointPair { rail: 0, remote: 0 }], true);
        }
        (pairs, false)
    }

    /// The card's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.u8(VERSION)
            .string(&self.provider)
            .u32(self.endpoints.len() as u32);
        for e in &self.endpoints {
            w.string(&e.fabric).string(&e.domain).bytes(&e.address);
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
            endpoints.push(CardEndpoint {
                fabric,
                domain,
                address,
            });
        }
        r.finish("card")?;
        Ok(OfiCard {
            provider,
            endpoints,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_follow_shared_fabrics_in_name_order_else_route() {
        let ep = |fabric: &str, domain: &str| CardEndpoint {
            fabric: fabric.into(),
            domain: domain.into(),
            address: vec![1],
        };
        let peer = OfiCard {
            provider: "tcp;ofi_rxm".into(),
            endpoints: vec![ep("10.2.0.0/16", "eth2"), ep("10.1.0.0/16", "eth1")],
        };
        let (pairs, routed) = peer.pairs_for(&["10.2.0.0/16", "10.9.0.0/16", "10.1.0.0/16"]);
        assert!(!routed);
        assert_eq!(
            pairs,
            vec![
                EndpointPair { rail: 2, remote: 1 },
                EndpointPair { rail: 0, remote: 0 }
            ]
        );
        let (pairs, routed) = peer.pairs_for(&["192.168.0.0/24"]);
        assert!(routed);
        assert_eq!(pairs, vec![EndpointPair { rail: 0, remote: 0 }]);
    }

    fn card() -> OfiCard {
        OfiCard {
            provider: "tcp;ofi_rxm".into(),
            endpoints: vec![
                CardEndpoint {
                    fabric: "198.18.1.0/24".into(),
                    domain: "eth1".into(),
                    address: vec![2, 0, 0x9c, 0x40, 198, 18, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0],
                },
                CardEndpoint {
                    fabric: "198.18.2.0/24".into(),
                    domain: "eth2".into(),
                    address: vec![2, 0, 0x9c, 0x41, 198, 18, 2, 2, 0, 0, 0, 0, 0, 0, 0, 0],
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
        v[0] = 2;
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
