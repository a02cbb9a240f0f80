//! Which provider and domain this process's ofi endpoint uses.
//!
//! `ofi_provider=auto` takes the first provider of [`AUTO_ORDER`] that offers a usable domain:
//! the fabrics' native providers before the TCP fallback. Providers that exist for testing or
//! would shadow another transport (`sockets`, `udp;ofi_rxd`, `shm`) are taken only when named.
//! Among the chosen provider's domains the interface filters apply (`ofi_if_include` /
//! `ofi_if_exclude`, names or IPv4 CIDR blocks, parsed as usnic parses its own); loopback is
//! used only when named, or when every peer is on this node and nothing else is offered. This module owns that policy, on plain
//! descriptions of what libfabric offered ([`Offer`]); it must never call libfabric.

use std::net::Ipv4Addr;

use kestrel_transport::params::Params;
use kestrel_usnic::discovery::{parse_filter, InterfaceFilter, Matcher};

use crate::params;

/// `auto`'s preference, best first. `net` is libfabric 1.17's native TCP RDM provider: its one
/// layer less than `tcp;ofi_rxm` measured 0.3-0.5 us less one-way latency at the same
/// bandwidth between namespace hosts (docs/architecture.md, "The ofi transport").
pub const AUTO_ORDER: &[&str] = &["cxi", "efa", "psm3", "verbs;ofi_rxm", "net", "tcp;ofi_rxm"];

/// One domain a provider offers RDM endpoints on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Offer {
    /// Provider name (`tcp;ofi_rxm`).
    pub provider: String,
    /// Domain name (the interface for tcp).
    pub domain: String,
    /// The domain's IPv4 address, when its addresses are IPv4 socket addresses.
    pub ipv4: Option<Ipv4Addr>,
}

impl Offer {
    fn is_loopback(&self) -> bool {
        self.domain == "lo" || self.ipv4.is_some_and(|ip| ip.is_loopback())
    }

    fn passes(&self, filter: &InterfaceFilter) -> bool {
        let hit = |m: &Vec<Matcher>| m.iter().any(|m| m.matches(&self.domain, self.ipv4));
        match filter {
            InterfaceFilter::All => true,
            InterfaceFilter::Include { entries, .. } => hit(entries),
            InterfaceFilter::Exclude { entries, .. } => !hit(entries),
        }
    }
}

/// The provider word of `ofi_provider`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProviderChoice {
    /// The best of [`AUTO_ORDER`] offered here.
    Auto,
    /// Exactly this provider.
    Named(String),
}

impl ProviderChoice {
    /// The provider name to ask `fi_getinfo` for, if any.
    pub fn name(&self) -> Option<&str> {
        match self {
            ProviderChoice::Auto => None,
            ProviderChoice::Named(n) => Some(n),
        }
    }
}

/// The operator's choices, parsed and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Provider choice.
    pub provider: ProviderChoice,
    /// Interface filter.
    pub filter: InterfaceFilter,
}

impl Policy {
    /// Reads the ofi parameters.
    pub fn from_params(p: &Params) -> Result<Policy, String> {
        Policy::parse(
            &params::PROVIDER.get(p),
            &params::IF_INCLUDE.get(p),
            &params::IF_EXCLUDE.get(p),
        )
    }

    /// Parses the three parameter values; errors name the parameter and the fix.
    pub fn parse(provider: &str, include: &str, exclude: &str) -> Result<Policy, String> {
        let word = provider.trim();
        let provider = match word {
            "" => {
                return Err(format!(
                    "ofi: {} is empty; set it to auto or a provider name (tcp;ofi_rxm, \
                     verbs;ofi_rxm, efa, psm3, cxi)",
                    params::PROVIDER.spec().env_var()
                ))
            }
            "auto" => ProviderChoice::Auto,
            w => ProviderChoice::Named(w.to_string()),
        };
        let filter = parse_filter(
            params::IF_INCLUDE.spec(),
            include,
            params::IF_EXCLUDE.spec(),
            exclude,
        )
        .map_err(|e| e.to_string())?;
        Ok(Policy { provider, filter })
    }

    /// Picks the domains to open, one endpoint each, or says why none fits (quoted when the
    /// component declines): every domain of the chosen provider that passes the filter, one
    /// entry per domain (its IPv4 one when it has several). Loopback is taken only when the
    /// filter names it, or when every peer is on this node (`node_only`) and nothing else is
    /// offered: a peer on another host would reach a process of its own host through it.
    pub fn choose<'a>(
        &self,
        offers: &'a [Offer],
        node_only: bool,
    ) -> Result<Vec<&'a Offer>, String> {
        let named_loopback = matches!(&self.filter, InterfaceFilter::Include { .. });
        let usable = |o: &&Offer| o.passes(&self.filter);
        let pick = |provider: &str| -> Option<Vec<&'a Offer>> {
            let theirs = |o: &&Offer| o.provider == provider;
            // A domain with an IPv4 address is judged by it alone: its other entries (IPv6,
            // which a CIDR filter cannot name) neither add it back nor stand in for it.
            let has_ipv4 = |domain: &str| {
                offers
                    .iter()
                    .any(|o| o.provider == provider && o.domain == domain && o.ipv4.is_some())
            };
            let mine: Vec<&Offer> = offers
                .iter()
                .filter(theirs)
                .filter(|o| o.ipv4.is_some() || !has_ipv4(&o.domain))
                .filter(usable)
                .collect();
            let mut chosen: Vec<&Offer> = Vec::new();
            // IPv4 entries first: an IPv6 link-local address is not reachable from another
            // host without a scope, so a domain's IPv6 entry is taken only when it has no other.
            let mut ordered = mine.clone();
            ordered.sort_by_key(|o| o.ipv4.is_none());
            for o in ordered {
                if (!o.is_loopback() || named_loopback)
                    && !chosen.iter().any(|c| c.domain == o.domain)
                {
                    chosen.push(o);
                }
            }
            if chosen.is_empty() && node_only {
                chosen.extend(mine.first().copied());
            }
            (!chosen.is_empty()).then_some(chosen)
        };
        let found = match &self.provider {
            ProviderChoice::Named(name) => pick(name),
            ProviderChoice::Auto => AUTO_ORDER.iter().find_map(|p| pick(p)),
        };
        found.ok_or_else(|| {
            let offered: Vec<String> = offers
                .iter()
                .map(|o| format!("{} on {}", o.provider, o.domain))
                .collect();
            let wanted = match &self.provider {
                ProviderChoice::Named(n) => format!("provider {n}"),
                ProviderChoice::Auto => format!("any of {}", AUTO_ORDER.join(", ")),
            };
            let filtered = match &self.filter {
                InterfaceFilter::All => String::new(),
                InterfaceFilter::Include { raw, .. } => format!(" within ofi_if_include={raw}"),
                InterfaceFilter::Exclude { raw, .. } => format!(" outside ofi_if_exclude={raw}"),
            };
            format!(
                "no RDM domain of {wanted}{filtered}; libfabric offers: {}",
                if offered.is_empty() {
                    "nothing".to_string()
                } else {
                    offered.join(", ")
                }
            )
        })
    }
}

impl Policy {
    /// The verdict on every offer, in order: `Ok` for the domains [`Policy::choose`] takes,
    /// else why not (what `kestrel-ifmatch list --transport ofi` prints).
    pub fn verdicts(&self, offers: &[Offer], node_only: bool) -> Vec<Result<(), String>> {
        let chosen = self.choose(offers, node_only);
        let provider_in_use = chosen
            .as_ref()
            .ok()
            .and_then(|c| c.first())
            .map(|o| o.provider.clone());
        offers
            .iter()
            .map(|o| {
                if let Ok(c) = &chosen {
                    if c.iter().any(|x| std::ptr::eq(*x, o)) {
                        return Ok(());
                    }
                }
                let has_ipv4 = offers
                    .iter()
                    .any(|x| x.provider == o.provider && x.domain == o.domain && x.ipv4.is_some());
                Err(match (&self.provider, &provider_in_use) {
                    (_, Some(p)) if *p != o.provider => {
                        format!("another provider (this process uses {p})")
                    }
                    (ProviderChoice::Named(n), None) if *n != o.provider => {
                        format!("another provider (ofi_provider names {n})")
                    }
                    (ProviderChoice::Auto, None) if !AUTO_ORDER.contains(&o.provider.as_str()) => {
                        "never chosen automatically (name it in ofi_provider to use it)".into()
                    }
                    _ if !o.passes(&self.filter) => match &self.filter {
                        InterfaceFilter::Include { raw, .. } => {
                            format!("outside ofi_if_include={raw}")
                        }
                        InterfaceFilter::Exclude { raw, .. } => {
                            format!("inside ofi_if_exclude={raw}")
                        }
                        InterfaceFilter::All => "filtered".into(),
                    },
                    _ if o.is_loopback() => "loopback (used only when ofi_if_include names it, \
                                             or when every peer is on this node)"
                        .into(),
                    _ if o.ipv4.is_none() && has_ipv4 => {
                        "an IPv6 entry of a domain judged by its IPv4 address".into()
                    }
                    _ => "another entry of a domain already used".into(),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn offer(provider: &str, domain: &str, ip: Option<[u8; 4]>) -> Offer {
        Offer {
            provider: provider.into(),
            domain: domain.into(),
            ipv4: ip.map(Ipv4Addr::from),
        }
    }

    #[test]
    fn every_offer_gets_a_verdict_with_its_reason() {
        let mut all = offers();
        all.push(offer("udp;ofi_rxd", "eth1", Some([198, 18, 1, 2])));
        let p = Policy::parse("auto", "", "198.18.0.0/24").unwrap();
        let v = p.verdicts(&all, false);
        assert_eq!(v.len(), all.len());
        let text = |i: usize| v[i].clone().err().unwrap_or_else(|| "used".into());
        for (i, o) in all.iter().enumerate() {
            match (o.provider.as_str(), o.domain.as_str(), o.ipv4) {
                ("tcp;ofi_rxm", "eth1", _) => assert_eq!(text(i), "used"),
                ("tcp;ofi_rxm", "lo", _) => assert!(text(i).contains("loopback"), "{}", text(i)),
                ("tcp;ofi_rxm", "eth0", Some(_)) => {
                    assert!(text(i).contains("inside ofi_if_exclude"), "{}", text(i))
                }
                ("udp;ofi_rxd", ..) => assert!(text(i).contains("another provider"), "{}", text(i)),
                _ => assert!(v[i].is_err()),
            }
        }
        // Nothing usable: the reasons still come per offer.
        let none = Policy::parse("auto", "10.0.0.0/8", "").unwrap();
        let v = none.verdicts(&all, false);
        assert!(v.iter().all(|r| r.is_err()));
        let rxd = all
            .iter()
            .position(|o| o.provider == "udp;ofi_rxd")
            .unwrap();
        assert!(v[rxd]
            .clone()
            .unwrap_err()
            .contains("never chosen automatically"));
    }

    fn offers() -> Vec<Offer> {
        vec![
            offer("tcp;ofi_rxm", "lo", Some([127, 0, 0, 1])),
            offer("tcp;ofi_rxm", "eth0", None),
            offer("tcp;ofi_rxm", "eth0", Some([198, 18, 0, 2])),
            offer("tcp;ofi_rxm", "eth1", Some([198, 18, 1, 2])),
            offer("sockets", "eth1", Some([198, 18, 1, 2])),
            offer("udp;ofi_rxd", "eth1", Some([198, 18, 1, 2])),
        ]
    }

    #[test]
    fn auto_takes_tcp_ipv4_and_skips_loopback_and_test_providers() {
        let p = Policy::parse("auto", "", "").unwrap();
        let o = offers();
        assert_eq!(p.choose(&o, false).unwrap(), vec![&o[2], &o[3]]);
        let p = Policy::parse("auto", "", "198.18.0.0/24").unwrap();
        assert_eq!(p.choose(&o, false).unwrap(), vec![&o[3]]);
        let p = Policy::parse("auto", "", "198.18.0.0/24,198.18.1.2").unwrap();
        assert!(p.choose(&o, false).is_err());
        let only_test = vec![o[4].clone(), o[5].clone()];
        let e = Policy::parse("auto", "", "")
            .unwrap()
            .choose(&only_test, false)
            .unwrap_err();
        assert!(e.contains("sockets on eth1"), "{e}");
    }

    #[test]
    fn auto_prefers_a_fabric_provider_over_tcp() {
        let mut o = offers();
        o.push(offer("verbs;ofi_rxm", "mlx5_0", Some([10, 0, 0, 2])));
        o.push(offer("efa", "rdmap0s6-rdm", None));
        let chosen = Policy::parse("auto", "", "")
            .unwrap()
            .choose(&o, false)
            .unwrap();
        assert_eq!(chosen.len(), 1);
        assert_eq!(chosen[0].provider, "efa");
    }

    #[test]
    fn a_named_provider_is_taken_even_when_auto_would_not() {
        let o = offers();
        let p = Policy::parse("sockets", "", "").unwrap();
        assert_eq!(p.choose(&o, false).unwrap(), vec![&o[4]]);
        let e = Policy::parse("psm3", "", "")
            .unwrap()
            .choose(&o, false)
            .unwrap_err();
        assert!(e.starts_with("no RDM domain of provider psm3"), "{e}");
    }

    #[test]
    fn loopback_only_when_alone_or_included() {
        let o = offers();
        let p = Policy::parse("tcp;ofi_rxm", "lo", "").unwrap();
        assert_eq!(p.choose(&o, false).unwrap(), vec![&o[0]]);
        let alone = vec![o[0].clone()];
        let p = Policy::parse("auto", "", "").unwrap();
        assert_eq!(p.choose(&alone, true).unwrap(), vec![&alone[0]]);
        assert!(
            p.choose(&alone, false).is_err(),
            "never loopback unprompted when a peer is on another host"
        );
    }

    #[test]
    fn bad_words_name_the_parameter() {
        let e = Policy::parse(" ", "", "").unwrap_err();
        assert!(e.contains("KESTREL_OFI_PROVIDER"), "{e}");
        let e = Policy::parse("auto", "eth1", "eth0").unwrap_err();
        assert!(
            e.contains("KESTREL_OFI_IF_INCLUDE") && e.contains("KESTREL_OFI_IF_EXCLUDE"),
            "{e}"
        );
        let e = Policy::parse("auto", "10.0.0.0/40", "").unwrap_err();
        assert!(e.contains("ofi_if_include"), "{e}");
        let e = Policy::parse("auto", "", "1.2.3/8").unwrap_err();
        assert!(e.contains("ofi_if_exclude"), "{e}");
    }
}
