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
//! Engagement belongs to the [`PatchGroups`] object, shared by all threads, like a process's
//! patchgroups in the paper. A writer takes [`engaged_deps`](PatchGroups::engaged_deps) as
//! extra dependencies of its write and hands the resulting patch to
//! [`adopt`](PatchGroups::adopt).

use crate::{BlockCache, PatchError, PatchId};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(pub u64);

#[derive(Debug, Clone, thiserror::Error, PartialEq, Eq)]
pub enum PatchGroupError {
    #[error("no patchgroup {0:?}")]
    Unknown(GroupId),
    #[error(
        "patchgroup {0:?} is sealed: another group depends on it, so it can no longer be engaged"
    )]
    Sealed(GroupId),
    #[error("patchgroup {0:?} is engaged")]
    Engaged(GroupId),
    /// `pg_depend(after, _)` once `after` has been engaged or depended on: its dependencies
    /// are fixed by then (adding one could build a cycle or reorder writes already made).
    #[error(
        "patchgroup {0:?} can gain no more dependencies: add them before it is first engaged and before another group depends on it"
    )]
    DependenciesFixed(GroupId),
    #[error("patchgroup {0:?} cannot depend on itself")]
    SelfDependency(GroupId),
    #[error(transparent)]
    Patch(#[from] crate::PatchError),
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
    engaged: bool,
    sealed: bool,
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
    /// Engaged groups, in the order they were engaged.
    engaged: Vec<GroupId>,
}

impl GroupsState {
    fn group(&mut self, id: GroupId) -> Result<&mut Group, PatchGroupError> {
        self.groups.get_mut(&id).ok_or(PatchGroupError::Unknown(id))
    }
}

/// The patchgroups of one store.
pub struct PatchGroups {
    cache: Arc<BlockCache>,
    state: Mutex<GroupsState>,
}

impl PatchGroups {
    pub fn new(cache: Arc<BlockCache>) -> Self {
        PatchGroups {
            cache,
            state: Mutex::new(GroupsState::default()),
        }
    }

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
    /// engaged now (its set of writes must be complete).
    pub fn pg_depend(&self, after: GroupId, before: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        let before_group = st.group(before)?;
        let (before_engaged, completion) = (before_group.engaged, before_group.completion());
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
        st.group(before)?.sealed = true;
        Ok(())
    }

    pub fn pg_engage(&self, group: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        let g = st.group(group)?;
        if g.sealed {
            return Err(PatchGroupError::Sealed(group));
        }
        if g.engaged {
            return Ok(());
        }
        if g.tail.is_none() {
            g.tail = Some(self.cache.empty(&std::mem::take(&mut g.befores))?);
        }
        g.engaged = true;
        st.engaged.push(group);
        Ok(())
    }

    pub fn pg_disengage(&self, group: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        st.group(group)?.engaged = false;
        st.engaged.retain(|&g| g != group);
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

    /// Forgets the group. Its writes still reach the disk in order.
    pub fn pg_close(&self, group: GroupId) -> Result<(), PatchGroupError> {
        let mut st = self.state.lock();
        st.groups
            .remove(&group)
            .ok_or(PatchGroupError::Unknown(group))?;
        st.engaged.retain(|&g| g != group);
        Ok(())
    }

    /// The dependencies a write made now must carry: one per engaged group. `None` when no
    /// group is engaged: the write then need not be [adopted](Self::adopt), so a writer may
    /// skip making a patch of it for now.
    pub fn engaged_deps(&self) -> Option<Vec<PatchId>> {
        let st = self.state.lock();
        if st.engaged.is_empty() {
            return None;
        }
        Some(
            st.engaged
                .iter()
                .filter_map(|g| st.groups.get(g).and_then(|g| g.tail))
                .collect(),
        )
    }

    /// Records that `patch` was written while the engaged groups were engaged.
    pub fn adopt(&self, patch: PatchId) {
        let mut st = self.state.lock();
        let GroupsState {
            groups, engaged, ..
        } = &mut *st;
        for id in engaged.iter() {
            let Some(g) = groups.get_mut(id) else {
                continue;
            };
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
