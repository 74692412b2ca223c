//! What every write is checked against (its table, its layout, the size limits), and making
//! tables: below the write path and large values, which both use them.

use super::{log, Inner};
use crate::batch::TableId;
use crate::codec::{put_bytes, put_varint};
use crate::layout::TableLayout;
use crate::options::{max_value_len, MAX_KEY_LEN};
use crate::version::ids_taken;
use crate::{Error, Result};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use stitch_wal::Flags;

/// Whether one write is acceptable: its table exists, its layout can hold it, and key and
/// value are within limits.
pub(crate) fn check_op(
    inner: &Inner,
    version: &super::Version,
    table: TableId,
    key: &[u8],
    value: Option<&[u8]>,
) -> Result<()> {
    let t = version.user_table(table)?;
    let holder = version.route_in(t, key)?;
    if let Err(why) = holder.layout.stack().check_write(key, value) {
        let why = match holder.id.0 - t.id.0 {
            0 => why,
            region => format!("region {region}: {why}"),
        };
        return Err(Error::LayoutRejects {
            table: t.name.clone(),
            layout: t.layout.to_string(),
            why,
        });
    }
    check_key_len(key)?;
    let max_value = max_value_len(inner.zones.zone_size());
    if let Some(v) = value.filter(|v| v.len() > max_value) {
        return Err(Error::TooLarge {
            what: "value",
            len: v.len(),
            limit: max_value,
        });
    }
    Ok(())
}

/// Whether a range delete's bound is acceptable: its table exists and it is within the key
/// limit (a bound is not stored as a key, so a layout does not judge it).
pub(crate) fn check_bound(version: &super::Version, table: TableId, key: &[u8]) -> Result<()> {
    version.user_table(table)?;
    check_key_len(key)
}

fn check_key_len(key: &[u8]) -> Result<()> {
    if key.len() > MAX_KEY_LEN {
        return Err(Error::TooLarge {
            what: "key",
            len: key.len(),
            limit: MAX_KEY_LEN,
        });
    }
    Ok(())
}

/// Makes table `name` with `layout`, durably (its record synced).
pub(crate) fn create_table(
    inner: &Arc<Inner>,
    name: &str,
    layout: Arc<TableLayout>,
) -> Result<TableId> {
    inner.check_writable()?;
    let wal = inner.wal()?;
    let lsn = {
        let mut w = inner.write.lock();
        if inner.version.read().names.contains_key(name) {
            return Err(Error::TableExists(name.to_string()));
        }
        let id = TableId(w.next_table_id);
        let mut payload = Vec::new();
        put_varint(&mut payload, id.0 as u64);
        put_bytes(&mut payload, name.as_bytes());
        put_bytes(&mut payload, layout.to_string().as_bytes());
        let txn = w.next_txn;
        w.next_txn += 1;
        let appended =
            wal.append_with_deps(txn, log::OP_CREATE_TABLE, Flags::AUTOCOMMIT, &payload, &[]);
        let (lsn, _, _) = inner.guard_space(appended.map_err(log::log_err))?;
        // One record makes a partitioned table and its regions (at the ids after its own).
        w.next_table_id += ids_taken(&layout);
        w.last_seq = lsn;
        let mut version = inner.version.write();
        let mut v = (**version).clone();
        v.add_table(id, name.to_string(), inner.opts.stitching, layout);
        *version = Arc::new(v);
        inner.visible_seq.store(lsn, Ordering::Release);
        lsn
    };
    inner.sync_log(lsn)?;
    inner
        .version
        .read()
        .names
        .get(name)
        .copied()
        .ok_or_else(|| Error::NoSuchTable(name.to_string()))
}
