//! Opening a [`MsgEndpoint`]: the fabric, domain, completion queue and address vector, the
//! endpoint bound to them, the buffer pools (registered when the provider asks for
//! `FI_MR_LOCAL`), and every receive buffer posted.
//!
//! This module owns the order objects are created in and the limits negotiated with the
//! provider (queue depths, message prefix, datagram size). It must never send or receive.

use std::collections::VecDeque;
use std::ffi::c_void;
use std::os::fd::RawFd;
use std::ptr;

use kestrel_libfabric_sys as sys;

use super::MsgEndpoint;
use crate::error::{FabricError, Site};
use crate::fid::Fid;
use crate::info::{sockaddr_in_from_bytes, EndpointKind, FabricInterface, OwnedInfo};
use crate::slots::{Contexts, Pool};

/// Initial address-vector size: a hint, the providers' AVs grow past it.
pub(crate) const AV_SIZE_HINT: usize = 256;

/// Largest send slot or receive buffer: a bound on what one endpoint pins per slot.
const MAX_BUFFER: usize = 16 << 20;

impl MsgEndpoint {
    /// Opens an endpoint on `iface` with `depth` send slots and `depth` receive buffers (each
    /// clamped to what the provider allows), bound to the interface's address with a port the
    /// provider picks.
    pub fn open(iface: &FabricInterface, depth: usize) -> Result<Self, FabricError> {
        Self::open_inner(iface, depth, usize::MAX, false, false, false)
    }

    /// Opens an endpoint as [`MsgEndpoint::open`] does, with messages of at most
    /// `max_message` bytes: every send slot and receive buffer has that size. A reliable
    /// (`FI_EP_RDM`) endpoint needs this bound, its provider's own limit being unbounded.
    ///
    /// With `wait_fd`, the completion queue is opened with a file-descriptor wait object
    /// (`FI_WAIT_FD`) so that an idle owner can sleep in `poll(2)` until traffic arrives (see
    /// [`MsgEndpoint::wait_fd`]); a provider that refuses one gets a queue without, and the
    /// endpoint reports no descriptor.
    ///
    /// With `rma`, an interface listed with `FI_RMA` ([`FabricInterface::rma`]) opens an
    /// endpoint that reads peers' registered memory ([`MsgEndpoint::can_read`]); without, the
    /// RMA capabilities are dropped before the domain opens, so a provider does not pay for
    /// them on the message path.
    pub fn open_sized(
        iface: &FabricInterface,
        depth: usize,
        max_message: usize,
        wait_fd: bool,
        rma: bool,
    ) -> Result<Self, FabricError> {
        Self::open_inner(iface, depth, max_message, false, wait_fd, rma)
    }

    pub(crate) fn open_inner(
        iface: &FabricInterface,
        depth: usize,
        max_message: usize,
        force_registration: bool,
        wait_fd: bool,
        rma: bool,
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
            if !rma {
                let unused = (sys::FI_RMA
                    | sys::FI_READ
                    | sys::FI_WRITE
                    | sys::FI_REMOTE_READ
                    | sys::FI_REMOTE_WRITE) as u64;
                (*i).caps &= !unused;
                (*(*i).tx_attr).caps &= !unused;
                (*(*i).rx_attr).caps &= !unused;
            }
            let tx = depth.min((*(*i).tx_attr).size.max(1));
            let rx = depth.min((*(*i).rx_attr).size.max(1));
            (*(*i).tx_attr).size = tx;
            (*(*i).rx_attr).size = rx;
            (tx, rx, (*(*i).domain_attr).mr_mode)
        };
        if tx_depth < depth || rx_depth < depth {
            tracing::debug!(
                target: "fabric",
                interface = %site.interface,
                requested = depth,
                tx_depth,
                rx_depth,
                "queue depth clamped to the provider's limits"
            );
        }
        let register = force_registration || mr_mode & sys::FI_MR_LOCAL as i32 != 0;
        let prefix = iface.prefix_size();
        let max_datagram = iface.max_datagram().min(max_message);
        if max_datagram > MAX_BUFFER {
            return Err(FabricError::local(
                "fi_endpoint",
                &site,
                format!(
                    "messages of up to {max_datagram} bytes would need buffers larger than \
                     {MAX_BUFFER} bytes each"
                ),
            )
            .with_fix("open the endpoint with a smaller maximum message size"));
        }
        // A datagram provider may deliver up to its max_msg_size even when the link caps what we
        // send; a reliable one delivers only what peers sent, which this bound caps.
        let rx_capacity = match iface.kind() {
            EndpointKind::Datagram => iface.max_msg_size().max(max_datagram),
            EndpointKind::Reliable => max_datagram,
        };

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

        let rma = if rma && iface.kind() == EndpointKind::Reliable && iface.rma() {
            // SAFETY: domain_attr belongs to our copy and was checked non-null at listing.
            let key_bytes = unsafe { (*info.get().domain_attr).mr_key_size };
            match super::rma::Rma::new(mr_mode, key_bytes) {
                Ok(rma) => Some(rma),
                Err(e) => {
                    tracing::warn!(target: "fabric", interface = %site.interface, error = %e, "no random source for memory keys: this endpoint does no RMA");
                    None
                }
            }
        } else {
            None
        };
        let read_depth = if rma.is_some() { super::READ_DEPTH } else { 0 };
        let (cq, wait_fd) = open_cq(&domain, tx_depth + rx_depth + read_depth, wait_fd, &site)?;

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

        let mut endpoint = MsgEndpoint {
            ep,
            av,
            cq,
            tx_mr,
            rx_mr,
            rma,
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
            unposted: Vec::with_capacity(rx_depth),
            defer_reposts: iface.kind() == EndpointKind::Reliable,
            tx_depth,
            rx_depth,
            prefix,
            max_datagram,
            rx_capacity,
            address,
            site,
            wait_fd,
            spurious_wakes: 0,
        };
        for slot in 0..rx_depth {
            endpoint.post_receive(slot)?;
        }
        tracing::debug!(
            target: "fabric",
            provider = %endpoint.site.provider,
            interface = %endpoint.site.interface,
            address = ?sockaddr_in_from_bytes(&endpoint.address),
            tx_depth,
            rx_depth,
            prefix,
            max_datagram,
            registered = endpoint.is_registered(),
            rma = endpoint.can_read(),
            kind = ?iface.kind(),
            "message endpoint open"
        );
        Ok(endpoint)
    }
}

/// Opens the completion queue of `entries` entries, with a file-descriptor wait object when
/// `want_wait_fd` and the provider offers one; returns the queue and that descriptor.
fn open_cq(
    domain: &Fid<sys::fid_domain>,
    entries: usize,
    want_wait_fd: bool,
    site: &Site,
) -> Result<(Fid<sys::fid_cq>, Option<RawFd>), FabricError> {
    let open = |wait_obj| {
        let mut cq_attr = sys::fi_cq_attr {
            size: entries,
            format: sys::FI_CQ_FORMAT_MSG,
            wait_obj,
            ..Default::default()
        };
        let mut raw_cq = ptr::null_mut();
        // SAFETY: domain is open; cq_attr is a valid attribute struct living across the call.
        let ret =
            unsafe { sys::fi_cq_open(domain.as_ptr(), &mut cq_attr, &mut raw_cq, ptr::null_mut()) };
        Fid::adopt("fi_cq_open", site, ret, raw_cq).map_err(|e| {
            e.with_fix("lower the endpoint queue depth (the CQ holds one entry per buffer)")
        })
    };
    if want_wait_fd {
        match open(sys::FI_WAIT_FD) {
            Ok(cq) => {
                let mut fd: i32 = -1;
                // SAFETY: the CQ is open and has an FD wait object; FI_GETWAIT writes one int.
                let ret = unsafe {
                    sys::fi_control(
                        cq.fid(),
                        sys::FI_GETWAIT as i32,
                        (&mut fd as *mut i32).cast::<c_void>(),
                    )
                };
                if ret == 0 && fd >= 0 {
                    return Ok((cq, Some(fd)));
                }
                tracing::debug!(target: "fabric", interface = %site.interface, ret, "the completion queue has no wait descriptor; idle ranks will poll");
                return Ok((cq, None));
            }
            Err(e) => {
                tracing::debug!(target: "fabric", interface = %site.interface, error = %e, "no FI_WAIT_FD completion queue; opening one without a wait object");
            }
        }
    }
    Ok((open(sys::FI_WAIT_NONE)?, None))
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
    // SAFETY: the pool's memory outlives the registration (MsgEndpoint drops registrations
    // before pools); the domain is open.
    let ret = unsafe {
        sys::fi_mr_reg(
            domain.as_ptr(),
            pool.base_ptr() as *const c_void,
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
