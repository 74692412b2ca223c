//! Group commit on a real file: `Sync` commits per second with 1 and with 16 threads.
//!
//! Each thread loops: append one 100-byte AUTOCOMMIT record, `sync_to` it. Run with
//! `cargo run --release -p stitch-wal --example group_commit [seconds per run] [dir]`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitch_io::{CountingDisk, FileDisk};
use stitch_patch::{BlockCache, CacheConfig};
use stitch_wal::{Flags, Wal};
use stitch_zone::{ZoneConfig, ZoneStore};

fn run(dir: &std::path::Path, threads: usize, secs: f64) -> Result<(), Box<dyn std::error::Error>> {
    let path = dir.join(format!("group-commit-{threads}.store"));
    let _ = std::fs::remove_file(&path);
    // Counts the syncs that reach the file.
    let disk = Arc::new(CountingDisk::new(Arc::new(FileDisk::create(&path)?)));
    let cache = Arc::new(BlockCache::new(disk.clone(), CacheConfig::default()));
    let zones = Arc::new(ZoneStore::create(cache, ZoneConfig::default())?);
    let wal = Arc::new(Wal::create(zones.clone(), 1, 1)?);
    zones.cache().flush_patch(wal.start_patch())?;
    let stop = Arc::new(AtomicBool::new(false));
    let syncs_before = disk.syncs();
    let started = Instant::now();
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (wal, stop) = (wal.clone(), stop.clone());
            std::thread::spawn(move || -> Result<u64, stitch_wal::WalError> {
                let payload = [t as u8; 100];
                let mut commits = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (lsn, _) = wal.append(t as u64, 1, Flags::AUTOCOMMIT, &payload)?;
                    wal.sync_to(lsn)?;
                    commits += 1;
                }
                Ok(commits)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(secs));
    stop.store(true, Ordering::Relaxed);
    let mut commits = 0;
    for w in workers {
        commits += w.join().map_err(|_| "worker panicked")??;
    }
    let elapsed = started.elapsed().as_secs_f64();
    let syncs = disk.syncs() - syncs_before;
    println!(
        "{threads:>2} thread(s): {:>9.0} Sync commits/s  ({commits} commits, {syncs} syncs, {:.1} commits per sync)",
        commits as f64 / elapsed,
        commits as f64 / syncs.max(1) as f64
    );
    drop((wal, zones));
    std::fs::remove_file(&path)?;
    Ok(())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let secs: f64 = args.next().map(|s| s.parse()).transpose()?.unwrap_or(3.0);
    let tmp;
    let dir = match args.next() {
        Some(d) => std::path::PathBuf::from(d),
        None => {
            tmp = tempfile::tempdir()?;
            tmp.path().to_path_buf()
        }
    };
    println!("group commit on {} ({secs} s per run)", dir.display());
    for threads in [1, 16] {
        run(&dir, threads, secs)?;
    }
    Ok(())
}
