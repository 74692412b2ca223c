//! What `stitchdb stats` shows.

use super::compact::CompactionStats;
use super::Db;
use crate::layout::TableData;
use crate::options::Stitching;
use crate::version::{is_region, region_id, TableState, Version};
use std::fmt;
use std::sync::atomic::Ordering;
use stitch_patch::CacheStats;
use stitch_zone::{ExtentKind, ZoneStats};

/// One table's part of [`Stats`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStats {
    /// The table's name.
    pub name: String,
    /// How its merges stitch.
    pub stitching: Stitching,
    /// Its layout (docs/layouts.md), every parameter written out.
    pub layout: String,
    /// Runs in each level, level 0 first.
    pub levels: Vec<usize>,
    /// Entries in its runs (old versions included).
    pub run_entries: u64,
    /// Payload bytes of the runs' blocks.
    pub run_bytes: u64,
    /// Bytes in its memtables (the live one and one being written out).
    pub memtable_bytes: usize,
    /// Its layout's `cache` of point lookups in the runs, if it has one.
    pub record_cache: Option<RecordCacheStats>,
    /// A partitioned table's regions in key order, each one's figures (named `region N`,
    /// from 1); the table's runs, entries and bytes are their sums. Empty for other tables.
    pub regions: Vec<TableStats>,
}

impl TableStats {
    /// A table's own figures.
    fn of(t: &TableState) -> TableStats {
        TableStats {
            name: t.name.clone(),
            stitching: t.data.stitching(),
            layout: t.layout.to_string(),
            // A B+tree has no levels (nor runs, nor a record cache).
            levels: t
                .data
                .vtree()
                .map_or_else(Vec::new, |v| v.levels.iter().map(Vec::len).collect()),
            run_entries: t.data.runs().map(|r| r.meta.entries).sum(),
            run_bytes: t.data.runs().map(|r| r.meta.data_bytes).sum(),
            memtable_bytes: t.data.memory_bytes(),
            record_cache: t.data.vtree().and_then(|v| v.cache.as_ref()).map(|c| {
                let (held, hits, misses) = c.counts();
                RecordCacheStats { held, hits, misses }
            }),
            regions: Vec::new(),
        }
    }

    /// A user's table: a partitioned one with its regions' figures, and their sums.
    fn of_table(version: &Version, t: &TableState) -> TableStats {
        let mut stats = TableStats::of(t);
        let Some(p) = t.layout.partition() else {
            return stats;
        };
        for i in 0..p.regions.len() {
            let Ok(region) = version.table(region_id(t.id, i)) else {
                continue;
            };
            let mut r = TableStats::of(region);
            r.name = format!("region {}", i + 1);
            if stats.levels.len() < r.levels.len() {
                stats.levels.resize(r.levels.len(), 0);
            }
            for (sum, runs) in stats.levels.iter_mut().zip(&r.levels) {
                *sum += runs;
            }
            stats.run_entries += r.run_entries;
            stats.run_bytes += r.run_bytes;
            stats.memtable_bytes += r.memtable_bytes;
            stats.regions.push(r);
        }
        stats
    }

    /// Its lines of `stitchdb stats`, indented by `indent`.
    fn write(&self, f: &mut fmt::Formatter<'_>, indent: usize) -> fmt::Result {
        let levels: Vec<String> = self.levels.iter().map(usize::to_string).collect();
        let pad = "";
        writeln!(
            f,
            "{pad:indent$}{:<16} runs per level [{}]  entries {}  bytes {}  memtable {}  ({})",
            self.name,
            levels.join(" "),
            self.run_entries,
            self.run_bytes,
            self.memtable_bytes,
            self.stitching
        )?;
        writeln!(f, "{pad:indent$}{:<16} layout {}", "", self.layout)?;
        if let Some(c) = self.record_cache {
            writeln!(
                f,
                "{pad:indent$}{:<16} cache holds {} lookups; {} hits, {} misses ({:.1}% hits)",
                "",
                c.held,
                c.hits,
                c.misses,
                percent(c.hits, c.hits + c.misses)
            )?;
        }
        self.regions.iter().try_for_each(|r| r.write(f, indent + 2))
    }
}

/// A table's cache of point lookups (a layout's `cache` module) since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RecordCacheStats {
    /// Lookups it holds now.
    pub held: usize,
    /// Lookups in a run it answered.
    pub hits: u64,
    /// Lookups in a run it did not hold, which read the run.
    pub misses: u64,
}

/// How often and for how long writers were held back since the store was opened, by cause:
/// where a commit's time went beyond its own work.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStalls {
    /// Commits that waited for a full memtable to be written out before theirs could be
    /// frozen (memory stays at about two memtables a table).
    pub backlog_waits: u64,
    /// Their time together.
    pub backlog: std::time::Duration,
    /// Sleeps of writers slowed while merges were behind.
    pub paced_sleeps: u64,
    /// Their time together.
    pub paced: std::time::Duration,
}

/// Bytes of extents written since the store was opened (headers included), by what they hold:
/// where a workload's writes go, beside the log.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct AppendedBytes {
    /// Runs' data blocks.
    pub run_blocks: u64,
    /// Runs' indexes.
    pub run_indexes: u64,
    /// Runs' quotient filters.
    pub run_filters: u64,
    /// Manifests.
    pub manifests: u64,
}

impl AppendedBytes {
    fn from_zones(zones: &ZoneStats) -> AppendedBytes {
        let mut a = AppendedBytes::default();
        for &(kind, bytes) in &zones.appended {
            let slot = match kind {
                ExtentKind::RUN_BLOCK => &mut a.run_blocks,
                ExtentKind::RUN_INDEX => &mut a.run_indexes,
                ExtentKind::RUN_FILTER => &mut a.run_filters,
                ExtentKind::MANIFEST => &mut a.manifests,
                _ => continue,
            };
            *slot += bytes;
        }
        a
    }

    /// Every kind together.
    pub fn total(&self) -> u64 {
        self.run_blocks + self.run_indexes + self.run_filters + self.manifests
    }

    /// What was appended after `before` was taken.
    pub fn since(&self, before: &AppendedBytes) -> AppendedBytes {
        AppendedBytes {
            run_blocks: self.run_blocks.saturating_sub(before.run_blocks),
            run_indexes: self.run_indexes.saturating_sub(before.run_indexes),
            run_filters: self.run_filters.saturating_sub(before.run_filters),
            manifests: self.manifests.saturating_sub(before.manifests),
        }
    }
}

impl TableStats {
    /// Runs in every level.
    pub fn runs(&self) -> usize {
        self.levels.iter().sum()
    }
}

/// What `stitchdb stats` shows: the tables' shapes, the zones, the block cache, and what
/// checkpoints and merges did since the store was opened.
#[derive(Debug, Clone)]
pub struct Stats {
    /// Every table, by name.
    pub tables: Vec<TableStats>,
    /// The zone store: zones in use, live bytes, reuse.
    pub zones: ZoneStats,
    /// The block cache: hits, misses, writes, syncs.
    pub cache: CacheStats,
    /// Sequence number of the newest commit.
    pub last_seq: u64,
    /// Manifests written (memtable flushes and merges).
    pub checkpoints: u64,
    /// Merges done.
    pub merges: u64,
    /// Merges that started while another merge was running.
    pub merges_alongside: u64,
    /// Bytes memtable flushes wrote to runs.
    pub flushed_bytes: u64,
    /// Transactions that outgrew their memory and committed by linking their private runs,
    /// and the bytes of those runs (written once, when spilled).
    pub linked_commits: u64,
    /// Bytes of the linked runs (see `linked_commits`).
    pub linked_bytes: u64,
    /// Runs written straight from batches' long sorted stretches of puts (ingested: their
    /// values never went through the log or a memtable), and their bytes.
    pub ingested_runs: u64,
    /// Bytes of the ingested runs (see `ingested_runs`).
    pub ingested_bytes: u64,
    /// Bytes merges wrote anew, and bytes they stitched in without rewriting.
    pub merge_copied_bytes: u64,
    /// Bytes merges stitched in without rewriting (see `merge_copied_bytes`).
    pub merge_stitched_bytes: u64,
    /// Merges whose new run lists its inputs' index extents rather than writing its own.
    pub merge_shared_indexes: u64,
    /// Runs merged away by merges installed since the newest manifest, which still lists
    /// them (the next manifest retires them; until then a crash reopens them).
    pub runs_awaiting_manifest: usize,
    /// Parsed run blocks in the read cache, and the bytes they take.
    pub read_cache_blocks: usize,
    /// Bytes the read cache's blocks take (see `read_cache_blocks`).
    pub read_cache_bytes: usize,
    /// Extent bytes written since open, by kind.
    pub appended: AppendedBytes,
    /// Writers held back since open.
    pub stalls: WriteStalls,
    /// Why the store is read-only, if a write failed.
    pub failure: Option<String>,
}

impl Db {
    /// What the store looks like now, and what it did since it was opened.
    pub fn stats(&self) -> Stats {
        let inner = &self.inner;
        let version = inner.version.read().clone();
        let tables = version
            .tables
            .values()
            // Large values' hidden tables are their tables' business, as regions are.
            .filter(|t| !is_region(&t.name) && !super::large::is_hidden(&t.name))
            .map(|t| TableStats::of_table(&version, t))
            .collect();
        let (checkpoints, flushed_bytes, linked, ingested, runs_awaiting_manifest) = {
            let ck = inner.checkpoint.lock();
            (
                ck.checkpoints,
                ck.run_bytes_written,
                (ck.linked_commits, ck.linked_bytes),
                (ck.ingested_runs, ck.ingested_bytes),
                ck.deferred.len(),
            )
        };
        let CompactionStats {
            merges,
            alongside,
            copied_bytes,
            stitched_bytes,
            shared_indexes,
        } = *inner.compaction.lock();
        let (read_cache_blocks, read_cache_bytes) = inner.storage.cache.usage();
        let zones = inner.zones.stats();
        Stats {
            tables,
            appended: AppendedBytes::from_zones(&zones),
            zones,
            cache: inner.cache.stats(),
            last_seq: inner.visible_seq.load(Ordering::Acquire),
            checkpoints,
            merges,
            merges_alongside: alongside,
            flushed_bytes,
            linked_commits: linked.0,
            linked_bytes: linked.1,
            ingested_runs: ingested.0,
            ingested_bytes: ingested.1,
            merge_copied_bytes: copied_bytes,
            merge_stitched_bytes: stitched_bytes,
            merge_shared_indexes: shared_indexes,
            runs_awaiting_manifest,
            read_cache_blocks,
            read_cache_bytes,
            stalls: inner.stalls.read(),
            failure: inner.failure.lock().clone(),
        }
    }
}

impl fmt::Display for Stitching {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stitching::Threshold(bytes) => write!(f, "stitch spans >= {bytes} B"),
            Stitching::Never => f.write_str("never stitch"),
        }
    }
}

/// `part` as a percentage of `whole` (0 when there is no whole).
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(f, "tables:")?;
        for t in &self.tables {
            t.write(f, 2)?;
        }
        let merged = self.merge_copied_bytes + self.merge_stitched_bytes;
        let stitched_pct = percent(self.merge_stitched_bytes, merged);
        writeln!(
            f,
            "merges: {} ({} beside another, {} sharing their inputs' index; {} merged runs await the next manifest); {} bytes copied, {} bytes stitched ({stitched_pct:.1}% stitched); flushes wrote {} bytes",
            self.merges,
            self.merges_alongside,
            self.merge_shared_indexes,
            self.runs_awaiting_manifest,
            self.merge_copied_bytes,
            self.merge_stitched_bytes,
            self.flushed_bytes
        )?;
        let z = &self.zones;
        writeln!(
            f,
            "zones: {} of {} bytes; {} free ({} kept allocated for reuse, {} allocated ahead), {} log, {} extent zones; {}",
            z.zones,
            z.zone_size,
            z.free_zones,
            z.recycled_zones,
            z.ready_zones,
            z.owned_zones,
            z.extent_zones,
            if z.backed {
                "backed (allocated before use: the device could run short)"
            } else {
                "not backed (the device has room to spare)"
            }
        )?;
        let frag = percent(z.dead_bytes, z.live_bytes + z.dead_bytes);
        writeln!(
            f,
            "extents: {} live, {} live bytes, {} dead bytes in extent zones ({frag:.1}% fragmentation)",
            z.live_extents, z.live_bytes, z.dead_bytes
        )?;
        let a = &self.appended;
        writeln!(
            f,
            "appended since open: {} bytes of run blocks, {} of run indexes, {} of filters, {} of manifests",
            a.run_blocks, a.run_indexes, a.run_filters, a.manifests
        )?;
        let c = &self.cache;
        writeln!(
            f,
            "cache: {} live patches ({} bytes bookkeeping, {} undo) over {} dirty bytes; {} block writes, {} syncs",
            c.live_patches, c.patch_bytes, c.undo_bytes, c.dirty_bytes, c.block_writes, c.syncs
        )?;
        writeln!(
            f,
            "read cache: {} run blocks, {} bytes",
            self.read_cache_blocks, self.read_cache_bytes
        )?;
        writeln!(
            f,
            "commits: last sequence {}; {} manifests written",
            self.last_seq, self.checkpoints
        )?;
        let s = &self.stalls;
        writeln!(
            f,
            "writers held back: {} times for a memtable backlog ({:.3} s), {} paced sleeps ({:.3} s)",
            s.backlog_waits,
            s.backlog.as_secs_f64(),
            s.paced_sleeps,
            s.paced.as_secs_f64()
        )?;
        if let Some(why) = &self.failure {
            writeln!(f, "READ-ONLY: {why}")?;
        }
        Ok(())
    }
}
