//! libfabric objects (`struct fid` and the types that embed one) owned by the wrapper and
//! closed with `fi_close` exactly once, on drop.
//!
//! This module owns the closing. It must never decide the order objects close in: the owner
//! orders its fields so that dependents close first (see `MsgEndpoint`).

use std::ptr::{self, NonNull};

use kestrel_libfabric_sys as sys;

use super::error::{strerror, FabricError, Site};

/// A libfabric object closed with `fi_close` on drop.
pub(super) struct Fid<T: HasFid> {
    ptr: NonNull<T>,
    what: &'static str,
    /// Its owner gave it up with operations pending: a busy close is expected.
    busy_expected: bool,
}

/// libfabric object types, each starting with an embedded `struct fid`.
pub(super) trait HasFid {
    /// # Safety
    /// `p` must point to a live object of this type.
    unsafe fn fid_of(p: *mut Self) -> *mut sys::fid;
}

macro_rules! has_fid {
    ($($t:ty),*) => {$(
        impl HasFid for $t {
            unsafe fn fid_of(p: *mut Self) -> *mut sys::fid {
                // SAFETY: the caller guarantees `p` is live; taking a field address reads nothing.
                unsafe { ptr::addr_of_mut!((*p).fid) }
            }
        }
    )*};
}
has_fid!(
    sys::fid_fabric,
    sys::fid_domain,
    sys::fid_cq,
    sys::fid_av,
    sys::fid_ep,
    sys::fid_mr
);

impl<T: HasFid> Fid<T> {
    /// Wraps the object an `fi_*_open` call wrote into `raw`, or reports that call's failure.
    pub(super) fn adopt(
        what: &'static str,
        site: &Site,
        ret: i32,
        raw: *mut T,
    ) -> Result<Self, FabricError> {
        if ret != 0 {
            return Err(FabricError::from_code(what, site, ret.into()));
        }
        NonNull::new(raw)
            .map(|ptr| Fid {
                ptr,
                what,
                busy_expected: false,
            })
            .ok_or_else(|| FabricError::local(what, site, "returned no object".into()))
    }

    /// The owner gives this object up with operations still pending (sends stuck on a dead
    /// link): `fi_close` may answer busy, which is then logged at debug level, not as a
    /// warning.
    pub(super) fn expect_busy(&mut self) {
        self.busy_expected = true;
    }

    pub(super) fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    pub(super) fn fid(&self) -> *mut sys::fid {
        // SAFETY: the object is live until this wrapper drops.
        unsafe { T::fid_of(self.ptr.as_ptr()) }
    }
}

impl<T: HasFid> Drop for Fid<T> {
    fn drop(&mut self) {
        // SAFETY: the object is live and closed exactly once, here; the owning struct orders its
        // fields so that objects depending on this one are closed first.
        let ret = unsafe { sys::fi_close(self.fid()) };
        if ret == -libc::EBUSY && self.busy_expected {
            tracing::debug!(
                target: "fabric",
                object = self.what,
                "fi_close found operations pending on an abandoned endpoint (expected after a link failure)"
            );
        } else if ret != 0 {
            tracing::warn!(
                target: "fabric",
                object = self.what,
                error = %strerror(-ret),
                "fi_close failed; the provider may leak this object"
            );
        }
    }
}
