//! Fuzz target for the reliable-datagram header decoder and the connection behind it. The
//! checks live in the library (`kestrel_reliable::fuzzing::fuzz_one`), so the unit tests
//! replay this target's corpus without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_reliable::fuzzing::fuzz_one(data);
});
