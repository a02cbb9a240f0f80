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

#[test]
fn a_failed_connected_process_releases_the_buffers_its_rendezvous_sends_exposed() {
    let held = Rc::new(Cell::new(0));
    let mut e = Engine::with_transports(
        &params(),
        EngineSetup {
            rank: 0,
            size: 1,
            nodes: vec!["h0".into()],
            job_id: "dpm-release-test".into(),
            transports: Attached {
                btls: vec![
                    Box::new(SelfBtl::new(0)),
                    Box::new(Registering { held: held.clone() }),
                ],
                names: vec!["self", "registering"],
                route: vec![0],
                bulk_route: vec![0],
                bulk_from: vec![u32::MAX],
                unreachable: vec![None],
            },
            network_flush: false,
            registry: &[],
        },
    );
    // Process 1: rank 0 of another job, reached over the registering transport.
    let p = e.add_process(&ProcInfo {
        job: "other".into(),
        rank: 0,
        node: "h1".into(),
        contact: "127.0.0.1:1".into(),
    });
    e.route[p as usize] = 1;
    e.bulk_route[p as usize] = 1;
    let ctx = 9;
    e.add_context(ctx, vec![0, p]);
    let data: &'static [u8] = Box::leak(vec![5u8; 64 * 1024].into_boxed_slice());
    let ub = UserBuf::for_static_send(data);
    let s = e
        .isend(ctx, 1, 0, ub, false)
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
