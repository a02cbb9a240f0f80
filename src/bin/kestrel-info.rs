//! `kestrel-info`: every Kestrel parameter with its value, where the value came from, and what
//! it does.

use kestrel::{all_param_specs, Params};
use kestrel_transport::params::{env_var_for, Source};
use serde_json::json;

const USAGE: &str = "\
usage: kestrel-info [--json] [--component NAME]

Lists every Kestrel parameter: its value for a program started from this environment, where
that value came from (default, environment, launcher, command line), and its description.
Set a parameter with KESTREL_<NAME>=value or `kestrel-run --mca <name> <value>`.

  --json            machine-readable output
  --component NAME  only the parameters of one component (btl, core, pmi, launcher, ...)";

fn main() {
    let mut json_out = false;
    let mut component: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--json" => json_out = true,
            "--component" | "-c" => match args.next() {
                Some(c) => component = Some(c),
                None => fail("--component needs a name"),
            },
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

fn fail(msg: &str) -> ! {
    eprintln!("kestrel-info: {msg} (kestrel-info --help shows the options)");
    std::process::exit(2)
}
