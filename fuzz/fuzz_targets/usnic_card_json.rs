//! Fuzz target for the usnic JSON card. The checks live in the library
//! (`kestrel_usnic::fuzzing::card_json::fuzz_one`), so the unit tests replay this target's
//! corpus without cargo-fuzz.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    kestrel_usnic::fuzzing::card_json::fuzz_one(data);
});
