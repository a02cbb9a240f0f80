//! A connected process's failure, seen from the engine: what it must undo in the transports.

use std::cell::Cell;
use std::rc::Rc;

use kestrel_runtime::dpm::ProcInfo;
use kestrel_transport::btl::{Btl, Incoming, Limits, RemoteRegion, SelfBtl, SendError};
use kestrel_transport::params::Params;
use kestrel_transport::set::Attached;

use crate::buf::UserBuf;
use crate::engine::{Engine, EngineSetup};

/// A network transport that accepts every send and counts the buffers it has registered
/// (exposed and not yet released), as ofi does with its RMA registrations.
struct Registering {
    held: Rc<Cell<i64>>,
}

impl Btl for Registering {
    fn name(&self) -> &'static str {
        "registering"
    }
    fn limits(&self) -> Limits {
        Limits {
            eager_limit: 1024,
            max_send: 1024,
            latency_ns: 1_000,
            bandwidth_mbps: 1_000,
            exclusivity: 0,
            get: true,
        }
    }
    fn reaches(&self, _peer: u32) -> bool {
        true
    }
    fn send(&mut self, _peer: u32, _am: u8, _hdr: &[u8], _payload: &[u8]) -> Result<(), SendError> {
        Ok(())
    }
    fn progress(&mut self, _deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        0
    }
    fn expose(&mut self, buf: &[u8]) -> Option<RemoteRegion> {
        self.held.set(self.held.get() + 1);
        Some(RemoteRegion {
            addr: buf.as_ptr() as u64,
            len: buf.len() as u64,
            key: 7,
        })
    }
    fn release(&mut self, _buf: &[u8]) {
        self.held.set(self.held.get() - 1);
    }
}

fn params() -> Params {
    let mut specs = kestrel_transport::core_params::specs();
    specs.extend(crate::params::specs());
    specs.extend(kestrel_runtime::params::specs());
    Params::resolve(&specs, &|_| None, &[]).expect("defaults resolve")
}

/// An engine (rank 0 of 1) with `extra` transports after `self`, and a process of another
/// job (returned) that `route` and `bulk_route` (indices into `self` then `extra`) reach,
/// with messages of `bulk_from` bytes and more going over the bulk route; a context 9 of the
/// two.
fn engine_with(
    extra: Vec<Box<dyn Btl>>,
    route: u8,
    bulk_route: u8,
    bulk_from: u32,
) -> (Engine, u32) {
    let mut btls: Vec<Box<dyn Btl>> = vec![Box::new(SelfBtl::new(0))];
    btls.extend(extra);
    let names = vec!["self"; btls.len()];
    let mut e = Engine::with_transports(
        &params(),
        EngineSetup {
            rank: 0,
            size: 1,
            nodes: vec!["h0".into()],
            job_id: "dpm-release-test".into(),
            transports: Attached {
                btls,
                names,
                route: vec![0],
                bulk_route: vec![0],
                bulk_from: vec![u32::MAX],
                unreachable: vec![None],
            },
            network_flush: false,
            registry: &[],
        },
    );
    let p = e.add_process(&ProcInfo {
        job: "other".into(),
        rank: 0,
        node: "h1".into(),
        contact: "127.0.0.1:1".into(),
    });
    e.route[p as usize] = route;
    e.bulk_route[p as usize] = bulk_route;
    e.bulk_from[p as usize] = bulk_from;
    e.add_context(CTX, vec![0, p]);
    (e, p)
}

const CTX: u16 = 9;

/// A send buffer that outlives the engine.
fn leaked(len: usize) -> UserBuf {
    UserBuf::for_static_send(Box::leak(vec![5u8; len].into_boxed_slice()))
}

#[test]
fn a_failed_connected_process_releases_the_buffers_its_rendezvous_sends_exposed() {
    let held = Rc::new(Cell::new(0));
    let (mut e, p) = engine_with(vec![Box::new(Registering { held: held.clone() })], 1, 1, 0);
    let s = e
        .isend(CTX, 1, 0, leaked(64 * 1024), false)
        .expect("rendezvous send starts");
    assert_eq!(held.get(), 1, "the rendezvous exposed its buffer");

    e.process_gone(p, true, "rank 0 of job other failed".into());

    assert_eq!(held.get(), 0, "the failed send's registration was released");
    let status = e.wait(s);
    assert_eq!(
        status.failed_peer,
        Some(p),
        "the send ends naming the failed process"
    );
}

#[test]
fn a_rendezvous_below_the_bulk_size_is_released_by_the_transport_that_exposed_it() {
    // The eager route's transport exposes a 4 KiB rendezvous (below the bulk route's 1 MiB
    // threshold); the bulk route's transport never saw the buffer.
    let (small, bulk) = (Rc::new(Cell::new(0)), Rc::new(Cell::new(0)));
    let (mut e, p) = engine_with(
        vec![
            Box::new(Registering {
                held: small.clone(),
            }),
            Box::new(Registering { held: bulk.clone() }),
        ],
        1,
        2,
        1 << 20,
    );
    let s = e
        .isend(CTX, 1, 0, leaked(4096), false)
        .expect("rendezvous send starts");
    assert_eq!(
        (small.get(), bulk.get()),
        (1, 0),
        "exposed by the eager route"
    );

    e.process_gone(p, true, "rank 0 of job other failed".into());

    assert_eq!(
        (small.get(), bulk.get()),
        (0, 0),
        "released by the transport that exposed it, and by no other"
    );
    assert_eq!(e.wait(s).failed_peer, Some(p));
}
