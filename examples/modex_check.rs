//! Self-checking modex exercise: every rank publishes blobs of several sizes (including ones
//! that need several PMI values), reads every other rank's, runs allgathers and barriers (checking that no rank leaves a barrier
//! before the last one arrived), and
//! checks the node layout against `KESTREL_EXPECT_NODES` (comma list of node ids by rank) when
//! given. Exits non-zero on the first mismatch.

fn pattern(rank: u32, len: usize) -> Vec<u8> {
    (0..len).map(|i| (i as u32 * 31 + rank * 7) as u8).collect()
}

fn main() {
    let u = kestrel::init().unwrap_or_else(|e| kestrel::exit_with(&e));
    let (rank, size) = (u.rank(), u.size());
    let fail = |what: String| -> ! {
        eprintln!("modex_check: rank {rank}: {what}");
        std::process::exit(1)
    };
    let sizes = [0usize, 1, 100, 1000, 3000 + rank as usize];
    let mut rt = u.runtime();
    for (i, &len) in sizes.iter().enumerate() {
        rt.put(&format!("b{i}"), &pattern(rank, len))
            .unwrap_or_else(|e| fail(e.to_string()));
    }
    rt.fence().unwrap_or_else(|e| fail(e.to_string()));
    for peer in 0..size {
        for (i, &len) in sizes.iter().enumerate() {
            let len = if i == sizes.len() - 1 {
                3000 + peer as usize
            } else {
                len
            };
            match rt.get(peer, &format!("b{i}")) {
                Ok(Some(v)) if v == pattern(peer, len) => {}
                other => fail(format!(
                    "blob b{i} of rank {peer} is wrong: {:?}",
                    other.map(|o| o.map(|v| v.len()))
                )),
            }
        }
        if rt
            .get(peer, "never-published")
            .unwrap_or_else(|e| fail(e.to_string()))
            .is_some()
        {
            fail("a key nobody published was found".into());
        }
    }
    for round in 0..3u32 {
        let mine = format!("r{round}-{rank}").into_bytes();
        let all = rt.allgather(&mine).unwrap_or_else(|e| fail(e.to_string()));
        let want: Vec<Vec<u8>> = (0..size)
            .map(|r| format!("r{round}-{r}").into_bytes())
            .collect();
        if all != want {
            fail(format!("allgather round {round} gave {all:?}"));
        }
        rt.barrier().unwrap_or_else(|e| fail(e.to_string()));
    }
    // A barrier waits for the last rank: the last one arrives 200 ms late, and no rank may
    // leave before it arrived (hydra's PMI-2 fence alone let ranks through at once). Times
    // are compared across ranks: they share a clock on one host and across network
    // namespaces.
    let now_ns = || {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    };
    if rank == size - 1 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let arrived = now_ns();
    rt.barrier().unwrap_or_else(|e| fail(e.to_string()));
    let left = now_ns();
    let arrivals = rt
        .allgather(&arrived.to_le_bytes())
        .unwrap_or_else(|e| fail(e.to_string()));
    let last = arrivals
        .iter()
        .filter_map(|b| <[u8; 8]>::try_from(&b[..]).ok())
        .map(u64::from_le_bytes)
        .max()
        .unwrap_or(0);
    if left < last {
        fail(format!(
            "left the barrier {} us before the last rank arrived",
            (last - left) / 1000
        ));
    }
    let nodes = rt
        .node_ids()
        .unwrap_or_else(|e| fail(e.to_string()))
        .to_vec();
    if let Ok(expect) = std::env::var("KESTREL_EXPECT_NODES") {
        let want: Vec<String> = expect.split(',').map(String::from).collect();
        if nodes != want {
            fail(format!("node ids {nodes:?}, expected {want:?}"));
        }
    }
    let local = rt.local_ranks().unwrap_or_else(|e| fail(e.to_string()));
    let pmi = rt.pmi_kind();
    println!(
        "rank {rank} ok: size {size}, node {}, local ranks {local:?}, pmi {pmi}",
        u.node_id()
    );
    rt.barrier().unwrap_or_else(|e| fail(e.to_string()));
    if rank == 0 {
        println!("modex check passed on {size} ranks");
    }
}
