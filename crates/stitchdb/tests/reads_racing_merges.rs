//! Point reads racing the writes, flushes and merges of another thread: a `get` returns a
//! value at least as new as any committed before it began, so one reader never sees a key go
//! back to an older value.

#![allow(clippy::unwrap_used)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use stitchdb::{Db, MemDisk, Options};

const KEYS: u64 = 4;

/// Sets the flag when dropped, so readers stop however the writer ends (a panic included).
struct StopOnDrop<'a>(&'a AtomicBool);

impl Drop for StopOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn a_get_never_returns_a_value_older_than_one_already_read() {
    // Each round meets the race some of the time (two rounds in three, before reads took the
    // table's view ahead of the snapshot); five make missing it unlikely.
    for _ in 0..5 {
        race();
    }
}

fn race() {
    // Small memtables and no background threads: the writer flushes and merges as it goes,
    // every few dozen writes, while the readers read.
    let db = Db::create_on(
        Arc::new(MemDisk::new(0)),
        Options {
            zone_size: 64 * 1024,
            memtable_size: 8 * 1024,
            background: false,
            ..Options::default()
        },
    )
    .unwrap();
    let t = db.create_table("t").unwrap();
    let rounds: u64 = std::env::var("STITCHDB_RACE_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let value = |i: u64| {
        let mut v = i.to_be_bytes().to_vec();
        v.resize(200, b'x');
        v
    };
    let done = AtomicBool::new(false);
    let reads = std::thread::scope(|s| {
        let readers: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    let mut last = [0u64; KEYS as usize];
                    let mut reads = 0u64;
                    while !done.load(Ordering::Acquire) {
                        for k in 0..KEYS {
                            let Some(v) = db.get(t, k.to_be_bytes()).unwrap() else {
                                continue;
                            };
                            let i = u64::from_be_bytes(v[..8].try_into().unwrap());
                            let seen = &mut last[k as usize];
                            assert!(i >= *seen, "key {k}: value {i} read after {seen}");
                            *seen = i;
                            reads += 1;
                        }
                    }
                    reads
                })
            })
            .collect();
        let stop = StopOnDrop(&done);
        for i in 1..=rounds {
            db.put(t, (i % KEYS).to_be_bytes(), value(i)).unwrap();
        }
        drop(stop);
        readers.into_iter().map(|r| r.join().unwrap()).sum::<u64>()
    });
    assert!(
        reads > 1000,
        "the readers ran alongside the writer ({reads} reads)"
    );
    let stats = db.stats();
    assert!(stats.merges > 10, "merges ran under the readers: {stats}");
}
