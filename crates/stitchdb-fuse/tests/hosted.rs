//! A mount as one surface of a `stitchdb_host::Host`, beside another over the same store (a
//! stand-in for the Redis server: a thread using the `Db`): a snapshot the other surface
//! takes through the library shows at once under the mount's `/.stitch/snapshots/`, holding
//! the files written through the mount; when the other surface ends by itself, the host
//! unmounts the mount and closes the store. Every path unmounts (a guard).

#![allow(clippy::unwrap_used)]

mod support;

use std::sync::mpsc::{channel, sync_channel};
use std::sync::Arc;
use stitchdb::{Db, Options};
use stitchdb_fuse::{is_mount_point, Mount, MountConfig};
use stitchdb_host::{Host, Surface};

/// Unmounts its path (lazily) when dropped, whatever happened.
struct Unmounted(std::path::PathBuf);

impl Drop for Unmounted {
    fn drop(&mut self) {
        support::force_unmount(&self.0);
    }
}

#[test]
fn a_snapshot_taken_by_another_surface_shows_in_the_mount_and_its_end_unmounts() {
    require_fuse!();
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("s.store");
    let mp = tmp.path().join("mnt");
    std::fs::create_dir(&mp).unwrap();
    let mut host = Host::new(Db::create(&store, Options::default()).unwrap());
    let config = MountConfig::parse(store.clone(), mp.clone(), &[]).unwrap();
    let mount = Mount::start(host.db().clone(), &config).unwrap();
    let _guard = Unmounted(mp.clone());
    host.add(mount.into_surface()).unwrap();
    // The other surface: takes a snapshot when told, then serves until told to end or
    // stopped.
    let (snap, snaps) = channel::<String>();
    let (taken, took) = channel::<Result<(), String>>();
    let (end, ended) = sync_channel::<()>(2);
    let db: Arc<Db> = host.db().clone();
    let other = std::thread::spawn(move || {
        if let Ok(name) = snaps.recv() {
            taken
                .send(db.snapshot(&name).map(|_| ()).map_err(|e| e.to_string()))
                .unwrap();
        }
        let _ = ended.recv();
    });
    let stop = end.clone();
    host.add(Surface::new(
        "other",
        move || {
            let _ = stop.try_send(());
        },
        move || other.join().map_err(|_| "panicked".to_string()),
    ))
    .unwrap();
    let hosting = std::thread::spawn(move || host.run());

    std::fs::write(mp.join("file"), b"through the mount").unwrap();
    snap.send("monday".into()).unwrap();
    took.recv().unwrap().unwrap();
    let listed: Vec<String> = std::fs::read_dir(mp.join(".stitch/snapshots"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(listed, ["monday"]);
    let in_snapshot = std::fs::read(mp.join(".stitch/snapshots/monday/file")).unwrap();
    assert_eq!(in_snapshot, b"through the mount");

    // The other surface ends by itself: the host unmounts and closes the store.
    end.send(()).unwrap();
    hosting.join().unwrap().unwrap();
    assert!(!is_mount_point(&mp), "the mount is still there");
    let db = Db::open(&store, Options::default()).unwrap();
    assert_eq!(db.snapshots().len(), 1);
    db.close().unwrap();
}
