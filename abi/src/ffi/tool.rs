//! The tool information interface's entry points (`MPI_T_*`): argument conversion only; the
//! meaning is in [`crate::tool`]. They take neither the library's call lock nor its error
//! handlers: each returns `MPI_SUCCESS` or an `MPI_T_ERR_*` class.
//!
//! Strings follow MPI's rule: `*len` says how large the buffer is; at most `*len - 1` bytes
//! and a NUL are written and `*len` becomes the bytes written plus one; with a null buffer
//! or `*len == 0` only the length the whole string needs (NUL included) is stored; a null
//! `len` asks for nothing. Out-parameters of the `*_get_info` calls may be null (not
//! wanted); those of the other calls may not (`MPI_T_ERR_INVALID`).

use std::os::raw::{c_char, c_int, c_void};

use crate::tool::catalog::TEXT_LEN;
use crate::tool::cvars::{self, CvarValue};
use crate::tool::pvars::{self, Target};
use crate::tool::{self, err, ToolResult, ERR_INVALID};

/// An MPI_T handle (`MPI_T_cvar_handle`, `MPI_T_pvar_handle`, `MPI_T_pvar_session`,
/// `MPI_T_enum`): a pointer to an incomplete struct, never dereferenced.
type Handle = *mut c_void;

/// Runs a call's body and returns its code.
fn run(name: &'static str, body: impl FnOnce() -> ToolResult<()>) -> c_int {
    tool::code(name, body())
}

/// Writes a required out-parameter.
///
/// # Safety
/// `p` must be null or valid for writing a `T`.
unsafe fn out<T>(p: *mut T, v: T, what: &str) -> ToolResult<()> {
    if p.is_null() {
        return Err(err(
            ERR_INVALID,
            format!("{what} is a null pointer; pass where the result goes"),
        ));
    }
    // SAFETY: non-null and valid for writes (caller).
    unsafe { p.write_unaligned(v) };
    Ok(())
}

/// Writes an optional out-parameter (skipped when null).
///
/// # Safety
/// `p` must be null or valid for writing a `T`.
unsafe fn opt<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: non-null and valid for writes (caller).
        unsafe { p.write_unaligned(v) };
    }
}

/// Reads a required in(-out) parameter.
///
/// # Safety
/// `p` must be null or valid for reading a `T`.
unsafe fn get<T: Copy>(p: *const T, what: &str) -> ToolResult<T> {
    if p.is_null() {
        return Err(err(ERR_INVALID, format!("{what} is a null pointer")));
    }
    // SAFETY: non-null and valid for reads (caller).
    Ok(unsafe { p.read_unaligned() })
}

/// Stores `s` by MPI's string rule (see the module documentation).
///
/// # Safety
/// `len` must be null or valid for an int; `buf` null or valid for `*len` bytes.
unsafe fn text(buf: *mut c_char, len: *mut c_int, s: &str) {
    if len.is_null() {
        return;
    }
    // SAFETY: non-null int (caller).
    let cap = unsafe { len.read_unaligned() };
    let written = if buf.is_null() || cap <= 0 {
        s.len()
    } else {
        let n = s.len().min(cap as usize - 1);
        // SAFETY: `buf` holds `cap > n` bytes (caller).
        unsafe {
            std::ptr::copy_nonoverlapping(s.as_ptr() as *const c_char, buf, n);
            buf.add(n).write(0);
        }
        n
    };
    // SAFETY: as above.
    unsafe { len.write_unaligned(written as c_int + 1) };
}

/// A NUL-terminated name argument.
///
/// # Safety
/// `p` must be null or a NUL-terminated string.
unsafe fn name_arg(p: *const c_char, what: &str) -> ToolResult<String> {
    if p.is_null() {
        return Err(err(ERR_INVALID, format!("{what} is a null pointer")));
    }
    // SAFETY: non-null and NUL-terminated (caller).
    Ok(unsafe { std::ffi::CStr::from_ptr(p) }
        .to_string_lossy()
        .into_owned())
}

/// Copies up to `len` indices into `indices`.
///
/// # Safety
/// `indices` must be valid for `len` ints when `len > 0`.
unsafe fn put_indices(len: c_int, indices: *mut c_int, from: &[c_int]) -> ToolResult<()> {
    let n = usize::try_from(len)
        .map_err(|_| err(ERR_INVALID, format!("len {len} is negative")))?
        .min(from.len());
    if n == 0 {
        return Ok(());
    }
    if indices.is_null() {
        return Err(err(ERR_INVALID, "indices is a null pointer"));
    }
    // SAFETY: room for `len >= n` ints (caller).
    unsafe { std::ptr::copy_nonoverlapping(from.as_ptr(), indices, n) };
    Ok(())
}

/// `MPI_T_PVAR_ALL_HANDLES` or one handle.
fn target(h: Handle) -> Target {
    if std::ptr::eq(
        h as *const c_void,
        super::MPI_T_PVAR_ALL_HANDLES.0 as *const c_void,
    ) {
        Target::All
    } else {
        Target::One(h as usize)
    }
}

mpi_fn! {
    /// `MPI_T_init_thread` (allowed before `MPI_Init` and after `MPI_Finalize`).
    fn MPI_T_init_thread / PMPI_T_init_thread(required: c_int, provided: *mut c_int) -> c_int {
        run("MPI_T_init_thread", || {
            if provided.is_null() {
                return Err(err(ERR_INVALID, "provided is a null pointer; pass where the thread level goes"));
            }
            // SAFETY: int out-parameter, non-null (contract).
            unsafe { out(provided, tool::init_thread(required), "provided") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_finalize`.
    fn MPI_T_finalize / PMPI_T_finalize() -> c_int {
        run("MPI_T_finalize", tool::finalize)
    }
}

mpi_fn! {
    /// `MPI_T_cvar_get_num`.
    fn MPI_T_cvar_get_num / PMPI_T_cvar_get_num(num_cvar: *mut c_int) -> c_int {
        // SAFETY: int out-parameter (contract).
        run("MPI_T_cvar_get_num", || unsafe { out(num_cvar, cvars::num()?, "num_cvar") })
    }
}

mpi_fn! {
    /// `MPI_T_cvar_get_info`.
    fn MPI_T_cvar_get_info / PMPI_T_cvar_get_info(
        cvar_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        verbosity: *mut c_int,
        datatype: *mut c_int,
        enumtype: *mut Handle,
        desc: *mut c_char,
        desc_len: *mut c_int,
        bind: *mut c_int,
        scope: *mut c_int,
    ) -> c_int {
        run("MPI_T_cvar_get_info", || {
            let c = cvars::info(cvar_index)?;
            let e = c.enumtype.map_or(0, tool::enum_handle);
            // SAFETY: optional out-parameters and string buffers of the sizes given (contract).
            unsafe {
                text(name, name_len, c.spec.name);
                opt(verbosity, c.verbosity);
                opt(datatype, c.datatype);
                opt(enumtype, e as Handle);
                text(desc, desc_len, &c.desc);
                opt(bind, c.bind);
                opt(scope, c.scope);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_cvar_get_index`.
    fn MPI_T_cvar_get_index / PMPI_T_cvar_get_index(name: *const c_char, cvar_index: *mut c_int) -> c_int {
        run("MPI_T_cvar_get_index", || {
            // SAFETY: a NUL-terminated name and an int out-parameter (contract).
            unsafe { out(cvar_index, cvars::index_of(&name_arg(name, "name")?)?, "cvar_index") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_cvar_handle_alloc` (every variable is bound to no object: `obj_handle` is not
    /// read).
    fn MPI_T_cvar_handle_alloc / PMPI_T_cvar_handle_alloc(
        cvar_index: c_int,
        _obj_handle: *mut c_void,
        handle: *mut Handle,
        count: *mut c_int,
    ) -> c_int {
        run("MPI_T_cvar_handle_alloc", || {
            if handle.is_null() || count.is_null() {
                return Err(err(ERR_INVALID, "handle and count must point to where the results go"));
            }
            let (h, n) = cvars::handle_alloc(cvar_index)?;
            // SAFETY: out-parameters, checked non-null above (contract).
            unsafe {
                out(handle, h as Handle, "handle")?;
                out(count, n, "count")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_T_cvar_handle_free`: the handle becomes `MPI_T_CVAR_HANDLE_NULL`.
    fn MPI_T_cvar_handle_free / PMPI_T_cvar_handle_free(handle: *mut Handle) -> c_int {
        run("MPI_T_cvar_handle_free", || {
            // SAFETY: in-out handle (contract).
            let h = unsafe { get(handle, "handle") }?;
            cvars::handle_free(h as usize)?;
            // SAFETY: as above.
            unsafe { out(handle, std::ptr::null_mut(), "handle") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_cvar_read`: `count` elements of the variable's datatype into `buf`.
    fn MPI_T_cvar_read / PMPI_T_cvar_read(handle: Handle, buf: *mut c_void) -> c_int {
        run("MPI_T_cvar_read", || {
            let v = cvars::read(handle as usize)?;
            // SAFETY: `buf` holds `count` elements of the variable's datatype (contract).
            unsafe {
                match v {
                    CvarValue::Int(i) => out(buf as *mut c_int, i, "buf"),
                    CvarValue::Count(i) => out(buf as *mut i64, i, "buf"),
                    CvarValue::Unsigned(u) => out(buf as *mut u64, u, "buf"),
                    CvarValue::Text(t) => {
                        if buf.is_null() {
                            return Err(err(ERR_INVALID, "buf is a null pointer"));
                        }
                        let n = t.len().min(TEXT_LEN - 1);
                        std::ptr::copy_nonoverlapping(t.as_ptr(), buf as *mut u8, n);
                        (buf as *mut u8).add(n).write(0);
                        Ok(())
                    }
                }
            }
        })
    }
}

mpi_fn! {
    /// `MPI_T_cvar_write` (before `MPI_Init` only; see [`crate::tool`]).
    fn MPI_T_cvar_write / PMPI_T_cvar_write(handle: Handle, buf: *const c_void) -> c_int {
        run("MPI_T_cvar_write", || {
            let dt = cvars::of_handle(handle as usize)?.datatype;
            // SAFETY: `buf` holds a value of the variable's datatype, a NUL-terminated
            // string for MPI_CHAR (contract).
            let v = unsafe {
                match dt {
                    tool::INT => CvarValue::Int(get(buf as *const c_int, "buf")?),
                    tool::COUNT => CvarValue::Count(get(buf as *const i64, "buf")?),
                    tool::UNSIGNED_LONG_LONG => CvarValue::Unsigned(get(buf as *const u64, "buf")?),
                    _ => CvarValue::Text(name_arg(buf as *const c_char, "buf")?),
                }
            };
            cvars::write(handle as usize, v)
        })
    }
}

mpi_fn! {
    /// `MPI_T_enum_get_info`.
    fn MPI_T_enum_get_info / PMPI_T_enum_get_info(
        enumtype: Handle,
        num: *mut c_int,
        name: *mut c_char,
        name_len: *mut c_int,
    ) -> c_int {
        run("MPI_T_enum_get_info", || {
            let (n, items) = tool::enum_info(enumtype as usize)?;
            // SAFETY: an int out-parameter and a string buffer of the size given (contract).
            unsafe {
                out(num, items, "num")?;
                text(name, name_len, n);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_enum_get_item`.
    fn MPI_T_enum_get_item / PMPI_T_enum_get_item(
        enumtype: Handle,
        indx: c_int,
        value: *mut c_int,
        name: *mut c_char,
        name_len: *mut c_int,
    ) -> c_int {
        run("MPI_T_enum_get_item", || {
            let (v, n) = tool::enum_item(enumtype as usize, indx)?;
            // SAFETY: an int out-parameter and a string buffer of the size given (contract).
            unsafe {
                out(value, v, "value")?;
                text(name, name_len, n);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_get_num`.
    fn MPI_T_pvar_get_num / PMPI_T_pvar_get_num(num_pvar: *mut c_int) -> c_int {
        // SAFETY: int out-parameter (contract).
        run("MPI_T_pvar_get_num", || unsafe { out(num_pvar, pvars::num()?, "num_pvar") })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_get_info`.
    fn MPI_T_pvar_get_info / PMPI_T_pvar_get_info(
        pvar_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        verbosity: *mut c_int,
        var_class: *mut c_int,
        datatype: *mut c_int,
        enumtype: *mut Handle,
        desc: *mut c_char,
        desc_len: *mut c_int,
        bind: *mut c_int,
        readonly: *mut c_int,
        continuous: *mut c_int,
        atomic: *mut c_int,
    ) -> c_int {
        run("MPI_T_pvar_get_info", || {
            let p = pvars::info(pvar_index)?;
            // SAFETY: optional out-parameters and string buffers of the sizes given (contract).
            unsafe {
                text(name, name_len, p.name);
                opt(verbosity, p.verbosity);
                opt(var_class, p.class);
                opt(datatype, p.datatype);
                opt(enumtype, std::ptr::null_mut());
                text(desc, desc_len, p.desc);
                opt(bind, p.bind);
                opt(readonly, 1);
                opt(continuous, 1);
                opt(atomic, 0);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_get_index`.
    fn MPI_T_pvar_get_index / PMPI_T_pvar_get_index(
        name: *const c_char,
        var_class: c_int,
        pvar_index: *mut c_int,
    ) -> c_int {
        run("MPI_T_pvar_get_index", || {
            // SAFETY: a NUL-terminated name and an int out-parameter (contract).
            unsafe {
                let i = pvars::index_of(&name_arg(name, "name")?, var_class)?;
                out(pvar_index, i, "pvar_index")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_session_create`.
    fn MPI_T_pvar_session_create / PMPI_T_pvar_session_create(session: *mut Handle) -> c_int {
        run("MPI_T_pvar_session_create", || {
            if session.is_null() {
                return Err(err(ERR_INVALID, "session is a null pointer"));
            }
            let s = pvars::session_create()?;
            // SAFETY: out-parameter, non-null (contract).
            unsafe { out(session, s as Handle, "session") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_session_free`: frees its handles too; the session becomes
    /// `MPI_T_PVAR_SESSION_NULL`.
    fn MPI_T_pvar_session_free / PMPI_T_pvar_session_free(session: *mut Handle) -> c_int {
        run("MPI_T_pvar_session_free", || {
            // SAFETY: in-out handle (contract).
            let s = unsafe { get(session, "session") }?;
            pvars::session_free(s as usize)?;
            // SAFETY: as above.
            unsafe { out(session, std::ptr::null_mut(), "session") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_handle_alloc` (every variable is bound to no object: `obj_handle` is not
    /// read).
    fn MPI_T_pvar_handle_alloc / PMPI_T_pvar_handle_alloc(
        session: Handle,
        pvar_index: c_int,
        _obj_handle: *mut c_void,
        handle: *mut Handle,
        count: *mut c_int,
    ) -> c_int {
        run("MPI_T_pvar_handle_alloc", || {
            if handle.is_null() || count.is_null() {
                return Err(err(ERR_INVALID, "handle and count must point to where the results go"));
            }
            let (h, n) = pvars::handle_alloc(session as usize, pvar_index)?;
            // SAFETY: out-parameters, checked non-null above (contract).
            unsafe {
                out(handle, h as Handle, "handle")?;
                out(count, n, "count")
            }
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_handle_free`: the handle becomes `MPI_T_PVAR_HANDLE_NULL`.
    fn MPI_T_pvar_handle_free / PMPI_T_pvar_handle_free(session: Handle, handle: *mut Handle) -> c_int {
        run("MPI_T_pvar_handle_free", || {
            // SAFETY: in-out handle (contract).
            let h = unsafe { get(handle, "handle") }?;
            pvars::handle_free(session as usize, h as usize)?;
            // SAFETY: as above.
            unsafe { out(handle, std::ptr::null_mut(), "handle") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_start`: every variable is continuous (`MPI_T_ERR_PVAR_NO_STARTSTOP`;
    /// nothing to do for `MPI_T_PVAR_ALL_HANDLES`).
    fn MPI_T_pvar_start / PMPI_T_pvar_start(session: Handle, handle: Handle) -> c_int {
        run("MPI_T_pvar_start", || pvars::start_stop(session as usize, target(handle), "start"))
    }
}

mpi_fn! {
    /// `MPI_T_pvar_stop`: as `MPI_T_pvar_start`.
    fn MPI_T_pvar_stop / PMPI_T_pvar_stop(session: Handle, handle: Handle) -> c_int {
        run("MPI_T_pvar_stop", || pvars::start_stop(session as usize, target(handle), "stopp"))
    }
}

mpi_fn! {
    /// `MPI_T_pvar_read`: one `unsigned long long`.
    fn MPI_T_pvar_read / PMPI_T_pvar_read(session: Handle, handle: Handle, buf: *mut c_void) -> c_int {
        run("MPI_T_pvar_read", || {
            let v = pvars::read(session as usize, handle as usize)?;
            // SAFETY: `buf` holds one unsigned long long (contract).
            unsafe { out(buf as *mut u64, v, "buf") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_pvar_readreset`: every variable is read-only (`MPI_T_ERR_PVAR_NO_WRITE`).
    fn MPI_T_pvar_readreset / PMPI_T_pvar_readreset(session: Handle, handle: Handle, _buf: *mut c_void) -> c_int {
        run("MPI_T_pvar_readreset", || pvars::write(session as usize, handle as usize))
    }
}

mpi_fn! {
    /// `MPI_T_pvar_reset`: every variable is read-only (`MPI_T_ERR_PVAR_NO_WRITE`; nothing
    /// to do for `MPI_T_PVAR_ALL_HANDLES`).
    fn MPI_T_pvar_reset / PMPI_T_pvar_reset(session: Handle, handle: Handle) -> c_int {
        run("MPI_T_pvar_reset", || pvars::reset(session as usize, target(handle)))
    }
}

mpi_fn! {
    /// `MPI_T_pvar_write`: every variable is read-only (`MPI_T_ERR_PVAR_NO_WRITE`).
    fn MPI_T_pvar_write / PMPI_T_pvar_write(session: Handle, handle: Handle, _buf: *const c_void) -> c_int {
        run("MPI_T_pvar_write", || pvars::write(session as usize, handle as usize))
    }
}

mpi_fn! {
    /// `MPI_T_category_get_num`.
    fn MPI_T_category_get_num / PMPI_T_category_get_num(num_cat: *mut c_int) -> c_int {
        // SAFETY: int out-parameter (contract).
        run("MPI_T_category_get_num", || unsafe { out(num_cat, tool::category_num()?, "num_cat") })
    }
}

mpi_fn! {
    /// `MPI_T_category_get_info`.
    fn MPI_T_category_get_info / PMPI_T_category_get_info(
        cat_index: c_int,
        name: *mut c_char,
        name_len: *mut c_int,
        desc: *mut c_char,
        desc_len: *mut c_int,
        num_cvars: *mut c_int,
        num_pvars: *mut c_int,
        num_categories: *mut c_int,
    ) -> c_int {
        run("MPI_T_category_get_info", || {
            let c = tool::category(cat_index)?;
            // SAFETY: optional out-parameters and string buffers of the sizes given (contract).
            unsafe {
                text(name, name_len, c.name);
                text(desc, desc_len, &c.desc);
                opt(num_cvars, c.cvars.len() as c_int);
                opt(num_pvars, c.pvars.len() as c_int);
                opt(num_categories, 0);
            }
            Ok(())
        })
    }
}

mpi_fn! {
    /// `MPI_T_category_get_index`.
    fn MPI_T_category_get_index / PMPI_T_category_get_index(name: *const c_char, cat_index: *mut c_int) -> c_int {
        run("MPI_T_category_get_index", || {
            // SAFETY: a NUL-terminated name and an int out-parameter (contract).
            unsafe { out(cat_index, tool::category_index(&name_arg(name, "name")?)?, "cat_index") }
        })
    }
}

mpi_fn! {
    /// `MPI_T_category_get_cvars`.
    fn MPI_T_category_get_cvars / PMPI_T_category_get_cvars(cat_index: c_int, len: c_int, indices: *mut c_int) -> c_int {
        run("MPI_T_category_get_cvars", || {
            let c = tool::category(cat_index)?;
            // SAFETY: `indices` holds `len` ints (contract).
            unsafe { put_indices(len, indices, &c.cvars) }
        })
    }
}

mpi_fn! {
    /// `MPI_T_category_get_pvars`.
    fn MPI_T_category_get_pvars / PMPI_T_category_get_pvars(cat_index: c_int, len: c_int, indices: *mut c_int) -> c_int {
        run("MPI_T_category_get_pvars", || {
            let c = tool::category(cat_index)?;
            // SAFETY: `indices` holds `len` ints (contract).
            unsafe { put_indices(len, indices, &c.pvars) }
        })
    }
}

mpi_fn! {
    /// `MPI_T_category_get_categories`: categories hold no categories.
    fn MPI_T_category_get_categories / PMPI_T_category_get_categories(cat_index: c_int, len: c_int, indices: *mut c_int) -> c_int {
        run("MPI_T_category_get_categories", || {
            tool::category(cat_index)?;
            // SAFETY: `indices` holds `len` ints (contract).
            unsafe { put_indices(len, indices, &[]) }
        })
    }
}

mpi_fn! {
    /// `MPI_T_category_changed`.
    fn MPI_T_category_changed / PMPI_T_category_changed(update_number: *mut c_int) -> c_int {
        // SAFETY: int out-parameter (contract).
        run("MPI_T_category_changed", || unsafe { out(update_number, tool::category_changed()?, "update_number") })
    }
}
