//! libFuzzer target: `stitchdb_fuzz::superblock`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::superblock(data));
