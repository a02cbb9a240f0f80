//! The client of a process started without a launcher: a job of one rank.
//!
//! It owns the rank's own key space (what it puts, it gets back) and serves the name service
//! from the registry directory itself, so that a singleton server and clients under
//! `kestrel-run` still find each other. It must never pretend to be part of a larger job: its
//! rank is 0 and its size 1, always.

use std::collections::HashMap;

use super::{PmiClient, PmiError};

/// A process started without a launcher.
#[derive(Debug, Default)]
pub struct Singleton {
    kvs: HashMap<String, String>,
    job_id: String,
}

impl Singleton {
    /// A size-1 job named after this process.
    pub fn new() -> Self {
        Singleton {
            kvs: HashMap::new(),
            job_id: format!("singleton-{}", std::process::id()),
        }
    }
}

impl PmiClient for Singleton {
    fn kind(&self) -> &'static str {
        "singleton"
    }
    fn rank(&self) -> u32 {
        0
    }
    fn size(&self) -> u32 {
        1
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn max_key_len(&self) -> usize {
        64
    }
    fn max_value_len(&self) -> usize {
        1024
    }
    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        self.kvs.insert(key.into(), value.into());
        Ok(())
    }
    fn fence(&mut self) -> Result<(), PmiError> {
        Ok(())
    }
    fn get(&mut self, _src: u32, key: &str) -> Result<Option<String>, PmiError> {
        Ok(self.kvs.get(key).cloned())
    }
    fn job_attr(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        Ok(match key {
            "PMI_process_mapping" => Some("(vector,(0,1,1))".into()),
            _ => None,
        })
    }
    fn abort(&mut self, _code: i32, _message: &str) -> Result<(), PmiError> {
        Ok(())
    }
    fn finalize(&mut self) -> Result<(), PmiError> {
        Ok(())
    }
    // A process without a launcher serves its own names from the registry directory, so a
    // singleton server and clients under kestrel-run still find each other.
    fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        singleton_registry("publish_name")?
            .publish(
                service,
                port,
                &crate::dpm::names::Owner::this_process(&self.job_id),
            )
            .map_err(|e| name_error("publish_name", e))
    }
    fn lookup_name(&mut self, service: &str) -> Result<Option<String>, PmiError> {
        singleton_registry("lookup_name")?
            .lookup(service)
            .map_err(|e| name_error("lookup_name", e))
    }
    fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        singleton_registry("unpublish_name")?
            .unpublish(service, "")
            .map_err(|e| name_error("unpublish_name", e))
    }
}

fn singleton_registry(during: &str) -> Result<crate::dpm::NameRegistry, PmiError> {
    let dir = std::env::var("KESTREL_MCA_DPM_NAME_DIR")
        .or_else(|_| std::env::var("KESTREL_DPM_NAME_DIR"))
        .ok()
        .filter(|d| !d.is_empty())
        .map(std::path::PathBuf::from)
        .unwrap_or_else(crate::dpm::names::default_dir);
    crate::dpm::NameRegistry::open(dir).map_err(|e| name_error(during, e))
}

fn name_error(during: &str, e: crate::dpm::NameError) -> PmiError {
    PmiError::Server {
        during: during.to_string(),
        rc: e.pmi_rc(),
        msg: e.to_string(),
    }
}
