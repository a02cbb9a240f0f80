//! The tables behind MPI_T's indices: every control variable, performance variable,
//! category and enumeration, with what `*_get_info` reports about each.
//!
//! This module owns the numbering, built once from Kestrel's registries: control variables
//! are `kestrel::all_param_specs()` in that (stable) order, performance variables are the
//! engine's counters (`kestrel_pml::engine::counters::COUNTERS`) followed by every registered
//! component's declared counters, and categories are the components that own either, in
//! order of first appearance. It must never hold changing state: the tables are the same
//! before `MPI_Init`, while MPI runs and after `MPI_Finalize`.

use std::os::raw::c_int;
use std::sync::OnceLock;

use kestrel_transport::params::{ParamKind, ParamSpec};

use super::{
    BIND_NO_OBJECT, CHAR, COUNT, INT, PVAR_CLASS_COUNTER, SCOPE_LOCAL, UNSIGNED_LONG_LONG,
    VERBOSITY_TUNER_BASIC, VERBOSITY_USER_BASIC,
};

/// Bytes of a text control variable's buffer (`count` of its `MPI_CHAR` handle), the
/// terminating NUL included: longer values are cut when read, refused when written.
pub const TEXT_LEN: usize = 256;

/// Components whose parameters every user may need (the stack as a whole); their control
/// variables are `MPI_T_VERBOSITY_USER_BASIC`, every component's own tunables
/// `MPI_T_VERBOSITY_TUNER_BASIC`.
const USER_COMPONENTS: &[&str] = &["btl", "core"];

/// A control variable: one registered parameter.
#[derive(Debug)]
pub struct Cvar {
    /// The parameter.
    pub spec: &'static ParamSpec,
    /// What `MPI_T_cvar_get_info` says.
    pub desc: String,
    /// `MPI_T_VERBOSITY_*`.
    pub verbosity: c_int,
    /// The datatype by kind: `Bool` → `MPI_INT` (0/1), `Int` → `MPI_COUNT`, `Size` →
    /// `MPI_UNSIGNED_LONG_LONG`, text kinds → `MPI_CHAR`.
    pub datatype: c_int,
    /// Elements of `datatype` a handle reads or writes: 1, or [`TEXT_LEN`] for text.
    pub count: c_int,
    /// The enumeration of its values: [`BOOL_ENUM`] for booleans, none otherwise.
    pub enumtype: Option<usize>,
    /// `MPI_T_BIND_NO_OBJECT`.
    pub bind: c_int,
    /// `MPI_T_SCOPE_LOCAL`: each process reads its parameters at `MPI_Init`.
    pub scope: c_int,
}

/// A performance variable: one counter.
#[derive(Debug)]
pub struct Pvar {
    /// The counter's name (`pml_messages_sent`, `usnic_segments_resent`).
    pub name: &'static str,
    /// What it counts.
    pub desc: &'static str,
    /// The component that keeps it (`pml`, or the transport's name).
    pub component: &'static str,
    /// `MPI_T_VERBOSITY_USER_BASIC` for the engine's, `MPI_T_VERBOSITY_TUNER_BASIC` for a
    /// transport's.
    pub verbosity: c_int,
    /// `MPI_T_PVAR_CLASS_COUNTER`.
    pub class: c_int,
    /// `MPI_UNSIGNED_LONG_LONG`.
    pub datatype: c_int,
    /// `MPI_T_BIND_NO_OBJECT`.
    pub bind: c_int,
}

/// A category: one component's variables.
#[derive(Debug)]
pub struct Category {
    /// The component's name.
    pub name: &'static str,
    /// What `MPI_T_category_get_info` says.
    pub desc: String,
    /// Indices of its control variables.
    pub cvars: Vec<c_int>,
    /// Indices of its performance variables.
    pub pvars: Vec<c_int>,
}

/// An enumeration (`MPI_T_enum`): a name and (value, name) items.
#[derive(Debug)]
pub struct Enum {
    /// Its name.
    pub name: &'static str,
    /// Its items.
    pub items: &'static [(c_int, &'static str)],
}

/// The one enumeration: the values of boolean control variables.
pub const BOOL_ENUM: usize = 0;

/// Every enumeration, by number (an `MPI_T_enum` handle encodes the number).
pub const ENUMS: &[Enum] = &[Enum {
    name: "boolean",
    items: &[(0, "false"), (1, "true")],
}];

/// Every table.
#[derive(Debug)]
pub struct Catalog {
    /// Control variables by index.
    pub cvars: Vec<Cvar>,
    /// Performance variables by index.
    pub pvars: Vec<Pvar>,
    /// Categories by index.
    pub categories: Vec<Category>,
}

/// The tables of this build.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let mut counters: Vec<(&'static str, &'static kestrel_transport::btl::CounterSpec)> =
            kestrel_pml::engine::counters::COUNTERS
                .iter()
                .map(|c| ("pml", c))
                .collect();
        for c in kestrel::components::REGISTRY {
            counters.extend(c.counters().iter().map(|s| (c.name(), s)));
        }
        build(&kestrel::all_param_specs(), &counters)
    })
}

/// Builds the tables from parameter specs and (component, counter) pairs.
pub fn build(
    specs: &[&'static ParamSpec],
    counters: &[(&'static str, &'static kestrel_transport::btl::CounterSpec)],
) -> Catalog {
    let cvars: Vec<Cvar> = specs.iter().map(|&spec| cvar(spec)).collect();
    let pvars: Vec<Pvar> = counters
        .iter()
        .map(|&(component, c)| Pvar {
            name: c.name,
            desc: c.description,
            component,
            verbosity: if component == "pml" {
                VERBOSITY_USER_BASIC
            } else {
                VERBOSITY_TUNER_BASIC
            },
            class: PVAR_CLASS_COUNTER,
            datatype: UNSIGNED_LONG_LONG,
            bind: BIND_NO_OBJECT,
        })
        .collect();
    let mut categories: Vec<Category> = Vec::new();
    fn home<'a>(categories: &'a mut Vec<Category>, name: &'static str) -> &'a mut Category {
        let i = match categories.iter().position(|c| c.name == name) {
            Some(i) => i,
            None => {
                categories.push(Category {
                    name,
                    desc: String::new(),
                    cvars: Vec::new(),
                    pvars: Vec::new(),
                });
                categories.len() - 1
            }
        };
        &mut categories[i]
    }
    for (i, v) in cvars.iter().enumerate() {
        home(&mut categories, v.spec.component)
            .cvars
            .push(i as c_int);
    }
    for (i, v) in pvars.iter().enumerate() {
        home(&mut categories, v.component).pvars.push(i as c_int);
    }
    for c in &mut categories {
        c.desc = format!(
            "Kestrel component '{}': its parameters as control variables (kestrel-info \
             --component {}) and its counters as performance variables",
            c.name, c.name
        );
    }
    Catalog {
        cvars,
        pvars,
        categories,
    }
}

fn cvar(spec: &'static ParamSpec) -> Cvar {
    let (datatype, count, enumtype) = match spec.kind {
        ParamKind::Bool => (INT, 1, Some(BOOL_ENUM)),
        ParamKind::Int { .. } => (COUNT, 1, None),
        ParamKind::Size { .. } => (UNSIGNED_LONG_LONG, 1, None),
        ParamKind::Str | ParamKind::Choice(_) | ParamKind::Components(_) => {
            (CHAR, TEXT_LEN as c_int, None)
        }
    };
    let default = if spec.default.is_empty() {
        "empty".to_string()
    } else {
        format!("'{}'", spec.default)
    };
    let allowed = match spec.kind {
        ParamKind::Bool => "0 (false) or 1 (true)".to_string(),
        _ => spec.allowed(),
    };
    Cvar {
        spec,
        desc: format!(
            "{} Value: {allowed}; default {default}; also set by {} or kestrel-run --mca {}.",
            spec.description,
            spec.env_var(),
            spec.name
        ),
        verbosity: if USER_COMPONENTS.contains(&spec.component) {
            VERBOSITY_USER_BASIC
        } else {
            VERBOSITY_TUNER_BASIC
        },
        datatype,
        count,
        enumtype,
        bind: BIND_NO_OBJECT,
        scope: SCOPE_LOCAL,
    }
}
