//! libFuzzer target: `stitchdb_fuzz::btree_node`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| stitchdb_fuzz::btree_node(data));
