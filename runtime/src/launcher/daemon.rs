//! `kestrel-run --daemon`: one host's node agent, connected to the head over TCP.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc::unbounded_channel;

use super::agent::{run_agent, AgentLink};
use super::args::DaemonOptions;
use super::proto::{split_frame, ToAgent, ToHead};
use crate::host::{available_cpus, machine_id};

/// Connects to the first reachable parent address, then serves the host until the head says
/// shutdown or disappears. Returns the process exit code.
pub async fn run(opts: DaemonOptions) -> i32 {
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
    let to_agent_for_signals = to_agent.clone();
    let hello = ToHead::Hello {
        host_index: opts.host_index,
        key: opts.key.clone(),
        machine: machine_id(),
        cpus: available_cpus().len() as u32,
    };
    if write.write_all(&hello.encode()).await.is_err() {
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
        let mut buf = Vec::new();
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
        let _ = signal_agent.send(ToAgent::Kill);
        let _ = signal_agent.send(ToAgent::Shutdown);
    });
    run_agent(AgentLink { to_head, from_head }).await;
    let _ = tokio::time::timeout(Duration::from_secs(2), writer).await;
    0
}

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
