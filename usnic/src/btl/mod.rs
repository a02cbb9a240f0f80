//! The usnic BTL: reliable, multi-rail messaging between nodes over libfabric datagram
//! endpoints.
//!
//! It owns one endpoint per usable local interface (a *rail*), the business card it publishes,
//! and per remote process the *paths* chosen by the interface matching: one reliable
//! [`Connection`] per (local rail, remote interface) pair. It never interprets the messaging
//! layer's headers and never blocks.
//!
//! Per message, on top of the per-path reliability:
//! * an 8-byte message id (per sender and receiver, increasing) leads every message, so that a
//!   message resent on another rail after a failover, but already delivered by the failed one,
//!   is delivered once;
//! * small messages take the best path (lowest latency, stable order); messages of at least
//!   `usnic_stripe_min` bytes go to the path with the fewest bytes sent relative to its link
//!   speed, which stripes a pipelined large message across rails by bandwidth.
//!
//! First contact with a peer starts a connectivity check per path: a small and an MTU-sized
//! probe, repeated until answered. A path whose probes stay unanswered for `usnic_probe_timeout_ms`
//! is declared dead with a diagnosis (MTU mismatch when only the small probe came back, the
//! pair unreachable when neither did). A path that stops acknowledging data is dead too: its
//! reliable connection measures the silence and reports [`crate::reliable::Event::PathFailed`] after
//! `usnic_fail_after_ms`, or `usnic_peer_timeout_ms` while it is the peer's last usable path
//! (the transport tells it so); its unacknowledged messages go out on the remaining paths.
//! When no path to a peer is left the job stops with a message naming the peer, the
//! interfaces and the timeout.
//!
//! Module map (each a part of [`UsnicBtl`]'s behaviour, over the types defined here):
//! * `send`: choosing a path per message (best path or striping) and flushing datagrams;
//! * `recv`: polling the rails, routing datagrams to their connections, delivering messages;
//! * `probe`: first-contact probes, their replies and `kestrel-ifmatch check`;
//! * `pairing`: the HELLO that makes both sides use the same interface pairs;
//! * `failure`: running the connections' timers, reacting to their path failures, moving
//!   orphaned messages to the other paths, and ending the job when none is left;
//! * `stats`: the counters and the `usnic_stats` report.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use kestrel_transport::btl::{Btl, Incoming, Limits, SendError};
use kestrel_transport::params::Params;

use crate::card::{CardInterface, HostCard, ModexCard, ModexInterface};
use crate::discovery::{self, Verdict};
use crate::fabric::liveness::{Prober, Responder};
use crate::fabric::{MsgEndpoint, PeerAddr};
use crate::matching::{self, ProcessCard};
use crate::params;
use crate::reliable::{Config, Connection};

mod failure;
mod liveness;
mod pairing;
mod probe;
mod recv;
mod send;
mod stats;

use pairing::{describe_pairs, no_pair_message};
pub use probe::PathReport;
pub use stats::{BadDatagrams, PathCounters, COUNTERS};

/// Active-message tags at or above this value belong to the transport itself.
const AM_INTERNAL: u8 = 0xF0;
/// "Here is my pairing": sent once per path at first contact (see the `pairing` module).
const AM_HELLO: u8 = 0xF1;

/// How often progress looks at timers (retransmission, ACK delay, probes, failure).
const TIMER_SCAN: Duration = Duration::from_micros(100);

/// Bytes of the message id that leads every message.
const MSG_ID_LEN: usize = 8;

/// IPv4 (without options) and UDP headers: what an interface MTU loses to encapsulation.
const IP_UDP_HEADERS: usize = 28;

/// A message taken back from a dead path: (active-message tag, message id + header + payload).
type Orphan = (u8, Vec<u8>);

/// One local interface with its endpoint.
struct Rail {
    name: String,
    ipv4: std::net::Ipv4Addr,
    /// Taken out while the endpoint is polled, so that the datagram handler can use the rest
    /// of the transport; present at every other time.
    endpoint: Option<MsgEndpoint>,
    max_datagram: usize,
    bad: BadDatagrams,
    /// Answers peers' liveness probes on this rail's address (see `liveness.rs`).
    responder: Option<Responder>,
    /// Sends this process's liveness probes from the rail's address.
    prober: Option<Prober>,
}

impl Rail {
    fn ep(&mut self) -> &mut MsgEndpoint {
        self.endpoint
            .as_mut()
            .expect("the endpoint is back in its rail outside polling")
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PathState {
    /// Probes out; `small`/`large` say which came back.
    Probing {
        small: bool,
        large: bool,
        since: Instant,
        next_probe: Instant,
    },
    Up,
    Dead(String),
}

struct Path {
    rail: usize,
    remote_if: u8,
    addr: PeerAddr,
    conn: Connection,
    speed_mbps: u32,
    max_datagram: usize,
    bytes_sent: u64,
    state: PathState,
    counters: PathCounters,
    /// When the last liveness probe went out on this path, and its nonce.
    last_probe: Option<Instant>,
    probe_nonce: u64,
}

impl Path {
    fn usable(&self) -> bool {
        !matches!(self.state, PathState::Dead(_))
    }
}

/// Message ids of one sender already delivered: everything below `floor`, plus `above`.
#[derive(Default)]
struct DeliveredIds {
    floor: u64,
    above: BTreeSet<u64>,
}

impl DeliveredIds {
    /// Records `id`; false when it was delivered before.
    fn insert(&mut self, id: u64) -> bool {
        if id < self.floor || !self.above.insert(id) {
            return false;
        }
        while self.above.remove(&self.floor) {
            self.floor += 1;
        }
        true
    }
}

struct Peer {
    rank: u32,
    card: ModexCard,
    paths: Vec<Path>,
    next_msg_id: u64,
    delivered: DeliveredIds,
    contacted: bool,
    hello_seen: bool,
    /// My pairing in my terms (local rail, remote interface), for the HELLO check.
    pairing: Vec<(u8, u8)>,
}

/// The usnic transport of one process.
pub struct UsnicBtl {
    rank: u32,
    job: String,
    key: u64,
    rails: Vec<Rail>,
    card: ModexCard,
    host: HostCard,
    peers: Vec<Option<Peer>>,
    /// Ranks with paths, so progress does not walk the whole job.
    active: Vec<u32>,
    cfg: Config,
    eager_limit: usize,
    max_send: usize,
    stripe_min: usize,
    probe_interval: Duration,
    probe_timeout: Duration,
    print_stats: bool,
    next_timer_scan: Instant,
    /// When the timers were last scanned (a long gap: this process was away).
    last_scan: Instant,
    scratch: Vec<u8>,
    /// Peers whose connections may have something to send (ACKs, resends).
    touched: Vec<u32>,
    /// Probe replies owed: (rail, address, remote rail, size).
    probe_replies: Vec<(usize, PeerAddr, u8, usize)>,
    /// Pairings of lower-ranked peers that differ from ours, to adopt after polling.
    adoptions: Vec<(u32, Vec<(u8, u8)>)>,
    /// Set at finalize: silent peers have finalized, they are not failures.
    finalizing: bool,
    /// (peer, messages) taken from a dead path, waiting for room on another one.
    rehome: Vec<(u32, Vec<Orphan>)>,
}

impl std::fmt::Debug for UsnicBtl {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UsnicBtl")
            .field("rank", &self.rank)
            .field(
                "rails",
                &self.rails.iter().map(|r| &r.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl UsnicBtl {
    /// Discovers the usable interfaces, opens one endpoint on each, and returns the transport
    /// with the card to publish. `Ok(None)` when no interface is usable (the reasons are logged
    /// at debug level; `kestrel-ifmatch list` shows them).
    pub fn new(p: &Params, rank: u32, job: &str, node: &str) -> Result<Option<UsnicBtl>, String> {
        let found = discovery::discover(p).map_err(|e| e.to_string())?;
        let depth = params::QUEUE_DEPTH.get(p) as usize;
        let mut rails = Vec::new();
        let mut interfaces = Vec::new();
        for iface in &found.interfaces {
            if let Verdict::Excluded(why) = &iface.verdict {
                tracing::debug!(target: "usnic", "interface {} not used: {why}", iface.name);
                continue;
            }
            let fi = discovery::fabric_interface(iface).map_err(|e| e.to_string())?;
            let ep = MsgEndpoint::open(&fi, depth).map_err(|e| e.to_string())?;
            let ipv4 = iface.ipv4.expect("a used interface has an IPv4 address");
            let max_datagram = ep.max_datagram();
            interfaces.push(ModexInterface {
                interface: CardInterface {
                    name: iface.name.clone(),
                    ipv4,
                    prefix_len: iface.prefix_len,
                    link_speed_mbps: iface.link_speed_mbps,
                    mtu: iface.mtu,
                },
                fabric_addr: ep.address(),
            });
            let (responder, prober) = match (Responder::start(ipv4, rank), Prober::bind(ipv4)) {
                (Ok(r), Ok(p)) => (Some(r), Some(p)),
                (Err(e), _) | (_, Err(e)) => {
                    tracing::debug!(target: "usnic", interface = %iface.name, error = %e, "no liveness probes on this rail: a busy peer is timed out like a dead link");
                    (None, None)
                }
            };
            rails.push(Rail {
                name: iface.name.clone(),
                ipv4,
                endpoint: Some(ep),
                max_datagram,
                bad: BadDatagrams::default(),
                responder,
                prober,
            });
        }
        if rails.is_empty() {
            return Ok(None);
        }
        let host = HostCard::from_discovery(&found, node)
            .map_err(|e| format!("usnic: this host's business card is invalid: {e}"))?;
        let addrs = interfaces
            .into_iter()
            .map(|i: ModexInterface| i.fabric_addr)
            .collect();
        let ports = rails
            .iter()
            .map(|r| r.responder.as_ref().map_or(0, |x| x.addr().port()))
            .collect();
        let card = ModexCard::from_host_card(&host, addrs)
            .and_then(|c| c.with_probe_ports(ports))
            .map_err(|e| format!("usnic: this host's business card is invalid: {e}"))?;
        let smallest = rails.iter().map(|r| r.max_datagram).min().unwrap_or(1472);
        let cfg = Config::from_params(p, smallest).map_err(|e| format!("usnic: {e}"))?;
        Ok(Some(UsnicBtl {
            rank,
            job: job.to_string(),
            key: 0,
            rails,
            card,
            host,
            peers: Vec::new(),
            active: Vec::new(),
            cfg,
            eager_limit: params::EAGER_LIMIT.get(p) as usize,
            max_send: params::MAX_SEND.get(p) as usize,
            stripe_min: params::STRIPE_MIN.get(p) as usize,
            probe_interval: Duration::from_millis(250),
            probe_timeout: Duration::from_millis(params::PROBE_TIMEOUT_MS.get(p) as u64),
            print_stats: params::STATS.get(p),
            next_timer_scan: Instant::now(),
            last_scan: Instant::now(),
            scratch: vec![0; 65536],
            touched: Vec::new(),
            probe_replies: Vec::new(),
            adoptions: Vec::new(),
            finalizing: false,
            rehome: Vec::new(),
        }))
    }

    /// The card to publish in the modex.
    pub fn card(&self) -> &ModexCard {
        &self.card
    }

    /// Sets the per-job key every datagram carries (the same on every rank).
    pub fn set_key(&mut self, key: u64) {
        self.key = key;
        for r in self.rails.iter().filter_map(|r| r.responder.as_ref()) {
            r.set_key(key);
        }
    }

    /// Pairs this process's interfaces with `peer`'s and opens a connection per pair.
    /// Returns why no pair exists when none does (the peer is then unreachable by usnic).
    pub fn add_peer(&mut self, peer: u32, card: ModexCard) -> Result<(), String> {
        let mine = ProcessCard {
            job: self.job.clone(),
            rank: self.rank,
            card: self.host.clone(),
        };
        let theirs = ProcessCard {
            job: self.job.clone(),
            rank: peer,
            card: card.to_host_card(),
        };
        let pairing = matching::pair(&mine, &theirs);
        if pairing.pairs.is_empty() {
            return Err(no_pair_message(&mine, &theirs, &pairing));
        }
        if self.peers.len() <= peer as usize {
            self.peers.resize_with(peer as usize + 1, || None);
        }
        let now = Instant::now();
        let mut paths = Vec::new();
        for pr in &pairing.pairs {
            paths.push(self.open_path(peer, &card, pr.local_if, pr.remote_if as u8, now)?);
        }
        tracing::debug!(target: "usnic", peer, pairs = %describe_pairs(&self.card, &card, &paths), "paired");
        let pairing_list = paths.iter().map(|p| (p.rail as u8, p.remote_if)).collect();
        self.peers[peer as usize] = Some(Peer {
            rank: peer,
            card,
            paths,
            next_msg_id: 0,
            delivered: DeliveredIds::default(),
            contacted: false,
            hello_seen: false,
            pairing: pairing_list,
        });
        self.active.push(peer);
        Ok(())
    }

    fn open_path(
        &mut self,
        peer: u32,
        card: &ModexCard,
        rail: usize,
        remote_if: u8,
        now: Instant,
    ) -> Result<Path, String> {
        let remote = card
            .interfaces()
            .get(remote_if as usize)
            .ok_or_else(|| format!("usnic: rank {peer}'s card has no interface {remote_if}"))?;
        let r = &mut self.rails[rail];
        let addr = r.ep().insert_peer(&remote.fabric_addr).map_err(|e| {
            format!(
                "usnic: cannot add rank {peer}'s {} ({}) to {}'s address vector: {e}",
                remote.interface.name, remote.interface.ipv4, r.name
            )
        })?;
        let max_datagram = r
            .max_datagram
            .min((remote.interface.mtu as usize).saturating_sub(IP_UDP_HEADERS));
        let cfg = Config {
            max_datagram,
            ..self.cfg.clone()
        };
        let speed = match (
            self.card.interfaces()[rail].interface.link_speed_mbps,
            remote.interface.link_speed_mbps,
        ) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) | (None, Some(a)) => a,
            (None, None) => 10_000,
        };
        Ok(Path {
            rail,
            remote_if,
            addr,
            conn: Connection::new(
                cfg,
                self.key,
                (self.rank, rail as u8),
                (peer, remote_if),
                now,
            )
            .map_err(|e| format!("usnic: path to rank {peer}: {e}"))?,
            speed_mbps: speed.max(1),
            max_datagram,
            bytes_sent: 0,
            last_probe: None,
            probe_nonce: 0,
            state: PathState::Probing {
                small: false,
                large: false,
                since: now,
                next_probe: now,
            },
            counters: PathCounters::default(),
        })
    }
}

/// The bandwidth a rail over the kernel `udp` provider advertises, Mb/s (see `limits`).
const UDP_BANDWIDTH_MBPS: u32 = 4_000;

impl Btl for UsnicBtl {
    fn name(&self) -> &'static str {
        "usnic"
    }

    fn limits(&self) -> Limits {
        // Over kernel UDP every datagram is one system call and softirq pass for at most
        // 1472 bytes: measured at 220-500 MB/s whatever the link, so the advertised bandwidth
        // (which the transport set compares to choose the rendezvous route) is capped there.
        let cap = if self.needs_kernel_time() {
            UDP_BANDWIDTH_MBPS
        } else {
            u32::MAX
        };
        let bandwidth = self
            .card
            .interfaces()
            .iter()
            .map(|i| i.interface.link_speed_mbps.unwrap_or(10_000).min(cap))
            .sum();
        Limits {
            eager_limit: self.eager_limit,
            max_send: self.max_send,
            latency_ns: 20_000,
            bandwidth_mbps: bandwidth,
            exclusivity: 10,
            get: false,
        }
    }

    fn reaches(&self, peer: u32) -> bool {
        self.peers
            .get(peer as usize)
            .is_some_and(|p| p.as_ref().is_some_and(|p| p.paths.iter().any(Path::usable)))
    }

    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        self.send_message(peer, am, header, payload)
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counter_values()
    }

    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let now = Instant::now();
        let mut delivered = 0;
        let datagrams = self.poll_rails(now, &mut |m| {
            delivered += 1;
            deliver(m)
        });
        if !self.adoptions.is_empty() {
            self.adopt_pairings(now);
        }
        if now >= self.next_timer_scan {
            self.next_timer_scan = now + TIMER_SCAN;
            self.scan_timers(now);
            let active = std::mem::take(&mut self.active);
            self.touched.extend_from_slice(&active);
            self.active = active;
        }
        if !self.touched.is_empty() {
            let mut touched = std::mem::take(&mut self.touched);
            touched.sort_unstable();
            touched.dedup();
            for &peer in &touched {
                self.flush(peer, now);
            }
            touched.clear();
            self.touched = touched;
        }
        delivered + datagrams.min(1)
    }

    fn needs_kernel_time(&self) -> bool {
        // Only a usNIC VIC moves datagrams without the kernel.
        self.rails
            .iter()
            .any(|r| r.endpoint.as_ref().is_some_and(|e| e.provider() != "usnic"))
    }

    fn quiet(&self) -> bool {
        self.peers.iter().flatten().all(|p| {
            p.paths
                .iter()
                .all(|x| !x.usable() || !x.conn.has_unacknowledged())
        })
    }

    fn quiesce(&mut self) -> bool {
        // Peers that have finalized stop acknowledging: from now on a silent path means
        // "done", not "broken".
        self.finalizing = true;
        let now = Instant::now();
        let linger = self.cfg.fail_after;
        self.quiet()
            || self.peers.iter().flatten().all(|p| {
                p.paths.iter().all(|x| {
                    !x.conn.has_unacknowledged()
                        || now.duration_since(x.conn.last_ack_progress()) > linger
                })
            })
    }
}

impl Drop for UsnicBtl {
    fn drop(&mut self) {
        if self.print_stats {
            eprint!("{}", self.stats_report());
        }
    }
}
