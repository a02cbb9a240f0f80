//! `kestrel-info`: every Kestrel parameter with its value, where the value came from, and what
//! it does.

use kestrel::{all_param_specs, Params};
use kestrel_transport::params::{env_var_for, Source};
use serde_json::json;

const USAGE: &str = "\
usage: kestrel-info [--json] [--component NAME | --coll]

Lists every Kestrel parameter: its value for a program started from this environment, where
that value came from (default, environment, launcher, command line), and its description.
Set a parameter with KESTREL_<NAME>=value or `kestrel-run --mca <name> <value>`.

  --json            machine-readable output
  --component NAME  only the parameters of one component (btl, core, pmi, launcher, ...)
  --coll            the active collective algorithms: for each collective, communicator
                    shape (node: one node; nodes: several, one rank each; hier: several
                    with more on some) and size, what runs; from the coll_* parameters and
                    the tuning table (built in, and coll_tuning_file)";

fn main() {
    let mut json_out = false;
    let mut component: Option<String> = None;
    let mut coll = false;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_out = true,
            "--component" | "-c" => match args.next() {
                Some(c) => component = Some(c),
                None => fail("--component needs a name"),
            },
            "--coll" => coll = true,
            "-h" | "--help" => {
                println!("{USAGE}");
                return;
            }
            other => fail(&format!("unknown option '{other}'")),
        }
    }
    let specs = all_param_specs();
    let params = match Params::from_env(&specs) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("kestrel-info: {e}");
            std::process::exit(1);
        }
    };
    if coll {
        show_collectives(&params, json_out);
        return;
    }
    let components: Vec<&str> = {
        let mut c: Vec<&str> = specs.iter().map(|s| s.component).collect();
        c.sort_unstable();
        c.dedup();
        c
    };
    if let Some(c) = &component {
        if !components.contains(&c.as_str()) {
            fail(&format!(
                "no component '{c}'; components with parameters: {}",
                components.join(", ")
            ));
        }
    }
    let mut rows: Vec<_> = params
        .iter()
        .filter(|r| component.as_deref().is_none_or(|c| r.spec.component == c))
        .collect();
    rows.sort_by_key(|r| (r.spec.component, r.spec.name));

    if json_out {
        let list: Vec<_> = rows
            .iter()
            .map(|r| {
                json!({
                    "name": r.spec.name,
                    "component": r.spec.component,
                    "value": r.raw,
                    "default": r.spec.default,
                    "source": r.source.as_str(),
                    "env": env_var_for(r.spec.name),
                    "allowed": r.spec.allowed(),
                    "description": r.spec.description,
                })
            })
            .collect();
        let doc = json!({
            "kestrel_version": env!("CARGO_PKG_VERSION"),
            "components": { "btl": kestrel_transport::core_params::KNOWN_BTLS },
            "parameters": list,
        });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("JSON of strings")
        );
        return;
    }

    println!("Kestrel {} parameters", env!("CARGO_PKG_VERSION"));
    println!("Set with KESTREL_<NAME>=value, or kestrel-run --mca <name> <value>.");
    println!(
        "BTL components: {}",
        kestrel_transport::core_params::KNOWN_BTLS.join(", ")
    );
    println!();
    let wname = rows
        .iter()
        .map(|r| r.spec.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    let wcomp = rows
        .iter()
        .map(|r| r.spec.component.len())
        .max()
        .unwrap_or(9)
        .max(9);
    let shown = |r: &kestrel_transport::params::Resolved| {
        if r.raw.is_empty() {
            "(empty)".to_string()
        } else {
            r.raw.clone()
        }
    };
    let wval = rows
        .iter()
        .map(|r| shown(r).len())
        .max()
        .unwrap_or(5)
        .clamp(5, 24);
    println!(
        "{:<wcomp$}  {:<wname$}  {:<wval$}  {:<12}  description",
        "component", "name", "value", "source"
    );
    for r in rows {
        let source = match r.source {
            Source::Default => "default".to_string(),
            s => s.as_str().to_string(),
        };
        println!(
            "{:<wcomp$}  {:<wname$}  {:<wval$}  {:<12}  {}",
            r.spec.component,
            r.spec.name,
            shown(r),
            source,
            r.spec.description
        );
    }
}

/// `--coll`: the algorithm of each collective by shape and size.
fn show_collectives(params: &Params, json_out: bool) {
    use kestrel_pml::coll_table::{Coll, Table};
    use kestrel_pml::params as coll_params;
    let table = match Table::from_params(params) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("kestrel-info: {e}");
            std::process::exit(1);
        }
    };
    let forcing = |c: Coll| -> &'static kestrel_transport::Param<String> {
        match c {
            Coll::Barrier => &coll_params::BARRIER,
            Coll::Bcast => &coll_params::BCAST,
            Coll::Reduce => &coll_params::REDUCE,
            Coll::Allreduce => &coll_params::ALLREDUCE,
            Coll::Allgather => &coll_params::ALLGATHER,
            Coll::Alltoall => &coll_params::ALLTOALL,
            Coll::Gather => &coll_params::GATHER,
            Coll::Scatter => &coll_params::SCATTER,
        }
    };
    let forced = |c: Coll| Some(forcing(c).get(params)).filter(|v| v != "auto");
    let source = match table.file() {
        Some(f) => format!("built in, then {f}"),
        None => "built in".to_string(),
    };
    let active = table.active();
    if json_out {
        let list: Vec<_> = Coll::ALL
            .iter()
            .map(|&c| {
                let shapes: Vec<_> = active
                    .iter()
                    .filter(|a| a.coll == c)
                    .map(|a| {
                        json!({
                            "scope": a.scope.name(),
                            "min_ranks": a.ranks.0,
                            "max_ranks": (a.ranks.1 < u32::MAX).then_some(a.ranks.1),
                            "bands": a.bands.iter().map(|(b, algo)| json!({"min_bytes": b, "algorithm": algo})).collect::<Vec<_>>(),
                        })
                    })
                    .collect();
                json!({
                    "collective": c.name(),
                    "parameter": forcing(c).spec().name,
                    "forced": forced(c),
                    "size_of": c.size_meaning(),
                    "shapes": shapes,
                })
            })
            .collect();
        let doc = json!({ "table": source, "collectives": list });
        println!(
            "{}",
            serde_json::to_string_pretty(&doc).expect("JSON of strings")
        );
        return;
    }
    println!("Kestrel collective algorithms (tuning table: {source})");
    println!(
        "Node-local communicators use the shared-memory segment engine first where it applies \
         (coll_shm); otherwise:"
    );
    println!();
    println!(
        "{:<10}  {:<5}  {:<7}  {:<14}  algorithm by size",
        "collective", "scope", "ranks", "size of"
    );
    for c in Coll::ALL {
        if let Some(f) = forced(c) {
            println!(
                "{:<10}  {:<5}  {:<7}  {:<14}  {f} (forced by {})",
                c.name(),
                "any",
                "any",
                c.size_meaning(),
                forcing(c).spec().name
            );
            continue;
        }
        for a in active.iter().filter(|a| a.coll == c) {
            let ranks = match a.ranks {
                (lo, u32::MAX) => format!("{lo}+"),
                (lo, hi) if lo == hi => format!("{lo}"),
                (lo, hi) => format!("{lo}-{hi}"),
            };
            let bands: Vec<String> = a
                .bands
                .iter()
                .map(|&(from, algo)| match from {
                    0 => algo.to_string(),
                    from => format!("from {}: {algo}", bytes(from)),
                })
                .collect();
            println!(
                "{:<10}  {:<5}  {:<7}  {:<14}  {}",
                c.name(),
                a.scope.name(),
                ranks,
                c.size_meaning(),
                bands.join(", ")
            );
        }
    }
    println!();
    println!(
        "Reductions with non-commutative operations run in rank order: never hierarchical; \
         reduce linear, allreduce reduce_bcast."
    );
}

/// `n` bytes, in the largest unit that divides it (64K, 1M, 65537).
fn bytes(n: u64) -> String {
    for (unit, shift) in [("G", 30), ("M", 20), ("K", 10)] {
        if n >= 1 << shift && n.is_multiple_of(1 << shift) {
            return format!("{}{unit}", n >> shift);
        }
    }
    n.to_string()
}

fn fail(msg: &str) -> ! {
    eprintln!("kestrel-info: {msg} (kestrel-info --help shows the options)");
    std::process::exit(2)
}
