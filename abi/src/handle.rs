//! MPICH's handle encoding: every MPI object is named by a 32-bit C `int`.
//!
//! This module owns the bit layout (kind, object type, index), the values of the
//! predefined handles, and the ranges Kestrel uses for the objects it creates. It never
//! looks handles up in tables: that is [`crate::state`]'s job, which uses [`decode`] here to
//! reject a handle of the wrong object type before indexing anything.
//!
//! | bits | meaning |
//! |---|---|
//! | 31–30 | kind: 0 null, 1 predefined, 2 direct, 3 indirect |
//! | 29–26 | object type ([`Obj`]) |
//! | 25–0 | index (predefined datatypes: size in bytes in bits 15–8, number in bits 7–0) |
//!
//! Objects Kestrel creates are `direct` handles whose index is a slot of the object's
//! table, except datatypes and matched messages: MPICH's value/index pair datatypes already
//! occupy direct datatype handles 0–4, and messages share their object type with requests,
//! so those two use the `indirect` kind.

use std::os::raw::c_int;

/// The kind field (bits 31–30).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A null handle (`MPI_COMM_NULL` and friends).
    Null,
    /// A predefined object (`MPI_COMM_WORLD`, `MPI_INT`, `MPI_SUM`, ...).
    Builtin,
    /// An object in a table slot.
    Direct,
    /// An object in a second table (datatypes Kestrel builds, matched messages).
    Indirect,
}

/// The object-type field (bits 29–26).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u32)]
pub enum Obj {
    /// `MPI_Comm`.
    Comm = 1,
    /// `MPI_Group`.
    Group = 2,
    /// `MPI_Datatype`.
    Datatype = 3,
    /// `MPI_Errhandler`.
    Errhandler = 5,
    /// `MPI_Op`.
    Op = 6,
    /// `MPI_Info`.
    Info = 7,
    /// `MPI_Win`.
    Win = 8,
    /// Attribute keys (`MPI_TAG_UB`, keyvals).
    Keyval = 9,
    /// `MPI_Request` and `MPI_Message`.
    Request = 0xB,
    /// `MPI_Session` (MPI-4).
    Session = 0xE,
}

const INDEX_MASK: u32 = 0x03ff_ffff;

/// Builds a handle.
pub const fn make(kind: Kind, obj: Obj, index: u32) -> c_int {
    let k = match kind {
        Kind::Null => 0u32,
        Kind::Builtin => 1,
        Kind::Direct => 2,
        Kind::Indirect => 3,
    };
    ((k << 30) | ((obj as u32) << 26) | (index & INDEX_MASK)) as c_int
}

/// Splits a handle of object type `obj` into its kind and index; `None` when the handle is
/// of another object type (a datatype passed as a communicator, garbage).
pub fn decode(h: c_int, obj: Obj) -> Option<(Kind, u32)> {
    let u = h as u32;
    if (u >> 26) & 0xf != obj as u32 {
        return None;
    }
    let kind = match u >> 30 {
        0 => Kind::Null,
        1 => Kind::Builtin,
        2 => Kind::Direct,
        _ => Kind::Indirect,
    };
    Some((kind, u & INDEX_MASK))
}

/// `MPI_COMM_NULL`.
pub const COMM_NULL: c_int = make(Kind::Null, Obj::Comm, 0);
/// `MPI_WIN_NULL`.
pub const WIN_NULL: c_int = make(Kind::Null, Obj::Win, 0);
/// `MPI_COMM_WORLD`.
pub const COMM_WORLD: c_int = make(Kind::Builtin, Obj::Comm, 0);
/// `MPI_COMM_SELF`.
pub const COMM_SELF: c_int = make(Kind::Builtin, Obj::Comm, 1);
/// `MPI_GROUP_NULL`.
pub const GROUP_NULL: c_int = make(Kind::Null, Obj::Group, 0);
/// `MPI_GROUP_EMPTY`.
pub const GROUP_EMPTY: c_int = make(Kind::Builtin, Obj::Group, 0);
/// `MPI_DATATYPE_NULL`.
pub const DATATYPE_NULL: c_int = make(Kind::Null, Obj::Datatype, 0);
/// `MPI_REQUEST_NULL` (also `MPI_MESSAGE_NULL`).
pub const REQUEST_NULL: c_int = make(Kind::Null, Obj::Request, 0);
/// The request of every send that completed as it started (an eager send whose data left
/// at once): one permanent record in request slot [`COMPLETED_SEND_SLOT`], so such a send
/// stores and frees nothing, and completing it is one comparison. MPICH hands out shared
/// built-in requests for such sends too; MPI does not ask distinct sends to have distinct
/// handles.
pub const COMPLETED_SEND: c_int = make(Kind::Direct, Obj::Request, COMPLETED_SEND_SLOT);
/// The request table slot of [`COMPLETED_SEND`], reserved at initialization.
pub const COMPLETED_SEND_SLOT: u32 = 0;
/// `MPI_MESSAGE_NO_PROC`: the message a matched probe of `MPI_PROC_NULL` returns.
pub const MESSAGE_NO_PROC: c_int = make(Kind::Builtin, Obj::Request, 0);
/// `MPI_OP_NULL`.
pub const OP_NULL: c_int = make(Kind::Null, Obj::Op, 0);
/// `MPI_SESSION_NULL`.
pub const SESSION_NULL: c_int = make(Kind::Null, Obj::Session, 0);
/// `MPI_ERRHANDLER_NULL`.
pub const ERRHANDLER_NULL: c_int = make(Kind::Null, Obj::Errhandler, 0);
/// `MPI_ERRORS_ARE_FATAL`.
pub const ERRORS_ARE_FATAL: c_int = make(Kind::Builtin, Obj::Errhandler, 0);
/// `MPI_ERRORS_RETURN`.
pub const ERRORS_RETURN: c_int = make(Kind::Builtin, Obj::Errhandler, 1);
/// `MPI_ERRORS_ABORT` (MPI-4; Kestrel treats it like `MPI_ERRORS_ARE_FATAL`).
pub const ERRORS_ABORT: c_int = make(Kind::Builtin, Obj::Errhandler, 3);
/// `MPI_INFO_NULL`.
pub const INFO_NULL: c_int = make(Kind::Null, Obj::Info, 0);
/// `MPI_INFO_ENV`.
pub const INFO_ENV: c_int = make(Kind::Builtin, Obj::Info, 1);
/// `MPI_KEYVAL_INVALID`.
pub const KEYVAL_INVALID: c_int = make(Kind::Null, Obj::Keyval, 0);

/// Predefined attribute keys: builtin keyvals for communicators (`0x1` in bits 25–22), odd
/// indices for C (Fortran's are one higher).
pub mod keyval {
    use std::os::raw::c_int;
    /// `MPI_TAG_UB`.
    pub const TAG_UB: c_int = 0x6440_0001;
    /// `MPI_HOST`.
    pub const HOST: c_int = 0x6440_0003;
    /// `MPI_IO`.
    pub const IO: c_int = 0x6440_0005;
    /// `MPI_WTIME_IS_GLOBAL`.
    pub const WTIME_IS_GLOBAL: c_int = 0x6440_0007;
    /// `MPI_UNIVERSE_SIZE`.
    pub const UNIVERSE_SIZE: c_int = 0x6440_0009;
    /// `MPI_LASTUSEDCODE`.
    pub const LASTUSEDCODE: c_int = 0x6440_000b;
    /// `MPI_APPNUM`.
    pub const APPNUM: c_int = 0x6440_000d;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn predefined_handles_have_mpich_values() {
        assert_eq!(COMM_WORLD, 0x4400_0000);
        assert_eq!(COMM_SELF, 0x4400_0001);
        assert_eq!(COMM_NULL, 0x0400_0000);
        assert_eq!(GROUP_EMPTY, 0x4800_0000);
        assert_eq!(REQUEST_NULL, 0x2c00_0000);
        assert_eq!(MESSAGE_NO_PROC, 0x6c00_0000);
        assert_eq!(ERRORS_RETURN, 0x5400_0001);
        assert_eq!(INFO_ENV, 0x5c00_0001);
        assert_eq!(KEYVAL_INVALID, 0x2400_0000);
        assert_eq!(make(Kind::Builtin, Obj::Op, 3), 0x5800_0003);
    }

    #[test]
    fn decode_rejects_other_object_types() {
        assert_eq!(decode(COMM_WORLD, Obj::Comm), Some((Kind::Builtin, 0)));
        assert_eq!(decode(COMM_WORLD, Obj::Group), None);
        assert_eq!(decode(0x4c00_0405, Obj::Comm), None);
        let h = make(Kind::Direct, Obj::Request, 77);
        assert_eq!(decode(h, Obj::Request), Some((Kind::Direct, 77)));
        assert_eq!(decode(0, Obj::Comm), None);
        assert_eq!(decode(-1, Obj::Comm), None);
    }
}
