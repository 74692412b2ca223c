//! libFuzzer target: `stitchdb_fuzz::log_record`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::log_record(data));
