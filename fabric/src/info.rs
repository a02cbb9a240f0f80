//! The provider interfaces that can carry `FI_MSG` traffic on datagram (`FI_EP_DGRAM`) or
//! reliable-datagram (`FI_EP_RDM`) endpoints: `fi_getinfo` with the hints this wrapper can
//! honour, one [`FabricInterface`] per (provider, domain, address), and the owned `fi_info`
//! copies behind them.
//!
//! This module owns discovery through libfabric and the limits taken from each `fi_info`
//! (datagram size, message prefix). It must never open a fabric, domain or endpoint: that is
//! `endpoint::open`.

use std::ffi::CString;
use std::fmt;
use std::mem::size_of;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::ptr::{self, NonNull};

use kestrel_libfabric_sys as sys;

use super::error::{c_string, FabricError, Owner, Site};

/// The endpoint type an interface was listed for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndpointKind {
    /// `FI_EP_DGRAM`: unreliable, one network datagram per message (usnic, udp).
    Datagram,
    /// `FI_EP_RDM`: reliable, unconnected, messages of any size the provider allows
    /// (`tcp;ofi_rxm`, `verbs;ofi_rxm`, efa, psm3, cxi).
    Reliable,
}

/// The libfabric API version Kestrel is written against (the oldest it accepts at build time).
const API_VERSION: u32 = sys::FI_VERSION(1, 11);

/// Mode bits the wrapper knows how to honour; offered in the `fi_getinfo` hints.
const SUPPORTED_MODE: u64 = sys::FI_MSG_PREFIX | sys::FI_CONTEXT | sys::FI_CONTEXT2;

/// Memory-registration requirements the wrapper can meet: it registers its pools (and the
/// local side of RMA reads) when asked (`FI_MR_LOCAL`), they are ordinary allocations
/// (`FI_MR_ALLOCATED`), and its RMA reads address a registration by virtual address or by
/// offset and take the key the provider chose or the one the wrapper asked for
/// (`FI_MR_VIRT_ADDR`, `FI_MR_PROV_KEY`; [`crate::MemoryRegion`]).
const SUPPORTED_MR_MODE: i32 =
    (sys::FI_MR_LOCAL | sys::FI_MR_ALLOCATED | sys::FI_MR_VIRT_ADDR | sys::FI_MR_PROV_KEY) as i32;

/// IPv4 header (without options) plus UDP header: what a datagram loses to the wire.
const IPV4_UDP_HEADERS: usize = 20 + 8;

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
pub(super) struct OwnedInfo(pub(super) NonNull<sys::fi_info>);

impl OwnedInfo {
    pub(super) fn dup(info: *const sys::fi_info) -> Option<Self> {
        // SAFETY: `info` points to a live fi_info (an entry of a list we hold, or our own copy);
        // fi_dupinfo copies that single entry (its `next` becomes null) into new memory we own.
        NonNull::new(unsafe { sys::fi_dupinfo(info) }).map(OwnedInfo)
    }

    pub(super) fn get(&self) -> &sys::fi_info {
        // SAFETY: the pointer came from fi_dupinfo, is non-null and lives until drop; the
        // wrapper never mutates it except through `&mut self` in `as_mut_ptr` users.
        unsafe { self.0.as_ref() }
    }

    pub(super) fn as_mut_ptr(&mut self) -> *mut sys::fi_info {
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
    pub(super) info: OwnedInfo,
    provider: String,
    domain: String,
    fabric: String,
    kind: EndpointKind,
    owner: Owner,
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
    fn from_entry(entry: *const sys::fi_info, kind: EndpointKind, owner: Owner) -> Option<Self> {
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
            kind,
            owner,
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
        if self.kind == EndpointKind::Reliable {
            // A reliable endpoint segments by itself: the MTU does not bound a message.
            return provider_max;
        }
        match self.link_mtu() {
            Some(mtu) => provider_max.min(mtu.saturating_sub(IPV4_UDP_HEADERS)),
            None => provider_max,
        }
    }

    pub(super) fn site(&self) -> Site {
        Site {
            owner: self.owner,
            provider: self.provider.clone(),
            interface: self.domain.clone(),
        }
    }

    /// Whether endpoints of this interface can read registered memory of their peers
    /// (`FI_RMA` with `FI_READ` among the capabilities the provider granted).
    pub fn rma(&self) -> bool {
        let caps = self.info.get().caps;
        caps & sys::FI_RMA as u64 != 0
            && (caps
                & (sys::FI_READ | sys::FI_WRITE | sys::FI_REMOTE_READ | sys::FI_REMOTE_WRITE)
                    as u64
                == 0
                || caps & sys::FI_READ as u64 != 0)
    }

    /// The endpoint type this interface was listed for.
    pub fn kind(&self) -> EndpointKind {
        self.kind
    }
}

/// Lists the IPv4 interfaces on which `provider` (any provider when `None`) offers
/// `FI_EP_DGRAM` endpoints with `FI_MSG`, for `owner`. An `FI_ENODATA` answer ("nothing
/// matches") is an error whose fix says how to get a provider.
pub fn dgram_interfaces(
    owner: Owner,
    provider: Option<&str>,
) -> Result<Vec<FabricInterface>, FabricError> {
    interfaces(EndpointKind::Datagram, owner, provider, 0)
}

/// Lists the domains on which `provider` (any provider when `None`; a layered name such as
/// `tcp;ofi_rxm` selects that stack) offers `FI_EP_RDM` endpoints with `FI_MSG`, for `owner`.
/// Unlike datagram interfaces, domains without an IPv4 address (efa, psm3, cxi) are listed
/// too.
///
/// With `rma`, the listing asks for `FI_RMA` too (reads of registered memory, see
/// [`crate::MsgEndpoint::read`]); when nothing offers it, the domains with `FI_MSG` alone
/// are listed ([`FabricInterface::rma`] tells them apart).
pub fn rdm_interfaces(
    owner: Owner,
    provider: Option<&str>,
    rma: bool,
) -> Result<Vec<FabricInterface>, FabricError> {
    if rma {
        match interfaces(EndpointKind::Reliable, owner, provider, sys::FI_RMA as u64) {
            Err(e) if e.is_no_data() => {}
            listed => return listed,
        }
    }
    interfaces(EndpointKind::Reliable, owner, provider, 0)
}

fn interfaces(
    kind: EndpointKind,
    owner: Owner,
    provider: Option<&str>,
    extra_caps: u64,
) -> Result<Vec<FabricInterface>, FabricError> {
    // libfabric reads its environment in the process's first fi_getinfo.
    super::environment::apply_before_first_use();
    let site = Site {
        owner,
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
            .with_fix(format!(
                "set {} to auto or a provider name",
                owner.provider_variable
            ))
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
        (*h).caps = sys::FI_MSG as u64 | extra_caps;
        (*h).mode = SUPPORTED_MODE;
        match kind {
            EndpointKind::Datagram => {
                (*h).addr_format = sys::FI_SOCKADDR_IN;
                (*(*h).ep_attr).type_ = sys::FI_EP_DGRAM;
            }
            // Any address format: the addresses are opaque bytes passed between peers.
            EndpointKind::Reliable => (*(*h).ep_attr).type_ = sys::FI_EP_RDM,
        }
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
            let var = owner.provider_variable;
            let fix = match (kind, provider) {
                (EndpointKind::Datagram, Some("usnic")) => format!(
                    "the usnic provider needs a Cisco VIC with the usnic driver; set {var}=udp \
                     to use kernel UDP instead"
                ),
                (EndpointKind::Datagram, Some(p)) => format!(
                    "no DGRAM endpoint from provider {p}: install libfabric1 with the udp \
                     provider (apt-get install libfabric1), or set {var}"
                ),
                (EndpointKind::Datagram, None) => format!(
                    "no DGRAM provider: install libfabric1 with the udp provider (apt-get \
                     install libfabric1), or set {var}"
                ),
                (EndpointKind::Reliable, Some(p)) => format!(
                    "no RDM endpoint with FI_MSG from provider {p} (is its device present and \
                     its libfabric provider installed?); set {var}=auto to take any"
                ),
                (EndpointKind::Reliable, None) => format!(
                    "no RDM provider: install libfabric1 (its tcp and ofi_rxm providers \
                     work on any Ethernet), or set {var}"
                ),
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
        let wanted = match kind {
            EndpointKind::Datagram => format == sys::FI_SOCKADDR_IN,
            EndpointKind::Reliable => true,
        };
        if wanted {
            if let Some(iface) = FabricInterface::from_entry(cur, kind, owner) {
                if kind == EndpointKind::Reliable || iface.ipv4().is_some() {
                    out.push(iface);
                }
            }
        }
        cur = next;
    }
    // SAFETY: the list came from fi_getinfo and is freed exactly once; our entries are copies.
    unsafe { sys::fi_freeinfo(list) };
    tracing::debug!(
        target: "fabric",
        component = owner.component,
        kind = ?kind,
        provider = provider.unwrap_or("any"),
        found = out.len(),
        "fi_getinfo listed interfaces"
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
