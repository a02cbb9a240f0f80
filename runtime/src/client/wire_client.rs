//! The PMI-1/PMI-2 client's connection: the stream to the launcher, the framing in use, and
//! one request/reply exchange with its error reporting.
//!
//! It owns the bytes on the stream and the PMI-1 line limit; what to send for each operation
//! is in `operations`, and how the version is chosen in `handshake`. It never retries or
//! reconnects: a broken launcher connection is an error the caller reports.

use std::fmt;
use std::io::{self, Read, Write};

use super::{PmiChoice, PmiError};
use crate::wire::{Command, EncodeError, Framing, WireError};

/// The longest PMI-1 request line a client may send, newline included. PMI-1 servers read a
/// request into a fixed buffer of this size: MPICH's simple PMI and Slurm's pmi2 plugin, which
/// reads once and parses whatever arrived, so a longer line turns into garbage requests.
pub(super) const PMI1_MAX_LINE: usize = 1024;

pub(super) trait Stream: Read + Write + Send {}
impl<T: Read + Write + Send> Stream for T {}

/// What the launcher said through the environment before any PMI exchange; servers differ in
/// which of these they expect back during the handshake.
#[derive(Debug, Default, Clone)]
pub(super) struct LaunchHints {
    /// `PMI_ID` (PMI_PORT servers identify clients by it).
    pub(super) pmi_id: Option<String>,
    /// `PMI_RANK`.
    pub(super) rank: Option<u32>,
    /// `PMI_SIZE`.
    pub(super) size: Option<u32>,
    /// `PMI_JOBID` (Slurm's pmi2 plugin wants it back in `fullinit`).
    pub(super) job: Option<String>,
}

/// A PMI-1 or PMI-2 client over a connected stream.
pub struct WireClient {
    pub(super) stream: Box<dyn Stream>,
    pub(super) server: String,
    pub(super) framing: Framing,
    pub(super) inbuf: Vec<u8>,
    pub(super) rank: u32,
    pub(super) size: u32,
    pub(super) job_id: String,
    pub(super) max_key: usize,
    pub(super) max_value: usize,
}

impl fmt::Debug for WireClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("WireClient")
            .field("server", &self.server)
            .field("framing", &self.framing)
            .field("rank", &self.rank)
            .field("size", &self.size)
            .finish()
    }
}

impl WireClient {
    /// Runs the handshake over an already connected stream.
    pub(super) fn over_stream(
        stream: Box<dyn Stream>,
        server: String,
        choice: PmiChoice,
        hints: LaunchHints,
    ) -> Result<WireClient, PmiError> {
        let mut client = WireClient {
            stream,
            server,
            framing: Framing::V1,
            inbuf: Vec::with_capacity(4096),
            rank: 0,
            size: 1,
            job_id: String::new(),
            max_key: 64,
            max_value: 1024,
        };
        client.handshake(choice, hints)?;
        Ok(client)
    }

    pub(super) fn send(&mut self, during: &str, cmd: &Command) -> Result<(), PmiError> {
        let bytes = self.framing.encode(cmd).map_err(PmiError::Encode)?;
        if self.framing == Framing::V1 && bytes.len() > PMI1_MAX_LINE {
            let longest = cmd
                .pairs
                .iter()
                .max_by_key(|(_, v)| v.len())
                .map(|(k, _)| k.clone())
                .unwrap_or_else(|| cmd.name.clone());
            return Err(PmiError::Encode(EncodeError {
                key: longest,
                reason: "makes the PMI-1 request longer than the 1024 bytes a PMI-1 server \
                         reads at once (Slurm's pmi2 plugin mangles longer lines); use a \
                         shorter value, or PMI-2 (KESTREL_PMI=pmi2)",
            }));
        }
        self.stream
            .write_all(&bytes)
            .map_err(|e| self.io(during, e))
    }

    pub(super) fn io(&self, during: &str, source: io::Error) -> PmiError {
        PmiError::Io {
            during: during.into(),
            server: self.server.clone(),
            source,
        }
    }

    pub(super) fn recv(&mut self, during: &str) -> Result<Command, PmiError> {
        loop {
            match self.framing.decode(&self.inbuf) {
                Ok(Some((cmd, used))) => {
                    self.inbuf.drain(..used);
                    return Ok(cmd);
                }
                Ok(None) => {}
                Err(source) => {
                    return Err(PmiError::Wire {
                        during: during.into(),
                        source,
                    })
                }
            }
            let mut chunk = [0u8; 4096];
            let n = loop {
                match self.stream.read(&mut chunk) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                    Err(e) => return Err(self.io(during, e)),
                }
            };
            if n == 0 {
                let eof = io::Error::new(io::ErrorKind::UnexpectedEof, "connection closed");
                return Err(self.io(during, eof));
            }
            self.inbuf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends `cmd` and reads the reply, which must be named `expect` and carry rc=0.
    pub(super) fn call(
        &mut self,
        during: &str,
        cmd: Command,
        expect: &str,
    ) -> Result<Command, PmiError> {
        self.send(during, &cmd)?;
        let reply = self.recv(during)?;
        if reply.name != expect {
            return Err(PmiError::Protocol {
                during: during.into(),
                expected: expect.into(),
                got: reply.to_string(),
            });
        }
        let rc = reply.rc().map_err(|source| PmiError::Wire {
            during: during.into(),
            source,
        })?;
        if rc != 0 {
            return Err(PmiError::Server {
                during: during.into(),
                rc,
                msg: reply
                    .get("msg")
                    .or_else(|| reply.get("errmsg"))
                    .unwrap_or("")
                    .into(),
            });
        }
        Ok(reply)
    }

    pub(super) fn field<'a>(
        &self,
        during: &str,
        reply: &'a Command,
        key: &str,
    ) -> Result<&'a str, PmiError> {
        reply.require(key).map_err(|source| PmiError::Wire {
            during: during.into(),
            source,
        })
    }

    pub(super) fn num<T: std::str::FromStr>(
        &self,
        during: &str,
        reply: &Command,
        key: &str,
    ) -> Result<T, PmiError> {
        let text = self.field(during, reply, key)?;
        text.trim().parse().map_err(|_| PmiError::Wire {
            during: during.into(),
            source: WireError {
                text: reply.to_string(),
                reason: format!("'{key}={text}' is not a number"),
            },
        })
    }
}
