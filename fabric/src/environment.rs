//! What libfabric reads from the environment when the process first calls into it: which
//! providers it may use (`FI_PROVIDER`) and provider defaults a transport chooses (for example
//! `FI_OFI_RXM_USE_SRX`). libfabric reads `FI_PROVIDER` once, at its initialisation inside the
//! first `fi_getinfo`; a provider filtered out there is never asked to list its devices or
//! open anything (its built-in initialiser still runs: libfabric's design).
//!
//! Transports request their providers and defaults before they open ([`request_providers`],
//! [`request_default`]); the first listing of interfaces applies the requests, once
//! ([`apply_before_first_use`]). Nothing requested means nothing set (tools such as
//! `kestrel-ifmatch` see every provider).
//!
//! This module owns the requests and their one-time application. It must never override the
//! user: a variable already in the environment wins, except an `FI_PROVIDER` that Kestrel set
//! itself in a parent process (spawned jobs inherit it), which it recognises by
//! [`FILTER_MARK_VAR`] and recomputes.

use std::sync::Mutex;

/// libfabric's provider filter: a comma-separated list of core provider names (utility
/// providers such as `ofi_rxm` layer over any core provider the filter allows).
pub const PROVIDER_VAR: &str = "FI_PROVIDER";

/// Holds the `FI_PROVIDER` value Kestrel set, so that a child process tells it from the user's.
pub const FILTER_MARK_VAR: &str = "KESTREL_FABRIC_PROVIDER_FILTER";

#[derive(Debug, Default)]
struct Requests {
    /// Core provider names, in request order, without repeats.
    providers: Vec<String>,
    /// Provider defaults: (variable, value), first request wins.
    defaults: Vec<(String, String)>,
    /// The process's first `fi_getinfo` ran: libfabric has read its environment.
    applied: bool,
}

static REQUESTS: Mutex<Requests> = Mutex::new(Requests {
    providers: Vec::new(),
    defaults: Vec::new(),
    applied: false,
});

/// The core provider of a provider name: `tcp` for `tcp;ofi_rxm`, `efa` for `efa`.
pub fn core_provider(name: &str) -> &str {
    name.split(';').next().unwrap_or(name).trim()
}

/// Asks that libfabric initialise the core providers of `names` (layered names such as
/// `verbs;ofi_rxm` count by their core provider). Once any transport asked, libfabric starts
/// with only the requested providers, unless the user set `FI_PROVIDER`.
pub fn request_providers<'a>(names: impl IntoIterator<Item = &'a str>) {
    let mut r = REQUESTS.lock().unwrap_or_else(|p| p.into_inner());
    for name in names {
        let core = core_provider(name);
        if core.is_empty() || r.providers.iter().any(|p| p == core) {
            continue;
        }
        if r.applied {
            tracing::debug!(
                target: "fabric",
                provider = core,
                "provider requested after libfabric started: the filter it started with stays"
            );
        }
        r.providers.push(core.to_string());
    }
}

/// Asks that `variable` be `value` when libfabric starts, unless the environment has it.
pub fn request_default(variable: &str, value: &str) {
    let mut r = REQUESTS.lock().unwrap_or_else(|p| p.into_inner());
    if r.defaults.iter().any(|(v, _)| v == variable) {
        return;
    }
    r.defaults.push((variable.to_string(), value.to_string()));
}

/// What applying the requests would set, given the environment `get` reads: (variable,
/// value) pairs. Pure, for the tests and for [`apply_before_first_use`].
fn settings(
    providers: &[String],
    defaults: &[(String, String)],
    get: &dyn Fn(&str) -> Option<String>,
) -> Vec<(String, String)> {
    let mut out = Vec::new();
    if !providers.is_empty() {
        let filter = providers.join(",");
        let user_set = match get(PROVIDER_VAR) {
            None => false,
            // Set by Kestrel in a parent process: ours to recompute.
            Some(v) => get(FILTER_MARK_VAR).as_deref() != Some(v.as_str()),
        };
        if !user_set {
            out.push((PROVIDER_VAR.to_string(), filter.clone()));
            out.push((FILTER_MARK_VAR.to_string(), filter));
        }
    }
    for (var, value) in defaults {
        if get(var).is_none() {
            out.push((var.clone(), value.clone()));
        }
    }
    out
}

/// Sets the requested variables in the environment, the first time it is called in the
/// process (the interface listings call it before their `fi_getinfo`).
pub(crate) fn apply_before_first_use() {
    let mut r = REQUESTS.lock().unwrap_or_else(|p| p.into_inner());
    if r.applied {
        return;
    }
    r.applied = true;
    let get = |v: &str| std::env::var(v).ok();
    for (var, value) in settings(&r.providers, &r.defaults, &get) {
        tracing::debug!(target: "fabric", variable = %var, value = %value, "libfabric environment");
        // Writing the environment races with C code reading it (getenv takes no lock) in
        // another thread. This runs inside MPI initialisation, before libfabric exists in the
        // process, as every MPI library sets its variables; Rust readers are serialised by
        // std's own environment lock.
        std::env::set_var(var, value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k: &str| map.get(k).cloned()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn core_providers_are_the_first_layer() {
        assert_eq!(core_provider("tcp;ofi_rxm"), "tcp");
        assert_eq!(core_provider("efa"), "efa");
        assert_eq!(core_provider("udp;ofi_rxd"), "udp");
    }

    #[test]
    fn the_filter_lists_the_requested_providers_and_marks_itself() {
        let set = settings(&strings(&["usnic", "udp", "tcp"]), &[], &env(&[]));
        assert_eq!(
            set,
            vec![
                (PROVIDER_VAR.into(), "usnic,udp,tcp".into()),
                (FILTER_MARK_VAR.into(), "usnic,udp,tcp".into())
            ]
        );
    }

    #[test]
    fn the_users_filter_wins_and_a_parents_is_recomputed() {
        let user = env(&[(PROVIDER_VAR, "verbs")]);
        assert!(settings(&strings(&["tcp"]), &[], &user).is_empty());
        let inherited = env(&[(PROVIDER_VAR, "udp"), (FILTER_MARK_VAR, "udp")]);
        assert_eq!(
            settings(&strings(&["tcp"]), &[], &inherited)[0],
            (PROVIDER_VAR.into(), "tcp".into())
        );
        // The user changed an inherited filter: theirs.
        let changed = env(&[(PROVIDER_VAR, "verbs"), (FILTER_MARK_VAR, "udp")]);
        assert!(settings(&strings(&["tcp"]), &[], &changed).is_empty());
    }

    #[test]
    fn defaults_apply_only_where_the_environment_is_silent() {
        let defaults = vec![("FI_OFI_RXM_USE_SRX".to_string(), "0".to_string())];
        assert_eq!(
            settings(&[], &defaults, &env(&[])),
            vec![("FI_OFI_RXM_USE_SRX".into(), "0".into())]
        );
        assert!(settings(&[], &defaults, &env(&[("FI_OFI_RXM_USE_SRX", "1")])).is_empty());
    }

    #[test]
    fn nothing_requested_sets_nothing() {
        assert!(settings(&[], &[], &env(&[])).is_empty());
    }
}
