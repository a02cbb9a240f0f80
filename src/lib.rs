//! Kestrel: an MPI-style messaging stack.
//!
//! This facade is the public Rust API, shaped like rsmpi. A program calls [`initialize`]
//! once; the returned [`Universe`] gives the [`Universe::world`] communicator and finalizes
//! the job when dropped.
//!
//! ```no_run
//! use kestrel::Communicator;
//!
//! let universe = kestrel::initialize().unwrap_or_else(|e| kestrel::exit_with(&e));
//! let world = universe.world();
//! if world.rank() == 0 {
//!     world.process_at_rank(1).send(&[1.0f64, 2.0, 3.0][..]);
//! } else if world.rank() == 1 {
//!     let (values, status) = world.process_at_rank(0).receive_vec::<f64>();
//!     assert_eq!((values.len(), status.source_rank()), (3, 0));
//! }
//! ```
//!
//! Start programs with `kestrel-run -n N program`, MPICH's `mpiexec`, or `srun --mpi=pmi2`; run
//! alone they are a job of one rank. Errors in communication are fatal, as with MPI's default
//! error handler: the job is aborted with a message naming the operation and the cause.
#![deny(unsafe_code)]
#![warn(missing_docs)]

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

#[allow(unsafe_code)]
pub mod collective;
#[allow(unsafe_code)]
mod comm_create;
pub mod components;
#[allow(unsafe_code)]
pub mod datatype;
pub mod dpm;
pub mod environment;
mod error;
#[allow(unsafe_code)]
pub mod immediate;
#[allow(unsafe_code)]
pub mod neighbor;
#[allow(unsafe_code)]
pub mod request;
mod status;
#[allow(unsafe_code)]
pub mod threads;
pub mod topology;
#[allow(unsafe_code)]
pub mod window;

pub use comm_create::PendingDuplicate;
pub use datatype::{Buffer, BufferMut, Equivalence};
pub use environment::{init, initialize, Universe};
pub use error::Error;
pub use kestrel_pml::group::{Group, GroupRelation};
pub use kestrel_pml::Engine;
pub use kestrel_runtime::{Runtime, RuntimeError};
pub use kestrel_transport::params::{ParamError, ParamSpec, Params};
pub use kestrel_transport::Selection;
pub use status::Status;

use kestrel_pml::engine::CTX_SELF;

/// A rank in a communicator.
pub type Rank = i32;
/// A message tag (user tags are >= 0).
pub type Tag = i32;

/// `MPI_PROC_NULL`: operations with this rank complete at once and move no data.
pub const PROC_NULL: Rank = -1;
/// `MPI_ANY_TAG` as it appears in a status (a received message never has it).
pub const ANY_TAG: Tag = -1;

/// Every registered parameter of every layer, in layer order.
pub fn all_param_specs() -> Vec<&'static ParamSpec> {
    let mut specs = kestrel_transport::core_params::specs();
    specs.extend(kestrel_runtime::params::specs());
    for c in components::REGISTRY {
        specs.extend(c.params());
    }
    specs.extend(kestrel_pml::params::specs());
    specs
}

/// Prints `kestrel: <error>` to stderr and exits with status 1: the usual reaction of a
/// program whose [`initialize`] failed.
pub fn exit_with(e: &Error) -> ! {
    eprintln!("kestrel: {e}");
    std::process::exit(1)
}

pub(crate) struct Inner {
    pub(crate) engine: RefCell<Engine>,
    pub(crate) runtime: RefCell<Runtime>,
    params: Params,
    node_id: String,
    /// The inter-communicator to the job that spawned this one.
    parent: Cell<Option<u16>>,
}

impl Inner {
    /// MPI's default error handler: report and abort the whole job.
    pub(crate) fn fatal(&self, msg: &str) -> ! {
        match self.engine.try_borrow() {
            Ok(e) => eprintln!("kestrel: rank {}: {msg}", e.rank()),
            Err(_) => eprintln!("kestrel: {msg}"),
        }
        match self.runtime.try_borrow_mut() {
            Ok(mut rt) => rt.abort(1, msg),
            Err(_) => std::process::exit(1),
        }
    }
}

/// A communicator color for [`Communicator::split_by_color`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Color(Option<i32>);

impl Color {
    /// Ranks with the same non-negative value end up together.
    pub fn with_value(v: i32) -> Color {
        Color(Some(v))
    }
    /// `MPI_UNDEFINED`: this rank joins no new communicator.
    pub fn undefined() -> Color {
        Color(None)
    }
}

/// Operations every communicator offers.
pub trait Communicator {
    #[doc(hidden)]
    fn handle(&self) -> &SimpleCommunicator;

    /// This process's rank in the communicator.
    fn rank(&self) -> Rank {
        self.handle().rank
    }

    /// Ranks in the communicator.
    fn size(&self) -> Rank {
        self.handle().size
    }

    /// The process at rank `r` (or [`PROC_NULL`]), for point-to-point operations.
    fn process_at_rank(&self, r: Rank) -> Process<'_> {
        let c = self.handle();
        if r != PROC_NULL && !(0..c.size).contains(&r) {
            c.inner.fatal(&format!(
                "process_at_rank({r}): rank out of range for a communicator of {}",
                c.size
            ));
        }
        Process { comm: c, rank: r }
    }

    /// Any process: receives and probes from whichever rank sends (`MPI_ANY_SOURCE`).
    fn any_process(&self) -> AnyProcess<'_> {
        AnyProcess {
            comm: self.handle(),
        }
    }

    /// `MPI_Comm_dup`: the same ranks in a new communication context (collective).
    fn duplicate(&self) -> SimpleCommunicator {
        let c = self.handle();
        let ctx = c
            .inner
            .engine
            .borrow_mut()
            .dup(c.ctx)
            .unwrap_or_else(|e| c.inner.fatal(&e.to_string()));
        SimpleCommunicator::from_context(&c.inner, ctx)
    }

    /// `MPI_Comm_idup`: starts a duplicate (collective, nonblocking: every rank starts it
    /// in the same order as its other collectives on this communicator);
    /// [`PendingDuplicate::wait`] gives the communicator.
    fn immediate_duplicate(&self) -> PendingDuplicate {
        comm_create::idup(self.handle())
    }

    /// `MPI_Comm_split` with key = current rank (collective).
    fn split_by_color(&self, color: Color) -> Option<SimpleCommunicator> {
        self.split_by_color_with_key(color, self.rank())
    }

    /// `MPI_Comm_split`: ranks of equal color, ordered by key then old rank (collective).
    fn split_by_color_with_key(&self, color: Color, key: i32) -> Option<SimpleCommunicator> {
        let c = self.handle();
        let ctx = c
            .inner
            .engine
            .borrow_mut()
            .split(c.ctx, color.0, key)
            .unwrap_or_else(|e| c.inner.fatal(&e.to_string()));
        ctx.map(|ctx| SimpleCommunicator::from_context(&c.inner, ctx))
    }

    /// `MPI_Comm_create` (collective over this communicator): a communicator of `group`'s
    /// members, a subset of this one's, ranked in group order; `None` for the others. Ranks
    /// may pass different groups if those are disjoint: one communicator per group.
    fn split_by_subgroup_collective(&self, group: &Group) -> Option<SimpleCommunicator> {
        comm_create::create(self.handle(), group)
    }

    /// `MPI_Comm_create_group` with tag 0: as
    /// [`split_by_subgroup_collective`](Self::split_by_subgroup_collective), but collective
    /// over `group`'s members only; any other process gets `None` at once.
    fn split_by_subgroup(&self, group: &Group) -> Option<SimpleCommunicator> {
        self.split_by_subgroup_with_tag(group, 0)
    }

    /// `MPI_Comm_create_group`: [`split_by_subgroup`](Self::split_by_subgroup) with a tag
    /// (>= 0) that keeps apart creations under way at once over overlapping groups.
    fn split_by_subgroup_with_tag(&self, group: &Group, tag: Tag) -> Option<SimpleCommunicator> {
        comm_create::create_group(self.handle(), group, tag)
    }

    /// `MPI_Cart_create` (collective): the first `dims[0] x dims[1] x ...` ranks, in order,
    /// form a grid (periodic along dimension `i` if `periodic[i]`); `None` for the ranks
    /// left over. `reorder` is accepted and ignored: ranks keep their order (as in MPICH).
    fn create_cartesian_communicator(
        &self,
        dims: &[i32],
        periodic: &[bool],
        reorder: bool,
    ) -> Option<topology::CartesianCommunicator> {
        let _ = reorder;
        topology::cart_create(self.handle(), dims, periodic)
    }

    /// `MPI_Cart_map`: this process's rank in the grid
    /// [`create_cartesian_communicator`](Self::create_cartesian_communicator) would make
    /// (its own rank; `None` past the grid's size).
    fn cartesian_map(&self, dims: &[i32], periodic: &[bool]) -> Option<Rank> {
        topology::cart_map(self.handle(), dims, periodic)
    }

    /// `MPI_Graph_create` (collective): the first `index.len()` ranks are the nodes of the
    /// graph whose node `i` neighbors `edges[index[i - 1]..index[i]]`; `None` for the ranks
    /// left over. `reorder` is ignored, as in MPICH.
    fn create_graph_communicator(
        &self,
        index: &[i32],
        edges: &[i32],
        reorder: bool,
    ) -> Option<topology::GraphCommunicator> {
        let _ = reorder;
        topology::graph_create(self.handle(), index, edges)
    }

    /// `MPI_Graph_map`: this process's rank in the graph
    /// [`create_graph_communicator`](Self::create_graph_communicator) would make.
    fn graph_map(&self, index: &[i32], edges: &[i32]) -> Option<Rank> {
        topology::graph_map(self.handle(), index, edges)
    }

    /// `MPI_Dist_graph_create_adjacent` (collective), unweighted: this process receives
    /// from `sources` and sends to `destinations`, in that order. `reorder` is ignored.
    fn create_dist_graph_communicator_adjacent(
        &self,
        sources: &[Rank],
        destinations: &[Rank],
        reorder: bool,
    ) -> topology::DistributedGraphCommunicator {
        let _ = reorder;
        topology::dist_graph_adjacent(self.handle(), sources, destinations, None)
    }

    /// `MPI_Dist_graph_create_adjacent` with one weight per source and per destination.
    fn create_dist_graph_communicator_adjacent_weighted(
        &self,
        sources: &[Rank],
        source_weights: &[i32],
        destinations: &[Rank],
        destination_weights: &[i32],
        reorder: bool,
    ) -> topology::DistributedGraphCommunicator {
        let _ = reorder;
        let w = Some((source_weights, destination_weights));
        topology::dist_graph_adjacent(self.handle(), sources, destinations, w)
    }

    /// `MPI_Dist_graph_create` (collective): this process names edges from `sources[i]`
    /// to the next `degrees[i]` entries of `destinations` (weighted by the same entries of
    /// `weights`, if given); every process learns the edges into and out of it.
    fn create_dist_graph_communicator(
        &self,
        sources: &[Rank],
        degrees: &[i32],
        destinations: &[Rank],
        weights: Option<&[i32]>,
        reorder: bool,
    ) -> topology::DistributedGraphCommunicator {
        let _ = reorder;
        let c = self.handle();
        topology::dist_graph_create(c, sources, degrees, destinations, weights)
    }

    /// The group of the communicator's processes (as world ranks).
    fn group(&self) -> Group {
        let c = self.handle();
        c.inner
            .engine
            .borrow()
            .group_of(c.ctx)
            .unwrap_or_else(|e| c.inner.fatal(&e.to_string()))
    }

    /// Waits for every rank of the communicator (collective).
    fn barrier(&self) {
        let c = self.handle();
        let r = c.inner.engine.borrow_mut().coll_barrier(c.ctx);
        r.unwrap_or_else(|e| c.inner.fatal(&e.to_string()));
    }

    /// Stops the whole job.
    fn abort(&self, code: i32) -> ! {
        self.handle()
            .inner
            .runtime
            .borrow_mut()
            .abort(code, "abort called on a communicator")
    }
}

/// A communicator: a group of ranks and a private communication context.
pub struct SimpleCommunicator {
    pub(crate) inner: Rc<Inner>,
    pub(crate) ctx: u16,
    rank: Rank,
    size: Rank,
    owned: bool,
}

impl fmt::Debug for SimpleCommunicator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Communicator(context {}, rank {} of {})",
            self.ctx, self.rank, self.size
        )
    }
}

impl SimpleCommunicator {
    fn from_context(inner: &Rc<Inner>, ctx: u16) -> SimpleCommunicator {
        let e = inner.engine.borrow();
        let group = e.context_group(ctx).unwrap_or(&[]);
        let me = e.rank();
        let rank = group
            .iter()
            .position(|&r| r == me)
            .map(|r| r as Rank)
            .unwrap_or(-1);
        SimpleCommunicator {
            inner: inner.clone(),
            ctx,
            rank,
            size: group.len() as Rank,
            owned: ctx > CTX_SELF,
        }
    }
}

impl Drop for SimpleCommunicator {
    fn drop(&mut self) {
        // Only derived communicators own their context; world and self are shared handles.
        if self.owned {
            if let Ok(mut e) = self.inner.engine.try_borrow_mut() {
                e.free_context(self.ctx);
            }
        }
    }
}

impl Communicator for SimpleCommunicator {
    fn handle(&self) -> &SimpleCommunicator {
        self
    }
}

#[inline]
fn user_tag(c: &SimpleCommunicator, tag: Tag) -> Tag {
    if tag < 0 {
        negative_tag(c, tag);
    }
    tag
}

#[cold]
fn negative_tag(c: &SimpleCommunicator, tag: Tag) -> ! {
    c.inner.fatal(&format!("tag {tag} is negative; user tags must be >= 0 (negative tags are reserved for collectives)"))
}

/// A process of a communicator (see [`Communicator::process_at_rank`]).
pub struct Process<'a> {
    pub(crate) comm: &'a SimpleCommunicator,
    pub(crate) rank: Rank,
}

impl fmt::Debug for Process<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Process({})", self.rank)
    }
}

impl<'a> Process<'a> {
    /// Its rank.
    pub fn rank(&self) -> Rank {
        self.rank
    }

    fn dest(&self) -> Option<u32> {
        (self.rank != PROC_NULL).then_some(self.rank as u32)
    }

    /// Sends `buf` with tag 0 (`MPI_Send`).
    pub fn send<B: Buffer + ?Sized>(&self, buf: &B) {
        self.send_with_tag(buf, 0)
    }

    /// Sends `buf` with `tag`.
    pub fn send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: Tag) {
        if let Some(d) = self.dest() {
            request::send_now(
                &self.comm.inner,
                self.comm.ctx,
                d,
                user_tag(self.comm, tag),
                buf.as_bytes(),
                false,
            );
        }
    }

    /// Sends and returns only once the receiver matched the message (`MPI_Ssend`).
    pub fn synchronous_send<B: Buffer + ?Sized>(&self, buf: &B) {
        self.synchronous_send_with_tag(buf, 0)
    }

    /// [`Process::synchronous_send`] with a tag.
    pub fn synchronous_send_with_tag<B: Buffer + ?Sized>(&self, buf: &B, tag: Tag) {
        if let Some(d) = self.dest() {
            request::send_now(
                &self.comm.inner,
                self.comm.ctx,
                d,
                user_tag(self.comm, tag),
                buf.as_bytes(),
                true,
            );
        }
    }

    /// Receives one value with any tag.
    pub fn receive<T: Equivalence>(&self) -> (T, Status) {
        let mut v: T = datatype::zeroed_vec::<T>(1)[0];
        let s = self.receive_into(&mut v);
        (v, s)
    }

    /// Receives a message of any length into a new vector.
    pub fn receive_vec<T: Equivalence>(&self) -> (Vec<T>, Status) {
        match self.dest() {
            None => (Vec::new(), Status::null()),
            Some(_) => {
                let (msg, st) = self.matched_probe();
                let mut v = datatype::zeroed_vec::<T>(st.count::<T>());
                let s = msg.matched_receive_into(&mut v[..]);
                (v, s)
            }
        }
    }

    /// Receives into `buf` with any tag (`MPI_Recv`).
    pub fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Status {
        match self.dest() {
            None => Status::null(),
            Some(s) => request::recv_now(
                &self.comm.inner,
                self.comm.ctx,
                Some(s),
                None,
                buf.as_bytes_mut(),
            ),
        }
    }

    /// Receives into `buf` a message with `tag`.
    pub fn receive_into_with_tag<B: BufferMut + ?Sized>(&self, buf: &mut B, tag: Tag) -> Status {
        match self.dest() {
            None => Status::null(),
            Some(s) => request::recv_now(
                &self.comm.inner,
                self.comm.ctx,
                Some(s),
                Some(user_tag(self.comm, tag)),
                buf.as_bytes_mut(),
            ),
        }
    }

    /// Starts a send (`MPI_Isend`); the buffer stays borrowed until the request completes.
    pub fn immediate_send<'s, B: Buffer + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s B,
    ) -> request::Request<'s> {
        self.immediate_send_with_tag(scope, buf, 0)
    }

    /// [`Process::immediate_send`] with a tag.
    pub fn immediate_send_with_tag<'s, B: Buffer + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s B,
        tag: Tag,
    ) -> request::Request<'s> {
        let dest = self.dest().unwrap_or_else(|| {
            self.comm
                .inner
                .fatal("immediate send to PROC_NULL is not supported; skip the send")
        });
        request::start_send(
            scope,
            &self.comm.inner,
            self.comm.ctx,
            dest,
            user_tag(self.comm, tag),
            buf.as_bytes(),
            false,
        )
    }

    /// Starts a synchronous send (`MPI_Issend`).
    pub fn immediate_synchronous_send_with_tag<'s, B: Buffer + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s B,
        tag: Tag,
    ) -> request::Request<'s> {
        let dest = self.dest().unwrap_or_else(|| {
            self.comm
                .inner
                .fatal("immediate send to PROC_NULL is not supported; skip the send")
        });
        request::start_send(
            scope,
            &self.comm.inner,
            self.comm.ctx,
            dest,
            user_tag(self.comm, tag),
            buf.as_bytes(),
            true,
        )
    }

    /// Starts a receive (`MPI_Irecv`) with any tag.
    pub fn immediate_receive_into<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s mut B,
    ) -> request::Request<'s> {
        let src = self.dest().unwrap_or_else(|| {
            self.comm
                .inner
                .fatal("immediate receive from PROC_NULL is not supported")
        });
        request::start_recv(
            scope,
            &self.comm.inner,
            self.comm.ctx,
            Some(src),
            None,
            buf.as_bytes_mut(),
        )
    }

    /// Starts a receive of a message with `tag`.
    pub fn immediate_receive_into_with_tag<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s mut B,
        tag: Tag,
    ) -> request::Request<'s> {
        let src = self.dest().unwrap_or_else(|| {
            self.comm
                .inner
                .fatal("immediate receive from PROC_NULL is not supported")
        });
        request::start_recv(
            scope,
            &self.comm.inner,
            self.comm.ctx,
            Some(src),
            Some(user_tag(self.comm, tag)),
            buf.as_bytes_mut(),
        )
    }

    /// Sends `send` to this process while receiving `recv` from `source` (`MPI_Sendrecv`):
    /// both run at once, so a ring of such calls cannot deadlock.
    pub fn send_receive_into<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        source: &Process<'_>,
        recv: &mut R,
    ) -> Status {
        self.send_receive_into_with_tags(send, 0, source, recv, None)
    }

    /// [`Process::send_receive_into`] with a send tag and a receive tag (`None` = any).
    pub fn send_receive_into_with_tags<S: Buffer + ?Sized, R: BufferMut + ?Sized>(
        &self,
        send: &S,
        send_tag: Tag,
        source: &Process<'_>,
        recv: &mut R,
        recv_tag: Option<Tag>,
    ) -> Status {
        let c = self.comm;
        let recv_tag = recv_tag.map(|t| user_tag(c, t));
        let send_tag = user_tag(c, send_tag);
        request::scope(|scope| {
            let r = source.dest().map(|src| {
                request::start_recv(
                    scope,
                    &c.inner,
                    c.ctx,
                    Some(src),
                    recv_tag,
                    recv.as_bytes_mut(),
                )
            });
            if let Some(d) = self.dest() {
                request::start_send(scope, &c.inner, c.ctx, d, send_tag, send.as_bytes(), false)
                    .wait();
            }
            r.map(|r| r.wait()).unwrap_or_else(Status::null)
        })
    }

    /// Waits for a message from this process and reports it without receiving (`MPI_Probe`).
    pub fn probe(&self) -> Status {
        probe_loop(self.comm, self.dest(), None)
    }

    /// [`Process::probe`] for a tag.
    pub fn probe_with_tag(&self, tag: Tag) -> Status {
        probe_loop(self.comm, self.dest(), Some(user_tag(self.comm, tag)))
    }

    /// Reports a pending message from this process, if any (`MPI_Iprobe`).
    pub fn immediate_probe(&self) -> Option<Status> {
        let c = self.comm;
        c.inner
            .engine
            .borrow_mut()
            .iprobe(c.ctx, self.dest(), None)
            .unwrap_or_else(|e| c.inner.fatal(&e.to_string()))
            .map(Status::from_pml)
    }

    /// Waits for a message and takes it out of matching, to be received with
    /// [`Message::matched_receive_into`] (`MPI_Mprobe`).
    pub fn matched_probe(&self) -> (Message<'a>, Status) {
        mprobe_loop(self.comm, self.dest(), None)
    }

    /// [`Process::matched_probe`] for a tag.
    pub fn matched_probe_with_tag(&self, tag: Tag) -> (Message<'a>, Status) {
        mprobe_loop(self.comm, self.dest(), Some(user_tag(self.comm, tag)))
    }
}

/// Any process of a communicator (see [`Communicator::any_process`]).
pub struct AnyProcess<'a> {
    comm: &'a SimpleCommunicator,
}

impl fmt::Debug for AnyProcess<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "AnyProcess")
    }
}

impl<'a> AnyProcess<'a> {
    /// Receives one value from any rank with any tag.
    pub fn receive<T: Equivalence>(&self) -> (T, Status) {
        let mut v: T = datatype::zeroed_vec::<T>(1)[0];
        let s = self.receive_into(&mut v);
        (v, s)
    }

    /// Receives a message of any length from any rank.
    pub fn receive_vec<T: Equivalence>(&self) -> (Vec<T>, Status) {
        let (msg, st) = self.matched_probe();
        let mut v = datatype::zeroed_vec::<T>(st.count::<T>());
        let s = msg.matched_receive_into(&mut v[..]);
        (v, s)
    }

    /// Receives into `buf` from any rank with any tag.
    pub fn receive_into<B: BufferMut + ?Sized>(&self, buf: &mut B) -> Status {
        request::recv_now(
            &self.comm.inner,
            self.comm.ctx,
            None,
            None,
            buf.as_bytes_mut(),
        )
    }

    /// Receives into `buf` from any rank a message with `tag`.
    pub fn receive_into_with_tag<B: BufferMut + ?Sized>(&self, buf: &mut B, tag: Tag) -> Status {
        request::recv_now(
            &self.comm.inner,
            self.comm.ctx,
            None,
            Some(user_tag(self.comm, tag)),
            buf.as_bytes_mut(),
        )
    }

    /// Starts a receive from any rank.
    pub fn immediate_receive_into<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s mut B,
    ) -> request::Request<'s> {
        request::start_recv(
            scope,
            &self.comm.inner,
            self.comm.ctx,
            None,
            None,
            buf.as_bytes_mut(),
        )
    }

    /// Starts a receive from any rank of a message with `tag`.
    pub fn immediate_receive_into_with_tag<'s, B: BufferMut + ?Sized>(
        &self,
        scope: &request::LocalScope<'s>,
        buf: &'s mut B,
        tag: Tag,
    ) -> request::Request<'s> {
        request::start_recv(
            scope,
            &self.comm.inner,
            self.comm.ctx,
            None,
            Some(user_tag(self.comm, tag)),
            buf.as_bytes_mut(),
        )
    }

    /// Waits for a message from any rank and reports it without receiving.
    pub fn probe(&self) -> Status {
        probe_loop(self.comm, None, None)
    }

    /// [`AnyProcess::probe`] for a tag.
    pub fn probe_with_tag(&self, tag: Tag) -> Status {
        probe_loop(self.comm, None, Some(user_tag(self.comm, tag)))
    }

    /// Reports a pending message from any rank, if any.
    pub fn immediate_probe(&self) -> Option<Status> {
        let c = self.comm;
        c.inner
            .engine
            .borrow_mut()
            .iprobe(c.ctx, None, None)
            .unwrap_or_else(|e| c.inner.fatal(&e.to_string()))
            .map(Status::from_pml)
    }

    /// Waits for a message from any rank and takes it out of matching.
    pub fn matched_probe(&self) -> (Message<'a>, Status) {
        mprobe_loop(self.comm, None, None)
    }

    /// [`AnyProcess::matched_probe`] for a tag.
    pub fn matched_probe_with_tag(&self, tag: Tag) -> (Message<'a>, Status) {
        mprobe_loop(self.comm, None, Some(user_tag(self.comm, tag)))
    }
}

/// A message taken out of matching by a matched probe.
#[must_use = "a matched message must be received"]
pub struct Message<'a> {
    comm: &'a SimpleCommunicator,
    handle: Option<kestrel_pml::engine::MessageHandle>,
}

impl fmt::Debug for Message<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Message")
    }
}

impl Message<'_> {
    /// Receives the message into `buf` (`MPI_Mrecv`).
    pub fn matched_receive_into<B: BufferMut + ?Sized>(self, buf: &mut B) -> Status {
        match self.handle {
            None => Status::null(),
            Some(h) => request::mrecv_now(&self.comm.inner, h, buf.as_bytes_mut()),
        }
    }

    /// Receives the message into a new vector.
    pub fn matched_receive_vec<T: Equivalence>(self, count: usize) -> (Vec<T>, Status) {
        let mut v = datatype::zeroed_vec::<T>(count);
        let s = self.matched_receive_into(&mut v[..]);
        (v, s)
    }
}

fn probe_loop(c: &SimpleCommunicator, source: Option<u32>, tag: Option<i32>) -> Status {
    let mut idle = 0;
    loop {
        let found = c.inner.engine.borrow_mut().iprobe(c.ctx, source, tag);
        match found {
            Ok(Some(s)) => return Status::from_pml(s),
            Ok(None) => c.inner.engine.borrow_mut().idle_step(&mut idle),
            Err(err) => c.inner.fatal(&err.to_string()),
        }
    }
}

fn mprobe_loop<'a>(
    c: &'a SimpleCommunicator,
    source: Option<u32>,
    tag: Option<i32>,
) -> (Message<'a>, Status) {
    if source.is_none() && tag.is_none() && c.rank < 0 {
        return (
            Message {
                comm: c,
                handle: None,
            },
            Status::null(),
        );
    }
    let mut idle = 0;
    loop {
        let found = c.inner.engine.borrow_mut().improbe(c.ctx, source, tag);
        match found {
            Ok(Some((h, s))) => {
                return (
                    Message {
                        comm: c,
                        handle: Some(h),
                    },
                    Status::from_pml(s),
                )
            }
            Ok(None) => c.inner.engine.borrow_mut().idle_step(&mut idle),
            Err(err) => c.inner.fatal(&err.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_layer_registers_well_formed_unique_parameters() {
        kestrel_transport::params::check_specs(&super::all_param_specs()).unwrap();
    }
}
