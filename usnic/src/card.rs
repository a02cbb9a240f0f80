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
//! u8 version (1) | u8 flags (bit 0: routes table present; other bits must be 0)
//! u8 node_len | node (UTF-8)
//! u8 interface_count (<= 16), then per interface:
//!     u8 name_len | name | [u8; 4] ipv4 | u8 prefix_len | u32 link_speed_mbps (0 = unknown)
//!     | u16 mtu | u8 fabric_addr_len (1..=64) | fabric_addr
//! if flags bit 0: u8 route_count (<= 64), then per route:
//!     [u8; 4] dest | u8 dest_prefix_len | u8 interface index | u32 metric
//! ```
//!
//! The encoding is canonical: a card has exactly one encoding, so a decoded card re-encodes to
//! the same bytes.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value};

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

/// Modex flag bit: a routes table follows the interfaces.
const FLAG_ROUTES: u8 = 0x01;

const TOP_FIELDS: &[&str] = &["version", "node", "interfaces", "routes"];
const INTERFACE_FIELDS: &[&str] = &["name", "ipv4", "prefix_len", "link_speed_mbps", "mtu"];
const ROUTE_FIELDS: &[&str] = &["dest", "interface", "metric"];

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

/// What is wrong with one field of a card.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardProblem {
    /// The file could not be read.
    Unreadable {
        /// The operating system's reason.
        reason: String,
    },
    /// The text is not JSON.
    Syntax {
        /// 1-based line of the error.
        line: usize,
        /// 1-based column of the error.
        column: usize,
        /// The parser's description.
        message: String,
    },
    /// A required field is absent.
    MissingField {
        /// The fields an object at this place must have.
        required: &'static [&'static str],
    },
    /// The field holds the wrong JSON type.
    WrongType {
        /// What the format requires.
        expected: &'static str,
        /// What the card holds.
        found: String,
    },
    /// A number or length outside its admissible range.
    OutOfRange {
        /// The offending value, as written.
        value: String,
        /// The admissible range, as a person would write it.
        allowed: &'static str,
    },
    /// An address that does not parse or cannot be an interface or route address.
    BadAddress {
        /// The offending text.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
    /// The `version` field names a version this build cannot read.
    UnknownVersion {
        /// The version found.
        found: String,
        /// The versions this build reads.
        supported: Vec<u32>,
    },
    /// A field that the format does not have.
    UnknownField {
        /// The fields allowed at this place.
        allowed: &'static [&'static str],
        /// The allowed field closest in spelling, when one is close.
        suggestion: Option<&'static str>,
    },
    /// A name that is malformed, duplicated or refers to nothing.
    BadName {
        /// The offending name.
        value: String,
        /// Why it is rejected.
        reason: String,
    },
}

impl fmt::Display for CardProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CardProblem::Unreadable { reason } => write!(f, "cannot read the file: {reason}"),
            CardProblem::Syntax {
                line,
                column,
                message,
            } => write!(
                f,
                "not valid JSON (line {line}, column {column}: {message})"
            ),
            CardProblem::MissingField { required } => {
                write!(f, "missing (required here: {})", required.join(", "))
            }
            CardProblem::WrongType { expected, found } => {
                write!(f, "must be {expected}, found {found}")
            }
            CardProblem::OutOfRange { value, allowed } => {
                write!(f, "{value} is out of range (allowed: {allowed})")
            }
            CardProblem::BadAddress { value, reason } => write!(f, "'{value}' {reason}"),
            CardProblem::UnknownVersion { found, supported } => {
                let list: Vec<String> = supported.iter().map(u32::to_string).collect();
                write!(
                    f,
                    "{found} is not a supported card version (this build reads version \
                     {}); write the card in that format",
                    list.join(", ")
                )
            }
            CardProblem::UnknownField {
                allowed,
                suggestion,
            } => {
                write!(f, "not a field of the card format")?;
                if let Some(s) = suggestion {
                    write!(f, "; did you mean '{s}'?")?;
                }
                write!(f, " (fields allowed here: {})", allowed.join(", "))
            }
            CardProblem::BadName { value, reason } => write!(f, "'{value}' {reason}"),
        }
    }
}

/// A field of a card that fails validation, located by its path (`interfaces[1].prefix_len`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidField {
    /// Path of the field, as in the JSON card; empty for the card as a whole.
    pub field: String,
    /// What is wrong with it.
    pub problem: CardProblem,
}

impl InvalidField {
    fn new(field: impl Into<String>, problem: CardProblem) -> Self {
        InvalidField {
            field: field.into(),
            problem,
        }
    }
}

impl fmt::Display for InvalidField {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.field.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "field {}: {}", self.field, self.problem)
        }
    }
}

/// A JSON card that cannot be used: which file, which field, what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CardError {
    /// Where the card came from (a file name given by the caller).
    pub source: String,
    /// Path of the offending field; empty when the problem concerns the whole text.
    pub field: String,
    /// What is wrong.
    pub problem: CardProblem,
}

impl CardError {
    fn at(source: &str, invalid: InvalidField) -> Self {
        CardError {
            source: source.to_string(),
            field: invalid.field,
            problem: invalid.problem,
        }
    }
}

impl fmt::Display for CardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usnic business card '{}': ", self.source)?;
        if self.field.is_empty() {
            write!(f, "{}", self.problem)
        } else {
            write!(f, "field {}: {}", self.field, self.problem)
        }
    }
}

impl std::error::Error for CardError {}

// ---------------------------------------------------------------------------------------------
// Field rules shared by the JSON parser, `HostCard::validate` and the modex decoder.

fn check_node(node: &str) -> Result<(), CardProblem> {
    if node.is_empty() || node.len() > MAX_NODE_LEN {
        return Err(CardProblem::OutOfRange {
            value: format!("(a name of {} bytes)", node.len()),
            allowed: "1 to 255 bytes",
        });
    }
    if node.chars().any(char::is_control) {
        return Err(CardProblem::BadName {
            value: node.escape_default().to_string(),
            reason: "contains control characters".to_string(),
        });
    }
    Ok(())
}

fn check_interface_name(name: &str) -> Result<(), CardProblem> {
    if name.is_empty() || name.len() > MAX_INTERFACE_NAME_LEN {
        return Err(CardProblem::BadName {
            value: name.escape_default().to_string(),
            reason: format!(
                "is {} bytes long; an interface name has 1 to {MAX_INTERFACE_NAME_LEN}",
                name.len()
            ),
        });
    }
    if !name.bytes().all(|b| b.is_ascii_graphic() && b != b'/') {
        return Err(CardProblem::BadName {
            value: name.escape_default().to_string(),
            reason: "is not an interface name (printable ASCII without spaces or '/')".to_string(),
        });
    }
    Ok(())
}

fn check_interface_addr(addr: Ipv4Addr) -> Result<(), CardProblem> {
    let reason = if addr.is_unspecified() {
        "is the unspecified address"
    } else if addr.is_loopback() {
        "is a loopback address (the usnic transport never uses loopback)"
    } else if addr.is_multicast() {
        "is a multicast address"
    } else if addr.is_broadcast() {
        "is the broadcast address"
    } else {
        return Ok(());
    };
    Err(CardProblem::BadAddress {
        value: addr.to_string(),
        reason: format!("{reason}; an interface needs a unicast address"),
    })
}

fn check_interface_prefix(prefix_len: u64) -> Result<u8, CardProblem> {
    match prefix_len {
        1..=32 => Ok(prefix_len as u8),
        _ => Err(CardProblem::OutOfRange {
            value: prefix_len.to_string(),
            allowed: "1..=32",
        }),
    }
}

fn check_link_speed(mbps: u64) -> Result<u32, CardProblem> {
    match u32::try_from(mbps) {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(CardProblem::OutOfRange {
            value: mbps.to_string(),
            allowed: "1..=4294967295 Mb/s, or null when the speed is unknown",
        }),
    }
}

fn check_mtu(mtu: u64) -> Result<u32, CardProblem> {
    if (MIN_MTU as u64..=MAX_MTU as u64).contains(&mtu) {
        Ok(mtu as u32)
    } else {
        Err(CardProblem::OutOfRange {
            value: mtu.to_string(),
            allowed: "576..=65535 bytes",
        })
    }
}

fn check_route_dest(dest: Ipv4Addr, prefix_len: u8) -> Result<(), CardProblem> {
    if prefix_len > 32 {
        return Err(CardProblem::OutOfRange {
            value: prefix_len.to_string(),
            allowed: "0..=32 (the prefix after '/')",
        });
    }
    let network = network_of(dest, prefix_len);
    if network != dest {
        return Err(CardProblem::BadAddress {
            value: format!("{dest}/{prefix_len}"),
            reason: format!("has host bits set; did you mean {network}/{prefix_len}?"),
        });
    }
    Ok(())
}

/// The network address of `addr` under a `prefix_len`-bit mask (prefixes above 32 count as 32).
pub fn network_of(addr: Ipv4Addr, prefix_len: u8) -> Ipv4Addr {
    Ipv4Addr::from(u32::from(addr) & prefix_mask(prefix_len))
}

/// The netmask of a prefix length as an integer (prefixes above 32 count as 32).
pub fn prefix_mask(prefix_len: u8) -> u32 {
    match prefix_len {
        0 => 0,
        p => u32::MAX << (32 - u32::from(p.min(32))),
    }
}

/// Rules about the card as a whole: counts, unique names, routes naming existing interfaces.
fn check_whole_card(
    node: &str,
    interfaces: &[CardInterface],
    routes: Option<&[CardRoute]>,
) -> Result<(), InvalidField> {
    check_node(node).map_err(|p| InvalidField::new("node", p))?;
    if interfaces.len() > MAX_INTERFACES {
        return Err(InvalidField::new(
            "interfaces",
            CardProblem::OutOfRange {
                value: format!("(a list of {} interfaces)", interfaces.len()),
                allowed: "at most 16 interfaces",
            },
        ));
    }
    let mut seen = BTreeSet::new();
    for (i, itf) in interfaces.iter().enumerate() {
        let at = |field: &str| format!("interfaces[{i}].{field}");
        check_interface_name(&itf.name).map_err(|p| InvalidField::new(at("name"), p))?;
        if !seen.insert(itf.name.as_str()) {
            return Err(InvalidField::new(
                at("name"),
                CardProblem::BadName {
                    value: itf.name.clone(),
                    reason: "appears twice; interface names must be unique".to_string(),
                },
            ));
        }
        check_interface_addr(itf.ipv4).map_err(|p| InvalidField::new(at("ipv4"), p))?;
        check_interface_prefix(u64::from(itf.prefix_len))
            .map_err(|p| InvalidField::new(at("prefix_len"), p))?;
        if let Some(speed) = itf.link_speed_mbps {
            check_link_speed(u64::from(speed))
                .map_err(|p| InvalidField::new(at("link_speed_mbps"), p))?;
        }
        check_mtu(u64::from(itf.mtu)).map_err(|p| InvalidField::new(at("mtu"), p))?;
    }
    let Some(routes) = routes else {
        return Ok(());
    };
    if routes.len() > MAX_ROUTES {
        return Err(InvalidField::new(
            "routes",
            CardProblem::OutOfRange {
                value: format!("(a list of {} routes)", routes.len()),
                allowed: "at most 64 routes",
            },
        ));
    }
    for (j, route) in routes.iter().enumerate() {
        check_route_dest(route.dest, route.dest_prefix_len)
            .map_err(|p| InvalidField::new(format!("routes[{j}].dest"), p))?;
        if !seen.contains(route.interface.as_str()) {
            let names: Vec<&str> = interfaces.iter().map(|i| i.name.as_str()).collect();
            return Err(InvalidField::new(
                format!("routes[{j}].interface"),
                CardProblem::BadName {
                    value: route.interface.clone(),
                    reason: format!(
                        "is not an interface of this card (interfaces: {})",
                        if names.is_empty() {
                            "none".to_string()
                        } else {
                            names.join(", ")
                        }
                    ),
                },
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// JSON

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

    /// Parses and validates a JSON card; `source` names it in errors (usually the file name).
    pub fn from_json_str(source: &str, text: &str) -> Result<HostCard, CardError> {
        let value: Value = serde_json::from_str(text).map_err(|e| CardError {
            source: source.to_string(),
            field: String::new(),
            problem: CardProblem::Syntax {
                line: e.line(),
                column: e.column(),
                message: strip_position(&e.to_string()),
            },
        })?;
        HostCard::from_json_value(source, &value)
    }

    /// Reads, parses and validates a JSON card file; errors name the file as given.
    pub fn from_file(path: &std::path::Path) -> Result<HostCard, CardError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| CardError {
            source: source.clone(),
            field: String::new(),
            problem: CardProblem::Unreadable {
                reason: e.to_string(),
            },
        })?;
        HostCard::from_json_str(&source, &text)
    }

    /// Validates an already-parsed JSON value as a card.
    pub fn from_json_value(source: &str, value: &Value) -> Result<HostCard, CardError> {
        parse_card(value).map_err(|e| CardError::at(source, e))
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

    /// The card as JSON text in the documented field order.
    pub fn to_json(&self, layout: JsonLayout) -> String {
        let json = JsonCard {
            version: self.version,
            node: &self.node,
            interfaces: self
                .interfaces
                .iter()
                .map(|i| JsonInterface {
                    name: &i.name,
                    ipv4: i.ipv4.to_string(),
                    prefix_len: i.prefix_len,
                    link_speed_mbps: i.link_speed_mbps,
                    mtu: i.mtu,
                })
                .collect(),
            routes: self.routes.as_ref().map(|routes| {
                routes
                    .iter()
                    .map(|r| JsonRoute {
                        dest: format!("{}/{}", r.dest, r.dest_prefix_len),
                        interface: &r.interface,
                        metric: r.metric,
                    })
                    .collect()
            }),
        };
        // Serialising plain structs of strings and integers into a String cannot fail.
        let text = match layout {
            JsonLayout::Pretty => serde_json::to_string_pretty(&json),
            JsonLayout::Compact => serde_json::to_string(&json),
        };
        text.unwrap_or_default()
    }

    /// The index of the interface with this name.
    pub fn interface_index(&self, name: &str) -> Option<usize> {
        self.interfaces.iter().position(|i| i.name == name)
    }
}

#[derive(Serialize)]
struct JsonCard<'a> {
    version: u32,
    node: &'a str,
    interfaces: Vec<JsonInterface<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    routes: Option<Vec<JsonRoute<'a>>>,
}

#[derive(Serialize)]
struct JsonInterface<'a> {
    name: &'a str,
    ipv4: String,
    prefix_len: u8,
    link_speed_mbps: Option<u32>,
    mtu: u32,
}

#[derive(Serialize)]
struct JsonRoute<'a> {
    dest: String,
    interface: &'a str,
    metric: u32,
}

/// serde_json appends " at line L column C" to its messages; the card error reports the
/// position in its own words.
fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(cut) => message[..cut].to_string(),
        None => message.to_string(),
    }
}

fn json_type_name(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("the boolean {b}"),
        Value::Number(n) => format!("the number {n}"),
        Value::String(s) => format!("the string \"{}\"", s.escape_default()),
        Value::Array(_) => "an array".to_string(),
        Value::Object(_) => "an object".to_string(),
    }
}

fn as_object<'v>(v: &'v Value, path: &str) -> Result<&'v Map<String, Value>, InvalidField> {
    v.as_object().ok_or_else(|| {
        InvalidField::new(
            path,
            CardProblem::WrongType {
                expected: "an object",
                found: json_type_name(v),
            },
        )
    })
}

fn join(path: &str, field: &str) -> String {
    if path.is_empty() {
        field.to_string()
    } else {
        format!("{path}.{field}")
    }
}

fn required<'v>(
    obj: &'v Map<String, Value>,
    path: &str,
    field: &str,
    all: &'static [&'static str],
) -> Result<&'v Value, InvalidField> {
    obj.get(field).ok_or_else(|| {
        InvalidField::new(
            join(path, field),
            CardProblem::MissingField { required: all },
        )
    })
}

fn reject_unknown_fields(
    obj: &Map<String, Value>,
    path: &str,
    allowed: &'static [&'static str],
) -> Result<(), InvalidField> {
    for key in obj.keys() {
        if !allowed.contains(&key.as_str()) {
            let suggestion = allowed
                .iter()
                .copied()
                .map(|a| (edit_distance(a, key), a))
                .filter(|(d, _)| *d <= 2)
                .min()
                .map(|(_, a)| a);
            return Err(InvalidField::new(
                join(path, key),
                CardProblem::UnknownField {
                    allowed,
                    suggestion,
                },
            ));
        }
    }
    Ok(())
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            let substitution = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitution.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

fn as_str<'v>(v: &'v Value, path: &str) -> Result<&'v str, InvalidField> {
    v.as_str().ok_or_else(|| {
        InvalidField::new(
            path,
            CardProblem::WrongType {
                expected: "a string",
                found: json_type_name(v),
            },
        )
    })
}

/// A non-negative integer; negative integers are range errors, anything else a type error.
fn as_uint(v: &Value, path: &str, allowed: &'static str) -> Result<u64, InvalidField> {
    if let Some(n) = v.as_u64() {
        return Ok(n);
    }
    if v.as_i64().is_some() {
        return Err(InvalidField::new(
            path,
            CardProblem::OutOfRange {
                value: v.to_string(),
                allowed,
            },
        ));
    }
    Err(InvalidField::new(
        path,
        CardProblem::WrongType {
            expected: "an integer",
            found: json_type_name(v),
        },
    ))
}

fn as_array<'v>(v: &'v Value, path: &str, hint: &'static str) -> Result<&'v [Value], InvalidField> {
    v.as_array().map(Vec::as_slice).ok_or_else(|| {
        InvalidField::new(
            path,
            CardProblem::WrongType {
                expected: hint,
                found: json_type_name(v),
            },
        )
    })
}

fn parse_ipv4(text: &str, path: &str) -> Result<Ipv4Addr, InvalidField> {
    Ipv4Addr::from_str(text).map_err(|_| {
        InvalidField::new(
            path,
            CardProblem::BadAddress {
                value: text.escape_default().to_string(),
                reason: "is not an IPv4 address (expected a dotted quad such as 198.18.1.10)"
                    .to_string(),
            },
        )
    })
}

fn parse_card(value: &Value) -> Result<HostCard, InvalidField> {
    let top = as_object(value, "")?;
    // The version decides which fields exist, so it is checked before anything else.
    let version_value = required(top, "", "version", TOP_FIELDS)?;
    let version = match version_value.as_u64() {
        Some(v) if SUPPORTED_JSON_VERSIONS.iter().any(|s| u64::from(*s) == v) => v as u32,
        _ if version_value.is_number() => {
            return Err(InvalidField::new(
                "version",
                CardProblem::UnknownVersion {
                    found: version_value.to_string(),
                    supported: SUPPORTED_JSON_VERSIONS.to_vec(),
                },
            ))
        }
        _ => {
            return Err(InvalidField::new(
                "version",
                CardProblem::WrongType {
                    expected: "an integer",
                    found: json_type_name(version_value),
                },
            ))
        }
    };
    reject_unknown_fields(top, "", TOP_FIELDS)?;

    let node = as_str(required(top, "", "node", TOP_FIELDS)?, "node")?;
    check_node(node).map_err(|p| InvalidField::new("node", p))?;

    let list = as_array(
        required(top, "", "interfaces", TOP_FIELDS)?,
        "interfaces",
        "an array of interfaces",
    )?;
    let mut interfaces = Vec::with_capacity(list.len().min(MAX_INTERFACES));
    for (i, item) in list.iter().enumerate() {
        interfaces.push(parse_interface(item, &format!("interfaces[{i}]"))?);
    }

    let routes = match top.get("routes") {
        None => None,
        Some(v) => {
            let list = as_array(
                v,
                "routes",
                "an array of routes (omit the field for on-link subnets only)",
            )?;
            let mut routes = Vec::with_capacity(list.len().min(MAX_ROUTES));
            for (j, item) in list.iter().enumerate() {
                routes.push(parse_route(item, &format!("routes[{j}]"))?);
            }
            Some(routes)
        }
    };

    check_whole_card(node, &interfaces, routes.as_deref())?;
    Ok(HostCard {
        version,
        node: node.to_string(),
        interfaces,
        routes,
    })
}

fn parse_interface(value: &Value, path: &str) -> Result<CardInterface, InvalidField> {
    let obj = as_object(value, path)?;
    reject_unknown_fields(obj, path, INTERFACE_FIELDS)?;
    let field = |name: &str| required(obj, path, name, INTERFACE_FIELDS);

    let name_path = join(path, "name");
    let name = as_str(field("name")?, &name_path)?;
    check_interface_name(name).map_err(|p| InvalidField::new(&name_path, p))?;

    let ipv4_path = join(path, "ipv4");
    let ipv4 = parse_ipv4(as_str(field("ipv4")?, &ipv4_path)?, &ipv4_path)?;
    check_interface_addr(ipv4).map_err(|p| InvalidField::new(&ipv4_path, p))?;

    let prefix_path = join(path, "prefix_len");
    let prefix_len = check_interface_prefix(as_uint(field("prefix_len")?, &prefix_path, "1..=32")?)
        .map_err(|p| InvalidField::new(&prefix_path, p))?;

    let speed_path = join(path, "link_speed_mbps");
    let speed_value = field("link_speed_mbps")?;
    let link_speed_mbps = if speed_value.is_null() {
        None
    } else {
        let raw = as_uint(
            speed_value,
            &speed_path,
            "1..=4294967295 Mb/s, or null when the speed is unknown",
        )?;
        Some(check_link_speed(raw).map_err(|p| InvalidField::new(&speed_path, p))?)
    };

    let mtu_path = join(path, "mtu");
    let mtu = check_mtu(as_uint(field("mtu")?, &mtu_path, "576..=65535 bytes")?)
        .map_err(|p| InvalidField::new(&mtu_path, p))?;

    Ok(CardInterface {
        name: name.to_string(),
        ipv4,
        prefix_len,
        link_speed_mbps,
        mtu,
    })
}

fn parse_route(value: &Value, path: &str) -> Result<CardRoute, InvalidField> {
    let obj = as_object(value, path)?;
    reject_unknown_fields(obj, path, ROUTE_FIELDS)?;
    let field = |name: &str| required(obj, path, name, ROUTE_FIELDS);

    let dest_path = join(path, "dest");
    let dest_text = as_str(field("dest")?, &dest_path)?;
    let Some((addr_text, prefix_text)) = dest_text.split_once('/') else {
        return Err(InvalidField::new(
            &dest_path,
            CardProblem::BadAddress {
                value: dest_text.escape_default().to_string(),
                reason: "is not a network in a.b.c.d/n form (for example 198.18.2.0/24, or \
                         0.0.0.0/0 for a default route)"
                    .to_string(),
            },
        ));
    };
    let dest = parse_ipv4(addr_text, &dest_path)?;
    let dest_prefix_len = match prefix_text.parse::<u8>() {
        Ok(p) if p <= 32 && !prefix_text.starts_with('+') => p,
        _ => {
            return Err(InvalidField::new(
                &dest_path,
                CardProblem::OutOfRange {
                    value: prefix_text.escape_default().to_string(),
                    allowed: "0..=32 (the prefix after '/')",
                },
            ))
        }
    };
    check_route_dest(dest, dest_prefix_len).map_err(|p| InvalidField::new(&dest_path, p))?;

    let interface_path = join(path, "interface");
    let interface = as_str(field("interface")?, &interface_path)?;

    let metric_path = join(path, "metric");
    let raw_metric = as_uint(field("metric")?, &metric_path, "0..=4294967295")?;
    let metric = u32::try_from(raw_metric).map_err(|_| {
        InvalidField::new(
            &metric_path,
            CardProblem::OutOfRange {
                value: raw_metric.to_string(),
                allowed: "0..=4294967295",
            },
        )
    })?;

    Ok(CardRoute {
        dest,
        dest_prefix_len,
        interface: interface.to_string(),
        metric,
    })
}

// ---------------------------------------------------------------------------------------------
// Binary modex card

/// One interface of a modex card: the JSON card's fields plus the libfabric endpoint address.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModexInterface {
    /// Name, address, prefix, speed and MTU, as in the JSON card.
    pub interface: CardInterface,
    /// The libfabric endpoint address (opaque bytes, 1 to [`MAX_FABRIC_ADDR_LEN`]).
    pub fabric_addr: Vec<u8>,
}

/// The card a rank publishes through PMI: compact, versioned, validated on construction and
/// on decoding (fields are private so that an invalid card cannot be encoded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModexCard {
    version: u8,
    node: String,
    interfaces: Vec<ModexInterface>,
    routes: Option<Vec<CardRoute>>,
}

/// Why bytes from the modex are not a card. Never a panic: every read is bounds-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardDecodeError {
    /// The bytes end inside this field.
    Truncated {
        /// Path of the field being read.
        field: String,
    },
    /// The first byte names a version this build cannot read.
    UnknownVersion {
        /// The version byte.
        found: u8,
        /// The versions this build reads.
        supported: &'static [u8],
    },
    /// Flag bits this version does not define are set.
    UnknownFlags {
        /// The flags byte.
        flags: u8,
    },
    /// More interfaces than a card may carry.
    TooManyInterfaces {
        /// The count in the card.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// More routes than a card may carry.
    TooManyRoutes {
        /// The count in the card.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// A libfabric address length outside 1..=64.
    BadFabricAddrLen {
        /// Path of the field.
        field: String,
        /// The length in the card.
        len: usize,
    },
    /// A text field that is not UTF-8.
    BadUtf8 {
        /// Path of the field.
        field: String,
    },
    /// A route names an interface index the card does not have.
    BadInterfaceIndex {
        /// Path of the field.
        field: String,
        /// The index in the card.
        index: u8,
        /// How many interfaces the card has.
        interfaces: usize,
    },
    /// A field decodes but breaks a rule of the card format.
    Invalid(InvalidField),
    /// Bytes remain after the last field.
    TrailingBytes {
        /// How many.
        count: usize,
    },
}

impl fmt::Display for CardDecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usnic modex card: ")?;
        match self {
            CardDecodeError::Truncated { field } => {
                write!(
                    f,
                    "the bytes end inside field {field} (a truncated or corrupt card)"
                )
            }
            CardDecodeError::UnknownVersion { found, supported } => write!(
                f,
                "version {found} is not supported (this build reads {supported:?}); all ranks \
                 of a job must run the same Kestrel release"
            ),
            CardDecodeError::UnknownFlags { flags } => write!(
                f,
                "flags byte {flags:#04x} has bits this version does not define \
                 (a corrupt card or a newer release)"
            ),
            CardDecodeError::TooManyInterfaces { count, max } => {
                write!(
                    f,
                    "{count} interfaces, more than the {max} a card may carry"
                )
            }
            CardDecodeError::TooManyRoutes { count, max } => {
                write!(f, "{count} routes, more than the {max} a card may carry")
            }
            CardDecodeError::BadFabricAddrLen { field, len } => write!(
                f,
                "field {field} is {len} bytes; a libfabric address has 1 to {MAX_FABRIC_ADDR_LEN}"
            ),
            CardDecodeError::BadUtf8 { field } => write!(f, "field {field} is not UTF-8"),
            CardDecodeError::BadInterfaceIndex {
                field,
                index,
                interfaces,
            } => write!(
                f,
                "field {field} names interface {index}, but the card has {interfaces}"
            ),
            CardDecodeError::Invalid(invalid) => write!(f, "{invalid}"),
            CardDecodeError::TrailingBytes { count } => {
                write!(f, "{count} bytes follow the last field (a corrupt card)")
            }
        }
    }
}

impl std::error::Error for CardDecodeError {}

/// A cursor over untrusted bytes that cannot read past the end: every read returns `None`
/// instead of over-reading, and the caller turns that into `Truncated` with the field's path.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, len: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(len)?;
        self.rest = tail;
        Some(head)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        self.take(N)?.try_into().ok()
    }

    fn u8(&mut self) -> Option<u8> {
        self.array::<1>().map(|[b]| b)
    }

    fn u16(&mut self) -> Option<u16> {
        self.array().map(u16::from_be_bytes)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_be_bytes)
    }
}

fn truncated(field: impl Into<String>) -> CardDecodeError {
    CardDecodeError::Truncated {
        field: field.into(),
    }
}

impl ModexCard {
    /// Builds a card, applying every rule of the format (see the module docs).
    pub fn new(
        node: String,
        interfaces: Vec<ModexInterface>,
        routes: Option<Vec<CardRoute>>,
    ) -> Result<ModexCard, InvalidField> {
        for (i, itf) in interfaces.iter().enumerate() {
            let len = itf.fabric_addr.len();
            if len == 0 || len > MAX_FABRIC_ADDR_LEN {
                return Err(InvalidField::new(
                    format!("interfaces[{i}].fabric_addr"),
                    CardProblem::OutOfRange {
                        value: format!("(an address of {len} bytes)"),
                        allowed: "1 to 64 bytes",
                    },
                ));
            }
        }
        let plain: Vec<CardInterface> = interfaces.iter().map(|i| i.interface.clone()).collect();
        check_whole_card(&node, &plain, routes.as_deref())?;
        Ok(ModexCard {
            version: MODEX_VERSION,
            node,
            interfaces,
            routes,
        })
    }

    /// A modex card for a JSON card plus one libfabric address per interface, in order.
    pub fn from_host_card(
        card: &HostCard,
        fabric_addrs: Vec<Vec<u8>>,
    ) -> Result<ModexCard, InvalidField> {
        if fabric_addrs.len() != card.interfaces.len() {
            return Err(InvalidField::new(
                "interfaces",
                CardProblem::OutOfRange {
                    value: format!("({} libfabric addresses)", fabric_addrs.len()),
                    allowed: "one libfabric address per interface",
                },
            ));
        }
        let interfaces = card
            .interfaces
            .iter()
            .cloned()
            .zip(fabric_addrs)
            .map(|(interface, fabric_addr)| ModexInterface {
                interface,
                fabric_addr,
            })
            .collect();
        ModexCard::new(card.node.clone(), interfaces, card.routes.clone())
    }

    /// Format version of the card.
    pub fn version(&self) -> u8 {
        self.version
    }

    /// The node id.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The interfaces with their libfabric addresses.
    pub fn interfaces(&self) -> &[ModexInterface] {
        &self.interfaces
    }

    /// The routing-table excerpt; `None` means on-link subnets only.
    pub fn routes(&self) -> Option<&[CardRoute]> {
        self.routes.as_deref()
    }

    /// The card without libfabric addresses, as the matching and the JSON tools use it.
    pub fn to_host_card(&self) -> HostCard {
        HostCard {
            version: JSON_VERSION,
            node: self.node.clone(),
            interfaces: self
                .interfaces
                .iter()
                .map(|i| i.interface.clone())
                .collect(),
            routes: self.routes.clone(),
        }
    }

    /// The binary encoding (layout in the module docs).
    pub fn encode(&self) -> Vec<u8> {
        // Lengths below fit their prefixes because construction and decoding enforce the limits.
        let mut out = Vec::with_capacity(64 + 48 * self.interfaces.len());
        out.push(self.version);
        out.push(if self.routes.is_some() {
            FLAG_ROUTES
        } else {
            0
        });
        out.push(self.node.len() as u8);
        out.extend_from_slice(self.node.as_bytes());
        out.push(self.interfaces.len() as u8);
        for itf in &self.interfaces {
            let i = &itf.interface;
            out.push(i.name.len() as u8);
            out.extend_from_slice(i.name.as_bytes());
            out.extend_from_slice(&i.ipv4.octets());
            out.push(i.prefix_len);
            out.extend_from_slice(&i.link_speed_mbps.unwrap_or(0).to_be_bytes());
            out.extend_from_slice(&(i.mtu as u16).to_be_bytes());
            out.push(itf.fabric_addr.len() as u8);
            out.extend_from_slice(&itf.fabric_addr);
        }
        if let Some(routes) = &self.routes {
            out.push(routes.len() as u8);
            for r in routes {
                let index = self
                    .interfaces
                    .iter()
                    .position(|i| i.interface.name == r.interface)
                    .unwrap_or(0);
                out.extend_from_slice(&r.dest.octets());
                out.push(r.dest_prefix_len);
                out.push(index as u8);
                out.extend_from_slice(&r.metric.to_be_bytes());
            }
        }
        out
    }

    /// Decodes and validates a card from the modex; rejects truncated, oversized, trailing and
    /// out-of-range data with a typed error.
    pub fn decode(bytes: &[u8]) -> Result<ModexCard, CardDecodeError> {
        let mut r = Reader { rest: bytes };
        let version = r.u8().ok_or_else(|| truncated("version"))?;
        if !SUPPORTED_MODEX_VERSIONS.contains(&version) {
            return Err(CardDecodeError::UnknownVersion {
                found: version,
                supported: SUPPORTED_MODEX_VERSIONS,
            });
        }
        let flags = r.u8().ok_or_else(|| truncated("flags"))?;
        if flags & !FLAG_ROUTES != 0 {
            return Err(CardDecodeError::UnknownFlags { flags });
        }
        let node = read_text(&mut r, "node")?;
        let count = usize::from(r.u8().ok_or_else(|| truncated("interfaces"))?);
        if count > MAX_INTERFACES {
            return Err(CardDecodeError::TooManyInterfaces {
                count,
                max: MAX_INTERFACES,
            });
        }
        let mut interfaces = Vec::with_capacity(count);
        for i in 0..count {
            let at = |field: &str| format!("interfaces[{i}].{field}");
            let name = read_text(&mut r, &at("name"))?;
            let ipv4 = Ipv4Addr::from(r.array::<4>().ok_or_else(|| truncated(at("ipv4")))?);
            let prefix_len = r.u8().ok_or_else(|| truncated(at("prefix_len")))?;
            let speed = r.u32().ok_or_else(|| truncated(at("link_speed_mbps")))?;
            let mtu = r.u16().ok_or_else(|| truncated(at("mtu")))?;
            let addr_len = usize::from(r.u8().ok_or_else(|| truncated(at("fabric_addr")))?);
            if addr_len == 0 || addr_len > MAX_FABRIC_ADDR_LEN {
                return Err(CardDecodeError::BadFabricAddrLen {
                    field: at("fabric_addr"),
                    len: addr_len,
                });
            }
            let fabric_addr = r
                .take(addr_len)
                .ok_or_else(|| truncated(at("fabric_addr")))?
                .to_vec();
            interfaces.push(ModexInterface {
                interface: CardInterface {
                    name,
                    ipv4,
                    prefix_len,
                    link_speed_mbps: (speed != 0).then_some(speed),
                    mtu: u32::from(mtu),
                },
                fabric_addr,
            });
        }
        let routes = if flags & FLAG_ROUTES != 0 {
            let count = usize::from(r.u8().ok_or_else(|| truncated("routes"))?);
            if count > MAX_ROUTES {
                return Err(CardDecodeError::TooManyRoutes {
                    count,
                    max: MAX_ROUTES,
                });
            }
            let mut routes = Vec::with_capacity(count);
            for j in 0..count {
                let at = |field: &str| format!("routes[{j}].{field}");
                let dest = Ipv4Addr::from(r.array::<4>().ok_or_else(|| truncated(at("dest")))?);
                let dest_prefix_len = r.u8().ok_or_else(|| truncated(at("dest")))?;
                let index = r.u8().ok_or_else(|| truncated(at("interface")))?;
                let metric = r.u32().ok_or_else(|| truncated(at("metric")))?;
                let Some(itf) = interfaces.get(usize::from(index)) else {
                    return Err(CardDecodeError::BadInterfaceIndex {
                        field: at("interface"),
                        index,
                        interfaces: interfaces.len(),
                    });
                };
                routes.push(CardRoute {
                    dest,
                    dest_prefix_len,
                    interface: itf.interface.name.clone(),
                    metric,
                });
            }
            Some(routes)
        } else {
            None
        };
        if !r.rest.is_empty() {
            return Err(CardDecodeError::TrailingBytes {
                count: r.rest.len(),
            });
        }
        ModexCard::new(node, interfaces, routes).map_err(CardDecodeError::Invalid)
    }
}

/// A `u8`-length-prefixed UTF-8 field.
fn read_text(r: &mut Reader<'_>, field: &str) -> Result<String, CardDecodeError> {
    let len = usize::from(r.u8().ok_or_else(|| truncated(field))?);
    let bytes = r.take(len).ok_or_else(|| truncated(field))?;
    std::str::from_utf8(bytes)
        .map(str::to_string)
        .map_err(|_| CardDecodeError::BadUtf8 {
            field: field.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

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
        b[1] = 0x03;
        assert_eq!(
            ModexCard::decode(&b),
            Err(CardDecodeError::UnknownFlags { flags: 3 })
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
