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
//! reliable connection measures the silence and reports [`Event::PathFailed`] after
//! `usnic_fail_after_ms`, or `usnic_peer_timeout_ms` while it is the peer's last usable path
//! (the transport tells it so); its unacknowledged messages go out on the remaining paths.
//! When no path to a peer is left the job stops with a message naming the peer, the
//! interfaces and the timeout.
//!
//! Datagrams with the wrong job key, a malformed header or an unknown sender are dropped and
//! counted; they never reach a connection.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use kestrel_transport::btl::{Btl, Incoming, Limits, SendError};
use kestrel_transport::params::Params;

use crate::card::{CardInterface, HostCard, ModexCard, ModexInterface};
use crate::discovery::{self, Verdict};
use crate::fabric::{DgramEndpoint, PeerAddr};
use crate::matching::{self, Pairing, ProcessCard};
use crate::params;
use crate::reliable::wire::{self, Body, Header};
use crate::reliable::{Config, Connection, Event};

/// Active-message tags at or above this value belong to the transport itself.
const AM_INTERNAL: u8 = 0xF0;
/// "Here is my pairing": sent once per path at first contact (see [`UsnicBtl::on_hello`]).
const AM_HELLO: u8 = 0xF1;

/// How often progress looks at timers (retransmission, ACK delay, probes, failure).
const TIMER_SCAN: Duration = Duration::from_micros(100);

/// Bytes of the message id that leads every message.
const MSG_ID_LEN: usize = 8;

/// IPv4 (without options) and UDP headers: what an interface MTU loses to encapsulation.
const IP_UDP_HEADERS: usize = 28;

/// A message taken back from a dead path: (active-message tag, message id + header + payload).
type Orphan = (u8, Vec<u8>);

/// Counters of one path, printed at finalize when `usnic_stats` asks.
#[derive(Debug, Default, Clone, Copy)]
pub struct PathCounters {
    /// Messages handed to this path.
    pub messages: u64,
    /// Probes sent and answers received.
    pub probes_sent: u64,
    /// Probe answers received.
    pub probe_replies: u64,
}

/// Datagrams dropped before they reached any connection, per rail.
#[derive(Debug, Default, Clone, Copy)]
pub struct BadDatagrams {
    /// Header carried another job's key.
    pub bad_key: u64,
    /// Header malformed (truncated, bad length, unknown kind or version).
    pub malformed: u64,
    /// Key right but the sender or rail pair is not one of ours.
    pub unknown_sender: u64,
}

impl BadDatagrams {
    fn total(&self) -> u64 {
        self.bad_key + self.malformed + self.unknown_sender
    }
}

/// The outcome of probing one path (`kestrel-ifmatch check`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PathReport {
    /// The peer's job rank.
    pub peer: u32,
    /// The peer's node.
    pub peer_node: String,
    /// Local interface and address.
    pub local: String,
    /// Remote interface and address.
    pub remote: String,
    /// Bytes of the large probe.
    pub mtu_probe: usize,
    /// A small probe came back.
    pub small_ok: bool,
    /// An MTU-sized probe came back.
    pub large_ok: bool,
    /// What is wrong, when something is.
    pub diagnosis: Option<String>,
}

/// One local interface with its endpoint.
struct Rail {
    name: String,
    ipv4: std::net::Ipv4Addr,
    /// Taken out while the endpoint is polled, so that the datagram handler can use the rest
    /// of the transport; present at every other time.
    endpoint: Option<DgramEndpoint>,
    max_datagram: usize,
    bad: BadDatagrams,
}

impl Rail {
    fn ep(&mut self) -> &mut DgramEndpoint {
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

/// A per-job key: 64 random bits, never zero.
pub fn new_job_key() -> u64 {
    use std::io::Read;
    let mut b = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut b))
        .is_err()
    {
        let t = Instant::now().elapsed().as_nanos() as u64;
        b = (t ^ ((std::process::id() as u64) << 32) ^ 0x9E37_79B9_7F4A_7C15).to_le_bytes();
    }
    u64::from_le_bytes(b).max(1)
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
            let ep = DgramEndpoint::open(&fi, depth).map_err(|e| e.to_string())?;
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
            rails.push(Rail {
                name: iface.name.clone(),
                ipv4,
                endpoint: Some(ep),
                max_datagram,
                bad: BadDatagrams::default(),
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
        let card = ModexCard::from_host_card(&host, addrs)
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
            state: PathState::Probing {
                small: false,
                large: false,
                since: now,
                next_probe: now,
            },
            counters: PathCounters::default(),
        })
    }

    /// Datagrams dropped per rail before reaching any connection.
    pub fn bad_datagrams(&self) -> BadDatagrams {
        let mut t = BadDatagrams::default();
        for r in &self.rails {
            t.bad_key += r.bad.bad_key;
            t.malformed += r.bad.malformed;
            t.unknown_sender += r.bad.unknown_sender;
        }
        t
    }

    /// The statistics table printed at finalize (`usnic_stats`).
    pub fn stats_report(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(
            s,
            "usnic stats rank {}: peer rail(local->remote) state msgs sent resent(timeout+fast) acks(tx/rx) dup out-of-window probes(tx/rx)",
            self.rank
        );
        for p in self.peers.iter().flatten() {
            for path in &p.paths {
                let st = path.conn.stats();
                let remote = p
                    .card
                    .interfaces()
                    .get(path.remote_if as usize)
                    .map(|i| i.interface.name.as_str())
                    .unwrap_or("?");
                let _ = writeln!(
                    s,
                    "  rank {} {}->{} {} {} {} {}+{} {}/{} {} {} {}/{}",
                    p.rank,
                    self.rails[path.rail].name,
                    remote,
                    match &path.state {
                        PathState::Up => "up",
                        PathState::Probing { .. } => "probing",
                        PathState::Dead(_) => "dead",
                    },
                    path.counters.messages,
                    st.segments_sent,
                    st.resent_timeout,
                    st.resent_fast,
                    st.acks_sent,
                    st.acks_received,
                    st.duplicates,
                    st.out_of_window,
                    path.counters.probes_sent,
                    path.counters.probe_replies,
                );
            }
        }
        for r in &self.rails {
            let _ = writeln!(
                s,
                "  rail {}: bad datagrams {} (wrong key {}, malformed {}, unknown sender {})",
                r.name,
                r.bad.total(),
                r.bad.bad_key,
                r.bad.malformed,
                r.bad.unknown_sender
            );
        }
        s
    }

    fn choose_path(peer: &mut Peer, len: usize, stripe_min: usize) -> Option<usize> {
        // Paths whose probes came back first; unproven ones only when no proven one is left
        // (at first contact, before any probe returns).
        let proven = peer.paths.iter().any(|p| p.state == PathState::Up);
        let usable = peer.paths.iter().enumerate().filter(|(_, p)| {
            if proven {
                p.state == PathState::Up
            } else {
                p.usable()
            }
        });
        if len < stripe_min {
            // Paths are in pairing order, best first.
            return usable.map(|(i, _)| i).next();
        }
        usable
            .min_by_key(|(_, p)| (p.bytes_sent / p.speed_mbps as u64, p.rail))
            .map(|(i, _)| i)
    }

    fn first_contact(&mut self, peer: u32, now: Instant) {
        let p = self.peers[peer as usize].as_mut().expect("active peer");
        if p.contacted {
            return;
        }
        p.contacted = true;
        // The HELLO carries my pairing; the peer checks it against its own.
        let mut hello = Vec::with_capacity(1 + 2 * p.pairing.len());
        hello.push(p.pairing.len() as u8);
        for &(l, r) in &p.pairing {
            hello.extend_from_slice(&[l, r]);
        }
        for path in p.paths.iter_mut() {
            let id = p.next_msg_id;
            p.next_msg_id += 1;
            let _ = path.conn.send(AM_HELLO, &[&id.to_le_bytes(), &hello]);
            if let PathState::Probing { next_probe, .. } = &mut path.state {
                *next_probe = now;
            }
        }
    }

    /// Hands every datagram each path has ready to its endpoint, while the endpoint has room.
    fn flush(&mut self, peer: u32, now: Instant) {
        let Some(p) = self.peers[peer as usize].as_mut() else {
            return;
        };
        for path in p.paths.iter_mut() {
            let rail = &mut self.rails[path.rail];
            while rail.ep().free_tx_slots() > 0 {
                let Some(n) = path.conn.poll_transmit(now, &mut self.scratch) else {
                    break;
                };
                let data = &self.scratch[..n];
                if rail
                    .ep()
                    .send_with(path.addr, |buf| {
                        buf[..n].copy_from_slice(data);
                        n
                    })
                    .is_err()
                {
                    // The datagram is lost like one the network dropped; the core resends it.
                    break;
                }
            }
        }
    }

    fn send_probes(&mut self, peer: u32, now: Instant) {
        let key = self.key;
        let me = self.rank;
        let Some(p) = self.peers[peer as usize].as_mut() else {
            return;
        };
        for path in p.paths.iter_mut() {
            let PathState::Probing {
                small,
                large,
                since,
                next_probe,
            } = &mut path.state
            else {
                continue;
            };
            if now.duration_since(*since) > self.probe_timeout {
                let remote = &p.card.interfaces()[path.remote_if as usize].interface;
                let rail = &self.rails[path.rail];
                let why = match (*small, *large) {
                    (true, false) => format!(
                        "small probes were answered but {}-byte ones were not within {} ms (usnic_probe_timeout_ms): \
                         an MTU mismatch on the path {} ({}) -> rank {peer} {} ({}); make the MTU the same on both \
                         interfaces and every switch between them",
                        path.max_datagram,
                        self.probe_timeout.as_millis(),
                        rail.name,
                        rail.ipv4,
                        remote.name,
                        remote.ipv4
                    ),
                    _ => format!(
                        "no probe was answered within {} ms (usnic_probe_timeout_ms): {} ({}) cannot reach rank {peer} {} ({}); \
                         check addresses, routes and firewalls, or exclude the interface with KESTREL_USNIC_IF_EXCLUDE",
                        self.probe_timeout.as_millis(),
                        rail.name,
                        rail.ipv4,
                        remote.name,
                        remote.ipv4
                    ),
                };
                tracing::warn!(target: "usnic", "{why}");
                path.state = PathState::Dead(why);
                continue;
            }
            if now < *next_probe {
                continue;
            }
            *next_probe = now + self.probe_interval;
            let rail = &mut self.rails[path.rail];
            for (size, big) in [(wire::HEADER_LEN + 8, false), (path.max_datagram, true)] {
                if (big && *large) || (!big && *small) || rail.ep().free_tx_slots() == 0 {
                    continue;
                }
                let (from, to) = (path.rail as u8, path.remote_if);
                let _ = rail.ep().send_with(path.addr, |buf| {
                    write_probe(key, me, from, to, Body::Probe, size, buf)
                });
                path.counters.probes_sent += 1;
            }
        }
    }

    /// Handles one datagram that arrived on `rail`.
    fn on_datagram(
        &mut self,
        rail: usize,
        now: Instant,
        bytes: &[u8],
        deliver: &mut dyn FnMut(Incoming<'_>),
    ) -> usize {
        let (h, payload) = match wire::decode(bytes, self.key) {
            Ok(v) => v,
            Err(wire::WireError::BadKey) => {
                self.rails[rail].bad.bad_key += 1;
                return 0;
            }
            Err(_) => {
                self.rails[rail].bad.malformed += 1;
                return 0;
            }
        };
        let peer = h.src_rank;
        let found = self
            .peers
            .get_mut(peer as usize)
            .and_then(Option::as_mut)
            .filter(|_| h.dst_rail as usize == rail)
            .and_then(|p| {
                p.paths
                    .iter()
                    .position(|x| x.rail == rail && x.remote_if == h.src_rail)
                    .map(|i| (p, i))
            });
        let Some((p, i)) = found else {
            self.rails[rail].bad.unknown_sender += 1;
            return 0;
        };
        match h.body {
            Body::Probe => {
                // Echo the probe's size: the reply tells the prober which size class arrived.
                // Sent once polling of this rail ends (its endpoint is busy now).
                let path = &p.paths[i];
                self.probe_replies
                    .push((rail, path.addr, path.remote_if, bytes.len()));
                0
            }
            Body::ProbeReply => {
                let path = &mut p.paths[i];
                path.counters.probe_replies += 1;
                if let PathState::Probing { small, large, .. } = &mut path.state {
                    if bytes.len() > wire::HEADER_LEN + 8 {
                        *large = true;
                    } else {
                        *small = true;
                    }
                    if *small && *large {
                        path.state = PathState::Up;
                    }
                }
                0
            }
            Body::Data(_) | Body::Ack { .. } => {
                p.paths[i].conn.handle_datagram(now, &h, payload);
                self.touched.push(peer);
                let mut n = 0;
                while let Some((am, data)) = p.paths[i].conn.poll_deliver() {
                    if data.len() < MSG_ID_LEN {
                        self.rails[rail].bad.malformed += 1;
                        continue;
                    }
                    let id = u64::from_le_bytes(data[..MSG_ID_LEN].try_into().expect("8 bytes"));
                    if !p.delivered.insert(id) {
                        continue;
                    }
                    let body = &data[MSG_ID_LEN..];
                    if am >= AM_INTERNAL {
                        if am == AM_HELLO {
                            if let Some(theirs) = on_hello(&self.job, self.rank, p, body) {
                                self.adoptions.push((peer, theirs));
                            }
                        }
                    } else {
                        deliver(Incoming {
                            peer,
                            am,
                            data: body,
                        });
                        n += 1;
                    }
                    p.paths[i].conn.recycle(data);
                }
                n
            }
        }
    }

    fn scan_timers(&mut self, now: Instant) {
        for idx in 0..self.active.len() {
            let peer = self.active[idx];
            self.send_probes(peer, now);
            let p = self.peers[peer as usize].as_mut().expect("active peer");
            let mut orphaned = Vec::new();
            let mut usable_paths = p.paths.iter().filter(|x| x.usable()).count();
            for path in p.paths.iter_mut() {
                // The last usable path gets the longer peer timeout: with nowhere to move its
                // traffic, a stall must not end the job. Told before its timers run, so a path
                // that became the last one in this scan is judged by the new limit.
                let others = usable_paths - usize::from(path.usable());
                path.conn.set_sole_path(others == 0);
                if path.conn.poll_timeout().is_some_and(|t| t <= now) {
                    path.conn.handle_timeout(now);
                }
                while let Some(event) = path.conn.poll_event() {
                    let Event::PathFailed { limit, .. } = event;
                    // Peers that have finalized stop acknowledging: not a failure then.
                    if self.finalizing || !path.usable() {
                        continue;
                    }
                    let why = limit.to_string();
                    tracing::warn!(target: "usnic", "path {} -> rank {peer} interface {} failed: {why}; moving its traffic to the other rails",
                        self.rails[path.rail].name, path.remote_if);
                    path.state = PathState::Dead(why);
                    usable_paths -= 1;
                }
                if matches!(path.state, PathState::Dead(_)) && path.conn.has_unacknowledged() {
                    orphaned.extend(path.conn.take_unacknowledged());
                }
            }
            if !orphaned.is_empty() {
                self.rehome.push((peer, orphaned));
            }
            if !p.paths.iter().any(Path::usable) && !self.finalizing {
                self.all_paths_lost(peer);
            }
        }
        self.rehome_orphans();
    }

    fn rehome_orphans(&mut self) {
        let mut left = Vec::new();
        for (peer, msgs) in std::mem::take(&mut self.rehome) {
            let p = self.peers[peer as usize].as_mut().expect("active peer");
            let mut it = msgs.into_iter();
            let mut rest = Vec::new();
            for (am, data) in it.by_ref() {
                let Some(i) = Self::choose_path(p, data.len(), self.stripe_min) else {
                    rest.push((am, data));
                    continue;
                };
                if p.paths[i].conn.send(am, &[&data]).is_err() {
                    rest.push((am, data));
                }
            }
            if !rest.is_empty() {
                left.push((peer, rest));
            }
        }
        self.rehome = left;
    }

    /// Replaces our pairing with a lower-ranked peer's: paths it lacks are opened, paths it
    /// does not have are retired and their unacknowledged messages move to the others.
    fn adopt_pairings(&mut self, now: Instant) {
        for (peer, theirs) in std::mem::take(&mut self.adoptions) {
            let Some(card) = self.peers[peer as usize].as_ref().map(|p| p.card.clone()) else {
                continue;
            };
            for &(rail, remote_if) in &theirs {
                let exists = self.peers[peer as usize].as_ref().is_some_and(|p| {
                    p.paths
                        .iter()
                        .any(|x| x.rail == rail as usize && x.remote_if == remote_if)
                });
                if exists || rail as usize >= self.rails.len() {
                    continue;
                }
                match self.open_path(peer, &card, rail as usize, remote_if, now) {
                    Ok(path) => self.peers[peer as usize]
                        .as_mut()
                        .expect("known peer")
                        .paths
                        .push(path),
                    Err(e) => {
                        tracing::warn!(target: "usnic", "cannot adopt rank {peer}'s pairing: {e}")
                    }
                }
            }
            let p = self.peers[peer as usize].as_mut().expect("known peer");
            let mut orphaned = Vec::new();
            for path in p.paths.iter_mut() {
                if !theirs.contains(&(path.rail as u8, path.remote_if)) && path.usable() {
                    path.state = PathState::Dead(format!("replaced by rank {peer}'s pairing"));
                    orphaned.extend(path.conn.take_unacknowledged());
                }
            }
            p.pairing = theirs;
            if !orphaned.is_empty() {
                self.rehome.push((peer, orphaned));
            }
        }
        self.rehome_orphans();
    }

    /// Polls every rail's endpoint and handles what arrived; returns the datagrams seen.
    fn poll_rails(&mut self, now: Instant, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let mut seen = 0;
        for i in 0..self.rails.len() {
            let Some(mut ep) = self.rails[i].endpoint.take() else {
                continue;
            };
            let polled = ep.poll(|d| {
                seen += 1;
                self.on_datagram(i, now, d, deliver);
            });
            if let Err(e) = polled {
                tracing::warn!(target: "usnic", "polling {}: {e}", self.rails[i].name);
            }
            for (rail, addr, to, size) in self.probe_replies.drain(..) {
                let (key, me) = (self.key, self.rank);
                let _ = ep.send_with(addr, |buf| {
                    write_probe(key, me, rail as u8, to, Body::ProbeReply, size, buf)
                });
            }
            self.rails[i].endpoint = Some(ep);
        }
        seen
    }

    /// The connectivity check of `kestrel-ifmatch check`: probes every path to every peer with
    /// a small and an MTU-sized datagram until each path is answered or `timeout` passes, while
    /// answering the peers' probes; then keeps answering until no probe has arrived for
    /// `linger` (peers may still be checking). Sends no data and never ends the process.
    pub fn connectivity_check(&mut self, timeout: Duration, linger: Duration) -> Vec<PathReport> {
        let start = Instant::now();
        self.probe_timeout = timeout;
        for &peer in &self.active {
            if let Some(p) = self.peers[peer as usize].as_mut() {
                p.contacted = true;
                for path in p.paths.iter_mut() {
                    path.state = PathState::Probing {
                        small: false,
                        large: false,
                        since: start,
                        next_probe: start,
                    };
                }
            }
        }
        let mut last_heard = Instant::now();
        loop {
            let now = Instant::now();
            for i in 0..self.active.len() {
                let peer = self.active[i];
                self.send_probes(peer, now);
            }
            let heard = self.poll_rails(now, &mut |_| {});
            if heard > 0 {
                last_heard = now;
            }
            let resolved = self.peers.iter().flatten().all(|p| {
                p.paths
                    .iter()
                    .all(|x| !matches!(x.state, PathState::Probing { .. }))
            });
            if resolved && now.duration_since(last_heard) > linger {
                break;
            }
            if now.duration_since(start) > timeout + linger {
                break;
            }
            if heard == 0 {
                std::thread::sleep(Duration::from_micros(200));
            }
        }
        let mut out = Vec::new();
        for p in self.peers.iter().flatten() {
            for path in &p.paths {
                let remote = &p.card.interfaces()[path.remote_if as usize].interface;
                let rail = &self.rails[path.rail];
                let (small, large, diagnosis) = match &path.state {
                    PathState::Up => (true, true, None),
                    PathState::Probing { small, large, .. } => {
                        (*small, *large, Some("still unanswered".to_string()))
                    }
                    PathState::Dead(why) => {
                        let small = why.starts_with("small probes were answered");
                        (small, false, Some(why.clone()))
                    }
                };
                out.push(PathReport {
                    peer: p.rank,
                    peer_node: p.card.node().to_string(),
                    local: format!("{} ({})", rail.name, rail.ipv4),
                    remote: format!("{} ({})", remote.name, remote.ipv4),
                    mtu_probe: path.max_datagram,
                    small_ok: small,
                    large_ok: large,
                    diagnosis,
                });
            }
        }
        out
    }

    fn all_paths_lost(&self, peer: u32) -> ! {
        let p = self.peers[peer as usize].as_ref().expect("active peer");
        let mut why = String::new();
        for path in &p.paths {
            let remote = &p.card.interfaces()[path.remote_if as usize].interface;
            let reason = match &path.state {
                PathState::Dead(r) => r.as_str(),
                _ => "unknown",
            };
            let _ = write!(
                why,
                "\n  {} ({}) -> {} ({}): {reason}",
                self.rails[path.rail].name, self.rails[path.rail].ipv4, remote.name, remote.ipv4
            );
        }
        let msg = format!(
            "usnic: rank {} lost every network path to rank {peer} on node {}:{why}\n\
             The job cannot continue. Check the links between these interfaces (ip link, cables, switch ports); \
             usnic_fail_after_ms and usnic_peer_timeout_ms set how long silent paths are tolerated.",
            self.rank, p.card.node()
        );
        tracing::error!(target: "usnic", "{msg}");
        eprintln!("{msg}");
        std::process::exit(1);
    }
}

/// Writes a probe (or probe reply) of `size` bytes in all into `buf`; returns its length.
fn write_probe(
    key: u64,
    me: u32,
    from: u8,
    to: u8,
    body: Body,
    size: usize,
    buf: &mut [u8],
) -> usize {
    let size = size.clamp(wire::HEADER_LEN, buf.len());
    let h = Header {
        key,
        src_rank: me,
        src_rail: from,
        dst_rail: to,
        payload_len: (size - wire::HEADER_LEN) as u16,
        body,
    };
    if wire::write_header(&h, buf).is_err() {
        return 0;
    }
    buf[wire::HEADER_LEN..size].fill(0x5a);
    size
}

/// Checks a peer's HELLO (its pairing) against ours. Returns the peer's pairing, mirrored into
/// our terms, when it differs and the peer's choice wins (the lower (job, rank) decides).
fn on_hello(job: &str, me: u32, p: &mut Peer, body: &[u8]) -> Option<Vec<(u8, u8)>> {
    if p.hello_seen {
        return None;
    }
    p.hello_seen = true;
    let (&n, rest) = body.split_first()?;
    if rest.len() != 2 * n as usize {
        return None;
    }
    // Their (their rail, my interface) pairs, mirrored into my terms.
    let mut theirs: Vec<(u8, u8)> = rest.chunks(2).map(|c| (c[1], c[0])).collect();
    theirs.sort_unstable();
    let mut mine = p.pairing.clone();
    mine.sort_unstable();
    if theirs == mine {
        return None;
    }
    let lower_is_me = (job, me) < (job, p.rank);
    tracing::warn!(
        target: "usnic",
        "rank {me} and rank {} chose different interface pairs: mine {:?}, theirs {:?} (local rail, remote interface); \
         the lower rank's choice ({}) is used -- `kestrel-ifmatch explain` on both cards shows why (usually asymmetric route metrics)",
        p.rank,
        mine,
        theirs,
        if lower_is_me { "mine" } else { "theirs" }
    );
    (!lower_is_me).then_some(theirs)
}

fn describe_pairs(mine: &ModexCard, theirs: &ModexCard, paths: &[Path]) -> String {
    paths
        .iter()
        .map(|p| {
            format!(
                "{}->{}",
                mine.interfaces()[p.rail].interface.name,
                theirs.interfaces()[p.remote_if as usize].interface.name
            )
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn no_pair_message(mine: &ProcessCard, theirs: &ProcessCard, _pairing: &Pairing) -> String {
    let list = |c: &HostCard| {
        c.interfaces
            .iter()
            .map(|i| format!("{} {}/{}", i.name, i.ipv4, i.prefix_len))
            .collect::<Vec<_>>()
            .join(", ")
    };
    format!(
        "usnic: no interface of rank {} (node {}: {}) can reach an interface of rank {} (node {}: {}): \
         no shared subnet and no route; run `kestrel-ifmatch explain` on the two cards (`kestrel-ifmatch card` on each host)",
        mine.rank,
        mine.card.node,
        list(&mine.card),
        theirs.rank,
        theirs.card.node,
        list(&theirs.card)
    )
}

impl Btl for UsnicBtl {
    fn name(&self) -> &'static str {
        "usnic"
    }

    fn limits(&self) -> Limits {
        let bandwidth = self
            .card
            .interfaces()
            .iter()
            .map(|i| i.interface.link_speed_mbps.unwrap_or(10_000))
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
        let len = header.len() + payload.len();
        if len > self.max_send {
            return Err(SendError::TooLarge {
                len,
                max: self.max_send,
            });
        }
        let now = Instant::now();
        let Some(p) = self.peers.get_mut(peer as usize).and_then(Option::as_mut) else {
            return Err(SendError::Unreachable { peer });
        };
        if !p.contacted {
            self.first_contact(peer, now);
        }
        let p = self.peers[peer as usize].as_mut().expect("checked above");
        let Some(i) = Self::choose_path(p, len, self.stripe_min) else {
            return Err(SendError::Unreachable { peer });
        };
        let id = p.next_msg_id;
        let path = &mut p.paths[i];
        if path
            .conn
            .send(am, &[&id.to_le_bytes(), header, payload])
            .is_err()
        {
            return Err(SendError::WouldBlock);
        }
        p.next_msg_id += 1;
        path.bytes_sent += len as u64;
        path.counters.messages += 1;
        self.flush(peer, now);
        Ok(())
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
