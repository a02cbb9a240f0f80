//! The body of the `decode_header` fuzz target (`usnic/fuzz`), and its seed corpus.
//!
//! This module owns what the fuzzer checks, so that the same checks run as ordinary unit tests
//! over the committed corpus: decoding never panics; whatever decodes re-encodes to the same
//! bytes; the same bytes under another key are refused; and a connection fed the datagram
//! (fresh, in sequence, or with data in flight) neither panics nor emits a datagram it would
//! itself refuse, nor transmits without end. It must never hold state between calls.

use std::time::{Duration, Instant};

use super::config::Config;
use super::conn::Connection;
use super::wire::{self, Body, DataFields, Header, WireError, HEADER_LEN};

/// The job key the fuzz target decodes with (the seeds carry it).
pub const FUZZ_KEY: u64 = 0x6B65_7374_7265_6C21;

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let (header, payload) = match wire::decode(data, FUZZ_KEY) {
        Ok(ok) => ok,
        Err(e) => {
            // Formatting the error must not panic either.
            let _ = e.to_string();
            return;
        }
    };
    let mut out = vec![0u8; HEADER_LEN + payload.len()];
    let n = wire::encode(&header, payload, &mut out)
        .unwrap_or_else(|e| panic!("decoded header does not re-encode: {e}"));
    assert_eq!(&out[..n], &data[..n], "round trip changed the bytes");
    assert_eq!(
        wire::decode(data, !FUZZ_KEY).map(|_| ()),
        Err(WireError::BadKey),
        "a datagram decoded under two keys"
    );
    drive_connections(&header, payload);
}

fn fuzz_config() -> Config {
    Config {
        window: 64,
        max_datagram: 256,
        max_message: 64 << 10,
        max_send_queue_bytes: 256 << 10,
        max_recv_queue_bytes: 64 << 10,
        ..Config::default()
    }
}

/// Feeds the datagram (twice) to connections in four states and drives them through timers.
fn drive_connections(header: &Header, payload: &[u8]) {
    let t0 = Instant::now();
    let local = (0, header.dst_rail);
    let remote = (header.src_rank, header.src_rail);
    let seq = match header.body {
        Body::Data(DataFields { seq, .. }) => seq,
        _ => 0,
    };
    let ack = header.ack().unwrap_or(0);
    for variant in 0..4 {
        let Ok(mut conn) = Connection::new(fuzz_config(), FUZZ_KEY, local, remote, t0) else {
            panic!("the fuzz configuration is valid");
        };
        match variant {
            // The datagram's segment is the next one expected.
            1 => conn = conn.with_initial_sequences(0, seq),
            // Data in flight, numbered so that the datagram's ACK falls inside it.
            2 | 3 => {
                let first = if variant == 2 { 0 } else { ack.wrapping_sub(1) };
                conn = conn.with_initial_sequences(first, 0);
                for (i, len) in [0usize, 100, 600].into_iter().enumerate() {
                    let body = vec![i as u8; len];
                    assert!(conn.send(i as u8, &[&body]).is_ok());
                }
                transmit_all(&mut conn, t0);
            }
            _ => {}
        }
        conn.handle_datagram(t0, header, payload);
        conn.handle_datagram(t0, header, payload);
        for after_ms in [0u64, 1, 10, 300, 5000] {
            let now = t0 + Duration::from_millis(after_ms);
            conn.handle_timeout(now);
            while let Some((_, msg)) = conn.poll_deliver() {
                assert!(msg.len() <= fuzz_config().max_message);
                conn.recycle(msg);
            }
            transmit_all(&mut conn, now);
            if let Some(t) = conn.poll_timeout() {
                assert!(t >= t0, "a timer in the past of the connection's start");
            }
        }
        let _ = conn.take_unacknowledged();
        assert!(!conn.has_unacknowledged());
    }
}

fn transmit_all(conn: &mut Connection, now: Instant) {
    let mut buf = [0u8; 256];
    let mut sent = 0;
    while let Some(n) = conn.poll_transmit(now, &mut buf) {
        if let Err(e) = wire::decode(&buf[..n], FUZZ_KEY) {
            panic!("the connection emitted a datagram it would refuse: {e}");
        }
        sent += 1;
        assert!(sent <= 1000, "poll_transmit does not run dry");
    }
}

fn datagram(h: Header, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![0u8; HEADER_LEN + payload.len()];
    match wire::encode(&h, payload, &mut out) {
        Ok(n) => out.truncate(n),
        Err(e) => panic!("seed does not encode: {e}"),
    }
    out
}

/// The seed corpus: valid datagrams of every kind and the typical ways one goes wrong, by file
/// name. `usnic/fuzz/corpus/decode_header/` holds these bytes (a unit test keeps them equal).
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let base = Header {
        key: FUZZ_KEY,
        src_rank: 3,
        src_rail: 1,
        dst_rail: 0,
        payload_len: 0,
        body: Body::Probe,
    };
    let data = |seq, ack, msg_len, offset, payload: &[u8]| {
        datagram(
            Header {
                payload_len: payload.len() as u16,
                body: Body::Data(DataFields {
                    seq,
                    ack,
                    am: 7,
                    msg_len,
                    offset,
                }),
                ..base
            },
            payload,
        )
    };
    let ack = |ack, sack, latest| {
        datagram(
            Header {
                body: Body::Ack { ack, sack, latest },
                ..base
            },
            &[],
        )
    };
    let hello = b"hello, rank 0".as_slice();
    let frag = [0x5Au8; 200];
    let single = data(0, Some(65535), hello.len() as u32, 0, hello);
    let with = |at: usize, v: u8| {
        let mut d = single.clone();
        d[at] = v;
        d
    };
    let mut padded = single.clone();
    padded.extend_from_slice(&[0; 17]);
    let mut wrong_key = single.clone();
    wrong_key[4..12].copy_from_slice(&(!FUZZ_KEY).to_le_bytes());
    let mut ack_with_payload = ack(5, 0, 5);
    ack_with_payload[22] = 1;
    ack_with_payload.push(0);
    let mut probe_reserved = datagram(
        Header {
            payload_len: 5,
            ..base
        },
        b"probe",
    );
    probe_reserved[20] = 1;
    vec![
        ("data_single", single.clone()),
        ("data_first_fragment", data(0, Some(9), 300, 0, &frag)),
        (
            "data_last_fragment",
            data(1, Some(9), 300, 200, &frag[..100]),
        ),
        ("data_empty_message", data(0, None, 0, 0, &[])),
        ("data_seq_wrap", data(65535, Some(32767), 4, 0, b"wrap")),
        ("data_padded", padded),
        ("ack_plain", ack(0, 0, 0)),
        ("ack_selective", ack(10, 0x8000_0000_0000_0005, 80)),
        (
            "probe",
            datagram(
                Header {
                    payload_len: 5,
                    ..base
                },
                b"probe",
            ),
        ),
        (
            "probe_reply",
            datagram(
                Header {
                    payload_len: 5,
                    body: Body::ProbeReply,
                    ..base
                },
                b"reply",
            ),
        ),
        ("empty", vec![]),
        ("truncated_header", single[..HEADER_LEN - 1].to_vec()),
        ("truncated_payload", single[..single.len() - 1].to_vec()),
        ("wrong_key", wrong_key),
        ("bad_magic", with(0, 0x11)),
        ("bad_version", with(0, 0xA7)),
        ("unknown_kind", with(1, 9)),
        ("bad_flags", with(2, 0x81)),
        ("bad_fragment", with(24, 3)),
        ("ack_with_payload", ack_with_payload),
        ("probe_reserved_nonzero", probe_reserved),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::Rng;
    use std::path::PathBuf;

    fn corpus_dir() -> PathBuf {
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/decode_header")
    }

    /// `KESTREL_WRITE_FUZZ_CORPUS=1 cargo test -p kestrel-reliable corpus` rewrites the seeds.
    #[test]
    fn committed_seed_corpus_matches_the_generator() {
        let dir = corpus_dir();
        let write = std::env::var_os("KESTREL_WRITE_FUZZ_CORPUS").is_some();
        if write {
            std::fs::create_dir_all(&dir).unwrap();
        }
        for (name, bytes) in seed_corpus() {
            let path = dir.join(name);
            if write {
                std::fs::write(&path, &bytes).unwrap();
            }
            let committed = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "seed {} missing ({e}); regenerate with KESTREL_WRITE_FUZZ_CORPUS=1",
                    path.display()
                )
            });
            assert_eq!(committed, bytes, "seed {name} differs from the generator");
        }
    }

    #[test]
    fn seeds_decode_or_fail_as_named() {
        for (name, bytes) in seed_corpus() {
            let result = wire::decode(&bytes, FUZZ_KEY);
            let valid = ["data_", "ack_plain", "ack_selective", "probe"]
                .iter()
                .any(|p| name.starts_with(p))
                && name != "probe_reserved_nonzero";
            assert_eq!(result.is_ok(), valid, "{name}: {result:?}");
        }
    }

    /// What CI runs of the fuzz target: every file of the corpus (seeds and anything a fuzzing
    /// run added) through `fuzz_one`.
    #[test]
    fn corpus_replays_through_fuzz_one() {
        let mut n = 0;
        for entry in std::fs::read_dir(corpus_dir()).unwrap() {
            let path = entry.unwrap().path();
            fuzz_one(&std::fs::read(&path).unwrap());
            n += 1;
        }
        assert!(n >= seed_corpus().len());
    }

    /// A small in-tree fuzzer: random mutations of the seeds (bit flips, byte sets, cuts,
    /// extensions), so every test run explores a little beyond the corpus.
    #[test]
    fn mutated_seeds_never_break_a_property() {
        let seeds = seed_corpus();
        let mut rng = Rng::new(0xF022);
        let mut decoded = 0;
        for _ in 0..3000 {
            let (_, seed) = &seeds[rng.below(seeds.len() as u64) as usize];
            let mut d = seed.clone();
            for _ in 0..=rng.below(4) {
                match rng.below(4) {
                    0 if !d.is_empty() => {
                        let i = rng.below(d.len() as u64) as usize;
                        d[i] ^= 1 << rng.below(8);
                    }
                    1 if !d.is_empty() => {
                        // Mostly the header's fields, where decisions are made.
                        let i = rng.below(d.len().min(HEADER_LEN) as u64) as usize;
                        d[i] = rng.next_u64() as u8;
                    }
                    2 => d.truncate(rng.below(d.len() as u64 + 1) as usize),
                    _ => d.extend((0..rng.below(40)).map(|_| rng.next_u64() as u8)),
                }
            }
            decoded += usize::from(wire::decode(&d, FUZZ_KEY).is_ok());
            fuzz_one(&d);
        }
        // Enough mutants get past the decoder to exercise the connection paths.
        assert!(decoded > 300, "only {decoded} mutants decoded");
    }
}
