//! Liveness probes: telling a peer that is only busy from a link that is down.
//!
//! The network transports acknowledge frames only when their process makes progress, so a
//! peer that computes for a minute without calling MPI is as silent as one behind a dead
//! link. A process therefore runs one [`Responder`] per rail: a UDP socket bound to the
//! rail's IPv4 address and a thread, blocked on it, that answers authenticated probes whatever
//! the process's main thread is doing. A transport whose acknowledgements from a peer have
//! stopped sends probes with its rail's [`Prober`] to the responder the peer published for the
//! silent pair's remote endpoint: the probe crosses the same link (same subnet, same
//! interfaces) as the data, so an answer proves link and process alive and the silence clock
//! restarts; no answer, and the transport's own timeouts run out as before.
//!
//! Wire format (both kinds 48 bytes; anything else is dropped unanswered):
//!
//! ```text
//! 0   magic "KLPB"
//! 4   version (1)
//! 5   kind: 1 probe, 2 answer
//! 6   reserved, 0 (2 bytes)
//! 8   sender (u32 LE): the process index of who sends this datagram
//! 12  target (u32 LE): the process index it is meant for
//! 16  nonce (u64 LE): chosen by the prober, echoed by the answer
//! 24  tag: the first 24 bytes of HMAC-SHA256 over bytes 0..24 under the set's key
//! ```
//!
//! Both sockets are `SO_DONTROUTE`: a probe or an answer goes only to a directly connected
//! host, so when the rail's subnet is gone (its link down) it fails instead of taking a
//! gateway (a management network) and proving a link that is not there. A pair that is only
//! reachable across routers therefore cannot be probed, and keeps the transport's timeouts.
//!
//! A responder answers only a probe whose tag checks under the key of its transport set and
//! whose target is its process, with a datagram of the same size (no amplification). The key
//! filters strays and other jobs; it is not secret from someone who reads the data network
//! (frames carry it), so a probe proves membership no better than a frame does.
//!
//! This module owns the format, the responder thread and the prober socket. It must never
//! decide that a peer is dead or alive: the transport's path state does.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of every probe and answer.
pub const PROBE_LEN: usize = 48;
const MAGIC: &[u8; 4] = b"KLPB";
const VERSION: u8 = 1;
const TAG_AT: usize = 24;

/// What a datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// "Are you there?"
    Probe,
    /// "Yes."
    Answer,
}

/// A checked probe or answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProbeMessage {
    /// Probe or answer.
    pub kind: ProbeKind,
    /// Who sent it.
    pub sender: u32,
    /// Who it is for.
    pub target: u32,
    /// The prober's nonce.
    pub nonce: u64,
}

/// Why a datagram was dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeError {
    /// Not 48 bytes.
    Length(usize),
    /// Wrong magic or version: not ours, or another Kestrel version.
    Foreign,
    /// A kind other than 1 or 2.
    Kind(u8),
    /// The tag does not check under this set's key.
    Tag,
}

impl std::fmt::Display for ProbeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProbeError::Length(n) => {
                write!(f, "liveness datagram of {n} bytes (expected {PROBE_LEN})")
            }
            ProbeError::Foreign => f.write_str("not a Kestrel liveness datagram of this version"),
            ProbeError::Kind(k) => write!(f, "liveness datagram of unknown kind {k}"),
            ProbeError::Tag => {
                f.write_str("liveness datagram whose tag does not check under this job's key")
            }
        }
    }
}

fn tag(key: u64, head: &[u8]) -> [u8; PROBE_LEN - TAG_AT] {
    let mut mac =
        <Hmac<Sha256> as Mac>::new_from_slice(&key.to_le_bytes()).expect("HMAC takes any key");
    mac.update(head);
    let full = mac.finalize().into_bytes();
    let mut t = [0u8; PROBE_LEN - TAG_AT];
    t.copy_from_slice(&full[..PROBE_LEN - TAG_AT]);
    t
}

/// The bytes of `m` under `key`.
pub fn encode(m: &ProbeMessage, key: u64) -> [u8; PROBE_LEN] {
    let mut b = [0u8; PROBE_LEN];
    b[..4].copy_from_slice(MAGIC);
    b[4] = VERSION;
    b[5] = match m.kind {
        ProbeKind::Probe => 1,
        ProbeKind::Answer => 2,
    };
    b[8..12].copy_from_slice(&m.sender.to_le_bytes());
    b[12..16].copy_from_slice(&m.target.to_le_bytes());
    b[16..24].copy_from_slice(&m.nonce.to_le_bytes());
    let t = tag(key, &b[..TAG_AT]);
    b[TAG_AT..].copy_from_slice(&t);
    b
}

/// Checks and reads a datagram from the network under `key`.
pub fn decode(b: &[u8], key: u64) -> Result<ProbeMessage, ProbeError> {
    if b.len() != PROBE_LEN {
        return Err(ProbeError::Length(b.len()));
    }
    if &b[..4] != MAGIC || b[4] != VERSION || b[6] != 0 || b[7] != 0 {
        return Err(ProbeError::Foreign);
    }
    let kind = match b[5] {
        1 => ProbeKind::Probe,
        2 => ProbeKind::Answer,
        k => return Err(ProbeError::Kind(k)),
    };
    // Constant-time comparison: the tag is the only thing a forger works on.
    let want = tag(key, &b[..TAG_AT]);
    let diff = want
        .iter()
        .zip(&b[TAG_AT..])
        .fold(0u8, |acc, (x, y)| acc | (x ^ y));
    if diff != 0 {
        return Err(ProbeError::Tag);
    }
    let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
    Ok(ProbeMessage {
        kind,
        sender: u32_at(8),
        target: u32_at(12),
        nonce: u64::from_le_bytes(b[16..24].try_into().expect("8 bytes")),
    })
}

/// Sets `SO_DONTROUTE` (see the module docs).
fn dont_route(socket: &UdpSocket) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let on: libc::c_int = 1;
    // SAFETY: the descriptor is the open socket's; the option value is a live c_int of the
    // length passed.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_DONTROUTE,
            (&on as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if ret == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// How often the responder thread looks at its stop flag while nothing arrives.
const RESPONDER_POLL: Duration = Duration::from_millis(200);

/// The answering side on one rail: a UDP socket on the rail's address and a thread that
/// answers probes for process `me` under the set's key. Dropping it stops the thread within
/// [`RESPONDER_POLL`] (it is not joined: finalize does not wait for it).
#[derive(Debug)]
pub struct Responder {
    addr: SocketAddrV4,
    key: Arc<AtomicU64>,
    stop: Arc<AtomicBool>,
}

impl Responder {
    /// Binds a UDP socket on `ip` (port chosen by the kernel) and starts the answering thread
    /// for process `me`; answers are tagged with the key [`Responder::set_key`] gives (none
    /// check before it is set).
    pub fn start(ip: Ipv4Addr, me: u32) -> io::Result<Responder> {
        let socket = UdpSocket::bind(SocketAddrV4::new(ip, 0))?;
        dont_route(&socket)?;
        socket.set_read_timeout(Some(RESPONDER_POLL))?;
        let addr = match socket.local_addr()? {
            std::net::SocketAddr::V4(a) => a,
            std::net::SocketAddr::V6(_) => unreachable!("bound to an IPv4 address"),
        };
        let key = Arc::new(AtomicU64::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let (k, s) = (Arc::clone(&key), Arc::clone(&stop));
        std::thread::Builder::new()
            .name("kestrel-liveness".into())
            .spawn(move || answer_probes(&socket, me, &k, &s))?;
        Ok(Responder { addr, key, stop })
    }

    /// Where peers send their probes.
    pub fn addr(&self) -> SocketAddrV4 {
        self.addr
    }

    /// The key probes must be tagged with (the transport set's).
    pub fn set_key(&self, key: u64) {
        self.key.store(key, Ordering::Relaxed);
    }
}

impl Drop for Responder {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

fn answer_probes(socket: &UdpSocket, me: u32, key: &AtomicU64, stop: &AtomicBool) {
    // One byte more than a probe, so that a longer datagram shows as too long.
    let mut buf = [0u8; PROBE_LEN + 1];
    while !stop.load(Ordering::Relaxed) {
        let (n, from) = match socket.recv_from(&mut buf) {
            Ok(got) => got,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock
                        | io::ErrorKind::TimedOut
                        | io::ErrorKind::Interrupted
                ) =>
            {
                continue
            }
            Err(e) => {
                tracing::debug!(target: "fabric", error = %e, "liveness responder stops");
                return;
            }
        };
        let k = key.load(Ordering::Relaxed);
        match decode(&buf[..n], k) {
            Ok(p) if p.kind == ProbeKind::Probe && p.target == me && k != 0 => {
                let answer = ProbeMessage {
                    kind: ProbeKind::Answer,
                    sender: me,
                    target: p.sender,
                    nonce: p.nonce,
                };
                let _ = socket.send_to(&encode(&answer, k), from);
            }
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(target: "fabric", %from, error = %e, "liveness datagram dropped");
            }
        }
    }
}

/// The probing side on one rail: a non-blocking UDP socket on the rail's address.
#[derive(Debug)]
pub struct Prober {
    socket: UdpSocket,
}

impl Prober {
    /// Binds a UDP socket on `ip` (so probes leave through the rail's interface).
    pub fn bind(ip: Ipv4Addr) -> io::Result<Prober> {
        let socket = UdpSocket::bind(SocketAddrV4::new(ip, 0))?;
        dont_route(&socket)?;
        socket.set_nonblocking(true)?;
        Ok(Prober { socket })
    }

    /// Sends a probe from `me` to process `target`'s responder at `to`.
    pub fn probe(
        &self,
        to: SocketAddrV4,
        key: u64,
        me: u32,
        target: u32,
        nonce: u64,
    ) -> io::Result<()> {
        let m = ProbeMessage {
            kind: ProbeKind::Probe,
            sender: me,
            target,
            nonce,
        };
        self.socket.send_to(&encode(&m, key), to).map(|_| ())
    }

    /// Hands every answer for `me` that arrived, as (answering process, nonce), to `on`.
    pub fn answers(&self, key: u64, me: u32, mut on: impl FnMut(u32, u64)) {
        let mut buf = [0u8; PROBE_LEN + 1];
        while let Ok((n, _)) = self.socket.recv_from(&mut buf) {
            if let Ok(a) = decode(&buf[..n], key) {
                if a.kind == ProbeKind::Answer && a.target == me {
                    on(a.sender, a.nonce);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn messages_round_trip_and_every_alteration_is_refused() {
        let m = ProbeMessage {
            kind: ProbeKind::Probe,
            sender: 3,
            target: 7,
            nonce: 0x0123_4567_89ab_cdef,
        };
        let b = encode(&m, 42);
        assert_eq!(decode(&b, 42), Ok(m));
        assert_eq!(decode(&b, 43), Err(ProbeError::Tag));
        assert_eq!(decode(&b[..47], 42), Err(ProbeError::Length(47)));
        for i in 0..PROBE_LEN {
            let mut bad = b;
            bad[i] ^= 0x10;
            assert!(decode(&bad, 42).is_err(), "byte {i} altered");
        }
    }

    #[test]
    fn a_responder_answers_a_tagged_probe_and_ignores_strangers() {
        let lo = Ipv4Addr::LOCALHOST;
        let r = Responder::start(lo, 1).unwrap();
        r.set_key(99);
        let p = Prober::bind(lo).unwrap();
        // A stranger's key and a probe for another process: no answer.
        p.probe(r.addr(), 98, 0, 1, 5).unwrap();
        p.probe(r.addr(), 99, 0, 2, 6).unwrap();
        p.probe(r.addr(), 99, 0, 1, 7).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.is_empty() && Instant::now() < deadline {
            p.answers(99, 0, |from, nonce| got.push((from, nonce)));
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(50));
        p.answers(99, 0, |from, nonce| got.push((from, nonce)));
        assert_eq!(got, vec![(1, 7)]);
    }
}
