//! The datagram header of the reliable-datagram protocol: layout, checked decoder, encoder.
//!
//! This module owns the bytes on the wire and nothing else. It must never touch connection
//! state, never trust a length it has not checked against the datagram, and never panic,
//! whatever the input: every datagram that reaches it may come from a stranger.
//!
//! # Layout
//!
//! Every datagram is a fixed 32-byte header, then `payload_len` payload bytes, then possibly
//! padding (short frames can be padded below us; the header's length is authoritative and
//! anything after the payload is ignored). All integers are little-endian.
//!
//! | offset | size | field | meaning |
//! |---|---|---|---|
//! | 0 | 1 | `format` | high nibble [`MAGIC`] (`0xA`), low nibble [`VERSION`] (1) |
//! | 1 | 1 | `kind` | 1 DATA, 2 ACK, 3 PROBE, 4 PROBE_REPLY |
//! | 2 | 1 | `flags` | bit 0 `ACK_PRESENT` (DATA: the `ack` field is valid; ACK: always set); other bits zero |
//! | 3 | 1 | `am` | DATA: active-message tag of the message; zero otherwise |
//! | 4 | 8 | `key` | per-job key from the launcher; a datagram with another key is dropped |
//! | 12 | 4 | `src_rank` | job rank of the sender |
//! | 16 | 1 | `src_rail` | the sender's rail (interface) index |
//! | 17 | 1 | `dst_rail` | the receiver's rail index the sender meant |
//! | 18 | 2 | `seq` | DATA: segment sequence number; ACK: `latest`, the segment the receiver got last (equal to `ack` if none is buffered beyond it); zero otherwise |
//! | 20 | 2 | `ack` | with `ACK_PRESENT`: cumulative ACK, the last in-order segment received; zero otherwise |
//! | 22 | 2 | `payload_len` | payload bytes after the header |
//! | 24 | 4 | `msg_len` / `sack_lo` | DATA: total length of the message; ACK: bits 0..32 of the selective-ACK bitmap; zero otherwise |
//! | 28 | 4 | `offset` / `sack_hi` | DATA: where this payload starts in the message; ACK: bits 32..64 of the bitmap; zero otherwise |
//!
//! Selective-ACK bitmap: bit `i` set means segment `ack + 2 + i` has been received (segment
//! `ack + 1` is the first missing one, or the cumulative ACK would be past it).
//!
//! Rules checked by [`decode`] (and by [`encode`], so that anything encoded decodes again):
//! * DATA: `offset + payload_len <= msg_len`, and a non-empty message has no empty fragment;
//! * ACK: `ACK_PRESENT` set, no payload;
//! * PROBE / PROBE_REPLY: unsequenced connectivity probes for the transport above; the payload
//!   is opaque here; flags, `am`, `seq`, `ack` and bytes 24..32 are zero;
//! * every field documented as zero is zero (so a later version can give them meaning).

use std::fmt;

/// Bytes of the fixed header.
pub const HEADER_LEN: usize = 32;
/// High nibble of the format byte.
pub const MAGIC: u8 = 0xA;
/// Low nibble of the format byte: the version this code speaks.
pub const VERSION: u8 = 1;
/// The format byte of this version.
pub const FORMAT: u8 = (MAGIC << 4) | VERSION;
/// Largest payload one datagram can declare.
pub const MAX_PAYLOAD: usize = u16::MAX as usize;

const KIND_DATA: u8 = 1;
const KIND_ACK: u8 = 2;
const KIND_PROBE: u8 = 3;
const KIND_PROBE_REPLY: u8 = 4;
const FLAG_ACK_PRESENT: u8 = 0x01;

/// A decoded header. Kind-specific fields live in [`Body`], so impossible combinations (an ACK
/// without an acknowledgement number, a probe with a sequence number) cannot be built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// The per-job key.
    pub key: u64,
    /// Job rank of the sender.
    pub src_rank: u32,
    /// Rail index at the sender.
    pub src_rail: u8,
    /// Rail index at the receiver.
    pub dst_rail: u8,
    /// Payload bytes following the header.
    pub payload_len: u16,
    /// What kind of datagram this is, with the fields only that kind has.
    pub body: Body,
}

/// The kind of a datagram and its kind-specific fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body {
    /// A segment of a message.
    Data(DataFields),
    /// A standalone acknowledgement.
    Ack {
        /// Cumulative ACK: the last in-order segment received.
        ack: u16,
        /// Selective ACK: bit `i` = segment `ack + 2 + i` received.
        sack: u64,
        /// The segment the receiver got last (new, or a duplicate of one it buffered): tells
        /// the sender which of its transmissions arrived, even beyond the bitmap.
        latest: u16,
    },
    /// A connectivity probe (payload opaque, handled above the reliability layer).
    Probe,
    /// The answer to a probe (payload opaque).
    ProbeReply,
}

/// The fields of a DATA segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataFields {
    /// Segment sequence number.
    pub seq: u16,
    /// Piggybacked cumulative ACK, if present.
    pub ack: Option<u16>,
    /// Active-message tag of the message this segment belongs to.
    pub am: u8,
    /// Total length of the message.
    pub msg_len: u32,
    /// Position of this segment's payload in the message.
    pub offset: u32,
}

impl Header {
    /// The cumulative ACK this datagram carries, if any.
    pub fn ack(&self) -> Option<u16> {
        match self.body {
            Body::Data(d) => d.ack,
            Body::Ack { ack, .. } => Some(ack),
            Body::Probe | Body::ProbeReply => None,
        }
    }

    /// The kind's name, for logs and errors.
    pub fn kind_name(&self) -> &'static str {
        match self.body {
            Body::Data(_) => "DATA",
            Body::Ack { .. } => "ACK",
            Body::Probe => "PROBE",
            Body::ProbeReply => "PROBE_REPLY",
        }
    }
}

/// Why a datagram was rejected. Each is counted by the caller and the datagram dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WireError {
    /// Shorter than the header.
    Truncated {
        /// Bytes the header needs.
        needed: usize,
        /// Bytes the datagram has.
        available: usize,
    },
    /// The format byte does not carry the Kestrel magic nibble.
    BadMagic {
        /// The format byte received.
        found: u8,
    },
    /// A Kestrel header of a version this code does not speak.
    UnsupportedVersion {
        /// The version nibble received.
        found: u8,
    },
    /// The key is not this job's.
    BadKey,
    /// The kind byte is none of DATA, ACK, PROBE, PROBE_REPLY.
    UnknownKind {
        /// The kind byte received.
        found: u8,
    },
    /// Flag bits this kind does not allow.
    BadFlags {
        /// The kind.
        kind: &'static str,
        /// The flags byte received.
        flags: u8,
    },
    /// A field that must be zero for this kind is not.
    ReservedNotZero {
        /// The kind.
        kind: &'static str,
        /// The field.
        field: &'static str,
    },
    /// The declared payload runs past the end of the datagram.
    BadLength {
        /// Payload bytes the header declares.
        declared: u16,
        /// Payload bytes the datagram has after the header.
        available: usize,
    },
    /// An ACK with a payload.
    UnexpectedPayload {
        /// The kind.
        kind: &'static str,
        /// The declared payload length.
        len: u16,
    },
    /// A DATA fragment that does not fit its message (or an empty fragment of a non-empty one).
    BadFragment {
        /// Message length declared.
        msg_len: u32,
        /// Fragment offset declared.
        offset: u32,
        /// Fragment length declared.
        payload_len: u16,
    },
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "usnic reliable-datagram header: ")?;
        match *self {
            WireError::Truncated { needed, available } => write!(
                f,
                "datagram of {available} bytes is shorter than the {needed}-byte header (not from a Kestrel peer, or cut by the network)"
            ),
            WireError::BadMagic { found } => write!(
                f,
                "format byte {found:#04x} is not a Kestrel header (magic nibble {MAGIC:#x}); another program is sending to this endpoint"
            ),
            WireError::UnsupportedVersion { found } => write!(
                f,
                "header version {found}, this build speaks {VERSION}; run the same Kestrel build on every host"
            ),
            WireError::BadKey => write!(
                f,
                "job key differs from this job's; a datagram from another job or a stranger (dropped)"
            ),
            WireError::UnknownKind { found } => write!(f, "unknown datagram kind {found}"),
            WireError::BadFlags { kind, flags } => {
                write!(f, "flags {flags:#04x} are not valid on a {kind} datagram")
            }
            WireError::ReservedNotZero { kind, field } => {
                write!(f, "field {field} must be zero on a {kind} datagram")
            }
            WireError::BadLength {
                declared,
                available,
            } => write!(
                f,
                "header declares {declared} payload bytes, the datagram carries {available}"
            ),
            WireError::UnexpectedPayload { kind, len } => {
                write!(f, "a {kind} datagram carries no payload, this one declares {len} bytes")
            }
            WireError::BadFragment {
                msg_len,
                offset,
                payload_len,
            } => write!(
                f,
                "fragment [{offset}, +{payload_len}) does not fit a message of {msg_len} bytes"
            ),
        }
    }
}

impl std::error::Error for WireError {}

/// Why a header could not be encoded (a bug in the caller, never caused by the network).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EncodeError {
    /// The output buffer is too small.
    BufferTooSmall {
        /// Bytes needed.
        needed: usize,
        /// Bytes available.
        available: usize,
    },
    /// `header.payload_len` differs from the payload given.
    PayloadMismatch {
        /// Length in the header.
        declared: u16,
        /// Length of the payload slice.
        actual: usize,
    },
    /// The header breaks a rule the decoder enforces.
    Invalid(WireError),
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EncodeError::BufferTooSmall { needed, available } => write!(
                f,
                "usnic reliable-datagram encoder: {needed} bytes needed, the buffer has {available}; pass a buffer of the connection's max_datagram"
            ),
            EncodeError::PayloadMismatch { declared, actual } => write!(
                f,
                "usnic reliable-datagram encoder: header declares {declared} payload bytes, {actual} given"
            ),
            EncodeError::Invalid(e) => write!(f, "refusing to encode an invalid header: {e}"),
        }
    }
}

impl std::error::Error for EncodeError {}

/// Compares 16-bit sequence numbers: the signed distance from `b` to `a` (positive when `a`
/// is later). Meaningful while the two are less than 32768 apart, which the window bound
/// guarantees.
#[inline]
pub fn seq_diff(a: u16, b: u16) -> i16 {
    a.wrapping_sub(b) as i16
}

fn read_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}

fn read_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

fn read_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

/// Decodes and checks a datagram. On success returns the header and exactly `payload_len`
/// payload bytes (padding after them is ignored). The key is checked before any kind-specific
/// field is looked at.
pub fn decode(bytes: &[u8], expected_key: u64) -> Result<(Header, &[u8]), WireError> {
    // One bounds check up front; every read below is within the first HEADER_LEN bytes.
    let Some(h) = bytes.get(..HEADER_LEN) else {
        return Err(WireError::Truncated {
            needed: HEADER_LEN,
            available: bytes.len(),
        });
    };
    let format = h[0];
    if format >> 4 != MAGIC {
        return Err(WireError::BadMagic { found: format });
    }
    if format & 0x0F != VERSION {
        return Err(WireError::UnsupportedVersion {
            found: format & 0x0F,
        });
    }
    let key = read_u64(h, 4);
    if key != expected_key {
        return Err(WireError::BadKey);
    }
    let kind = h[1];
    let flags = h[2];
    let am = h[3];
    let seq = read_u16(h, 18);
    let ack = read_u16(h, 20);
    let payload_len = read_u16(h, 22);
    let word_lo = read_u32(h, 24);
    let word_hi = read_u32(h, 28);
    let body = match kind {
        KIND_DATA => {
            if flags & !FLAG_ACK_PRESENT != 0 {
                return Err(WireError::BadFlags {
                    kind: "DATA",
                    flags,
                });
            }
            let ack_present = flags & FLAG_ACK_PRESENT != 0;
            if !ack_present && ack != 0 {
                return Err(WireError::ReservedNotZero {
                    kind: "DATA",
                    field: "ack",
                });
            }
            Body::Data(DataFields {
                seq,
                ack: ack_present.then_some(ack),
                am,
                msg_len: word_lo,
                offset: word_hi,
            })
        }
        KIND_ACK => {
            if flags != FLAG_ACK_PRESENT {
                return Err(WireError::BadFlags { kind: "ACK", flags });
            }
            reserved_zero("ACK", "am", am as u32)?;
            Body::Ack {
                ack,
                sack: u64::from(word_lo) | (u64::from(word_hi) << 32),
                latest: seq,
            }
        }
        KIND_PROBE | KIND_PROBE_REPLY => {
            let name = if kind == KIND_PROBE {
                "PROBE"
            } else {
                "PROBE_REPLY"
            };
            if flags != 0 {
                return Err(WireError::BadFlags { kind: name, flags });
            }
            reserved_zero(name, "am", am as u32)?;
            reserved_zero(name, "seq", seq as u32)?;
            reserved_zero(name, "ack", ack as u32)?;
            reserved_zero(name, "bytes 24..28", word_lo)?;
            reserved_zero(name, "bytes 28..32", word_hi)?;
            if kind == KIND_PROBE {
                Body::Probe
            } else {
                Body::ProbeReply
            }
        }
        other => return Err(WireError::UnknownKind { found: other }),
    };
    let header = Header {
        key,
        src_rank: read_u32(h, 12),
        src_rail: h[16],
        dst_rail: h[17],
        payload_len,
        body,
    };
    check_rules(&header)?;
    let rest = &bytes[HEADER_LEN..];
    match rest.get(..usize::from(payload_len)) {
        Some(payload) => Ok((header, payload)),
        None => Err(WireError::BadLength {
            declared: payload_len,
            available: rest.len(),
        }),
    }
}

fn reserved_zero(kind: &'static str, field: &'static str, value: u32) -> Result<(), WireError> {
    if value == 0 {
        Ok(())
    } else {
        Err(WireError::ReservedNotZero { kind, field })
    }
}

/// The cross-field rules shared by the decoder and the encoder.
pub(crate) fn check_rules(h: &Header) -> Result<(), WireError> {
    match h.body {
        Body::Data(d) => {
            let end = u64::from(d.offset) + u64::from(h.payload_len);
            let empty_fragment_of_nonempty = h.payload_len == 0 && d.msg_len != 0;
            if end > u64::from(d.msg_len) || empty_fragment_of_nonempty {
                return Err(WireError::BadFragment {
                    msg_len: d.msg_len,
                    offset: d.offset,
                    payload_len: h.payload_len,
                });
            }
        }
        Body::Ack { .. } => {
            if h.payload_len != 0 {
                return Err(WireError::UnexpectedPayload {
                    kind: "ACK",
                    len: h.payload_len,
                });
            }
        }
        Body::Probe | Body::ProbeReply => {}
    }
    Ok(())
}

/// Writes the 32-byte header into `out[..HEADER_LEN]` after checking it against the decoder's
/// rules. The payload (`header.payload_len` bytes) goes after it, written by the caller.
pub fn write_header(h: &Header, out: &mut [u8]) -> Result<(), EncodeError> {
    check_rules(h).map_err(EncodeError::Invalid)?;
    let available = out.len();
    let Some(o) = out.get_mut(..HEADER_LEN) else {
        return Err(EncodeError::BufferTooSmall {
            needed: HEADER_LEN,
            available,
        });
    };
    let (kind, flags, am, seq, ack, lo, hi) = match h.body {
        Body::Data(d) => (
            KIND_DATA,
            if d.ack.is_some() { FLAG_ACK_PRESENT } else { 0 },
            d.am,
            d.seq,
            d.ack.unwrap_or(0),
            d.msg_len,
            d.offset,
        ),
        Body::Ack { ack, sack, latest } => (
            KIND_ACK,
            FLAG_ACK_PRESENT,
            0,
            latest,
            ack,
            sack as u32,
            (sack >> 32) as u32,
        ),
        Body::Probe => (KIND_PROBE, 0, 0, 0, 0, 0, 0),
        Body::ProbeReply => (KIND_PROBE_REPLY, 0, 0, 0, 0, 0, 0),
    };
    o[0] = FORMAT;
    o[1] = kind;
    o[2] = flags;
    o[3] = am;
    o[4..12].copy_from_slice(&h.key.to_le_bytes());
    o[12..16].copy_from_slice(&h.src_rank.to_le_bytes());
    o[16] = h.src_rail;
    o[17] = h.dst_rail;
    o[18..20].copy_from_slice(&seq.to_le_bytes());
    o[20..22].copy_from_slice(&ack.to_le_bytes());
    o[22..24].copy_from_slice(&h.payload_len.to_le_bytes());
    o[24..28].copy_from_slice(&lo.to_le_bytes());
    o[28..32].copy_from_slice(&hi.to_le_bytes());
    Ok(())
}

/// Encodes header and payload into `out`; returns the datagram length.
pub fn encode(h: &Header, payload: &[u8], out: &mut [u8]) -> Result<usize, EncodeError> {
    if payload.len() != usize::from(h.payload_len) {
        return Err(EncodeError::PayloadMismatch {
            declared: h.payload_len,
            actual: payload.len(),
        });
    }
    let total = HEADER_LEN + payload.len();
    if out.len() < total {
        return Err(EncodeError::BufferTooSmall {
            needed: total,
            available: out.len(),
        });
    }
    write_header(h, out)?;
    out[HEADER_LEN..total].copy_from_slice(payload);
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: u64 = 0x0123_4567_89ab_cdef;

    fn data(seq: u16, msg_len: u32, offset: u32, len: u16) -> Header {
        Header {
            key: KEY,
            src_rank: 7,
            src_rail: 1,
            dst_rail: 2,
            payload_len: len,
            body: Body::Data(DataFields {
                seq,
                ack: Some(seq.wrapping_add(3)),
                am: 9,
                msg_len,
                offset,
            }),
        }
    }

    fn samples() -> Vec<(Header, Vec<u8>)> {
        let base = data(65535, 100, 40, 10);
        vec![
            (base, (0..10).collect()),
            (data(0, 0, 0, 0), vec![]),
            (
                Header {
                    body: Body::Data(DataFields {
                        ack: None,
                        ..match base.body {
                            Body::Data(d) => d,
                            _ => unreachable!(),
                        }
                    }),
                    ..base
                },
                vec![0xEE; 10],
            ),
            (
                Header {
                    payload_len: 0,
                    body: Body::Ack {
                        ack: 513,
                        sack: 0x8000_0001_0000_0003,
                        latest: 600,
                    },
                    ..base
                },
                vec![],
            ),
            (
                Header {
                    payload_len: 5,
                    body: Body::Probe,
                    ..base
                },
                b"probe".to_vec(),
            ),
            (
                Header {
                    payload_len: 0,
                    body: Body::ProbeReply,
                    ..base
                },
                vec![],
            ),
        ]
    }

    #[test]
    fn every_kind_round_trips_and_padding_is_ignored() {
        for (h, payload) in samples() {
            let mut buf = [0u8; 128];
            let n = encode(&h, &payload, &mut buf).unwrap();
            assert_eq!(n, HEADER_LEN + payload.len());
            // Padding after the payload (as short frames get) must not matter.
            for padded in [n, n + 1, n + 17] {
                let (got, body) = decode(&buf[..padded], KEY).unwrap();
                assert_eq!(got, h);
                assert_eq!(body, &payload[..]);
            }
        }
    }

    #[test]
    fn layout_is_the_documented_one() {
        let mut buf = [0u8; HEADER_LEN + 3];
        encode(&data(0x0102, 0x0A0B_0C0D, 4, 3), &[1, 2, 3], &mut buf).unwrap();
        assert_eq!(buf[0], 0xA1);
        assert_eq!(buf[1], 1);
        assert_eq!(buf[2], 1);
        assert_eq!(buf[3], 9);
        assert_eq!(&buf[4..12], &KEY.to_le_bytes());
        assert_eq!(&buf[12..16], &7u32.to_le_bytes());
        assert_eq!((buf[16], buf[17]), (1, 2));
        assert_eq!(&buf[18..20], &[0x02, 0x01]);
        assert_eq!(&buf[20..22], &0x0105u16.to_le_bytes());
        assert_eq!(&buf[22..24], &[3, 0]);
        assert_eq!(&buf[24..28], &[0x0D, 0x0C, 0x0B, 0x0A]);
        assert_eq!(&buf[28..32], &[4, 0, 0, 0]);
    }

    #[test]
    fn every_truncation_is_reported_not_panicked() {
        let (h, payload) = samples().remove(0);
        let mut buf = [0u8; 64];
        let n = encode(&h, &payload, &mut buf).unwrap();
        for cut in 0..n {
            let err = decode(&buf[..cut], KEY).unwrap_err();
            if cut < HEADER_LEN {
                assert_eq!(
                    err,
                    WireError::Truncated {
                        needed: HEADER_LEN,
                        available: cut
                    }
                );
            } else {
                assert_eq!(
                    err,
                    WireError::BadLength {
                        declared: 10,
                        available: cut - HEADER_LEN
                    }
                );
            }
        }
    }

    #[test]
    fn bad_fields_are_typed_errors() {
        let (h, payload) = samples().remove(0);
        let mut good = [0u8; 64];
        let n = encode(&h, &payload, &mut good).unwrap();
        let with = |at: usize, v: u8| {
            let mut b = good;
            b[at] = v;
            decode(&b[..n], KEY).map(|_| ()).unwrap_err()
        };
        assert_eq!(with(0, 0x51), WireError::BadMagic { found: 0x51 });
        assert_eq!(with(0, 0xA2), WireError::UnsupportedVersion { found: 2 });
        assert_eq!(with(4, 0), WireError::BadKey);
        assert_eq!(with(1, 0), WireError::UnknownKind { found: 0 });
        assert_eq!(with(1, 5), WireError::UnknownKind { found: 5 });
        assert_eq!(
            with(2, 3),
            WireError::BadFlags {
                kind: "DATA",
                flags: 3
            }
        );
        // offset 40 + 10 > msg_len 45
        assert!(matches!(with(24, 45), WireError::BadFragment { .. }));
        assert_eq!(decode(&good[..n], KEY ^ 1).unwrap_err(), WireError::BadKey);
        // A DATA without ACK_PRESENT must carry a zero ack.
        assert_eq!(
            with(2, 0),
            WireError::ReservedNotZero {
                kind: "DATA",
                field: "ack"
            }
        );
        // The offset/length sum must not wrap in 32 bits.
        let mut b = good;
        b[24..28].copy_from_slice(&u32::MAX.to_le_bytes());
        b[28..32].copy_from_slice(&(u32::MAX - 2).to_le_bytes());
        assert!(matches!(
            decode(&b[..n], KEY),
            Err(WireError::BadFragment { .. })
        ));
        // Empty fragment of a non-empty message.
        let mut b = good;
        b[22] = 0;
        assert!(matches!(
            decode(&b[..HEADER_LEN], KEY),
            Err(WireError::BadFragment { .. })
        ));
    }

    #[test]
    fn ack_and_probe_rules() {
        let samples = samples();
        let (ack, _) = samples[3];
        let mut b = [0u8; 64];
        let n = encode(&ack, &[], &mut b).unwrap();
        let mut c = b;
        c[22] = 1;
        assert_eq!(
            decode(&c[..n + 1], KEY).unwrap_err(),
            WireError::UnexpectedPayload {
                kind: "ACK",
                len: 1
            }
        );
        let mut c = b;
        c[2] = 0;
        assert!(matches!(
            decode(&c[..n], KEY),
            Err(WireError::BadFlags { kind: "ACK", .. })
        ));
        let mut c = b;
        c[3] = 1;
        assert!(matches!(
            decode(&c[..n], KEY),
            Err(WireError::ReservedNotZero { field: "am", .. })
        ));
        let (probe, payload) = samples[4].clone();
        let n = encode(&probe, &payload, &mut b).unwrap();
        for at in [2usize, 3, 18, 20, 24, 28] {
            let mut c = b;
            c[at] = 1;
            assert!(decode(&c[..n], KEY).is_err(), "byte {at} accepted");
        }
    }

    #[test]
    fn encoder_refuses_what_the_decoder_would_reject() {
        let mut buf = [0u8; 64];
        assert_eq!(
            encode(&data(1, 100, 95, 10), &[0; 10], &mut buf),
            Err(EncodeError::Invalid(WireError::BadFragment {
                msg_len: 100,
                offset: 95,
                payload_len: 10
            }))
        );
        assert!(matches!(
            encode(&data(1, 100, 0, 10), &[0; 9], &mut buf),
            Err(EncodeError::PayloadMismatch { .. })
        ));
        assert!(matches!(
            encode(&data(1, 100, 0, 10), &[0; 10], &mut buf[..40]),
            Err(EncodeError::BufferTooSmall { needed: 42, .. })
        ));
    }

    #[test]
    fn sequence_comparison_wraps() {
        assert_eq!(seq_diff(0, 65535), 1);
        assert_eq!(seq_diff(65535, 0), -1);
        assert_eq!(seq_diff(100, 100), 0);
        assert_eq!(seq_diff(32767, 0), 32767);
        assert_eq!(seq_diff(5, 65000), 541);
    }
}
