//! The node agent's PMI server: it answers its ranks' PMI-1 and PMI-2 commands, serving
//! node-local queries (init, maxes, names, node attributes, gets after a fence) itself and
//! combining its ranks' fences into one message to the head.
//!
//! It owns the agent side of the PMI vocabulary and the job's key space on this host. It never
//! starts or stops processes; a `spawn` request is handed to `spawned_jobs`.

use std::path::PathBuf;

use tokio::io::AsyncReadExt;
use tokio::sync::mpsc::UnboundedSender;

use super::{Agent, Event};
use crate::launcher::proto::{PmiState, ToHead};
use crate::wire::{Command, Framing};

impl Agent {
    fn reply(&mut self, rank: u32, mut cmd: Command, thrid: Option<&str>) {
        if let Some(t) = thrid {
            cmd = cmd.with("thrid", t);
        }
        let Some(slot) = self.slot(rank) else { return };
        match slot.framing.encode(&cmd) {
            Ok(bytes) => {
                if let Some(w) = &slot.writer {
                    let _ = w.send(bytes);
                }
            }
            Err(e) => tracing::error!(target: "pmi", rank, "cannot encode reply {cmd}: {e}"),
        }
    }

    pub(super) fn pmi(&mut self, rank: u32, cmd: Command) {
        tracing::trace!(target: "pmi", rank, "<- {cmd}");
        let thrid = cmd.get("thrid").map(String::from);
        let thrid = thrid.as_deref();
        let v2 = self
            .slot(rank)
            .map(|s| s.framing == Framing::V2)
            .unwrap_or(false);
        let job = self.launch.job_id.clone();
        let ok = |name: &str| Command::new(name).with("rc", "0");
        match cmd.name.as_str() {
            "init" => {
                let version = if cmd.get("pmi_version") == Some("2") {
                    "2"
                } else {
                    "1"
                };
                let sub = if version == "2" { "0" } else { "1" };
                let reply = Command::new("response_to_init")
                    .with("pmi_version", version)
                    .with("pmi_subversion", sub)
                    .with("rc", "0");
                self.reply(rank, reply, None);
                if let Some(slot) = self.slot(rank) {
                    slot.pmi = PmiState::Initialized;
                    if version == "2" {
                        slot.framing = Framing::V2;
                    }
                }
            }
            "initack" => {
                let reply = ok("initack");
                self.reply(rank, reply, None);
                let size = self.launch.size.to_string();
                self.reply(rank, Command::new("set").with("size", size), None);
                self.reply(
                    rank,
                    Command::new("set").with("rank", rank.to_string()),
                    None,
                );
                self.reply(rank, Command::new("set").with("debug", "0"), None);
            }
            "get_maxes" => {
                let reply = ok("maxes")
                    .with("kvsname_max", "256")
                    .with("keylen_max", "64")
                    .with("vallen_max", "1024");
                self.reply(rank, reply, None);
            }
            "get_appnum" => self.reply(rank, ok("appnum").with("appnum", "0"), None),
            "get_universe_size" => {
                let size = self.launch.size.to_string();
                self.reply(rank, ok("universe_size").with("size", size), None)
            }
            "get_my_kvsname" => self.reply(rank, ok("my_kvsname").with("kvsname", job), None),
            "get_rank" => self.reply(
                rank,
                ok("getrank_result").with("rank", rank.to_string()),
                None,
            ),
            "get_size" => {
                let size = self.launch.size.to_string();
                self.reply(rank, ok("getsize_result").with("size", size), None)
            }
            "fullinit" => {
                let reply = ok("fullinit-response")
                    .with("pmi-version", "2")
                    .with("pmi-subversion", "0")
                    .with("rank", rank.to_string())
                    .with("size", self.launch.size.to_string())
                    .with("appnum", "0")
                    .with("spawner-jobid", "")
                    .with("debugged", "FALSE")
                    .with("pmiverbose", "FALSE");
                self.reply(rank, reply, thrid);
            }
            "job-getid" => self.reply(rank, ok("job-getid-response").with("jobid", job), thrid),
            "put" | "kvs-put" => {
                match (cmd.get("key"), cmd.get("value")) {
                    (Some(k), Some(v)) => self.pending_puts.push((k.to_string(), v.to_string())),
                    _ => tracing::warn!(target: "pmi", rank, "put without key or value: {cmd}"),
                }
                let name = if v2 { "kvs-put-response" } else { "put_result" };
                self.reply(rank, ok(name), thrid);
            }
            "barrier_in" | "kvs-fence" => {
                if let Some(slot) = self.slot(rank) {
                    slot.in_fence = Some(thrid.map(String::from));
                }
                self.maybe_fence();
            }
            "get" => {
                let key = cmd.get("key").unwrap_or("");
                match self.lookup(key) {
                    Some(v) => self.reply(
                        rank,
                        ok("get_result").with("msg", "success").with("value", v),
                        None,
                    ),
                    None => {
                        let reply = Command::new("get_result")
                            .with("rc", "-1")
                            .with("msg", format!("key_{key}_not_found"));
                        self.reply(rank, reply, None)
                    }
                }
            }
            "kvs-get" => {
                let key = cmd.get("key").unwrap_or("");
                let reply = match self.lookup(key) {
                    Some(v) => ok("kvs-get-response")
                        .with("found", "TRUE")
                        .with("value", v),
                    None => ok("kvs-get-response").with("found", "FALSE"),
                };
                self.reply(rank, reply, thrid);
            }
            "info-getjobattr" => {
                let key = cmd.get("key").unwrap_or("");
                let reply = match self.job_attr(key) {
                    Some(v) => ok("info-getjobattr-response")
                        .with("found", "TRUE")
                        .with("value", v),
                    None => ok("info-getjobattr-response").with("found", "FALSE"),
                };
                self.reply(rank, reply, thrid);
            }
            "info-putnodeattr" => {
                if let (Some(k), Some(v)) = (cmd.get("key"), cmd.get("value")) {
                    self.node_attrs.insert(k.to_string(), v.to_string());
                    self.wake_attr_waiters(k);
                }
                self.reply(rank, ok("info-putnodeattr-response"), thrid);
            }
            "info-getnodeattr" => {
                let key = cmd.get("key").unwrap_or("").to_string();
                match self.node_attrs.get(&key).cloned() {
                    Some(v) => {
                        let reply = ok("info-getnodeattr-response")
                            .with("found", "TRUE")
                            .with("value", v);
                        self.reply(rank, reply, thrid)
                    }
                    None if cmd.get("wait") == Some("TRUE") => {
                        self.attr_waiters.push((rank, key, thrid.map(String::from)))
                    }
                    None => self.reply(
                        rank,
                        ok("info-getnodeattr-response").with("found", "FALSE"),
                        thrid,
                    ),
                }
            }
            "name-publish" | "publish_name" => {
                let service = cmd.get("name").or_else(|| cmd.get("service")).unwrap_or("");
                let port = cmd.get("port").unwrap_or("");
                let result = self.names().and_then(|r| {
                    r.publish(
                        service,
                        port,
                        &crate::dpm::names::Owner::this_process(&self.launch.job_id),
                    )
                });
                if result.is_ok() {
                    self.published.push((service.to_string(), port.to_string()));
                }
                let name = if v2 {
                    "name-publish-response"
                } else {
                    "publish_result"
                };
                self.reply(rank, name_reply(name, result.map(|()| None)), thrid);
            }
            "name-lookup" | "lookup_name" => {
                let service = cmd.get("name").or_else(|| cmd.get("service")).unwrap_or("");
                let result = self.names().and_then(|r| match r.lookup(service)? {
                    Some(port) => Ok(Some(port)),
                    None => Err(crate::dpm::NameError::NotPublished {
                        service: service.to_string(),
                    }),
                });
                let (name, key) = if v2 {
                    ("name-lookup-response", "value")
                } else {
                    ("lookup_result", "port")
                };
                let mut reply = name_reply(name, result.clone());
                if let Ok(Some(port)) = result {
                    reply = reply.with(key, port);
                }
                self.reply(rank, reply, thrid);
            }
            "name-unpublish" | "unpublish_name" => {
                let service = cmd.get("name").or_else(|| cmd.get("service")).unwrap_or("");
                let result = self.names().and_then(|r| r.unpublish(service, ""));
                self.published.retain(|(s, _)| s != service);
                let name = if v2 {
                    "name-unpublish-response"
                } else {
                    "unpublish_result"
                };
                self.reply(rank, name_reply(name, result.map(|()| None)), thrid);
            }
            "spawn" => {
                let reply = match crate::spawn_request::parse_spawn_command(&cmd) {
                    Ok((cmds, preput)) => match self.spawn_job(rank, &cmds, &preput) {
                        Ok(job) => ok("spawn-response").with("jobid", job),
                        Err(e) => {
                            eprintln!("kestrel-run: rank {rank} asked to spawn a job: {e}");
                            Command::new("spawn-response")
                                .with("rc", "1")
                                .with("errmsg", e.replace(';', ","))
                        }
                    },
                    Err(e) => Command::new("spawn-response").with("rc", "1").with(
                        "errmsg",
                        format!("malformed spawn request: {e}").replace(';', ","),
                    ),
                };
                self.reply(rank, reply, thrid);
            }
            "abort" => {
                let code = cmd
                    .get("exitcode")
                    .and_then(|c| c.parse().ok())
                    .unwrap_or(1);
                let message = cmd.get("message").unwrap_or("").to_string();
                let _ = self.to_head.send(ToHead::Abort {
                    rank,
                    code,
                    message,
                });
            }
            "finalize" => {
                if let Some(slot) = self.slot(rank) {
                    slot.pmi = PmiState::Finalized;
                }
                let name = if v2 {
                    "finalize-response"
                } else {
                    "finalize_ack"
                };
                self.reply(rank, ok(name), thrid);
            }
            other => {
                tracing::warn!(target: "pmi", rank, "unsupported PMI command {other}");
                let name = if v2 {
                    format!("{other}-response")
                } else {
                    format!("{other}_result")
                };
                let reply = Command::new(name)
                    .with("rc", "-1")
                    .with("msg", format!("kestrel-run does not support {other}"));
                self.reply(rank, reply, thrid);
            }
        }
    }

    /// The name registry of this job (the `dpm_name_dir` parameter as the job sees it).
    pub(super) fn names(&self) -> Result<crate::dpm::NameRegistry, crate::dpm::NameError> {
        let from_job = |var: &str| {
            self.launch
                .env
                .iter()
                .rev()
                .find(|(k, _)| k == var)
                .map(|(_, v)| v.clone())
        };
        let dir = ["KESTREL_MCA_DPM_NAME_DIR", "KESTREL_DPM_NAME_DIR"]
            .iter()
            .find_map(|v| from_job(v).or_else(|| std::env::var(v).ok()))
            .filter(|d| !d.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(crate::dpm::names::default_dir);
        crate::dpm::NameRegistry::open(dir)
    }

    fn lookup(&self, key: &str) -> Option<String> {
        self.kvs.get(key).cloned().or_else(|| self.job_attr(key))
    }

    fn job_attr(&self, key: &str) -> Option<String> {
        match key {
            "PMI_process_mapping" if !self.launch.process_mapping.is_empty() => {
                Some(self.launch.process_mapping.clone())
            }
            "universeSize" => Some(self.launch.size.to_string()),
            _ => None,
        }
    }

    fn wake_attr_waiters(&mut self, key: &str) {
        let Some(value) = self.node_attrs.get(key).cloned() else {
            return;
        };
        let waiters = std::mem::take(&mut self.attr_waiters);
        for (rank, k, thrid) in waiters {
            if k == key {
                let reply = Command::new("info-getnodeattr-response")
                    .with("rc", "0")
                    .with("found", "TRUE")
                    .with("value", value.clone());
                self.reply(rank, reply, thrid.as_deref());
            } else {
                self.attr_waiters.push((rank, k, thrid));
            }
        }
    }

    fn maybe_fence(&mut self) {
        if self.slots.iter().all(|s| s.in_fence.is_some()) {
            let puts = std::mem::take(&mut self.pending_puts);
            let _ = self.to_head.send(ToHead::Fence { puts });
        }
    }

    pub(super) fn fence_done(&mut self, puts: Vec<(String, String)>) {
        self.kvs.extend(puts);
        let waiting: Vec<(u32, Option<String>, Framing)> = self
            .slots
            .iter_mut()
            .filter_map(|s| s.in_fence.take().map(|t| (s.rank, t, s.framing)))
            .collect();
        for (rank, thrid, framing) in waiting {
            let reply = match framing {
                Framing::V1 => Command::new("barrier_out").with("rc", "0"),
                Framing::V2 => Command::new("kvs-fence-response").with("rc", "0"),
            };
            self.reply(rank, reply, thrid.as_deref());
        }
    }
}

/// The reply to a name-service request: `rc=0` (with `found=TRUE` for lookups), or the
/// error's class as `rc` and its text as `msg`/`errmsg`.
fn name_reply(name: &str, result: Result<Option<String>, crate::dpm::NameError>) -> Command {
    match result {
        Ok(found) => {
            let c = Command::new(name).with("rc", "0");
            if found.is_some() {
                c.with("found", "TRUE")
            } else {
                c
            }
        }
        Err(e) => {
            let text = e.to_string().replace(';', ",");
            Command::new(name)
                .with("rc", e.pmi_rc().to_string())
                .with("msg", text.clone())
                .with("errmsg", text)
        }
    }
}

pub(super) async fn read_pmi(
    mut read: tokio::net::unix::OwnedReadHalf,
    rank: u32,
    events: UnboundedSender<Event>,
) {
    let mut framing = Framing::V1;
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut chunk = vec![0u8; 8192];
    loop {
        loop {
            match framing.decode(&buf) {
                Ok(Some((cmd, used))) => {
                    buf.drain(..used);
                    // After `init pmi_version=2` both sides switch to PMI-2 framing.
                    if cmd.name == "init" && cmd.get("pmi_version") == Some("2") {
                        framing = Framing::V2;
                    }
                    let _ = events.send(Event::Pmi(rank, cmd));
                }
                Ok(None) => break,
                Err(e) => {
                    let _ = events.send(Event::PmiBroken(
                        rank,
                        format!("{e}; closing its PMI connection"),
                    ));
                    return;
                }
            }
        }
        match read.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
