//! The `explain` report for tools (`--format json`): a stable, versioned JSON document.
//!
//! This module owns the document's shape and must never change it without bumping `version`
//! (scripts parse it); every value comes from the [`Explanation`].
//!
//! # `--format json`, version 1 (stable)
//!
//! One object; fields in this order, none ever omitted (absent values are `null`):
//!
//! * `format`: `"kestrel-ifmatch-explain"`; `version`: 1.
//! * `local`, `remote`: `{node, job, rank, file, side ("left" or "right"), interfaces: [{index,
//!   name, ipv4, prefix_len, link_speed_mbps, mtu}], routes: [{dest, interface, metric}] or
//!   null}`.
//! * `candidates`: every (local, remote) pair, local-major: `{local_if, local_name, remote_if,
//!   remote_name, chosen, local_view, remote_view}`, where each view is `{reachable, weight,
//!   same_subnet, min_speed_gbps, metric, via, unreachable_reason}`; `weight` is the 64-bit weight
//!   as a JSON integer (always below 2^49, so exact); `via` describes the path when reachable,
//!   `unreachable_reason` says why not otherwise.
//! * `pairs`: the local view's pairing, `[{local_if, local_name, remote_if, remote_name,
//!   weight}]` sorted by `local_if`.
//! * `unpaired_local`, `unpaired_remote`: `[{index, name, reason, partners}]`, `reason` one of
//!   `"no_reachable_partner"`, `"partners_taken_by_better_pairs"`; `partners` are the names of
//!   the reachable interfaces on the other side.
//! * `remote_view_pairs`: the pairing the remote process computes from its own routes, in the
//!   local process's terms (same shape as `pairs`, weights from the remote view).
//! * `sides_agree`, `no_reachable_pair`: booleans; `warnings`: strings.

use kestrel_usnic::matching::{self, Pairing, ProcessCard, UnpairedReason};
use serde::Serialize;

use super::model::Explanation;

impl Explanation {
    /// The stable JSON document (see the module docs), pretty-printed, with a final newline.
    pub fn render_json(&self) -> String {
        let process = |p: &ProcessCard, file: &str, left: bool| JsonProcess {
            node: p.card.node.clone(),
            job: p.job.clone(),
            rank: p.rank,
            file: file.to_string(),
            side: if left { "left" } else { "right" },
            interfaces: p
                .card
                .interfaces
                .iter()
                .enumerate()
                .map(|(index, i)| JsonInterface {
                    index,
                    name: i.name.clone(),
                    ipv4: i.ipv4.to_string(),
                    prefix_len: i.prefix_len,
                    link_speed_mbps: i.link_speed_mbps,
                    mtu: i.mtu,
                })
                .collect(),
            routes: p.card.routes.as_ref().map(|routes| {
                routes
                    .iter()
                    .map(|r| JsonRoute {
                        dest: format!("{}/{}", r.dest, r.dest_prefix_len),
                        interface: r.interface.clone(),
                        metric: r.metric,
                    })
                    .collect()
            }),
        };
        let pairs = |pairing: &Pairing| -> Vec<JsonPair> {
            pairing
                .pairs
                .iter()
                .map(|p| JsonPair {
                    local_if: p.local_if,
                    local_name: self.local_name(p.local_if).to_string(),
                    remote_if: p.remote_if,
                    remote_name: self.remote_name(p.remote_if).to_string(),
                    weight: p.weight.value(),
                })
                .collect()
        };
        let unpaired = |list: &[(usize, UnpairedReason)], local: bool| -> Vec<JsonUnpaired> {
            list.iter()
                .map(|(index, reason)| {
                    let (reason, partners) = match reason {
                        UnpairedReason::NoReachablePartner => ("no_reachable_partner", vec![]),
                        UnpairedReason::PartnersTakenByBetterPairs { partners } => (
                            "partners_taken_by_better_pairs",
                            self.partner_names(partners, local),
                        ),
                    };
                    JsonUnpaired {
                        index: *index,
                        name: if local {
                            self.local_name(*index).to_string()
                        } else {
                            self.remote_name(*index).to_string()
                        },
                        reason,
                        partners,
                    }
                })
                .collect()
        };
        let doc = JsonExplain {
            format: "kestrel-ifmatch-explain",
            version: 1,
            local: process(&self.local, &self.local_file, self.local_is_left),
            remote: process(&self.remote, &self.remote_file, !self.local_is_left),
            candidates: self
                .local_view
                .iter()
                .map(|c| JsonCandidate {
                    local_if: c.local_if,
                    local_name: self.local_name(c.local_if).to_string(),
                    remote_if: c.remote_if,
                    remote_name: self.remote_name(c.remote_if).to_string(),
                    chosen: self.chosen(c.local_if, c.remote_if),
                    local_view: JsonEdge::from(&c.edge),
                    remote_view: JsonEdge::from(
                        &self.remote_candidate(c.local_if, c.remote_if).edge,
                    ),
                })
                .collect(),
            pairs: pairs(&self.pairing),
            unpaired_local: unpaired(&self.pairing.unpaired_local, true),
            unpaired_remote: unpaired(&self.pairing.unpaired_remote, false),
            remote_view_pairs: pairs(&self.remote_pairing),
            sides_agree: self.sides_agree(),
            no_reachable_pair: self.no_reachable_pair().is_some(),
            warnings: self.warnings(),
        };
        // Plain structs of strings, integers and booleans always serialise.
        let mut text = serde_json::to_string_pretty(&doc).unwrap_or_default();
        text.push('\n');
        text
    }
}

#[derive(Serialize)]
struct JsonExplain {
    format: &'static str,
    version: u32,
    local: JsonProcess,
    remote: JsonProcess,
    candidates: Vec<JsonCandidate>,
    pairs: Vec<JsonPair>,
    unpaired_local: Vec<JsonUnpaired>,
    unpaired_remote: Vec<JsonUnpaired>,
    remote_view_pairs: Vec<JsonPair>,
    sides_agree: bool,
    no_reachable_pair: bool,
    warnings: Vec<String>,
}

#[derive(Serialize)]
struct JsonProcess {
    node: String,
    job: String,
    rank: u32,
    file: String,
    side: &'static str,
    interfaces: Vec<JsonInterface>,
    routes: Option<Vec<JsonRoute>>,
}

#[derive(Serialize)]
struct JsonInterface {
    index: usize,
    name: String,
    ipv4: String,
    prefix_len: u8,
    link_speed_mbps: Option<u32>,
    mtu: u32,
}

#[derive(Serialize)]
struct JsonRoute {
    dest: String,
    interface: String,
    metric: u32,
}

#[derive(Serialize)]
struct JsonCandidate {
    local_if: usize,
    local_name: String,
    remote_if: usize,
    remote_name: String,
    chosen: bool,
    local_view: JsonEdge,
    remote_view: JsonEdge,
}

#[derive(Serialize)]
struct JsonEdge {
    reachable: bool,
    weight: Option<u64>,
    same_subnet: Option<bool>,
    min_speed_gbps: Option<u8>,
    metric: Option<u32>,
    via: Option<String>,
    unreachable_reason: Option<String>,
}

impl From<&Result<matching::Edge, matching::Unreachable>> for JsonEdge {
    fn from(edge: &Result<matching::Edge, matching::Unreachable>) -> Self {
        match edge {
            Ok(e) => {
                let parts = e.weight.parts();
                JsonEdge {
                    reachable: true,
                    weight: Some(e.weight.value()),
                    same_subnet: Some(parts.same_subnet),
                    min_speed_gbps: Some(parts.min_speed_gbps),
                    metric: Some(parts.metric),
                    via: Some(e.via.to_string()),
                    unreachable_reason: None,
                }
            }
            Err(why) => JsonEdge {
                reachable: false,
                weight: None,
                same_subnet: None,
                min_speed_gbps: None,
                metric: None,
                via: None,
                unreachable_reason: Some(why.to_string()),
            },
        }
    }
}

#[derive(Serialize)]
struct JsonPair {
    local_if: usize,
    local_name: String,
    remote_if: usize,
    remote_name: String,
    weight: u64,
}

#[derive(Serialize)]
struct JsonUnpaired {
    index: usize,
    name: String,
    reason: &'static str,
    partners: Vec<String>,
}
