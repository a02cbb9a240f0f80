//! Where ranks go: host lists (`--host h1:2,h2`), hostfiles (`name slots=N`) and the
//! by-slot mapping of ranks onto hosts.

use std::fmt;

/// One host and how many ranks it may take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSlots {
    /// Host name as the launch agent needs it.
    pub name: String,
    /// Slots; `None` = as many as asked (the local host when no host was given).
    pub slots: Option<u32>,
}

/// A host specification that could not be used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostError {
    /// Where it came from (`--host`, `hostfile hosts.txt line 3`).
    pub origin: String,
    /// The offending text.
    pub text: String,
    /// What is wrong and what would be right.
    pub reason: String,
}

impl fmt::Display for HostError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: '{}' {}", self.origin, self.text, self.reason)
    }
}

impl std::error::Error for HostError {}

fn add(hosts: &mut Vec<HostSlots>, name: &str, slots: u32) {
    // A host named twice accumulates its slots, as Open MPI does.
    match hosts.iter_mut().find(|h| h.name == name) {
        Some(h) => h.slots = Some(h.slots.unwrap_or(0) + slots),
        None => hosts.push(HostSlots {
            name: name.into(),
            slots: Some(slots),
        }),
    }
}

fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

fn parse_slots(text: &str) -> Option<u32> {
    text.trim().parse::<u32>().ok().filter(|&n| n > 0)
}

/// Parses `--host h1:2,h2:2,h3` (a host without a count has one slot).
pub fn parse_host_list(spec: &str) -> Result<Vec<HostSlots>, HostError> {
    let mut hosts = Vec::new();
    for entry in spec.split(',') {
        let entry = entry.trim();
        let err = |reason: &str| HostError {
            origin: "--host".into(),
            text: entry.into(),
            reason: reason.into(),
        };
        let (name, slots) = match entry.split_once(':') {
            Some((n, s)) => (
                n,
                parse_slots(s).ok_or_else(|| {
                    err("has a slot count that is not a positive integer; write name:N")
                })?,
            ),
            None => (entry, 1),
        };
        if !valid_name(name) {
            return Err(err(
                "is not a host name; write name or name:N, separated by commas",
            ));
        }
        add(&mut hosts, name, slots);
    }
    Ok(hosts)
}

/// Parses a hostfile: one host per line, `name [slots=N] [max_slots=M]`, `#` comments.
pub fn parse_hostfile(text: &str, path: &str) -> Result<Vec<HostSlots>, HostError> {
    let mut hosts = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |reason: &str| HostError {
            origin: format!("hostfile {path} line {}", i + 1),
            text: line.into(),
            reason: reason.into(),
        };
        let mut words = line.split_whitespace();
        let name = words.next().unwrap_or("");
        if !valid_name(name) {
            return Err(err("does not start with a host name"));
        }
        let mut slots = 1;
        for word in words {
            match word.split_once('=') {
                Some(("slots", v)) | Some(("cpu", v)) => {
                    slots = parse_slots(v)
                        .ok_or_else(|| err("has slots that are not a positive integer"))?
                }
                // max_slots bounds oversubscription in Open MPI; our bound is the slot count.
                Some(("max_slots", v)) => {
                    parse_slots(v)
                        .ok_or_else(|| err("has max_slots that are not a positive integer"))?;
                }
                _ => return Err(err(&format!("has '{word}'; expected slots=N"))),
            }
        }
        add(&mut hosts, name, slots);
    }
    if hosts.is_empty() {
        return Err(HostError {
            origin: format!("hostfile {path}"),
            text: String::new(),
            reason: "names no host; write one 'name slots=N' per line".into(),
        });
    }
    Ok(hosts)
}

/// Ranks per host, filling each host's slots in order ("by slot"). Without `oversubscribe`,
/// more ranks than slots is an error; with it, the extra ranks go round-robin over the hosts.
pub fn map_by_slot(
    hosts: &[HostSlots],
    ranks: u32,
    oversubscribe: bool,
) -> Result<Vec<Vec<u32>>, String> {
    let mut out = vec![Vec::new(); hosts.len()];
    if hosts.is_empty() {
        return Err("no hosts to place ranks on".into());
    }
    let total: Option<u64> = hosts
        .iter()
        .map(|h| h.slots.map(u64::from))
        .sum::<Option<u64>>();
    if let (Some(total), false) = (total, oversubscribe) {
        if u64::from(ranks) > total {
            let list: Vec<String> = hosts
                .iter()
                .map(|h| format!("{}:{}", h.name, h.slots.unwrap_or(0)))
                .collect();
            return Err(format!(
                "{ranks} ranks requested but the hosts have only {total} slots ({}); give fewer \
                 ranks, more slots (--host name:N), or --oversubscribe",
                list.join(",")
            ));
        }
    }
    let mut next = 0u32;
    for (i, h) in hosts.iter().enumerate() {
        let take = match h.slots {
            None => ranks - next,
            Some(s) => s.min(ranks - next),
        };
        out[i].extend(next..next + take);
        next += take;
    }
    let mut i = 0;
    while next < ranks {
        out[i % hosts.len()].push(next);
        next += 1;
        i += 1;
    }
    for list in &mut out {
        list.sort_unstable();
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hs(name: &str, slots: u32) -> HostSlots {
        HostSlots {
            name: name.into(),
            slots: Some(slots),
        }
    }

    #[test]
    fn host_lists() {
        assert_eq!(
            parse_host_list("h1:2, h2,h1:1").unwrap(),
            vec![hs("h1", 3), hs("h2", 1)]
        );
        for bad in ["", "h1:", "h1:0", "h1:x", "a b", "h1,,h2", ":3"] {
            assert!(parse_host_list(bad).is_err(), "{bad}");
        }
        let e = parse_host_list("h1:two").unwrap_err();
        assert!(e.to_string().contains("'h1:two'") && e.to_string().contains("name:N"));
    }

    #[test]
    fn hostfiles() {
        let text = "# cluster\nnode1 slots=4\n\nnode2   # one slot\nnode3 slots=2 max_slots=8\n";
        assert_eq!(
            parse_hostfile(text, "hf").unwrap(),
            vec![hs("node1", 4), hs("node2", 1), hs("node3", 2)]
        );
        let e = parse_hostfile("node1 slots=4\nnode2 slots=zero\n", "hf").unwrap_err();
        assert_eq!(e.origin, "hostfile hf line 2");
        assert!(parse_hostfile("node1 color=red", "hf").is_err());
        assert!(parse_hostfile("# nothing\n", "hf").is_err());
    }

    #[test]
    fn mapping_fills_slots_then_refuses_or_wraps() {
        let hosts = [hs("a", 2), hs("b", 2)];
        assert_eq!(
            map_by_slot(&hosts, 3, false).unwrap(),
            vec![vec![0, 1], vec![2]]
        );
        let e = map_by_slot(&hosts, 5, false).unwrap_err();
        assert!(
            e.contains("only 4 slots") && e.contains("--oversubscribe"),
            "{e}"
        );
        assert_eq!(
            map_by_slot(&hosts, 6, true).unwrap(),
            vec![vec![0, 1, 4], vec![2, 3, 5]]
        );
        let unlimited = [HostSlots {
            name: "localhost".into(),
            slots: None,
        }];
        assert_eq!(
            map_by_slot(&unlimited, 3, false).unwrap(),
            vec![vec![0, 1, 2]]
        );
    }
}
