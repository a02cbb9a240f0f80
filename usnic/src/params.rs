//! Parameters of the usnic transport (component `usnic`).
//!
//! This module owns the declarations only: names, types, defaults and descriptions. Parsing of
//! the list-valued parameters (interface filters, link-speed overrides) belongs to
//! [`crate::discovery`], which reports malformed entries by name; this module must never read
//! the environment itself (resolution goes through `kestrel_transport::params::Params`).

use kestrel_transport::params::{Param, ParamKind, ParamSpec};

/// `KESTREL_USNIC_PROVIDER`: which libfabric provider carries the datagrams.
pub static PROVIDER: Param<String> = Param::new(ParamSpec {
    name: "usnic_provider",
    component: "usnic",
    kind: ParamKind::Choice(&["auto", "usnic", "udp"]),
    default: "auto",
    description: "libfabric datagram provider: auto (usnic on interfaces a Cisco VIC serves, udp elsewhere), usnic (require it), udp (kernel UDP everywhere).",
});

/// `KESTREL_USNIC_IF_INCLUDE`: the only interfaces the transport may use.
pub static IF_INCLUDE: Param<String> = Param::new(ParamSpec {
    name: "usnic_if_include",
    component: "usnic",
    kind: ParamKind::Str,
    default: "",
    description: "Comma list of interface names or IPv4 CIDR blocks (eth1,198.18.1.0/24) the transport may use; empty = every up, non-loopback IPv4 interface. Exclusive with usnic_if_exclude.",
});

/// `KESTREL_USNIC_IF_EXCLUDE`: interfaces the transport must not use.
pub static IF_EXCLUDE: Param<String> = Param::new(ParamSpec {
    name: "usnic_if_exclude",
    component: "usnic",
    kind: ParamKind::Str,
    default: "",
    description: "Comma list of interface names or IPv4 CIDR blocks (eth0,10.0.0.0/8) the transport must not use. Exclusive with usnic_if_include.",
});

/// `KESTREL_USNIC_LINK_SPEED`: operator-supplied link speeds, for NICs whose driver reports
/// none (virtio) or a fixed fake one (veth's 10000).
pub static LINK_SPEED: Param<String> = Param::new(ParamSpec {
    name: "usnic_link_speed",
    component: "usnic",
    kind: ParamKind::Str,
    default: "",
    description: "Link speed overrides in Mb/s as a comma list of interface:speed (eth1:25000,eth2:10000); they replace what /sys/class/net/IF/speed reports.",
});

/// `KESTREL_USNIC_EAGER_LIMIT`: largest message sent eagerly over the network.
pub static EAGER_LIMIT: Param<u64> = Param::new(ParamSpec {
    name: "usnic_eager_limit",
    component: "usnic",
    kind: ParamKind::Size { min: 1024, max: 4 << 20 },
    default: "64K",
    description: "Largest message (with its header) sent eagerly between nodes; larger ones use the rendezvous pipeline.",
});

/// `KESTREL_USNIC_MAX_SEND`: largest single send (pipeline fragment) over the network.
pub static MAX_SEND: Param<u64> = Param::new(ParamSpec {
    name: "usnic_max_send",
    component: "usnic",
    kind: ParamKind::Size { min: 4096, max: 4 << 20 },
    default: "64K",
    description: "Bytes per rendezvous pipeline fragment between nodes (each is cut into datagrams and striped across rails).",
});

/// `KESTREL_USNIC_STRIPE_MIN`: messages at least this large are striped across rails.
pub static STRIPE_MIN: Param<u64> = Param::new(ParamSpec {
    name: "usnic_stripe_min",
    component: "usnic",
    kind: ParamKind::Size { min: 0, max: 64 << 20 },
    default: "16K",
    description: "Messages of at least this many bytes go to the rail with the fewest bytes sent per link speed; smaller ones take the best rail.",
});

/// `KESTREL_USNIC_PROBE_TIMEOUT_MS`: how long the first-contact connectivity check may take.
pub static PROBE_TIMEOUT_MS: Param<i64> = Param::new(ParamSpec {
    name: "usnic_probe_timeout_ms",
    component: "usnic",
    kind: ParamKind::Int { min: 10, max: 3_600_000 },
    default: "10000",
    description: "Milliseconds for a path's small and MTU-sized probes to be answered before the path is declared dead (with a diagnosis).",
});

/// `KESTREL_USNIC_PEER_TIMEOUT_MS`: silence after which the last path to a peer is dead. The
/// reliable core owns path failure, so it declares this one beside `usnic_fail_after_ms`.
pub use crate::reliable::config::PEER_TIMEOUT_MS;

/// `KESTREL_USNIC_QUEUE_DEPTH`: send and receive buffers per endpoint.
pub static QUEUE_DEPTH: Param<i64> = Param::new(ParamSpec {
    name: "usnic_queue_depth",
    component: "usnic",
    kind: ParamKind::Int { min: 8, max: 65536 },
    default: "512",
    description: "Datagram buffers posted for sending and for receiving on each rail's endpoint.",
});

/// `KESTREL_USNIC_STATS`: print per-peer, per-rail counters at finalize.
pub static STATS: Param<bool> = Param::new(ParamSpec {
    name: "usnic_stats",
    component: "usnic",
    kind: ParamKind::Bool,
    default: "false",
    description: "Print per-peer and per-rail counters (sent, resent, ACKs, duplicates, out-of-window, bad datagrams) at finalize.",
});

/// Every parameter this crate registers.
pub fn specs() -> Vec<&'static ParamSpec> {
    let mut specs = vec![
        PROVIDER.spec(),
        IF_INCLUDE.spec(),
        IF_EXCLUDE.spec(),
        LINK_SPEED.spec(),
        EAGER_LIMIT.spec(),
        MAX_SEND.spec(),
        STRIPE_MIN.spec(),
        PROBE_TIMEOUT_MS.spec(),
        QUEUE_DEPTH.spec(),
        STATS.spec(),
    ];
    specs.extend(crate::reliable::config::specs());
    specs
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        kestrel_transport::params::check_specs(&super::specs()).unwrap();
    }

    #[test]
    fn every_spec_belongs_to_the_usnic_component() {
        for spec in super::specs() {
            assert_eq!(spec.component, "usnic", "{}", spec.name);
            assert!(spec.name.starts_with("usnic_"), "{}", spec.name);
        }
    }
}
