//! The safe wrapper over libfabric message endpoints: datagram (`FI_EP_DGRAM`, the usnic
//! transport) and reliable-datagram (`FI_EP_RDM`, the ofi transport), both with `FI_MSG`.
//!
//! This module owns every libfabric object the transport uses (the `fi_info` of an interface,
//! fabric, domain, completion queue, address vector, memory registrations, endpoint), closes
//! them in dependency order on drop, and owns the pre-allocated send and receive buffer pools
//! the provider reads from and writes into. It is, with `kestrel-libfabric-sys`, the only place
//! allowed to use `unsafe` for libfabric; every block says why it is sound.
//!
//! Errors name the transport that uses the wrapper ([`Owner`]), so a user reads `usnic: ...`
//! or `ofi: ...`; logs go to the `fabric` target.
//!
//! It must never interpret datagram contents: received bytes are handed up exactly as they
//! arrived (a stranger's garbage included); the reliability layer above decodes and rejects.
//!
//! Provider differences are taken from the `fi_info` the provider returns, not from its name:
//! * `FI_MSG_PREFIX` in `mode` (usnic): every send and receive buffer starts with
//!   `msg_prefix_size` bytes owned by the provider; received lengths include them.
//! * `FI_MR_LOCAL` in `domain_attr.mr_mode` (usnic): the buffer pools are registered once and
//!   their descriptors passed with every operation.
//! * `FI_RMA` (reliable endpoints, when granted): peers read memory registered for them
//!   (`endpoint::rma`); `FI_MR_VIRT_ADDR` and `FI_MR_PROV_KEY` decide how a registration is
//!   named, `FI_MR_LOCAL` that the local side of a read is registered too.
//! * `FI_CONTEXT`/`FI_CONTEXT2` in `mode`: the provider may write into the operation context, so
//!   each slot has its own `fi_context2`, and a completion is mapped back to its slot by the
//!   context's position in that array (the context is never dereferenced).
//!
//! The `udp` provider (kernel UDP, anywhere) needs none of these, caps a datagram at 1472 bytes,
//! and makes progress inside `fi_cq_read` (one received datagram per call).
//!
//! Module map:
//! * `info`: listing the provider interfaces that carry messages ([`FabricInterface`],
//!   [`dgram_interfaces`], [`rdm_interfaces`]) and the `fi_info` copies behind them;
//! * `endpoint`: one open message endpoint ([`MsgEndpoint`]): its address vector, sends,
//!   receives and completions; `endpoint::open` creates it (fabric, domain, completion queue,
//!   address vector, endpoint, memory registrations); `endpoint::rma` the reads of peers'
//!   registered memory and the registrations peers read;
//! * `slots`: the page-aligned buffer pools and the per-slot operation contexts;
//! * `environment`: what libfabric reads from the environment when it starts (the provider
//!   filter and provider defaults the transports request), set once before the first listing;
//! * `fid`: libfabric objects closed on drop;
//! * `error`: [`FabricError`], [`SendError`] and the helpers that word them;
//! * `signals`: the crash-signal handlers provider libraries install at load time, put back
//!   to the default ([`restore_crash_signals`]).

#![cfg(feature = "libfabric")]

mod endpoint;
mod environment;
mod error;
mod fid;
mod info;
pub mod liveness;
mod signals;
mod slots;

pub use endpoint::{MemoryRegion, MsgEndpoint, PeerAddr, READ_DEPTH};
pub use environment::{core_provider, request_default, request_providers};
pub use error::{FabricError, Owner, SendError};
pub use info::{
    dgram_interfaces, rdm_interfaces, sockaddr_in_from_bytes, EndpointKind, FabricInterface,
};
pub use signals::restore_crash_signals;

#[cfg(test)]
mod tests {
    use super::endpoint::open::AV_SIZE_HINT;
    use super::*;
    use std::net::UdpSocket;
    use std::net::{Ipv4Addr, SocketAddrV4};
    use std::time::{Duration, Instant};

    const TEST_OWNER: Owner = Owner {
        component: "usnic",
        provider_variable: "KESTREL_USNIC_PROVIDER",
    };

    fn loopback_udp() -> FabricInterface {
        dgram_interfaces(TEST_OWNER, Some("udp"))
            .expect("the udp provider lists interfaces")
            .into_iter()
            .find(|i| i.ipv4() == Some(Ipv4Addr::LOCALHOST))
            .expect("the udp provider offers 127.0.0.1")
    }

    /// Polls `ep` until `want` datagrams arrived or five seconds passed.
    fn receive(ep: &mut MsgEndpoint, want: usize) -> Vec<Vec<u8>> {
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

    fn pair(depth: usize) -> (MsgEndpoint, MsgEndpoint, PeerAddr, PeerAddr) {
        let iface = loopback_udp();
        let mut a = MsgEndpoint::open(&iface, depth).unwrap();
        let mut b = MsgEndpoint::open(&iface, depth).unwrap();
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
        let mut a = MsgEndpoint::open(&iface, 4).unwrap();
        let mut b = MsgEndpoint::open(&iface, 64).unwrap();
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

    /// A reliable endpoint posts a delivered buffer again only at its next poll (off the path
    /// from a message to its answer): a burst many times its receive depth still arrives
    /// whole and in order, and every buffer goes back to the provider.
    #[test]
    fn a_reliable_endpoint_takes_bursts_far_beyond_its_receive_depth() {
        let iface = rdm_interfaces(TEST_OWNER, Some("tcp;ofi_rxm"), false)
            .expect("tcp;ofi_rxm lists domains")
            .into_iter()
            .find(|i| i.domain() == "lo")
            .expect("tcp;ofi_rxm offers loopback");
        let mut a = MsgEndpoint::open_sized(&iface, 4, 4096, false, false).unwrap();
        let mut b = MsgEndpoint::open_sized(&iface, 4, 4096, false, false).unwrap();
        let to_b = a.insert_peer(&b.address()).unwrap();
        let count = 400u32;
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sent = 0u32;
        let mut got = Vec::new();
        while got.len() < count as usize {
            assert!(
                Instant::now() < deadline,
                "{} of {count} arrived",
                got.len()
            );
            while sent < count {
                let fill = |buf: &mut [u8]| {
                    buf[..4].copy_from_slice(&sent.to_le_bytes());
                    4
                };
                match a.send_with(to_b, fill) {
                    Ok(()) => sent += 1,
                    Err(SendError::Full) => break,
                    Err(e) => panic!("send: {e}"),
                }
            }
            a.poll(|_| panic!("a received something")).unwrap();
            b.poll(|d| got.push(u32::from_le_bytes(d[..4].try_into().unwrap())))
                .unwrap();
        }
        assert_eq!(got, (0..count).collect::<Vec<_>>());
        // The buffers of the last poll go back at the next one, after which b may sleep.
        b.poll(|_| panic!("nothing more was sent")).unwrap();
        while a.free_tx_slots() < 4 {
            assert!(Instant::now() < deadline, "send completions never came");
            a.poll(|_| panic!("a received something")).unwrap();
        }
    }

    #[test]
    fn a_strangers_datagram_is_delivered_as_bytes() {
        let iface = loopback_udp();
        let mut ep = MsgEndpoint::open(&iface, 8).unwrap();
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
        let mut a = MsgEndpoint::open_inner(&iface, 8, usize::MAX, true, false, false).unwrap();
        let mut b = MsgEndpoint::open_inner(&iface, 8, usize::MAX, true, false, false).unwrap();
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
        let e = dgram_interfaces(TEST_OWNER, Some("no-such-provider")).unwrap_err();
        assert!(e.is_no_data(), "{e:?}");
        let text = e.to_string();
        assert!(text.contains("fi_getinfo"), "{text}");
        assert!(text.contains("KESTREL_USNIC_PROVIDER"), "{text}");
        assert!(text.contains("no-such-provider"), "{text}");
    }

    #[test]
    fn zero_depth_is_refused() {
        let e = MsgEndpoint::open(&loopback_udp(), 0).unwrap_err();
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
