//! libFuzzer target: `stitchdb_fuzz::model`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::model(data));
