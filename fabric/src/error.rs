//! The fabric wrapper's errors: [`FabricError`] (a libfabric call or completion failed, with
//! the provider, interface and a fix), [`SendError`], and the text helpers they use.
//!
//! This module owns how failures are worded. It must never retry or recover: callers decide.

use std::ffi::CStr;
use std::fmt;

use kestrel_libfabric_sys as sys;

/// A libfabric call failed, or a completion reported an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricError {
    /// The transport that made the call (`usnic`, `ofi`): errors name it first.
    pub component: &'static str,
    /// The libfabric call (or completion kind) that failed, e.g. `fi_endpoint`.
    pub call: &'static str,
    /// Provider name (`udp`, `usnic`), empty when no provider was involved yet.
    pub provider: Box<str>,
    /// Interface (libfabric domain, the netdev for `udp`), empty when not known.
    pub interface: Box<str>,
    /// The positive libfabric error number (`FI_E*`), 0 for checks made by this wrapper.
    pub errno: i32,
    /// `fi_strerror` text, plus the provider's own text for completion errors.
    pub message: String,
    /// What the user can do about it, when something helps.
    pub fix: Option<String>,
}

impl FabricError {
    pub(super) fn from_code(call: &'static str, site: &Site, code: i64) -> Self {
        let errno = code.unsigned_abs().min(i32::MAX as u64) as i32;
        FabricError {
            component: site.owner.component,
            call,
            provider: site.provider.as_str().into(),
            interface: site.interface.as_str().into(),
            errno,
            message: strerror(errno),
            fix: None,
        }
    }

    pub(super) fn local(call: &'static str, site: &Site, message: String) -> Self {
        FabricError {
            component: site.owner.component,
            call,
            provider: site.provider.as_str().into(),
            interface: site.interface.as_str().into(),
            errno: 0,
            message,
            fix: None,
        }
    }

    pub(super) fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }

    /// True for `FI_ENODATA`: `fi_getinfo` found nothing matching the request.
    pub fn is_no_data(&self) -> bool {
        self.errno == sys::FI_ENODATA as i32
    }
}

impl fmt::Display for FabricError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {} failed", self.component, self.call)?;
        match (self.interface.is_empty(), self.provider.is_empty()) {
            (false, false) => write!(
                f,
                " on interface {} (provider {})",
                self.interface, self.provider
            )?,
            (true, false) => write!(f, " (provider {})", self.provider)?,
            (false, true) => write!(f, " on interface {}", self.interface)?,
            (true, true) => {}
        }
        write!(f, ": {}", self.message)?;
        if self.errno != 0 {
            write!(f, " (libfabric error {})", self.errno)?;
        }
        if let Some(fix) = &self.fix {
            write!(f, "; {fix}")?;
        }
        Ok(())
    }
}

impl std::error::Error for FabricError {}

/// Why [`crate::MsgEndpoint::send_with`] did not take a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Every send slot is in flight: call [`crate::MsgEndpoint::poll`] to reap completions, then retry.
    /// The fill closure was not called.
    Full,
    /// The fill closure returned a length larger than the slice it was given.
    Oversized {
        /// The length the closure returned.
        len: usize,
        /// The slice length (`max_datagram`).
        max: usize,
    },
    /// The provider rejected the send; the datagram is dropped and its slot freed.
    Fabric(FabricError),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Full => write!(
                f,
                "libfabric endpoint: every send slot is in flight; poll the endpoint for \
                 completions before sending more"
            ),
            SendError::Oversized { len, max } => write!(
                f,
                "libfabric endpoint: a message of {len} bytes was written into a {max}-byte \
                 send slot; the caller must fragment to max_datagram"
            ),
            SendError::Fabric(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for SendError {}

impl From<FabricError> for SendError {
    fn from(e: FabricError) -> Self {
        SendError::Fabric(e)
    }
}

/// Where an error happened, for messages.
#[derive(Debug, Clone, Default)]
pub(super) struct Site {
    pub(super) owner: Owner,
    pub(super) provider: String,
    pub(super) interface: String,
}

/// The transport an interface or endpoint belongs to, for the wording of its errors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner {
    /// The component name errors start with (`usnic`, `ofi`).
    pub component: &'static str,
    /// The environment variable that chooses its provider (`KESTREL_USNIC_PROVIDER`), quoted
    /// in fixes.
    pub provider_variable: &'static str,
}

impl Default for Owner {
    fn default() -> Self {
        Owner {
            component: "libfabric",
            provider_variable: "the transport's provider parameter",
        }
    }
}

pub(super) fn strerror(errno: i32) -> String {
    // SAFETY: fi_strerror accepts any integer and returns a pointer to a static, NUL-terminated
    // string (or null, handled below); the string is copied before anything else runs.
    let text = unsafe { sys::fi_strerror(errno) };
    if text.is_null() {
        return format!("error {errno}");
    }
    // SAFETY: non-null and NUL-terminated per the fi_strerror contract; read only here.
    unsafe { CStr::from_ptr(text) }
        .to_string_lossy()
        .into_owned()
}

/// Copies a C string owned by libfabric, or "" for null.
///
/// # Safety
/// `p` must be null or point to a NUL-terminated string that stays valid during the call.
pub(super) unsafe fn c_string(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller guarantees a valid NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}
