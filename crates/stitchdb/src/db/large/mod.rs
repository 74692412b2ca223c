//! Large values: values of any size up to [`max_large_value_len`], stored outside the runs as
//! chunk extents of their own zone stream, and read or written by byte range.
//!
//! A value longer than [`LARGE_VALUE_THRESHOLD`] is written once, as chunks (extent kind 5,
//! `Stream::Large`), made durable before the commit that names it is logged. The commit
//! writes two records of the key: in the table, a fixed [`MARKER`] value; in the table's
//! *hidden table* (named by [`hidden_name`], created with its first large value), the value's
//! [`Reference`]: the chunks' addresses and checksums. Log, memtables and runs carry only
//! that. A read that finds the marker looks the key up in the hidden table at the same
//! snapshot; every write of a key in a table with a hidden table writes the hidden table too
//! (a reference, or a delete: see [`add_hidden_deletes`]), so the two always agree, and a
//! value equal to the marker but written inline finds no reference and is itself.
//!
//! Which chunks are live: `registry`. Formats: docs/format.md, "Large values".

mod chunks;
mod reference;
mod registry;
mod stream;

pub(crate) use reference::{Chunk, Reference};
pub(crate) use registry::{Pins, Registry};
pub use stream::ValueReader;

use super::{Db, Inner, Version};
use crate::batch::{TableId, WriteBatch};
use crate::layout::vtree::dtable::{filtered_run, DTable};
use crate::layout::vtree::run::Run;
use crate::layout::TableData;
use crate::{Error, Result};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::ops::Bound;
use std::sync::Arc;
use stitch_zone::ExtentAddr;

/// Values longer than this are stored as large values. 256 KiB: the size from which a write
/// straight to extents pays for its own flush (as `Options::ingest_min_bytes` argues for
/// runs), while values up to it, sixty-four run blocks, still go through the log and merges
/// cheaply enough, and small values keep their one-read path through the run blocks.
pub const LARGE_VALUE_THRESHOLD: usize = 256 * 1024;

/// Values longer than this are large in a store with `zone_size`-byte zones: the threshold,
/// or the longest value a record holds where zones are small.
pub(crate) fn threshold(zone_size: u64) -> usize {
    LARGE_VALUE_THRESHOLD.min(crate::max_value_len(zone_size))
}

/// What the table holds for a key whose value is large.
pub(crate) const MARKER: &[u8] = b"\0\0stitchdb large value\0\x01";

/// The largest value a store with `zone_size`-byte zones takes: 4 GiB, or less where zones
/// are so small that a reference to more chunks would not fit in a record.
pub fn max_large_value_len(zone_size: u64) -> u64 {
    let listed = (crate::max_value_len(zone_size).saturating_sub(64) / 16) as u64;
    (4u64 << 30).min(listed * chunks::chunk_len(zone_size))
}

/// The hidden table holding the references of `table`'s large values.
pub(crate) fn hidden_name(table: TableId) -> String {
    format!("\u{1}large.{}", table.0)
}

/// Whether `name` is a hidden table's (never listed, never a user's).
pub(crate) fn is_hidden(name: &str) -> bool {
    name.starts_with('\u{1}')
}

pub(crate) fn hidden_of(version: &Version, table: TableId) -> Option<TableId> {
    // Hidden names sort first: a store without large values pays one look at the first name
    // on every read and write, not a name made and looked up.
    if !version.names.keys().next().is_some_and(|n| is_hidden(n)) {
        return None;
    }
    version.names.get(&hidden_name(table)).copied()
}

/// `table`'s hidden table, made if it has none.
pub(crate) fn hidden_table(inner: &Arc<Inner>, table: TableId) -> Result<TableId> {
    if let Some(id) = hidden_of(&inner.version.read(), table) {
        return Ok(id);
    }
    let layout = Arc::new(crate::layout::TableLayout::default());
    match super::tables::create_table(inner, &hidden_name(table), layout) {
        Err(Error::TableExists(_)) => {
            hidden_of(&inner.version.read(), table).ok_or(Error::NoSuchTable(hidden_name(table)))
        }
        other => other,
    }
}

/// Chunks a write made, pinned until its commit is visible (or given back if it fails).
pub(crate) struct Written {
    pub pins: Pins,
    pub new: Vec<ExtentAddr>,
}

impl Written {
    pub fn new(inner: &Inner) -> Written {
        Written {
            pins: Pins::new(&inner.large),
            new: Vec::new(),
        }
    }

    /// Gives the chunks back: the write that was to name them failed.
    pub fn discard(self, inner: &Inner) {
        inner.large.discard(&inner.zones, &self.new);
    }
}

/// Refuses a value of `len` bytes past the store's limit, before anything is written.
fn check_limit(inner: &Inner, len: u64) -> Result<()> {
    let limit = max_large_value_len(inner.zones.zone_size());
    match len > limit {
        true => Err(Error::TooLarge {
            what: "value",
            len: len as usize,
            limit: limit as usize,
        }),
        false => Ok(()),
    }
}

/// Checks a large write before anything is written: the table takes the marker, and the
/// length is within the limit.
fn check_large(inner: &Inner, table: TableId, key: &[u8], len: u64) -> Result<()> {
    check_limit(inner, len)?;
    let version = inner.version.read().clone();
    if is_hidden(&version.user_table(table)?.name) {
        return Err(Error::NoSuchTable(format!("#{}", table.0)));
    }
    super::tables::check_op(inner, &version, table, key, Some(MARKER))
}

/// Writes `len` bytes from `src` as a large value of `key` in `table`: the chunks, durably.
/// Returns the hidden table and the reference to write there.
pub(crate) fn write_value(
    inner: &Arc<Inner>,
    table: TableId,
    key: &[u8],
    src: &mut dyn Read,
    len: u64,
    written: &mut Written,
) -> Result<(TableId, Reference)> {
    check_large(inner, table, key, len)?;
    let hidden = hidden_table(inner, table)?;
    let chunk_len = chunks::chunk_len(inner.zones.zone_size());
    let mut read_so_far = 0u64;
    let made = chunks::write_chunks(
        &inner.zones,
        inner.storage.write_behind,
        &inner.large,
        &mut written.pins,
        len,
        chunk_len,
        |_| true,
        |i, buf| {
            let want = (chunk_len.min(len - i as u64 * chunk_len)) as usize;
            buf.resize(want, 0);
            src.read_exact(buf).map_err(|e| {
                Error::LargeValue(format!(
                    "reading the value: {e} after {read_so_far} of {len} bytes"
                ))
            })?;
            read_so_far += want as u64;
            Ok(())
        },
    )?;
    let chunks: Vec<_> = made.into_iter().flatten().collect();
    written.new.extend(chunks.iter().map(|c| c.addr));
    Ok((
        hidden,
        Reference {
            len,
            chunk_len,
            chunks,
        },
    ))
}

/// `r` with bytes `offset..` replaced by `bytes` (zeros fill a gap past its end): the chunks
/// the range touches are written anew, the others shared.
pub(crate) fn write_range(
    inner: &Arc<Inner>,
    r: &Reference,
    offset: u64,
    bytes: &[u8],
    written: &mut Written,
) -> Result<Reference> {
    let end = offset + bytes.len() as u64;
    let len = r.len.max(end);
    check_limit(inner, len)?;
    let chunk_len = r.chunk_len;
    let count = len.div_ceil(chunk_len) as usize;
    // A chunk is rewritten if the range touches it, or it grows (the old last one) or is new.
    let changed = |i: usize| {
        let (start, stop) = (i as u64 * chunk_len, (i as u64 + 1) * chunk_len);
        let touched = offset < stop && start < end && !bytes.is_empty();
        touched || i >= r.chunks.len() || (i + 1 == r.chunks.len() && len > r.len)
    };
    let made = chunks::write_chunks(
        &inner.zones,
        inner.storage.write_behind,
        &inner.large,
        &mut written.pins,
        len,
        chunk_len,
        changed,
        |i, buf| {
            let start = i as u64 * chunk_len;
            let stop = (start + chunk_len).min(len);
            if i < r.chunks.len() {
                let framed = chunks::read_chunk(&inner.zones, r, i)?;
                buf.extend_from_slice(&framed[stitch_zone::EXTENT_HEADER_LEN..]);
            }
            buf.resize((stop - start) as usize, 0);
            let (from, to) = (offset.max(start), end.min(stop));
            if from < to {
                let src = &bytes[(from - offset) as usize..(to - offset) as usize];
                buf[(from - start) as usize..(to - start) as usize].copy_from_slice(src);
            }
            Ok(())
        },
    )?;
    let mut out = Vec::with_capacity(count);
    for (i, made) in made.into_iter().enumerate() {
        match made {
            Some(c) => {
                written.new.push(c.addr);
                out.push(c);
            }
            None => out.push(r.chunks[i]),
        }
    }
    written.pins.add(out.iter().map(|c| c.addr));
    Ok(Reference {
        len,
        chunk_len,
        chunks: out,
    })
}

/// Moves a batch's values longer than the threshold out into large values: each becomes the
/// marker, and the batch writes its reference into the table's hidden table. Every value is
/// checked before any is written.
pub(crate) fn externalize(
    inner: &Arc<Inner>,
    batch: &mut Cow<WriteBatch>,
) -> Result<Option<Written>> {
    let threshold = threshold(inner.zones.zone_size());
    let large = |v: &Option<Vec<u8>>| v.as_ref().is_some_and(|v| v.len() > threshold);
    if !batch.ops.iter().any(|(_, _, v)| large(v)) {
        return Ok(None);
    }
    for (table, key, value) in batch.ops.iter().filter(|(_, _, v)| large(v)) {
        check_large(
            inner,
            *table,
            key,
            value.as_ref().map_or(0, Vec::len) as u64,
        )?;
    }
    let mut written = Written::new(inner);
    let result = (|| {
        let b = batch.to_mut();
        let mut refs = Vec::new();
        for (table, key, value) in b.ops.iter_mut().filter(|(_, _, v)| large(v)) {
            let bytes = value.replace(MARKER.to_vec()).unwrap_or_default();
            let len = bytes.len() as u64;
            let (hidden, r) = write_value(inner, *table, key, &mut &bytes[..], len, &mut written)?;
            refs.push((hidden, key.clone(), r.encode()));
        }
        for (hidden, key, r) in refs {
            b.put(hidden, key, r);
        }
        Ok(())
    })();
    match result {
        Ok(()) => Ok(Some(written)),
        Err(e) => {
            written.discard(inner);
            Err(e)
        }
    }
}

/// Adds to a batch, for each write to a table that has a hidden table, the delete of the key
/// there (unless the batch writes it: a large value's reference), and the range deletes:
/// an inline value or a delete must leave no reference behind.
pub(crate) fn add_hidden_deletes(version: &Version, batch: &mut Cow<WriteBatch>) {
    if !version.names.keys().next().is_some_and(|n| is_hidden(n)) {
        return;
    }
    let hidden: HashMap<TableId, TableId> = (batch.ops.iter().map(|op| op.0))
        .chain(batch.ranges.iter().map(|r| r.0))
        .filter_map(|t| Some((t, hidden_of(version, t)?)))
        .collect();
    if hidden.is_empty() {
        return;
    }
    let hidden_ids: HashSet<TableId> = hidden.values().copied().collect();
    let written: HashSet<(TableId, &[u8])> = (batch.ops.iter())
        .filter(|op| hidden_ids.contains(&op.0))
        .map(|op| (op.0, op.1.as_slice()))
        .collect();
    let deletes: Vec<(TableId, Vec<u8>)> = (batch.ops.iter())
        .filter_map(|(t, k, _)| Some((*hidden.get(t)?, k)))
        .filter(|(h, k)| !written.contains(&(*h, k.as_slice())))
        .map(|(h, k)| (h, k.clone()))
        .collect();
    let ranges: Vec<_> = (batch.ranges.iter())
        .filter_map(|(t, s, e)| Some((*hidden.get(t)?, s.clone(), e.clone())))
        .collect();
    let b = batch.to_mut();
    for (h, k) in deletes {
        b.delete(h, k);
    }
    for (h, s, e) in ranges {
        b.delete_range(h, s, e);
    }
}

/// A value as a read finds it: inline bytes, or a large value's reference with its chunks
/// pinned for the read.
pub(crate) enum Found {
    Inline(Vec<u8>),
    /// The pins keep the chunks while the value is read.
    Large(Reference, #[allow(dead_code)] Pins),
}

impl Found {
    pub fn len(&self) -> u64 {
        match self {
            Found::Inline(v) => v.len() as u64,
            Found::Large(r, _) => r.len,
        }
    }

    /// Bytes `offset..offset + len`, those up to the value's end (none at or past it).
    pub fn range(&self, inner: &Inner, offset: u64, len: u64) -> Result<Vec<u8>> {
        match self {
            Found::Inline(v) => {
                let start = offset.min(v.len() as u64) as usize;
                let end = offset.saturating_add(len).min(v.len() as u64) as usize;
                Ok(v[start..end].to_vec())
            }
            Found::Large(r, _) => chunks::read_range(&inner.zones, r, offset, len),
        }
    }

    pub fn into_bytes(self, inner: &Inner) -> Result<Vec<u8>> {
        match self {
            Found::Inline(v) => Ok(v),
            found => found.range(inner, 0, u64::MAX),
        }
    }
}

/// What `value` (read from a table at some snapshot) stands for: itself, or if it is the
/// marker, the large value whose reference `reference` finds in the hidden table at the same
/// snapshot (`place` names the key for errors).
pub(crate) fn find(
    inner: &Inner,
    value: Option<Vec<u8>>,
    reference: impl FnOnce() -> Result<Option<Vec<u8>>>,
    place: impl FnOnce() -> String,
) -> Result<Option<Found>> {
    let Some(value) = value else {
        return Ok(None);
    };
    if value != MARKER {
        return Ok(Some(Found::Inline(value)));
    }
    let _resolving = inner.large.resolving();
    let Some(bytes) = reference()? else {
        return Ok(Some(Found::Inline(value)));
    };
    let r = Reference::decode(&bytes, place())?;
    let mut pins = Pins::new(&inner.large);
    pins.add(r.chunks.iter().map(|c| c.addr));
    Ok(Some(Found::Large(r, pins)))
}

/// [`find`] in a table's view and its hidden table's, at `snapshot`.
pub(crate) fn find_in(
    inner: &Inner,
    views: (&dyn DTable, Option<&Arc<dyn DTable>>),
    key: &[u8],
    snapshot: u64,
    label: impl FnOnce() -> String,
) -> Result<Option<Found>> {
    let value = views.0.get(key, snapshot)?.and_then(|(_, v)| v);
    let Some(hidden) = views.1 else {
        return Ok(value.map(Found::Inline));
    };
    find(
        inner,
        value,
        || Ok(hidden.get(key, snapshot)?.and_then(|(_, v)| v)),
        || format!("{}, key {key:?}", label()),
    )
}

/// Every chunk a version of a hidden table references: in `version`'s tables and in
/// `snapshot_runs` (the named snapshots' runs of hidden tables). A reference that cannot be
/// read is passed over (`check` reports it).
pub(crate) fn referenced<'a>(
    version: &Version,
    snapshot_runs: impl IntoIterator<Item = &'a Arc<Run>>,
) -> HashSet<ExtentAddr> {
    let mut out = HashSet::new();
    let mut add = |view: &dyn DTable| {
        for entry in view.cursor(Bound::Unbounded, Bound::Unbounded) {
            let Ok(entry) = entry else { continue };
            let Some(bytes) = entry.value else { continue };
            if let Ok(r) = Reference::decode(&bytes, "") {
                out.extend(r.chunks.iter().map(|c| c.addr));
            }
        }
    };
    for t in version.tables.values().filter(|t| is_hidden(&t.name)) {
        add(&*t.data.view());
    }
    for run in snapshot_runs {
        add(&*filtered_run(run, None));
    }
    out
}

/// Reads every chunk a version of a hidden table references (mainline and named
/// snapshots) and checks it against its reference; the first damaged one is an error naming
/// the table, the key and the chunk. Returns how many chunks were verified.
pub(crate) fn check(inner: &Inner, version: &Version) -> Result<u64> {
    let mut views: Vec<(String, Arc<dyn DTable>)> = (version.tables.values())
        .filter(|t| is_hidden(&t.name))
        .map(|t| (t.name.clone(), t.data.view()))
        .collect();
    for snap in inner.checkpoint.lock().snapshots.values() {
        for t in snap.tables.iter().filter(|t| is_hidden(&t.name)) {
            for run in t.levels.iter().flatten() {
                views.push((t.name.clone(), filtered_run(run, None)));
            }
        }
    }
    let mut seen = HashSet::new();
    for (name, view) in views {
        let table = name.trim_start_matches("\u{1}large.");
        for entry in view.cursor(Bound::Unbounded, Bound::Unbounded) {
            let entry = entry?;
            let Some(bytes) = entry.value else { continue };
            let place = format!("table #{table}, key {:?}", entry.key);
            let r = Reference::decode(&bytes, &place)?;
            for i in 0..r.chunks.len() {
                if seen.insert(r.chunks[i].addr) {
                    chunks::read_chunk(&inner.zones, &r, i).map_err(|e| e.placed_in(&place))?;
                }
            }
        }
    }
    Ok(seen.len() as u64)
}

/// After a checkpoint (`patch` writes its superblock): frees the chunks no longer
/// referenced (see `registry`).
pub(crate) fn after_checkpoint(inner: &Arc<Inner>, patch: stitch_patch::PatchId) -> Result<()> {
    if inner.large.is_empty() {
        return Ok(());
    }
    inner.cache.flush_patch(patch)?;
    inner.large.sweep(&inner.zones, || {
        let version = inner.version.read().clone();
        let runs: Vec<Arc<Run>> = (inner.checkpoint.lock().snapshots.values())
            .flat_map(|snap| snap.tables.iter())
            .filter(|t| is_hidden(&t.name))
            .flat_map(|t| t.levels.iter().flatten().cloned())
            .collect();
        Ok(referenced(&version, &runs))
    })?;
    Ok(())
}

impl Db {
    /// Sets `key` in `table` to the `len` bytes `src` yields, streamed into extents (never
    /// held whole in memory); an error if `src` ends before `len` bytes. A value of up to
    /// [`LARGE_VALUE_THRESHOLD`] bytes (less in stores of zones below 2 MiB) is read into
    /// memory and put as usual.
    pub fn put_from(
        &self,
        table: TableId,
        key: impl AsRef<[u8]>,
        mut src: impl Read,
        len: u64,
    ) -> Result<()> {
        let key = key.as_ref();
        let inner = &self.inner;
        if len <= threshold(inner.zones.zone_size()) as u64 {
            let mut value = vec![0; len as usize];
            src.read_exact(&mut value)
                .map_err(|e| Error::LargeValue(format!("reading the value: {e}")))?;
            return self.put(table, key, value);
        }
        let mut written = Written::new(inner);
        let (hidden, r) = match write_value(inner, table, key, &mut src, len, &mut written) {
            Ok(done) => done,
            Err(e) => {
                written.discard(inner);
                return Err(e);
            }
        };
        let mut batch = WriteBatch::new();
        batch.put(table, key, MARKER);
        batch.put(hidden, key, r.encode());
        match self.write_owned(batch, inner.opts.durability) {
            Ok(()) => Ok(()),
            Err(e) => {
                written.discard(inner);
                Err(e)
            }
        }
    }

    /// Bytes of the chunk extents of large values the store holds (headers included): those
    /// the tables reference, and those a sweep has yet to find unreferenced twice.
    pub fn large_value_bytes(&self) -> u64 {
        self.inner.large.tracked_bytes()
    }
}
