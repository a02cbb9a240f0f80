//! Parameters of the messaging layer.

use kestrel_transport::params::{Param, ParamKind, ParamSpec};

/// `KESTREL_PML_SPIN_BEFORE_YIELD`: empty polls before an idle wait yields the CPU.
pub static SPIN_BEFORE_YIELD: Param<i64> = Param::new(ParamSpec {
    name: "pml_spin_before_yield",
    component: "pml",
    kind: ParamKind::Int { min: 0, max: 1 << 30 },
    default: "64",
    description: "Empty progress polls a waiting rank spins before yielding the CPU (only when yield_when_idle is on).",
});

/// The specs of this crate.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![SPIN_BEFORE_YIELD.spec()]
}

#[cfg(test)]
mod tests {
    #[test]
    fn specs_are_well_formed() {
        kestrel_transport::params::check_specs(&super::specs()).unwrap();
    }
}
