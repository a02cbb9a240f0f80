//! A process's out-of-band listener: the TCP socket behind its ports and lifelines.
//!
//! Each process that takes part in dynamic-process operations starts one listener (a TCP
//! socket on every IPv4 address, and a thread that accepts on it). Every incoming connection
//! gets its own short-lived thread that sends a `Challenge` (a fresh nonce), reads the first
//! frame with a bounded wait and files it:
//!
//! * `Connect` for an open port's tag whose proof of the port's token over the challenge
//!   verifies is queued for that port's `accept`; a wrong proof is dropped without an answer
//!   and logged at warning level with the peer's address (so a stranger who guesses a tag
//!   learns nothing and never reaches an accept); a closed or unknown tag is answered with
//!   `Refuse`;
//! * `Lifeline` for a connection this process expects lifelines for
//!   ([`Listener::expect_lifelines`], from the moment it learns the connection's random id in
//!   the authenticated connect/accept exchange until it has claimed them) is answered with
//!   `LifelineOk` and kept until the local side claims it; one naming any other connection is
//!   dropped without an answer and logged with the peer's address, so a stranger can neither
//!   plant a lifeline (whose later close would read as a peer's failure) nor hold sockets
//!   and memory of this process;
//! * `SpawnFailed` (from the launcher, which knows the port name it spawned for) with a valid
//!   proof is queued for the port like a connection, so an accept waiting for children that
//!   will never come returns an error; without one it is dropped and logged.
//!
//! Anything else (a stranger, a port scanner, garbage) is dropped and logged. The listener
//! never touches a transport and never blocks its caller except in the `wait_*` functions,
//! which call back the caller's progress function while they wait.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::{Ipv4Addr, TcpListener, TcpStream};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use super::oob::{read_frame, write_frame, OobMsg, ProcInfo};
use super::port::{PortName, PortRole, TOKEN_LEN};

/// How long a new connection may take to send its first frame.
const FIRST_FRAME_WAIT: Duration = Duration::from_secs(10);

/// Lifelines kept for connections nobody claimed yet, at most (a bound against strangers).
const MAX_UNCLAIMED_LIFELINES: usize = 65536;

/// What arrived on an open port.
#[derive(Debug)]
pub enum PortEvent {
    /// A root wants to connect.
    Connect {
        /// The connection (its `Connect` frame was read).
        stream: TcpStream,
        /// The connecting group.
        group: Vec<ProcInfo>,
        /// The connecting group's free context id.
        ctx: u16,
        /// The connecting root's nonce, which the `Accept` proves the port's token over.
        nonce: Vec<u8>,
    },
    /// The launcher says the job spawned for this port ended before it connected.
    SpawnFailed {
        /// How it ended.
        reason: String,
    },
}

/// A lifeline someone opened to this process.
#[derive(Debug)]
pub struct IncomingLifeline {
    /// The remote process's job.
    pub job: String,
    /// Its rank in that job.
    pub rank: u32,
    /// The socket.
    pub stream: TcpStream,
}

/// An open port: its token and what arrived for it.
struct OpenPort {
    token: [u8; TOKEN_LEN],
    queue: VecDeque<PortEvent>,
}

#[derive(Default)]
struct State {
    open: HashMap<u32, OpenPort>,
    next_tag: u32,
    lifelines: HashMap<u64, Vec<IncomingLifeline>>,
    unclaimed: usize,
    /// Connections whose lifelines are expected (see the module doc).
    expected: HashSet<u64>,
}

impl State {
    /// Ends the expectation of `conn`'s lifelines and takes the ones that arrived.
    fn close_lifelines(&mut self, conn: u64) -> Vec<IncomingLifeline> {
        self.expected.remove(&conn);
        let got = self.lifelines.remove(&conn).unwrap_or_default();
        self.unclaimed = self.unclaimed.saturating_sub(got.len());
        got
    }
}

struct Shared {
    state: Mutex<State>,
    cv: Condvar,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A thread that panicked while holding the lock left plain data behind: keep going.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The listener of this process.
pub struct Listener {
    shared: Arc<Shared>,
    tcp_port: u16,
    addresses: Vec<Ipv4Addr>,
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Listener({})", self.contact())
    }
}

impl Listener {
    /// Binds a TCP socket on every IPv4 address and starts the accepting thread. `addresses`
    /// are the ones advertised, in the order peers should try them.
    pub fn start(addresses: Vec<Ipv4Addr>) -> std::io::Result<Listener> {
        let socket = TcpListener::bind((Ipv4Addr::UNSPECIFIED, 0))?;
        let tcp_port = socket.local_addr()?.port();
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                next_tag: 1,
                ..State::default()
            }),
            cv: Condvar::new(),
        });
        let weak = Arc::downgrade(&shared);
        std::thread::Builder::new()
            .name("kestrel-dpm-listener".into())
            .spawn(move || {
                for conn in socket.incoming() {
                    let Some(shared) = weak.upgrade() else { return };
                    match conn {
                        Ok(stream) => {
                            let _ = std::thread::Builder::new()
                                .name("kestrel-dpm-intake".into())
                                .spawn(move || intake(&shared, stream));
                        }
                        Err(e) => {
                            tracing::warn!(target: "dpm", "accepting an out-of-band connection failed: {e}");
                            std::thread::sleep(Duration::from_millis(10));
                        }
                    }
                }
            })?;
        let addresses = if addresses.is_empty() {
            vec![Ipv4Addr::LOCALHOST]
        } else {
            addresses
        };
        tracing::debug!(target: "dpm", port = tcp_port, ?addresses, "out-of-band listener started");
        Ok(Listener {
            shared,
            tcp_port,
            addresses,
        })
    }

    /// `ip[,ip...]:port`: how peers reach this listener (for lifelines).
    pub fn contact(&self) -> String {
        let ips: Vec<String> = self.addresses.iter().map(|a| a.to_string()).collect();
        format!("{}:{}", ips.join(","), self.tcp_port)
    }

    /// Opens a new port with a fresh random token and returns its name.
    pub fn open_port(&self) -> Result<PortName, String> {
        let mut token = [0u8; TOKEN_LEN];
        crate::mac::random_bytes(&mut token).map_err(|e| format!("dpm: open_port: {e}"))?;
        let mut st = self.shared.lock();
        let tag = st.next_tag;
        st.next_tag = st.next_tag.wrapping_add(1).max(1);
        st.open.insert(
            tag,
            OpenPort {
                token,
                queue: VecDeque::new(),
            },
        );
        Ok(PortName::new(&self.addresses, self.tcp_port, tag, token))
    }

    /// Whether `port` names an open port of this listener (its token included).
    pub fn owns(&self, port: &PortName) -> bool {
        port.tcp_port == self.tcp_port
            && self
                .shared
                .lock()
                .open
                .get(&port.tag)
                .is_some_and(|p| p.token == port.token)
    }

    /// Closes a port: connections queued on it are refused. False if it was not open here.
    pub fn close_port(&self, port: &PortName) -> bool {
        if !self.owns(port) {
            return false;
        }
        let queued = self.shared.lock().open.remove(&port.tag);
        let Some(queued) = queued else { return false };
        for ev in queued.queue {
            if let PortEvent::Connect { mut stream, .. } = ev {
                let _ = write_frame(
                    &mut stream,
                    &OobMsg::Refuse {
                        reason: format!("port {port} was closed before it accepted"),
                    },
                );
            }
        }
        true
    }

    /// Waits for the next event on an open port, calling `idle` between checks (the caller's
    /// progress); `None` when `deadline` passes first. An error when the port is not open.
    pub fn wait_port(
        &self,
        port: &PortName,
        deadline: Option<Instant>,
        idle: &mut dyn FnMut(),
    ) -> Result<Option<PortEvent>, String> {
        loop {
            {
                let mut st = self.shared.lock();
                match st.open.get_mut(&port.tag).filter(|p| p.token == port.token) {
                    None => return Err(format!("dpm: port {port} is not open in this process (closed, or opened by another process); accept on a port this process opened")),
                    Some(p) => {
                        if let Some(ev) = p.queue.pop_front() {
                            return Ok(Some(ev));
                        }
                    }
                }
                if deadline.is_some_and(|d| Instant::now() >= d) {
                    return Ok(None);
                }
                // Short waits: the caller must keep its transports progressing.
                let _ = self.shared.cv.wait_timeout(st, Duration::from_micros(500));
            }
            idle();
        }
    }

    /// Lifelines for connection `conn` may arrive from now on (its id came from the
    /// authenticated connect/accept exchange); until then, and after [`Self::forget_lifelines`],
    /// the listener refuses them.
    pub fn expect_lifelines(&self, conn: u64) {
        self.shared.lock().expected.insert(conn);
    }

    /// No more lifelines for `conn`: unclaimed ones are closed, later ones refused.
    pub fn forget_lifelines(&self, conn: u64) {
        self.shared.lock().close_lifelines(conn);
    }

    /// Takes the lifelines that arrived for connection `conn` from each of `expected` (job,
    /// rank) pairs, waiting until all are there or `deadline` passes. Returns them in the order
    /// of `expected`, or the ones still missing. Either way the connection's lifelines are
    /// no longer expected afterwards.
    pub fn wait_lifelines(
        &self,
        conn: u64,
        expected: &[(String, u32)],
        deadline: Instant,
        idle: &mut dyn FnMut(),
    ) -> Result<Vec<TcpStream>, Vec<(String, u32)>> {
        loop {
            {
                let mut st = self.shared.lock();
                let all = expected.iter().all(|(j, r)| {
                    st.lifelines
                        .get(&conn)
                        .is_some_and(|v| v.iter().any(|l| &l.job == j && l.rank == *r))
                });
                if all {
                    let mut got = st.close_lifelines(conn);
                    let mut out = Vec::with_capacity(expected.len());
                    for (j, r) in expected {
                        let i = got
                            .iter()
                            .position(|l| &l.job == j && l.rank == *r)
                            .expect("checked above");
                        out.push(got.swap_remove(i).stream);
                    }
                    return Ok(out);
                }
                if Instant::now() >= deadline {
                    let missing = expected
                        .iter()
                        .filter(|(j, r)| {
                            !st.lifelines
                                .get(&conn)
                                .is_some_and(|v| v.iter().any(|l| &l.job == j && l.rank == *r))
                        })
                        .cloned()
                        .collect();
                    st.close_lifelines(conn);
                    return Err(missing);
                }
                let _ = self.shared.cv.wait_timeout(st, Duration::from_micros(500));
            }
            idle();
        }
    }
}

/// Whether `proof` shows the token of open port `p` (tag `tag`) for `role` over `challenge`.
fn proves(p: &OpenPort, tag: u32, role: PortRole, challenge: &[u8], proof: &[u8]) -> bool {
    PortName::new(&[], 0, tag, p.token).verify(role, challenge, proof)
}

/// Reads a frame, skipping the listener's `Challenge` (a lifeline opener, which proves
/// nothing, reads its answer this way).
pub fn read_frame_after_challenge(
    stream: &mut TcpStream,
) -> Result<OobMsg, super::oob::FrameError> {
    match read_frame(stream)? {
        OobMsg::Challenge { .. } => read_frame(stream),
        other => Ok(other),
    }
}

/// Reads the first frame of a new connection and files it.
fn intake(shared: &Shared, mut stream: TcpStream) {
    let peer = stream
        .peer_addr()
        .map(|a| a.to_string())
        .unwrap_or_else(|_| "?".into());
    let _ = stream.set_read_timeout(Some(FIRST_FRAME_WAIT));
    let _ = stream.set_write_timeout(Some(FIRST_FRAME_WAIT));
    let _ = stream.set_nodelay(true);
    let challenge = match crate::mac::nonce() {
        Ok(n) => n,
        Err(e) => {
            tracing::warn!(target: "dpm", "dropped an out-of-band connection: {e}");
            return;
        }
    };
    let greeted = write_frame(
        &mut stream,
        &OobMsg::Challenge {
            nonce: challenge.clone(),
        },
    );
    if greeted.is_err() {
        return;
    }
    let msg = match read_frame(&mut stream) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(target: "dpm", %peer, "dropped an out-of-band connection: {e}");
            return;
        }
    };
    let _ = stream.set_read_timeout(None);
    match msg {
        OobMsg::Connect {
            tag,
            proof,
            nonce,
            group,
            ctx,
        } => {
            let mut st = shared.lock();
            match st.open.get_mut(&tag) {
                Some(p) if !proves(p, tag, PortRole::Connect, &challenge, &proof) => {
                    drop(st);
                    tracing::warn!(target: "dpm", %peer, "refused a connection to port tag {tag}: it did not prove the port's token");
                }
                Some(p) => {
                    p.queue.push_back(PortEvent::Connect {
                        stream,
                        group,
                        ctx,
                        nonce,
                    });
                    shared.cv.notify_all();
                }
                None => {
                    drop(st);
                    let _ = write_frame(
                        &mut stream,
                        &OobMsg::Refuse {
                            reason: format!(
                                "the process listening there has no open port with tag {tag} (the port was closed)"
                            ),
                        },
                    );
                }
            }
        }
        OobMsg::SpawnFailed { tag, proof, reason } => {
            let mut st = shared.lock();
            match st.open.get_mut(&tag) {
                Some(p) if proves(p, tag, PortRole::SpawnFailed, &challenge, &proof) => {
                    p.queue.push_back(PortEvent::SpawnFailed { reason });
                    shared.cv.notify_all();
                }
                Some(_) => {
                    drop(st);
                    tracing::warn!(target: "dpm", %peer, "ignored a spawn failure report for port tag {tag}: it did not prove the port's token");
                }
                None => {}
            }
        }
        OobMsg::Lifeline { conn, job, rank } => {
            let mut st = shared.lock();
            if !st.expected.contains(&conn) {
                drop(st);
                tracing::warn!(target: "dpm", %peer, "refused a lifeline from rank {rank} of job {job}: it names no connection this process is setting up");
                return;
            }
            if st.unclaimed >= MAX_UNCLAIMED_LIFELINES {
                tracing::warn!(target: "dpm", %peer, "too many unclaimed lifelines; dropping one");
                return;
            }
            if write_frame(&mut stream, &OobMsg::LifelineOk).is_err() {
                return;
            }
            st.unclaimed += 1;
            st.lifelines
                .entry(conn)
                .or_default()
                .push(IncomingLifeline { job, rank, stream });
            shared.cv.notify_all();
        }
        other => {
            tracing::debug!(target: "dpm", %peer, "dropped an out-of-band connection that opened with {}", other.kind());
        }
    }
}

/// Connects to the first reachable of `candidates` (`ip:port` strings, or a contact string
/// `ip[,ip...]:port`), trying until `deadline` and calling `idle` between attempts.
pub fn connect_any(
    candidates: &[std::net::SocketAddr],
    deadline: Instant,
    idle: &mut dyn FnMut(),
) -> Result<TcpStream, String> {
    let mut last = String::from("no address to try");
    loop {
        for addr in candidates {
            let left = deadline.saturating_duration_since(Instant::now());
            let attempt = left.clamp(Duration::from_millis(1), Duration::from_secs(2));
            match TcpStream::connect_timeout(addr, attempt) {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        if Instant::now() >= deadline {
            return Err(last);
        }
        // Retry a little later: the listener may not be up yet, or a route may come back.
        let pause = Instant::now() + Duration::from_millis(50);
        while Instant::now() < pause {
            idle();
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The socket addresses of a contact string `ip[,ip...]:port`.
pub fn parse_contact(contact: &str) -> Result<Vec<std::net::SocketAddr>, String> {
    let (ips, port) = contact
        .rsplit_once(':')
        .ok_or_else(|| format!("contact '{contact}' has no port"))?;
    let port: u16 = port
        .parse()
        .map_err(|_| format!("contact '{contact}' has a bad port"))?;
    ips.split(',')
        .map(|ip| {
            ip.parse::<Ipv4Addr>()
                .map(|a| std::net::SocketAddr::from((a, port)))
                .map_err(|_| format!("contact '{contact}' has a bad address '{ip}'"))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn listener() -> Listener {
        Listener::start(vec![Ipv4Addr::LOCALHOST]).unwrap()
    }

    fn dial(port: &PortName) -> TcpStream {
        connect_any(
            &port.socket_addresses(),
            Instant::now() + Duration::from_secs(5),
            &mut || {},
        )
        .unwrap()
    }

    /// Dials `port` and reads the listener's challenge.
    fn dial_challenged(port: &PortName) -> (TcpStream, Vec<u8>) {
        let mut s = dial(port);
        match read_frame(&mut s).unwrap() {
            OobMsg::Challenge { nonce } => (s, nonce),
            other => panic!("the listener opened with {other:?}"),
        }
    }

    /// A `Connect` for `port` with a proof made with `token`.
    fn connect(port: &PortName, token: [u8; TOKEN_LEN], challenge: &[u8], ctx: u16) -> OobMsg {
        let as_known = PortName::new(&[], 0, port.tag, token);
        OobMsg::Connect {
            tag: port.tag,
            proof: as_known.proof(PortRole::Connect, challenge),
            nonce: vec![7; crate::mac::NONCE_LEN],
            group: vec![],
            ctx,
        }
    }

    fn next_event(l: &Listener, p: &PortName, within: Duration) -> Option<PortEvent> {
        l.wait_port(p, Some(Instant::now() + within), &mut || {})
            .unwrap()
    }

    #[test]
    fn connections_queue_on_open_ports_and_closed_ports_refuse() {
        let l = listener();
        let p = l.open_port().unwrap();
        let q = l.open_port().unwrap();
        assert_ne!(p.tag, q.tag);
        assert_ne!(p.token, q.token);
        assert!(l.owns(&p));
        let (mut s, challenge) = dial_challenged(&p);
        write_frame(&mut s, &connect(&p, p.token, &challenge, 5)).unwrap();
        let ev = next_event(&l, &p, Duration::from_secs(5)).unwrap();
        assert!(matches!(ev, PortEvent::Connect { ctx: 5, ref nonce, .. } if nonce == &[7; 32]));
        // Nothing more: the wait ends at the deadline.
        assert!(next_event(&l, &p, Duration::from_millis(20)).is_none());
        // A closed port refuses with a reason.
        assert!(l.close_port(&q));
        assert!(!l.close_port(&q));
        let (mut s, challenge) = dial_challenged(&q);
        write_frame(&mut s, &connect(&q, q.token, &challenge, 1)).unwrap();
        match read_frame(&mut s).unwrap() {
            OobMsg::Refuse { reason } => assert!(reason.contains("closed"), "{reason}"),
            other => panic!("{other:?}"),
        }
        assert!(l.wait_port(&q, None, &mut || {}).is_err());
    }

    #[test]
    fn a_stranger_without_the_token_never_reaches_an_accept() {
        // A stranger knows the address, port and tag (a counter) but not the token.
        let l = listener();
        let p = l.open_port().unwrap();
        let mut guessed = p.clone();
        guessed.token = [0; TOKEN_LEN];
        assert!(!l.owns(&guessed), "a port is owned only with its token");
        // A connect with a wrong proof, one replaying a proof made over another challenge,
        // and a spawn failure report without a proof: each is dropped without an answer.
        let (mut s, challenge) = dial_challenged(&p);
        write_frame(&mut s, &connect(&p, [0; TOKEN_LEN], &challenge, 9)).unwrap();
        assert!(read_frame(&mut s).is_err(), "a stranger got an answer");
        let (mut s, _) = dial_challenged(&p);
        write_frame(&mut s, &connect(&p, p.token, &[1; 32], 9)).unwrap();
        assert!(
            read_frame(&mut s).is_err(),
            "a replayed proof got an answer"
        );
        let (mut s, _) = dial_challenged(&p);
        write_frame(
            &mut s,
            &OobMsg::SpawnFailed {
                tag: p.tag,
                proof: vec![],
                reason: "a stranger's text".into(),
            },
        )
        .unwrap();
        let _ = read_frame(&mut s);
        assert!(
            next_event(&l, &p, Duration::from_millis(100)).is_none(),
            "a stranger's frame reached the accept"
        );
        // The real connector still gets through.
        let (mut s, challenge) = dial_challenged(&p);
        write_frame(&mut s, &connect(&p, p.token, &challenge, 4)).unwrap();
        let ev = next_event(&l, &p, Duration::from_secs(5)).unwrap();
        assert!(matches!(ev, PortEvent::Connect { ctx: 4, .. }));
    }

    #[test]
    fn garbage_is_dropped_and_the_listener_keeps_working() {
        let l = listener();
        let p = l.open_port().unwrap();
        let mut junk = dial(&p);
        use std::io::Write;
        junk.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
        let mut short = dial(&p);
        short.write_all(&[0, 0, 0, 50, b'K']).unwrap();
        drop(short);
        let (mut s, challenge) = dial_challenged(&p);
        write_frame(
            &mut s,
            &OobMsg::SpawnFailed {
                tag: p.tag,
                proof: p.proof(PortRole::SpawnFailed, &challenge),
                reason: "exit 3".into(),
            },
        )
        .unwrap();
        let ev = next_event(&l, &p, Duration::from_secs(5)).unwrap();
        assert!(matches!(ev, PortEvent::SpawnFailed { reason } if reason == "exit 3"));
    }

    #[test]
    fn lifelines_are_claimed_by_connection_and_identity() {
        let l = listener();
        l.expect_lifelines(77);
        l.expect_lifelines(78);
        let mut opened = Vec::new();
        for rank in [2u32, 0] {
            let mut s = open_lifeline(&l, 77, rank);
            assert_eq!(
                read_frame_after_challenge(&mut s).unwrap(),
                OobMsg::LifelineOk
            );
            opened.push(s);
        }
        let want = vec![("j".to_string(), 0), ("j".to_string(), 2)];
        let got = l
            .wait_lifelines(
                77,
                &want,
                Instant::now() + Duration::from_secs(5),
                &mut || {},
            )
            .unwrap();
        assert_eq!(got.len(), 2);
        let missing = l
            .wait_lifelines(
                78,
                &[("k".to_string(), 1)],
                Instant::now() + Duration::from_millis(20),
                &mut || {},
            )
            .unwrap_err();
        assert_eq!(missing, vec![("k".to_string(), 1)]);
    }

    fn open_lifeline(l: &Listener, conn: u64, rank: u32) -> TcpStream {
        let addrs = parse_contact(&l.contact()).unwrap();
        let mut s =
            connect_any(&addrs, Instant::now() + Duration::from_secs(5), &mut || {}).unwrap();
        write_frame(
            &mut s,
            &OobMsg::Lifeline {
                conn,
                job: "j".into(),
                rank,
            },
        )
        .unwrap();
        s
    }

    #[test]
    fn lifelines_for_connections_not_being_set_up_are_refused() {
        let l = listener();
        // Never expected: no answer, the socket is closed, nothing is kept.
        let mut stranger = open_lifeline(&l, 5, 0);
        assert!(read_frame_after_challenge(&mut stranger).is_err());
        // Expected, claimed, then no longer expected: a late or replayed one is refused too.
        l.expect_lifelines(6);
        let mut real = open_lifeline(&l, 6, 1);
        assert_eq!(
            read_frame_after_challenge(&mut real).unwrap(),
            OobMsg::LifelineOk
        );
        let got = l
            .wait_lifelines(
                6,
                &[("j".to_string(), 1)],
                Instant::now() + Duration::from_secs(5),
                &mut || {},
            )
            .unwrap();
        assert_eq!(got.len(), 1);
        let mut late = open_lifeline(&l, 6, 1);
        assert!(read_frame_after_challenge(&mut late).is_err());
        // Forgotten before it was claimed: closed.
        l.expect_lifelines(7);
        let mut dropped = open_lifeline(&l, 7, 2);
        assert_eq!(
            read_frame_after_challenge(&mut dropped).unwrap(),
            OobMsg::LifelineOk
        );
        l.forget_lifelines(7);
        let mut refused = open_lifeline(&l, 7, 3);
        assert!(read_frame_after_challenge(&mut refused).is_err());
        assert_eq!(l.shared.lock().unclaimed, 0);
        assert!(l.shared.lock().lifelines.is_empty());
    }

    #[test]
    fn contacts_parse_strictly() {
        assert_eq!(parse_contact("127.0.0.1,10.0.0.1:80").unwrap().len(), 2);
        assert!(parse_contact("127.0.0.1").is_err());
        assert!(parse_contact("host:80").is_err());
        assert!(parse_contact("127.0.0.1:x").is_err());
    }

    #[test]
    fn connecting_to_nothing_times_out_with_the_address() {
        // A port nobody listens on: bind, learn the port, close.
        let port = {
            let s = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
            s.local_addr().unwrap().port()
        };
        let start = Instant::now();
        let mut idles = 0;
        let e = connect_any(
            &[std::net::SocketAddr::from((Ipv4Addr::LOCALHOST, port))],
            Instant::now() + Duration::from_millis(300),
            &mut || idles += 1,
        )
        .unwrap_err();
        assert!(start.elapsed() >= Duration::from_millis(300));
        assert!(e.contains(&port.to_string()), "{e}");
        assert!(idles > 0);
    }
}
