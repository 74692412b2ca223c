//! Telling the kernel what changed behind its back. The mount keeps the kernel's caches
//! (entries, attributes, and pages: `FOPEN_KEEP_CACHE`) right for everything its own requests
//! change; a commit made elsewhere (a transaction's, or a record write through the library to
//! the file system's tables) changes files the kernel may hold. Such a commit names what it
//! changed, and the kernel is told to drop those entries, attributes and pages.
//!
//! The notifications are sent from a thread of their own: the kernel may need a directory's
//! lock to drop one of its entries, and a process holding that lock may be waiting for a
//! reply from this daemon (libfuse's documentation warns of the same deadlock). A commit
//! waits for its notifications to go out ([`Invalidator::wait`]), for a bounded time.

use fuser::Notifier;
use parking_lot::{Condvar, Mutex};
use std::collections::VecDeque;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// What the kernel may hold that is out of date.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stale {
    /// An inode's attributes and pages (by node id).
    Inode(u64),
    /// A name in a directory (by the directory's node id).
    Entry(u64, Vec<u8>),
}

/// Notifications waiting beyond this are dropped with a warning (the kernel's caches then
/// expire by their time-outs, but for pages kept across opens): a bound on memory if the
/// kernel stops taking them.
const QUEUE_LIMIT: usize = 1 << 16;

/// How long a commit waits for its notifications to be taken.
const WAIT_LIMIT: Duration = Duration::from_secs(2);

#[derive(Default)]
struct Queue {
    items: VecDeque<Stale>,
    /// Notifications queued so far, and sent (or dropped) so far: a waiter waits until
    /// `done` reaches what `queued` was when it began.
    queued: u64,
    done: u64,
    closed: bool,
}

/// The queue of notifications and the thread that sends them.
pub struct Invalidator {
    /// The session's notifier, set once the session exists.
    notifier: Arc<OnceLock<Notifier>>,
    queue: Arc<(Mutex<Queue>, Condvar)>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Invalidator {
    /// Starts the sending thread; nothing is sent until `notifier` is set.
    pub fn start(notifier: Arc<OnceLock<Notifier>>) -> Invalidator {
        let queue: Arc<(Mutex<Queue>, Condvar)> = Arc::default();
        let (q, n) = (queue.clone(), notifier.clone());
        let thread = std::thread::Builder::new()
            .name("kvfs-invalidate".into())
            .spawn(move || send_loop(&q, &n))
            .map_err(|e| tracing::warn!("no invalidation thread: {e}"))
            .ok();
        Invalidator {
            notifier,
            queue,
            thread: Mutex::new(thread),
        }
    }

    /// Queues `stale` (never blocks: the caller may be inside a commit).
    pub fn push(&self, stale: impl IntoIterator<Item = Stale>) {
        if self.notifier.get().is_none() {
            return;
        }
        let (lock, cv) = &*self.queue;
        let mut q = lock.lock();
        for s in stale {
            if q.items.len() >= QUEUE_LIMIT {
                tracing::warn!("too many cache invalidations waiting: dropping one");
                q.done += 1;
            } else {
                q.items.push_back(s);
            }
            q.queued += 1;
        }
        cv.notify_all();
    }

    /// Waits until what was queued before this call has been sent, or for [`WAIT_LIMIT`].
    pub fn wait(&self) {
        let (lock, cv) = &*self.queue;
        let mut q = lock.lock();
        let target = q.queued;
        let deadline = std::time::Instant::now() + WAIT_LIMIT;
        while q.done < target && !q.closed {
            if cv.wait_until(&mut q, deadline).timed_out() {
                tracing::warn!("cache invalidations still queued after {WAIT_LIMIT:?}");
                return;
            }
        }
    }

    /// Stops the thread after what is queued.
    pub fn finish(&self) {
        {
            let (lock, cv) = &*self.queue;
            lock.lock().closed = true;
            cv.notify_all();
        }
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
    }
}

fn send_loop(queue: &(Mutex<Queue>, Condvar), notifier: &OnceLock<Notifier>) {
    let (lock, cv) = queue;
    loop {
        let item = {
            let mut q = lock.lock();
            loop {
                if let Some(item) = q.items.pop_front() {
                    break item;
                }
                if q.closed {
                    return;
                }
                cv.wait(&mut q);
            }
        };
        if let Some(n) = notifier.get() {
            // An inode or entry the kernel does not hold answers ENOENT, which `fuser` takes
            // as done; other errors (the mount going away) leave the caches to their
            // time-outs.
            let sent = match &item {
                Stale::Inode(ino) => n.inval_inode(*ino, 0, 0),
                Stale::Entry(parent, name) => n.inval_entry(*parent, OsStr::from_bytes(name)),
            };
            if let Err(e) = sent {
                tracing::debug!("invalidating {item:?}: {e}");
            }
        }
        let mut q = lock.lock();
        q.done += 1;
        cv.notify_all();
    }
}
