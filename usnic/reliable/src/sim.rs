//! A two-ended simulated link with virtual time, for testing and measuring [`Connection`]s.
//!
//! This module owns a deterministic network model (loss, duplication, reordering, delay and
//! jitter, an optional bandwidth, an MTU that drops oversized datagrams, scripted drops, and in
//! front of each receiver a finite drop-tail receive buffer drained at a rate or by a polling
//! receiver, as a socket buffer is), process stalls (a descheduled rank neither reads, sends
//! nor runs its timers), and a bounded driver that runs two connections over it while checking
//! every delivered message: exactly once, intact, in order, with its latency recorded. It must never use real sockets or the real clock (which is
//! read once, for the base `Instant` virtual time counts from), and never loop without bound: every run has a step and a virtual-time budget, and exceeding either is
//! an error, not a hang.
//!
//! Messages are generated from `(workload seed, index)`, so the receiver can check each one
//! without the sender keeping a copy.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use super::config::{Config, ConfigError};
use super::conn::{ConnStats, Connection, SendError};
use super::event::Event;
use super::wire;

/// splitmix64: a tiny, seedable, well-mixed generator (no dependency needed for tests).
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`; 0 gives 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        p > 0.0 && ((self.next_u64() >> 11) as f64 / (1u64 << 53) as f64) < p
    }

    /// Fills `buf` with random bytes.
    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let v = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&v[..chunk.len()]);
        }
    }
}

/// The behaviour of one direction of the link.
#[derive(Debug, Clone)]
pub struct LinkConfig {
    /// Probability that a datagram is dropped.
    pub loss: f64,
    /// Probability that a datagram arrives twice.
    pub duplicate: f64,
    /// Probability that a datagram is held back by `reorder_delay` (arrives after later ones).
    pub reorder: f64,
    /// Extra delay of reordered datagrams.
    pub reorder_delay: Duration,
    /// One-way propagation delay.
    pub delay: Duration,
    /// Uniform random extra delay in `0..jitter`; datagrams still arrive in the order sent
    /// (queues are FIFO), except those `reorder` holds back and duplicates.
    pub jitter: Duration,
    /// Largest datagram the link carries; larger ones are dropped.
    pub mtu: usize,
    /// Serialization rate; `None` is infinitely fast.
    pub bytes_per_sec: Option<u64>,
    /// Bytes the sender may queue ahead of the wire (its socket buffer); past that the sender
    /// is not polled for datagrams until the queue drains (as `fi_send` returning EAGAIN).
    pub send_buffer: usize,
    /// Datagrams the receiver's buffer holds (its socket receive buffer); one arriving at a
    /// full buffer is dropped (drop-tail). `usize::MAX`: unbounded.
    pub receive_buffer: usize,
    /// How datagrams leave the receive buffer for the receiving connection.
    pub drain: Drain,
}

/// How the receive buffer in front of a receiver empties.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drain {
    /// At once on arrival (an infinitely fast receiver).
    Immediate,
    /// At this many bytes per second, one datagram after the other: a bottleneck link, or a
    /// receiver whose cost per byte limits it.
    Rate {
        /// Bytes per second.
        bytes_per_sec: u64,
    },
    /// The receiver polls every `interval` (on a grid from the start) and takes at most `batch`
    /// datagrams each time, as a progress loop reading a completion queue does.
    Poll {
        /// Time between polls.
        interval: Duration,
        /// Datagrams taken per poll.
        batch: usize,
    },
}

/// Periodic stalls of one process (descheduled, or busy elsewhere): `length` out of every
/// `every`, the first one starting `every` after the start (a `length` of `every` or more
/// overlaps into one endless stall). While stalled the process does not
/// read its receive buffer (which keeps filling, and overflowing), send, or run its timers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stalls {
    /// Period.
    pub every: Duration,
    /// Length of each stall (shorter than `every`).
    pub length: Duration,
}

impl Stalls {
    /// If `t` (time since the start) falls in a stall, when that stall ends (since the start).
    fn wake_after(&self, t: Duration) -> Option<Duration> {
        let every = self.every.as_nanos();
        if every == 0 || self.length.is_zero() || t < self.every {
            return None;
        }
        let phase = t.as_nanos() % every;
        (phase < self.length.as_nanos())
            .then(|| t + Duration::from_nanos((self.length.as_nanos() - phase) as u64))
    }
}

impl LinkConfig {
    /// No loss, no reordering, 10 µs delay, a 1472-byte datagram limit, 10 Gb/s, a 256 KiB
    /// send buffer, an unbounded receive buffer drained at once.
    pub fn clean() -> LinkConfig {
        LinkConfig {
            loss: 0.0,
            duplicate: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            delay: Duration::from_micros(10),
            jitter: Duration::ZERO,
            mtu: 1472,
            bytes_per_sec: Some(10_000_000_000 / 8),
            send_buffer: 256 << 10,
            receive_buffer: usize::MAX,
            drain: Drain::Immediate,
        }
    }

    /// This link with a drop-tail receive buffer of `datagrams`, drained by `drain`.
    pub fn with_receive_buffer(mut self, datagrams: usize, drain: Drain) -> LinkConfig {
        self.receive_buffer = datagrams;
        self.drain = drain;
        self
    }

    /// This link with `loss` probability of dropping each datagram.
    pub fn with_loss(mut self, loss: f64) -> LinkConfig {
        self.loss = loss;
        self
    }
}

/// What happened on one direction of the link.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Datagrams handed to the link.
    pub offered: u64,
    /// Bytes handed to the link.
    pub bytes_offered: u64,
    /// Dropped at random.
    pub lost: u64,
    /// Dropped for exceeding the MTU.
    pub too_big: u64,
    /// Dropped by a scripted filter or because the link is cut.
    pub filtered: u64,
    /// Extra copies made.
    pub duplicated: u64,
    /// Dropped because the receive buffer was full.
    pub overflowed: u64,
    /// Most datagrams the receive buffer held at once.
    pub max_buffered: usize,
    /// Datagrams that reached the other end.
    pub delivered: u64,
}

/// Decides whether to drop a datagram: `(index of the datagram on this link, bytes) -> drop`.
pub type DropFilter = Box<dyn FnMut(u64, &[u8]) -> bool>;

/// One direction: datagrams on the wire, ordered by arrival time, then the receiver's buffer.
pub struct Link {
    /// Behaviour.
    pub cfg: LinkConfig,
    /// Counters.
    pub stats: LinkStats,
    /// When set, every datagram is dropped (a dead rail or a silent peer).
    pub cut: bool,
    /// Scripted drops.
    pub filter: Option<DropFilter>,
    queue: BinaryHeap<Reverse<(Instant, u64, Vec<u8>)>>,
    /// The receive buffer: datagrams that arrived, with the time each leaves it for the
    /// receiver (computed on arrival, in FIFO order).
    buffered: VecDeque<(Instant, Vec<u8>)>,
    /// When the last datagram entered into `buffered` leaves it, and how many leave then
    /// (for `Drain::Poll` batches).
    last_departure: Instant,
    departures_at_last: usize,
    /// The receiving process's stalls.
    receiver_stalls: Option<Stalls>,
    start: Instant,
    free_at: Instant,
    /// Arrival time of the last datagram sent in order (jitter never overtakes it).
    last_arrival: Instant,
    counter: u64,
}

impl Link {
    fn new(cfg: LinkConfig, now: Instant) -> Link {
        Link {
            cfg,
            stats: LinkStats::default(),
            cut: false,
            filter: None,
            queue: BinaryHeap::new(),
            buffered: VecDeque::new(),
            last_departure: now,
            departures_at_last: 0,
            receiver_stalls: None,
            start: now,
            free_at: now,
            last_arrival: now,
            counter: 0,
        }
    }

    /// `t`, or the end of the receiver's stall `t` falls in.
    fn awake_at(&self, t: Instant) -> Instant {
        match self.receiver_stalls {
            Some(st) => st
                .wake_after(t - self.start)
                .map_or(t, |wake| self.start + wake),
            None => t,
        }
    }

    /// When a datagram of `len` bytes entering the buffer at `at` leaves it.
    fn departure(&mut self, at: Instant, len: usize) -> Instant {
        let earliest = at.max(self.last_departure);
        let leaves = match self.cfg.drain {
            Drain::Immediate => self.awake_at(at),
            Drain::Rate { bytes_per_sec } => {
                let begin = self.awake_at(earliest);
                begin + Duration::from_nanos(len as u64 * 1_000_000_000 / bytes_per_sec.max(1))
            }
            Drain::Poll { interval, batch } => {
                let step = interval.as_nanos().max(1);
                let on_grid = |t: Instant| {
                    let since = (t - self.start).as_nanos();
                    self.start
                        + Duration::from_nanos(since.div_ceil(step).saturating_mul(step) as u64)
                };
                let mut poll = self.awake_at(on_grid(earliest));
                if poll == self.last_departure && self.departures_at_last >= batch.max(1) {
                    poll = self.awake_at(on_grid(poll + Duration::from_nanos(1)));
                }
                poll
            }
        };
        if leaves == self.last_departure {
            self.departures_at_last += 1;
        } else {
            self.last_departure = leaves;
            self.departures_at_last = 1;
        }
        leaves
    }

    fn offer(&mut self, now: Instant, bytes: &[u8], rng: &mut Rng) {
        let index = self.stats.offered;
        self.stats.offered += 1;
        self.stats.bytes_offered += bytes.len() as u64;
        if bytes.len() > self.cfg.mtu {
            self.stats.too_big += 1;
            return;
        }
        let filtered = self.filter.as_mut().is_some_and(|f| f(index, bytes));
        if self.cut || filtered {
            self.stats.filtered += 1;
            return;
        }
        if rng.chance(self.cfg.loss) {
            self.stats.lost += 1;
            return;
        }
        let departs = match self.cfg.bytes_per_sec {
            Some(rate) if rate > 0 => {
                let start = self.free_at.max(now);
                let wire_ns = bytes.len() as u64 * 1_000_000_000 / rate;
                self.free_at = start + Duration::from_nanos(wire_ns);
                self.free_at
            }
            _ => now,
        };
        let copies = if rng.chance(self.cfg.duplicate) {
            self.stats.duplicated += 1;
            2
        } else {
            1
        };
        for copy in 0..copies {
            let mut at = departs + self.cfg.delay;
            if !self.cfg.jitter.is_zero() {
                at += Duration::from_nanos(rng.below(self.cfg.jitter.as_nanos() as u64));
            }
            if copy == 0 {
                at = at.max(self.last_arrival);
                self.last_arrival = at;
            }
            if rng.chance(self.cfg.reorder) {
                at += self.cfg.reorder_delay;
            }
            self.counter += 1;
            self.queue.push(Reverse((at, self.counter, bytes.to_vec())));
        }
    }

    /// When the sender may hand over datagrams again: now if its buffer has room, else when
    /// enough has left for the wire.
    fn writable_at(&self, now: Instant) -> Instant {
        match self.cfg.bytes_per_sec {
            Some(rate) if rate > 0 => {
                let buffered = Duration::from_nanos(
                    (self.cfg.send_buffer as u64).saturating_mul(1_000_000_000) / rate,
                );
                now.max(self.free_at.checked_sub(buffered).unwrap_or(now))
            }
            _ => now,
        }
    }

    fn next_on_wire(&self) -> Option<Instant> {
        self.queue.peek().map(|Reverse((at, _, _))| *at)
    }

    /// The next event: a datagram reaching the receive buffer, or one leaving it.
    fn next_arrival(&self) -> Option<Instant> {
        let leaving = self.buffered.front().map(|(at, _)| *at);
        match (self.next_on_wire(), leaving) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The next datagram handed to the receiver by `now`. Events are taken in time order, a
    /// departure before an arrival at the same instant, so that the buffer's occupancy when a
    /// datagram arrives is exact.
    fn pop_due(&mut self, now: Instant) -> Option<Vec<u8>> {
        loop {
            let leaving = self.buffered.front().map(|(at, _)| *at);
            let arriving = self.next_on_wire();
            if leaving.is_some_and(|l| l <= now && arriving.is_none_or(|a| l <= a)) {
                let (_, bytes) = self.buffered.pop_front()?;
                self.stats.delivered += 1;
                return Some(bytes);
            }
            if arriving.is_none_or(|a| a > now) {
                return None;
            }
            let Reverse((at, _, bytes)) = self.queue.pop()?;
            if self.buffered.len() >= self.cfg.receive_buffer {
                self.stats.overflowed += 1;
                continue;
            }
            let leaves = self.departure(at, bytes.len());
            self.buffered.push_back((leaves, bytes));
            self.stats.max_buffered = self.stats.max_buffered.max(self.buffered.len());
        }
    }

    /// Datagrams still in flight (on the wire or in the receive buffer).
    pub fn in_flight(&self) -> usize {
        self.queue.len() + self.buffered.len()
    }
}

/// The messages one side sends: `count` messages, message `i` of `size(i)` bytes generated
/// from `(seed, i)`.
pub struct Workload {
    /// Number of messages.
    pub count: u64,
    /// Size of message `i`.
    pub size: Box<dyn Fn(u64) -> usize>,
    /// Seed of the contents.
    pub seed: u64,
}

impl Workload {
    /// `count` messages of `len` bytes each.
    pub fn fixed(count: u64, len: usize, seed: u64) -> Workload {
        Workload {
            count,
            size: Box::new(move |_| len),
            seed,
        }
    }

    /// No messages.
    pub fn none() -> Workload {
        Workload::fixed(0, 0, 0)
    }

    /// The active-message tag of message `i`.
    pub fn am(i: u64) -> u8 {
        (i % 251) as u8
    }

    /// The contents of message `i`.
    pub fn bytes(&self, i: u64) -> Vec<u8> {
        let mut v = vec![0u8; (self.size)(i)];
        Rng::new(self.seed ^ i.wrapping_mul(0xD6E8_FEB8_6659_FD93)).fill(&mut v);
        v
    }
}

/// One end: its connection, what it sends, what it has received.
pub struct Side {
    /// The connection under test.
    pub conn: Connection,
    /// What this side sends.
    pub workload: Workload,
    /// Messages accepted by `send`.
    pub sent: u64,
    /// Messages delivered and checked.
    pub received: u64,
    /// Datagrams that failed to decode (wrong key, garbage...).
    pub bad_datagrams: u64,
    /// `send` calls refused with would-block.
    pub would_block: u64,
    /// Payload bytes delivered.
    pub bytes_received: u64,
    /// While set, the application does not call `poll_deliver` (a slow receiver).
    pub paused: bool,
    /// Time from the peer's `send` to delivery here, for each message received.
    pub latencies: Vec<Duration>,
    /// Every event the connection reported, with the virtual time its timer ran.
    pub events: Vec<(Instant, Event)>,
    /// When each message accepted by `send` and not yet delivered to the peer was sent.
    send_times: VecDeque<Instant>,
    /// This process's stalls (set with [`Sim::set_stalls`]).
    stalls: Option<Stalls>,
    /// The next message, generated but refused with would-block (kept, not regenerated).
    pending: Option<Vec<u8>>,
}

/// Distribution of message latencies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Latency {
    /// Messages measured.
    pub count: usize,
    /// Median.
    pub p50: Duration,
    /// 99th percentile.
    pub p99: Duration,
    /// Largest.
    pub max: Duration,
}

impl Latency {
    fn of(samples: &[Duration]) -> Latency {
        let mut v = samples.to_vec();
        v.sort_unstable();
        let at = |q: f64| {
            v.get(((v.len() as f64 * q) as usize).min(v.len().saturating_sub(1)))
                .copied()
                .unwrap_or_default()
        };
        Latency {
            count: v.len(),
            p50: at(0.5),
            p99: at(0.99),
            max: v.last().copied().unwrap_or_default(),
        }
    }
}

impl fmt::Display for Latency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} msgs p50 {:?} p99 {:?} max {:?}",
            self.count, self.p50, self.p99, self.max
        )
    }
}

/// Which end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// Rank 0.
    A,
    /// Rank 1.
    B,
}

/// Why a simulated run did not complete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SimError {
    /// A delivered message was not the next expected one, or was damaged.
    Corrupt {
        /// The receiving end.
        at: End,
        /// The index it should have had.
        index: u64,
        /// What differed.
        what: String,
    },
    /// More messages delivered than were sent.
    Extra {
        /// The receiving end.
        at: End,
    },
    /// A connection declared failure.
    Failed {
        /// The failing end.
        at: End,
    },
    /// Step budget used up (a livelock, or a budget too small).
    StepLimit {
        /// Steps run.
        steps: u64,
    },
    /// Virtual-time budget used up.
    TimeLimit {
        /// Virtual time elapsed.
        elapsed: Duration,
    },
    /// Nothing more can happen but the run is not complete.
    Stalled {
        /// Messages received by A and B.
        received: (u64, u64),
    },
    /// `send` refused a message for another reason than would-block.
    Send(SendError),
}

impl fmt::Display for SimError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "simulated link: {self:?}")
    }
}

impl std::error::Error for SimError {}

/// Budgets of a run.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Steps (each advances virtual time to the next event).
    pub max_steps: u64,
    /// Virtual time.
    pub max_time: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 2_000_000,
            max_time: Duration::from_secs(60),
        }
    }
}

/// Outcome of a completed run.
#[derive(Debug, Clone)]
pub struct Report {
    /// Virtual time from start to completion.
    pub elapsed: Duration,
    /// Steps taken.
    pub steps: u64,
    /// Connection counters of A and B.
    pub stats: (ConnStats, ConnStats),
    /// Link counters A→B and B→A.
    pub links: (LinkStats, LinkStats),
    /// Payload bytes delivered to A and to B.
    pub bytes_delivered: (u64, u64),
    /// Latencies of the messages delivered to A and to B.
    pub latency: (Latency, Latency),
}

/// The job key the simulation uses.
pub const SIM_KEY: u64 = 0x5EED_0FC0_FFEE_0042;

/// Two connected ends and the link between them.
pub struct Sim {
    /// Current virtual time.
    pub now: Instant,
    start: Instant,
    /// Rank 0, rail 0.
    pub a: Side,
    /// Rank 1, rail 0.
    pub b: Side,
    /// A → B.
    pub ab: Link,
    /// B → A.
    pub ba: Link,
    rng: Rng,
    buf: Vec<u8>,
    steps: u64,
}

impl Sim {
    /// Two ends with configurations `cfg_a`, `cfg_b`, links `ab` and `ba`, workloads, and the
    /// seed of the link's randomness.
    pub fn new(
        cfg_a: Config,
        cfg_b: Config,
        ab: LinkConfig,
        ba: LinkConfig,
        work_a: Workload,
        work_b: Workload,
        seed: u64,
    ) -> Result<Sim, ConfigError> {
        let start = Instant::now();
        let buf_len = cfg_a.max_datagram.max(cfg_b.max_datagram);
        let conn_a = Connection::new(cfg_a, SIM_KEY, (0, 0), (1, 0), start)?;
        let conn_b = Connection::new(cfg_b, SIM_KEY, (1, 0), (0, 0), start)?;
        let side = |conn, workload| Side {
            conn,
            workload,
            sent: 0,
            received: 0,
            bad_datagrams: 0,
            would_block: 0,
            bytes_received: 0,
            paused: false,
            latencies: Vec::new(),
            events: Vec::new(),
            send_times: VecDeque::new(),
            stalls: None,
            pending: None,
        };
        Ok(Sim {
            now: start,
            start,
            a: side(conn_a, work_a),
            b: side(conn_b, work_b),
            ab: Link::new(ab, start),
            ba: Link::new(ba, start),
            rng: Rng::new(seed),
            buf: vec![0; buf_len],
            steps: 0,
        })
    }

    /// Restarts both connections (before any traffic) with these initial sequence numbers:
    /// `a_to_b` for A's segments, `b_to_a` for B's.
    pub fn set_initial_sequences(&mut self, a_to_b: u16, b_to_a: u16) -> Result<(), ConfigError> {
        let (ca, cb) = (self.a.conn.config().clone(), self.b.conn.config().clone());
        self.a.conn = Connection::new(ca, SIM_KEY, (0, 0), (1, 0), self.now)?
            .with_initial_sequences(a_to_b, b_to_a);
        self.b.conn = Connection::new(cb, SIM_KEY, (1, 0), (0, 0), self.now)?
            .with_initial_sequences(b_to_a, a_to_b);
        Ok(())
    }

    /// Makes `end` stall periodically from now on (or never, with `None`): its receive buffer
    /// stops draining, and it neither sends nor runs timers while stalled.
    pub fn set_stalls(&mut self, end: End, stalls: Option<Stalls>) {
        match end {
            End::A => {
                self.a.stalls = stalls;
                self.ba.receiver_stalls = stalls;
            }
            End::B => {
                self.b.stalls = stalls;
                self.ab.receiver_stalls = stalls;
            }
        }
    }

    /// When `side` wakes up, if it is stalled at `now`.
    fn stalled_until(side: &Side, start: Instant, now: Instant) -> Option<Instant> {
        let wake = side.stalls?.wake_after(now - start)?;
        Some(start + wake)
    }

    /// Virtual time since the start.
    pub fn elapsed(&self) -> Duration {
        self.now - self.start
    }

    /// One end.
    pub fn side(&mut self, end: End) -> &mut Side {
        match end {
            End::A => &mut self.a,
            End::B => &mut self.b,
        }
    }

    /// Hands `bytes` to `end` as if they had just arrived from the network (decoded with the
    /// job key first, as the transport does).
    pub fn inject(&mut self, end: End, bytes: &[u8]) {
        let now = self.now;
        let side = self.side(end);
        match wire::decode(bytes, SIM_KEY) {
            Ok((h, payload)) => side.conn.handle_datagram(now, &h, payload),
            Err(_) => side.bad_datagrams += 1,
        }
    }

    fn feed(side: &mut Side, now: Instant) -> Result<(), SimError> {
        while side.sent < side.workload.count {
            let i = side.sent;
            let bytes = match side.pending.take() {
                Some(b) => b,
                None => side.workload.bytes(i),
            };
            match side.conn.send(Workload::am(i), &[&bytes]) {
                Ok(()) => {
                    side.sent += 1;
                    side.send_times.push_back(now);
                }
                Err(SendError::WouldBlock) => {
                    side.would_block += 1;
                    side.pending = Some(bytes);
                    break;
                }
                Err(SendError::Failed | SendError::Closed) => break,
                Err(e) => return Err(SimError::Send(e)),
            }
        }
        Ok(())
    }

    fn deliver(
        side: &mut Side,
        peer: &Workload,
        peer_send_times: &mut VecDeque<Instant>,
        now: Instant,
        end: End,
    ) -> Result<(), SimError> {
        if side.paused {
            return Ok(());
        }
        while let Some((am, data)) = side.conn.poll_deliver() {
            let index = side.received;
            if index >= peer.count {
                return Err(SimError::Extra { at: end });
            }
            let expected = peer.bytes(index);
            if am != Workload::am(index) || data != expected {
                let what = if data.len() != expected.len() {
                    format!("length {} instead of {}", data.len(), expected.len())
                } else if am != Workload::am(index) {
                    format!("tag {am} instead of {}", Workload::am(index))
                } else {
                    let at = data.iter().zip(&expected).position(|(x, y)| x != y);
                    format!("contents differ at byte {at:?}")
                };
                return Err(SimError::Corrupt {
                    at: end,
                    index,
                    what,
                });
            }
            side.received += 1;
            side.bytes_received += data.len() as u64;
            if let Some(sent_at) = peer_send_times.pop_front() {
                side.latencies.push(now.saturating_duration_since(sent_at));
            }
            side.conn.recycle(data);
        }
        Ok(())
    }

    /// Polls the side for datagrams while its send buffer has room; returns when it may be
    /// polled again if the buffer filled.
    fn transmit(
        side: &mut Side,
        link: &mut Link,
        now: Instant,
        rng: &mut Rng,
        buf: &mut [u8],
    ) -> Option<Instant> {
        loop {
            let writable = link.writable_at(now);
            if writable > now {
                return Some(writable);
            }
            let n = side.conn.poll_transmit(now, buf)?;
            link.offer(now, &buf[..n], rng);
        }
    }

    /// Delivers and checks the messages both (awake) sides have complete.
    fn deliver_both(&mut self) -> Result<(), SimError> {
        let now = self.now;
        if Self::stalled_until(&self.a, self.start, now).is_none() {
            Self::deliver(
                &mut self.a,
                &self.b.workload,
                &mut self.b.send_times,
                now,
                End::A,
            )?;
        }
        if Self::stalled_until(&self.b, self.start, now).is_none() {
            Self::deliver(
                &mut self.b,
                &self.a.workload,
                &mut self.a.send_times,
                now,
                End::B,
            )?;
        }
        Ok(())
    }

    /// Runs one round: sends what the workloads allow, transmits, advances virtual time to the
    /// next event, hands over the datagrams due, runs due timers, delivers and checks messages.
    /// A stalled side does none of this until it wakes. Returns false when no event is left
    /// (nothing in flight, no timer armed).
    pub fn step(&mut self) -> Result<bool, SimError> {
        self.steps += 1;
        let now = self.now;
        let wake_a = Self::stalled_until(&self.a, self.start, now);
        let wake_b = Self::stalled_until(&self.b, self.start, now);
        if wake_a.is_none() {
            Self::feed(&mut self.a, now)?;
        }
        if wake_b.is_none() {
            Self::feed(&mut self.b, now)?;
        }
        // Messages completed by the previous step (or held while a side was paused).
        self.deliver_both()?;
        let side_events = |side: &mut Side,
                           link: &mut Link,
                           wake: Option<Instant>,
                           rng: &mut Rng,
                           buf: &mut [u8]| {
            if wake.is_some() {
                // Asleep: its only event is waking up (then it looks at its timers).
                return [wake, None];
            }
            let blocked = Self::transmit(side, link, now, rng, buf);
            [blocked, side.conn.poll_timeout()]
        };
        let ev_a = side_events(
            &mut self.a,
            &mut self.ab,
            wake_a,
            &mut self.rng,
            &mut self.buf,
        );
        let ev_b = side_events(
            &mut self.b,
            &mut self.ba,
            wake_b,
            &mut self.rng,
            &mut self.buf,
        );
        // The recount is linear in the window: every step while windows are small, then
        // sampled.
        #[cfg(test)]
        if self.steps.is_multiple_of(64) || self.a.conn.in_flight() + self.b.conn.in_flight() < 256
        {
            self.a.conn.check_invariants();
            self.b.conn.check_invariants();
        }
        let next = [self.ab.next_arrival(), self.ba.next_arrival()]
            .into_iter()
            .chain(ev_a)
            .chain(ev_b)
            .flatten()
            .min();
        let Some(next) = next else {
            return Ok(false);
        };
        self.now = self.now.max(next);
        let now = self.now;
        while let Some(bytes) = self.ab.pop_due(now) {
            Self::receive(&mut self.b, now, &bytes);
        }
        while let Some(bytes) = self.ba.pop_due(now) {
            Self::receive(&mut self.a, now, &bytes);
        }
        for side in [&mut self.a, &mut self.b] {
            if Self::stalled_until(side, self.start, now).is_none()
                && side.conn.poll_timeout().is_some_and(|t| t <= now)
            {
                side.conn.handle_timeout(now);
                while let Some(event) = side.conn.poll_event() {
                    side.events.push((now, event));
                }
            }
        }
        // The application takes its messages as soon as they are complete.
        self.deliver_both()?;
        Ok(true)
    }

    fn receive(side: &mut Side, now: Instant, bytes: &[u8]) {
        match wire::decode(bytes, SIM_KEY) {
            Ok((h, payload)) => side.conn.handle_datagram(now, &h, payload),
            Err(_) => side.bad_datagrams += 1,
        }
    }

    /// Every message of both workloads sent, delivered and acknowledged.
    pub fn complete(&self) -> bool {
        self.a.sent == self.a.workload.count
            && self.b.sent == self.b.workload.count
            && self.a.received == self.b.workload.count
            && self.b.received == self.a.workload.count
            && !self.a.conn.has_unacknowledged()
            && !self.b.conn.has_unacknowledged()
    }

    /// Steps until `done(self)` holds, within `limits`. A failed connection is an error unless
    /// `done` accepts it.
    pub fn run_until(
        &mut self,
        limits: Limits,
        mut done: impl FnMut(&Sim) -> bool,
    ) -> Result<(), SimError> {
        let first = self.steps;
        loop {
            if done(self) {
                return Ok(());
            }
            for (side, end) in [(&self.a, End::A), (&self.b, End::B)] {
                if side.conn.is_failed() {
                    return Err(SimError::Failed { at: end });
                }
            }
            if self.steps - first >= limits.max_steps {
                return Err(SimError::StepLimit {
                    steps: self.steps - first,
                });
            }
            if self.elapsed() > limits.max_time {
                return Err(SimError::TimeLimit {
                    elapsed: self.elapsed(),
                });
            }
            if !self.step()? {
                // Deliver what the last step made ready before judging.
                self.deliver_both()?;
                if done(self) {
                    return Ok(());
                }
                return Err(SimError::Stalled {
                    received: (self.a.received, self.b.received),
                });
            }
        }
    }

    /// Runs both workloads to completion (all delivered, checked and acknowledged).
    pub fn drive(&mut self, limits: Limits) -> Result<Report, SimError> {
        self.run_until(limits, |s| s.complete())?;
        Ok(self.report())
    }

    /// The counters so far.
    pub fn report(&self) -> Report {
        Report {
            elapsed: self.elapsed(),
            steps: self.steps,
            stats: (self.a.conn.stats().clone(), self.b.conn.stats().clone()),
            links: (self.ab.stats.clone(), self.ba.stats.clone()),
            bytes_delivered: (self.a.bytes_received, self.b.bytes_received),
            latency: (
                Latency::of(&self.a.latencies),
                Latency::of(&self.b.latencies),
            ),
        }
    }
}
