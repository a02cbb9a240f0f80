//! What each [`PmiClient`] operation sends, and expects back, in PMI-1 and in PMI-2.
//!
//! It owns the command vocabulary of both versions on the client side (the launcher's node
//! agent answers the same vocabulary). It never opens connections or negotiates versions.

use std::io::Write;
use std::time::Duration;

use super::wire_client::WireClient;
use super::{spawn_command, PmiClient, PmiError, SpawnRequest};
use crate::wire::{Command, Framing};

/// A key no rank puts: the PMI-2 fence ends with a get of it (see [`PmiClient::fence`]).
const FENCE_SYNC_KEY: &str = "kestrel-fence-sync";

impl PmiClient for WireClient {
    fn kind(&self) -> &'static str {
        match self.framing {
            Framing::V1 => "pmi1",
            Framing::V2 => "pmi2",
        }
    }
    fn rank(&self) -> u32 {
        self.rank
    }
    fn size(&self) -> u32 {
        self.size
    }
    fn job_id(&self) -> &str {
        &self.job_id
    }
    fn max_key_len(&self) -> usize {
        self.max_key
    }
    fn max_value_len(&self) -> usize {
        self.max_value
    }

    fn put(&mut self, key: &str, value: &str) -> Result<(), PmiError> {
        let during = format!("put {key}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("put")
                    .with("kvsname", self.job_id.clone())
                    .with("key", key)
                    .with("value", value);
                self.call(&during, cmd, "put_result")?;
            }
            Framing::V2 => {
                let cmd = Command::new("kvs-put")
                    .with("key", key)
                    .with("value", value);
                self.call(&during, cmd, "kvs-put-response")?;
            }
        }
        Ok(())
    }

    fn fence(&mut self) -> Result<(), PmiError> {
        match self.framing {
            Framing::V1 => {
                self.call("fence", Command::new("barrier_in"), "barrier_out")?;
            }
            Framing::V2 => {
                self.call("fence", Command::new("kvs-fence"), "kvs-fence-response")?;
                // Hydra answers kvs-fence at once: its fence only orders puts before gets, so
                // ranks would leave it before the last one arrived (every MPI_Finalize and
                // runtime barrier would not be one). It holds back a get of a missing key
                // until every rank has fenced, so such a get makes the fence the barrier the
                // trait promises. Slurm's and our servers fence for real and answer it at once.
                self.get(self.rank, FENCE_SYNC_KEY)?;
            }
        };
        Ok(())
    }

    fn get(&mut self, src: u32, key: &str) -> Result<Option<String>, PmiError> {
        let during = format!("get {key}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("get")
                    .with("kvsname", self.job_id.clone())
                    .with("key", key);
                self.send(&during, &cmd)?;
                let reply = self.recv(&during)?;
                if reply.name != "get_result" {
                    return Err(PmiError::Protocol {
                        during,
                        expected: "get_result".into(),
                        got: reply.to_string(),
                    });
                }
                // PMI-1 reports a missing key as an error code (or found=FALSE).
                if reply.rc().unwrap_or(-1) != 0 || reply.get("found") == Some("FALSE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, "value")?.to_string()))
            }
            Framing::V2 => {
                let cmd = Command::new("kvs-get")
                    .with("jobid", self.job_id.clone())
                    .with("srcid", src.to_string())
                    .with("key", key);
                let reply = self.call(&during, cmd, "kvs-get-response")?;
                if reply.get("found") != Some("TRUE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, "value")?.to_string()))
            }
        }
    }

    fn job_attr(&mut self, key: &str) -> Result<Option<String>, PmiError> {
        match self.framing {
            Framing::V1 => self.get(0, key),
            Framing::V2 => {
                let during = format!("job attribute {key}");
                let cmd = Command::new("info-getjobattr").with("key", key);
                let reply = self.call(&during, cmd, "info-getjobattr-response")?;
                if reply.get("found") != Some("TRUE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, "value")?.to_string()))
            }
        }
    }

    fn abort(&mut self, code: i32, message: &str) -> Result<(), PmiError> {
        // PMI-2 values cannot hold ';' and PMI-1 lines cannot hold newlines (nor end in a CR).
        let clean: String = message
            .chars()
            .map(|c| match c {
                ';' => ',',
                '\n' | '\r' => ' ',
                c => c,
            })
            .collect();
        let cmd = match self.framing {
            Framing::V1 => Command::new("abort")
                .with("exitcode", code.to_string())
                .with("message", clean),
            Framing::V2 => Command::new("abort")
                .with("isworld", "TRUE")
                .with("exitcode", code.to_string())
                .with("message", clean),
        };
        self.send("abort", &cmd)?;
        // Give the launcher a moment to act before the caller exits on its own.
        let _ = self.stream.flush();
        std::thread::sleep(Duration::from_millis(50));
        Ok(())
    }

    fn finalize(&mut self) -> Result<(), PmiError> {
        match self.framing {
            Framing::V1 => self.call("finalize", Command::new("finalize"), "finalize_ack")?,
            Framing::V2 => self.call("finalize", Command::new("finalize"), "finalize-response")?,
        };
        Ok(())
    }

    fn publish_name(&mut self, service: &str, port: &str) -> Result<(), PmiError> {
        let during = format!("publish_name {service}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("publish_name")
                    .with("service", service)
                    .with("port", port);
                self.call(&during, cmd, "publish_result")?
            }
            Framing::V2 => {
                let cmd = Command::new("name-publish")
                    .with("name", service)
                    .with("port", port);
                self.call(&during, cmd, "name-publish-response")?
            }
        };
        Ok(())
    }

    fn lookup_name(&mut self, service: &str) -> Result<Option<String>, PmiError> {
        let during = format!("lookup_name {service}");
        let (cmd, expect, value) = match self.framing {
            Framing::V1 => (
                Command::new("lookup_name").with("service", service),
                "lookup_result",
                "port",
            ),
            Framing::V2 => (
                Command::new("name-lookup").with("name", service),
                "name-lookup-response",
                "value",
            ),
        };
        match self.call(&during, cmd, expect) {
            Ok(reply) => {
                if reply.get("found") == Some("FALSE") {
                    return Ok(None);
                }
                Ok(Some(self.field(&during, &reply, value)?.to_string()))
            }
            Err(PmiError::Server {
                rc: crate::dpm::names::NOT_PUBLISHED_RC,
                ..
            }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn unpublish_name(&mut self, service: &str) -> Result<(), PmiError> {
        let during = format!("unpublish_name {service}");
        match self.framing {
            Framing::V1 => {
                let cmd = Command::new("unpublish_name").with("service", service);
                self.call(&during, cmd, "unpublish_result")?
            }
            Framing::V2 => {
                let cmd = Command::new("name-unpublish").with("name", service);
                self.call(&during, cmd, "name-unpublish-response")?
            }
        };
        Ok(())
    }

    fn spawn(
        &mut self,
        cmds: &[SpawnRequest],
        preput: &[(String, String)],
    ) -> Result<String, PmiError> {
        if self.framing != Framing::V2 {
            return Err(PmiError::Server {
                during: "spawn".into(),
                rc: -1,
                msg: "spawn needs PMI-2; set KESTREL_PMI=auto or pmi2".into(),
            });
        }
        let reply = self.call("spawn", spawn_command(cmds, preput), "spawn-response")?;
        Ok(reply.get("jobid").unwrap_or("").to_string())
    }
}
