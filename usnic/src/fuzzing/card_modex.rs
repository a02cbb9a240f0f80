//! The `usnic_card_modex` fuzz target: the binary card a rank publishes in the modex
//! ([`ModexCard`]), which every other rank decodes.
//!
//! An input is the bytes of a card. Checked: decoding never panics and its error formats (with
//! its source); a card that decodes re-encodes to exactly the same bytes (the encoding is
//! canonical), is valid as a JSON card too, carries the same facts through the JSON encoding
//! and back, is rebuilt from its parts to itself, and its strict prefixes are refused as
//! truncated and the same bytes with one more as trailing.

use std::error::Error as _;

use crate::card::{CardDecodeError, HostCard, JsonLayout, ModexCard, MODEX_VERSION};

/// The target's name (its corpus is `fuzz/corpus/usnic_card_modex`).
pub const TARGET: &str = "usnic_card_modex";

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let card = match ModexCard::decode(data) {
        Ok(card) => card,
        Err(e) => {
            let _ = e.to_string();
            let _ = e.source().map(|s| s.to_string());
            return;
        }
    };
    assert_eq!(card.encode(), data, "a decoded card re-encodes differently");
    assert_eq!(card.version(), MODEX_VERSION);
    let host = card.to_host_card();
    if let Err(e) = host.validate() {
        panic!("a decoded modex card is not a valid JSON card: {e}");
    }
    for layout in [JsonLayout::Compact, JsonLayout::Pretty] {
        let text = host.to_json(layout);
        assert_eq!(
            HostCard::from_json_str("fuzz", &text),
            Ok(host.clone()),
            "the card's JSON does not parse back to it: {text}"
        );
    }
    let addrs = card
        .interfaces()
        .iter()
        .map(|i| i.fabric_addr.clone())
        .collect();
    let rebuilt = ModexCard::from_host_card(&host, addrs).and_then(|c| match card.probe_ports() {
        Some(ports) => c.with_probe_ports(ports.to_vec()),
        None => Ok(c),
    });
    assert_eq!(
        rebuilt,
        Ok(card.clone()),
        "the card rebuilt from its parts differs"
    );
    for cut in [0, data.len() / 2, data.len() - 1] {
        let e = ModexCard::decode(&data[..cut]);
        assert!(
            matches!(e, Err(CardDecodeError::Truncated { .. })),
            "cut to {cut} bytes: {e:?}"
        );
    }
    let mut longer = data.to_vec();
    longer.push(0);
    assert_eq!(
        ModexCard::decode(&longer),
        Err(CardDecodeError::TrailingBytes { count: 1 })
    );
}

/// The seed corpus: cards from empty to the largest the format allows, and the typical ways
/// card bytes go wrong, by file name.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let modex = |interfaces: usize, routes: Option<usize>| {
        let host = super::sample_card(interfaces, routes);
        let addrs = (0..host.interfaces.len())
            .map(|i| vec![0xA0 + i as u8; 1 + (i * 7) % 64])
            .collect();
        match ModexCard::from_host_card(&host, addrs) {
            Ok(card) => card.encode(),
            Err(e) => panic!("seed card is invalid: {e}"),
        }
    };
    let one = modex(1, Some(2));
    // Byte offsets in `one`: version 0, flags 1, node length 2 and "h0" 3-4, interface count
    // 5, then the interface: name length 6 and "eth0" 7-10, ipv4 11-14, prefix 15, speed
    // 16-19, MTU 20-21, address length 22, address 23; routes count 24, first route 25-34.
    let with = |at: usize, value: u8| {
        let mut b = one.clone();
        b[at] = value;
        b
    };
    let mut trailing = one.clone();
    trailing.push(0);
    vec![
        ("no_interfaces_no_routes", modex(0, None)),
        ("no_interfaces_empty_routes", modex(0, Some(0))),
        ("one_interface_two_routes", one.clone()),
        ("three_interfaces_one_speed_unknown", modex(3, None)),
        ("largest", modex(16, Some(64))),
        (
            "two_interfaces_with_liveness_ports",
            ModexCard::decode(&modex(2, Some(1)))
                .and_then(|c| {
                    c.with_probe_ports(vec![40000, 0])
                        .map_err(CardDecodeError::Invalid)
                })
                .expect("seed card is valid")
                .encode(),
        ),
        ("empty", vec![]),
        ("unknown_version", with(0, 2)),
        ("unknown_flags", with(1, 0x05)),
        ("node_not_utf8", with(3, 0xff)),
        ("node_with_control_character", with(3, b'\n')),
        ("too_many_interfaces", with(5, 17)),
        ("interface_name_with_slash", with(8, b'/')),
        ("loopback_address", with(11, 127)),
        ("prefix_zero", with(15, 0)),
        ("mtu_too_small", with(20, 0)),
        ("fabric_address_empty", with(22, 0)),
        ("fabric_address_too_long", with(22, 65)),
        ("too_many_routes", with(24, 65)),
        ("route_host_bits_set", with(26, 1)),
        ("route_interface_out_of_range", with(30, 1)),
        ("truncated", one[..one.len() - 1].to_vec()),
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
        // What each malformed seed's error says (in its debug form).
        let expected = [
            ("empty", "Truncated"),
            ("unknown_version", "UnknownVersion"),
            ("unknown_flags", "UnknownFlags"),
            ("node_not_utf8", "BadUtf8"),
            ("node_with_control_character", "\"node\""),
            ("too_many_interfaces", "TooManyInterfaces"),
            ("interface_name_with_slash", "interfaces[0].name"),
            ("loopback_address", "interfaces[0].ipv4"),
            ("prefix_zero", "interfaces[0].prefix_len"),
            ("mtu_too_small", "interfaces[0].mtu"),
            ("fabric_address_empty", "BadFabricAddrLen"),
            ("fabric_address_too_long", "BadFabricAddrLen"),
            ("too_many_routes", "TooManyRoutes"),
            ("route_host_bits_set", "routes[0].dest"),
            ("route_interface_out_of_range", "BadInterfaceIndex"),
            ("truncated", "Truncated"),
            ("trailing_byte", "TrailingBytes"),
        ];
        for (name, bytes) in seed_corpus() {
            let result = ModexCard::decode(&bytes);
            match expected.iter().find(|(n, _)| *n == name) {
                Some((_, what)) => {
                    let e = format!("{:?}", result.expect_err(name));
                    assert!(e.contains(what), "{name}: {e}");
                }
                None => assert!(result.is_ok(), "{name}: {result:?}"),
            }
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[&[1], &[0], &[64], &[16], &[0xff]];
        let mut decoded = 0;
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0xCA4D, 36, tokens, |d| {
            decoded += usize::from(ModexCard::decode(d).is_ok());
            fuzz_one(d)
        });
        // Enough mutants are cards for the round trips to be exercised, not only the errors.
        assert!(decoded >= 20, "only {decoded} mutants decoded");
    }
}
