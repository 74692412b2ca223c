//! Memtables are written out at the size they are configured to: a writer that fills one
//! freezes it and goes on into a fresh one while the flusher may still be busy (writing out
//! the previous one, or its manifest), instead of filling the full one further.

#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use stitchdb::{Db, Durability, MemDisk, Options};

#[test]
fn background_flushes_write_runs_of_the_configured_memtable_size() {
    let memtable_size = 64 << 10;
    let opts = Options {
        memtable_size,
        // No merges and no pacing: every run is one memtable's.
        level_runs: 1 << 20,
        slowdown_runs: 1 << 20,
        durability: Durability::Async,
        ..Options::default()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    let entries = 4000u32;
    let value = vec![0x5a_u8; 1000];
    for i in 0..entries {
        db.put(t, i.to_be_bytes(), &value).unwrap();
    }
    db.flush().unwrap();
    let stats = db.stats();
    let table = &stats.tables[0];
    let runs: usize = table.levels.iter().sum();
    assert_eq!(table.run_entries, u64::from(entries));
    assert_eq!(runs, db.flush_history().len());
    // About 4 MB of entries in 64 KiB memtables: 61 full ones and the rest. A memtable
    // takes the entry that fills it and at most one more (written while its writer found the
    // one frozen before it still being written out).
    let per_run = table.run_bytes / runs as u64;
    assert!(
        runs >= 61 && per_run <= memtable_size as u64 + 2048,
        "{runs} runs of {per_run} bytes on average"
    );
    for i in (0..entries).step_by(97) {
        assert_eq!(db.get(t, i.to_be_bytes()).unwrap(), Some(value.clone()));
    }
}
