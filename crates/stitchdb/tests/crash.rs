//! Crash test: run a seeded workload on a `SimDisk`, capture crash images at random moments
//! (inside writes and syncs, mid-checkpoint and mid-merge included), reopen each one and
//! check the invariant: the store holds exactly a prefix of the commit order that includes
//! every acknowledged `Sync` commit, and `check` passes. A share of the images are process
//! crashes instead (every write the process made survives, synced or not): those must also
//! include every acknowledged `Written` commit. Some crash images are reopened
//! through a second crashing disk too, so recovery itself is crashed and must still converge.
//!
//! Half the commits are transactions (some large, spanning several log records), some
//! commits start with a range delete, some are sorted stretches of puts (ingested as runs of
//! their own when written as a batch), and transactions that abort come between them: those
//! must never be seen.
//!
//! STITCHDB_CRASH_STATES sets how many crash states to verify (default 5000).

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitchdb::{Db, Durability, Isolation, Options, SimDisk, Stitching, WriteBatch};
use support::{random_write, table_contents, CrashingDisk};

type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// The key that records which commit last reached the store (each commit writes it).
const MARKER: &[u8] = b"\x00commit";

/// The stitching threshold varies by seed: every block stitched that can be, spans of two
/// blocks or more, never.
fn options(seed: u64) -> Options {
    let stitching = [
        Stitching::Threshold(0),
        Stitching::Threshold(8192),
        Stitching::Never,
    ][(seed % 3) as usize];
    Options {
        stitching,
        zone_size: 64 * 1024,
        memtable_size: 6 * 1024,
        level_runs: 2,
        // Half the seeds: large transactions spill to private runs and commit by linking.
        txn_memory: if seed % 2 == 0 { 4096 } else { 64 << 20 },
        // Sorted stretches of a few KiB are ingested as runs of their own.
        ingest_min_bytes: 2048,
        background: false,
        ..Options::default()
    }
}

/// The layout of the table the workload writes, by seed: the default table as it is, or a
/// table made with a layout that holds every write of the workload (specialized formats
/// under `exception`; the commit marker's 8-byte values are what `fixed(8)` is for; a few of
/// the workload's values are what a coding or `empty` takes, the rest its versions section
/// holds; not `delta-integer`, which refuses values that are not 4 bytes).
const LAYOUTS: &[&str] = &[
    "",
    "managed -> exception -> fixed(8) -> linear",
    "managed -> bloom -> cache(keys=16) -> btree -> linear",
    "managed -> btree(node=1024) -> exception -> unique-string(max=4, len=64) -> linear",
    "managed -> linear",
    "managed -> btree(node=1024) -> exception -> small-integer(2) -> fixed(2) -> linear",
    "managed -> bloom -> exception -> empty -> linear",
    "managed -> exception -> state-dictionary -> fixed(1) -> linear",
    // The commit marker in the first region; range deletes and transactions cross the others.
    "partition(at=\"k1\", at=\"k3\") -> [managed -> exception -> fixed(8) -> linear \
     | managed -> bloom -> btree(node=1024) -> linear | managed -> linear]",
];

fn layout(seed: u64) -> &'static str {
    LAYOUTS[(seed / 3 % LAYOUTS.len() as u64) as usize]
}

/// The table the workload writes: made (before any crash can happen) unless the seed's
/// layout is the default table's.
fn workload_table(db: &Db, seed: u64) -> stitchdb::TableId {
    match layout(seed) {
        "" => db.default_table(),
        layout => db.create_table_with_layout("laid-out", layout).unwrap(),
    }
}

/// What the workload's table holds in a reopened store (made before any crash).
fn contents(db: &Db, seed: u64) -> State {
    let table = match layout(seed) {
        "" => db.default_table(),
        _ => db.table("laid-out").unwrap(),
    };
    table_contents(db, table)
}

/// Runs the workloads ingested, summed (so the test knows it crashed around some).
static INGESTED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Commits refused for want of room, summed over the workloads on a small disk.
static REFUSED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// One seed in four runs on a disk of 16 zones, which its writes keep full: commits are
/// refused, and refused writers reclaim room (merging and evacuating) while images are taken.
fn capacity(seed: u64) -> Option<u64> {
    (seed % 4 == 3).then_some(16 * 64 * 1024)
}

/// Whether `r` failed only because the store had no room (allowed on a small disk).
fn refused<T>(seed: u64, r: &stitchdb::Result<T>) -> bool {
    match r {
        Err(e) if capacity(seed).is_some() && e.is_no_space() => {
            REFUSED.fetch_add(1, Ordering::SeqCst);
            true
        }
        _ => false,
    }
}

/// Runs one seeded workload; returns the state after each commit (index = commit number) and
/// the crash images captured.
fn workload(seed: u64, commits: u64) -> (Vec<State>, Vec<(SimDisk, u64, u64)>) {
    // Crashes during creation are covered by `a_crash_during_creation_is_a_clear_error`.
    let disk = CrashingDisk::new(seed);
    let db = Db::create_on(disk.clone(), options(seed)).unwrap();
    let t = workload_table(&db, seed);
    disk.sim.set_capacity(capacity(seed));
    *disk.probability.lock() = 0.04;
    *disk.process_share.lock() = 0.3;
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let mut states = vec![State::new()];
    let mut state = State::new();
    for _ in 0..commits {
        // The commit's number: commits refused for room take none.
        let n = states.len() as u64;
        // Most commits are a few writes; some are large (spanning several log records).
        let ops = if rng.gen_bool(0.05) {
            rng.gen_range(50..300)
        } else {
            rng.gen_range(1..4)
        };
        // Some commits start with a range delete (the writes after it win inside it).
        let range = rng.gen_bool(0.1).then(|| {
            let (a, b) = (rng.gen_range(0..40), rng.gen_range(0..40));
            let (lo, hi) = (a.min(b), a.max(b) + 1);
            (
                format!("k{lo:02}").into_bytes(),
                format!("k{hi:02}").into_bytes(),
            )
        });
        if let Some((lo, hi)) = &range {
            state.retain(|k, _| !(lo <= k && k < hi));
        }
        let mut writes: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        // Some commits are a sorted stretch of puts (ingested, as a batch, unless a memtable
        // holds one of its keys).
        let sorted = rng.gen_bool(0.15).then(|| {
            let lo = rng.gen_range(0..36);
            (lo, rng.gen_range(lo + 2..=40))
        });
        for k in sorted.map_or(0..0, |(lo, hi)| lo..hi) {
            let k = format!("k{k:02}").into_bytes();
            let v: Vec<u8> = (0..rng.gen_range(200..1500)).map(|_| rng.gen()).collect();
            writes.push((k.clone(), Some(v.clone())));
            state.insert(k, v);
        }
        let ops = if sorted.is_some() { 0 } else { ops };
        for _ in 0..ops {
            writes.push(random_write(&mut rng, &mut state));
        }
        writes.push((MARKER.to_vec(), Some(n.to_be_bytes().to_vec())));
        state.insert(MARKER.to_vec(), n.to_be_bytes().to_vec());
        let durability = match rng.gen_range(0..10) {
            0..=2 => Durability::Sync,
            3..=4 => Durability::Written,
            5..=6 => Durability::Ordered,
            _ => Durability::Async,
        };
        if rng.gen_bool(0.1) {
            // A transaction that aborts: none of it may ever be seen.
            let iso = match rng.gen_bool(0.5) {
                true => Isolation::Snapshot,
                false => Isolation::Locking,
            };
            let mut txn = db.begin(iso).unwrap();
            for i in 0..rng.gen_range(1..200) {
                // A spill may find no room on a small disk.
                let put = txn.put(t, format!("k{:02}", i % 40), b"aborted");
                if !refused(seed, &put) {
                    put.unwrap();
                }
            }
            txn.abort();
        }
        disk.issued.store(n, Ordering::SeqCst);
        if rng.gen_bool(0.5) {
            let mut batch = WriteBatch::new();
            if let Some((lo, hi)) = range {
                batch.delete_range(t, lo, hi);
            }
            for (k, v) in writes {
                match v {
                    Some(v) => batch.put(t, k, v),
                    None => batch.delete(t, k),
                }
            }
            let written = db.write(&batch, durability);
            if refused(seed, &written) {
                state = states.last().unwrap().clone();
                continue;
            }
            written.unwrap();
        } else {
            let iso = match rng.gen_bool(0.5) {
                true => Isolation::Serializable,
                false => Isolation::Locking,
            };
            let mut txn = db.begin(iso).unwrap();
            let mut made = Ok(());
            if let Some((lo, hi)) = range {
                made = txn.delete_range(t, lo, hi);
            }
            for (k, v) in writes {
                if made.is_err() {
                    break;
                }
                made = match v {
                    Some(v) => txn.put(t, k, v),
                    None => txn.delete(t, k),
                };
            }
            let committed = made.and_then(|()| txn.commit_with(durability));
            if refused(seed, &committed) {
                state = states.last().unwrap().clone();
                continue;
            }
            committed.unwrap();
        }
        if durability == Durability::Sync {
            disk.acked.store(n, Ordering::SeqCst);
        }
        if matches!(durability, Durability::Sync | Durability::Written) {
            disk.handed.store(n, Ordering::SeqCst);
        }
        states.push(state.clone());
        if rng.gen_bool(0.03) {
            let flushed = db.flush();
            if !refused(seed, &flushed) {
                flushed.unwrap();
            }
        } else if rng.gen_bool(0.05) {
            // A manifest that does not move the checkpoint (and retires what merges replaced):
            // ingested runs merged away must outlive it, as the log still names them.
            db.set_stitching(t, options(seed).stitching).unwrap();
        }
    }
    INGESTED.fetch_add(db.stats().ingested_runs, Ordering::SeqCst);
    db.close().unwrap();
    let images = std::mem::take(&mut *disk.images.lock());
    (states, images)
}

/// Opens a crash image and checks the prefix invariant; returns the prefix length found.
fn verify(image: SimDisk, seed: u64, acked: u64, issued: u64, states: &[State], what: &str) -> u64 {
    let db = Db::open_on(Arc::new(image), options(seed))
        .unwrap_or_else(|e| panic!("{what}: reopen failed: {e}"));
    let got = contents(&db, seed);
    let n = got
        .get(MARKER)
        .map_or(0, |v| u64::from_be_bytes(v.as_slice().try_into().unwrap()));
    assert!(
        n >= acked,
        "{what}: commit {acked} was acknowledged as durable but the store holds only {n}"
    );
    assert!(
        n <= issued,
        "{what}: the store holds commit {n}, but only {issued} were issued"
    );
    assert_eq!(
        got, states[n as usize],
        "{what}: the store is not the prefix ending at commit {n}"
    );
    db.check()
        .unwrap_or_else(|e| panic!("{what}: check failed: {e}"));
    n
}

fn target_states() -> usize {
    support::env_count("STITCHDB_CRASH_STATES", 5000)
}

#[test]
fn every_crash_state_is_a_prefix_with_every_acknowledged_commit() {
    let target = target_states();
    let mut verified = 0usize;
    let mut recovery_crashes = 0usize;
    let mut prefixes = std::collections::BTreeSet::new();
    let mut seed = 0u64;
    while verified < target {
        seed += 1;
        let (states, images) = workload(seed, 150);
        for (i, (image, acked, issued)) in images.into_iter().enumerate() {
            let what = format!("seed {seed} image {i}");
            if i % 8 == 0 {
                // Crash the recovery of this image too: every image of the recovery must open
                // to the same prefix the uninterrupted recovery finds.
                let expected = verify(image.crash(0), seed, acked, issued, &states, &what);
                let again = CrashingDisk::over(image, seed * 1000 + i as u64, 0.2);
                let db = Db::open_on(again.clone(), options(seed)).unwrap();
                drop(db);
                for (j, (inner, _, _)) in again.images.lock().drain(..).enumerate() {
                    let n = verify(
                        inner,
                        seed,
                        expected,
                        expected,
                        &states,
                        &format!("{what} recovery crash {j}"),
                    );
                    assert_eq!(n, expected);
                    recovery_crashes += 1;
                    verified += 1;
                }
                prefixes.insert(expected);
            } else {
                prefixes.insert(verify(image, seed, acked, issued, &states, &what));
            }
            verified += 1;
        }
    }
    eprintln!(
        "verified {verified} crash states ({recovery_crashes} during recovery) from {seed} workloads; {} distinct prefixes",
        prefixes.len()
    );
    assert!(recovery_crashes > 0, "recovery itself was crashed");
    let ingested = INGESTED.load(Ordering::SeqCst);
    let refused = REFUSED.load(Ordering::SeqCst);
    eprintln!("the workloads ingested {ingested} runs; {refused} commits were refused for room");
    assert!(ingested > 0, "some sorted stretches were ingested");
    assert!(refused > 0, "the small disks filled");
    assert!(
        prefixes.len() > 50,
        "crashes landed at many different points"
    );
}

#[test]
fn a_crash_during_creation_is_a_clear_error_or_an_empty_store() {
    let (mut empty, mut unfinished) = (0, 0);
    for seed in 0..200 {
        let disk = CrashingDisk::new(seed);
        *disk.probability.lock() = 0.3;
        Db::create_on(disk.clone(), options(seed))
            .unwrap()
            .close()
            .unwrap();
        for (image, _, _) in disk.images.lock().drain(..) {
            match Db::open_on(Arc::new(image), options(seed)) {
                Ok(db) => {
                    assert!(table_contents(&db, db.default_table()).is_empty());
                    db.check().unwrap();
                    empty += 1;
                }
                Err(e) => {
                    let text = e.to_string();
                    assert!(
                        text.contains("creation never finished")
                            || text.contains("not a StitchDB store"),
                        "seed {seed}: {text}"
                    );
                    unfinished += 1;
                }
            }
        }
    }
    assert!(
        empty > 0 && unfinished > 0,
        "{empty} empty, {unfinished} unfinished"
    );
}

#[test]
fn ingested_runs_merged_away_stay_readable_until_a_checkpoint_covers_their_records() {
    // Two ingested runs are merged away, and a manifest that does not move the checkpoint
    // (set_stitching) retires them; the log written after it fills freed zones. Recovery
    // replays the ingest records and reads their runs: their extents must still be theirs.
    let opts = Options {
        zone_size: 64 * 1024,
        memtable_size: 1 << 20,
        level_runs: 2,
        ingest_min_bytes: 2048,
        stitching: Stitching::Threshold(0),
        background: false,
        ..Options::default()
    };
    let sim = Arc::new(SimDisk::new(stitchdb::SimConfig {
        seed: 7,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(sim.clone(), opts.clone()).unwrap();
    let t = db.default_table();
    let mut model = State::new();
    for prefix in ["a", "b", "c"] {
        let mut batch = WriteBatch::new();
        for i in 0..40 {
            let (k, v) = (format!("{prefix}{i:03}").into_bytes(), vec![i as u8; 1500]);
            batch.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        db.write(&batch, Durability::Async).unwrap();
    }
    let stats = db.stats();
    assert_eq!(stats.ingested_runs, 3);
    assert!(stats.merges > 0, "the ingested runs were merged");
    db.set_stitching(t, Stitching::Threshold(0)).unwrap();
    for i in 0..3000u32 {
        let (k, v) = (format!("f{i:05}").into_bytes(), vec![7u8; 60]);
        db.put(t, &k, &v).unwrap();
        model.insert(k, v);
    }
    db.sync().unwrap();
    assert_eq!(
        db.stats().checkpoints,
        stats.checkpoints + 1,
        "no checkpoint since"
    );
    let image = sim.crash(1);
    drop(db);
    let db = Db::open_on(Arc::new(image), opts).unwrap();
    assert!(
        table_contents(&db, db.default_table()) == model,
        "the store holds what was written"
    );
    db.check().unwrap();
}
