//! Parameters that belong to the stack as a whole rather than to one transport.

use crate::components::Selection;
use crate::params::{Param, ParamKind, ParamSpec};

/// Every BTL Kestrel knows, in default order of preference.
pub const KNOWN_BTLS: &[&str] = &["self", "shm", "usnic", "ofi"];

/// `KESTREL_BTL`: which byte-transfer layers may carry messages.
pub static BTL: Param<Selection> = Param::new(ParamSpec {
    name: "btl",
    component: "btl",
    kind: ParamKind::Components(KNOWN_BTLS),
    default: "self,shm,usnic,ofi",
    description: "Transports to use: an include list (shm,self) or an exclude list (^usnic,ofi).",
});

/// `KESTREL_VERBOSE`: per-component log levels.
pub static VERBOSE: Param<String> = Param::new(ParamSpec {
    name: "verbose",
    component: "core",
    kind: ParamKind::Str,
    default: "",
    description: "Log filter: a level for all (debug) or per component (shm:debug,usnic:trace).",
});

/// `KESTREL_YIELD_WHEN_IDLE`: whether polling loops give up the CPU between polls.
pub static YIELD_WHEN_IDLE: Param<bool> = Param::new(ParamSpec {
    name: "yield_when_idle",
    component: "core",
    kind: ParamKind::Bool,
    default: "false",
    description: "Yield the CPU between empty progress polls; kestrel-run turns it on when ranks outnumber cores.",
});

/// The specs of this crate.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![BTL.spec(), VERBOSE.spec(), YIELD_WHEN_IDLE.spec()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        crate::params::check_specs(&super::specs()).unwrap();
    }
}
