//! The record of a window in the library's tables; the engine owns the window's protocol
//! state and the memory `MPI_Win_allocate` takes. It imports nothing of the library (the
//! state's table holds these records; [`crate::win`] gives them meaning).

use std::os::raw::c_int;

/// `MPI_WIN_FLAVOR_CREATE`.
pub const FLAVOR_CREATE: c_int = 1;
/// `MPI_WIN_FLAVOR_ALLOCATE`.
pub const FLAVOR_ALLOCATE: c_int = 2;
/// `MPI_WIN_FLAVOR_DYNAMIC`.
pub const FLAVOR_DYNAMIC: c_int = 3;
/// `MPI_WIN_FLAVOR_SHARED`.
pub const FLAVOR_SHARED: c_int = 4;
/// `MPI_WIN_UNIFIED`: the window's memory is the one copy operations and loads see.
pub const MODEL_UNIFIED: c_int = 2;
/// `MPI_LOCK_EXCLUSIVE`.
pub const LOCK_EXCLUSIVE: c_int = 234;
/// `MPI_LOCK_SHARED`.
pub const LOCK_SHARED: c_int = 235;
/// `MPI_PROC_NULL`.
pub const PROC_NULL: c_int = -1;

/// `MPI_WIN_BASE` and the other predefined window attribute keys.
pub const ATTR_BASE: c_int = 0x6600_0001;
/// `MPI_WIN_SIZE`.
pub const ATTR_SIZE: c_int = 0x6600_0003;
/// `MPI_WIN_DISP_UNIT`.
pub const ATTR_DISP_UNIT: c_int = 0x6600_0005;
/// `MPI_WIN_CREATE_FLAVOR`.
pub const ATTR_CREATE_FLAVOR: c_int = 0x6600_0007;
/// `MPI_WIN_MODEL`.
pub const ATTR_MODEL: c_int = 0x6600_0009;

/// The values the predefined attributes point at (boxed: the record moves, they must not).
#[derive(Debug)]
pub struct AttrValues {
    /// `MPI_WIN_SIZE`.
    pub size: i64,
    /// `MPI_WIN_DISP_UNIT`.
    pub disp_unit: c_int,
    /// `MPI_WIN_CREATE_FLAVOR`.
    pub flavor: c_int,
    /// `MPI_WIN_MODEL`.
    pub model: c_int,
}

/// A window of this process.
#[derive(Debug)]
pub struct WinRec {
    /// The engine's window id.
    pub id: u16,
    /// The communicator's members (job ranks), in rank order.
    pub members: Vec<u32>,
    /// This process's base address (0 for a dynamic window).
    pub base: usize,
    /// Predefined attribute values.
    pub values: Box<AttrValues>,
    /// Where the members on this node keep the window's memory, for the direct operations
    /// of a window whose memory is shared on the node (`None` for the other flavors).
    pub direct: Option<kestrel_pml::rma::DirectView>,
    /// `MPI_Win_set_name`.
    pub name: String,
    /// Its error handler (a handle).
    pub errhandler: c_int,
    /// User attributes by keyval, in the order set.
    pub attrs: Vec<(c_int, usize)>,
    /// Hints (`MPI_Win_set_info` and the creation's info).
    pub info: Vec<(String, String)>,
}

impl WinRec {
    /// Whether offsets name addresses (`MPI_Win_create_dynamic`).
    pub fn dynamic(&self) -> bool {
        self.values.flavor == FLAVOR_DYNAMIC
    }
}
