//! Active expiry: keys whose deadline passed are removed in the background, found through
//! the expiry index (where the keys due are the index's first entries), as Redis's
//! `activeExpireCycle` removes them. Reads treat an expired key as absent whether or not it
//! was removed yet (lazy expiry, `Ctx::lookup`). Deadlines are in the metadata records, so
//! they hold across restarts; a removal lost in a crash is made again.

use super::ctx::{now_ms, Slot};
use super::encoding::{expiry_key, split_expiry_key};
use super::{Ctx, Keyspace, KsError, KsResult, Table};
use std::ops::Bound;
use std::time::{Duration, Instant};
use stitchdb::Durability;

/// How long one call may keep removing keys of one database before it leaves the rest to
/// the next call (Redis's slow cycle takes a quarter of its 100 ms period).
const BUDGET: Duration = Duration::from_millis(25);

/// Removes the expired keys of database `db`, `limit` at a time, until none is due or the
/// time budget is spent; returns how many it removed. Each removal is a commit of its own,
/// made under its key's lock, of durability `Async`: one lost in a crash is found due again
/// after it.
pub fn expire_due(ks: &Keyspace, db: usize, limit: usize) -> KsResult<usize> {
    let started = Instant::now();
    let mut removed = 0;
    // Each batch starts after the last entry of the one before: the entries removed are
    // tombstones until the store compacts them, not worth walking over again.
    let mut after: Option<Vec<u8>> = None;
    loop {
        let now = now_ms();
        let due = due(ks, db, now, after.as_deref(), limit)?;
        for (at, key) in &due {
            if remove(ks, db, now, *at, key)? {
                removed += 1;
            }
        }
        if due.len() < limit || started.elapsed() >= BUDGET {
            return Ok(removed);
        }
        after = due.last().map(|(at, key)| expiry_key(*at, key));
    }
}

/// The first `limit` entries of the expiry index due at `now` (after the entry `after`):
/// (deadline, key).
fn due(
    ks: &Keyspace,
    db: usize,
    now: u64,
    after: Option<&[u8]>,
    limit: usize,
) -> KsResult<Vec<(u64, Vec<u8>)>> {
    let mut ctx = Ctx::new(ks, db, Slot::Own(None))?;
    let end = (now + 1).to_be_bytes();
    let start = after.map_or(Bound::Unbounded, Bound::Excluded);
    let mut due = Vec::new();
    for pair in ctx.scan(Table::Expires, start, Bound::Excluded(&end), false)? {
        if due.len() == limit {
            break;
        }
        let (k, _) = pair?;
        if let Some((at, key)) = split_expiry_key(&k) {
            due.push((at, key.to_vec()));
        }
    }
    Ok(due)
}

/// Removes `key`, due at `at`, if it is still expired now that its lock is held (a
/// command may have given it a new deadline meanwhile); whether it did. A concurrent
/// interactive transaction that wrote the key wins: the key is left for the next round.
fn remove(ks: &Keyspace, db: usize, now: u64, at: u64, key: &[u8]) -> KsResult<bool> {
    let _whole = ks.whole.read();
    let _held = ks.locks.lock([(db, key)]);
    let mut ctx = Ctx::new(ks, db, Slot::Own(None))?;
    let removed = match ctx.raw_meta(key)? {
        Some(m) if m.expired(now) => {
            ctx.delete_key(key)?;
            true
        }
        // An entry under another deadline than the key's (or of a key gone) would be a
        // stray one: `put_meta` and `delete_key` keep the index in step, but remove it if
        // ever there is one, so it is not found due again and again.
        Some(m) if m.expire_at != Some(at) => {
            ctx.delete(Table::Expires, &expiry_key(at, key))?;
            false
        }
        None => {
            ctx.delete(Table::Expires, &expiry_key(at, key))?;
            false
        }
        Some(_) => false,
    };
    match ctx.finish(Durability::Async) {
        Ok(mut outcome) => {
            // Removing a key that had expired changes nothing a reader could see: watchers
            // are not told (EXEC finds a watched key that expired since WATCH itself, as
            // Redis's `isWatchedKeyExpired` does).
            outcome.touched.clear();
            ks.apply(&outcome);
            Ok(removed)
        }
        Err(KsError::Store(stitchdb::Error::Conflict { .. })) => Ok(false),
        Err(e) => Err(e),
    }
}
