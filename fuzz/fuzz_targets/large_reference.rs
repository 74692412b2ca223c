//! libFuzzer target: `stitchdb_fuzz::large_reference`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::large_reference(data));
