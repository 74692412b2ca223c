//! An in-memory model of the file system's semantics (ext4's, as `stitchdb-fs` implements
//! them), written independently of it: inodes in a map, directories as maps of names. The
//! model test runs random operations on both and compares results and error codes.

#![allow(dead_code, clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use stitchdb_fs::{Kind, MAX_FILE_SIZE, NAME_MAX, RENAME_EXCHANGE, RENAME_NOREPLACE, ROOT_INO};

pub type R<T> = Result<T, i32>;

/// The file system's block size.
const BLOCK: u64 = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MInode {
    pub kind: Kind,
    pub perm: u32,
    pub nlink: u32,
    pub data: Vec<u8>,
    /// The 4 KiB blocks holding data (written, and not since truncated away or punched out
    /// whole): what `SEEK_DATA` finds.
    pub blocks: BTreeSet<u64>,
    pub target: Vec<u8>,
    pub xattrs: BTreeMap<Vec<u8>, Vec<u8>>,
    pub children: BTreeMap<Vec<u8>, u64>,
    pub parent: u64,
}

#[derive(Debug, Clone)]
pub struct Model {
    pub inodes: HashMap<u64, MInode>,
    pub open: HashMap<u64, u32>,
    pub next_ino: u64,
}

fn name_ok(name: &[u8]) -> R<()> {
    if name.len() > NAME_MAX {
        Err(libc::ENAMETOOLONG)
    } else {
        Ok(())
    }
}

impl Model {
    pub fn new() -> Model {
        let mut inodes = HashMap::new();
        inodes.insert(ROOT_INO, MInode::new(Kind::Dir, 0o755, ROOT_INO));
        Model {
            inodes,
            open: HashMap::new(),
            next_ino: 2,
        }
    }

    fn node(&mut self, ino: u64) -> &mut MInode {
        self.inodes.get_mut(&ino).unwrap()
    }

    fn get(&self, ino: u64) -> R<&MInode> {
        self.inodes.get(&ino).ok_or(libc::ENOENT)
    }

    fn dir(&self, ino: u64) -> R<&MInode> {
        let d = self.get(ino)?;
        if d.kind != Kind::Dir {
            return Err(libc::ENOTDIR);
        }
        if d.nlink == 0 {
            return Err(libc::ENOENT);
        }
        Ok(d)
    }

    pub fn lookup(&self, parent: u64, name: &[u8]) -> R<u64> {
        self.get(parent).and_then(|d| {
            if d.kind != Kind::Dir {
                Err(libc::ENOTDIR)
            } else {
                Ok(d)
            }
        })?;
        name_ok(name)?;
        self.inodes[&parent]
            .children
            .get(name)
            .copied()
            .ok_or(libc::ENOENT)
    }

    pub fn make(&mut self, parent: u64, name: &[u8], kind: Kind, perm: u32) -> R<u64> {
        name_ok(name)?;
        let d = self.dir(parent)?;
        if d.children.contains_key(name) {
            return Err(libc::EEXIST);
        }
        let ino = self.next_ino;
        self.next_ino += 1;
        let node = MInode::new(kind, perm, parent);
        self.inodes.insert(ino, node);
        let d = self
            .inodes
            .get_mut(&parent)
            .unwrap_or_else(|| unreachable!());
        d.children.insert(name.to_vec(), ino);
        if kind == Kind::Dir {
            d.nlink += 1;
        }
        Ok(ino)
    }

    pub fn symlink(&mut self, parent: u64, name: &[u8], target: &[u8]) -> R<u64> {
        let ino = self.make(parent, name, Kind::Symlink, 0o777)?;
        self.node(ino).target = target.to_vec();
        Ok(ino)
    }

    fn drop_link(&mut self, ino: u64) {
        let n = self.inodes.get_mut(&ino).unwrap_or_else(|| unreachable!());
        n.nlink = if n.kind == Kind::Dir { 0 } else { n.nlink - 1 };
        if n.nlink == 0 && self.open.get(&ino).copied().unwrap_or(0) == 0 {
            self.inodes.remove(&ino);
        }
    }

    pub fn unlink(&mut self, parent: u64, name: &[u8]) -> R<()> {
        name_ok(name)?;
        let d = self.dir(parent)?;
        let ino = *d.children.get(name).ok_or(libc::ENOENT)?;
        if self.inodes[&ino].kind == Kind::Dir {
            return Err(libc::EISDIR);
        }
        self.node(parent).children.remove(name);
        self.drop_link(ino);
        Ok(())
    }

    pub fn rmdir(&mut self, parent: u64, name: &[u8]) -> R<()> {
        name_ok(name)?;
        let d = self.dir(parent)?;
        let ino = *d.children.get(name).ok_or(libc::ENOENT)?;
        let c = &self.inodes[&ino];
        if c.kind != Kind::Dir {
            return Err(libc::ENOTDIR);
        }
        if !c.children.is_empty() {
            return Err(libc::ENOTEMPTY);
        }
        let d = self
            .inodes
            .get_mut(&parent)
            .unwrap_or_else(|| unreachable!());
        d.children.remove(name);
        d.nlink -= 1;
        self.drop_link(ino);
        Ok(())
    }

    pub fn link(&mut self, ino: u64, parent: u64, name: &[u8]) -> R<()> {
        name_ok(name)?;
        let a = self.get(ino)?;
        let d = self.dir(parent)?;
        if d.children.contains_key(name) {
            return Err(libc::EEXIST);
        }
        if a.kind == Kind::Dir {
            return Err(libc::EPERM);
        }
        if self.inodes[&ino].nlink == 0 {
            return Err(libc::ENOENT);
        }
        self.node(parent).children.insert(name.to_vec(), ino);
        self.node(ino).nlink += 1;
        Ok(())
    }

    fn is_ancestor(&self, anc: u64, mut ino: u64) -> bool {
        loop {
            if ino == anc {
                return true;
            }
            if ino == ROOT_INO {
                return false;
            }
            ino = self.inodes[&ino].parent;
        }
    }

    pub fn rename(&mut self, p: u64, name: &[u8], np: u64, nname: &[u8], flags: u32) -> R<()> {
        if flags == RENAME_EXCHANGE | RENAME_NOREPLACE {
            return Err(libc::EINVAL);
        }
        name_ok(name)?;
        name_ok(nname)?;
        self.dir(p)?;
        self.dir(np)?;
        let src = *self.inodes[&p].children.get(name).ok_or(libc::ENOENT)?;
        let dst = self.inodes[&np].children.get(nname).copied();
        if flags & RENAME_EXCHANGE != 0 && dst.is_none() {
            return Err(libc::ENOENT);
        }
        if flags & RENAME_NOREPLACE != 0 && dst.is_some() {
            return Err(libc::EEXIST);
        }
        let sdir = self.inodes[&src].kind == Kind::Dir;
        if sdir && p != np && self.is_ancestor(src, np) {
            return Err(libc::EINVAL);
        }
        // A target directory holding the source (whatever the source is): Linux's "trap".
        if let Some(d) = dst {
            if self.inodes[&d].kind == Kind::Dir && p != np && self.is_ancestor(d, p) {
                return Err(if flags & RENAME_EXCHANGE != 0 {
                    libc::EINVAL
                } else {
                    libc::ENOTEMPTY
                });
            }
        }
        if flags & RENAME_EXCHANGE != 0 {
            let dst = dst.unwrap_or_else(|| unreachable!());
            if dst == src {
                return Ok(());
            }
            self.node(p).children.insert(name.to_vec(), dst);
            self.node(np).children.insert(nname.to_vec(), src);
            let ddir = self.inodes[&dst].kind == Kind::Dir;
            if p != np && sdir != ddir {
                let (g, l) = if sdir { (np, p) } else { (p, np) };
                self.node(g).nlink += 1;
                self.node(l).nlink -= 1;
            }
            if sdir {
                self.node(src).parent = np;
            }
            if ddir {
                self.node(dst).parent = p;
            }
            return Ok(());
        }
        if let Some(d) = dst {
            if d == src {
                return Ok(());
            }
            let dn = &self.inodes[&d];
            match (sdir, dn.kind == Kind::Dir) {
                (true, false) => return Err(libc::ENOTDIR),
                (false, true) => return Err(libc::EISDIR),
                (true, true) if !dn.children.is_empty() => return Err(libc::ENOTEMPTY),
                _ => {}
            }
        }
        self.node(p).children.remove(name);
        if let Some(d) = dst {
            if self.inodes[&d].kind == Kind::Dir {
                self.node(np).nlink -= 1;
            }
            self.drop_link(d);
        }
        self.node(np).children.insert(nname.to_vec(), src);
        if sdir && p != np {
            self.node(p).nlink -= 1;
            self.node(np).nlink += 1;
            self.node(src).parent = np;
        }
        Ok(())
    }

    fn file_mut(&mut self, ino: u64) -> R<&mut MInode> {
        let n = self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        match n.kind {
            Kind::File => Ok(n),
            Kind::Dir => Err(libc::EISDIR),
            _ => Err(libc::EINVAL),
        }
    }

    pub fn write(&mut self, ino: u64, off: u64, data: &[u8]) -> R<usize> {
        let n = self.file_mut(ino)?;
        if data.is_empty() {
            return Ok(0);
        }
        if off >= MAX_FILE_SIZE {
            return Err(libc::EFBIG);
        }
        let end = off as usize + data.len();
        if n.data.len() < end {
            n.data.resize(end, 0);
        }
        n.data[off as usize..end].copy_from_slice(data);
        n.blocks.extend(off / BLOCK..=(end as u64 - 1) / BLOCK);
        Ok(data.len())
    }

    pub fn read(&mut self, ino: u64, off: u64, len: usize) -> R<Vec<u8>> {
        let n = self.file_mut(ino)?;
        let s = (off as usize).min(n.data.len());
        let e = (off as usize).saturating_add(len).min(n.data.len());
        Ok(n.data[s..e].to_vec())
    }

    pub fn truncate(&mut self, ino: u64, size: u64) -> R<()> {
        let n = self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        match n.kind {
            Kind::File => {}
            Kind::Dir => return Err(libc::EISDIR),
            _ => return Err(libc::EINVAL),
        }
        if size > MAX_FILE_SIZE {
            return Err(libc::EFBIG);
        }
        n.data.resize(size as usize, 0);
        n.blocks.retain(|&b| b < size.div_ceil(BLOCK));
        Ok(())
    }

    pub fn punch(&mut self, ino: u64, off: u64, len: u64) -> R<()> {
        let n = self.file_mut(ino)?;
        let e = (off + len).min(n.data.len() as u64) as usize;
        let s = (off as usize).min(e);
        n.data[s..e].fill(0);
        if s < e {
            // A range past the end frees the end's block too (as ext4).
            let end = if off + len > n.data.len() as u64 {
                (e as u64).div_ceil(BLOCK)
            } else {
                e as u64 / BLOCK
            };
            let whole = (s as u64).div_ceil(BLOCK)..end;
            n.blocks.retain(|b| !whole.contains(b));
        }
        Ok(())
    }

    /// `FALLOC_FL_ZERO_RANGE`, with `FALLOC_FL_KEEP_SIZE` if `keep_size`: a punched hole,
    /// then the size extended to the range's end unless kept.
    pub fn zero_range(&mut self, ino: u64, off: u64, len: u64, keep_size: bool) -> R<()> {
        if !keep_size && off + len > MAX_FILE_SIZE {
            self.file_mut(ino)?;
            return Err(libc::EFBIG);
        }
        self.punch(ino, off, len)?;
        let n = self.file_mut(ino)?;
        if !keep_size && off + len > n.data.len() as u64 {
            n.data.resize((off + len) as usize, 0);
        }
        Ok(())
    }

    /// `lseek` with `SEEK_DATA` (`data`) or `SEEK_HOLE`, at block granularity.
    pub fn seek(&mut self, ino: u64, off: u64, data: bool) -> R<u64> {
        let n = self.file_mut(ino)?;
        let size = n.data.len() as u64;
        if off >= size {
            return Err(libc::ENXIO);
        }
        let mut block = off / BLOCK;
        if data {
            return match n.blocks.range(block..).next() {
                Some(&b) if b * BLOCK < size => Ok((b * BLOCK).max(off)),
                _ => Err(libc::ENXIO),
            };
        }
        while n.blocks.contains(&block) {
            block += 1;
        }
        Ok((block * BLOCK).clamp(off, size))
    }

    pub fn setxattr(&mut self, ino: u64, name: &[u8], value: &[u8], flags: u32) -> R<()> {
        let n = self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        if !matches!(n.kind, Kind::File | Kind::Dir) {
            return Err(libc::EPERM);
        }
        let exists = n.xattrs.contains_key(name);
        if flags & 1 != 0 && exists {
            return Err(libc::EEXIST);
        }
        if flags & 2 != 0 && !exists {
            return Err(libc::ENODATA);
        }
        n.xattrs.insert(name.to_vec(), value.to_vec());
        Ok(())
    }

    pub fn getxattr(&self, ino: u64, name: &[u8]) -> R<Vec<u8>> {
        let n = self.get(ino)?;
        if !matches!(n.kind, Kind::File | Kind::Dir) {
            return Err(libc::ENODATA);
        }
        n.xattrs.get(name).cloned().ok_or(libc::ENODATA)
    }

    pub fn removexattr(&mut self, ino: u64, name: &[u8]) -> R<()> {
        let n = self.inodes.get_mut(&ino).ok_or(libc::ENOENT)?;
        if !matches!(n.kind, Kind::File | Kind::Dir) {
            return Err(libc::EPERM);
        }
        n.xattrs.remove(name).map(|_| ()).ok_or(libc::ENODATA)
    }

    pub fn open(&mut self, ino: u64) -> R<()> {
        self.get(ino)?;
        *self.open.entry(ino).or_insert(0) += 1;
        Ok(())
    }

    pub fn release(&mut self, ino: u64) {
        if let Some(n) = self.open.get_mut(&ino) {
            *n -= 1;
            if *n == 0 {
                self.open.remove(&ino);
                if self.inodes.get(&ino).is_some_and(|i| i.nlink == 0) {
                    self.inodes.remove(&ino);
                }
            }
        }
    }

    /// Every directory reachable from the root.
    pub fn dirs(&self) -> Vec<u64> {
        let mut out = vec![];
        let mut todo = vec![ROOT_INO];
        while let Some(d) = todo.pop() {
            out.push(d);
            for c in self.inodes[&d].children.values() {
                if self.inodes[c].kind == Kind::Dir {
                    todo.push(*c);
                }
            }
        }
        out.sort();
        out
    }

    /// Every inode of `kind` (orphans included).
    pub fn of_kind(&self, kind: Kind) -> Vec<u64> {
        let mut v: Vec<u64> = self
            .inodes
            .iter()
            .filter(|(_, n)| n.kind == kind)
            .map(|(i, _)| *i)
            .collect();
        v.sort();
        v
    }
}

impl MInode {
    fn new(kind: Kind, perm: u32, parent: u64) -> MInode {
        MInode {
            kind,
            perm: perm & 0o7777,
            nlink: if kind == Kind::Dir { 2 } else { 1 },
            data: Vec::new(),
            blocks: BTreeSet::new(),
            target: Vec::new(),
            xattrs: BTreeMap::new(),
            children: BTreeMap::new(),
            parent,
        }
    }
}
