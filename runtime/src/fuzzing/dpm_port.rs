//! The `dpm_port` fuzz target: port names ([`crate::dpm::port`]), which reach a process as
//! text from users and other jobs.
//!
//! An input is used twice: as the text of a name (lossily UTF-8) and as the fields of one (a
//! count byte, that many addresses, port, tag and token). Checked: parsing never panics, its
//! error formats and quotes at most 300 characters of the name; a name that parses is the
//! canonical text of what it parsed to (the parser is strict, so `display(parse(t)) == t`);
//! a name built from fields parses back to itself when the format can carry it (1 to 8
//! addresses, a TCP port from 1, at most 255 bytes) and is refused otherwise; the name
//! [`PortName::new`] makes of any address list keeps as many addresses as fit and parses back;
//! a proof verifies only over a nonce of the right length, and only for its own port and role.

use std::net::Ipv4Addr;

use crate::dpm::port::{PortName, PortRole, MAX_ADDRESSES, MAX_PORT_NAME, TOKEN_LEN};

/// The target's name (its corpus is `fuzz/corpus/dpm_port`).
pub const TARGET: &str = "dpm_port";

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    check_text(&String::from_utf8_lossy(data));
    check_fields(data);
}

fn check_text(text: &str) {
    match PortName::parse(text) {
        Ok(p) => {
            assert_eq!(p.to_string(), text, "a parsed name is not canonical");
            assert!(!p.addresses.is_empty() && p.addresses.len() <= MAX_ADDRESSES);
            assert!(p.tcp_port >= 1 && text.len() <= MAX_PORT_NAME);
        }
        Err(e) => {
            assert!(
                e.name.chars().count() <= 300,
                "the error quotes the whole name"
            );
            let _ = e.to_string();
        }
    }
}

/// The bytes as fields, zeros once they run out.
fn check_fields(data: &[u8]) {
    let mut bytes = data.iter().copied().chain(std::iter::repeat(0));
    let mut next = || bytes.next().unwrap_or(0);
    let count = usize::from(next() % 12);
    let addresses: Vec<Ipv4Addr> = (0..count)
        .map(|_| Ipv4Addr::new(next(), next(), next(), next()))
        .collect();
    let tcp_port = u16::from_be_bytes([next(), next()]);
    let tag = u32::from_be_bytes([next(), next(), next(), next()]);
    let mut token = [0u8; TOKEN_LEN];
    token.iter_mut().for_each(|b| *b = next());
    let nonce: Vec<u8> = (0..usize::from(next() % 40)).map(|_| next()).collect();

    let p = PortName {
        addresses: addresses.clone(),
        tcp_port,
        tag,
        token,
    };
    let text = p.to_string();
    let carried = (1..=MAX_ADDRESSES).contains(&addresses.len())
        && tcp_port >= 1
        && text.len() <= MAX_PORT_NAME;
    match PortName::parse(&text) {
        Ok(back) => {
            assert!(carried, "{text} parsed but the format cannot carry it");
            assert_eq!(back, p, "{text} parses to another name");
        }
        Err(e) => assert!(!carried, "{text} was refused: {e}"),
    }

    if tcp_port >= 1 {
        let made = PortName::new(&addresses, tcp_port, tag, token);
        let kept = made.addresses.len();
        if addresses.is_empty() {
            assert_eq!(made.addresses, vec![Ipv4Addr::LOCALHOST]);
        } else {
            assert_eq!(
                made.addresses,
                addresses[..kept],
                "new() reordered addresses"
            );
            if kept < addresses.len() && kept < MAX_ADDRESSES {
                let one_more = PortName {
                    addresses: addresses[..=kept].to_vec(),
                    ..made.clone()
                };
                assert!(
                    one_more.to_string().len() > MAX_PORT_NAME,
                    "new() dropped an address that fits"
                );
            }
        }
        assert_eq!(PortName::parse(&made.to_string()), Ok(made.clone()));
    }

    let proof = p.proof(PortRole::Connect, &nonce);
    let right_nonce = nonce.len() == crate::mac::NONCE_LEN;
    assert_eq!(p.verify(PortRole::Connect, &nonce, &proof), right_nonce);
    assert!(
        !p.verify(PortRole::Accept, &nonce, &proof),
        "a proof verified for another role"
    );
    let other = PortName {
        tag: tag.wrapping_add(1),
        ..p.clone()
    };
    assert!(
        !other.verify(PortRole::Connect, &nonce, &proof),
        "a proof verified for another port"
    );
}

/// The seed corpus: names as `open_port` writes them and the typical ways one is wrong, by
/// file name.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    const T: &str = "0123456789abcdef0123456789abcdef";
    let name = |rest: &str| format!("kestrel-port:v2:{rest}").into_bytes();
    let eight = (1..=8)
        .map(|i| format!("198.51.100.{}", 100 + i))
        .collect::<Vec<_>>()
        .join(",");
    let nine = (1..=9)
        .map(|i| format!("10.0.0.{i}"))
        .collect::<Vec<_>>()
        .join(",");
    vec![
        ("one_address", name(&format!("192.0.2.7:40123:17:{T}"))),
        (
            "two_addresses",
            name(&format!("192.0.2.7,127.0.0.1:40123:17:{T}")),
        ),
        (
            "eight_addresses_largest_numbers",
            name(&format!("{eight}:65535:4294967295:{}", "f".repeat(32))),
        ),
        ("nine_addresses", name(&format!("{nine}:80:1:{T}"))),
        ("version_1", b"kestrel-port:v1:1.2.3.4:5:6".to_vec()),
        ("not_kestrel", b"tcp://host:1".to_vec()),
        ("no_address", name(&format!(":5:6:{T}"))),
        ("host_name_address", name(&format!("host.example:5:6:{T}"))),
        ("empty_address_in_list", name(&format!("1.2.3.4,:5:6:{T}"))),
        ("port_zero", name(&format!("1.2.3.4:0:6:{T}"))),
        ("port_leading_zero", name(&format!("1.2.3.4:080:6:{T}"))),
        ("port_with_sign", name(&format!("1.2.3.4:+80:6:{T}"))),
        ("tag_too_large", name(&format!("1.2.3.4:80:4294967296:{T}"))),
        ("no_token", name("1.2.3.4:80:1")),
        (
            "uppercase_token",
            name(&format!("1.2.3.4:80:1:{}", T.to_uppercase())),
        ),
        ("trailing_field", name(&format!("1.2.3.4:80:1:{T}:x"))),
        ("trailing_space", name(&format!("1.2.3.4:80:1:{T} "))),
        ("control_character", name(&format!("1.2.3.4:80:\n1:{T}"))),
        (
            "too_long",
            name(&format!("1.2.3.4:80:1{}:{T}", "1".repeat(300))),
        ),
        (
            "not_utf8",
            [name(&format!("1.2.3.4:80:1:{T}")), vec![0xc3, 0x28]].concat(),
        ),
        // As fields: eleven addresses, of which `new` keeps the first eight that fit.
        ("fields_eleven_addresses", {
            let mut b = vec![11u8];
            (0..44u8).for_each(|i| b.push(100 + i));
            b.extend([0x9c, 0x40, 0, 0, 0, 7]);
            b.extend([0xab; TOKEN_LEN]);
            b.push(32);
            b.extend([0x5a; 32]);
            b
        }),
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
            "one_address",
            "two_addresses",
            "eight_addresses_largest_numbers",
        ];
        for (name, bytes) in seed_corpus() {
            if name.starts_with("fields_") {
                continue;
            }
            let parsed = PortName::parse(&String::from_utf8_lossy(&bytes));
            assert_eq!(parsed.is_ok(), valid.contains(&name), "{name}: {parsed:?}");
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[b":", b",", b".", b"0", b"255", b"kestrel-port:v2:", b"f"];
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0x9027, 64, tokens, fuzz_one);
    }
}
