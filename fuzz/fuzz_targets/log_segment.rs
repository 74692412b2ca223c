//! libFuzzer target: `stitchdb_fuzz::log_segment`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::log_segment(data));
