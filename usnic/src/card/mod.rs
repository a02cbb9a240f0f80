//! The business card: what one process tells its peers about its network interfaces.
//!
//! This module owns the two encodings of a card and their validation: the JSON card for people
//! and tools, and the compact binary card a rank publishes in the modex. It must never touch the
//! network, the routing table or libfabric (discovery builds cards; this module only checks and
//! converts them), and it must never panic on bytes or text from elsewhere: every input goes
//! through a checked parser whose errors say which field is wrong and why.
//!
//! # JSON card, version 1
//!
//! ```json
//! {"version":1,"node":"h0",
//!  "interfaces":[{"name":"eth1","ipv4":"198.18.1.10","prefix_len":24,
//!                 "link_speed_mbps":25000,"mtu":9000}],
//!  "routes":[{"dest":"198.18.2.0/24","interface":"eth1","metric":100}]}
//! ```
//!
//! | field | type | rule |
//! |---|---|---|
//! | `version` | integer | must be one of [`SUPPORTED_JSON_VERSIONS`] (today only 1) |
//! | `node` | string | 1 to 255 bytes, no control characters; the runtime's node id |
//! | `interfaces` | array | at most [`MAX_INTERFACES`]; names unique |
//! | `interfaces[i].name` | string | 1 to 15 printable ASCII characters, no `/` (Linux `IFNAMSIZ`) |
//! | `interfaces[i].ipv4` | string | dotted quad; not unspecified, loopback, multicast or broadcast |
//! | `interfaces[i].prefix_len` | integer | 1 to 32 |
//! | `interfaces[i].link_speed_mbps` | integer or `null` | 1 to 4294967295 Mb/s; `null` when the speed is unknown (virtual NICs) |
//! | `interfaces[i].mtu` | integer | 576 to 65535 bytes |
//! | `routes` | array, optional | at most [`MAX_ROUTES`]; absent means "on-link subnets only" |
//! | `routes[j].dest` | string | `a.b.c.d/n`, `n` 0 to 32, no host bits set; `0.0.0.0/0` is a default route |
//! | `routes[j].interface` | string | the `name` of one of this card's interfaces |
//! | `routes[j].metric` | integer | 0 to 4294967295; lower is preferred |
//!
//! Any other field is an error (typo protection), and so is a version this build does not know.
//! Version 1 will not change; a format change gets a new version number.
//!
//! # Binary modex card, version 1
//!
//! All integers big-endian; every length is checked against the limits above before use.
//!
//! ```text
//! u8 version (1) | u8 flags (bit 0: routes table present; bit 1: liveness ports present;
//!     other bits must be 0)
//! u8 node_len | node (UTF-8)
//! u8 interface_count (<= 16), then per interface:
//!     u8 name_len | name | [u8; 4] ipv4 | u8 prefix_len | u32 link_speed_mbps (0 = unknown)
//!     | u16 mtu | u8 fabric_addr_len (1..=64) | fabric_addr
//! if flags bit 0: u8 route_count (<= 64), then per route:
//!     [u8; 4] dest | u8 dest_prefix_len | u8 interface index | u32 metric
//! if flags bit 1: per interface, in order: u16 liveness responder port (0 = none), the UDP
//!     port on that interface's ipv4 where the process answers liveness probes
//! ```
//!
//! The encoding is canonical: a card has exactly one encoding, so a decoded card re-encodes to
//! the same bytes.
//!
//! Module map: the types and limits are here; `rules` holds the field rules both encodings
//! apply, `json` the JSON card's parser and printer, `modex` the binary card, `error` the
//! error types that name the field and the problem.

use std::net::Ipv4Addr;

mod error;
mod json;
mod modex;
mod rules;
mod unique_keys;

pub use error::{CardError, CardProblem, InvalidField};
pub use modex::{CardDecodeError, ModexCard, ModexInterface};
pub use rules::{network_of, prefix_mask};

use rules::check_whole_card;

/// JSON card versions this build reads.
pub const SUPPORTED_JSON_VERSIONS: &[u32] = &[1];
/// The JSON card version this build writes.
pub const JSON_VERSION: u32 = 1;
/// Binary modex card versions this build reads.
pub const SUPPORTED_MODEX_VERSIONS: &[u8] = &[1];
/// The binary modex card version this build writes.
pub const MODEX_VERSION: u8 = 1;
/// Most interfaces one card may list (both encodings).
pub const MAX_INTERFACES: usize = 16;
/// Most routes one card may list (both encodings).
pub const MAX_ROUTES: usize = 64;
/// Longest libfabric address a modex card carries, in bytes.
pub const MAX_FABRIC_ADDR_LEN: usize = 64;
/// Longest interface name (Linux `IFNAMSIZ` minus the terminating NUL).
pub const MAX_INTERFACE_NAME_LEN: usize = 15;
/// Longest node id, in bytes.
pub const MAX_NODE_LEN: usize = 255;
/// Smallest MTU a card may declare (the IPv4 minimum datagram every host must accept).
pub const MIN_MTU: u32 = 576;
/// Largest MTU a card may declare (the IPv4 total-length limit).
pub const MAX_MTU: u32 = 65535;

/// A host's business card as people and tools see it (the JSON card).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostCard {
    /// Format version (see [`SUPPORTED_JSON_VERSIONS`]).
    pub version: u32,
    /// The node id the runtime assigned to this host.
    pub node: String,
    /// The interfaces the transport may use, in discovery order (this order is the interface
    /// index everywhere else, so both peers see the same numbering).
    pub interfaces: Vec<CardInterface>,
    /// The routing-table excerpt used for reachability; `None` means on-link subnets only.
    pub routes: Option<Vec<CardRoute>>,
}

/// One usable interface on a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardInterface {
    /// Kernel interface name (`eth1`).
    pub name: String,
    /// The interface's IPv4 address.
    pub ipv4: Ipv4Addr,
    /// Prefix length of the interface's subnet, 1 to 32.
    pub prefix_len: u8,
    /// Link speed in Mb/s; `None` when unknown (virtual NICs report -1 or fail).
    pub link_speed_mbps: Option<u32>,
    /// MTU in bytes.
    pub mtu: u32,
}

/// One route of the card's routing-table excerpt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardRoute {
    /// Destination network address (host bits zero).
    pub dest: Ipv4Addr,
    /// Destination prefix length, 0 (default route) to 32.
    pub dest_prefix_len: u8,
    /// Name of the card interface the route leaves through.
    pub interface: String,
    /// Route metric; lower is preferred.
    pub metric: u32,
}

/// Layout of [`HostCard::to_json`] output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JsonLayout {
    /// Indented, one field per line: for people and for files kept in version control.
    Pretty,
    /// One line: for environment variables and logs.
    Compact,
}

impl HostCard {
    /// This host's card as the transport publishes it: the interfaces discovery marked as used
    /// (in discovery order, which is the rail order), and the routes that leave through them.
    pub fn from_discovery(
        found: &crate::discovery::Discovery,
        node: &str,
    ) -> Result<HostCard, InvalidField> {
        let interfaces: Vec<CardInterface> = found
            .used()
            .filter_map(|i| {
                Some(CardInterface {
                    name: i.name.clone(),
                    ipv4: i.ipv4?,
                    prefix_len: i.prefix_len,
                    link_speed_mbps: i.link_speed_mbps,
                    mtu: i.mtu,
                })
            })
            .collect();
        // Routes through interfaces the card does not list say nothing about reachability
        // over the transport's interfaces.
        let routes = found
            .routes
            .iter()
            .filter(|r| interfaces.iter().any(|i| i.name == r.interface))
            .map(|r| CardRoute {
                dest: r.dest,
                dest_prefix_len: r.prefix_len,
                interface: r.interface.clone(),
                metric: r.metric,
            })
            .collect();
        let card = HostCard {
            version: JSON_VERSION,
            node: node.to_string(),
            interfaces,
            routes: Some(routes),
        };
        card.validate()?;
        Ok(card)
    }

    /// Checks every rule of the format (the same rules the parser applies), for cards built in
    /// code, for example by discovery.
    pub fn validate(&self) -> Result<(), InvalidField> {
        if !SUPPORTED_JSON_VERSIONS.contains(&self.version) {
            return Err(InvalidField::new(
                "version",
                CardProblem::UnknownVersion {
                    found: self.version.to_string(),
                    supported: SUPPORTED_JSON_VERSIONS.to_vec(),
                },
            ));
        }
        check_whole_card(&self.node, &self.interfaces, self.routes.as_deref())
    }

    /// The index of the interface with this name.
    pub fn interface_index(&self, name: &str) -> Option<usize> {
        self.interfaces.iter().position(|i| i.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    const EXAMPLE: &str = r#"{"version":1,"node":"h0","interfaces":[{"name":"eth1","ipv4":"198.18.1.10","prefix_len":24,"link_speed_mbps":25000,"mtu":9000}],"routes":[{"dest":"198.18.2.0/24","interface":"eth1","metric":100}]}"#;

    fn example() -> HostCard {
        HostCard::from_json_str("example.json", EXAMPLE).unwrap()
    }

    fn two_interface_card() -> HostCard {
        HostCard {
            version: 1,
            node: "h1".to_string(),
            interfaces: vec![
                CardInterface {
                    name: "eth1".to_string(),
                    ipv4: Ipv4Addr::new(198, 18, 1, 20),
                    prefix_len: 24,
                    link_speed_mbps: Some(10000),
                    mtu: 1500,
                },
                CardInterface {
                    name: "eth2".to_string(),
                    ipv4: Ipv4Addr::new(198, 18, 2, 20),
                    prefix_len: 24,
                    link_speed_mbps: None,
                    mtu: 9000,
                },
            ],
            routes: Some(vec![
                CardRoute {
                    dest: Ipv4Addr::new(0, 0, 0, 0),
                    dest_prefix_len: 0,
                    interface: "eth2".to_string(),
                    metric: 1024,
                },
                CardRoute {
                    dest: Ipv4Addr::new(198, 19, 0, 0),
                    dest_prefix_len: 16,
                    interface: "eth1".to_string(),
                    metric: 7,
                },
            ]),
        }
    }

    fn parse_err(text: &str) -> CardError {
        HostCard::from_json_str("bad.json", text).unwrap_err()
    }

    /// The example card with one interface-level field replaced by raw JSON.
    fn with_interface_field(field: &str, raw: &str) -> String {
        let mut v: Value = serde_json::from_str(EXAMPLE).unwrap();
        v["interfaces"][0][field] = serde_json::from_str(raw).unwrap();
        v.to_string()
    }

    #[test]
    fn parses_the_documented_example() {
        let card = example();
        assert_eq!(card.version, 1);
        assert_eq!(card.node, "h0");
        assert_eq!(
            card.interfaces,
            vec![CardInterface {
                name: "eth1".to_string(),
                ipv4: Ipv4Addr::new(198, 18, 1, 10),
                prefix_len: 24,
                link_speed_mbps: Some(25000),
                mtu: 9000,
            }]
        );
        assert_eq!(
            card.routes,
            Some(vec![CardRoute {
                dest: Ipv4Addr::new(198, 18, 2, 0),
                dest_prefix_len: 24,
                interface: "eth1".to_string(),
                metric: 100,
            }])
        );
    }

    #[test]
    fn compact_json_is_the_documented_text_and_both_layouts_round_trip() {
        assert_eq!(example().to_json(JsonLayout::Compact), EXAMPLE);
        let card = two_interface_card();
        card.validate().unwrap();
        for layout in [JsonLayout::Pretty, JsonLayout::Compact] {
            let text = card.to_json(layout);
            assert_eq!(HostCard::from_json_str("x", &text).unwrap(), card);
        }
        assert!(card
            .to_json(JsonLayout::Pretty)
            .contains("\n  \"node\": \"h1\""));
        assert!(card
            .to_json(JsonLayout::Compact)
            .contains(r#""link_speed_mbps":null"#));
    }

    #[test]
    fn absent_routes_mean_on_link_only_and_stay_absent() {
        let text = r#"{"version":1,"node":"h0","interfaces":[]}"#;
        let card = HostCard::from_json_str("x", text).unwrap();
        assert_eq!(card.routes, None);
        assert_eq!(card.to_json(JsonLayout::Compact), text);
    }

    #[test]
    fn errors_name_the_source_and_the_field_path() {
        let mut v: Value = serde_json::from_str(EXAMPLE).unwrap();
        let second = v["interfaces"][0].clone();
        v["interfaces"].as_array_mut().unwrap().push(second);
        v["interfaces"][1]["name"] = "eth2".into();
        v["interfaces"][1]["prefix_len"] = 33.into();
        let e = parse_err(&v.to_string());
        assert_eq!(e.source, "bad.json");
        assert_eq!(e.field, "interfaces[1].prefix_len");
        assert!(matches!(e.problem, CardProblem::OutOfRange { .. }));
        assert_eq!(
            e.to_string(),
            "usnic business card 'bad.json': field interfaces[1].prefix_len: 33 is out of \
             range (allowed: 1..=32)"
        );
    }

    #[test]
    fn missing_fields_and_wrong_types_are_reported_per_field() {
        let mut v: Value = serde_json::from_str(EXAMPLE).unwrap();
        v["interfaces"][0].as_object_mut().unwrap().remove("mtu");
        let e = parse_err(&v.to_string());
        assert_eq!(e.field, "interfaces[0].mtu");
        assert!(matches!(e.problem, CardProblem::MissingField { .. }));

        let e = parse_err(&with_interface_field("mtu", "\"9000\""));
        assert_eq!(e.field, "interfaces[0].mtu");
        assert!(matches!(
            e.problem,
            CardProblem::WrongType {
                expected: "an integer",
                ..
            }
        ));

        let e = parse_err(&with_interface_field("prefix_len", "24.5"));
        assert!(matches!(e.problem, CardProblem::WrongType { .. }));
        let e = parse_err(&with_interface_field("prefix_len", "-1"));
        assert!(matches!(e.problem, CardProblem::OutOfRange { .. }));

        let e = parse_err(r#"{"version":1,"interfaces":[]}"#);
        assert_eq!(e.field, "node");
        let e = parse_err(r#"{"version":1,"node":"h0","interfaces":{}}"#);
        assert_eq!(e.field, "interfaces");
        let e = parse_err(r#"[1,2]"#);
        assert_eq!(e.field, "");
        assert!(e
            .to_string()
            .ends_with("'bad.json': must be an object, found an array"));
        let e = parse_err(r#"{"version":1,"node":"h0","interfaces":[],"routes":null}"#);
        assert_eq!(e.field, "routes");
    }

    #[test]
    fn range_checks() {
        for (field, raw, ok) in [
            ("mtu", "575", false),
            ("mtu", "576", true),
            ("mtu", "65535", true),
            ("mtu", "65536", false),
            ("prefix_len", "0", false),
            ("prefix_len", "32", true),
            ("link_speed_mbps", "0", false),
            ("link_speed_mbps", "null", true),
            ("link_speed_mbps", "4294967295", true),
            ("link_speed_mbps", "4294967296", false),
        ] {
            let result = HostCard::from_json_str("x", &with_interface_field(field, raw));
            assert_eq!(result.is_ok(), ok, "{field} = {raw}: {result:?}");
            if let Err(e) = result {
                assert_eq!(e.field, format!("interfaces[0].{field}"));
            }
        }
    }

    #[test]
    fn bad_addresses_are_rejected_with_the_reason() {
        for (raw, reason) in [
            ("\"198.18.1\"", "is not an IPv4 address"),
            ("\"198.18.1.300\"", "is not an IPv4 address"),
            ("\"127.0.0.1\"", "loopback"),
            ("\"0.0.0.0\"", "unspecified"),
            ("\"224.0.0.1\"", "multicast"),
        ] {
            let e = parse_err(&with_interface_field("ipv4", raw));
            assert_eq!(e.field, "interfaces[0].ipv4");
            assert!(e.to_string().contains(reason), "{raw}: {e}");
        }
        let mut v: Value = serde_json::from_str(EXAMPLE).unwrap();
        for (dest, needle) in [
            ("198.18.2.5/24", "did you mean 198.18.2.0/24?"),
            ("198.18.2.0", "a.b.c.d/n"),
            ("198.18.2.0/33", "out of range"),
            ("198.18.2.0/+4", "out of range"),
            ("198.18.2/24", "not an IPv4 address"),
        ] {
            v["routes"][0]["dest"] = dest.into();
            let e = parse_err(&v.to_string());
            assert_eq!(e.field, "routes[0].dest");
            assert!(e.to_string().contains(needle), "{dest}: {e}");
        }
    }

    #[test]
    fn unknown_versions_and_fields_are_refused() {
        let e = parse_err(&EXAMPLE.replace("\"version\":1", "\"version\":2"));
        assert_eq!(e.field, "version");
        assert_eq!(
            e.problem,
            CardProblem::UnknownVersion {
                found: "2".to_string(),
                supported: vec![1]
            }
        );
        let e = parse_err(&EXAMPLE.replace("\"version\":1", "\"version\":\"1\""));
        assert!(matches!(e.problem, CardProblem::WrongType { .. }));

        let e = parse_err(&EXAMPLE.replace("link_speed_mbps", "link_speed_mpbs"));
        assert_eq!(e.field, "interfaces[0].link_speed_mpbs");
        assert!(
            e.to_string().contains("did you mean 'link_speed_mbps'?"),
            "{e}"
        );
        let e = parse_err(&EXAMPLE.replace("\"node\"", "\"hostname\""));
        assert_eq!(e.field, "hostname");
        let e = parse_err(&EXAMPLE.replace("\"metric\"", "\"metrics\""));
        assert_eq!(e.field, "routes[0].metrics");
    }

    #[test]
    fn whole_card_rules() {
        let mut card = two_interface_card();
        card.interfaces[1].name = "eth1".to_string();
        let e = HostCard::from_json_str("x", &card.to_json(JsonLayout::Compact)).unwrap_err();
        assert_eq!(e.field, "interfaces[1].name");
        assert!(e.to_string().contains("appears twice"));

        let mut card = two_interface_card();
        card.routes.as_mut().unwrap()[1].interface = "eth9".to_string();
        let e = HostCard::from_json_str("x", &card.to_json(JsonLayout::Compact)).unwrap_err();
        assert_eq!(e.field, "routes[1].interface");
        assert!(e.to_string().contains("interfaces: eth1, eth2"), "{e}");

        let mut card = two_interface_card();
        card.interfaces[0].name = "a-very-long-interface-name".to_string();
        assert_eq!(card.validate().unwrap_err().field, "interfaces[0].name");
        card.interfaces[0].name = "eth 1".to_string();
        assert_eq!(card.validate().unwrap_err().field, "interfaces[0].name");

        let mut card = two_interface_card();
        let one = card.interfaces[0].clone();
        card.interfaces = (0..17)
            .map(|i| CardInterface {
                name: format!("eth{i}"),
                ..one.clone()
            })
            .collect();
        card.routes = None;
        assert_eq!(card.validate().unwrap_err().field, "interfaces");
    }

    #[test]
    fn a_key_given_twice_is_refused_with_its_position_and_name() {
        let text = EXAMPLE.replacen("\"mtu\"", "\"mtu\": 1500, \"mtu\"", 1);
        assert_ne!(text, EXAMPLE, "the example card has an mtu");
        let e = parse_err(&text);
        match &e.problem {
            CardProblem::Syntax { message, .. } => {
                assert!(message.contains("\"mtu\" appears twice"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        let top = "{\"version\":1,\"version\":1}";
        let shown = parse_err(top).to_string();
        assert!(
            shown.contains("not valid JSON (line 1, column 22: the key \"version\" appears twice"),
            "{shown}"
        );
    }

    #[test]
    fn syntax_errors_give_the_position() {
        let e = parse_err("{\"version\":1,\n\"node\": }");
        assert_eq!(e.field, "");
        match &e.problem {
            CardProblem::Syntax { line, column, .. } => assert_eq!((*line, *column), (2, 9)),
            other => panic!("{other:?}"),
        }
        assert!(
            e.to_string()
                .starts_with("usnic business card 'bad.json': not valid JSON (line 2, column 9"),
            "{e}"
        );
    }

    fn modex_example() -> ModexCard {
        let card = two_interface_card();
        ModexCard::from_host_card(&card, vec![vec![1, 2, 3, 4, 5, 6], vec![0xAB; 64]]).unwrap()
    }

    #[test]
    fn liveness_ports_round_trip_and_every_truncation_is_refused() {
        let m = modex_example().with_probe_ports(vec![40000, 0]).unwrap();
        let bytes = m.encode();
        let back = ModexCard::decode(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.probe_port(0), Some(40000));
        assert_eq!(back.probe_port(1), None);
        assert_eq!(modex_example().probe_port(0), None);
        for len in 0..bytes.len() {
            assert!(ModexCard::decode(&bytes[..len]).is_err(), "{len} bytes");
        }
        assert!(modex_example().with_probe_ports(vec![1]).is_err());
    }

    #[test]
    fn modex_round_trip_and_conversion() {
        let m = modex_example();
        let bytes = m.encode();
        let back = ModexCard::decode(&bytes).unwrap();
        assert_eq!(back, m);
        assert_eq!(back.encode(), bytes);
        assert_eq!(back.to_host_card(), two_interface_card());
        assert_eq!(back.interfaces()[1].fabric_addr, vec![0xAB; 64]);

        let mut no_routes = two_interface_card();
        no_routes.routes = None;
        let m = ModexCard::from_host_card(&no_routes, vec![vec![9], vec![8]]).unwrap();
        let back = ModexCard::decode(&m.encode()).unwrap();
        assert_eq!(back.routes(), None);
        assert_eq!(back.to_host_card(), no_routes);

        let mut empty_routes = two_interface_card();
        empty_routes.routes = Some(vec![]);
        let m = ModexCard::from_host_card(&empty_routes, vec![vec![9], vec![8]]).unwrap();
        assert_eq!(
            ModexCard::decode(&m.encode()).unwrap().routes(),
            Some(&[][..])
        );
    }

    /// The layout of the module docs, byte by byte: the codec writes what version 1 always was.
    #[test]
    fn modex_encoding_is_the_documented_layout() {
        let card = HostCard {
            version: 1,
            node: "h1".to_string(),
            interfaces: vec![CardInterface {
                name: "eth1".to_string(),
                ipv4: Ipv4Addr::new(198, 18, 1, 20),
                prefix_len: 24,
                link_speed_mbps: Some(10000),
                mtu: 1500,
            }],
            routes: Some(vec![CardRoute {
                dest: Ipv4Addr::new(0, 0, 0, 0),
                dest_prefix_len: 0,
                interface: "eth1".to_string(),
                metric: 7,
            }]),
        };
        let m = ModexCard::from_host_card(&card, vec![vec![1, 2, 3]]).unwrap();
        #[rustfmt::skip]
        let expected: Vec<u8> = vec![
            1, 0x01,                        // version, flags (routes present)
            2, b'h', b'1',                  // node
            1,                              // interface count
            4, b'e', b't', b'h', b'1',      // name
            198, 18, 1, 20, 24,             // ipv4, prefix_len
            0, 0, 0x27, 0x10, 0x05, 0xDC,   // 10000 Mb/s, MTU 1500
            3, 1, 2, 3,                     // fabric address
            1,                              // route count
            0, 0, 0, 0, 0, 0, 0, 0, 0, 7,   // 0.0.0.0/0 via interface 0, metric 7
        ];
        assert_eq!(m.encode(), expected);
        assert_eq!(ModexCard::decode(&expected).unwrap(), m);
    }

    #[test]
    fn a_truncation_carries_the_codec_error() {
        let bytes = modex_example().encode();
        let err = ModexCard::decode(&bytes[..7]).unwrap_err();
        let CardDecodeError::Truncated { field, source } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(field, "interfaces[0].name");
        assert_eq!(source.frame, "usnic modex card");
        assert!(std::error::Error::source(&err).is_some());
        assert_eq!(
            err.to_string(),
            "usnic modex card: the bytes end inside field interfaces[0].name (a truncated or corrupt card)"
        );
    }

    #[test]
    fn modex_construction_enforces_the_limits() {
        let card = two_interface_card();
        let e = ModexCard::from_host_card(&card, vec![vec![1], vec![]]).unwrap_err();
        assert_eq!(e.field, "interfaces[1].fabric_addr");
        let e = ModexCard::from_host_card(&card, vec![vec![1], vec![0; 65]]).unwrap_err();
        assert_eq!(e.field, "interfaces[1].fabric_addr");
        let e = ModexCard::from_host_card(&card, vec![vec![1]]).unwrap_err();
        assert_eq!(e.field, "interfaces");
    }

    #[test]
    fn every_strict_prefix_of_an_encoding_is_truncated() {
        let bytes = modex_example().encode();
        for len in 0..bytes.len() {
            match ModexCard::decode(&bytes[..len]) {
                Err(CardDecodeError::Truncated { .. }) => {}
                other => panic!("prefix of {len} bytes: {other:?}"),
            }
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            ModexCard::decode(&longer),
            Err(CardDecodeError::TrailingBytes { count: 1 })
        );
    }

    #[test]
    fn typed_decode_errors() {
        let bytes = modex_example().encode();
        let mut b = bytes.clone();
        b[0] = 2;
        assert!(matches!(
            ModexCard::decode(&b),
            Err(CardDecodeError::UnknownVersion { found: 2, .. })
        ));
        let mut b = bytes.clone();
        b[1] = 0x05;
        assert_eq!(
            ModexCard::decode(&b),
            Err(CardDecodeError::UnknownFlags { flags: 5 })
        );
        // node "h1" is bytes 2..5; the interface count follows.
        let mut b = bytes.clone();
        b[5] = 17;
        assert_eq!(
            ModexCard::decode(&b),
            Err(CardDecodeError::TooManyInterfaces { count: 17, max: 16 })
        );
        let mut b = bytes.clone();
        b[3] = 0xFF;
        assert_eq!(
            ModexCard::decode(&b),
            Err(CardDecodeError::BadUtf8 {
                field: "node".to_string()
            })
        );
        // first interface: name len at 6, "eth1" 7..11, ipv4 11..15, prefix 15, speed 16..20,
        // mtu 20..22, address length 22.
        let mut b = bytes.clone();
        b[15] = 33;
        match ModexCard::decode(&b) {
            Err(CardDecodeError::Invalid(f)) => assert_eq!(f.field, "interfaces[0].prefix_len"),
            other => panic!("{other:?}"),
        }
        let mut b = bytes.clone();
        b[20..22].copy_from_slice(&100u16.to_be_bytes());
        match ModexCard::decode(&b) {
            Err(CardDecodeError::Invalid(f)) => assert_eq!(f.field, "interfaces[0].mtu"),
            other => panic!("{other:?}"),
        }
        let mut b = bytes.clone();
        b[22] = 65;
        assert!(matches!(
            ModexCard::decode(&b),
            Err(CardDecodeError::BadFabricAddrLen { len: 65, .. })
        ));
        // The last route's interface index is the 5th byte from the end.
        let mut b = bytes.clone();
        let at = b.len() - 5;
        b[at] = 2;
        assert!(matches!(
            ModexCard::decode(&b),
            Err(CardDecodeError::BadInterfaceIndex {
                index: 2,
                interfaces: 2,
                ..
            })
        ));
        let mut b = bytes.clone();
        let count_at = b.len() - 2 * 10 - 1;
        assert_eq!(b[count_at], 2);
        b[count_at] = 65;
        assert_eq!(
            ModexCard::decode(&b),
            Err(CardDecodeError::TooManyRoutes { count: 65, max: 64 })
        );
    }

    /// SplitMix64: a tiny seeded generator so the fuzz-style tests are reproducible.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    #[test]
    fn garbage_and_mutations_never_panic_and_decoded_cards_are_canonical() {
        let mut rng = Rng(0x5eed);
        let valid = modex_example().encode();
        for _ in 0..20_000 {
            let len = (rng.next() % 200) as usize;
            let garbage: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
            if let Ok(card) = ModexCard::decode(&garbage) {
                assert_eq!(card.encode(), garbage);
            }
            let mut mutated = valid.clone();
            for _ in 0..1 + rng.next() % 3 {
                let at = (rng.next() as usize) % mutated.len();
                mutated[at] = rng.next() as u8;
            }
            if let Ok(card) = ModexCard::decode(&mutated) {
                assert_eq!(card.encode(), mutated);
            }
        }
    }
}
