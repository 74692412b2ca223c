//! Flushing a run's finished blocks on a helper thread while its builder goes on.
//!
//! A builder makes its blocks durable every few megabytes (so a large merge does not hold its
//! whole output as dirty blocks). Done in the builder's thread, that flush (copying the blocks
//! to the file, syncing, committing) keeps the builder waiting on the device while the other
//! core idles; on a helper thread it overlaps with encoding the next blocks.

use std::sync::Arc;
use std::thread::JoinHandle;
use stitch_patch::{BlockCache, PatchError, PatchId};

pub(crate) struct WriteBehind {
    cache: Arc<BlockCache>,
    /// Flush on helper threads (else in the caller's: deterministic, for crash tests).
    helper: bool,
    in_flight: Option<JoinHandle<stitch_patch::Result<()>>>,
}

impl WriteBehind {
    pub fn new(cache: Arc<BlockCache>, helper: bool) -> WriteBehind {
        WriteBehind {
            cache,
            helper,
            in_flight: None,
        }
    }

    /// Flushes until `patch` is committed: on a helper thread, once the previous flush is
    /// done (one at a time bounds the dirty blocks a builder leaves behind), or here.
    pub fn start(&mut self, patch: PatchId) -> stitch_patch::Result<()> {
        self.start_with(move |cache| cache.flush_patch(patch))
    }

    /// [`start`](Self::start) for every patch made so far (several independent ones: a
    /// large value's chunks in several zones).
    pub fn start_all(&mut self) -> stitch_patch::Result<()> {
        self.start_with(BlockCache::flush_all)
    }

    fn start_with(
        &mut self,
        flush: impl Fn(&BlockCache) -> stitch_patch::Result<()> + Clone + Send + 'static,
    ) -> stitch_patch::Result<()> {
        self.wait()?;
        if self.helper {
            let (cache, on_helper) = (self.cache.clone(), flush.clone());
            let spawned = std::thread::Builder::new()
                .name("stitchdb-write".into())
                .spawn(move || on_helper(&cache));
            if let Ok(handle) = spawned {
                self.in_flight = Some(handle);
                return Ok(());
            }
            // No thread to be had: flush here instead.
        }
        flush(&self.cache)
    }

    /// Waits for the flush in flight, if any, and returns its result.
    pub fn wait(&mut self) -> stitch_patch::Result<()> {
        match self.in_flight.take() {
            None => Ok(()),
            Some(handle) => handle.join().unwrap_or_else(|_| {
                Err(PatchError::Failed(
                    "internal error: a run's flush thread panicked".into(),
                ))
            }),
        }
    }
}

impl Drop for WriteBehind {
    /// A builder dropped halfway (its merge failed) still waits for its flush: nothing of
    /// its outlives it.
    fn drop(&mut self) {
        let _ = self.wait();
    }
}
