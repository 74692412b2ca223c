//! Patchgroups as values: [`Db::patchgroup`] makes one, and [`PatchGroup::engage`] engages it
//! in the calling thread's current [`PatchContext`] until the returned guard drops.
//!
//! The rules are Featherstitch's (§5, see `stitch_patch::PatchGroups`): a group gains its
//! dependencies before it is first engaged, a group another depends on is sealed and can never
//! be engaged again, and a group can depend on another only when that one is engaged nowhere,
//! so no cycle can be built. Writes made in a context are ordered by the groups engaged in that
//! context and by no others.

use super::{Db, Inner};
use crate::{Error, Result};
use std::sync::Arc;
use stitch_patch::{GroupId, PatchContext, PatchGroupError};

impl Db {
    /// Makes a patchgroup: the writes made while it is engaged belong to it, reach the disk
    /// after the writes of the groups it depends on, and are made durable together by
    /// [`PatchGroup::sync`]. Closed when dropped.
    pub fn patchgroup(&self) -> PatchGroup {
        PatchGroup {
            id: self.inner.groups.pg_create(),
            inner: self.inner.clone(),
            closed: false,
        }
    }

    /// Makes a patchgroup known by its id only: for a surface that keeps groups on behalf of
    /// clients (the file system's control directory), which closes it with
    /// [`pg_close`](Self::pg_close). The other `pg_*` calls are Featherstitch's, as
    /// [`PatchGroup`]'s methods describe them.
    pub fn pg_create(&self) -> GroupId {
        self.inner.groups.pg_create()
    }

    /// `after`'s writes reach the disk only after `before`'s (seals `before`).
    pub fn pg_depend(&self, after: GroupId, before: GroupId) -> Result<()> {
        Ok(self.inner.groups.pg_depend(after, before)?)
    }

    /// Engages `group` in `ctx` until [`pg_disengage`](Self::pg_disengage).
    pub fn pg_engage(&self, ctx: &PatchContext, group: GroupId) -> Result<()> {
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        Ok(self.inner.groups.pg_engage(ctx, group)?)
    }

    /// Ends one engagement of `group` in `ctx`.
    pub fn pg_disengage(&self, ctx: &PatchContext, group: GroupId) -> Result<()> {
        Ok(self.inner.groups.pg_disengage(ctx, group)?)
    }

    /// Makes every write of `group` durable (and everything those writes follow).
    pub fn pg_sync(&self, group: GroupId) -> Result<()> {
        sync(&self.inner, group)
    }

    /// Forgets `group` (its writes still reach the disk in order).
    pub fn pg_close(&self, group: GroupId) -> Result<()> {
        Ok(self.inner.groups.pg_close(group)?)
    }
}

/// Makes `group`'s writes durable, and the log up to the newest of their records. Recovery
/// replays the log as a prefix, so a group's record is replayable only with every record
/// before it, and those of commits made with nothing engaged (or in another group) between
/// the group's commits may be in the log's memory, or in the cache as patches the group's
/// writes do not depend on. The log is synced first (group commit, which may make later
/// records durable too: a sequential log cannot do otherwise cheaply), so the group's own
/// flush then finds its records committed.
fn sync(inner: &Inner, group: GroupId) -> Result<()> {
    let mark = inner.groups.mark(group)?;
    if mark > 0 {
        let wal = inner.wal()?;
        inner.sync_log(mark.min(wal.last_lsn()))?;
    }
    Ok(inner.groups.pg_sync(group)?)
}

/// A patchgroup of one store. Dropping it closes it (its writes still reach the disk in
/// order).
pub struct PatchGroup {
    inner: Arc<Inner>,
    id: GroupId,
    /// Closed by [`close`](PatchGroup::close): nothing left for the drop to do.
    closed: bool,
}

impl std::fmt::Debug for PatchGroup {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("PatchGroup").field(&self.id).finish()
    }
}

impl PatchGroup {
    /// The group's id within its store.
    pub fn id(&self) -> GroupId {
        self.id
    }

    /// This group's writes reach the disk only after `before`'s. Seals `before`, which must be
    /// engaged nowhere now; this group must not have been engaged yet.
    pub fn depend_on(&self, before: &PatchGroup) -> Result<()> {
        if !Arc::ptr_eq(&self.inner, &before.inner) {
            return Err(PatchGroupError::Unknown(before.id).into());
        }
        Ok(self.inner.groups.pg_depend(self.id, before.id)?)
    }

    /// Engages the group in the calling thread's current context (see
    /// [`PatchContext::enter`]) until the guard drops.
    pub fn engage(&self) -> Result<Engaged<'_>> {
        self.engage_in(&PatchContext::current())
    }

    /// Engages the group in `ctx` until the guard drops.
    pub fn engage_in(&self, ctx: &Arc<PatchContext>) -> Result<Engaged<'_>> {
        if self.inner.closed.load(std::sync::atomic::Ordering::Acquire) {
            return Err(Error::Closed);
        }
        self.inner.groups.pg_engage(ctx, self.id)?;
        Ok(Engaged {
            group: self,
            ctx: ctx.clone(),
        })
    }

    /// Makes every write of the group durable (and everything those writes follow), without
    /// a store-wide sync.
    pub fn sync(&self) -> Result<()> {
        sync(&self.inner, self.id)
    }

    /// Closes the group, saying if that failed (dropping it closes it too).
    pub fn close(mut self) -> Result<()> {
        self.closed = true;
        Ok(self.inner.groups.pg_close(self.id)?)
    }
}

impl Drop for PatchGroup {
    fn drop(&mut self) {
        if !self.closed {
            // Only an unknown group fails to close, and a handle's group is known until now.
            let _ = self.inner.groups.pg_close(self.id);
        }
    }
}

/// An engagement of a [`PatchGroup`] in one context; dropping it ends the engagement.
#[must_use = "the group is engaged only while the guard lives"]
pub struct Engaged<'g> {
    group: &'g PatchGroup,
    ctx: Arc<PatchContext>,
}

impl std::fmt::Debug for Engaged<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("Engaged").field(&self.group.id).finish()
    }
}

impl Drop for Engaged<'_> {
    fn drop(&mut self) {
        // The group outlives the guard (it is borrowed), so it is known: nothing can fail.
        let _ = self
            .group
            .inner
            .groups
            .pg_disengage(&self.ctx, self.group.id);
    }
}
