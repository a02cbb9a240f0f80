//! Transports of a connection between jobs, seen from the engine.
//!
//! A connection's transports number its processes by their index in the union of both jobs;
//! the engine numbers every process it knows by one process index. [`Remapped`] translates
//! between the two for one transport instance, and [`Retired`] fills the slot of an instance
//! whose connection ended, so slot numbers in routes stay valid. This module owns only the
//! translation; it must never interpret messages.

use std::collections::HashMap;

use crate::btl::{Btl, Incoming, Limits, LocalRegion, RemoteRegion, SendError, SleepReadiness};

/// A transport instance of one connection, seen through process indices: it numbers peers by
/// union index, the engine by process index.
pub struct Remapped {
    inner: Box<dyn Btl>,
    /// Process index → union index.
    to_inner: HashMap<u32, u32>,
    /// Union index → process index (`u32::MAX`: not routed through this instance).
    to_outer: Vec<u32>,
    dropped: u64,
}

impl Remapped {
    /// Wraps `inner`; `pairs` are the (process index, union index) of the processes routed
    /// through it.
    pub fn new(inner: Box<dyn Btl>, pairs: &[(u32, u32)]) -> Remapped {
        let mut to_outer = Vec::new();
        let mut to_inner = HashMap::new();
        for &(outer, inner_id) in pairs {
            if to_outer.len() <= inner_id as usize {
                to_outer.resize(inner_id as usize + 1, u32::MAX);
            }
            to_outer[inner_id as usize] = outer;
            to_inner.insert(outer, inner_id);
        }
        Remapped {
            inner,
            to_inner,
            to_outer,
            dropped: 0,
        }
    }

    fn map(&self, peer: u32) -> Result<u32, SendError> {
        self.to_inner
            .get(&peer)
            .copied()
            .ok_or(SendError::Unreachable { peer })
    }
}

impl Btl for Remapped {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn limits(&self) -> Limits {
        self.inner.limits()
    }
    fn reaches(&self, peer: u32) -> bool {
        self.to_inner
            .get(&peer)
            .is_some_and(|&i| self.inner.reaches(i))
    }
    fn send(&mut self, peer: u32, am: u8, header: &[u8], payload: &[u8]) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner
            .send(i, am, header, payload)
            .map_err(|e| match e {
                SendError::Unreachable { .. } => SendError::Unreachable { peer },
                other => other,
            })
    }
    fn progress(&mut self, deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        let to_outer = &self.to_outer;
        let dropped = &mut self.dropped;
        self.inner.progress(&mut |m| {
            match to_outer.get(m.peer as usize) {
                Some(&outer) if outer != u32::MAX => deliver(Incoming {
                    peer: outer,
                    am: m.am,
                    data: m.data,
                }),
                // A member of the union this process does not talk to through here.
                _ => *dropped += 1,
            }
        })
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.inner.counters()
    }
    fn quiet(&self) -> bool {
        self.inner.quiet()
    }
    fn quiesce(&mut self) -> bool {
        self.inner.quiesce()
    }
    fn prepare_sleep(&mut self, fds: &mut Vec<std::os::fd::RawFd>) -> SleepReadiness {
        self.inner.prepare_sleep(fds)
    }
    fn needs_kernel_time(&self) -> bool {
        self.inner.needs_kernel_time()
    }
    fn can_get(&mut self, peer: u32) -> bool {
        match self.map(peer) {
            Ok(i) => self.inner.can_get(i),
            Err(_) => false,
        }
    }
    fn can_get_unexposed(&mut self, peer: u32) -> bool {
        match self.map(peer) {
            Ok(i) => self.inner.can_get_unexposed(i),
            Err(_) => false,
        }
    }
    fn expose(&mut self, buf: &[u8]) -> Option<RemoteRegion> {
        self.inner.expose(buf)
    }
    fn release(&mut self, buf: &[u8]) {
        self.inner.release(buf)
    }
    fn gets_finish_later(&self) -> bool {
        self.inner.gets_finish_later()
    }
    fn start_get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: LocalRegion,
        ticket: u64,
    ) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner.start_get(i, remote, offset, local, ticket)
    }
    fn take_finished_gets(&mut self, report: &mut dyn FnMut(u64, Result<(), SendError>)) {
        self.inner.take_finished_gets(report)
    }
    fn can_put(&mut self, peer: u32) -> bool {
        match self.map(peer) {
            Ok(i) => self.inner.can_put(i),
            Err(_) => false,
        }
    }
    fn put(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &[u8],
    ) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner.put(i, remote, offset, local)
    }
    fn get(
        &mut self,
        peer: u32,
        remote: RemoteRegion,
        offset: u64,
        local: &mut [u8],
    ) -> Result<(), SendError> {
        let i = self.map(peer)?;
        self.inner.get(i, remote, offset, local)
    }
}

/// What is left in a transport slot after its connection ended: reaches nobody, and keeps
/// the counters the instance had (so that counters summed over slots never decrease).
#[derive(Debug, Default)]
pub struct Retired {
    counters: Vec<(&'static str, u64)>,
}

impl Retired {
    /// The slot of `old`, whose connection ended.
    pub fn after(old: &dyn Btl) -> Retired {
        Retired {
            counters: old.counters(),
        }
    }
}

impl Btl for Retired {
    fn name(&self) -> &'static str {
        "retired"
    }
    fn limits(&self) -> Limits {
        Limits {
            eager_limit: 0,
            max_send: 0,
            latency_ns: u32::MAX,
            bandwidth_mbps: 0,
            exclusivity: 0,
            get: false,
        }
    }
    fn reaches(&self, _peer: u32) -> bool {
        false
    }
    fn send(&mut self, peer: u32, _: u8, _: &[u8], _: &[u8]) -> Result<(), SendError> {
        Err(SendError::Unreachable { peer })
    }
    fn progress(&mut self, _deliver: &mut dyn FnMut(Incoming<'_>)) -> usize {
        0
    }
    fn prepare_sleep(&mut self, _fds: &mut Vec<std::os::fd::RawFd>) -> SleepReadiness {
        SleepReadiness::Ready
    }
    fn counters(&self) -> Vec<(&'static str, u64)> {
        self.counters.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::btl::SelfBtl;

    #[test]
    fn remapped_translates_peers_both_ways_and_drops_strangers() {
        // Union index 4 is this process inside the instance; the engine calls it 9.
        let mut b = Remapped::new(Box::new(SelfBtl::new(4)), &[(9, 4)]);
        assert!(b.reaches(9));
        assert!(!b.reaches(4));
        b.send(9, 1, b"hdr", b"payload").unwrap();
        assert_eq!(
            b.send(5, 1, b"", b""),
            Err(SendError::Unreachable { peer: 5 })
        );
        let mut got = Vec::new();
        b.progress(&mut |m| got.push((m.peer, m.am, m.data.to_vec())));
        assert_eq!(got, vec![(9, 1, b"hdrpayload".to_vec())]);
        // An instance member this process does not route through it: dropped, counted.
        let mut stray = Remapped::new(Box::new(SelfBtl::new(2)), &[(7, 3)]);
        stray.inner.send(2, 1, b"x", b"").unwrap();
        let mut n = 0;
        stray.progress(&mut |_| n += 1);
        assert_eq!((n, stray.dropped), (0, 1));
        let mut r = Retired::after(&stray);
        assert!(!r.reaches(0));
        assert!(r.counters().is_empty());
        assert_eq!(r.progress(&mut |_| {}), 0);
    }
}
