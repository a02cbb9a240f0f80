//! The receiving side of the protocols: decoding every message from a peer (checked: it comes
//! from another process), matching, and the replies each protocol step owes. Owns the
//! protocol state machine on arrival; it must never call a transport (replies are queued).

use super::*;

impl State {
    /// The receive `req` of a rendezvous takes the copy pipeline after all (its get could
    /// not start or failed): the sender streams the message.
    pub(super) fn pipeline_instead(&mut self, req: ReqId, peer: u32, send_req: u64, len: u64) {
        if let Some(Req::Recv { state, .. }) = self.req_mut(req) {
            *state = RecvState::Pipeline {
                total: len as usize,
                received: 0,
            };
        }
        self.control(
            peer,
            Header::Ack {
                send_req,
                recv_req: req,
            },
        );
    }

    pub(super) fn control(&mut self, peer: u32, h: Header) {
        let mut v = Vec::with_capacity(hdr::ACK_LEN);
        hdr::encode(&h, &mut v);
        self.outbox.push_back(Out::Msg {
            peer,
            hdr: v,
            data: Vec::new(),
        });
    }

    pub(super) fn protocol_error(&mut self, peer: u32, what: impl fmt::Display) {
        self.protocol_errors += 1;
        tracing::error!(target: "pml", "dropped a message from rank {peer}: {what}");
    }

    /// A matched receive: copy eager data, or start the rendezvous.
    pub(super) fn matched_recv(&mut self, id: ReqId, env: Envelope, arrived: Arrived) {
        let Some(Req::Recv {
            buf, state, status, ..
        }) = self.req_mut(id)
        else {
            return;
        };
        status.source = env.source as i32;
        status.tag = env.tag;
        let len = arrived.len();
        if len > buf.len() {
            status.truncated_from = Some(len);
        }
        match arrived {
            Arrived::Eager {
                data,
                sync_req,
                peer,
            } => {
                status.count = buf.write_at(0, &data);
                *state = RecvState::Done;
                if let Some(send_req) = sync_req {
                    self.control(
                        peer,
                        Header::Ack {
                            send_req,
                            recv_req: 0,
                        },
                    );
                }
            }
            Arrived::Rndv {
                len,
                send_req,
                get_addr,
                get_key,
                peer,
                pull,
            } => {
                status.count = (len as usize).min(buf.len());
                match get_addr {
                    Some(addr) => self.gets.push(PendingGet {
                        req: id,
                        peer,
                        addr,
                        key: get_key,
                        len,
                        send_req,
                        pull,
                    }),
                    None => self.pipeline_instead(id, peer, send_req, len),
                }
            }
        }
    }

    pub(super) fn on_message(&mut self, peer: u32, data: &[u8]) {
        let (h, used) = match hdr::decode(data) {
            Ok(x) => x,
            Err(e) => return self.protocol_error(peer, e),
        };
        match h {
            Header::Match {
                ctx,
                src,
                tag,
                seq,
                sync_req,
            } => {
                let Some(c) = self.ctxs.get_mut(ctx as usize).and_then(|c| c.as_mut()) else {
                    self.orphans
                        .entry(ctx)
                        .or_default()
                        .push((peer, data.to_vec()));
                    return;
                };
                let env = Envelope {
                    source: src,
                    tag,
                    seq,
                };
                let payload = &data[used..];
                self.counters.received += 1;
                self.counters.received_bytes += payload.len() as u64;
                match c.matcher.match_in_order(env) {
                    Ok(Some(RecvId(id))) => {
                        // The fast path: straight from the transport into the user's buffer.
                        if let Some(Req::Recv {
                            buf, state, status, ..
                        }) = self.req_mut(id)
                        {
                            status.source = src as i32;
                            status.tag = tag;
                            status.count = buf.write_at(0, payload);
                            if payload.len() > buf.len() {
                                status.truncated_from = Some(payload.len());
                            }
                            *state = RecvState::Done;
                        }
                        if let Some(send_req) = sync_req {
                            self.control(
                                peer,
                                Header::Ack {
                                    send_req,
                                    recv_req: 0,
                                },
                            );
                        }
                    }
                    Ok(None) => {
                        let arrived = Arrived::Eager {
                            data: payload.to_vec(),
                            sync_req,
                            peer,
                        };
                        self.arrive(peer, ctx, env, arrived);
                    }
                    Err(e) => self.protocol_error(peer, e),
                }
            }
            Header::Rndv {
                ctx,
                src,
                tag,
                seq,
                len,
                send_req,
                get_addr,
                get_key,
                pull,
            } => {
                if self
                    .ctxs
                    .get(ctx as usize)
                    .and_then(|c| c.as_ref())
                    .is_none()
                {
                    self.orphans
                        .entry(ctx)
                        .or_default()
                        .push((peer, data.to_vec()));
                    return;
                }
                let env = Envelope {
                    source: src,
                    tag,
                    seq,
                };
                self.counters.received += 1;
                self.counters.received_bytes += len;
                self.arrive(
                    peer,
                    ctx,
                    env,
                    Arrived::Rndv {
                        len,
                        send_req,
                        get_addr,
                        get_key,
                        peer,
                        pull,
                    },
                );
            }
            Header::Ack { send_req, recv_req } => match self.req_mut(send_req) {
                Some(Req::Send {
                    state: state @ SendState::WaitAck,
                    ..
                }) => *state = SendState::Done,
                Some(Req::Send {
                    state: state @ SendState::Rndv { .. },
                    buf,
                    peer: p,
                    ..
                }) if *p == peer => {
                    let buf = *buf;
                    let len = buf.len();
                    let exposed = state.exposed_by();
                    *state = SendState::Streaming;
                    // The receiver chose the copy pipeline: it will not read the buffer.
                    if let Some(btl) = exposed {
                        self.released.push(Exposed { peer, btl, buf });
                    }
                    self.outbox.push_back(Out::Stream {
                        req: send_req,
                        peer,
                        recv_req,
                        offset: 0,
                        len,
                        completes: true,
                    });
                }
                _ => {
                    self.protocol_error(peer, format!("ACK for unknown send request {send_req:#x}"))
                }
            },
            Header::Fin { send_req } => match self.req_mut(send_req) {
                Some(Req::Send {
                    state: state @ SendState::Rndv { .. },
                    buf,
                    ..
                }) => {
                    let (buf, exposed) = (*buf, state.exposed_by());
                    *state = SendState::Done;
                    if let Some(btl) = exposed {
                        self.released.push(Exposed { peer, btl, buf });
                    }
                }
                _ => {
                    self.protocol_error(peer, format!("FIN for unknown send request {send_req:#x}"))
                }
            },
            Header::Split {
                send_req,
                recv_req,
                addr,
                split,
                end,
            } => match self.req_mut(send_req) {
                Some(Req::Send {
                    state: SendState::Rndv { .. },
                    peer: p,
                    buf,
                    ..
                }) if *p == peer && split <= end && end <= buf.len() as u64 => {
                    self.puts.push(PendingPut {
                        send_req,
                        peer,
                        recv_req,
                        addr,
                        split,
                        end,
                    });
                }
                _ => self.protocol_error(
                    peer,
                    format!("SPLIT for unknown send request {send_req:#x}"),
                ),
            },
            Header::PutDone { recv_req } => {
                if matches!(
                    self.req(recv_req),
                    Some(Req::Recv {
                        state: RecvState::Split { .. },
                        ..
                    })
                ) {
                    self.split_part_done(recv_req, false);
                } else {
                    self.protocol_error(
                        peer,
                        format!("PUTDONE for unknown receive request {recv_req:#x}"),
                    );
                }
            }
            Header::Frag { recv_req, offset } => {
                let payload = &data[used..];
                match self.req_mut(recv_req) {
                    Some(Req::Recv {
                        buf,
                        state: state @ RecvState::Pipeline { .. },
                        ..
                    }) => {
                        if let RecvState::Pipeline { total, received } = state {
                            buf.write_at(offset as usize, payload);
                            *received += payload.len();
                            if *received >= *total {
                                *state = RecvState::Done;
                            }
                        }
                    }
                    Some(Req::Recv {
                        buf,
                        state:
                            RecvState::Split {
                                streamed,
                                sender_part,
                                ..
                            },
                        ..
                    }) => {
                        // The sender's put failed and its half comes as fragments instead.
                        buf.write_at(offset as usize, payload);
                        *streamed += payload.len();
                        if *streamed >= *sender_part {
                            self.split_part_done(recv_req, false);
                        }
                    }
                    _ => self.protocol_error(
                        peer,
                        format!("FRAG for unknown receive request {recv_req:#x}"),
                    ),
                }
            }
        }
    }

    /// One half of a split copy finished (`mine`: the receiver's own get, else the sender's
    /// put); when both are, the receive completes and the sender learns it may finish.
    pub(super) fn split_part_done(&mut self, recv_req: ReqId, mine: bool) {
        let Some(Req::Recv { state, .. }) = self.req_mut(recv_req) else {
            return;
        };
        let RecvState::Split {
            send_req,
            peer,
            get_done,
            put_done,
            ..
        } = state
        else {
            return;
        };
        if mine {
            *get_done = true;
        } else {
            *put_done = true;
        }
        if *get_done && *put_done {
            let (send_req, peer) = (*send_req, *peer);
            *state = RecvState::Done;
            self.control(peer, Header::Fin { send_req });
        }
    }

    pub(super) fn arrive(&mut self, peer: u32, ctx: u16, env: Envelope, arrived: Arrived) {
        let mut matched = std::mem::take(&mut self.matched);
        let Some(c) = self.ctxs.get_mut(ctx as usize).and_then(|c| c.as_mut()) else {
            return;
        };
        let queued = c.matcher.unexpected_len();
        let r = c.matcher.arrive(env, arrived, &mut matched);
        // Messages this arrival (and the parked ones it released) left unexpected.
        self.counters.unexpected += c.matcher.unexpected_len().saturating_sub(queued) as u64;
        if let Err(e) = r {
            self.protocol_error(peer, e);
        }
        for (RecvId(id), env, a) in matched.drain(..) {
            self.matched_recv(id, env, a);
        }
        self.matched = matched;
    }
}
