//! What keeps the metadata cache right whoever writes the file system's tables (the
//! mainline's operations, a transaction, the record API, a server), and tells the mount of
//! changes made around its mainline: a [`stitchdb::CommitObserver`] registered at mount,
//! which the store calls for every commit, under its writer lock, in commit order.

use crate::cache::{Key, MetaCache, Range};
use crate::schema::{decode_ino_key, decode_name_key, Tables};
use parking_lot::Mutex;
use std::cell::Cell;
use std::collections::HashSet;
use std::sync::Arc;
use stitchdb::{Commit, CommitObserver, TableId};

thread_local! {
    /// Set while this thread commits a mainline operation of an `Fs`: such a commit is no
    /// outside change (the store calls its observers on the committing thread).
    static OWN: Cell<bool> = const { Cell::new(false) };
}

/// Runs `commit` as a mainline operation's own commit.
pub(crate) fn own_commit<R>(commit: impl FnOnce() -> R) -> R {
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            OWN.with(|o| o.set(false));
        }
    }
    OWN.with(|o| o.set(true));
    let _reset = Reset;
    commit()
}

/// What a commit made around the mainline changed, as [`crate::Fs::on_outside_change`]
/// tells it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Changed {
    /// The inode's attributes, data, extended attributes, target or (a directory) entries.
    Inode(u64),
    /// The name `name` in directory `parent` (made, removed or pointed elsewhere).
    Name(u64, Vec<u8>),
    /// Too much to list (a spilled transaction's runs): anything may have changed.
    All,
}

/// Called with what each outside commit changed (see [`crate::Fs::on_outside_change`]).
pub type OutsideChange = Box<dyn Fn(&[Changed]) + Send + Sync>;

/// The commit being made, between `committing` and `committed`.
struct Pending {
    /// Whether the cache was closed for it.
    cached: bool,
    ranges: Vec<Range>,
    points: Vec<(Key, Option<Vec<u8>>)>,
    /// It changed cached tables without listing its keys: the cache starts afresh.
    clear: bool,
    /// What to tell of it (nothing for a mainline operation's own commit).
    changed: Vec<Changed>,
}

pub(crate) struct Observer {
    cache: Arc<MetaCache>,
    tables: Tables,
    outside: Mutex<Option<OutsideChange>>,
    pending: Mutex<Option<Pending>>,
}

impl Observer {
    pub(crate) fn new(cache: Arc<MetaCache>, tables: Tables) -> Self {
        Observer {
            cache,
            tables,
            outside: Mutex::new(None),
            pending: Mutex::new(None),
        }
    }

    pub(crate) fn on_outside_change(&self, f: OutsideChange) {
        *self.outside.lock() = Some(f);
    }

    /// What a write of `key` of the file system's `table` changed, if worth telling.
    fn change_of(&self, table: TableId, key: &[u8]) -> Option<Changed> {
        let t = &self.tables;
        if table == t.names {
            return Some(match decode_name_key(key) {
                Ok((parent, name)) => Changed::Name(parent, name.to_vec()),
                Err(_) => Changed::All,
            });
        }
        if [t.inodes, t.data, t.xattrs, t.dirents, t.symlinks].contains(&table) {
            return Some(match decode_ino_key(key.get(..8).unwrap_or(key)) {
                Ok(ino) => Changed::Inode(ino),
                Err(_) => Changed::All,
            });
        }
        // `fs.orphans` and `fs.super` change nothing a reader sees.
        None
    }
}

impl CommitObserver for Observer {
    fn committing(&self, commit: &Commit<'_>) {
        let own = OWN.with(Cell::get);
        let mut p = Pending {
            cached: false,
            ranges: Vec::new(),
            points: Vec::new(),
            clear: false,
            changed: Vec::new(),
        };
        let mut seen = HashSet::new();
        let mut tell = |c: Option<Changed>| {
            if let Some(c) = c.filter(|_| !own) {
                if seen.insert(c.clone()) {
                    p.changed.push(c);
                }
            }
        };
        for (table, start, end) in commit.range_deletes() {
            if self.cache.holds(table) {
                p.ranges.push((table, start.to_vec(), end.to_vec()));
            }
            if self.tables.holds(table) {
                // The file system deletes ranges of one file's blocks only.
                tell(match self.change_of(table, start) {
                    Some(c @ Changed::Inode(_)) if table == self.tables.data => Some(c),
                    _ => Some(Changed::All),
                });
            }
        }
        for (table, key, value) in commit.writes() {
            if self.cache.holds(table) {
                p.points
                    .push(((table, key.to_vec()), value.map(<[u8]>::to_vec)));
            }
            if self.tables.holds(table) {
                tell(self.change_of(table, key));
            }
        }
        for span in commit.spans() {
            if self.cache.holds(span.table) {
                p.clear = true;
            }
            if self.tables.holds(span.table) {
                tell(Some(Changed::All));
            }
        }
        p.cached = p.clear || !p.ranges.is_empty() || !p.points.is_empty();
        if !p.cached && p.changed.is_empty() {
            return;
        }
        if p.cached {
            self.cache.begin_commit();
        }
        // A commit told of and never made visible (the store failed in between): what the
        // store holds is not known, so the cache starts afresh.
        if let Some(stale) = self.pending.lock().replace(p) {
            if stale.cached {
                self.cache.commit_failed();
            }
        }
    }

    fn committed(&self, _seq: u64) {
        let Some(p) = self.pending.lock().take() else {
            return;
        };
        if p.cached {
            if p.clear {
                self.cache.commit_failed();
            } else {
                self.cache.commit_written(&p.ranges, p.points);
            }
        }
        if p.changed.is_empty() {
            return;
        }
        if let Some(f) = &*self.outside.lock() {
            f(&p.changed);
        }
    }
}
