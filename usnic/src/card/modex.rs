//! The binary modex card (version 1, specified in the module docs of `card`): compact,
//! canonical, validated on construction and on decoding.
//!
//! This module owns the byte layout and the typed decoding errors. The primitives are those of
//! the project's one codec (`kestrel_transport::codec`: [`Writer`] and the bounded [`Reader`]);
//! the card's text and address fields keep version 1's one-byte length (the codec's `bytes`
//! has a four-byte one), written by `write_short` and read back by `CardReader::text` (the
//! address by its checked length and `CardReader::take`), so the encoding, and the version
//! byte, are unchanged. It must never panic or over-read on bytes from the modex, and never
//! apply a rule of its own beyond the layout's lengths and counts: field values are checked
//! by `rules`.

use std::fmt;
use std::net::Ipv4Addr;

use kestrel_transport::codec::{DecodeError, Reader, Writer};

use super::error::{CardProblem, InvalidField};
use super::rules::check_whole_card;
use super::{
    CardInterface, CardRoute, HostCard, JSON_VERSION, MAX_FABRIC_ADDR_LEN, MAX_INTERFACES,
    MAX_ROUTES, MODEX_VERSION, SUPPORTED_MODEX_VERSIONS,
};

/// Modex flag bit: a routes table follows the interfaces.
const FLAG_ROUTES: u8 = 0x01;
/// Flag bit: one liveness responder port per interface follows the routes.
const FLAG_PROBES: u8 = 0x02;

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
    /// The UDP port of the process's liveness responder on each interface's address
    /// (`kestrel_fabric::liveness`), in interface order; 0 for none.
    probe_ports: Option<Vec<u16>>,
}

/// Why bytes from the modex are not a card. Never a panic: every read is bounds-checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CardDecodeError {
    /// The bytes end inside this field.
    Truncated {
        /// Path of the field being read.
        field: String,
        /// The codec's report of the short read.
        source: DecodeError,
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
            CardDecodeError::Truncated { field, .. } => {
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

impl std::error::Error for CardDecodeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CardDecodeError::Truncated { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// The frame name the codec's errors carry.
const FRAME: &str = "usnic modex card";

/// The codec's [`Reader`] over one card, with the field paths of `CardDecodeError` and a count
/// of the bytes read (the codec's reader does not say how many remain, and `TrailingBytes`
/// reports it).
struct CardReader<'a> {
    r: Reader<'a>,
    len: usize,
    read: usize,
}

impl<'a> CardReader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        CardReader {
            r: Reader::new(bytes, FRAME),
            len: bytes.len(),
            read: 0,
        }
    }

    /// `n` bytes of the field at `field`.
    fn take(&mut self, n: usize, field: &str) -> Result<&'a [u8], CardDecodeError> {
        let bytes = self
            .r
            .take(n, "card field")
            .map_err(|source| truncated(field, source))?;
        self.read += n;
        Ok(bytes)
    }

    fn u8(&mut self, field: &str) -> Result<u8, CardDecodeError> {
        let v = self
            .r
            .u8("card field")
            .map_err(|source| truncated(field, source))?;
        self.read += 1;
        Ok(v)
    }

    fn u16(&mut self, field: &str) -> Result<u16, CardDecodeError> {
        let v = self
            .r
            .u16("card field")
            .map_err(|source| truncated(field, source))?;
        self.read += 2;
        Ok(v)
    }

    fn u32(&mut self, field: &str) -> Result<u32, CardDecodeError> {
        let v = self
            .r
            .u32("card field")
            .map_err(|source| truncated(field, source))?;
        self.read += 4;
        Ok(v)
    }

    fn ipv4(&mut self, field: &str) -> Result<Ipv4Addr, CardDecodeError> {
        let b = self.take(4, field)?;
        Ok(Ipv4Addr::new(b[0], b[1], b[2], b[3]))
    }

    /// A `u8` length, then that many bytes of UTF-8 (the pair of [`write_short`]).
    fn text(&mut self, field: &str) -> Result<String, CardDecodeError> {
        let len = usize::from(self.u8(field)?);
        let bytes = self.take(len, field)?;
        std::str::from_utf8(bytes)
            .map(str::to_string)
            .map_err(|_| CardDecodeError::BadUtf8 {
                field: field.to_string(),
            })
    }

    /// Fails with the number of bytes left unless the whole card was read.
    fn finish(self) -> Result<(), CardDecodeError> {
        let (len, read) = (self.len, self.read);
        self.r
            .finish("card")
            .map_err(|_| CardDecodeError::TrailingBytes { count: len - read })
    }
}

fn truncated(field: &str, source: DecodeError) -> CardDecodeError {
    CardDecodeError::Truncated {
        field: field.to_string(),
        source,
    }
}

/// A `u8` length, then the bytes (card fields are at most 255 bytes; the codec's `bytes` has
/// a `u32` length). Read back by [`CardReader::text`], or a checked length and
/// [`CardReader::take`].
fn write_short(w: &mut Writer, bytes: &[u8]) {
    debug_assert!(bytes.len() <= usize::from(u8::MAX));
    w.u8(bytes.len() as u8).raw(bytes);
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
            probe_ports: None,
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

    /// The card with the ports of this process's liveness responders, one per interface in
    /// order (0: none on that interface).
    pub fn with_probe_ports(mut self, ports: Vec<u16>) -> Result<ModexCard, InvalidField> {
        if ports.len() != self.interfaces.len() {
            return Err(InvalidField::new(
                "probe_ports",
                CardProblem::OutOfRange {
                    value: format!("({} ports)", ports.len()),
                    allowed: "one liveness port per interface",
                },
            ));
        }
        self.probe_ports = Some(ports);
        Ok(self)
    }

    /// Every interface's liveness port (0: none), when the card carries them.
    pub fn probe_ports(&self) -> Option<&[u16]> {
        self.probe_ports.as_deref()
    }

    /// The liveness responder's port on interface `i`, if the process runs one there.
    pub fn probe_port(&self, i: usize) -> Option<u16> {
        self.probe_ports
            .as_ref()
            .and_then(|p| p.get(i).copied())
            .filter(|&p| p != 0)
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
        let mut w = Writer::new();
        let mut flags = 0;
        if self.routes.is_some() {
            flags |= FLAG_ROUTES;
        }
        if self.probe_ports.is_some() {
            flags |= FLAG_PROBES;
        }
        w.u8(self.version).u8(flags);
        write_short(&mut w, self.node.as_bytes());
        w.u8(self.interfaces.len() as u8);
        for itf in &self.interfaces {
            let i = &itf.interface;
            write_short(&mut w, i.name.as_bytes());
            w.raw(&i.ipv4.octets())
                .u8(i.prefix_len)
                .u32(i.link_speed_mbps.unwrap_or(0))
                .u16(i.mtu as u16);
            write_short(&mut w, &itf.fabric_addr);
        }
        if let Some(routes) = &self.routes {
            w.u8(routes.len() as u8);
            for r in routes {
                let index = self
                    .interfaces
                    .iter()
                    .position(|i| i.interface.name == r.interface)
                    .unwrap_or(0);
                w.raw(&r.dest.octets())
                    .u8(r.dest_prefix_len)
                    .u8(index as u8)
                    .u32(r.metric);
            }
        }
        if let Some(ports) = &self.probe_ports {
            for &p in ports {
                w.u16(p);
            }
        }
        w.into_vec()
    }

    /// Decodes and validates a card from the modex; rejects truncated, oversized, trailing and
    /// out-of-range data with a typed error.
    pub fn decode(bytes: &[u8]) -> Result<ModexCard, CardDecodeError> {
        let mut r = CardReader::new(bytes);
        let version = r.u8("version")?;
        if !SUPPORTED_MODEX_VERSIONS.contains(&version) {
            return Err(CardDecodeError::UnknownVersion {
                found: version,
                supported: SUPPORTED_MODEX_VERSIONS,
            });
        }
        let flags = r.u8("flags")?;
        if flags & !(FLAG_ROUTES | FLAG_PROBES) != 0 {
            return Err(CardDecodeError::UnknownFlags { flags });
        }
        let node = r.text("node")?;
        let count = usize::from(r.u8("interfaces")?);
        if count > MAX_INTERFACES {
            return Err(CardDecodeError::TooManyInterfaces {
                count,
                max: MAX_INTERFACES,
            });
        }
        let mut interfaces = Vec::with_capacity(count);
        for i in 0..count {
            let at = |field: &str| format!("interfaces[{i}].{field}");
            let name = r.text(&at("name"))?;
            let ipv4 = r.ipv4(&at("ipv4"))?;
            let prefix_len = r.u8(&at("prefix_len"))?;
            let speed = r.u32(&at("link_speed_mbps"))?;
            let mtu = r.u16(&at("mtu"))?;
            // The length is checked before the bytes are taken: a bad one is reported as such,
            // not as the truncation it may also cause.
            let addr_len = usize::from(r.u8(&at("fabric_addr"))?);
            if addr_len == 0 || addr_len > MAX_FABRIC_ADDR_LEN {
                return Err(CardDecodeError::BadFabricAddrLen {
                    field: at("fabric_addr"),
                    len: addr_len,
                });
            }
            let fabric_addr = r.take(addr_len, &at("fabric_addr"))?;
            interfaces.push(ModexInterface {
                interface: CardInterface {
                    name,
                    ipv4,
                    prefix_len,
                    link_speed_mbps: (speed != 0).then_some(speed),
                    mtu: u32::from(mtu),
                },
                fabric_addr: fabric_addr.to_vec(),
            });
        }
        let routes = if flags & FLAG_ROUTES != 0 {
            let count = usize::from(r.u8("routes")?);
            if count > MAX_ROUTES {
                return Err(CardDecodeError::TooManyRoutes {
                    count,
                    max: MAX_ROUTES,
                });
            }
            let mut routes = Vec::with_capacity(count);
            for j in 0..count {
                let at = |field: &str| format!("routes[{j}].{field}");
                let dest = r.ipv4(&at("dest"))?;
                let dest_prefix_len = r.u8(&at("dest"))?;
                let index = r.u8(&at("interface"))?;
                let metric = r.u32(&at("metric"))?;
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
        let probe_ports = if flags & FLAG_PROBES != 0 {
            let mut ports = Vec::with_capacity(interfaces.len());
            for i in 0..interfaces.len() {
                ports.push(r.u16(&format!("probe_ports[{i}]"))?);
            }
            Some(ports)
        } else {
            None
        };
        r.finish()?;
        let card = ModexCard::new(node, interfaces, routes).map_err(CardDecodeError::Invalid)?;
        match probe_ports {
            Some(ports) => card
                .with_probe_ports(ports)
                .map_err(CardDecodeError::Invalid),
            None => Ok(card),
        }
    }
}
