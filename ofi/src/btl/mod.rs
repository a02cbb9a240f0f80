//! The ofi transport: one reliable-datagram endpoint per usable domain (a rail), messages
//! framed with the sender and the set's key.
//!
//! Each peer is reached over pairs of endpoints: every one of this process's rails whose fabric
//! (the subnet, for tcp) one of the peer's endpoints is on, in fabric-name order (so both
//! ends start on the same pair), else (a routed network) this process's first rail to the
//! peer's first endpoint, weighed as usnic weighs its pairs. The first pair carries small
//! frames and acknowledgements, large frames are striped over the matched pairs by link
//! speed; [`crate::paths`] numbers the frames, watches the acknowledgements and moves the
//! traffic off a pair that goes silent (the timers, probes and failures: [`upkeep`]).
//!
//! A send copies the frame header, the messaging layer's header and its payload into one of
//! the endpoint's send slots and posts it (`fi_send`); the provider delivers it whole and
//! reliably into one of the receive buffers the peer keeps posted, where `progress` checks the
//! frame ([`crate::wire`]) and hands the bytes up. Large messages are the messaging layer's
//! rendezvous pipeline of `ofi_max_send`-byte fragments, or, where the provider offers RMA,
//! read by the receiver straight from the sender's registered buffer ([`rma`]).
//!
//! This module owns the endpoint, the peers' addresses and the counters. It must never block,
//! never hand up a frame that fails its checks, and never re-enter the messaging layer.

use std::fmt;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

use kestrel_fabric::liveness::{Prober, Responder};
use kestrel_fabric::{
    rdm_interfaces, FabricInterface, MemoryRegion, MsgEndpoint, Owner, PeerAddr,
    SendError as FabricSendError,
};
use kestrel_transport::btl::{
    Btl, CounterSpec, Incoming, Limits, LocalRegion, RemoteRegion, SendError, SleepReadiness,
};
use kestrel_transport::params::Params;

use crate::card::{CardEndpoint, EndpointPair, OfiCard};
use crate::params;
use crate::paths::{Arrival, Pair, PeerPaths, Timing};
use crate::registrations::Registrations;
use crate::select::{Offer, Policy};
use crate::wire::{self, Header, Kind, FRAME_LEN};

mod rma;
mod upkeep;

/// Longest wait before received frames are acknowledged when no data goes back.
const ACK_DELAY: Duration = Duration::from_millis(1);

/// Time between two liveness probes of a peer whose acknowledgements stopped.
const PROBE_EVERY: Duration = Duration::from_millis(250);

/// Progress calls between two looks at the timers (the clock is read only then).
const TICK_POLLS: u32 = 64;

/// How the fabric wrapper names this transport in its errors.
pub const FABRIC_OWNER: Owner = Owner {
    component: "ofi",
    provider_variable: "KESTREL_OFI_PROVIDER",
};

/// Exclusivity: below usnic's 10, so that where both reach a peer the default stays usnic
/// until the transport set chooses per message size (issue 18, item 4).
pub const EXCLUSIVITY: u32 = 5;

/// The counters every ofi module reports (summed over its endpoint).
pub const COUNTERS: &[CounterSpec] = &[
    CounterSpec {
        name: "ofi_messages_sent",
        description: "Messages handed to the provider (each rendezvous fragment counts).",
    },
    CounterSpec {
        name: "ofi_bytes_sent",
        description: "Header and payload bytes of those messages (the 16-byte frame excluded).",
    },
    CounterSpec {
        name: "ofi_messages_received",
        description: "Messages received and handed to the messaging layer.",
    },
    CounterSpec {
        name: "ofi_bytes_received",
        description: "Header and payload bytes of those messages.",
    },
    CounterSpec {
        name: "ofi_frames_dropped",
        description: "Received messages dropped because their frame failed a check (short, another version, another set's key, an unknown sender, a number implausibly far ahead).",
    },
    CounterSpec {
        name: "ofi_duplicates_dropped",
        description: "Messages received twice (sent again after a failover) and dropped.",
    },
    CounterSpec {
        name: "ofi_acks_sent",
        description: "Acknowledgement frames sent on their own (no data going back to carry them).",
    },
    CounterSpec {
        name: "ofi_failovers",
        description: "Pairs of endpoints declared dead while another pair to the peer worked (traffic moved there).",
    },
    CounterSpec {
        name: "ofi_probes_sent",
        description: "Liveness probes sent to peers whose acknowledgements had stopped.",
    },
    CounterSpec {
        name: "ofi_probe_answers",
        description: "Liveness probes answered: the peer was busy, not behind a dead link.",
    },
    CounterSpec {
        name: "ofi_frames_striped",
        description: "Messages sent on another primary pair of endpoints than the active one (striping by link speed, ofi_stripe_min).",
    },
    CounterSpec {
        name: "ofi_rma_reads",
        description: "Rendezvous messages this process read from the sender's registered buffer (ofi_rma).",
    },
    CounterSpec {
        name: "ofi_rma_bytes_read",
        description: "Bytes of those messages.",
    },
    CounterSpec {
        name: "ofi_registrations",
        description: "Send buffers registered for peers to read.",
    },
    CounterSpec {
        name: "ofi_registrations_reused",
        description: "Send buffers a kept registration already covered (ofi_mr_cache).",
    },
];

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    messages_sent: u64,
    bytes_sent: u64,
    messages_received: u64,
    bytes_received: u64,
    frames_dropped: u64,
    duplicates_dropped: u64,
    acks_sent: u64,
    failovers: u64,
    probes_sent: u64,
    probe_answers: u64,
    frames_striped: u64,
    rma_reads: u64,
    rma_bytes_read: u64,
    registrations: u64,
    registrations_reused: u64,
}

/// One endpoint, on one domain.
struct Rail {
    endpoint: MsgEndpoint,
    fabric: String,
    domain: String,
    /// The interface's link speed in Mb/s, 0 when sysfs does not say.
    speed_mbps: u32,
    /// Answers peers' liveness probes on this rail's address (none without an IPv4 address).
    responder: Option<Responder>,
    /// Sends this process's probes from the rail's address.
    prober: Option<Prober>,
    /// The provider's largest message: one RMA read's bound.
    max_read: usize,
}

/// What libfabric offers this process under the ofi parameters: the policy they set, the
/// RDM domains listed, and their plain descriptions (the same order), which the policy
/// judges. `kestrel-ifmatch list --transport ofi` shows the same survey a rank makes.
#[derive(Debug)]
pub struct Survey {
    /// The operator's choices.
    pub policy: Policy,
    /// The domains libfabric lists for the policy's provider (any, for `auto`).
    pub interfaces: Vec<FabricInterface>,
    /// `interfaces` described for the policy.
    pub offers: Vec<Offer>,
}

/// Why there is no survey.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SurveyError {
    /// libfabric offers no RDM domain for the provider asked (the reason quoted to users).
    Nothing(String),
    /// A parameter is wrong, or libfabric failed.
    Failed(String),
}

impl Survey {
    /// Lists the RDM domains under the ofi parameters in `params`.
    pub fn take(params: &Params) -> Result<Survey, SurveyError> {
        let policy = Policy::from_params(params).map_err(SurveyError::Failed)?;
        // Listed without FI_RMA, so that auto's order of providers is not bent toward those
        // that offer it; reads ask again for the chosen provider (OfiBtl::open).
        let interfaces = match rdm_interfaces(FABRIC_OWNER, policy.provider.name(), false) {
            Ok(list) => list,
            Err(e) if e.is_no_data() => return Err(SurveyError::Nothing(e.to_string())),
            Err(e) => return Err(SurveyError::Failed(e.to_string())),
        };
        let offers = interfaces
            .iter()
            .map(|i| Offer {
                provider: i.provider().to_string(),
                domain: i.domain().to_string(),
                ipv4: i.ipv4(),
            })
            .collect();
        Ok(Survey {
            policy,
            interfaces,
            offers,
        })
    }
}

/// This process's ofi module.
pub struct OfiBtl {
    rails: Vec<Rail>,
    me: u32,
    key: u64,
    peers: Vec<Option<PeerPaths<PeerAddr>>>,
    /// Rails on which a pair died: their stuck sends and late errors are ignored.
    rail_failed: Vec<bool>,
    /// Some peer has frames to send again after a failover.
    resends_pending: bool,
    /// Peers whose acknowledgement is due now.
    ack_due: Vec<u32>,
    timing: Timing,
    /// The nonce of the last liveness probe to each peer (an answer must echo it).
    probe_nonces: Vec<u64>,
    clock_origin: Instant,
    polls: u32,
    card: OfiCard,
    eager_limit: usize,
    /// Header and payload bytes one send carries (the slot minus the frame).
    max_send: usize,
    /// Sends of at least this many bytes are striped over a peer's primary pairs.
    stripe_min: usize,
    latency_ns: u32,
    bandwidth_mbps: u32,
    counters: Counters,
    finalizing: bool,
    /// When finalize's first quiesce ran.
    finalize_started: Option<Instant>,
    /// Large messages go by RMA read (`rma`): the provider reads registered memory,
    /// `ofi_rma` is on, and this process has one rail.
    rma: bool,
    /// Send buffers registered for peers to read.
    exposed: Registrations<MemoryRegion>,
    /// Gets of the messaging layer in flight.
    reads: Vec<rma::ReadInFlight>,
}

impl fmt::Debug for OfiBtl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OfiBtl")
            .field("me", &self.me)
            .field("card", &self.card)
            .field("eager_limit", &self.eager_limit)
            .field("stripe_min", &self.stripe_min)
            .field("max_send", &self.max_send)
            .finish()
    }
}

/// What opening found: a module, or why this process has none.
#[derive(Debug)]
pub enum Opened {
    /// The module.
    Ready(Box<OfiBtl>),
    /// No usable provider or domain here (the reason is quoted to the user).
    Declined(String),
}

impl OfiBtl {
    /// Opens this process's endpoint as the ofi parameters say. `Err` is a failure of
    /// something that should work (a bad parameter, a provider that lists a domain and then
    /// cannot open it).
    /// `node_only`: every peer of the set is on this node (loopback may then serve).
    pub fn open(params: &Params, me: u32, node_only: bool) -> Result<Opened, String> {
        let survey = match Survey::take(params) {
            Ok(s) => s,
            Err(SurveyError::Nothing(why)) => return Ok(Opened::Declined(why)),
            Err(SurveyError::Failed(why)) => return Err(why),
        };
        let chosen = match survey.policy.choose(&survey.offers, node_only) {
            Ok(o) => o,
            Err(why) => return Ok(Opened::Declined(why)),
        };
        let ifaces: Vec<&FabricInterface> = chosen
            .iter()
            .map(|c| {
                let i = survey
                    .offers
                    .iter()
                    .position(|o| std::ptr::eq(o, *c))
                    .expect("the chosen offers are the survey's");
                &survey.interfaces[i]
            })
            .collect();
        // Reads need the provider's RMA capability, asked for now for the chosen domain only.
        let relisted = reads_wanted(params, &ifaces)
            .then(|| with_rma(ifaces[0]))
            .flatten();
        let (ifaces, rma) = match &relisted {
            Some(i) => (vec![i], true),
            None => (ifaces, false),
        };
        Self::open_on(&ifaces, params, me, rma).map(|b| Opened::Ready(Box::new(b)))
    }

    /// Opens one endpoint per interface; with `open_rma` (one interface, listed with
    /// `FI_RMA`) large messages go by RMA read.
    fn open_on(
        ifaces: &[&FabricInterface],
        params: &Params,
        me: u32,
        open_rma: bool,
    ) -> Result<OfiBtl, String> {
        let eager = params::EAGER_LIMIT.get(params) as usize;
        let fragment = params::MAX_SEND.get(params) as usize;
        let depth = params::QUEUE_DEPTH.get(params) as usize;
        let wait_fd = params::CQ_WAIT.get(params);
        let slot = eager.max(fragment) + FRAME_LEN;
        let provider = ifaces[0].provider().to_string();
        let tcp = is_kernel_tcp(&provider);
        let mut rails = Vec::with_capacity(ifaces.len());
        let mut bandwidth_mbps = 0u32;
        for iface in ifaces {
            let endpoint = MsgEndpoint::open_sized(iface, depth, slot, wait_fd, open_rma)
                .map_err(|e| e.to_string())?;
            tracing::debug!(
                target: "ofi",
                provider = iface.provider(),
                domain = iface.domain(),
                fabric = iface.fabric(),
                tx_depth = endpoint.tx_depth(),
                rx_depth = endpoint.rx_depth(),
                wait_fd = endpoint.wait_fd().is_some(),
                "endpoint open"
            );
            let speed_mbps = sysfs_speed_mbps(iface);
            // Unknown speeds count as 10 Gb/s in the advertised bandwidth, 0 in the pairing.
            bandwidth_mbps = bandwidth_mbps.saturating_add(speed_mbps.unwrap_or(10_000));
            let (responder, prober) = match iface.ipv4() {
                Some(ip) => match (Responder::start(ip, me), Prober::bind(ip)) {
                    (Ok(r), Ok(p)) => (Some(r), Some(p)),
                    (Err(e), _) | (_, Err(e)) => {
                        tracing::debug!(target: "ofi", domain = iface.domain(), error = %e, "no liveness probes on this rail: a busy peer is timed out like a dead link");
                        (None, None)
                    }
                },
                None => (None, None),
            };
            rails.push(Rail {
                endpoint,
                fabric: iface.fabric().to_string(),
                domain: iface.domain().to_string(),
                speed_mbps: speed_mbps.unwrap_or(0),
                responder,
                prober,
                max_read: iface.max_msg_size(),
            });
        }
        // The provider may cap messages below what was asked.
        let max_send = rails
            .iter()
            .map(|r| r.endpoint.max_datagram())
            .min()
            .expect("at least one rail")
            - FRAME_LEN;
        let card = OfiCard {
            provider: provider.clone(),
            endpoints: rails
                .iter()
                .map(|r| CardEndpoint {
                    fabric: r.fabric.clone(),
                    domain: r.domain.clone(),
                    address: r.endpoint.address(),
                    speed_mbps: r.speed_mbps,
                    probe: r.responder.as_ref().map(Responder::addr),
                })
                .collect(),
        };
        let ms = |v: i64| Duration::from_millis(v.max(0) as u64);
        let rail_count = rails.len();
        let rma = open_rma && rails[0].endpoint.can_read();
        // Registrations that pin pages must not outlive their message (see registrations).
        let keep = if rails[0].endpoint.registrations_pin() {
            0
        } else {
            params::MR_CACHE.get(params).max(0) as usize
        };
        tracing::debug!(target: "ofi", rma, keep, "large messages by RMA read");
        Ok(OfiBtl {
            rails,
            me,
            key: 0,
            peers: Vec::new(),
            rail_failed: vec![false; rail_count],
            resends_pending: false,
            ack_due: Vec::new(),
            timing: Timing {
                fail_after: ms(params::FAIL_AFTER_MS.get(params)),
                peer_timeout: ms(params::PEER_TIMEOUT_MS.get(params)),
                ack_delay: ACK_DELAY,
                // Half the failover time: a busy peer's answer comes long before the limit.
                probe_after: ms(params::FAIL_AFTER_MS.get(params) / 2),
                probe_every: PROBE_EVERY,
            },
            probe_nonces: Vec::new(),
            clock_origin: Instant::now(),
            polls: 0,
            card,
            eager_limit: eager.min(max_send),
            max_send,
            stripe_min: params::STRIPE_MIN.get(params) as usize,
            // On usnic's scale (20 µs for kernel UDP): kernel TCP through the rxm layer
            // measured about 2 µs more per one-way; fabric providers a few µs in all. The
            // transport set takes the size where two transports cross from these.
            latency_ns: if tcp { 22_000 } else { 3_000 },
            bandwidth_mbps,
            counters: Counters::default(),
            finalizing: false,
            finalize_started: None,
            rma,
            exposed: Registrations::new(keep),
            reads: Vec::new(),
        })
    }

    /// The card peers need.
    pub fn card(&self) -> &OfiCard {
        &self.card
    }

    /// Sets the set's key (frames carry it; others are dropped).
    pub fn set_key(&mut self, key: u64) {
        self.key = key;
        for r in self.rails.iter().filter_map(|r| r.responder.as_ref()) {
            r.set_key(key);
        }
    }

    /// Adds `peer` from its card: the pairs of [`crate::card::pairing`] (a weighted matching of
    /// the two processes' endpoints, then the other same-fabric pairs as standbys). Returns
    /// why it cannot be reached when it cannot.
    pub fn add_peer(&mut self, peer: u32, card: &OfiCard) -> Result<(), String> {
        if card.provider != self.card.provider {
            return Err(format!(
                "no provider in common: mine {}, theirs {} (set KESTREL_OFI_PROVIDER the same \
                 on every node)",
                self.card.provider, card.provider
            ));
        }
        let (chosen, routed) = crate::card::pairing(&self.card, card, self.me < peer);
        let chosen: Vec<(&EndpointPair, &CardEndpoint)> = chosen
            .iter()
            .map(|p| (p, &card.endpoints[p.remote]))
            .collect();
        let mut pairs = Vec::with_capacity(chosen.len());
        for (pair, remote) in chosen {
            let rail = pair.rail;
            let r = &mut self.rails[rail];
            let addr = r.endpoint.insert_peer(&remote.address).map_err(|e| {
                format!(
                    "cannot add the endpoint of process {peer} on {} to {}'s address vector: {e}",
                    remote.domain, r.domain
                )
            })?;
            tracing::debug!(
                target: "ofi",
                peer,
                local = %r.domain,
                remote = %remote.domain,
                fabric = %remote.fabric,
                routed,
                "paired"
            );
            pairs.push(Pair::new(
                rail,
                addr,
                remote.domain.clone(),
                remote.probe,
                pair.primary,
                pair.speed_mbps,
            ));
        }
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize_with(i + 1, || None);
        }
        self.peers[i] = Some(PeerPaths::new(pairs));
        if self.probe_nonces.len() <= i {
            self.probe_nonces.resize(i + 1, 0);
        }
        Ok(())
    }

    /// The module's counters, named as [`COUNTERS`] declares.
    pub fn counter_values(&self) -> Vec<(&'static str, u64)> {
        let c = &self.counters;
        vec![
            (COUNTERS[0].name, c.messages_sent),
            (COUNTERS[1].name, c.bytes_sent),
            (COUNTERS[2].name, c.messages_received),
            (COUNTERS[3].name, c.bytes_received),
            (COUNTERS[4].name, c.frames_dropped),
            (COUNTERS[5].name, c.duplicates_dropped),
            (COUNTERS[6].name, c.acks_sent),
            (COUNTERS[7].name, c.failovers),
            (COUNTERS[8].name, c.probes_sent),
            (COUNTERS[9].name, c.probe_answers),
            (COUNTERS[10].name, c.frames_striped),
            (COUNTERS[11].name, c.rma_reads),
            (COUNTERS[12].name, c.rma_bytes_read),
            (COUNTERS[13].name, c.registrations),
            (COUNTERS[14].name, c.registrations_reused),
        ]
    }
}

impl Btl for OfiBtl {
    fn name(&self) -> &'static str {
        "ofi"
    }

    fn limits(&self) -> Limits {
        Limits {
            eager_limit: self.eager_limit,
            max_send: self.max_send,
            latency_ns: self.latency_ns,
            bandwidth_mbps: self.bandwidth_mbps,
            exclusivity: EXCLUSIVITY,
            get: self.rma,
        }
    }

    fn reaches(&self, peer: u32) -> bool {
        self.peers.get(peer as usize).is_some_and(Option::is_some)
    }

    fn can_get(&mut self, peer: u32) -> bool {
        self.reads_from(peer)
    }

    fn can_get_unexposed(&mut self, _peer: u32) -> bool {
        // Reads need a registration: a window's plain address names nothing here.
        false
    }

    fn expose(&mut self, buf: &[u8]) -> Option<RemoteRegion> {
        self.expose_buffer(buf)
    }

    fn release(&mut self, buf: &[u8]) {
        self.release_buffer(buf)
    }

    fn gets_finish_later(&self) -> bool {
        true
    }

    fn start_get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: LocalRegion,
        ticket: u64,
    ) -> Result<(), SendError> {
        self.start_read(peer, remote, offset, local, ticket)
    }

    fn take_finished_gets(&mut self, report: &mut dyn FnMut(u64, Result<(), SendError>)) {
        self.finished_reads(report)
    }

    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let len = header.len() + payload.len();
        if len > self.max_send {
            return Err(SendError::TooLarge {
                len,
                max: self.max_send,
            });
        }
        let pending = match self.peers.get(peer as usize).and_then(Option::as_ref) {
            None => return Err(SendError::Unreachable { peer }),
            Some(st) => st.resend_pending() > 0,
        };
        if pending {
            self.flush_resends(peer);
        }
        let (me, key) = (self.me, self.key);
        let st = self.peers[peer as usize].as_mut().expect("checked above");
        if !st.may_send(len) {
            return Err(SendError::WouldBlock);
        }
        let (seq, ack) = st.next_header();
        let active = st.active_index();
        let (chosen, width) = st.choose(len, self.stripe_min);
        let frame = |striped| Header {
            kind: Kind::Data,
            am,
            sender: me,
            key,
            seq,
            ack,
            striped,
        };
        // Large frames striped over `width` pairs may fill only that share of each rail's
        // send slots: the frames in flight to a peer are spread over its links, not
        // multiplied by them (twice the data in flight was measured slower), and a rail
        // whose sends are stuck behind a dead link cannot hold more than its share.
        let has_room = |rail: &Rail| {
            let ep = &rail.endpoint;
            width == 1 || ep.tx_depth() - ep.free_tx_slots() < (ep.tx_depth() / width).max(1)
        };
        let mut sent = Err(FabricSendError::Full);
        let mut used = chosen;
        // A striped pair whose rail has no room (a slower link, or one whose sends are stuck
        // behind a dead link) leaves the frame to the active pair: striping must never hold
        // traffic back.
        for candidate in [chosen, active] {
            let pair = &st.pairs()[candidate];
            let rail = &mut self.rails[pair.rail];
            if has_room(rail) {
                used = candidate;
                sent = post_data(
                    rail,
                    pair.addr,
                    &frame(candidate != active),
                    header,
                    payload,
                );
            }
            if candidate == active || !matches!(sent, Err(FabricSendError::Full)) {
                break;
            }
        }
        match sent {
            Ok(()) => {
                st.sent(used, len, am, || [header, payload].concat());
                if used != active {
                    self.counters.frames_striped += 1;
                }
                self.counters.messages_sent += 1;
                self.counters.bytes_sent += len as u64;
                Ok(())
            }
            Err(FabricSendError::Full) => Err(SendError::WouldBlock),
            Err(FabricSendError::Oversized { len, max }) => Err(SendError::TooLarge {
                len: len - FRAME_LEN,
                max: max - FRAME_LEN,
            }),
            Err(FabricSendError::Fabric(e)) => Err(SendError::Failed(e.to_string())),
        }
    }

    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let OfiBtl {
            rails,
            peers,
            counters,
            ack_due,
            resends_pending,
            rail_failed,
            key,
            ..
        } = self;
        let key = *key;
        let mut delivered = 0;
        let mut failure = None;
        for (index, rail) in rails.iter_mut().enumerate() {
            let polled = rail.endpoint.poll(|bytes| {
                let is_peer = |s: u32| peers.get(s as usize).is_some_and(Option::is_some);
                let f = match wire::decode(bytes, key, is_peer) {
                    Ok(f) => f,
                    Err(e) => {
                        counters.frames_dropped += 1;
                        tracing::debug!(target: "ofi", error = %e, "frame dropped");
                        return;
                    }
                };
                let st = peers[f.sender as usize]
                    .as_mut()
                    .expect("decode checked the sender");
                let arrival = st.received(f.kind == Kind::Data, f.seq, f.ack, index, f.striped);
                if st.ack_due() {
                    ack_due.push(f.sender);
                }
                if st.resend_pending() > 0 {
                    *resends_pending = true;
                }
                match arrival {
                    Arrival::Deliver => {
                        counters.messages_received += 1;
                        counters.bytes_received += f.data.len() as u64;
                        deliver(Incoming {
                            peer: f.sender,
                            am: f.am,
                            data: f.data,
                        });
                    }
                    Arrival::Ack => {}
                    Arrival::Duplicate => counters.duplicates_dropped += 1,
                    Arrival::Gap { expected, found } => {
                        counters.frames_dropped += 1;
                        tracing::warn!(
                            target: "ofi",
                            peer = f.sender,
                            expected,
                            found,
                            "frame numbered implausibly far ahead dropped"
                        );
                    }
                }
            });
            match polled {
                Ok(n) => delivered += n,
                // A rail with a dead pair reports its stuck sends late; they are known.
                Err(e) if rail_failed[index] => {
                    tracing::debug!(target: "ofi", error = %e, "completion error on a failed rail");
                }
                Err(e) => failure = Some(e),
            }
        }
        while let Some(peer) = self.ack_due.pop() {
            if self.peers[peer as usize]
                .as_ref()
                .is_some_and(PeerPaths::ack_due)
            {
                self.send_ack(peer);
            }
        }
        self.polls = self.polls.wrapping_add(1);
        if self.polls.is_multiple_of(TICK_POLLS) {
            self.tick();
        }
        if self.resends_pending {
            let mut left = false;
            for peer in 0..self.peers.len() as u32 {
                if self.peers[peer as usize]
                    .as_ref()
                    .is_some_and(|st| st.resend_pending() > 0)
                {
                    self.flush_resends(peer);
                    left |= self.peers[peer as usize]
                        .as_ref()
                        .is_some_and(|st| st.resend_pending() > 0);
                }
            }
            self.resends_pending = left;
        }
        match failure {
            None => delivered,
            Some(e) if self.finalizing => {
                tracing::debug!(target: "ofi", error = %e, "completion error while finalizing");
                delivered
            }
            Some(e) => self.lost(&e),
        }
    }

    fn needs_kernel_time(&self) -> bool {
        // No provider here needs the rank to yield: fabric providers offload the data, and
        // kernel TCP (tcp;ofi_rxm, net) moves it inside the sender's system calls, with flow
        // control pacing the sender (unlike kernel UDP, where usnic needs the yields). Spinning
        // measured ~0.2 us less one-way latency at 8 B between namespace hosts than yielding
        // at every empty poll, and the same bandwidth at 16 KiB and 4 MiB.
        false
    }

    fn prepare_sleep(&mut self, fds: &mut Vec<RawFd>) -> SleepReadiness {
        let live = self.rails.iter().zip(&self.rail_failed);
        if live
            .filter(|(_, &failed)| !failed)
            .any(|(r, _)| r.endpoint.wait_fd().is_none())
        {
            return SleepReadiness::Unable;
        }
        // A peer reading our buffer needs our provider's progress; our reads need polling.
        if self.resends_pending || !self.ack_due.is_empty() || self.rma_busy() {
            return SleepReadiness::Busy;
        }
        // A sender keeps frames until they are acknowledged and takes long silence for a
        // dead pair: acknowledge everything now rather than on a timer this rank sleeps past.
        self.send_owed_acks();
        for (rail, &failed) in self.rails.iter_mut().zip(&self.rail_failed) {
            if failed {
                continue;
            }
            let Some(fd) = rail.endpoint.wait_fd() else {
                return SleepReadiness::Unable;
            };
            if !rail.endpoint.may_sleep() {
                return SleepReadiness::Busy;
            }
            fds.push(fd);
        }
        SleepReadiness::Ready
    }

    fn quiet(&self) -> bool {
        !self.resends_pending
            && self.reads.is_empty()
            && self
                .rails
                .iter()
                .zip(&self.rail_failed)
                .all(|(r, &failed)| failed || r.endpoint.free_tx_slots() == r.endpoint.tx_depth())
    }

    fn quiesce(&mut self) -> bool {
        if !self.finalizing {
            self.finalizing = true;
            // Peers still waiting for our acknowledgement get it now: this process may be
            // gone before its ack timer runs.
            self.send_owed_acks();
        }
        self.progress(&mut |_| {});
        if self.quiet() {
            return true;
        }
        // A pair this process left after the peer moved away (it followed the peer to another
        // pair without a failure of its own) keeps its stuck sends on the rail for ever;
        // what they carried went again on the live pair. Such a rail stops counting once the
        // failover time has passed in finalize.
        let started = *self.finalize_started.get_or_insert_with(Instant::now);
        if started.elapsed() < self.timing.fail_after {
            return false;
        }
        let stuck_on_dead_pairs_only = self.rails.iter().enumerate().all(|(i, r)| {
            self.rail_failed[i]
                || r.endpoint.free_tx_slots() == r.endpoint.tx_depth()
                || self
                    .peers
                    .iter()
                    .flatten()
                    .any(|st| st.pairs().iter().any(|p| p.rail == i && p.dead))
        });
        if stuck_on_dead_pairs_only {
            tracing::debug!(target: "ofi", "finalize: sends stuck on pairs taken as dead are given up");
            for r in &mut self.rails {
                if r.endpoint.free_tx_slots() != r.endpoint.tx_depth() {
                    r.endpoint.abandon();
                }
            }
        }
        !self.resends_pending && stuck_on_dead_pairs_only
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counter_values()
    }
}

/// Kernel TCP underneath: tcp;ofi_rxm, libfabric 1.17's native `net`, sockets.
fn is_kernel_tcp(provider: &str) -> bool {
    provider.starts_with("tcp") || provider.starts_with("net") || provider == "sockets"
}

/// Whether this process should read large messages by RMA over `ifaces` (`ofi_rma`): on, or
/// auto with a fabric provider; never over several rails (the striped pipeline adds their
/// bandwidth up). Over kernel TCP a read measured slower than the copy pipeline (see
/// `ofi_rma`), hence off there under auto.
fn reads_wanted(params: &Params, ifaces: &[&FabricInterface]) -> bool {
    let wanted = match params::RMA.get(params).as_str() {
        "on" => true,
        "auto" => !is_kernel_tcp(ifaces[0].provider()),
        _ => false,
    };
    wanted && ifaces.len() == 1
}

/// `iface` as a listing that asks for `FI_RMA` gives it (the same provider, domain, fabric
/// and address), when the provider grants RMA there.
fn with_rma(iface: &FabricInterface) -> Option<FabricInterface> {
    let listed = match rdm_interfaces(FABRIC_OWNER, Some(iface.provider()), true) {
        Ok(list) => list,
        Err(e) => {
            tracing::debug!(target: "ofi", error = %e, "no RMA listing: large messages take the copy pipeline");
            return None;
        }
    };
    let found = listed.into_iter().find(|i| {
        i.rma()
            && i.domain() == iface.domain()
            && i.fabric() == iface.fabric()
            && i.ipv4() == iface.ipv4()
    });
    if found.is_none() {
        tracing::debug!(target: "ofi", domain = iface.domain(), "the provider offers no RMA here: large messages take the copy pipeline");
    }
    found
}

/// Posts one data frame (`frame`, then the messaging layer's `header` and `payload`) on
/// `rail` to `addr`.
fn post_data(
    rail: &mut Rail,
    addr: PeerAddr,
    frame: &Header,
    header: &[u8],
    payload: &[u8],
) -> Result<(), FabricSendError> {
    let len = header.len() + payload.len();
    rail.endpoint.send_with(addr, |slot| {
        wire::write_header(slot, frame);
        let body = &mut slot[FRAME_LEN..FRAME_LEN + len];
        body[..header.len()].copy_from_slice(header);
        body[header.len()..].copy_from_slice(payload);
        FRAME_LEN + len
    })
}

/// The link speed sysfs reports for the domain's interface, if it reports one.
fn sysfs_speed_mbps(iface: &FabricInterface) -> Option<u32> {
    iface
        .netdev()
        .and_then(|dev| std::fs::read_to_string(format!("/sys/class/net/{dev}/speed")).ok())
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&s| s > 0)
        .map(|s| s.min(u32::MAX as i64) as u32)
}
