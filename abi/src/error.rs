//! MPI error classes, error codes and their strings.
//!
//! This module owns what an error *is* ([`MpiError`]: a class, a message naming the call and
//! the fix, and the communicator whose handler must see it) and how an error code maps back
//! to a class and a string. It never decides what happens to an error (return, abort, user
//! callback): [`crate::api`] does, because that needs the communicator tables.
//!
//! An error code is `class | (n << 7)`, where `n` numbers the message of one occurrence, so
//! `MPI_Error_string` can say "MPI_Send: rank 7 is outside a communicator of 2 ranks" rather
//! than only "invalid rank". The last [`KEPT_MESSAGES`] messages are kept; older codes still
//! map to their class and its generic string. `MPI_Error_class` masks the low 7 bits, as
//! with MPICH.

use std::collections::VecDeque;
use std::os::raw::c_int;
use std::sync::Mutex;

/// `MPI_SUCCESS`.
pub const SUCCESS: c_int = 0;
/// `MPI_ERR_BUFFER`.
pub const ERR_BUFFER: c_int = 1;
/// `MPI_ERR_COUNT`.
pub const ERR_COUNT: c_int = 2;
/// `MPI_ERR_TYPE`.
pub const ERR_TYPE: c_int = 3;
/// `MPI_ERR_TAG`.
pub const ERR_TAG: c_int = 4;
/// `MPI_ERR_COMM`.
pub const ERR_COMM: c_int = 5;
/// `MPI_ERR_RANK`.
pub const ERR_RANK: c_int = 6;
/// `MPI_ERR_ROOT`.
pub const ERR_ROOT: c_int = 7;
/// `MPI_ERR_GROUP`.
pub const ERR_GROUP: c_int = 8;
/// `MPI_ERR_OP`.
pub const ERR_OP: c_int = 9;
/// `MPI_ERR_ARG`.
pub const ERR_ARG: c_int = 12;
/// `MPI_ERR_UNKNOWN`.
pub const ERR_UNKNOWN: c_int = 13;
/// `MPI_ERR_TRUNCATE`.
pub const ERR_TRUNCATE: c_int = 14;
/// `MPI_ERR_OTHER`.
pub const ERR_OTHER: c_int = 15;
/// `MPI_ERR_INTERN`.
pub const ERR_INTERN: c_int = 16;
/// `MPI_ERR_IN_STATUS`.
pub const ERR_IN_STATUS: c_int = 17;
/// `MPI_ERR_PENDING`.
pub const ERR_PENDING: c_int = 18;
/// `MPI_ERR_REQUEST`.
pub const ERR_REQUEST: c_int = 19;
/// `MPI_ERR_INFO_KEY`.
pub const ERR_INFO_KEY: c_int = 29;
/// `MPI_ERR_INFO_VALUE`.
pub const ERR_INFO_VALUE: c_int = 30;
/// `MPI_ERR_INFO_NOKEY`.
pub const ERR_INFO_NOKEY: c_int = 31;
/// `MPI_ERR_NO_MEM`.
pub const ERR_NO_MEM: c_int = 34;
/// `MPI_ERR_UNSUPPORTED_OPERATION`.
pub const ERR_UNSUPPORTED_OPERATION: c_int = 44;
/// `MPI_ERR_WIN`.
pub const ERR_WIN: c_int = 45;
/// `MPI_ERR_LOCKTYPE`.
pub const ERR_LOCKTYPE: c_int = 47;
/// `MPI_ERR_RMA_SYNC`.
pub const ERR_RMA_SYNC: c_int = 50;
/// `MPI_ERR_RMA_RANGE`.
pub const ERR_RMA_RANGE: c_int = 55;
/// `MPI_ERR_RMA_ATTACH`.
pub const ERR_RMA_ATTACH: c_int = 56;
/// `MPI_ERR_RMA_SHARED`.
pub const ERR_RMA_SHARED: c_int = 57;
/// `MPI_ERR_RMA_FLAVOR`.
pub const ERR_RMA_FLAVOR: c_int = 58;
/// `MPI_ERR_DISP`.
pub const ERR_DISP: c_int = 52;
/// `MPI_ERR_SIZE`.
pub const ERR_SIZE: c_int = 51;
/// `MPI_ERR_KEYVAL`.
pub const ERR_KEYVAL: c_int = 48;
/// `MPI_ERR_INFO`.
pub const ERR_INFO: c_int = 28;
/// `MPI_ERR_SESSION` (MPI-4).
pub const ERR_SESSION: c_int = 75;
/// `MPIX_ERR_PROC_FAILED`: MPICH's class (beyond `MPI_T_ERR_NOT_SUPPORTED`, in MPICH's gap
/// of extension classes 101-105) for an operation that ended because a process failed.
pub const ERR_PROC_FAILED: c_int = 101;
/// `MPI_ERR_ERRHANDLER` does not exist in MPI; bad error handlers are `MPI_ERR_ARG`.
pub const ERR_ERRHANDLER: c_int = ERR_ARG;

/// The highest class MPICH 4.0 defines (`MPI_T_ERR_NOT_SUPPORTED`).
const LAST_CLASS: c_int = 78;

/// MPICH's extension classes (`MPIX_ERR_PROC_FAILED` ... `MPIX_ERR_NOREQ`). Codes may carry
/// them; `MPI_Add_error_code` does not take them, because an added code's low bits above
/// [`LAST_CLASS`] name a class the program added.
const MPIX_CLASSES: std::ops::RangeInclusive<c_int> = 101..=105;

/// Messages of the most recent errors kept for `MPI_Error_string`.
pub const KEPT_MESSAGES: usize = 256;

/// What an error raised by an MPI call says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorInfo {
    /// The MPI error class.
    pub class: c_int,
    /// What went wrong and how to fix it (without the function name, which the caller adds).
    pub msg: String,
    /// The communicator whose error handler sees the error (`None`: the call's own).
    pub comm: Option<c_int>,
    /// The error code to report as is (`MPI_Comm_call_errhandler`'s); `None`: a new code
    /// of `class` carrying `msg`.
    pub code: Option<c_int>,
}

/// An error raised by an MPI call. Boxed, so that a call's `Result<(), MpiError>` is one
/// word on the success path every call takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MpiError(Box<ErrorInfo>);

impl std::ops::Deref for MpiError {
    type Target = ErrorInfo;
    fn deref(&self) -> &ErrorInfo {
        &self.0
    }
}

impl MpiError {
    /// An error of `class` described by `msg`.
    pub fn new(class: c_int, msg: impl Into<String>) -> Self {
        MpiError(Box::new(ErrorInfo {
            class,
            msg: msg.into(),
            comm: None,
            code: None,
        }))
    }

    /// The error the program names by `code` (a class or a code it got or added),
    /// reported with that very code.
    pub fn of_code(code: c_int) -> Self {
        let class = class_of(code).unwrap_or(ERR_UNKNOWN);
        let msg = string_of(code).unwrap_or_else(|| class_text(class).to_string());
        let mut e = MpiError::new(class, msg);
        e.0.code = Some(code);
        e
    }

    /// The same error, reported on communicator `comm`'s handler.
    pub fn on(mut self, comm: c_int) -> Self {
        self.0.comm.get_or_insert(comm);
        self
    }
}

/// Shorthand for a result of an MPI call body.
pub type MpiResult<T> = Result<T, MpiError>;

/// Builds an [`MpiError`] with `format!` arguments.
#[macro_export]
macro_rules! mpi_err {
    ($class:expr, $($fmt:tt)*) => {
        $crate::error::MpiError::new($class, format!($($fmt)*))
    };
}

struct Kept {
    next: u32,
    messages: VecDeque<(u32, String)>,
}

static KEPT: Mutex<Kept> = Mutex::new(Kept {
    next: 1,
    messages: VecDeque::new(),
});

/// Numbers `message` and returns the error code for it (`class` in the low 7 bits).
pub fn code_for(class: c_int, message: String) -> c_int {
    let mut kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
    let n = kept.next;
    // Codes stay below MPI_ERR_LASTCODE (2^30 - 1): the number wraps at 2^23.
    kept.next = if n >= (1 << 23) - 1 { 1 } else { n + 1 };
    if kept.messages.len() == KEPT_MESSAGES {
        kept.messages.pop_front();
    }
    kept.messages.push_back((n, message));
    class | ((n as c_int) << 7)
}

/// The bit of the classes and codes the program added (`MPI_Add_error_class`,
/// `MPI_Add_error_code`): they lie above `MPI_ERR_LASTCODE`, as MPI asks of user classes.
pub const DYNAMIC: c_int = 0x4000_0000;

/// The classes and codes the program added, and the strings it gave them.
struct UserErrors {
    /// Classes added so far (user class `k` has low bits `LAST_CLASS + 1 + k`).
    classes: c_int,
    /// Codes added so far, per low-bit class number.
    codes: c_int,
    /// Strings of user classes and codes (`MPI_Add_error_string`).
    strings: std::collections::BTreeMap<c_int, String>,
    /// Every code added (`MPI_Add_error_code`).
    issued: std::collections::BTreeSet<c_int>,
}

static USER: Mutex<UserErrors> = Mutex::new(UserErrors {
    classes: 0,
    codes: 0,
    strings: std::collections::BTreeMap::new(),
    issued: std::collections::BTreeSet::new(),
});

fn user() -> std::sync::MutexGuard<'static, UserErrors> {
    USER.lock().unwrap_or_else(|p| p.into_inner())
}

/// `MPI_Add_error_class`: a new class (numbered above `MPI_ERR_LASTCODE`).
pub fn add_class() -> MpiResult<c_int> {
    let mut u = user();
    let low = LAST_CLASS + 1 + u.classes;
    if low > 0x7f {
        return Err(MpiError::new(
            ERR_OTHER,
            format!("at most {} error classes can be added", 0x7f - LAST_CLASS),
        ));
    }
    u.classes += 1;
    Ok(DYNAMIC | low)
}

/// `MPI_Add_error_code`: a new code of `class` (predefined or added).
pub fn add_code(class: c_int) -> MpiResult<c_int> {
    let low = class & 0x7f;
    let known = (class & DYNAMIC == 0 && (0..=LAST_CLASS).contains(&class))
        || (class & !0x7f == DYNAMIC && low > LAST_CLASS && low <= LAST_CLASS + user().classes);
    if !known {
        return Err(MpiError::new(
            ERR_ARG,
            format!("{class:#x} is not an error class (predefined, or from MPI_Add_error_class)"),
        ));
    }
    let mut u = user();
    u.codes += 1;
    if u.codes >= 1 << 23 {
        return Err(MpiError::new(ERR_OTHER, "too many error codes were added"));
    }
    let code = DYNAMIC | (u.codes << 7) | low;
    u.issued.insert(code);
    Ok(code)
}

/// `MPI_Add_error_string`: the string of an added class or code.
pub fn add_string(code: c_int, s: String) -> MpiResult<()> {
    if code & DYNAMIC == 0 {
        return Err(MpiError::new(
            ERR_ARG,
            format!("{code} is a predefined error class or code; only added ones take strings"),
        ));
    }
    if class_of(code).is_none() {
        return Err(MpiError::new(ERR_ARG, format!("{code:#x} was not added")));
    }
    user().strings.insert(code, s);
    Ok(())
}

/// The class of an error code (`MPI_ERR_ARG` for values that are no error code at all).
pub fn class_of(code: c_int) -> Option<c_int> {
    if code < 0 {
        return None;
    }
    if code & DYNAMIC != 0 {
        let low = code & 0x7f;
        let u = user();
        if code >> 7 != DYNAMIC >> 7 && !u.issued.contains(&code) {
            return None;
        }
        return if low <= LAST_CLASS {
            Some(low)
        } else if low <= LAST_CLASS + u.classes {
            Some(DYNAMIC | low)
        } else {
            None
        };
    }
    let class = code & 0x7f;
    (class <= LAST_CLASS || MPIX_CLASSES.contains(&class)).then_some(class)
}

/// The tool interface's classes (`MPI_T_ERR_*`): MPI_T calls return them bare.
fn is_tool_class(class: c_int) -> bool {
    matches!(class, 59..=74 | 78)
}

/// The last message of each tool-interface class (see [`keep_tool_message`]).
static TOOL_MESSAGES: Mutex<std::collections::BTreeMap<c_int, String>> =
    Mutex::new(std::collections::BTreeMap::new());

/// Keeps `msg` as the string of tool-interface error `class`: MPI_T calls return the bare
/// class (tools compare it with `MPI_T_ERR_*`), so `MPI_Error_string` of that class says
/// what the most recent such error in this process was about.
pub fn keep_tool_message(class: c_int, msg: String) {
    if is_tool_class(class) {
        TOOL_MESSAGES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(class, msg);
    }
}

/// The string of an error code: the occurrence's own message while it is kept, else the
/// class's description. A bare tool-interface class gives its last message.
pub fn string_of(code: c_int) -> Option<String> {
    let class = class_of(code)?;
    if code & DYNAMIC != 0 {
        return Some(user().strings.get(&code).cloned().unwrap_or_default());
    }
    if code == class && is_tool_class(class) {
        if let Some(m) = TOOL_MESSAGES
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&class)
        {
            return Some(m.clone());
        }
    }
    let n = (code >> 7) as u32;
    if n != 0 {
        let kept = KEPT.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, m)) = kept.messages.iter().find(|(k, _)| *k == n) {
            return Some(m.clone());
        }
    }
    Some(class_text(class).to_string())
}

/// A description of each error class.
pub fn class_text(class: c_int) -> &'static str {
    match class {
        0 => "no error",
        1 => "invalid buffer pointer",
        2 => "invalid count argument",
        3 => "invalid datatype",
        4 => "invalid tag",
        5 => "invalid communicator",
        6 => "invalid rank",
        7 => "invalid root",
        8 => "invalid group",
        9 => "invalid reduction operation",
        10 => "invalid topology",
        11 => "invalid dimension argument",
        12 => "invalid argument",
        13 => "unknown error",
        14 => "message truncated: the receive buffer is smaller than the message",
        15 => "other error",
        16 => "internal error of the MPI library",
        17 => "error code is in the status",
        18 => "request pending",
        19 => "invalid request",
        20 => "permission denied",
        21 => "invalid file access mode",
        22 => "invalid file name",
        23 => "data conversion error",
        24 => "data representation already registered",
        25 => "file exists",
        26 => "file in use",
        27 => "invalid file handle",
        28 => "invalid info object",
        29 => "invalid info key",
        30 => "invalid info value",
        31 => "info key not defined",
        32 => "I/O error",
        33 => "name not published",
        34 => "out of memory",
        35 => "collective arguments differ between processes",
        36 => "no space left",
        37 => "no such file",
        38 => "invalid port",
        39 => "quota exceeded",
        40 => "read-only file or file system",
        41 => "service name not published",
        42 => "could not spawn processes",
        43 => "unsupported data representation",
        44 => "operation not supported by this MPI library",
        45 => "invalid window",
        46 => "invalid base address",
        47 => "invalid lock type",
        48 => "invalid attribute key",
        49 => "conflicting accesses to a window",
        50 => "wrong synchronization of one-sided calls",
        51 => "invalid size",
        52 => "invalid displacement",
        53 => "invalid assertion",
        55 => "target memory outside the window",
        56 => "memory cannot be attached",
        57 => "memory cannot be shared",
        58 => "wrong window flavor",
        75 => "invalid session",
        76 => "a process aborted",
        77 => "value too large to store",
        59 => "tool interface: out of memory",
        60 => "tool interface not initialized (call MPI_T_init_thread first)",
        61 => "tool interface cannot be initialized now",
        62 => "tool interface: index out of range",
        63 => "tool interface: item index out of range",
        64 => "tool interface: invalid handle",
        65 => "tool interface: no more handles",
        66 => "tool interface: no more sessions",
        67 => "tool interface: invalid session",
        68 => "control variable cannot be set now",
        69 => "control variable can never be set",
        70 => "performance variable cannot be started or stopped",
        71 => "performance variable cannot be written or reset",
        72 => "performance variable cannot be read and reset atomically",
        73 => "tool interface: no variable or category of that name",
        74 => "tool interface: invalid use or invalid value",
        78 => "tool interface: not supported",
        101 => "a process failed",
        102 => "a process failed, and the operation may still match a message of another one",
        103 => "the communicator was revoked",
        104 => "the operation could not be issued now",
        105 => "no request could be allocated",
        _ => "unknown error class",
    }
}

/// Converts an engine error into an MPI error of `class` (`MPI_ERR_OTHER` for transport
/// and runtime failures, which are not the caller's fault; `MPIX_ERR_PROC_FAILED` for an
/// operation that needs a failed process).
pub fn pml(class: c_int) -> impl Fn(kestrel_pml::PmlError) -> MpiError {
    move |e| {
        let c = match &e {
            kestrel_pml::PmlError::Invalid(_) => class,
            kestrel_pml::PmlError::Dpm(d)
                if d.mpi_class() == kestrel_runtime::dpm::MpiClass::ProcFailed =>
            {
                ERR_PROC_FAILED
            }
            _ => ERR_OTHER,
        };
        MpiError::new(c, e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // One test, because the kept messages are process-wide and tests run in parallel.
    #[test]
    fn codes_carry_their_class_and_message_until_it_is_dropped() {
        let code = code_for(ERR_RANK, "MPI_Send: rank 7 is outside".into());
        assert_ne!(code, ERR_RANK);
        assert_eq!(class_of(code), Some(ERR_RANK));
        assert_eq!(string_of(code).unwrap(), "MPI_Send: rank 7 is outside");
        assert_eq!(string_of(ERR_RANK).unwrap(), "invalid rank");
        assert_eq!(class_of(-5), None);
        assert_eq!(class_of(0x7f), None);
        // MPICH's extension classes are classes: MPI_Error_class and MPI_Error_string know
        // them; the numbers around them are no classes.
        let failed = code_for(ERR_PROC_FAILED, "rank 1 ended".into());
        assert_eq!(class_of(failed), Some(ERR_PROC_FAILED));
        assert_eq!(string_of(failed).unwrap(), "rank 1 ended");
        assert_eq!(string_of(ERR_PROC_FAILED).unwrap(), "a process failed");
        assert_eq!(class_of(100), None);
        assert_eq!(class_of(106), None);
        let first = code_for(ERR_TAG, "first".into());
        for _ in 0..KEPT_MESSAGES {
            code_for(ERR_OTHER, "filler".into());
        }
        assert_eq!(string_of(first).unwrap(), "invalid tag");
    }
}
