//! The library's process-wide state and the lock every MPI call takes.
//!
//! This module owns the tables behind the handles (communicators, groups, requests, matched
//! messages, user operations, error handlers, attribute keys, info objects, derived
//! datatypes), the messaging engine and the runtime, and the one lock that serializes MPI
//! calls. It never interprets an MPI call's arguments or raises MPI errors through
//! handlers: [`crate::api`] does that with [`Locked`].
//!
//! Locking: [`CORE`] holds everything but datatypes; a call holds it from start to end,
//! except that blocking calls give it back between polls when another thread waits for it
//! ([`Locked::let_others_in`]). Under `MPI_THREAD_MULTIPLE` that makes any call from any
//! thread safe at any time; below it, taking the lock costs no locked instruction (see
//! [`kestrel_abi_lock`]). Derived datatypes live in [`TYPES`], a separate lock taken only
//! briefly, so that a user reduction function (called while [`CORE`] is held) may still ask
//! `MPI_Type_size` and friends. Callbacks that may legitimately call MPI (error handlers,
//! attribute copy and delete functions) run with [`CORE`] released ([`Locked::unlocked`]).
//! Datatype calls do not take [`CORE`] at all. Any other call made from inside a reduction
//! function fails with `MPI_ERR_OTHER` instead of deadlocking.

use std::cell::Cell;
use std::collections::HashMap;
use std::os::raw::{c_int, c_void};
use std::sync::{Arc, Mutex};

use kestrel_pml::engine::MessageHandle;
use kestrel_pml::{Engine, Group};
use kestrel_runtime::Runtime;

use crate::error::{self, MpiError, MpiResult};
use crate::handle::{self, Kind, Obj};
use crate::requests::{self, ReqRec};
use crate::types::{self, Dt, TypeInfo};

pub use kestrel_abi_lock::Slab;

/// `MPI_User_function`: `f(invec, inoutvec, len, datatype)`.
pub type UserFn = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut c_int, *mut c_int);
/// `MPI_User_function_c` (`MPI_Op_create_c`): the same with an `MPI_Count` length.
pub type UserFnC = unsafe extern "C" fn(*mut c_void, *mut c_void, *mut i64, *mut c_int);

/// A user reduction function of either binding.
#[derive(Debug, Clone, Copy)]
pub enum OpFn {
    /// Registered with `MPI_Op_create`.
    Int(UserFn),
    /// Registered with `MPI_Op_create_c`.
    Count(UserFnC),
}
/// `MPI_Comm_errhandler_function`: `f(comm, errcode, ...)`.
pub type ErrFn = unsafe extern "C" fn(*mut c_int, *mut c_int, ...);
/// `MPI_Comm_copy_attr_function`.
pub type CopyFn =
    unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void, *mut c_void, *mut c_int) -> c_int;
/// `MPI_Comm_delete_attr_function`.
pub type DeleteFn = unsafe extern "C" fn(c_int, c_int, *mut c_void, *mut c_void) -> c_int;
/// MPICH's copy proxy (`MPII_Keyval_set_proxy`): calls a copy function of another language
/// as `proxy(f, object, keyval, extra_state, attribute_type, value_in, &value_out, &flag)`.
pub type CopyProxy = unsafe extern "C" fn(
    CopyFn,
    c_int,
    c_int,
    *mut c_void,
    c_int,
    *mut c_void,
    *mut *mut c_void,
    *mut c_int,
) -> c_int;
/// MPICH's delete proxy: `proxy(f, object, keyval, attribute_type, value, extra_state)`.
pub type DeleteProxy =
    unsafe extern "C" fn(DeleteFn, c_int, c_int, c_int, *mut c_void, *mut c_void) -> c_int;

/// How a key's copy and delete functions are called when they are not C functions (the
/// Fortran library registers its functions with proxies).
#[derive(Debug, Clone, Copy)]
pub struct AttrProxy {
    /// Calls the copy function.
    pub copy: CopyProxy,
    /// Calls the delete function.
    pub delete: DeleteProxy,
}

/// A communicator.
#[derive(Debug, Clone)]
pub struct CommRec {
    /// The engine's communication context.
    pub ctx: u16,
    /// This process's rank in it.
    pub rank: i32,
    /// Its members as job ranks, in rank order (an inter-communicator's local group; the
    /// engine's process indices, which are job ranks for this job's processes).
    pub members: Vec<u32>,
    /// An inter-communicator's remote group, in rank order (`None`: intra-communicator).
    /// Point-to-point ranks on an inter-communicator name members of this group.
    pub remote: Option<Vec<u32>>,
    /// `MPI_Comm_set_name`.
    pub name: String,
    /// Its error handler (a handle).
    pub errhandler: c_int,
    /// Attribute values by keyval, in the order they were set.
    pub attrs: Vec<(c_int, usize)>,
    /// Hints from `MPI_Comm_set_info` (and the `_with_info` creators).
    pub info: Vec<(String, String)>,
    /// A process topology (`MPI_Cart_create`, `MPI_Graph_create`, ...).
    pub topo: Option<std::sync::Arc<Topology>>,
}

impl CommRec {
    /// Ranks in the communicator.
    pub fn size(&self) -> i32 {
        self.members.len() as i32
    }

    /// Whether it is an inter-communicator.
    pub fn is_inter(&self) -> bool {
        self.remote.is_some()
    }

    /// How many ranks point-to-point calls may address: the remote group's size on an
    /// inter-communicator, else the communicator's.
    pub fn peer_count(&self) -> i32 {
        match &self.remote {
            Some(r) => r.len() as i32,
            None => self.size(),
        }
    }
}

/// A session.
#[derive(Debug, Clone)]
pub struct SessionRec {
    /// Its error handler.
    pub errhandler: c_int,
    /// The info it was opened with.
    pub info: Vec<(String, String)>,
}

/// A communicator's topology.
#[derive(Debug, Clone)]
pub enum Topology {
    /// `MPI_Cart_create`.
    Cart(kestrel_pml::topo::Cart),
    /// `MPI_Graph_create`.
    Graph(kestrel_pml::topo::Graph),
    /// `MPI_Dist_graph_create(_adjacent)`.
    DistGraph(kestrel_pml::topo::DistGraph),
}

/// A user-defined reduction (`MPI_Op_create`).
#[derive(Debug, Clone, Copy)]
pub struct OpRec {
    /// The C function.
    pub func: OpFn,
    /// Whether the program declared it commutative.
    pub commute: bool,
}

/// An attribute key (`MPI_Comm_create_keyval`).
#[derive(Debug, Clone, Copy)]
pub struct KeyvalRec {
    /// Called when a communicator holding the attribute is duplicated (`None`: not copied).
    pub copy: Option<CopyFn>,
    /// Called when the attribute is deleted or its communicator freed.
    pub delete: Option<DeleteFn>,
    /// The program's `extra_state`.
    pub extra: usize,
    /// Attributes still set with this key (the key goes when it is freed and this is 0).
    pub uses: usize,
    /// `MPI_Comm_free_keyval` was called.
    pub freed: bool,
    /// Calls the functions through a language proxy (`None`: C functions).
    pub proxy: Option<AttrProxy>,
}

/// A message taken by `MPI_Mprobe`/`MPI_Improbe`.
#[derive(Debug, Clone, Copy)]
pub struct MsgRec {
    /// The engine's handle.
    pub handle: MessageHandle,
    /// The communicator it arrived on.
    pub comm: c_int,
}

/// `MPI_Buffer_attach`'s buffer and what buffered sends occupy in it.
#[derive(Debug, Default)]
pub struct BsendArea {
    /// The attached memory, if any.
    pub buf: Option<kestrel_pml::buf::UserBuf>,
    /// Its address as the program passed it (for `MPI_Buffer_detach`).
    pub addr: usize,
    /// Sends in flight from the buffer: engine request, offset, bytes reserved.
    pub pending: Vec<(kestrel_pml::ReqId, usize, usize)>,
}

/// Everything an MPI call may touch, except datatypes.
pub struct Core {
    /// The messaging engine.
    pub engine: Engine,
    /// PMI, modex, abort.
    pub runtime: Runtime,
    /// Communicators: slot 0 is `MPI_COMM_WORLD`, slot 1 `MPI_COMM_SELF`.
    pub comms: Slab<CommRec>,
    /// Groups (`MPI_GROUP_EMPTY` is not stored).
    pub groups: Slab<Group>,
    /// Requests.
    pub requests: Slab<ReqRec>,
    /// Matched messages.
    pub messages: Slab<MsgRec>,
    /// User operations.
    pub ops: Slab<OpRec>,
    /// User error handlers.
    pub errhandlers: Slab<ErrFn>,
    /// Attribute keys.
    pub keyvals: Slab<KeyvalRec>,
    /// Info objects: ordered key/value pairs.
    pub infos: Slab<Vec<(String, String)>>,
    /// The buffered-send area.
    pub bsend: BsendArea,
    /// Requests freed by `MPI_Request_free` while still running: reaped when complete.
    pub detached: Vec<ReqRec>,
    /// The thread level granted by `MPI_Init_thread`.
    pub thread_level: c_int,
    /// The thread that called `MPI_Init`.
    pub main_thread: std::thread::ThreadId,
    /// `MPI_Comm_get_parent`: the inter-communicator to the job that spawned this one
    /// (`MPI_COMM_NULL` when none, or once it is freed or disconnected).
    pub parent: c_int,
    /// MPI-4 sessions.
    pub sessions: Slab<SessionRec>,
    /// One-sided windows.
    pub wins: Slab<crate::win_rec::WinRec>,
    /// Free functions of generalized requests freed during this call, run once the call
    /// releases the library lock (they may call MPI).
    pub deferred_frees: Vec<(crate::grequest::FreeFn, crate::grequest::Extra)>,
    /// Generalized requests started so far (the wait and test functions look for their
    /// query functions only when there were some).
    pub grequests: usize,
    /// Communicator creations agreeing on context ids under `MPI_THREAD_MULTIPLE`.
    pub creations: crate::turns::Creations,
}

impl Core {
    /// The communicator behind a handle.
    #[inline]
    pub fn comm(&self, h: c_int) -> MpiResult<&CommRec> {
        comm_slot(h)
            .and_then(|i| self.comms.get(i))
            .ok_or_else(|| bad_comm(h))
    }

    /// The communicator behind a handle, mutably.
    pub fn comm_mut(&mut self, h: c_int) -> MpiResult<&mut CommRec> {
        comm_slot(h)
            .and_then(|i| self.comms.get_mut(i))
            .ok_or_else(|| bad_comm(h))
    }

    /// The group behind a handle (`MPI_GROUP_EMPTY` included).
    pub fn group(&self, h: c_int) -> MpiResult<Group> {
        if h == handle::GROUP_EMPTY {
            return Ok(Group::new(Vec::new()));
        }
        match handle::decode(h, Obj::Group) {
            Some((Kind::Direct, i)) => self.groups.get(i).cloned(),
            _ => None,
        }
        .ok_or_else(|| {
            if h == handle::GROUP_NULL {
                MpiError::new(error::ERR_GROUP, "the group is MPI_GROUP_NULL")
            } else {
                MpiError::new(
                    error::ERR_GROUP,
                    format!("{h:#x} is not a group (freed, or another kind of handle)"),
                )
            }
        })
    }

    /// Stores a group; returns its handle (`MPI_GROUP_EMPTY` for an empty one).
    pub fn new_group(&mut self, g: Group) -> c_int {
        if g.size() == 0 {
            return handle::GROUP_EMPTY;
        }
        handle::make(Kind::Direct, Obj::Group, self.groups.insert(g))
    }

    /// Registers a communicator (intra or inter) for an engine context; returns its handle.
    pub fn new_comm(&mut self, ctx: u16, errhandler: c_int) -> MpiResult<c_int> {
        let remote = if self.engine.is_inter(ctx) {
            self.engine.context_group(ctx).map(<[u32]>::to_vec)
        } else {
            None
        };
        let members = self
            .engine
            .context_local_group(ctx)
            .ok_or_else(|| {
                MpiError::new(
                    error::ERR_INTERN,
                    format!("the engine has no context {ctx} for a new communicator"),
                )
            })?
            .to_vec();
        let me = self.engine.rank();
        let rank = members.iter().position(|&r| r == me).unwrap_or(0) as i32;
        let slot = self.comms.insert(CommRec {
            ctx,
            rank,
            members,
            remote,
            name: String::new(),
            errhandler,
            attrs: Vec::new(),
            info: Vec::new(),
            topo: None,
        });
        Ok(handle::make(Kind::Direct, Obj::Comm, slot))
    }

    /// The user operation behind a handle.
    pub fn user_op(&self, h: c_int) -> Option<OpRec> {
        match handle::decode(h, Obj::Op) {
            Some((Kind::Direct, i)) => self.ops.get(i).copied(),
            _ => None,
        }
    }

    /// Stores a request; returns its handle.
    #[inline]
    pub fn insert_request(&mut self, rec: ReqRec) -> c_int {
        handle::make(Kind::Direct, Obj::Request, self.requests.insert(rec))
    }

    /// One progress pass of the engine, then the requests it let go of.
    #[inline]
    pub fn progress(&mut self) {
        self.engine.progress();
        self.reap_detached();
    }

    /// Completes requests freed while running, once the engine is done with them.
    pub fn reap_detached(&mut self) {
        if self.detached.is_empty() {
            return;
        }
        let Core {
            engine,
            detached,
            deferred_frees,
            ..
        } = self;
        // A request whose unpack failed is finished too: nobody can report the error.
        detached.retain_mut(|r| {
            let running = matches!(requests::poll(engine, r), Ok(false));
            if !running {
                if let Some(requests::Persistent::Coll { id }) = r.persistent() {
                    engine.coll_free(*id);
                }
                if let Some(f) = r
                    .extra
                    .as_mut()
                    .and_then(|x| x.grequest.as_mut())
                    .and_then(|g| g.free.take().map(|f| (f, g.extra)))
                {
                    deferred_frees.push(f);
                }
            }
            running
        });
    }
}

/// The table slot of a communicator handle: a predefined handle names slot 0 or 1
/// (`MPI_COMM_WORLD`, `MPI_COMM_SELF`), a direct one slot 2 or above. Computed without
/// branching on the kind: every send and receive of the C library asks this first.
#[inline(always)]
pub fn comm_slot(h: c_int) -> Option<u32> {
    let slot = h as u32 & 0x03ff_ffff;
    // The kind and object-type bits a handle naming `slot` must carry.
    let kind = if slot < 2 {
        Kind::Builtin
    } else {
        Kind::Direct
    };
    let expected = handle::make(kind, Obj::Comm, 0) as u32;
    (h as u32 & !0x03ff_ffff == expected).then_some(slot)
}

fn bad_comm(h: c_int) -> MpiError {
    if h == handle::COMM_NULL {
        MpiError::new(error::ERR_COMM, "the communicator is MPI_COMM_NULL")
    } else {
        MpiError::new(
            error::ERR_COMM,
            format!("{h:#x} is not a communicator (freed, or another kind of handle)"),
        )
    }
}

/// Where the library is in its life.
pub enum Phase {
    /// Before `MPI_Init`.
    Before,
    /// Between `MPI_Init` and `MPI_Finalize`.
    Running(Box<Core>),
    /// After `MPI_Finalize`.
    After,
}

/// [`Phase`] made storable in a static.
pub struct PhaseCell(pub Phase);

// SAFETY: the engine and the runtime are not `Send` only because the transports hold raw
// pointers into shared memory and the engine may hold a reduction closure in an `Rc` while
// a collective runs. Nothing in them is tied to the thread that created it (no
// thread-locals, no thread-affine handles). The cell is only reachable through `CORE`'s
// lock, so at most one thread touches it at a time, and the lock orders those accesses.
#[allow(unsafe_code)]
unsafe impl Send for PhaseCell {}

pub use kestrel_abi_lock::{CallGuard, CallLock};

/// Everything but datatypes; see the module documentation.
pub static CORE: CallLock<PhaseCell> = CallLock::new(PhaseCell(Phase::Before));

/// [`CORE`] runs shared only because of the progress thread: the program asked for less than
/// `MPI_THREAD_MULTIPLE` (see [`crate::progress_thread`]).
pub static LOCK_SHARED_FOR_THREAD_ONLY: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

thread_local! {
    /// Set while a user reduction function runs on this thread, the only callback that runs
    /// with [`CORE`] held: a call from this thread that then finds [`CORE`] taken is that
    /// function calling MPI (per thread, because under `MPI_THREAD_MULTIPLE` another thread
    /// finding it taken simply waits).
    static IN_REDUCTION: Cell<bool> = const { Cell::new(false) };
}

/// Runs `f` (a user reduction function) with [`IN_REDUCTION`] set.
pub fn in_reduction<R>(f: impl FnOnce() -> R) -> R {
    let was = IN_REDUCTION.replace(true);
    let r = f();
    IN_REDUCTION.set(was);
    r
}

/// [`CORE`], held for one MPI call.
pub struct Locked {
    guard: Option<CallGuard<'static, PhaseCell>>,
}

impl Locked {
    /// Takes [`CORE`]; `None` when a user reduction function running inside an MPI call of
    /// this process calls MPI.
    #[inline]
    pub fn acquire() -> Option<Locked> {
        let guard = match CORE.try_lock() {
            Some(g) => g,
            None => {
                if IN_REDUCTION.get() {
                    return None;
                }
                CORE.lock()
            }
        };
        Some(Locked { guard: Some(guard) })
    }

    /// The phase.
    #[inline(always)]
    pub fn phase(&mut self) -> &mut Phase {
        &mut self
            .guard
            .as_mut()
            .expect("CORE is held between calls to unlocked")
            .0
    }

    /// The state of a running library.
    #[inline(always)]
    pub fn core(&mut self) -> MpiResult<&mut Core> {
        match self.phase() {
            Phase::Running(c) => Ok(c),
            Phase::Before => Err(MpiError::new(
                error::ERR_OTHER,
                "called before MPI_Init; call MPI_Init or MPI_Init_thread first",
            )),
            Phase::After => Err(MpiError::new(
                error::ERR_OTHER,
                "called after MPI_Finalize; no MPI call but MPI_Initialized, MPI_Finalized and MPI_Get_version is allowed then",
            )),
        }
    }

    /// Between the polls of a blocking call: under `MPI_THREAD_MULTIPLE`, lets a thread
    /// waiting for [`CORE`] in (see [`kestrel_abi_lock`]); nothing otherwise.
    #[inline]
    pub fn let_others_in(&mut self) {
        if let Some(g) = self.guard.as_mut() {
            g.let_others_in();
        }
    }

    /// Between the polls of a blocking call: yields the core, with [`CORE`] released under
    /// `MPI_THREAD_MULTIPLE` (see [`kestrel_abi_lock::call_lock::CallGuard::yield_unlocked`]).
    pub fn yield_unlocked(&mut self) {
        match self.guard.as_mut() {
            Some(g) => g.yield_unlocked(),
            None => std::thread::yield_now(),
        }
    }

    /// Whether calls may come from several program threads at once (`MPI_THREAD_MULTIPLE`,
    /// or the library is not running); the progress thread alone does not count (see
    /// [`crate::progress_thread`]).
    #[inline]
    pub fn multithreaded(&self) -> bool {
        self.guard.as_ref().is_some_and(|g| g.is_shared())
            && !LOCK_SHARED_FOR_THREAD_ONLY.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Selects the lock's mode: shared for `MPI_THREAD_MULTIPLE` and outside the library's
    /// life, exclusive for the lower thread levels (`MPI_Init_thread` and `MPI_Finalize`).
    pub fn set_multithreaded(&mut self, shared: bool) {
        if let Some(g) = self.guard.as_mut() {
            g.set_shared(shared);
        }
    }

    /// Runs `f` (a callback into the program) with [`CORE`] released, so that it may call
    /// MPI itself.
    pub fn unlocked<R>(&mut self, f: impl FnOnce() -> R) -> R {
        self.guard = None;
        let r = f();
        self.guard = Some(CORE.lock());
        r
    }
}

/// A derived datatype as the program sees it.
#[derive(Debug, Clone)]
pub struct TypeEntry {
    /// Its type map (shared with operations still using it after `MPI_Type_free`).
    pub info: Arc<TypeInfo>,
    /// `MPI_Type_commit` was called.
    pub committed: bool,
    /// `MPI_Type_set_name`.
    pub name: String,
}

/// Derived datatypes and names given to predefined ones.
#[derive(Debug, Default)]
pub struct TypeTable {
    /// Derived types by slot (indirect datatype handles).
    pub derived: Slab<TypeEntry>,
    /// Names the program gave predefined types.
    pub renamed: HashMap<c_int, String>,
    /// The types `MPI_Type_create_f90_*` returned, by (combiner, p, r): the same handle
    /// each time, never freed (MPI counts them as predefined).
    pub f90: HashMap<(c_int, c_int, c_int), c_int>,
    /// Datatype attribute keys (`MPI_Type_create_keyval`).
    pub keyvals: Slab<KeyvalRec>,
    /// Attributes by datatype handle, in the order they were set.
    pub attrs: HashMap<c_int, Vec<(c_int, usize)>>,
}

/// Datatypes; see the module documentation.
pub static TYPES: Mutex<Option<TypeTable>> = Mutex::new(None);

/// Runs `f` on the datatype table.
pub fn with_types<R>(f: impl FnOnce(&mut TypeTable) -> R) -> R {
    let mut g = TYPES.lock().unwrap_or_else(|p| p.into_inner());
    f(g.get_or_insert_with(TypeTable::default))
}

/// Resolves a datatype handle for use in communication (`committed` required) or for
/// queries and constructors (`committed` not required).
#[inline(always)]
pub fn datatype(h: c_int, need_commit: bool) -> MpiResult<Dt> {
    if let Some(t) = types::predefined(h) {
        return Ok(Dt::Static(t));
    }
    derived_datatype(h, need_commit)
}

/// [`datatype`] for handles that are not predefined types.
#[inline(never)]
fn derived_datatype(h: c_int, need_commit: bool) -> MpiResult<Dt> {
    if types::is_removed_marker(h) {
        return Err(MpiError::new(
            error::ERR_TYPE,
            "MPI_LB and MPI_UB were removed in MPI-3; set bounds with MPI_Type_create_resized",
        ));
    }
    // The type map and the commit flag only: cloning the whole entry copied its name too.
    let entry = match handle::decode(h, Obj::Datatype) {
        Some((Kind::Indirect, i)) => {
            with_types(|t| t.derived.get(i).map(|e| (e.info.clone(), e.committed)))
        }
        _ => None,
    };
    let Some((info, committed)) = entry else {
        return Err(if h == handle::DATATYPE_NULL {
            MpiError::new(error::ERR_TYPE, "the datatype is MPI_DATATYPE_NULL")
        } else {
            MpiError::new(
                error::ERR_TYPE,
                format!("{h:#x} is not a datatype (unknown, freed, or another kind of handle)"),
            )
        });
    };
    if need_commit && !committed {
        return Err(MpiError::new(
            error::ERR_TYPE,
            format!("datatype {h:#x} is not committed; call MPI_Type_commit before communicating with it"),
        ));
    }
    Ok(Dt::Shared(info))
}

#[cfg(test)]
mod tests {
    use super::comm_slot;
    use crate::handle::{self, Kind, Obj};

    #[test]
    fn communicator_handles_name_their_slots_and_nothing_else_does() {
        assert_eq!(comm_slot(handle::COMM_WORLD), Some(0));
        assert_eq!(comm_slot(handle::COMM_SELF), Some(1));
        assert_eq!(comm_slot(handle::make(Kind::Direct, Obj::Comm, 2)), Some(2));
        assert_eq!(
            comm_slot(handle::make(Kind::Direct, Obj::Comm, 70_000)),
            Some(70_000)
        );
        // Predefined communicators are slots 0 and 1 only; made ones start at 2.
        assert_eq!(comm_slot(handle::make(Kind::Builtin, Obj::Comm, 2)), None);
        assert_eq!(comm_slot(handle::make(Kind::Direct, Obj::Comm, 0)), None);
        assert_eq!(comm_slot(handle::make(Kind::Direct, Obj::Comm, 1)), None);
        assert_eq!(comm_slot(handle::make(Kind::Indirect, Obj::Comm, 3)), None);
        assert_eq!(comm_slot(handle::COMM_NULL), None);
        // Another object's handle with a communicator's kind and index.
        assert_eq!(comm_slot(handle::make(Kind::Builtin, Obj::Group, 0)), None);
        assert_eq!(comm_slot(handle::make(Kind::Direct, Obj::Win, 5)), None);
        assert_eq!(comm_slot(-1), None);
    }
}
