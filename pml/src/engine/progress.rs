//! Progress: polling the transports, then the work a delivery could not do from inside a
//! transport's callback (single-copy gets and puts, queued replies, streamed fragments).
//! Owns the order of that work; it must never block.

use kestrel_transport::btl::{RemoteRegion, SendError};

use super::*;

impl Engine {
    /// One step of an idle wait: progress, and back off when nothing happened.
    #[inline]
    pub fn idle_step(&mut self, idle: &mut u32) {
        if self.idle_poll(idle) {
            std::thread::yield_now();
        }
    }

    /// [`Engine::idle_step`] without its yield: whether the caller should now give the core
    /// away. A caller that holds a lock around the engine yields after releasing it, so that
    /// the threads scheduled meanwhile do not spin on that lock.
    pub fn idle_poll(&mut self, idle: &mut u32) -> bool {
        if self.dpm.lifelines.has_news() {
            self.apply_lifeline_events();
        }
        if self.progress() > 0 {
            if *idle >= STALL_STEPS {
                // The stall the wait record describes is over.
                kestrel_runtime::wait_board::resumed();
            }
            *idle = 0;
            return false;
        }
        *idle = idle.saturating_add(1);
        if self.sleep.due(*idle) {
            self.maybe_sleep(*idle);
        }
        // A wait idle this long is a stall: keep the rank's wait record (hang reports). Once
        // saturated (hours), every step asks; the record throttles by time.
        if (*idle >= STALL_STEPS && idle.is_multiple_of(STALL_TICK)) || *idle == u32::MAX {
            self.note_stall(*idle == STALL_STEPS);
        }
        // Oversubscribed ranks yield soon; the others only after a long idle stretch, which
        // costs a spinning rank nothing measurable but saves it when the machine turns out to
        // be busier than the launcher could see (other jobs, namespace hosts sharing cores).
        if (self.yield_when_idle && *idle > self.spin_before_yield) || *idle > LONG_IDLE {
            return true;
        }
        if *idle > PAUSE_AFTER {
            // PAUSE costs tens of nanoseconds on recent cores: use it only once a wait is
            // clearly not a ping-pong, where it would add straight to the latency.
            std::hint::spin_loop();
        }
        false
    }

    /// Whether something this process started is unfinished: a collective schedule, a
    /// request not yet completed and taken, a background send, queued outgoing data or a
    /// pending single-copy transfer. The C library's progress thread (`async_progress`)
    /// polls often only then. Constant time.
    pub fn has_work_in_flight(&self) -> bool {
        !self.nbc.is_idle() || self.st.has_work_in_flight()
    }

    /// Writes the rank's wait record (at most every heartbeat): what this engine waits for.
    #[cold]
    fn note_stall(&mut self, first: bool) {
        kestrel_runtime::wait_board::stalled(first, || self.describe_wait());
    }

    /// What the engine waits for, in words: posted receives, unfinished sends, collectives
    /// in progress (the first few of each).
    pub fn describe_wait(&self) -> String {
        const SHOWN: usize = 3;
        let mut parts: Vec<String> = Vec::new();
        let mut receives = 0;
        for (ctx, c) in self.st.ctxs.iter().enumerate() {
            let Some(c) = c else { continue };
            receives += c.matcher.posted_len();
            for sel in c.matcher.posted_selectors(SHOWN) {
                if parts.len() >= SHOWN {
                    break;
                }
                let source = sel
                    .source
                    .map(|s| format!("source {s}"))
                    .unwrap_or_else(|| "any source".into());
                let what = match sel.tag {
                    Some(t) if t < 0 => format!("collective traffic (tag {t}) from {source}"),
                    Some(t) => format!("recv from {source}, tag {t}"),
                    None => format!("recv from {source}, any tag"),
                };
                parts.push(format!("{what}, communicator context {ctx}"));
            }
        }
        if receives > parts.len() {
            parts.push(format!("{} more receive(s)", receives - parts.len()));
        }
        let sends: Vec<u32> = self.st.unfinished_send_peers();
        if !sends.is_empty() {
            let shown: Vec<String> = sends.iter().take(SHOWN).map(|p| p.to_string()).collect();
            parts.push(format!(
                "{} unfinished send(s) to rank(s) {}{}",
                sends.len(),
                shown.join(", "),
                if sends.len() > SHOWN { ", ..." } else { "" }
            ));
        }
        if !self.nbc.is_idle() {
            parts.push("nonblocking collective(s) in progress".into());
        }
        if parts.is_empty() {
            "progress (nothing posted: a probe, a lock or a peer's answer)".into()
        } else {
            parts.join("; ")
        }
    }

    /// Progresses until the sends queued for lack of transport space are out. A shared-memory
    /// collective segment spins without progressing this engine, so a peer waiting for one of
    /// those sends before it joins the segment operation would wait forever (seen at 128 ranks
    /// on a node: rank 0's 127 set-up replies outnumber its 64 fragments).
    pub(crate) fn flush_queued_sends(&mut self) {
        let mut idle = 0;
        while !self.st.outbox.is_empty() {
            self.idle_step(&mut idle);
        }
    }

    /// Polls every transport, then runs the work deliveries queued. Returns events handled.
    pub fn progress(&mut self) -> usize {
        let n = self.progress_transports();
        if !self.st.detached.is_empty() {
            self.reap_detached();
        }
        if !self.nbc.is_idle() {
            return n + self.progress_colls();
        }
        n
    }

    /// Recomputes which transports are polled on every call (see [`Engine::poll_skip`]): those
    /// that carry some process's messages; the others (rendezvous data only, or nothing) are
    /// polled when busy and otherwise every [`BULK_IDLE_POLLS`]th call. Called whenever
    /// routes change.
    pub(crate) fn refresh_polling(&mut self) {
        let n = self.btls.len();
        let mut carries_messages = vec![false; n];
        for &r in &self.route {
            if let Some(c) = carries_messages.get_mut(r as usize) {
                *c = true;
            }
        }
        self.poll_skip = carries_messages
            .into_iter()
            .map(|m| if m { ALWAYS_POLLED } else { 0 })
            .collect();
        self.poll_hot = vec![0; n];
    }

    /// [`Engine::progress`] without the collective schedules (which never start a blocking
    /// segment operation, so a shared-memory collective's wait runs them too: see
    /// `crate::segment_poll`).
    pub(crate) fn progress_transports(&mut self) -> usize {
        let mut n = 0;
        let st = &mut self.st;
        let outbox_busy = !st.outbox.is_empty();
        for (i, b) in self.btls.iter_mut().enumerate() {
            let skip = &mut self.poll_skip[i];
            if *skip != ALWAYS_POLLED {
                let hot = &mut self.poll_hot[i];
                if *hot > 0 {
                    *hot -= 1;
                } else if *skip > 0 && !outbox_busy {
                    *skip -= 1;
                    continue;
                } else {
                    *skip = BULK_IDLE_POLLS - 1;
                }
            }
            let before = n;
            n += b.progress(&mut |m| {
                if m.am == AM_PML {
                    st.on_message(m.peer, m.data);
                } else if m.am == crate::engine::rma::wire::AM_RMA {
                    st.rma_inbox.push_back((m.peer, m.data.to_vec()));
                } else {
                    st.protocol_errors += 1;
                    tracing::error!(target: "pml", "dropped a message with unknown active-message tag {} from rank {}", m.am, m.peer);
                }
            });
            // A bulk-only transport that delivered stays polled on every call.
            if n > before && self.poll_skip[i] != ALWAYS_POLLED {
                self.poll_hot[i] = BULK_HOT_POLLS;
            }
        }
        if !self.st.rma_inbox.is_empty() {
            n += self.rma_deliver();
        }
        if self.rma.word_waits {
            n += self.rma_retry_locks();
        }
        n + self.after_delivery()
    }

    /// Runs the work deliveries queued (gets, puts, sends that found a transport full). The
    /// check is inline because a waiting rank runs it on every poll and nearly always finds
    /// nothing.
    #[inline]
    pub(super) fn after_delivery(&mut self) -> usize {
        if self.st.puts.is_empty()
            && self.st.gets.is_empty()
            && self.st.outbox.is_empty()
            && self.st.remote_reads.is_empty()
            && self.st.released.is_empty()
        {
            return 0;
        }
        self.run_deliveries()
    }

    #[inline(never)]
    pub(super) fn run_deliveries(&mut self) -> usize {
        let mut n = 0;
        if !self.st.puts.is_empty() {
            n += self.run_puts();
        }
        if !self.st.gets.is_empty() {
            n += self.run_gets();
        }
        if !self.st.remote_reads.is_empty() {
            n += self.finish_remote_reads();
        }
        if !self.st.released.is_empty() {
            for e in std::mem::take(&mut self.st.released) {
                self.release_buffer(e);
            }
        }
        if !self.st.outbox.is_empty() {
            n += self.drain_outbox();
        }
        n
    }

    /// Releases the exposed buffers queued for `peer` now (a failed process: nothing from it
    /// will end them, and its transports' registrations should not outlive the sends).
    pub(crate) fn release_buffers_of(&mut self, peer: u32) {
        let mut queued = std::mem::take(&mut self.st.released);
        queued.retain(|&e| {
            if e.peer == peer {
                self.release_buffer(e);
            }
            e.peer != peer
        });
        self.st.released = queued;
    }

    /// Releases an exposed buffer through the transport that exposed it (whichever route,
    /// eager or bulk, carried its announcement).
    fn release_buffer(&mut self, e: Exposed) {
        self.btls[e.btl as usize].release(e.buf.as_slice());
    }

    /// The sender's half of split copies: write it into the receiver's buffer, or stream it
    /// as fragments if the put fails.
    pub(super) fn run_puts(&mut self) -> usize {
        let puts = std::mem::take(&mut self.st.puts);
        let n = puts.len();
        for p in puts {
            let Some(Req::Send { buf, .. }) = self.st.req(p.send_req) else {
                continue;
            };
            let buf = *buf;
            let b = self.route[p.peer as usize];
            let part = &buf.as_slice()[p.split as usize..p.end as usize];
            let put = if b == NO_ROUTE {
                Err(SendError::Unreachable { peer: p.peer })
            } else {
                self.btls[b as usize].put(
                    p.peer,
                    RemoteRegion {
                        addr: p.addr,
                        len: p.end,
                        key: 0,
                    },
                    p.split,
                    part,
                )
            };
            match put {
                Ok(()) => self.st.control(
                    p.peer,
                    Header::PutDone {
                        recv_req: p.recv_req,
                    },
                ),
                Err(e) => {
                    tracing::warn!(target: "pml", "single-copy put to rank {} failed, streaming instead: {e}", p.peer);
                    self.st.outbox.push_back(Out::Stream {
                        req: p.send_req,
                        peer: p.peer,
                        recv_req: p.recv_req,
                        offset: p.split as usize,
                        len: p.end as usize,
                        completes: false,
                    });
                }
            }
        }
        n
    }

    pub(super) fn run_gets(&mut self) -> usize {
        let gets = std::mem::take(&mut self.st.gets);
        let n = gets.len();
        for g in gets {
            // The rendezvous data's transport: where the sender exposed its buffer.
            let b = self.bulk_route[g.peer as usize];
            let Some(Req::Recv { buf, .. }) = self.st.req(g.req) else {
                continue;
            };
            let mut target = *buf;
            let usable = b != NO_ROUTE && self.btls[b as usize].can_get(g.peer);
            let effective = (g.len as usize).min(target.len());
            // Large messages: the sender, otherwise idle until FIN, copies the upper half
            // while we copy the lower one, so both cores move data.
            let split = (self.split_copy_min > 0
                && !g.pull
                && effective as u64 >= self.split_copy_min
                && usable
                && self.btls[b as usize].can_put(g.peer))
            .then_some((effective / 2) & !4095);
            let exposed = split.and_then(|split| {
                let region = self.btls[b as usize].expose(target.slice_mut(0, effective))?;
                Some((split, region.addr))
            });
            if let Some((split, addr)) = exposed {
                if let Some(Req::Recv { state, .. }) = self.st.req_mut(g.req) {
                    *state = RecvState::Split {
                        send_req: g.send_req,
                        peer: g.peer,
                        get_done: false,
                        streamed: 0,
                        sender_part: effective - split,
                        put_done: false,
                    };
                }
                self.st.control(
                    g.peer,
                    Header::Split {
                        send_req: g.send_req,
                        recv_req: g.req,
                        addr,
                        split: split as u64,
                        end: effective as u64,
                    },
                );
                // Send the request now so the sender starts while we copy.
                self.drain_outbox();
                let dst = target.slice_mut(0, split);
                match self.btls[b as usize].get(
                    g.peer,
                    RemoteRegion {
                        addr: g.addr,
                        len: g.len,
                        key: g.key,
                    },
                    0,
                    dst,
                ) {
                    Ok(()) => self.st.split_part_done(g.req, true),
                    Err(e) => {
                        // Cannot happen once can_get said yes, unless the peer died; the
                        // launcher then stops the job.
                        tracing::error!(target: "pml", "single-copy get from rank {} failed in a split copy: {e}", g.peer);
                    }
                }
                continue;
            }
            let region = RemoteRegion {
                addr: g.addr,
                len: g.len,
                key: g.key,
            };
            if usable && self.btls[b as usize].gets_finish_later() {
                let local = target.local_region(effective);
                match self.btls[b as usize].start_get(g.peer, region, 0, local, g.req) {
                    Ok(()) => {
                        self.st.remote_reads.push(RemoteRead {
                            btl: b as usize,
                            req: g.req,
                            peer: g.peer,
                            send_req: g.send_req,
                            len: g.len,
                        });
                        continue;
                    }
                    Err(SendError::WouldBlock) => {
                        // Reads in flight fill the transport: this one waits its turn.
                        self.st.gets.push(g);
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(target: "pml", "starting a get from rank {} failed, using the copy pipeline: {e}", g.peer);
                        self.st.pipeline_instead(g.req, g.peer, g.send_req, g.len);
                        continue;
                    }
                }
            }
            let mut done = false;
            if usable {
                let dst = target.slice_mut(0, g.len as usize);
                match self.btls[b as usize].get(g.peer, region, 0, dst) {
                    Ok(()) => done = true,
                    Err(e) => {
                        tracing::warn!(target: "pml", "single-copy get from rank {} failed, using the copy pipeline: {e}", g.peer)
                    }
                }
            }
            if done {
                if let Some(Req::Recv { state, .. }) = self.st.req_mut(g.req) {
                    *state = RecvState::Done;
                }
                self.st.control(
                    g.peer,
                    Header::Fin {
                        send_req: g.send_req,
                    },
                );
            } else {
                self.st.pipeline_instead(g.req, g.peer, g.send_req, g.len);
            }
        }
        n
    }

    /// Completes the receives whose transport reports their get finished: the data is in
    /// place (FIN to the sender), or the get failed and the sender streams the message.
    fn finish_remote_reads(&mut self) -> usize {
        let mut n = 0;
        let mut b = 0;
        while b < self.btls.len() {
            if !self.st.remote_reads.iter().any(|r| r.btl == b) {
                b += 1;
                continue;
            }
            let st = &mut self.st;
            self.btls[b].take_finished_gets(&mut |ticket, outcome| {
                let Some(i) = st
                    .remote_reads
                    .iter()
                    .position(|r| r.btl == b && r.req == ticket)
                else {
                    return;
                };
                let r = st.remote_reads.swap_remove(i);
                n += 1;
                match outcome {
                    Ok(()) => {
                        if let Some(Req::Recv { state, .. }) = st.req_mut(r.req) {
                            *state = RecvState::Done;
                        }
                        st.control(r.peer, Header::Fin { send_req: r.send_req });
                    }
                    Err(e) => {
                        tracing::warn!(target: "pml", "a get from rank {} failed, using the copy pipeline: {e}", r.peer);
                        st.pipeline_instead(r.req, r.peer, r.send_req, r.len);
                    }
                }
            });
            b += 1;
        }
        n
    }

    pub(super) fn drain_outbox(&mut self) -> usize {
        let mut n = 0;
        while let Some(out) = self.st.outbox.pop_front() {
            match out {
                Out::Rma { peer, msg } => {
                    let b = self.route[peer as usize];
                    if b == NO_ROUTE {
                        self.st.protocol_errors += 1;
                        continue;
                    }
                    match self.btls[b as usize].send(
                        peer,
                        crate::engine::rma::wire::AM_RMA,
                        &msg,
                        &[],
                    ) {
                        Ok(()) => n += 1,
                        Err(SendError::WouldBlock) => {
                            self.st.outbox.push_front(Out::Rma { peer, msg });
                            break;
                        }
                        Err(e) => {
                            tracing::error!(target: "osc", "one-sided message to process {peer} failed: {e}");
                            self.st.protocol_errors += 1;
                        }
                    }
                }
                Out::Msg { peer, hdr, data } => {
                    // The same choice as the send made: by size, message or bulk route.
                    let b = if hdr.len() + data.len() >= self.bulk_from[peer as usize] as usize {
                        self.bulk_route[peer as usize]
                    } else {
                        self.route[peer as usize]
                    };
                    if b == NO_ROUTE {
                        self.st.protocol_errors += 1;
                        continue;
                    }
                    match self.btls[b as usize].send(peer, AM_PML, &hdr, &data) {
                        Ok(()) => n += 1,
                        Err(SendError::WouldBlock) => {
                            self.st.outbox.push_front(Out::Msg { peer, hdr, data });
                            break;
                        }
                        Err(e) => {
                            tracing::error!(target: "pml", "send to rank {peer} failed: {e}");
                            self.st.protocol_errors += 1;
                        }
                    }
                }
                Out::Stream {
                    req,
                    peer,
                    recv_req,
                    mut offset,
                    len,
                    completes,
                } => {
                    // Rendezvous data takes the peer's bulk route (the highest-bandwidth
                    // transport); the headers around it take its message route.
                    let b = self.bulk_route[peer as usize];
                    if b == NO_ROUTE {
                        // The peer failed: its request was failed with it.
                        continue;
                    }
                    let b = b as usize;
                    let chunk = self.btls[b].limits().max_send - hdr::FRAG_LEN;
                    let Some(Req::Send { buf, .. }) = self.st.req(req) else {
                        continue;
                    };
                    let buf = *buf;
                    let mut blocked = false;
                    while offset < len {
                        let end = (offset + chunk).min(len);
                        let mut h = std::mem::take(&mut self.st.scratch);
                        hdr::encode(
                            &Header::Frag {
                                recv_req,
                                offset: offset as u64,
                            },
                            &mut h,
                        );
                        let r = self.btls[b].send(peer, AM_PML, &h, &buf.as_slice()[offset..end]);
                        self.st.scratch = h;
                        match r {
                            Ok(()) => {
                                offset = end;
                                n += 1;
                            }
                            Err(SendError::WouldBlock) => {
                                blocked = true;
                                break;
                            }
                            Err(e) => {
                                tracing::error!(target: "pml", "streaming to rank {peer} failed: {e}");
                                offset = len;
                            }
                        }
                    }
                    if blocked {
                        self.st.outbox.push_front(Out::Stream {
                            req,
                            peer,
                            recv_req,
                            offset,
                            len,
                            completes,
                        });
                        break;
                    }
                    if completes {
                        if let Some(Req::Send { state, .. }) = self.st.req_mut(req) {
                            *state = SendState::Done;
                        }
                    }
                }
            }
        }
        n
    }
}
