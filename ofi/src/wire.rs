//! The frame in front of every ofi message: who sent it, for which set, with which
//! active-message tag, its place in the sender's stream to this receiver, and how much of the
//! receiver's stream the sender has (the acknowledgement [`crate::paths`] watches).
//!
//! ```text
//! offset  size  field
//!      0     1  version (3)
//!      1     1  am: the active-message tag the sender's messaging layer chose (0 in an ack)
//!      2     1  kind: 0 data (handed up), 1 ack (only the acknowledgement; no data)
//!      3     1  flags: bit 0 striped (a data frame sent on another pair than the sender's
//!               active one, which the receiver must not take for a move); other bits zero
//!      4     4  sender: the sender's index in the set (little-endian)
//!      8     8  key: the set's key (little-endian); a frame with another key is a stranger's
//!     16     4  seq: this data frame's number in the sender's stream to the receiver (LE,
//!               wrapping; 0 in an ack)
//!     20     4  ack: the receiver's stream as far as the sender has it: the next number it
//!               expects (LE, wrapping)
//!     24     -  header and payload, as the sender's messaging layer handed them over
//! ```
//!
//! The provider delivers messages whole, but anyone who can reach the endpoint's address
//! (a TCP port, for `tcp;ofi_rxm`) can send one, so every received frame is decoded here with
//! typed errors before anything above sees it. This module owns the layout; it must never
//! decide what to do with a bad frame (the transport counts and drops it).

use std::fmt;

/// Bytes of the frame before the messaging layer's bytes.
pub const FRAME_LEN: usize = 24;

/// The frame version this build writes and reads.
pub const VERSION: u8 = 3;

/// Flag bit: a data frame striped over a pair other than the sender's active one.
pub const FLAG_STRIPED: u8 = 1;

/// What a frame carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A message of the messaging layer, numbered in the sender's stream.
    Data,
    /// Only an acknowledgement (sent when there is no data to carry it).
    Ack,
}

impl Kind {
    fn byte(self) -> u8 {
        match self {
            Kind::Data => 0,
            Kind::Ack => 1,
        }
    }
}

/// The fields of a frame header, as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Data or ack.
    pub kind: Kind,
    /// Active-message tag (0 in an ack).
    pub am: u8,
    /// The sender's index in the set.
    pub sender: u32,
    /// The set's key.
    pub key: u64,
    /// This data frame's number (0 in an ack).
    pub seq: u32,
    /// The next number the sender expects from the receiver.
    pub ack: u32,
    /// Sent on another pair than the sender's active one (data frames only).
    pub striped: bool,
}

/// A decoded frame: its fields and the messaging layer's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Data or ack.
    pub kind: Kind,
    /// Active-message tag.
    pub am: u8,
    /// The sender's index in the set.
    pub sender: u32,
    /// This data frame's number in the sender's stream.
    pub seq: u32,
    /// The next number the sender expects from us.
    pub ack: u32,
    /// Striped over a pair other than the sender's active one.
    pub striped: bool,
    /// Header and payload (empty in an ack).
    pub data: &'a [u8],
}

/// Why a received message was not a frame of this set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameError {
    /// Shorter than the frame header.
    Short {
        /// Bytes received.
        len: usize,
    },
    /// Another frame version (a peer of another Kestrel build).
    Version {
        /// The version found.
        found: u8,
    },
    /// A flag bit this version does not define is set, or the striped flag on an ack.
    Reserved,
    /// The kind byte names no kind.
    Kind {
        /// The byte found.
        found: u8,
    },
    /// An ack frame with bytes after the header.
    AckWithData {
        /// Bytes after the header.
        len: usize,
    },
    /// The key is not this set's: a stranger's message, or one from another job.
    Key,
    /// The sender index names no peer of this set.
    Sender {
        /// The index found.
        sender: u32,
    },
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::Short { len } => write!(
                f,
                "ofi frame of {len} bytes is shorter than its {FRAME_LEN}-byte header"
            ),
            FrameError::Version { found } => write!(
                f,
                "ofi frame version {found}, this build speaks {VERSION} (mixed Kestrel versions?)"
            ),
            FrameError::Reserved => write!(f, "ofi frame with unknown flag bits set"),
            FrameError::Kind { found } => write!(f, "ofi frame of unknown kind {found}"),
            FrameError::AckWithData { len } => {
                write!(f, "ofi frame of kind ack carrying {len} bytes of data")
            }
            FrameError::Key => write!(
                f,
                "ofi frame with another set's key (a stranger's message or another job's)"
            ),
            FrameError::Sender { sender } => {
                write!(
                    f,
                    "ofi frame from index {sender}, which is no peer of this set"
                )
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// Writes `header` into the first [`FRAME_LEN`] bytes of `out`. Panics if `out` is shorter
/// (a caller's bug: send slots are always larger).
pub fn write_header(out: &mut [u8], header: &Header) {
    let h = &mut out[..FRAME_LEN];
    h[0] = VERSION;
    h[1] = header.am;
    h[2] = header.kind.byte();
    h[3] = if header.striped { FLAG_STRIPED } else { 0 };
    h[4..8].copy_from_slice(&header.sender.to_le_bytes());
    h[8..16].copy_from_slice(&header.key.to_le_bytes());
    h[16..20].copy_from_slice(&header.seq.to_le_bytes());
    h[20..24].copy_from_slice(&header.ack.to_le_bytes());
}

/// Decodes a received message: checks length, version, kind, flags, key, and that
/// `is_peer(sender)` holds.
pub fn decode(
    bytes: &[u8],
    key: u64,
    is_peer: impl FnOnce(u32) -> bool,
) -> Result<Frame<'_>, FrameError> {
    if bytes.len() < FRAME_LEN {
        return Err(FrameError::Short { len: bytes.len() });
    }
    if bytes[0] != VERSION {
        return Err(FrameError::Version { found: bytes[0] });
    }
    let kind = match bytes[2] {
        0 => Kind::Data,
        1 => Kind::Ack,
        found => return Err(FrameError::Kind { found }),
    };
    let flags = bytes[3];
    if flags & !FLAG_STRIPED != 0 || (kind == Kind::Ack && flags != 0) {
        return Err(FrameError::Reserved);
    }
    let sender = u32::from_le_bytes(bytes[4..8].try_into().expect("4 bytes"));
    let found_key = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    if found_key != key {
        return Err(FrameError::Key);
    }
    if !is_peer(sender) {
        return Err(FrameError::Sender { sender });
    }
    let data = &bytes[FRAME_LEN..];
    if kind == Kind::Ack && !data.is_empty() {
        return Err(FrameError::AckWithData { len: data.len() });
    }
    Ok(Frame {
        kind,
        am: bytes[1],
        sender,
        seq: u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")),
        ack: u32::from_le_bytes(bytes[20..24].try_into().expect("4 bytes")),
        striped: flags & FLAG_STRIPED != 0,
        data,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(am: u8, sender: u32, key: u64, data: &[u8]) -> Vec<u8> {
        let mut v = vec![0u8; FRAME_LEN + data.len()];
        let h = Header {
            kind: Kind::Data,
            am,
            sender,
            key,
            seq: 0xffff_fffe,
            ack: 17,
            striped: false,
        };
        write_header(&mut v, &h);
        v[FRAME_LEN..].copy_from_slice(data);
        v
    }

    #[test]
    fn frames_round_trip() {
        let v = frame(7, 3, 0xfeed_beef_0123_4567, b"hello");
        let f = decode(&v, 0xfeed_beef_0123_4567, |s| s == 3).unwrap();
        assert_eq!(
            f,
            Frame {
                kind: Kind::Data,
                am: 7,
                sender: 3,
                seq: 0xffff_fffe,
                ack: 17,
                striped: false,
                data: b"hello"
            }
        );
        let mut striped = v.clone();
        striped[3] = FLAG_STRIPED;
        assert!(
            decode(&striped, 0xfeed_beef_0123_4567, |_| true)
                .unwrap()
                .striped
        );
        let empty = frame(1, 0, 9, &[]);
        assert_eq!(decode(&empty, 9, |_| true).unwrap().data, &[] as &[u8]);
        let mut ack = vec![0u8; FRAME_LEN];
        let h = Header {
            kind: Kind::Ack,
            am: 0,
            sender: 1,
            key: 9,
            seq: 0,
            ack: 5,
            striped: false,
        };
        write_header(&mut ack, &h);
        let f = decode(&ack, 9, |_| true).unwrap();
        assert_eq!((f.kind, f.ack, f.data.len()), (Kind::Ack, 5, 0));
    }

    #[test]
    fn every_bad_field_is_named() {
        let good = frame(1, 2, 42, b"x");
        assert_eq!(
            decode(&good[..23], 42, |_| true),
            Err(FrameError::Short { len: 23 })
        );
        let mut v = good.clone();
        v[0] = 9;
        assert_eq!(
            decode(&v, 42, |_| true),
            Err(FrameError::Version { found: 9 })
        );
        let mut v = good.clone();
        v[3] = 2;
        assert_eq!(decode(&v, 42, |_| true), Err(FrameError::Reserved));
        let mut ack = frame(0, 2, 42, b"");
        ack[2] = 1;
        assert!(decode(&ack, 42, |_| true).is_ok());
        ack[3] = FLAG_STRIPED;
        assert_eq!(
            decode(&ack, 42, |_| true),
            Err(FrameError::Reserved),
            "an ack is never striped"
        );
        let mut v = good.clone();
        v[2] = 7;
        assert_eq!(decode(&v, 42, |_| true), Err(FrameError::Kind { found: 7 }));
        let mut v = good.clone();
        v[2] = 1;
        assert_eq!(
            decode(&v, 42, |_| true),
            Err(FrameError::AckWithData { len: 1 })
        );
        assert_eq!(decode(&good, 43, |_| true), Err(FrameError::Key));
        assert_eq!(
            decode(&good, 42, |s| s != 2),
            Err(FrameError::Sender { sender: 2 })
        );
        for e in [
            FrameError::Short { len: 1 },
            FrameError::Version { found: 2 },
            FrameError::Reserved,
            FrameError::Kind { found: 3 },
            FrameError::AckWithData { len: 2 },
            FrameError::Key,
            FrameError::Sender { sender: 5 },
        ] {
            assert!(e.to_string().starts_with("ofi frame"), "{e}");
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic() {
        // A deterministic sweep of short and mutated inputs stands in for a fuzzer here.
        let base = frame(3, 1, 77, &[5; 40]);
        for len in 0..base.len() {
            let _ = decode(&base[..len], 77, |s| s < 4);
        }
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for _ in 0..10_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let mut v = base.clone();
            let i = (state as usize) % v.len();
            v[i] = (state >> 32) as u8;
            if let Ok(f) = decode(&v, 77, |s| s < 4) {
                assert!(f.sender < 4);
                assert_eq!(f.data.len(), v.len() - FRAME_LEN);
            }
        }
    }
}
