//! Connect/accept, step by step: ports, the roots' meeting, the agreement on the union of
//! both groups and the new context, the card swap and the final readiness check, each
//! outcome broadcast so every member returns the same result. Owns that protocol; it must
//! never open a transport itself (see `transports`).

use super::outcome::{decode_group_cards, encode_group_cards};
use super::*;

impl Engine {
    pub(super) fn listener(&mut self) -> Result<&Listener, PmlError> {
        if self.dpm.listener.is_none() {
            let addrs = kestrel_runtime::launcher::head::local_ipv4_addresses();
            let l = Listener::start(addrs).map_err(|e| {
                dpm_err(DpmError::Setup(format!(
                    "cannot open the out-of-band TCP listener: {e}"
                )))
            })?;
            self.dpm.listener = Some(l);
        }
        Ok(self.dpm.listener.as_ref().expect("just set"))
    }

    pub(super) fn connect_timeout(&self) -> Duration {
        Duration::from_millis(
            kestrel_runtime::params::DPM_CONNECT_TIMEOUT_MS.get(self.params()) as u64,
        )
    }

    /// `MPI_Open_port`: a new port of this process (see `kestrel_runtime::dpm::port` for
    /// the format).
    pub fn open_port(&mut self) -> Result<String, PmlError> {
        let port = self
            .listener()?
            .open_port()
            .map_err(|e| dpm_err(DpmError::Setup(e)))?;
        Ok(port.to_string())
    }

    /// `MPI_Close_port`.
    pub fn close_port(&mut self, port: &str) -> Result<(), PmlError> {
        let name = PortName::parse(port).map_err(|e| dpm_err(e.into()))?;
        let closed = self
            .dpm
            .listener
            .as_ref()
            .is_some_and(|l| l.close_port(&name));
        if closed {
            Ok(())
        } else {
            Err(dpm_err(DpmError::Refused {
                port: port.to_string(),
                reason: "this process has no such open port (closed already, or opened by \
                         another process)"
                    .into(),
            }))
        }
    }

    /// `MPI_Comm_accept` over the intra-communicator `ctx`: `port` matters at `root` only.
    /// Returns the new inter-communicator's context.
    pub fn accept(&mut self, ctx: u16, root: u32, port: &str) -> Result<u16, PmlError> {
        self.establish(ctx, root, Role::Accept(port))
    }

    /// `MPI_Comm_connect` over the intra-communicator `ctx`: `port` matters at `root` only.
    pub fn connect(&mut self, ctx: u16, root: u32, port: &str) -> Result<u16, PmlError> {
        self.establish(ctx, root, Role::Connect(port))
    }

    /// `MPI_Intercomm_create`: `local_ctx` is this group's intra-communicator; its
    /// `local_leader` talks to `remote_leader` (a rank of `peer_ctx`) with `tag`.
    pub fn intercomm_create(
        &mut self,
        local_ctx: u16,
        local_leader: u32,
        peer_ctx: u16,
        remote_leader: u32,
        tag: i32,
    ) -> Result<u16, PmlError> {
        self.establish(
            local_ctx,
            local_leader,
            Role::Create {
                peer_ctx,
                remote_leader,
                tag,
            },
        )
    }

    /// Root-to-group broadcast of bytes of any length (linear: used for set-up only).
    pub fn bcast_bytes(&mut self, ctx: u16, root: u32, data: Vec<u8>) -> Result<Vec<u8>, PmlError> {
        let (me, n) = self.comm_info(ctx)?;
        if me == root {
            for r in (0..n).filter(|&r| r != root) {
                self.send_bytes(ctx, r, TAG_DPM_BCAST, &data)?;
            }
            Ok(data)
        } else {
            self.recv_bytes(ctx, root, TAG_DPM_BCAST)
        }
    }

    pub(super) fn establish(
        &mut self,
        ctx: u16,
        root: u32,
        role: Role<'_>,
    ) -> Result<u16, PmlError> {
        if self.is_inter(ctx) {
            return Err(PmlError::Invalid(
                "dpm: connect, accept and intercomm_create need an intra-communicator".into(),
            ));
        }
        let (me, n) = self.comm_info(ctx)?;
        if root >= n {
            return Err(PmlError::Invalid(format!(
                "dpm: root {root} is outside a communicator of {n}"
            )));
        }
        let local_group = self.ctx(ctx)?.group.clone();
        // Every member needs a listener: lifelines arrive there.
        let contact = match self.listener() {
            Ok(l) => l.contact(),
            Err(e) => {
                tracing::warn!(target: "dpm", "{e}");
                String::new()
            }
        };
        let mut mine = Vec::new();
        mine.extend_from_slice(&self.next_ctx.to_le_bytes());
        let me_info = ProcInfo {
            job: self.dpm.job.clone(),
            rank: self.rank(),
            node: self.node_of(self.rank()).to_string(),
            contact,
        };
        mine.extend_from_slice(
            &OobMsg::Connect {
                tag: 0,
                proof: Vec::new(),
                nonce: Vec::new(),
                group: vec![me_info],
                ctx: 0,
            }
            .encode_body(),
        );
        let all = self.allgather_bytes(ctx, &mine)?;
        let mut local_infos = Vec::with_capacity(n as usize);
        let mut proposal = 0u16;
        for (r, blob) in all.iter().enumerate() {
            let parsed = blob.get(..2).and_then(|c| {
                let next = u16::from_le_bytes([c[0], c[1]]);
                match OobMsg::decode(&blob[2..]) {
                    Ok(OobMsg::Connect { mut group, .. }) if group.len() == 1 => {
                        Some((next, group.remove(0)))
                    }
                    _ => None,
                }
            });
            let Some((next, info)) = parsed else {
                return Err(dpm_err(DpmError::Protocol {
                    peer: format!("rank {r} of the local group"),
                    what: "a malformed identity".into(),
                }));
            };
            proposal = proposal.max(next);
            local_infos.push(info);
        }
        // Phase 1: the roots introduce their groups.
        let mut link = None;
        let outcome = if me == root {
            self.roots_meet(&role, &local_infos, proposal, &mut link)
                .map(|a| {
                    let mut v = vec![u8::from(a.acceptor)];
                    v.extend_from_slice(
                        &OobMsg::Accept {
                            conn: a.conn,
                            proof: Vec::new(),
                            group: a.remote,
                            ctx: a.ctx,
                        }
                        .encode_body(),
                    );
                    v
                })
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        // The root keeps its own, typed error; the others get its class and text.
        outcome?;
        let body = decode_outcome(&bytes, root)?;
        let agreed = match (body.split_first(), body.get(1..).map(OobMsg::decode)) {
            (
                Some((&acc, _)),
                Some(Ok(OobMsg::Accept {
                    conn, group, ctx, ..
                })),
            ) if acc <= 1 => Agreed {
                conn,
                acceptor: acc == 1,
                remote: group,
                ctx,
            },
            _ => {
                return Err(dpm_err(DpmError::Protocol {
                    peer: format!("root {root} of the local group"),
                    what: "a malformed agreement".into(),
                }))
            }
        };
        self.finish_establish(ctx, root, me, local_group, local_infos, agreed, link)
    }

    /// The root's side of phase 1.
    pub(super) fn roots_meet(
        &mut self,
        role: &Role<'_>,
        local: &[ProcInfo],
        proposal: u16,
        link_out: &mut Option<Link>,
    ) -> Result<Agreed, PmlError> {
        let timeout = self.connect_timeout();
        match role {
            Role::Accept(port) => {
                let name = PortName::parse(port).map_err(|e| dpm_err(e.into()))?;
                let listener_has = self.dpm.listener.as_ref().is_some_and(|l| l.owns(&name));
                if !listener_has {
                    return Err(dpm_err(DpmError::Refused {
                        port: port.to_string(),
                        reason: "accept needs a port this process opened and has not closed".into(),
                    }));
                }
                let ev = {
                    // Short waits on the port, with engine progress between them: MPI's
                    // accept waits forever, but this process's transports must not stall.
                    let mut idle = 0u32;
                    loop {
                        let slice = Some(Instant::now() + Duration::from_millis(2));
                        let got = self
                            .dpm
                            .listener
                            .as_ref()
                            .expect("checked above")
                            .wait_port(&name, slice, &mut || {})
                            .map_err(|e| {
                                dpm_err(DpmError::Refused {
                                    port: port.to_string(),
                                    reason: e,
                                })
                            })?;
                        if let Some(ev) = got {
                            break ev;
                        }
                        self.idle_step(&mut idle);
                    }
                };
                match ev {
                    PortEvent::SpawnFailed { reason } => Err(dpm_err(DpmError::Spawn(reason))),
                    PortEvent::Connect {
                        stream,
                        group,
                        ctx,
                        nonce,
                    } => {
                        let peer = stream
                            .peer_addr()
                            .map(|a| format!("the connecting root at {a}"))
                            .unwrap_or_else(|_| "the connecting root".into());
                        let mut link = Link::Tcp {
                            stream,
                            peer,
                            buf: Vec::new(),
                        };
                        // The connector checks that this side knows the port's token too.
                        let proof = name.proof(PortRole::Accept, &nonce);
                        let r = self.accept_side(&mut link, local, proposal, group, ctx, proof);
                        *link_out = Some(link);
                        r
                    }
                }
            }
            Role::Connect(port) => {
                let name = PortName::parse(port).map_err(|e| dpm_err(e.into()))?;
                let deadline = Instant::now() + timeout;
                let stream = {
                    let addrs = name.socket_addresses();
                    let mut idle = 0u32;
                    let mut progress = || self.idle_step(&mut idle);
                    connect_any(&addrs, deadline, &mut progress).map_err(|last| {
                        dpm_err(DpmError::Unreachable {
                            port: port.to_string(),
                            timeout_ms: timeout.as_millis() as u64,
                            last,
                        })
                    })?
                };
                let mut link = Link::Tcp {
                    stream,
                    peer: format!("port {port}"),
                    buf: Vec::new(),
                };
                // The listener opens with a challenge: prove the port's token over it, and
                // send a nonce of ours for the acceptor to prove it back.
                let challenge = match link.recv(self, Some(deadline))? {
                    Some(OobMsg::Challenge { nonce }) => nonce,
                    other => {
                        return Err(dpm_err(DpmError::Protocol {
                            peer: format!("port {port}"),
                            what: format!(
                                "expected Challenge, got {}",
                                other.map(|m| m.kind()).unwrap_or("nothing")
                            ),
                        }))
                    }
                };
                let mine =
                    kestrel_runtime::mac::nonce().map_err(|e| dpm_err(DpmError::Setup(e)))?;
                link.send(
                    self,
                    &OobMsg::Connect {
                        tag: name.tag,
                        proof: name.proof(PortRole::Connect, &challenge),
                        nonce: mine.clone(),
                        group: local.to_vec(),
                        ctx: proposal,
                    },
                )?;
                let reply = link.recv(self, Some(deadline))?;
                let r = match reply {
                    None => Err(dpm_err(DpmError::NotAccepted {
                        port: port.to_string(),
                        timeout_ms: timeout.as_millis() as u64,
                    })),
                    Some(OobMsg::Accept {
                        conn,
                        proof,
                        group,
                        ctx,
                    }) if name.verify(PortRole::Accept, &mine, &proof) => Ok(Agreed {
                        conn,
                        acceptor: false,
                        remote: group,
                        ctx,
                    }),
                    Some(OobMsg::Accept { .. }) => Err(dpm_err(DpmError::Protocol {
                        peer: format!("port {port}"),
                        what: "the accepting side did not prove the port's token".into(),
                    })),
                    Some(OobMsg::Refuse { reason }) => Err(dpm_err(DpmError::Refused {
                        port: port.to_string(),
                        reason,
                    })),
                    Some(other) => Err(dpm_err(DpmError::Protocol {
                        peer: format!("port {port}"),
                        what: format!("expected Accept, got {}", other.kind()),
                    })),
                };
                *link_out = Some(link);
                r
            }
            Role::Create {
                peer_ctx,
                remote_leader,
                tag,
            } => {
                let remote = *self
                    .ctx(*peer_ctx)?
                    .group
                    .get(*remote_leader as usize)
                    .ok_or_else(|| {
                        PmlError::Invalid(format!(
                            "intercomm_create: remote leader {remote_leader} is outside the peer communicator"
                        ))
                    })?;
                let mine = self.dpm.identity(self.rank());
                let theirs = self.dpm.identity(remote);
                if mine == theirs {
                    return Err(PmlError::Invalid(
                        "intercomm_create: the local and remote leaders are the same process"
                            .into(),
                    ));
                }
                let mut link = Link::Comm {
                    ctx: *peer_ctx,
                    peer: *remote_leader,
                    tag: *tag,
                };
                // The leader with the smaller identity plays the accepting side.
                let r = if mine < theirs {
                    match link.recv(self, None)? {
                        Some(OobMsg::Connect { group, ctx, .. }) => {
                            // Over a communicator both sides are members already: no proof.
                            self.accept_side(&mut link, local, proposal, group, ctx, Vec::new())
                        }
                        other => Err(dpm_err(DpmError::Protocol {
                            peer: link.peer(),
                            what: format!(
                                "expected Connect, got {}",
                                other.map(|m| m.kind()).unwrap_or("nothing")
                            ),
                        })),
                    }
                } else {
                    link.send(
                        self,
                        &OobMsg::Connect {
                            tag: 0,
                            proof: Vec::new(),
                            nonce: Vec::new(),
                            group: local.to_vec(),
                            ctx: proposal,
                        },
                    )?;
                    match link.recv(self, None)? {
                        Some(OobMsg::Accept {
                            conn, group, ctx, ..
                        }) => Ok(Agreed {
                            conn,
                            acceptor: false,
                            remote: group,
                            ctx,
                        }),
                        Some(OobMsg::Refuse { reason }) => Err(dpm_err(DpmError::Refused {
                            port: link.peer(),
                            reason,
                        })),
                        other => Err(dpm_err(DpmError::Protocol {
                            peer: link.peer(),
                            what: format!(
                                "expected Accept, got {}",
                                other.map(|m| m.kind()).unwrap_or("nothing")
                            ),
                        })),
                    }
                };
                *link_out = Some(link);
                r
            }
        }
    }

    /// The accepting root answers a `Connect`; `proof` is its proof of the port's token over
    /// the connector's nonce (empty over a communicator).
    pub(super) fn accept_side(
        &mut self,
        link: &mut Link,
        local: &[ProcInfo],
        proposal: u16,
        remote: Vec<ProcInfo>,
        their_ctx: u16,
        proof: Vec<u8>,
    ) -> Result<Agreed, PmlError> {
        let ctx = proposal.max(their_ctx);
        let refuse = |why: String| OobMsg::Refuse { reason: why };
        if ctx >= u16::MAX - 2 {
            let why = "out of communicator context ids; free communicators you no longer need";
            let _ = link.send(self, &refuse(why.into()));
            return Err(PmlError::Invalid(format!("dpm: {why}")));
        }
        if remote.is_empty() {
            let _ = link.send(self, &refuse("the connecting group is empty".into()));
            return Err(dpm_err(DpmError::Protocol {
                peer: link.peer(),
                what: "an empty connecting group".into(),
            }));
        }
        let conn = set::new_job_key();
        link.send(
            self,
            &OobMsg::Accept {
                conn,
                proof,
                group: local.to_vec(),
                ctx,
            },
        )?;
        Ok(Agreed {
            conn,
            acceptor: true,
            remote,
            ctx,
        })
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn finish_establish(
        &mut self,
        ctx: u16,
        root: u32,
        me: u32,
        local_group: Vec<u32>,
        local_infos: Vec<ProcInfo>,
        agreed: Agreed,
        mut link: Option<Link>,
    ) -> Result<u16, PmlError> {
        let timeout = self.connect_timeout();
        let conn = agreed.conn;
        // The union: accepting group first.
        let (union, my_u, remote_offset): (Vec<ProcInfo>, u32, usize) = if agreed.acceptor {
            let mut u = local_infos.clone();
            u.extend(agreed.remote.iter().cloned());
            (u, me, local_infos.len())
        } else {
            let mut u = agreed.remote.clone();
            u.extend(local_infos.iter().cloned());
            (u, agreed.remote.len() as u32 + me, 0)
        };
        let remote_range = remote_offset..remote_offset + agreed.remote.len();
        // Phase 2: indices for the remote processes; transports for the new pairs.
        let mut local_ok: Result<(), String> = Ok(());
        for r in &agreed.remote {
            if local_infos
                .iter()
                .any(|l| l.job == r.job && l.rank == r.rank)
            {
                local_ok = Err(format!(
                    "rank {} of job {} is in both groups; the groups of an inter-communicator must be disjoint",
                    r.rank, r.job
                ));
            }
        }
        let mut remote_idx = Vec::with_capacity(agreed.remote.len());
        let mut new_remote: Vec<(u32, usize)> = Vec::new(); // (process index, union index)
        for (k, info) in agreed.remote.iter().enumerate() {
            let u = remote_range.start + k;
            match self.dpm.lookup(&info.job, info.rank) {
                Some(p) if !self.dpm.gone.contains_key(&p) => remote_idx.push(p),
                _ => {
                    let p = self.add_process(info);
                    remote_idx.push(p);
                    new_remote.push((p, u));
                }
            }
        }
        // The connecting side opens lifelines to this side's new processes once every card
        // is exchanged, so after this: the listener accepts them for this connection only.
        let expects_lifelines = agreed.acceptor && !new_remote.is_empty();
        if expects_lifelines {
            if let Some(l) = &self.dpm.listener {
                l.expect_lifelines(conn);
            }
        }
        let mut prepared = None;
        let mut my_cards = set::encode_bundle([]);
        if local_ok.is_ok() && !new_remote.is_empty() {
            match self.prepare_transports(conn, &union, my_u, &new_remote) {
                Ok(opening) => {
                    my_cards = opening.bundle();
                    prepared = Some(opening);
                }
                Err(e) => local_ok = Err(e),
            }
        }
        // Cards: gather locally, roots swap, broadcast.
        let mut blob = vec![u8::from(local_ok.is_ok())];
        blob.extend_from_slice(&my_cards);
        let gathered = self.allgather_bytes(ctx, &blob)?;
        let mut setup_failures: Vec<String> = Vec::new();
        let local_cards: Vec<Vec<u8>> = gathered
            .iter()
            .enumerate()
            .map(|(r, b)| {
                if b.first() != Some(&1) {
                    setup_failures.push(format!("local rank {r}"));
                }
                b.get(1..).unwrap_or(&[]).to_vec()
            })
            .collect();
        let outcome = if me == root {
            let link = link.as_mut().expect("the root has the link");
            self.swap_cards(link, agreed.acceptor, local_cards.clone(), timeout)
                .map(|remote_cards| encode_group_cards(&remote_cards))
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        let shared = match outcome {
            Err(e) => Err(e),
            Ok(_) => decode_outcome(&bytes, root),
        };
        let remote_cards = match shared {
            Ok(body) => match decode_group_cards(&body) {
                Err(e) => Err(dpm_err(DpmError::Protocol {
                    peer: "the other group".into(),
                    what: e.to_string(),
                })),
                Ok(cards) if cards.len() != agreed.remote.len() => {
                    Err(dpm_err(DpmError::Protocol {
                        peer: "the other group".into(),
                        what: format!(
                            "{} cards for {} processes",
                            cards.len(),
                            agreed.remote.len()
                        ),
                    }))
                }
                Ok(cards) => Ok(cards),
            },
            Err(e) => Err(e),
        };
        let remote_cards = match remote_cards {
            Ok(c) => c,
            Err(e) => {
                self.abandon(&new_remote, &[]);
                return Err(e);
            }
        };
        if !setup_failures.is_empty() && local_ok.is_ok() {
            local_ok = Err(format!(
                "transport set-up failed on {}",
                setup_failures.join(", ")
            ));
        }
        // Phase 3: attach, then lifelines for the new pairs.
        let mut slots = Vec::new();
        if let (Ok(()), Some(prepared)) = (&local_ok, prepared) {
            let mut union_cards: Vec<Vec<u8>> = vec![Vec::new(); union.len()];
            let (local_off, remote_off) = if agreed.acceptor {
                (0, local_infos.len())
            } else {
                (agreed.remote.len(), 0)
            };
            for (i, c) in local_cards.iter().enumerate() {
                union_cards[local_off + i] = c.clone();
            }
            for (i, c) in remote_cards.iter().enumerate() {
                union_cards[remote_off + i] = c.clone();
            }
            match self.attach_transports(conn, prepared, &union, my_u, &union_cards, &new_remote) {
                Ok(s) => slots = s,
                Err(e) => local_ok = Err(e),
            }
        }
        if local_ok.is_ok() && !new_remote.is_empty() {
            if let Err(e) = self.open_lifelines(conn, agreed.acceptor, &union, &new_remote, timeout)
            {
                local_ok = Err(e);
            }
        }
        if expects_lifelines {
            // Claimed, or the set-up failed before: none is taken for it any more.
            if let Some(l) = &self.dpm.listener {
                l.forget_lifelines(conn);
            }
        }
        // Phase 4: everyone ready on both sides?
        let mut flag = vec![u8::from(local_ok.is_ok())];
        if let Err(e) = &local_ok {
            flag.extend_from_slice(e.as_bytes());
        }
        let flags = self.allgather_bytes(ctx, &flag)?;
        let mut group_ok = Ok(());
        for (r, f) in flags.iter().enumerate() {
            if f.first() != Some(&1) {
                group_ok = Err(format!(
                    "local rank {r}: {}",
                    String::from_utf8_lossy(f.get(1..).unwrap_or(&[]))
                ));
                break;
            }
        }
        let outcome = if me == root {
            let link = link.as_mut().expect("the root has the link");
            self.swap_ready(link, agreed.acceptor, group_ok, timeout)
                .map(|()| Vec::new())
        } else {
            Ok(Vec::new())
        };
        let bytes = self.bcast_bytes(ctx, root, encode_outcome(&outcome))?;
        let shared = match outcome {
            Err(e) => Err(e),
            Ok(_) => decode_outcome(&bytes, root),
        };
        if let Err(e) = shared {
            self.abandon(&new_remote, &slots);
            return Err(e);
        }
        drop(link);
        // The new contexts.
        let inter_ctx = agreed.ctx;
        self.add_inter_context(inter_ctx, local_group, remote_idx, inter_ctx + 1);
        self.next_ctx = self.next_ctx.max(inter_ctx + 2);
        if !new_remote.is_empty() {
            self.dpm.conns.push(Connection {
                id: conn,
                procs: new_remote.iter().map(|&(p, _)| p).collect(),
                btls: slots,
            });
        }
        tracing::debug!(target: "dpm", ctx = inter_ctx, conn = format_args!("{conn:x}"), new = new_remote.len(), "inter-communicator ready");
        Ok(inter_ctx)
    }

    pub(super) fn swap_cards(
        &mut self,
        link: &mut Link,
        acceptor: bool,
        mine: Vec<Vec<u8>>,
        timeout: Duration,
    ) -> Result<Vec<Vec<u8>>, PmlError> {
        let deadline = Some(Instant::now() + timeout);
        let expect = |m: Option<OobMsg>, peer: String| match m {
            Some(OobMsg::Cards { cards }) => Ok(cards),
            Some(OobMsg::Refuse { reason }) => Err(dpm_err(DpmError::Setup(format!(
                "{peer} gave up: {reason}"
            )))),
            Some(other) => Err(dpm_err(DpmError::Protocol {
                peer,
                what: format!("expected Cards, got {}", other.kind()),
            })),
            None => Err(dpm_err(DpmError::Protocol {
                peer,
                what: format!("no cards within {} ms", timeout.as_millis()),
            })),
        };
        // The connecting root sends first, so the two never both block writing.
        if acceptor {
            let theirs = link.recv(self, deadline)?;
            let theirs = expect(theirs, link.peer())?;
            link.send(self, &OobMsg::Cards { cards: mine })?;
            Ok(theirs)
        } else {
            link.send(self, &OobMsg::Cards { cards: mine })?;
            let theirs = link.recv(self, deadline)?;
            expect(theirs, link.peer())
        }
    }

    pub(super) fn swap_ready(
        &mut self,
        link: &mut Link,
        acceptor: bool,
        mine: Result<(), String>,
        timeout: Duration,
    ) -> Result<(), PmlError> {
        let deadline = Some(Instant::now() + timeout);
        let read = |eng: &mut Engine, link: &mut Link| -> Result<Result<(), String>, PmlError> {
            match link.recv(eng, deadline)? {
                Some(OobMsg::Ready { ok: true, .. }) => Ok(Ok(())),
                Some(OobMsg::Ready { ok: false, reason }) => Ok(Err(reason)),
                Some(other) => Err(dpm_err(DpmError::Protocol {
                    peer: link.peer(),
                    what: format!("expected Ready, got {}", other.kind()),
                })),
                None => Err(dpm_err(DpmError::Protocol {
                    peer: link.peer(),
                    what: format!("not ready within {} ms", timeout.as_millis()),
                })),
            }
        };
        let msg = |r: &Result<(), String>| OobMsg::Ready {
            ok: r.is_ok(),
            reason: r.clone().err().unwrap_or_default(),
        };
        let both = if acceptor {
            let theirs = read(self, link)?;
            let both = match (&mine, theirs) {
                (Err(e), _) => Err(format!("this side: {e}")),
                (Ok(()), Err(e)) => Err(format!("the connecting side: {e}")),
                (Ok(()), Ok(())) => Ok(()),
            };
            link.send(self, &msg(&both))?;
            both
        } else {
            link.send(self, &msg(&mine))?;
            read(self, link)?
        };
        both.map_err(|e| dpm_err(DpmError::Setup(e)))
    }
}
