//! The simulated cluster the engine tests run on: several engines in one test process,
//! joined by an in-memory transport that can delay, reorder, push back and lose a peer (the
//! quinn-proto `Pair` pattern). Virtual time advances only when the driver says so, so every
//! run is the same for a given seed and takes milliseconds.
//!
//! Buffers handed to the engines are owned by the tests and outlive the requests that use
//! them (every test drives its requests to completion before the buffers drop); that is the
//! contract `UserBuf` asks its callers to keep.
#![allow(dead_code)]
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

pub use kestrel_pml::buf::UserBuf;
pub use kestrel_pml::engine::{EngineSetup, ReqId, CTX_WORLD};
pub use kestrel_pml::{Engine, Status};
pub use kestrel_transport::btl::{
    Btl, Incoming, Limits, LocalRegion, RemoteRegion, SelfBtl, SendError,
};
pub use kestrel_transport::params::Params;
pub use kestrel_transport::set::Attached;

/// How the simulated network behaves.
#[derive(Debug, Clone, Copy)]
pub struct NetConfig {
    /// Largest header+payload sent eagerly.
    pub eager: usize,
    /// Largest single send (fragment size of the pipeline).
    pub max_send: usize,
    /// Offers single-copy get (peers' memory is this process's memory).
    pub get: bool,
    /// Gets finish this many ticks after they start, reported by `take_finished_gets`
    /// (network RMA); `None`: inside `get`.
    pub get_later: Option<u64>,
    /// Gets that finish later fail (the engine must fall back to the pipeline).
    pub get_fails: bool,
    /// Deliver arrived messages in a random order.
    pub reorder: bool,
    /// Each message is held for 0..=delay virtual ticks.
    pub delay: u64,
    /// Refuse one send in `push_back` with WouldBlock (0: never).
    pub push_back: u64,
    pub seed: u64,
}

impl Default for NetConfig {
    fn default() -> Self {
        NetConfig {
            eager: 4096,
            max_send: 8192,
            get: true,
            get_later: None,
            get_fails: false,
            reorder: false,
            delay: 0,
            push_back: 0,
            seed: 1,
        }
    }
}

pub struct InFlight {
    /// Send order over the whole network.
    pub id: u64,
    pub from: u32,
    pub am: u8,
    pub data: Vec<u8>,
    pub due: u64,
}

/// A get that finishes later: due tick, reader, ticket, source, destination, length.
pub struct LaterGet {
    pub due: u64,
    pub reader: u32,
    pub ticket: u64,
    pub from: u64,
    pub to: u64,
    pub len: usize,
}

pub struct Net {
    pub cfg: NetConfig,
    /// Buffers exposed and not yet released.
    pub exposed: i64,
    /// Gets started that finish later, and how many were started in all.
    pub later_gets: Vec<LaterGet>,
    pub gets_started: u64,
    pub queues: Vec<VecDeque<InFlight>>,
    pub gone: Vec<bool>,
    pub now: u64,
    pub rng: u64,
    pub sends: u64,
    pub refused: u64,
    /// Deliveries that overtook an earlier send of the same sender (proof of reordering).
    pub overtakes: u64,
    /// The last delivered send id per (receiver, sender).
    pub last_id: Vec<Vec<u64>>,
}

impl Net {
    fn next(&mut self) -> u64 {
        // xorshift64*: deterministic per seed.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub struct SimBtl {
    pub me: u32,
    pub net: Rc<RefCell<Net>>,
}

impl Btl for SimBtl {
    fn name(&self) -> &'static str {
        "sim"
    }
    fn limits(&self) -> Limits {
        let cfg = self.net.borrow().cfg;
        Limits {
            eager_limit: cfg.eager,
            max_send: cfg.max_send,
            latency_ns: 1_000,
            bandwidth_mbps: 10_000,
            exclusivity: 100,
            get: cfg.get,
        }
    }
    fn reaches(&self, peer: u32) -> bool {
        let net = self.net.borrow();
        (peer as usize) < net.queues.len() && peer != self.me
    }
    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let mut net = self.net.borrow_mut();
        if net.gone[peer as usize] {
            return Err(SendError::Failed(format!("sim: rank {peer} is gone")));
        }
        let len = header.len() + payload.len();
        if len > net.cfg.max_send {
            return Err(SendError::TooLarge {
                len,
                max: net.cfg.max_send,
            });
        }
        net.sends += 1;
        if net.cfg.push_back != 0 && net.sends.is_multiple_of(net.cfg.push_back) {
            net.refused += 1;
            return Err(SendError::WouldBlock);
        }
        let delay = match net.cfg.delay {
            0 => 0,
            d => net.next() % (d + 1),
        };
        let due = net.now + delay;
        let mut data = header.to_vec();
        data.extend_from_slice(payload);
        let id = net.sends;
        net.queues[peer as usize].push_back(InFlight {
            id,
            from: self.me,
            am,
            data,
            due,
        });
        Ok(())
    }
    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let mut ready = Vec::new();
        {
            let mut net = self.net.borrow_mut();
            let now = net.now;
            let q = std::mem::take(&mut net.queues[self.me as usize]);
            let mut keep = VecDeque::new();
            for m in q {
                if m.due <= now {
                    ready.push(m);
                } else {
                    keep.push_back(m);
                }
            }
            net.queues[self.me as usize] = keep;
            if net.cfg.reorder {
                for i in (1..ready.len()).rev() {
                    let j = (net.next() % (i as u64 + 1)) as usize;
                    ready.swap(i, j);
                }
            }
            for m in &ready {
                let last = &mut net.last_id[self.me as usize][m.from as usize];
                let overtook = m.id < *last;
                *last = (*last).max(m.id);
                net.overtakes += u64::from(overtook);
            }
        }
        let n = ready.len();
        for m in ready {
            deliver(Incoming {
                peer: m.from,
                am: m.am,
                data: &m.data,
            });
        }
        n
    }
    fn expose(&mut self, buf: &[u8]) -> Option<RemoteRegion> {
        self.net.borrow_mut().exposed += 1;
        Some(RemoteRegion {
            addr: buf.as_ptr() as u64,
            len: buf.len() as u64,
            key: 0,
        })
    }
    fn release(&mut self, _buf: &[u8]) {
        self.net.borrow_mut().exposed -= 1;
    }
    fn gets_finish_later(&self) -> bool {
        self.net.borrow().cfg.get_later.is_some()
    }
    fn start_get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: LocalRegion,
        ticket: u64,
    ) -> Result<(), SendError> {
        let mut net = self.net.borrow_mut();
        if net.gone[peer as usize] {
            return Err(SendError::Failed(format!("sim: rank {peer} is gone")));
        }
        assert!(offset + local.len <= remote.len, "get past the region");
        let due = net.now + net.cfg.get_later.expect("gets finish later");
        net.gets_started += 1;
        net.later_gets.push(LaterGet {
            due,
            reader: self.me,
            ticket,
            from: remote.addr + offset,
            to: local.addr,
            len: local.len as usize,
        });
        Ok(())
    }
    fn take_finished_gets(&mut self, report: &mut dyn FnMut(u64, Result<(), SendError>)) {
        let mut net = self.net.borrow_mut();
        let (now, fails) = (net.now, net.cfg.get_fails);
        let (done, left): (Vec<LaterGet>, Vec<LaterGet>) = std::mem::take(&mut net.later_gets)
            .into_iter()
            .partition(|g| g.reader == self.me && g.due <= now);
        net.later_gets = left;
        drop(net);
        for g in done {
            if fails {
                report(
                    g.ticket,
                    Err(SendError::Failed("sim: the read failed".into())),
                );
                continue;
            }
            // SAFETY: every engine lives in this process; the sender's buffer stays valid
            // until its FIN, which follows this report, and the receiver's until the report
            // completes its request (the UserBuf and LocalRegion contracts the tests keep).
            unsafe { std::ptr::copy_nonoverlapping(g.from as *const u8, g.to as *mut u8, g.len) };
            report(g.ticket, Ok(()));
        }
    }
    fn get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &mut [u8],
    ) -> Result<(), SendError> {
        if self.net.borrow().gone[peer as usize] {
            return Err(SendError::Failed(format!("sim: rank {peer} is gone")));
        }
        assert!(
            offset + local.len() as u64 <= remote.len,
            "get past the region"
        );
        // SAFETY: every engine lives in this process, so the peer's address is ours; the
        // sender's buffer stays valid until its request completes, which needs the FIN this
        // get precedes (the UserBuf contract the tests keep).
        let src =
            unsafe { std::slice::from_raw_parts((remote.addr + offset) as *const u8, local.len()) };
        local.copy_from_slice(src);
        Ok(())
    }
}

/// Engines joined by one simulated network, with a self transport each.
pub struct Cluster {
    pub net: Rc<RefCell<Net>>,
    pub engines: Vec<Engine>,
}

pub fn params() -> Params {
    let mut specs = kestrel_transport::core_params::specs();
    specs.extend(kestrel_pml::params::specs());
    specs.extend(kestrel_runtime::params::specs());
    Params::resolve(&specs, &|_| None, &[]).expect("defaults resolve")
}

impl Cluster {
    pub fn new(n: u32, cfg: NetConfig) -> Cluster {
        let net = Rc::new(RefCell::new(Net {
            cfg,
            exposed: 0,
            later_gets: Vec::new(),
            gets_started: 0,
            queues: (0..n).map(|_| VecDeque::new()).collect(),
            gone: vec![false; n as usize],
            now: 0,
            rng: cfg.seed | 1,
            sends: 0,
            refused: 0,
            overtakes: 0,
            last_id: vec![vec![0; n as usize]; n as usize],
        }));
        let p = params();
        let engines = (0..n)
            .map(|rank| {
                let btls: Vec<Box<dyn Btl>> = vec![
                    Box::new(SelfBtl::new(rank)),
                    Box::new(SimBtl {
                        me: rank,
                        net: net.clone(),
                    }),
                ];
                let route: Vec<u8> = (0..n).map(|r| if r == rank { 0 } else { 1 }).collect();
                Engine::with_transports(
                    &p,
                    EngineSetup {
                        rank,
                        size: n,
                        nodes: (0..n).map(|r| format!("node{r}")).collect(),
                        job_id: "pair-test".into(),
                        transports: Attached {
                            btls,
                            names: vec!["self", "sim"],
                            bulk_route: route.clone(),
                            bulk_from: vec![u32::MAX; route.len()],
                            route,
                            unreachable: vec![None; n as usize],
                        },
                        network_flush: false,
                        registry: &[],
                    },
                )
            })
            .collect();
        Cluster { net, engines }
    }

    /// One round: virtual time advances a tick and every engine progresses.
    pub fn step(&mut self) {
        self.net.borrow_mut().now += 1;
        for (r, e) in self.engines.iter_mut().enumerate() {
            if !self.net.borrow().gone[r] {
                e.progress();
            }
        }
    }

    /// Drives until every (engine, request) pair completes; returns their statuses in order.
    pub fn complete(&mut self, reqs: &[(usize, ReqId)]) -> Vec<Status> {
        let mut done: Vec<Option<Status>> = vec![None; reqs.len()];
        for _ in 0..100_000 {
            for (i, &(e, id)) in reqs.iter().enumerate() {
                if done[i].is_none() {
                    done[i] = self.engines[e].try_complete(id);
                }
            }
            if done.iter().all(Option::is_some) {
                return done.into_iter().map(Option::unwrap).collect();
            }
            self.step();
        }
        panic!(
            "requests did not complete: {:?}",
            reqs.iter()
                .zip(&done)
                .filter(|(_, d)| d.is_none())
                .map(|(r, _)| r)
                .collect::<Vec<_>>()
        );
    }

    pub fn isend(&mut self, from: usize, to: u32, tag: i32, data: &[u8], sync: bool) -> ReqId {
        // SAFETY: `data` outlives the request (tests complete every request before their
        // buffers drop) and nobody writes it meanwhile.
        let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
        self.engines[from]
            .isend(CTX_WORLD, to, tag, buf, sync)
            .expect("isend")
    }

    pub fn irecv(
        &mut self,
        at: usize,
        from: Option<u32>,
        tag: Option<i32>,
        buf: &mut [u8],
    ) -> ReqId {
        // SAFETY: as for `isend`; the test reads `buf` only after the request completed.
        let ub = unsafe { UserBuf::for_recv(buf.as_mut_ptr(), buf.len()) };
        self.engines[at]
            .irecv(CTX_WORLD, from, tag, ub)
            .expect("irecv")
    }
}

pub fn pattern(len: usize, salt: u8) -> Vec<u8> {
    (0..len)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(salt))
        .collect()
}
