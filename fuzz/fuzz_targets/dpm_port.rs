//! Fuzz target for the port-name parser. The checks live in the library
//! (`kestrel_runtime::fuzzing::dpm_port::fuzz_one`), so the unit tests replay this target's
//! corpus without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_runtime::fuzzing::dpm_port::fuzz_one(data);
});
