//! PMI wire codecs: pure functions from bytes to [`Command`] and back.
//!
//! Two framings share one message model:
//! * **v1** ("simple" PMI-1): one command per line, `cmd=<name> key=value ...\n`, tokens
//!   separated by spaces (or tabs). A space, tab or backslash inside a value is escaped with a
//!   backslash (as newer MPICH does for spaces); our own values never need it. A value cannot
//!   hold a newline, and the last one of a line cannot end in a carriage return (a line may end
//!   in CRLF, so that CR would be read as part of the line end): the encoder refuses both.
//! * **v2** (PMI-2): a 6-character decimal length (space- or zero-padded), then
//!   `cmd=<name>;key=value;...;`. Values cannot contain `;`.
//!
//! Every PMI session starts in v1 framing with `cmd=init pmi_version=N`; version 2 switches both
//! sides to v2 framing after the init exchange.
//!
//! Decoders never panic and never trust a length: a malformed frame is a [`WireError`] that
//! quotes the offending text.

use std::fmt;

/// Largest frame either side accepts; PMI values are at most 1024 bytes, so 64 KiB leaves room
/// for any legitimate command while bounding what a broken peer can make us buffer.
pub const MAX_FRAME: usize = 64 * 1024;

/// Which framing a PMI connection uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// PMI-1 lines.
    V1,
    /// PMI-2 length-prefixed frames.
    V2,
}

/// One PMI command or response: a name and ordered key/value pairs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// `cmd=` (or `mcmd=`) value.
    pub name: String,
    /// The remaining pairs in wire order.
    pub pairs: Vec<(String, String)>,
}

impl Command {
    /// A command with no pairs yet.
    pub fn new(name: impl Into<String>) -> Self {
        Command {
            name: name.into(),
            pairs: Vec::new(),
        }
    }

    /// Appends a pair (builder style).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.pairs.push((key.into(), value.into()));
        self
    }

    /// The first value of `key`.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value of `key`, or an error naming the command and the key.
    pub fn require(&self, key: &str) -> Result<&str, WireError> {
        self.get(key).ok_or_else(|| WireError {
            text: self.to_string(),
            reason: format!("'{}' has no '{key}' field", self.name),
        })
    }

    /// `rc` as an integer; a missing `rc` counts as success (hydra omits it on some replies).
    pub fn rc(&self) -> Result<i64, WireError> {
        match self.get("rc") {
            None => Ok(0),
            Some(v) => v.trim().parse().map_err(|_| WireError {
                text: self.to_string(),
                reason: format!("rc '{v}' is not an integer"),
            }),
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "cmd={}", self.name)?;
        for (k, v) in &self.pairs {
            write!(f, " {k}={v}")?;
        }
        Ok(())
    }
}

/// A frame that could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The offending text (truncated to 200 characters).
    pub text: String,
    /// What is wrong with it.
    pub reason: String,
}

impl WireError {
    fn new(bytes: &[u8], reason: impl Into<String>) -> Self {
        let shown = &bytes[..bytes.len().min(200)];
        WireError {
            text: String::from_utf8_lossy(shown).into_owned(),
            reason: reason.into(),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "malformed PMI message '{}': {}",
            self.text.trim_end(),
            self.reason
        )
    }
}

impl std::error::Error for WireError {}

/// A command that cannot be represented in the chosen framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EncodeError {
    /// The key whose value is not representable.
    pub key: String,
    /// Why.
    pub reason: &'static str,
}

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PMI value of '{}' {}", self.key, self.reason)
    }
}

impl std::error::Error for EncodeError {}

impl Framing {
    /// Encodes `cmd` into one frame.
    pub fn encode(self, cmd: &Command) -> Result<Vec<u8>, EncodeError> {
        match self {
            Framing::V1 => encode_v1(cmd),
            Framing::V2 => encode_v2(cmd),
        }
    }

    /// Decodes the first frame of `buf`: `Ok(None)` when more bytes are needed, otherwise the
    /// command and how many bytes it used.
    pub fn decode(self, buf: &[u8]) -> Result<Option<(Command, usize)>, WireError> {
        match self {
            Framing::V1 => decode_v1(buf),
            Framing::V2 => decode_v2(buf),
        }
    }
}

fn check_key(key: &str) -> Result<(), EncodeError> {
    // Tabs split PMI-1 tokens like spaces do (a key with one would come back as two words).
    if key.is_empty()
        || key
            .bytes()
            .any(|b| matches!(b, b' ' | b'\t' | b'=' | b';' | b'\n' | b'\r' | b'\\'))
    {
        return Err(EncodeError {
            key: key.into(),
            reason: "key must be non-empty without whitespace, '=', ';', '\\' or line ends",
        });
    }
    Ok(())
}

fn encode_v1(cmd: &Command) -> Result<Vec<u8>, EncodeError> {
    let mut out = String::with_capacity(64);
    out.push_str("cmd=");
    out.push_str(&escape_v1("cmd", &cmd.name)?);
    for (k, v) in &cmd.pairs {
        check_key(k)?;
        out.push(' ');
        out.push_str(k);
        out.push('=');
        out.push_str(&escape_v1(k, v)?);
    }
    // The decoder takes a CR before the newline for half of a CRLF line end (and escaping it
    // would not help: the CR is stripped before escapes are read).
    if out.ends_with('\r') {
        return Err(EncodeError {
            key: cmd.pairs.last().map_or("cmd", |(k, _)| k.as_str()).into(),
            reason: "ends in a carriage return, which PMI-1 reads as part of a CRLF line end",
        });
    }
    out.push('\n');
    Ok(out.into_bytes())
}

fn escape_v1(key: &str, value: &str) -> Result<String, EncodeError> {
    if value.contains('\n') {
        return Err(EncodeError {
            key: key.into(),
            reason: "contains a newline, which PMI-1 cannot carry",
        });
    }
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        // The decoder splits tokens on unescaped spaces and tabs.
        if c == ' ' || c == '\t' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    Ok(out)
}

fn decode_v1(buf: &[u8]) -> Result<Option<(Command, usize)>, WireError> {
    let Some(end) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_FRAME {
            return Err(WireError::new(
                buf,
                "line longer than 64 KiB without a newline",
            ));
        }
        return Ok(None);
    };
    let line = &buf[..end];
    // Refused whole as it would be in pieces: a reader that holds more than MAX_FRAME bytes
    // without a newline gives up above, so a longer line must not depend on arriving at once.
    if end > MAX_FRAME {
        return Err(WireError::new(line, "line longer than 64 KiB"));
    }
    let text = std::str::from_utf8(line).map_err(|_| WireError::new(line, "not UTF-8"))?;
    let text = text.strip_suffix('\r').unwrap_or(text);
    let tokens = split_v1(text);
    let mut pairs: Vec<(String, String)> = Vec::new();
    for token in tokens {
        match token.split_once('=') {
            Some((k, v)) if !k.is_empty() => pairs.push((k.to_string(), v.to_string())),
            // Old servers put unescaped spaces in `msg=` texts: keep the words with the value.
            _ => match pairs.last_mut() {
                Some((_, v)) => {
                    v.push(' ');
                    v.push_str(&token);
                }
                None => return Err(WireError::new(line, "first token is not key=value")),
            },
        }
    }
    let mut iter = pairs.into_iter();
    let name = match iter.next() {
        Some((k, v)) if k == "cmd" || k == "mcmd" => v,
        Some(_) => return Err(WireError::new(line, "does not start with cmd=")),
        None => return Err(WireError::new(line, "empty line")),
    };
    if name.is_empty() {
        return Err(WireError::new(line, "empty command name"));
    }
    Ok(Some((
        Command {
            name,
            pairs: iter.collect(),
        },
        end + 1,
    )))
}

/// Splits on unescaped spaces and removes the escapes.
fn split_v1(text: &str) -> Vec<String> {
    let mut tokens = Vec::new();
    let mut cur = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(next) => cur.push(next),
                None => cur.push('\\'),
            },
            ' ' | '\t' => {
                if !cur.is_empty() {
                    tokens.push(std::mem::take(&mut cur));
                }
            }
            _ => cur.push(c),
        }
    }
    if !cur.is_empty() {
        tokens.push(cur);
    }
    tokens
}

fn encode_v2(cmd: &Command) -> Result<Vec<u8>, EncodeError> {
    let mut body = String::with_capacity(64);
    for (k, v) in std::iter::once(("cmd", cmd.name.as_str()))
        .chain(cmd.pairs.iter().map(|(k, v)| (k.as_str(), v.as_str())))
    {
        check_key(k)?;
        if v.contains(';') || v.contains('\n') {
            return Err(EncodeError {
                key: k.into(),
                reason: "contains ';' or a newline, which PMI-2 cannot carry",
            });
        }
        body.push_str(k);
        body.push('=');
        body.push_str(v);
        body.push(';');
    }
    if body.len() > 999_999 {
        return Err(EncodeError {
            key: "cmd".into(),
            reason: "makes a frame longer than the 6-digit length field allows",
        });
    }
    let mut out = format!("{:6}", body.len()).into_bytes();
    out.extend_from_slice(body.as_bytes());
    Ok(out)
}

fn decode_v2(buf: &[u8]) -> Result<Option<(Command, usize)>, WireError> {
    if buf.len() < 6 {
        return Ok(None);
    }
    let len_field = &buf[..6];
    let len_text = std::str::from_utf8(len_field)
        .map_err(|_| WireError::new(len_field, "length field is not text"))?;
    let len: usize = len_text
        .trim()
        .parse()
        .map_err(|_| WireError::new(len_field, "length field is not a decimal number"))?;
    if len > MAX_FRAME {
        return Err(WireError::new(len_field, "frame longer than 64 KiB"));
    }
    let Some(body) = buf.get(6..6 + len) else {
        return Ok(None);
    };
    let text = std::str::from_utf8(body).map_err(|_| WireError::new(body, "not UTF-8"))?;
    let mut pairs = Vec::new();
    for segment in text.split(';') {
        if segment.is_empty() {
            continue;
        }
        match segment.split_once('=') {
            Some((k, v)) if !k.is_empty() => pairs.push((k.to_string(), v.to_string())),
            _ => {
                return Err(WireError::new(
                    body,
                    format!("segment '{segment}' is not key=value"),
                ))
            }
        }
    }
    let mut iter = pairs.into_iter();
    let name = match iter.next() {
        Some((k, v)) if k == "cmd" && !v.is_empty() => v,
        _ => return Err(WireError::new(body, "does not start with cmd=<name>")),
    };
    Ok(Some((
        Command {
            name,
            pairs: iter.collect(),
        },
        6 + len,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Command {
        Command::new("put")
            .with("kvsname", "kestrel-1a2b")
            .with("key", "0/node")
            .with("value", "aGVsbG8gd29ybGQ")
    }

    #[test]
    fn v1_round_trip() {
        let bytes = Framing::V1.encode(&sample()).unwrap();
        assert_eq!(
            bytes,
            b"cmd=put kvsname=kestrel-1a2b key=0/node value=aGVsbG8gd29ybGQ\n"
        );
        let (cmd, used) = Framing::V1.decode(&bytes).unwrap().unwrap();
        assert_eq!((cmd, used), (sample(), bytes.len()));
    }

    #[test]
    fn v1_escapes_spaces_and_backslashes() {
        let cmd = Command::new("abort").with("message", r"disk full \ retry");
        let bytes = Framing::V1.encode(&cmd).unwrap();
        assert_eq!(
            bytes,
            b"cmd=abort message=disk\\ full\\ \\\\\\ retry\n".to_vec()
        );
        assert_eq!(Framing::V1.decode(&bytes).unwrap().unwrap().0, cmd);
    }

    #[test]
    fn v1_tolerates_unescaped_words_in_values_and_crlf() {
        let (cmd, _) = Framing::V1
            .decode(b"cmd=get_result rc=-1 msg=key not found\r\n")
            .unwrap()
            .unwrap();
        assert_eq!(cmd.get("msg"), Some("key not found"));
        assert_eq!(cmd.rc().unwrap(), -1);
    }

    #[test]
    fn v1_needs_a_whole_line() {
        assert_eq!(Framing::V1.decode(b"cmd=barrier_").unwrap(), None);
        let (cmd, used) = Framing::V1
            .decode(b"cmd=barrier_out\ncmd=x\n")
            .unwrap()
            .unwrap();
        assert_eq!((cmd.name.as_str(), used), ("barrier_out", 16));
    }

    #[test]
    fn v1_malformed_lines_are_errors_naming_the_line() {
        for line in [
            &b"\n"[..],
            b"rc=0 cmd=x\n",
            b"hello\n",
            b"cmd= rc=0\n",
            b"\xff\xfe\n",
        ] {
            let e = Framing::V1.decode(line).unwrap_err();
            assert!(e.to_string().starts_with("malformed PMI message"), "{e}");
        }
        let long = vec![b'a'; MAX_FRAME + 1];
        assert!(Framing::V1.decode(&long).is_err());
        // With its newline too: whether it arrived whole must not matter.
        let mut whole = long;
        whole.push(b'\n');
        assert!(Framing::V1.decode(&whole).is_err());
    }

    #[test]
    fn v2_round_trip_and_padding() {
        let bytes = Framing::V2.encode(&sample()).unwrap();
        let body = "cmd=put;kvsname=kestrel-1a2b;key=0/node;value=aGVsbG8gd29ybGQ;";
        assert_eq!(bytes, format!("{:6}{body}", body.len()).into_bytes());
        assert_eq!(
            Framing::V2.decode(&bytes).unwrap().unwrap(),
            (sample(), bytes.len())
        );
        // Zero-padded lengths (other implementations) parse too.
        let zero = format!("{:06}{body}", body.len());
        assert_eq!(
            Framing::V2.decode(zero.as_bytes()).unwrap().unwrap().0,
            sample()
        );
    }

    #[test]
    fn v2_partial_and_malformed_frames() {
        assert_eq!(Framing::V2.decode(b"    2").unwrap(), None);
        assert_eq!(Framing::V2.decode(b"    20cmd=kvs-fence;").unwrap(), None);
        for bad in [
            &b"abcdefcmd=x;"[..],
            b"     5x=1;;",
            b"     6cmd=;;",
            b"     4cmd;",
            b"999999",
        ] {
            assert!(
                Framing::V2.decode(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn encoders_refuse_unrepresentable_values() {
        let semi = Command::new("kvs-put").with("value", "a;b");
        assert!(Framing::V2.encode(&semi).is_err());
        assert!(Framing::V1.encode(&semi).is_ok());
        let nl = Command::new("put").with("value", "a\nb");
        assert!(Framing::V1.encode(&nl).is_err());
        let badkey = Command::new("put").with("a b", "x");
        assert!(Framing::V1.encode(&badkey).is_err());
    }

    #[test]
    fn v1_tabs_round_trip_and_a_final_carriage_return_is_refused() {
        let tab = Command::new("put").with("value", "a\tb");
        let bytes = Framing::V1.encode(&tab).unwrap();
        assert_eq!(bytes, b"cmd=put value=a\\\tb\n");
        assert_eq!(Framing::V1.decode(&bytes).unwrap().unwrap().0, tab);
        assert!(Framing::V1
            .encode(&Command::new("put").with("a\tb", "c"))
            .is_err());
        // A CR inside a line is carried; one just before the newline would be taken for CRLF.
        let inner = Command::new("put").with("value", "a\rb").with("key", "k");
        let bytes = Framing::V1.encode(&inner).unwrap();
        assert_eq!(Framing::V1.decode(&bytes).unwrap().unwrap().0, inner);
        let last = Command::new("put").with("key", "k").with("value", "v\r");
        assert_eq!(Framing::V1.encode(&last).unwrap_err().key, "value");
        assert_eq!(
            Framing::V1.encode(&Command::new("x\r")).unwrap_err().key,
            "cmd"
        );
        assert!(Framing::V2.encode(&last).is_ok());
    }

    #[test]
    fn decoders_never_panic_on_arbitrary_bytes() {
        // A cheap deterministic fuzz: every prefix and every single-byte mutation of valid frames.
        let frames = [
            Framing::V1.encode(&sample()).unwrap(),
            Framing::V2.encode(&sample()).unwrap(),
        ];
        for frame in &frames {
            for cut in 0..frame.len() {
                let _ = Framing::V1.decode(&frame[..cut]);
                let _ = Framing::V2.decode(&frame[..cut]);
            }
            for i in 0..frame.len() {
                for b in [0u8, b' ', b';', b'=', b'\n', 0xff, b'9'] {
                    let mut m = frame.clone();
                    m[i] = b;
                    let _ = Framing::V1.decode(&m);
                    let _ = Framing::V2.decode(&m);
                }
            }
        }
    }
}
