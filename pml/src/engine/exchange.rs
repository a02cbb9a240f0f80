//! Blocking byte exchanges among a context's members that the engine's own set-up steps use
//! (context agreement, collective-segment set-up, connections): checked sends and receives,
//! allgather of byte strings. Owns their framing; it must never be used for user messages.

use kestrel_transport::codec::{Reader, Writer};

use super::*;

impl Engine {
    /// One step of a collective algorithm: posts every receive, starts every send, and returns
    /// once all of them completed. It holds the borrows of all buffers until then, which is
    /// what makes it safe. A receive that gets a different length than its buffer is an error
    /// naming the rank (ranks passed mismatched counts).
    pub fn exchange(
        &mut self,
        ctx: u16,
        tag: i32,
        sends: &[(u32, &[u8])],
        recvs: &mut [(u32, &mut [u8])],
    ) -> Result<(), PmlError> {
        let mut ids: Vec<(ReqId, Option<(u32, usize)>)> =
            Vec::with_capacity(sends.len() + recvs.len());
        let mut first_err = None;
        for (src, buf) in recvs.iter_mut() {
            // SAFETY: `buf` stays borrowed until every request of this call has completed
            // (all are waited for below, errors included).
            #[allow(unsafe_code)]
            let ub = unsafe { UserBuf::for_recv(buf.as_mut_ptr(), buf.len()) };
            match self.irecv(ctx, Some(*src), Some(tag), ub) {
                Ok(id) => ids.push((id, Some((*src, buf.len())))),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for (dst, data) in sends {
            // SAFETY: as above.
            #[allow(unsafe_code)]
            let ub = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
            match self.isend(ctx, *dst, tag, ub, false) {
                Ok(id) => ids.push((id, None)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        for (id, expect) in ids {
            let st = self.wait(id);
            if let Some(p) = st.failed_peer {
                if first_err.is_none() {
                    first_err = Some(self.failure_error(p));
                }
                continue;
            }
            if let Some((src, len)) = expect {
                let got = st.truncated_from.unwrap_or(st.count);
                if got != len && first_err.is_none() {
                    first_err = Some(PmlError::Invalid(format!(
                        "collective: rank {src} sent {got} bytes where {len} were expected; every rank must pass matching counts and types"
                    )));
                }
            }
        }
        match first_err {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Blocking helper: sends bytes to a communicator rank.
    pub fn send_bytes(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        data: &[u8],
    ) -> Result<(), PmlError> {
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
        let id = self.isend(ctx, dest, tag, buf, false)?;
        self.wait(id);
        Ok(())
    }

    /// Blocking send that reports a failed peer (or broken communicator) as an error.
    pub fn send_checked(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        data: &[u8],
        sync: bool,
    ) -> Result<(), PmlError> {
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_send(data.as_ptr(), data.len()) };
        let id = self.isend(ctx, dest, tag, buf, sync)?;
        match self.wait(id).failed_peer {
            Some(p) => Err(self.failure_error(p)),
            None => Ok(()),
        }
    }

    /// Blocking receive into `buf` that reports a failed peer (or broken communicator) as an
    /// error instead of a status.
    pub fn recv_checked(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
        buf: &mut [u8],
    ) -> Result<Status, PmlError> {
        // SAFETY: `buf` stays borrowed until the request completes, before this returns.
        #[allow(unsafe_code)]
        let ub = unsafe { UserBuf::for_recv(buf.as_mut_ptr(), buf.len()) };
        let id = self.irecv(ctx, source, tag, ub)?;
        let st = self.wait(id);
        match st.failed_peer {
            Some(p) => Err(self.failure_error(p)),
            None => Ok(st),
        }
    }

    /// Blocking receive of a whole message of any length (a matched probe, then the receive);
    /// a failed peer (or broken communicator) is an error.
    pub fn recv_vec_checked(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Result<(Vec<u8>, Status), PmlError> {
        let mut idle = 0;
        let (handle, status) = loop {
            if let Some(found) = self.improbe(ctx, source, tag)? {
                break found;
            }
            self.idle_step(&mut idle);
        };
        let mut data = vec![0u8; status.count];
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
        let id = self.imrecv(handle, buf)?;
        let st = self.wait(id);
        match st.failed_peer {
            Some(p) => Err(self.failure_error(p)),
            None => Ok((data, st)),
        }
    }

    /// Blocking helper: receives a message of any length from a communicator rank.
    pub fn recv_bytes(&mut self, ctx: u16, source: u32, tag: i32) -> Result<Vec<u8>, PmlError> {
        let mut idle = 0;
        let (handle, status) = loop {
            if let Some(found) = self.improbe(ctx, Some(source), Some(tag))? {
                break found;
            }
            self.idle_step(&mut idle);
        };
        let mut data = vec![0u8; status.count];
        // SAFETY: `data` outlives the request, which completes before this function returns.
        #[allow(unsafe_code)]
        let buf = unsafe { UserBuf::for_recv(data.as_mut_ptr(), data.len()) };
        let id = self.imrecv(handle, buf)?;
        self.wait(id);
        Ok(data)
    }

    /// Collective over `ctx`: every member's bytes, in rank order (linear gather + broadcast).
    pub fn allgather_bytes(&mut self, ctx: u16, mine: &[u8]) -> Result<Vec<Vec<u8>>, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if me != 0 {
            self.send_bytes(ctx, 0, TAG_GATHER, mine)?;
            let packed = self.recv_bytes(ctx, 0, TAG_BCAST)?;
            return unpack(&packed, n as usize).ok_or_else(|| {
                PmlError::Transport("pml: malformed allgather reply from rank 0".into())
            });
        }
        let mut all = vec![mine.to_vec()];
        for r in 1..n {
            all.push(self.recv_bytes(ctx, r, TAG_GATHER)?);
        }
        let packed = pack(&all);
        for r in 1..n {
            self.send_bytes(ctx, r, TAG_BCAST, &packed)?;
        }
        Ok(all)
    }
}

/// The members' byte strings of an allgather, in rank order, each behind its length.
fn pack(parts: &[Vec<u8>]) -> Vec<u8> {
    let mut w = Writer::new();
    for p in parts {
        w.bytes(p);
    }
    w.into_vec()
}

/// Exactly `n` byte strings written by [`pack`] (`None` for anything else: it came from
/// another process).
fn unpack(data: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    let mut r = Reader::new(data, "allgather of byte strings");
    let out = (0..n)
        .map(|_| r.bytes("member"))
        .collect::<Result<Vec<_>, _>>()
        .ok()?;
    r.finish("allgather").ok()?;
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn packed_strings_round_trip_and_anything_else_is_refused() {
        let parts = vec![vec![], b"abc".to_vec(), vec![7; 300]];
        let p = pack(&parts);
        assert_eq!(unpack(&p, 3), Some(parts));
        assert_eq!(unpack(&p, 2), None);
        assert_eq!(unpack(&p, 4), None);
        for cut in 0..p.len() {
            assert_eq!(unpack(&p[..cut], 3), None, "cut at {cut}");
        }
    }
}
