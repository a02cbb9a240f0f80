//! Fuzz target for the PMI-1 and PMI-2 wire codecs. The checks live in the library
//! (`kestrel_runtime::fuzzing::pmi_wire::fuzz_one`), so the unit tests replay this target's
//! corpus without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_runtime::fuzzing::pmi_wire::fuzz_one(data);
});
