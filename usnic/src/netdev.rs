//! Interface facts that must come from the caller's network namespace.
//!
//! `/sys/class/net` shows the interfaces of the namespace that mounted `/sys`, not necessarily
//! the caller's: a process that entered a namespace with `nsenter --net` (as Slurm's
//! `slurmd` on namespace hosts does) sees the root namespace's interfaces there, possibly under
//! the same names as its own. This module owns the two checks that keep discovery honest:
//! the MTU asked of the kernel through a socket of the caller's namespace (`SIOCGIFMTU`), and
//! whether a sysfs entry really is the caller's interface (same interface index). It must
//! never hold a socket beyond one call. Its `unsafe` is the one `ioctl` call.

use std::os::fd::AsRawFd;

/// The MTU of `name` in the caller's network namespace, or `None` when there is no such
/// interface (or the name cannot be an interface name).
pub fn mtu(name: &str) -> Option<u32> {
    let bytes = name.as_bytes();
    if bytes.is_empty() || bytes.len() >= libc::IFNAMSIZ || bytes.contains(&0) {
        return None;
    }
    // Any socket of this namespace will do; unbound, it sends nothing.
    let socket = std::net::UdpSocket::bind((std::net::Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    // SAFETY: `ifreq` is plain old data (a name array and a union of integers and pointers
    // the kernel fills), so all-zero bytes are a valid value.
    let mut request: libc::ifreq = unsafe { std::mem::zeroed() };
    for (slot, b) in request.ifr_name.iter_mut().zip(bytes) {
        *slot = *b as libc::c_char;
    }
    // SAFETY: SIOCGIFMTU reads `ifr_name` (NUL-terminated: the name is shorter than IFNAMSIZ
    // and the rest is zero) and writes only `ifr_ifru.ifru_mtu` of the `ifreq` we own, during
    // the call; the descriptor is open for its duration.
    let rc = unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFMTU, &mut request) };
    if rc < 0 {
        return None;
    }
    // SAFETY: the kernel set the `ifru_mtu` member of the union on success.
    let mtu = unsafe { request.ifr_ifru.ifru_mtu };
    u32::try_from(mtu).ok().filter(|&m| m > 0)
}

/// Whether `/sys/class/net/NAME` describes the caller's interface `name` (and not one of
/// another namespace with the same name).
pub fn sysfs_is_ours(name: &str) -> bool {
    let Ok(ours) = nix::net::if_::if_nametoindex(name) else {
        return false;
    };
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()
        .and_then(|t| t.trim().parse::<u32>().ok())
        == Some(ours)
}

#[cfg(test)]
mod tests {
    #[test]
    fn loopback_has_an_mtu_and_strangers_have_none() {
        assert!(super::mtu("lo").is_some_and(|m| m >= 1500));
        assert_eq!(super::mtu("no-such-if0"), None);
        assert_eq!(super::mtu(""), None);
        assert_eq!(super::mtu("a-name-longer-than-ifnamsiz"), None);
        assert!(super::sysfs_is_ours("lo"));
        assert!(!super::sysfs_is_ours("no-such-if0"));
    }
}
