//! Raw libfabric ping-pong over one DGRAM interface, or with `--rdm` one reliable-datagram
//! (`FI_EP_RDM`) domain: the floor the usnic and ofi transports' latencies are compared against
//! (no reliability of ours, no matching, just `fi_send` and a busy-polled CQ).
//!
//! With `--bw WINDOW` it measures bandwidth instead, as `osu_bw` does: the client sends WINDOW
//! messages of `--size` bytes back to back, the server answers the whole window with one
//! 1-byte acknowledgement, `--iters` times (after `--warmup` windows).
//!
//! ```text
//! raw_pingpong [--interface IPV4] [--provider udp|usnic|'tcp;ofi_rxm' --rdm] [--size N] [--iters N] [--warmup N] [--bw WINDOW]
//!     two threads of this process, one endpoint each (default interface 127.0.0.1)
//! raw_pingpong serve --interface IPV4 [...]
//!     prints its address, answers one client, exits
//! raw_pingpong ping ADDRESS_HEX --interface IPV4 [...]
//!     the client for `serve` (for example from another network namespace)
//! ```
//!
//! Reports the median one-way latency (half the round trip) and a few other percentiles, or
//! with `--bw` the bandwidth in MB/s (10^6 bytes per second, as OSU reports it).
//! A datagram lost for more than a second ends the run with an error instead of hanging.

use std::net::Ipv4Addr;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use kestrel_usnic::fabric::{
    dgram_interfaces, rdm_interfaces, FabricInterface, MsgEndpoint, PeerAddr,
};

/// Send and receive buffers per endpoint: ping-pong keeps one in flight, a few spare cover
/// completions not yet reaped.
const DEPTH: usize = 16;
/// How long one round trip may take before the run is declared broken.
const LOSS_TIMEOUT: Duration = Duration::from_secs(1);
/// First byte of the handshake datagrams (payloads are all zero otherwise).
const HELLO: u8 = 0xa5;
const READY: u8 = 0x5a;

struct Options {
    mode: Mode,
    interface: Option<Ipv4Addr>,
    provider: String,
    rdm: bool,
    size: usize,
    iters: usize,
    warmup: usize,
    /// `Some(window)`: measure bandwidth with this many messages per acknowledgement.
    window: Option<usize>,
}

enum Mode {
    Threads,
    Serve,
    Ping(Vec<u8>),
}

fn usage() -> String {
    "usage: raw_pingpong [serve | ping ADDRESS_HEX] [--interface IPV4] [--provider udp|usnic] \
     [--rdm] [--size BYTES] [--iters N] [--warmup N] [--bw WINDOW]"
        .into()
}

fn parse_args() -> Result<Options, String> {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        mode: Mode::Threads,
        interface: None,
        provider: "udp".into(),
        rdm: false,
        size: 8,
        iters: 10_000,
        warmup: 1_000,
        window: None,
    };
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        match arg.as_str() {
            "serve" => o.mode = Mode::Serve,
            "ping" => o.mode = Mode::Ping(hex_decode(&value("ping")?)?),
            "--interface" => {
                let v = value("--interface")?;
                o.interface = Some(v.parse().map_err(|_| format!("bad IPv4 address {v}"))?)
            }
            "--provider" => o.provider = value("--provider")?,
            "--rdm" => o.rdm = true,
            "--size" => o.size = number(&value("--size")?)?,
            "--iters" => o.iters = number(&value("--iters")?)?.max(1),
            "--warmup" => o.warmup = number(&value("--warmup")?)?,
            "--bw" => o.window = Some(number(&value("--bw")?)?.max(1)),
            "-h" | "--help" => return Err(usage()),
            other => return Err(format!("unknown argument {other}\n{}", usage())),
        }
    }
    Ok(o)
}

fn number(text: &str) -> Result<usize, String> {
    text.parse().map_err(|_| format!("{text} is not a number"))
}

fn hex_encode(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn hex_decode(text: &str) -> Result<Vec<u8>, String> {
    if !text.len().is_multiple_of(2) {
        return Err(format!("{text} is not an even number of hex digits"));
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|_| format!("{text} is not hex")))
        .collect()
}

fn find_interface(o: &Options) -> Result<FabricInterface, String> {
    let want = o.interface.unwrap_or(Ipv4Addr::LOCALHOST);
    let owner = kestrel_usnic::discovery::FABRIC_OWNER;
    let list = if o.rdm {
        // Listed as the ofi transport's survey lists (no FI_RMA).
        rdm_interfaces(owner, Some(&o.provider), false)
    } else {
        dgram_interfaces(owner, Some(&o.provider))
    };
    list.map_err(|e| e.to_string())?
        .into_iter()
        .find(|i| i.ipv4() == Some(want))
        .ok_or_else(|| {
            format!(
                "provider {} offers no interface with address {want}",
                o.provider
            )
        })
}

/// An endpoint on `iface`; a reliable one's buffers hold the run's messages (at least 64 bytes).
fn open(iface: &FabricInterface, o: &Options) -> Result<MsgEndpoint, String> {
    let opened = if o.rdm {
        MsgEndpoint::open_sized(iface, DEPTH, o.size.max(64), false, false)
    } else {
        MsgEndpoint::open(iface, DEPTH)
    };
    opened.map_err(|e| e.to_string())
}

/// Sends one datagram of `size` bytes whose first byte is `tag`, retrying while slots are busy.
fn send(ep: &mut MsgEndpoint, to: PeerAddr, size: usize, tag: u8) -> Result<(), String> {
    let deadline = Instant::now() + LOSS_TIMEOUT;
    loop {
        match ep.send_with(to, |buf| {
            buf[..size].fill(0);
            if size > 0 {
                buf[0] = tag;
            }
            size
        }) {
            Ok(()) => return Ok(()),
            Err(kestrel_usnic::fabric::SendError::Full) if Instant::now() < deadline => {
                ep.poll(|_| {}).map_err(|e| e.to_string())?;
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Busy-polls until one datagram arrives; returns a copy of its first bytes.
fn receive(ep: &mut MsgEndpoint, timeout: Duration) -> Result<Vec<u8>, String> {
    let deadline = Instant::now() + timeout;
    let mut got: Option<Vec<u8>> = None;
    loop {
        ep.poll(|d| {
            if got.is_none() {
                got = Some(d.to_vec());
            }
        })
        .map_err(|e| e.to_string())?;
        if let Some(d) = got {
            return Ok(d);
        }
        if Instant::now() > deadline {
            return Err(format!("no datagram within {timeout:?} (lost?)"));
        }
    }
}

/// Busy-polls until `count` messages arrived (their contents are not looked at).
fn receive_count(ep: &mut MsgEndpoint, count: usize, timeout: Duration) -> Result<(), String> {
    let deadline = Instant::now() + timeout;
    let mut got = 0;
    while got < count {
        got += ep.poll(|_| {}).map_err(|e| e.to_string())?;
        if Instant::now() > deadline {
            return Err(format!(
                "{got} of {count} messages within {timeout:?} (lost?)"
            ));
        }
    }
    Ok(())
}

/// The bandwidth client: `warmup + iters` windows of `window` messages, each answered by one
/// acknowledgement; returns the time of the measured windows.
fn stream(
    ep: &mut MsgEndpoint,
    server: PeerAddr,
    o: &Options,
    window: usize,
) -> Result<Duration, String> {
    let mut start = Instant::now();
    for i in 0..o.warmup + o.iters {
        if i == o.warmup {
            start = Instant::now();
        }
        for _ in 0..window {
            send(ep, server, o.size, 0)?;
        }
        receive_count(ep, 1, LOSS_TIMEOUT * 10).map_err(|e| format!("window {i}: {e}"))?;
    }
    Ok(start.elapsed())
}

/// The bandwidth server: acknowledges `warmup + iters` windows.
fn sink(ep: &mut MsgEndpoint, client: PeerAddr, o: &Options, window: usize) -> Result<(), String> {
    for i in 0..o.warmup + o.iters {
        receive_count(ep, window, LOSS_TIMEOUT * 10).map_err(|e| format!("window {i}: {e}"))?;
        send(ep, client, 1, 0)?;
    }
    Ok(())
}

fn report_bandwidth(iface: &FabricInterface, o: &Options, window: usize, elapsed: Duration) {
    let bytes = (o.size * window * o.iters) as f64;
    println!(
        "raw_pingpong: provider {}, interface {} ({}), {} B, window {window}, {} iterations: \
         bandwidth {:.2} MB/s",
        iface.provider(),
        iface.domain(),
        iface.ipv4().map_or("?".into(), |a| a.to_string()),
        o.size,
        o.iters,
        bytes / elapsed.as_secs_f64() / 1e6
    );
}

/// The client side: `iters + warmup` round trips; returns the measured round-trip times.
fn client(ep: &mut MsgEndpoint, server: PeerAddr, o: &Options) -> Result<Vec<Duration>, String> {
    let mut rtts = Vec::with_capacity(o.iters);
    for i in 0..o.warmup + o.iters {
        let start = Instant::now();
        send(ep, server, o.size, 0)?;
        receive(ep, LOSS_TIMEOUT).map_err(|e| format!("round trip {i}: {e}"))?;
        if i >= o.warmup {
            rtts.push(start.elapsed());
        }
    }
    Ok(rtts)
}

/// The server side: echoes `count` datagrams.
fn echo(ep: &mut MsgEndpoint, client: PeerAddr, o: &Options, count: usize) -> Result<(), String> {
    for i in 0..count {
        receive(ep, LOSS_TIMEOUT * 10).map_err(|e| format!("ping {i}: {e}"))?;
        send(ep, client, o.size, 0)?;
    }
    Ok(())
}

fn report(iface: &FabricInterface, o: &Options, mut rtts: Vec<Duration>) {
    rtts.sort();
    let pick = |q: f64| {
        let i = ((rtts.len() - 1) as f64 * q).round() as usize;
        rtts[i].as_secs_f64() * 1e6 / 2.0
    };
    println!(
        "raw_pingpong: provider {}, interface {} ({}), {} B, {} iterations: median one-way \
         latency {:.2} us (mean {:.2}, min {:.2}, p90 {:.2}, p99 {:.2})",
        iface.provider(),
        iface.domain(),
        iface.ipv4().map_or("?".into(), |a| a.to_string()),
        o.size,
        rtts.len(),
        pick(0.5),
        rtts.iter().map(Duration::as_secs_f64).sum::<f64>() * 1e6 / 2.0 / rtts.len() as f64,
        pick(0.0),
        pick(0.9),
        pick(0.99)
    );
}

fn run_threads(o: Options) -> Result<(), String> {
    let iface = find_interface(&o)?;
    let mut a = open(&iface, &o)?;
    let mut b = open(&iface, &o)?;
    check_size(&a, &o)?;
    let b_at_a = a.insert_peer(&b.address()).map_err(|e| e.to_string())?;
    let a_at_b = b.insert_peer(&a.address()).map_err(|e| e.to_string())?;
    if let Some(window) = o.window {
        let elapsed = std::thread::scope(|s| {
            let server = s.spawn(|| sink(&mut b, a_at_b, &o, window));
            let measured = stream(&mut a, b_at_a, &o, window);
            let served = server
                .join()
                .map_err(|_| "server thread panicked".to_string())?;
            served.and(measured)
        })?;
        report_bandwidth(&iface, &o, window, elapsed);
        return Ok(());
    }
    let count = o.warmup + o.iters;
    let rtts = std::thread::scope(|s| {
        let server = s.spawn(|| echo(&mut b, a_at_b, &o, count));
        let measured = client(&mut a, b_at_a, &o);
        let served = server
            .join()
            .map_err(|_| "server thread panicked".to_string())?;
        served.and(measured)
    })?;
    report(&iface, &o, rtts);
    Ok(())
}

fn check_size(ep: &MsgEndpoint, o: &Options) -> Result<(), String> {
    if o.size == 0 || o.size > ep.max_datagram() {
        return Err(format!(
            "--size must be from 1 to {} (this endpoint's max_datagram)",
            ep.max_datagram()
        ));
    }
    Ok(())
}

fn run_serve(o: Options) -> Result<(), String> {
    let iface = find_interface(&o)?;
    let mut ep = open(&iface, &o)?;
    check_size(&ep, &o)?;
    println!("address {}", hex_encode(&ep.address()));
    // The hello carries the client's address after its tag byte.
    let hello = receive(&mut ep, Duration::from_secs(120))?;
    if hello.first() != Some(&HELLO) {
        return Err("the first datagram was not a hello from raw_pingpong ping".into());
    }
    let client = ep.insert_peer(&hello[1..]).map_err(|e| e.to_string())?;
    send(&mut ep, client, 1, READY)?;
    if let Some(window) = o.window {
        sink(&mut ep, client, &o, window)?;
        eprintln!("raw_pingpong: took {} windows", o.warmup + o.iters);
        return Ok(());
    }
    echo(&mut ep, client, &o, o.warmup + o.iters)?;
    eprintln!("raw_pingpong: served {} round trips", o.warmup + o.iters);
    Ok(())
}

fn run_ping(o: Options, server_address: &[u8]) -> Result<(), String> {
    let iface = find_interface(&o)?;
    let mut ep = open(&iface, &o)?;
    check_size(&ep, &o)?;
    let server = ep.insert_peer(server_address).map_err(|e| e.to_string())?;
    let own = ep.address();
    let mut ready = false;
    // Datagrams can be lost: the hello goes again every 100 ms. A reliable endpoint delivers
    // the first one (its connection may take a while to set up): sent once, waited for.
    let (tries, wait) = if o.rdm {
        (1, Duration::from_secs(10))
    } else {
        (50, Duration::from_millis(100))
    };
    for _ in 0..tries {
        ep.send_with(server, |buf| {
            buf[0] = HELLO;
            buf[1..=own.len()].copy_from_slice(&own);
            own.len() + 1
        })
        .map_err(|e| e.to_string())?;
        if let Ok(reply) = receive(&mut ep, wait) {
            ready = reply.first() == Some(&READY);
            break;
        }
    }
    if !ready {
        return Err(format!(
            "the server did not answer the hello within {:?}",
            wait * tries
        ));
    }
    if let Some(window) = o.window {
        let elapsed = stream(&mut ep, server, &o, window)?;
        report_bandwidth(&iface, &o, window, elapsed);
        return Ok(());
    }
    let rtts = client(&mut ep, server, &o)?;
    report(&iface, &o, rtts);
    Ok(())
}

fn main() -> ExitCode {
    let result =
        parse_args().and_then(
            |mut o| match std::mem::replace(&mut o.mode, Mode::Threads) {
                Mode::Threads => run_threads(o),
                Mode::Serve => run_serve(o),
                Mode::Ping(address) => run_ping(o, &address),
            },
        );
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_pingpong: {e}");
            ExitCode::FAILURE
        }
    }
}
