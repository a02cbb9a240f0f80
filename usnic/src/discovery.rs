//! Which local interfaces the usnic transport may use, and why the others are excluded.
//!
//! This module owns the facts about local IPv4 interfaces (flags and addresses from
//! `getifaddrs`, MTU and link speed from sysfs, the libfabric DGRAM offers from `fi_getinfo`,
//! the IPv4 routing table from `/proc/net/route`) and the policy applied to them (the
//! `usnic_provider`, `usnic_if_include` / `usnic_if_exclude` and `usnic_link_speed`
//! parameters). Gathering is kept apart from deciding: [`classify`] and the parsers are pure
//! functions over those facts, so the verdict on every interface, with its reason, can be
//! tested without a live system and shown by diagnostics tools.
//!
//! It must never open endpoints or send anything: it only looks.

use std::collections::BTreeMap;
use std::fmt;
use std::net::Ipv4Addr;

use kestrel_transport::params::{env_var_for, ParamSpec, Params};
use nix::net::if_::InterfaceFlags;
use serde::Serialize;

use crate::fabric::{self, FabricError, FabricInterface};
use crate::params;

/// How the fabric wrapper names this transport in its errors.
pub const FABRIC_OWNER: fabric::Owner = fabric::Owner {
    component: "usnic",
    provider_variable: "KESTREL_USNIC_PROVIDER",
};

/// Where routes come from.
const ROUTE_TABLE: &str = "/proc/net/route";

/// Interface names are at most `IFNAMSIZ - 1` bytes.
const MAX_IFNAME: usize = 15;

/// An error of the usnic transport's discovery.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UsnicError {
    /// A parameter value (or one entry of a list) does not parse.
    BadParam {
        /// The parameter's spec (its name and variable appear in the message).
        param: &'static str,
        /// The environment variable that sets it.
        var: String,
        /// The whole value.
        value: String,
        /// The offending entry of a list, when the value is one.
        entry: Option<String>,
        /// What is wrong and what is expected.
        reason: String,
    },
    /// Both an include and an exclude list were given.
    ConflictingFilters {
        /// The component whose parameters they are (`usnic`, `ofi`).
        component: &'static str,
        /// The include parameter's name (`usnic_if_include`, `ofi_if_include`).
        include_param: &'static str,
        /// The include list.
        include: String,
        /// The exclude parameter's name.
        exclude_param: &'static str,
        /// The exclude list.
        exclude: String,
    },
    /// The local interface list could not be read.
    Interfaces {
        /// The failure.
        error: String,
    },
    /// The routing table could not be read or parsed.
    Routes {
        /// The file read.
        path: String,
        /// 1-based line, 0 when the file itself failed.
        line: usize,
        /// What is wrong.
        reason: String,
    },
    /// libfabric failed for another reason than "nothing found".
    Fabric(FabricError),
}

impl fmt::Display for UsnicError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsnicError::BadParam {
                param,
                var,
                value,
                entry,
                reason,
            } => {
                write!(f, "usnic: {var}='{value}' (--mca {param}) is not valid")?;
                if let Some(entry) = entry {
                    write!(f, ": entry '{entry}'")?;
                }
                write!(f, ": {reason}")
            }
            UsnicError::ConflictingFilters {
                component,
                include_param,
                include,
                exclude_param,
                exclude,
            } => write!(
                f,
                "{component}: both {}='{include}' and {}='{exclude}' are set (or --mca \
                 {include_param} and {exclude_param}); set only one of them",
                env_var_for(include_param),
                env_var_for(exclude_param)
            ),
            UsnicError::Interfaces { error } => write!(
                f,
                "usnic: cannot list the local network interfaces (getifaddrs: {error}); check \
                 that /proc and /sys are mounted in this namespace or container"
            ),
            UsnicError::Routes { path, line, reason } => {
                if *line == 0 {
                    write!(f, "usnic: cannot read the routing table {path}: {reason}")?;
                } else {
                    write!(f, "usnic: {path} line {line}: {reason}")?;
                }
                write!(
                    f,
                    "; the transport needs it to tell which peers are reachable (mount /proc)"
                )
            }
            UsnicError::Fabric(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for UsnicError {}

impl From<FabricError> for UsnicError {
    fn from(e: FabricError) -> Self {
        UsnicError::Fabric(e)
    }
}

/// `usnic_provider`: which libfabric provider carries the datagrams.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderChoice {
    /// `usnic` where it serves the interface, `udp` elsewhere.
    Auto,
    /// Only `usnic` (Cisco VIC, kernel bypass).
    Usnic,
    /// Only `udp` (kernel UDP sockets).
    Udp,
}

impl ProviderChoice {
    /// Parses the parameter's word.
    pub fn parse(word: &str) -> Option<Self> {
        match word.trim().to_ascii_lowercase().as_str() {
            "auto" => Some(ProviderChoice::Auto),
            "usnic" => Some(ProviderChoice::Usnic),
            "udp" => Some(ProviderChoice::Udp),
            _ => None,
        }
    }

    /// The providers consulted, in order of preference.
    pub fn providers(self) -> &'static [&'static str] {
        match self {
            ProviderChoice::Auto => &["usnic", "udp"],
            ProviderChoice::Usnic => &["usnic"],
            ProviderChoice::Udp => &["udp"],
        }
    }
}

impl fmt::Display for ProviderChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ProviderChoice::Auto => "usnic or udp",
            ProviderChoice::Usnic => "usnic",
            ProviderChoice::Udp => "udp",
        })
    }
}

/// One entry of an include or exclude list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Matcher {
    /// An interface name, matched exactly.
    Name(String),
    /// An IPv4 block; a bare address is a /32.
    Cidr {
        /// The network address (host bits cleared).
        network: Ipv4Addr,
        /// Prefix length, 0..=32.
        prefix_len: u8,
    },
}

impl Matcher {
    /// Whether the interface `name` (with its IPv4 address, if any) is this entry.
    pub fn matches(&self, name: &str, ipv4: Option<Ipv4Addr>) -> bool {
        match self {
            Matcher::Name(n) => n == name,
            Matcher::Cidr {
                network,
                prefix_len,
            } => ipv4.is_some_and(|ip| in_subnet(ip, *network, *prefix_len)),
        }
    }
}

impl fmt::Display for Matcher {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Matcher::Name(n) => f.write_str(n),
            Matcher::Cidr {
                network,
                prefix_len,
            } => write!(f, "{network}/{prefix_len}"),
        }
    }
}

/// The netmask of a prefix length.
pub fn netmask(prefix_len: u8) -> u32 {
    match prefix_len {
        0 => 0,
        n => u32::MAX << (32 - u32::from(n.min(32))),
    }
}

/// True when `ip` lies in `network/prefix_len`.
pub fn in_subnet(ip: Ipv4Addr, network: Ipv4Addr, prefix_len: u8) -> bool {
    let mask = netmask(prefix_len);
    u32::from(ip) & mask == u32::from(network) & mask
}

/// Which interfaces the operator allows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InterfaceFilter {
    /// No list given.
    All,
    /// Only these (`KESTREL_USNIC_IF_INCLUDE`); `raw` is the value as written.
    Include {
        /// The entries.
        entries: Vec<Matcher>,
        /// The parameter value, for messages.
        raw: String,
    },
    /// All but these (`KESTREL_USNIC_IF_EXCLUDE`).
    Exclude {
        /// The entries.
        entries: Vec<Matcher>,
        /// The parameter value, for messages.
        raw: String,
    },
}

/// The operator's choices, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Provider choice.
    pub provider: ProviderChoice,
    /// Include/exclude filter.
    pub filter: InterfaceFilter,
    /// Link speeds in Mb/s by interface name, replacing sysfs.
    pub speed_overrides: BTreeMap<String, u32>,
}

impl Policy {
    /// Reads the usnic parameters from resolved `params`.
    pub fn from_params(params: &Params) -> Result<Policy, UsnicError> {
        Policy::parse(
            &params::PROVIDER.get(params),
            &params::IF_INCLUDE.get(params),
            &params::IF_EXCLUDE.get(params),
            &params::LINK_SPEED.get(params),
        )
    }

    /// Parses the four parameter values.
    pub fn parse(
        provider: &str,
        include: &str,
        exclude: &str,
        link_speed: &str,
    ) -> Result<Policy, UsnicError> {
        let provider = ProviderChoice::parse(provider).ok_or_else(|| {
            bad_param(
                params::PROVIDER.spec(),
                provider,
                None,
                "expected auto, usnic or udp".into(),
            )
        })?;
        let filter = parse_filter(
            params::IF_INCLUDE.spec(),
            include,
            params::IF_EXCLUDE.spec(),
            exclude,
        )?;
        Ok(Policy {
            provider,
            filter,
            speed_overrides: parse_speed_overrides(link_speed)?,
        })
    }
}

/// Parses an include and an exclude list (each a parameter's value, named in errors) into one
/// filter; both non-empty is an error. Shared by every transport with interface filters.
pub fn parse_filter(
    include_spec: &'static ParamSpec,
    include: &str,
    exclude_spec: &'static ParamSpec,
    exclude: &str,
) -> Result<InterfaceFilter, UsnicError> {
    let include_entries = parse_matchers(include_spec, include)?;
    let exclude_entries = parse_matchers(exclude_spec, exclude)?;
    Ok(
        match (include_entries.is_empty(), exclude_entries.is_empty()) {
            (true, true) => InterfaceFilter::All,
            (false, true) => InterfaceFilter::Include {
                entries: include_entries,
                raw: include.trim().to_string(),
            },
            (true, false) => InterfaceFilter::Exclude {
                entries: exclude_entries,
                raw: exclude.trim().to_string(),
            },
            (false, false) => {
                return Err(UsnicError::ConflictingFilters {
                    component: include_spec.component,
                    include_param: include_spec.name,
                    include: include.trim().to_string(),
                    exclude_param: exclude_spec.name,
                    exclude: exclude.trim().to_string(),
                })
            }
        },
    )
}

fn bad_param(
    spec: &'static ParamSpec,
    value: &str,
    entry: Option<&str>,
    reason: String,
) -> UsnicError {
    UsnicError::BadParam {
        param: spec.name,
        var: spec.env_var(),
        value: value.to_string(),
        entry: entry.map(str::to_string),
        reason,
    }
}

fn list_entries(value: &str) -> impl Iterator<Item = &str> {
    value.split(',').map(str::trim).filter(|e| !e.is_empty())
}

fn valid_ifname(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_IFNAME
        && !name
            .chars()
            .any(|c| c.is_whitespace() || c == '/' || c.is_control())
}

/// Parses an include/exclude list: interface names and IPv4 CIDR blocks, comma separated.
pub fn parse_matchers(spec: &'static ParamSpec, value: &str) -> Result<Vec<Matcher>, UsnicError> {
    list_entries(value)
        .map(|entry| {
            if let Some((addr, len)) = entry.split_once('/') {
                let network: Ipv4Addr = addr.trim().parse().map_err(|_| {
                    bad_param(
                        spec,
                        value,
                        Some(entry),
                        format!("'{addr}' is not an IPv4 address (expected a.b.c.d/len)"),
                    )
                })?;
                let prefix_len: u8 =
                    len.trim()
                        .parse()
                        .ok()
                        .filter(|l| *l <= 32)
                        .ok_or_else(|| {
                            bad_param(
                                spec,
                                value,
                                Some(entry),
                                format!("'{len}' is not a prefix length from 0 to 32"),
                            )
                        })?;
                let network = Ipv4Addr::from(u32::from(network) & netmask(prefix_len));
                Ok(Matcher::Cidr {
                    network,
                    prefix_len,
                })
            } else if let Ok(ip) = entry.parse::<Ipv4Addr>() {
                Ok(Matcher::Cidr {
                    network: ip,
                    prefix_len: 32,
                })
            } else if valid_ifname(entry) {
                Ok(Matcher::Name(entry.to_string()))
            } else {
                Err(bad_param(
                    spec,
                    value,
                    Some(entry),
                    format!(
                        "expected an interface name (at most {MAX_IFNAME} characters, no \
                         spaces or '/') or an IPv4 block like 198.18.1.0/24"
                    ),
                ))
            }
        })
        .collect()
}

/// Parses `KESTREL_USNIC_LINK_SPEED`: `name:mbps` entries, comma separated.
pub fn parse_speed_overrides(value: &str) -> Result<BTreeMap<String, u32>, UsnicError> {
    let spec = params::LINK_SPEED.spec();
    let mut out = BTreeMap::new();
    for entry in list_entries(value) {
        let (name, speed) = entry.rsplit_once(':').ok_or_else(|| {
            bad_param(
                spec,
                value,
                Some(entry),
                "expected interface:speed_in_Mbps, like eth1:25000".into(),
            )
        })?;
        let name = name.trim();
        if !valid_ifname(name) {
            return Err(bad_param(
                spec,
                value,
                Some(entry),
                format!("'{name}' is not an interface name"),
            ));
        }
        let mbps: u32 = speed
            .trim()
            .parse()
            .ok()
            .filter(|s| *s > 0)
            .ok_or_else(|| {
                bad_param(
                    spec,
                    value,
                    Some(entry),
                    format!("'{speed}' is not a speed in Mb/s (a whole number above 0)"),
                )
            })?;
        if out.insert(name.to_string(), mbps).is_some() {
            return Err(bad_param(
                spec,
                value,
                Some(entry),
                format!("interface {name} is listed twice"),
            ));
        }
    }
    Ok(out)
}

/// What the system says about one interface, before any policy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RawInterface {
    /// Kernel name.
    pub name: String,
    /// `IFF_UP`: administratively up.
    pub admin_up: bool,
    /// `IFF_RUNNING`: carrier present.
    pub running: bool,
    /// `IFF_LOOPBACK`.
    pub loopback: bool,
    /// The primary IPv4 address and its prefix length.
    pub ipv4: Option<(Ipv4Addr, u8)>,
    /// `/sys/class/net/IF/mtu`.
    pub mtu: Option<u32>,
    /// `/sys/class/net/IF/speed` when it holds a positive number.
    pub sysfs_speed_mbps: Option<u32>,
}

/// A libfabric provider's DGRAM offer on one IPv4 address.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FabricOffer {
    /// Provider name.
    pub provider: String,
    /// libfabric domain name.
    pub domain: String,
    /// The address the offer binds to.
    pub ipv4: Ipv4Addr,
}

/// Where an interface's link speed came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum SpeedSource {
    /// `/sys/class/net/IF/speed`.
    Sysfs,
    /// `KESTREL_USNIC_LINK_SPEED`.
    Override,
    /// Neither: the driver reports none (virtio: -1, loopback: EINVAL) and no override is set.
    Unknown,
}

/// Why an interface is not used.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum ExclusionReason {
    /// A loopback interface: peers on other hosts cannot reach it.
    Loopback,
    /// Not `IFF_UP`, or up without carrier (`IFF_RUNNING` clear).
    Down {
        /// Whether it is administratively up (then the carrier is missing).
        admin_up: bool,
    },
    /// No IPv4 address.
    NoIpv4,
    /// An include list is set and nothing in it matches.
    NotIncluded {
        /// The include list as written.
        include: String,
    },
    /// An exclude-list entry matches.
    Excluded {
        /// The matching entry.
        entry: String,
        /// The exclude list as written.
        exclude: String,
    },
    /// No provider of the choice offers a DGRAM endpoint on the interface's address.
    NoEndpoint {
        /// The provider choice.
        provider: ProviderChoice,
    },
    /// The MTU could not be read.
    MtuUnknown,
}

impl fmt::Display for ExclusionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExclusionReason::Loopback => {
                f.write_str("loopback interface (never used: other hosts cannot reach it)")
            }
            ExclusionReason::Down { admin_up: false } => {
                f.write_str("interface is down (bring it up with `ip link set IF up`)")
            }
            ExclusionReason::Down { admin_up: true } => f.write_str(
                "interface is up but has no carrier (cable, switch port or veth peer down)",
            ),
            ExclusionReason::NoIpv4 => f.write_str("no IPv4 address"),
            ExclusionReason::NotIncluded { include } => {
                write!(f, "not in KESTREL_USNIC_IF_INCLUDE={include}")
            }
            ExclusionReason::Excluded { entry, exclude } => {
                write!(
                    f,
                    "matched KESTREL_USNIC_IF_EXCLUDE={exclude} entry {entry}"
                )
            }
            ExclusionReason::NoEndpoint { provider } => write!(
                f,
                "no libfabric DGRAM endpoint for it with provider {provider} (see \
                 KESTREL_USNIC_PROVIDER)"
            ),
            ExclusionReason::MtuUnknown => {
                f.write_str("MTU unreadable (SIOCGIFMTU and /sys/class/net/IF/mtu both failed)")
            }
        }
    }
}

/// The decision on one interface.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// The transport opens an endpoint on it.
    Used,
    /// It is left alone, for this reason.
    Excluded(ExclusionReason),
}

/// A local interface as the transport sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interface {
    /// Kernel name.
    pub name: String,
    /// Primary IPv4 address.
    pub ipv4: Option<Ipv4Addr>,
    /// Prefix length of that address (0 without one).
    pub prefix_len: u8,
    /// Link MTU (0 when unknown, which excludes the interface).
    pub mtu: u32,
    /// Link speed in Mb/s.
    pub link_speed_mbps: Option<u32>,
    /// Where the speed came from.
    pub speed_source: SpeedSource,
    /// The provider that serves it, when one does.
    pub provider: Option<String>,
    /// The libfabric domain of that provider.
    pub domain: Option<String>,
    /// Used or excluded, and why.
    pub verdict: Verdict,
}

impl Interface {
    /// True when the transport uses this interface.
    pub fn is_used(&self) -> bool {
        self.verdict == Verdict::Used
    }
}

/// One IPv4 route.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Route {
    /// Destination network.
    pub dest: Ipv4Addr,
    /// Prefix length of the destination.
    pub prefix_len: u8,
    /// Next hop, for routes through a gateway.
    pub gateway: Option<Ipv4Addr>,
    /// Outgoing interface.
    pub interface: String,
    /// Route metric (lower is preferred).
    pub metric: u32,
}

/// Everything discovery found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Discovery {
    /// Every local interface with its verdict, in kernel order.
    pub interfaces: Vec<Interface>,
    /// The IPv4 routing table.
    pub routes: Vec<Route>,
}

impl Discovery {
    /// The interfaces the transport uses.
    pub fn used(&self) -> impl Iterator<Item = &Interface> {
        self.interfaces.iter().filter(|i| i.is_used())
    }
}

/// Decides, for each interface, whether the transport uses it, and fills in speed and provider.
/// Checks run in a fixed order (loopback, down, no IPv4, filter, provider, MTU), so the reason
/// given is the first that applies.
pub fn classify(raw: &[RawInterface], offers: &[FabricOffer], policy: &Policy) -> Vec<Interface> {
    raw.iter()
        .map(|r| {
            let ipv4 = r.ipv4.map(|(ip, _)| ip);
            let (link_speed_mbps, speed_source) = match policy.speed_overrides.get(&r.name) {
                Some(&s) => (Some(s), SpeedSource::Override),
                None => match r.sysfs_speed_mbps {
                    Some(s) => (Some(s), SpeedSource::Sysfs),
                    None => (None, SpeedSource::Unknown),
                },
            };
            let offer = ipv4.and_then(|ip| {
                policy
                    .provider
                    .providers()
                    .iter()
                    .find_map(|p| offers.iter().find(|o| o.provider == *p && o.ipv4 == ip))
            });
            let verdict = match exclusion(r, ipv4, offer.is_some(), policy) {
                Some(reason) => Verdict::Excluded(reason),
                None => Verdict::Used,
            };
            Interface {
                name: r.name.clone(),
                ipv4,
                prefix_len: r.ipv4.map_or(0, |(_, len)| len),
                mtu: r.mtu.unwrap_or(0),
                link_speed_mbps,
                speed_source,
                provider: offer.map(|o| o.provider.clone()),
                domain: offer.map(|o| o.domain.clone()),
                verdict,
            }
        })
        .collect()
}

fn exclusion(
    r: &RawInterface,
    ipv4: Option<Ipv4Addr>,
    has_offer: bool,
    policy: &Policy,
) -> Option<ExclusionReason> {
    if r.loopback {
        return Some(ExclusionReason::Loopback);
    }
    if !r.admin_up || !r.running {
        return Some(ExclusionReason::Down {
            admin_up: r.admin_up,
        });
    }
    if ipv4.is_none() {
        return Some(ExclusionReason::NoIpv4);
    }
    match &policy.filter {
        InterfaceFilter::All => {}
        InterfaceFilter::Include { entries, raw } => {
            if !entries.iter().any(|m| m.matches(&r.name, ipv4)) {
                return Some(ExclusionReason::NotIncluded {
                    include: raw.clone(),
                });
            }
        }
        InterfaceFilter::Exclude { entries, raw } => {
            if let Some(m) = entries.iter().find(|m| m.matches(&r.name, ipv4)) {
                return Some(ExclusionReason::Excluded {
                    entry: m.to_string(),
                    exclude: raw.clone(),
                });
            }
        }
    }
    if !has_offer {
        return Some(ExclusionReason::NoEndpoint {
            provider: policy.provider,
        });
    }
    if r.mtu.is_none_or(|m| m == 0) {
        return Some(ExclusionReason::MtuUnknown);
    }
    None
}

/// Override entries naming interfaces that do not exist here (likely typos).
pub fn unknown_override_names(raw: &[RawInterface], policy: &Policy) -> Vec<String> {
    policy
        .speed_overrides
        .keys()
        .filter(|name| !raw.iter().any(|r| &r.name == *name))
        .cloned()
        .collect()
}

/// Parses the text of `/proc/net/route`. Addresses there are the in-memory (network order)
/// bytes printed as a host-order hexadecimal number, so they are decoded with native byte order.
/// Only routes that are up (`RTF_UP`) are returned.
pub fn parse_routes(text: &str) -> Result<Vec<Route>, UsnicError> {
    const RTF_UP: u32 = 0x1;
    const RTF_GATEWAY: u32 = 0x2;
    let err = |line: usize, reason: String| UsnicError::Routes {
        path: ROUTE_TABLE.into(),
        line,
        reason,
    };
    let mut lines = text.lines().enumerate();
    match lines.next() {
        Some((_, header)) if header.split_whitespace().next() == Some("Iface") => {}
        Some(_) => return Err(err(1, "missing the 'Iface Destination ...' header".into())),
        None => return Ok(Vec::new()),
    }
    let mut routes = Vec::new();
    for (index, line) in lines {
        let number = index + 1;
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.is_empty() {
            continue;
        }
        if fields.len() < 8 {
            return Err(err(
                number,
                format!("expected at least 8 fields, found {}", fields.len()),
            ));
        }
        let hex = |i: usize, what: &str| {
            u32::from_str_radix(fields[i], 16)
                .map_err(|_| err(number, format!("{what} '{}' is not hexadecimal", fields[i])))
        };
        let dest = Ipv4Addr::from(hex(1, "destination")?.to_ne_bytes());
        let gateway = Ipv4Addr::from(hex(2, "gateway")?.to_ne_bytes());
        let flags = hex(3, "flags")?;
        let metric: u32 = fields[6]
            .parse()
            .map_err(|_| err(number, format!("metric '{}' is not a number", fields[6])))?;
        let mask = u32::from(Ipv4Addr::from(hex(7, "mask")?.to_ne_bytes()));
        if mask.leading_ones() + mask.trailing_zeros() != 32 {
            return Err(err(
                number,
                format!("mask {} is not contiguous", Ipv4Addr::from(mask)),
            ));
        }
        if flags & RTF_UP == 0 {
            continue;
        }
        routes.push(Route {
            dest,
            prefix_len: mask.leading_ones() as u8,
            gateway: (flags & RTF_GATEWAY != 0 && !gateway.is_unspecified()).then_some(gateway),
            interface: fields[0].to_string(),
            metric,
        });
    }
    Ok(routes)
}

/// Reads this namespace's IPv4 routing table.
pub fn read_routes() -> Result<Vec<Route>, UsnicError> {
    let text = std::fs::read_to_string(ROUTE_TABLE).map_err(|e| UsnicError::Routes {
        path: ROUTE_TABLE.into(),
        line: 0,
        reason: e.to_string(),
    })?;
    parse_routes(&text)
}

/// Parses the contents of `/sys/class/net/IF/speed`: a positive number of Mb/s, or nothing
/// (virtual NICs write -1 or 0, loopback fails to read).
pub fn parse_sysfs_speed(text: &str) -> Option<u32> {
    text.trim()
        .parse::<i64>()
        .ok()
        .filter(|s| *s > 0)
        .and_then(|s| u32::try_from(s).ok())
}

fn read_sysfs(name: &str, attribute: &str) -> Option<String> {
    std::fs::read_to_string(format!("/sys/class/net/{name}/{attribute}")).ok()
}

/// Lists the local interfaces with their flags, primary IPv4 address, MTU and sysfs speed.
pub fn read_interfaces() -> Result<Vec<RawInterface>, UsnicError> {
    let addrs = nix::ifaddrs::getifaddrs().map_err(|e| UsnicError::Interfaces {
        error: e.to_string(),
    })?;
    let mut out: Vec<RawInterface> = Vec::new();
    for ifa in addrs {
        let index = match out.iter().position(|r| r.name == ifa.interface_name) {
            Some(i) => i,
            None => {
                out.push(RawInterface {
                    name: ifa.interface_name.clone(),
                    admin_up: ifa.flags.contains(InterfaceFlags::IFF_UP),
                    running: ifa.flags.contains(InterfaceFlags::IFF_RUNNING),
                    loopback: ifa.flags.contains(InterfaceFlags::IFF_LOOPBACK),
                    ipv4: None,
                    mtu: None,
                    sysfs_speed_mbps: None,
                });
                out.len() - 1
            }
        };
        let entry = &mut out[index];
        if entry.ipv4.is_some() {
            continue; // the kernel lists the primary address first; secondaries are ignored
        }
        let ip = ifa
            .address
            .as_ref()
            .and_then(|a| a.as_sockaddr_in())
            .map(|s| s.ip());
        if let Some(ip) = ip {
            let mask = ifa
                .netmask
                .as_ref()
                .and_then(|m| m.as_sockaddr_in())
                .map_or(32, |m| u32::from(m.ip()).leading_ones() as u8);
            entry.ipv4 = Some((ip, mask));
        }
    }
    for r in &mut out {
        // sysfs may belong to another network namespace (see `netdev`): the MTU comes from
        // the kernel through our own namespace, and the speed only from a sysfs entry that
        // is really ours.
        let sysfs_ours = crate::netdev::sysfs_is_ours(&r.name);
        r.mtu = crate::netdev::mtu(&r.name).or_else(|| {
            sysfs_ours
                .then(|| read_sysfs(&r.name, "mtu").and_then(|t| t.trim().parse().ok()))
                .flatten()
        });
        r.sysfs_speed_mbps = sysfs_ours
            .then(|| read_sysfs(&r.name, "speed").and_then(|t| parse_sysfs_speed(&t)))
            .flatten();
    }
    Ok(out)
}

/// Asks libfabric which addresses each provider of the choice serves. A provider that serves
/// nothing here (no usNIC hardware, for instance) contributes no offers.
pub fn fabric_offers(choice: ProviderChoice) -> Result<Vec<FabricOffer>, UsnicError> {
    let mut offers = Vec::new();
    for provider in choice.providers() {
        let list = match fabric::dgram_interfaces(FABRIC_OWNER, Some(provider)) {
            Ok(list) => list,
            Err(e) if e.is_no_data() => {
                tracing::debug!(target: "usnic", provider, "provider serves no interface here");
                continue;
            }
            Err(e) => return Err(e.into()),
        };
        offers.extend(list.iter().filter_map(|i| {
            Some(FabricOffer {
                provider: i.provider().to_string(),
                domain: i.domain().to_string(),
                ipv4: i.ipv4()?,
            })
        }));
    }
    Ok(offers)
}

/// Discovers the local interfaces, decides which the transport uses, and reads the routes.
pub fn discover(params: &Params) -> Result<Discovery, UsnicError> {
    let policy = Policy::from_params(params)?;
    let raw = read_interfaces()?;
    for name in unknown_override_names(&raw, &policy) {
        tracing::warn!(
            target: "usnic",
            interface = %name,
            "KESTREL_USNIC_LINK_SPEED names an interface that does not exist here; ignored"
        );
    }
    let offers = fabric_offers(policy.provider)?;
    let interfaces = classify(&raw, &offers, &policy);
    for i in &interfaces {
        match &i.verdict {
            Verdict::Used => tracing::debug!(
                target: "usnic",
                interface = %i.name,
                ipv4 = ?i.ipv4,
                provider = ?i.provider,
                mtu = i.mtu,
                speed_mbps = ?i.link_speed_mbps,
                "interface used"
            ),
            Verdict::Excluded(reason) => tracing::debug!(
                target: "usnic",
                interface = %i.name,
                %reason,
                "interface excluded"
            ),
        }
    }
    if !interfaces.iter().any(Interface::is_used) {
        tracing::info!(
            target: "usnic",
            "no interface is usable by the usnic transport; it will not reach other hosts"
        );
    }
    Ok(Discovery {
        interfaces,
        routes: read_routes()?,
    })
}

/// Opens the libfabric description of a used interface, for creating its endpoint.
pub fn fabric_interface(iface: &Interface) -> Result<FabricInterface, UsnicError> {
    let (Some(provider), Some(ip)) = (iface.provider.as_deref(), iface.ipv4) else {
        return Err(UsnicError::Fabric(FabricError {
            component: "usnic",
            call: "fi_getinfo",
            provider: "".into(),
            interface: iface.name.as_str().into(),
            errno: 0,
            message: "the interface has no provider".into(),
            fix: Some("only interfaces with a Used verdict have endpoints".into()),
        }));
    };
    fabric::dgram_interfaces(FABRIC_OWNER, Some(provider))?
        .into_iter()
        .find(|f| f.ipv4() == Some(ip))
        .ok_or_else(|| {
            UsnicError::Fabric(FabricError {
                component: "usnic",
                call: "fi_getinfo",
                provider: provider.into(),
                interface: iface.name.as_str().into(),
                errno: 0,
                message: format!("provider {provider} no longer offers {ip}"),
                fix: Some("the interface changed since discovery; check `ip addr`".into()),
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(name: &str, ip: [u8; 4], prefix: u8) -> RawInterface {
        RawInterface {
            name: name.into(),
            admin_up: true,
            running: true,
            loopback: false,
            ipv4: Some((Ipv4Addr::from(ip), prefix)),
            mtu: Some(1500),
            sysfs_speed_mbps: Some(10000),
        }
    }

    fn offer(provider: &str, domain: &str, ip: [u8; 4]) -> FabricOffer {
        FabricOffer {
            provider: provider.into(),
            domain: domain.into(),
            ipv4: Ipv4Addr::from(ip),
        }
    }

    fn policy(provider: &str, include: &str, exclude: &str, speed: &str) -> Policy {
        Policy::parse(provider, include, exclude, speed).unwrap()
    }

    fn verdict_of<'a>(out: &'a [Interface], name: &str) -> &'a Verdict {
        &out.iter().find(|i| i.name == name).unwrap().verdict
    }

    /// A host like the netns test hosts: loopback, a management NIC, two data NICs, one NIC
    /// without an address, one down, one up without carrier.
    fn host() -> (Vec<RawInterface>, Vec<FabricOffer>) {
        let mut lo = up("lo", [127, 0, 0, 1], 8);
        lo.loopback = true;
        lo.sysfs_speed_mbps = None;
        lo.mtu = Some(65536);
        let mut noaddr = up("ifb0", [0, 0, 0, 0], 0);
        noaddr.ipv4 = None;
        let mut down = up("eth3", [198, 18, 3, 1], 24);
        down.admin_up = false;
        down.running = false;
        let mut nocarrier = up("eth4", [198, 18, 4, 1], 24);
        nocarrier.running = false;
        let mut virtio = up("eth0", [192, 0, 2, 2], 24);
        virtio.sysfs_speed_mbps = None;
        let raw = vec![
            lo,
            virtio,
            up("eth1", [198, 18, 1, 10], 24),
            up("eth2", [198, 18, 2, 10], 24),
            noaddr,
            down,
            nocarrier,
        ];
        let offers = vec![
            offer("udp", "lo", [127, 0, 0, 1]),
            offer("udp", "eth0", [192, 0, 2, 2]),
            offer("udp", "eth1", [198, 18, 1, 10]),
            offer("udp", "eth2", [198, 18, 2, 10]),
            offer("usnic", "usnic_1", [198, 18, 2, 10]),
        ];
        (raw, offers)
    }

    #[test]
    fn defaults_use_every_up_ipv4_interface_and_explain_the_rest() {
        let (raw, offers) = host();
        let out = classify(&raw, &offers, &policy("auto", "", "", ""));
        assert_eq!(
            verdict_of(&out, "lo"),
            &Verdict::Excluded(ExclusionReason::Loopback)
        );
        assert_eq!(
            verdict_of(&out, "ifb0"),
            &Verdict::Excluded(ExclusionReason::NoIpv4)
        );
        assert_eq!(
            verdict_of(&out, "eth3"),
            &Verdict::Excluded(ExclusionReason::Down { admin_up: false })
        );
        assert_eq!(
            verdict_of(&out, "eth4"),
            &Verdict::Excluded(ExclusionReason::Down { admin_up: true })
        );
        let used: Vec<&str> = out
            .iter()
            .filter(|i| i.is_used())
            .map(|i| i.name.as_str())
            .collect();
        assert_eq!(used, ["eth0", "eth1", "eth2"]);
        let eth1 = out.iter().find(|i| i.name == "eth1").unwrap();
        assert_eq!(eth1.prefix_len, 24);
        assert_eq!(eth1.mtu, 1500);
        assert_eq!(eth1.provider.as_deref(), Some("udp"));
        assert_eq!(eth1.domain.as_deref(), Some("eth1"));
    }

    #[test]
    fn auto_prefers_usnic_where_it_serves_the_address() {
        let (raw, offers) = host();
        let out = classify(&raw, &offers, &policy("auto", "", "", ""));
        let eth2 = out.iter().find(|i| i.name == "eth2").unwrap();
        assert_eq!(eth2.provider.as_deref(), Some("usnic"));
        assert_eq!(eth2.domain.as_deref(), Some("usnic_1"));
        let out = classify(&raw, &offers, &policy("udp", "", "", ""));
        let eth2 = out.iter().find(|i| i.name == "eth2").unwrap();
        assert_eq!(eth2.provider.as_deref(), Some("udp"));
    }

    #[test]
    fn forcing_usnic_excludes_interfaces_it_does_not_serve() {
        let (raw, offers) = host();
        let out = classify(&raw, &offers, &policy("usnic", "", "", ""));
        let reason = ExclusionReason::NoEndpoint {
            provider: ProviderChoice::Usnic,
        };
        assert_eq!(verdict_of(&out, "eth1"), &Verdict::Excluded(reason.clone()));
        assert_eq!(verdict_of(&out, "eth2"), &Verdict::Used);
        assert_eq!(
            reason.to_string(),
            "no libfabric DGRAM endpoint for it with provider usnic (see KESTREL_USNIC_PROVIDER)"
        );
    }

    #[test]
    fn include_by_name_and_cidr() {
        let (raw, offers) = host();
        let out = classify(
            &raw,
            &offers,
            &policy("auto", "eth1, 198.18.2.0/24", "", ""),
        );
        assert_eq!(verdict_of(&out, "eth1"), &Verdict::Used);
        assert_eq!(verdict_of(&out, "eth2"), &Verdict::Used);
        let reason = ExclusionReason::NotIncluded {
            include: "eth1, 198.18.2.0/24".into(),
        };
        assert_eq!(verdict_of(&out, "eth0"), &Verdict::Excluded(reason.clone()));
        assert_eq!(
            reason.to_string(),
            "not in KESTREL_USNIC_IF_INCLUDE=eth1, 198.18.2.0/24"
        );
        // Structural reasons come before the filter.
        assert_eq!(
            verdict_of(&out, "lo"),
            &Verdict::Excluded(ExclusionReason::Loopback)
        );
    }

    #[test]
    fn exclude_names_the_matching_entry() {
        let (raw, offers) = host();
        let out = classify(
            &raw,
            &offers,
            &policy("auto", "", "eth0,198.18.1.77/16", ""),
        );
        let eth1 = verdict_of(&out, "eth1");
        // 198.18.1.77/16 is the block 198.18.0.0/16, which holds eth1 and eth2.
        assert_eq!(
            eth1,
            &Verdict::Excluded(ExclusionReason::Excluded {
                entry: "198.18.0.0/16".into(),
                exclude: "eth0,198.18.1.77/16".into()
            })
        );
        let Verdict::Excluded(r) = verdict_of(&out, "eth0") else {
            panic!("eth0 must be excluded")
        };
        assert_eq!(
            r.to_string(),
            "matched KESTREL_USNIC_IF_EXCLUDE=eth0,198.18.1.77/16 entry eth0"
        );
        assert!(out.iter().all(|i| !i.is_used()));
    }

    #[test]
    fn include_and_exclude_together_are_an_error() {
        let e = Policy::parse("auto", "eth1", "eth0", "").unwrap_err();
        assert!(matches!(e, UsnicError::ConflictingFilters { .. }));
        let text = e.to_string();
        assert!(text.contains("KESTREL_USNIC_IF_INCLUDE='eth1'"), "{text}");
        assert!(text.contains("set only one"), "{text}");
        // Empty or whitespace-only lists do not count as set.
        assert!(Policy::parse("auto", " , ", "eth0", "").is_ok());
    }

    #[test]
    fn malformed_filter_entries_are_named() {
        for (value, entry) in [
            ("eth1,198.18.1.0/33", "198.18.1.0/33"),
            ("198.18.1/24", "198.18.1/24"),
            (
                "eth1,a very long interface name",
                "a very long interface name",
            ),
        ] {
            let e = Policy::parse("auto", value, "", "").unwrap_err();
            let UsnicError::BadParam { entry: got, .. } = &e else {
                panic!("{e:?}")
            };
            assert_eq!(got.as_deref(), Some(entry));
            assert!(e.to_string().contains("KESTREL_USNIC_IF_INCLUDE"), "{e}");
        }
        let e = Policy::parse("tcp", "", "", "").unwrap_err();
        assert!(e.to_string().contains("KESTREL_USNIC_PROVIDER"), "{e}");
    }

    #[test]
    fn speed_override_beats_sysfs_and_fills_unknown() {
        let (raw, offers) = host();
        let out = classify(
            &raw,
            &offers,
            &policy("auto", "", "", "eth1:25000, eth0:40000"),
        );
        let by = |n: &str| out.iter().find(|i| i.name == n).unwrap().clone();
        assert_eq!(
            (by("eth1").link_speed_mbps, by("eth1").speed_source),
            (Some(25000), SpeedSource::Override)
        );
        assert_eq!(
            (by("eth0").link_speed_mbps, by("eth0").speed_source),
            (Some(40000), SpeedSource::Override)
        );
        assert_eq!(
            (by("eth2").link_speed_mbps, by("eth2").speed_source),
            (Some(10000), SpeedSource::Sysfs)
        );
        assert_eq!(
            (by("lo").link_speed_mbps, by("lo").speed_source),
            (None, SpeedSource::Unknown)
        );
    }

    #[test]
    fn malformed_speed_overrides_name_the_entry() {
        for (value, entry) in [
            ("eth1:25000,eth2", "eth2"),
            ("eth1:fast", "eth1:fast"),
            ("eth1:0", "eth1:0"),
            ("eth1:-5", "eth1:-5"),
            (":100", ":100"),
            ("eth1:1,eth1:2", "eth1:2"),
        ] {
            let e = parse_speed_overrides(value).unwrap_err();
            let UsnicError::BadParam {
                entry: got, var, ..
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!(got.as_deref(), Some(entry), "{value}");
            assert_eq!(var, "KESTREL_USNIC_LINK_SPEED");
        }
        assert_eq!(parse_speed_overrides(" ").unwrap(), BTreeMap::new());
    }

    #[test]
    fn unknown_override_names_are_reported() {
        let (raw, _) = host();
        let p = policy("auto", "", "", "eth1:1000,eht2:1000");
        assert_eq!(unknown_override_names(&raw, &p), vec!["eht2".to_string()]);
    }

    #[test]
    fn unreadable_mtu_excludes_with_a_reason() {
        let (mut raw, offers) = host();
        raw[2].mtu = None;
        let out = classify(&raw, &offers, &policy("auto", "", "", ""));
        assert_eq!(
            verdict_of(&out, "eth1"),
            &Verdict::Excluded(ExclusionReason::MtuUnknown)
        );
        assert_eq!(out[2].mtu, 0);
    }

    #[test]
    fn sysfs_speed_values() {
        assert_eq!(parse_sysfs_speed("10000\n"), Some(10000));
        assert_eq!(parse_sysfs_speed("-1\n"), None);
        assert_eq!(parse_sysfs_speed("0"), None);
        assert_eq!(parse_sysfs_speed(""), None);
        assert_eq!(parse_sysfs_speed("99999999999"), None);
    }

    #[test]
    fn subnet_arithmetic() {
        let net = Ipv4Addr::new(198, 18, 1, 0);
        assert!(in_subnet(Ipv4Addr::new(198, 18, 1, 200), net, 24));
        assert!(!in_subnet(Ipv4Addr::new(198, 18, 2, 1), net, 24));
        assert!(in_subnet(Ipv4Addr::new(8, 8, 8, 8), net, 0));
        assert_eq!(netmask(0), 0);
        assert_eq!(netmask(32), u32::MAX);
        assert_eq!(netmask(24), 0xffff_ff00);
    }

    /// Little-endian `/proc/net/route` text, as this machine's kernel writes it.
    #[cfg(target_endian = "little")]
    const ROUTE_FIXTURE: &str = "\
Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT
eth0\t00000000\t010200C0\t0003\t0\t0\t100\t00000000\t0\t0\t0
eth0\t000200C0\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth1\t000112C6\t00000000\t0001\t0\t0\t0\t00FFFFFF\t0\t0\t0
eth2\t000512C6\t010212C6\t0003\t0\t0\t20\t00FFFFFF\t0\t0\t0
eth3\t000312C6\t00000000\t0000\t0\t0\t0\t00FFFFFF\t0\t0\t0
";

    #[cfg(target_endian = "little")]
    #[test]
    fn route_table_fixture_parses() {
        let routes = parse_routes(ROUTE_FIXTURE).unwrap();
        assert_eq!(
            routes,
            vec![
                Route {
                    dest: Ipv4Addr::UNSPECIFIED,
                    prefix_len: 0,
                    gateway: Some(Ipv4Addr::new(192, 0, 2, 1)),
                    interface: "eth0".into(),
                    metric: 100,
                },
                Route {
                    dest: Ipv4Addr::new(192, 0, 2, 0),
                    prefix_len: 24,
                    gateway: None,
                    interface: "eth0".into(),
                    metric: 0,
                },
                Route {
                    dest: Ipv4Addr::new(198, 18, 1, 0),
                    prefix_len: 24,
                    gateway: None,
                    interface: "eth1".into(),
                    metric: 0,
                },
                Route {
                    dest: Ipv4Addr::new(198, 18, 5, 0),
                    prefix_len: 24,
                    gateway: Some(Ipv4Addr::new(198, 18, 2, 1)),
                    interface: "eth2".into(),
                    metric: 20,
                },
            ],
            "the route without RTF_UP (eth3) is left out"
        );
    }

    #[test]
    fn malformed_route_tables_are_errors_with_line_numbers() {
        let header = "Iface\tDestination\tGateway\tFlags\tRefCnt\tUse\tMetric\tMask\n";
        for (body, line, needle) in [
            ("eth0\tZZ\t0\t1\t0\t0\t0\t0\n", 2, "destination"),
            ("eth0\t0\t0\t1\t0\t0\n", 2, "8 fields"),
            ("eth0\t0\t0\t1\t0\t0\tx\t0\n", 2, "metric"),
            (
                "eth0\t0\t0\t1\t0\t0\t0\t0\neth1\t0\t0\t1\t0\t0\t0\t00FF00FF\n",
                3,
                "contiguous",
            ),
        ] {
            let e = parse_routes(&format!("{header}{body}")).unwrap_err();
            let UsnicError::Routes {
                line: got, reason, ..
            } = &e
            else {
                panic!("{e:?}")
            };
            assert_eq!(*got, line, "{body:?}: {e}");
            assert!(reason.contains(needle), "{body:?}: {e}");
        }
        assert!(parse_routes("garbage\n").is_err());
        assert_eq!(parse_routes("").unwrap(), vec![]);
    }

    fn defaults() -> Params {
        Params::defaults(&params::specs())
    }

    #[test]
    fn live_discovery_on_this_machine() {
        let d = discover(&defaults()).unwrap();
        let lo = d
            .interfaces
            .iter()
            .find(|i| i.name == "lo")
            .expect("every Linux host has lo");
        assert_eq!(lo.verdict, Verdict::Excluded(ExclusionReason::Loopback));
        assert_eq!(
            lo.speed_source,
            SpeedSource::Unknown,
            "sysfs speed fails on lo"
        );
        let raw = read_interfaces().unwrap();
        for i in &d.interfaces {
            let r = raw.iter().find(|r| r.name == i.name).unwrap();
            if i.is_used() {
                assert!(i.ipv4.is_some() && i.mtu > 0, "{i:?}");
                assert!(
                    matches!(i.provider.as_deref(), Some("udp" | "usnic")),
                    "{i:?}"
                );
            }
            // This machine's libfabric has the udp provider, which serves every up IPv4
            // interface, so each such non-loopback interface must be used.
            if !r.loopback && r.admin_up && r.running && r.ipv4.is_some() && r.mtu.is_some() {
                assert!(i.is_used(), "{i:?} should be used");
            }
        }
        for route in &d.routes {
            assert!(
                raw.iter().any(|r| r.name == route.interface),
                "route {route:?} leaves through an unknown interface"
            );
        }
        // A used interface can open its libfabric description again.
        let first_used = d.used().next().cloned();
        if let Some(used) = first_used {
            let f = fabric_interface(&used).unwrap();
            assert_eq!(f.ipv4(), used.ipv4);
        }
    }

    #[test]
    fn live_discovery_honours_the_parameters() {
        let lookup = |var: &str| match var {
            "KESTREL_USNIC_IF_INCLUDE" => Some("lo".to_string()),
            "KESTREL_USNIC_LINK_SPEED" => Some("lo:1234".to_string()),
            _ => None,
        };
        let params = Params::resolve(&params::specs(), &lookup, &[]).unwrap();
        let d = discover(&params).unwrap();
        assert_eq!(d.used().count(), 0, "lo is never used, even when included");
        for i in &d.interfaces {
            if i.name == "lo" {
                assert_eq!(i.link_speed_mbps, Some(1234));
            } else if let Verdict::Excluded(ExclusionReason::NotIncluded { include }) = &i.verdict {
                assert_eq!(include, "lo");
            }
        }
        let conflicting = |var: &str| match var {
            "KESTREL_USNIC_IF_INCLUDE" | "KESTREL_USNIC_IF_EXCLUDE" => Some("eth0".to_string()),
            _ => None,
        };
        let params = Params::resolve(&params::specs(), &conflicting, &[]).unwrap();
        assert!(matches!(
            discover(&params),
            Err(UsnicError::ConflictingFilters { .. })
        ));
    }

    /// Runs a command for the namespace fixture, failing the test with its stderr.
    fn run(cmd: &[&str]) {
        let out = std::process::Command::new(cmd[0])
            .args(&cmd[1..])
            .output()
            .unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
        assert!(
            out.status.success(),
            "{cmd:?} failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// A network namespace with two veth links, removed on drop.
    struct NetnsFixture {
        name: String,
    }

    impl Drop for NetnsFixture {
        fn drop(&mut self) {
            // Deleting the namespace destroys the veth ends inside it, and with them the pairs.
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.name])
                .status();
        }
    }

    const NETNS_CHILD_VAR: &str = "KESTREL_USNIC_TEST_NETNS_CHILD";

    #[test]
    fn discovery_inside_a_network_namespace() {
        let have_ip = std::process::Command::new("ip")
            .arg("-V")
            .output()
            .is_ok_and(|o| o.status.success());
        if !nix::unistd::geteuid().is_root() || !have_ip {
            eprintln!("skipped: creating a network namespace needs root and iproute2");
            return;
        }
        let name = format!("kdisc{}", std::process::id());
        let fixture = NetnsFixture { name: name.clone() };
        let (up_outer, up_inner) = (format!("{name}a"), format!("{name}b"));
        let (dead_outer, dead_inner) = (format!("{name}c"), format!("{name}d"));
        run(&["ip", "netns", "add", &name]);
        // Datagrams between two endpoints on the same address travel over lo, which a new
        // namespace has down.
        run(&["ip", "-n", &name, "link", "set", "lo", "up"]);
        for (outer, inner, addr) in [
            (&up_outer, &up_inner, "198.18.77.2/24"),
            (&dead_outer, &dead_inner, "198.18.78.2/24"),
        ] {
            run(&[
                "ip", "link", "add", outer, "type", "veth", "peer", "name", inner,
            ]);
            run(&["ip", "link", "set", inner, "netns", &name]);
            run(&["ip", "-n", &name, "addr", "add", addr, "dev", inner]);
            run(&["ip", "-n", &name, "link", "set", inner, "up"]);
        }
        // Only the first pair gets its outer end up: the second stays without carrier. The
        // first also gets a small MTU, which must cap the endpoint's datagrams.
        run(&["ip", "link", "set", &up_outer, "mtu", "1400", "up"]);
        run(&["ip", "-n", &name, "link", "set", &up_inner, "mtu", "1400"]);

        let exe = std::env::current_exe().unwrap();
        let out = std::process::Command::new("ip")
            .args(["netns", "exec", &name])
            .arg(exe)
            .args([
                "discovery::tests::netns_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env(NETNS_CHILD_VAR, format!("{up_inner},{dead_inner}"))
            .env("KESTREL_USNIC_LINK_SPEED", format!("{up_inner}:25000"))
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "child failed:\n{text}");
        assert!(
            text.contains("1 passed"),
            "the child test did not run:\n{text}"
        );
        drop(fixture);
    }

    #[test]
    #[ignore = "runs inside a namespace, started by discovery_inside_a_network_namespace"]
    fn netns_child() {
        let names = std::env::var(NETNS_CHILD_VAR).expect("started by the namespace test");
        let (up, dead) = names.split_once(',').unwrap();
        let params = Params::from_env(&params::specs()).unwrap();
        let d = discover(&params).unwrap();
        let by = |n: &str| {
            d.interfaces
                .iter()
                .find(|i| i.name == n)
                .unwrap_or_else(|| panic!("{n} missing from {:?}", d.interfaces))
                .clone()
        };
        let used = by(up);
        assert_eq!(used.verdict, Verdict::Used, "{used:?}");
        assert_eq!(used.ipv4, Some(Ipv4Addr::new(198, 18, 77, 2)));
        assert_eq!(used.prefix_len, 24);
        assert_eq!(used.mtu, 1400);
        assert_eq!(used.provider.as_deref(), Some("udp"));
        assert_eq!(used.domain.as_deref(), Some(up));
        assert_eq!(
            (used.link_speed_mbps, used.speed_source),
            (Some(25000), SpeedSource::Override)
        );
        assert_eq!(
            by(dead).verdict,
            Verdict::Excluded(ExclusionReason::Down { admin_up: true })
        );
        assert_eq!(
            by("lo").verdict,
            Verdict::Excluded(ExclusionReason::Loopback)
        );
        assert_eq!(d.used().count(), 1);
        assert!(d.routes.iter().any(|r| r.interface == up
            && r.dest == Ipv4Addr::new(198, 18, 77, 0)
            && r.prefix_len == 24));

        // Endpoints work inside the namespace too.
        let iface = fabric_interface(&used).unwrap();
        let mut a = crate::fabric::MsgEndpoint::open(&iface, 4).unwrap();
        let mut b = crate::fabric::MsgEndpoint::open(&iface, 4).unwrap();
        assert_eq!(
            b.socket_addr().map(|s| *s.ip()),
            Some(Ipv4Addr::new(198, 18, 77, 2))
        );
        assert_eq!(b.max_datagram(), 1400 - 28, "the link MTU caps udp's 1472");
        let to_b = a.insert_peer(&b.address()).unwrap();
        a.send_with(to_b, |buf| {
            buf[..4].copy_from_slice(b"ping");
            4
        })
        .unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut got = Vec::new();
        while got.is_empty() {
            assert!(
                std::time::Instant::now() < deadline,
                "no datagram within 5 s"
            );
            b.poll(|d| got.push(d.to_vec())).unwrap();
        }
        assert_eq!(got, vec![b"ping".to_vec()]);
    }
}
