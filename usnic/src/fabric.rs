//! The safe wrapper over libfabric datagram endpoints (`FI_EP_DGRAM`, `FI_MSG`).
//!
//! This module owns every libfabric object the transport uses (the `fi_info` of an interface,
//! fabric, domain, completion queue, address vector, memory registrations, endpoint), closes
//! them in dependency order on drop, and owns the pre-allocated send and receive buffer pools
//! the provider reads from and writes into. It is, with `kestrel-libfabric-sys`, the only place
//! allowed to use `unsafe` for libfabric; every block says why it is sound.
//!
//! It must never interpret datagram contents: received bytes are handed up exactly as they
//! arrived (a stranger's garbage included); the reliability layer above decodes and rejects.
//!
//! Provider differences are taken from the `fi_info` the provider returns, not from its name:
//! * `FI_MSG_PREFIX` in `mode` (usnic): every send and receive buffer starts with
//!   `msg_prefix_size` bytes owned by the provider; received lengths include them.
//! * `FI_MR_LOCAL` in `domain_attr.mr_mode` (usnic): the buffer pools are registered once and
//!   their descriptors passed with every operation.
//! * `FI_CONTEXT`/`FI_CONTEXT2` in `mode`: the provider may write into the operation context, so
//!   each slot has its own `fi_context2`, and a completion is mapped back to its slot by the
//!   context's position in that array (the context is never dereferenced).
//!
//! The `udp` provider (kernel UDP, anywhere) needs none of these, caps a datagram at 1472 bytes,
//! and makes progress inside `fi_cq_read` (one received datagram per call).

use std::alloc::{self, Layout};
use std::collections::VecDeque;
use std::ffi::{c_void, CStr, CString};
use std::fmt;
use std::mem::{size_of, MaybeUninit};
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ptr::{self, NonNull};

use kestrel_libfabric_sys as sys;

/// The libfabric API version Kestrel is written against (the oldest it accepts at build time).
const API_VERSION: u32 = sys::FI_VERSION(1, 11);

/// Mode bits the wrapper knows how to honour; offered in the `fi_getinfo` hints.
const SUPPORTED_MODE: u64 = sys::FI_MSG_PREFIX | sys::FI_CONTEXT | sys::FI_CONTEXT2;

/// Memory-registration requirements the wrapper can meet: it registers its pools when asked
/// (`FI_MR_LOCAL`), they are ordinary allocations (`FI_MR_ALLOCATED`), and it never does RMA, so
/// virtual-address and provider-key modes cost nothing.
const SUPPORTED_MR_MODE: i32 =
    (sys::FI_MR_LOCAL | sys::FI_MR_ALLOCATED | sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY) as i32;

/// IPv4 header (without options) plus UDP header: what a datagram loses to the wire.
const IPV4_UDP_HEADERS: usize = 20 + 8;

/// Initial address-vector size: a hint, the providers' AVs grow past it.
const AV_SIZE_HINT: usize = 256;

/// Completions taken from the CQ per `fi_cq_read` call.
const CQ_BATCH: usize = 16;

/// Buffer slots start on cache-line boundaries.
const SLOT_ALIGN: usize = 64;

/// The pools are page aligned, which registration on some NICs prefers.
const POOL_ALIGN: usize = 4096;

/// A libfabric call failed, or a completion reported an error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FabricError {
    /// The libfabric call (or completion kind) that failed, e.g. `fi_endpoint`.
    pub call: &'static str,
    /// Provider name (`udp`, `usnic`), empty when no provider was involved yet.
    pub provider: String,
    /// Interface (libfabric domain, the netdev for `udp`), empty when not known.
    pub interface: String,
    /// The positive libfabric error number (`FI_E*`), 0 for checks made by this wrapper.
    pub errno: i32,
    /// `fi_strerror` text, plus the provider's own text for completion errors.
    pub message: String,
    /// What the user can do about it, when something helps.
    pub fix: Option<String>,
}

impl FabricError {
    fn from_code(call: &'static str, site: &Site, code: i64) -> Self {
        let errno = code.unsigned_abs().min(i32::MAX as u64) as i32;
        FabricError {
            call,
            provider: site.provider.clone(),
            interface: site.interface.clone(),
            errno,
            message: strerror(errno),
            fix: None,
        }
    }

    fn local(call: &'static str, site: &Site, message: String) -> Self {
        FabricError {
            call,
            provider: site.provider.clone(),
            interface: site.interface.clone(),
            errno: 0,
            message,
            fix: None,
        }
    }

    fn with_fix(mut self, fix: impl Into<String>) -> Self {
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
        write!(f, "usnic: {} failed", self.call)?;
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

/// Why [`DgramEndpoint::send_with`] did not take a datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SendError {
    /// Every send slot is in flight: call [`DgramEndpoint::poll`] to reap completions, then retry.
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
                "usnic: every send slot of the endpoint is in flight; poll the endpoint for \
                 completions before sending more"
            ),
            SendError::Oversized { len, max } => write!(
                f,
                "usnic: a datagram of {len} bytes was written into a {max}-byte send slot; \
                 the caller must fragment to max_datagram"
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
struct Site {
    provider: String,
    interface: String,
}

fn strerror(errno: i32) -> String {
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
unsafe fn c_string(p: *const std::os::raw::c_char) -> String {
    if p.is_null() {
        String::new()
    } else {
        // SAFETY: the caller guarantees a valid NUL-terminated string.
        unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
    }
}

/// Decodes a `struct sockaddr_in` as libfabric hands it out (`FI_SOCKADDR_IN`): family in host
/// order, then port and address in network order. Returns `None` for anything else, so it is
/// safe to call on bytes from another process.
pub fn sockaddr_in_from_bytes(raw: &[u8]) -> Option<SocketAddrV4> {
    if raw.len() < size_of::<libc::sockaddr_in>() {
        return None;
    }
    let family = u16::from_ne_bytes([raw[0], raw[1]]);
    if i32::from(family) != libc::AF_INET {
        return None;
    }
    let port = u16::from_be_bytes([raw[2], raw[3]]);
    let ip = Ipv4Addr::new(raw[4], raw[5], raw[6], raw[7]);
    Some(SocketAddrV4::new(ip, port))
}

/// An owned `fi_info` list entry (a private copy made with `fi_dupinfo`).
struct OwnedInfo(NonNull<sys::fi_info>);

impl OwnedInfo {
    fn dup(info: *const sys::fi_info) -> Option<Self> {
        // SAFETY: `info` points to a live fi_info (an entry of a list we hold, or our own copy);
        // fi_dupinfo copies that single entry (its `next` becomes null) into new memory we own.
        NonNull::new(unsafe { sys::fi_dupinfo(info) }).map(OwnedInfo)
    }

    fn get(&self) -> &sys::fi_info {
        // SAFETY: the pointer came from fi_dupinfo, is non-null and lives until drop; the
        // wrapper never mutates it except through `&mut self` in `as_mut_ptr` users.
        unsafe { self.0.as_ref() }
    }

    fn as_mut_ptr(&mut self) -> *mut sys::fi_info {
        self.0.as_ptr()
    }
}

impl Drop for OwnedInfo {
    fn drop(&mut self) {
        // SAFETY: we own this copy; nothing else frees it.
        unsafe { sys::fi_freeinfo(self.0.as_ptr()) }
    }
}

// SAFETY: an fi_info is plain heap data with no thread affinity; OwnedInfo gives out only
// shared references (mutation needs `&mut self`), so moving or sharing it across threads is
// no different from a Box of plain data.
unsafe impl Send for OwnedInfo {}
// SAFETY: see Send: shared access is read-only.
unsafe impl Sync for OwnedInfo {}

/// One provider + domain + IPv4 address that can carry `FI_EP_DGRAM` traffic.
pub struct FabricInterface {
    info: OwnedInfo,
    provider: String,
    domain: String,
    fabric: String,
}

impl fmt::Debug for FabricInterface {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FabricInterface")
            .field("provider", &self.provider)
            .field("domain", &self.domain)
            .field("fabric", &self.fabric)
            .field("ipv4", &self.ipv4())
            .field("max_msg_size", &self.max_msg_size())
            .field("prefix_size", &self.prefix_size())
            .finish()
    }
}

impl FabricInterface {
    fn from_entry(entry: *const sys::fi_info) -> Option<Self> {
        let info = OwnedInfo::dup(entry)?;
        let i = info.get();
        if i.fabric_attr.is_null() || i.domain_attr.is_null() || i.ep_attr.is_null() {
            return None;
        }
        // SAFETY: fabric_attr and domain_attr were checked non-null and belong to our copy; their
        // name fields are null or NUL-terminated strings owned by the copy.
        let (provider, fabric, domain) = unsafe {
            (
                c_string((*i.fabric_attr).prov_name),
                c_string((*i.fabric_attr).name),
                c_string((*i.domain_attr).name),
            )
        };
        Some(FabricInterface {
            info,
            provider,
            domain,
            fabric,
        })
    }

    /// The provider name (`udp`, `usnic`, ...).
    pub fn provider(&self) -> &str {
        &self.provider
    }

    /// The libfabric domain: the netdev name for `udp` (`eth1`), the device for `usnic`
    /// (`usnic_0`).
    pub fn domain(&self) -> &str {
        &self.domain
    }

    /// The libfabric fabric name (the subnet in CIDR form for `udp` and `usnic`).
    pub fn fabric(&self) -> &str {
        &self.fabric
    }

    /// The interface's IPv4 address, when its address format is `FI_SOCKADDR_IN`.
    pub fn ipv4(&self) -> Option<Ipv4Addr> {
        let i = self.info.get();
        if i.addr_format != sys::FI_SOCKADDR_IN || i.src_addr.is_null() {
            return None;
        }
        let len = i.src_addrlen.min(size_of::<libc::sockaddr_in>());
        // SAFETY: src_addr is non-null and points to src_addrlen bytes owned by our fi_info copy;
        // we read at most that many.
        let raw = unsafe { std::slice::from_raw_parts(i.src_addr as *const u8, len) };
        sockaddr_in_from_bytes(raw).map(|a| *a.ip())
    }

    /// Largest message the provider accepts, excluding any prefix (1472 for `udp`).
    pub fn max_msg_size(&self) -> usize {
        // SAFETY: ep_attr was checked non-null at construction and belongs to our copy.
        unsafe { (*self.info.get().ep_attr).max_msg_size }
    }

    /// Bytes the provider needs in front of every buffer (`FI_MSG_PREFIX`), 0 when it asks for
    /// none.
    pub fn prefix_size(&self) -> usize {
        let i = self.info.get();
        if i.mode & sys::FI_MSG_PREFIX == 0 {
            return 0;
        }
        // SAFETY: ep_attr was checked non-null at construction and belongs to our copy.
        unsafe { (*i.ep_attr).msg_prefix_size }
    }

    /// The link MTU as libfabric reports it (`fid_nic` link attributes), when it does.
    fn nic_mtu(&self) -> Option<usize> {
        let i = self.info.get();
        if i.nic.is_null() {
            return None;
        }
        // SAFETY: nic is non-null and owned by our fi_info copy; link_attr is checked before use.
        let mtu = unsafe {
            let link = (*i.nic).link_attr;
            if link.is_null() {
                return None;
            }
            (*link).mtu
        };
        (mtu > 0).then_some(mtu)
    }

    /// The MTU of the link under this interface: libfabric's NIC attributes, else sysfs for
    /// the netdev that carries the interface's address.
    pub fn link_mtu(&self) -> Option<usize> {
        if let Some(mtu) = self.nic_mtu() {
            return Some(mtu);
        }
        let netdev = self.netdev()?;
        std::fs::read_to_string(format!("/sys/class/net/{netdev}/mtu"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// The kernel network interface carrying this interface's IPv4 address.
    pub fn netdev(&self) -> Option<String> {
        if std::path::Path::new("/sys/class/net")
            .join(&self.domain)
            .exists()
        {
            return Some(self.domain.clone());
        }
        let ip = self.ipv4()?;
        nix::ifaddrs::getifaddrs().ok()?.find_map(|ifa| {
            let addr = ifa.address?;
            let sin = addr.as_sockaddr_in()?;
            (sin.ip() == ip).then(|| ifa.interface_name.clone())
        })
    }

    /// Usable payload bytes per datagram: the provider's limit, and never more than the link MTU
    /// minus the IPv4 and UDP headers.
    pub fn max_datagram(&self) -> usize {
        let provider_max = self.max_msg_size();
        match self.link_mtu() {
            Some(mtu) => provider_max.min(mtu.saturating_sub(IPV4_UDP_HEADERS)),
            None => provider_max,
        }
    }

    fn site(&self) -> Site {
        Site {
            provider: self.provider.clone(),
            interface: self.domain.clone(),
        }
    }
}

/// Lists the IPv4 interfaces on which `provider` (any provider when `None`) offers
/// `FI_EP_DGRAM` endpoints with `FI_MSG`. An `FI_ENODATA` answer ("nothing matches") is an error
/// whose fix says how to get a provider.
pub fn dgram_interfaces(provider: Option<&str>) -> Result<Vec<FabricInterface>, FabricError> {
    let site = Site {
        provider: provider.unwrap_or("").to_string(),
        interface: String::new(),
    };
    let prov_name = match provider {
        Some(p) => Some(CString::new(p).map_err(|_| {
            FabricError::local(
                "fi_getinfo",
                &site,
                "the provider name contains a NUL byte".into(),
            )
            .with_fix("set KESTREL_USNIC_PROVIDER to auto, usnic or udp")
        })?),
        None => None,
    };

    // SAFETY: fi_allocinfo returns a zeroed fi_info with allocated sub-attributes, or null.
    let hints = unsafe { sys::fi_allocinfo() };
    let hints = NonNull::new(hints)
        .ok_or_else(|| FabricError::local("fi_allocinfo", &site, "out of memory".into()))?;
    let hints = OwnedHints(hints);
    // SAFETY: hints and its attribute structs were allocated by fi_allocinfo and are exclusively
    // ours. prov_name is copied with strdup because fi_freeinfo frees it with free().
    unsafe {
        let h = hints.0.as_ptr();
        (*h).caps = sys::FI_MSG as u64;
        (*h).mode = SUPPORTED_MODE;
        (*h).addr_format = sys::FI_SOCKADDR_IN;
        (*(*h).ep_attr).type_ = sys::FI_EP_DGRAM;
        (*(*h).domain_attr).mr_mode = SUPPORTED_MR_MODE;
        if let Some(name) = &prov_name {
            (*(*h).fabric_attr).prov_name = libc::strdup(name.as_ptr());
        }
    }

    let mut list: *mut sys::fi_info = ptr::null_mut();
    // SAFETY: hints is a valid fi_info; node and service are null (local interfaces); `list`
    // receives a list we free below.
    let ret = unsafe {
        sys::fi_getinfo(
            API_VERSION,
            ptr::null(),
            ptr::null(),
            0,
            hints.0.as_ptr(),
            &mut list,
        )
    };
    if ret != 0 {
        let err = FabricError::from_code("fi_getinfo", &site, ret.into());
        return Err(if err.is_no_data() {
            let fix = match provider {
                Some("usnic") => "the usnic provider needs a Cisco VIC with the usnic driver; \
                                  set KESTREL_USNIC_PROVIDER=udp to use kernel UDP instead"
                    .to_string(),
                Some(p) => format!(
                    "no DGRAM endpoint from provider {p}: install libfabric1 with the udp \
                     provider (apt-get install libfabric1), or set KESTREL_USNIC_PROVIDER"
                ),
                None => "no DGRAM provider: install libfabric1 with the udp provider \
                         (apt-get install libfabric1), or set KESTREL_USNIC_PROVIDER"
                    .to_string(),
            };
            err.with_fix(fix)
        } else {
            err
        });
    }

    let mut out = Vec::new();
    let mut cur = list;
    while !cur.is_null() {
        // SAFETY: `cur` walks the list fi_getinfo returned, which stays alive until
        // fi_freeinfo below; each entry is read, and copied by from_entry, before that.
        let (format, next) = unsafe { ((*cur).addr_format, (*cur).next) };
        if format == sys::FI_SOCKADDR_IN {
            if let Some(iface) = FabricInterface::from_entry(cur) {
                if iface.ipv4().is_some() {
                    out.push(iface);
                }
            }
        }
        cur = next;
    }
    // SAFETY: the list came from fi_getinfo and is freed exactly once; our entries are copies.
    unsafe { sys::fi_freeinfo(list) };
    tracing::debug!(
        target: "usnic",
        provider = provider.unwrap_or("any"),
        found = out.len(),
        "fi_getinfo listed DGRAM interfaces"
    );
    Ok(out)
}

/// The hints passed to `fi_getinfo`, freed on every return path.
struct OwnedHints(NonNull<sys::fi_info>);

impl Drop for OwnedHints {
    fn drop(&mut self) {
        // SAFETY: allocated by fi_allocinfo, freed once; fi_freeinfo also frees prov_name.
        unsafe { sys::fi_freeinfo(self.0.as_ptr()) }
    }
}

/// A libfabric object closed with `fi_close` on drop.
struct Fid<T: HasFid> {
    ptr: NonNull<T>,
    what: &'static str,
}

/// libfabric object types, each starting with an embedded `struct fid`.
trait HasFid {
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
    fn adopt(what: &'static str, site: &Site, ret: i32, raw: *mut T) -> Result<Self, FabricError> {
        if ret != 0 {
            return Err(FabricError::from_code(what, site, ret.into()));
        }
        NonNull::new(raw)
            .map(|ptr| Fid { ptr, what })
            .ok_or_else(|| FabricError::local(what, site, "returned no object".into()))
    }

    fn as_ptr(&self) -> *mut T {
        self.ptr.as_ptr()
    }

    fn fid(&self) -> *mut sys::fid {
        // SAFETY: the object is live until this wrapper drops.
        unsafe { T::fid_of(self.ptr.as_ptr()) }
    }
}

impl<T: HasFid> Drop for Fid<T> {
    fn drop(&mut self) {
        // SAFETY: the object is live and closed exactly once, here; the owning struct orders its
        // fields so that objects depending on this one are closed first.
        let ret = unsafe { sys::fi_close(self.fid()) };
        if ret != 0 {
            tracing::warn!(
                target: "usnic",
                object = self.what,
                error = %strerror(-ret),
                "fi_close failed; the provider may leak this object"
            );
        }
    }
}

/// A page-aligned buffer split into equal slots, handed to the provider by raw pointer.
///
/// No reference to the whole pool is ever formed: the provider may be writing into slots it owns
/// (posted receives) while the wrapper reads a slot it owns (a completed one).
struct Pool {
    base: NonNull<u8>,
    layout: Layout,
    stride: usize,
    slots: usize,
}

impl Pool {
    fn new(slots: usize, slot_bytes: usize) -> Option<Pool> {
        let stride = slot_bytes.div_ceil(SLOT_ALIGN).checked_mul(SLOT_ALIGN)?;
        let size = stride.checked_mul(slots)?.max(1);
        let layout = Layout::from_size_align(size, POOL_ALIGN).ok()?;
        // SAFETY: the layout has a non-zero size.
        let base = NonNull::new(unsafe { alloc::alloc_zeroed(layout) })?;
        Some(Pool {
            base,
            layout,
            stride,
            slots,
        })
    }

    fn slot_ptr(&self, slot: usize) -> *mut u8 {
        debug_assert!(slot < self.slots);
        // SAFETY: slot < slots, so the offset stays inside the allocation.
        unsafe { self.base.as_ptr().add(slot * self.stride) }
    }

    fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once; the endpoint and memory
        // registrations using it are closed before (field order in DgramEndpoint).
        unsafe { alloc::dealloc(self.base.as_ptr(), self.layout) }
    }
}

/// One `fi_context2` per slot, at stable addresses the provider may write into.
struct Contexts {
    base: NonNull<sys::fi_context2>,
    len: usize,
}

impl Contexts {
    fn new(len: usize) -> Contexts {
        let boxed: Box<[sys::fi_context2]> = (0..len.max(1))
            .map(|_| sys::fi_context2::default())
            .collect();
        let len = boxed.len();
        let raw = Box::into_raw(boxed) as *mut sys::fi_context2;
        Contexts {
            // SAFETY: Box::into_raw never returns null.
            base: unsafe { NonNull::new_unchecked(raw) },
            len,
        }
    }

    fn ptr(&self, index: usize) -> *mut c_void {
        debug_assert!(index < self.len);
        // SAFETY: index < len keeps the pointer inside the array.
        unsafe { self.base.as_ptr().add(index) as *mut c_void }
    }

    /// Maps a completion's context back to its index, without dereferencing it.
    fn index_of(&self, context: *mut c_void) -> Option<usize> {
        let offset = (context as usize).checked_sub(self.base.as_ptr() as usize)?;
        let size = size_of::<sys::fi_context2>();
        (offset % size == 0 && offset / size < self.len).then_some(offset / size)
    }
}

impl Drop for Contexts {
    fn drop(&mut self) {
        let slice = ptr::slice_from_raw_parts_mut(self.base.as_ptr(), self.len);
        // SAFETY: rebuilds the Box leaked in `new` (same pointer and length), once, after the
        // endpoint that referenced the contexts has been closed.
        drop(unsafe { Box::from_raw(slice) });
    }
}

/// A peer inserted into an endpoint's address vector.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct PeerAddr(sys::fi_addr_t);

impl PeerAddr {
    /// The libfabric address handle (`fi_addr_t`), for logs.
    pub fn raw(self) -> u64 {
        self.0
    }
}

/// A datagram that hit `-FI_EAGAIN` in `fi_send`, kept in its slot to be retried in order.
#[derive(Debug, Clone, Copy)]
struct PendingSend {
    slot: usize,
    len: usize,
    to: PeerAddr,
}

/// A datagram endpoint on one interface, with its own CQ, AV and buffer pools.
///
/// Send slots are indices `0..tx_depth` of the context array, receive slots
/// `tx_depth..tx_depth + rx_depth`; every receive slot is posted while the endpoint is open,
/// except while its payload is being handed to the caller inside [`DgramEndpoint::poll`].
pub struct DgramEndpoint {
    // Field order is drop order: the endpoint goes first (it references everything below), then
    // the AV and CQ bound to it, the registrations of the pools, the domain and the fabric.
    // The pools and contexts outlive every object that could still touch them.
    ep: Fid<sys::fid_ep>,
    av: Fid<sys::fid_av>,
    cq: Fid<sys::fid_cq>,
    tx_mr: Option<Fid<sys::fid_mr>>,
    rx_mr: Option<Fid<sys::fid_mr>>,
    _domain: Fid<sys::fid_domain>,
    _fabric: Fid<sys::fid_fabric>,
    tx_pool: Pool,
    rx_pool: Pool,
    contexts: Contexts,
    _info: OwnedInfo,
    tx_desc: *mut c_void,
    rx_desc: *mut c_void,
    tx_free: Vec<usize>,
    pending: VecDeque<PendingSend>,
    unposted: Vec<usize>,
    tx_depth: usize,
    rx_depth: usize,
    prefix: usize,
    max_datagram: usize,
    rx_capacity: usize,
    address: Vec<u8>,
    site: Site,
}

// SAFETY: libfabric objects have no thread affinity at any threading level; every call goes
// through `&mut self` (or `&self` for read-only state), so the endpoint is used by one thread at
// a time. The raw descriptors are provider handles with the same lifetime as the endpoint.
unsafe impl Send for DgramEndpoint {}

impl fmt::Debug for DgramEndpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DgramEndpoint")
            .field("provider", &self.site.provider)
            .field("interface", &self.site.interface)
            .field("address", &sockaddr_in_from_bytes(&self.address))
            .field("tx_depth", &self.tx_depth)
            .field("rx_depth", &self.rx_depth)
            .field("prefix", &self.prefix)
            .field("max_datagram", &self.max_datagram)
            .finish()
    }
}

impl DgramEndpoint {
    /// Opens an endpoint on `iface` with `depth` send slots and `depth` receive buffers (each
    /// clamped to what the provider allows), bound to the interface's address with a port the
    /// provider picks.
    pub fn open(iface: &FabricInterface, depth: usize) -> Result<Self, FabricError> {
        Self::open_inner(iface, depth, false)
    }

    fn open_inner(
        iface: &FabricInterface,
        depth: usize,
        force_registration: bool,
    ) -> Result<Self, FabricError> {
        let site = iface.site();
        if depth == 0 {
            return Err(FabricError::local(
                "fi_endpoint",
                &site,
                "an endpoint needs at least one send and one receive buffer".into(),
            )
            .with_fix("pass a queue depth of 1 or more"));
        }
        let mut info = OwnedInfo::dup(iface.info.0.as_ptr())
            .ok_or_else(|| FabricError::local("fi_dupinfo", &site, "out of memory".into()))?;
        // SAFETY: our private copy's attribute pointers were checked non-null when the interface
        // was listed (ep_attr, domain_attr) or are always allocated by libfabric (tx/rx attrs);
        // the copy is exclusively ours to adjust before opening objects from it.
        let (tx_depth, rx_depth, mr_mode) = unsafe {
            let i = info.as_mut_ptr();
            if (*i).tx_attr.is_null() || (*i).rx_attr.is_null() {
                return Err(FabricError::local(
                    "fi_getinfo",
                    &site,
                    "the provider returned no tx/rx attributes".into(),
                ));
            }
            let tx = depth.min((*(*i).tx_attr).size.max(1));
            let rx = depth.min((*(*i).rx_attr).size.max(1));
            (*(*i).tx_attr).size = tx;
            (*(*i).rx_attr).size = rx;
            (tx, rx, (*(*i).domain_attr).mr_mode)
        };
        if tx_depth < depth || rx_depth < depth {
            tracing::debug!(
                target: "usnic",
                interface = %site.interface,
                requested = depth,
                tx_depth,
                rx_depth,
                "queue depth clamped to the provider's limits"
            );
        }
        let register = force_registration || mr_mode & sys::FI_MR_LOCAL as i32 != 0;
        let prefix = iface.prefix_size();
        let max_datagram = iface.max_datagram();
        let rx_capacity = iface.max_msg_size().max(max_datagram);

        let mut raw_fabric = ptr::null_mut();
        // SAFETY: fabric_attr belongs to our fi_info copy; raw_fabric receives a new object.
        let ret =
            unsafe { sys::fi_fabric(info.get().fabric_attr, &mut raw_fabric, ptr::null_mut()) };
        let fabric = Fid::adopt("fi_fabric", &site, ret, raw_fabric)?;

        let mut raw_domain = ptr::null_mut();
        // SAFETY: fabric is open; info is the provider's own entry for this domain.
        let ret = unsafe {
            sys::fi_domain(
                fabric.as_ptr(),
                info.as_mut_ptr(),
                &mut raw_domain,
                ptr::null_mut(),
            )
        };
        let domain = Fid::adopt("fi_domain", &site, ret, raw_domain)?;

        let mut cq_attr = sys::fi_cq_attr {
            size: tx_depth + rx_depth,
            format: sys::FI_CQ_FORMAT_MSG,
            wait_obj: sys::FI_WAIT_NONE,
            ..Default::default()
        };
        let mut raw_cq = ptr::null_mut();
        // SAFETY: domain is open; cq_attr is a valid attribute struct living across the call.
        let ret =
            unsafe { sys::fi_cq_open(domain.as_ptr(), &mut cq_attr, &mut raw_cq, ptr::null_mut()) };
        let cq = Fid::adopt("fi_cq_open", &site, ret, raw_cq).map_err(|e| {
            e.with_fix("lower the endpoint queue depth (the CQ holds one entry per buffer)")
        })?;

        let mut av_attr = sys::fi_av_attr {
            // SAFETY: domain_attr belongs to our copy and was checked non-null at listing.
            type_: unsafe { (*info.get().domain_attr).av_type },
            count: AV_SIZE_HINT,
            ..Default::default()
        };
        let mut raw_av = ptr::null_mut();
        // SAFETY: domain is open; av_attr lives across the call. No EQ is bound, which makes
        // fi_av_insert synchronous.
        let ret =
            unsafe { sys::fi_av_open(domain.as_ptr(), &mut av_attr, &mut raw_av, ptr::null_mut()) };
        let av = Fid::adopt("fi_av_open", &site, ret, raw_av)?;

        let mut raw_ep = ptr::null_mut();
        // SAFETY: domain is open; info carries the interface's source address, so the
        // provider binds the endpoint to it (port 0: ephemeral).
        let ret = unsafe {
            sys::fi_endpoint(
                domain.as_ptr(),
                info.as_mut_ptr(),
                &mut raw_ep,
                ptr::null_mut(),
            )
        };
        let ep = Fid::adopt("fi_endpoint", &site, ret, raw_ep).map_err(|e| {
            e.with_fix("check that the interface is up and still has its IPv4 address")
        })?;

        // SAFETY: ep, cq and av are open objects of the same domain.
        let ret = unsafe {
            sys::fi_ep_bind(
                ep.as_ptr(),
                cq.fid(),
                (sys::FI_TRANSMIT | sys::FI_RECV) as u64,
            )
        };
        if ret != 0 {
            return Err(FabricError::from_code("fi_ep_bind (cq)", &site, ret.into()));
        }
        // SAFETY: as above.
        let ret = unsafe { sys::fi_ep_bind(ep.as_ptr(), av.fid(), 0) };
        if ret != 0 {
            return Err(FabricError::from_code("fi_ep_bind (av)", &site, ret.into()));
        }
        // SAFETY: the endpoint is bound to its CQ and AV, which fi_enable requires.
        let ret = unsafe { sys::fi_enable(ep.as_ptr()) };
        if ret != 0 {
            return Err(FabricError::from_code("fi_enable", &site, ret.into()));
        }

        let oom = || FabricError::local("buffer pool", &site, "out of memory".into());
        let tx_pool = Pool::new(tx_depth, prefix + max_datagram).ok_or_else(oom)?;
        let rx_pool = Pool::new(rx_depth, prefix + rx_capacity).ok_or_else(oom)?;
        let contexts = Contexts::new(tx_depth + rx_depth);

        let (tx_mr, rx_mr) = if register {
            (
                Some(register_pool(
                    &domain,
                    &tx_pool,
                    sys::FI_SEND as u64,
                    1,
                    &site,
                )?),
                Some(register_pool(
                    &domain,
                    &rx_pool,
                    sys::FI_RECV as u64,
                    2,
                    &site,
                )?),
            )
        } else {
            (None, None)
        };
        let desc_of = |mr: &Option<Fid<sys::fid_mr>>| match mr {
            // SAFETY: the registration is open; fi_mr_desc only reads it.
            Some(mr) => unsafe { sys::fi_mr_desc(mr.as_ptr()) },
            None => ptr::null_mut(),
        };
        let tx_desc = desc_of(&tx_mr);
        let rx_desc = desc_of(&rx_mr);

        let address = endpoint_name(&ep, &site)?;

        let mut endpoint = DgramEndpoint {
            ep,
            av,
            cq,
            tx_mr,
            rx_mr,
            _domain: domain,
            _fabric: fabric,
            tx_pool,
            rx_pool,
            contexts,
            _info: info,
            tx_desc,
            rx_desc,
            tx_free: (0..tx_depth).rev().collect(),
            pending: VecDeque::new(),
            unposted: Vec::new(),
            tx_depth,
            rx_depth,
            prefix,
            max_datagram,
            rx_capacity,
            address,
            site,
        };
        for slot in 0..rx_depth {
            endpoint.post_receive(slot)?;
        }
        tracing::debug!(
            target: "usnic",
            provider = %endpoint.site.provider,
            interface = %endpoint.site.interface,
            address = ?sockaddr_in_from_bytes(&endpoint.address),
            tx_depth,
            rx_depth,
            prefix,
            max_datagram,
            registered = endpoint.is_registered(),
            "datagram endpoint open"
        );
        Ok(endpoint)
    }

    /// The endpoint's address as the provider names it (`fi_getname`): opaque bytes that peers
    /// pass to [`DgramEndpoint::insert_peer`].
    pub fn address(&self) -> Vec<u8> {
        self.address.clone()
    }

    /// The endpoint's IPv4 socket address, when the provider's address format is a
    /// `sockaddr_in` (`udp`, `usnic`).
    pub fn socket_addr(&self) -> Option<SocketAddrV4> {
        sockaddr_in_from_bytes(&self.address)
    }

    /// Provider name.
    pub fn provider(&self) -> &str {
        &self.site.provider
    }

    /// Interface (libfabric domain) name.
    pub fn interface(&self) -> &str {
        &self.site.interface
    }

    /// Send slots.
    pub fn tx_depth(&self) -> usize {
        self.tx_depth
    }

    /// Receive buffers.
    pub fn rx_depth(&self) -> usize {
        self.rx_depth
    }

    /// True when the buffer pools are registered with the domain (`FI_MR_LOCAL` providers).
    pub fn is_registered(&self) -> bool {
        self.tx_mr.is_some() && self.rx_mr.is_some()
    }

    /// Send slots neither in flight nor waiting for a retry.
    pub fn free_tx_slots(&self) -> usize {
        self.tx_free.len()
    }

    /// Usable payload bytes per datagram (after any provider prefix).
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
    }

    /// Adds a peer's address (bytes from its [`DgramEndpoint::address`]) to the address vector.
    /// The bytes come from another process, so their length and family are checked first.
    pub fn insert_peer(&mut self, raw: &[u8]) -> Result<PeerAddr, FabricError> {
        let bad = |msg: String| {
            FabricError::local("fi_av_insert", &self.site, msg).with_fix(
                "the peer's address is corrupt or from another provider; give every rank the \
                 same KESTREL_USNIC_PROVIDER",
            )
        };
        if raw.len() != self.address.len() {
            return Err(bad(format!(
                "peer address is {} bytes, this provider's addresses are {}",
                raw.len(),
                self.address.len()
            )));
        }
        if sockaddr_in_from_bytes(&self.address).is_some() && sockaddr_in_from_bytes(raw).is_none()
        {
            return Err(bad("peer address is not an IPv4 socket address".into()));
        }
        let mut handle: sys::fi_addr_t = sys::FI_ADDR_UNSPEC;
        // SAFETY: raw holds exactly one address of this provider's length (checked above); the
        // AV is synchronous (no EQ bound), so `handle` is written before the call returns.
        let ret = unsafe {
            sys::fi_av_insert(
                self.av.as_ptr(),
                raw.as_ptr() as *const c_void,
                1,
                &mut handle,
                0,
                ptr::null_mut(),
            )
        };
        if ret != 1 || handle == sys::FI_ADDR_UNSPEC {
            let code = if ret < 0 {
                ret
            } else {
                -(sys::FI_EINVAL as i32)
            };
            return Err(FabricError::from_code(
                "fi_av_insert",
                &self.site,
                code.into(),
            ));
        }
        Ok(PeerAddr(handle))
    }

    /// Writes one datagram into a free send slot and posts it to `to`. `fill` gets the slot's
    /// payload area (`max_datagram` bytes) and returns how many bytes it wrote.
    ///
    /// `Ok` means the provider has the datagram, or (after a provider `-FI_EAGAIN`) that it
    /// waits in its slot and goes out, in order, on the next `send_with` or `poll`.
    pub fn send_with(
        &mut self,
        to: PeerAddr,
        fill: impl FnOnce(&mut [u8]) -> usize,
    ) -> Result<(), SendError> {
        self.flush_pending()?;
        let slot = self.tx_free.pop().ok_or(SendError::Full)?;
        let payload = self.tx_pool.slot_ptr(slot).wrapping_add(self.prefix);
        // SAFETY: `slot` came off the free list, so neither the provider nor any other borrow
        // uses it; the payload area lies within the slot (stride >= prefix + max_datagram).
        let area = unsafe { std::slice::from_raw_parts_mut(payload, self.max_datagram) };
        let len = fill(area);
        if len > self.max_datagram {
            self.tx_free.push(slot);
            return Err(SendError::Oversized {
                len,
                max: self.max_datagram,
            });
        }
        let send = PendingSend { slot, len, to };
        if !self.pending.is_empty() {
            self.pending.push_back(send);
            return Ok(());
        }
        match self.post_send(send) {
            Ok(true) => Ok(()),
            Ok(false) => {
                self.pending.push_back(send);
                Ok(())
            }
            Err(e) => {
                self.tx_free.push(slot);
                Err(SendError::Fabric(e))
            }
        }
    }

    /// Posts one send; `Ok(false)` when the provider said `-FI_EAGAIN`.
    fn post_send(&mut self, send: PendingSend) -> Result<bool, FabricError> {
        // SAFETY: the slot is owned by this send until its completion; buffer, length, context
        // and descriptor all stay valid until then (the pools and contexts outlive the endpoint).
        let ret = unsafe {
            sys::fi_send(
                self.ep.as_ptr(),
                self.tx_pool.slot_ptr(send.slot) as *const c_void,
                self.prefix + send.len,
                self.tx_desc,
                send.to.0,
                self.contexts.ptr(send.slot),
            )
        };
        match ret {
            0 => Ok(true),
            r if r == -(sys::FI_EAGAIN as isize) => Ok(false),
            r => Err(FabricError::from_code("fi_send", &self.site, r as i64)),
        }
    }

    /// Retries datagrams the provider refused with `-FI_EAGAIN`, oldest first. A hard error
    /// drops that datagram (the reliability layer resends) and is returned.
    fn flush_pending(&mut self) -> Result<(), FabricError> {
        while let Some(&send) = self.pending.front() {
            match self.post_send(send) {
                Ok(true) => {
                    self.pending.pop_front();
                }
                Ok(false) => return Ok(()),
                Err(e) => {
                    self.pending.pop_front();
                    self.tx_free.push(send.slot);
                    return Err(e);
                }
            }
        }
        Ok(())
    }

    fn post_receive(&mut self, slot: usize) -> Result<(), FabricError> {
        // SAFETY: the receive slot is not posted and not borrowed; buffer, context and
        // descriptor stay valid until its completion (they outlive the endpoint).
        let ret = unsafe {
            sys::fi_recv(
                self.ep.as_ptr(),
                self.rx_pool.slot_ptr(slot) as *mut c_void,
                self.prefix + self.rx_capacity,
                self.rx_desc,
                sys::FI_ADDR_UNSPEC,
                self.contexts.ptr(self.tx_depth + slot),
            )
        };
        match ret {
            0 => Ok(()),
            r if r == -(sys::FI_EAGAIN as isize) => {
                self.unposted.push(slot);
                Ok(())
            }
            r => {
                self.unposted.push(slot);
                Err(FabricError::from_code("fi_recv", &self.site, r as i64))
            }
        }
    }

    /// Drains the completion queue: send completions free their slots, each received datagram's
    /// payload (after any prefix) goes to `on_datagram` and its buffer is posted again. Returns
    /// the number of datagrams delivered. At most `tx_depth + rx_depth` completions are taken
    /// per call, so a flood of incoming datagrams cannot keep the caller here forever.
    ///
    /// An error completion frees or reposts its slot and is returned as the error; completions
    /// behind it stay queued for the next call.
    pub fn poll(&mut self, mut on_datagram: impl FnMut(&[u8])) -> Result<usize, FabricError> {
        let retry: Vec<usize> = std::mem::take(&mut self.unposted);
        for slot in retry {
            self.post_receive(slot)?;
        }

        let budget = self.tx_depth + self.rx_depth;
        let mut taken = 0;
        let mut delivered = 0;
        let mut entries = [MaybeUninit::<sys::fi_cq_msg_entry>::uninit(); CQ_BATCH];
        while taken < budget {
            let want = CQ_BATCH.min(budget - taken);
            // SAFETY: the CQ was opened with FI_CQ_FORMAT_MSG, so each entry the provider writes
            // is an fi_cq_msg_entry; `entries` has room for `want` of them.
            let ret = unsafe {
                sys::fi_cq_read(self.cq.as_ptr(), entries.as_mut_ptr() as *mut c_void, want)
            };
            if ret == -(sys::FI_EAGAIN as isize) {
                break;
            }
            if ret == -(sys::FI_EAVAIL as isize) {
                return Err(self.read_error_completion());
            }
            if ret < 0 {
                return Err(FabricError::from_code("fi_cq_read", &self.site, ret as i64));
            }
            let n = (ret as usize).min(want);
            taken += n.max(1);
            for entry in &entries[..n] {
                // SAFETY: fi_cq_read reported `n` initialised entries at the front.
                let entry = unsafe { entry.assume_init() };
                if self.complete(entry, &mut on_datagram)? {
                    delivered += 1;
                }
            }
            if n < want {
                break;
            }
        }
        self.flush_pending()?;
        Ok(delivered)
    }

    /// Handles one successful completion; true when it delivered a datagram.
    fn complete(
        &mut self,
        entry: sys::fi_cq_msg_entry,
        on_datagram: &mut impl FnMut(&[u8]),
    ) -> Result<bool, FabricError> {
        let index = self.contexts.index_of(entry.op_context).ok_or_else(|| {
            FabricError::local(
                "fi_cq_read",
                &self.site,
                "a completion carried a context this endpoint never posted".into(),
            )
        })?;
        if index < self.tx_depth {
            self.tx_free.push(index);
            return Ok(false);
        }
        let slot = index - self.tx_depth;
        let len = entry.len.min(self.prefix + self.rx_capacity);
        // With a prefix, completions no longer than it are provider traffic, not ours.
        let has_payload = if self.prefix > 0 {
            len > self.prefix
        } else {
            true
        };
        if has_payload {
            let start = self.rx_pool.slot_ptr(slot).wrapping_add(self.prefix);
            // SAFETY: the receive completed, so the provider no longer writes this slot until we
            // post it again below; `len` is clamped to the posted length, within the slot.
            let payload = unsafe { std::slice::from_raw_parts(start, len - self.prefix) };
            on_datagram(payload);
        }
        self.post_receive(slot)?;
        Ok(has_payload)
    }

    /// Reads the error completion `fi_cq_read` announced, returns its slot, and describes it.
    fn read_error_completion(&mut self) -> FabricError {
        let mut err = sys::fi_cq_err_entry::default();
        // SAFETY: `err` is a zeroed fi_cq_err_entry (err_data null, so the provider uses its own
        // storage for error data, valid until the next CQ call).
        let ret = unsafe { sys::fi_cq_readerr(self.cq.as_ptr(), &mut err, 0) };
        if ret < 0 {
            return FabricError::from_code("fi_cq_readerr", &self.site, ret as i64);
        }
        // SAFETY: prov_errno and err_data come from the entry just read, as fi_cq_strerror
        // expects; with a null buffer it returns a provider-owned string, copied at once.
        let provider_text = unsafe {
            c_string(sys::fi_cq_strerror(
                self.cq.as_ptr(),
                err.prov_errno,
                err.err_data,
                ptr::null_mut(),
                0,
            ))
        };
        let kind = match self.contexts.index_of(err.op_context) {
            Some(i) if i < self.tx_depth => {
                self.tx_free.push(i);
                "send completion"
            }
            Some(i) => {
                let slot = i - self.tx_depth;
                if let Err(e) = self.post_receive(slot) {
                    tracing::warn!(target: "usnic", error = %e, "reposting a receive failed");
                }
                "receive completion"
            }
            None => "completion",
        };
        let mut error = FabricError::from_code(kind, &self.site, err.err.into());
        if !provider_text.is_empty() {
            error.message = format!("{} ({provider_text})", error.message);
        }
        tracing::debug!(target: "usnic", error = %error, "error completion");
        error
    }
}

fn register_pool(
    domain: &Fid<sys::fid_domain>,
    pool: &Pool,
    access: u64,
    requested_key: u64,
    site: &Site,
) -> Result<Fid<sys::fid_mr>, FabricError> {
    // Keys must be unique within a domain unless the provider picks them (FI_MR_PROV_KEY), so
    // the two pools ask for different ones.
    let mut raw = ptr::null_mut();
    // SAFETY: the pool's memory outlives the registration (DgramEndpoint drops registrations
    // before pools); the domain is open.
    let ret = unsafe {
        sys::fi_mr_reg(
            domain.as_ptr(),
            pool.base.as_ptr() as *const c_void,
            pool.len(),
            access,
            0,
            requested_key,
            0,
            &mut raw,
            ptr::null_mut(),
        )
    };
    Fid::adopt("fi_mr_reg", site, ret, raw).map_err(|e| {
        e.with_fix("raise the locked-memory limit (ulimit -l) or lower the endpoint queue depth")
    })
}

fn endpoint_name(ep: &Fid<sys::fid_ep>, site: &Site) -> Result<Vec<u8>, FabricError> {
    let mut buf = vec![0u8; 64];
    let mut len = buf.len();
    // SAFETY: buf has `len` writable bytes; the provider writes at most that and updates len.
    let mut ret = unsafe { sys::fi_getname(ep.fid(), buf.as_mut_ptr() as *mut c_void, &mut len) };
    if ret == -(sys::FI_ETOOSMALL as i32) && len > buf.len() {
        buf.resize(len, 0);
        // SAFETY: as above, with the size the provider asked for.
        ret = unsafe { sys::fi_getname(ep.fid(), buf.as_mut_ptr() as *mut c_void, &mut len) };
    }
    if ret != 0 {
        return Err(FabricError::from_code("fi_getname", site, ret.into()));
    }
    buf.truncate(len);
    Ok(buf)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::UdpSocket;
    use std::time::{Duration, Instant};

    fn loopback_udp() -> FabricInterface {
        dgram_interfaces(Some("udp"))
            .expect("the udp provider lists interfaces")
            .into_iter()
            .find(|i| i.ipv4() == Some(Ipv4Addr::LOCALHOST))
            .expect("the udp provider offers 127.0.0.1")
    }

    /// Polls `ep` until `want` datagrams arrived or five seconds passed.
    fn receive(ep: &mut DgramEndpoint, want: usize) -> Vec<Vec<u8>> {
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        while got.len() < want {
            assert!(
                Instant::now() < deadline,
                "only {} of {want} datagrams arrived within 5 s",
                got.len()
            );
            ep.poll(|d| got.push(d.to_vec())).unwrap();
        }
        got
    }

    fn pattern(len: usize, seed: u8) -> Vec<u8> {
        (0..len)
            .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
            .collect()
    }

    fn pair(depth: usize) -> (DgramEndpoint, DgramEndpoint, PeerAddr, PeerAddr) {
        let iface = loopback_udp();
        let mut a = DgramEndpoint::open(&iface, depth).unwrap();
        let mut b = DgramEndpoint::open(&iface, depth).unwrap();
        let b_at_a = a.insert_peer(&b.address()).unwrap();
        let a_at_b = b.insert_peer(&a.address()).unwrap();
        (a, b, b_at_a, a_at_b)
    }

    #[test]
    fn udp_lists_loopback_with_its_limits() {
        let iface = loopback_udp();
        assert_eq!(iface.provider(), "udp");
        assert_eq!(iface.domain(), "lo");
        assert_eq!(iface.prefix_size(), 0, "udp asks for no FI_MSG_PREFIX");
        assert!(iface.max_msg_size() >= 512);
        assert!(iface.max_datagram() <= iface.max_msg_size());
        assert_eq!(iface.netdev().as_deref(), Some("lo"));
    }

    #[test]
    fn datagrams_of_every_size_cross_between_two_endpoints() {
        let (mut a, mut b, b_at_a, a_at_b) = pair(64);
        let max = a.max_datagram();
        assert!(max <= 1472, "udp caps a datagram at 1472 bytes, got {max}");
        let sizes = [0, 1, 8, 63, 64, 65, 500, 1024, max - 1, max];
        for (n, &size) in sizes.iter().enumerate() {
            let data = pattern(size, n as u8);
            a.send_with(b_at_a, |buf| {
                buf[..size].copy_from_slice(&data);
                size
            })
            .unwrap();
            assert_eq!(receive(&mut b, 1), vec![data.clone()], "size {size}");
            // and back
            b.send_with(a_at_b, |buf| {
                buf[..size].copy_from_slice(&data);
                size
            })
            .unwrap();
            assert_eq!(receive(&mut a, 1), vec![data], "reply of size {size}");
        }
    }

    #[test]
    fn a_full_send_queue_reports_full_then_recovers_after_poll() {
        let iface = loopback_udp();
        let mut a = DgramEndpoint::open(&iface, 4).unwrap();
        let mut b = DgramEndpoint::open(&iface, 64).unwrap();
        let to_b = a.insert_peer(&b.address()).unwrap();
        for i in 0..4u8 {
            a.send_with(to_b, |buf| {
                buf[0] = i;
                1
            })
            .unwrap();
        }
        assert_eq!(a.free_tx_slots(), 0);
        let mut called = false;
        let refused = a.send_with(to_b, |_| {
            called = true;
            0
        });
        assert_eq!(refused, Err(SendError::Full));
        assert!(!called, "fill must not run when no slot is free");

        let deadline = Instant::now() + Duration::from_secs(5);
        while a.free_tx_slots() < 4 {
            assert!(Instant::now() < deadline, "send completions never came");
            a.poll(|_| panic!("a received nothing")).unwrap();
        }
        a.send_with(to_b, |buf| {
            buf[0] = 4;
            1
        })
        .unwrap();
        let got = receive(&mut b, 5);
        assert_eq!(got, (0..5u8).map(|i| vec![i]).collect::<Vec<_>>());
    }

    #[test]
    fn a_strangers_datagram_is_delivered_as_bytes() {
        let iface = loopback_udp();
        let mut ep = DgramEndpoint::open(&iface, 8).unwrap();
        let target = ep
            .socket_addr()
            .expect("udp endpoints have sockaddr_in names");
        assert_eq!(*target.ip(), Ipv4Addr::LOCALHOST);
        assert_ne!(target.port(), 0, "the provider bound an ephemeral port");
        let stranger = UdpSocket::bind("127.0.0.1:0").unwrap();
        let garbage = [0xde, 0xad, 0xbe, 0xef, 0x00, 0xff, 0x13, 0x37, 0x42];
        stranger.send_to(&garbage, target).unwrap();
        assert_eq!(receive(&mut ep, 1), vec![garbage.to_vec()]);
    }

    #[test]
    fn oversized_fill_is_refused_and_keeps_the_slot() {
        let (mut a, _b, b_at_a, _) = pair(2);
        let max = a.max_datagram();
        let before = a.free_tx_slots();
        assert_eq!(
            a.send_with(b_at_a, |_| max + 1),
            Err(SendError::Oversized { len: max + 1, max })
        );
        assert_eq!(a.free_tx_slots(), before);
    }

    #[test]
    fn registered_pools_work_too() {
        // usnic requires FI_MR_LOCAL; udp does not, so force the registration path here.
        let iface = loopback_udp();
        let mut a = DgramEndpoint::open_inner(&iface, 8, true).unwrap();
        let mut b = DgramEndpoint::open_inner(&iface, 8, true).unwrap();
        assert!(a.is_registered() && b.is_registered());
        let to_b = a.insert_peer(&b.address()).unwrap();
        a.send_with(to_b, |buf| {
            buf[..3].copy_from_slice(b"abc");
            3
        })
        .unwrap();
        assert_eq!(receive(&mut b, 1), vec![b"abc".to_vec()]);
    }

    #[test]
    fn malformed_peer_addresses_are_errors() {
        let (mut a, ..) = pair(2);
        let e = a.insert_peer(&[1, 2, 3]).unwrap_err();
        assert_eq!(e.call, "fi_av_insert");
        assert!(e.to_string().contains("3 bytes"), "{e}");
        let mut wrong_family = a.address();
        wrong_family[0] ^= 0xff;
        wrong_family[1] ^= 0xff;
        let e = a.insert_peer(&wrong_family).unwrap_err();
        assert!(e.to_string().contains("not an IPv4"), "{e}");
    }

    #[test]
    fn the_address_vector_grows_past_its_size_hint() {
        let (mut a, ..) = pair(2);
        let template = a.address();
        let mut seen = std::collections::HashSet::new();
        for port in 0..(AV_SIZE_HINT as u16 * 2) {
            let mut raw = template.clone();
            raw[2..4].copy_from_slice(&(40000 + port).to_be_bytes());
            let peer = a.insert_peer(&raw).unwrap();
            assert!(seen.insert(peer), "two peers share handle {peer:?}");
        }
    }

    #[test]
    fn an_unknown_provider_is_an_error_with_a_fix() {
        let e = dgram_interfaces(Some("no-such-provider")).unwrap_err();
        assert!(e.is_no_data(), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("fi_getinfo"), "{text}");
        assert!(text.contains("KESTREL_USNIC_PROVIDER"), "{text}");
        assert!(text.contains("no-such-provider"), "{text}");
    }

    #[test]
    fn zero_depth_is_refused() {
        let e = DgramEndpoint::open(&loopback_udp(), 0).unwrap_err();
        assert!(e.to_string().contains("at least one"), "{e}");
    }

    #[test]
    fn sockaddr_decoding_rejects_short_and_foreign_bytes() {
        assert_eq!(sockaddr_in_from_bytes(&[]), None);
        assert_eq!(sockaddr_in_from_bytes(&[0; 8]), None);
        let mut raw = [0u8; 16];
        raw[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        raw[2..4].copy_from_slice(&4242u16.to_be_bytes());
        raw[4..8].copy_from_slice(&[198, 18, 1, 7]);
        assert_eq!(
            sockaddr_in_from_bytes(&raw),
            Some(SocketAddrV4::new(Ipv4Addr::new(198, 18, 1, 7), 4242))
        );
    }
}
