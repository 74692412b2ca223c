//! libFuzzer target: `stitchdb_fuzz::bloom`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::bloom(data));
