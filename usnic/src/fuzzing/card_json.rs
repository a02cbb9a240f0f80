//! The `usnic_card_json` fuzz target: the JSON card ([`HostCard::from_json_str`]), which
//! reaches a rank from files and environment variables, with its refusal of a key given twice.
//!
//! An input is the text of a card (lossily UTF-8). Checked: parsing never panics and its error
//! formats; text that is not JSON is a syntax error; JSON with a key given twice in one object
//! (found by counting the entries the parser sees against those `serde_json` keeps) is refused
//! as a syntax error naming the key, and JSON without one parses exactly as its `serde_json`
//! value does; a card that parses is valid, prints (in both layouts) to text that parses back
//! to it, and carries the same facts through the binary modex card and back.

use std::fmt;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::card::{CardProblem, HostCard, JsonLayout, ModexCard};

/// The target's name (its corpus is `fuzz/corpus/usnic_card_json`).
pub const TARGET: &str = "usnic_card_json";

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let parsed = HostCard::from_json_str("fuzz", &text);
    if let Err(e) = &parsed {
        let _ = e.to_string();
    }
    let syntax_message = match &parsed {
        Err(e) => match &e.problem {
            CardProblem::Syntax { message, .. } => Some(message.as_str()),
            _ => None,
        },
        Ok(_) => None,
    };
    match serde_json::from_str::<Value>(&text) {
        Err(_) => assert!(syntax_message.is_some(), "not JSON, yet {parsed:?}"),
        Ok(value) => {
            let seen = match serde_json::from_str::<Entries>(&text) {
                Ok(Entries(n)) => n,
                Err(e) => {
                    panic!("serde_json reads the text as a value but not entry by entry: {e}")
                }
            };
            if seen != kept_entries(&value) {
                assert!(
                    syntax_message.is_some_and(|m| m.contains("appears twice")),
                    "a key given twice was not refused: {parsed:?}"
                );
            } else {
                assert_eq!(
                    parsed,
                    HostCard::from_json_value("fuzz", &value),
                    "the duplicate-key pass changed the outcome of JSON without duplicates"
                );
            }
        }
    }
    if let Ok(card) = parsed {
        check_card(&card);
    }
}

fn check_card(card: &HostCard) {
    if let Err(e) = card.validate() {
        panic!("a parsed card is invalid: {e}");
    }
    for layout in [JsonLayout::Compact, JsonLayout::Pretty] {
        let text = card.to_json(layout);
        assert_eq!(
            HostCard::from_json_str("fuzz", &text),
            Ok(card.clone()),
            "the printed card does not parse back to it: {text}"
        );
    }
    let addrs = (0..card.interfaces.len())
        .map(|i| vec![i as u8; 1 + i % 64])
        .collect();
    let modex = match ModexCard::from_host_card(card, addrs) {
        Ok(m) => m,
        Err(e) => panic!("a valid JSON card is not a valid modex card: {e}"),
    };
    assert_eq!(
        ModexCard::decode(&modex.encode()).map(|m| m.to_host_card()),
        Ok(card.clone()),
        "the card changed through the modex encoding"
    );
}

/// How many object entries a JSON text has, as the parser reads them (duplicates included).
struct Entries(usize);

impl<'de> Deserialize<'de> for Entries {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(EntriesVisitor)
    }
}

struct EntriesVisitor;

impl<'de> Visitor<'de> for EntriesVisitor {
    type Value = Entries;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_i64<E>(self, _: i64) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_u64<E>(self, _: u64) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_f64<E>(self, _: f64) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_str<E>(self, _: &str) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_unit<E>(self) -> Result<Entries, E> {
        Ok(Entries(0))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Entries, A::Error> {
        let mut n = 0;
        while let Some(Entries(inner)) = seq.next_element()? {
            n += inner;
        }
        Ok(Entries(n))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Entries, A::Error> {
        let mut n = 0;
        while map.next_key::<String>()?.is_some() {
            let Entries(inner) = map.next_value()?;
            n += 1 + inner;
        }
        Ok(Entries(n))
    }
}

/// How many object entries `serde_json` kept (it keeps the last of duplicate keys).
fn kept_entries(v: &Value) -> usize {
    match v {
        Value::Object(m) => m.len() + m.values().map(kept_entries).sum::<usize>(),
        Value::Array(a) => a.iter().map(kept_entries).sum(),
        _ => 0,
    }
}

/// The seed corpus: cards as people and discovery write them, and the typical ways one is
/// wrong, by file name.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let json = |interfaces, routes, layout| {
        super::sample_card(interfaces, routes)
            .to_json(layout)
            .into_bytes()
    };
    const EXAMPLE: &str = r#"{"version":1,"node":"h0","interfaces":[{"name":"eth1","ipv4":"198.18.1.10","prefix_len":24,"link_speed_mbps":25000,"mtu":9000}],"routes":[{"dest":"198.18.2.0/24","interface":"eth1","metric":100}]}"#;
    let example = |from: &str, to: &str| {
        assert!(EXAMPLE.contains(from), "{from}");
        EXAMPLE.replacen(from, to, 1).into_bytes()
    };
    vec![
        ("documented_example", EXAMPLE.as_bytes().to_vec()),
        ("no_routes", json(1, None, JsonLayout::Compact)),
        ("pretty", json(3, Some(2), JsonLayout::Pretty)),
        ("no_interfaces", json(0, Some(0), JsonLayout::Compact)),
        ("largest", json(16, Some(64), JsonLayout::Compact)),
        (
            "escaped_key_and_whitespace",
            example(r#""node":"h0""#, " \"n\\u006fde\" :\t\"h0\"\n"),
        ),
        (
            "duplicate_top_level_key",
            example(r#""node":"h0","#, r#""node":"h0","node":"h1","#),
        ),
        (
            "duplicate_interface_key",
            example(r#""mtu":9000"#, r#""mtu":9000,"mtu":1500"#),
        ),
        (
            "duplicate_key_written_two_ways",
            example(r#""mtu":9000"#, r#""mtu":9000,"\u006dtu":1500"#),
        ),
        (
            "duplicate_key_in_unknown_field",
            example(r#""version":1,"#, r#""version":1,"x":{"a":1,"a":2},"#),
        ),
        ("unknown_field_typo", example(r#""mtu""#, r#""mtuu""#)),
        (
            "unknown_version",
            example(r#""version":1"#, r#""version":2"#),
        ),
        (
            "version_as_string",
            example(r#""version":1"#, r#""version":"1""#),
        ),
        (
            "prefix_out_of_range",
            example(r#""prefix_len":24"#, r#""prefix_len":33"#),
        ),
        (
            "prefix_fractional",
            example(r#""prefix_len":24"#, r#""prefix_len":24.5"#),
        ),
        (
            "speed_null",
            example(r#""link_speed_mbps":25000"#, r#""link_speed_mbps":null"#),
        ),
        (
            "speed_zero",
            example(r#""link_speed_mbps":25000"#, r#""link_speed_mbps":0"#),
        ),
        ("mtu_negative", example(r#""mtu":9000"#, r#""mtu":-1"#)),
        (
            "loopback_address",
            example(r#""198.18.1.10""#, r#""127.0.0.1""#),
        ),
        (
            "route_host_bits_set",
            example(r#""198.18.2.0/24""#, r#""198.18.2.1/24""#),
        ),
        (
            "route_prefix_with_sign",
            example(r#""198.18.2.0/24""#, r#""198.18.2.0/+24""#),
        ),
        (
            "route_unknown_interface",
            example(r#""interface":"eth1""#, r#""interface":"eth9""#),
        ),
        (
            "routes_null",
            example(
                r#""routes":[{"dest":"198.18.2.0/24","interface":"eth1","metric":100}]"#,
                r#""routes":null"#,
            ),
        ),
        (
            "interface_name_with_slash",
            example(r#""name":"eth1""#, r#""name":"et/h1""#),
        ),
        (
            "syntax_error",
            EXAMPLE.as_bytes()[..EXAMPLE.len() - 2].to_vec(),
        ),
        ("trailing_text", [EXAMPLE.as_bytes(), b" x"].concat()),
        (
            "deeply_nested",
            ["[".repeat(200), "]".repeat(200)].concat().into_bytes(),
        ),
        ("not_an_object", b"[1,2]".to_vec()),
        (
            "not_utf8",
            example(r#""h0""#, "\"h\u{0}\"")
                .into_iter()
                .chain([0xff])
                .collect(),
        ),
        ("empty", vec![]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_parse_or_fail_as_named() {
        let valid = [
            "documented_example",
            "no_routes",
            "pretty",
            "no_interfaces",
            "largest",
            "escaped_key_and_whitespace",
            "speed_null",
        ];
        for (name, bytes) in seed_corpus() {
            let parsed = HostCard::from_json_str(name, &String::from_utf8_lossy(&bytes));
            assert_eq!(parsed.is_ok(), valid.contains(&name), "{name}: {parsed:?}");
            if name.starts_with("duplicate_") {
                assert!(
                    parsed.unwrap_err().to_string().contains("appears twice"),
                    "{name}"
                );
            }
        }
    }

    #[test]
    fn the_duplicate_key_oracle_counts_what_serde_json_drops() {
        let text = r#"{"a":{"x":1,"x":2},"a":[{"y":1}],"b":2}"#;
        let value: Value = serde_json::from_str(text).unwrap();
        assert_eq!(serde_json::from_str::<Entries>(text).unwrap().0, 6);
        assert_eq!(kept_entries(&value), 3);
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[
            b"\"",
            b"{",
            b"}",
            b"[",
            b"]",
            b",",
            b":",
            b"null",
            b"\\u0065",
            b"\"mtu\":1500,",
        ];
        let mut parsed = 0;
        fuzz_corpus::mutate_seeds(&seed_corpus(), 10_000, 0x750A, 64, tokens, |d| {
            parsed +=
                usize::from(HostCard::from_json_str("x", &String::from_utf8_lossy(d)).is_ok());
            fuzz_one(d)
        });
        // Most edits break the syntax or a rule; enough mutants must still be cards for the
        // round trips to be exercised, not only the errors.
        assert!(parsed >= 10, "only {parsed} mutants parsed");
    }
}
