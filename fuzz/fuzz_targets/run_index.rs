//! libFuzzer target: `stitchdb_fuzz::run_index`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::run_index(data));
