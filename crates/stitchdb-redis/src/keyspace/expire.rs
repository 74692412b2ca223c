//! Active expiry: keys whose deadline passed are removed in the background, found through
//! the expiry index (where the keys due are the index's first entries), as Redis's
//! `activeExpireCycle` removes them. Reads treat an expired key as absent whether or not it
//! was removed yet (lazy expiry, `Ctx::lookup`). Deadlines are in the metadata records, so
//! they hold across restarts; a removal lost in a crash is made again.

use super::ctx::{now_ms, Slot};
use super::encoding::split_expiry_key;
use super::{Ctx, Keyspace, KsResult, Table};
use std::ops::Bound;
use stitchdb::Durability;

/// Removes up to `limit` expired keys from database `db`; returns how many it removed.
/// Each removal is a commit of its own, made under its key's lock, of durability `Async`:
/// one lost in a crash is found due again after it.
pub fn expire_due(ks: &Keyspace, db: usize, limit: usize) -> KsResult<usize> {
    let now = now_ms();
    let due: Vec<(u64, Vec<u8>)> = {
        let mut ctx = Ctx::new(ks, db, Slot::Own(None))?;
        let end = (now + 1).to_be_bytes();
        let mut due = Vec::new();
        for pair in ctx.scan(
            Table::Expires,
            Bound::Unbounded,
            Bound::Excluded(&end),
            false,
        )? {
            let (k, _) = pair?;
            if let Some((at, key)) = split_expiry_key(&k) {
                due.push((at, key.to_vec()));
            }
            if due.len() == limit {
                break;
            }
        }
        due
    };
    let mut removed = 0;
    for (at, key) in due {
        let _whole = ks.whole.read();
        let _held = ks.locks.lock([(db, key.as_slice())]);
        let mut ctx = Ctx::new(ks, db, Slot::Own(None))?;
        match ctx.raw_meta(&key)? {
            Some(m) if m.expired(now) => {
                ctx.delete_key(&key)?;
                removed += 1;
            }
            // The key's deadline moved (or it is gone) but this entry was left behind: a
            // deadline is always indexed under its current value, so this cannot be; remove
            // the stray entry all the same.
            Some(m) if m.expire_at != Some(at) => {
                ctx.delete(Table::Expires, &super::encoding::expiry_key(at, &key))?
            }
            None => ctx.delete(Table::Expires, &super::encoding::expiry_key(at, &key))?,
            Some(_) => {}
        }
        let outcome = ctx.finish(Durability::Async)?;
        ks.apply(&outcome);
    }
    Ok(removed)
}
