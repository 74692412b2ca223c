//! The overlay dTable: layers newest first; the first layer holding a version of a key (a
//! value or a tombstone) answers for it, unless a range tombstone of any layer, newer than
//! that version, hides it.

use super::DTable;
use crate::bounds::{before_start, past_end};
use crate::entry::{Entry, RangeDeletes, Value};
use crate::merge_iter::{MergeIter, Source};
use crate::Result;
use std::ops::Bound;
use std::sync::Arc;

#[derive(Clone, Default)]
pub struct Overlay {
    layers: Vec<Arc<dyn DTable>>,
}

impl Overlay {
    /// `layers` newest first; every version in a layer is newer than every version of the same
    /// key in the layers after it.
    pub fn new(layers: Vec<Arc<dyn DTable>>) -> Overlay {
        Overlay { layers }
    }
}

impl DTable for Overlay {
    fn get(&self, key: &[u8], snapshot: u64) -> Result<Option<(u64, Value)>> {
        let mut found = None;
        // Each layer's `get` rules the key out itself (a run by its filter and key range),
        // each filter probed once.
        for layer in &self.layers {
            if let Some(version) = layer.get(key, snapshot)? {
                found = Some(version);
                break;
            }
        }
        Ok(match (found, self.covering_tombstone(key, snapshot)) {
            (Some((seq, _)), Some(t)) if t > seq => Some((t, None)),
            (None, Some(t)) => Some((t, None)),
            (found, _) => found,
        })
    }

    fn cursor(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        let merged = MergeIter::lazy(
            self.layers
                .iter()
                .map(|l| l.lazy_cursor(start, end))
                .collect(),
        );
        Box::new(Within {
            merged,
            far: end.map(<[u8]>::to_vec),
            reverse: false,
        })
    }

    fn cursor_rev(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
        let sources = self
            .layers
            .iter()
            .map(|l| l.cursor_rev(start, end))
            .collect();
        Box::new(Within {
            merged: MergeIter::new_reverse(sources),
            far: start.map(<[u8]>::to_vec),
            reverse: true,
        })
    }

    fn range_deletes(&self) -> RangeDeletes {
        self.layers.iter().map(|l| l.range_deletes()).collect()
    }

    fn covering_tombstone(&self, key: &[u8], snapshot: u64) -> Option<u64> {
        self.layers
            .iter()
            .filter_map(|l| l.covering_tombstone(key, snapshot))
            .max()
    }
}

/// A merged scan cut at its far bound (`end` forward, `start` in reverse). Runs cannot stop
/// there themselves, and a reader above stops only at a visible key past the bound: without
/// the cut, a scan of a range whose keys are all deleted would read on through every version
/// after it, to the end of the table if nothing after it is visible either.
struct Within {
    merged: MergeIter,
    far: Bound<Vec<u8>>,
    reverse: bool,
}

impl Iterator for Within {
    type Item = Result<Entry>;

    fn next(&mut self) -> Option<Result<Entry>> {
        let next = self.merged.next()?;
        if let Ok(e) = &next {
            let far = self.far.as_ref().map(Vec::as_slice);
            let beyond = if self.reverse {
                before_start(&e.key, far)
            } else {
                past_end(&e.key, far)
            };
            if beyond {
                // Nothing after it is in range either: let go of the sources now.
                self.merged = MergeIter::lazy(Vec::new());
                return None;
            }
        }
        Some(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    /// A layer that, like a run, starts at the scan's start but cannot stop at its end:
    /// keys 0..100 (one byte each), deleted if `deleted`; counts the versions read.
    struct Unbounded {
        deleted: bool,
        read: Arc<AtomicUsize>,
    }

    impl Unbounded {
        fn versions(&self, from: u8, to: u8, seq: u64) -> Vec<Entry> {
            let value = (!self.deleted).then(|| b"v".to_vec());
            (from..to)
                .map(|k| Entry {
                    key: vec![k],
                    seq,
                    value: value.clone(),
                })
                .collect()
        }
    }

    impl DTable for Unbounded {
        fn get(&self, _key: &[u8], _snapshot: u64) -> Result<Option<(u64, Value)>> {
            Ok(None)
        }

        fn cursor(&self, start: Bound<&[u8]>, _end: Bound<&[u8]>) -> Source {
            let from = match start {
                Bound::Included(k) | Bound::Excluded(k) => k[0],
                Bound::Unbounded => 0,
            };
            let seq = if self.deleted { 2 } else { 1 };
            let read = self.read.clone();
            Box::new(self.versions(from, 100, seq).into_iter().map(move |e| {
                read.fetch_add(1, Ordering::Relaxed);
                Ok(e)
            }))
        }

        fn cursor_rev(&self, _start: Bound<&[u8]>, end: Bound<&[u8]>) -> Source {
            let to = match end {
                Bound::Included(k) => k[0] + 1,
                Bound::Excluded(k) => k[0],
                Bound::Unbounded => 100,
            };
            let seq = if self.deleted { 2 } else { 1 };
            let read = self.read.clone();
            let mut all = self.versions(0, to, seq);
            all.reverse();
            Box::new(all.into_iter().map(move |e| {
                read.fetch_add(1, Ordering::Relaxed);
                Ok(e)
            }))
        }
    }

    #[test]
    fn a_scan_of_a_deleted_range_stops_at_its_bound_not_at_the_next_visible_key() {
        let read = Arc::new(AtomicUsize::new(0));
        let layer = |deleted| -> Arc<dyn DTable> {
            Arc::new(Unbounded {
                deleted,
                read: read.clone(),
            })
        };
        // Every key deleted (the tombstones newer than the values): the scan reads the 20
        // versions in range and at most two beyond it per layer (the one that tells where
        // the range ends, and the one a merge holds ready behind it); without the cut it
        // would read on to key 99 forward, down to key 0 in reverse.
        let overlay = Overlay::new(vec![layer(true), layer(false)]);
        let (start, end) = (Bound::Included(&[10u8][..]), Bound::Excluded(&[20u8][..]));
        let forward: Vec<Entry> = overlay.cursor(start, end).map(|e| e.unwrap()).collect();
        assert_eq!(forward.len(), 20, "both versions of each key in 10..20");
        assert!(forward.iter().all(|e| (10..20).contains(&e.key[0])));
        assert!(
            read.load(Ordering::Relaxed) <= 24,
            "read {}",
            read.load(Ordering::Relaxed)
        );

        read.store(0, Ordering::Relaxed);
        let backward: Vec<Entry> = overlay.cursor_rev(start, end).map(|e| e.unwrap()).collect();
        assert_eq!(backward.len(), 20);
        assert!(backward.iter().all(|e| (10..20).contains(&e.key[0])));
        assert!(
            read.load(Ordering::Relaxed) <= 24,
            "read {}",
            read.load(Ordering::Relaxed)
        );
    }
}
