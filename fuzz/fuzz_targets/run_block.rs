//! libFuzzer target: `stitchdb_fuzz::run_block`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::run_block(data));
