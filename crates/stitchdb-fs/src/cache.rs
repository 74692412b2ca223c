//! The metadata cache: values of inode records and names that recent operations read or
//! wrote, as the store holds them. The kernel asks for a name (LOOKUP) just before it creates,
//! unlinks or renames it, and sets a file's attributes right after it makes it, so most
//! operations read what the one before them read or wrote; each such read costs a look
//! through the memtables and the runs' filters, and the cache answers it from a hash map.
//!
//! What keeps it true: the store tells the mount of every commit, whoever makes it (the
//! observer in `observe`), under its writer lock: the cache is held closed from before the
//! commit becomes visible until the commit's writes are put in it. A value read from the
//! store is kept only if no commit began since the read began (a generation counter tells),
//! so a read that raced a commit cannot put an older value back.

use foldhash::{HashMap, HashMapExt};
use parking_lot::Mutex;
use stitchdb::TableId;

/// Entries held at most; a fill past it empties the cache first (the next operations refill
/// what they use).
const CAPACITY: usize = 4096;

/// A key of a table.
pub(crate) type Key = (TableId, Vec<u8>);

/// A range delete: the keys of a table in `[start, end)`.
pub(crate) type Range = (TableId, Vec<u8>, Vec<u8>);

/// Recent values of keys of some tables of one store.
pub(crate) struct MetaCache {
    /// The tables whose keys it holds.
    tables: Vec<TableId>,
    state: Mutex<State>,
}

struct State {
    /// Advanced as each commit begins and as it ends: a value read under an older generation
    /// may be older than the store's.
    generation: u64,
    /// Commits being written: while any is, the store may be ahead of the entries, and the
    /// cache answers nothing.
    writing: u32,
    /// For each of the cached tables (in the order of `MetaCache::tables`), keys and their
    /// values (`None`: absent from the store).
    entries: Vec<HashMap<Vec<u8>, Option<Vec<u8>>>>,
    /// Entries over all tables.
    len: usize,
}

/// What the cache says of a key.
pub(crate) enum Lookup {
    /// Its value in the store (`None`: absent).
    Hit(Option<Vec<u8>>),
    /// Not known: read the store, and [`fill`](MetaCache::fill) with this generation.
    Miss(u64),
}

impl MetaCache {
    /// An empty cache of the keys of `tables`.
    pub(crate) fn new(tables: Vec<TableId>) -> Self {
        let entries = tables.iter().map(|_| HashMap::new()).collect();
        MetaCache {
            tables,
            state: Mutex::new(State {
                generation: 0,
                writing: 0,
                entries,
                len: 0,
            }),
        }
    }

    /// Where `table`'s keys are held, if they are.
    fn slot(&self, table: TableId) -> Option<usize> {
        self.tables.iter().position(|&t| t == table)
    }

    /// Whether it holds keys of `table`.
    pub(crate) fn holds(&self, table: TableId) -> bool {
        self.slot(table).is_some()
    }

    /// The value of `key` of `table`, if known (`table` must be one it holds).
    pub(crate) fn get(&self, table: TableId, key: &[u8]) -> Lookup {
        let s = self.state.lock();
        if let (0, Some(i)) = (s.writing, self.slot(table)) {
            if let Some(v) = s.entries[i].get(key) {
                return Lookup::Hit(v.clone());
            }
        }
        Lookup::Miss(s.generation)
    }

    /// Keeps `value`, read from the store for `key` of `table` after [`get`](Self::get)
    /// answered [`Lookup::Miss`]`(generation)`, unless a commit has begun since.
    pub(crate) fn fill(
        &self,
        generation: u64,
        table: TableId,
        key: &[u8],
        value: &Option<Vec<u8>>,
    ) {
        let mut s = self.state.lock();
        if let (0, true, Some(i)) = (s.writing, s.generation == generation, self.slot(table)) {
            s.insert(i, key.to_vec(), value.clone());
        }
    }

    /// A commit begins: the cache answers nothing until it ends.
    pub(crate) fn begin_commit(&self) {
        let mut s = self.state.lock();
        s.writing += 1;
        s.generation += 1;
    }

    /// The commit begun last was written: its range deletes and then its point writes
    /// (`None`: deleted) of the cached tables go into the entries.
    pub(crate) fn commit_written(&self, ranges: &[Range], points: Vec<(Key, Option<Vec<u8>>)>) {
        let mut s = self.state.lock();
        s.end_commit();
        for (t, lo, hi) in ranges {
            if let Some(i) = self.slot(*t) {
                let m = &mut s.entries[i];
                m.retain(|k, _| k < lo || k >= hi);
            }
        }
        s.len = s.entries.iter().map(HashMap::len).sum();
        for ((t, k), v) in points {
            if let Some(i) = self.slot(t) {
                s.insert(i, k, v);
            }
        }
    }

    /// The commit begun last failed, or changed keys it did not list: what the store holds
    /// now is not known here, so the cache starts empty.
    pub(crate) fn commit_failed(&self) {
        let mut s = self.state.lock();
        s.end_commit();
        s.clear();
    }
}

impl State {
    fn end_commit(&mut self) {
        self.writing -= 1;
        self.generation += 1;
    }

    fn clear(&mut self) {
        self.entries.iter_mut().for_each(HashMap::clear);
        self.len = 0;
    }

    fn insert(&mut self, slot: usize, key: Vec<u8>, value: Option<Vec<u8>>) {
        if self.len >= CAPACITY && !self.entries[slot].contains_key(&key) {
            self.clear();
        }
        if self.entries[slot].insert(key, value).is_none() {
            self.len += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NAMES: TableId = TableId(1);
    const INODES: TableId = TableId(3);
    const DATA: TableId = TableId(4);

    fn cache() -> MetaCache {
        MetaCache::new(vec![NAMES, INODES])
    }

    fn hit(c: &MetaCache, t: TableId, k: &[u8]) -> Option<Option<Vec<u8>>> {
        match c.get(t, k) {
            Lookup::Hit(v) => Some(v),
            Lookup::Miss(_) => None,
        }
    }

    fn generation(c: &MetaCache, t: TableId, k: &[u8]) -> u64 {
        match c.get(t, k) {
            Lookup::Miss(g) => g,
            Lookup::Hit(v) => panic!("expected a miss, found {v:?}"),
        }
    }

    #[test]
    fn a_read_is_kept_and_absence_too() {
        let c = cache();
        assert!(c.holds(NAMES) && c.holds(INODES) && !c.holds(DATA));
        let g = generation(&c, INODES, b"a");
        c.fill(g, INODES, b"a", &Some(b"1".to_vec()));
        let g = generation(&c, NAMES, b"a");
        c.fill(g, NAMES, b"a", &None);
        assert_eq!(hit(&c, INODES, b"a"), Some(Some(b"1".to_vec())));
        assert_eq!(
            hit(&c, NAMES, b"a"),
            Some(None),
            "the same key of another table"
        );
        assert_eq!(hit(&c, INODES, b"b"), None);
    }

    #[test]
    fn a_read_that_raced_a_commit_is_not_kept() {
        let c = cache();
        // Read before the commit began, filled after it ended: the value read may be the
        // one the commit replaced.
        let before = generation(&c, INODES, b"a");
        c.begin_commit();
        c.commit_written(&[], vec![((INODES, b"a".to_vec()), Some(b"new".to_vec()))]);
        c.fill(before, INODES, b"a", &Some(b"old".to_vec()));
        assert_eq!(hit(&c, INODES, b"a"), Some(Some(b"new".to_vec())));
        // Read while a commit is written: the store may or may not hold it yet.
        c.begin_commit();
        let during = generation(&c, INODES, b"b");
        assert_eq!(
            hit(&c, INODES, b"a"),
            None,
            "nothing is answered while a commit is written"
        );
        c.fill(during, INODES, b"b", &Some(b"maybe".to_vec()));
        c.commit_written(&[], vec![]);
        assert_eq!(hit(&c, INODES, b"b"), None);
        assert_eq!(hit(&c, INODES, b"a"), Some(Some(b"new".to_vec())));
    }

    #[test]
    fn commits_put_their_writes_and_a_failed_one_empties_it() {
        let c = cache();
        for k in [b"a1", b"a2", b"b1"] {
            let g = generation(&c, NAMES, k);
            c.fill(g, NAMES, k, &Some(k.to_vec()));
        }
        c.begin_commit();
        c.commit_written(
            &[
                (NAMES, b"a".to_vec(), b"b".to_vec()),
                (DATA, vec![], vec![0xff]),
            ],
            vec![
                ((NAMES, b"a2".to_vec()), Some(b"again".to_vec())),
                ((INODES, b"x".to_vec()), None),
                ((DATA, b"a1".to_vec()), Some(vec![0; 4096])),
            ],
        );
        assert_eq!(hit(&c, NAMES, b"a1"), None, "dropped: the range deleted it");
        assert_eq!(
            hit(&c, NAMES, b"a2"),
            Some(Some(b"again".to_vec())),
            "written after it"
        );
        assert_eq!(hit(&c, NAMES, b"b1"), Some(Some(b"b1".to_vec())));
        assert_eq!(hit(&c, INODES, b"x"), Some(None));
        c.begin_commit();
        c.commit_failed();
        for (t, k) in [(NAMES, &b"a2"[..]), (NAMES, b"b1"), (INODES, b"x")] {
            assert_eq!(hit(&c, t, k), None);
        }
    }

    #[test]
    fn a_full_cache_starts_afresh() {
        let c = cache();
        for i in 0..CAPACITY as u32 {
            let k = i.to_be_bytes();
            let g = generation(&c, INODES, &k);
            c.fill(g, INODES, &k, &None);
        }
        assert_eq!(hit(&c, INODES, &0u32.to_be_bytes()), Some(None));
        let g = generation(&c, NAMES, b"one more");
        c.fill(g, NAMES, b"one more", &None);
        assert_eq!(hit(&c, INODES, &0u32.to_be_bytes()), None);
        assert_eq!(hit(&c, NAMES, b"one more"), Some(None));
        assert_eq!(c.state.lock().len, 1);
    }
}
