//! Starting operations: sends (eager or rendezvous), receives, probes, matched probes and
//! cancel, and the errors for peers no transport reaches. Owns the fast path of a small
//! send; it must never wait.

use kestrel_transport::btl::SendError;

use super::*;

impl Engine {
    pub(super) fn no_route(&self, peer: u32) -> PmlError {
        let node = |r: u32| {
            self.nodes
                .get(r as usize)
                .map(String::as_str)
                .unwrap_or("?")
        };
        let why = self
            .unreachable
            .get(peer as usize)
            .and_then(Option::as_deref)
            .unwrap_or("no transport allowed by the btl parameter reaches it");
        PmlError::Unreachable(format!(
            "pml: no transport reaches rank {peer} on {} from rank {} on {} (transports in use: \
             {}): {why}",
            node(peer),
            self.rank,
            node(self.rank),
            self.selected,
        ))
    }

    #[cold]
    pub(super) fn send_route_error(&self, peer: u32) -> PmlError {
        if let Some(why) = self.dpm.gone_reason(peer) {
            return PmlError::Dpm(kestrel_runtime::dpm::DpmError::ProcFailed(why.to_string()));
        }
        self.no_route(peer)
    }

    /// Why `isend` cannot use context `ctx` (missing or broken) or rank `dest` in it.
    #[cold]
    pub(super) fn send_ctx_error(&self, ctx: u16, dest: u32) -> PmlError {
        match self.ctx(ctx) {
            Err(e) => e,
            Ok(c) => PmlError::Invalid(format!(
                "pml: destination rank {dest} is outside a communicator of {}",
                c.group.len()
            )),
        }
    }

    /// Starts a send of `buf` to communicator rank `dest` of `ctx`. `sync` makes it complete
    /// only once the receiver matched it.
    #[inline]
    pub fn isend(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        buf: UserBuf,
        sync: bool,
    ) -> Result<ReqId, PmlError> {
        self.isend_with(ctx, dest, tag, buf, sync, false)
    }

    /// [`Engine::isend`]; `pull` asks the receiver of a rendezvous to read the whole
    /// message itself (see `engine::detached`).
    #[inline(always)]
    pub(super) fn isend_with(
        &mut self,
        ctx: u16,
        dest: u32,
        tag: i32,
        buf: UserBuf,
        sync: bool,
        pull: bool,
    ) -> Result<ReqId, PmlError> {
        // One lookup of the context serves the checks, the route and the sequence number:
        // this is the path of every small send.
        let (peer, me, b, seq) = match self.st.ctxs.get_mut(ctx as usize) {
            Some(Some(c)) if c.broken.is_none() && (dest as usize) < c.group.len() => {
                let peer = c.group[dest as usize];
                // Large enough messages go whole over the peer's bulk route.
                let b = if buf.len() + hdr::MATCH_LEN >= self.bulk_from[peer as usize] as usize {
                    self.bulk_route[peer as usize]
                } else {
                    self.route[peer as usize]
                };
                if b == NO_ROUTE {
                    return Err(self.send_route_error(peer));
                }
                let seq = &mut c.send_seq[dest as usize];
                let s = *seq;
                *seq = s.wrapping_add(1);
                (peer, c.me, b, s)
            }
            _ => return Err(self.send_ctx_error(ctx, dest)),
        };
        let eager_limit = self.eager_limits[b as usize];
        let len = buf.len();
        // Tools' counters (engine::counters): two plain adds to the engine's own state.
        self.st.counters.sent += 1;
        self.st.counters.sent_bytes += len as u64;
        if !sync && len + hdr::MATCH_LEN <= eager_limit {
            let h = hdr::match_header(ctx, me, tag, seq);
            if self.st.outbox.is_empty() {
                match self.btls[b as usize].send(peer, AM_PML, &h, buf.as_slice()) {
                    Ok(()) => return Ok(DONE),
                    Err(SendError::WouldBlock) => {}
                    Err(e) => return Err(PmlError::Transport(e.to_string())),
                }
            }
            self.st.outbox.push_back(Out::Msg {
                peer,
                hdr: h.to_vec(),
                data: buf.as_slice().to_vec(),
            });
            return Ok(DONE);
        }
        if sync && len + hdr::SYNC_LEN <= eager_limit {
            let id = self.st.alloc(Req::Send {
                peer,
                buf,
                state: SendState::WaitAck,
                failed: None,
            });
            let mut h = Vec::with_capacity(hdr::SYNC_LEN);
            hdr::encode(
                &Header::Match {
                    ctx,
                    src: me,
                    tag,
                    seq,
                    sync_req: Some(id),
                },
                &mut h,
            );
            self.st.outbox.push_back(Out::Msg {
                peer,
                hdr: h,
                data: buf.as_slice().to_vec(),
            });
            self.drain_outbox();
            return Ok(id);
        }
        let exposed = if self.btls[b as usize].limits().get {
            self.btls[b as usize].expose(buf.as_slice())
        } else {
            None
        };
        let id = self.st.alloc(Req::Send {
            peer,
            buf,
            state: SendState::Rndv {
                exposed_by: exposed.map(|_| b),
            },
            failed: None,
        });
        let mut h = Vec::with_capacity(hdr::RNDV_LEN);
        hdr::encode(
            &Header::Rndv {
                ctx,
                src: me,
                tag,
                seq,
                len: len as u64,
                send_req: id,
                get_addr: exposed.map(|r| r.addr),
                get_key: exposed.map_or(0, |r| r.key),
                pull,
            },
            &mut h,
        );
        self.st.outbox.push_back(Out::Msg {
            peer,
            hdr: h,
            data: Vec::new(),
        });
        self.drain_outbox();
        Ok(id)
    }

    /// Posts a receive into `buf` from communicator rank `source` (None = any) with `tag`
    /// (None = any non-negative tag).
    pub fn irecv(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
        buf: UserBuf,
    ) -> Result<ReqId, PmlError> {
        // `Engine::ctx`'s checks without building its result: this runs once per receive.
        if !matches!(self.st.ctxs.get(ctx as usize), Some(Some(c)) if c.broken.is_none()) {
            return Err(self.ctx(ctx).err().expect("a missing or broken context"));
        }
        let id = self.st.alloc(Req::Recv {
            ctx,
            buf,
            state: RecvState::Posted,
            status: Status::default(),
        });
        let c = self.st.ctxs[ctx as usize].as_mut().expect("checked above");
        if let Some((env, arrived)) = c.matcher.post(RecvId(id), Selector { source, tag }) {
            self.st.matched_recv(id, env, arrived);
            self.after_delivery();
        }
        Ok(id)
    }

    /// `MPI_Iprobe`: the status of the message a receive would get now, if any.
    pub fn iprobe(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Option<Status>, PmlError> {
        self.ctx(ctx)?;
        let found = self.peek_probe(ctx, source, tag);
        if found.is_none() {
            self.progress();
            return Ok(self.peek_probe(ctx, source, tag));
        }
        Ok(found)
    }

    pub(super) fn peek_probe(
        &self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Option<Status> {
        let c = self.st.ctxs.get(ctx as usize)?.as_ref()?;
        c.matcher
            .probe(Selector { source, tag })
            .map(|(env, a)| Status {
                source: env.source as i32,
                tag: env.tag,
                count: a.len(),
                ..Status::default()
            })
    }

    /// `MPI_Improbe`: removes the matching message, to be received with [`Engine::imrecv`].
    pub fn improbe(
        &mut self,
        ctx: u16,
        source: Option<u32>,
        tag: Option<i32>,
    ) -> Result<Option<(MessageHandle, Status)>, PmlError> {
        self.ctx(ctx)?;
        for attempt in 0..2 {
            let c = self.st.ctxs[ctx as usize].as_mut().expect("checked above");
            if let Some((env, a)) = c.matcher.take(Selector { source, tag }) {
                let status = Status {
                    source: env.source as i32,
                    tag: env.tag,
                    count: a.len(),
                    ..Status::default()
                };
                let slot = self
                    .st
                    .probed
                    .iter()
                    .position(|p| p.is_none())
                    .unwrap_or_else(|| {
                        self.st.probed.push(None);
                        self.st.probed.len() - 1
                    });
                self.st.probed[slot] = Some((ctx, env, a));
                return Ok(Some((MessageHandle(slot), status)));
            }
            if attempt == 0 {
                self.progress();
            }
        }
        Ok(None)
    }

    /// `MPI_Imrecv`: receives a message taken by [`Engine::improbe`].
    pub fn imrecv(&mut self, msg: MessageHandle, buf: UserBuf) -> Result<ReqId, PmlError> {
        let (ctx, env, arrived) = self
            .st
            .probed
            .get_mut(msg.0)
            .and_then(Option::take)
            .ok_or_else(|| {
                PmlError::Invalid("pml: message handle already received or never probed".into())
            })?;
        let id = self.st.alloc(Req::Recv {
            ctx,
            buf,
            state: RecvState::Posted,
            status: Status::default(),
        });
        self.st.matched_recv(id, env, arrived);
        self.after_delivery();
        Ok(id)
    }

    /// Cancels a receive that has not matched yet; true if it was cancelled.
    pub fn cancel(&mut self, id: ReqId, ctx: u16) -> bool {
        let Some(c) = self.st.ctxs.get_mut(ctx as usize).and_then(|c| c.as_mut()) else {
            return false;
        };
        if !c.matcher.cancel(RecvId(id)) {
            return false;
        }
        if let Some(Req::Recv { state, status, .. }) = self.st.req_mut(id) {
            *state = RecvState::Done;
            status.cancelled = true;
        }
        true
    }
}
