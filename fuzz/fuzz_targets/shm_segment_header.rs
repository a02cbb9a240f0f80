//! Fuzz target for a peer's shm segment header. The checks live in the library
//! (`kestrel_shm::fuzzing::segment_header::fuzz_one`), so the unit tests replay this target's
//! corpus without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_shm::fuzzing::segment_header::fuzz_one(data);
});
