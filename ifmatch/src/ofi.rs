//! `kestrel-ifmatch list|card|explain --transport ofi`: the ofi transport's view of this host
//! (the RDM domains libfabric offers and the transport's verdict on each, under the same
//! `KESTREL_OFI_*` parameters as a job), its card, and how two cards pair.
//!
//! This module owns the three subcommands' ofi arguments and output, and the JSON form of an
//! ofi card (the transport publishes it in binary). It must never judge a domain nor pair two
//! cards its own way: verdicts come from `kestrel_ofi::select::Policy::verdicts` over the
//! survey a rank makes (`kestrel_ofi::btl::Survey`), the card from an endpoint opened as a rank
//! opens it, and pairs from `kestrel_ofi::card::pairing`.

use std::io::Write;

use kestrel_ofi::btl::{OfiBtl, Opened, Survey, SurveyError};
use kestrel_ofi::card::{CardEndpoint, OfiCard};
use kestrel_transport::params::Params;
use serde_json::{json, Value};

use crate::{EXIT_NO_REACHABLE_PAIR, EXIT_OK, EXIT_TOOL_FAILED, EXIT_USAGE, PROGRAM};

/// The `transport` field of an ofi card file.
const TRANSPORT: &str = "ofi";

fn params_here(err: &mut dyn Write) -> Option<Params> {
    match Params::from_env(&kestrel_ofi::params::specs()) {
        Ok(p) => Some(p),
        Err(e) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            None
        }
    }
}

/// `list --transport ofi [--json]`.
pub(crate) fn run_list(json_out: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let Some(params) = params_here(err) else {
        return EXIT_USAGE;
    };
    let survey = match Survey::take(&params) {
        Ok(s) => s,
        Err(SurveyError::Nothing(why)) => {
            let _ = writeln!(
                err,
                "{PROGRAM}: the ofi transport finds nothing here: {why}"
            );
            return EXIT_OK;
        }
        Err(SurveyError::Failed(why)) => {
            let _ = writeln!(err, "{PROGRAM}: {why}");
            return EXIT_TOOL_FAILED;
        }
    };
    // A host alone (every peer on this node) is a job's special case; list shows the rule for
    // a job spanning hosts.
    let verdicts = survey.policy.verdicts(&survey.offers, false);
    if json_out {
        let entries: Vec<Value> = survey
            .interfaces
            .iter()
            .zip(&verdicts)
            .map(|(i, v)| {
                json!({
                    "provider": i.provider(),
                    "domain": i.domain(),
                    "fabric": i.fabric(),
                    "ipv4": i.ipv4().map(|a| a.to_string()),
                    "used": v.is_ok(),
                    "reason": v.clone().err(),
                })
            })
            .collect();
        let doc = json!({ "transport": TRANSPORT, "domains": entries });
        let _ = writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&doc).expect("json serializes")
        );
        return EXIT_OK;
    }
    let mut rows = vec![["provider", "domain", "fabric", "ipv4", "verdict"]
        .map(String::from)
        .to_vec()];
    // libfabric lists a domain once per variant it offers (capabilities, versions): one
    // row per distinct line.
    for (i, v) in survey.interfaces.iter().zip(&verdicts) {
        let row = vec![
            i.provider().to_string(),
            i.domain().to_string(),
            i.fabric().to_string(),
            i.ipv4().map_or("-".into(), |a| a.to_string()),
            match v {
                Ok(()) => "used".into(),
                Err(why) => format!("excluded: {why}"),
            },
        ];
        if !rows.contains(&row) {
            rows.push(row);
        }
    }
    crate::print_rows(out, &rows);
    if verdicts.iter().all(Result::is_err) {
        let _ = writeln!(
            err,
            "{PROGRAM}: no RDM domain is usable: ranks on other nodes cannot be reached over ofi from here"
        );
    }
    EXIT_OK
}

/// An ofi card as JSON (the address in hex).
pub fn card_to_json(card: &OfiCard, node: &str) -> Value {
    let endpoints: Vec<Value> = card
        .endpoints
        .iter()
        .map(|e| {
            let address: String = e.address.iter().map(|b| format!("{b:02x}")).collect();
            json!({
                "fabric": e.fabric,
                "domain": e.domain,
                "address": address,
                "speed_mbps": e.speed_mbps,
                "probe": e.probe.map(|a| a.to_string()),
            })
        })
        .collect();
    json!({
        "transport": TRANSPORT,
        "version": kestrel_ofi::card::VERSION,
        "node": node,
        "provider": card.provider,
        "endpoints": endpoints,
    })
}

/// Reads an ofi card from JSON; errors say which field is wrong. The card is then checked
/// as a rank checks one (encoded and decoded with the transport's own codec).
pub fn card_from_json(v: &Value) -> Result<(OfiCard, String), String> {
    let field = |name: &str| v.get(name).ok_or(format!("no \"{name}\" field"));
    let text = |value: &Value, name: &str| -> Result<String, String> {
        value
            .as_str()
            .map(str::to_string)
            .ok_or(format!("\"{name}\" is not a string"))
    };
    if field("transport")?.as_str() != Some(TRANSPORT) {
        return Err(format!(
            "not an ofi card (\"transport\" is not \"{TRANSPORT}\"; usnic cards are explained \
             without --transport ofi)"
        ));
    }
    let version = field("version")?
        .as_u64()
        .ok_or("\"version\" is not a number")?;
    if version != u64::from(kestrel_ofi::card::VERSION) {
        return Err(format!(
            "card version {version}, this build reads {}",
            kestrel_ofi::card::VERSION
        ));
    }
    let node = v
        .get("node")
        .and_then(Value::as_str)
        .unwrap_or("?")
        .to_string();
    let provider = text(field("provider")?, "provider")?;
    let list = field("endpoints")?
        .as_array()
        .ok_or("\"endpoints\" is not an array")?;
    let mut endpoints = Vec::with_capacity(list.len());
    for (n, e) in list.iter().enumerate() {
        let get = |name: &str| {
            e.get(name)
                .ok_or(format!("endpoint {n} has no \"{name}\""))
                .and_then(|x| text(x, name))
        };
        let hex = get("address")?;
        if hex.len() % 2 != 0 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("endpoint {n}: \"address\" is not hex"));
        }
        let address = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("checked hex"))
            .collect();
        let speed_mbps = match e.get("speed_mbps") {
            Some(x) => x
                .as_u64()
                .and_then(|v| u32::try_from(v).ok())
                .ok_or(format!(
                    "endpoint {n}: \"speed_mbps\" is not a number of Mb/s"
                ))?,
            None => return Err(format!("endpoint {n} has no \"speed_mbps\"")),
        };
        let probe = match e.get("probe") {
            None | Some(Value::Null) => None,
            Some(Value::String(a)) => Some(
                a.parse::<std::net::SocketAddrV4>()
                    .map_err(|_| format!("endpoint {n}: \"probe\" is not ADDRESS:PORT"))?,
            ),
            Some(_) => return Err(format!("endpoint {n}: \"probe\" is not a string or null")),
        };
        endpoints.push(CardEndpoint {
            fabric: get("fabric")?,
            domain: get("domain")?,
            address,
            speed_mbps,
            probe,
        });
    }
    let card = OfiCard {
        provider,
        endpoints,
    };
    let checked = OfiCard::decode(&card.encode()).map_err(|e| e.to_string())?;
    Ok((checked, node))
}

/// `card --transport ofi [--node NAME] [--compact]`: opens the endpoints a rank would and
/// prints their card.
pub(crate) fn run_card(node: &str, compact: bool, out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let Some(params) = params_here(err) else {
        return EXIT_USAGE;
    };
    match OfiBtl::open(&params, 0, false) {
        Ok(Opened::Ready(btl)) => {
            let doc = card_to_json(btl.card(), node);
            let text = if compact {
                serde_json::to_string(&doc)
            } else {
                serde_json::to_string_pretty(&doc)
            };
            let _ = writeln!(out, "{}", text.expect("json serializes"));
            EXIT_OK
        }
        Ok(Opened::Declined(why)) => {
            let _ = writeln!(
                err,
                "{PROGRAM}: the ofi transport opens nothing here: {why}"
            );
            EXIT_TOOL_FAILED
        }
        Err(why) => {
            let _ = writeln!(err, "{PROGRAM}: {why}");
            EXIT_TOOL_FAILED
        }
    }
}

fn load(path: &str) -> Result<(OfiCard, String), String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{path} is not JSON: {e}"))?;
    card_from_json(&v).map_err(|e| format!("{path}: {e}"))
}

/// `explain --transport ofi LOCAL.json REMOTE.json`.
pub(crate) fn run_explain(args: &[String], out: &mut dyn Write, err: &mut dyn Write) -> i32 {
    let [local_file, remote_file] = args else {
        let _ = writeln!(
            err,
            "{PROGRAM}: explain --transport ofi takes LOCAL.json REMOTE.json (ofi cards from \
             '{PROGRAM} card --transport ofi')"
        );
        return EXIT_USAGE;
    };
    let ((local, local_node), (remote, remote_node)) = match (load(local_file), load(remote_file)) {
        (Ok(l), Ok(r)) => (l, r),
        (Err(e), _) | (_, Err(e)) => {
            let _ = writeln!(err, "{PROGRAM}: {e}");
            return EXIT_USAGE;
        }
    };
    let _ = writeln!(
        out,
        "ofi pairs from {local_node} ({}) to {remote_node} ({})",
        local.provider, remote.provider
    );
    if local.provider != remote.provider {
        let _ = writeln!(
            out,
            "no pair: no provider in common (set KESTREL_OFI_PROVIDER the same on every node)"
        );
        return EXIT_NO_REACHABLE_PAIR;
    }
    // A job lists the pairs in the lower-numbered process's orientation; the tool takes the
    // local card as that one (the pairs are the same either way; only equal-weight ties can
    // come out in another order).
    let (pairs, routed) = kestrel_ofi::card::pairing(&local, &remote, true);
    let mut rows = vec![[
        "pair",
        "local domain",
        "fabric",
        "remote domain",
        "speed (Gb/s)",
        "role",
    ]
    .map(String::from)
    .to_vec()];
    for (n, p) in pairs.iter().enumerate() {
        let l = &local.endpoints[p.rail];
        let r = &remote.endpoints[p.remote];
        rows.push(vec![
            n.to_string(),
            l.domain.clone(),
            if routed {
                format!("{} -> {} (routed)", l.fabric, r.fabric)
            } else {
                l.fabric.clone()
            },
            r.domain.clone(),
            if routed {
                "-".into()
            } else {
                let w = kestrel_ofi::card::pair_weight(l, r).parts();
                w.min_speed_gbps.to_string()
            },
            if n == 0 {
                "carries the traffic (small messages, acks, its share of large ones)".into()
            } else if p.primary {
                "striped: its share of messages >= ofi_stripe_min by link speed; takes over \
                 when the pairs before it go silent (ofi_fail_after_ms)"
                    .into()
            } else {
                "standby: takes over when the pairs before it go silent (ofi_fail_after_ms)".into()
            },
        ]);
    }
    crate::print_rows(out, &rows);
    let unpaired: Vec<&str> = local
        .endpoints
        .iter()
        .enumerate()
        .filter(|(i, _)| !pairs.iter().any(|p| p.rail == *i))
        .map(|(_, e)| e.domain.as_str())
        .collect();
    if !unpaired.is_empty() {
        let _ = writeln!(
            out,
            "unpaired local domains (no endpoint of {remote_node} on their fabric): {}",
            unpaired.join(", ")
        );
    }
    if routed {
        let _ = writeln!(
            out,
            "no fabric in common: the first endpoints are paired across routers"
        );
    }
    EXIT_OK
}

#[cfg(test)]
mod tests {
    use super::*;

    fn card() -> OfiCard {
        OfiCard {
            provider: "tcp;ofi_rxm".into(),
            endpoints: vec![
                CardEndpoint {
                    fabric: "198.18.1.0/24".into(),
                    domain: "eth1".into(),
                    address: vec![2, 0, 0x1f, 0x90, 198, 18, 1, 10],
                    speed_mbps: 10_000,
                    probe: Some("198.18.1.10:40000".parse().unwrap()),
                },
                CardEndpoint {
                    fabric: "198.18.2.0/24".into(),
                    domain: "eth2".into(),
                    address: vec![2, 0, 0x1f, 0x91, 198, 18, 2, 10],
                    speed_mbps: 0,
                    probe: None,
                },
            ],
        }
    }

    #[test]
    fn cards_round_trip_through_json() {
        let v = card_to_json(&card(), "h0");
        assert_eq!(card_from_json(&v).unwrap(), (card(), "h0".to_string()));
        let mut bad = v.clone();
        bad["transport"] = json!("usnic");
        assert!(card_from_json(&bad)
            .unwrap_err()
            .contains("not an ofi card"));
        let mut bad = v.clone();
        bad["endpoints"][0]["address"] = json!("xyz");
        assert!(card_from_json(&bad).unwrap_err().contains("not hex"));
        let mut bad = v;
        bad["endpoints"] = json!([]);
        assert!(card_from_json(&bad).is_err(), "the codec's checks apply");
    }

    #[test]
    fn explain_lists_the_pairs_in_the_order_the_transport_uses_them() {
        let dir = std::env::temp_dir().join(format!("ifmatch-ofi-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (a, b) = (dir.join("a.json"), dir.join("b.json"));
        std::fs::write(&a, card_to_json(&card(), "h0").to_string()).unwrap();
        let mut other = card();
        other.endpoints.reverse();
        std::fs::write(&b, card_to_json(&other, "h1").to_string()).unwrap();
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let args = [a.display().to_string(), b.display().to_string()];
        assert_eq!(run_explain(&args, &mut out, &mut err), EXIT_OK);
        let text = String::from_utf8(out).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[2].starts_with("0") && lines[2].contains("eth1"),
            "{text}"
        );
        assert!(lines[2].contains("carries the traffic"), "{text}");
        // eth2 is a pair of the matching too (its own fabric): large messages are striped
        // over it.
        assert!(
            lines[3].starts_with("1") && lines[3].contains("striped"),
            "{text}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
