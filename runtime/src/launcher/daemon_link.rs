//! The head's side of remote daemon connections: accepting them, authenticating each before
//! any frame of it counts, and relaying its frames to the head.
//!
//! This module owns who may join: a connection proves the job's secret over a fresh
//! challenge ([`super::auth`]) within [`HELLO_WITHIN`], for a host index that has no daemon
//! yet; before that it may send at most [`MAX_HELLO`] bytes. Anything else is refused and
//! logged at warning level with the peer's address. It never decides the job's fate (the
//! head does, from the events it sends) and never sees the secret outside [`JobSecret`].

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, ToSocketAddrs};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc::{unbounded_channel, UnboundedSender};

use super::auth::{self, JobSecret, Role};
use super::proto::{split_frame, ToAgent, ToHead};

/// Time a new connection has to prove the job's secret.
pub const HELLO_WITHIN: Duration = Duration::from_secs(10);
/// Bytes an unauthenticated connection may send (a hello is well under 200).
pub const MAX_HELLO: usize = 4096;

/// What a daemon connection tells the head.
pub enum LinkEvent {
    /// Host `0` authenticated: its sender, machine id and CPU count.
    Connected(usize, UnboundedSender<ToAgent>, String, u32),
    /// A frame from host `0`'s daemon.
    Frame(usize, ToHead),
    /// Host `0`'s daemon connection ended.
    Lost(usize),
}

/// The addresses daemons on `hosts` (names) call back to: for each host that resolves, the
/// address this host's routing table uses to reach it; when any does not resolve (hosts
/// reached through a launch agent that knows names DNS does not), every address of this host
/// but loopback, or loopback alone when it has no other.
fn callback_addresses(hosts: &[String]) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = Vec::new();
    for name in hosts {
        let target = (name.as_str(), 9)
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.find(SocketAddr::is_ipv4));
        let source = target.and_then(|t| {
            let s = std::net::UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
            s.connect(t).ok()?;
            match s.local_addr().ok()?.ip() {
                IpAddr::V4(a) => Some(a),
                IpAddr::V6(_) => None,
            }
        });
        match source {
            Some(a) if !out.contains(&a) => out.push(a),
            Some(_) => {}
            None => {
                let all = super::head::local_ipv4_addresses();
                let outside: Vec<Ipv4Addr> =
                    all.iter().copied().filter(|a| !a.is_loopback()).collect();
                return if outside.is_empty() { all } else { outside };
            }
        }
    }
    out
}

/// Listeners for the daemons of remote `hosts`, each bound to one address they may use
/// ([`callback_addresses`], never the wildcard), and the `ip:port` list the daemons get.
pub async fn listen_for_daemons(
    hosts: &[String],
) -> Result<(Vec<TcpListener>, Vec<String>), String> {
    let mut listeners = Vec::new();
    let mut parents = Vec::new();
    for a in callback_addresses(hosts) {
        match TcpListener::bind((a, 0)).await {
            Ok(l) => {
                if let Ok(at) = l.local_addr() {
                    parents.push(at.to_string());
                    listeners.push(l);
                }
            }
            Err(e) => tracing::warn!(target: "launcher", "cannot listen for daemons on {a}: {e}"),
        }
    }
    if listeners.is_empty() {
        return Err(format!(
            "kestrel-run: cannot open a TCP port for the remote daemons on any address of this \
             host that reaches {}",
            hosts.join(", ")
        ));
    }
    tracing::debug!(target: "launcher", "daemons call back to {}", parents.join(","));
    Ok((listeners, parents))
}

/// Accepts daemon connections on `listeners` for a job of `hosts` hosts until they fail;
/// each connection runs in its own task, and a host index joins at most once over all.
pub async fn accept_daemons(
    listeners: Vec<TcpListener>,
    secret: JobSecret,
    hosts: usize,
    events: UnboundedSender<LinkEvent>,
) {
    let joined = Arc::new(Mutex::new(HashSet::new()));
    let mut loops = tokio::task::JoinSet::new();
    for listener in listeners {
        let (secret, events, joined) = (secret.clone(), events.clone(), joined.clone());
        loops.spawn(async move {
            loop {
                let Ok((stream, peer)) = listener.accept().await else {
                    return;
                };
                let secret = secret.clone();
                let events = events.clone();
                let joined = joined.clone();
                tokio::spawn(async move {
                    if let Err(e) = serve_daemon(stream, &secret, hosts, &joined, events).await {
                        tracing::warn!(target: "launcher", %peer, "daemon connection refused: {e}");
                    }
                });
            }
        });
    }
    while loops.join_next().await.is_some() {}
}

/// Reads one frame into `buf` (which keeps what follows it); `None` at end of stream. At
/// most `limit` bytes are buffered.
async fn read_frame(
    stream: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut Vec<u8>,
    limit: usize,
) -> Result<Option<ToHead>, String> {
    loop {
        if let Some((body, used)) = split_frame(buf).map_err(|e| e.to_string())? {
            let msg = ToHead::decode(body).map_err(|e| e.to_string())?;
            buf.drain(..used);
            return Ok(Some(msg));
        }
        if buf.len() >= limit {
            return Err(format!(
                "sent more than {limit} bytes without a whole frame"
            ));
        }
        let mut chunk = [0u8; 8192];
        let want = chunk.len().min(limit - buf.len());
        let n = stream
            .read(&mut chunk[..want])
            .await
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Authenticates one connection, then relays its frames until it ends.
async fn serve_daemon(
    stream: TcpStream,
    secret: &JobSecret,
    hosts: usize,
    joined: &Mutex<HashSet<usize>>,
    events: UnboundedSender<LinkEvent>,
) -> Result<(), String> {
    let _ = stream.set_nodelay(true);
    let (mut read, mut write) = stream.into_split();
    let challenge = auth::nonce()?;
    write
        .write_all(
            &ToAgent::Challenge {
                nonce: challenge.clone(),
            }
            .encode(),
        )
        .await
        .map_err(|e| e.to_string())?;
    let mut buf = Vec::new();
    let hello = tokio::time::timeout(HELLO_WITHIN, read_frame(&mut read, &mut buf, MAX_HELLO))
        .await
        .map_err(|_| format!("no hello within {} s", HELLO_WITHIN.as_secs()))??;
    let Some(ToHead::Hello {
        host_index,
        proof,
        nonce,
        machine,
        cpus,
    }) = hello
    else {
        return Err("its first frame was not a hello".into());
    };
    if !secret.verify(Role::Daemon, host_index, &challenge, &proof) {
        return Err(format!(
            "it did not prove this job's secret (claimed host index {host_index})"
        ));
    }
    let h = host_index as usize;
    if h >= hosts {
        return Err(format!(
            "host index {h} is not in this job of {hosts} hosts"
        ));
    }
    if nonce.len() != auth::NONCE_LEN {
        return Err("its challenge has the wrong length".into());
    }
    if !joined.lock().map_err(|_| "poisoned")?.insert(h) {
        return Err(format!(
            "host index {h} already has its daemon; a second connection for it is refused"
        ));
    }
    let welcome = ToAgent::Welcome {
        proof: secret.proof(Role::Head, host_index, &nonce),
    };
    write
        .write_all(&welcome.encode())
        .await
        .map_err(|e| e.to_string())?;
    let (tx, mut rx) = unbounded_channel::<ToAgent>();
    tokio::spawn(async move {
        while let Some(m) = rx.recv().await {
            if write.write_all(&m.encode()).await.is_err() {
                break;
            }
        }
    });
    let _ = events.send(LinkEvent::Connected(h, tx, machine, cpus));
    loop {
        match read_frame(&mut read, &mut buf, usize::MAX).await {
            Ok(Some(msg)) => {
                let _ = events.send(LinkEvent::Frame(h, msg));
            }
            Ok(None) => break,
            Err(e) => {
                eprintln!("kestrel-run: the daemon for host index {h} sent {e}; dropping it");
                break;
            }
        }
    }
    let _ = events.send(LinkEvent::Lost(h));
    Ok(())
}
