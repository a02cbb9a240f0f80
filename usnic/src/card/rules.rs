//! The field rules every card obeys, whichever encoding it came in: node ids, interface
//! names and addresses, prefixes, speeds, MTUs, routes, and the whole-card rules (unique
//! names, limits, routes through listed interfaces).
//!
//! This module owns the rules; the JSON parser, `HostCard::validate` and the modex decoder all
//! apply them. It must never parse or encode anything.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;

use super::error::{CardProblem, InvalidField};
use super::{
    CardInterface, CardRoute, MAX_INTERFACES, MAX_INTERFACE_NAME_LEN, MAX_MTU, MAX_NODE_LEN,
    MAX_ROUTES, MIN_MTU,
};

pub(super) fn check_node(node: &str) -> Result<(), CardProblem> {
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

pub(super) fn check_interface_name(name: &str) -> Result<(), CardProblem> {
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

pub(super) fn check_interface_addr(addr: Ipv4Addr) -> Result<(), CardProblem> {
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

pub(super) fn check_interface_prefix(prefix_len: u64) -> Result<u8, CardProblem> {
    match prefix_len {
        1..=32 => Ok(prefix_len as u8),
        _ => Err(CardProblem::OutOfRange {
            value: prefix_len.to_string(),
            allowed: "1..=32",
        }),
    }
}

pub(super) fn check_link_speed(mbps: u64) -> Result<u32, CardProblem> {
    match u32::try_from(mbps) {
        Ok(v) if v >= 1 => Ok(v),
        _ => Err(CardProblem::OutOfRange {
            value: mbps.to_string(),
            allowed: "1..=4294967295 Mb/s, or null when the speed is unknown",
        }),
    }
}

pub(super) fn check_mtu(mtu: u64) -> Result<u32, CardProblem> {
    if (MIN_MTU as u64..=MAX_MTU as u64).contains(&mtu) {
        Ok(mtu as u32)
    } else {
        Err(CardProblem::OutOfRange {
            value: mtu.to_string(),
            allowed: "576..=65535 bytes",
        })
    }
}

pub(super) fn check_route_dest(dest: Ipv4Addr, prefix_len: u8) -> Result<(), CardProblem> {
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
pub(super) fn check_whole_card(
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
