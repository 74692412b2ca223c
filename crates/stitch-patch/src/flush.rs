//! The flush loop: plan a round, write it and sync once (without the cache's lock), commit
//! it and run the actions waiting for it, until the goal is durable.

use crate::blockio;
use crate::cache::BlockCache;
use crate::plan::Goal;
use crate::{PatchError, Result};

impl BlockCache {
    pub(crate) fn flush_until(&self, goal: Goal) -> Result<()> {
        loop {
            // Held for the whole round, so rounds never overlap: when one is planned, nothing
            // is in flight. Dropped before the actions run, which may flush themselves.
            let round = self.flush_round.lock();
            let mut st = self.state.lock();
            if let Some(reason) = &st.failure {
                return Err(PatchError::Failed(reason.clone()));
            }
            if st.graph.reached(goal) {
                return Ok(());
            }
            let writes = st.graph.plan_round(goal);
            if writes.is_empty() {
                // Every uncommitted patch waits for one that can be written, unless the graph
                // is broken; then refuse flushes rather than spin.
                let reason =
                    format!("internal error: a flush toward {goal:?} found nothing to write");
                tracing::error!("{reason}");
                st.failure = Some(reason.clone());
                return Err(PatchError::Failed(reason));
            }
            st.disk_epoch += 1;
            drop(st);

            let written = blockio::write_blocks(&*self.disk, self.block_size, &writes)
                .and_then(|()| self.disk.sync());
            let ids: Vec<u64> = writes
                .iter()
                .flat_map(|w| w.patches.iter().copied())
                .collect();
            let blocks_written = writes.len() as u64;
            // Release the images first, so the blocks' bytes are no longer shared.
            drop(writes);
            let mut st = self.state.lock();
            if let Err(e) = written {
                st.graph.abort_flight(&ids);
                st.failure = Some(e.to_string());
                tracing::error!(error = %e, "block cache write failed; refusing further flushes");
                return Err(PatchError::Io(e));
            }
            st.graph.counters.block_writes += blocks_written;
            st.graph.counters.syncs += 1;
            let committed = st.graph.commit(&ids);
            for (block, data) in committed.clean {
                st.clean.insert(block, data);
            }
            st.keep_spares(committed.dropped);
            let actions = st.take_callbacks(&committed.ids);
            drop(st);
            drop(round);
            for action in actions {
                action();
            }
        }
    }
}
