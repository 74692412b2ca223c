//! `Durability::Written`: a commit acknowledged with it survives a crash of the process (the
//! operating system keeps every write the process made: `SimDisk::process_crash`), however the
//! crash falls against memtable flushes, merges, checkpoints and log segment changes; `Async`
//! commits, whose log records wait in memory, do not (which shows the crash model tells the
//! two apart). Power loss after `Written` commits is covered by `crash.rs`.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use stitchdb::{Db, Durability, Options, SimConfig, SimDisk, WriteBatch};
use support::table_contents;

type State = BTreeMap<Vec<u8>, Vec<u8>>;

fn sim() -> Arc<SimDisk> {
    Arc::new(SimDisk::new(SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }))
}

/// Small zones and memtables, so a few thousand commits flush, merge, checkpoint and move the
/// log to new segments many times.
fn options(background: bool) -> Options {
    Options {
        zone_size: 64 * 1024,
        memtable_size: 8 * 1024,
        background,
        ..Options::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k{:05}", (i * 7919) % 3000).into_bytes()
}

fn value(i: u64) -> Vec<u8> {
    format!("v{i}-{}", "x".repeat((i % 90) as usize)).into_bytes()
}

/// Commits `commits` single-key batches with `durability`, taking a process-crash image after
/// every `every`th; returns each image with the state acknowledged when it was taken.
fn run(durability: Durability, commits: u64, every: u64) -> Vec<(SimDisk, State)> {
    let disk = sim();
    let db = Db::create_on(disk.clone(), options(false)).unwrap();
    let t = db.default_table();
    let mut state = State::new();
    let mut images = Vec::new();
    for i in 0..commits {
        let mut batch = WriteBatch::new();
        batch.put(t, key(i), value(i));
        db.write(&batch, durability).unwrap();
        state.insert(key(i), value(i));
        if i % every == every - 1 {
            images.push((disk.process_crash(), state.clone()));
        }
    }
    drop(db);
    images
}

/// [`reopen`] of a copy of `image` (a process crash of a disk no process runs on is the
/// disk itself).
fn reopen_copy(image: &SimDisk) -> State {
    reopen(image.process_crash())
}

fn reopen(image: SimDisk) -> State {
    let db = Db::open_on(Arc::new(image), options(false)).unwrap();
    db.check().unwrap();
    table_contents(&db, db.default_table())
}

#[test]
fn a_process_crash_keeps_every_written_commit() {
    let images = run(Durability::Written, 4000, 37);
    assert!(images.len() > 100);
    for (i, (image, acknowledged)) in images.into_iter().enumerate() {
        assert_eq!(reopen(image), acknowledged, "process crash {i}");
    }
}

#[test]
fn a_process_crash_may_lose_async_commits() {
    // The same workload with `Async`: records wait in memory, so some image lacks commits
    // acknowledged before it was taken. If none did, the crash model would not tell
    // `Written` from `Async` and the test above would prove nothing.
    let images = run(Durability::Async, 4000, 37);
    let lost = images
        .into_iter()
        .filter(|(image, acknowledged)| reopen_copy(image) != *acknowledged)
        .count();
    assert!(lost > 0, "no process crash lost an Async commit");
}

#[test]
fn concurrent_written_commits_survive_process_crashes_amid_background_work() {
    // Two writers commit with `Written` while background threads flush memtables, merge and
    // checkpoint; a third thread takes process-crash images. Each image must hold every
    // commit acknowledged before it was taken: each writer publishes its last acknowledged
    // commit, and the crasher reads those before it takes the image.
    let disk = sim();
    let db = Arc::new(Db::create_on(disk.clone(), options(true)).unwrap());
    let t = db.default_table();
    const PER_WRITER: u64 = 3000;
    let acked: Arc<[Mutex<Option<u64>>; 2]> = Arc::new([Mutex::new(None), Mutex::new(None)]);
    let done = Arc::new(AtomicBool::new(false));
    let writers: Vec<_> = (0..2u64)
        .map(|w| {
            let (db, acked) = (db.clone(), acked.clone());
            std::thread::spawn(move || {
                for i in 0..PER_WRITER {
                    let mut batch = WriteBatch::new();
                    batch.put(t, format!("w{w}-{i:05}"), value(i));
                    db.write(&batch, Durability::Written).unwrap();
                    *acked[w as usize].lock().unwrap() = Some(i);
                }
            })
        })
        .collect();
    let crasher = {
        let (disk, acked, done) = (disk.clone(), acked.clone(), done.clone());
        std::thread::spawn(move || {
            let mut images = Vec::new();
            while !done.load(Ordering::SeqCst) {
                let seen = [*acked[0].lock().unwrap(), *acked[1].lock().unwrap()];
                images.push((disk.process_crash(), seen));
                std::thread::sleep(std::time::Duration::from_millis(2));
            }
            images
        })
    };
    for w in writers {
        w.join().unwrap();
    }
    done.store(true, Ordering::SeqCst);
    let images = crasher.join().unwrap();
    assert!(!images.is_empty());
    for (n, (image, seen)) in images.into_iter().enumerate() {
        let got = reopen(image);
        for (w, last) in seen.iter().enumerate() {
            let Some(last) = last else { continue };
            for i in 0..=*last {
                assert_eq!(
                    got.get(format!("w{w}-{i:05}").as_bytes()),
                    Some(&value(i)),
                    "image {n}: writer {w}'s commit {i} was acknowledged before the crash"
                );
            }
        }
    }
    db.check().unwrap();
}
