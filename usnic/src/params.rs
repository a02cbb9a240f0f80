//! Parameters of the usnic transport.

use kestrel_transport::params::ParamSpec;

/// Every parameter this crate registers.
pub fn specs() -> Vec<&'static ParamSpec> {
    vec![]
}
