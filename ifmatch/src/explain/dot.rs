//! The `explain` graph (`--format dot`, and `--png` through Graphviz).
//!
//! # `--format dot`
//!
//! A Graphviz undirected graph: one cluster per process, one node per interface, one edge per
//! reachable pair in the local view labelled with its weight fields; chosen edges are bold.
//!
//! This module owns the graph's syntax and escaping; every vertex and edge comes from the
//! [`Explanation`].

use std::fmt::Write as _;

use super::model::{speed_text, Explanation};

impl Explanation {
    /// The Graphviz graph (see the module docs).
    pub fn render_dot(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "graph kestrel_ifmatch {{");
        let _ = writeln!(s, "  rankdir=LR;");
        let _ = writeln!(s, "  node [shape=box, fontname=\"monospace\"];");
        let _ = writeln!(s, "  edge [fontname=\"monospace\", fontsize=10];");
        for (prefix, p, left) in [
            ("l", &self.local, self.local_is_left),
            ("r", &self.remote, !self.local_is_left),
        ] {
            let role = if prefix == "l" { "local" } else { "remote" };
            let _ = writeln!(s, "  subgraph cluster_{role} {{");
            let _ = writeln!(
                s,
                "    label=\"{}\";",
                dot_escape(&format!(
                    "{role} {} (job \"{}\", rank {}, {} side)",
                    p.card.node,
                    p.job,
                    p.rank,
                    if left { "left" } else { "right" }
                ))
            );
            for (i, itf) in p.card.interfaces.iter().enumerate() {
                let paired = if prefix == "l" {
                    self.pairing.pairs.iter().any(|x| x.local_if == i)
                } else {
                    self.pairing.pairs.iter().any(|x| x.remote_if == i)
                };
                let _ = writeln!(
                    s,
                    "    {prefix}{i} [label=\"{}\"{}];",
                    dot_escape(&format!(
                        "{}\n{}/{}\n{}",
                        itf.name,
                        itf.ipv4,
                        itf.prefix_len,
                        speed_text(itf)
                    )),
                    if paired { "" } else { ", style=dashed" }
                );
            }
            let _ = writeln!(s, "  }}");
        }
        for c in &self.local_view {
            let Ok(edge) = &c.edge else { continue };
            let parts = edge.weight.parts();
            // The metric is part of `via` for routed pairs and 0 otherwise.
            let label = format!("{}\n{} Gb/s", edge.via, parts.min_speed_gbps);
            let style = if self.chosen(c.local_if, c.remote_if) {
                "style=bold, penwidth=3"
            } else {
                "color=gray50"
            };
            let _ = writeln!(
                s,
                "  l{} -- r{} [label=\"{}\", {style}];",
                c.local_if,
                c.remote_if,
                dot_escape(&label)
            );
        }
        let _ = writeln!(s, "}}");
        s
    }
}

/// Escapes text for a double-quoted dot string; newlines become dot's centred line breaks.
fn dot_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for ch in text.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if c.is_control() => {}
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escaping() {
        assert_eq!(dot_escape("a\"b\\c\nd\u{7}"), "a\\\"b\\\\c\\nd");
    }
}
