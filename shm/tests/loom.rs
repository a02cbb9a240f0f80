//! The receive queue and the fast box under loom: every interleaving (up to loom's bounds) of
//! the same algorithm code that runs on real shared memory. Run with
//! `RUSTFLAGS="--cfg loom" cargo test -p kestrel-shm --release --test loom`.
#![cfg(loom)]

use kestrel_shm::mem::model::ModelMem;
use kestrel_shm::{fbox, fifo};
use loom::sync::Arc;

#[test]
fn queue_two_producers_one_consumer() {
    loom::model(|| {
        let cap = 2;
        let mem = Arc::new(ModelMem::new(fifo::footprint(cap)));
        fifo::init(&*mem, 0, cap);
        let producers: Vec<_> = (1..=2u64)
            .map(|v| {
                let mem = mem.clone();
                loom::thread::spawn(move || fifo::push(&*mem, 0, cap, v).is_ok())
            })
            .collect();
        let mut consumer = fifo::Consumer::new(0, cap);
        let mut got = Vec::new();
        for _ in 0..2 {
            if let Some(v) = consumer.pop(&*mem) {
                got.push(v);
            }
        }
        let pushed: Vec<bool> = producers.into_iter().map(|p| p.join().unwrap()).collect();
        while let Some(v) = consumer.pop(&*mem) {
            got.push(v);
        }
        got.sort();
        let want: Vec<u64> = (1..=2).filter(|v| pushed[*v as usize - 1]).collect();
        assert_eq!(got, want, "lost or duplicated items");
    });
}

#[test]
fn queue_slot_reuse_across_laps() {
    loom::model(|| {
        let cap = 2;
        let mem = Arc::new(ModelMem::new(fifo::footprint(cap)));
        fifo::init(&*mem, 0, cap);
        let m = mem.clone();
        let producer = loom::thread::spawn(move || {
            let mut sent = 0u64;
            for v in 1..=3u64 {
                if fifo::push(&*m, 0, cap, v).is_ok() {
                    sent = v;
                } else {
                    break;
                }
            }
            sent
        });
        let mut consumer = fifo::Consumer::new(0, cap);
        let first = consumer.pop(&*mem);
        let sent = producer.join().unwrap();
        let mut got: Vec<u64> = first.into_iter().collect();
        while let Some(v) = consumer.pop(&*mem) {
            got.push(v);
        }
        assert_eq!(got, (1..=sent).collect::<Vec<_>>(), "queue order broken");
    });
}

#[test]
fn fast_box_publishes_payload_before_header() {
    loom::model(|| {
        let size = 256;
        let mem = Arc::new(ModelMem::new(fbox::footprint(size)));
        let m = mem.clone();
        let producer = loom::thread::spawn(move || {
            let mut p = fbox::Producer::new(0, size);
            p.push(&*m, 5, &[&[1, 2, 3, 4, 5, 6, 7, 8, 9]]).unwrap();
            p.push(&*m, 6, &[&[42; 20]]).unwrap();
        });
        let mut c = fbox::Consumer::new(0, size);
        let mut seen = 0;
        for _ in 0..3 {
            if let Some(e) = c.peek(&*mem).expect("no corrupt header") {
                let mut buf = vec![0u8; e.len];
                loom::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
                kestrel_shm::mem::SharedMem::read_bytes(&*mem, e.offset, &mut buf);
                match seen {
                    0 => assert_eq!((e.tag, &buf[..]), (5, &[1, 2, 3, 4, 5, 6, 7, 8, 9][..])),
                    _ => assert_eq!((e.tag, &buf[..]), (6, &[42u8; 20][..])),
                }
                c.consume(e);
                c.publish(&*mem);
                seen += 1;
            }
        }
        producer.join().unwrap();
    });
}

#[test]
fn fast_box_wrap_and_space_reuse() {
    loom::model(|| {
        // A ring of 256 bytes carries at most 56-byte payloads (64-byte entries): the third
        // entry needs the space the receiver frees, and wraps.
        let size = 256;
        let mem = Arc::new(ModelMem::new(fbox::footprint(size)));
        let m = mem.clone();
        let producer = loom::thread::spawn(move || {
            let mut p = fbox::Producer::new(0, size);
            let mut sent = 0u8;
            for i in 1..=4u8 {
                if p.push(&*m, u16::from(i), &[&[i; 56]]).is_err() {
                    break;
                }
                sent = i;
            }
            sent
        });
        let mut c = fbox::Consumer::new(0, size);
        let mut got = Vec::new();
        let drain = |c: &mut fbox::Consumer, got: &mut Vec<u8>| {
            while let Some(e) = c.peek(&*mem).expect("no corrupt header") {
                let mut buf = vec![0u8; e.len];
                kestrel_shm::mem::SharedMem::read_bytes(&*mem, e.offset, &mut buf);
                assert!(buf.iter().all(|&b| b == e.tag as u8), "torn payload");
                got.push(e.tag as u8);
                c.consume(e);
            }
            c.publish(&*mem);
        };
        drain(&mut c, &mut got);
        let sent = producer.join().unwrap();
        drain(&mut c, &mut got);
        assert_eq!(got, (1..=sent).collect::<Vec<_>>());
    });
}
