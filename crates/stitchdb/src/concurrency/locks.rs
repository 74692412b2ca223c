//! The lock manager: strict two-phase locking, for transactions made serializable by locking
//! rather than by validation at commit.
//!
//! A transaction takes a lock before each read (shared) or write (exclusive), a shared range
//! lock before each scan and an exclusive one before each range delete, and keeps every lock
//! until it ends ([`LockManager::release_all`] at commit or abort). Commits that are not
//! locking transactions' take exclusive locks on what they write while any is open. Holding everything to the end is what makes the schedule equivalent to
//! running the transactions one at a time in commit order, and makes aborts cascade-free: no
//! one has read what an aborted transaction wrote. A range lock covers every key between its
//! bounds, including keys nobody has written yet, so a scan repeated later cannot see new rows
//! appear (no phantoms).
//!
//! Locking can deadlock. A request that has to wait looks for a cycle in the wait-for graph
//! through itself; if there is one, the youngest transaction in it (the largest owner id: it
//! has likely done the least work, so aborting it wastes the least) is the victim and its lock
//! call fails with [`LockErrorKind::Deadlock`], so its caller aborts it and releases its
//! locks. Choosing by age means the oldest transaction of any cycle always survives, so work
//! keeps getting done; a retry that registers a new owner is young again (one that reuses its
//! released id keeps its age). Every wait is bounded by a timeout too, so a caller never hangs
//! on a lock held by a transaction that is slow, stuck, or waiting outside this manager.

use crate::batch::TableId;
use crate::bounds::{before_start, is_empty_range, past_end};
use crate::Error;
use parking_lot::{Condvar, Mutex};
use smallvec::SmallVec;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashSet};

/// A map keyed by small integers (owners, tables), probed on every lock request: a fast
/// hash rather than std's DoS-resistant one (nothing here is keyed by user input).
type HashMap<K, V> = std::collections::HashMap<K, V, foldhash::fast::RandomState>;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// How a key is locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LockMode {
    /// For reading: any number of owners may hold it together.
    Shared,
    /// For writing: no other owner holds any lock on the key (nor a range over it).
    Exclusive,
}

/// Why a lock was not granted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LockErrorKind {
    /// This owner was chosen to break a wait cycle: abort it, then call `release_all`.
    Deadlock {
        /// The owner aborted: the youngest in the cycle, which is always the caller's owner.
        victim: u64,
        /// The owners waiting for one another, each for the next and the last for the first.
        cycle: Vec<u64>,
    },
    /// The lock was still held by others when the timeout ran out.
    Timeout {
        /// How long the request waited.
        waited: Duration,
    },
}

/// A lock request that failed, and what it was for. The lock manager knows tables only by
/// id; [`LockError::into_error`] turns this into an [`Error`] that names the table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LockError {
    pub kind: LockErrorKind,
    pub table: TableId,
    /// The key requested; for a range, its start key (empty when unbounded).
    pub key: Vec<u8>,
}

impl LockError {
    /// The public error, with the table named by `table_name`.
    pub fn into_error(self, table_name: impl FnOnce(TableId) -> String) -> Error {
        let table = table_name(self.table);
        match self.kind {
            LockErrorKind::Deadlock { victim, cycle } => Error::Deadlock {
                table,
                key: self.key,
                victim,
                cycle,
            },
            LockErrorKind::Timeout { waited } => Error::LockTimeout {
                table,
                key: self.key,
                waited_ms: u64::try_from(waited.as_millis()).unwrap_or(u64::MAX),
            },
        }
    }
}

/// Who holds one key. An owner is in at most one of the two: upgrading moves it from
/// `shared` to `exclusive`.
#[derive(Debug, Default)]
struct KeyLock {
    shared: SmallVec<[u64; 2]>,
    exclusive: Option<u64>,
}

impl KeyLock {
    fn held_by(&self, owner: u64) -> bool {
        self.exclusive == Some(owner) || self.shared.contains(&owner)
    }

    fn is_free(&self) -> bool {
        self.exclusive.is_none() && self.shared.is_empty()
    }
}

/// A lock on every key between two bounds of one table: shared for a scan, exclusive for a
/// range delete.
#[derive(Debug)]
struct RangeLock {
    owner: u64,
    mode: LockMode,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
}

impl RangeLock {
    fn contains(&self, key: &[u8]) -> bool {
        !before_start(key, self.start.as_ref().map(Vec::as_slice))
            && !past_end(key, self.end.as_ref().map(Vec::as_slice))
    }

    /// Whether some key lies in both this range and `(start, end)` (neither empty).
    fn overlaps(&self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
        let (my_start, my_end) = (
            self.start.as_ref().map(Vec::as_slice),
            self.end.as_ref().map(Vec::as_slice),
        );
        // Two intervals meet unless one ends before the other starts.
        !ends_before(my_end, start) && !ends_before(end, my_start)
    }
}

/// Whether every key below `end` is below `start` too: an interval ending at `end` lies
/// wholly before one starting at `start`.
fn ends_before(end: Bound<&[u8]>, start: Bound<&[u8]>) -> bool {
    match (end, start) {
        (Bound::Unbounded, _) | (_, Bound::Unbounded) => false,
        (Bound::Included(e), Bound::Included(s)) => e < s,
        (Bound::Included(e) | Bound::Excluded(e), Bound::Excluded(s))
        | (Bound::Excluded(e), Bound::Included(s)) => e <= s,
    }
}

/// What one owner holds, so that `release_all` finds it without scanning every lock.
#[derive(Debug, Default)]
struct Held {
    keys: Vec<(TableId, Vec<u8>)>,
    /// Tables where the owner holds at least one range lock.
    range_tables: Vec<TableId>,
}

/// One lock request, borrowed from the caller.
#[derive(Debug, Clone, Copy)]
enum Request<'a> {
    Key {
        table: TableId,
        key: &'a [u8],
        mode: LockMode,
    },
    Range {
        table: TableId,
        start: Bound<&'a [u8]>,
        end: Bound<&'a [u8]>,
        mode: LockMode,
    },
}

impl Request<'_> {
    fn table(&self) -> TableId {
        match *self {
            Request::Key { table, .. } | Request::Range { table, .. } => table,
        }
    }

    /// The key an error names: the key, or a range's start key (empty when unbounded).
    fn error_key(&self) -> Vec<u8> {
        match *self {
            Request::Key { key, .. } => key.to_vec(),
            Request::Range { start, .. } => match start {
                Bound::Included(s) | Bound::Excluded(s) => s.to_vec(),
                Bound::Unbounded => Vec::new(),
            },
        }
    }

    fn to_waiting(self) -> Waiting {
        match self {
            Request::Key { table, key, mode } => Waiting::Key {
                table,
                key: key.to_vec(),
                mode,
            },
            Request::Range {
                table,
                start,
                end,
                mode,
            } => Waiting::Range {
                table,
                start: start.map(<[u8]>::to_vec),
                end: end.map(<[u8]>::to_vec),
                mode,
            },
        }
    }
}

/// The request an owner is waiting on. Kept (rather than the owners it waits for) so that
/// deadlock detection sees the current holders: holders change while a request waits (a
/// shared lock can be granted to a newcomer meanwhile), and a wait-for edge computed when the
/// wait began would miss the newcomer and with it a cycle.
#[derive(Debug)]
enum Waiting {
    Key {
        table: TableId,
        key: Vec<u8>,
        mode: LockMode,
    },
    Range {
        table: TableId,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        mode: LockMode,
    },
}

impl Waiting {
    fn request(&self) -> Request<'_> {
        match self {
            Waiting::Key { table, key, mode } => Request::Key {
                table: *table,
                key,
                mode: *mode,
            },
            Waiting::Range {
                table,
                start,
                end,
                mode,
            } => Request::Range {
                table: *table,
                start: start.as_ref().map(Vec::as_slice),
                end: end.as_ref().map(Vec::as_slice),
                mode: *mode,
            },
        }
    }
}

/// Everything behind the lock manager's one mutex.
#[derive(Debug, Default)]
struct State {
    /// Key locks by table, ordered by key so that a range request finds the keys inside it.
    keys: HashMap<TableId, BTreeMap<Vec<u8>, KeyLock>>,
    ranges: HashMap<TableId, Vec<RangeLock>>,
    /// Owners holding at least one lock.
    held: HashMap<u64, Held>,
    /// Owners inside a lock call that had to wait, and what they wait for: the wait-for
    /// graph, its edges computed from the current holders when searched.
    waiting: HashMap<u64, Waiting>,
    /// Deadlock victims not yet released, with the cycle they were chosen from.
    doomed: HashMap<u64, Vec<u64>>,
}

impl State {
    /// The other owners whose locks keep `owner` from being granted `request`, ascending.
    fn blockers(&self, owner: u64, request: Request<'_>) -> Vec<u64> {
        let mut out = Vec::new();
        match request {
            Request::Key { table, key, mode } => {
                if let Some(lock) = self.keys.get(&table).and_then(|keys| keys.get(key)) {
                    out.extend(lock.exclusive.filter(|&x| x != owner));
                    if mode == LockMode::Exclusive {
                        out.extend(lock.shared.iter().copied().filter(|&s| s != owner));
                    }
                }
                if let Some(ranges) = self.ranges.get(&table) {
                    out.extend(
                        ranges
                            .iter()
                            .filter(|r| r.owner != owner && r.contains(key))
                            .filter(|r| {
                                mode == LockMode::Exclusive || r.mode == LockMode::Exclusive
                            })
                            .map(|r| r.owner),
                    );
                }
            }
            Request::Range {
                table,
                start,
                end,
                mode,
            } => {
                // `BTreeMap::range` panics on a range with start after end.
                if is_empty_range(start, end) {
                    return out;
                }
                if let Some(keys) = self.keys.get(&table) {
                    for (_, lock) in keys.range::<[u8], _>((start, end)) {
                        out.extend(lock.exclusive.filter(|&x| x != owner));
                        if mode == LockMode::Exclusive {
                            out.extend(lock.shared.iter().copied().filter(|&s| s != owner));
                        }
                    }
                }
                if let Some(ranges) = self.ranges.get(&table) {
                    out.extend(
                        ranges
                            .iter()
                            .filter(|r| r.owner != owner && r.overlaps(start, end))
                            .filter(|r| {
                                mode == LockMode::Exclusive || r.mode == LockMode::Exclusive
                            })
                            .map(|r| r.owner),
                    );
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Records `request` as held by `owner`; `blockers` has found nothing in the way.
    fn grant(&mut self, owner: u64, request: Request<'_>) {
        match request {
            Request::Key { table, key, mode } => {
                let keys = self.keys.entry(table).or_default();
                if !keys.contains_key(key) {
                    keys.insert(key.to_vec(), KeyLock::default());
                }
                let Some(lock) = keys.get_mut(key) else {
                    return;
                };
                let new = !lock.held_by(owner);
                match mode {
                    LockMode::Shared => {
                        if new {
                            lock.shared.push(owner);
                        }
                    }
                    LockMode::Exclusive => {
                        lock.shared.retain(|s| *s != owner);
                        lock.exclusive = Some(owner);
                    }
                }
                if new {
                    self.held
                        .entry(owner)
                        .or_default()
                        .keys
                        .push((table, key.to_vec()));
                }
            }
            Request::Range {
                table,
                start,
                end,
                mode,
            } => {
                if is_empty_range(start, end) {
                    return;
                }
                let ranges = self.ranges.entry(table).or_default();
                // The same range held exclusive, or in the mode asked, satisfies the request.
                let same = |r: &RangeLock| {
                    r.owner == owner
                        && (r.mode == mode || r.mode == LockMode::Exclusive)
                        && r.start.as_ref().map(Vec::as_slice) == start
                        && r.end.as_ref().map(Vec::as_slice) == end
                };
                if !ranges.iter().any(same) {
                    ranges.push(RangeLock {
                        owner,
                        mode,
                        start: start.map(<[u8]>::to_vec),
                        end: end.map(<[u8]>::to_vec),
                    });
                }
                let held = self.held.entry(owner).or_default();
                if !held.range_tables.contains(&table) {
                    held.range_tables.push(table);
                }
            }
        }
    }

    /// The owners `owner` waits for: none unless it is waiting, and none for a doomed owner
    /// (it is about to give up its wait, so a cycle through it is already being broken).
    fn waits_for(&self, owner: u64) -> Vec<u64> {
        if self.doomed.contains_key(&owner) {
            return Vec::new();
        }
        match self.waiting.get(&owner) {
            Some(waiting) => self.blockers(owner, waiting.request()),
            None => Vec::new(),
        }
    }

    /// A cycle in the wait-for graph through `from`, starting with it, each owner waiting for
    /// the next and the last for `from`. Any new cycle passes through the owner that just
    /// began (or resumed) waiting: a grant adds edges only towards an owner that is not
    /// waiting, so searching from each waiter is enough.
    fn find_cycle(&self, from: u64) -> Option<Vec<u64>> {
        let mut path = vec![from];
        let mut next = vec![self.waits_for(from).into_iter()];
        let mut seen = HashSet::from([from]);
        while let Some(top) = next.last_mut() {
            match top.next() {
                Some(owner) if owner == from => return Some(path),
                Some(owner) => {
                    if seen.insert(owner) {
                        path.push(owner);
                        next.push(self.waits_for(owner).into_iter());
                    }
                }
                None => {
                    next.pop();
                    path.pop();
                }
            }
        }
        None
    }

    /// Drops every lock of `owner` and forgets it; whether it held any.
    fn release(&mut self, owner: u64) -> bool {
        self.doomed.remove(&owner);
        let Some(held) = self.held.remove(&owner) else {
            return false;
        };
        for (table, key) in held.keys {
            let Some(keys) = self.keys.get_mut(&table) else {
                continue;
            };
            if let Some(lock) = keys.get_mut(&key) {
                lock.shared.retain(|s| *s != owner);
                if lock.exclusive == Some(owner) {
                    lock.exclusive = None;
                }
                if lock.is_free() {
                    keys.remove(&key);
                }
            }
            if keys.is_empty() {
                self.keys.remove(&table);
            }
        }
        for table in held.range_tables {
            if let Some(ranges) = self.ranges.get_mut(&table) {
                ranges.retain(|r| r.owner != owner);
                if ranges.is_empty() {
                    self.ranges.remove(&table);
                }
            }
        }
        true
    }

    /// Owners holding or waiting for a lock (an owner doing both counts twice: only zero
    /// matters).
    #[cfg(test)]
    fn active(&self) -> usize {
        self.held.len() + self.waiting.len()
    }
}

/// The locks of a one-off owner (a commit that is not a locking transaction's), released
/// when dropped: on every path, errors included.
pub(crate) struct HeldLocks<'a> {
    locks: &'a LockManager,
    owner: u64,
}

impl<'a> HeldLocks<'a> {
    pub fn new(locks: &'a LockManager) -> Self {
        HeldLocks {
            owner: locks.register(),
            locks,
        }
    }

    pub fn owner(&self) -> u64 {
        self.owner
    }
}

impl Drop for HeldLocks<'_> {
    fn drop(&mut self) {
        self.locks.release_all(self.owner);
    }
}

/// The locks of one database: who holds which key and range, who waits for whom.
///
/// An owner (one per transaction, from [`LockManager::register`]) makes one lock request at a
/// time, and [`LockManager::release_all`] is called for it once it has stopped making
/// requests: at commit, at abort, and after any lock error.
#[derive(Debug, Default)]
pub(crate) struct LockManager {
    state: Mutex<State>,
    /// Signalled whenever locks are released or a waiter is chosen as a deadlock victim;
    /// every waiter re-checks its own request.
    wake: Condvar,
    /// The last owner id handed out.
    last_owner: AtomicU64,
}

impl LockManager {
    pub fn new() -> Self {
        Self::default()
    }

    /// A new lock owner (one per transaction). Ids increase: a smaller id is an older owner.
    pub fn register(&self) -> u64 {
        self.last_owner.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Locks `key` of `table` in `mode` for `owner`, waiting at most `timeout`. Locks are
    /// re-entrant; an owner holding the key shared may ask for it exclusive (an upgrade, which
    /// waits until no one else holds it), and holding it exclusive already satisfies a shared
    /// request.
    pub fn lock_key(
        &self,
        owner: u64,
        table: TableId,
        key: &[u8],
        mode: LockMode,
        timeout: Duration,
    ) -> Result<(), LockError> {
        self.acquire(owner, Request::Key { table, key, mode }, timeout)
    }

    /// Locks every key from `start` to `end` of `table` in `mode`, including keys not yet
    /// written (no phantoms): shared (a scan), no other owner gets an exclusive lock on a key
    /// inside or an exclusive range over one; exclusive (a range delete), no other owner gets
    /// any lock on a key inside or a range over one. It waits for owners already holding
    /// such locks. An empty range locks nothing.
    pub fn lock_range(
        &self,
        owner: u64,
        table: TableId,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        mode: LockMode,
        timeout: Duration,
    ) -> Result<(), LockError> {
        let request = Request::Range {
            table,
            start,
            end,
            mode,
        };
        self.acquire(owner, request, timeout)
    }

    /// Releases every lock `owner` holds and forgets it (a deadlock victim can lock again
    /// afterwards); wakes waiters. Idempotent.
    pub fn release_all(&self, owner: u64) {
        let mut state = self.state.lock();
        let released = state.release(owner);
        drop(state);
        if released {
            self.wake.notify_all();
        }
    }

    fn acquire(
        &self,
        owner: u64,
        request: Request<'_>,
        timeout: Duration,
    ) -> Result<(), LockError> {
        let start = Instant::now();
        // `None` when the timeout is too long to represent: wait without one.
        let deadline = start.checked_add(timeout);
        let mut state = self.state.lock();
        let outcome = loop {
            if let Some(cycle) = state.doomed.get(&owner) {
                break Err(LockErrorKind::Deadlock {
                    victim: owner,
                    cycle: cycle.clone(),
                });
            }
            if state.blockers(owner, request).is_empty() {
                state.grant(owner, request);
                break Ok(());
            }
            if let Entry::Vacant(slot) = state.waiting.entry(owner) {
                slot.insert(request.to_waiting());
            }
            // Searched on every wake, not only when the wait begins: the holders may have
            // changed since.
            if let Some(cycle) = state.find_cycle(owner) {
                let victim = cycle.iter().copied().max().unwrap_or(owner);
                // The victim stays doomed until released, so that it cannot go on locking
                // (and wait again) after the error.
                state.doomed.insert(victim, cycle.clone());
                if victim == owner {
                    break Err(LockErrorKind::Deadlock { victim, cycle });
                }
                // The victim waits in its own call: wake it to fail there. This request
                // waits on until the victim's locks are released.
                self.wake.notify_all();
            }
            let now = Instant::now();
            match deadline {
                Some(deadline) if now >= deadline => {
                    break Err(LockErrorKind::Timeout {
                        waited: now.saturating_duration_since(start),
                    });
                }
                Some(deadline) => {
                    self.wake.wait_until(&mut state, deadline);
                }
                None => self.wake.wait(&mut state),
            }
        };
        state.waiting.remove(&owner);
        drop(state);
        outcome.map_err(|kind| LockError {
            kind,
            table: request.table(),
            key: request.error_key(),
        })
    }

    /// Whether no owner holds or waits for a lock: nothing is left behind.
    #[cfg(test)]
    fn is_idle(&self) -> bool {
        self.state.lock().active() == 0
    }

    /// Whether `owner` is waiting inside a lock call (tests wait for this before closing a
    /// cycle).
    #[cfg(test)]
    fn is_waiting(&self, owner: u64) -> bool {
        self.state.lock().waiting.contains_key(&owner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;
    use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
    use std::sync::Arc;
    use std::thread;

    const T: TableId = TableId(1);
    /// Longer than any test should take: a wait that is meant to succeed.
    const LONG: Duration = Duration::from_secs(20);
    /// How long a blocked request is watched to check it stays blocked.
    const BLOCKED: Duration = Duration::from_millis(50);

    use super::LockMode::{Exclusive as X, Shared as S};

    type Outcome = Result<(), LockError>;

    /// Asks for a key lock on another thread; the outcome arrives on the channel.
    fn spawn_key(
        m: &Arc<LockManager>,
        owner: u64,
        table: TableId,
        key: &[u8],
        mode: LockMode,
    ) -> Receiver<Outcome> {
        let (tx, rx) = mpsc::channel();
        let m = Arc::clone(m);
        let key = key.to_vec();
        thread::spawn(move || {
            let _ = tx.send(m.lock_key(owner, table, &key, mode, LONG));
        });
        rx
    }

    /// Asks for a range lock on another thread; the outcome arrives on the channel.
    fn spawn_range(
        m: &Arc<LockManager>,
        owner: u64,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Receiver<Outcome> {
        let (tx, rx) = mpsc::channel();
        let m = Arc::clone(m);
        let start = start.map(<[u8]>::to_vec);
        let end = end.map(<[u8]>::to_vec);
        thread::spawn(move || {
            let start = start.as_ref().map(Vec::as_slice);
            let end = end.as_ref().map(Vec::as_slice);
            let _ = tx.send(m.lock_range(owner, T, start, end, S, LONG));
        });
        rx
    }

    /// Checks that the request behind `rx` is still blocked a while later.
    fn assert_blocked(rx: &Receiver<Outcome>) {
        match rx.recv_timeout(BLOCKED) {
            Err(RecvTimeoutError::Timeout) => {}
            other => panic!("expected the request to be waiting, got {other:?}"),
        }
    }

    fn assert_granted(rx: &Receiver<Outcome>) {
        match rx.recv_timeout(LONG) {
            Ok(Ok(())) => {}
            other => panic!("expected the request to be granted, got {other:?}"),
        }
    }

    fn outcome(rx: &Receiver<Outcome>) -> Outcome {
        match rx.recv_timeout(LONG) {
            Ok(outcome) => outcome,
            Err(e) => panic!("no outcome: {e:?}"),
        }
    }

    /// Waits until `owner` is waiting inside a lock call.
    fn wait_for_waiting(m: &LockManager, owner: u64) {
        let until = Instant::now() + LONG;
        while !m.is_waiting(owner) {
            assert!(
                Instant::now() < until,
                "owner {owner} never started waiting"
            );
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Whether `owner` gets `key` exclusive right away (it keeps it if so).
    fn x_free(m: &LockManager, owner: u64, key: &[u8]) -> bool {
        m.lock_key(owner, T, key, X, Duration::ZERO).is_ok()
    }

    fn deadlock(outcome: Outcome) -> (u64, Vec<u64>) {
        match outcome {
            Err(LockError {
                kind: LockErrorKind::Deadlock { victim, cycle },
                ..
            }) => (victim, cycle),
            other => panic!("expected a deadlock, got {other:?}"),
        }
    }

    fn sorted(mut owners: Vec<u64>) -> Vec<u64> {
        owners.sort_unstable();
        owners
    }

    #[test]
    fn lock_manager_is_send_and_sync() {
        fn check<M: Send + Sync>() {}
        check::<LockManager>();
    }

    #[test]
    fn register_hands_out_increasing_ids() {
        let m = LockManager::new();
        let a = m.register();
        let b = m.register();
        let c = m.register();
        assert!(a < b && b < c);
    }

    #[test]
    fn shared_and_shared_are_both_granted() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        assert_eq!(m.lock_key(a, T, b"k", S, Duration::ZERO), Ok(()));
        assert_eq!(m.lock_key(b, T, b"k", S, Duration::ZERO), Ok(()));
    }

    #[test]
    fn exclusive_blocks_shared_until_release_all() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", X, LONG).expect("free key");
        let rx = spawn_key(&m, b, T, b"k", S);
        assert_blocked(&rx);
        m.release_all(a);
        assert_granted(&rx);
    }

    #[test]
    fn shared_blocks_exclusive_until_release_all() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", S, LONG).expect("free key");
        let rx = spawn_key(&m, b, T, b"k", X);
        assert_blocked(&rx);
        m.release_all(a);
        assert_granted(&rx);
    }

    #[test]
    fn timeout_reports_the_time_waited() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"key", X, LONG).expect("free key");
        let timeout = Duration::from_millis(30);
        let err = m
            .lock_key(b, T, b"key", S, timeout)
            .expect_err("held exclusive by another owner");
        match err.kind {
            LockErrorKind::Timeout { waited } => assert!(waited >= timeout, "{waited:?}"),
            other => panic!("expected a timeout, got {other:?}"),
        }
        assert_eq!((err.table, err.key), (T, b"key".to_vec()));
        // The timed-out owner holds and waits for nothing.
        m.release_all(a);
        assert!(m.is_idle());
    }

    #[test]
    fn zero_timeout_fails_at_once_when_blocked() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", X, LONG).expect("free key");
        let err = m.lock_key(b, T, b"k", X, Duration::ZERO).expect_err("held");
        assert!(matches!(err.kind, LockErrorKind::Timeout { .. }));
    }

    #[test]
    fn timeout_too_long_to_represent_does_not_panic() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        assert_eq!(m.lock_key(a, T, b"k", X, Duration::MAX), Ok(()));
        let (tx, rx) = mpsc::channel();
        let waiter = Arc::clone(&m);
        thread::spawn(move || {
            let _ = tx.send(waiter.lock_key(b, T, b"k", S, Duration::MAX));
        });
        assert_blocked(&rx);
        m.release_all(a);
        assert_granted(&rx);
    }

    #[test]
    fn upgrade_alone_succeeds() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", S, LONG).expect("free key");
        assert_eq!(m.lock_key(a, T, b"k", X, Duration::ZERO), Ok(()));
        // It is exclusive now: another owner cannot even read.
        assert!(m.lock_key(b, T, b"k", S, Duration::ZERO).is_err());
    }

    #[test]
    fn upgrade_waits_for_other_shared_holders() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", S, LONG).expect("free key");
        m.lock_key(b, T, b"k", S, LONG).expect("shared");
        let err = m
            .lock_key(a, T, b"k", X, Duration::from_millis(20))
            .expect_err("b holds it shared");
        assert!(matches!(err.kind, LockErrorKind::Timeout { .. }));
        // a still holds it shared after the failed upgrade ...
        assert!(m
            .lock_key(m.register(), T, b"k", X, Duration::ZERO)
            .is_err());
        // ... and the upgrade goes through once b is gone.
        let rx = spawn_key(&m, a, T, b"k", X);
        assert_blocked(&rx);
        m.release_all(b);
        assert_granted(&rx);
        assert!(m.lock_key(b, T, b"k", S, Duration::ZERO).is_err());
    }

    #[test]
    fn locks_are_reentrant() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        for mode in [S, S, X, X, S, X] {
            assert_eq!(m.lock_key(a, T, b"k", mode, Duration::ZERO), Ok(()));
        }
        assert!(m.lock_key(b, T, b"k", S, Duration::ZERO).is_err());
        // One release undoes every acquisition.
        m.release_all(a);
        assert!(m.is_idle());
        assert_eq!(m.lock_key(b, T, b"k", X, Duration::ZERO), Ok(()));
    }

    #[test]
    fn exclusive_satisfies_shared() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", X, LONG).expect("free key");
        assert_eq!(m.lock_key(a, T, b"k", S, Duration::ZERO), Ok(()));
        // Still exclusive, not downgraded.
        assert!(m.lock_key(b, T, b"k", S, Duration::ZERO).is_err());
    }

    #[test]
    fn range_blocks_exclusive_inside_but_not_outside() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_range(a, T, Bound::Included(b"b"), Bound::Excluded(b"d"), S, LONG)
            .expect("nothing locked");
        // Keys never locked before, inside the range: no phantoms.
        assert!(!x_free(&m, b, b"b"));
        assert!(!x_free(&m, b, b"bzz"));
        assert!(!x_free(&m, b, b"c"));
        // Outside.
        assert!(x_free(&m, b, b"a"));
        assert!(x_free(&m, b, b"d"));
        assert!(x_free(&m, b, b"e"));
        // Shared locks inside are fine.
        assert_eq!(m.lock_key(b, T, b"c", S, Duration::ZERO), Ok(()));
        // A blocked writer gets in once the range is released.
        let c = m.register();
        let rx = spawn_key(&m, c, T, b"bb", X);
        assert_blocked(&rx);
        m.release_all(a);
        assert_granted(&rx);
    }

    #[test]
    fn range_respects_included_and_excluded_ends() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_range(a, T, Bound::Excluded(b"b"), Bound::Included(b"d"), S, LONG)
            .expect("nothing locked");
        assert!(x_free(&m, b, b"b"));
        assert!(!x_free(&m, b, b"b\0"));
        assert!(!x_free(&m, b, b"d"));
        assert!(x_free(&m, b, b"d\0"));
    }

    #[test]
    fn range_respects_unbounded_ends() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_range(a, T, Bound::Unbounded, Bound::Excluded(b"m"), S, LONG)
            .expect("nothing locked");
        assert!(!x_free(&m, b, b""));
        assert!(!x_free(&m, b, b"\0"));
        assert!(!x_free(&m, b, b"lzzz"));
        assert!(x_free(&m, b, b"m"));
        m.release_all(a);
        m.release_all(b);

        m.lock_range(a, T, Bound::Included(b"m"), Bound::Unbounded, S, LONG)
            .expect("nothing locked");
        assert!(x_free(&m, b, b"l"));
        assert!(!x_free(&m, b, b"m"));
        assert!(!x_free(&m, b, &[0xff; 64]));
        m.release_all(a);
        m.release_all(b);

        m.lock_range(a, T, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect("nothing locked");
        assert!(!x_free(&m, b, b""));
        assert!(!x_free(&m, b, b"anything"));
    }

    #[test]
    fn exclusive_key_blocks_a_range_covering_it() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"c", X, LONG).expect("free key");
        // Ranges not covering it are granted.
        let free = |start: Bound<&[u8]>, end: Bound<&[u8]>| {
            m.lock_range(b, T, start, end, S, Duration::ZERO)
        };
        assert_eq!(free(Bound::Included(b"a"), Bound::Excluded(b"c")), Ok(()));
        assert_eq!(free(Bound::Excluded(b"c"), Bound::Unbounded), Ok(()));
        // Ranges covering it wait.
        assert!(free(Bound::Included(b"c"), Bound::Included(b"c")).is_err());
        assert!(free(Bound::Unbounded, Bound::Unbounded).is_err());
        let rx = spawn_range(&m, b, Bound::Included(b"b"), Bound::Included(b"d"));
        assert_blocked(&rx);
        m.release_all(a);
        assert_granted(&rx);
    }

    #[test]
    fn a_failed_range_reports_its_start_key() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"c", X, LONG).expect("free key");
        let err = m
            .lock_range(
                b,
                T,
                Bound::Excluded(b"b"),
                Bound::Unbounded,
                S,
                Duration::ZERO,
            )
            .expect_err("covers c");
        assert_eq!(err.key, b"b".to_vec());
        let err = m
            .lock_range(b, T, Bound::Unbounded, Bound::Unbounded, S, Duration::ZERO)
            .expect_err("covers c");
        assert_eq!(err.key, Vec::<u8>::new());
    }

    type Span<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>);

    #[test]
    fn exclusive_range_excludes_every_lock_inside_and_every_overlapping_range() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        let z = Duration::ZERO;
        let (c, f) = (Bound::Included(&b"c"[..]), Bound::Excluded(&b"f"[..]));
        m.lock_range(a, T, c, f, X, LONG).expect("nothing locked");
        // Inside: neither shared nor exclusive key locks, written before or not.
        assert!(m.lock_key(b, T, b"c", S, z).is_err());
        assert!(m.lock_key(b, T, b"e", X, z).is_err());
        assert!(m.lock_key(b, T, b"ezz", S, z).is_err());
        // Outside, the excluded end included.
        assert_eq!(m.lock_key(b, T, b"f", S, z), Ok(()));
        assert_eq!(m.lock_key(b, T, b"b", X, z), Ok(()));
        // Overlapping ranges of either mode wait; ranges that only touch it do not.
        let overlapping: [Span; 3] = [
            (Bound::Included(b"a"), Bound::Included(b"c")),
            (Bound::Excluded(b"e"), Bound::Unbounded),
            (Bound::Unbounded, Bound::Unbounded),
        ];
        for (lo, hi) in overlapping {
            assert!(m.lock_range(b, T, lo, hi, S, z).is_err(), "{lo:?}..{hi:?}");
            assert!(m.lock_range(b, T, lo, hi, X, z).is_err(), "{lo:?}..{hi:?}");
        }
        assert_eq!(
            m.lock_range(b, T, Bound::Unbounded, Bound::Excluded(b"c"), X, z),
            Ok(())
        );
        assert_eq!(
            m.lock_range(b, T, Bound::Included(b"f"), Bound::Unbounded, S, z),
            Ok(())
        );
    }

    #[test]
    fn shared_ranges_coexist_but_keep_out_an_exclusive_range_until_released() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        let z = Duration::ZERO;
        let (x, y) = (Bound::Included(&b"x"[..]), Bound::Excluded(&b"y"[..]));
        m.lock_range(a, T, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect("nothing locked");
        assert!(m.lock_range(b, T, x, y, X, z).is_err());
        assert_eq!(m.lock_range(b, T, x, y, S, z), Ok(()));
        // An owner's shared key lock inside does not keep out its own exclusive range.
        assert_eq!(m.lock_key(b, T, b"xa", S, z), Ok(()));
        m.release_all(a);
        assert_eq!(m.lock_range(b, T, x, y, X, z), Ok(()));
        // Held exclusive, the range satisfies a shared request of the same owner.
        assert_eq!(m.lock_range(b, T, x, y, S, z), Ok(()));
        assert!(m.lock_key(a, T, b"xb", S, z).is_err());
    }

    #[test]
    fn ranges_are_compatible_with_shared_locks_and_other_ranges() {
        let m = LockManager::new();
        let (a, b, c) = (m.register(), m.register(), m.register());
        m.lock_key(a, T, b"c", S, LONG).expect("free key");
        let all = (Bound::Unbounded, Bound::Unbounded);
        assert_eq!(m.lock_range(b, T, all.0, all.1, S, Duration::ZERO), Ok(()));
        assert_eq!(m.lock_range(c, T, all.0, all.1, S, Duration::ZERO), Ok(()));
        assert_eq!(m.lock_key(c, T, b"c", S, Duration::ZERO), Ok(()));
        assert_eq!(m.lock_key(a, T, b"d", S, Duration::ZERO), Ok(()));
    }

    #[test]
    fn an_owners_own_locks_never_conflict() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        let all = (Bound::Unbounded, Bound::Unbounded);
        assert_eq!(m.lock_range(a, T, all.0, all.1, S, Duration::ZERO), Ok(()));
        assert_eq!(m.lock_key(a, T, b"k", X, Duration::ZERO), Ok(()));
        assert_eq!(m.lock_range(a, T, all.0, all.1, S, Duration::ZERO), Ok(()));
        assert_eq!(
            m.lock_range(
                a,
                T,
                Bound::Included(b"k"),
                Bound::Included(b"k"),
                S,
                Duration::ZERO
            ),
            Ok(())
        );
        assert!(m.lock_key(b, T, b"k", S, Duration::ZERO).is_err());
        assert!(m.lock_range(b, T, all.0, all.1, S, Duration::ZERO).is_err());
    }

    #[test]
    fn empty_ranges_lock_nothing() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(b, T, b"c", X, LONG).expect("free key");
        // Backwards, and a single key excluded at one end: no key inside, nothing to wait for
        // (and no panic from an inverted range).
        for (start, end) in [
            (Bound::Included(&b"d"[..]), Bound::Included(&b"a"[..])),
            (Bound::Excluded(&b"c"[..]), Bound::Included(&b"c"[..])),
            (Bound::Included(&b"c"[..]), Bound::Excluded(&b"c"[..])),
            (Bound::Excluded(&b"c"[..]), Bound::Excluded(&b"c"[..])),
        ] {
            assert_eq!(m.lock_range(a, T, start, end, S, Duration::ZERO), Ok(()));
        }
        m.release_all(b);
        assert!(m.is_idle());
    }

    #[test]
    fn different_tables_never_conflict() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        let (t1, t2) = (TableId(1), TableId(2));
        m.lock_key(a, t1, b"k", X, LONG).expect("free key");
        m.lock_range(a, t1, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect("own locks");
        assert_eq!(m.lock_key(b, t2, b"k", X, Duration::ZERO), Ok(()));
        assert_eq!(
            m.lock_range(b, t2, Bound::Unbounded, Bound::Unbounded, S, Duration::ZERO),
            Ok(())
        );
        assert_eq!(m.lock_key(b, t2, b"j", X, Duration::ZERO), Ok(()));
        assert!(m.lock_key(b, t1, b"k", S, Duration::ZERO).is_err());
    }

    /// Old `a` holds k1, young `b` holds k2; each then asks for the other's key.
    fn two_owner_setup() -> (Arc<LockManager>, u64, u64) {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k1", X, LONG).expect("free key");
        m.lock_key(b, T, b"k2", X, LONG).expect("free key");
        (m, a, b)
    }

    #[test]
    fn deadlock_younger_closes_the_cycle_and_is_the_victim() {
        let (m, a, b) = two_owner_setup();
        let rx_a = spawn_key(&m, a, T, b"k2", X);
        wait_for_waiting(&m, a);
        // b closes the cycle and is the youngest: its own call fails at once.
        let err = m.lock_key(b, T, b"k1", X, LONG).expect_err("deadlock");
        assert_eq!((err.table, err.key.as_slice()), (T, &b"k1"[..]));
        let (victim, cycle) = deadlock(Err(err));
        assert_eq!(victim, b);
        assert_eq!(cycle, vec![b, a]);
        // The older one keeps waiting until the victim is released, then gets its lock.
        assert_blocked(&rx_a);
        m.release_all(b);
        assert_granted(&rx_a);
    }

    #[test]
    fn deadlock_older_closes_the_cycle_and_the_younger_is_the_victim() {
        let (m, a, b) = two_owner_setup();
        let rx_b = spawn_key(&m, b, T, b"k1", X);
        wait_for_waiting(&m, b);
        let rx_a = spawn_key(&m, a, T, b"k2", X);
        // b, waiting in its own call, is woken to fail there.
        let (victim, cycle) = deadlock(outcome(&rx_b));
        assert_eq!(victim, b);
        assert_eq!(sorted(cycle), vec![a, b]);
        assert!(!m.is_waiting(b));
        assert_blocked(&rx_a);
        m.release_all(b);
        assert_granted(&rx_a);
    }

    #[test]
    fn three_owner_cycle_picks_the_youngest() {
        let m = Arc::new(LockManager::new());
        let (a, b, c) = (m.register(), m.register(), m.register());
        m.lock_key(a, T, b"k1", X, LONG).expect("free key");
        m.lock_key(b, T, b"k2", X, LONG).expect("free key");
        m.lock_key(c, T, b"k3", X, LONG).expect("free key");
        let rx_c = spawn_key(&m, c, T, b"k1", X); // c waits for a
        wait_for_waiting(&m, c);
        let rx_b = spawn_key(&m, b, T, b"k3", X); // b waits for c
        wait_for_waiting(&m, b);
        let rx_a = spawn_key(&m, a, T, b"k2", X); // a waits for b: closes the cycle
        let (victim, cycle) = deadlock(outcome(&rx_c));
        assert_eq!(victim, c);
        assert_eq!(sorted(cycle), vec![a, b, c]);
        assert_blocked(&rx_b);
        assert_blocked(&rx_a);
        // Releasing the victim lets b finish, and b's release lets a finish.
        m.release_all(c);
        assert_granted(&rx_b);
        assert_blocked(&rx_a);
        m.release_all(b);
        assert_granted(&rx_a);
    }

    #[test]
    fn deadlock_through_a_holder_that_arrived_after_the_wait_began() {
        let m = Arc::new(LockManager::new());
        let (a, b, c) = (m.register(), m.register(), m.register());
        m.lock_key(a, T, b"j", X, LONG).expect("free key");
        m.lock_key(b, T, b"k", S, LONG).expect("free key");
        let rx_a = spawn_key(&m, a, T, b"k", X); // a waits for b
        wait_for_waiting(&m, a);
        // c joins the readers of k, so a now waits for c as well.
        m.lock_key(c, T, b"k", S, LONG).expect("shared");
        // c waiting for a closes a cycle through the newcomer.
        let (victim, cycle) = deadlock(m.lock_key(c, T, b"j", X, LONG));
        assert_eq!(victim, c);
        assert_eq!(cycle, vec![c, a]);
        m.release_all(c);
        m.release_all(b);
        assert_granted(&rx_a);
    }

    #[test]
    fn range_locks_take_part_in_deadlocks() {
        let m = Arc::new(LockManager::new());
        let (a, b) = (m.register(), m.register());
        m.lock_range(a, T, Bound::Included(b"a"), Bound::Included(b"f"), S, LONG)
            .expect("nothing locked");
        m.lock_key(b, T, b"x", X, LONG).expect("free key");
        let rx_a = spawn_range(&m, a, Bound::Included(b"w"), Bound::Unbounded); // a waits for b
        wait_for_waiting(&m, a);
        let (victim, _) = deadlock(m.lock_key(b, T, b"c", X, LONG)); // b waits for a
        assert_eq!(victim, b);
        m.release_all(b);
        assert_granted(&rx_a);
    }

    #[test]
    fn a_doomed_owner_keeps_failing_until_released() {
        let (m, a, b) = two_owner_setup();
        let rx_b = spawn_key(&m, b, T, b"k1", X);
        wait_for_waiting(&m, b);
        let rx_a = spawn_key(&m, a, T, b"k2", X);
        let (victim, cycle) = deadlock(outcome(&rx_b));
        assert_eq!(victim, b);
        // Even an uncontended key, even a key it holds, is refused now.
        for (key, mode) in [(&b"free"[..], S), (&b"k2"[..], S), (&b"k2"[..], X)] {
            let err = m.lock_key(b, T, key, mode, LONG).expect_err("doomed");
            assert_eq!(err.key, key.to_vec());
            assert_eq!(deadlock(Err(err)), (b, cycle.clone()));
        }
        let err = m
            .lock_range(b, T, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect_err("doomed");
        assert_eq!(deadlock(Err(err)).0, b);
        m.release_all(b);
        assert_granted(&rx_a);
        // Released, it is forgotten and may lock again.
        assert_eq!(m.lock_key(b, T, b"free", S, Duration::ZERO), Ok(()));
    }

    #[test]
    fn a_requester_that_is_the_victim_stays_doomed() {
        let (m, a, b) = two_owner_setup();
        let _rx_a = spawn_key(&m, a, T, b"k2", X);
        wait_for_waiting(&m, a);
        deadlock(m.lock_key(b, T, b"k1", X, LONG));
        assert_eq!(deadlock(m.lock_key(b, T, b"other", S, LONG)).0, b);
        m.release_all(b);
    }

    #[test]
    fn is_idle_tracks_holders_and_waiters() {
        let m = Arc::new(LockManager::new());
        assert!(m.is_idle());
        let (a, b) = (m.register(), m.register());
        // Registering alone locks nothing.
        assert!(m.is_idle());
        m.lock_key(a, T, b"k", X, LONG).expect("free key");
        assert!(!m.is_idle());
        let rx = spawn_key(&m, b, T, b"k", S);
        wait_for_waiting(&m, b);
        assert!(!m.is_idle());
        m.release_all(a);
        assert_granted(&rx);
        assert!(!m.is_idle());
        m.release_all(b);
        assert!(m.is_idle());
        m.lock_range(a, T, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect("nothing locked");
        assert!(!m.is_idle());
        m.release_all(a);
        assert!(m.is_idle());
    }

    #[test]
    fn release_all_is_idempotent() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.release_all(a); // never locked anything
        m.lock_key(a, T, b"k", X, LONG).expect("free key");
        m.lock_range(a, T, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect("own locks");
        m.release_all(a);
        m.release_all(a);
        assert!(m.is_idle());
        assert_eq!(m.lock_key(b, T, b"k", X, Duration::ZERO), Ok(()));
        m.release_all(a);
        // a's repeated release did not touch b's lock.
        assert!(m.lock_key(a, T, b"k", S, Duration::ZERO).is_err());
        m.release_all(12345); // an id never handed out
    }

    #[test]
    fn release_all_leaves_no_state_behind() {
        let m = LockManager::new();
        let (a, b) = (m.register(), m.register());
        m.lock_key(a, T, b"k", S, LONG).expect("free key");
        m.lock_key(b, T, b"k", S, LONG).expect("shared");
        m.lock_key(a, TableId(2), b"k", X, LONG).expect("free key");
        m.lock_range(b, T, Bound::Unbounded, Bound::Unbounded, S, LONG)
            .expect("no writers");
        m.release_all(a);
        m.release_all(b);
        let state = m.state.lock();
        assert!(state.keys.is_empty(), "{:?}", state.keys);
        assert!(state.ranges.is_empty(), "{:?}", state.ranges);
        assert!(state.held.is_empty() && state.waiting.is_empty() && state.doomed.is_empty());
    }

    #[test]
    fn errors_convert_to_public_errors_naming_the_table() {
        let name = |t: TableId| format!("table{}", t.0);
        let deadlock = LockError {
            kind: LockErrorKind::Deadlock {
                victim: 7,
                cycle: vec![7, 3],
            },
            table: TableId(4),
            key: b"k\x01".to_vec(),
        };
        let err = deadlock.into_error(name);
        assert_eq!(
            err,
            Error::Deadlock {
                table: "table4".into(),
                key: b"k\x01".to_vec(),
                victim: 7,
                cycle: vec![7, 3],
            }
        );
        assert_eq!(
            err.to_string(),
            "deadlock: transaction 7 (the youngest in the wait cycle [7, 3]) was aborted waiting \
             for key k\\x01 of table \"table4\"; retry the transaction"
        );
        let timeout = LockError {
            kind: LockErrorKind::Timeout {
                waited: Duration::from_micros(20_999),
            },
            table: TableId(4),
            key: Vec::new(),
        };
        let err = timeout.into_error(name);
        assert_eq!(
            err,
            Error::LockTimeout {
                table: "table4".into(),
                key: Vec::new(),
                waited_ms: 20,
            }
        );
        assert_eq!(
            err.to_string(),
            "lock wait timeout: gave up on key  of table \"table4\" after 20 ms; retry the \
             transaction"
        );
        let forever = LockError {
            kind: LockErrorKind::Timeout {
                waited: Duration::MAX,
            },
            table: TableId(0),
            key: Vec::new(),
        };
        assert!(matches!(
            forever.into_error(name),
            Error::LockTimeout {
                waited_ms: u64::MAX,
                ..
            }
        ));
    }

    /// Random transactions over a few keys, each releasing on commit or error, while a shadow
    /// table (per key: owner -> mode, kept by the test) checks mutual exclusion: while an owner
    /// holds a key exclusive, no other owner holds any lock on it, range locks included.
    #[test]
    fn stress_random_transactions_keep_exclusion_and_finish() {
        const THREADS: u64 = 4;
        const TXNS: usize = 200;
        const KEYS: u8 = 8;
        let timeout = Duration::from_millis(20);
        let m = Arc::new(LockManager::new());
        let shadow: Arc<Vec<parking_lot::Mutex<HashMap<u64, LockMode>>>> =
            Arc::new((0..KEYS).map(|_| Default::default()).collect());

        /// Records that `owner` was granted `mode` on key `k` and checks it against the rest.
        fn record(
            shadow: &[parking_lot::Mutex<HashMap<u64, LockMode>>],
            k: u8,
            owner: u64,
            mode: LockMode,
        ) {
            let mut holders = shadow[usize::from(k)].lock();
            let mine = holders.entry(owner).or_insert(mode);
            if mode == X {
                *mine = X;
            }
            let mine = *mine;
            for (&other, &theirs) in holders.iter() {
                assert!(
                    other == owner || (mine == S && theirs == S),
                    "key {k}: owner {owner} holds {mine:?} while owner {other} holds {theirs:?}"
                );
            }
        }

        let (done_tx, done_rx) = mpsc::channel();
        for seed in 0..THREADS {
            let m = Arc::clone(&m);
            let shadow = Arc::clone(&shadow);
            let done_tx = done_tx.clone();
            thread::spawn(move || {
                let mut rng = ChaCha8Rng::seed_from_u64(seed);
                let (mut committed, mut deadlocks, mut timeouts) = (0u32, 0u32, 0u32);
                for _ in 0..TXNS {
                    let owner = m.register();
                    let mut touched = Vec::new();
                    let mut failed = None;
                    for _ in 0..rng.gen_range(1..=4) {
                        let result = if rng.gen_bool(0.15) {
                            let lo = rng.gen_range(0..KEYS);
                            let hi = rng.gen_range(lo..KEYS);
                            let mode = if rng.gen_bool(0.3) { X } else { S };
                            let result = m.lock_range(
                                owner,
                                T,
                                Bound::Included(&[lo][..]),
                                Bound::Included(&[hi][..]),
                                mode,
                                timeout,
                            );
                            if result.is_ok() {
                                for k in lo..=hi {
                                    record(&shadow, k, owner, mode);
                                    touched.push(k);
                                }
                            }
                            result
                        } else {
                            let k = rng.gen_range(0..KEYS);
                            let mode = if rng.gen_bool(0.5) { S } else { X };
                            let result = m.lock_key(owner, T, &[k], mode, timeout);
                            if result.is_ok() {
                                record(&shadow, k, owner, mode);
                                touched.push(k);
                            }
                            result
                        };
                        if let Err(e) = result {
                            failed = Some(e.kind);
                            break;
                        }
                        if rng.gen_bool(0.01) {
                            // Long enough for others to time out.
                            thread::sleep(timeout + Duration::from_millis(5));
                        } else if rng.gen_bool(0.5) {
                            thread::sleep(Duration::from_micros(rng.gen_range(0..300)));
                        } else {
                            thread::yield_now();
                        }
                    }
                    match failed {
                        None => committed += 1,
                        Some(LockErrorKind::Deadlock { victim, .. }) => {
                            assert_eq!(victim, owner);
                            deadlocks += 1;
                        }
                        Some(LockErrorKind::Timeout { waited }) => {
                            assert!(waited >= timeout);
                            timeouts += 1;
                        }
                    }
                    // Out of the shadow first: it must never claim less than the manager.
                    for k in touched {
                        shadow[usize::from(k)].lock().remove(&owner);
                    }
                    m.release_all(owner);
                }
                let _ = done_tx.send((committed, deadlocks, timeouts));
            });
        }
        drop(done_tx);
        let mut committed = 0;
        for _ in 0..THREADS {
            match done_rx.recv_timeout(Duration::from_secs(120)) {
                Ok((c, deadlocks, timeouts)) => {
                    assert_eq!((c + deadlocks + timeouts) as usize, TXNS);
                    committed += c;
                }
                Err(e) => panic!("a stress thread hung or failed: {e:?}"),
            }
        }
        assert!(committed > 0);
        assert!(m.is_idle());
        assert!(shadow.iter().all(|holders| holders.lock().is_empty()));
    }
}
