//! A token goes around the ring of all ranks ten times, each rank adding its rank.
//! `kestrel-run -n 3 target/release/examples/ring`

use kestrel::Communicator;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    let laps = 10u64;
    let mut token = 0u64;
    for _ in 0..laps {
        if rank == 0 {
            next.send(&token);
            token = prev.receive::<u64>().0;
        } else {
            token = prev.receive::<u64>().0 + rank as u64;
            next.send(&token);
        }
    }
    if rank == 0 {
        let per_lap: u64 = (1..size as u64).sum();
        assert_eq!(token, laps * per_lap, "ring token is wrong");
        println!("ring: {laps} laps over {size} ranks, token {token}");
    }
}
