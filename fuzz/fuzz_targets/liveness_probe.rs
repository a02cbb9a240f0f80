//! Fuzz target `liveness_probe`. The checks live in the library
//! (`kestrel_ofi::fuzzing::liveness::fuzz_one`), so the unit tests replay this target's corpus
//! without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_ofi::fuzzing::liveness::fuzz_one(data);
});
