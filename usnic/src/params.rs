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

/// Every parameter this crate registers.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![
        PROVIDER.spec(),
        IF_INCLUDE.spec(),
        IF_EXCLUDE.spec(),
        LINK_SPEED.spec(),
    ]
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
