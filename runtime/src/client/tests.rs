//! The PMI clients against scripted servers on a socket pair: no launcher, no child process.

use std::io::{BufRead, BufReader, Read, Write};

use super::wire_client::PMI1_MAX_LINE;
use super::*;

/// A scripted PMI server: for each expected request prefix, the raw reply bytes.
fn serve(
    script: Vec<(&'static str, Vec<u8>)>,
) -> (UnixStream, std::thread::JoinHandle<Vec<String>>) {
    let (client, server) = UnixStream::pair().unwrap();
    let handle = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut reader = BufReader::new(server.try_clone().unwrap());
        let mut writer = server;
        for (expect, reply) in script {
            let mut line = String::new();
            if let Some(v2_expect) = expect.strip_prefix("v2:") {
                let mut len = [0u8; 6];
                reader.read_exact(&mut len).unwrap();
                let n: usize = String::from_utf8_lossy(&len).trim().parse().unwrap();
                let mut body = vec![0u8; n];
                reader.read_exact(&mut body).unwrap();
                line = String::from_utf8(body).unwrap();
                assert!(line.starts_with(v2_expect), "expected {expect}, got {line}");
            } else {
                reader.read_line(&mut line).unwrap();
                assert!(line.starts_with(expect), "expected {expect}, got {line}");
            }
            seen.push(line);
            writer.write_all(&reply).unwrap();
        }
        seen
    });
    (client, handle)
}

fn v2(body: &str) -> Vec<u8> {
    format!("{:6}{body}", body.len()).into_bytes()
}

#[test]
fn pmi1_session_against_a_scripted_server() {
    let (stream, server) = serve(vec![
        (
            "cmd=init pmi_version=1",
            b"cmd=response_to_init pmi_version=1 pmi_subversion=1 rc=0\n".to_vec(),
        ),
        (
            "cmd=get_maxes",
            b"cmd=maxes rc=0 kvsname_max=256 keylen_max=64 vallen_max=1024\n".to_vec(),
        ),
        (
            "cmd=get_my_kvsname",
            b"cmd=my_kvsname rc=0 kvsname=kvs_7\n".to_vec(),
        ),
        (
            "cmd=put kvsname=kvs_7 key=k value=v",
            b"cmd=put_result rc=0 msg=success\n".to_vec(),
        ),
        ("cmd=barrier_in", b"cmd=barrier_out\n".to_vec()),
        (
            "cmd=get kvsname=kvs_7 key=k",
            b"cmd=get_result rc=0 msg=success value=v\n".to_vec(),
        ),
        (
            "cmd=get kvsname=kvs_7 key=missing",
            b"cmd=get_result rc=-1 msg=key not found\n".to_vec(),
        ),
    ]);
    let mut c = WireClient::over_stream(
        Box::new(stream),
        "test".into(),
        PmiChoice::Pmi1,
        LaunchHints {
            rank: Some(2),
            size: Some(4),
            ..LaunchHints::default()
        },
    )
    .unwrap();
    assert_eq!(
        (c.kind(), c.rank(), c.size(), c.job_id()),
        ("pmi1", 2, 4, "kvs_7")
    );
    // A put of the largest value with the longest key still fits in one 1024-byte line.
    let line = "cmd=put kvsname=kvs_7 key= value=\n".len() + 64 + c.max_value_len();
    assert_eq!(line, PMI1_MAX_LINE);
    // A longer line is refused before it reaches the server (which would mangle it).
    let e = c.put("k", &"x".repeat(PMI1_MAX_LINE)).unwrap_err();
    assert!(
        e.to_string()
            .contains("'value' makes the PMI-1 request longer than the 1024"),
        "{e}"
    );
    c.put("k", "v").unwrap();
    c.fence().unwrap();
    assert_eq!(c.get(0, "k").unwrap().as_deref(), Some("v"));
    assert_eq!(c.get(0, "missing").unwrap(), None);
    server.join().unwrap();
}

#[test]
fn auto_negotiates_pmi2_and_uses_v2_framing() {
    let (stream, server) = serve(vec![
        (
            "cmd=init pmi_version=2",
            b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
        ),
        (
            "v2:cmd=fullinit;pmirank=1;",
            v2("cmd=fullinit-response;rc=0;rank=1;size=3;appnum=0;"),
        ),
        (
            "v2:cmd=job-getid;",
            v2("cmd=job-getid-response;rc=0;jobid=j9;"),
        ),
        (
            "v2:cmd=kvs-get;jobid=j9;srcid=0;key=a;",
            v2("cmd=kvs-get-response;rc=0;found=FALSE;"),
        ),
        (
            "v2:cmd=info-getjobattr;key=PMI_process_mapping;",
            v2("cmd=info-getjobattr-response;rc=0;found=TRUE;value=(vector,(0,1,3));"),
        ),
    ]);
    let mut c = WireClient::over_stream(
        Box::new(stream),
        "test".into(),
        PmiChoice::Auto,
        LaunchHints {
            rank: Some(1),
            ..LaunchHints::default()
        },
    )
    .unwrap();
    assert_eq!(
        (c.kind(), c.rank(), c.size(), c.job_id()),
        ("pmi2", 1, 3, "j9")
    );
    assert_eq!(c.get(0, "a").unwrap(), None);
    assert_eq!(
        c.job_attr("PMI_process_mapping").unwrap().as_deref(),
        Some("(vector,(0,1,3))")
    );
    server.join().unwrap();
}

#[test]
fn pmi2_handshake_as_slurms_plugin_wants_it() {
    // Slurm's pmi2 plugin refuses a fullinit without pmijobid, pmirank and threaded, and
    // answers with its own set of keys (appnum=-1, pmi-version...).
    let (stream, server) = serve(vec![
        (
            "cmd=init pmi_version=2 pmi_subversion=0",
            b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
        ),
        (
            "v2:cmd=fullinit;pmijobid=12.0;pmirank=1;threaded=FALSE;",
            v2(
                "cmd=fullinit-response;rc=0;pmi-version=2;pmi-subversion=0;rank=1;size=2;\
                appnum=-1;debugged=FALSE;pmiverbose=FALSE;",
            ),
        ),
        (
            "v2:cmd=job-getid;",
            v2("cmd=job-getid-response;rc=0;jobid=12.0;"),
        ),
        ("v2:cmd=kvs-fence;", v2("cmd=kvs-fence-response;rc=0;")),
        // The fence ends with a get of a key nobody puts (hydra holds it back until every
        // rank has fenced).
        (
            "v2:cmd=kvs-get;jobid=12.0;srcid=1;key=kestrel-fence-sync;",
            v2("cmd=kvs-get-response;rc=0;found=FALSE;"),
        ),
        ("v2:cmd=finalize;", v2("cmd=finalize-response;rc=0;")),
    ]);
    let mut c = WireClient::over_stream(
        Box::new(stream),
        "test".into(),
        PmiChoice::Auto,
        LaunchHints {
            rank: Some(1),
            size: Some(2),
            job: Some("12.0".into()),
            ..LaunchHints::default()
        },
    )
    .unwrap();
    assert_eq!(
        (c.kind(), c.rank(), c.size(), c.job_id()),
        ("pmi2", 1, 2, "12.0")
    );
    c.fence().unwrap();
    c.finalize().unwrap();
    server.join().unwrap();
}

#[test]
fn pmi2_name_service_and_spawn_against_a_scripted_server() {
    let (stream, server) = serve(vec![
        (
            "cmd=init pmi_version=2",
            b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
        ),
        (
            "v2:cmd=fullinit;",
            v2("cmd=fullinit-response;rc=0;rank=0;size=1;appnum=0;"),
        ),
        (
            "v2:cmd=job-getid;",
            v2("cmd=job-getid-response;rc=0;jobid=j;"),
        ),
        (
            "v2:cmd=name-publish;name=svc;port=kestrel-port:v1:127.0.0.1:5:1;",
            v2("cmd=name-publish-response;rc=0;"),
        ),
        (
            "v2:cmd=name-lookup;name=svc;",
            v2("cmd=name-lookup-response;rc=0;found=TRUE;value=P;"),
        ),
        (
            "v2:cmd=name-lookup;name=nope;",
            v2("cmd=name-lookup-response;rc=2;msg=nothing published;"),
        ),
        (
            "v2:cmd=name-publish;name=svc;",
            v2("cmd=name-publish-response;rc=1;msg=already published;"),
        ),
        (
            "v2:cmd=name-unpublish;name=svc;",
            v2("cmd=name-unpublish-response;rc=0;"),
        ),
        (
            "v2:cmd=spawn;ncmds=1;preputcount=0;subcmd=prog;maxprocs=3;argc=0;infokeycount=0;",
            v2("cmd=spawn-response;rc=0;jobid=child1;"),
        ),
    ]);
    let mut c = WireClient::over_stream(
        Box::new(stream),
        "test".into(),
        PmiChoice::Pmi2,
        LaunchHints {
            rank: Some(0),
            ..LaunchHints::default()
        },
    )
    .unwrap();
    c.publish_name("svc", "kestrel-port:v1:127.0.0.1:5:1")
        .unwrap();
    assert_eq!(c.lookup_name("svc").unwrap().as_deref(), Some("P"));
    assert_eq!(c.lookup_name("nope").unwrap(), None);
    let e = c.publish_name("svc", "x").unwrap_err();
    assert!(matches!(e, PmiError::Server { rc: 1, .. }), "{e}");
    c.unpublish_name("svc").unwrap();
    let job = c
        .spawn(
            &[SpawnRequest {
                program: "prog".into(),
                args: vec![],
                procs: 3,
                info: vec![],
            }],
            &[],
        )
        .unwrap();
    assert_eq!(job, "child1");
    server.join().unwrap();
}

#[test]
fn a_refusal_without_message_still_reads_as_a_sentence() {
    let (stream, server) = serve(vec![
        (
            "cmd=init pmi_version=2",
            b"cmd=response_to_init pmi_version=2 pmi_subversion=0 rc=0\n".to_vec(),
        ),
        (
            "v2:cmd=fullinit;",
            v2("cmd=fullinit-response;rc=3;rank=0;size=2;"),
        ),
    ]);
    let e = WireClient::over_stream(
        Box::new(stream),
        "x".into(),
        PmiChoice::Pmi2,
        LaunchHints::default(),
    )
    .unwrap_err();
    let text = e.to_string();
    assert!(
        text.contains("fullinit refused by the launcher (rc=3, no message;"),
        "{text}"
    );
    server.join().unwrap();
}

#[test]
fn auto_falls_back_to_pmi1_when_the_server_refuses_version_2() {
    let (stream, server) = serve(vec![
        (
            "cmd=init pmi_version=2",
            b"cmd=response_to_init rc=-1 pmi_version=1 pmi_subversion=1\n".to_vec(),
        ),
        (
            "cmd=init pmi_version=1",
            b"cmd=response_to_init rc=0 pmi_version=1 pmi_subversion=1\n".to_vec(),
        ),
        (
            "cmd=get_maxes",
            b"cmd=maxes rc=0 kvsname_max=256 keylen_max=32 vallen_max=512\n".to_vec(),
        ),
        (
            "cmd=get_my_kvsname",
            b"cmd=my_kvsname rc=0 kvsname=k\n".to_vec(),
        ),
    ]);
    let c = WireClient::over_stream(
        Box::new(stream),
        "test".into(),
        PmiChoice::Auto,
        LaunchHints {
            rank: Some(0),
            size: Some(1),
            ..LaunchHints::default()
        },
    )
    .unwrap();
    assert_eq!(
        (c.kind(), c.max_key_len(), c.max_value_len()),
        ("pmi1", 32, 512)
    );
    server.join().unwrap();
}

#[test]
fn malformed_server_lines_are_errors_naming_the_line() {
    let (stream, server) = serve(vec![("cmd=init", b"hello there\n".to_vec())]);
    let e = WireClient::over_stream(
        Box::new(stream),
        "PMI_FD=9".into(),
        PmiChoice::Pmi1,
        LaunchHints::default(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("'hello there'") && msg.contains("during init"),
        "{msg}"
    );
    server.join().unwrap();

    let (stream, server) = serve(vec![
        (
            "cmd=init",
            b"cmd=response_to_init pmi_version=1 rc=0\n".to_vec(),
        ),
        (
            "cmd=get_maxes",
            b"cmd=maxes rc=0 keylen_max=sixty vallen_max=1024\n".to_vec(),
        ),
    ]);
    let e = WireClient::over_stream(
        Box::new(stream),
        "PMI_FD=9".into(),
        PmiChoice::Pmi1,
        LaunchHints::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("keylen_max=sixty"), "{e}");
    server.join().unwrap();
}

#[test]
fn a_vanishing_server_is_an_io_error_naming_the_step_and_server() {
    let (stream, server) = serve(vec![]);
    server.join().unwrap();
    let e = WireClient::over_stream(
        Box::new(stream),
        "PMI_FD=9".into(),
        PmiChoice::Pmi1,
        LaunchHints::default(),
    )
    .unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("init failed") && msg.contains("PMI_FD=9"),
        "{msg}"
    );
}

#[test]
fn forcing_pmi2_on_a_pmi1_server_says_what_to_do() {
    let (stream, server) = serve(vec![(
        "cmd=init pmi_version=2",
        b"cmd=response_to_init rc=-1 pmi_version=1\n".to_vec(),
    )]);
    let e = WireClient::over_stream(
        Box::new(stream),
        "x".into(),
        PmiChoice::Pmi2,
        LaunchHints::default(),
    )
    .unwrap_err();
    assert!(e.to_string().contains("KESTREL_PMI=pmi1"), "{e}");
    server.join().unwrap();
}

#[test]
fn no_launcher_means_singleton_unless_a_client_is_forced() {
    let c = connect(PmiChoice::Auto, &|_| None).unwrap();
    assert_eq!((c.kind(), c.rank(), c.size()), ("singleton", 0, 1));
    let e = connect(PmiChoice::Pmi2, &|_| None).err().unwrap();
    assert!(e.to_string().contains("neither PMI_FD nor PMI_PORT"), "{e}");
    let e = connect(PmiChoice::Auto, &|v| {
        (v == "PMI_FD").then(|| "abc".to_string())
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("PMI_FD='abc'"), "{e}");
    let e = connect(PmiChoice::Auto, &|v| {
        (v == "PMI_FD").then(|| "987".to_string())
    })
    .err()
    .unwrap();
    assert!(e.to_string().contains("not open"), "{e}");
}

#[test]
fn several_srun_tasks_without_pmi_fail_instead_of_running_alone() {
    let srun = |var: &str| {
        match var {
            "SLURM_JOB_ID" => Some("12"),
            "SLURM_STEP_ID" => Some("0"),
            "SLURM_PROCID" => Some("0"),
            "SLURM_STEP_NUM_TASKS" => Some("2"),
            "SLURM_MPI_TYPE" => Some("none"),
            _ => None,
        }
        .map(String::from)
    };
    let e = connect(PmiChoice::Auto, &srun).err().unwrap();
    assert!(matches!(e, PmiError::SrunWithoutPmi { .. }), "{e:?}");
    let text = e.to_string();
    assert!(
        text.contains("srun --mpi=pmi2 -n 2 ") && text.contains("Slurm step 12.0"),
        "{text}"
    );
    // Forcing the singleton is the way out for tasks that are meant to run alone.
    let c = connect(PmiChoice::Singleton, &srun).unwrap();
    assert_eq!(c.kind(), "singleton");
    // One task of a step is a genuine singleton.
    let one = |var: &str| {
        if var == "SLURM_STEP_NUM_TASKS" {
            Some("1".to_string())
        } else {
            srun(var)
        }
    };
    assert_eq!(connect(PmiChoice::Auto, &one).unwrap().kind(), "singleton");
}
