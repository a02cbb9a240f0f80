//! Port names: how a process that called `open_port` can be reached.
//!
//! The format, version 2:
//!
//! ```text
//! kestrel-port:v2:<ipv4>[,<ipv4>...]:<tcp-port>:<tag>:<token>
//! ```
//!
//! * `<ipv4>`: one to eight dotted-quad addresses of the opener's host, in the order a
//!   connecting process tries them;
//! * `<tcp-port>`: the TCP port (1–65535) of the opener's out-of-band listener;
//! * `<tag>`: a decimal number (up to 4294967295) that tells the ports of one process apart;
//! * `<token>`: 32 lowercase hex digits, 128 random bits drawn when the port opened. Whoever
//!   holds the name may connect: a connection proves the token over the listener's challenge
//!   before anything it sends counts, and the acceptor proves it back (see
//!   [`super::listener`]). Version 1 names had no token and are refused.
//!
//! A name is at most [`MAX_PORT_NAME`] bytes (MPICH's `MPI_MAX_PORT_NAME` minus the NUL), has
//! no spaces and no leading zeros in numbers. Parsing is strict: anything else is a
//! [`PortError`] that says which part is wrong. This module owns the format only; it never opens
//! a socket.

use std::fmt;
use std::net::Ipv4Addr;

/// The prefix of every Kestrel port name.
pub const PREFIX: &str = "kestrel-port";
/// The format version this code writes and reads.
pub const VERSION: &str = "v2";
/// Bytes of a port's token.
pub const TOKEN_LEN: usize = 16;
/// Longest port name: `MPI_MAX_PORT_NAME` (256) without the terminating NUL.
pub const MAX_PORT_NAME: usize = 255;
/// Most addresses one name carries.
pub const MAX_ADDRESSES: usize = 8;

/// A parsed port name.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PortName {
    /// Addresses of the opener's host, in the order to try them.
    pub addresses: Vec<Ipv4Addr>,
    /// TCP port of the opener's listener.
    pub tcp_port: u16,
    /// The port's tag within its process.
    pub tag: u32,
    /// The port's secret: whoever knows the name may connect, nobody else.
    pub token: [u8; TOKEN_LEN],
}

/// Who proves knowledge of a port's token, and what for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PortRole {
    /// A connecting root, over the listener's challenge.
    Connect,
    /// The accepting root, over the connecting root's nonce.
    Accept,
    /// A launcher reporting that the job spawned for the port ended, over the challenge.
    SpawnFailed,
}

impl PortRole {
    fn label(self) -> &'static [u8] {
        match self {
            PortRole::Connect => b"kestrel-port-v2 connect",
            PortRole::Accept => b"kestrel-port-v2 accept",
            PortRole::SpawnFailed => b"kestrel-port-v2 spawn-failed",
        }
    }
}

/// What is wrong with a port name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PortProblem {
    /// The name is empty.
    Empty,
    /// The name is longer than [`MAX_PORT_NAME`].
    TooLong(usize),
    /// It contains whitespace or control characters.
    BadCharacter,
    /// It does not start with `kestrel-port:`.
    NotKestrel,
    /// The version field is not one this code reads.
    Version(String),
    /// A field is missing.
    Missing(&'static str),
    /// There are fields after the tag.
    Trailing(String),
    /// An address is not a dotted-quad IPv4 address.
    Address(String),
    /// More than [`MAX_ADDRESSES`] addresses.
    TooManyAddresses(usize),
    /// The TCP port is not a number from 1 to 65535.
    TcpPort(String),
    /// The tag is not a number from 0 to 4294967295.
    Tag(String),
    /// The token is not 32 lowercase hex digits.
    Token(String),
}

impl fmt::Display for PortProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PortProblem::Empty => write!(f, "it is empty"),
            PortProblem::TooLong(n) => {
                write!(f, "it is {n} bytes long, the limit is {MAX_PORT_NAME}")
            }
            PortProblem::BadCharacter => write!(f, "it contains whitespace or control characters"),
            PortProblem::NotKestrel => write!(f, "it does not start with '{PREFIX}:'"),
            PortProblem::Version(v) => {
                write!(
                    f,
                    "version '{v}' is not {VERSION} (a different Kestrel version?)"
                )
            }
            PortProblem::Missing(what) => write!(f, "the {what} is missing"),
            PortProblem::Trailing(t) => write!(f, "unexpected text after the token: '{t}'"),
            PortProblem::Address(a) => write!(f, "'{a}' is not a dotted-quad IPv4 address"),
            PortProblem::TooManyAddresses(n) => {
                write!(
                    f,
                    "it lists {n} addresses, at most {MAX_ADDRESSES} are allowed"
                )
            }
            PortProblem::TcpPort(p) => write!(f, "TCP port '{p}' is not a number from 1 to 65535"),
            PortProblem::Tag(t) => write!(f, "tag '{t}' is not a number from 0 to 4294967295"),
            PortProblem::Token(t) => {
                write!(
                    f,
                    "token '{t}' is not {} lowercase hex digits",
                    2 * TOKEN_LEN
                )
            }
        }
    }
}

/// A malformed port name (`MPI_ERR_PORT` in the C ABI).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortError {
    /// The name as given (truncated to 300 characters).
    pub name: String,
    /// What is wrong.
    pub problem: PortProblem,
}

impl fmt::Display for PortError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "dpm: port name '{}' is malformed: {}; pass the string open_port returned, which \
             looks like {PREFIX}:{VERSION}:192.0.2.1:40000:1:<32 hex digits>",
            self.name, self.problem
        )
    }
}

impl std::error::Error for PortError {}

/// A token: exactly `2 * TOKEN_LEN` lowercase hex digits.
fn parse_token(text: &str) -> Option<[u8; TOKEN_LEN]> {
    if text.len() != 2 * TOKEN_LEN
        || !text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return None;
    }
    let mut t = [0u8; TOKEN_LEN];
    for (i, b) in t.iter_mut().enumerate() {
        *b = u8::from_str_radix(&text[2 * i..2 * i + 2], 16).ok()?;
    }
    Some(t)
}

/// A decimal number without sign, spaces or leading zeros.
fn strict_decimal(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 10 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    if text.len() > 1 && text.starts_with('0') {
        return None;
    }
    text.parse().ok()
}

impl PortName {
    /// Parses `text` strictly (see the module doc).
    pub fn parse(text: &str) -> Result<PortName, PortError> {
        let err = |problem| PortError {
            name: text.chars().take(300).collect(),
            problem,
        };
        if text.is_empty() {
            return Err(err(PortProblem::Empty));
        }
        if text.len() > MAX_PORT_NAME {
            return Err(err(PortProblem::TooLong(text.len())));
        }
        if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
            return Err(err(PortProblem::BadCharacter));
        }
        let mut fields = text.split(':');
        if fields.next() != Some(PREFIX) {
            return Err(err(PortProblem::NotKestrel));
        }
        match fields.next() {
            Some(VERSION) => {}
            Some(v) => return Err(err(PortProblem::Version(v.to_string()))),
            None => return Err(err(PortProblem::Missing("version"))),
        }
        let addrs_text = fields
            .next()
            .filter(|a| !a.is_empty())
            .ok_or_else(|| err(PortProblem::Missing("address list")))?;
        let mut addresses = Vec::new();
        for a in addrs_text.split(',') {
            // Ipv4Addr's parser already refuses leading zeros and out-of-range octets.
            let ip: Ipv4Addr = a
                .parse()
                .map_err(|_| err(PortProblem::Address(a.to_string())))?;
            addresses.push(ip);
        }
        if addresses.len() > MAX_ADDRESSES {
            return Err(err(PortProblem::TooManyAddresses(addresses.len())));
        }
        let port_text = fields
            .next()
            .ok_or_else(|| err(PortProblem::Missing("TCP port")))?;
        let tcp_port = strict_decimal(port_text)
            .filter(|&p| (1..=65535).contains(&p))
            .ok_or_else(|| err(PortProblem::TcpPort(port_text.to_string())))?
            as u16;
        let tag_text = fields
            .next()
            .ok_or_else(|| err(PortProblem::Missing("tag")))?;
        let tag = strict_decimal(tag_text)
            .filter(|&t| t <= u64::from(u32::MAX))
            .ok_or_else(|| err(PortProblem::Tag(tag_text.to_string())))? as u32;
        let token_text = fields
            .next()
            .ok_or_else(|| err(PortProblem::Missing("token")))?;
        let token = parse_token(token_text)
            .ok_or_else(|| err(PortProblem::Token(token_text.to_string())))?;
        let rest: Vec<&str> = fields.collect();
        if !rest.is_empty() {
            return Err(err(PortProblem::Trailing(rest.join(":"))));
        }
        Ok(PortName {
            addresses,
            tcp_port,
            tag,
            token,
        })
    }

    /// A name for `tag` on a listener at `tcp_port`, with as many of `addresses` (in order) as
    /// fit in [`MAX_PORT_NAME`] and [`MAX_ADDRESSES`]; at least the first is always kept.
    pub fn new(
        addresses: &[Ipv4Addr],
        tcp_port: u16,
        tag: u32,
        token: [u8; TOKEN_LEN],
    ) -> PortName {
        let mut kept: Vec<Ipv4Addr> = Vec::new();
        for &a in addresses {
            if kept.len() == MAX_ADDRESSES {
                break;
            }
            kept.push(a);
            let candidate = PortName {
                addresses: kept.clone(),
                tcp_port,
                tag,
                token,
            };
            if candidate.to_string().len() > MAX_PORT_NAME && kept.len() > 1 {
                kept.pop();
                break;
            }
        }
        if kept.is_empty() {
            kept.push(Ipv4Addr::LOCALHOST);
        }
        PortName {
            addresses: kept,
            tcp_port,
            tag,
            token,
        }
    }

    /// `role`'s proof of this port's token over the other side's `nonce`
    /// ([`crate::mac`]; the tag is bound in, so a proof for one port is useless for another).
    pub fn proof(&self, role: PortRole, nonce: &[u8]) -> Vec<u8> {
        crate::mac::proof(&self.token, role.label(), &[&self.tag.to_be_bytes(), nonce])
    }

    /// Whether `proof` is `role`'s proof of this port's token over `nonce`.
    pub fn verify(&self, role: PortRole, nonce: &[u8], proof: &[u8]) -> bool {
        nonce.len() == crate::mac::NONCE_LEN
            && crate::mac::verify(
                &self.token,
                role.label(),
                &[&self.tag.to_be_bytes(), nonce],
                proof,
            )
    }

    /// `ip:port` candidates to connect to, in order.
    pub fn socket_addresses(&self) -> Vec<std::net::SocketAddr> {
        self.addresses
            .iter()
            .map(|&ip| std::net::SocketAddr::from((ip, self.tcp_port)))
            .collect()
    }
}

impl fmt::Display for PortName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let addrs: Vec<String> = self.addresses.iter().map(|a| a.to_string()).collect();
        write!(
            f,
            "{PREFIX}:{VERSION}:{}:{}:{}:{}",
            addrs.join(","),
            self.tcp_port,
            self.tag,
            self.token
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOKEN: [u8; TOKEN_LEN] = [
        0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef, 0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd,
        0xef,
    ];

    #[test]
    fn round_trips() {
        let p = PortName::new(
            &["192.0.2.7".parse().unwrap(), Ipv4Addr::LOCALHOST],
            40123,
            17,
            TOKEN,
        );
        let text = p.to_string();
        assert_eq!(
            text,
            "kestrel-port:v2:192.0.2.7,127.0.0.1:40123:17:0123456789abcdef0123456789abcdef"
        );
        assert_eq!(PortName::parse(&text).unwrap(), p);
    }

    #[test]
    fn many_addresses_are_trimmed_to_fit() {
        let many: Vec<Ipv4Addr> = (0..20)
            .map(|i| Ipv4Addr::new(198, 51, 100, 100 + i))
            .collect();
        let p = PortName::new(&many, 65535, u32::MAX, [0xff; TOKEN_LEN]);
        let text = p.to_string();
        assert!(text.len() <= MAX_PORT_NAME);
        assert_eq!(p.addresses.len(), MAX_ADDRESSES);
        assert_eq!(PortName::parse(&text).unwrap(), p);
        assert_eq!(
            PortName::new(&[], 1, 0, TOKEN).addresses,
            vec![Ipv4Addr::LOCALHOST]
        );
    }

    #[test]
    fn malformed_names_say_what_is_wrong() {
        // `:T` in a case stands for a valid token.
        const T: &str = "0123456789abcdef0123456789abcdef";
        let cases: &[(&str, PortProblem)] = &[
            ("", PortProblem::Empty),
            ("tcp://host:1", PortProblem::NotKestrel),
            ("kestrel-port", PortProblem::Missing("version")),
            (
                "kestrel-port:v1:1.2.3.4:5:6",
                PortProblem::Version("v1".into()),
            ),
            ("kestrel-port:v2", PortProblem::Missing("address list")),
            ("kestrel-port:v2::5:6", PortProblem::Missing("address list")),
            (
                "kestrel-port:v2:host.example:5:6",
                PortProblem::Address("host.example".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.256:5:6",
                PortProblem::Address("1.2.3.256".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4,:5:6",
                PortProblem::Address("".into()),
            ),
            ("kestrel-port:v2:1.2.3.4", PortProblem::Missing("TCP port")),
            (
                "kestrel-port:v2:1.2.3.4:0:6",
                PortProblem::TcpPort("0".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:65536:6",
                PortProblem::TcpPort("65536".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:080:6",
                PortProblem::TcpPort("080".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:+80:6",
                PortProblem::TcpPort("+80".into()),
            ),
            ("kestrel-port:v2:1.2.3.4:80", PortProblem::Missing("tag")),
            (
                "kestrel-port:v2:1.2.3.4:80:1",
                PortProblem::Missing("token"),
            ),
            (
                "kestrel-port:v2:1.2.3.4:80:1:0123",
                PortProblem::Token("0123".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:80:1:0123456789ABCDEF0123456789ABCDEF",
                PortProblem::Token("0123456789ABCDEF0123456789ABCDEF".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:80:4294967296",
                PortProblem::Tag("4294967296".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:80:-1",
                PortProblem::Tag("-1".into()),
            ),
            (
                "kestrel-port:v2:1.2.3.4:80:1:T:x",
                PortProblem::Trailing("x".into()),
            ),
            ("kestrel-port:v2:1.2.3.4:80:1:T ", PortProblem::BadCharacter),
            ("kestrel-port:v2:1.2.3.4:80:\n1", PortProblem::BadCharacter),
        ];
        for (text, want) in cases {
            let text = text.replace(":T", &format!(":{T}"));
            let e = PortName::parse(&text).unwrap_err();
            assert_eq!(&e.problem, want, "{text:?}");
            let msg = e.to_string();
            assert!(
                msg.contains("malformed") && msg.contains("open_port"),
                "{msg}"
            );
        }
        let nine = (1..=9)
            .map(|i| format!("10.0.0.{i}"))
            .collect::<Vec<_>>()
            .join(",");
        let e = PortName::parse(&format!("kestrel-port:v2:{nine}:80:1:{T}")).unwrap_err();
        assert_eq!(e.problem, PortProblem::TooManyAddresses(9));
        let long = format!("kestrel-port:v2:1.2.3.4:80:1{}", "1".repeat(300));
        let e = PortName::parse(&long).unwrap_err();
        assert!(matches!(e.problem, PortProblem::TooLong(_)));
        assert!(e.name.len() <= 300);
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A cheap deterministic fuzz: every prefix and every one-byte mutation of a valid name.
        let good = "kestrel-port:v2:192.0.2.7,127.0.0.1:40123:17:0123456789abcdef0123456789abcdef";
        for end in 0..=good.len() {
            let _ = PortName::parse(&good[..end]);
        }
        let bytes = good.as_bytes();
        for i in 0..bytes.len() {
            for b in [b':', b',', b'0', b'9', b'.', b'a', 0xC3u8] {
                let mut m = bytes.to_vec();
                m[i] = b;
                if let Ok(s) = String::from_utf8(m) {
                    let _ = PortName::parse(&s);
                }
            }
        }
    }
}
