//! The `ofi_card` fuzz target: the card a process publishes, which every peer decodes.
//!
//! An input is the bytes of a card. Checked: decoding never panics and its error formats; a
//! card that decodes re-encodes to exactly the same bytes (the encoding is canonical), holds
//! 1 to `MAX_ENDPOINTS` endpoints with non-empty addresses, and its strict prefixes and the
//! same bytes with one more are refused.

use std::net::{Ipv4Addr, SocketAddrV4};

use crate::card::{CardEndpoint, OfiCard, MAX_ENDPOINTS};

/// The target's name (its corpus is `fuzz/corpus/ofi_card`).
pub const TARGET: &str = "ofi_card";

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let card = match OfiCard::decode(data) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert_eq!(card.encode(), data, "a decoded card re-encodes differently");
    assert!((1..=MAX_ENDPOINTS).contains(&card.endpoints.len()));
    assert!(card.endpoints.iter().all(|e| !e.address.is_empty()));
    for cut in [0, data.len() / 2, data.len() - 1] {
        assert!(
            OfiCard::decode(&data[..cut]).is_err(),
            "a prefix of {cut} bytes decoded"
        );
    }
    let mut longer = data.to_vec();
    longer.push(0);
    assert!(
        OfiCard::decode(&longer).is_err(),
        "a trailing byte was accepted"
    );
}

/// The seeds: cards of one and two endpoints, with and without a liveness responder, and one
/// of each refusal.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let ep = |i: u8, probe: bool| CardEndpoint {
        fabric: format!("198.18.{i}.0/24"),
        domain: format!("eth{i}"),
        address: vec![2, 0, 0x9c, 0x40 + i, 198, 18, i, 10, 0, 0, 0, 0, 0, 0, 0, 0],
        speed_mbps: 10_000 * u32::from(i),
        probe: probe.then(|| SocketAddrV4::new(Ipv4Addr::new(198, 18, i, 10), 40_000)),
    };
    let card = |endpoints| {
        OfiCard {
            provider: "tcp;ofi_rxm".into(),
            endpoints,
        }
        .encode()
    };
    let two = card(vec![ep(1, true), ep(2, false)]);
    let with = |at: usize, value: u8| {
        let mut b = two.clone();
        b[at] = value;
        b
    };
    // The port of the second endpoint's responder is the card's last two bytes: a port
    // without an address.
    let mut port_only = two.clone();
    let n = port_only.len();
    port_only[n - 1] = 1;
    let mut trailing = two.clone();
    trailing.push(0);
    vec![
        ("one_endpoint", card(vec![ep(1, true)])),
        ("two_endpoints", two.clone()),
        ("unknown_version", with(0, crate::card::VERSION + 1)),
        ("no_endpoints", card(vec![])),
        ("probe_port_without_address", port_only),
        ("truncated", two[..two.len() - 1].to_vec()),
        ("trailing_byte", trailing),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_decode_or_fail_as_named() {
        for (name, bytes) in seed_corpus() {
            let r = OfiCard::decode(&bytes);
            let ok = matches!(name, "one_endpoint" | "two_endpoints");
            assert_eq!(r.is_ok(), ok, "{name}: {r:?}");
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[&[0], &[1], &[2], &[0xff], &[0, 0, 0, 1]];
        let mut decoded = 0;
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0x0FCA, 40, tokens, |d| {
            decoded += usize::from(OfiCard::decode(d).is_ok());
            fuzz_one(d)
        });
        assert!(decoded >= 20, "only {decoded} mutants decoded");
    }
}
