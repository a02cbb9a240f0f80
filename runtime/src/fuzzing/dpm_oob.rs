//! The `dpm_oob` fuzz target: the connect/accept frames of [`crate::dpm::oob`] and the stream
//! reader the out-of-band listener runs on every socket a stranger opens.
//!
//! An input is used twice: as one frame body ([`OobMsg::decode`]) and as a byte stream read
//! frame by frame ([`read_frame`]). Checked: neither panics; a decoded body re-encodes to the
//! same bytes, and a message read from the stream re-encodes to exactly the bytes it was read
//! from; the stream yields the same messages and the same end whether the socket hands it over
//! whole, in small pieces or with interrupted reads; and the reader never asks for more than
//! [`READ_STEP`] bytes at once, so that a length field alone (four bytes from a stranger) never
//! makes it allocate the 16 MiB a frame may have.

use std::io::{ErrorKind, Read};

use crate::dpm::oob::{read_frame, FrameError, OobMsg, ProcInfo, MAGIC, OOB_VERSION, READ_STEP};

/// The target's name (its corpus is `fuzz/corpus/dpm_oob`).
pub const TARGET: &str = "dpm_oob";

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    match OobMsg::decode(data) {
        Ok(msg) => {
            let _ = msg.kind();
            assert_eq!(msg.encode_body(), data, "{msg:?} re-encodes differently");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
    let whole = read_stream(data, usize::MAX, false);
    for (chunk, interrupt) in [(1, false), (3, true), (7, false), (64, true)] {
        let pieces = read_stream(data, chunk, interrupt);
        assert!(
            pieces == whole,
            "read {chunk} bytes at a time (interrupted: {interrupt}), the stream gives \
             {pieces:?}, read whole {whole:?}"
        );
    }
}

/// How reading a stream frame by frame ended.
#[derive(Debug, PartialEq)]
enum StreamEnd {
    /// The peer closed it (between frames or inside one).
    Closed,
    /// A malformed frame.
    Malformed,
}

/// The socket as the reader sees it: at most `chunk` bytes per read, every third read
/// interrupted by a signal when `interrupt` is set, and a record of the largest read asked for.
struct Socket<'a> {
    data: &'a [u8],
    pos: usize,
    chunk: usize,
    interrupt: bool,
    reads: usize,
    largest: usize,
}

impl Read for Socket<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.reads += 1;
        self.largest = self.largest.max(buf.len());
        if self.interrupt && self.reads.is_multiple_of(3) {
            return Err(ErrorKind::Interrupted.into());
        }
        let n = buf.len().min(self.chunk).min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

fn read_stream(data: &[u8], chunk: usize, interrupt: bool) -> (Vec<OobMsg>, StreamEnd) {
    let mut socket = Socket {
        data,
        pos: 0,
        chunk,
        interrupt,
        reads: 0,
        largest: 0,
    };
    let mut msgs = Vec::new();
    let end = loop {
        let from = socket.pos;
        let result = read_frame(&mut socket);
        assert!(
            socket.largest <= READ_STEP,
            "the reader asked for {} bytes at once",
            socket.largest
        );
        match result {
            Ok(msg) => {
                assert_eq!(
                    msg.encode(),
                    &data[from..socket.pos],
                    "{msg:?} was read from other bytes than it encodes to"
                );
                msgs.push(msg);
            }
            Err(FrameError::Closed) => break StreamEnd::Closed,
            Err(FrameError::Malformed(e)) => {
                let _ = FrameError::Malformed(e).to_string();
                break StreamEnd::Malformed;
            }
            Err(FrameError::Io(e)) => panic!("an interrupted read was not retried: {e}"),
        }
    };
    (msgs, end)
}

/// The seed corpus: every message as a frame and as a bare body, a whole connection, and the
/// typical ways a frame goes wrong, by file name.
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let group = vec![
        ProcInfo {
            job: "abc".into(),
            rank: 0,
            node: "n0".into(),
            contact: "127.0.0.1:5".into(),
        },
        ProcInfo {
            job: "abc".into(),
            rank: 1,
            node: String::new(),
            contact: "10.0.0.1,127.0.0.1:6".into(),
        },
    ];
    let connect = OobMsg::Connect {
        tag: 7,
        proof: vec![1; 32],
        nonce: vec![2; 32],
        group: group.clone(),
        ctx: 12,
    };
    let accept = OobMsg::Accept {
        conn: u64::MAX - 3,
        proof: vec![3; 32],
        group,
        ctx: 65534,
    };
    let cards = OobMsg::Cards {
        cards: vec![vec![], vec![1, 2, 3]],
    };
    let ready = OobMsg::Ready {
        ok: true,
        reason: String::new(),
    };
    let stream = |msgs: &[&OobMsg]| msgs.iter().flat_map(|m| m.encode()).collect::<Vec<u8>>();
    let header = |msg_type: u8| {
        let mut b = MAGIC.to_vec();
        b.extend([OOB_VERSION, msg_type]);
        b
    };
    let mut lying_cards = header(4);
    lying_cards.extend([0xff, 0xff, 0xff, 0xff]);
    let mut bad_flag = header(5);
    bad_flag.extend([2, 0, 0, 0, 0]);
    let mut trailing = OobMsg::LifelineOk.encode_body();
    trailing.push(0);
    let mut old_version = connect.encode_body();
    old_version[4] = 1;
    let mut bad_magic = connect.encode_body();
    bad_magic[0] = b'X';
    let challenge = OobMsg::Challenge { nonce: vec![5; 32] };
    let mut frames = vec![
        ("frame_connect", connect.encode()),
        ("frame_accept", accept.encode()),
        (
            "frame_refuse",
            OobMsg::Refuse {
                reason: "closed".into(),
            }
            .encode(),
        ),
        ("frame_cards", cards.encode()),
        ("frame_ready", ready.encode()),
        (
            "frame_lifeline",
            OobMsg::Lifeline {
                conn: 9,
                job: "j".into(),
                rank: 4,
            }
            .encode(),
        ),
        ("frame_lifeline_ok", OobMsg::LifelineOk.encode()),
        (
            "frame_spawn_failed",
            OobMsg::SpawnFailed {
                tag: 3,
                proof: vec![4; 32],
                reason: "exit 1".into(),
            }
            .encode(),
        ),
        ("frame_challenge", challenge.encode()),
        (
            "stream_connection",
            stream(&[&challenge, &connect, &accept, &cards, &ready]),
        ),
        ("stream_closed_inside_a_frame", {
            let mut s = stream(&[&challenge]);
            s.extend(&connect.encode()[..20]);
            s
        }),
        // Found by this target: the reader allocated the length field's 16 MiB before any of
        // the body arrived.
        (
            "stream_length_at_the_limit_then_closed",
            vec![1, 0, 0, 0, 0],
        ),
        ("stream_length_over_the_limit", vec![1, 0, 0, 1, 0]),
        ("stream_zero_length", vec![0, 0, 0, 0]),
    ];
    let bodies = vec![
        ("body_connect", connect.encode_body()),
        ("body_cards", cards.encode_body()),
        ("body_ready", ready.encode_body()),
        ("body_bad_magic", bad_magic),
        ("body_old_version", old_version),
        ("body_unknown_type", header(42)),
        ("body_cards_lying_count", lying_cards),
        ("body_ready_bad_flag", bad_flag),
        ("body_trailing_byte", trailing),
        ("empty", vec![]),
    ];
    frames.extend(bodies);
    frames
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_decode_or_fail_as_named() {
        for (name, bytes) in seed_corpus() {
            let (msgs, end) = read_stream(&bytes, usize::MAX, false);
            if let Some(kind) = name.strip_prefix("frame_") {
                assert_eq!(msgs.len(), 1, "{name}");
                assert_eq!(end, StreamEnd::Closed, "{name}");
                let kind = kind.replace('_', "");
                assert_eq!(msgs[0].kind().to_lowercase(), kind, "{name}");
            } else if name.starts_with("body_") {
                let valid = ["body_connect", "body_cards", "body_ready"].contains(&name);
                assert_eq!(OobMsg::decode(&bytes).is_ok(), valid, "{name}");
            } else if name == "stream_connection" {
                assert_eq!((msgs.len(), end), (5, StreamEnd::Closed));
            } else if name.contains("over_the_limit") || name.contains("zero_length") {
                assert_eq!(end, StreamEnd::Malformed, "{name}");
            }
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[
            MAGIC,
            &[OOB_VERSION],
            &[0, 0, 0, 0],
            &[0xff, 0xff, 0xff, 0xff],
        ];
        fuzz_corpus::mutate_seeds(&seed_corpus(), 3000, 0xd93, 16, tokens, fuzz_one);
    }
}
