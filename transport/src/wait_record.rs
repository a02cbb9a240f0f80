//! The wait record: what a stalled rank says it waits for, in a fixed-size file its launcher
//! reads for hang reports (`kestrel-run --timeout`, SIGUSR1).
//!
//! This module owns the record's bytes and their checked decoder; it never touches a file or
//! a clock (the runtime's `wait_board` writes the record, the launcher's agent reads it). The
//! writer is the rank, the reader another process that may read while the rank rewrites the
//! file, so a record carries a checksum and a torn read is refused as [`RecordError::Checksum`]
//! (the reader tries again). The text is the rank's own words and is sanitised on decode: a
//! launcher prints it to a terminal, so control characters never pass.
//!
//! Layout (little-endian, [`RECORD_LEN`] bytes):
//!
//! | offset | bytes | field |
//! |---:|---:|---|
//! | 0 | 8 | magic `KSTRWAIT` |
//! | 8 | 4 | version (1) |
//! | 12 | 4 | pid of the rank |
//! | 16 | 4 | rank in the job |
//! | 20 | 4 | text length (at most [`MAX_TEXT`]) |
//! | 24 | 8 | `CLOCK_MONOTONIC` ns when the stall began |
//! | 32 | 8 | `CLOCK_MONOTONIC` ns of this write (the heartbeat) |
//! | 40 | 400 | text, UTF-8, zero-padded |
//! | 440 | 8 | FNV-1a 64 of bytes 0..440 |
//! | 448 | 64 | zero |

/// Bytes of a record (and of the file holding it).
pub const RECORD_LEN: usize = 512;
/// Longest text a record carries.
pub const MAX_TEXT: usize = 400;
const MAGIC: [u8; 8] = *b"KSTRWAIT";
const VERSION: u32 = 1;
const TEXT_AT: usize = 40;
const SUM_AT: usize = TEXT_AT + MAX_TEXT;

/// What a rank stalled in a wait says about it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WaitRecord {
    /// The rank's process id.
    pub pid: u32,
    /// Its rank in the job.
    pub rank: u32,
    /// `CLOCK_MONOTONIC` nanoseconds when the stall began.
    pub since_ns: u64,
    /// `CLOCK_MONOTONIC` nanoseconds when the record was written.
    pub heartbeat_ns: u64,
    /// What it waits for, in words.
    pub waiting: String,
}

/// Why bytes are not a wait record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordError {
    /// Fewer bytes than a record (a file being created, or not a record).
    Short(usize),
    /// Not a wait record.
    BadMagic,
    /// A record of a version this reader does not know.
    BadVersion(u32),
    /// A text length over [`MAX_TEXT`].
    TextTooLong(u32),
    /// The checksum does not match: read while being written, or damaged.
    Checksum,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            RecordError::Short(n) => write!(f, "wait record: {n} bytes, {RECORD_LEN} expected"),
            RecordError::BadMagic => write!(f, "wait record: not a wait record (bad magic)"),
            RecordError::BadVersion(v) => {
                write!(f, "wait record: version {v}, this launcher reads {VERSION}")
            }
            RecordError::TextTooLong(n) => {
                write!(f, "wait record: text of {n} bytes, at most {MAX_TEXT}")
            }
            RecordError::Checksum => {
                write!(f, "wait record: checksum mismatch (torn or damaged)")
            }
        }
    }
}

impl std::error::Error for RecordError {}

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

impl WaitRecord {
    /// The record's bytes; a longer text is cut at a character boundary.
    pub fn encode(&self) -> [u8; RECORD_LEN] {
        let mut out = [0u8; RECORD_LEN];
        let mut end = self.waiting.len().min(MAX_TEXT);
        while !self.waiting.is_char_boundary(end) {
            end -= 1;
        }
        let text = &self.waiting.as_bytes()[..end];
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&self.pid.to_le_bytes());
        out[16..20].copy_from_slice(&self.rank.to_le_bytes());
        out[20..24].copy_from_slice(&(text.len() as u32).to_le_bytes());
        out[24..32].copy_from_slice(&self.since_ns.to_le_bytes());
        out[32..40].copy_from_slice(&self.heartbeat_ns.to_le_bytes());
        out[TEXT_AT..TEXT_AT + text.len()].copy_from_slice(text);
        let sum = fnv1a(&out[..SUM_AT]);
        out[SUM_AT..SUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
        out
    }

    /// Checks and decodes a record; the text comes back with every control character (and
    /// every invalid UTF-8 sequence) replaced by `?`.
    pub fn decode(bytes: &[u8]) -> Result<WaitRecord, RecordError> {
        if bytes.len() < RECORD_LEN {
            return Err(RecordError::Short(bytes.len()));
        }
        if bytes[0..8] != MAGIC {
            return Err(RecordError::BadMagic);
        }
        let version = u32_at(bytes, 8);
        if version != VERSION {
            return Err(RecordError::BadVersion(version));
        }
        if u64_at(bytes, SUM_AT) != fnv1a(&bytes[..SUM_AT]) {
            return Err(RecordError::Checksum);
        }
        let len = u32_at(bytes, 20);
        if len as usize > MAX_TEXT {
            return Err(RecordError::TextTooLong(len));
        }
        let text = String::from_utf8_lossy(&bytes[TEXT_AT..TEXT_AT + len as usize]);
        let waiting: String = text
            .chars()
            .map(|c| {
                if c.is_control() || c == '\u{FFFD}' {
                    '?'
                } else {
                    c
                }
            })
            .collect();
        Ok(WaitRecord {
            pid: u32_at(bytes, 12),
            rank: u32_at(bytes, 16),
            since_ns: u64_at(bytes, 24),
            heartbeat_ns: u64_at(bytes, 32),
            waiting,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> WaitRecord {
        WaitRecord {
            pid: 4242,
            rank: 3,
            since_ns: 1_000_000_000,
            heartbeat_ns: 9_500_000_000,
            waiting: "recv(source 1, tag 7, communicator 0)".into(),
        }
    }

    #[test]
    fn round_trip() {
        let r = sample();
        assert_eq!(WaitRecord::decode(&r.encode()), Ok(r));
    }

    #[test]
    fn every_damage_is_refused_with_its_reason() {
        let good = sample().encode();
        assert_eq!(
            WaitRecord::decode(&good[..100]),
            Err(RecordError::Short(100))
        );
        let mut b = good;
        b[0] = b'X';
        assert_eq!(WaitRecord::decode(&b), Err(RecordError::BadMagic));
        let mut b = good;
        b[8] = 9;
        assert_eq!(WaitRecord::decode(&b), Err(RecordError::BadVersion(9)));
        // A flipped byte anywhere under the checksum: a torn read.
        for at in [12, 24, 33, TEXT_AT + 5, SUM_AT - 1] {
            let mut b = good;
            b[at] ^= 0x40;
            assert_eq!(WaitRecord::decode(&b), Err(RecordError::Checksum), "{at}");
        }
        // A length over the bound, with a valid checksum.
        let mut b = good;
        b[20..24].copy_from_slice(&1000u32.to_le_bytes());
        let sum = fnv1a(&b[..SUM_AT]);
        b[SUM_AT..SUM_AT + 8].copy_from_slice(&sum.to_le_bytes());
        assert_eq!(WaitRecord::decode(&b), Err(RecordError::TextTooLong(1000)));
    }

    #[test]
    fn text_is_bounded_and_sanitised() {
        let mut r = sample();
        r.waiting = "é".repeat(300);
        let d = WaitRecord::decode(&r.encode()).unwrap();
        assert_eq!(d.waiting.len(), MAX_TEXT);
        r.waiting = "evil\x1b[2J\nline\u{7}".into();
        let d = WaitRecord::decode(&r.encode()).unwrap();
        assert_eq!(d.waiting, "evil?[2J?line?");
    }
}
