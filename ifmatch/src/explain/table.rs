//! The `explain` report for people (`--format table`): both cards, every candidate with its
//! weight taken apart, the chosen pairs, unpaired interfaces and the remote process's view.
//!
//! This module owns the text layout and nothing else: every fact it prints comes from the
//! [`Explanation`]; it must never decide reachability or pairing itself.

use std::fmt::Write as _;

use kestrel_usnic::matching::{ProcessCard, UnpairedReason};

use super::model::{speed_text, Explanation};

impl Explanation {
    /// The report for people.
    pub fn render_table(&self) -> String {
        let mut s = String::new();
        let (l, r) = (&self.local.card.node, &self.remote.card.node);
        self.table_process(
            &mut s,
            "local ",
            &self.local,
            &self.local_file,
            self.local_is_left,
        );
        self.table_process(
            &mut s,
            "remote",
            &self.remote,
            &self.remote_file,
            !self.local_is_left,
        );
        let _ = writeln!(
            s,
            "\nthe lower (job, rank) supplies the left side of the graph; weights below are \
             from {l}'s routes\n"
        );

        let _ = writeln!(s, "candidate pairs:");
        let mut rows = vec![row(&[
            "local",
            "remote",
            "same-subnet",
            "min-speed",
            "reachable",
            "metric",
            "weight",
            "chosen",
            "via / why no edge",
        ])];
        let mut differing = Vec::new();
        for c in &self.local_view {
            let mut cells = vec![
                self.local_name(c.local_if).to_string(),
                self.remote_name(c.remote_if).to_string(),
            ];
            match &c.edge {
                Ok(edge) => {
                    let parts = edge.weight.parts();
                    cells.extend([
                        yes_no(parts.same_subnet),
                        format!("{} Gb/s", parts.min_speed_gbps),
                        yes_no(parts.reachable),
                        parts.metric.to_string(),
                        edge.weight.to_string(),
                        yes_no(self.chosen(c.local_if, c.remote_if)),
                        edge.via.to_string(),
                    ]);
                }
                Err(why) => {
                    cells.extend(["-", "-", "no", "-", "-", "-"].map(String::from));
                    cells.push(format!("no edge: {why}"));
                }
            }
            rows.push(cells);
            let theirs = &self.remote_candidate(c.local_if, c.remote_if).edge;
            let mine = c.edge.as_ref().map(|e| e.weight).ok();
            if theirs.as_ref().map(|e| e.weight).ok() != mine {
                differing.push((c, theirs));
            }
        }
        s.push_str(&align(&rows));

        let _ = writeln!(
            s,
            "\nchosen pairing ({l}'s view, {} pair{}):",
            self.pairing.pairs.len(),
            if self.pairing.pairs.len() == 1 {
                ""
            } else {
                "s"
            }
        );
        if self.pairing.pairs.is_empty() {
            let _ = writeln!(s, "  none");
        } else {
            let rows: Vec<Vec<String>> = self
                .pairing
                .pairs
                .iter()
                .map(|p| {
                    vec![
                        format!(
                            "{} <-> {}",
                            self.local_name(p.local_if),
                            self.remote_name(p.remote_if)
                        ),
                        format!("weight {}", p.weight),
                    ]
                })
                .collect();
            s.push_str(&align(&rows));
        }
        self.table_unpaired(&mut s, "local", &self.pairing.unpaired_local, true);
        self.table_unpaired(&mut s, "remote", &self.pairing.unpaired_remote, false);

        let _ = writeln!(s, "\n{r}'s view (from its own routes):");
        if differing.is_empty() {
            let _ = writeln!(s, "  every candidate pair has the same weight as above");
        } else {
            for (c, theirs) in &differing {
                let mine = match &c.edge {
                    Ok(e) => format!("{} ({})", e.weight, e.via),
                    Err(_) => "no edge".to_string(),
                };
                let theirs = match theirs {
                    Ok(e) => format!("{} ({})", e.weight, e.via),
                    Err(why) => format!("no edge: {why}"),
                };
                let _ = writeln!(
                    s,
                    "  {} <-> {}: {l} sees {mine}; {r} sees {theirs}",
                    self.local_name(c.local_if),
                    self.remote_name(c.remote_if)
                );
            }
        }
        if self.sides_agree() && self.pairing.pairs.is_empty() {
            let _ = writeln!(s, "  {r} finds no pairs either");
        } else if self.sides_agree() {
            let _ = writeln!(s, "  {r} chooses the same pairs");
        }
        for w in self.warnings() {
            let _ = writeln!(s, "\nwarning: {w}");
        }
        s
    }

    fn table_process(&self, s: &mut String, label: &str, p: &ProcessCard, file: &str, left: bool) {
        let _ = writeln!(
            s,
            "{label} {} (job \"{}\", rank {}) from {file}: {} side",
            p.card.node,
            p.job.escape_default(),
            p.rank,
            if left { "left" } else { "right" }
        );
        let rows: Vec<Vec<String>> = p
            .card
            .interfaces
            .iter()
            .enumerate()
            .map(|(i, itf)| {
                vec![
                    format!("[{i}] {}", itf.name),
                    format!("{}/{}", itf.ipv4, itf.prefix_len),
                    speed_text(itf),
                    format!("mtu {}", itf.mtu),
                ]
            })
            .collect();
        if rows.is_empty() {
            let _ = writeln!(s, "  no interfaces");
        }
        s.push_str(&align(&rows));
        match &p.card.routes {
            None => {
                let _ = writeln!(s, "  routes: none listed (on-link subnets only)");
            }
            Some(routes) if routes.is_empty() => {
                let _ = writeln!(s, "  routes: none");
            }
            Some(routes) => {
                let _ = writeln!(s, "  routes:");
                for r in routes {
                    let _ = writeln!(
                        s,
                        "    {}/{} via {} metric {}",
                        r.dest, r.dest_prefix_len, r.interface, r.metric
                    );
                }
            }
        }
    }

    fn table_unpaired(
        &self,
        s: &mut String,
        side: &str,
        unpaired: &[(usize, UnpairedReason)],
        local: bool,
    ) {
        let _ = writeln!(s, "unpaired {side} interfaces:");
        if unpaired.is_empty() {
            let _ = writeln!(s, "  none");
        }
        let other = if local {
            &self.remote.card.node
        } else {
            &self.local.card.node
        };
        for (i, reason) in unpaired {
            let name = if local {
                self.local_name(*i)
            } else {
                self.remote_name(*i)
            };
            let why = match reason {
                UnpairedReason::NoReachablePartner if local => {
                    format!("reaches no interface of {other}")
                }
                UnpairedReason::NoReachablePartner => {
                    format!("no interface of {other} reaches it")
                }
                UnpairedReason::PartnersTakenByBetterPairs { partners } => format!(
                    "every partner it reaches ({}) is taken by a better pair",
                    self.partner_names(partners, local).join(", ")
                ),
            };
            let _ = writeln!(s, "  {name}: {why}");
        }
    }
}

fn yes_no(b: bool) -> String {
    if b { "yes" } else { "no" }.to_string()
}

fn row(cells: &[&str]) -> Vec<String> {
    cells.iter().map(|c| c.to_string()).collect()
}

/// Left-aligned columns separated by two spaces, indented by two; the last column is not
/// padded so lines carry no trailing blanks.
fn align(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| {
            rows.iter()
                .filter_map(|r| r.get(c))
                .map(|cell| cell.chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in rows {
        let mut line = String::from("  ");
        for (c, cell) in r.iter().enumerate() {
            if c + 1 == r.len() {
                line.push_str(cell);
            } else {
                let _ = write!(line, "{cell:<width$}  ", width = widths[c]);
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn alignment() {
        let rows = vec![row(&["a", "bbb", "c"]), row(&["dddd", "e", "f f "])];
        assert_eq!(align(&rows), "  a     bbb  c\n  dddd  e    f f\n");
    }
}
