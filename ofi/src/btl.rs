//! The ofi transport: one reliable-datagram endpoint per usable domain (a rail), messages
//! framed with the sender and the set's key.
//!
//! Each peer is reached over one pair of rails: the first of this process's rails whose fabric
//! (the subnet, for tcp) one of the peer's endpoints is on, else (a routed network) this
//! process's first rail to the peer's first endpoint. Weighing pairs by speed and route as
//! usnic does, striping over several and moving off a failed one are still to come.
//!
//! A send copies the frame header, the messaging layer's header and its payload into one of
//! the endpoint's send slots and posts it (`fi_send`); the provider delivers it whole and
//! reliably into one of the receive buffers the peer keeps posted, where `progress` checks the
//! frame ([`crate::wire`]) and hands the bytes up. Large messages are the messaging layer's
//! rendezvous pipeline of `ofi_max_send`-byte fragments.
//!
//! This module owns the endpoint, the peers' addresses and the counters. It must never block,
//! never hand up a frame that fails its checks, and never re-enter the messaging layer.

use std::fmt;

use kestrel_fabric::{
    rdm_interfaces, FabricInterface, MsgEndpoint, Owner, PeerAddr, SendError as FabricSendError,
};
use kestrel_transport::btl::{Btl, CounterSpec, Incoming, Limits, SendError};
use kestrel_transport::params::Params;

use crate::card::{CardEndpoint, OfiCard};
use crate::params;
use crate::select::{Offer, Policy};
use crate::wire::{self, FRAME_LEN};

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
        description: "Received messages dropped because their frame failed a check (short, another version, another set's key, an unknown sender).",
    },
];

#[derive(Debug, Default, Clone, Copy)]
struct Counters {
    messages_sent: u64,
    bytes_sent: u64,
    messages_received: u64,
    bytes_received: u64,
    frames_dropped: u64,
}

/// One endpoint, on one domain.
struct Rail {
    endpoint: MsgEndpoint,
    fabric: String,
    domain: String,
}

/// How a peer is reached: over which rail, at which address in that rail's address vector.
#[derive(Debug, Clone, Copy)]
struct Route {
    rail: usize,
    addr: PeerAddr,
}

/// This process's ofi module.
pub struct OfiBtl {
    rails: Vec<Rail>,
    me: u32,
    key: u64,
    peers: Vec<Option<Route>>,
    card: OfiCard,
    eager_limit: usize,
    /// Header and payload bytes one send carries (the slot minus the frame).
    max_send: usize,
    latency_ns: u32,
    bandwidth_mbps: u32,
    counters: Counters,
    finalizing: bool,
}

impl fmt::Debug for OfiBtl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OfiBtl")
            .field("me", &self.me)
            .field("card", &self.card)
            .field("eager_limit", &self.eager_limit)
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
        let policy = Policy::from_params(params)?;
        let list = match rdm_interfaces(FABRIC_OWNER, policy.provider.name()) {
            Ok(list) => list,
            Err(e) if e.is_no_data() => return Ok(Opened::Declined(e.to_string())),
            Err(e) => return Err(e.to_string()),
        };
        let offers: Vec<Offer> = list
            .iter()
            .map(|i| Offer {
                provider: i.provider().to_string(),
                domain: i.domain().to_string(),
                ipv4: i.ipv4(),
            })
            .collect();
        let chosen = match policy.choose(&offers, node_only) {
            Ok(o) => o,
            Err(why) => return Ok(Opened::Declined(why)),
        };
        let ifaces: Vec<&FabricInterface> = chosen
            .iter()
            .map(|c| {
                list.iter()
                    .zip(&offers)
                    .find(|(_, o)| o == c)
                    .map(|(i, _)| i)
                    .expect("the chosen offers are the list's")
            })
            .collect();
        Self::open_on(&ifaces, params, me).map(|b| Opened::Ready(Box::new(b)))
    }

    fn open_on(ifaces: &[&FabricInterface], params: &Params, me: u32) -> Result<OfiBtl, String> {
        let eager = params::EAGER_LIMIT.get(params) as usize;
        let fragment = params::MAX_SEND.get(params) as usize;
        let depth = params::QUEUE_DEPTH.get(params) as usize;
        let slot = eager.max(fragment) + FRAME_LEN;
        let mut rails = Vec::with_capacity(ifaces.len());
        let mut bandwidth_mbps = 0u32;
        for iface in ifaces {
            let endpoint =
                MsgEndpoint::open_sized(iface, depth, slot).map_err(|e| e.to_string())?;
            tracing::debug!(
                target: "ofi",
                provider = iface.provider(),
                domain = iface.domain(),
                fabric = iface.fabric(),
                tx_depth = endpoint.tx_depth(),
                rx_depth = endpoint.rx_depth(),
                "endpoint open"
            );
            bandwidth_mbps = bandwidth_mbps.saturating_add(link_speed_mbps(iface));
            rails.push(Rail {
                endpoint,
                fabric: iface.fabric().to_string(),
                domain: iface.domain().to_string(),
            });
        }
        // The provider may cap messages below what was asked.
        let max_send = rails
            .iter()
            .map(|r| r.endpoint.max_datagram())
            .min()
            .expect("at least one rail")
            - FRAME_LEN;
        let provider = ifaces[0].provider().to_string();
        let card = OfiCard {
            provider: provider.clone(),
            endpoints: rails
                .iter()
                .map(|r| CardEndpoint {
                    fabric: r.fabric.clone(),
                    domain: r.domain.clone(),
                    address: r.endpoint.address(),
                })
                .collect(),
        };
        let tcp = provider.starts_with("tcp") || provider == "sockets";
        Ok(OfiBtl {
            rails,
            me,
            key: 0,
            peers: Vec::new(),
            card,
            eager_limit: eager.min(max_send),
            max_send,
            // On usnic's scale (20 µs for kernel UDP): kernel TCP through the rxm layer
            // measured about 2 µs more per one-way; fabric providers a few µs in all. The
            // transport set takes the size where two transports cross from these.
            latency_ns: if tcp { 22_000 } else { 3_000 },
            bandwidth_mbps,
            counters: Counters::default(),
            finalizing: false,
        })
    }

    /// The card peers need.
    pub fn card(&self) -> &OfiCard {
        &self.card
    }

    /// Sets the set's key (frames carry it; others are dropped).
    pub fn set_key(&mut self, key: u64) {
        self.key = key;
    }

    /// Adds `peer` from its card: pairs one of this process's rails with one of its
    /// endpoints. Returns why it cannot be reached when it cannot.
    pub fn add_peer(&mut self, peer: u32, card: &OfiCard) -> Result<(), String> {
        if card.provider != self.card.provider {
            return Err(format!(
                "no provider in common: mine {}, theirs {} (set KESTREL_OFI_PROVIDER the same \
                 on every node)",
                self.card.provider, card.provider
            ));
        }
        let same_fabric = self.rails.iter().enumerate().find_map(|(i, r)| {
            card.endpoints
                .iter()
                .find(|e| e.fabric == r.fabric)
                .map(|e| (i, e))
        });
        let (rail, remote) = same_fabric.unwrap_or((0, &card.endpoints[0]));
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
            routed = same_fabric.is_none(),
            "paired"
        );
        let i = peer as usize;
        if self.peers.len() <= i {
            self.peers.resize(i + 1, None);
        }
        self.peers[i] = Some(Route { rail, addr });
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
        ]
    }

    /// A completion failed outside finalize: a message was lost, and MPI has no way to go on.
    fn lost(&self, error: &kestrel_fabric::FabricError) -> ! {
        let msg = format!(
            "ofi: process {} lost a message over {}: {error}\nThe job cannot continue. \
             Check that every peer is alive and reachable over this network (the domains are \
             chosen with KESTREL_OFI_IF_INCLUDE / KESTREL_OFI_IF_EXCLUDE).",
            self.me, self.card.provider
        );
        tracing::error!(target: "ofi", "{msg}");
        eprintln!("{msg}");
        std::process::exit(1);
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
            get: false,
        }
    }

    fn reaches(&self, peer: u32) -> bool {
        self.peers.get(peer as usize).is_some_and(Option::is_some)
    }

    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let len = header.len() + payload.len();
        if len > self.max_send {
            return Err(SendError::TooLarge {
                len,
                max: self.max_send,
            });
        }
        let route = self
            .peers
            .get(peer as usize)
            .copied()
            .flatten()
            .ok_or(SendError::Unreachable { peer })?;
        let (me, key) = (self.me, self.key);
        let sent = self.rails[route.rail]
            .endpoint
            .send_with(route.addr, |slot| {
                wire::write_header(slot, am, me, key);
                let body = &mut slot[FRAME_LEN..FRAME_LEN + len];
                body[..header.len()].copy_from_slice(header);
                body[header.len()..].copy_from_slice(payload);
                FRAME_LEN + len
            });
        match sent {
            Ok(()) => {
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
        let key = self.key;
        let peers = &self.peers;
        let counters = &mut self.counters;
        let mut delivered = 0;
        let mut failure = None;
        for rail in &mut self.rails {
            let polled = rail.endpoint.poll(|bytes| {
                let is_peer = |s: u32| peers.get(s as usize).is_some_and(Option::is_some);
                match wire::decode(bytes, key, is_peer) {
                    Ok(f) => {
                        counters.messages_received += 1;
                        counters.bytes_received += f.data.len() as u64;
                        deliver(Incoming {
                            peer: f.sender,
                            am: f.am,
                            data: f.data,
                        });
                    }
                    Err(e) => {
                        counters.frames_dropped += 1;
                        tracing::debug!(target: "ofi", error = %e, "frame dropped");
                    }
                }
            });
            match polled {
                Ok(n) => delivered += n,
                Err(e) => failure = Some(e),
            }
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
        // The tcp provider moves data in the kernel (and in its own progress inside the CQ
        // read); fabric providers offload it.
        self.latency_ns >= 10_000
    }

    fn quiet(&self) -> bool {
        self.rails
            .iter()
            .all(|r| r.endpoint.free_tx_slots() == r.endpoint.tx_depth())
    }

    fn quiesce(&mut self) -> bool {
        self.finalizing = true;
        self.progress(&mut |_| {});
        self.quiet()
    }

    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counter_values()
    }
}

/// The link speed sysfs reports for the domain's interface, 10 Gb/s when it reports none.
fn link_speed_mbps(iface: &FabricInterface) -> u32 {
    iface
        .netdev()
        .and_then(|dev| std::fs::read_to_string(format!("/sys/class/net/{dev}/speed")).ok())
        .and_then(|s| s.trim().parse::<i64>().ok())
        .filter(|&s| s > 0)
        .map_or(10_000, |s| s.min(u32::MAX as i64) as u32)
}
