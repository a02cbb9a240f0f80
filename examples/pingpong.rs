//! Ping-pong between ranks 0 and 1 over sizes from 0 bytes to 4 MiB, checking every byte;
//! other ranks (if any) only take part in the final barrier.
//! `kestrel-run -n 2 target/release/examples/pingpong`

use kestrel::Communicator;

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let rank = world.rank();
    let mut size = 0usize;
    while size <= 4 << 20 && world.size() >= 2 && rank < 2 {
        let peer = world.process_at_rank(1 - rank);
        let data: Vec<u8> = (0..size).map(|i| (i * 7 + size) as u8).collect();
        let mut back = vec![0u8; size];
        for _ in 0..3 {
            if rank == 0 {
                peer.send_with_tag(&data[..], 5);
                let status = peer.receive_into_with_tag(&mut back[..], 6);
                assert_eq!(status.count_bytes(), size);
                assert!(back == data, "rank 0: payload of {size} bytes corrupted");
            } else {
                let status = peer.receive_into_with_tag(&mut back[..], 5);
                assert_eq!(
                    (status.source_rank(), status.tag(), status.count_bytes()),
                    (0, 5, size)
                );
                assert!(back == data, "rank 1: payload of {size} bytes corrupted");
                peer.send_with_tag(&back[..], 6);
            }
        }
        size = if size == 0 { 1 } else { size * 4 };
    }
    world.barrier();
    if rank == 0 {
        println!(
            "pingpong: 0 B to 4 MiB verified over {}",
            universe.transports()
        );
    }
}
