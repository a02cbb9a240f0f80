//! The binary modex card (version 1, specified in the module docs of `card`): compact,
//! canonical, validated on construction and on decoding.
//!
//! This module owns the byte layout and the typed decoding errors. It must never panic or
//! over-read on bytes from the modex, and never apply a rule of its own beyond the layout's
//! lengths and counts: field values are checked by `rules`.

use std::fmt;
use std::net::Ipv4Addr;

use super::error::{CardProblem, InvalidField};
use super::rules::check_whole_card;
use super::{
    CardInterface, CardRoute, HostCard, JSON_VERSION, MAX_FABRIC_ADDR_LEN, MAX_INTERFACES,
    MAX_ROUTES, MODEX_VERSION, SUPPORTED_MODEX_VERSIONS,
};

/// Modex flag bit: a routes table follows the interfaces.
const FLAG_ROUTES: u8 = 0x01;

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
