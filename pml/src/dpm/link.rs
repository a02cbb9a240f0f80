//! How the two roots of a connection talk: over a port's TCP connection, or over a
//! communicator both belong to (`intercomm_create`). Owns the framing on either path; it
//! must never wait past the deadline it is given.

use std::time::{Duration, Instant};

use kestrel_runtime::dpm::oob::write_frame;
use kestrel_runtime::dpm::{DpmError, OobMsg};

use crate::engine::{Engine, PmlError};

use super::{dpm_err, Link};

impl Link {
    pub(super) fn peer(&self) -> String {
        match self {
            Link::Tcp { peer, .. } => peer.clone(),
            Link::Comm { peer, .. } => {
                format!("the remote leader (rank {peer} of the peer communicator)")
            }
        }
    }

    pub(super) fn send(&mut self, eng: &mut Engine, msg: &OobMsg) -> Result<(), PmlError> {
        match self {
            Link::Tcp { stream, peer, .. } => {
                let _ = stream.set_nonblocking(false);
                write_frame(stream, msg).map_err(|e| {
                    dpm_err(DpmError::Protocol {
                        peer: peer.clone(),
                        what: format!("sending {}: {e}", msg.kind()),
                    })
                })
            }
            Link::Comm { ctx, peer, tag } => eng.send_bytes(*ctx, *peer, *tag, &msg.encode_body()),
        }
    }

    /// The next message, progressing the engine while waiting; `Ok(None)` at the deadline.
    pub(super) fn recv(
        &mut self,
        eng: &mut Engine,
        deadline: Option<Instant>,
    ) -> Result<Option<OobMsg>, PmlError> {
        match self {
            Link::Comm { ctx, peer, tag } => {
                let body = eng.recv_bytes(*ctx, *peer, *tag)?;
                OobMsg::decode(&body).map(Some).map_err(|e| {
                    dpm_err(DpmError::Protocol {
                        peer: format!("rank {peer} of the peer communicator"),
                        what: e.to_string(),
                    })
                })
            }
            Link::Tcp { stream, peer, buf } => {
                let protocol = |what: String| {
                    dpm_err(DpmError::Protocol {
                        peer: peer.clone(),
                        what,
                    })
                };
                let _ = stream.set_nonblocking(true);
                let mut idle = 0u32;
                let mut chunk = [0u8; 65536];
                loop {
                    if buf.len() >= 4 {
                        let n = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
                        if n > kestrel_runtime::dpm::oob::MAX_FRAME {
                            return Err(protocol("a frame longer than 16 MiB".into()));
                        }
                        if buf.len() >= 4 + n {
                            let msg = OobMsg::decode(&buf[4..4 + n])
                                .map_err(|e| protocol(e.to_string()))?;
                            buf.drain(..4 + n);
                            return Ok(Some(msg));
                        }
                    }
                    match std::io::Read::read(stream, &mut chunk) {
                        Ok(0) => {
                            return Err(protocol(
                                "the other side closed the connection (its process ended or \
                                 failed; see its messages)"
                                    .into(),
                            ))
                        }
                        Ok(n) => {
                            buf.extend_from_slice(&chunk[..n]);
                            idle = 0;
                            continue;
                        }
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(protocol(e.to_string())),
                    }
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Ok(None);
                    }
                    eng.idle_step(&mut idle);
                    if idle > 1000 {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            }
        }
    }
}
