//! libFuzzer target: `stitchdb_fuzz::extent`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::extent(data));
