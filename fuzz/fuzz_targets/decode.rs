//! Fuzzes the record decoder: every input goes through the checks of `fuzz/checks/decode.rs`,
//! which a stable test (`crates/state-core/tests/codec/fuzz_target.rs`) also runs over a seed
//! corpus and generated inputs, so that CI notices a target that fails at once.
#![no_main]

#[path = "../checks/decode.rs"]
mod checks;

libfuzzer_sys::fuzz_target!(|data: &[u8]| checks::check(data));
