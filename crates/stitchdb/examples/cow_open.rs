//! What opening a store costs with a copy-on-write B+tree table (docs/cow-btree.md): its
//! reference counts are rebuilt, and its nodes loaded, by walking the written root, so the
//! open reads every node once. Loads N pairs (16-byte random keys, 100-byte values) into a
//! `cow-btree` table, checkpoints, closes, and times the reopen (the best of three), beside
//! the same data in the default VT-tree table.
//!
//! `cargo run --release -p stitchdb --example cow_open [N] [--dir DIR]` (default N: 1,000,000;
//! DIR: a temporary directory, on the disk to measure).

use std::time::Instant;
use stitchdb::{Db, Durability, Options, WriteBatch};

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut n: u64 = 1_000_000;
    let mut dir = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--dir" => dir = args.next().map(std::path::PathBuf::from),
            other => n = other.parse()?,
        }
    }
    let tmp = tempfile::tempdir_in(dir.unwrap_or_else(std::env::temp_dir))?;
    for layout in ["cow-btree", ""] {
        let path = tmp
            .path()
            .join(if layout.is_empty() { "vtree" } else { "cow" });
        let db = Db::create(&path, Options::default())?;
        let t = match layout {
            "" => db.default_table(),
            l => db.create_table_with_layout("t", l)?,
        };
        let started = Instant::now();
        for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
            let mut batch = WriteBatch::new();
            for &i in chunk {
                let key = [mix(i).to_be_bytes(), mix(i ^ 0x5555).to_be_bytes()].concat();
                batch.put(
                    t,
                    key,
                    mix(i ^ 0xabcd)
                        .to_le_bytes()
                        .repeat(12)
                        .into_iter()
                        .chain([0; 4])
                        .collect::<Vec<_>>(),
                );
            }
            db.write(&batch, Durability::Async)?;
        }
        db.flush()?;
        let load = started.elapsed();
        let nodes = db.check()?.nodes;
        db.close()?;
        let size = std::fs::metadata(&path)?.len();
        let mut best = f64::MAX;
        for _ in 0..3 {
            let started = Instant::now();
            let db = Db::open(&path, Options::default())?;
            best = best.min(started.elapsed().as_secs_f64());
            db.close()?;
        }
        println!(
            "{:<10} {n} pairs: loaded in {:.2} s, {} B+tree nodes, store {:.1} MiB, reopened in {:.3} s (best of 3)",
            if layout.is_empty() { "vt-tree" } else { layout },
            load.as_secs_f64(),
            nodes,
            size as f64 / (1 << 20) as f64,
            best
        );
    }
    Ok(())
}
