//! Messages between the launcher (head) and its node agents, and their binary codec.
//!
//! The local node agent gets these values over in-process channels; remote daemons get the
//! same values encoded as frames over TCP: a 4-byte big-endian length, then a tag byte and the
//! fields. Integers are big-endian, strings and lists carry a 4-byte length. Decoding goes
//! through [`Reader`], which checks every length against what is left and rejects trailing
//! bytes, so a confused or hostile peer produces a [`DecodeError`], never a panic or an
//! oversized allocation.

/// Largest frame accepted: a launch message with a big environment fits easily.
pub const MAX_FRAME: usize = 16 << 20;

/// How a rank ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RankStatus {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
}

/// How far a rank got with PMI before it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PmiState {
    /// Never spoke PMI (not a Kestrel/MPI program, or died first).
    Unused,
    /// Initialized but did not finalize.
    Initialized,
    /// Finalized.
    Finalized,
}

/// What one node agent must run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeLaunch {
    /// The job id (also the PMI KVS name).
    pub job_id: String,
    /// Index of this host in the job's host list.
    pub host_index: u32,
    /// The host's name, which is also its node id.
    pub host_name: String,
    /// Ranks in the job.
    pub size: u32,
    /// Ranks this agent starts.
    pub ranks: Vec<u32>,
    /// `PMI_process_mapping` of the job.
    pub process_mapping: String,
    /// Program to run.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra environment for every rank (`-x`, `--mca`, launcher choices).
    pub env: Vec<(String, String)>,
    /// Bind each rank to `cpus_per_rank` cores.
    pub bind_cores: bool,
    /// Cores per rank when binding (`SLURM_CPUS_PER_TASK`).
    pub cpus_per_rank: u32,
    /// Prefix output lines with `[1,rank]<stdout>:`.
    pub tag_output: bool,
    /// SIGTERM-to-SIGKILL delay when stopping ranks.
    pub kill_grace_ms: u32,
    /// Give rank 0 the launcher's standard input (head-local agent only).
    pub forward_stdin: bool,
    /// Further programs (MPMD): from job rank `first`, ranks run `program` with `args`
    /// instead of the one above (the last entry whose `first` is not above the rank wins).
    pub more_apps: Vec<(u32, String, Vec<String>)>,
    /// The ranks' working directory; empty = the agent's own.
    pub wdir: String,
    /// The job's launch agent words (`ssh`, `ip netns exec`), for jobs its ranks spawn.
    pub launch_agent: String,
    /// Print each rank's cores on standard error as it starts (`--report-bindings`).
    pub report_bindings: bool,
}

impl NodeLaunch {
    /// The program and arguments job rank `rank` runs.
    pub fn app_of(&self, rank: u32) -> (&str, &[String]) {
        self.more_apps
            .iter()
            .rev()
            .find(|(first, _, _)| *first <= rank)
            .map(|(_, p, a)| (p.as_str(), a.as_slice()))
            .unwrap_or((self.program.as_str(), self.args.as_slice()))
    }
}

/// Agent → head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToHead {
    /// First message of a remote daemon.
    Hello {
        /// Which host it serves.
        host_index: u32,
        /// Its proof of the job's secret over the head's challenge
        /// ([`super::auth::JobSecret::proof`], role daemon).
        proof: Vec<u8>,
        /// Its own challenge, which the head answers in [`ToAgent::Welcome`].
        nonce: Vec<u8>,
        /// Identity of the machine (boot id), to detect hosts sharing cores.
        machine: String,
        /// CPUs this agent may use.
        cpus: u32,
    },
    /// A rank was started.
    Started {
        /// Rank.
        rank: u32,
        /// Its pid on the agent's host.
        pid: u32,
    },
    /// A rank could not be started.
    SpawnFailed {
        /// Rank.
        rank: u32,
        /// Why.
        error: String,
    },
    /// Every local rank entered the fence; these are their puts since the last fence.
    Fence {
        /// Key/value pairs.
        puts: Vec<(String, String)>,
    },
    /// A rank ended.
    Exited {
        /// Rank.
        rank: u32,
        /// Its pid.
        pid: u32,
        /// How.
        status: RankStatus,
        /// How far it got with PMI.
        pmi: PmiState,
    },
    /// A rank called abort.
    Abort {
        /// Rank.
        rank: u32,
        /// Requested exit code.
        code: i32,
        /// Its message.
        message: String,
    },
    /// The agent cleaned up and is leaving.
    Bye,
    /// The state of this host's running ranks, answering [`ToAgent::Report`].
    Report {
        /// One entry per running rank.
        ranks: Vec<RankReport>,
    },
}

/// What an agent knows about one running rank for a hang report.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankReport {
    /// Rank.
    pub rank: u32,
    /// Its pid on the agent's host.
    pub pid: u32,
    /// Its process state in a word (`running`, `sleeping`, `STOPPED`, `disk-wait`, `zombie`,
    /// `gone`).
    pub state: String,
    /// CPU time it used, in milliseconds.
    pub cpu_ms: u64,
    /// What its wait record says it waits for; empty without a record.
    pub waiting: String,
    /// How long that wait has been stalled, in milliseconds ([`NO_TIME`]: no record).
    pub stalled_ms: u64,
    /// How old the record is, in milliseconds ([`NO_TIME`]: no record).
    pub heard_ms: u64,
    /// Its threads' stacks, when asked for and a debugger was found; else empty.
    pub stack: String,
}

/// A time a [`RankReport`] does not have.
pub const NO_TIME: u64 = u64::MAX;

/// Head → agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToAgent {
    /// Start these ranks.
    Launch(Box<NodeLaunch>),
    /// Every host fenced: the merged puts of this round.
    FenceDone {
        /// Key/value pairs from all hosts.
        puts: Vec<(String, String)>,
    },
    /// Stop every rank (SIGTERM, then SIGKILL after the grace period).
    Kill,
    /// The job is over: clean up and leave.
    Shutdown,
    /// The head's first frame on a daemon connection: the nonce the daemon must prove the
    /// job's secret over.
    Challenge {
        /// Fresh random bytes ([`super::auth::NONCE_LEN`]).
        nonce: Vec<u8>,
    },
    /// The head accepted the daemon's proof and proves the secret in turn over the
    /// daemon's nonce (role head); the daemon trusts no other frame before it.
    Welcome {
        /// [`super::auth::JobSecret::proof`] over the daemon's nonce.
        proof: Vec<u8>,
    },
    /// Report the state of every running rank ([`ToHead::Report`]).
    Report {
        /// Add each rank's stacks (gdb or eu-stack, where installed).
        stacks: bool,
    },
}

use crate::codec::Writer;
pub use crate::codec::{DecodeError, Reader};

/// How launcher frames are named in decode errors.
const FRAME: &str = "launcher message";

fn bad(what: &'static str, reason: &'static str) -> DecodeError {
    DecodeError {
        frame: FRAME,
        what,
        reason,
    }
}

fn status_parts(s: RankStatus) -> (u8, i32) {
    match s {
        RankStatus::Code(c) => (0, c),
        RankStatus::Signal(n) => (1, n),
    }
}

fn pmi_byte(p: PmiState) -> u8 {
    match p {
        PmiState::Unused => 0,
        PmiState::Initialized => 1,
        PmiState::Finalized => 2,
    }
}

impl ToHead {
    /// Encodes a whole frame, length included.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            ToHead::Hello {
                host_index,
                proof,
                nonce,
                machine,
                cpus,
            } => {
                w.u8(1);
                w.u32(*host_index);
                w.bytes(proof);
                w.bytes(nonce);
                w.string(machine);
                w.u32(*cpus);
            }
            ToHead::Started { rank, pid } => {
                w.u8(2);
                w.u32(*rank);
                w.u32(*pid);
            }
            ToHead::SpawnFailed { rank, error } => {
                w.u8(3);
                w.u32(*rank);
                w.string(error);
            }
            ToHead::Fence { puts } => {
                w.u8(4);
                w.pairs(puts);
            }
            ToHead::Exited {
                rank,
                pid,
                status,
                pmi,
            } => {
                let (kind, value) = status_parts(*status);
                w.u8(5);
                w.u32(*rank);
                w.u32(*pid);
                w.u8(kind);
                w.i32(value);
                w.u8(pmi_byte(*pmi));
            }
            ToHead::Abort {
                rank,
                code,
                message,
            } => {
                w.u8(6);
                w.u32(*rank);
                w.i32(*code);
                w.string(message);
            }
            ToHead::Bye => {
                w.u8(7);
            }
            ToHead::Report { ranks } => {
                w.u8(8);
                w.u32(ranks.len() as u32);
                for r in ranks {
                    w.u32(r.rank);
                    w.u32(r.pid);
                    w.string(&r.state);
                    w.u64(r.cpu_ms);
                    w.string(&r.waiting);
                    w.u64(r.stalled_ms);
                    w.u64(r.heard_ms);
                    w.string(&r.stack);
                }
            }
        }
        w.into_frame()
    }

    /// Decodes a frame body (without the length prefix).
    pub fn decode(body: &[u8]) -> Result<ToHead, DecodeError> {
        let mut r = Reader::new(body, FRAME);
        let msg = match r.u8("message tag")? {
            1 => ToHead::Hello {
                host_index: r.u32("hello")?,
                proof: r.bytes("hello proof")?,
                nonce: r.bytes("hello nonce")?,
                machine: r.string("hello")?,
                cpus: r.u32("hello")?,
            },
            2 => ToHead::Started {
                rank: r.u32("started")?,
                pid: r.u32("started")?,
            },
            3 => ToHead::SpawnFailed {
                rank: r.u32("spawn failure")?,
                error: r.string("spawn failure")?,
            },
            4 => ToHead::Fence {
                puts: r.pairs("fence")?,
            },
            5 => {
                let rank = r.u32("exit")?;
                let pid = r.u32("exit")?;
                let status = match (r.u8("exit")?, r.i32("exit")?) {
                    (0, c) => RankStatus::Code(c),
                    (1, s) => RankStatus::Signal(s),
                    _ => return Err(bad("exit", "unknown status kind")),
                };
                let pmi = match r.u8("exit")? {
                    0 => PmiState::Unused,
                    1 => PmiState::Initialized,
                    2 => PmiState::Finalized,
                    _ => return Err(bad("exit", "unknown PMI state")),
                };
                ToHead::Exited {
                    rank,
                    pid,
                    status,
                    pmi,
                }
            }
            6 => ToHead::Abort {
                rank: r.u32("abort")?,
                code: r.i32("abort")?,
                message: r.string("abort")?,
            },
            7 => ToHead::Bye,
            8 => {
                // Each entry is at least 44 bytes (fixed fields and four length prefixes).
                let n = r.count("report", 44)?;
                let mut ranks = Vec::with_capacity(n);
                for _ in 0..n {
                    ranks.push(RankReport {
                        rank: r.u32("report rank")?,
                        pid: r.u32("report pid")?,
                        state: r.string("report state")?,
                        cpu_ms: r.u64("report cpu")?,
                        waiting: r.string("report wait")?,
                        stalled_ms: r.u64("report stall")?,
                        heard_ms: r.u64("report heartbeat")?,
                        stack: r.string("report stack")?,
                    });
                }
                ToHead::Report { ranks }
            }
            _ => return Err(bad("message tag", "unknown agent message")),
        };
        r.finish("agent message")?;
        Ok(msg)
    }
}

impl ToAgent {
    /// Encodes a whole frame, length included.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::new();
        match self {
            ToAgent::Launch(l) => {
                w.u8(1);
                w.string(&l.job_id);
                w.u32(l.host_index);
                w.string(&l.host_name);
                w.u32(l.size);
                w.u32s(&l.ranks);
                w.string(&l.process_mapping);
                w.string(&l.program);
                w.strings(&l.args);
                w.pairs(&l.env);
                w.bool(l.bind_cores);
                w.u32(l.cpus_per_rank);
                w.bool(l.tag_output);
                w.u32(l.kill_grace_ms);
                w.bool(l.forward_stdin);
                w.u32(l.more_apps.len() as u32);
                for (first, program, args) in &l.more_apps {
                    w.u32(*first);
                    w.string(program);
                    w.strings(args);
                }
                w.string(&l.wdir);
                w.string(&l.launch_agent);
                w.bool(l.report_bindings);
            }
            ToAgent::FenceDone { puts } => {
                w.u8(2);
                w.pairs(puts);
            }
            ToAgent::Kill => {
                w.u8(3);
            }
            ToAgent::Shutdown => {
                w.u8(4);
            }
            ToAgent::Challenge { nonce } => {
                w.u8(5);
                w.bytes(nonce);
            }
            ToAgent::Welcome { proof } => {
                w.u8(6);
                w.bytes(proof);
            }
            ToAgent::Report { stacks } => {
                w.u8(7);
                w.bool(*stacks);
            }
        }
        w.into_frame()
    }

    /// Decodes a frame body (without the length prefix).
    pub fn decode(body: &[u8]) -> Result<ToAgent, DecodeError> {
        let mut r = Reader::new(body, FRAME);
        let msg = match r.u8("message tag")? {
            1 => ToAgent::Launch(Box::new(NodeLaunch {
                job_id: r.string("launch")?,
                host_index: r.u32("launch")?,
                host_name: r.string("launch")?,
                size: r.u32("launch")?,
                ranks: r.u32s("launch ranks")?,
                process_mapping: r.string("launch")?,
                program: r.string("launch program")?,
                args: r.strings("launch args")?,
                env: r.pairs("launch env")?,
                bind_cores: r.bool("launch")?,
                cpus_per_rank: r.u32("launch")?,
                tag_output: r.bool("launch")?,
                kill_grace_ms: r.u32("launch")?,
                forward_stdin: r.bool("launch")?,
                more_apps: {
                    let n = r.count("launch apps", 12)?;
                    let mut apps = Vec::with_capacity(n);
                    for _ in 0..n {
                        apps.push((
                            r.u32("launch app")?,
                            r.string("launch app program")?,
                            r.strings("launch app args")?,
                        ));
                    }
                    apps
                },
                wdir: r.string("launch wdir")?,
                launch_agent: r.string("launch agent")?,
                report_bindings: r.bool("launch")?,
            })),
            2 => ToAgent::FenceDone {
                puts: r.pairs("fence done")?,
            },
            3 => ToAgent::Kill,
            4 => ToAgent::Shutdown,
            5 => ToAgent::Challenge {
                nonce: r.bytes("challenge")?,
            },
            6 => ToAgent::Welcome {
                proof: r.bytes("welcome")?,
            },
            7 => ToAgent::Report {
                stacks: r.bool("report request")?,
            },
            _ => return Err(bad("message tag", "unknown launcher message")),
        };
        r.finish("launcher message")?;
        Ok(msg)
    }
}

/// Splits the first complete frame off `buf`: `Ok(None)` if more bytes are needed.
pub fn split_frame(buf: &[u8]) -> Result<Option<(&[u8], usize)>, DecodeError> {
    let Some(len_bytes) = buf.get(..4) else {
        return Ok(None);
    };
    let len = u32::from_be_bytes([len_bytes[0], len_bytes[1], len_bytes[2], len_bytes[3]]) as usize;
    if len > MAX_FRAME {
        return Err(bad("frame length", "larger than 16 MiB"));
    }
    Ok(buf.get(4..4 + len).map(|body| (body, 4 + len)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn launch() -> NodeLaunch {
        NodeLaunch {
            job_id: "abc123".into(),
            host_index: 1,
            host_name: "h1".into(),
            size: 4,
            ranks: vec![2, 3],
            process_mapping: "(vector,(0,2,2))".into(),
            program: "/bin/echo".into(),
            args: vec!["a b".into(), String::new()],
            env: vec![("KESTREL_MCA_BTL".into(), "shm".into())],
            bind_cores: true,
            cpus_per_rank: 2,
            tag_output: false,
            kill_grace_ms: 1000,
            forward_stdin: false,
            more_apps: vec![(3, "/bin/true".into(), vec!["x".into()])],
            wdir: "/tmp".into(),
            launch_agent: "ip netns exec".into(),
            report_bindings: true,
        }
    }

    fn all_to_head() -> Vec<ToHead> {
        vec![
            ToHead::Hello {
                host_index: 3,
                proof: vec![7; 32],
                nonce: vec![9; 32],
                machine: "boot".into(),
                cpus: 2,
            },
            ToHead::Started { rank: 1, pid: 99 },
            ToHead::SpawnFailed {
                rank: 1,
                error: "ENOENT".into(),
            },
            ToHead::Fence {
                puts: vec![("0/node".into(), "1|aDA".into())],
            },
            ToHead::Exited {
                rank: 2,
                pid: 7,
                status: RankStatus::Signal(11),
                pmi: PmiState::Initialized,
            },
            ToHead::Abort {
                rank: 0,
                code: -3,
                message: "bad input".into(),
            },
            ToHead::Bye,
            ToHead::Report {
                ranks: vec![RankReport {
                    rank: 1,
                    pid: 77,
                    state: "STOPPED".into(),
                    cpu_ms: 1234,
                    waiting: "recv from source 0, tag 7".into(),
                    stalled_ms: 9000,
                    heard_ms: NO_TIME,
                    stack: "#0 main".into(),
                }],
            },
            ToHead::Report { ranks: vec![] },
        ]
    }

    fn all_to_agent() -> Vec<ToAgent> {
        vec![
            ToAgent::Launch(Box::new(launch())),
            ToAgent::FenceDone { puts: vec![] },
            ToAgent::Kill,
            ToAgent::Shutdown,
            ToAgent::Challenge { nonce: vec![1; 32] },
            ToAgent::Welcome { proof: vec![2; 32] },
            ToAgent::Report { stacks: true },
        ]
    }

    #[test]
    fn every_message_round_trips() {
        for m in all_to_head() {
            let frame = m.encode();
            let (body, used) = split_frame(&frame).unwrap().unwrap();
            assert_eq!(used, frame.len());
            assert_eq!(ToHead::decode(body).unwrap(), m);
        }
        for m in all_to_agent() {
            let frame = m.encode();
            let (body, _) = split_frame(&frame).unwrap().unwrap();
            assert_eq!(ToAgent::decode(body).unwrap(), m);
        }
    }

    #[test]
    fn truncated_mutated_and_padded_frames_are_errors_not_panics() {
        // (frame, whether it is a head-bound one): a cut frame must fail as its own kind;
        // decoding it as the other kind only must not panic.
        let frames: Vec<(Vec<u8>, bool)> = all_to_head()
            .iter()
            .map(|m| (m.encode(), true))
            .chain(all_to_agent().iter().map(|m| (m.encode(), false)))
            .collect();
        for (frame, to_head) in frames {
            let body = &frame[4..];
            for cut in 0..body.len() {
                let (head, agent) = (ToHead::decode(&body[..cut]), ToAgent::decode(&body[..cut]));
                if to_head {
                    assert!(head.is_err(), "a cut head-bound frame decoded");
                } else {
                    assert!(agent.is_err(), "a cut agent-bound frame decoded");
                }
            }
            let mut padded = body.to_vec();
            padded.push(0);
            if to_head {
                assert!(ToHead::decode(&padded).is_err());
                let _ = ToAgent::decode(&padded);
            } else {
                assert!(ToAgent::decode(&padded).is_err());
                let _ = ToHead::decode(&padded);
            }
            for i in 0..body.len() {
                let mut m = body.to_vec();
                m[i] ^= 0xff;
                let _ = ToHead::decode(&m);
                let _ = ToAgent::decode(&m);
            }
        }
    }

    #[test]
    fn lying_counts_and_lengths_are_rejected() {
        // A fence claiming 2^32-1 pairs in a 5-byte frame.
        let body = [4u8, 0xff, 0xff, 0xff, 0xff];
        assert!(ToHead::decode(&body).is_err());
        let huge = [0xffu8, 0xff, 0xff, 0xff, 0];
        assert!(split_frame(&huge).is_err());
        assert_eq!(split_frame(&[0, 0, 0, 9, 1]).unwrap(), None);
    }
}
