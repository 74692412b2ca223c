//! Files and records in one transaction: a file is written and renamed and a record of an
//! ordinary table put, committed as one commit (or, on a conflict, none of it). The same
//! code is in docs/kvfs.md, "Transactions and snapshots through the library".

use std::sync::Arc;
use stitchdb::{Db, Durability, Isolation, Options, SimConfig, SimDisk};
use stitchdb_fs::{Caller, FileTree, Fs, FsOptions, FsResult, Kv, ROOT_INO};

fn main() -> FsResult<()> {
    // A store on a simulated disk in memory (`Db::create(path, ..)` for a file).
    let disk = SimDisk::new(SimConfig {
        seed: 0,
        len: 0,
        capacity: None,
    });
    let db = Db::create_on(Arc::new(disk), Options::default())?;
    let fs = Arc::new(Fs::mount(db, FsOptions::default())?);
    let orders = fs.db().create_table("orders")?;
    let me = Caller::root();

    let t = fs.begin(Isolation::Serializable)?;
    let f = t.create(&me, ROOT_INO, b"invoice.tmp", 0o644)?;
    t.write(&me, f.ino, 0, b"order 42: 3 widgets\n")?;
    t.release(f.ino)?;
    t.rename(&me, ROOT_INO, b"invoice.tmp", ROOT_INO, b"invoice-42", 0)?;
    t.records()?.put(orders, b"42", b"invoiced".to_vec())?;
    println!("{:?}", t.changes()?);
    t.commit(Durability::Sync)?;

    // Both are there, or (after a crash before the commit) neither.
    let a = fs.lookup(&me, ROOT_INO, b"invoice-42")?;
    assert_eq!(fs.read(a.ino, 0, 100)?, b"order 42: 3 widgets\n");
    assert_eq!(
        fs.db().get(orders, b"42")?.as_deref(),
        Some(&b"invoiced"[..])
    );

    // A named snapshot, read as a tree of its own while the mainline moves on.
    fs.db().snapshot("billed")?;
    fs.unlink(&me, ROOT_INO, b"invoice-42")?;
    let old = fs.snapshot_tree("billed")?;
    assert_eq!(old.lookup(&me, ROOT_INO, b"invoice-42")?.ino, a.ino);
    Ok(())
}
