//! The `pmi_wire` fuzz target: the PMI-1 and PMI-2 codecs of [`crate::wire`].
//!
//! An input is a selector byte (bit 0: 0 = PMI-1 lines, 1 = PMI-2 frames) and a byte stream
//! as a PMI peer would send it. Checked: decoding never panics; every frame uses at least one
//! and at most the framing's largest frame of bytes; the stream decodes to the same commands
//! and the same end whether it arrives whole, in two pieces or byte by byte (see
//! `check_arrivals`); a decoded command that the same framing can encode decodes back
//! from that encoding to itself, using all of it and none of a prefix of it; a decoded PMI-2
//! `spawn` command that parses ([`crate::spawn_request`]) parses the same after being rebuilt.
//! That no count or length makes a decoder allocate more than the input justifies is checked
//! by the fuzz script's allocation limit (`ci/fuzz.sh`), which unit tests cannot impose.

use crate::spawn_request::{parse_spawn_command, spawn_command};
use crate::wire::{Command, Framing, MAX_FRAME};

use super::{check_arrivals, decode_arrivals};

/// The target's name (its corpus is `fuzz/corpus/pmi_wire`).
pub const TARGET: &str = "pmi_wire";

fn framing_of(selector: u8) -> Framing {
    if selector & 1 == 0 {
        Framing::V1
    } else {
        Framing::V2
    }
}

/// Runs one fuzz input. Panics only when a checked property is violated.
pub fn fuzz_one(data: &[u8]) {
    let Some((&selector, stream)) = data.split_first() else {
        return;
    };
    let framing = framing_of(selector);
    let decode = |b: &[u8]| framing.decode(b);
    let (commands, _) = decode_arrivals(&decode, stream, &[]);
    let largest = match framing {
        // The line and its newline.
        Framing::V1 => MAX_FRAME + 1,
        // The length field and the body.
        Framing::V2 => 6 + MAX_FRAME,
    };
    for (cmd, used) in &commands {
        assert!(*used <= largest, "a frame of {used} bytes was accepted");
        let _ = cmd.to_string();
        let _ = cmd.rc();
        round_trip(framing, cmd);
        // What the other framing makes of it only has to be an answer, not a panic.
        let other = if framing == Framing::V1 {
            Framing::V2
        } else {
            Framing::V1
        };
        let _ = other.encode(cmd).map(|b| other.decode(&b));
        if cmd.name == "spawn" {
            spawn_round_trip(cmd);
        }
    }
    check_arrivals(&decode, stream);
}

fn round_trip(framing: Framing, cmd: &Command) {
    let bytes = match framing.encode(cmd) {
        Ok(bytes) => bytes,
        Err(e) => {
            // Not every decoded command is representable (a key with an escaped space, say);
            // refusing it is the encoder's job, and its message must format.
            let _ = e.to_string();
            return;
        }
    };
    assert_eq!(
        framing.decode(&bytes),
        Ok(Some((cmd.clone(), bytes.len()))),
        "{framing:?} encoding {:?} does not decode back to the command",
        String::from_utf8_lossy(&bytes)
    );
    assert_eq!(
        framing.decode(&bytes[..bytes.len() - 1]),
        Ok(None),
        "a strict prefix of an encoding is not 'incomplete'"
    );
}

fn spawn_round_trip(cmd: &Command) {
    match parse_spawn_command(cmd) {
        Ok((cmds, preput)) => {
            let rebuilt = spawn_command(&cmds, &preput);
            assert_eq!(
                parse_spawn_command(&rebuilt),
                Ok((cmds, preput)),
                "a rebuilt spawn command parses differently"
            );
        }
        Err(e) => assert!(!e.is_empty()),
    }
}

/// The seed corpus: commands of both framings as clients and servers send them, streams of
/// several, partial frames, and the typical malformed ones, by file name (the first byte of
/// each selects the framing).
pub fn seed_corpus() -> Vec<(&'static str, Vec<u8>)> {
    let v1 = |bytes: &[u8]| [&[0u8][..], bytes].concat();
    let v2 = |bytes: &[u8]| [&[1u8][..], bytes].concat();
    // A PMI-2 frame around `body`, its length written as other implementations may.
    let v2_body = |zero_padded: bool, body: &str| {
        let len = if zero_padded {
            format!("{:06}", body.len())
        } else {
            format!("{:6}", body.len())
        };
        v2(format!("{len}{body}").as_bytes())
    };
    let enc = |framing: Framing, cmds: &[Command]| {
        let mut out = vec![if framing == Framing::V1 { 0 } else { 1 }];
        for c in cmds {
            match framing.encode(c) {
                Ok(b) => out.extend_from_slice(&b),
                Err(e) => panic!("seed does not encode: {e}"),
            }
        }
        out
    };
    let put = Command::new("put")
        .with("kvsname", "kestrel-1a2b")
        .with("key", "0/node")
        .with("value", "aGVsbG8gd29ybGQ");
    let spawn = spawn_command(
        &[crate::spawn_request::SpawnRequest {
            program: "/bin/echo".into(),
            args: vec!["a".into(), "b c".into()],
            procs: 2,
            info: vec![("wdir".into(), "/tmp".into())],
        }],
        &[("PARENT_ROOT_PORT_NAME".into(), "kestrel-port:v2:x".into())],
    );
    let kvs_put = Command::new("kvs-put")
        .with("key", "1/card")
        .with("value", "AAEC");
    let fullinit = Command::new("fullinit")
        .with("pmijobid", "kestrel-1")
        .with("pmirank", "0")
        .with("threaded", "FALSE");
    vec![
        ("v1_init", v1(b"cmd=init pmi_version=1 pmi_subversion=1\n")),
        (
            "v1_maxes",
            v1(b"cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n"),
        ),
        ("v1_put", enc(Framing::V1, std::slice::from_ref(&put))),
        (
            "v1_barrier_stream",
            enc(
                Framing::V1,
                &[
                    Command::new("barrier_in"),
                    Command::new("barrier_out").with("rc", "0"),
                    Command::new("finalize"),
                ],
            ),
        ),
        (
            "v1_escaped_value",
            enc(
                Framing::V1,
                &[Command::new("abort")
                    .with("exitcode", "3")
                    .with("message", r"disk full \ retry")],
            ),
        ),
        (
            "v1_unescaped_words_and_crlf",
            v1(b"cmd=get_result rc=-1 msg=key not found\r\n"),
        ),
        (
            "v1_mcmd_spawn",
            v1(b"mcmd=spawn nprocs=2 execname=/bin/true\n"),
        ),
        ("v1_line_then_partial", v1(b"cmd=barrier_out\ncmd=barr")),
        ("v1_empty_line", v1(b"\n")),
        ("v1_not_starting_with_cmd", v1(b"rc=0 cmd=x\n")),
        ("v1_bare_word", v1(b"hello\n")),
        ("v1_empty_command_name", v1(b"cmd= rc=0\n")),
        ("v1_not_utf8", v1(b"cmd=put value=\xff\xfe\n")),
        // Found by this target: the encoder wrote an escaped tab of a value or key unescaped,
        // and the decoder splits on tabs.
        ("v1_escaped_tab_in_value", v1(b"cmd=put value=a\\\tb\n")),
        ("v1_escaped_tab_in_key", v1(b"cmd=put a\\\tb=c\n")),
        // Found by this target: a value ending in a carriage return lost it on the way back,
        // the decoder taking it for half of a CRLF.
        (
            "v1_value_ending_in_carriage_return",
            v1(b"cmd=put value=v\r\r\n"),
        ),
        ("v2_fullinit", enc(Framing::V2, &[fullinit])),
        (
            "v2_kvs_stream",
            enc(
                Framing::V2,
                &[
                    kvs_put,
                    Command::new("kvs-fence"),
                    Command::new("kvs-fence-response").with("rc", "0"),
                ],
            ),
        ),
        ("v2_spawn", enc(Framing::V2, &[spawn])),
        (
            "v2_zero_padded_length",
            v2_body(true, "cmd=kvs-get;key=0/node;"),
        ),
        ("v2_empty_segments", v2_body(false, "cmd=finalize;;;;")),
        (
            "v2_no_final_semicolon",
            v2_body(false, "cmd=kvs-get;key=a=b"),
        ),
        ("v2_partial_length", v2(b"    2")),
        ("v2_partial_body", v2(b"    20cmd=kvs-fence;")),
        ("v2_length_not_a_number", v2(b"abcdefcmd=x;")),
        ("v2_first_segment_not_cmd", v2(b"     5x=1;;")),
        ("v2_empty_command_name", v2(b"     6cmd=;;")),
        ("v2_segment_without_equals", v2(b"     4cmd;")),
        ("v2_frame_too_long", v2(b"999999")),
        // Found by this target under `ci/fuzz.sh` (libFuzzer's -malloc_limit_mb=1): the
        // agent reserved 1.5 MiB for the arguments this 60-byte spawn command claims.
        (
            "v2_spawn_lying_count",
            v2_body(
                false,
                "cmd=spawn;ncmds=1;preputcount=0;subcmd=x;maxprocs=1;argc=65536;",
            ),
        ),
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
        let malformed = [
            "empty_line",
            "not_starting",
            "bare_word",
            "empty_command",
            "not_utf8",
            "not_a_number",
            "first_segment",
            "without_equals",
            "too_long",
        ];
        for (name, bytes) in seed_corpus() {
            let Some((&sel, stream)) = bytes.split_first() else {
                continue;
            };
            let framing = framing_of(sel);
            let (frames, end) = decode_arrivals(&|b: &[u8]| framing.decode(b), stream, &[]);
            let want = if malformed.iter().any(|m| name.contains(m)) {
                End::Malformed
            } else if name.contains("partial") {
                End::Incomplete(stream.len() - frames.iter().map(|f| f.1).sum::<usize>())
            } else {
                End::Incomplete(0)
            };
            assert_eq!(end, want, "{name}");
            assert!(name.contains("partial") || end == End::Malformed || !frames.is_empty());
        }
    }

    #[test]
    fn mutated_seeds_never_break_a_property() {
        let tokens: &[&[u8]] = &[
            b"cmd=", b"mcmd=", b" ", b"\t", b"\\", b"=", b";", b"\n", b"\r", b"000", b"spawn",
        ];
        fuzz_corpus::mutate_seeds(&seed_corpus(), 4000, 0x9111, 8, tokens, fuzz_one);
    }

    #[test]
    fn a_line_longer_than_the_largest_frame_is_refused_however_it_arrives() {
        let mut line = b"cmd=put value=".to_vec();
        line.resize(MAX_FRAME + 10, b'a');
        line.push(b'\n');
        assert!(
            Framing::V1.decode(&line).is_err(),
            "a whole long line decoded"
        );
        assert!(Framing::V1.decode(&line[..MAX_FRAME + 1]).is_err());
        let mut input = vec![0u8];
        input.extend_from_slice(&line);
        fuzz_one(&input);
    }
}
