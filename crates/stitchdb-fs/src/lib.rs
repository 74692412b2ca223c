//! KVFS: a POSIX file system whose files, directories and metadata are key-value pairs in
//! tables of a StitchDB store (the VT-tree paper's KVFS; docs/kvfs.md). One store holds
//! records and files: `stitchdb get/scan` read the file system's tables like any other.
//!
//! The modules, bottom up: `error` (errno), `schema` (tables and record encodings,
//! docs/format.md), `atime` (which reads write an access time), `cache` (recent inode
//! records and names), `observe` (every commit of the store, whoever makes it, updates the
//! cache and is told to the mount), `kv` (what an operation reads and writes through: a
//! batch, a transaction, a snapshot), `creds` (who calls), `perm` (every permission
//! decision, as Linux makes it), `ops` (the operations over a `Kv`), `handles` (a tree's open files), `fs` (the mainline [`Fs`]), `tree` (the
//! operations as [`FileTree`]'s methods, for any kind of tree), `mainline` (the mainline as a
//! tree: one commit per operation), `txn` ([`FsTransaction`]: operations and records in one engine transaction),
//! `snapshot` ([`SnapshotTree`]: a named snapshot, read-only), `check` (the invariants).

#![forbid(unsafe_code)]

mod atime;
mod cache;
mod check;
mod creds;
mod error;
mod fs;
mod handles;
mod kv;
mod mainline;
mod observe;
mod ops;
mod perm;
mod schema;
mod snapshot;
mod tree;
mod txn;

pub use atime::{AtimeMode, AtimePolicy};
pub use check::{check_fs, FsCheckReport};
pub use creds::{Caller, Cap, Credentials, Membership, NGROUPS_MAX};
pub use error::{FsError, FsResult};
pub use fs::{system_clock, Clock, Fs, FsOptions, FsStat};
pub use handles::Handles;
pub use kv::{Batch, Kv};
pub use observe::{Changed, OutsideChange};
pub use ops::{
    check_name, DirEntry, Op, SetAttr, TimeSet, RENAME_EXCHANGE, RENAME_NOREPLACE, SYMLINK_MAX,
    XATTR_CREATE, XATTR_NAME_MAX, XATTR_REPLACE, XATTR_SIZE_MAX,
};
pub use perm::{permit, Check, R, W, X};
pub use schema::{
    Attr, Entry, Kind, Tables, Timespec, BLOCK_SIZE, LINK_MAX, MAX_FILE_SIZE, MAX_INO, NAME_MAX,
    ROOT_INO, TABLE_NAMES,
};
pub use snapshot::SnapshotTree;
pub use tree::{FileTree, OpFn, Run};
pub use txn::{Changes, Committed, FsTransaction, Records};
