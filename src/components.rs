//! The registry of transport components built into this Kestrel: the static list the
//! transport set opens components from, and whose parameters `kestrel-info` lists.
//!
//! Owns only the list; the components themselves live in their crates, and which of them a
//! job uses is the transport set's decision (`kestrel_transport::set`). Transports that need
//! a system library are behind a cargo feature (`usnic` and `ofi`: libfabric, on by default), so that
//! `cargo build --no-default-features` builds on a machine without it.

use kestrel_transport::component::{Component, SelfComponent};

/// Every component of this build, in the order the transport set considers them.
pub static REGISTRY: &[&dyn Component] = &[
    &SelfComponent,
    &kestrel_shm::ShmComponent,
    #[cfg(feature = "usnic")]
    &kestrel_usnic::component::UsnicComponent,
    #[cfg(feature = "ofi")]
    &kestrel_ofi::component::OfiComponent,
];

/// Lets every component undo what its system libraries changed in the process when they
/// loaded (see `Component::prepare_process`); the Rust and C start-ups call it first.
pub fn prepare_process() {
    for c in REGISTRY {
        c.prepare_process();
    }
}

/// [`REGISTRY`] as the engine takes it.
pub fn registry() -> &'static [&'static dyn Component] {
    REGISTRY
}

#[cfg(test)]
mod tests {
    use super::*;
    use kestrel_transport::core_params::KNOWN_BTLS;

    #[test]
    fn every_registered_component_is_a_known_btl_name_once() {
        let names = kestrel_transport::set::names(REGISTRY);
        for n in &names {
            assert!(KNOWN_BTLS.contains(n), "{n} is not in KNOWN_BTLS");
            assert_eq!(names.iter().filter(|m| *m == n).count(), 1, "{n} twice");
        }
        assert_eq!(names[0], "self");
        assert_eq!(names.contains(&"usnic"), cfg!(feature = "usnic"));
        assert_eq!(names.contains(&"ofi"), cfg!(feature = "ofi"));
    }

    /// The transport contract's conformance suite, against every component of this build:
    /// a new component is covered by being registered.
    #[test]
    fn every_registered_component_passes_the_conformance_suite() {
        let params = crate::Params::resolve(&crate::all_param_specs(), &|_| None, &[]).unwrap();
        let mut ran = Vec::new();
        for c in REGISTRY {
            if kestrel_transport::conformance::run_component(*c, &params, 3) {
                ran.push(c.name());
            }
        }
        // self and shm need nothing from the machine, so they always run; ofi's tcp provider
        // needs only an interface (loopback will do), so it runs wherever libfabric is.
        assert!(ran.contains(&"self") && ran.contains(&"shm"), "{ran:?}");
        assert_eq!(ran.contains(&"ofi"), cfg!(feature = "ofi"), "{ran:?}");
        // ofi again with RMA reads on (auto leaves them off over kernel TCP), so that its
        // gets that finish later meet the suite too.
        let rma_on = |name: &str| (name == "KESTREL_OFI_RMA").then(|| "on".to_string());
        let params = crate::Params::resolve(&crate::all_param_specs(), &rma_on, &[]).unwrap();
        for c in REGISTRY.iter().filter(|c| c.name() == "ofi") {
            assert!(kestrel_transport::conformance::run_component(
                *c, &params, 3
            ));
        }
    }
}
