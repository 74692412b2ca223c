//! The shape of the levels. With `level_runs` = k, a level holds at most k - 1 runs at rest and
//! level i about R * k^i bytes: after n memtable flushes the run counts per level are the
//! base-k digits of n. A full level's merge carries through every level below it that the
//! merged run would fill in turn (within a bound), so a merge happens about once every k
//! flushes (a merge per level filled would take one per digit that rolls over), and each
//! tuple is written once per carry.

#![allow(clippy::unwrap_used)]

mod support;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use stitchdb::{Db, Durability, MemDisk, Options, Stitching, WriteBatch};
use support::table_contents;

fn digits(mut n: usize, base: usize) -> Vec<usize> {
    let mut d = Vec::new();
    while n > 0 {
        d.push(n % base);
        n /= base;
    }
    d
}

/// Flushes `flushes` memtables of random keys one at a time (inline merges), checking the
/// level shape and the merge count after each, then the contents.
fn fill_and_check_shape(level_runs: usize, stitching: Stitching, flushes: usize) {
    let opts = Options {
        level_runs,
        stitching,
        zone_size: 256 * 1024,
        // Large enough that only `flush` writes a memtable out.
        memtable_size: 64 << 20,
        background: false,
        durability: Durability::Async,
        ..Options::default()
    };
    let db = Db::create_on(std::sync::Arc::new(MemDisk::new(0)), opts).unwrap();
    let t = db.default_table();
    let mut rng = ChaCha8Rng::seed_from_u64(level_runs as u64);
    let mut model = BTreeMap::new();
    // The first flush count whose carry from level 0 would pass 32 times level 0's bytes.
    let mut first_deep_merge = level_runs;
    while first_deep_merge <= 32 * level_runs {
        first_deep_merge *= level_runs;
    }
    for n in 1..=flushes {
        let mut batch = WriteBatch::new();
        for _ in 0..200 {
            let k = format!("key{:06}", rng.gen_range(0..100_000)).into_bytes();
            let v = vec![n as u8; rng.gen_range(1..300)];
            batch.put(t, k.clone(), v.clone());
            model.insert(k, v);
        }
        db.write(&batch, Durability::Async).unwrap();
        db.flush().unwrap();
        let s = db.stats();
        assert_eq!(
            s.tables[0].levels,
            digits(n, level_runs),
            "runs per level after {n} flushes"
        );
        // One merge per `level_runs` flushes while a carry from level 0 stays within 32 times
        // level 0's bytes (a carry through level j writes about R * level_runs^(j+1)
        // bytes); past that, deeper levels also merge on their own, still fewer times than a
        // merge per level filled.
        let merges = s.merges as usize;
        let per_level = (n - digits(n, level_runs).iter().sum::<usize>()) / (level_runs - 1);
        // Runs differ in size, so a carry that just reaches the bound may stop short of it.
        if n * level_runs < first_deep_merge {
            assert_eq!(merges, n / level_runs, "merges after {n} flushes");
        } else {
            assert!(
                (n / level_runs..per_level).contains(&merges),
                "{merges} merges after {n} flushes (a merge per level filled: {per_level})"
            );
        }
    }
    let got = table_contents(&db, t);
    assert!(got == model, "contents differ");
    db.check().unwrap();
}

#[test]
fn two_runs_per_level_count_flushes_in_binary_with_one_merge_per_carry() {
    fill_and_check_shape(2, Stitching::default(), 140);
}

#[test]
fn three_runs_per_level_count_flushes_in_base_three() {
    fill_and_check_shape(3, Stitching::default(), 260);
}

#[test]
fn the_shape_holds_at_both_ends_of_the_stitching_continuum() {
    fill_and_check_shape(2, Stitching::Threshold(0), 20);
    fill_and_check_shape(2, Stitching::Never, 20);
}
