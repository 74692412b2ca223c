//! Patchgroups: write-before ordering for applications (Featherstitch §5).
//!
//! A group is bracketed by two empty patches (the paper's Fig. 6): its *tail*, which every
//! write made while the group is engaged depends on, and its *head*, which depends on the
//! tail and on those writes. `pg_depend(Q, P)` makes Q's tail depend on P's head, so Q's
//! writes reach the disk after P's. Cycles cannot be built (Fig. 5): a group's own
//! dependencies are all added before it is first engaged, and a group that another depends
//! on is sealed, never engaged again, so its set of writes is final when it is depended on.
//!
//! The patches are made lazily: the tail at the first engagement, the head with the first
//! write adopted. A head that has committed (after `pg_sync`, or any flush) can gain nothing
//! more, so the next write adopted starts a new one.
//!
//! Engagement belongs to a [`PatchContext`], not to the store: in the paper a process's
//! engaged groups order that process's writes only, and here a context stands for whatever
//! issues writes on its own behalf (a thread, a client process of the file system, a
//! connection of the server). Every thread has a context of its own, and a thread serving a
//! request for another context [enters](PatchContext::enter) it for the request's duration.
//! A writer asks [`engaged`](PatchGroups::engaged) for the calling thread's current context
//! ([`PatchContext::with_current`]), makes its write depend on the tails it gets, and hands
//! the resulting patch to [`adopt`](PatchGroups::adopt). Two contexts never see each other's
//! engagements; a group engaged in any context counts as engaged for the sealing rules.

use crate::{BlockCache, PatchError, PatchId};
use parking_lot::Mutex;
use std::cell::RefCell;
use std::collections::HashMap;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A patchgroup's name within its store's [`PatchGroups`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u64);

/// Why a patchgroup operation was refused.
#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PatchGroupError {
    /// The group was never created, or was closed.
    #[error("no patchgroup {0:?}")]
    Unknown(GroupId),
    /// Another group depends on this one, so its set of writes is final.
    #[error(
        "patchgroup {0:?} is sealed: another group depends on it, so it can no longer be engaged"
    )]
    Sealed(GroupId),
    /// The group is engaged (in some context), so its set of writes is not final yet.
    #[error("patchgroup {0:?} is engaged")]
    Engaged(GroupId),
    /// `pg_depend(after, _)` once `after` has been engaged or depended on: its dependencies
    /// are fixed by then (adding one could build a cycle or reorder writes already made).
    #[error(
        "patchgroup {0:?} can gain no more dependencies: add them before it is first engaged and before another group depends on it"
    )]
    DependenciesFixed(GroupId),
    /// `pg_depend(g, g)`.
    #[error("patchgroup {0:?} cannot depend on itself")]
    SelfDependency(GroupId),
    /// The patch layer refused to make or flush one of the group's patches.
    #[error(transparent)]
    Patch(#[from] crate::PatchError),
}

/// Where patchgroups are engaged: the writes made in a context are ordered by the groups
/// engaged in it, and by no others.
///
/// Every thread has one of its own, current unless the thread has entered another. A surface
/// that serves several clients from shared threads makes one per client (process,
/// connection) and enters it while it works for that client.
#[derive(Debug, Default)]
pub struct PatchContext {
    /// The groups engaged here: the store they belong to, the group, and how many
    /// engagements of it are open here.
    engaged: Mutex<Vec<(u64, GroupId, u32)>>,
}

thread_local! {
    /// The calling thread's own context.
    static OWN_CONTEXT: Arc<PatchContext> = Arc::new(PatchContext::default());
    /// The context the calling thread has entered, if any.
    static ENTERED_CONTEXT: RefCell<Option<Arc<PatchContext>>> = const { RefCell::new(None) };
}

impl PatchContext {
    /// A context with nothing engaged.
    pub fn new() -> Arc<PatchContext> {
        Arc::new(PatchContext::default())
    }

    /// Makes this context the calling thread's current one until the guard drops (then the
    /// context current before is again). Guards of one thread nest: drop them in the reverse
    /// order of entering, as scopes do.
    pub fn enter(self: &Arc<Self>) -> ContextGuard {
        let previous = ENTERED_CONTEXT.with(|c| c.borrow_mut().replace(self.clone()));
        ContextGuard {
            previous,
            _same_thread: PhantomData,
        }
    }

    /// The calling thread's current context: the one it entered, or its own.
    pub fn current() -> Arc<PatchContext> {
        Self::with_current(Arc::clone)
    }

    /// Runs `f` on the calling thread's current context (without cloning its `Arc`).
    pub fn with_current<R>(f: impl FnOnce(&Arc<PatchContext>) -> R) -> R {
        let entered = ENTERED_CONTEXT.with(|c| c.borrow().clone());
        match entered {
            Some(ctx) => f(&ctx),
            None => OWN_CONTEXT.with(f),
        }
    }

    /// Whether this context has a group of `store` engaged.
    fn engages_from(&self, store: u64) -> bool {
        self.engaged.lock().iter().any(|&(s, _, _)| s == store)
    }
}

/// Keeps a [`PatchContext`] the current one of the thread that entered it; dropping it
/// restores the context current before. Not `Send`: it belongs to the thread that entered.
#[derive(Debug)]
#[must_use = "the context is current only while the guard lives"]
pub struct ContextGuard {
    previous: Option<Arc<PatchContext>>,
    _same_thread: PhantomData<*const ()>,
}

impl Drop for ContextGuard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        ENTERED_CONTEXT.with(|c| *c.borrow_mut() = previous);
    }
}

#[derive(Debug, Default)]
struct Group {
    /// What the group's writes must follow (the completions of the groups it depends on),
    /// until the tail is made from them.
    befores: Vec<PatchId>,
    /// Every write made while engaged depends on it. Made at the first engagement.
    tail: Option<PatchId>,
    /// Depends on the tail and on the writes adopted since the previous head committed.
    head: Option<PatchId>,
    /// Open engagements, over every context.
    engagements: u32,
    sealed: bool,
    /// The newest writer's mark (the store's log LSN) of the writes adopted and of the groups
    /// depended on: see [`PatchGroups::mark`].
    mark: u64,
}

impl Group {
    /// The patches that commit once everything this group orders has: its writes and what
    /// they follow.
    fn completion(&self) -> Vec<PatchId> {
        match (self.head, self.tail) {
            (Some(head), _) => vec![head],
            (None, Some(tail)) => vec![tail],
            (None, None) => self.befores.clone(),
        }
    }
}

#[derive(Debug, Default)]
struct GroupsState {
    next_id: u64,
    groups: HashMap<GroupId, Group>,
}

impl GroupsState {
    fn group(&mut self, id: GroupId) -> Result<&mut Group, PatchGroupError> {
        self.groups.get_mut(&id).ok_or(PatchGroupError::Unknown(id))
    }
}

/// What a write made in a context must carry: the groups engaged there when it was asked,
/// and their tails, which the write must depend on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngagedGroups {
    groups: Vec<GroupId>,
    tails: Vec<PatchId>,
}

impl EngagedGroups {
    /// The dependencies the write must carry.
    pub fn deps(&self) -> &[PatchId] {
        &self.tails
    }
}

/// Tells the stores' [`PatchGroups`] apart in a context's list of engaged groups.
static NEXT_STORE: AtomicU64 = AtomicU64::new(1);

/// The patchgroups of one store.
pub struct PatchGroups {
    /// This store's mark in contexts' lists of engaged groups.
    store: u64,
    cache: Arc<BlockCache>,
    state: Mutex<GroupsState>,
}

impl PatchGroups {
    /// The patchgroups of the store whose writes go through `cache`.
    pub fn new(cache: Arc<BlockCache>) -> Self {
        PatchGroups {
            store: NEXT_STORE.fetch_add(1, Ordering::Relaxed),
            cache,
            state: Mutex::new(GroupsState::default()),
        }
    }

    /// Makes a group with no writes and no dependencies.
    pub fn pg_create(&self) -> GroupId {
        let mut st = self.state.lock();
        st.next_id += 1;
        let id = GroupId(st.next_id);
        st.groups.insert(id, Group::default());
        id
    }

    /// `after`'s writes reach the disk only after `before`'s. Seals `before`.
    ///
    /// `after` must not have been engaged yet nor be depended on; `before` must not be
    /// engaged now, in any context (its set of writes must be complete).
    pub fn pg_depend(&self, after: GroupId, before: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        let before_group = st.group(before)?;
        let (before_engaged, completion) =
            (before_group.engagements > 0, before_group.completion());
        let after_group = st.group(after)?;
        if after == before {
            return Err(PatchGroupError::SelfDependency(after));
        }
        if after_group.tail.is_some() || after_group.sealed {
            return Err(PatchGroupError::DependenciesFixed(after));
        }
        if before_engaged {
            return Err(PatchGroupError::Engaged(before));
        }
        after_group.befores.extend(completion);
        let before_group = st.group(before)?;
        before_group.sealed = true;
        let mark = before_group.mark;
        let after_group = st.group(after)?;
        after_group.mark = after_group.mark.max(mark);
        Ok(())
    }

    /// Engages `group` in `ctx`: the writes made in `ctx` from now on belong to it, until
    /// as many [`pg_disengage`](Self::pg_disengage) as engagements.
    pub fn pg_engage(&self, ctx: &PatchContext, group: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        let g = st.group(group)?;
        if g.sealed {
            return Err(PatchGroupError::Sealed(group));
        }
        if g.tail.is_none() {
            g.tail = Some(self.cache.empty(&std::mem::take(&mut g.befores))?);
        }
        g.engagements += 1;
        let mut engaged = ctx.engaged.lock();
        match engaged
            .iter_mut()
            .find(|(s, g, _)| (*s, *g) == (self.store, group))
        {
            Some((_, _, count)) => *count += 1,
            None => engaged.push((self.store, group, 1)),
        }
        Ok(())
    }

    /// Ends one engagement of `group` in `ctx` (nothing if it has none there).
    pub fn pg_disengage(&self, ctx: &PatchContext, group: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        let mut engaged = ctx.engaged.lock();
        let Some(at) = engaged
            .iter()
            .position(|&(s, g, _)| (s, g) == (self.store, group))
        else {
            return st.group(group).map(|_| ());
        };
        engaged[at].2 -= 1;
        if engaged[at].2 == 0 {
            engaged.remove(at);
        }
        let g = st.group(group)?;
        g.engagements = g.engagements.saturating_sub(1);
        Ok(())
    }

    /// Makes every write of the group durable (and everything those writes follow).
    pub fn pg_sync(&self, group: GroupId) -> Result<(), PatchGroupError> {
        let completion = self.state.lock().group(group)?.completion();
        for patch in completion {
            self.cache.flush_patch(patch)?;
        }
        Ok(())
    }

    /// The newest mark [adopted](Self::adopt) by the group or by the groups it depends on (0
    /// if none). A writer whose writes become replayable only with everything written before
    /// them (a log read as a prefix after a crash) makes everything up to it durable as well
    /// as the group's patches when the group is synced.
    pub fn mark(&self, group: GroupId) -> Result<u64, PatchGroupError> {
        Ok(self.state.lock().group(group)?.mark)
    }

    /// Forgets the group. Its writes still reach the disk in order; contexts where it is
    /// still engaged no longer order their writes by it.
    pub fn pg_close(&self, group: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        st.groups
            .remove(&group)
            .ok_or(PatchGroupError::Unknown(group))?;
        Ok(())
    }

    /// What a write made now in `ctx` must carry: the groups of this store engaged there.
    /// `None` when none is: the write then need not be [adopted](Self::adopt), so a writer
    /// may skip making a patch of it for now.
    pub fn engaged(&self, ctx: &PatchContext) -> Option<EngagedGroups> {
        if !ctx.engages_from(self.store) {
            return None;
        }
        let groups: Vec<GroupId> = ctx
            .engaged
            .lock()
            .iter()
            .filter(|&&(s, _, _)| s == self.store)
            .map(|&(_, g, _)| g)
            .collect();
        let st = self.state.lock();
        let groups: Vec<GroupId> = groups
            .into_iter()
            .filter(|g| st.groups.contains_key(g))
            .collect();
        if groups.is_empty() {
            return None;
        }
        let tails = groups
            .iter()
            .filter_map(|g| st.groups.get(g).and_then(|g| g.tail))
            .collect();
        Some(EngagedGroups { groups, tails })
    }

    /// Records that `patch` was written while `engaged` were engaged, at the writer's `mark`
    /// (its position in the writer's order, such as a log LSN: see [`mark`](Self::mark)).
    pub fn adopt(&self, engaged: &EngagedGroups, patch: PatchId, mark: u64) {
        let mut st = self.state.lock();
        for id in &engaged.groups {
            let Some(g) = st.groups.get_mut(id) else {
                continue;
            };
            g.mark = g.mark.max(mark);
            let adopted = match g.head {
                Some(head) => match self.cache.add_dependency(head, patch) {
                    Ok(()) => true,
                    // The head has committed: start a new one below.
                    Err(PatchError::Frozen(_)) => false,
                    Err(e) => {
                        tracing::warn!(error = %e, ?patch, "patchgroup cannot adopt patch");
                        true
                    }
                },
                None => false,
            };
            if !adopted {
                let deps: Vec<PatchId> = g.tail.into_iter().chain([patch]).collect();
                match self.cache.empty(&deps) {
                    Ok(head) => g.head = Some(head),
                    Err(e) => tracing::warn!(error = %e, ?patch, "patchgroup cannot adopt patch"),
                }
            }
        }
    }
}
