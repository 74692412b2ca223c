//! The file system's invariants, checked over its tables: every record decodes, names and
//! dirents agree, link counts match the names, every inode is reachable from the root (or an
//! orphan), and no data lies past a file's size. Used by the tests and by `stitchdb check`.

use crate::error::{FsError, FsResult};
use crate::schema::{
    check_super, decode_attr, decode_dirent, decode_ino_key, decode_name, decode_name_key,
    decode_pair_key, Attr, Kind, Tables, BLOCK_SIZE, ROOT_INO, SUPER_KEY,
};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use stitchdb::{Db, TableId};

/// What the check found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FsCheckReport {
    /// Inodes.
    pub inodes: u64,
    /// Directory entries (names).
    pub names: u64,
    /// Data blocks.
    pub blocks: u64,
    /// Bytes in data blocks.
    pub data_bytes: u64,
    /// Orphans: unlinked inodes kept for a file still open (deleted at the next mount).
    pub orphans: u64,
    /// Every broken invariant, each naming the inode or entry.
    pub problems: Vec<String>,
}

fn scan(db: &Db, t: TableId) -> FsResult<Vec<(Vec<u8>, Vec<u8>)>> {
    db.scan_prefix(t, b"")?
        .map(|r| r.map_err(FsError::from))
        .collect()
}

/// Checks the file system in `db` (whose tables are `t`).
pub fn check_fs(db: &Db, t: &Tables) -> FsResult<FsCheckReport> {
    let mut r = FsCheckReport::default();
    let mut bad = |p: String| r.problems.push(p);
    match db.get(t.sup, SUPER_KEY)? {
        Some(v) => {
            if let Err(e) = check_super(&v) {
                bad(e.to_string());
            }
        }
        None => bad("no superblock record".into()),
    }
    let mut inodes: BTreeMap<u64, Attr> = BTreeMap::new();
    for (k, v) in scan(db, t.inodes)? {
        match decode_ino_key(&k).and_then(|ino| decode_attr(ino, &v)) {
            Ok(a) => {
                inodes.insert(a.ino, a);
            }
            Err(e) => bad(e.to_string()),
        }
    }
    let mut orphans = BTreeSet::new();
    for (k, _) in scan(db, t.orphans)? {
        match decode_ino_key(&k) {
            Ok(ino) => {
                orphans.insert(ino);
            }
            Err(e) => bad(e.to_string()),
        }
    }
    // names: (parent, name) -> entry; count links and subdirectories.
    let mut links: HashMap<u64, u32> = HashMap::new();
    let mut subdirs: HashMap<u64, u32> = HashMap::new();
    let mut parent_of: HashMap<u64, u64> = HashMap::new();
    let mut children: HashMap<u64, Vec<u64>> = HashMap::new();
    let mut by_cookie: HashMap<(u64, u64), (u64, Vec<u8>)> = HashMap::new();
    let names = scan(db, t.names)?;
    r.names = names.len() as u64;
    for (k, v) in &names {
        let (parent, name) = match decode_name_key(k) {
            Ok(x) => x,
            Err(e) => {
                bad(e.to_string());
                continue;
            }
        };
        let shown = String::from_utf8_lossy(name).into_owned();
        let e = match decode_name(parent, name, v) {
            Ok(e) => e,
            Err(e) => {
                bad(e.to_string());
                continue;
            }
        };
        match inodes.get(&parent) {
            Some(p) if p.kind == Kind::Dir => {
                if e.cookie >= p.next_cookie {
                    bad(format!(
                        "name {shown:?} in directory {parent}: cookie {} not below the directory's next cookie {}",
                        e.cookie, p.next_cookie
                    ));
                }
            }
            Some(_) => bad(format!(
                "name {shown:?}: its parent {parent} is not a directory"
            )),
            None => bad(format!(
                "name {shown:?}: its parent {parent} does not exist"
            )),
        }
        match inodes.get(&e.ino) {
            Some(a) if a.kind != e.kind => bad(format!(
                "name {shown:?} in directory {parent}: says {:?} but inode {} is {:?}",
                e.kind, e.ino, a.kind
            )),
            Some(_) => {}
            None => bad(format!(
                "name {shown:?} in directory {parent}: dangling (inode {} does not exist)",
                e.ino
            )),
        }
        *links.entry(e.ino).or_insert(0) += 1;
        if e.kind == Kind::Dir {
            *subdirs.entry(parent).or_insert(0) += 1;
            if parent_of.insert(e.ino, parent).is_some() {
                bad(format!("directory {} has more than one name", e.ino));
            }
        }
        children.entry(parent).or_default().push(e.ino);
        by_cookie.insert((parent, e.cookie), (e.ino, name.to_vec()));
    }
    let dirents = scan(db, t.dirents)?;
    if dirents.len() != names.len() {
        bad(format!(
            "{} names but {} dirents",
            names.len(),
            dirents.len()
        ));
    }
    for (k, v) in &dirents {
        let checked = decode_pair_key(k).and_then(|(dir, cookie)| {
            decode_dirent(dir, cookie, v).map(|(ino, _, name)| (dir, cookie, ino, name))
        });
        match checked {
            Ok((dir, cookie, ino, name)) => {
                if by_cookie.get(&(dir, cookie)) != Some(&(ino, name.clone())) {
                    bad(format!(
                        "dirent {cookie} of directory {dir} ({:?} -> {ino}) has no matching name",
                        String::from_utf8_lossy(&name)
                    ));
                }
            }
            Err(e) => bad(e.to_string()),
        }
    }
    // Reachability from the root.
    let mut reached = BTreeSet::new();
    let mut todo = vec![ROOT_INO];
    while let Some(ino) = todo.pop() {
        if reached.insert(ino) {
            todo.extend(children.get(&ino).into_iter().flatten().copied());
        }
    }
    if !inodes.contains_key(&ROOT_INO) {
        bad("the root directory (inode 1) does not exist".into());
    }
    for (ino, a) in &inodes {
        let named = links.get(ino).copied().unwrap_or(0);
        let orphan = orphans.contains(ino);
        if a.kind == Kind::Dir {
            let expected = if a.nlink == 0 && orphan {
                0
            } else {
                2 + subdirs.get(ino).copied().unwrap_or(0)
            };
            if a.nlink != expected {
                bad(format!(
                    "directory {ino}: link count {} but {expected} expected (2 + subdirectories)",
                    a.nlink
                ));
            }
            if *ino != ROOT_INO && !orphan && parent_of.get(ino) != Some(&a.parent) {
                bad(format!(
                    "directory {ino}: says its parent is {} but its name is in {:?}",
                    a.parent,
                    parent_of.get(ino)
                ));
            }
        } else if a.nlink != named {
            bad(format!(
                "inode {ino}: link count {} but {named} names link to it",
                a.nlink
            ));
        }
        if orphan {
            r.orphans += 1;
            if a.nlink != 0 || named != 0 {
                bad(format!("orphan {ino} still has names"));
            }
        } else if !reached.contains(ino) {
            bad(format!("inode {ino} is not reachable from the root"));
        }
        if a.kind == Kind::Symlink {
            match db.get(t.symlinks, crate::schema::ino_key(*ino))? {
                Some(target) if target.len() as u64 == a.size => {}
                Some(target) => bad(format!(
                    "symlink {ino}: size {} but its target has {} bytes",
                    a.size,
                    target.len()
                )),
                None => bad(format!("symlink {ino} has no target")),
            }
        }
    }
    for ino in &orphans {
        if !inodes.contains_key(ino) {
            bad(format!("orphan {ino} does not exist"));
        }
    }
    r.inodes = inodes.len() as u64;
    for (k, _) in scan(db, t.symlinks)? {
        if let Ok(ino) = decode_ino_key(&k) {
            if inodes.get(&ino).map(|a| a.kind) != Some(Kind::Symlink) {
                bad(format!("symlink target of {ino}, which is not a symlink"));
            }
        }
    }
    for (k, _) in scan(db, t.xattrs)? {
        if let Ok((ino, name)) = decode_name_key(&k) {
            match inodes.get(&ino) {
                None => bad(format!(
                    "extended attribute of inode {ino}, which does not exist"
                )),
                Some(a) if a.no_xattrs => bad(format!(
                    "inode {ino} is marked as having no extended attributes but has {}",
                    String::from_utf8_lossy(name)
                )),
                Some(_) => {}
            }
        }
    }
    for item in db.scan_prefix(t.data, b"")? {
        let (k, v) = item?;
        r.blocks += 1;
        r.data_bytes += v.len() as u64;
        let (ino, block) = match decode_pair_key(&k) {
            Ok(x) => x,
            Err(e) => {
                bad(e.to_string());
                continue;
            }
        };
        match inodes.get(&ino) {
            Some(a) if a.kind == Kind::File => {
                if v.len() as u64 > BLOCK_SIZE || block * BLOCK_SIZE + v.len() as u64 > a.size {
                    bad(format!(
                        "file {ino}: block {block} ({} bytes) lies past its size {}",
                        v.len(),
                        a.size
                    ));
                }
            }
            Some(_) => bad(format!("data block {block} of inode {ino}, not a file")),
            None => bad(format!(
                "data block {block} of inode {ino}, which does not exist"
            )),
        }
    }
    Ok(r)
}
