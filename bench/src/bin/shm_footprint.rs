//! Shared memory a job holds on its node, as the file system sees it: every rank sets up its
//! segment, the world's collective segment is made (a barrier), every pair exchanges a message
//! (fast boxes, where the pool allows), and rank 0 reads how much of the shared-memory
//! directory is in use while every rank still maps everything. `bench/shm-footprint` runs it
//! at several sizes against the directory's use before the job.
//!
//! Output (rank 0): `ranks <N> used_bytes <B>`.

use kestrel::Communicator;

fn used_bytes(dir: &str) -> u64 {
    match nix::sys::statvfs::statvfs(dir) {
        Ok(st) => (st.blocks() - st.blocks_free()) * st.fragment_size(),
        Err(e) => {
            eprintln!("shm_footprint: cannot stat {dir}: {e}");
            std::process::exit(1);
        }
    }
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    world.barrier();
    // Every rank sends one message to every other, in rounds, so every pair has talked.
    for shift in 1..size {
        let to = world.process_at_rank((rank + shift) % size);
        let from = world.process_at_rank((rank + size - shift) % size);
        let mut buf = [0u8; 8];
        // Eight bytes go eagerly: every rank sends, then receives.
        to.send(&[rank as u8; 8][..]);
        from.receive_into(&mut buf[..]);
    }
    world.barrier();
    if rank == 0 {
        let dir = std::env::var("KESTREL_SHM_DIR").unwrap_or_else(|_| "/dev/shm".into());
        println!("ranks {size} used_bytes {}", used_bytes(&dir));
    }
    world.barrier();
}
