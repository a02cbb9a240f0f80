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

impl OfiCard {
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
