//! What `scan` and `export` share: choosing a key range and writing its pairs out in order.

use crate::error::{CliError, CliResult};
use crate::format::RecordWriter;
use crate::store::Source;
use std::io::Write;
use std::ops::Bound;
use stitchdb::TableId;

/// Keys starting with `prefix`, from `start` (inclusive) to `end` (exclusive).
#[derive(Default)]
pub struct KeyRange {
    pub prefix: Vec<u8>,
    pub start: Option<Vec<u8>>,
    pub end: Option<Vec<u8>>,
}

impl KeyRange {
    /// Writes the range's pairs of `table` to `out` in key order, at most `limit` of them;
    /// returns how many were written. Does not flush `out`.
    pub fn write_to<W: Write>(
        &self,
        source: &Source,
        table: TableId,
        limit: Option<usize>,
        out: &mut RecordWriter<W>,
    ) -> CliResult<u64> {
        // Scanning from the later of `start` and `prefix` reaches the prefixed keys at once;
        // they are contiguous, so the scan ends at the first key without the prefix.
        let lower = match &self.start {
            Some(start) if *start > self.prefix => start,
            _ => &self.prefix,
        };
        if self.end.as_ref().is_some_and(|end| end <= lower) {
            return Ok(0);
        }
        let upper = self
            .end
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        let mut written = 0;
        for item in source
            .range(table, Bound::Included(lower), upper)?
            .take(limit.unwrap_or(usize::MAX))
        {
            let stopped = |e: CliError| e.note(format_args!("stopped after {written} pairs"));
            let (key, value) = item.map_err(|e| stopped(e.into()))?;
            if !key.starts_with(&self.prefix) {
                break;
            }
            out.write(&key, &value).map_err(stopped)?;
            written += 1;
        }
        Ok(written)
    }
}
