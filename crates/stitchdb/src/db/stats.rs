//! What `stitchdb stats` shows.

use super::Db;
use std::fmt;
use std::sync::atomic::Ordering;
use stitch_patch::CacheStats;
use stitch_zone::ZoneStats;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStats {
    pub name: String,
    pub runs: usize,
    pub run_entries: u64,
    /// Key and value bytes in runs.
    pub run_bytes: u64,
    pub memtable_bytes: usize,
}

#[derive(Debug, Clone)]
pub struct Stats {
    pub tables: Vec<TableStats>,
    pub zones: ZoneStats,
    pub cache: CacheStats,
    /// Sequence number of the newest commit.
    pub last_seq: u64,
    pub checkpoints: u64,
    pub merges: u64,
    /// Key and value bytes written to runs by checkpoints and merges.
    pub run_bytes_written: u64,
    /// Why the store is read-only, if a write failed.
    pub failure: Option<String>,
}

impl Db {
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let version = inner.version.read().clone();
        let tables = version
            .tables
            .values()
            .map(|t| TableStats {
                name: t.name.clone(),
                runs: t.runs.len(),
                run_entries: t.runs.iter().map(|r| r.meta.entries).sum(),
                run_bytes: t.runs.iter().map(|r| r.meta.data_bytes).sum(),
                memtable_bytes: t.mem.bytes() + t.imm.as_ref().map_or(0, |m| m.bytes()),
            })
            .collect();
        let ck = inner.checkpoint.lock();
        Stats {
            tables,
            zones: inner.zones.stats(),
            cache: inner.cache.stats(),
            last_seq: inner.visible_seq.load(Ordering::Acquire),
            checkpoints: ck.checkpoints,
            merges: ck.merges,
            run_bytes_written: ck.run_bytes_written,
            failure: inner.failure.lock().clone(),
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tables:")?;
        for t in &self.tables {
            writeln!(
                f,
                "  {:<20} runs {:>3}  entries {:>10}  bytes {:>12}  memtable {:>10}",
                t.name, t.runs, t.run_entries, t.run_bytes, t.memtable_bytes
            )?;
        }
        let z = &self.zones;
        writeln!(
            f,
            "zones: {} of {} bytes; {} free, {} log, {} extent zones",
            z.zones, z.zone_size, z.free_zones, z.owned_zones, z.extent_zones
        )?;
        let used = z.live_bytes + z.dead_bytes;
        let frag = if used == 0 {
            0.0
        } else {
            100.0 * z.dead_bytes as f64 / used as f64
        };
        writeln!(
            f,
            "extents: {} live, {} live bytes, {} dead bytes in extent zones ({frag:.1}% fragmentation)",
            z.live_extents, z.live_bytes, z.dead_bytes
        )?;
        let c = &self.cache;
        writeln!(
            f,
            "cache: {} live patches ({} bytes bookkeeping, {} undo) over {} dirty bytes; {} block writes, {} syncs",
            c.live_patches, c.patch_bytes, c.undo_bytes, c.dirty_bytes, c.block_writes, c.syncs
        )?;
        writeln!(
            f,
            "commits: last sequence {}; {} checkpoints, {} merges, {} bytes written to runs",
            self.last_seq, self.checkpoints, self.merges, self.run_bytes_written
        )?;
        if let Some(why) = &self.failure {
            writeln!(f, "READ-ONLY: {why}")?;
        }
        Ok(())
    }
}
