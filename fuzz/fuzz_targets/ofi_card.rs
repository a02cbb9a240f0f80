//! Fuzz target `ofi_card`. The checks live in the library
//! (`kestrel_ofi::fuzzing::card::fuzz_one`), so the unit tests replay this target's corpus
//! without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_ofi::fuzzing::card::fuzz_one(data);
});
