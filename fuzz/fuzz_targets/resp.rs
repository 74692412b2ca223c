//! libFuzzer target: `stitchdb_fuzz::resp`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::resp(data));
