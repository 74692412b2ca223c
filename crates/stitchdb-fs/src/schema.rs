//! The file system's tables and the encoding of their keys and values (specified in
//! docs/format.md, "File system tables"). Every integer in a key is big-endian, so a table's
//! key order is numeric order: an inode's data blocks sort by block number, and sequential
//! writes append keys in order (which stitching leaves in place).

use crate::error::{FsError, FsResult};
use stitchdb::{Db, TableId};

/// Bytes per data block: the data table holds a file's bytes in blocks of this size.
pub const BLOCK_SIZE: u64 = 4096;
/// The root directory's inode number.
pub const ROOT_INO: u64 = 1;
/// The largest inode number: FUSE node ids keep the 16 bits above for views of other trees
/// (the FUSE adapter's control directory, transactions, snapshots). A file system that ran
/// out of them answers `ENOSPC`, as ext4 does when out of inodes.
pub const MAX_INO: u64 = (1 << 48) - 1;
/// The longest name of a directory entry, in bytes (ext4's).
pub const NAME_MAX: usize = 255;
/// The largest file size: ext4's with 4 KiB blocks ((2^32 - 1) blocks).
pub const MAX_FILE_SIZE: u64 = ((1u64 << 32) - 1) * BLOCK_SIZE;
/// The most links an inode may have (ext4's).
pub const LINK_MAX: u32 = 65_000;
/// The version of the file system's records this build writes and reads.
pub const FORMAT_VERSION: u8 = 1;
/// The first cookie of a directory's entries (1 and 2 are `.` and `..`).
pub const FIRST_COOKIE: u64 = 3;

/// The file system's tables in a store.
#[derive(Debug, Clone, Copy)]
pub struct Tables {
    /// `fs.super`: the file system's identity (`superblock` -> format).
    pub sup: TableId,
    /// `fs.names`: (parent inode, name) -> entry (inode, kind, cookie).
    pub names: TableId,
    /// `fs.dirents`: (parent inode, cookie) -> entry (inode, kind, name): readdir's order.
    pub dirents: TableId,
    /// `fs.inodes`: inode -> attributes.
    pub inodes: TableId,
    /// `fs.data`: (inode, block number) -> up to [`BLOCK_SIZE`] bytes.
    pub data: TableId,
    /// `fs.symlinks`: inode -> target.
    pub symlinks: TableId,
    /// `fs.xattrs`: (inode, name) -> value.
    pub xattrs: TableId,
    /// `fs.orphans`: inode -> empty: unlinked inodes still open when written.
    pub orphans: TableId,
}

/// The names of the file system's tables, in the order of [`Tables`]' fields.
pub const TABLE_NAMES: [&str; 8] = [
    "fs.super",
    "fs.names",
    "fs.dirents",
    "fs.inodes",
    "fs.data",
    "fs.symlinks",
    "fs.xattrs",
    "fs.orphans",
];

/// The key of the superblock record in `fs.super`.
pub const SUPER_KEY: &[u8] = b"superblock";

impl Tables {
    /// The tables of `db`, created where missing.
    pub fn open_or_create(db: &Db) -> FsResult<Tables> {
        let mut ids = [TableId(0); 8];
        for (id, name) in ids.iter_mut().zip(TABLE_NAMES) {
            *id = db.open_table(name)?;
        }
        Ok(Tables::from_ids(ids))
    }

    /// The tables of `db`, or `None` if it holds no file system.
    pub fn find(db: &Db) -> FsResult<Option<Tables>> {
        let mut ids = [TableId(0); 8];
        for (id, name) in ids.iter_mut().zip(TABLE_NAMES) {
            match db.table(name) {
                Ok(t) => *id = t,
                Err(stitchdb::Error::NoSuchTable(_)) => return Ok(None),
                Err(e) => return Err(e.into()),
            }
        }
        Ok(Some(Tables::from_ids(ids)))
    }

    /// Whether `table` is one of the file system's.
    pub fn holds(&self, table: TableId) -> bool {
        let t = self;
        [
            t.sup, t.names, t.dirents, t.inodes, t.data, t.symlinks, t.xattrs, t.orphans,
        ]
        .contains(&table)
    }

    fn from_ids(ids: [TableId; 8]) -> Tables {
        let [sup, names, dirents, inodes, data, symlinks, xattrs, orphans] = ids;
        Tables {
            sup,
            names,
            dirents,
            inodes,
            data,
            symlinks,
            xattrs,
            orphans,
        }
    }
}

/// What an inode is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A named pipe.
    Fifo,
    /// A Unix domain socket.
    Socket,
    /// A character device.
    CharDev,
    /// A block device.
    BlockDev,
}

impl Kind {
    fn code(self) -> u8 {
        match self {
            Kind::File => 1,
            Kind::Dir => 2,
            Kind::Symlink => 3,
            Kind::Fifo => 4,
            Kind::Socket => 5,
            Kind::CharDev => 6,
            Kind::BlockDev => 7,
        }
    }

    fn from_code(c: u8) -> Option<Kind> {
        Some(match c {
            1 => Kind::File,
            2 => Kind::Dir,
            3 => Kind::Symlink,
            4 => Kind::Fifo,
            5 => Kind::Socket,
            6 => Kind::CharDev,
            7 => Kind::BlockDev,
            _ => return None,
        })
    }

    /// The `S_IF*` bits of a mode with this kind.
    pub fn mode_bits(self) -> u32 {
        match self {
            Kind::File => libc::S_IFREG,
            Kind::Dir => libc::S_IFDIR,
            Kind::Symlink => libc::S_IFLNK,
            Kind::Fifo => libc::S_IFIFO,
            Kind::Socket => libc::S_IFSOCK,
            Kind::CharDev => libc::S_IFCHR,
            Kind::BlockDev => libc::S_IFBLK,
        }
    }

    /// The kind a mode's `S_IF*` bits name.
    pub fn from_mode(mode: u32) -> Option<Kind> {
        Some(match mode & libc::S_IFMT {
            libc::S_IFREG => Kind::File,
            libc::S_IFDIR => Kind::Dir,
            libc::S_IFLNK => Kind::Symlink,
            libc::S_IFIFO => Kind::Fifo,
            libc::S_IFSOCK => Kind::Socket,
            libc::S_IFCHR => Kind::CharDev,
            libc::S_IFBLK => Kind::BlockDev,
            _ => return None,
        })
    }
}

/// A point in time: seconds and nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct Timespec {
    /// Seconds (negative before 1970).
    pub secs: i64,
    /// Nanoseconds, below 10^9.
    pub nanos: u32,
}

/// An inode's attributes: the value of `fs.inodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Attr {
    /// The inode number (the key; not stored in the value).
    pub ino: u64,
    /// What the inode is.
    pub kind: Kind,
    /// Permission bits, set-id and sticky bits (`mode & 0o7777`).
    pub perm: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// Names that link to it (for a directory: 2 plus its subdirectories).
    pub nlink: u32,
    /// Bytes (a symlink: its target's length).
    pub size: u64,
    /// Device number of a device node.
    pub rdev: u32,
    /// Last access.
    pub atime: Timespec,
    /// Last change of the contents.
    pub mtime: Timespec,
    /// Last change of the inode.
    pub ctime: Timespec,
    /// Creation.
    pub crtime: Timespec,
    /// A directory's parent (`..`); 0 for other kinds.
    pub parent: u64,
    /// A directory's next entry cookie (readdir offsets); 0 for other kinds.
    pub next_cookie: u64,
    /// The inode has no extended attributes: set when it is made, cleared by its first
    /// `setxattr` (false says nothing). Deleting, writing and asking for a file's
    /// capabilities then need no look into `fs.xattrs`.
    pub no_xattrs: bool,
}

impl Attr {
    /// The full `st_mode`: kind and permission bits.
    pub fn mode(&self) -> u32 {
        self.kind.mode_bits() | self.perm
    }

    /// Blocks of 512 bytes the file occupies, as `st_blocks` counts them (rounded to whole
    /// data blocks; holes are counted too, which `stat` cannot tell from here cheaply).
    pub fn blocks(&self) -> u64 {
        self.size.div_ceil(BLOCK_SIZE) * (BLOCK_SIZE / 512)
    }
}

/// Bit 0 of an inode record's flags word: [`Attr::no_xattrs`]. Records written before it
/// have the word zero, which reads as "may have extended attributes", as it must.
const FLAG_NO_XATTRS: u32 = 1;

/// Encoded size of an inode record, version 1.
/// Version, kind, four u32 (perm, uid, gid, nlink), size, rdev, four times, parent, next
/// cookie, flags: 98 bytes.
const ATTR_LEN: usize = 1 + 1 + 4 * 4 + 8 + 4 + 12 * 4 + 8 + 8 + 4;

/// Writes an inode's attributes (version 1).
pub fn encode_attr(a: &Attr) -> Vec<u8> {
    let mut v = Vec::with_capacity(ATTR_LEN);
    v.push(FORMAT_VERSION);
    v.push(a.kind.code());
    for x in [a.perm, a.uid, a.gid, a.nlink] {
        v.extend_from_slice(&x.to_be_bytes());
    }
    v.extend_from_slice(&a.size.to_be_bytes());
    v.extend_from_slice(&a.rdev.to_be_bytes());
    for t in [a.atime, a.mtime, a.ctime, a.crtime] {
        v.extend_from_slice(&t.secs.to_be_bytes());
        v.extend_from_slice(&t.nanos.to_be_bytes());
    }
    v.extend_from_slice(&a.parent.to_be_bytes());
    v.extend_from_slice(&a.next_cookie.to_be_bytes());
    let flags = if a.no_xattrs { FLAG_NO_XATTRS } else { 0 };
    v.extend_from_slice(&flags.to_be_bytes());
    debug_assert_eq!(v.len(), ATTR_LEN);
    v
}

/// Reads a checked sequence of big-endian fields.
struct Fields<'a> {
    bytes: &'a [u8],
}

impl Fields<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.bytes.split_first_chunk::<N>()?;
        self.bytes = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_be_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_be_bytes)
    }
    fn time(&mut self) -> Option<Timespec> {
        let secs = i64::from_be_bytes(self.take()?);
        let nanos = self.u32()?;
        (nanos < 1_000_000_000).then_some(Timespec { secs, nanos })
    }
}

fn corrupt(what: &str, key: u64, detail: &str) -> FsError {
    FsError::Corrupt(format!("{what} of inode {key}: {detail}"))
}

/// Reads the value of `fs.inodes` for inode `ino`.
pub fn decode_attr(ino: u64, bytes: &[u8]) -> FsResult<Attr> {
    let mut f = Fields { bytes };
    match f.u8() {
        Some(FORMAT_VERSION) => {}
        Some(v) => {
            return Err(corrupt(
                "inode record",
                ino,
                &format!("unknown version {v}"),
            ))
        }
        None => return Err(corrupt("inode record", ino, "empty")),
    }
    if bytes.len() != ATTR_LEN {
        return Err(corrupt(
            "inode record",
            ino,
            &format!("{} bytes, expected {ATTR_LEN}", bytes.len()),
        ));
    }
    let bad = || corrupt("inode record", ino, "a field is out of range");
    let kind = f.u8().and_then(Kind::from_code).ok_or_else(bad)?;
    let (perm, uid, gid, nlink) = (
        f.u32().ok_or_else(bad)?,
        f.u32().ok_or_else(bad)?,
        f.u32().ok_or_else(bad)?,
        f.u32().ok_or_else(bad)?,
    );
    let size = f.u64().ok_or_else(bad)?;
    let rdev = f.u32().ok_or_else(bad)?;
    let (atime, mtime, ctime, crtime) = (
        f.time().ok_or_else(bad)?,
        f.time().ok_or_else(bad)?,
        f.time().ok_or_else(bad)?,
        f.time().ok_or_else(bad)?,
    );
    let parent = f.u64().ok_or_else(bad)?;
    let next_cookie = f.u64().ok_or_else(bad)?;
    let flags = f.u32().ok_or_else(bad)?;
    if perm > 0o7777 {
        return Err(bad());
    }
    Ok(Attr {
        ino,
        kind,
        perm,
        uid,
        gid,
        nlink,
        size,
        rdev,
        atime,
        mtime,
        ctime,
        crtime,
        parent,
        next_cookie,
        no_xattrs: flags & FLAG_NO_XATTRS != 0,
    })
}

/// An entry of a directory: the value of `fs.names` (with its cookie) and of `fs.dirents`
/// (with its name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The inode the name links to.
    pub ino: u64,
    /// Its kind (so readdir need not read the inode).
    pub kind: Kind,
    /// Its place in readdir's order.
    pub cookie: u64,
}

/// The key of an inode in `fs.inodes`, `fs.symlinks` and `fs.orphans`.
pub fn ino_key(ino: u64) -> [u8; 8] {
    ino.to_be_bytes()
}

/// Reads an inode key.
pub fn decode_ino_key(key: &[u8]) -> FsResult<u64> {
    key.try_into()
        .map(u64::from_be_bytes)
        .map_err(|_| FsError::Corrupt(format!("inode key of {} bytes", key.len())))
}

/// The key of a name in `fs.names` (and an xattr's in `fs.xattrs`): inode, then the name.
pub fn name_key(parent: u64, name: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(8 + name.len());
    k.extend_from_slice(&parent.to_be_bytes());
    k.extend_from_slice(name);
    k
}

/// Splits a name key into inode and name.
pub fn decode_name_key(key: &[u8]) -> FsResult<(u64, &[u8])> {
    let (ino, name) = key
        .split_first_chunk::<8>()
        .ok_or_else(|| FsError::Corrupt(format!("name key of {} bytes", key.len())))?;
    Ok((u64::from_be_bytes(*ino), name))
}

/// The key range `[start, end)` of every key that starts with inode `ino`.
pub fn ino_range(ino: u64) -> (Vec<u8>, Vec<u8>) {
    (
        ino.to_be_bytes().to_vec(),
        ino.checked_add(1)
            .map_or_else(|| vec![0xff; 9], |n| n.to_be_bytes().to_vec()),
    )
}

/// The key of two numbers: a data block (inode, block) or a dirent (directory, cookie).
pub fn pair_key(a: u64, b: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&a.to_be_bytes());
    k[8..].copy_from_slice(&b.to_be_bytes());
    k
}

/// Reads a pair key.
pub fn decode_pair_key(key: &[u8]) -> FsResult<(u64, u64)> {
    let k: [u8; 16] = key
        .try_into()
        .map_err(|_| FsError::Corrupt(format!("data or dirent key of {} bytes", key.len())))?;
    let (a, b) = k.split_at(8);
    let a: [u8; 8] = a.try_into().map_err(|_| FsError::Corrupt("key".into()))?;
    let b: [u8; 8] = b.try_into().map_err(|_| FsError::Corrupt("key".into()))?;
    Ok((u64::from_be_bytes(a), u64::from_be_bytes(b)))
}

/// Writes a `fs.names` value: version, inode, kind, cookie.
pub fn encode_name(e: &Entry) -> Vec<u8> {
    let mut v = Vec::with_capacity(18);
    v.push(FORMAT_VERSION);
    v.extend_from_slice(&e.ino.to_be_bytes());
    v.push(e.kind.code());
    v.extend_from_slice(&e.cookie.to_be_bytes());
    v
}

/// Reads a `fs.names` value of the entry `name` in directory `parent`.
pub fn decode_name(parent: u64, name: &[u8], bytes: &[u8]) -> FsResult<Entry> {
    let bad = || {
        FsError::Corrupt(format!(
            "name {:?} in directory {parent}: malformed entry",
            String::from_utf8_lossy(name)
        ))
    };
    if bytes.len() != 18 {
        return Err(bad());
    }
    let mut f = Fields { bytes };
    if f.u8() != Some(FORMAT_VERSION) {
        return Err(bad());
    }
    let ino = f.u64().ok_or_else(bad)?;
    let kind = f.u8().and_then(Kind::from_code).ok_or_else(bad)?;
    let cookie = f.u64().ok_or_else(bad)?;
    Ok(Entry { ino, kind, cookie })
}

/// Writes a `fs.dirents` value: version, inode, kind, name.
pub fn encode_dirent(ino: u64, kind: Kind, name: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(10 + name.len());
    v.push(FORMAT_VERSION);
    v.extend_from_slice(&ino.to_be_bytes());
    v.push(kind.code());
    v.extend_from_slice(name);
    v
}

/// Reads a `fs.dirents` value: inode, kind, name.
pub fn decode_dirent(dir: u64, cookie: u64, bytes: &[u8]) -> FsResult<(u64, Kind, Vec<u8>)> {
    let bad = || FsError::Corrupt(format!("dirent {cookie} of directory {dir}: malformed"));
    let mut f = Fields { bytes };
    if f.u8() != Some(FORMAT_VERSION) {
        return Err(bad());
    }
    let ino = f.u64().ok_or_else(bad)?;
    let kind = f.u8().and_then(Kind::from_code).ok_or_else(bad)?;
    Ok((ino, kind, f.bytes.to_vec()))
}

/// The superblock record: format version and block size.
pub fn encode_super() -> Vec<u8> {
    let mut v = vec![FORMAT_VERSION];
    v.extend_from_slice(&(BLOCK_SIZE as u32).to_be_bytes());
    v
}

/// Checks a superblock record.
pub fn check_super(bytes: &[u8]) -> FsResult<()> {
    let mut f = Fields { bytes };
    match (f.u8(), f.u32()) {
        (Some(FORMAT_VERSION), Some(b)) if u64::from(b) == BLOCK_SIZE && f.bytes.is_empty() => {
            Ok(())
        }
        (Some(v), _) if v != FORMAT_VERSION => Err(FsError::Corrupt(format!(
            "superblock: unsupported file system format version {v} (this build reads {FORMAT_VERSION})"
        ))),
        _ => Err(FsError::Corrupt("superblock: malformed".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_damage_is_refused() {
        let a = Attr {
            ino: 7,
            kind: Kind::Dir,
            perm: 0o1755,
            uid: 1000,
            gid: 100,
            nlink: 3,
            size: 12345,
            rdev: 0,
            atime: Timespec { secs: -5, nanos: 3 },
            mtime: Timespec {
                secs: 9,
                nanos: 999_999_999,
            },
            ctime: Timespec { secs: 1, nanos: 0 },
            crtime: Timespec::default(),
            parent: 1,
            next_cookie: 40,
            no_xattrs: true,
        };
        let bytes = encode_attr(&a);
        assert_eq!(decode_attr(7, &bytes), Ok(a.clone()));
        // Flags this version does not know are ignored (the word was written as zero).
        let mut unknown_flag = bytes.clone();
        *unknown_flag.last_mut().unwrap() |= 0x80;
        assert_eq!(decode_attr(7, &unknown_flag), Ok(a.clone()));
        let mut no_flags = bytes.clone();
        *no_flags.last_mut().unwrap() = 0;
        assert!(!decode_attr(7, &no_flags).unwrap().no_xattrs);
        for cut in 0..bytes.len() {
            assert!(decode_attr(7, &bytes[..cut]).is_err());
        }
        let mut v2 = bytes.clone();
        v2[0] = 2;
        assert!(decode_attr(7, &v2)
            .unwrap_err()
            .to_string()
            .contains("version 2"));
        let e = Entry {
            ino: 9,
            kind: Kind::Symlink,
            cookie: 4,
        };
        assert_eq!(decode_name(1, b"x", &encode_name(&e)), Ok(e));
        assert_eq!(
            decode_dirent(1, 4, &encode_dirent(9, Kind::Fifo, b"name")),
            Ok((9, Kind::Fifo, b"name".to_vec()))
        );
        assert!(check_super(&encode_super()).is_ok());
        assert!(check_super(&[2, 0, 0, 16, 0]).is_err());
        assert_eq!(decode_pair_key(&pair_key(3, 4)), Ok((3, 4)));
        assert!(pair_key(1, 2) < pair_key(1, 256) && pair_key(1, u64::MAX) < pair_key(2, 0));
    }
}
