//! The model behind `explain`: both processes' candidate edges and pairings for one pair of
//! cards, and the facts every rendering shares (agreement, warnings, the no-reachable-pair
//! message, interface names).
//!
//! This module owns those facts and must never compute an edge or a pairing itself: they come
//! from `kestrel_usnic::matching` exactly as the transport computes them. It never formats a
//! whole report (that is the renderers' concern) and never does I/O.

use kestrel_usnic::card::CardInterface;
use kestrel_usnic::matching::{self, Candidate, Pairing, ProcessCard};

/// Everything `explain` reports about one pair of cards.
#[derive(Debug, Clone)]
pub struct Explanation {
    /// The local process.
    pub local: ProcessCard,
    /// The remote process.
    pub remote: ProcessCard,
    /// The local card's file name.
    pub local_file: String,
    /// The remote card's file name.
    pub remote_file: String,
    /// Whether the local process supplies the left vertices of the canonical graph.
    pub local_is_left: bool,
    /// Every (local, remote) pair in the local routing view, local-major.
    pub local_view: Vec<Candidate>,
    /// Every (remote, local) pair in the remote routing view, remote-major, in remote terms.
    pub remote_view: Vec<Candidate>,
    /// The local process's pairing.
    pub pairing: Pairing,
    /// The remote process's pairing from its own routes, mirrored into local terms.
    pub remote_pairing: Pairing,
}

impl Explanation {
    /// Computes both views exactly as the transport does.
    pub fn new(
        local: ProcessCard,
        remote: ProcessCard,
        local_file: &str,
        remote_file: &str,
    ) -> Explanation {
        Explanation {
            local_is_left: matching::is_left(&local, &remote),
            local_view: matching::candidates(&local, &remote),
            remote_view: matching::candidates(&remote, &local),
            pairing: matching::pair(&local, &remote),
            remote_pairing: matching::pair(&remote, &local).mirrored(),
            local,
            remote,
            local_file: local_file.to_string(),
            remote_file: remote_file.to_string(),
        }
    }

    /// True when both processes choose the same pairs.
    pub fn sides_agree(&self) -> bool {
        self.pairing.index_pairs() == self.remote_pairing.index_pairs()
    }

    /// The remote view's candidate for (local_if, remote_if).
    pub(crate) fn remote_candidate(&self, local_if: usize, remote_if: usize) -> &Candidate {
        &self.remote_view[remote_if * self.local.card.interfaces.len() + local_if]
    }

    /// Why no connection is possible, when one or both sides see no edge at all.
    pub fn no_reachable_pair(&self) -> Option<String> {
        let local_edges = self.local_view.iter().any(|c| c.edge.is_ok());
        let remote_edges = self.remote_view.iter().any(|c| c.edge.is_ok());
        let (l, r) = (&self.local.card.node, &self.remote.card.node);
        let nothing = match self.local_view.len() {
            1 => "the only candidate pair shares no subnet and has no route".to_string(),
            n => format!("none of the {n} candidate pairs shares a subnet or has a route"),
        };
        let fix = "put the interfaces on a shared subnet or add routes (card field 'routes')";
        match (local_edges, remote_edges) {
            (true, true) => None,
            (false, false) if self.local_view.is_empty() => Some(format!(
                "no reachable interface pair between {l} and {r}: {} has no interfaces",
                if self.local.card.interfaces.is_empty() {
                    l
                } else {
                    r
                }
            )),
            (false, false) => Some(format!(
                "no reachable interface pair between {l} and {r}: {nothing}, from either \
                 side (reasons above); {fix}"
            )),
            (false, true) => Some(format!(
                "no reachable interface pair from {l}'s routes: {nothing} through {l}'s \
                 interfaces (reasons above), although {r} can reach {l}; {fix} on {l}"
            )),
            (true, false) => Some(format!(
                "no reachable interface pair from {r}'s routes: {r} can reach none of {l}'s \
                 interfaces, so nothing {l} sends could be acknowledged; {fix} on {r}"
            )),
        }
    }

    /// Warnings for people: today, the two sides choosing different pairs.
    pub fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        if !self.sides_agree() {
            let (lower, lower_rank) = if self.local_is_left {
                (&self.local.card.node, self.local.rank)
            } else {
                (&self.remote.card.node, self.remote.rank)
            };
            warnings.push(format!(
                "the two sides could decide differently: from its own routes {} (rank {}) \
                 chooses {}, but {} (rank {}) chooses {}; the first handshake keeps the \
                 pairing of the lower (job, rank) side, {lower} (rank {lower_rank}); give both \
                 hosts symmetric routes and metrics to make them agree",
                self.local.card.node,
                self.local.rank,
                self.describe_pairs(&self.pairing),
                self.remote.card.node,
                self.remote.rank,
                self.describe_pairs(&self.remote_pairing),
            ));
        }
        warnings
    }

    pub(crate) fn local_name(&self, i: usize) -> &str {
        &self.local.card.interfaces[i].name
    }

    pub(crate) fn remote_name(&self, i: usize) -> &str {
        &self.remote.card.interfaces[i].name
    }

    /// `local eth1 <-> remote eth2, ...` with names from both cards.
    pub(crate) fn describe_pairs(&self, pairing: &Pairing) -> String {
        if pairing.pairs.is_empty() {
            return "no pairs".to_string();
        }
        let list: Vec<String> = pairing
            .pairs
            .iter()
            .map(|p| {
                format!(
                    "{}:{}<->{}:{}",
                    self.local.card.node,
                    self.local_name(p.local_if),
                    self.remote.card.node,
                    self.remote_name(p.remote_if)
                )
            })
            .collect();
        list.join(", ")
    }

    pub(crate) fn chosen(&self, local_if: usize, remote_if: usize) -> bool {
        self.pairing
            .pairs
            .iter()
            .any(|p| (p.local_if, p.remote_if) == (local_if, remote_if))
    }

    pub(crate) fn partner_names(&self, partners: &[usize], of_local: bool) -> Vec<String> {
        partners
            .iter()
            .map(|&p| {
                if of_local {
                    self.remote_name(p).to_string()
                } else {
                    self.local_name(p).to_string()
                }
            })
            .collect()
    }
}

/// An interface's link speed for people ("25000 Mb/s" or "speed unknown").
pub(crate) fn speed_text(itf: &CardInterface) -> String {
    match itf.link_speed_mbps {
        Some(mbps) => format!("{mbps} Mb/s"),
        None => "speed unknown".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_usnic::card::HostCard;

    fn one_interface(node: &str, rank: u32, addr: &str, routes: &str) -> ProcessCard {
        let text = format!(
            r#"{{"version":1,"node":"{node}","interfaces":[{{"name":"eth1","ipv4":"{addr}",
            "prefix_len":24,"link_speed_mbps":10000,"mtu":1500}}]{routes}}}"#
        );
        ProcessCard {
            job: "j".to_string(),
            rank,
            card: HostCard::from_json_str(node, &text).unwrap(),
        }
    }

    #[test]
    fn one_sided_reachability_still_means_no_connection() {
        let routed = r#","routes":[{"dest":"198.18.1.0/24","interface":"eth1","metric":5}]"#;
        let plain = one_interface("h0", 0, "198.18.1.10", "");
        let with_route = one_interface("h1", 1, "198.18.2.20", routed);

        let e = Explanation::new(plain.clone(), with_route.clone(), "a", "b");
        let message = e.no_reachable_pair().expect("h0 cannot reach h1");
        assert!(message.starts_with("no reachable interface pair from h0's routes"));
        assert!(message.contains("although h1 can reach h0"), "{message}");
        assert!(!e.sides_agree(), "h1 would pair, h0 would not");
        assert_eq!(e.warnings().len(), 1);

        let e = Explanation::new(with_route, plain, "b", "a");
        let message = e.no_reachable_pair().expect("h0 cannot answer h1");
        assert!(message.starts_with("no reachable interface pair from h0's routes"));
        assert!(
            message.contains("nothing h1 sends could be acknowledged"),
            "{message}"
        );
    }
}
