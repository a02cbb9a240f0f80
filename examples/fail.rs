//! Misbehaving ranks for the launcher's failure tests: `fail abort CODE` (rank 1 aborts the
//! job), `fail early-exit` (rank 1 leaves without finalizing while the others wait in a
//! barrier), `fail spin` (every rank runs barriers forever, through the node's collective
//! segment: for tests that kill the launcher).

fn main() {
    let mut u = kestrel::init().unwrap_or_else(|e| kestrel::exit_with(&e));
    let mode = std::env::args().nth(1).unwrap_or_default();
    let rank = u.rank();
    match mode.as_str() {
        "abort" => {
            let code = std::env::args()
                .nth(2)
                .and_then(|c| c.parse().ok())
                .unwrap_or(1);
            if rank == 1 {
                u.abort(code, "rank 1 found inconsistent input");
            }
            let _ = u.barrier();
        }
        "early-exit" => {
            if rank == 1 {
                // Skips finalize: the launcher must not let the others wait forever.
                std::process::exit(0);
            }
            let _ = u.barrier();
        }
        "spin" => loop {
            if u.barrier().is_err() {
                std::process::exit(3);
            }
        },
        other => {
            eprintln!("fail: unknown mode '{other}' (abort CODE | early-exit | spin)");
            std::process::exit(2);
        }
    }
}
