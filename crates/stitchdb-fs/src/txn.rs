//! [`FsTransaction`]: file system operations, and records of ordinary tables, inside one
//! engine transaction: they commit or abort as a whole. Each operation runs over the
//! transaction's view (its snapshot and its own writes) with its writes kept aside until it
//! succeeds (`TxnOp`), so a failed operation leaves the transaction as it was; a lock inside
//! serializes the operations of one transaction (several processes may share it).

use crate::cache::{Key, Range};
use crate::creds::Caller;
use crate::error::{FsError, FsResult};
use crate::fs::Fs;
use crate::handles::Handles;
use crate::kv::{Kv, TxnOp};
use crate::schema::{
    decode_attr, decode_ino_key, decode_name, decode_name_key, decode_pair_key, ino_range, Attr,
    Kind, Tables, ROOT_INO,
};
use crate::tree::{call, FileTree, OpFn, Run};
use parking_lot::{Mutex, MutexGuard};
use std::collections::btree_map::Entry as Slot;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ops::Bound;
use std::sync::Arc;
use stitchdb::{Durability, Isolation, TableId, Transaction};

/// File system operations inside one engine transaction (see [`Fs::begin`]). Its
/// operations are [`FileTree`]'s; [`records`](Self::records) reads and writes ordinary
/// tables in the same transaction. Dropping it aborts.
pub struct FsTransaction {
    fs: Arc<Fs>,
    state: Mutex<State>,
    /// Files open in this transaction (an unlinked one is kept until its last close here, or
    /// the commit), and deleted inodes still held.
    handles: Mutex<Handles>,
}

struct State {
    txn: Transaction<'static>,
    /// The failure that left an operation's writes half applied: every later call fails with
    /// it, and so does the commit.
    broken: Option<FsError>,
    track: Track,
}

/// A value as the transaction began and now (`None`: absent).
type Then<T> = (Option<T>, Option<T>);

/// What the transaction changed in the file system's tables, for [`FsTransaction::changes`].
#[derive(Default)]
struct Track {
    /// Each name written: the inode it named when the transaction began and now (`None`:
    /// no such name).
    names: BTreeMap<(u64, Vec<u8>), Then<u64>>,
    /// Each inode record written: as the transaction began and now.
    inodes: BTreeMap<u64, Then<Attr>>,
    /// Inodes whose data, symlink target or extended attributes were written.
    contents: BTreeSet<u64>,
    /// Bytes of file data written.
    data_bytes: u64,
}

/// What a transaction changed so far, as paths (`/a/b`) in its view, each sorted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Changes {
    /// Names that did not exist when it began.
    pub added: Vec<Vec<u8>>,
    /// Files whose contents or attributes changed (not counting access times, nor the
    /// times and link counts that adding or removing a name changes), and names that now
    /// name another file.
    pub changed: Vec<Vec<u8>>,
    /// Names that existed when it began and are gone (paths as they were).
    pub removed: Vec<Vec<u8>>,
    /// Bytes of file data written.
    pub data_bytes: u64,
}

/// What a committed transaction wrote to the file system's tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Committed {
    /// Names written (added, removed or replaced).
    pub names: usize,
    /// Inode records written.
    pub inodes: usize,
    /// Bytes of file data written.
    pub data_bytes: u64,
}

impl Fs {
    /// Begins a transaction over the file system and any other tables of the store, with
    /// `isolation` (see docs/kvfs.md, "Transactions and snapshots through the library", for
    /// what it means for file operations). It does not borrow the handle: it can be kept in
    /// a table of open transactions.
    pub fn begin(self: &Arc<Fs>, isolation: Isolation) -> FsResult<FsTransaction> {
        if self.options().read_only {
            return Err(FsError::Errno(libc::EROFS));
        }
        Ok(FsTransaction {
            fs: self.clone(),
            state: Mutex::new(State {
                txn: self.db().begin_owned(isolation)?,
                broken: None,
                track: Track::default(),
            }),
            handles: Mutex::new(Handles::default()),
        })
    }
}

impl FsTransaction {
    /// Reads and writes records of the store's tables inside this transaction (writes to
    /// the file system's own tables fail with `EPERM`: they change through file operations).
    /// The file operations of this transaction wait while the returned handle is held.
    pub fn records(&self) -> FsResult<Records<'_>> {
        let state = self.state.lock();
        state.usable()?;
        Ok(Records {
            state,
            tables: self.fs.tables(),
        })
    }

    /// What the transaction changed so far in the file system (names from its own writes,
    /// else from the mainline's tables as committed now; a file it changed whose name it did
    /// not write costs one scan of `fs.names` to name).
    pub fn changes(&self) -> FsResult<Changes> {
        let state = self.state.lock();
        let track = &state.track;
        let mut now = Paths::new(&self.fs, track, true);
        let mut then = Paths::new(&self.fs, track, false);
        let (mut added, mut changed, mut removed) =
            (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
        for ((parent, name), (was, is)) in &track.names {
            let (set, paths) = match (was, is) {
                (None, Some(_)) => (&mut added, &mut now),
                (Some(_), None) => (&mut removed, &mut then),
                (Some(a), Some(b)) if a != b => (&mut changed, &mut now),
                _ => continue,
            };
            if let Some(p) = paths.child(*parent, name)? {
                set.insert(p);
            }
        }
        for (ino, (was, is)) in &track.inodes {
            // Inodes made or deleted show as the names added or removed.
            let (Some(was), Some(is)) = (was, is) else {
                continue;
            };
            if !track.contents.contains(ino) && !differs(was, is) {
                continue;
            }
            if let Some(p) = now.path(*ino)? {
                if !added.contains(&p) {
                    changed.insert(p);
                }
            }
        }
        Ok(Changes {
            added: added.into_iter().collect(),
            changed: changed.into_iter().collect(),
            removed: removed.into_iter().collect(),
            data_bytes: track.data_bytes,
        })
    }

    /// Commits everything the transaction did, files and records, as one commit with
    /// `durability`. Files unlinked while open in it are deleted first (unless open on the
    /// mainline). A conflict fails it with [`FsError::Conflict`] naming the file; nothing is
    /// then applied.
    pub fn commit(self, durability: Durability) -> FsResult<Committed> {
        let open: Vec<u64> = self.handles.lock().open_inodes().map(|(i, _)| i).collect();
        for ino in open {
            call(&self, &Caller::root(), Run::Change, |op| {
                if self.fs.open_here(ino) {
                    return Ok(());
                }
                match op.attr(ino) {
                    Ok(a) if a.nlink == 0 => op.purge(ino),
                    Ok(_) | Err(FsError::Errno(libc::ENOENT)) => Ok(()),
                    Err(e) => Err(e),
                }
            })?;
        }
        let FsTransaction { fs, state, .. } = self;
        let State { txn, broken, track } = state.into_inner();
        if let Some(e) = broken {
            return Err(e);
        }
        let committed = Committed {
            names: track.names.len(),
            inodes: track.inodes.len(),
            data_bytes: track.data_bytes,
        };
        match txn.commit_with(durability) {
            Ok(()) => Ok(committed),
            Err(e @ stitchdb::Error::Conflict { .. }) => {
                let stitchdb::Error::Conflict { table, key, .. } = &e else {
                    return Err(e.into());
                };
                let path = Paths::new(&fs, &track, true).of_key(table, key)?;
                Err(FsError::Conflict {
                    path,
                    detail: e.to_string(),
                })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Drops everything the transaction did.
    pub fn abort(self) {}
}

impl FileTree for FsTransaction {
    fn fs(&self) -> &Fs {
        &self.fs
    }

    fn handles(&self) -> &Mutex<Handles> {
        &self.handles
    }

    fn run(&self, caller: &Caller, how: Run, f: &mut OpFn<'_>) -> FsResult<()> {
        if how == Run::NoteAccess {
            return Ok(());
        }
        let mut state = self.state.lock();
        state.usable()?;
        let mut kv = TxnOp::new(&mut state.txn);
        // Open here or on the mainline: either keeps an unlinked file's data.
        let open = |ino| self.handles.lock().is_open(ino) || self.fs.open_here(ino);
        let mut op = self.fs.op(caller, &mut kv as &mut dyn Kv, &open);
        let r = f(&mut op);
        let deleted = std::mem::take(&mut op.deleted);
        r?;
        if how != Run::Change {
            // A read's writes (a deleted inode's `setattr` runs on a write of its own) go.
            return Ok(());
        }
        let (ranges, points) = kv.into_writes();
        state.apply(self.fs.tables(), ranges, points)?;
        drop(state);
        if self.fs.options().keep_deleted && !deleted.is_empty() {
            self.handles.lock().keep_deleted(deleted);
        }
        Ok(())
    }

    /// Nothing to do: the transaction's writes become durable with its commit.
    fn fsync(&self) -> FsResult<()> {
        Ok(())
    }
}

impl State {
    fn usable(&self) -> FsResult<()> {
        match &self.broken {
            Some(e) => Err(e.clone()),
            None => Ok(()),
        }
    }

    /// Applies one operation's writes to the transaction. A failure (a spill of the
    /// transaction's writes that failed) may leave part of them applied: the transaction is
    /// then broken.
    fn apply(
        &mut self,
        t: &Tables,
        ranges: Vec<Range>,
        points: BTreeMap<Key, Option<Vec<u8>>>,
    ) -> FsResult<()> {
        let r = self.apply_all(t, ranges, points);
        if let Err(e) = &r {
            self.broken = Some(e.clone());
        }
        r
    }

    fn apply_all(
        &mut self,
        t: &Tables,
        ranges: Vec<Range>,
        points: BTreeMap<Key, Option<Vec<u8>>>,
    ) -> FsResult<()> {
        for (table, start, end) in ranges {
            // The file system deletes ranges of one file's blocks only.
            if table == t.data {
                self.track.contents.insert(decode_pair_key(&start)?.0);
            }
            self.txn.delete_range(table, &start, &end)?;
        }
        for ((table, key), value) in points {
            self.track(t, table, &key, value.as_deref())?;
            match value {
                Some(v) => self.txn.put(table, &key, v)?,
                None => self.txn.delete(table, &key)?,
            }
        }
        Ok(())
    }

    /// Notes a write of `key` for [`FsTransaction::changes`]: a name or inode record's
    /// value before the transaction first wrote it is read then (the transaction writes
    /// it, so reading it adds no conflict a write would not).
    fn track(
        &mut self,
        t: &Tables,
        table: TableId,
        key: &[u8],
        value: Option<&[u8]>,
    ) -> FsResult<()> {
        let State { txn, track, .. } = self;
        if table == t.names {
            let (parent, name) = decode_name_key(key)?;
            let ino = |v: Option<&[u8]>| -> FsResult<Option<u64>> {
                v.map(|v| decode_name(parent, name, v).map(|e| e.ino))
                    .transpose()
            };
            let is = ino(value)?;
            match track.names.entry((parent, name.to_vec())) {
                Slot::Occupied(mut s) => s.get_mut().1 = is,
                Slot::Vacant(s) => {
                    let was = ino(txn.get(table, key)?.as_deref())?;
                    s.insert((was, is));
                }
            }
        } else if table == t.inodes {
            let ino = decode_ino_key(key)?;
            let attr = |v: Option<&[u8]>| v.map(|v| decode_attr(ino, v)).transpose();
            let is = attr(value)?;
            match track.inodes.entry(ino) {
                Slot::Occupied(mut s) => s.get_mut().1 = is,
                Slot::Vacant(s) => {
                    let was = attr(txn.get(table, key)?.as_deref())?;
                    s.insert((was, is));
                }
            }
        } else if table == t.data {
            track.contents.insert(decode_pair_key(key)?.0);
            track.data_bytes += value.map_or(0, |v| v.len() as u64);
        } else if table == t.xattrs || table == t.symlinks {
            track.contents.insert(key_ino(key)?);
        }
        Ok(())
    }
}

/// The inode a key of `fs.inodes`, `fs.data`, `fs.xattrs`, `fs.dirents`, `fs.symlinks` or
/// `fs.orphans` belongs to: its first eight bytes.
fn key_ino(key: &[u8]) -> FsResult<u64> {
    decode_ino_key(key.get(..8).unwrap_or(key))
}

/// Whether an inode's attributes changed other than by an access, or by names added or
/// removed (which change a directory's times, link count and next cookie, and a file's
/// change time and link count: the names are listed themselves).
fn differs(was: &Attr, is: &Attr) -> bool {
    let mut w = was.clone();
    w.atime = is.atime;
    w.ctime = is.ctime;
    w.nlink = is.nlink;
    if w.kind == Kind::Dir {
        w.mtime = is.mtime;
        w.next_cookie = is.next_cookie;
        w.parent = is.parent;
    }
    w != *is
}

/// Names inodes: from the transaction's own writes (its view now, or as it began), else
/// from the mainline's tables as committed now.
struct Paths<'a> {
    fs: &'a Fs,
    track: &'a Track,
    now: bool,
    /// The mainline's names of non-directories, read in one scan when first needed (a
    /// file has no pointer to its directory).
    files: Option<HashMap<u64, (u64, Vec<u8>)>>,
}

impl<'a> Paths<'a> {
    fn new(fs: &'a Fs, track: &'a Track, now: bool) -> Self {
        Paths {
            fs,
            track,
            now,
            files: None,
        }
    }

    fn pick<T: Clone>(&self, (was, is): &(T, T)) -> T {
        if self.now {
            is.clone()
        } else {
            was.clone()
        }
    }

    fn attr(&self, ino: u64) -> FsResult<Option<Attr>> {
        if let Some(pair) = self.track.inodes.get(&ino) {
            return Ok(self.pick(pair));
        }
        let t = self.fs.tables();
        match self.fs.db().get(t.inodes, crate::schema::ino_key(ino))? {
            Some(v) => decode_attr(ino, &v).map(Some),
            None => Ok(None),
        }
    }

    /// A directory and a name of `ino` in it.
    fn name_of(&mut self, ino: u64) -> FsResult<Option<(u64, Vec<u8>)>> {
        for (key, pair) in &self.track.names {
            if self.pick(pair) == Some(ino) {
                return Ok(Some(key.clone()));
            }
        }
        let Some(a) = self.attr(ino)? else {
            return Ok(None);
        };
        let t = self.fs.tables();
        let scan = |lo: Bound<&[u8]>,
                    hi: Bound<&[u8]>,
                    want: &mut dyn FnMut(u64, Vec<u8>, u64, Kind)|
         -> FsResult<()> {
            for r in self.fs.db().range(t.names, lo, hi)? {
                let (k, v) = r?;
                let (parent, name) = decode_name_key(&k)?;
                // A name the transaction wrote says what it says in `track`.
                if self.track.names.contains_key(&(parent, name.to_vec())) {
                    continue;
                }
                let e = decode_name(parent, name, &v)?;
                want(parent, name.to_vec(), e.ino, e.kind);
            }
            Ok(())
        };
        if a.kind == Kind::Dir {
            let (lo, hi) = ino_range(a.parent);
            let mut found = None;
            scan(
                Bound::Included(&lo),
                Bound::Excluded(&hi),
                &mut |p, n, i, _| {
                    if i == ino && found.is_none() {
                        found = Some((p, n));
                    }
                },
            )?;
            return Ok(found);
        }
        if self.files.is_none() {
            let mut files = HashMap::new();
            scan(Bound::Unbounded, Bound::Unbounded, &mut |p, n, i, kind| {
                if kind != Kind::Dir {
                    files.entry(i).or_insert((p, n));
                }
            })?;
            self.files = Some(files);
        }
        Ok(self.files.as_ref().and_then(|f| f.get(&ino).cloned()))
    }

    /// A path of `ino` (`None` if no name of it is found).
    fn path(&mut self, ino: u64) -> FsResult<Option<Vec<u8>>> {
        let mut names: Vec<Vec<u8>> = Vec::new();
        let mut at = ino;
        // Deeper than this is a cycle of damaged parent pointers, not a path.
        for _ in 0..4096 {
            if at == ROOT_INO {
                let mut p: Vec<u8> = Vec::new();
                for n in names.iter().rev() {
                    p.push(b'/');
                    p.extend_from_slice(n);
                }
                if p.is_empty() {
                    p.push(b'/');
                }
                return Ok(Some(p));
            }
            let Some((parent, name)) = self.name_of(at)? else {
                return Ok(None);
            };
            names.push(name);
            at = parent;
        }
        Ok(None)
    }

    /// The path of `name` in directory `parent`.
    fn child(&mut self, parent: u64, name: &[u8]) -> FsResult<Option<Vec<u8>>> {
        Ok(self.path(parent)?.map(|mut p| {
            if p != b"/" {
                p.push(b'/');
            }
            p.extend_from_slice(name);
            p
        }))
    }

    /// What a conflicting key of `table` belongs to, for a person: a path, `inode N`, or
    /// `table T` for a record.
    fn of_key(&mut self, table: &str, key: &[u8]) -> FsResult<String> {
        let t = *self.fs.tables();
        let id = self.fs.db().table(table).ok();
        let show = |p: Option<Vec<u8>>, what: String| {
            p.map_or(what, |p| String::from_utf8_lossy(&p).into_owned())
        };
        let ino = match id {
            Some(id) if id == t.names => {
                let (parent, name) = decode_name_key(key)?;
                let p = self.child(parent, name)?;
                return Ok(show(p, format!("a name in inode {parent}")));
            }
            Some(id) if id == t.sup => return Ok("/".into()),
            Some(id)
                if [t.inodes, t.data, t.xattrs, t.dirents, t.symlinks, t.orphans].contains(&id) =>
            {
                key_ino(key)?
            }
            _ => return Ok(format!("table {table}")),
        };
        let p = self.path(ino)?;
        Ok(show(p, format!("inode {ino}")))
    }
}

/// Records of the store's tables read and written inside a transaction
/// ([`FsTransaction::records`]).
pub struct Records<'a> {
    state: MutexGuard<'a, State>,
    tables: &'a Tables,
}

impl Records<'_> {
    fn writable(&self, table: TableId) -> FsResult<()> {
        if self.tables.holds(table) {
            return Err(FsError::Errno(libc::EPERM));
        }
        Ok(())
    }
}

impl Kv for Records<'_> {
    fn get(&mut self, table: TableId, key: &[u8]) -> FsResult<Option<Vec<u8>>> {
        Kv::get(&mut self.state.txn, table, key)
    }

    fn scan(
        &mut self,
        table: TableId,
        start: &[u8],
        end: &[u8],
        limit: usize,
    ) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
        Kv::scan(&mut self.state.txn, table, start, end, limit)
    }

    fn put(&mut self, table: TableId, key: &[u8], value: Vec<u8>) -> FsResult<()> {
        self.writable(table)?;
        Kv::put(&mut self.state.txn, table, key, value)
    }

    fn delete(&mut self, table: TableId, key: &[u8]) -> FsResult<()> {
        self.writable(table)?;
        Kv::delete(&mut self.state.txn, table, key)
    }

    fn delete_range(&mut self, table: TableId, start: &[u8], end: &[u8]) -> FsResult<()> {
        self.writable(table)?;
        Kv::delete_range(&mut self.state.txn, table, start, end)
    }
}
