//! Fuzz target `weights`: the contract in `fuzz/contracts.rs`.
#![no_main]

#[path = "../contracts.rs"]
mod contracts;

libfuzzer_sys::fuzz_target!(|data: &[u8]| contracts::weights(data));
