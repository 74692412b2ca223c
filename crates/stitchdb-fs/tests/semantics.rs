//! Semantics the model test does not reach: readdir offsets while the directory changes,
//! open-file orphans across a remount, a store shared with others, permission checks for
//! other users, a full store.

#![allow(clippy::unwrap_used)]

mod support;

use std::collections::BTreeSet;
use std::sync::Arc;
use stitchdb::{Db, Durability, SimConfig, SimDisk, WriteBatch};
use stitchdb_fs::{check_fs, Caller, FileTree, Fs, FsOptions, SetAttr, TimeSet, ROOT_INO};
use support::{new_fs, small_options};

/// The errno of a call that must fail.
fn e<T: std::fmt::Debug>(r: stitchdb_fs::FsResult<T>) -> i32 {
    r.unwrap_err().errno()
}

fn ok(fs: &Fs) {
    let r = check_fs(fs.db(), fs.tables()).unwrap();
    assert!(r.problems.is_empty(), "{:?}", r.problems);
}

#[test]
fn readdir_offsets_stay_valid_while_the_directory_changes() {
    let fs = new_fs(1);
    let root = Caller::root();
    for i in 0..100 {
        fs.mknod(
            &root,
            ROOT_INO,
            format!("f{i:03}").as_bytes(),
            libc::S_IFREG | 0o644,
            0,
        )
        .unwrap();
    }
    let mut seen = BTreeSet::new();
    let mut off = 0;
    let mut round = 0;
    loop {
        let batch = fs.readdir(ROOT_INO, off, 7).unwrap();
        let Some(last) = batch.last() else { break };
        off = last.offset;
        for e in batch {
            assert!(seen.insert(e.name.clone()), "{:?} returned twice", e.name);
        }
        // Between reads: delete an entry not yet read, delete one already read, add a new one.
        round += 1;
        let _ = fs.unlink(&root, ROOT_INO, format!("f{:03}", 99 - round).as_bytes());
        let _ = fs.unlink(&root, ROOT_INO, format!("f{:03}", round).as_bytes());
        if round <= 10 {
            fs.mknod(
                &root,
                ROOT_INO,
                format!("new{round}").as_bytes(),
                libc::S_IFREG,
                0,
            )
            .unwrap();
        }
    }
    // Entries added while reading come after those there before: all were returned.
    for r in 1..=10 {
        assert!(
            seen.contains(format!("new{r}").as_bytes()),
            "new{r} was skipped"
        );
    }
    // Every entry that was there throughout was returned exactly once.
    for i in 0..100 {
        let name = format!("f{i:03}");
        let removed = (1..=round).any(|r| i == 99 - r || i == r);
        assert!(
            removed || seen.contains(name.as_bytes()),
            "{name} was skipped"
        );
    }
    ok(&fs);
}

#[test]
fn a_file_system_over_a_shared_store_syncs_at_close_and_leaves_the_store_open() {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed: 4,
        len: 0,
        capacity: None,
    }));
    let db = Arc::new(Db::create_on(disk.clone(), small_options()).unwrap());
    let fs = Fs::mount(db.clone(), FsOptions::default()).unwrap();
    let root = Caller::root();
    let f = fs.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    fs.write(&root, f.ino, 0, b"data").unwrap();
    fs.close().unwrap();
    // Durable: a crash now keeps the file.
    let crashed = Arc::new(disk.crash(9));
    let fs = Fs::mount(
        Db::open_on(crashed, small_options()).unwrap(),
        FsOptions::default(),
    )
    .unwrap();
    let found = fs.lookup(&root, ROOT_INO, b"f").unwrap();
    assert_eq!(fs.read(found.ino, 0, 10).unwrap(), b"data");
    fs.close().unwrap();
    // The other holder still has the store open, and closes it.
    let t = db.default_table();
    db.put(t, "k", "v").unwrap();
    Arc::try_unwrap(db).ok().unwrap().close().unwrap();
}

#[test]
fn an_unlinked_open_file_keeps_its_data_until_closed_and_a_remount_deletes_it() {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed: 3,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let fs = Fs::mount(db, FsOptions::default()).unwrap();
    let root = Caller::root();
    let a = fs.create(&root, ROOT_INO, b"tmp", 0o600).unwrap();
    fs.write(&root, a.ino, 0, &[7u8; 10_000]).unwrap();
    let b = fs.create(&root, ROOT_INO, b"kept-open", 0o600).unwrap();
    fs.write(&root, b.ino, 0, b"hello").unwrap();
    fs.unlink(&root, ROOT_INO, b"tmp").unwrap();
    fs.unlink(&root, ROOT_INO, b"kept-open").unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap().nlink, 0);
    assert_eq!(fs.read(a.ino, 0, 20_000).unwrap(), vec![7u8; 10_000]);
    assert_eq!(
        fs.lookup(&root, ROOT_INO, b"tmp").unwrap_err().errno(),
        libc::ENOENT
    );
    assert_eq!(check_fs(fs.db(), fs.tables()).unwrap().orphans, 2);
    ok(&fs);
    fs.release(a.ino).unwrap();
    assert_eq!(fs.getattr(a.ino).unwrap_err().errno(), libc::ENOENT);
    ok(&fs);
    // The store closes with `kept-open` still open (as a crash would): the next mount
    // deletes it.
    fs.close().unwrap();
    let db = Db::open_on(disk, small_options()).unwrap();
    let fs = Fs::mount(db, FsOptions::default()).unwrap();
    assert_eq!(fs.getattr(b.ino).unwrap_err().errno(), libc::ENOENT);
    let r = check_fs(fs.db(), fs.tables()).unwrap();
    assert_eq!((r.orphans, r.blocks), (0, 0));
    ok(&fs);
}

#[test]
fn other_users_get_the_errors_ext4_gives() {
    let fs = new_fs(2);
    let root = Caller::root();
    let alice = Caller::new(1000, 1000, vec![]);
    let bob = Caller::new(1001, 1001, vec![1000]);
    // A root-owned 0755 directory: others may look but not add names.
    let d = fs.mkdir(&root, ROOT_INO, b"d", 0o755).unwrap();
    assert_eq!(
        e(fs.mknod(&alice, d.ino, b"x", libc::S_IFREG | 0o644, 0)),
        libc::EACCES
    );
    // A sticky world-writable directory: alice cannot remove bob's file.
    let tmp = fs.mkdir(&root, ROOT_INO, b"tmp", 0o1777).unwrap();
    let f = fs
        .mknod(&bob, tmp.ino, b"bobs", libc::S_IFREG | 0o666, 0)
        .unwrap();
    assert_eq!(e(fs.unlink(&alice, tmp.ino, b"bobs")), libc::EPERM);
    assert_eq!(
        e(fs.rename(&alice, tmp.ino, b"bobs", tmp.ino, b"x", 0)),
        libc::EPERM
    );
    // ... but may write it (0666), not chmod or chown it.
    fs.open(&alice, f.ino, libc::O_WRONLY).unwrap();
    fs.release(f.ino).unwrap();
    let chmod = SetAttr {
        mode: Some(0o600),
        ..SetAttr::default()
    };
    assert_eq!(e(fs.setattr(&alice, f.ino, &chmod)), libc::EPERM);
    let chown = SetAttr {
        uid: Some(1000),
        ..SetAttr::default()
    };
    assert_eq!(e(fs.setattr(&bob, f.ino, &chown)), libc::EPERM);
    // bob may give his file to a group he is in, not to one he is not.
    let to_1000 = SetAttr {
        gid: Some(1000),
        ..SetAttr::default()
    };
    fs.setattr(&bob, f.ino, &to_1000).unwrap();
    let to_5 = SetAttr {
        gid: Some(5),
        ..SetAttr::default()
    };
    assert_eq!(e(fs.setattr(&bob, f.ino, &to_5)), libc::EPERM);
    // Setting both times to "now" needs write permission; any other setting, ownership
    // (one time to now and the other left alone too, as utimensat(UTIME_OMIT, UTIME_NOW)).
    let now = SetAttr {
        atime: Some(TimeSet::Now),
        mtime: Some(TimeSet::Now),
        ..SetAttr::default()
    };
    fs.setattr(&alice, f.ino, &now).unwrap();
    let mtime_now = SetAttr {
        mtime: Some(TimeSet::Now),
        ..SetAttr::default()
    };
    assert_eq!(e(fs.setattr(&alice, f.ino, &mtime_now)), libc::EPERM);
    let at = SetAttr {
        mtime: Some(TimeSet::At(stitchdb_fs::Timespec { secs: 5, nanos: 0 })),
        ..SetAttr::default()
    };
    assert_eq!(e(fs.setattr(&alice, f.ino, &at)), libc::EPERM);
    // A 0600 file of bob's: alice may not open it; bob may; truncate needs write permission.
    let p = fs
        .mknod(&bob, tmp.ino, b"private", libc::S_IFREG | 0o600, 0)
        .unwrap();
    assert_eq!(e(fs.open(&alice, p.ino, libc::O_RDONLY)), libc::EACCES);
    let trunc = SetAttr {
        size: Some(0),
        ..SetAttr::default()
    };
    assert_eq!(e(fs.setattr(&alice, p.ino, &trunc)), libc::EACCES);
    // A directory alice cannot search hides its names from her.
    let closed = fs.mkdir(&root, ROOT_INO, b"closed", 0o700).unwrap();
    fs.mknod(&root, closed.ino, b"x", libc::S_IFREG, 0).unwrap();
    assert_eq!(e(fs.lookup(&alice, closed.ino, b"x")), libc::EACCES);
    // Moving a directory to another parent needs write permission on it (its `..`).
    let bobs_dir = fs.mkdir(&root, tmp.ino, b"rootdir", 0o755).unwrap();
    let mine = fs.mkdir(&bob, tmp.ino, b"mine", 0o777).unwrap();
    assert_eq!(
        e(fs.rename(&bob, tmp.ino, b"rootdir", mine.ino, b"x", 0)),
        libc::EPERM
    );
    let _ = bobs_dir;
    // Names over 255 bytes; trusted xattrs for root only; unknown namespaces.
    assert_eq!(
        e(fs.mkdir(&root, ROOT_INO, &[b'x'; 256], 0o755)),
        libc::ENAMETOOLONG
    );
    assert_eq!(
        e(fs.setxattr(&alice, f.ino, b"trusted.a", b"v", 0)),
        libc::EPERM
    );
    assert_eq!(
        e(fs.setxattr(&root, f.ino, b"other.a", b"v", 0)),
        libc::EOPNOTSUPP
    );
    fs.setxattr(&root, f.ino, b"trusted.a", b"v", 0).unwrap();
    assert!(fs.listxattr(&alice, f.ino).unwrap().is_empty());
    ok(&fs);
}

/// Writes, truncates and chown take privileges away as Linux does: the FUSE adapter leaves
/// it to the file system (`HANDLE_KILLPRIV_V2`). Each case sets the bits again first.
#[test]
fn writes_truncates_and_chown_drop_set_id_bits_and_capabilities() {
    let fs = new_fs(3);
    let root = Caller::root();
    let alice = Caller::new(1000, 1000, vec![]);
    let f = fs
        .mknod(&root, ROOT_INO, b"f", libc::S_IFREG | 0o666, 0)
        .unwrap();
    let set = |perm: u32, gid: u32| {
        let s = SetAttr {
            mode: Some(perm),
            gid: Some(gid),
            ..SetAttr::default()
        };
        // chown first clears, so set the mode after it.
        fs.setattr(&root, f.ino, &s).unwrap();
        let s = SetAttr {
            mode: Some(perm),
            ..SetAttr::default()
        };
        fs.setattr(&root, f.ino, &s).unwrap();
        fs.setxattr(&root, f.ino, b"security.capability", b"caps", 0)
            .unwrap();
    };
    let perm = |fs: &Fs| fs.getattr(f.ino).unwrap().perm;
    let caps = |fs: &Fs| fs.getxattr(&root, f.ino, b"security.capability").is_ok();
    let truncate = SetAttr {
        size: Some(1),
        through_handle: true,
        ..SetAttr::default()
    };
    // (mode, group, who writes, mode after): set-group-id goes where it means "group
    // execute" or the writer is outside the group; root keeps both bits.
    let cases = [
        (0o6777, 1000, &alice, 0o0777),
        (0o6767, 1000, &alice, 0o2767),
        (0o6767, 2000, &alice, 0o0767),
        (0o6777, 0, &root, 0o6777),
    ];
    for (mode, gid, who, after) in cases {
        set(mode, gid);
        fs.write(who, f.ino, 0, b"x").unwrap();
        assert_eq!(perm(&fs), after, "write by {} of {mode:o}", who.uid);
        assert!(!caps(&fs), "a write takes the capabilities, even root's");
        set(mode, gid);
        fs.setattr(who, f.ino, &truncate).unwrap();
        assert_eq!(perm(&fs), after, "truncate by {} of {mode:o}", who.uid);
        assert!(!caps(&fs), "a truncate takes the capabilities");
    }
    // chown, even by root, clears set-user-id, and set-group-id with group execute.
    for (mode, after) in [(0o6777, 0o0777), (0o6767, 0o2767)] {
        set(mode, 0);
        let chown = SetAttr {
            uid: Some(1000),
            ..SetAttr::default()
        };
        fs.setattr(&root, f.ino, &chown).unwrap();
        assert_eq!(perm(&fs), after, "chown of {mode:o}");
        assert!(!caps(&fs), "chown takes the capabilities");
        let back = SetAttr {
            uid: Some(0),
            ..SetAttr::default()
        };
        fs.setattr(&root, f.ino, &back).unwrap();
    }
    ok(&fs);
}

#[test]
fn a_full_store_gives_enospc_and_keeps_what_was_fsynced() {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed: 4,
        len: 0,
        capacity: Some(48 << 20),
    }));
    let db = Db::create_on(disk.clone(), small_options()).unwrap();
    let fs = Fs::mount(db, FsOptions::default()).unwrap();
    let root = Caller::root();
    let chunk = vec![0x5au8; 64 << 10];
    let mut synced = Vec::new();
    let mut errno = None;
    for i in 0..10_000u32 {
        let name = format!("f{i}");
        let r = fs
            .create(&root, ROOT_INO, name.as_bytes(), 0o644)
            .and_then(|a| fs.write(&root, a.ino, 0, &chunk).map(|_| a.ino))
            .and_then(|ino| fs.fsync().map(|_| ino));
        match r {
            Ok(_) => synced.push(name),
            Err(e) => {
                errno = Some(e.errno());
                break;
            }
        }
    }
    assert_eq!(errno, Some(libc::ENOSPC), "after {} files", synced.len());
    assert!(synced.len() > 10, "only {} files fitted", synced.len());
    // The mount still reads everything written before the failure, and stays writable:
    // deleting a third of the files makes room for new ones, with no remount.
    assert_eq!(fs.db().failure(), None);
    for name in &synced {
        let a = fs.lookup(&root, ROOT_INO, name.as_bytes()).unwrap();
        assert_eq!(fs.read(a.ino, 0, chunk.len() + 1).unwrap(), chunk, "{name}");
    }
    let third = synced.len() / 3;
    for name in synced.drain(..third) {
        // Closed first (`create` opened it): an open file's data stays until its last close.
        let a = fs.lookup(&root, ROOT_INO, name.as_bytes()).unwrap();
        fs.release(a.ino).unwrap();
        fs.unlink(&root, ROOT_INO, name.as_bytes()).unwrap();
    }
    for i in 0..third / 2 {
        let name = format!("again{i}");
        let a = fs.create(&root, ROOT_INO, name.as_bytes(), 0o644).unwrap();
        fs.write(&root, a.ino, 0, &chunk).unwrap();
        fs.fsync().unwrap();
        synced.push(name);
    }
    assert_eq!(fs.db().failure(), None);
    ok(&fs);
    drop(fs);
    // The device is still full. A read-only mount reads everything back.
    let db = Db::open_read_only_on(disk.clone(), small_options()).unwrap();
    let ro = FsOptions {
        read_only: true,
        ..FsOptions::default()
    };
    let fs = Fs::mount(db, ro).unwrap();
    for name in &synced {
        let a = fs.lookup(&root, ROOT_INO, name.as_bytes()).unwrap();
        assert_eq!(fs.read(a.ino, 0, chunk.len() + 1).unwrap(), chunk, "{name}");
    }
    drop(fs);
    // So does a read-write one (opening takes the zones the store held back), which can then
    // delete files, and their room serves new ones once merged away.
    let db = Db::open_on(disk.clone(), small_options()).unwrap();
    let fs = Fs::mount(db, FsOptions::default()).unwrap();
    for name in &synced {
        let a = fs.lookup(&root, ROOT_INO, name.as_bytes()).unwrap();
        assert_eq!(fs.read(a.ino, 0, chunk.len() + 1).unwrap(), chunk, "{name}");
    }
    let (gone, kept) = synced.split_at(synced.len() / 2);
    for name in gone {
        fs.unlink(&root, ROOT_INO, name.as_bytes()).unwrap();
    }
    fs.fsync().unwrap();
    fs.db().compact().unwrap();
    // Room comes back as merges drop what was deleted: new files may fit again, or not yet.
    let mut rewritten = 0;
    for name in gone.iter().take(gone.len() / 2) {
        let written = fs
            .create(&root, ROOT_INO, name.as_bytes(), 0o644)
            .and_then(|a| fs.write(&root, a.ino, 0, &chunk))
            .and_then(|_| fs.fsync());
        if written.is_err() {
            break;
        }
        rewritten += 1;
    }
    if rewritten == gone.len() / 2 {
        ok(&fs);
    }
    drop(fs);
    let db = Db::open_on(disk, small_options()).unwrap();
    let fs = Fs::mount(db, FsOptions::default()).unwrap();
    for name in &gone[rewritten + 1..] {
        assert_eq!(e(fs.lookup(&root, ROOT_INO, name.as_bytes())), libc::ENOENT);
    }
    for name in kept.iter().chain(&gone[..rewritten]) {
        let a = fs.lookup(&root, ROOT_INO, name.as_bytes()).unwrap();
        assert_eq!(fs.read(a.ino, 0, chunk.len() + 1).unwrap(), chunk, "{name}");
    }
    ok(&fs);
}

#[test]
fn large_files_truncate_punch_and_delete_by_range() {
    let fs = new_fs(5);
    let root = Caller::root();
    let a = fs.create(&root, ROOT_INO, b"big", 0o644).unwrap();
    let data: Vec<u8> = (0..3u32 << 20).map(|i| (i % 253) as u8).collect();
    for (i, chunk) in data.chunks(1 << 20).enumerate() {
        fs.write(&root, a.ino, (i as u64) << 20, chunk).unwrap();
    }
    assert_eq!(check_fs(fs.db(), fs.tables()).unwrap().blocks, 768);
    // Cut 2 MiB less 5 bytes off (a range tombstone), grow again: the tail reads as zeros.
    let cut = (1u64 << 20) + 5;
    let to = |size| SetAttr {
        size: Some(size),
        ..SetAttr::default()
    };
    fs.setattr(&root, a.ino, &to(cut)).unwrap();
    fs.setattr(&root, a.ino, &to(2 << 20)).unwrap();
    let back = fs.read(a.ino, 0, 3 << 20).unwrap();
    assert_eq!(back.len(), 2 << 20);
    assert_eq!(&back[..cut as usize], &data[..cut as usize]);
    assert!(back[cut as usize..].iter().all(|b| *b == 0));
    // Punch 600,000 bytes out (whole blocks by range, partial ones zeroed).
    let hole: usize = 600_000;
    fs.fallocate(
        &root,
        a.ino,
        1000,
        hole as u64,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    let back = fs.read(a.ino, 0, 3 << 20).unwrap();
    assert_eq!(&back[..1000], &data[..1000]);
    assert!(back[1000..1000 + hole].iter().all(|b| *b == 0));
    assert_eq!(
        back[1000 + hole..cut as usize],
        data[1000 + hole..cut as usize]
    );
    ok(&fs);
    fs.release(a.ino).unwrap();
    fs.unlink(&root, ROOT_INO, b"big").unwrap();
    let r = check_fs(fs.db(), fs.tables()).unwrap();
    assert_eq!((r.inodes, r.blocks), (1, 0));
    ok(&fs);
}

#[test]
fn seek_data_and_hole_follow_the_stored_blocks() {
    let fs = new_fs(8);
    let root = Caller::root();
    let a = fs.create(&root, ROOT_INO, b"sparse", 0o644).unwrap();
    const B: u64 = 4096;
    // Blocks 2, 3 and 600..1000 hold data (more than one batch of the hole search); the
    // size ends inside block 1100, a hole.
    fs.write(&root, a.ino, 2 * B + 100, &[1; 5000]).unwrap();
    fs.write(&root, a.ino, 600 * B, &vec![2; 400 * B as usize])
        .unwrap();
    let size = 1100 * B + 10;
    let to = SetAttr {
        size: Some(size),
        ..SetAttr::default()
    };
    fs.setattr(&root, a.ino, &to).unwrap();
    let data = |off| fs.seek(a.ino, off, true).map_err(|e| e.errno());
    let hole = |off| fs.seek(a.ino, off, false).map_err(|e| e.errno());
    assert_eq!(data(0), Ok(2 * B));
    assert_eq!(data(2 * B + 7), Ok(2 * B + 7));
    assert_eq!(data(4 * B), Ok(600 * B));
    assert_eq!(data(1000 * B), Err(libc::ENXIO));
    assert_eq!(hole(0), Ok(0));
    assert_eq!(hole(2 * B), Ok(4 * B));
    assert_eq!(hole(700 * B + 3), Ok(1000 * B));
    assert_eq!(hole(1099 * B), Ok(1099 * B));
    assert_eq!(data(size), Err(libc::ENXIO));
    assert_eq!(hole(size), Err(libc::ENXIO));
    assert_eq!(hole(size - 1), Ok(size - 1));
    // Punching through the end frees the block the end is in, as ext4 does.
    fs.write(&root, a.ino, size - 5, &[3; 5]).unwrap();
    assert_eq!(data(1100 * B), Ok(1100 * B));
    fs.fallocate(
        &root,
        a.ino,
        1100 * B,
        B,
        libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE,
    )
    .unwrap();
    assert_eq!(data(1000 * B), Err(libc::ENXIO));
    // A file written whole has its only hole at the end.
    let b = fs.create(&root, ROOT_INO, b"dense", 0o644).unwrap();
    fs.write(&root, b.ino, 0, &vec![4; 300 * B as usize + 1])
        .unwrap();
    assert_eq!(fs.seek(b.ino, 5, false).unwrap(), 300 * B + 1);
    ok(&fs);
}

/// What the kernel does after a file's last close (it writes the file's times back) must
/// work on a file already deleted: a failure there failed `syncfs` after any program had
/// made and removed a temporary file (tar's placeholders for links, for one).
#[test]
fn a_deleted_inode_answers_getattr_and_setattr_until_forgotten() {
    let disk = Arc::new(SimDisk::new(SimConfig {
        seed: 4,
        len: 0,
        capacity: None,
    }));
    let db = Db::create_on(disk, small_options()).unwrap();
    let opts = FsOptions {
        keep_deleted: true,
        ..FsOptions::default()
    };
    let fs = Fs::mount(db, opts).unwrap();
    let root = Caller::root();
    let alice = Caller::new(1000, 1000, vec![]);
    let times = SetAttr {
        mtime: Some(TimeSet::At(stitchdb_fs::Timespec { secs: 5, nanos: 6 })),
        ..SetAttr::default()
    };
    // Deleted by its unlink (never open), and by its last close (unlinked while open).
    let closed = fs.create(&root, ROOT_INO, b"closed", 0o644).unwrap();
    fs.write(&root, closed.ino, 0, b"data").unwrap();
    fs.release(closed.ino).unwrap();
    fs.unlink(&root, ROOT_INO, b"closed").unwrap();
    let open = fs.create(&root, ROOT_INO, b"open", 0o600).unwrap();
    fs.unlink(&root, ROOT_INO, b"open").unwrap();
    fs.release(open.ino).unwrap();
    for ino in [closed.ino, open.ino] {
        let a = fs.getattr(ino).unwrap();
        assert_eq!(a.nlink, 0);
        let b = fs.setattr(&root, ino, &times).unwrap();
        assert_eq!(b.mtime, stitchdb_fs::Timespec { secs: 5, nanos: 6 });
        assert_eq!(
            fs.getattr(ino).unwrap().mtime,
            b.mtime,
            "the change is kept"
        );
        // The same checks as on a live inode.
        let chmod = SetAttr {
            mode: Some(0o777),
            ..SetAttr::default()
        };
        assert_eq!(e(fs.setattr(&alice, ino, &chmod)), libc::EPERM);
        // Nothing of it is in the store.
        assert_eq!(
            fs.lookup(&root, ROOT_INO, b"closed").unwrap_err().errno(),
            libc::ENOENT
        );
        assert_eq!(e(fs.read(ino, 0, 10)), libc::ENOENT);
    }
    let r = check_fs(fs.db(), fs.tables()).unwrap();
    assert_eq!((r.orphans, r.blocks), (0, 0));
    ok(&fs);
    fs.forget(closed.ino);
    assert_eq!(e(fs.getattr(closed.ino)), libc::ENOENT);
    assert_eq!(e(fs.setattr(&root, closed.ino, &times)), libc::ENOENT);
    assert_eq!(
        fs.getattr(open.ino).unwrap().nlink,
        0,
        "forgetting one keeps the other"
    );
    // Without the option (a caller that never forgets) nothing is kept.
    let plain = new_fs(5);
    let f = plain.create(&root, ROOT_INO, b"f", 0o644).unwrap();
    plain.release(f.ino).unwrap();
    plain.unlink(&root, ROOT_INO, b"f").unwrap();
    assert_eq!(e(plain.getattr(f.ino)), libc::ENOENT);
    assert_eq!(e(plain.setattr(&root, f.ino, &times)), libc::ENOENT);
}

#[test]
fn check_names_each_broken_invariant() {
    let fs = new_fs(6);
    let root = Caller::root();
    let mut inos = Vec::new();
    for name in [&b"gone"[..], b"linked", b"long", b"plain", b"copied"] {
        let a = fs.create(&root, ROOT_INO, name, 0o644).unwrap();
        fs.release(a.ino).unwrap();
        inos.push(a.ino);
    }
    let [gone, linked, long, plain, copied] = inos[..] else {
        unreachable!()
    };
    ok(&fs);
    let t = fs.tables();
    let key = |ino: u64| ino.to_be_bytes().to_vec();
    let with_name = |ino: u64, name: &[u8]| [&ino.to_be_bytes()[..], name].concat();
    let record = |ino: u64| fs.db().get(t.inodes, key(ino)).unwrap().unwrap();
    // Written around the file system (and its cache): only `check_fs` reads after this.
    let mut b = WriteBatch::new();
    // A name left pointing at a deleted inode.
    b.delete(t.inodes, key(gone));
    // A link count of 2 with one name (docs/format.md: the u32 at bytes 14..18).
    let mut r = record(linked);
    r[14..18].copy_from_slice(&2u32.to_be_bytes());
    b.put(t.inodes, key(linked), r);
    // A block past the end of an empty file.
    b.put(t.data, with_name(long, &0u64.to_be_bytes()), vec![1u8; 10]);
    // An extended attribute of an inode marked as having none.
    b.put(t.xattrs, with_name(plain, b"user.x"), b"v".to_vec());
    // An inode no name reaches.
    b.put(t.inodes, key(copied + 100), record(copied));
    fs.db().write(&b, Durability::Sync).unwrap();
    let problems = check_fs(fs.db(), fs.tables()).unwrap().problems;
    let expected = [
        format!("dangling (inode {gone} does not exist)"),
        format!("inode {linked}: link count 2 but 1 names link to it"),
        format!("file {long}: block 0 (10 bytes) lies past its size 0"),
        format!("inode {plain} is marked as having no extended attributes but has user.x"),
        format!(
            "inode {}: link count 1 but 0 names link to it",
            copied + 100
        ),
        format!("inode {} is not reachable from the root", copied + 100),
    ];
    for what in &expected {
        assert!(
            problems.iter().any(|p| p.contains(what.as_str())),
            "{what:?} not in {problems:?}"
        );
    }
    assert_eq!(problems.len(), expected.len(), "{problems:?}");
}
