//! Where a key stands against the bounds of a range (one place, for every iterator that must
//! stop at or skip past a bound).

use std::ops::Bound;

/// True when `key` lies beyond the range's `end`.
pub fn past_end(key: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Included(e) => key > e,
        Bound::Excluded(e) => key >= e,
        Bound::Unbounded => false,
    }
}

/// True when `key` lies before the range's `start`.
pub fn before_start(key: &[u8], start: Bound<&[u8]>) -> bool {
    match start {
        Bound::Included(s) => key < s,
        Bound::Excluded(s) => key <= s,
        Bound::Unbounded => false,
    }
}

/// True when no key lies in `(start, end)`: start after end, or both at one key with either
/// bound exclusive. (`BTreeMap::range` panics on such bounds; callers check first.)
pub fn is_empty_range<K: Ord + ?Sized>(start: Bound<&K>, end: Bound<&K>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s) | Bound::Excluded(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e)) => s >= e,
        _ => false,
    }
}
