//! The VT-tree's half of ingesting (see `crate::db`'s ingest for the engine's: which
//! stretch of a batch, the log record, replay): a batch's sorted puts written straight into
//! a level-0 run.

use super::run::{FilterChoice, Run, RunBuilder, Storage};
use crate::entry::EntryRef;
use crate::Result;
use std::sync::Arc;
use stitch_patch::PatchId;
use stitch_zone::Stream;

/// Writes `puts` (sorted by key, all to one table) as level-0 run `id` whose entries have
/// sequence number `seq`, into the block cache (`None` for no puts); returns it and the patch
/// writing it, which the record naming the run must follow. `(filter, window)`: the table's
/// filter and `sliding-window` size.
pub(crate) fn write_run<'a>(
    storage: &Arc<Storage>,
    id: u64,
    (filter, window): (FilterChoice, Option<u32>),
    puts: impl IntoIterator<Item = (&'a [u8], Option<&'a [u8]>)>,
    seq: u64,
) -> Result<Option<(Arc<Run>, PatchId)>> {
    let mut builder = RunBuilder::new(storage, id, 0, Stream::Ingest);
    // The run takes its table's filter (its blocks stay linear: its entries are all at `seq`,
    // newer than any reader, which a specialized format would keep in its versions section
    // anyway; merges rewrite them in the table's format). A `sliding-window` table's
    // merges stitch, so its blocks keep the window here rather than lose it for good.
    builder.filter_keys(filter);
    builder.set_window(window);
    for (key, value) in puts {
        builder.add(EntryRef { key, seq, value })?;
    }
    let filter = builder.key_filter();
    let Some((run, patch)) = builder.finish(filter)? else {
        return Ok(None);
    };
    // Not written yet: readers go through the cache until it is.
    run.set_unwritten(patch);
    Ok(Some((run, patch)))
}
