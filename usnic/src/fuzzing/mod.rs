//! The bodies of the usnic card fuzz targets (`fuzz/`, one submodule per target) and their seed
//! corpora: the two encodings of the business card ([`crate::card`]), both of which reach a
//! rank from other processes.
//!
//! * [`card_modex`]: the binary modex card ([`crate::card::ModexCard::decode`]);
//! * [`card_json`]: the JSON card ([`crate::card::HostCard::from_json_str`]), with its refusal
//!   of a key given twice.
//!
//! Each submodule's `fuzz_one` holds what its target checks (decoding never panics and its
//! errors format; a card that decodes is valid, re-encodes canonically and carries the same
//! facts through the other encoding), so that the unit tests replay the committed corpus
//! `fuzz/corpus/<target>/` without cargo-fuzz; `seed_corpus` generates that corpus. This
//! module owns those checks; it must never touch the network or libfabric, hold state between
//! calls, or panic except on a violated property.

pub mod card_json;
pub mod card_modex;

use std::net::Ipv4Addr;

use crate::card::{CardInterface, CardRoute, HostCard, JSON_VERSION, MAX_INTERFACES, MAX_ROUTES};

/// A valid card of `interfaces` interfaces (at most [`MAX_INTERFACES`]) with `routes` routes
/// (at most [`MAX_ROUTES`], none without interfaces) spread over them, or no routes table: the
/// seeds' material.
fn sample_card(interfaces: usize, routes: Option<usize>) -> HostCard {
    let interfaces: Vec<CardInterface> = (0..interfaces.min(MAX_INTERFACES))
        .map(|i| CardInterface {
            name: format!("eth{i}"),
            ipv4: Ipv4Addr::new(198, 18, i as u8, 10),
            prefix_len: 24,
            link_speed_mbps: (i % 3 != 2).then_some(10_000 * (i as u32 + 1)),
            mtu: [1500, 9000, 576, 65535][i % 4],
        })
        .collect();
    let routes = routes.map(|n| {
        // Routes need an interface to leave through.
        let n = if interfaces.is_empty() {
            0
        } else {
            n.min(MAX_ROUTES)
        };
        (0..n)
            .map(|j| CardRoute {
                dest: if j == 0 {
                    Ipv4Addr::UNSPECIFIED
                } else {
                    Ipv4Addr::new(10, j as u8, 0, 0)
                },
                dest_prefix_len: if j == 0 { 0 } else { 16 },
                interface: interfaces[j % interfaces.len()].name.clone(),
                metric: (j as u32) * 100,
            })
            .collect()
    });
    HostCard {
        version: JSON_VERSION,
        node: "h0".to_string(),
        interfaces,
        routes,
    }
}

/// The committed corpus directory of `target` (`fuzz/corpus/<target>` of the repository).
#[cfg(test)]
fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}
