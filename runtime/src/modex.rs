//! The rank-side runtime: identity (rank, size, node), the modex (publish/lookup of byte blobs
//! through PMI), barrier, allgather and abort.
//!
//! Blobs are encoded as unpadded URL-safe base64 (no spaces, `=` or `;`, so both PMI framings
//! carry them) and split over several keys when longer than the server's value limit: the
//! first key holds `<chunks>|<data>`, the others `<key>#<i>`. Keys are prefixed with the
//! publishing rank because PMI's key space is job-wide.

use std::collections::HashMap;
use std::fmt;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine as _;
use kestrel_transport::params::Params;

use crate::client::{self, PmiChoice, PmiClient, PmiError};
/// Re-exported where it was first defined: the C library asks `modex::hostname`.
pub use crate::host::hostname;

/// Why a runtime operation failed.
#[derive(Debug)]
pub enum RuntimeError {
    /// The PMI layer failed.
    Pmi(PmiError),
    /// A published blob is malformed (another rank wrote garbage, or a key collision).
    BadBlob {
        /// The rank whose blob it is.
        rank: u32,
        /// The key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// A key is too long for the server.
    KeyTooLong {
        /// The key.
        key: String,
        /// Its length with our prefix.
        len: usize,
        /// The server's limit.
        max: usize,
    },
}

impl fmt::Display for RuntimeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuntimeError::Pmi(e) => write!(f, "{e}"),
            RuntimeError::BadBlob { rank, key, reason } => write!(
                f,
                "modex: the value rank {rank} published under '{key}' is malformed ({reason}); \
                 are two different programs or Kestrel versions in one job?"
            ),
            RuntimeError::KeyTooLong { key, len, max } => write!(
                f,
                "modex: key '{key}' is {len} bytes with its rank prefix, the PMI server allows {max}; \
                 use a shorter key"
            ),
        }
    }
}

impl std::error::Error for RuntimeError {}

impl From<PmiError> for RuntimeError {
    fn from(e: PmiError) -> Self {
        RuntimeError::Pmi(e)
    }
}

/// A rank's view of its job.
pub struct Runtime {
    pmi: Box<dyn PmiClient>,
    node_id: String,
    nodes: Option<Vec<String>>,
    allgather_round: u64,
    cache: HashMap<(u32, String), Vec<u8>>,
}

impl fmt::Debug for Runtime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Runtime")
            .field("pmi", &self.pmi.kind())
            .field("rank", &self.pmi.rank())
            .field("size", &self.pmi.size())
            .field("node_id", &self.node_id)
            .finish()
    }
}

const NODE_KEY: &str = "node";

/// How long an aborting rank waits for its launcher to stop it before it exits by itself.
const ABORT_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

impl Runtime {
    /// Connects to the launcher chosen by the `pmi` parameter and the environment, publishes
    /// this rank's node id and fences once, so that every rank can find every other's node.
    pub fn init(params: &Params) -> Result<Runtime, RuntimeError> {
        let choice = PmiChoice::from_word(&crate::params::PMI.get(params));
        let lookup = |v: &str| std::env::var(v).ok();
        let pmi = client::connect(choice, &lookup)?;
        // Launchers that know better say so (kestrel-run: KESTREL_NODE_ID; srun: its node
        // name); otherwise ranks on one host share memory.
        let node_id = lookup("KESTREL_NODE_ID")
            .filter(|n| !n.is_empty())
            .or_else(|| crate::slurm::direct_launch_node(&lookup))
            .unwrap_or_else(hostname);
        let rt = Self::with_client(pmi, node_id)?;
        // kestrel-run's agent reads it for hang reports (--timeout, SIGUSR1).
        if let Some(dir) = lookup("KESTREL_SESSION_DIR").filter(|d| !d.is_empty()) {
            crate::wait_board::open(std::path::Path::new(&dir), rt.rank());
        }
        Ok(rt)
    }

    /// Builds a runtime over an existing client (tests, embedding).
    pub fn with_client(pmi: Box<dyn PmiClient>, node_id: String) -> Result<Runtime, RuntimeError> {
        tracing::debug!(target: "pmi", kind = pmi.kind(), rank = pmi.rank(), size = pmi.size(), job = pmi.job_id(), "connected");
        let mut rt = Runtime {
            pmi,
            node_id,
            nodes: None,
            allgather_round: 0,
            cache: HashMap::new(),
        };
        let node = rt.node_id.clone();
        rt.put(NODE_KEY, node.as_bytes())?;
        rt.fence()?;
        Ok(rt)
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.pmi.rank()
    }

    /// Ranks in the job.
    pub fn size(&self) -> u32 {
        self.pmi.size()
    }

    /// The job id (PMI KVS name).
    pub fn job_id(&self) -> &str {
        self.pmi.job_id()
    }

    /// This rank's node id: ranks with equal ids share memory.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }

    /// `pmi1`, `pmi2` or `singleton`.
    pub fn pmi_kind(&self) -> &'static str {
        self.pmi.kind()
    }

    /// The node id of every rank, indexed by rank (read once, then cached).
    pub fn node_ids(&mut self) -> Result<&[String], RuntimeError> {
        if self.nodes.is_none() {
            let mut nodes = Vec::with_capacity(self.size() as usize);
            for r in 0..self.size() {
                let bytes = self.get(r, NODE_KEY)?.unwrap_or_default();
                nodes.push(String::from_utf8_lossy(&bytes).into_owned());
            }
            self.nodes = Some(nodes);
        }
        Ok(self.nodes.as_deref().unwrap_or(&[]))
    }

    /// Ranks on this rank's node, in rank order.
    pub fn local_ranks(&mut self) -> Result<Vec<u32>, RuntimeError> {
        let me = self.node_id.clone();
        Ok(self
            .node_ids()?
            .iter()
            .enumerate()
            .filter(|(_, n)| **n == me)
            .map(|(r, _)| r as u32)
            .collect())
    }

    fn full_key(&self, rank: u32, key: &str, chunk: usize) -> Result<String, RuntimeError> {
        let k = if chunk == 0 {
            format!("{rank}/{key}")
        } else {
            format!("{rank}/{key}#{chunk}")
        };
        if k.len() > self.pmi.max_key_len() {
            return Err(RuntimeError::KeyTooLong {
                key: key.into(),
                len: k.len(),
                max: self.pmi.max_key_len(),
            });
        }
        Ok(k)
    }

    /// Publishes `value` under `key`; visible to other ranks after the next [`Runtime::fence`].
    pub fn put(&mut self, key: &str, value: &[u8]) -> Result<(), RuntimeError> {
        let encoded = URL_SAFE_NO_PAD.encode(value);
        // Leave room for the "<chunks>|" header of the first value.
        let room = self.pmi.max_value_len().saturating_sub(12).max(16);
        let chunks: Vec<&str> = if encoded.is_empty() {
            vec![""]
        } else {
            encoded
                .as_bytes()
                .chunks(room)
                .map(|c| std::str::from_utf8(c).unwrap_or(""))
                .collect()
        };
        let me = self.rank();
        for (i, chunk) in chunks.iter().enumerate() {
            let k = self.full_key(me, key, i)?;
            let v = if i == 0 {
                format!("{}|{chunk}", chunks.len())
            } else {
                chunk.to_string()
            };
            self.pmi.put(&k, &v)?;
        }
        self.cache.insert((me, key.to_string()), value.to_vec());
        Ok(())
    }

    /// Reads what `rank` published under `key` (`None` if it published nothing).
    pub fn get(&mut self, rank: u32, key: &str) -> Result<Option<Vec<u8>>, RuntimeError> {
        if let Some(v) = self.cache.get(&(rank, key.to_string())) {
            return Ok(Some(v.clone()));
        }
        let first_key = self.full_key(rank, key, 0)?;
        let Some(first) = self.pmi.get(rank, &first_key)? else {
            return Ok(None);
        };
        let bad = |reason: &str| RuntimeError::BadBlob {
            rank,
            key: key.into(),
            reason: reason.into(),
        };
        let (count, data) = first
            .split_once('|')
            .ok_or_else(|| bad("no chunk header"))?;
        let count: usize = count
            .parse()
            .map_err(|_| bad("chunk count is not a number"))?;
        if count == 0 || count > 1 << 16 {
            return Err(bad("chunk count out of range"));
        }
        let mut encoded = data.to_string();
        for i in 1..count {
            let k = self.full_key(rank, key, i)?;
            let part = self
                .pmi
                .get(rank, &k)?
                .ok_or_else(|| bad(&format!("chunk {i} of {count} is missing")))?;
            encoded.push_str(&part);
        }
        let value = URL_SAFE_NO_PAD
            .decode(encoded.as_bytes())
            .map_err(|e| bad(&format!("not base64: {e}")))?;
        self.cache.insert((rank, key.to_string()), value.clone());
        Ok(Some(value))
    }

    /// Collective: makes every earlier put visible to every rank.
    pub fn fence(&mut self) -> Result<(), RuntimeError> {
        // A fence blocks in a read of the launcher's socket, where no wait loop runs: say so
        // before (fences are rare and slow; one write of the record costs nothing beside one).
        crate::wait_board::stalled(true, || {
            "a fence through the launcher (PMI: MPI_Init, MPI_Finalize, connect/spawn, or a \
             runtime barrier)"
                .into()
        });
        let done = self.pmi.fence();
        crate::wait_board::resumed();
        done?;
        Ok(())
    }

    /// Collective: waits until every rank has arrived.
    pub fn barrier(&mut self) -> Result<(), RuntimeError> {
        self.fence()
    }

    /// Collective: every rank contributes a small blob and receives all of them, in rank order.
    pub fn allgather(&mut self, mine: &[u8]) -> Result<Vec<Vec<u8>>, RuntimeError> {
        let key = format!("ag{}", self.allgather_round);
        self.allgather_round += 1;
        self.put(&key, mine)?;
        self.fence()?;
        let mut all = Vec::with_capacity(self.size() as usize);
        for r in 0..self.size() {
            let v = self.get(r, &key)?.ok_or_else(|| RuntimeError::BadBlob {
                rank: r,
                key: key.clone(),
                reason: "missing after the fence".into(),
            })?;
            // Allgather blobs are read once: do not keep them in the cache.
            self.cache.remove(&(r, key.clone()));
            all.push(v);
        }
        Ok(all)
    }

    /// Asks the launcher to stop the whole job, then exits this process with `code` (0
    /// included: `MPI_Abort(comm, 0)` ends a job successfully under MPICH and Open MPI too).
    pub fn abort(&mut self, code: i32, message: &str) -> ! {
        match self.pmi.abort(code, message) {
            // The launcher now stops every rank. Leaving at once could let it see this rank
            // exit (with `code`, perhaps 0, and without finalizing) before the abort itself
            // and report that instead, so wait to be stopped, for a bounded time.
            Ok(()) if self.size() > 1 => std::thread::sleep(ABORT_WAIT),
            Ok(()) => {}
            Err(e) => eprintln!("kestrel: abort could not reach the launcher: {e}"),
        }
        std::process::exit(code);
    }

    /// Publishes `port` under `service` in the launcher's name service.
    pub fn publish_name(&mut self, service: &str, port: &str) -> Result<(), RuntimeError> {
        Ok(self.pmi.publish_name(service, port)?)
    }

    /// The port published under `service`, `None` when nothing is.
    pub fn lookup_name(&mut self, service: &str) -> Result<Option<String>, RuntimeError> {
        Ok(self.pmi.lookup_name(service)?)
    }

    /// Removes `service` from the name service.
    pub fn unpublish_name(&mut self, service: &str) -> Result<(), RuntimeError> {
        Ok(self.pmi.unpublish_name(service)?)
    }

    /// Asks the launcher to start a job running `cmds`; `preput` are key/values the
    /// children can read (the parent's port). Returns the new job's id.
    pub fn spawn(
        &mut self,
        cmds: &[crate::client::SpawnRequest],
        preput: &[(String, String)],
    ) -> Result<String, RuntimeError> {
        Ok(self.pmi.spawn(cmds, preput)?)
    }

    /// Tells the launcher this rank is done.
    pub fn finalize(&mut self) -> Result<(), RuntimeError> {
        self.pmi.finalize()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::client::Singleton;

    #[test]
    fn singleton_round_trips_blobs_of_any_size() {
        let mut rt = Runtime::with_client(Box::new(Singleton::new()), "n0".into()).unwrap();
        assert_eq!((rt.rank(), rt.size()), (0, 1));
        for len in [0usize, 1, 700, 5000] {
            let blob: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            rt.put("card", &blob).unwrap();
            rt.cache.clear();
            assert_eq!(rt.get(0, "card").unwrap().unwrap(), blob, "len {len}");
        }
        assert_eq!(rt.node_ids().unwrap(), ["n0".to_string()]);
        assert_eq!(rt.allgather(b"x").unwrap(), vec![b"x".to_vec()]);
        assert_eq!(rt.get(0, "nothing").unwrap(), None);
    }

    #[test]
    fn long_keys_are_refused_with_the_limit() {
        let mut rt = Runtime::with_client(Box::new(Singleton::new()), "n0".into()).unwrap();
        let e = rt.put(&"k".repeat(80), b"x").unwrap_err();
        assert!(e.to_string().contains("allows 64"), "{e}");
    }
}
