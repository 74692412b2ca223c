//! [`Host`]: a store opened once and shared by the surfaces served over it. They run until
//! the first of them ends (a signal, a client's `SHUTDOWN`, an `umount`); then the others are
//! asked to stop, every one is waited for, and the store is closed durably.

use crate::surface::{Stop, Surface};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use stitchdb::Db;

/// A store and the surfaces served over it.
pub struct Host {
    // Declared first, so dropped first: a host given up on (a surface that failed to start)
    // stops and waits for those already started before its store closes.
    surfaces: Surfaces,
    db: Arc<Db>,
}

impl Host {
    /// Hosts `db`, with no surface yet (not even the signals: see
    /// [`watch_signals`](Self::watch_signals)).
    pub fn new(db: Db) -> Host {
        let (ended, ends) = channel();
        Host {
            surfaces: Surfaces {
                running: Vec::new(),
                ended,
                ends,
                failures: Vec::new(),
            },
            db: Arc::new(db),
        }
    }

    /// The store, to start surfaces over. A surface lets go of its clones when it ends, so
    /// that the host can close the store.
    pub fn db(&self) -> &Arc<Db> {
        &self.db
    }

    /// Stops everything at the first SIGTERM, SIGINT or SIGHUP. Call it before starting the
    /// other surfaces: a signal that comes while they start is then kept, not fatal.
    pub fn watch_signals(&mut self) -> Result<(), String> {
        self.add(crate::signals::surface()?)
    }

    /// Serves `surface` (already started) until [`run`](Self::run) stops it. If it cannot be
    /// waited for (no thread to wait on), it is stopped and the error returned.
    pub fn add(&mut self, surface: Surface) -> Result<(), String> {
        self.surfaces.add(surface)
    }

    /// Waits until a surface ends, stops the others and waits for them, then closes the
    /// store: everything written through any surface is durable when it returns. The error
    /// is the first surface's to fail (any later one is logged), else the close's.
    pub fn run(self) -> Result<(), String> {
        let Host { mut surfaces, db } = self;
        if let Some(name) = surfaces.first_end() {
            tracing::info!("{name} ended: stopping the rest");
        }
        let mut failures = surfaces.stop_and_wait();
        drop(surfaces);
        failures.extend(close(db).err());
        let mut failures = failures.into_iter();
        let first = failures.next();
        for later in failures {
            tracing::error!("{later}");
        }
        first.map_or(Ok(()), Err)
    }
}

/// Closes the store if nothing else holds it, else makes everything written durable and
/// says so.
fn close(db: Arc<Db>) -> Result<(), String> {
    match Arc::try_unwrap(db) {
        Ok(db) => db.close().map_err(|e| format!("closing the store: {e}")),
        Err(db) => {
            tracing::warn!(
                "the store is still held by {} other handle(s) after every surface ended: \
                 synced, not closed (the last handle closes it)",
                Arc::strong_count(&db) - 1
            );
            match db.sync() {
                // Opened read-only: nothing was written, nothing to sync.
                Err(stitchdb::Error::ReadOnly(_)) if db.failure().is_none() => Ok(()),
                synced => synced.map_err(|e| format!("syncing the store: {e}")),
            }
        }
    }
}

/// The surfaces started, each waited for on a thread of its own that reports its end.
struct Surfaces {
    running: Vec<Running>,
    ended: Sender<Ended>,
    ends: Receiver<Ended>,
    /// The failures reported so far, each as "NAME: ERROR".
    failures: Vec<String>,
}

struct Running {
    name: String,
    stop: Stop,
    thread: Option<JoinHandle<()>>,
    /// Its end has been received.
    ended: bool,
}

/// A surface's end, as its thread reports it: its index in `running` and its result.
struct Ended(usize, Result<(), String>);

/// Sends its surface's end: the wait's result, or a failure if the wait panicked.
struct Reporter {
    index: usize,
    /// Taken once the end is sent.
    to: Option<Sender<Ended>>,
}

impl Reporter {
    fn send(&mut self, result: Result<(), String>) {
        if let Some(to) = self.to.take() {
            // Fails only once the host is gone, when nobody waits for the news.
            let _ = to.send(Ended(self.index, result));
        }
    }
}

impl Drop for Reporter {
    fn drop(&mut self) {
        self.send(Err("it panicked".to_string()));
    }
}

impl Surfaces {
    fn add(&mut self, surface: Surface) -> Result<(), String> {
        let (name, stop, wait) = surface.into_parts();
        let mut reporter = Reporter {
            index: self.running.len(),
            to: Some(self.ended.clone()),
        };
        let spawned = std::thread::Builder::new()
            .name(format!("host {name}"))
            .spawn(move || reporter.send(wait()));
        match spawned {
            Ok(thread) => {
                self.running.push(Running {
                    name,
                    stop,
                    thread: Some(thread),
                    ended: false,
                });
                Ok(())
            }
            Err(e) => {
                stop();
                Err(format!("starting a thread to wait for {name}: {e}"))
            }
        }
    }

    /// Waits for one surface to end and takes its end; its name (`None`: none is running).
    fn next_end(&mut self) -> Option<&str> {
        if self.running.iter().all(|r| r.ended) {
            return None;
        }
        // Never fails: `self.ended` is a sender.
        let Ended(index, result) = self.ends.recv().ok()?;
        let r = &mut self.running[index];
        r.ended = true;
        if let Err(e) = result {
            self.failures.push(format!("{}: {e}", r.name));
        }
        Some(&r.name)
    }

    /// Waits for the first surface to end: its name.
    fn first_end(&mut self) -> Option<String> {
        self.next_end().map(str::to_string)
    }

    /// Asks every surface still running to stop, waits for all of them and their threads;
    /// the failures reported.
    fn stop_and_wait(&mut self) -> Vec<String> {
        for r in self.running.iter().filter(|r| !r.ended) {
            tracing::info!("stopping {}", r.name);
            (r.stop)();
        }
        while self.next_end().is_some() {}
        for r in &mut self.running {
            if let Some(thread) = r.thread.take() {
                // Its result was reported; a panic was reported as a failure.
                let _ = thread.join();
            }
        }
        std::mem::take(&mut self.failures)
    }
}

impl Drop for Surfaces {
    fn drop(&mut self) {
        for failure in self.stop_and_wait() {
            tracing::error!("{failure}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::mpsc::SyncSender;
    use stitchdb::Options;

    /// A store in a temporary directory (kept alive by the returned guard).
    fn store() -> (tempfile::TempDir, std::path::PathBuf, Db) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.store");
        let db = Db::create(&path, Options::default()).unwrap();
        (dir, path, db)
    }

    /// A surface serving a clone of `db` until asked to stop or until the returned sender
    /// ends it; `stops` counts the times it was asked to stop. It ends with `result`.
    fn surface(
        db: &Arc<Db>,
        stops: &Arc<AtomicUsize>,
        result: Result<(), String>,
    ) -> (Surface, SyncSender<()>) {
        let (end, ended) = std::sync::mpsc::sync_channel::<()>(4);
        let db = db.clone();
        let thread = std::thread::spawn(move || {
            let _ = ended.recv();
            drop(db);
        });
        let (stop_end, stops) = (end.clone(), stops.clone());
        let stop = move || {
            stops.fetch_add(1, Ordering::SeqCst);
            let _ = stop_end.try_send(());
        };
        let wait = move || {
            thread.join().map_err(|_| "panicked".to_string())?;
            result
        };
        (Surface::new("test", stop, wait), end)
    }

    #[test]
    fn a_surface_ending_by_itself_stops_the_others_and_the_store_closes() {
        let (_dir, path, db) = store();
        let mut host = Host::new(db);
        let t = host.db().default_table();
        host.db().put(t, "k", "v").unwrap();
        let stops = Arc::new(AtomicUsize::new(0));
        let (a, end_a) = surface(host.db(), &stops, Ok(()));
        let (b, _end_b) = surface(host.db(), &stops, Ok(()));
        let (c, _end_c) = surface(host.db(), &stops, Ok(()));
        for s in [a, b, c] {
            host.add(s).unwrap();
        }
        end_a.send(()).unwrap();
        host.run().unwrap();
        assert_eq!(
            stops.load(Ordering::SeqCst),
            2,
            "the two others were stopped"
        );
        // Closed: the lock is free, and the write is there.
        let db = Db::open(&path, Options::default()).unwrap();
        assert_eq!(db.get(t, "k").unwrap().as_deref(), Some(&b"v"[..]));
        db.close().unwrap();
    }

    #[test]
    fn the_first_failure_is_returned_and_the_store_still_closes() {
        let (_dir, path, db) = store();
        let mut host = Host::new(db);
        let stops = Arc::new(AtomicUsize::new(0));
        let (a, end_a) = surface(host.db(), &stops, Err("lost its socket".into()));
        let (b, _end_b) = surface(host.db(), &stops, Err("later".into()));
        host.add(a).unwrap();
        host.add(b).unwrap();
        end_a.send(()).unwrap();
        assert_eq!(host.run(), Err("test: lost its socket".to_string()));
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        Db::open(&path, Options::default())
            .unwrap()
            .close()
            .unwrap();
    }

    #[test]
    fn a_panicking_surface_is_a_failure() {
        let (_dir, _path, db) = store();
        let mut host = Host::new(db);
        host.add(Surface::new("boom", || {}, || panic!("on purpose")))
            .unwrap();
        assert_eq!(host.run(), Err("boom: it panicked".to_string()));
    }

    #[test]
    fn a_store_still_held_is_synced_and_closes_with_its_last_handle() {
        let (_dir, path, db) = store();
        let mut host = Host::new(db);
        let t = host.db().default_table();
        let kept = host.db().clone();
        let stops = Arc::new(AtomicUsize::new(0));
        let (a, end_a) = surface(host.db(), &stops, Ok(()));
        host.add(a).unwrap();
        kept.write(
            &{
                let mut b = stitchdb::WriteBatch::new();
                b.put(t, b"k", b"v");
                b
            },
            stitchdb::Durability::Async,
        )
        .unwrap();
        end_a.send(()).unwrap();
        host.run().unwrap();
        // The host synced it: the file holds it while the store is still open (a copy of
        // the file is what a crash now would leave, short of the device's own cache).
        let copy = path.with_extension("copy");
        std::fs::copy(&path, &copy).unwrap();
        let db = Db::open(&copy, Options::default()).unwrap();
        assert_eq!(db.get(t, "k").unwrap().as_deref(), Some(&b"v"[..]));
        db.close().unwrap();
        // The last handle closes it.
        drop(kept);
        Db::open(&path, Options::default())
            .unwrap()
            .close()
            .unwrap();
    }

    #[test]
    fn a_host_given_up_on_stops_what_it_started_before_the_store_closes() {
        let (_dir, path, db) = store();
        let mut host = Host::new(db);
        let stops = Arc::new(AtomicUsize::new(0));
        let (a, _end_a) = surface(host.db(), &stops, Ok(()));
        host.add(a).unwrap();
        drop(host);
        assert_eq!(stops.load(Ordering::SeqCst), 1);
        Db::open(&path, Options::default())
            .unwrap()
            .close()
            .unwrap();
    }

    #[test]
    fn with_nothing_to_serve_it_closes_at_once() {
        let (_dir, path, db) = store();
        Host::new(db).run().unwrap();
        Db::open(&path, Options::default())
            .unwrap()
            .close()
            .unwrap();
    }
}
