//! Durability with group commit.
//!
//! At most one flush of the log runs at a time. A caller of [`Wal::sync_to`] whose records are
//! not durable yet either becomes the *leader* (no flush running): it takes every record patch
//! written so far, makes one empty patch depending on them all and flushes it through the block
//! cache; or it waits on a condition variable until the durable LSN covers it, or until it can
//! lead the next round. Records appended while a flush runs are covered by the next one, so
//! under load each flush (and its `sync`) serves many commits. The state the callers share
//! (`SyncState`) is a field of the [`Wal`], in `writer`.

use crate::{Lsn, Result, Wal, WalError};
use std::sync::atomic::Ordering;

/// Ends a leader's round, however it ends (a panic in the cache included): lets the next
/// leader in and wakes the waiters.
struct Round<'a>(&'a Wal);

impl Drop for Round<'_> {
    fn drop(&mut self) {
        self.0.sync.lock().flushing = false;
        self.0.synced.notify_all();
    }
}

impl Wal {
    /// Returns once every record up to `lsn` is durable, sharing one flush with concurrent
    /// callers. An error from the flush fails the log for good.
    pub fn sync_to(&self, lsn: Lsn) -> Result<()> {
        if lsn > self.last_lsn() {
            return Err(WalError::Invalid(format!(
                "sync_to({lsn}): the newest record is lsn {}",
                self.last_lsn()
            )));
        }
        let mut state = self.sync.lock();
        loop {
            self.check_failed()?;
            if self.durable_lsn() >= lsn {
                return Ok(());
            }
            if state.flushing {
                self.synced.wait(&mut state);
                continue;
            }
            state.flushing = true;
            drop(state);
            self.lead_round()?;
            state = self.sync.lock();
        }
    }

    /// Flushes whatever records are in the cache, unless a flush is already running (then it
    /// returns at once: that flush, or the next call, covers them). For a background thread
    /// giving `Ordered` durability every few milliseconds.
    pub fn flush_async(&self) -> Result<()> {
        {
            let mut state = self.sync.lock();
            self.check_failed()?;
            if state.flushing || self.durable_lsn() >= self.last_lsn() {
                return Ok(());
            }
            state.flushing = true;
        }
        self.lead_round()
    }

    /// The newest LSN known durable (`first_lsn - 1` before any).
    pub fn durable_lsn(&self) -> Lsn {
        self.durable.load(Ordering::Acquire)
    }

    /// One flush, by the caller that set `flushing`.
    fn lead_round(&self) -> Result<()> {
        let _round = Round(self);
        let (patches, upto) = self.take_pending()?;
        let patches = self.live(&patches);
        if !patches.is_empty() {
            self.rounds.fetch_add(1, Ordering::Relaxed);
        }
        let cache = self.zones.cache();
        let flushed = match patches.as_slice() {
            [] => Ok(()),
            [one] => cache.flush_patch(*one),
            many => cache.empty(many).and_then(|all| cache.flush_patch(all)),
        };
        match flushed {
            Ok(()) => {
                self.durable.fetch_max(upto, Ordering::AcqRel);
                Ok(())
            }
            Err(e) => Err(self.fail(e.into())),
        }
    }
}
