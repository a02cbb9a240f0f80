//! Parameters of the usnic transport.

use kestrel_transport::params::ParamSpec;

/// Every parameter this crate registers.
pub fn specs() -> Vec<&'static ParamSpec> {
    let mut specs = vec![];
    specs.extend(crate::reliable::config::specs());
    specs
}
