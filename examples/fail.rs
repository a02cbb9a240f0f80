//! Misbehaving ranks for the launcher's failure tests: `fail abort CODE` (rank 1 aborts the
//! job), `fail early-exit` (rank 1 leaves without finalizing while the others wait in a
//! barrier), `fail spin` (every rank runs barriers forever, through the node's collective
//! segment, and rank 0 prints `fail: spinning on N ranks` after the first: for tests that kill
//! the launcher), `fail segv` (rank 1 takes a segmentation fault after the first barrier,
//! the others wait in a second one), `fail stop` (rank 1 stops itself with SIGSTOP
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
        "segv" => {
            // After start-up (every transport open, peers connected), so that a handler a
            // transport's libraries installed would see the fault.
            let _ = u.barrier();
            if rank == 1 {
                // A real fault, not a raised signal: Rust's own SIGSEGV handler swallows a
                // signal that is not a fault, and a fault is what a provider's handler would
                // turn into an exit status.
                #[allow(unsafe_code)]
                // SAFETY: not sound by design: the write to address 0 is the crash this mode
                // exists to cause; nothing runs after it.
                unsafe {
                    std::ptr::null_mut::<u8>().write_volatile(1)
                };
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
