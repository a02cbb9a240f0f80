//! Parameters of the ofi transport (component `ofi`).
//!
//! This module owns the declarations only: names, types, defaults and descriptions. The
//! provider word and the interface filters are interpreted by [`crate::select`]; this module
//! must never read the environment itself (resolution goes through
//! `kestrel_transport::params::Params`).

use kestrel_transport::params::{Param, ParamKind, ParamSpec};

/// `KESTREL_OFI_PROVIDER`: which libfabric RDM provider carries the messages.
pub static PROVIDER: Param<String> = Param::new(ParamSpec {
    name: "ofi_provider",
    component: "ofi",
    kind: ParamKind::Str,
    default: "auto",
    description: "libfabric RDM provider: auto (the best one offered: cxi, efa, psm3, verbs;ofi_rxm, then the kernel TCP ones, net and tcp;ofi_rxm; never sockets, udp;ofi_rxd or shm unless named), or a provider name as fi_info prints it (tcp;ofi_rxm, verbs;ofi_rxm, efa, psm3, cxi, ...).",
});

/// `KESTREL_OFI_IF_INCLUDE`: the only domains (interfaces) the transport may use.
pub static IF_INCLUDE: Param<String> = Param::new(ParamSpec {
    name: "ofi_if_include",
    component: "ofi",
    kind: ParamKind::Str,
    default: "",
    description: "Comma list of interface (libfabric domain) names or IPv4 CIDR blocks (eth1,198.18.1.0/24) the transport may use; empty = every domain but loopback (loopback only when it is the only one). Exclusive with ofi_if_exclude.",
});

/// `KESTREL_OFI_IF_EXCLUDE`: domains the transport must not use.
pub static IF_EXCLUDE: Param<String> = Param::new(ParamSpec {
    name: "ofi_if_exclude",
    component: "ofi",
    kind: ParamKind::Str,
    default: "",
    description: "Comma list of interface (libfabric domain) names or IPv4 CIDR blocks (eth0,10.0.0.0/8) the transport must not use. Exclusive with ofi_if_include.",
});

/// `KESTREL_OFI_EAGER_LIMIT`: largest message sent eagerly.
pub static EAGER_LIMIT: Param<u64> = Param::new(ParamSpec {
    name: "ofi_eager_limit",
    component: "ofi",
    kind: ParamKind::Size { min: 1024, max: 4 << 20 },
    default: "64K",
    description: "Largest message (with its header) sent eagerly over ofi; larger ones use the rendezvous pipeline (at most ofi_max_send).",
});

/// `KESTREL_OFI_MAX_SEND`: largest single send (pipeline fragment).
pub static MAX_SEND: Param<u64> = Param::new(ParamSpec {
    name: "ofi_max_send",
    component: "ofi",
    kind: ParamKind::Size { min: 4096, max: 4 << 20 },
    default: "128K",
    description: "Bytes per rendezvous pipeline fragment over ofi; every send slot and receive buffer holds this much (or ofi_eager_limit, if larger).",
});

/// `KESTREL_OFI_STRIPE_MIN`: messages at least this large are striped over a peer's pairs.
pub static STRIPE_MIN: Param<u64> = Param::new(ParamSpec {
    name: "ofi_stripe_min",
    component: "ofi",
    kind: ParamKind::Size { min: 0, max: 64 << 20 },
    default: "16K",
    description: "Messages (and rendezvous fragments) of at least this many bytes go to the primary pair of endpoints with the fewest bytes sent per link speed, which stripes large messages over a peer's NIC pairs by bandwidth; smaller ones take the active pair.",
});

/// `KESTREL_OFI_RMA`: large messages read by the receiver from the sender's registered buffer.
pub static RMA: Param<String> = Param::new(ParamSpec {
    name: "ofi_rma",
    component: "ofi",
    kind: ParamKind::Choice(&["auto", "on", "off"]),
    default: "auto",
    description: "Whether a rendezvous message (larger than ofi_eager_limit) is read by the receiver straight from the sender's buffer (libfabric FI_RMA read of a registration, no copy through send slots and receive buffers), where the provider offers RMA, this process has one rail and the peer is reached over one pair of endpoints; otherwise the copy pipeline of ofi_max_send fragments, striped over a peer's NIC pairs. auto: on for fabric providers (the NIC reads), off for the kernel-TCP ones (tcp;ofi_rxm, net, sockets), whose reads measured 0.5-0.7x the pipeline's bandwidth at 1-4 MiB between namespace hosts; on, off: as said.",
});

/// `KESTREL_OFI_MR_CACHE`: registrations kept for reuse after their read.
pub static MR_CACHE: Param<i64> = Param::new(ParamSpec {
    name: "ofi_mr_cache",
    component: "ofi",
    kind: ParamKind::Int { min: 0, max: 65_536 },
    default: "64",
    description: "Send-buffer registrations kept after the receiver read them, so that a buffer sent again is not registered again (least recently used first out). Only providers that register by address without pinning pages keep them (a freed and reused buffer is then read as it is now); providers that pin (FI_MR_ALLOCATED) deregister at once and rely on libfabric's own cache. 0: no reuse.",
});

/// `KESTREL_OFI_QUEUE_DEPTH`: send slots and posted receive buffers per endpoint.
pub static QUEUE_DEPTH: Param<i64> = Param::new(ParamSpec {
    name: "ofi_queue_depth",
    component: "ofi",
    kind: ParamKind::Int { min: 2, max: 4096 },
    default: "64",
    description: "Send slots and posted receive buffers of each endpoint (each of ofi_max_send bytes: 16 MiB per endpoint at the defaults); clamped to what the provider allows. 64 keeps a 64-message osu_bw window of 16-32 KiB messages in flight (1.1-1.3x the bandwidth of 32 between namespace hosts).",
});

/// `KESTREL_OFI_RXM_SHARED_RX`: whether `ofi_rxm` shares one receive context among connections.
pub static RXM_SHARED_RX: Param<bool> = Param::new(ParamSpec {
    name: "ofi_rxm_shared_rx",
    component: "ofi",
    kind: ParamKind::Bool,
    default: "false",
    description: "Whether the ofi_rxm layer (tcp;ofi_rxm, verbs;ofi_rxm) receives every connection through one shared receive context (libfabric's FI_OFI_RXM_USE_SRX). Off: each connection receives on its own, about 0.4 us less one-way latency over tcp;ofi_rxm (bench/RESULTS.md); on: less receive memory per connected peer in large jobs. An FI_OFI_RXM_USE_SRX in the environment wins.",
});

/// `KESTREL_OFI_CQ_WAIT`: completion queues with a file-descriptor wait object, so idle ranks
/// can sleep. Off by default: the wait object costs every message its signal (8 B one-way
/// latency between namespace hosts, 3 interleaved rounds: tcp;ofi_rxm 4.83-5.71 us with it
/// against 4.25-4.38 without, net 4.14-4.30 against 3.94-4.05), and libfabric 1.17's `net`
/// provider's descriptor stays readable, so there it cannot let a rank sleep at all.
pub static CQ_WAIT: Param<bool> = Param::new(ParamSpec {
    name: "ofi_cq_wait",
    component: "ofi",
    kind: ParamKind::Bool,
    default: "false",
    description: "Whether ofi opens its completion queues with a file-descriptor wait object (FI_WAIT_FD), so that a rank idle for pml_idle_sleep_after_ms sleeps in poll(2) instead of spinning (when every transport it uses can wake it). Costs about 0.2-1 us of latency per message (provider-dependent); worth it when idle ranks share cores with work. A provider whose descriptor does not work is polled.",
});

/// `KESTREL_OFI_FAIL_AFTER_MS`: silence on a pair before traffic moves to another pair.
pub static FAIL_AFTER_MS: Param<i64> = Param::new(ParamSpec {
    name: "ofi_fail_after_ms",
    component: "ofi",
    kind: ParamKind::Int { min: 10, max: 3_600_000 },
    default: "3000",
    description: "Milliseconds without acknowledgement progress, with data outstanding, before a pair of endpoints to a peer is declared dead when another pair to that peer works (its unacknowledged messages are sent again there).",
});

/// `KESTREL_OFI_PEER_TIMEOUT_MS`: silence on the last pair before the job stops.
pub static PEER_TIMEOUT_MS: Param<i64> = Param::new(ParamSpec {
    name: "ofi_peer_timeout_ms",
    component: "ofi",
    kind: ParamKind::Int { min: 10, max: 3_600_000 },
    default: "10000",
    description: "Milliseconds without acknowledgement progress on the last working pair of endpoints to a peer, with data outstanding, before the job stops naming the peer and the pair. A peer acknowledges only while it makes MPI progress: raise this for codes that compute longer between MPI calls.",
});

/// Every parameter of the component, for `Component::params`.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![
        PROVIDER.spec(),
        IF_INCLUDE.spec(),
        IF_EXCLUDE.spec(),
        EAGER_LIMIT.spec(),
        MAX_SEND.spec(),
        STRIPE_MIN.spec(),
        RMA.spec(),
        MR_CACHE.spec(),
        QUEUE_DEPTH.spec(),
        RXM_SHARED_RX.spec(),
        CQ_WAIT.spec(),
        FAIL_AFTER_MS.spec(),
        PEER_TIMEOUT_MS.spec(),
    ]
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        kestrel_transport::params::check_specs(&super::specs()).unwrap();
    }
}
