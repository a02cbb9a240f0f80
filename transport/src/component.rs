//! The component side of the transport contract: how a transport is found, opened, handed its
//! peers' cards and asked which peers it reaches.
//!
//! A [`Component`] is the static description of a transport (a `&'static` value in the
//! registry the facade crate keeps); [`Component::open`] makes a [`Module`], the instance of
//! one process, which is a [`Btl`] that also publishes a card and accepts its peers' cards.
//! The transport set ([`crate::set`]) drives the sequence — open, exchange cards, add peers,
//! choose one module per peer — identically for a job's start-up and for a connection between
//! jobs. This module owns only the contract; it must never know a concrete transport.

use std::fmt;

use crate::btl::Btl;
use crate::node_coll::NodeCollectives;
use crate::params::{ParamSpec, Params};

/// Which peers a transport can ever reach; the set uses it to decide whether a component is
/// worth opening at all.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// Only this process (the `self` loopback).
    Process,
    /// Processes on this node (shared memory).
    Node,
    /// Processes on any node (a network).
    Network,
}

/// What a component is told when it is opened.
#[derive(Debug, Clone, Copy)]
pub struct OpenContext<'a> {
    /// This process's index among `nodes`; peers are named by these indices everywhere in the
    /// contract (sends, cards, deliveries).
    pub me: u32,
    /// The node id of every process this set connects, indexed by peer.
    pub nodes: &'a [String],
    /// Names this set the same way on every process of it (the job id, or `dpm-<conn>` for a
    /// connection between jobs): transports that pair processes by identity use it.
    pub set_id: &'a str,
    /// A file-name prefix unique to this set on this process's side (`kestrel.<job>.`), for
    /// files the launcher's clean-up must find.
    pub file_prefix: &'a str,
}

impl OpenContext<'_> {
    /// This process's node id.
    pub fn my_node(&self) -> &str {
        &self.nodes[self.me as usize]
    }

    /// The peers on this process's node, this process included, in index order.
    pub fn node_peers(&self) -> Vec<u32> {
        let mine = self.my_node();
        (0..self.nodes.len() as u32)
            .filter(|&p| self.nodes[p as usize] == mine)
            .collect()
    }
}

/// `text` with every character but ASCII letters, digits, `-` and `_` replaced by `_`: a job
/// id made safe for the file names transports create under [`OpenContext::file_prefix`].
pub fn file_safe(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Why a component did not open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OpenError {
    /// Not usable here (no device, no interface): a normal outcome; the reason is quoted when
    /// a peer then turns out to be unreachable.
    Declined(String),
    /// The transport should work here and failed: the job stops with this reason.
    Failed(String),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Declined(why) => write!(f, "declined: {why}"),
            OpenError::Failed(why) => write!(f, "{why}"),
        }
    }
}

/// What one peer's module gets for it in [`Module::add_peers`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PeerCard<'a> {
    /// Not to be added: this process itself, a peer that a module of higher exclusivity
    /// already reaches, or one this set does not connect (own-job processes in a connection).
    Skip,
    /// The peer published no card for this transport (it excluded it, or it declined there).
    Missing,
    /// The peer's card.
    Card(&'a [u8]),
}

impl<'a> PeerCard<'a> {
    /// The card bytes, if any.
    pub fn bytes(self) -> Option<&'a [u8]> {
        match self {
            PeerCard::Card(b) => Some(b),
            _ => None,
        }
    }
}

/// One process's instance of a transport.
pub trait Module: Btl {
    /// The bytes peers need to reach this process (published once, before
    /// [`Module::add_peers`]). Decoded by the same transport on the peers, so the format is
    /// the transport's own; it should start with a version byte.
    fn card(&self) -> Vec<u8>;

    /// Takes every peer's card (`cards[p]`, see [`PeerCard`]) and the set's key (the same on
    /// every process of the set; transports that authenticate datagrams use it). Returns, per
    /// peer, `Ok` when this module reaches it or the reason it cannot (quoted in user errors,
    /// so it says what to check); entries for [`PeerCard::Skip`] peers are ignored.
    fn add_peers(&mut self, key: u64, cards: &[PeerCard<'_>]) -> Vec<Result<(), String>>;
}

/// A transport as the registry lists it.
pub trait Component: Sync {
    /// The name in the `btl` list and in logs (`self`, `shm`, `usnic`).
    fn name(&self) -> &'static str;
    /// Breaks ties between modules of equal exclusivity that reach the same peer; higher wins.
    fn priority(&self) -> u32;
    /// Which peers it can ever reach.
    fn reach(&self) -> Reach;
    /// The parameters it registers (listed by `kestrel-info`).
    fn params(&self) -> Vec<&'static ParamSpec>;
    /// Opens this process's instance.
    fn open(&self, params: &Params, cx: &OpenContext<'_>) -> Result<Box<dyn Module>, OpenError>;
    /// Undoes process-wide changes the transport's system libraries make when they load (for
    /// libfabric: crash-signal handlers). Called once per process, before anything else of
    /// Kestrel runs, whether or not the component is later opened.
    fn prepare_process(&self) {}
    /// Tells the component's system libraries, before any component opens, what this process
    /// will ask of them (for libfabric: the providers to initialise and their defaults).
    /// Called by [`crate::set::open`] for every component the `btl` parameter allows, needed
    /// now or not (a later connection between jobs may open it). Default: nothing.
    fn before_open(&self, _params: &Params) {}
    /// The shared-memory collective engine this transport offers node-local communicators.
    fn node_collectives(&self) -> Option<&'static dyn NodeCollectives> {
        None
    }
    /// The counters its modules report through [`crate::btl::Btl::counters`] (each name
    /// starting with the component's name). Default: none.
    fn counters(&self) -> &'static [crate::btl::CounterSpec] {
        &[]
    }
}

impl fmt::Debug for dyn Component {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Component({})", self.name())
    }
}

/// The `self` loopback as a component: always opened, reaches only this process.
#[derive(Debug)]
pub struct SelfComponent;

impl Component for SelfComponent {
    fn name(&self) -> &'static str {
        "self"
    }
    fn priority(&self) -> u32 {
        0
    }
    fn reach(&self) -> Reach {
        Reach::Process
    }
    fn params(&self) -> Vec<&'static ParamSpec> {
        Vec::new()
    }
    fn open(&self, _: &Params, cx: &OpenContext<'_>) -> Result<Box<dyn Module>, OpenError> {
        Ok(Box::new(crate::btl::SelfBtl::new(cx.me)))
    }
}

impl Module for crate::btl::SelfBtl {
    fn card(&self) -> Vec<u8> {
        Vec::new()
    }
    fn add_peers(&mut self, _key: u64, cards: &[PeerCard<'_>]) -> Vec<Result<(), String>> {
        (0..cards.len() as u32)
            .map(|p| {
                if self.reaches(p) {
                    Ok(())
                } else {
                    Err("reaches only this process".to_string())
                }
            })
            .collect()
    }
}
