//! Fuzz target for the connect/accept frames and their reader. The checks live in the library
//! (`kestrel_runtime::fuzzing::dpm_oob::fuzz_one`), so the unit tests replay this target's
//! corpus without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_runtime::fuzzing::dpm_oob::fuzz_one(data);
});
