//! The workspace's structural rules, checked on its sources:
//! - no source file has more than 1,000 lines before its `#[cfg(test)]` module (test files,
//!   under a `tests/` directory or named `tests.rs`, aside);
//! - inside each crate, the modules directly under `src/` do not import each other in a
//!   circle (a reference `crate::a` in module `b` is an edge b -> a).
//!
//! A rule broken here names the file or the circle, so the fix is obvious.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

const MAX_LINES: usize = 1000;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ lives in the workspace")
        .to_path_buf()
}

/// Every `.rs` file under `dir`, skipping build output and the fuzz workspace's artifacts.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let name = e.file_name().to_string_lossy().into_owned();
        if p.is_dir() {
            if name == "target" || name.starts_with('.') || name == "corpus" || name == "artifacts"
            {
                continue;
            }
            rust_files(&p, out);
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
}

fn is_test_file(p: &Path) -> bool {
    p.components().any(|c| c.as_os_str() == "tests")
        || p.file_name().is_some_and(|n| n == "tests.rs")
}

#[test]
fn no_source_file_passes_a_thousand_lines_before_its_tests() {
    let mut files = Vec::new();
    rust_files(&workspace(), &mut files);
    assert!(files.len() > 50, "found only {} source files", files.len());
    let mut long = Vec::new();
    for f in files.iter().filter(|f| !is_test_file(f)) {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let lines = text
            .lines()
            .position(|l| l.starts_with("#[cfg(test)]"))
            .unwrap_or_else(|| text.lines().count());
        if lines > MAX_LINES {
            long.push(format!("{} ({lines} lines)", f.display()));
        }
    }
    assert!(
        long.is_empty(),
        "split these files by concern (over {MAX_LINES} lines before #[cfg(test)]):\n{}",
        long.join("\n")
    );
}

/// The top-level module a file under `src/` belongs to (`engine` for `src/engine/post.rs`).
fn top_module(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel
        .components()
        .next()?
        .as_os_str()
        .to_string_lossy()
        .into_owned();
    let name = first.trim_end_matches(".rs").to_string();
    (name != "lib" && name != "main" && name != "bin").then_some(name)
}

/// The modules a file refers to through `crate::name`, outside comments.
fn references(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for line in text.lines() {
        let code = line.split("//").next().unwrap_or("");
        let mut rest = code;
        while let Some(i) = rest.find("crate::") {
            let after = &rest[i + 7..];
            let name: String = after
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !name.is_empty() {
                out.insert(name);
            }
            rest = after;
        }
        // `use crate::{a, b}` lists.
        if let Some(i) = code.find("crate::{") {
            let list = &code[i + 8..];
            for item in list.split([',', '}']) {
                let name: String = item
                    .trim()
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                if !name.is_empty() {
                    out.insert(name);
                }
            }
        }
    }
    out
}

fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        n: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(n.to_string(), 1);
        stack.push(n.to_string());
        for m in g.get(n).into_iter().flatten() {
            match state.get(m.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = stack.iter().position(|s| s == m).unwrap_or(0);
                    let mut c = stack[start..].to_vec();
                    c.push(m.clone());
                    return Some(c);
                }
                0 => {
                    if let Some(c) = visit(m, g, state, stack) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        stack.pop();
        state.insert(n.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in graph.keys() {
        if state.get(n.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(n, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

#[test]
fn modules_of_a_crate_do_not_import_each_other_in_a_circle() {
    let root = workspace();
    let mut srcs = Vec::new();
    let mut dirs = vec![root.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if !p.is_dir() || name == "target" || name.starts_with('.') {
                continue;
            }
            if name == "src" && d.join("Cargo.toml").exists() {
                srcs.push(p.clone());
            } else if d == root || d.parent() == Some(&root) {
                dirs.push(p);
            }
        }
    }
    assert!(
        srcs.len() >= 8,
        "found the sources of only {} crates",
        srcs.len()
    );
    let mut circles = Vec::new();
    for src in &srcs {
        let mut files = Vec::new();
        rust_files(src, &mut files);
        let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for f in &files {
            let Some(m) = top_module(src, f) else {
                continue;
            };
            let text = std::fs::read_to_string(f).unwrap_or_default();
            // References from test modules are not part of the design.
            let code = text.split("#[cfg(test)]").next().unwrap_or("");
            let edges = graph.entry(m.clone()).or_default();
            for r in references(code) {
                if r != m {
                    edges.insert(r);
                }
            }
        }
        let known: BTreeSet<String> = graph.keys().cloned().collect();
        for edges in graph.values_mut() {
            edges.retain(|e| known.contains(e));
        }
        if let Some(c) = find_cycle(&graph) {
            circles.push(format!("{}: {}", src.display(), c.join(" -> ")));
        }
    }
    assert!(
        circles.is_empty(),
        "modules import each other in a circle (move the shared piece into a module both use):\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_checks_see_what_they_claim() {
    let refs =
        references("use crate::{engine::Engine, group};\nlet x = crate::op::sum; // crate::not");
    assert_eq!(
        refs.into_iter().collect::<Vec<_>>(),
        vec!["engine", "group", "op"]
    );
    let mut g = BTreeMap::new();
    g.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    g.insert("b".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        find_cycle(&g),
        Some(vec!["a".into(), "b".into(), "a".into()])
    );
    g.insert("b".to_string(), BTreeSet::new());
    assert_eq!(find_cycle(&g), None);
}
