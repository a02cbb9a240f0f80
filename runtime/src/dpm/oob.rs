//! The out-of-band messages of connect/accept and their checked binary codec.
//!
//! Two processes that are not yet connected by any transport talk over TCP in frames: a
//! 4-byte big-endian length, then the magic `KDPM`, a version byte, a message type byte and
//! the fields. Integers are big-endian; strings, byte strings and lists carry a 4-byte length.
//! Every length is checked against what is left of the frame before anything is allocated, and
//! trailing bytes are an error, so a stranger or a confused peer produces an [`OobError`],
//! never a panic. The same frames travel over point-to-point messages when two groups already
//! share a communicator (`intercomm_create`).
//!
//! A connection runs: `Challenge` (the listener's first frame on every socket), `Connect`
//! (connecting root → accepting root, with its proof of the port's token over the challenge and
//! its own nonce), `Accept` (with the acceptor's proof over that nonce) or `Refuse`, `Cards`
//! both ways, `Ready` both ways. Over an existing communicator (`intercomm_create`) there is no
//! challenge and the proofs are empty. Lifeline sockets open with `Lifeline` and are answered
//! with `LifelineOk`; a launcher that sees a spawned job die before it connected sends
//! `SpawnFailed` to the spawning root's port.

use std::fmt;
use std::io::{Read, Write};

/// The first bytes of every frame body.
pub const MAGIC: &[u8; 4] = b"KDPM";
/// The protocol version this code speaks.
pub const OOB_VERSION: u8 = 2;
/// Largest frame accepted (cards of thousands of processes fit).
pub const MAX_FRAME: usize = 16 << 20;
/// Most bytes [`read_frame`] asks the stream for at once: a frame's body buffer grows by this
/// much as its bytes arrive, so a stranger's length field alone cannot make the listener
/// allocate [`MAX_FRAME`].
pub const READ_STEP: usize = 64 << 10;

/// One process of a group taking part in a connection.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcInfo {
    /// Its job id.
    pub job: String,
    /// Its rank in that job.
    pub rank: u32,
    /// Its node id (processes with equal ids share memory).
    pub node: String,
    /// `ip[,ip...]:port` of its out-of-band listener (for lifelines).
    pub contact: String,
}

/// An out-of-band message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OobMsg {
    /// The connecting root introduces its group.
    Connect {
        /// The port tag it wants.
        tag: u32,
        /// Its proof of the port's token over the listener's challenge (see
        /// [`super::listener`]); empty over a communicator.
        proof: Vec<u8>,
        /// Its own challenge, which the acceptor's `Accept` proves the token over.
        nonce: Vec<u8>,
        /// Its group, in rank order.
        group: Vec<ProcInfo>,
        /// The smallest context id free on every member of its group.
        ctx: u16,
    },
    /// The accepting root accepts and introduces its group.
    Accept {
        /// The connection's id (random; names its transports and keys its datagrams).
        conn: u64,
        /// The acceptor's proof of the port's token over the connector's nonce; empty over a
        /// communicator.
        proof: Vec<u8>,
        /// Its group, in rank order.
        group: Vec<ProcInfo>,
        /// The context id of the new inter-communicator (free on every member of both groups).
        ctx: u16,
    },
    /// The port refuses (closed, or the accepting side failed).
    Refuse {
        /// Why, in words.
        reason: String,
    },
    /// Every member's transport cards, in group rank order.
    Cards {
        /// One opaque blob per member.
        cards: Vec<Vec<u8>>,
    },
    /// Whether every member of a group finished setting up.
    Ready {
        /// True when all did.
        ok: bool,
        /// What failed otherwise.
        reason: String,
    },
    /// First frame of a lifeline socket.
    Lifeline {
        /// The connection it belongs to.
        conn: u64,
        /// The sender's job id.
        job: String,
        /// The sender's rank in its job.
        rank: u32,
    },
    /// The lifeline is registered.
    LifelineOk,
    /// A spawned job ended before it connected to the spawning root's port.
    SpawnFailed {
        /// The port's tag.
        tag: u32,
        /// The launcher's proof of the port's token over the listener's challenge.
        proof: Vec<u8>,
        /// How the job ended.
        reason: String,
    },
    /// The listener's first frame on every connection: what a `Connect` or `SpawnFailed`
    /// must prove the port's token over.
    Challenge {
        /// Fresh random bytes.
        nonce: Vec<u8>,
    },
}

impl OobMsg {
    /// Short name for messages.
    pub fn kind(&self) -> &'static str {
        match self {
            OobMsg::Connect { .. } => "Connect",
            OobMsg::Accept { .. } => "Accept",
            OobMsg::Refuse { .. } => "Refuse",
            OobMsg::Cards { .. } => "Cards",
            OobMsg::Ready { .. } => "Ready",
            OobMsg::Lifeline { .. } => "Lifeline",
            OobMsg::LifelineOk => "LifelineOk",
            OobMsg::SpawnFailed { .. } => "SpawnFailed",
            OobMsg::Challenge { .. } => "Challenge",
        }
    }
}

/// A connect/accept frame that could not be decoded.
pub type OobError = crate::codec::DecodeError;

use crate::codec::{Reader, Writer};

/// How connect/accept frames are named in decode errors.
const FRAME: &str = "connect/accept message";

fn bad(what: &'static str, reason: &'static str) -> OobError {
    OobError {
        frame: FRAME,
        what,
        reason,
    }
}

fn read_group(r: &mut Reader) -> Result<Vec<ProcInfo>, OobError> {
    let n = r.count("group", 16)?;
    (0..n)
        .map(|_| {
            Ok(ProcInfo {
                job: r.string("member job")?,
                rank: r.u32("member rank")?,
                node: r.string("member node")?,
                contact: r.string("member contact")?,
            })
        })
        .collect()
}

/// A group: a count, then each process's job, rank, node and contact.
fn write_group(w: &mut Writer, g: &[ProcInfo]) {
    w.u32(g.len() as u32);
    for p in g {
        w.string(&p.job)
            .u32(p.rank)
            .string(&p.node)
            .string(&p.contact);
    }
}

impl OobMsg {
    /// The frame body (magic, version, type, fields), without the length prefix.
    pub fn encode_body(&self) -> Vec<u8> {
        let mut w = Writer::new();
        w.raw(MAGIC);
        w.u8(OOB_VERSION);
        match self {
            OobMsg::Connect {
                tag,
                proof,
                nonce,
                group,
                ctx,
            } => {
                w.u8(1);
                w.u32(*tag);
                w.bytes(proof);
                w.bytes(nonce);
                write_group(&mut w, group);
                w.u16(*ctx);
            }
            OobMsg::Accept {
                conn,
                proof,
                group,
                ctx,
            } => {
                w.u8(2);
                w.u64(*conn);
                w.bytes(proof);
                write_group(&mut w, group);
                w.u16(*ctx);
            }
            OobMsg::Refuse { reason } => {
                w.u8(3);
                w.string(reason);
            }
            OobMsg::Cards { cards } => {
                w.u8(4);
                w.u32(cards.len() as u32);
                for c in cards {
                    w.bytes(c);
                }
            }
            OobMsg::Ready { ok, reason } => {
                w.u8(5);
                w.u8(u8::from(*ok));
                w.string(reason);
            }
            OobMsg::Lifeline { conn, job, rank } => {
                w.u8(6);
                w.u64(*conn);
                w.string(job);
                w.u32(*rank);
            }
            OobMsg::LifelineOk => {
                w.u8(7);
            }
            OobMsg::SpawnFailed { tag, proof, reason } => {
                w.u8(8);
                w.u32(*tag);
                w.bytes(proof);
                w.string(reason);
            }
            OobMsg::Challenge { nonce } => {
                w.u8(9);
                w.bytes(nonce);
            }
        }
        w.into_vec()
    }

    /// The whole frame, length included.
    pub fn encode(&self) -> Vec<u8> {
        let body = self.encode_body();
        let mut out = (body.len() as u32).to_be_bytes().to_vec();
        out.extend_from_slice(&body);
        out
    }

    /// Decodes a frame body (without the length prefix).
    pub fn decode(body: &[u8]) -> Result<OobMsg, OobError> {
        let mut r = Reader::new(body, FRAME);
        if r.take(4, "magic")? != MAGIC {
            return Err(bad("magic", "not a Kestrel connect/accept message"));
        }
        if r.u8("version")? != OOB_VERSION {
            return Err(bad(
                "version",
                "the peer speaks another protocol version (mixed Kestrel versions?)",
            ));
        }
        let msg = match r.u8("message type")? {
            1 => OobMsg::Connect {
                tag: r.u32("connect tag")?,
                proof: r.bytes("connect proof")?,
                nonce: r.bytes("connect nonce")?,
                group: read_group(&mut r)?,
                ctx: r.u16("connect context")?,
            },
            2 => OobMsg::Accept {
                conn: r.u64("accept connection id")?,
                proof: r.bytes("accept proof")?,
                group: read_group(&mut r)?,
                ctx: r.u16("accept context")?,
            },
            3 => OobMsg::Refuse {
                reason: r.string("refusal")?,
            },
            4 => {
                let n = r.count("cards", 4)?;
                let mut cards = Vec::with_capacity(n);
                for _ in 0..n {
                    cards.push(r.bytes("card")?);
                }
                OobMsg::Cards { cards }
            }
            5 => OobMsg::Ready {
                ok: r.bool("ready flag")?,
                reason: r.string("ready reason")?,
            },
            6 => OobMsg::Lifeline {
                conn: r.u64("lifeline connection id")?,
                job: r.string("lifeline job")?,
                rank: r.u32("lifeline rank")?,
            },
            7 => OobMsg::LifelineOk,
            8 => OobMsg::SpawnFailed {
                tag: r.u32("spawn failure tag")?,
                proof: r.bytes("spawn failure proof")?,
                reason: r.string("spawn failure reason")?,
            },
            9 => OobMsg::Challenge {
                nonce: r.bytes("challenge")?,
            },
            _ => return Err(bad("message type", "unknown message type")),
        };
        r.finish("message")?;
        Ok(msg)
    }
}

/// Why reading or writing a frame on a stream failed.
#[derive(Debug)]
pub enum FrameError {
    /// The socket failed (or timed out).
    Io(std::io::Error),
    /// The peer closed the connection before a whole frame.
    Closed,
    /// The bytes are not a frame.
    Malformed(OobError),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Io(e) => write!(f, "{e}"),
            FrameError::Closed => write!(f, "the peer closed the connection"),
            FrameError::Malformed(e) => write!(f, "{e}"),
        }
    }
}

/// Writes one frame.
pub fn write_frame(stream: &mut impl Write, msg: &OobMsg) -> Result<(), FrameError> {
    stream.write_all(&msg.encode()).map_err(FrameError::Io)?;
    stream.flush().map_err(FrameError::Io)
}

/// Reads one frame (the stream's read timeout bounds the wait); its buffer grows with the bytes
/// that arrive, [`READ_STEP`] at a time.
pub fn read_frame(stream: &mut impl Read) -> Result<OobMsg, FrameError> {
    let mut len = [0u8; 4];
    read_exact_or_closed(stream, &mut len)?;
    let n = u32::from_be_bytes(len) as usize;
    if n > MAX_FRAME {
        return Err(FrameError::Malformed(bad(
            "frame length",
            "larger than 16 MiB",
        )));
    }
    let mut body = Vec::new();
    while body.len() < n {
        let start = body.len();
        body.resize(start + (n - start).min(READ_STEP), 0);
        read_exact_or_closed(stream, &mut body[start..])?;
    }
    OobMsg::decode(&body).map_err(FrameError::Malformed)
}

fn read_exact_or_closed(stream: &mut impl Read, buf: &mut [u8]) -> Result<(), FrameError> {
    let mut got = 0;
    while got < buf.len() {
        match stream.read(&mut buf[got..]) {
            Ok(0) => return Err(FrameError::Closed),
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(FrameError::Io(e)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<OobMsg> {
        let g = vec![
            ProcInfo {
                job: "abc".into(),
                rank: 0,
                node: "n0".into(),
                contact: "127.0.0.1:5".into(),
            },
            ProcInfo {
                job: "abc".into(),
                rank: 1,
                node: "".into(),
                contact: "10.0.0.1,127.0.0.1:6".into(),
            },
        ];
        vec![
            OobMsg::Connect {
                tag: 7,
                proof: vec![1; 32],
                nonce: vec![2; 32],
                group: g.clone(),
                ctx: 12,
            },
            OobMsg::Accept {
                conn: u64::MAX - 3,
                proof: vec![3; 32],
                group: g,
                ctx: 65534,
            },
            OobMsg::Refuse {
                reason: "closed".into(),
            },
            OobMsg::Cards {
                cards: vec![vec![], vec![1, 2, 3]],
            },
            OobMsg::Ready {
                ok: false,
                reason: "x".into(),
            },
            OobMsg::Lifeline {
                conn: 9,
                job: "j".into(),
                rank: 4,
            },
            OobMsg::LifelineOk,
            OobMsg::SpawnFailed {
                tag: 3,
                proof: vec![4; 32],
                reason: "exit 1".into(),
            },
            OobMsg::Challenge { nonce: vec![5; 32] },
        ]
    }

    #[test]
    fn every_message_round_trips_through_a_stream() {
        let mut wire = Vec::new();
        for m in samples() {
            write_frame(&mut wire, &m).unwrap();
        }
        let mut cur = std::io::Cursor::new(wire);
        for m in samples() {
            assert_eq!(read_frame(&mut cur).unwrap(), m);
        }
        assert!(matches!(read_frame(&mut cur), Err(FrameError::Closed)));
    }

    #[test]
    fn truncations_and_mutations_are_errors_not_panics() {
        for m in samples() {
            let body = m.encode_body();
            for end in 0..body.len() {
                assert!(OobMsg::decode(&body[..end]).is_err(), "{m:?} cut at {end}");
            }
            let mut longer = body.clone();
            longer.push(0);
            assert_eq!(
                OobMsg::decode(&longer).unwrap_err().reason,
                "trailing bytes after the message"
            );
            for i in 0..body.len() {
                for b in [0u8, 1, 0x7f, 0xff] {
                    let mut x = body.clone();
                    x[i] = b;
                    let _ = OobMsg::decode(&x);
                }
            }
        }
        let mut bad = samples()[0].encode_body();
        bad[0] = b'X';
        assert_eq!(OobMsg::decode(&bad).unwrap_err().what, "magic");
        let mut v1 = samples()[0].encode_body();
        v1[4] = 1;
        assert_eq!(OobMsg::decode(&v1).unwrap_err().what, "version");
        // A huge count is refused before allocation.
        let mut w = MAGIC.to_vec();
        w.extend_from_slice(&[OOB_VERSION, 4, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            OobMsg::decode(&w).unwrap_err().reason,
            "count larger than the frame can hold"
        );
        let mut huge = std::io::Cursor::new(vec![0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(
            read_frame(&mut huge),
            Err(FrameError::Malformed(_))
        ));
    }
}
