//! The bodies of the runtime's cargo-fuzz targets (`fuzz/`, one submodule per target) and their
//! seed corpora.
//!
//! * [`pmi_wire`]: the PMI-1 and PMI-2 codecs of [`crate::wire`] (and the PMI-2 `spawn`
//!   command of [`crate::spawn_request`] that rides on them);
//! * [`launcher_frame`]: the launcher's frames ([`crate::launcher::proto`]);
//! * [`dpm_oob`]: the connect/accept frames and their stream reader ([`crate::dpm::oob`]);
//! * [`dpm_port`]: port names ([`crate::dpm::port`]).
//!
//! Each submodule's `fuzz_one` holds what its target checks (decoding never panics; whatever
//! decodes re-encodes to what was read; a stream decodes to the same frames however its bytes
//! arrive; no length field is trusted beyond the bytes that came with it), so that the unit
//! tests replay the committed corpus `fuzz/corpus/<target>/` without cargo-fuzz; `seed_corpus`
//! generates that corpus. This module owns those checks; it must never do I/O (streams are
//! in-memory readers), hold state between calls, or panic except on a violated property.

pub mod dpm_oob;
pub mod dpm_port;
pub mod launcher_frame;
pub mod pmi_wire;

use std::fmt::Debug;

/// How decoding a byte stream frame by frame ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// Every byte was decoded, or this many bytes wait for the rest of a frame.
    Incomplete(usize),
    /// A malformed frame ended the stream (the connection would be dropped here).
    Malformed,
}

/// A framing decoder: the first frame of a buffer and the bytes it used, `None` while the
/// frame is incomplete, or an error (`Display` so that the message is formatted too).
type FrontDecoder<'a, T, E> = &'a dyn Fn(&[u8]) -> Result<Option<(T, usize)>, E>;

/// Decodes `stream` as a reader does when its bytes arrive in pieces cut at `cuts` (ascending
/// offsets): each piece is appended to a buffer, whole frames are taken off its front, and the
/// first error ends the stream. Returns the frames, the bytes each used, and how it ended.
///
/// Panics if the decoder claims a frame of no bytes or of more bytes than it was given.
pub(crate) fn decode_arrivals<T, E: std::fmt::Display>(
    decode: FrontDecoder<'_, T, E>,
    stream: &[u8],
    cuts: &[usize],
) -> (Vec<(T, usize)>, End) {
    let mut frames = Vec::new();
    let mut buf: Vec<u8> = Vec::new();
    let mut from = 0;
    for &to in cuts.iter().chain(std::iter::once(&stream.len())) {
        buf.extend_from_slice(&stream[from..to.max(from)]);
        from = to.max(from);
        loop {
            match decode(&buf) {
                Ok(Some((frame, used))) => {
                    assert!(used >= 1, "a frame of no bytes (the reader would spin)");
                    assert!(
                        used <= buf.len(),
                        "a frame of {used} bytes out of {} buffered",
                        buf.len()
                    );
                    buf.drain(..used);
                    frames.push((frame, used));
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = e.to_string();
                    return (frames, End::Malformed);
                }
            }
        }
    }
    (frames, End::Incomplete(buf.len()))
}

/// Offsets at which to cut `stream` in two: all of them for a short stream; otherwise both
/// ends, the middle, either side of each of the first frame boundaries (`used`, in order) and a
/// few spread by the content.
pub(crate) fn cut_points(stream: &[u8], used: &[usize]) -> Vec<usize> {
    let n = stream.len();
    if n <= 48 {
        return (0..=n).collect();
    }
    let mut cuts = vec![0, 1, n / 2, n - 1, n];
    let mut at = 0;
    for &u in used.iter().take(16) {
        at += u;
        cuts.extend([at - 1, at, (at + 1).min(n)]);
    }
    let mut h: usize = stream
        .iter()
        .fold(n, |h, &b| h.wrapping_mul(31) ^ usize::from(b));
    for _ in 0..6 {
        h = h.wrapping_mul(0x9E37_79B9).wrapping_add(7);
        cuts.push(h % (n + 1));
    }
    cuts.sort_unstable();
    cuts.dedup();
    cuts
}

/// Checks that `stream` decodes to the same frames and the same end whether it arrives whole,
/// in two pieces cut at any of [`cut_points`], or (when short) byte by byte: a partial frame
/// is "not yet", never an error nor a different frame.
pub(crate) fn check_arrivals<T: PartialEq + Debug, E: std::fmt::Display>(
    decode: FrontDecoder<'_, T, E>,
    stream: &[u8],
) {
    let whole = decode_arrivals(decode, stream, &[]);
    let used: Vec<usize> = whole.0.iter().map(|(_, u)| *u).collect();
    for cut in cut_points(stream, &used) {
        let pieces = decode_arrivals(decode, stream, &[cut]);
        assert!(
            pieces == whole,
            "cut at {cut}, the stream decodes to {pieces:?}, whole to {whole:?}"
        );
    }
    if stream.len() <= 64 {
        let bytewise: Vec<usize> = (1..stream.len()).collect();
        assert!(
            decode_arrivals(decode, stream, &bytewise) == whole,
            "byte by byte, the stream decodes differently"
        );
    }
}

/// The committed corpus directory of `target` (`fuzz/corpus/<target>` of the repository).
#[cfg(test)]
fn corpus_dir(target: &str) -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../fuzz/corpus")
        .join(target)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A toy framing: one length byte, then that many bytes; a length above 9 is malformed.
    fn toy(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, String> {
        match buf.first() {
            None => Ok(None),
            Some(&n) if n > 9 => Err(format!("length {n}")),
            Some(&n) => Ok(buf
                .get(1..1 + usize::from(n))
                .map(|b| (b.to_vec(), 1 + usize::from(n)))),
        }
    }

    #[test]
    fn arrivals_decode_like_a_reader() {
        let stream = [2, b'a', b'b', 0, 3, b'x'];
        let (frames, end) = decode_arrivals(&toy, &stream, &[1, 4]);
        assert_eq!(frames, vec![(b"ab".to_vec(), 3), (vec![], 1)]);
        assert_eq!(end, End::Incomplete(2));
        assert_eq!(decode_arrivals(&toy, &[1, 0, 10], &[]).1, End::Malformed);
        check_arrivals(&toy, &stream);
    }

    #[test]
    fn a_decoder_that_depends_on_how_bytes_arrive_is_caught() {
        // Refuses an incomplete frame instead of waiting for it: whole is fine, pieces are not.
        let impatient = |buf: &[u8]| match toy(buf) {
            Ok(None) if !buf.is_empty() => Err("incomplete".to_string()),
            other => other,
        };
        let caught = std::panic::catch_unwind(|| check_arrivals(&impatient, &[2, b'a', b'b']));
        assert!(caught.is_err());
    }
}
