//! The `ofi_frame` fuzz target: a message as a peer's provider delivers it, frame header first.
//!
//! An input is the bytes of a message. Checked: decoding (under the seeds' key, with senders
//! 0-7 known) never panics and its error formats; a frame that decodes carries exactly the
//! input's fields and bytes (its header rewritten from the decoded fields equals the input's),
//! an ack carries no data, and the same bytes under another key or from an unknown sender are
//! refused.

use crate::wire::{self, Header, Kind, FRAME_LEN};

/// The target's name (its corpus is `fuzz/corpus/ofi_frame`).
pub const TARGET: &str = "ofi_frame";

/// The set key the seeds are written with.
pub const KEY: u64 = 0x05ee_d0f1_c0de;

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let frame = match wire::decode(data, KEY, |s| s < 8) {
        Ok(f) => f,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let mut header = [0u8; FRAME_LEN];
    wire::write_header(
        &mut header,
        &Header {
            kind: frame.kind,
            am: frame.am,
            sender: frame.sender,
            key: KEY,
            seq: frame.seq,
            ack: frame.ack,
            striped: frame.striped,
        },
    );
    assert_eq!(
        &header[..],
        &data[..FRAME_LEN],
        "the header does not re-encode to itself"
    );
    assert_eq!(
        frame.data,
        &data[FRAME_LEN..],
        "the data is not the bytes after the header"
    );
    assert!(
        frame.kind == Kind::Data || frame.data.is_empty(),
        "an ack with data"
    );
    assert!(
        wire::decode(data, KEY ^ 1, |_| true).is_err(),
        "another key accepted"
    );
    assert!(
        wire::decode(data, KEY, |_| false).is_err(),
        "an unknown sender accepted"
    );
}

/// The seeds: data and ack frames, and one of each refusal.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let frame = |kind, sender, data: &[u8]| {
        let mut b = vec![0u8; FRAME_LEN];
        wire::write_header(
            &mut b,
            &Header {
                kind,
                am: if kind == Kind::Data { 1 } else { 0 },
                sender,
                key: KEY,
                seq: 7,
                ack: 3,
                striped: false,
            },
        );
        b.extend_from_slice(data);
        b
    };
    let data = frame(Kind::Data, 2, b"header and payload");
    let with = |at: usize, value: u8| {
        let mut b = data.clone();
        b[at] = value;
        b
    };
    vec![
        ("data", data.clone()),
        ("data_empty", frame(Kind::Data, 0, b"")),
        ("ack", frame(Kind::Ack, 7, b"")),
        ("ack_with_data", frame(Kind::Ack, 1, b"x")),
        ("short", data[..FRAME_LEN - 1].to_vec()),
        ("other_version", with(0, wire::VERSION + 1)),
        ("striped", with(3, wire::FLAG_STRIPED)),
        ("reserved_set", with(3, 2)),
        ("unknown_kind", with(2, 9)),
        ("other_key", with(8, data[8] ^ 0xff)),
        ("unknown_sender", with(4, 8)),
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
            let r = wire::decode(&bytes, KEY, |s| s < 8);
            let ok = matches!(name, "data" | "data_empty" | "ack" | "striped");
            assert_eq!(r.is_ok(), ok, "{name}: {r:?}");
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[&[0], &[1], &[wire::VERSION], &[0xff]];
        let mut decoded = 0;
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0x0F1F, 24, tokens, |d| {
            decoded += usize::from(wire::decode(d, KEY, |s| s < 8).is_ok());
            fuzz_one(d)
        });
        assert!(decoded >= 20, "only {decoded} mutants decoded");
    }
}
