//! What a rank asks its launcher to start (`MPI_Comm_spawn`, `MPI_Comm_spawn_multiple`), and
//! the PMI-2 `spawn` command that carries it.
//!
//! Both ends of the wire use this module: the client encodes a request, the launcher's node
//! agent decodes it, so neither has to depend on the other. It only converts between
//! [`SpawnRequest`]s and [`Command`]s; it never starts a process and never talks to a
//! launcher.

use crate::wire::Command;

/// One command of a spawn request (`MPI_Comm_spawn_multiple` has several).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpawnRequest {
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// How many processes run it.
    pub procs: u32,
    /// Info keys and values (`host`, `wdir`, `env`...).
    pub info: Vec<(String, String)>,
}

/// Encodes a spawn as the PMI-2 `spawn` command: header pairs, then per command `subcmd`,
/// `maxprocs`, `argc`, `argv0..`, `infokeycount`, `infokey0..`/`infoval0..`.
pub fn spawn_command(cmds: &[SpawnRequest], preput: &[(String, String)]) -> Command {
    let mut c = Command::new("spawn")
        .with("ncmds", cmds.len().to_string())
        .with("preputcount", preput.len().to_string());
    for (i, (k, v)) in preput.iter().enumerate() {
        c = c
            .with(format!("ppkey{i}"), k.as_str())
            .with(format!("ppval{i}"), v.as_str());
    }
    for cmd in cmds {
        c = c
            .with("subcmd", cmd.program.as_str())
            .with("maxprocs", cmd.procs.to_string())
            .with("argc", cmd.args.len().to_string());
        for (i, a) in cmd.args.iter().enumerate() {
            c = c.with(format!("argv{i}"), a.as_str());
        }
        c = c.with("infokeycount", cmd.info.len().to_string());
        for (i, (k, v)) in cmd.info.iter().enumerate() {
            c = c
                .with(format!("infokey{i}"), k.as_str())
                .with(format!("infoval{i}"), v.as_str());
        }
    }
    c
}

/// Decodes a PMI-2 `spawn` command (checked: counts must match the pairs that follow).
#[allow(clippy::type_complexity)]
pub fn parse_spawn_command(
    cmd: &Command,
) -> Result<(Vec<SpawnRequest>, Vec<(String, String)>), String> {
    let mut it = cmd.pairs.iter().filter(|(k, _)| k != "thrid").peekable();
    let mut next = |key: &str| -> Result<String, String> {
        match it.next() {
            Some((k, v)) if k == key => Ok(v.clone()),
            Some((k, _)) => Err(format!("expected '{key}', found '{k}'")),
            None => Err(format!("'{key}' is missing")),
        }
    };
    let count = |text: String, what: &str, max: usize| -> Result<usize, String> {
        text.parse::<usize>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("{what} '{text}' is not a number up to {max}"))
    };
    // Counts come from the rank: reserve room for no more items than the pairs that follow
    // could hold, so a 60-byte command cannot make the agent allocate megabytes.
    let room = |n: usize| n.min(cmd.pairs.len());
    let ncmds = count(next("ncmds")?, "ncmds", 1024)?;
    let npre = count(next("preputcount")?, "preputcount", 1024)?;
    let mut preput = Vec::with_capacity(room(npre));
    for i in 0..npre {
        let k = next(&format!("ppkey{i}"))?;
        let v = next(&format!("ppval{i}"))?;
        preput.push((k, v));
    }
    let mut cmds = Vec::with_capacity(room(ncmds));
    for _ in 0..ncmds {
        let program = next("subcmd")?;
        let procs = count(next("maxprocs")?, "maxprocs", 1 << 20)? as u32;
        let argc = count(next("argc")?, "argc", 1 << 16)?;
        let mut args = Vec::with_capacity(room(argc));
        for i in 0..argc {
            args.push(next(&format!("argv{i}"))?);
        }
        let ninfo = count(next("infokeycount")?, "infokeycount", 1 << 16)?;
        let mut info = Vec::with_capacity(room(ninfo));
        for i in 0..ninfo {
            let k = next(&format!("infokey{i}"))?;
            let v = next(&format!("infoval{i}"))?;
            info.push((k, v));
        }
        cmds.push(SpawnRequest {
            program,
            args,
            procs,
            info,
        });
    }
    if let Some((k, _)) = it.next() {
        return Err(format!("unexpected '{k}' after the last command"));
    }
    Ok((cmds, preput))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Framing;

    #[test]
    fn spawn_requests_round_trip_and_malformed_ones_are_refused() {
        let cmds = vec![
            SpawnRequest {
                program: "/bin/a".into(),
                args: vec!["x".into(), "y z".into()],
                procs: 2,
                info: vec![("wdir".into(), "/tmp".into()), ("env".into(), "A=1".into())],
            },
            SpawnRequest {
                program: "b".into(),
                args: vec![],
                procs: 1,
                info: vec![],
            },
        ];
        let preput = vec![("PARENT_ROOT_PORT_NAME".to_string(), "p".to_string())];
        let cmd = spawn_command(&cmds, &preput);
        // Through the PMI-2 wire and back.
        let bytes = Framing::V2.encode(&cmd).unwrap();
        let (decoded, _) = Framing::V2.decode(&bytes).unwrap().unwrap();
        assert_eq!(parse_spawn_command(&decoded).unwrap(), (cmds, preput));
        let cut = |n: usize| Command {
            name: "spawn".into(),
            pairs: cmd.pairs[..n].to_vec(),
        };
        for n in 0..cmd.pairs.len() {
            assert!(parse_spawn_command(&cut(n)).is_err(), "cut at {n}");
        }
        let mut extra = cmd.clone();
        extra.pairs.push(("junk".into(), "1".into()));
        assert!(parse_spawn_command(&extra)
            .unwrap_err()
            .contains("unexpected 'junk'"));
        let huge = Command::new("spawn")
            .with("ncmds", "99999999")
            .with("preputcount", "0");
        assert!(parse_spawn_command(&huge).unwrap_err().contains("ncmds"));
    }
}
