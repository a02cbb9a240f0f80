//! The `liveness_probe` fuzz target: a datagram arriving at a liveness responder or prober
//! (`kestrel_fabric::liveness`).
//!
//! An input is the bytes of a datagram. Checked: decoding under the seeds' key never panics
//! and its error formats; a datagram that decodes re-encodes to exactly the same bytes, and is
//! refused under any other key.

use kestrel_fabric::liveness::{decode, encode, ProbeKind, ProbeMessage};

/// The target's name (its corpus is `fuzz/corpus/liveness_probe`).
pub const TARGET: &str = "liveness_probe";

/// The set key the seeds are tagged with.
pub const KEY: u64 = 0x11fe_11fe;

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let m = match decode(data, KEY) {
        Ok(m) => m,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    assert_eq!(
        &encode(&m, KEY)[..],
        data,
        "a decoded datagram re-encodes differently"
    );
    assert!(decode(data, KEY ^ 1).is_err(), "another key accepted");
}

/// The seeds: a probe and an answer, and one of each refusal.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let m = |kind| ProbeMessage {
        kind,
        sender: 1,
        target: 0,
        nonce: 42,
    };
    let probe = encode(&m(ProbeKind::Probe), KEY).to_vec();
    let with = |at: usize, value: u8| {
        let mut b = probe.clone();
        b[at] = value;
        b
    };
    vec![
        ("probe", probe.clone()),
        ("answer", encode(&m(ProbeKind::Answer), KEY).to_vec()),
        ("other_key", encode(&m(ProbeKind::Probe), KEY + 1).to_vec()),
        ("short", probe[..47].to_vec()),
        ("foreign_magic", with(0, b'X')),
        ("unknown_kind", with(5, 3)),
        ("tag_altered", with(47, probe[47] ^ 1)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_decode_or_fail_as_named() {
        for (name, bytes) in seed_corpus() {
            let r = decode(&bytes, KEY);
            assert_eq!(
                r.is_ok(),
                matches!(name, "probe" | "answer"),
                "{name}: {r:?}"
            );
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let mut decoded = 0;
        fuzz_corpus::mutate_seeds(&seed_corpus(), 2000, 0x11FE, 48, &[&[0], &[1], &[2]], |d| {
            decoded += usize::from(decode(d, KEY).is_ok());
            fuzz_one(d)
        });
        // Any change to a tagged datagram breaks its tag; only unmutated copies decode.
        assert!(decoded >= 1, "nothing decoded");
    }
}
