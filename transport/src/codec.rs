//! The one paired binary codec of Kestrel: every card a transport publishes and every frame
//! the runtime sends (the launcher protocol, connect/accept messages, the transport set's card
//! bundle) is written with [`Writer`] and read back with the bounded [`Reader`].
//!
//! Bytes come from another process (or a stranger on the network), so every read checks the
//! bytes left and fails with a [`DecodeError`] naming the frame, the field and what is wrong;
//! a count is checked against what the rest of the frame can hold before anything is
//! allocated for it. Each `Writer` method has the `Reader` method of the same name that reads
//! it back (big-endian integers, 0/1 booleans, u32-length-prefixed bytes and UTF-8 strings,
//! u32-counted lists). This module owns the primitive encodings; it must never know a
//! message layout.

use std::fmt;

/// A frame that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Which kind of frame ("launcher message", "connect/accept message").
    pub frame: &'static str,
    /// What was being read.
    pub what: &'static str,
    /// What is wrong.
    pub reason: &'static str,
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed {} ({}: {})",
            self.frame, self.what, self.reason
        )
    }
}

impl std::error::Error for DecodeError {}

/// A checked cursor over one frame.
pub struct Reader<'a> {
    buf: &'a [u8],
    frame: &'static str,
}

impl<'a> Reader<'a> {
    /// A reader over `buf`, a frame of the kind `frame` names in errors.
    pub fn new(buf: &'a [u8], frame: &'static str) -> Self {
        Reader { buf, frame }
    }

    /// The error for `what` in this frame.
    pub fn error(&self, what: &'static str, reason: &'static str) -> DecodeError {
        DecodeError {
            frame: self.frame,
            what,
            reason,
        }
    }

    /// `n` bytes as they are.
    pub fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(self.error(what, "length runs past the end of the frame"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    /// Every byte left (a frame's trailing payload).
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// One byte.
    pub fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    /// A big-endian u16.
    pub fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    /// A big-endian u32.
    pub fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// A big-endian i32.
    pub fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(self.u32(what)? as i32)
    }

    /// A big-endian u64.
    pub fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_be_bytes(a))
    }

    /// 0 or 1; anything else is an error.
    pub fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.error(what, "boolean is neither 0 nor 1")),
        }
    }

    /// A u32 length, then that many bytes.
    pub fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32(what)? as usize;
        Ok(self.take(n, what)?.to_vec())
    }

    /// Length-prefixed UTF-8.
    pub fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let bytes = self.bytes(what)?;
        String::from_utf8(bytes).map_err(|_| self.error(what, "not UTF-8"))
    }

    /// A u32 count of items of at least `min_item` bytes each.
    pub fn count(&mut self, what: &'static str, min_item: usize) -> Result<usize, DecodeError> {
        let n = self.u32(what)? as usize;
        // A count larger than the rest of the frame can hold is a lie that would otherwise
        // make us allocate for it.
        if n.saturating_mul(min_item) > self.buf.len() {
            return Err(self.error(what, "count larger than the frame can hold"));
        }
        Ok(n)
    }

    /// A u32 count, then each string.
    pub fn strings(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.string(what)).collect()
    }

    /// A u32 count, then each key and value.
    pub fn pairs(&mut self, what: &'static str) -> Result<Vec<(String, String)>, DecodeError> {
        let n = self.count(what, 8)?;
        (0..n)
            .map(|_| Ok((self.string(what)?, self.string(what)?)))
            .collect()
    }

    /// A u32 count, then each value.
    pub fn u32s(&mut self, what: &'static str) -> Result<Vec<u32>, DecodeError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.u32(what)).collect()
    }

    /// Fails unless the whole frame was read.
    pub fn finish(self, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(self.error(what, "trailing bytes after the message"))
        }
    }
}

/// Appends fields in the encodings [`Reader`] reads back.
#[derive(Debug, Default, Clone)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer.
    pub fn new() -> Self {
        Writer::default()
    }
    /// Bytes as they are (magic numbers, fixed-size fields); read back with [`Reader::take`].
    pub fn raw(&mut self, b: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(b);
        self
    }
    /// One byte.
    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    /// Big-endian u16.
    pub fn u16(&mut self, v: u16) -> &mut Self {
        self.raw(&v.to_be_bytes())
    }
    /// Big-endian u32.
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.raw(&v.to_be_bytes())
    }
    /// Big-endian i32.
    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.u32(v as u32)
    }
    /// Big-endian u64.
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.raw(&v.to_be_bytes())
    }
    /// 0 or 1.
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// A u32 length, then the bytes.
    pub fn bytes(&mut self, b: &[u8]) -> &mut Self {
        self.u32(len_u32(b.len()));
        self.raw(b)
    }
    /// A string as [`Writer::bytes`] of its UTF-8.
    pub fn string(&mut self, s: &str) -> &mut Self {
        self.bytes(s.as_bytes())
    }
    /// A u32 count, then each string.
    pub fn strings(&mut self, v: &[String]) -> &mut Self {
        self.u32(len_u32(v.len()));
        v.iter().for_each(|s| {
            self.string(s);
        });
        self
    }
    /// A u32 count, then each key and value.
    pub fn pairs(&mut self, v: &[(String, String)]) -> &mut Self {
        self.u32(len_u32(v.len()));
        for (k, val) in v {
            self.string(k).string(val);
        }
        self
    }
    /// A u32 count, then each value.
    pub fn u32s(&mut self, v: &[u32]) -> &mut Self {
        self.u32(len_u32(v.len()));
        v.iter().for_each(|&x| {
            self.u32(x);
        });
        self
    }
    /// Bytes written so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// Whether nothing was written.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
    /// The encoded bytes.
    pub fn into_vec(self) -> Vec<u8> {
        self.buf
    }
    /// The encoded bytes behind a big-endian u32 length (a stream frame).
    pub fn into_frame(self) -> Vec<u8> {
        let mut out = Vec::with_capacity(4 + self.buf.len());
        out.extend_from_slice(&len_u32(self.buf.len()).to_be_bytes());
        out.extend_from_slice(&self.buf);
        out
    }
}

/// Lengths are u32 on the wire; nothing Kestrel encodes comes near 4 GiB, and a silent
/// truncation would corrupt the frame, so a larger one is a bug.
fn len_u32(n: usize) -> u32 {
    u32::try_from(n)
        .unwrap_or_else(|_| panic!("codec: a field of {n} bytes does not fit a u32 length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_read_is_bounded_and_names_the_frame() {
        let mut r = Reader::new(&[0, 0, 0, 9, b'a'], "test frame");
        let e = r.string("name").unwrap_err();
        assert_eq!(
            e.to_string(),
            "malformed test frame (name: length runs past the end of the frame)"
        );
        let mut r = Reader::new(&[0xff, 0xff, 0xff, 0xff], "test frame");
        assert_eq!(
            r.count("items", 4).unwrap_err().reason,
            "count larger than the frame can hold"
        );
        let mut r = Reader::new(&[2], "test frame");
        assert_eq!(
            r.bool("flag").unwrap_err().reason,
            "boolean is neither 0 nor 1"
        );
        let r = Reader::new(&[1], "test frame");
        assert_eq!(
            r.finish("message").unwrap_err().reason,
            "trailing bytes after the message"
        );
        let mut r = Reader::new(&[0, 7, 0, 0, 0, 0, 0, 0, 0, 1, 1], "test frame");
        assert_eq!(r.u16("a").unwrap(), 7);
        assert_eq!(r.u64("b").unwrap(), 1);
        assert!(r.bool("c").unwrap());
        r.finish("message").unwrap();
    }

    #[test]
    fn every_writer_field_reads_back() {
        let mut w = Writer::new();
        w.raw(b"KS")
            .u8(7)
            .u16(0xbeef)
            .u32(1 << 31)
            .i32(-5)
            .u64(u64::MAX - 1)
            .bool(true)
            .bytes(&[1, 2, 3])
            .string("h\u{e9}llo")
            .strings(&["a".into(), String::new()])
            .pairs(&[("k".into(), "v".into())])
            .u32s(&[9, 10]);
        let v = w.into_vec();
        let mut r = Reader::new(&v, "test frame");
        assert_eq!(r.take(2, "magic").unwrap(), b"KS");
        assert_eq!(r.u8("a").unwrap(), 7);
        assert_eq!(r.u16("b").unwrap(), 0xbeef);
        assert_eq!(r.u32("c").unwrap(), 1 << 31);
        assert_eq!(r.i32("d").unwrap(), -5);
        assert_eq!(r.u64("e").unwrap(), u64::MAX - 1);
        assert!(r.bool("f").unwrap());
        assert_eq!(r.bytes("g").unwrap(), vec![1, 2, 3]);
        assert_eq!(r.string("h").unwrap(), "h\u{e9}llo");
        assert_eq!(
            r.strings("i").unwrap(),
            vec!["a".to_string(), String::new()]
        );
        assert_eq!(r.pairs("j").unwrap(), vec![("k".into(), "v".into())]);
        assert_eq!(r.u32s("k").unwrap(), vec![9, 10]);
        r.finish("message").unwrap();
        let mut w = Writer::new();
        w.u8(1);
        assert_eq!(w.into_frame(), vec![0, 0, 0, 1, 1]);
    }

    #[test]
    fn every_truncation_of_an_encoding_is_an_error() {
        let mut w = Writer::new();
        w.string("abc").u32s(&[1, 2]).u64(3);
        let v = w.into_vec();
        for cut in 0..v.len() {
            let mut r = Reader::new(&v[..cut], "test frame");
            let ok = r.string("s").is_ok() && r.u32s("l").is_ok() && r.u64("n").is_ok();
            assert!(!ok, "a frame cut at {cut} bytes decoded");
        }
    }
}
