//! The MPI tool information interface (MPI_T, MPI-3.1 chapter 14): control variables,
//! performance variables, categories and enumerations.
//!
//! What each part is here:
//! * **Control variables are Kestrel's parameter registry**: one per `ParamSpec` of
//!   `kestrel::all_param_specs()` (what `kestrel-info` lists), in that order
//!   ([`catalog`]). Before `MPI_Init` a read gives the value `MPI_Init` would resolve (the
//!   environment, then writes made through MPI_T on top), after it the value the library
//!   runs with. A write is allowed only before `MPI_Init`: it is validated with the
//!   parameter's own parser and applies at `MPI_Init` above every other source, as
//!   `kestrel-run --mca` does ([`params_for_init`]). A write while MPI runs fails with
//!   `MPI_T_ERR_CVAR_SET_NOT_NOW`, after `MPI_Finalize` with `MPI_T_ERR_CVAR_SET_NEVER`.
//!   Writes survive `MPI_T_finalize` (they are the library's configuration).
//! * **Performance variables are counters** ([`pvars`]): the engine's
//!   (`kestrel_pml::engine::counters`) and every transport's (`Btl::counters`, declared by
//!   its component), continuous and read-only, of class `MPI_T_PVAR_CLASS_COUNTER`. A read
//!   gives the count since `MPI_Init`: 0 before it, and the values at `MPI_Finalize` after
//!   it. A transport that did not open reads 0.
//! * **Categories** are the components owning variables; **enumerations**: one, the values
//!   of boolean control variables. Text control variables (`Str`, `Choice`, `Components`)
//!   are `MPI_CHAR` and have no enumeration: MPI ties enumerations to `MPI_INT` variables,
//!   and a tool reads an enumerated variable into an `int`, which a text value would
//!   overflow; their allowed words are in the description.
//!
//! This module owns MPI_T's state (its reference count, the writes made before `MPI_Init`,
//! the parameters the library runs with, sessions and handles) behind its own lock, never
//! the library's call lock: MPI_T works before `MPI_Init`, after `MPI_Finalize` and from any
//! thread. It must never hold its lock while taking the call lock (a performance variable
//! read takes the call lock alone, to read the engine's counters), and never raises errors
//! through error handlers: every call returns its error class itself (as MPICH does, so
//! tools can compare codes with `MPI_T_ERR_*`), and the message naming the variable and the
//! fix is kept for `MPI_Error_string` of that class ([`code`]).

use std::collections::BTreeMap;
use std::os::raw::c_int;
use std::sync::{Mutex, MutexGuard};

use kestrel_transport::params::{ParamError, ParamSpec, Params};

pub mod catalog;
pub mod cvars;
pub mod pvars;

/// `MPI_T_ERR_NOT_INITIALIZED`.
pub const ERR_NOT_INITIALIZED: c_int = 60;
/// `MPI_T_ERR_INVALID_INDEX`.
pub const ERR_INVALID_INDEX: c_int = 62;
/// `MPI_T_ERR_INVALID_HANDLE`.
pub const ERR_INVALID_HANDLE: c_int = 64;
/// `MPI_T_ERR_INVALID_SESSION`.
pub const ERR_INVALID_SESSION: c_int = 67;
/// `MPI_T_ERR_CVAR_SET_NOT_NOW`.
pub const ERR_CVAR_SET_NOT_NOW: c_int = 68;
/// `MPI_T_ERR_CVAR_SET_NEVER`.
pub const ERR_CVAR_SET_NEVER: c_int = 69;
/// `MPI_T_ERR_PVAR_NO_STARTSTOP`.
pub const ERR_PVAR_NO_STARTSTOP: c_int = 70;
/// `MPI_T_ERR_PVAR_NO_WRITE`.
pub const ERR_PVAR_NO_WRITE: c_int = 71;
/// `MPI_T_ERR_INVALID_NAME`.
pub const ERR_INVALID_NAME: c_int = 73;
/// `MPI_T_ERR_INVALID`: a bad argument or value.
pub const ERR_INVALID: c_int = 74;

/// `MPI_T_VERBOSITY_USER_BASIC`.
pub const VERBOSITY_USER_BASIC: c_int = 221;
/// `MPI_T_VERBOSITY_TUNER_BASIC`.
pub const VERBOSITY_TUNER_BASIC: c_int = 224;
/// `MPI_T_BIND_NO_OBJECT`.
pub const BIND_NO_OBJECT: c_int = 9700;
/// `MPI_T_SCOPE_LOCAL`.
pub const SCOPE_LOCAL: c_int = 60440;
/// `MPI_T_PVAR_CLASS_COUNTER`.
pub const PVAR_CLASS_COUNTER: c_int = 246;

/// `MPI_INT`.
pub const INT: c_int = 0x4c00_0405;
/// `MPI_COUNT` (64 bits).
pub const COUNT: c_int = 0x4c00_0845;
/// `MPI_UNSIGNED_LONG_LONG`.
pub const UNSIGNED_LONG_LONG: c_int = 0x4c00_0819;
/// `MPI_CHAR`.
pub const CHAR: c_int = 0x4c00_0101;

/// `MPI_THREAD_MULTIPLE`: what `MPI_T_init_thread` grants at most (MPI_T has its own lock).
const THREAD_MULTIPLE: c_int = 3;

/// A failed MPI_T call: the `MPI_T_ERR_*` class it returns and what to tell the user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolError {
    /// The error class returned.
    pub class: c_int,
    /// What went wrong and how to fix it (without the function name).
    pub msg: String,
}

/// The result of an MPI_T call's body.
pub type ToolResult<T> = Result<T, ToolError>;

/// A [`ToolError`] of `class`.
pub fn err(class: c_int, msg: impl Into<String>) -> ToolError {
    ToolError {
        class,
        msg: msg.into(),
    }
}

/// The code an MPI_T call returns: `MPI_SUCCESS`, or the error's class, whose
/// `MPI_Error_string` is then `name: message` (until another error of that class).
pub fn code(name: &str, r: ToolResult<()>) -> c_int {
    match r {
        Ok(()) => crate::error::SUCCESS,
        Err(e) => {
            let msg = format!("{name}: {}", e.msg);
            tracing::debug!(target: "abi", class = e.class, "{msg}");
            crate::error::keep_tool_message(e.class, msg);
            e.class
        }
    }
}

/// Where the library is, as MPI_T sees it.
enum Life {
    /// Before `MPI_Init`.
    Before,
    /// Between `MPI_Init` and `MPI_Finalize`: the parameters the library runs with.
    Running(Params),
    /// After `MPI_Finalize`: the parameters it ran with and its final counters.
    After(Params, Vec<(&'static str, u64)>),
}

/// MPI_T's state (see the module documentation).
struct State {
    /// Outstanding `MPI_T_init_thread` calls.
    inits: u32,
    /// Control variables written before `MPI_Init`: parameter name → the value's text.
    writes: BTreeMap<&'static str, String>,
    life: Life,
    /// The last handle or session number given out.
    last_id: usize,
    /// Control variable handles → control variable index.
    cvar_handles: BTreeMap<usize, usize>,
    /// Sessions → their performance variable handles → performance variable index.
    sessions: BTreeMap<usize, BTreeMap<usize, usize>>,
}

static STATE: Mutex<State> = Mutex::new(State {
    inits: 0,
    writes: BTreeMap::new(),
    life: Life::Before,
    last_id: 0,
    cvar_handles: BTreeMap::new(),
    sessions: BTreeMap::new(),
});

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The state, once `MPI_T_init_thread` was called.
fn initialized() -> ToolResult<MutexGuard<'static, State>> {
    let st = state();
    if st.inits == 0 {
        return Err(err(
            ERR_NOT_INITIALIZED,
            "the tool interface is not initialized; call MPI_T_init_thread first (and \
             MPI_T_finalize as many times at the end)",
        ));
    }
    Ok(st)
}

/// Fails unless `MPI_T_init_thread` was called.
fn ready() -> ToolResult<()> {
    initialized().map(drop)
}

/// What a handle value stands for; the kind sits above bit 48, where no user-space
/// address reaches, so a handle never equals a real pointer such as
/// `MPI_T_PVAR_ALL_HANDLES`, and a handle of one kind is never taken for another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(usize)]
pub enum HandleKind {
    /// `MPI_T_cvar_handle`.
    Cvar = 1,
    /// `MPI_T_pvar_handle`.
    Pvar = 2,
    /// `MPI_T_pvar_session`.
    Session = 3,
    /// `MPI_T_enum`.
    Enum = 4,
}

const KIND_SHIFT: u32 = 48;

/// The handle value of number `id` (non-zero) of `kind`.
fn make_handle(kind: HandleKind, id: usize) -> usize {
    ((kind as usize) << KIND_SHIFT) | id
}

/// The number inside handle `h` of `kind`, if it is one.
fn handle_id(kind: HandleKind, h: usize) -> Option<usize> {
    (h >> KIND_SHIFT == kind as usize).then_some(h & ((1 << KIND_SHIFT) - 1))
}

impl State {
    fn next_id(&mut self) -> usize {
        self.last_id += 1;
        self.last_id
    }
}

/// `MPI_T_init_thread`: counts the call; returns the thread level provided (any level
/// asked for, up to `MPI_THREAD_MULTIPLE`).
pub fn init_thread(required: c_int) -> c_int {
    let mut st = state();
    st.inits += 1;
    required.clamp(0, THREAD_MULTIPLE)
}

/// `MPI_T_finalize`: the last call frees every session and handle (writes stay).
pub fn finalize() -> ToolResult<()> {
    let mut st = initialized()?;
    st.inits -= 1;
    if st.inits == 0 {
        st.cvar_handles.clear();
        st.sessions.clear();
    }
    Ok(())
}

/// The parameters `MPI_Init` runs with: the environment, with the control variables written
/// through MPI_T taking the place of `KESTREL_MCA_<NAME>` (the highest precedence).
pub fn params_for_init(specs: &[&'static ParamSpec]) -> Result<Params, ParamError> {
    let writes = state().writes.clone();
    let mca_names: Vec<String> = std::env::vars()
        .filter_map(|(k, _)| {
            k.strip_prefix("KESTREL_MCA_")
                .map(|n| n.to_ascii_lowercase())
        })
        .collect();
    Params::resolve(specs, &|var| lookup(&writes, var), &mca_names)
}

/// A variable of the environment as `MPI_Init` sees it: `KESTREL_MCA_<NAME>` is the value
/// written through MPI_T, when there is one.
fn lookup(writes: &BTreeMap<&'static str, String>, var: &str) -> Option<String> {
    let written = var.strip_prefix("KESTREL_MCA_").and_then(|upper| {
        writes
            .iter()
            .find(|(name, _)| name.eq_ignore_ascii_case(upper))
            .map(|(_, v)| v.clone())
    });
    written.or_else(|| std::env::var(var).ok())
}

/// `MPI_Init` succeeded with `params`.
pub fn library_started(params: Params) {
    state().life = Life::Running(params);
}

/// `MPI_Finalize` is stopping the engine, whose counters were `counters`.
pub fn library_finalized(counters: Vec<(&'static str, u64)>) {
    let mut st = state();
    let params = match std::mem::replace(&mut st.life, Life::Before) {
        Life::Running(p) | Life::After(p, _) => p,
        Life::Before => Params::default(),
    };
    st.life = Life::After(params, counters);
}

fn index(what: &str, i: c_int, n: usize, count_fn: &str) -> ToolResult<usize> {
    usize::try_from(i).ok().filter(|&i| i < n).ok_or_else(|| {
        err(
            ERR_INVALID_INDEX,
            format!(
                "{what} index {i} is out of range: there are {n} (0..{}); {count_fn} says \
                     how many",
                n as i64 - 1
            ),
        )
    })
}

/// `MPI_T_enum_get_info`: the enumeration's name and number of items.
pub fn enum_info(h: usize) -> ToolResult<(&'static str, c_int)> {
    let e = enum_of(h)?;
    Ok((e.name, e.items.len() as c_int))
}

/// `MPI_T_enum_get_item`: item `i`'s value and name.
pub fn enum_item(h: usize, i: c_int) -> ToolResult<(c_int, &'static str)> {
    let e = enum_of(h)?;
    let i = index(
        &format!("item of enumeration '{}':", e.name),
        i,
        e.items.len(),
        "MPI_T_enum_get_info",
    )?;
    Ok(e.items[i])
}

/// The handle of enumeration number `n` of [`catalog::ENUMS`].
pub fn enum_handle(n: usize) -> usize {
    make_handle(HandleKind::Enum, n + 1)
}

fn enum_of(h: usize) -> ToolResult<&'static catalog::Enum> {
    ready()?;
    handle_id(HandleKind::Enum, h)
        .and_then(|id| catalog::ENUMS.get(id.wrapping_sub(1)))
        .ok_or_else(|| {
            err(
                ERR_INVALID_HANDLE,
                "the enumeration handle is not one MPI_T_cvar_get_info or MPI_T_pvar_get_info \
                 returned (MPI_T_ENUM_NULL means the variable has no enumeration)",
            )
        })
}

/// `MPI_T_category_get_num`.
pub fn category_num() -> ToolResult<c_int> {
    ready()?;
    Ok(catalog::catalog().categories.len() as c_int)
}

/// Category `i` (`MPI_T_category_get_info`, `_get_cvars`, `_get_pvars`).
pub fn category(i: c_int) -> ToolResult<&'static catalog::Category> {
    ready()?;
    let cats = &catalog::catalog().categories;
    Ok(&cats[index("category", i, cats.len(), "MPI_T_category_get_num")?])
}

/// `MPI_T_category_get_index`.
pub fn category_index(name: &str) -> ToolResult<c_int> {
    ready()?;
    catalog::catalog()
        .categories
        .iter()
        .position(|c| c.name == name)
        .map(|i| i as c_int)
        .ok_or_else(|| {
            err(
                ERR_INVALID_NAME,
                format!(
                    "no category is named '{name}' (categories are Kestrel's components: {})",
                    catalog::catalog()
                        .categories
                        .iter()
                        .map(|c| c.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            )
        })
}

/// `MPI_T_category_changed`: the tables never change, so the stamp never does.
pub fn category_changed() -> ToolResult<c_int> {
    ready()?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::catalog::{catalog, Catalog};
    use super::cvars::{self, CvarValue};
    use super::pvars::{self, Target};
    use super::*;

    /// The tests that touch MPI_T's (process-wide) state, one at a time.
    fn serial() -> MutexGuard<'static, ()> {
        static LOCK: Mutex<()> = Mutex::new(());
        LOCK.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn cvar_handle(name: &str) -> usize {
        cvars::handle_alloc(cvars::index_of(name).unwrap())
            .unwrap()
            .0
    }

    #[test]
    fn the_cvar_table_covers_every_registered_parameter_once_in_registry_order() {
        let specs = kestrel::all_param_specs();
        let c: &Catalog = catalog();
        assert_eq!(c.cvars.len(), specs.len());
        for (v, s) in c.cvars.iter().zip(&specs) {
            assert!(std::ptr::eq(v.spec, *s), "{} out of order", s.name);
        }
        let mut names: Vec<&str> = c.cvars.iter().map(|v| v.spec.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), specs.len(), "a parameter appears twice");
        let btl = c.cvars.iter().find(|v| v.spec.name == "btl").unwrap();
        assert_eq!((btl.datatype, btl.verbosity), (CHAR, VERBOSITY_USER_BASIC));
        for v in &c.cvars {
            let want = match v.spec.kind {
                kestrel_transport::ParamKind::Bool => (INT, 1),
                kestrel_transport::ParamKind::Int { .. } => (COUNT, 1),
                kestrel_transport::ParamKind::Size { .. } => (UNSIGNED_LONG_LONG, 1),
                _ => (CHAR, catalog::TEXT_LEN as c_int),
            };
            assert_eq!((v.datatype, v.count), want, "{}", v.spec.name);
            assert_eq!((v.bind, v.scope), (BIND_NO_OBJECT, SCOPE_LOCAL));
            assert!(v.desc.starts_with(v.spec.description), "{}", v.desc);
        }
    }

    #[test]
    fn categories_partition_the_variables_by_component() {
        let c = catalog();
        let mut seen_c = vec![0; c.cvars.len()];
        let mut seen_p = vec![0; c.pvars.len()];
        for cat in &c.categories {
            assert!(
                !cat.cvars.is_empty() || !cat.pvars.is_empty(),
                "{}",
                cat.name
            );
            for &i in &cat.cvars {
                seen_c[i as usize] += 1;
                assert_eq!(c.cvars[i as usize].spec.component, cat.name);
            }
            for &i in &cat.pvars {
                seen_p[i as usize] += 1;
                assert_eq!(c.pvars[i as usize].component, cat.name);
            }
        }
        assert!(seen_c.iter().chain(&seen_p).all(|&n| n == 1));
        let names: Vec<&str> = c.categories.iter().map(|c| c.name).collect();
        for want in ["btl", "core", "shm", "pml"] {
            assert!(names.contains(&want), "{names:?}");
        }
        let pvar_names: Vec<&str> = c.pvars.iter().map(|p| p.name).collect();
        assert!(pvar_names.contains(&"pml_messages_sent"), "{pvar_names:?}");
        assert!(pvar_names.contains(&"shm_queue_sends"), "{pvar_names:?}");
        let mut unique = pvar_names.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(
            unique.len(),
            pvar_names.len(),
            "a counter is declared twice"
        );
    }

    #[test]
    fn every_call_needs_init_thread_and_the_last_finalize_frees_handles() {
        let _s = serial();
        assert_eq!(cvars::num().unwrap_err().class, ERR_NOT_INITIALIZED);
        assert_eq!(finalize().unwrap_err().class, ERR_NOT_INITIALIZED);
        assert_eq!(init_thread(7), THREAD_MULTIPLE);
        assert_eq!(init_thread(1), 1);
        let h = cvar_handle("verbose");
        finalize().unwrap();
        cvars::read(h).unwrap();
        finalize().unwrap();
        init_thread(0);
        assert_eq!(cvars::read(h).unwrap_err().class, ERR_INVALID_HANDLE);
        finalize().unwrap();
    }

    #[test]
    fn a_write_before_init_reads_back_and_applies_at_init_above_the_environment() {
        let _s = serial();
        init_thread(0);
        let h = cvar_handle("coll_shm");
        let before = cvars::read(h).unwrap();
        assert!(matches!(before, CvarValue::Int(0 | 1)), "{before:?}");
        cvars::write(h, CvarValue::Int(0)).unwrap();
        assert_eq!(cvars::read(h).unwrap(), CvarValue::Int(0));
        cvars::write(h, CvarValue::Int(1)).unwrap();
        assert_eq!(cvars::read(h).unwrap(), CvarValue::Int(1));
        let t = cvar_handle("shm_single_copy");
        cvars::write(t, CvarValue::Text("NONE".into())).unwrap();
        assert_eq!(cvars::read(t).unwrap(), CvarValue::Text("none".into()));
        let n = cvar_handle("btl");
        cvars::write(n, CvarValue::Text("^usnic".into())).unwrap();
        assert_eq!(cvars::read(n).unwrap(), CvarValue::Text("^usnic".into()));
        let p = params_for_init(&kestrel::all_param_specs()).unwrap();
        assert_eq!(p.get("shm_single_copy").unwrap().raw, "NONE");
        assert_eq!(
            p.get("btl").unwrap().source,
            kestrel_transport::Source::CommandLine
        );
        finalize().unwrap();
    }

    #[test]
    fn bad_values_are_rejected_naming_the_variable_and_what_it_takes() {
        let _s = serial();
        init_thread(0);
        let b = cvar_handle("coll_shm");
        let e = cvars::write(b, CvarValue::Int(2)).unwrap_err();
        assert_eq!(e.class, ERR_INVALID);
        assert!(
            e.msg.contains("coll_shm") && e.msg.contains("0 (false)"),
            "{e:?}"
        );
        let t = cvar_handle("shm_single_copy");
        let e = cvars::write(t, CvarValue::Text("sideways".into())).unwrap_err();
        assert_eq!(e.class, ERR_INVALID);
        assert!(
            e.msg.contains("shm_single_copy") && e.msg.contains("one of: auto"),
            "{e:?}"
        );
        let n = cvar_handle("btl");
        let e = cvars::write(n, CvarValue::Text("shm,nosuch".into())).unwrap_err();
        assert!(e.msg.contains("nosuch") && e.msg.contains("usnic"), "{e:?}");
        let e = cvars::write(n, CvarValue::Count(3)).unwrap_err();
        assert_eq!(e.class, ERR_INVALID);
        let e = cvars::write(n, CvarValue::Text("x".repeat(300))).unwrap_err();
        assert!(e.msg.contains("300 bytes"), "{e:?}");
        assert_eq!(
            cvars::index_of("no_such_parameter").unwrap_err().class,
            ERR_INVALID_NAME
        );
        let e = cvars::info(100_000).unwrap_err();
        assert_eq!(e.class, ERR_INVALID_INDEX);
        assert_eq!(cvars::info(-1).unwrap_err().class, ERR_INVALID_INDEX);
        finalize().unwrap();
    }

    #[test]
    fn counters_are_continuous_read_only_and_read_zero_before_init() {
        let _s = serial();
        init_thread(0);
        let s = pvars::session_create().unwrap();
        let i = pvars::index_of("pml_messages_sent", PVAR_CLASS_COUNTER).unwrap();
        assert_eq!(
            pvars::index_of("pml_messages_sent", PVAR_CLASS_COUNTER + 1)
                .unwrap_err()
                .class,
            ERR_INVALID_NAME
        );
        let (h, count) = pvars::handle_alloc(s, i).unwrap();
        assert_eq!(count, 1);
        assert_eq!(pvars::read(s, h).unwrap(), 0);
        let no = |r: ToolResult<()>| r.unwrap_err().class;
        assert_eq!(
            no(pvars::start_stop(s, Target::One(h), "start")),
            ERR_PVAR_NO_STARTSTOP
        );
        assert_eq!(no(pvars::reset(s, Target::One(h))), ERR_PVAR_NO_WRITE);
        assert_eq!(no(pvars::write(s, h)), ERR_PVAR_NO_WRITE);
        pvars::start_stop(s, Target::All, "start").unwrap();
        pvars::reset(s, Target::All).unwrap();
        // A handle of another kind, or of another session, is not this session's.
        let other = pvars::session_create().unwrap();
        assert_eq!(pvars::read(other, h).unwrap_err().class, ERR_INVALID_HANDLE);
        assert_eq!(pvars::read(h, h).unwrap_err().class, ERR_INVALID_SESSION);
        pvars::session_free(s).unwrap();
        assert_eq!(pvars::read(s, h).unwrap_err().class, ERR_INVALID_SESSION);
        pvars::session_free(other).unwrap();
        finalize().unwrap();
    }

    #[test]
    fn the_boolean_enumeration_and_categories_answer_by_handle_and_name() {
        let _s = serial();
        init_thread(0);
        let c = cvars::info(cvars::index_of("coll_shm").unwrap()).unwrap();
        let e = enum_handle(c.enumtype.unwrap());
        assert_eq!(enum_info(e).unwrap(), ("boolean", 2));
        assert_eq!(enum_item(e, 1).unwrap(), (1, "true"));
        assert_eq!(enum_item(e, 2).unwrap_err().class, ERR_INVALID_INDEX);
        assert_eq!(enum_info(0).unwrap_err().class, ERR_INVALID_HANDLE);
        let i = category_index("shm").unwrap();
        assert_eq!(category(i).unwrap().name, "shm");
        assert_eq!(category_index("nope").unwrap_err().class, ERR_INVALID_NAME);
        finalize().unwrap();
    }
}
