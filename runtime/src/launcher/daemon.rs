//! `kestrel-run --daemon`: one host's node agent, connected to the head over TCP.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::unbounded_channel;

use super::agent::{run_agent, AgentLink};
use super::args::DaemonOptions;
use super::auth::{self, JobSecret, Role};
use super::proto::{split_frame, ToAgent, ToHead};
use crate::host::{available_cpus, machine_id};

/// Reads the job's secret from standard input, connects to the first reachable parent
/// address, proves the secret and checks the head's proof ([`super::auth`]), then serves the
/// host until the head says shutdown or disappears. Returns the process exit code.
pub async fn run(opts: DaemonOptions) -> i32 {
    let secret = match JobSecret::read_line(&mut std::io::stdin().lock()) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kestrel-run daemon (host index {}): {e}", opts.host_index);
            return 1;
        }
    };
    let stream = match connect_any(&opts.parents).await {
        Some(s) => s,
        None => {
            eprintln!(
                "kestrel-run daemon (host index {}): cannot reach the launcher at any of {}; is a \
                 firewall blocking TCP between the hosts?",
                opts.host_index,
                opts.parents.join(", ")
            );
            return 1;
        }
    };
    let _ = stream.set_nodelay(true);
    let (mut read, mut write) = stream.into_split();
    let (to_head, mut head_rx) = unbounded_channel::<ToHead>();
    let (to_agent, from_head) = unbounded_channel::<ToAgent>();
    // Weak: the reader's sender must be the last strong one, so that the agent sees the
    // channel close (and stops this host's ranks) when the head disappears.
    let to_agent_for_signals = to_agent.downgrade();
    let mut buf = Vec::new();
    if let Err(e) = handshake(&secret, opts.host_index, &mut read, &mut write, &mut buf).await {
        eprintln!(
            "kestrel-run daemon (host index {}): {e}; leaving",
            opts.host_index
        );
        return 1;
    }
    let writer = tokio::spawn(async move {
        while let Some(m) = head_rx.recv().await {
            let last = m == ToHead::Bye;
            if write.write_all(&m.encode()).await.is_err() || last {
                break;
            }
        }
        let _ = write.shutdown().await;
    });
    tokio::spawn(async move {
        let mut chunk = vec![0u8; 65536];
        loop {
            match split_frame(&buf) {
                Ok(Some((body, used))) => {
                    match ToAgent::decode(body) {
                        Ok(msg) => {
                            let _ = to_agent.send(msg);
                        }
                        Err(e) => {
                            eprintln!("kestrel-run daemon: {e}; disconnecting");
                            return;
                        }
                    }
                    buf.drain(..used);
                    continue;
                }
                Ok(None) => {}
                Err(e) => {
                    eprintln!("kestrel-run daemon: {e}; disconnecting");
                    return;
                }
            }
            match read.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        }
    });
    // Killed daemons would orphan their ranks: on SIGTERM/SIGHUP/SIGINT (an ssh connection
    // dropping sends SIGHUP) stop the ranks and clean up like a lost head.
    let signal_agent = to_agent_for_signals;
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut hup), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::hangup()),
            signal(SignalKind::interrupt()),
        ) else {
            return;
        };
        tokio::select! {
            _ = term.recv() => {}
            _ = hup.recv() => {}
            _ = int.recv() => {}
        }
        if let Some(agent) = signal_agent.upgrade() {
            let _ = agent.send(ToAgent::Kill);
            let _ = agent.send(ToAgent::Shutdown);
        }
    });
    run_agent(AgentLink { to_head, from_head }).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    0
}

/// Answers the head's challenge and checks its welcome: nothing the head sends counts
/// before it proved the job's secret. What follows the welcome stays in `buf`.
async fn handshake(
    secret: &JobSecret,
    host_index: u32,
    read: &mut tokio::net::tcp::OwnedReadHalf,
    write: &mut tokio::net::tcp::OwnedWriteHalf,
    buf: &mut Vec<u8>,
) -> Result<(), String> {
    let challenge = match next_frame(read, buf).await? {
        ToAgent::Challenge { nonce } => nonce,
        _ => return Err("the launcher did not open with a challenge".into()),
    };
    let mine = auth::nonce()?;
    let hello = ToHead::Hello {
        host_index,
        proof: secret.proof(Role::Daemon, host_index, &challenge),
        nonce: mine.clone(),
        machine: machine_id(),
        cpus: available_cpus().len() as u32,
    };
    write
        .write_all(&hello.encode())
        .await
        .map_err(|e| format!("cannot send the hello: {e}"))?;
    match next_frame(read, buf).await? {
        ToAgent::Welcome { proof } if secret.verify(Role::Head, host_index, &mine, &proof) => {
            Ok(())
        }
        _ => Err("the launcher did not prove this job's secret (or refused ours)".into()),
    }
}

/// One frame of the handshake, read within [`HANDSHAKE_WITHIN`] and at most
/// [`MAX_HANDSHAKE`] bytes.
async fn next_frame(
    read: &mut tokio::net::tcp::OwnedReadHalf,
    buf: &mut Vec<u8>,
) -> Result<ToAgent, String> {
    let deadline = tokio::time::Instant::now() + HANDSHAKE_WITHIN;
    loop {
        if let Some((body, used)) = split_frame(buf).map_err(|e| e.to_string())? {
            let m = ToAgent::decode(body).map_err(|e| e.to_string())?;
            buf.drain(..used);
            return Ok(m);
        }
        if buf.len() >= MAX_HANDSHAKE {
            return Err("the launcher's handshake frame is too long".into());
        }
        let mut chunk = [0u8; 1024];
        let n = tokio::time::timeout_at(deadline, read.read(&mut chunk))
            .await
            .map_err(|_| "the launcher did not answer within 10 s".to_string())?
            .map_err(|e| e.to_string())?;
        if n == 0 {
            return Err("the launcher closed the connection during the handshake".into());
        }
        buf.extend_from_slice(&chunk[..n]);
    }
}

/// Time each handshake frame may take.
const HANDSHAKE_WITHIN: Duration = Duration::from_secs(10);
/// Bytes a handshake frame may take (a challenge or welcome is well under 100).
const MAX_HANDSHAKE: usize = 4096;

async fn connect_any(parents: &[String]) -> Option<TcpStream> {
    let mut attempts = tokio::task::JoinSet::new();
    for addr in parents {
        let addr = addr.clone();
        attempts.spawn(async move {
            tokio::time::timeout(Duration::from_secs(5), TcpStream::connect(addr))
                .await
                .ok()?
                .ok()
        });
    }
    while let Some(res) = attempts.join_next().await {
        if let Ok(Some(stream)) = res {
            return Some(stream);
        }
    }
    None
}
