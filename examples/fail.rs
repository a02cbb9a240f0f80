//! Misbehaving ranks for the launcher's failure tests: `fail abort CODE` (rank 1 aborts the
//! job), `fail early-exit` (rank 1 leaves without finalizing while the others wait in a
//! barrier), `fail spin` (every rank runs barriers forever, through the node's collective
//! segment, and rank 0 prints `fail: spinning on N ranks` after the first: for tests that kill
//! the launcher), `fail stop` (rank 1 stops itself with SIGSTOP
//! before it sends rank 0 the message rank 0 waits for; the others wait in a barrier: for hang
//! reports; a SIGCONT lets the job finish).

use kestrel::Communicator;

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
        "stop" => {
            let world = u.world();
            if rank == 1 {
                let _ = nix::sys::signal::raise(nix::sys::signal::Signal::SIGSTOP);
                world.process_at_rank(0).send_with_tag(&[7u8; 8][..], 7);
            } else if rank == 0 {
                let mut buf = [0u8; 8];
                world
                    .process_at_rank(1)
                    .receive_into_with_tag(&mut buf[..], 7);
            }
            world.barrier();
        }
        "spin" => {
            if u.barrier().is_err() {
                std::process::exit(3);
            }
            if rank == 0 {
                // Start-up is over on every rank: tests wait for this line.
                println!("fail: spinning on {} ranks", u.size());
                use std::io::Write;
                let _ = std::io::stdout().flush();
            }
            loop {
                if u.barrier().is_err() {
                    std::process::exit(3);
                }
            }
        }
        other => {
            eprintln!("fail: unknown mode '{other}' (abort CODE | early-exit | spin | stop)");
            std::process::exit(2);
        }
    }
}
