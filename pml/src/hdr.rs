//! The messaging layer's wire headers, little-endian, with checked decoding.
//!
//! | type | layout (after the type byte) | size |
//! |---|---|---|
//! | MATCH (1) | flags u8, ctx u16, src u32, tag i32, seq u16, pad u16; payload follows | 16 |
//! | RNDV (2) | flags u8 (GET=1), ctx u16, src u32, tag i32, seq u16, pad u16, len u64, send_req u64, addr u64, key u64 | 48 |
//! | ACK (3) | pad [7], send_req u64, recv_req u64 | 24 |
//! | FRAG (4) | pad [7], recv_req u64, offset u64; data follows | 24 |
//! | FIN (5) | pad [7], send_req u64 | 16 |
//! | SYNC (6) | as MATCH, then send_req u64; payload follows | 24 |
//! | SPLIT (7) | pad [7], send_req u64, recv_req u64, addr u64, split u64, end u64 | 48 |
//! | PUTDONE (8) | pad [7], recv_req u64 | 16 |
//!
//! RNDV's `addr` and `key` name the sender's buffer for the receiver's get (the transport's
//! [`kestrel_transport::btl::RemoteRegion`]; key 0 where the transport reads by address).
//!
//! SPLIT asks the sender of a rendezvous to write bytes `[split, end)` of its message into
//! the receiver's buffer at `addr` (single-copy put) while the receiver reads `[0, split)`;
//! PUTDONE says the sender's half is in place.
//!
//! `src` is the sender's rank in the communicator, `ctx` the communicator's context id, `seq`
//! the per-(communicator, destination) sequence number that restores MPI order.

/// Active-message tag of the messaging layer on every transport.
pub const AM_PML: u8 = 1;

/// Header sizes.
pub const MATCH_LEN: usize = 16;
/// RNDV header size.
pub const RNDV_LEN: usize = 48;
/// ACK header size.
pub const ACK_LEN: usize = 24;
/// FRAG header size.
pub const FRAG_LEN: usize = 24;
/// FIN header size.
pub const FIN_LEN: usize = 16;
/// SYNC header size.
pub const SYNC_LEN: usize = 24;
/// SPLIT header size.
pub const SPLIT_LEN: usize = 48;
/// PUTDONE header size.
pub const PUTDONE_LEN: usize = 16;

/// RNDV flag: the sender's buffer may be read with a single-copy get.
pub const FLAG_GET: u8 = 1;
/// RNDV flag: the receiver should read the whole message itself (no split copy): the
/// sender may not make progress before it has (a collective schedule's background send).
pub const FLAG_PULL: u8 = 2;

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Header {
    /// Eager message; `sync_req` is set for synchronous sends, which want an ACK on match.
    Match {
        /// Context id.
        ctx: u16,
        /// Sender's communicator rank.
        src: u32,
        /// Tag.
        tag: i32,
        /// Sequence number.
        seq: u16,
        /// The sender's request to acknowledge (synchronous sends).
        sync_req: Option<u64>,
    },
    /// Rendezvous announcement.
    Rndv {
        /// Context id.
        ctx: u16,
        /// Sender's communicator rank.
        src: u32,
        /// Tag.
        tag: i32,
        /// Sequence number.
        seq: u16,
        /// Message length.
        len: u64,
        /// Sender's request.
        send_req: u64,
        /// Sender's buffer address when `get` is offered.
        get_addr: Option<u64>,
        /// The transport's key for that buffer (0 when it reads by address).
        get_key: u64,
        /// The receiver reads the whole message itself ([`FLAG_PULL`]).
        pull: bool,
    },
    /// Receiver matched a rendezvous (send fragments to `recv_req`) or a synchronous send.
    Ack {
        /// Sender's request.
        send_req: u64,
        /// Receiver's request.
        recv_req: u64,
    },
    /// Pipelined data.
    Frag {
        /// Receiver's request.
        recv_req: u64,
        /// Offset of the data in the message.
        offset: u64,
    },
    /// Receiver finished reading the sender's buffer.
    Fin {
        /// Sender's request.
        send_req: u64,
    },
    /// Receiver asks the sender to write the upper part of the message itself.
    Split {
        /// Sender's request.
        send_req: u64,
        /// Receiver's request.
        recv_req: u64,
        /// Receiver's buffer address.
        addr: u64,
        /// First byte the sender writes.
        split: u64,
        /// One past the last byte the sender writes.
        end: u64,
    },
    /// The sender's part of a split copy is in the receiver's buffer.
    PutDone {
        /// Receiver's request.
        recv_req: u64,
    },
}

/// A header that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadHeader {
    /// What is wrong.
    pub reason: &'static str,
    /// Message length.
    pub len: usize,
}

impl std::fmt::Display for BadHeader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "malformed messaging-layer header ({} bytes): {}",
            self.len, self.reason
        )
    }
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}
fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}
fn u64_at(b: &[u8], i: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[i..i + 8]);
    u64::from_le_bytes(a)
}

/// Decodes the header at the start of `data`; returns it and the offset of the payload.
#[inline]
pub fn decode(data: &[u8]) -> Result<(Header, usize), BadHeader> {
    // The eager match header, nearly every message: fixed offsets in a 16-byte array, so no
    // bounds checks (callgrind, C `osu_bw` receiver: `State::on_message` 204 -> 160
    // instructions per message).
    if let Some(m) = data.first_chunk::<MATCH_LEN>() {
        if m[0] == 1 {
            let h = Header::Match {
                ctx: u16::from_le_bytes([m[2], m[3]]),
                src: u32::from_le_bytes([m[4], m[5], m[6], m[7]]),
                tag: i32::from_le_bytes([m[8], m[9], m[10], m[11]]),
                seq: u16::from_le_bytes([m[12], m[13]]),
                sync_req: None,
            };
            return Ok((h, MATCH_LEN));
        }
    }
    let bad = |reason| BadHeader {
        reason,
        len: data.len(),
    };
    let need = match data.first() {
        Some(1) => MATCH_LEN,
        Some(2) => RNDV_LEN,
        Some(3) => ACK_LEN,
        Some(4) => FRAG_LEN,
        Some(5) => FIN_LEN,
        Some(6) => SYNC_LEN,
        Some(7) => SPLIT_LEN,
        Some(8) => PUTDONE_LEN,
        Some(_) => return Err(bad("unknown header type")),
        None => return Err(bad("empty message")),
    };
    if data.len() < need {
        return Err(bad("shorter than its header"));
    }
    let h = match data[0] {
        1 | 6 => Header::Match {
            ctx: u16_at(data, 2),
            src: u32_at(data, 4),
            tag: u32_at(data, 8) as i32,
            seq: u16_at(data, 12),
            sync_req: (data[0] == 6).then(|| u64_at(data, 16)),
        },
        2 => {
            if data.len() != RNDV_LEN {
                return Err(bad("rendezvous header with trailing bytes"));
            }
            Header::Rndv {
                ctx: u16_at(data, 2),
                src: u32_at(data, 4),
                tag: u32_at(data, 8) as i32,
                seq: u16_at(data, 12),
                len: u64_at(data, 16),
                send_req: u64_at(data, 24),
                get_addr: (data[1] & FLAG_GET != 0).then(|| u64_at(data, 32)),
                get_key: u64_at(data, 40),
                pull: data[1] & FLAG_PULL != 0,
            }
        }
        3 => Header::Ack {
            send_req: u64_at(data, 8),
            recv_req: u64_at(data, 16),
        },
        4 => Header::Frag {
            recv_req: u64_at(data, 8),
            offset: u64_at(data, 16),
        },
        7 => Header::Split {
            send_req: u64_at(data, 8),
            recv_req: u64_at(data, 16),
            addr: u64_at(data, 24),
            split: u64_at(data, 32),
            end: u64_at(data, 40),
        },
        8 => Header::PutDone {
            recv_req: u64_at(data, 8),
        },
        _ => Header::Fin {
            send_req: u64_at(data, 8),
        },
    };
    Ok((h, need))
}

/// Encodes a header into `out` (cleared first).
pub fn encode(h: &Header, out: &mut Vec<u8>) {
    out.clear();
    match *h {
        Header::Match {
            ctx,
            src,
            tag,
            seq,
            sync_req,
        } => {
            out.push(if sync_req.is_some() { 6 } else { 1 });
            out.push(0);
            out.extend_from_slice(&ctx.to_le_bytes());
            out.extend_from_slice(&src.to_le_bytes());
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&[0, 0]);
            if let Some(r) = sync_req {
                out.extend_from_slice(&r.to_le_bytes());
            }
        }
        Header::Rndv {
            ctx,
            src,
            tag,
            seq,
            len,
            send_req,
            get_addr,
            get_key,
            pull,
        } => {
            out.push(2);
            let get = if get_addr.is_some() { FLAG_GET } else { 0 };
            out.push(get | if pull { FLAG_PULL } else { 0 });
            out.extend_from_slice(&ctx.to_le_bytes());
            out.extend_from_slice(&src.to_le_bytes());
            out.extend_from_slice(&tag.to_le_bytes());
            out.extend_from_slice(&seq.to_le_bytes());
            out.extend_from_slice(&[0, 0]);
            out.extend_from_slice(&len.to_le_bytes());
            out.extend_from_slice(&send_req.to_le_bytes());
            out.extend_from_slice(&get_addr.unwrap_or(0).to_le_bytes());
            out.extend_from_slice(&get_key.to_le_bytes());
        }
        Header::Ack { send_req, recv_req } => {
            out.extend_from_slice(&[3, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&send_req.to_le_bytes());
            out.extend_from_slice(&recv_req.to_le_bytes());
        }
        Header::Frag { recv_req, offset } => {
            out.extend_from_slice(&[4, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&recv_req.to_le_bytes());
            out.extend_from_slice(&offset.to_le_bytes());
        }
        Header::Fin { send_req } => {
            out.extend_from_slice(&[5, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&send_req.to_le_bytes());
        }
        Header::Split {
            send_req,
            recv_req,
            addr,
            split,
            end,
        } => {
            out.extend_from_slice(&[7, 0, 0, 0, 0, 0, 0, 0]);
            for v in [send_req, recv_req, addr, split, end] {
                out.extend_from_slice(&v.to_le_bytes());
            }
        }
        Header::PutDone { recv_req } => {
            out.extend_from_slice(&[8, 0, 0, 0, 0, 0, 0, 0]);
            out.extend_from_slice(&recv_req.to_le_bytes());
        }
    }
}

/// Writes an eager MATCH header into a fixed array (the hot path, no allocation).
#[inline]
pub fn match_header(ctx: u16, src: u32, tag: i32, seq: u16) -> [u8; MATCH_LEN] {
    let mut h = [0u8; MATCH_LEN];
    h[0] = 1;
    h[2..4].copy_from_slice(&ctx.to_le_bytes());
    h[4..8].copy_from_slice(&src.to_le_bytes());
    h[8..12].copy_from_slice(&tag.to_le_bytes());
    h[12..14].copy_from_slice(&seq.to_le_bytes());
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_header_round_trips_and_truncations_fail() {
        let all = [
            Header::Match {
                ctx: 7,
                src: 3,
                tag: -5,
                seq: 65535,
                sync_req: None,
            },
            Header::Match {
                ctx: 7,
                src: 3,
                tag: 9,
                seq: 1,
                sync_req: Some(u64::MAX),
            },
            Header::Rndv {
                ctx: 1,
                src: 2,
                tag: 3,
                seq: 4,
                len: 1 << 40,
                send_req: 9,
                get_addr: Some(0xdead),
                get_key: 0x1234_5678_9abc_def0,
                pull: true,
            },
            Header::Rndv {
                ctx: 1,
                src: 2,
                tag: 3,
                seq: 4,
                len: 5,
                send_req: 9,
                get_addr: None,
                get_key: 0,
                pull: false,
            },
            Header::Ack {
                send_req: 1,
                recv_req: 2,
            },
            Header::Frag {
                recv_req: 1,
                offset: 1 << 33,
            },
            Header::Fin { send_req: 77 },
            Header::Split {
                send_req: 1,
                recv_req: 2,
                addr: 3,
                split: 4,
                end: 5,
            },
            Header::PutDone { recv_req: 9 },
        ];
        let mut buf = Vec::new();
        for h in all {
            encode(&h, &mut buf);
            let (d, used) = decode(&buf).unwrap();
            assert_eq!((d, used), (h, buf.len()));
            for cut in 0..buf.len() {
                assert!(decode(&buf[..cut]).is_err(), "{h:?} cut at {cut}");
            }
        }
        assert_eq!(&match_header(7, 3, -5, 65535)[..], {
            encode(&all[0], &mut buf);
            &buf[..]
        });
        assert!(decode(&[9, 0, 0]).is_err());
        let mut rndv = Vec::new();
        encode(&all[2], &mut rndv);
        rndv.push(0);
        assert!(decode(&rndv).is_err());
    }
}
