//! The bounded cursor every binary frame of the runtime is decoded with: the launcher's
//! protocol (`launcher::proto`) and the connect/accept messages (`dpm::oob`).
//!
//! A frame comes from another process (or a stranger on the network), so every read checks
//! the bytes left and fails with a [`DecodeError`] naming the frame, the field and what is
//! wrong; a count is checked against what the rest of the frame can hold before anything is
//! allocated for it. This module owns the primitive encodings (big-endian integers, 0/1
//! booleans, u32-length-prefixed bytes and UTF-8 strings); it must never know a message
//! layout.

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
    pub(crate) fn error(&self, what: &'static str, reason: &'static str) -> DecodeError {
        DecodeError {
            frame: self.frame,
            what,
            reason,
        }
    }

    pub(crate) fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(self.error(what, "length runs past the end of the frame"));
        }
        let (head, rest) = self.buf.split_at(n);
        self.buf = rest;
        Ok(head)
    }

    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        let b = self.take(2, what)?;
        Ok(u16::from_be_bytes([b[0], b[1]]))
    }

    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        let b = self.take(4, what)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        Ok(self.u32(what)? as i32)
    }

    pub(crate) fn u64(&mut self, what: &'static str) -> Result<u64, DecodeError> {
        let mut a = [0u8; 8];
        a.copy_from_slice(self.take(8, what)?);
        Ok(u64::from_be_bytes(a))
    }

    pub(crate) fn bool(&mut self, what: &'static str) -> Result<bool, DecodeError> {
        match self.u8(what)? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(self.error(what, "boolean is neither 0 nor 1")),
        }
    }

    pub(crate) fn bytes(&mut self, what: &'static str) -> Result<Vec<u8>, DecodeError> {
        let n = self.u32(what)? as usize;
        Ok(self.take(n, what)?.to_vec())
    }

    pub(crate) fn string(&mut self, what: &'static str) -> Result<String, DecodeError> {
        let bytes = self.bytes(what)?;
        String::from_utf8(bytes).map_err(|_| self.error(what, "not UTF-8"))
    }

    /// A u32 count of items of at least `min_item` bytes each.
    pub(crate) fn count(
        &mut self,
        what: &'static str,
        min_item: usize,
    ) -> Result<usize, DecodeError> {
        let n = self.u32(what)? as usize;
        // A count larger than the rest of the frame can hold is a lie that would otherwise
        // make us allocate for it.
        if n.saturating_mul(min_item) > self.buf.len() {
            return Err(self.error(what, "count larger than the frame can hold"));
        }
        Ok(n)
    }

    pub(crate) fn strings(&mut self, what: &'static str) -> Result<Vec<String>, DecodeError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.string(what)).collect()
    }

    pub(crate) fn pairs(
        &mut self,
        what: &'static str,
    ) -> Result<Vec<(String, String)>, DecodeError> {
        let n = self.count(what, 8)?;
        (0..n)
            .map(|_| Ok((self.string(what)?, self.string(what)?)))
            .collect()
    }

    pub(crate) fn u32s(&mut self, what: &'static str) -> Result<Vec<u32>, DecodeError> {
        let n = self.count(what, 4)?;
        (0..n).map(|_| self.u32(what)).collect()
    }

    /// Fails unless the whole frame was read.
    pub(crate) fn finish(self, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(self.error(what, "trailing bytes after the message"))
        }
    }
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
}
