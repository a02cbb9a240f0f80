//! Self-checking point-to-point scenarios for the integration tests:
//! `p2p_check MODE` under `kestrel-run`. Every mode exits non-zero with a message on the first
//! wrong byte, size, tag, source or order.
//!
//! Modes: `random N [1m|4m]` (N messages in all, sizes log-uniform 0 B..1 MiB or mixed
//! 0 B..4 MiB, tags 0..3, received per tag in a different order than sent), `wildcard`, `truncate`, `probe`, `sizes`,
//! `outstanding`, `alltoall ROUNDS`, `sync`, `cancel`, `comms`, `procnull`, `sendrecv`, `stream` (sends
//! 64 MiB messages from rank 0 to rank 1 until killed).

use kestrel::{request, Color, Communicator, PROC_NULL};

fn fail(rank: i32, what: String) -> ! {
    eprintln!("p2p_check: rank {rank}: {what}");
    std::process::exit(1)
}

/// xorshift64*: deterministic, so sender and receiver derive the same message list.
struct Rng(u64);
impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

fn pattern(seed: u64, len: usize) -> Vec<u8> {
    let mut r = Rng::new(seed);
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        let w = r.next().to_le_bytes();
        v.extend_from_slice(&w[..(len - v.len()).min(8)]);
    }
    v
}

/// How `random` draws message sizes.
#[derive(Clone, Copy)]
enum Sizes {
    /// Log-uniform over 0 B..1 MiB: every size class is exercised without gigabytes of data.
    LogUniform1M,
    /// 0 B..4 MiB: log-uniform up to 64 KiB, and one message in 200 uniform in 64 KiB..4 MiB,
    /// so that 100,000 messages cover every size class up to 4 MiB in about 3 GB.
    Mixed4M,
}

/// (tag, size) of message `i` from `src` to `dst`.
fn message(src: i32, dst: i32, i: usize, sizes: Sizes) -> (i32, usize) {
    let mut r = Rng::new(((src as u64) << 40) ^ ((dst as u64) << 20) ^ i as u64);
    let tag = r.below(4) as i32;
    let log_uniform = |r: &mut Rng, max_bits: u64| {
        let bits = r.below(max_bits + 1);
        if bits == 0 {
            0
        } else {
            (r.below(1 << bits) + (1 << (bits - 1))).min(1 << max_bits) as usize
        }
    };
    let size = match sizes {
        Sizes::LogUniform1M => log_uniform(&mut r, 20),
        Sizes::Mixed4M if r.below(200) == 0 => {
            (64 << 10) + r.below((4 << 20) - (64 << 10) + 1) as usize
        }
        Sizes::Mixed4M => log_uniform(&mut r, 16),
    };
    (tag, size)
}

fn seed(src: i32, dst: i32, i: usize) -> u64 {
    ((src as u64) << 48) ^ ((dst as u64) << 32) ^ i as u64 ^ 0xfeed
}

fn main() {
    let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
    let world = universe.world();
    let (rank, size) = (world.rank(), world.size());
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mode = args.first().map(String::as_str).unwrap_or("");
    let num = |i: usize, d: usize| args.get(i).and_then(|a| a.parse().ok()).unwrap_or(d);
    match mode {
        "random" => {
            // Other words after the count are test markers (process names), not sizes.
            let sizes = match args.get(2).map(String::as_str) {
                Some("4m") => Sizes::Mixed4M,
                _ => Sizes::LogUniform1M,
            };
            random(&world, num(1, 10_000), sizes)
        }
        "wildcard" => wildcard(&world),
        "truncate" => truncate(&world),
        "probe" => probe(&world),
        "sizes" => sizes(&universe, &world),
        "outstanding" => outstanding(&world),
        "alltoall" => alltoall(&world, num(1, 10)),
        "sync" => sync(&world),
        "cancel" => cancel(&world),
        "escape" => escape(&world),
        "comms" => comms(&world),
        "procnull" => procnull(&world),
        "sendrecv" => sendrecv(&world),
        "stream" => stream(&world),
        other => fail(rank, format!("unknown mode '{other}'")),
    }
    world.barrier();
    if rank == 0 {
        println!(
            "p2p_check {mode}: passed on {size} ranks over {}",
            universe.transports()
        );
    }
}

fn random(world: &kestrel::SimpleCommunicator, total: usize, sizes: Sizes) {
    let (rank, size) = (world.rank(), world.size());
    let per_pair = total / (size as usize * (size as usize - 1)).max(1);
    let batch = 64;
    let mut start = 0;
    while start < per_pair {
        let end = (start + batch).min(per_pair);
        let sends: Vec<(i32, i32, Vec<u8>)> = (0..size)
            .filter(|&d| d != rank)
            .flat_map(|d| (start..end).map(move |i| (d, i)))
            .map(|(d, i)| {
                let (tag, len) = message(rank, d, i, sizes);
                (d, tag, pattern(seed(rank, d, i), len))
            })
            .collect();
        request::scope(|scope| {
            let reqs: Vec<_> = sends
                .iter()
                .map(|(d, tag, data)| {
                    world
                        .process_at_rank(*d)
                        .immediate_send_with_tag(scope, &data[..], *tag)
                })
                .collect();
            // Receive tag by tag: later tags' messages wait as unexpected while earlier ones
            // are consumed, and each (source, tag) stream must still come in send order.
            for tag in [3, 0, 2, 1] {
                for src in (0..size).filter(|&s| s != rank) {
                    for i in start..end {
                        let (t, len) = message(src, rank, i, sizes);
                        if t != tag {
                            continue;
                        }
                        let mut buf = vec![0u8; len + 8];
                        let st = world
                            .process_at_rank(src)
                            .receive_into_with_tag(&mut buf[..], tag);
                        if st.count_bytes() != len || st.tag() != tag || st.source_rank() != src {
                            fail(rank, format!("message {i} from {src}: got {} bytes tag {}, want {len} tag {tag}", st.count_bytes(), st.tag()));
                        }
                        if buf[..len] != pattern(seed(src, rank, i), len)[..] {
                            fail(rank, format!("message {i} from {src} (tag {tag}, {len} bytes): contents differ (out of order or corrupted)"));
                        }
                    }
                }
            }
            request::wait_all(reqs);
        });
        start = end;
    }
}

fn wildcard(world: &kestrel::SimpleCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let n = 200;
    if rank == 0 {
        let mut next = vec![0usize; size as usize];
        for _ in 0..n * (size as usize - 1) {
            let (v, st) = world.any_process().receive_vec::<u64>();
            let src = st.source_rank() as usize;
            let want = [src as u64, next[src] as u64];
            if v[..] != want || st.tag() != (next[src] % 3) as i32 {
                fail(
                    rank,
                    format!(
                        "wildcard receive got {v:?} tag {} from {src}, want {want:?} tag {}",
                        st.tag(),
                        next[src] % 3
                    ),
                );
            }
            next[src] += 1;
        }
    } else {
        for i in 0..n {
            world
                .process_at_rank(0)
                .send_with_tag(&[rank as u64, i as u64][..], (i % 3) as i32);
        }
    }
}

fn truncate(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    if rank == 1 {
        for len in [100usize, 100_000, 3 << 20] {
            world.process_at_rank(0).send(&pattern(len as u64, len)[..]);
            world.process_at_rank(0).send(&[len as u32][..]);
        }
    } else if rank == 0 {
        for len in [100usize, 100_000, 3 << 20] {
            let mut small = [0u8; 10];
            let st = world.process_at_rank(1).receive_into(&mut small[..]);
            if st.truncated_from() != Some(len)
                || st.count_bytes() != 10
                || small[..] != pattern(len as u64, len)[..10]
            {
                fail(rank, format!("truncating a {len}-byte message: {st:?}"));
            }
            // The truncated message was consumed: the next one arrives intact.
            let (next, _) = world.process_at_rank(1).receive::<u32>();
            if next != len as u32 {
                fail(rank, format!("after truncation got {next}, want {len}"));
            }
        }
    }
}

fn probe(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    if rank == 1 {
        world
            .process_at_rank(0)
            .send_with_tag(&pattern(1, 3000)[..], 7);
        world
            .process_at_rank(0)
            .send_with_tag(&pattern(2, 500_000)[..], 8);
        world.process_at_rank(0).send_with_tag(&[9u8; 10][..], 9);
    } else if rank == 0 {
        if world
            .process_at_rank(1)
            .immediate_probe()
            .is_some_and(|s| s.tag() == 9)
        {
            fail(rank, "probe saw tag 9 before 7".into());
        }
        let st = world.process_at_rank(1).probe_with_tag(8);
        if st.count_bytes() != 500_000 || st.tag() != 8 {
            fail(rank, format!("probe tag 8: {st:?}"));
        }
        let st = world.any_process().probe();
        if (st.tag(), st.count_bytes()) != (7, 3000) {
            fail(rank, format!("probe any: {st:?}"));
        }
        let (msg, st) = world.process_at_rank(1).matched_probe_with_tag(8);
        let (v, st2) = msg.matched_receive_vec::<u8>(st.count_bytes());
        if v != pattern(2, 500_000) || st2.tag() != 8 {
            fail(rank, "mprobe/mrecv of tag 8 returned wrong data".into());
        }
        let (v, _) = world.process_at_rank(1).receive_vec::<u8>();
        if v != pattern(1, 3000) {
            fail(rank, "tag 7 after mprobe: wrong data".into());
        }
        let (v, st) = world.any_process().receive_vec::<u8>();
        if v != [9u8; 10] || st.tag() != 9 {
            fail(rank, "tag 9: wrong data".into());
        }
        if world.any_process().immediate_probe().is_some() {
            fail(rank, "iprobe found a message that was never sent".into());
        }
    }
}

fn sizes(universe: &kestrel::Universe, world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    let eager = universe
        .params()
        .get("shm_eager_limit")
        .and_then(|r| r.raw.parse::<kestrel_bench_size::Size>().ok())
        .map(|s| s.0)
        .unwrap_or(8192);
    // The eager payload limit is the transport's limit minus the 16-byte match header.
    let e = eager - 16;
    for len in [0, 1, e - 1, e, e + 1, 1 << 20, 64 << 20] {
        let data = pattern(len as u64, len);
        if rank == 0 {
            world.process_at_rank(1).send(&data[..]);
            let (back, _) = world.process_at_rank(1).receive_vec::<u8>();
            if back != data {
                fail(rank, format!("{len}-byte echo differs"));
            }
        } else if rank == 1 {
            let mut buf = vec![0u8; len];
            let st = world.process_at_rank(0).receive_into(&mut buf[..]);
            if st.count_bytes() != len || buf != data {
                fail(
                    rank,
                    format!("{len}-byte message differs ({} bytes)", st.count_bytes()),
                );
            }
            world.process_at_rank(0).send(&buf[..]);
        }
    }
}

mod kestrel_bench_size {
    /// A byte count as the parameter system writes it (`8K`, `8192`).
    pub struct Size(pub usize);
    impl std::str::FromStr for Size {
        type Err = ();
        fn from_str(s: &str) -> Result<Self, ()> {
            let t = s.trim().to_ascii_lowercase();
            let (num, mul) = match t.chars().last() {
                Some('k') => (&t[..t.len() - 1], 1024),
                Some('m') => (&t[..t.len() - 1], 1 << 20),
                _ => (&t[..], 1),
            };
            num.parse::<usize>().map(|n| Size(n * mul)).map_err(|_| ())
        }
    }
}

fn outstanding(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    if rank > 1 {
        return;
    }
    let peer = world.process_at_rank(1 - rank);
    let n = 1000;
    let sends: Vec<Vec<u8>> = (0..n)
        .map(|i| pattern(seed(rank, 1 - rank, i), (i * 97) % 20_000))
        .collect();
    let mut recvs: Vec<Vec<u8>> = (0..n).map(|i| vec![0u8; (i * 97) % 20_000]).collect();
    request::scope(|scope| {
        let mut reqs = Vec::new();
        for (i, buf) in recvs.iter_mut().enumerate() {
            reqs.push(peer.immediate_receive_into_with_tag(scope, &mut buf[..], (i % 7) as i32));
        }
        for (i, data) in sends.iter().enumerate() {
            reqs.push(peer.immediate_send_with_tag(scope, &data[..], (i % 7) as i32));
        }
        let mut done = 0;
        while !reqs.is_empty() {
            done += request::wait_some(&mut reqs).len();
        }
        if done != 2 * n {
            fail(rank, format!("{done} of {} requests completed", 2 * n));
        }
    });
    for (i, buf) in recvs.iter().enumerate() {
        if *buf != pattern(seed(1 - rank, rank, i), buf.len()) {
            fail(rank, format!("outstanding receive {i} has wrong data"));
        }
    }
}

fn alltoall(world: &kestrel::SimpleCommunicator, rounds: usize) {
    let (rank, size) = (world.rank(), world.size());
    for round in 0..rounds {
        let len = if round % 2 == 0 { 64 << 10 } else { 100 };
        let sends: Vec<Vec<u8>> = (0..size)
            .map(|d| pattern(seed(rank, d, round), len))
            .collect();
        let mut recvs: Vec<Vec<u8>> = (0..size).map(|_| vec![0u8; len]).collect();
        request::scope(|scope| {
            let mut reqs = Vec::new();
            for (s, buf) in recvs.iter_mut().enumerate() {
                if s as i32 != rank {
                    reqs.push(
                        world
                            .process_at_rank(s as i32)
                            .immediate_receive_into(scope, &mut buf[..]),
                    );
                }
            }
            for (d, data) in sends.iter().enumerate() {
                if d as i32 != rank {
                    reqs.push(
                        world
                            .process_at_rank(d as i32)
                            .immediate_send(scope, &data[..]),
                    );
                }
            }
            request::wait_all(reqs);
        });
        for (s, buf) in recvs.iter().enumerate() {
            if s as i32 != rank && *buf != pattern(seed(s as i32, rank, round), len) {
                fail(rank, format!("round {round}: data from {s} differs"));
            }
        }
    }
}

fn sync(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    if rank == 1 {
        let t = std::time::Instant::now();
        world.process_at_rank(0).synchronous_send(&[42u32][..]);
        let waited = t.elapsed();
        // The receiver posts its receive 300 ms late; a synchronous send cannot finish before.
        if waited < std::time::Duration::from_millis(250) {
            fail(
                rank,
                format!(
                    "synchronous send returned after {waited:?}, before the receive was posted"
                ),
            );
        }
    } else if rank == 0 {
        std::thread::sleep(std::time::Duration::from_millis(300));
        let (v, _) = world.process_at_rank(1).receive::<u32>();
        if v != 42 {
            fail(rank, format!("got {v}"));
        }
    }
}

fn cancel(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    let mut buf = [0u8; 4];
    request::scope(|scope| {
        let r = world
            .process_at_rank((rank + 1) % world.size())
            .immediate_receive_into_with_tag(scope, &mut buf[..], 99);
        if !r.cancel() {
            fail(rank, "cancel of an unmatched receive failed".into());
        }
        let st = r.wait();
        if !st.is_cancelled() {
            fail(rank, "cancelled receive does not say so".into());
        }
    });
}

/// A request returned out of its `request::scope`: the scope completes it when it ends, so
/// dropping it afterwards returns at once, and waiting for or testing it panics naming the
/// misuse (it used to wait for ever for a request already freed).
fn escape(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    let me = world.process_at_rank(rank);
    /// A receive from this rank itself, matched inside the scope and returned out of it.
    fn escaped<'a>(
        me: &kestrel::Process<'_>,
        data: &'a [u8; 8],
        buf: &'a mut [u8; 8],
    ) -> request::Request<'a> {
        request::scope(|scope| {
            let r = me.immediate_receive_into_with_tag(scope, &mut buf[..], 5);
            me.immediate_send_with_tag(scope, &data[..], 5).wait();
            r
        })
    }
    let (data, mut buf) = ([rank as u8 + 1; 8], [0u8; 8]);
    drop(escaped(&me, &data, &mut buf));
    if buf != data {
        fail(
            rank,
            format!("the scope did not complete the receive: {buf:?}"),
        );
    }
    let misuse = |what: &str, f: &dyn Fn()| {
        let hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(|_| {}));
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
        std::panic::set_hook(hook);
        let msg = match caught {
            Ok(()) => fail(rank, format!("{what} of an escaped request did not panic")),
            Err(p) => p
                .downcast_ref::<String>()
                .cloned()
                .unwrap_or_else(|| "(no message)".into()),
        };
        if !msg.contains(&format!(
            "Request::{what} on a request that left the request::scope"
        )) {
            fail(rank, format!("{what} of an escaped request: {msg}"));
        }
    };
    misuse("wait", &|| {
        let (data, mut buf) = ([9u8; 8], [0u8; 8]);
        let _ = escaped(&me, &data, &mut buf).wait();
    });
    misuse("test", &|| {
        let (data, mut buf) = ([9u8; 8], [0u8; 8]);
        let _ = escaped(&me, &data, &mut buf).test();
    });
}

fn comms(world: &kestrel::SimpleCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let dup = world.duplicate();
    // A message on the duplicate never matches a receive on the world.
    if size >= 2 {
        if rank == 0 {
            dup.process_at_rank(1).send(&[1u8][..]);
            world.process_at_rank(1).send(&[2u8][..]);
        } else if rank == 1 {
            let (w, _) = world.process_at_rank(0).receive::<u8>();
            let (d, _) = dup.process_at_rank(0).receive::<u8>();
            if (w, d) != (2, 1) {
                fail(rank, format!("world got {w}, dup got {d}"));
            }
        }
    }
    let half = world
        .split_by_color(Color::with_value(rank % 2))
        .expect("every rank has a color");
    let want_size = (size + 1 - rank % 2) / 2;
    if half.size() != want_size || half.rank() != rank / 2 {
        fail(
            rank,
            format!(
                "split: rank {} of {}, want {} of {want_size}",
                half.rank(),
                half.size(),
                rank / 2
            ),
        );
    }
    // A ring inside each half.
    let (hr, hs) = (half.rank(), half.size());
    if hs > 1 {
        let next = half.process_at_rank((hr + 1) % hs);
        let prev = half.process_at_rank((hr + hs - 1) % hs);
        request::scope(|scope| {
            let s = next.immediate_send(scope, &rank);
            let (from, _) = prev.receive::<i32>();
            let want = 2 * ((hr + hs - 1) % hs) + rank % 2;
            if from != want {
                fail(rank, format!("half ring got {from}, want {want}"));
            }
            s.wait();
        });
    }
    let g = half.group();
    if g.size() != want_size as usize || g.job_rank(hr as usize) != Some(rank as u32) {
        fail(rank, "group of the split communicator is wrong".into());
    }
    let none = world.split_by_color(if rank == 0 {
        Color::undefined()
    } else {
        Color::with_value(0)
    });
    if (rank == 0) != none.is_none() {
        fail(rank, "undefined color handling is wrong".into());
    }
    half.barrier();
}

fn sendrecv(world: &kestrel::SimpleCommunicator) {
    let (rank, size) = (world.rank(), world.size());
    let next = world.process_at_rank((rank + 1) % size);
    let prev = world.process_at_rank((rank + size - 1) % size);
    // Every rank sends right and receives from the left at once: a ring of blocking sends
    // of rendezvous size would deadlock, sendrecv must not.
    let data = pattern(rank as u64, 1 << 20);
    let mut got = vec![0u8; 1 << 20];
    let st = next.send_receive_into_with_tags(&data[..], 3, &prev, &mut got[..], Some(3));
    let from = (rank + size - 1) % size;
    if st.source_rank() != from || got != pattern(from as u64, 1 << 20) {
        fail(rank, format!("sendrecv from {from}: {st:?}"));
    }
    let p = world.process_at_rank(PROC_NULL);
    let st = p.send_receive_into(&data[..], &p, &mut got[..]);
    if st.source_rank() != PROC_NULL {
        fail(rank, "sendrecv with PROC_NULL".into());
    }
}

fn procnull(world: &kestrel::SimpleCommunicator) {
    let p = world.process_at_rank(PROC_NULL);
    p.send(&[1u8][..]);
    let mut b = [7u8; 3];
    let st = p.receive_into(&mut b[..]);
    if st.source_rank() != PROC_NULL || st.count_bytes() != 0 || b != [7; 3] {
        fail(world.rank(), format!("PROC_NULL receive: {st:?}"));
    }
}

fn stream(world: &kestrel::SimpleCommunicator) {
    let rank = world.rank();
    let data = vec![5u8; 64 << 20];
    let mut buf = vec![0u8; 64 << 20];
    println!(
        "stream: rank {rank} pid {} job {}",
        std::process::id(),
        std::env::var("KESTREL_JOB_ID").unwrap_or_default()
    );
    loop {
        if rank == 0 {
            world.process_at_rank(1).send(&data[..]);
        } else if rank == 1 {
            world.process_at_rank(0).receive_into(&mut buf[..]);
        } else {
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }
}
