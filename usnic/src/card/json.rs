//! The JSON card (version 1, specified in the module docs of `card`): its strict parser, which
//! names the file and the field path of every problem, and its printer in the documented
//! field order.
//!
//! This module owns the JSON syntax. It must never accept a field it does not know (typo
//! protection) nor apply a rule of its own: values are checked by `rules`.

use std::net::Ipv4Addr;
use std::str::FromStr;

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{CardError, CardProblem, InvalidField};
use super::rules::{
    check_interface_addr, check_interface_name, check_interface_prefix, check_link_speed,
    check_mtu, check_node, check_route_dest, check_whole_card,
};
use super::{
    CardInterface, CardRoute, HostCard, JsonLayout, MAX_INTERFACES, MAX_ROUTES,
    SUPPORTED_JSON_VERSIONS,
};

const TOP_FIELDS: &[&str] = &["version", "node", "interfaces", "routes"];
const INTERFACE_FIELDS: &[&str] = &["name", "ipv4", "prefix_len", "link_speed_mbps", "mtu"];
const ROUTE_FIELDS: &[&str] = &["dest", "interface", "metric"];

impl HostCard {
    /// Parses and validates a JSON card; `source` names it in errors (usually the file name).
    pub fn from_json_str(source: &str, text: &str) -> Result<HostCard, CardError> {
        let syntax = |e: serde_json::Error| CardError {
            source: source.to_string(),
            field: String::new(),
            problem: CardProblem::Syntax {
                line: e.line(),
                column: e.column(),
                message: strip_position(&e.to_string()),
            },
        };
        // serde_json would keep the last of duplicate keys silently: refuse them first.
        serde_json::from_str::<super::unique_keys::UniqueKeys>(text).map_err(syntax)?;
        let value: Value = serde_json::from_str(text).map_err(syntax)?;
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
