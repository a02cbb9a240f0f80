//! Point-to-point messaging layer: communicators, matching, eager/rendezvous protocols,
//! requests, datatypes, reduction ops and collective selection.
//!
//! It talks to transports only through the BTL contract of `kestrel-transport`, never to a
//! transport's internals.
