//! How the PMI-1/PMI-2 client starts a session: the `PMI_PORT` identification, the version
//! negotiation (PMI-2 when asked and offered, else PMI-1 in the same session), and learning
//! rank, size, job id and limits in the chosen version.
//!
//! It must never invent a rank or size: each comes from the launcher, through the environment
//! or a reply.

use super::wire_client::{LaunchHints, WireClient, PMI1_MAX_LINE};
use super::{PmiChoice, PmiError};
use crate::wire::{Command, Framing};

impl WireClient {
    pub(super) fn handshake(
        &mut self,
        choice: PmiChoice,
        hints: LaunchHints,
    ) -> Result<(), PmiError> {
        let mut port_rank = hints.rank;
        let mut port_size = hints.size;
        if let Some(id) = &hints.pmi_id {
            if choice != PmiChoice::Pmi2 {
                // PMI_PORT servers identify the client first and push size and rank.
                self.call(
                    "initack",
                    Command::new("initack").with("pmiid", id.as_str()),
                    "initack",
                )?;
                for _ in 0..3 {
                    let set = self.recv("initack")?;
                    match set.pairs.first() {
                        Some((k, v)) if k == "size" => port_size = v.parse().ok(),
                        Some((k, v)) if k == "rank" => port_rank = v.parse().ok(),
                        _ => {}
                    }
                }
            }
        }
        let want_v2 = matches!(choice, PmiChoice::Pmi2 | PmiChoice::Auto);
        let version = if want_v2 { "2" } else { "1" };
        let sub = if want_v2 { "0" } else { "1" };
        let init = Command::new("init")
            .with("pmi_version", version)
            .with("pmi_subversion", sub);
        self.send("init", &init)?;
        let reply = self.recv("init")?;
        if reply.name != "response_to_init" {
            return Err(PmiError::Protocol {
                during: "init".into(),
                expected: "response_to_init".into(),
                got: reply.to_string(),
            });
        }
        let rc = reply.rc().unwrap_or(-1);
        let server_version = reply.get("pmi_version").unwrap_or("1");
        let use_v2 = want_v2 && rc == 0 && server_version == "2";
        if choice == PmiChoice::Pmi2 && !use_v2 {
            return Err(PmiError::Server {
                during: "init".into(),
                rc,
                msg: format!(
                    "the server does not speak PMI-2 (it answered pmi_version={server_version}); \
                     set KESTREL_PMI=pmi1 or auto"
                ),
            });
        }
        if use_v2 {
            self.framing = Framing::V2;
            self.init_v2(hints)
        } else {
            if rc != 0 || server_version != "1" {
                // The server refused version 2; ask again for version 1 in the same session.
                self.call(
                    "init",
                    Command::new("init")
                        .with("pmi_version", "1")
                        .with("pmi_subversion", "1"),
                    "response_to_init",
                )?;
            }
            self.init_v1(port_rank, port_size)
        }
    }

    fn init_v1(
        &mut self,
        known_rank: Option<u32>,
        known_size: Option<u32>,
    ) -> Result<(), PmiError> {
        let maxes = self.call("get_maxes", Command::new("get_maxes"), "maxes")?;
        self.max_key = self.num("get_maxes", &maxes, "keylen_max")?;
        self.max_value = self.num("get_maxes", &maxes, "vallen_max")?;
        let kvs = self.call(
            "get_my_kvsname",
            Command::new("get_my_kvsname"),
            "my_kvsname",
        )?;
        self.job_id = self.field("get_my_kvsname", &kvs, "kvsname")?.to_string();
        // The largest put must fit in one request line together with the command, the KVS
        // name and the longest key.
        let put_overhead =
            "cmd=put kvsname= key= value=\n".len() + self.job_id.len() + self.max_key;
        self.max_value = self
            .max_value
            .min(PMI1_MAX_LINE.saturating_sub(put_overhead));
        // Rank and size come from the environment (PMI_RANK/PMI_SIZE) or the PMI_PORT initack;
        // old servers also answer get_rank/get_size, which we fall back to.
        self.rank = match known_rank {
            Some(r) => r,
            None => {
                let r = self.call("get_rank", Command::new("get_rank"), "getrank_result")?;
                self.num("get_rank", &r, "rank")?
            }
        };
        self.size = match known_size {
            Some(s) => s,
            None => {
                let s = self.call("get_size", Command::new("get_size"), "getsize_result")?;
                self.num("get_size", &s, "size")?
            }
        };
        Ok(())
    }

    fn init_v2(&mut self, hints: LaunchHints) -> Result<(), PmiError> {
        let mut full = Command::new("fullinit");
        // Slurm's pmi2 plugin refuses a fullinit without `pmijobid` (it hands out PMI_JOBID
        // for this); hydra sets no PMI_JOBID and ignores the key.
        if let Some(job) = &hints.job {
            full = full.with("pmijobid", job.trim());
        }
        // Hydra identifies PMI_PORT clients by `pmirank` even when it handed out PMI_ID, and
        // Slurm requires the key, so send the rank we know (PMI_RANK, else the id) and the id
        // when there is one.
        let rank_hint = hints
            .rank
            .map(|r| r.to_string())
            .or_else(|| hints.pmi_id.clone());
        if let Some(r) = rank_hint {
            full = full.with("pmirank", r);
        }
        if let Some(id) = hints.pmi_id {
            full = full.with("pmiid", id);
        }
        full = full.with("threaded", "FALSE");
        let reply = self.call("fullinit", full, "fullinit-response")?;
        self.rank = self.num("fullinit", &reply, "rank")?;
        self.size = self.num("fullinit", &reply, "size")?;
        let id = self.call("job-getid", Command::new("job-getid"), "job-getid-response")?;
        self.job_id = self.field("job-getid", &id, "jobid")?.to_string();
        self.max_key = 64;
        self.max_value = 1024;
        Ok(())
    }
}
