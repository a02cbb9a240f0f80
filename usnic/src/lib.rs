//! Inter-node transport over libfabric datagram endpoints (`usnic` or `udp` provider):
//! interface discovery, weighted bipartite interface matching, the reliable-datagram core and
//! multi-rail striping.
//!
//! All `unsafe` for libfabric will live in this crate's `-sys` and wrapper modules only.
