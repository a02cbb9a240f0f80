//! The `launcher_frame` fuzz target: the frames between the launcher and its node daemons
//! ([`crate::launcher::proto`]).
//!
//! An input is a selector byte (bit 0: 0 = frames to the head, [`ToHead`]; 1 = frames to an
//! agent, [`ToAgent`]) and a byte stream as a daemon or the head would send it. Checked:
//! splitting frames never panics, never takes a frame longer than [`MAX_FRAME`] and takes the
//! same frames however the bytes arrive (`check_arrivals`); a body that decodes
//! re-encodes to exactly the frame it came in (the encoding is canonical), and its strict
//! prefixes do not decode; decoding it as the other direction does not panic either.

use crate::launcher::proto::{split_frame, ToAgent, ToHead, MAX_FRAME};

use super::{check_arrivals, decode_arrivals};

/// The target's name (its corpus is `fuzz/corpus/launcher_frame`).
pub const TARGET: &str = "launcher_frame";

fn split_owned(buf: &[u8]) -> Result<Option<(Vec<u8>, usize)>, crate::codec::DecodeError> {
    split_frame(buf).map(|front| front.map(|(body, used)| (body.to_vec(), used)))
}

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let to_head = selector & 1 == 0;
    let (frames, _) = decode_arrivals(&split_owned, stream, &[]);
    let mut at = 0;
    for (body, used) in &frames {
        assert_eq!(
            *used,
            4 + body.len(),
            "a frame is its length field and body"
        );
        assert!(body.len() <= MAX_FRAME, "a {}-byte body", body.len());
        let frame = &stream[at..at + used];
        at += used;
        if to_head {
            check_message(frame, body, ToHead::decode, ToHead::encode);
            let _ = ToAgent::decode(body);
        } else {
            check_message(frame, body, ToAgent::decode, ToAgent::encode);
            if let Ok(ToAgent::Launch(launch)) = ToAgent::decode(body) {
                for rank in [0, 1, launch.size, u32::MAX] {
                    let _ = launch.app_of(rank);
                }
            }
            let _ = ToHead::decode(body);
        }
    }
    check_arrivals(&split_owned, stream);
}

fn check_message<M: PartialEq + std::fmt::Debug>(
    frame: &[u8],
    body: &[u8],
    decode: fn(&[u8]) -> Result<M, crate::codec::DecodeError>,
    encode: fn(&M) -> Vec<u8>,
) {
    match decode(body) {
        Ok(msg) => {
            assert_eq!(encode(&msg), frame, "{msg:?} re-encodes differently");
            // Every field is length-checked and trailing bytes are refused, so no strict
            // prefix is the same message; the empty body and two cuts stand for all of them.
            for cut in [0, body.len() / 2, body.len() - 1] {
                assert!(
                    decode(&body[..cut]).is_err(),
                    "{msg:?} cut to {cut} bytes still decodes"
                );
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
}

/// The seed corpus: every message of both directions, a daemon's whole conversation, and the
/// typical ways a frame goes wrong, by file name (the first byte of each selects the
/// direction).
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    use crate::launcher::proto::{NodeLaunch, PmiState, RankReport, RankStatus, NO_TIME};
    let head = |msgs: &[ToHead]| {
        let mut out = vec![0u8];
        msgs.iter().for_each(|m| out.extend(m.encode()));
        out
    };
    let agent = |msgs: &[ToAgent]| {
        let mut out = vec![1u8];
        msgs.iter().for_each(|m| out.extend(m.encode()));
        out
    };
    let raw = |selector: u8, body: &[u8]| {
        let mut out = vec![selector];
        out.extend((body.len() as u32).to_be_bytes());
        out.extend_from_slice(body);
        out
    };
    let hello = ToHead::Hello {
        host_index: 3,
        proof: vec![7; 32],
        nonce: vec![9; 32],
        machine: "boot-id".into(),
        cpus: 2,
    };
    let exited = ToHead::Exited {
        rank: 2,
        pid: 7,
        status: RankStatus::Signal(11),
        pmi: PmiState::Initialized,
    };
    let launch = ToAgent::Launch(Box::new(NodeLaunch {
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
    }));
    let with_byte = |mut seed: Vec<u8>, at: usize, value: u8| {
        seed[at] = value;
        seed
    };
    let exited_seed = head(std::slice::from_ref(&exited));
    // A launch of empty fields whose first boolean (`bind_cores`) is 7.
    let launch_bad_bool = {
        let mut w = crate::codec::Writer::new();
        w.u8(1).string("").u32(0).string("").u32(0).u32s(&[]);
        w.string("").string("").strings(&[]).pairs(&[]).u8(7);
        w.into_vec()
    };
    let mut trailing = head(&[ToHead::Bye]);
    trailing[4] = 2;
    trailing.push(0);
    vec![
        ("head_hello", head(std::slice::from_ref(&hello))),
        (
            "head_started",
            head(&[ToHead::Started { rank: 1, pid: 99 }]),
        ),
        (
            "head_spawn_failed",
            head(&[ToHead::SpawnFailed {
                rank: 1,
                error: "ENOENT".into(),
            }]),
        ),
        (
            "head_fence",
            head(&[ToHead::Fence {
                puts: vec![
                    ("0/node".into(), "1|aDA".into()),
                    ("k".into(), String::new()),
                ],
            }]),
        ),
        ("head_exited", exited_seed.clone()),
        (
            "head_abort",
            head(&[ToHead::Abort {
                rank: 0,
                code: -3,
                message: "bad input".into(),
            }]),
        ),
        ("head_bye", head(&[ToHead::Bye])),
        (
            "head_report",
            head(&[ToHead::Report {
                ranks: vec![
                    RankReport {
                        rank: 0,
                        pid: 4242,
                        state: "STOPPED".into(),
                        cpu_ms: 1234,
                        waiting: "recv from source 1, tag 7, communicator context 0".into(),
                        stalled_ms: 3000,
                        heard_ms: 20,
                        stack: "#0 futex_wait".into(),
                    },
                    RankReport {
                        rank: 1,
                        pid: 4243,
                        state: "gone".into(),
                        cpu_ms: 0,
                        waiting: String::new(),
                        stalled_ms: NO_TIME,
                        heard_ms: NO_TIME,
                        stack: String::new(),
                    },
                ],
            }]),
        ),
        ("report_lying_count", raw(0, &[8, 0, 0, 0, 2, 0, 0, 0, 0])),
        (
            "head_conversation",
            head(&[
                hello,
                ToHead::Started { rank: 2, pid: 10 },
                ToHead::Fence { puts: vec![] },
                exited,
                ToHead::Bye,
            ]),
        ),
        ("agent_launch", agent(std::slice::from_ref(&launch))),
        (
            "agent_fence_done",
            agent(&[ToAgent::FenceDone {
                puts: vec![("1/card".into(), "AAEC".into())],
            }]),
        ),
        ("agent_kill", agent(&[ToAgent::Kill])),
        ("agent_report", agent(&[ToAgent::Report { stacks: true }])),
        ("agent_shutdown", agent(&[ToAgent::Shutdown])),
        (
            "agent_challenge",
            agent(&[ToAgent::Challenge { nonce: vec![1; 32] }]),
        ),
        (
            "agent_conversation",
            agent(&[
                ToAgent::Challenge { nonce: vec![1; 32] },
                ToAgent::Welcome { proof: vec![2; 32] },
                launch,
                ToAgent::FenceDone { puts: vec![] },
                ToAgent::Shutdown,
            ]),
        ),
        ("partial_length", vec![0, 0, 0, 1]),
        (
            "partial_body",
            head(&[ToHead::Bye, ToHead::Bye])[..8].to_vec(),
        ),
        // One byte over the 16 MiB limit.
        ("frame_too_long", vec![0, 0x01, 0x00, 0x00, 0x01]),
        ("empty_body", raw(0, &[])),
        ("unknown_tag", raw(0, &[99])),
        ("fence_lying_count", raw(0, &[4, 0xff, 0xff, 0xff, 0xff])),
        (
            "string_past_the_end",
            raw(0, &[3, 0, 0, 0, 1, 0, 0, 0, 9, b'a']),
        ),
        (
            "string_not_utf8",
            raw(0, &[3, 0, 0, 0, 1, 0, 0, 0, 2, 0xc3, 0x28]),
        ),
        ("bad_status_kind", with_byte(exited_seed.clone(), 14, 2)),
        ("bad_pmi_state", with_byte(exited_seed, 19, 3)),
        ("bad_boolean", raw(1, &launch_bad_bool)),
        ("trailing_byte", trailing),
        ("empty", vec![]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fuzzing::End;
    use kestrel_transport::fuzz_corpus;

    kestrel_transport::seed_corpus_tests!(super::super::corpus_dir(TARGET), seed_corpus, fuzz_one);

    #[test]
    fn seeds_decode_or_fail_as_named() {
        for (name, bytes) in seed_corpus() {
            let Some((&sel, stream)) = bytes.split_first() else {
                continue;
            };
            let (frames, end) = decode_arrivals(&split_owned, stream, &[]);
            if name.starts_with("partial") {
                assert!(
                    matches!(end, End::Incomplete(n) if n > 0),
                    "{name}: {end:?}"
                );
                continue;
            }
            if name == "frame_too_long" {
                assert_eq!(end, End::Malformed);
                continue;
            }
            assert_eq!(end, End::Incomplete(0), "{name}");
            let valid = name.starts_with("head_") || name.starts_with("agent_");
            for (body, _) in frames {
                let ok = if sel & 1 == 0 {
                    ToHead::decode(&body).is_ok()
                } else {
                    ToAgent::decode(&body).is_ok()
                };
                assert_eq!(ok, valid, "{name}");
            }
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[
            &[0, 0, 0, 0],
            &[0xff, 0xff, 0xff, 0xff],
            &[0, 0, 0, 1],
            &[1],
        ];
        fuzz_corpus::mutate_seeds(&seed_corpus(), 4000, 0x1a0c, 16, tokens, fuzz_one);
    }
}
