//! libFuzzer target: `stitchdb_fuzz::filter`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::filter(data));
