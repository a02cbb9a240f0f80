//! The one-sided messages (active-message tag [`AM_RMA`]) and their checked decoding.
//!
//! Every message starts with its type byte and the window id (the context id of the window's
//! private communicator, u16). Integers are big-endian (the project's codec).
//!
//! | type | after type and window | answered by |
//! |---|---|---|
//! | PUT (1) | seq u64, segments, data | (counted) |
//! | ACC (2) | seq u64, op u8, dtype, segments, data | (counted) |
//! | GET (3) | seq u64, token u64, offset u64, segments | RESULT |
//! | GET_ACC (4) | seq u64, token u64, offset u64, op u8, dtype, segments, data | RESULT |
//! | CAS (5) | seq u64, token u64, disp u64, compare bytes, swap bytes | RESULT |
//! | RESULT (6) | token u64, offset u64, data | |
//! | LOCK (7) | exclusive bool | GRANT |
//! | GRANT (8) | | |
//! | UNLOCK (9) | ops u64 | UNLOCKED |
//! | UNLOCKED (10) | | |
//! | FLUSH (11) | ops u64 | FLUSHED |
//! | FLUSHED (12) | | |
//! | POST (13) | | |
//! | COMPLETE (14) | ops u64 | |
//! | FENCE (15) | ops u64 | |
//! | FENCE_DONE (16) | | |
//! | LOCK_IN_ORDER (17) | seq u64, exclusive bool | GRANT (counted: the origin's later operations wait for it) |
//!
//! `seq` numbers the operations one origin sent one target on a window, from 0; the target
//! applies them in that order whatever order the transport delivered them in, so MPI's
//! accumulate ordering holds on every transport. `ops` in UNLOCK, FLUSH, COMPLETE and FENCE
//! is how many operations the origin has sent that target so far: the target answers (or
//! counts the synchronization as arrived) once it has applied that many. Segments are a u32
//! count of (byte offset u64, length u32) pairs relative to the window's base (absolute
//! addresses in a dynamic window); `data` is the rest of the message.
//!
//! LOCK_IN_ORDER is a lock request numbered like an operation (a lazy `MPI_Win_lock`: sent
//! with the epoch's first operation instead of waited for at the lock call). The target
//! queues it when its turn comes and applies nothing more from that origin until it grants
//! it, so lock, operations and unlock cost one round trip.

use kestrel_transport::codec::{DecodeError, Reader, Writer};

use crate::op::{Dtype, Op};

/// Active-message tag of one-sided communication on every transport.
pub const AM_RMA: u8 = 2;

/// Bytes of the largest fixed part of a message (type, window, the u64 fields, op, dtype,
/// segment count), which a sender keeps free below the transport's `max_send`.
pub const FIXED_MAX: usize = 1 + 2 + 8 * 3 + 1 + 5 + 4;

/// Bytes one segment takes on the wire.
pub const SEGMENT_LEN: usize = 12;

/// What an accumulate does at the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    /// A predefined reduction: `target = origin OP target`.
    Reduce(Op),
    /// `MPI_REPLACE`: `target = origin`.
    Replace,
    /// `MPI_NO_OP`: the target is left alone (fetching operations read it).
    NoOp,
}

impl AccOp {
    fn code(self) -> u8 {
        match self {
            AccOp::Reduce(op) => Op::ALL.iter().position(|&o| o == op).unwrap_or(0) as u8,
            AccOp::Replace => 100,
            AccOp::NoOp => 101,
        }
    }

    fn from_code(c: u8) -> Option<AccOp> {
        match c {
            100 => Some(AccOp::Replace),
            101 => Some(AccOp::NoOp),
            c => Op::ALL.get(c as usize).map(|&op| AccOp::Reduce(op)),
        }
    }
}

/// A byte range of the target window: offset from its base (an address in a dynamic window)
/// and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// Byte offset (or address).
    pub offset: u64,
    /// Bytes.
    pub len: u32,
}

/// A decoded one-sided message; `data` borrows the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Msg<'a> {
    /// Write `data` into the segments.
    Put {
        /// The origin's operation number for this target.
        seq: u64,
        /// Where.
        segs: Vec<Segment>,
        /// What (the segments' total length).
        data: &'a [u8],
    },
    /// Combine `data` into the segments.
    Acc {
        /// The origin's operation number for this target.
        seq: u64,
        /// How.
        op: AccOp,
        /// Element type.
        dtype: Dtype,
        /// Where.
        segs: Vec<Segment>,
        /// The origin's operand.
        data: &'a [u8],
    },
    /// Read the segments and answer RESULT.
    Get {
        /// The origin's operation number for this target.
        seq: u64,
        /// The origin's operation, echoed in the result.
        token: u64,
        /// Where this part starts in the origin's result.
        offset: u64,
        /// Where.
        segs: Vec<Segment>,
    },
    /// Read the segments, then combine `data` into them; answer the old contents.
    GetAcc {
        /// The origin's operation number for this target.
        seq: u64,
        /// The origin's operation.
        token: u64,
        /// Where this part starts in the origin's result.
        offset: u64,
        /// How.
        op: AccOp,
        /// Element type.
        dtype: Dtype,
        /// Where.
        segs: Vec<Segment>,
        /// The origin's operand (empty for `MPI_NO_OP`).
        data: &'a [u8],
    },
    /// Compare one element with `compare`; if equal, write `swap`; answer the old value.
    Cas {
        /// The origin's operation number for this target.
        seq: u64,
        /// The origin's operation.
        token: u64,
        /// The element's offset.
        disp: u64,
        /// Compared with the element.
        compare: &'a [u8],
        /// Written on equality.
        swap: &'a [u8],
    },
    /// Data the target read for operation `token`, placed at `offset` of its result.
    Result {
        /// The origin's operation.
        token: u64,
        /// Where it goes in the result.
        offset: u64,
        /// The bytes.
        data: &'a [u8],
    },
    /// Asks for the target's window lock.
    Lock {
        /// Exclusive (else shared).
        exclusive: bool,
    },
    /// A lock request numbered like an operation (see the module docs).
    LockInOrder {
        /// Its number in the origin's operations.
        seq: u64,
        /// Exclusive (else shared).
        exclusive: bool,
    },
    /// The lock is the origin's.
    Grant,
    /// Releases the lock once `ops` operations are applied.
    Unlock {
        /// Operations sent so far.
        ops: u64,
    },
    /// The lock is released and the operations applied.
    Unlocked,
    /// Answer once `ops` operations are applied.
    Flush {
        /// Operations sent so far.
        ops: u64,
    },
    /// The operations are applied.
    Flushed,
    /// The target's exposure epoch for the origin began.
    Post,
    /// The origin's access epoch to the target ended after `ops` operations.
    Complete {
        /// Operations sent so far.
        ops: u64,
    },
    /// The sender reached the fence after sending `ops` operations to the receiver.
    Fence {
        /// Operations sent so far.
        ops: u64,
    },
    /// Every operation for the sender of the fence is applied.
    FenceDone,
}

mod kind {
    pub const PUT: u8 = 1;
    pub const ACC: u8 = 2;
    pub const GET: u8 = 3;
    pub const GET_ACC: u8 = 4;
    pub const CAS: u8 = 5;
    pub const RESULT: u8 = 6;
    pub const LOCK: u8 = 7;
    pub const GRANT: u8 = 8;
    pub const UNLOCK: u8 = 9;
    pub const UNLOCKED: u8 = 10;
    pub const FLUSH: u8 = 11;
    pub const FLUSHED: u8 = 12;
    pub const POST: u8 = 13;
    pub const COMPLETE: u8 = 14;
    pub const FENCE: u8 = 15;
    pub const FENCE_DONE: u8 = 16;
    pub const LOCK_IN_ORDER: u8 = 17;
}

const FRAME: &str = "one-sided message";
/// Dtype code of an opaque element (only `MPI_REPLACE` and `MPI_NO_OP` apply to it).
const OPAQUE: u8 = 0xff;
/// Largest opaque element (a derived type's element for replace is split into its bytes by
/// the origin, so this bounds only what a peer may claim).
const OPAQUE_MAX: u32 = 1 << 16;

fn dtype(w: &mut Writer, d: Dtype) {
    match d {
        Dtype::Opaque(n) => {
            w.u8(OPAQUE).u32(n);
        }
        d => {
            w.u8(Dtype::ALL.iter().position(|&x| x == d).unwrap_or(0) as u8);
        }
    }
}

fn read_dtype(r: &mut Reader<'_>) -> Result<Dtype, DecodeError> {
    let c = r.u8("element type")?;
    if c == OPAQUE {
        let n = r.u32("element size")?;
        if n == 0 || n > OPAQUE_MAX {
            return Err(r.error("element size", "zero or larger than 64 KiB"));
        }
        return Ok(Dtype::Opaque(n));
    }
    Dtype::ALL
        .get(c as usize)
        .copied()
        .ok_or_else(|| r.error("element type", "unknown"))
}

fn read_op(r: &mut Reader<'_>) -> Result<AccOp, DecodeError> {
    let c = r.u8("operation")?;
    AccOp::from_code(c).ok_or_else(|| r.error("operation", "unknown"))
}

fn segs(w: &mut Writer, s: &[Segment]) {
    w.u32(s.len() as u32);
    for g in s {
        w.u64(g.offset).u32(g.len);
    }
}

fn read_segs(r: &mut Reader<'_>) -> Result<Vec<Segment>, DecodeError> {
    let n = r.count("segments", SEGMENT_LEN)?;
    (0..n)
        .map(|_| {
            Ok(Segment {
                offset: r.u64("segment offset")?,
                len: r.u32("segment length")?,
            })
        })
        .collect()
}

/// The total length of `segs`.
pub fn total(segs: &[Segment]) -> u64 {
    segs.iter().map(|s| u64::from(s.len)).sum()
}

/// Encodes `m` for window `win`.
pub fn encode(win: u16, m: &Msg<'_>) -> Vec<u8> {
    let mut w = Writer::new();
    match m {
        Msg::Put { seq, segs: s, data } => {
            w.u8(kind::PUT).u16(win).u64(*seq);
            segs(&mut w, s);
            w.raw(data);
        }
        Msg::Acc {
            seq,
            op,
            dtype: d,
            segs: s,
            data,
        } => {
            w.u8(kind::ACC).u16(win).u64(*seq).u8(op.code());
            dtype(&mut w, *d);
            segs(&mut w, s);
            w.raw(data);
        }
        Msg::Get {
            seq,
            token,
            offset,
            segs: s,
        } => {
            w.u8(kind::GET).u16(win).u64(*seq).u64(*token).u64(*offset);
            segs(&mut w, s);
        }
        Msg::GetAcc {
            seq,
            token,
            offset,
            op,
            dtype: d,
            segs: s,
            data,
        } => {
            w.u8(kind::GET_ACC)
                .u16(win)
                .u64(*seq)
                .u64(*token)
                .u64(*offset)
                .u8(op.code());
            dtype(&mut w, *d);
            segs(&mut w, s);
            w.raw(data);
        }
        Msg::Cas {
            seq,
            token,
            disp,
            compare,
            swap,
        } => {
            w.u8(kind::CAS)
                .u16(win)
                .u64(*seq)
                .u64(*token)
                .u64(*disp)
                .bytes(compare)
                .bytes(swap);
        }
        Msg::Result {
            token,
            offset,
            data,
        } => {
            w.u8(kind::RESULT)
                .u16(win)
                .u64(*token)
                .u64(*offset)
                .raw(data);
        }
        Msg::Lock { exclusive } => {
            w.u8(kind::LOCK).u16(win).bool(*exclusive);
        }
        Msg::LockInOrder { seq, exclusive } => {
            w.u8(kind::LOCK_IN_ORDER)
                .u16(win)
                .u64(*seq)
                .bool(*exclusive);
        }
        Msg::Grant => {
            w.u8(kind::GRANT).u16(win);
        }
        Msg::Unlock { ops } => {
            w.u8(kind::UNLOCK).u16(win).u64(*ops);
        }
        Msg::Unlocked => {
            w.u8(kind::UNLOCKED).u16(win);
        }
        Msg::Flush { ops } => {
            w.u8(kind::FLUSH).u16(win).u64(*ops);
        }
        Msg::Flushed => {
            w.u8(kind::FLUSHED).u16(win);
        }
        Msg::Post => {
            w.u8(kind::POST).u16(win);
        }
        Msg::Complete { ops } => {
            w.u8(kind::COMPLETE).u16(win).u64(*ops);
        }
        Msg::Fence { ops } => {
            w.u8(kind::FENCE).u16(win).u64(*ops);
        }
        Msg::FenceDone => {
            w.u8(kind::FENCE_DONE).u16(win);
        }
    }
    w.into_vec()
}

/// Decodes a message: its window and contents. Data must match the segments' total length
/// (ACC and GET_ACC data a whole number of elements).
pub fn decode(bytes: &[u8]) -> Result<(u16, Msg<'_>), DecodeError> {
    let mut r = Reader::new(bytes, FRAME);
    let t = r.u8("type")?;
    let win = r.u16("window")?;
    let m = match t {
        kind::PUT => {
            let seq = r.u64("seq")?;
            let s = read_segs(&mut r)?;
            let data = r.rest();
            if data.len() as u64 != total(&s) {
                return Err(
                    Reader::new(bytes, FRAME).error("data", "length differs from the segments'")
                );
            }
            return Ok((win, Msg::Put { seq, segs: s, data }));
        }
        kind::ACC | kind::GET_ACC => {
            let seq = r.u64("seq")?;
            let (token, offset) = if t == kind::GET_ACC {
                (r.u64("token")?, r.u64("offset")?)
            } else {
                (0, 0)
            };
            let op = read_op(&mut r)?;
            let d = read_dtype(&mut r)?;
            let s = read_segs(&mut r)?;
            let data = r.rest();
            let check = Reader::new(bytes, FRAME);
            let len = total(&s);
            if s.iter().any(|g| !(g.len as usize).is_multiple_of(d.size())) {
                return Err(check.error("segments", "not whole elements"));
            }
            if op == AccOp::NoOp {
                if !data.is_empty() {
                    return Err(check.error("data", "an operand for MPI_NO_OP"));
                }
            } else if data.len() as u64 != len {
                return Err(check.error("data", "length differs from the segments'"));
            }
            if let AccOp::Reduce(o) = op {
                if !o.applies_to(d) {
                    return Err(check.error("operation", "not defined for the element type"));
                }
            }
            if t == kind::ACC {
                Msg::Acc {
                    seq,
                    op,
                    dtype: d,
                    segs: s,
                    data,
                }
            } else {
                Msg::GetAcc {
                    seq,
                    token,
                    offset,
                    op,
                    dtype: d,
                    segs: s,
                    data,
                }
            }
        }
        kind::GET => {
            let seq = r.u64("seq")?;
            let token = r.u64("token")?;
            let offset = r.u64("offset")?;
            let s = read_segs(&mut r)?;
            Msg::Get {
                seq,
                token,
                offset,
                segs: s,
            }
        }
        kind::CAS => {
            let seq = r.u64("seq")?;
            let token = r.u64("token")?;
            let disp = r.u64("disp")?;
            let cn = r.u32("compare")? as usize;
            let compare = r.take(cn, "compare")?;
            let sn = r.u32("swap")? as usize;
            let swap = r.take(sn, "swap")?;
            if cn != sn || cn == 0 || cn > 16 {
                return Err(r.error("compare", "sizes differ or are not 1-16 bytes"));
            }
            Msg::Cas {
                seq,
                token,
                disp,
                compare,
                swap,
            }
        }
        kind::RESULT => {
            let token = r.u64("token")?;
            let offset = r.u64("offset")?;
            let data = r.rest();
            return Ok((
                win,
                Msg::Result {
                    token,
                    offset,
                    data,
                },
            ));
        }
        kind::LOCK => Msg::Lock {
            exclusive: r.bool("exclusive")?,
        },
        kind::LOCK_IN_ORDER => Msg::LockInOrder {
            seq: r.u64("seq")?,
            exclusive: r.bool("exclusive")?,
        },
        kind::GRANT => Msg::Grant,
        kind::UNLOCK => Msg::Unlock { ops: r.u64("ops")? },
        kind::UNLOCKED => Msg::Unlocked,
        kind::FLUSH => Msg::Flush { ops: r.u64("ops")? },
        kind::FLUSHED => Msg::Flushed,
        kind::POST => Msg::Post,
        kind::COMPLETE => Msg::Complete { ops: r.u64("ops")? },
        kind::FENCE => Msg::Fence { ops: r.u64("ops")? },
        kind::FENCE_DONE => Msg::FenceDone,
        _ => return Err(r.error("type", "unknown")),
    };
    r.finish("message")?;
    Ok((win, m))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Vec<u8>> {
        let segs = vec![
            Segment { offset: 8, len: 16 },
            Segment { offset: 40, len: 8 },
        ];
        let data = [7u8; 24];
        vec![
            encode(
                3,
                &Msg::Put {
                    seq: 1,
                    segs: segs.clone(),
                    data: &data,
                },
            ),
            encode(
                3,
                &Msg::Acc {
                    seq: 2,
                    op: AccOp::Reduce(Op::Sum),
                    dtype: Dtype::I64,
                    segs: segs.clone(),
                    data: &data,
                },
            ),
            encode(
                3,
                &Msg::GetAcc {
                    seq: 3,
                    token: 9,
                    offset: 0,
                    op: AccOp::NoOp,
                    dtype: Dtype::Opaque(3),
                    segs: vec![Segment { offset: 0, len: 6 }],
                    data: &[],
                },
            ),
            encode(
                3,
                &Msg::Get {
                    seq: 4,
                    token: 10,
                    offset: 24,
                    segs,
                },
            ),
            encode(
                3,
                &Msg::Cas {
                    seq: 5,
                    token: 11,
                    disp: 16,
                    compare: &[1; 8],
                    swap: &[2; 8],
                },
            ),
            encode(
                3,
                &Msg::Result {
                    token: 9,
                    offset: 0,
                    data: &[1, 2, 3],
                },
            ),
            encode(3, &Msg::Lock { exclusive: true }),
            encode(
                3,
                &Msg::LockInOrder {
                    seq: 6,
                    exclusive: false,
                },
            ),
            encode(3, &Msg::Unlock { ops: 77 }),
            encode(3, &Msg::Fence { ops: 5 }),
            encode(3, &Msg::FenceDone),
        ]
    }

    #[test]
    fn messages_round_trip_and_every_cut_or_flip_is_an_error_or_consistent() {
        for s in samples() {
            let (win, m) = decode(&s).unwrap();
            assert_eq!(win, 3);
            assert_eq!(encode(win, &m), s, "{m:?}");
            for cut in 0..s.len() {
                // A shorter frame may decode only as a message with less data, never panic.
                if let Ok((_, m)) = decode(&s[..cut]) {
                    assert!(matches!(m, Msg::Result { .. }), "{m:?} from {cut} bytes");
                }
            }
            for i in 0..s.len() {
                for bit in 0..8 {
                    let mut f = s.clone();
                    f[i] ^= 1 << bit;
                    if let Ok((_, m)) = decode(&f) {
                        // Whatever decodes is self-consistent.
                        match m {
                            Msg::Put { segs, data, .. } => {
                                assert_eq!(total(&segs), data.len() as u64)
                            }
                            Msg::Acc {
                                segs, data, dtype, ..
                            } => {
                                assert_eq!(total(&segs), data.len() as u64);
                                assert!(segs
                                    .iter()
                                    .all(|g| (g.len as usize).is_multiple_of(dtype.size())));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn lies_are_refused() {
        // An operation not defined for the type, an unknown type, data that does not fill
        // the ranges, an opaque element of zero bytes.
        let bad_op = encode(
            1,
            &Msg::Acc {
                seq: 0,
                op: AccOp::Reduce(Op::Band),
                dtype: Dtype::F64,
                segs: vec![Segment { offset: 0, len: 8 }],
                data: &[0; 8],
            },
        );
        assert!(decode(&bad_op).is_err());
        let mut unknown = bad_op.clone();
        unknown[12] = 99;
        assert!(decode(&unknown).is_err());
        let short = encode(
            1,
            &Msg::Put {
                seq: 0,
                segs: vec![Segment { offset: 0, len: 9 }],
                data: &[0; 8],
            },
        );
        assert!(decode(&short).is_err());
        let zero = encode(
            1,
            &Msg::Acc {
                seq: 0,
                op: AccOp::Replace,
                dtype: Dtype::Opaque(0),
                segs: vec![],
                data: &[],
            },
        );
        assert!(decode(&zero).is_err());
    }
}
