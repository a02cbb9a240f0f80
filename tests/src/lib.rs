//! Helpers for Kestrel's multi-process integration tests.
