//! Patchgroups for processes: the groups made through the control file, the processes that
//! own or engage them, and which process a request's thread belongs to.
//!
//! A FUSE request names its calling thread. `/proc/TID/stat` gives the thread's start time
//! (clock ticks since boot) and `/proc/TID/status` its thread group, so a process is known
//! by its pid and start time ([`ProcKey`]), and a reused pid is a different process. A
//! process is tracked once it makes, engages or inherits a group.
//!
//! Inheritance (the paper's fork semantics, observed lazily): at each change of a tracked
//! process's engaged set, the set before the change is kept with the moment of the change
//! ([`Moment`]: the clock tick, and the last pid the kernel handed out). A process not
//! tracked yet whose parent is tracked gets the parent's set as of its fork: the set before
//! the first change it was forked before (a start tick before the change's, or the same
//! tick and a pid at most the change's last pid), else the parent's set now. An untracked
//! parent is looked up the same way from its own parent (up to [`MAX_ANCESTORS`]). Limits:
//! a process whose parent exited before its first request is re-parented and inherits
//! nothing; a parent keeps its last [`MAX_HISTORY`] changes with forks between them (changes
//! with no fork anywhere between them are one), so a child first seen after more changes of
//! its parent than that gets the set of the oldest kept.

use super::protocol::{CommandError, Gid};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, GroupId, PatchContext};

/// Open groups made through the mount, over all processes.
pub const MAX_GROUPS: usize = 4096;
/// Open groups one process may own.
pub const MAX_GROUPS_PER_PROCESS: usize = 1024;
/// Processes tracked at once (owners, engagers and their inheriting children).
pub const MAX_PROCESSES: usize = 1024;
/// Changes of a process's engaged set kept for children not seen yet.
pub const MAX_HISTORY: usize = 64;
/// Generations walked up from an untracked process to a tracked ancestor.
pub const MAX_ANCESTORS: usize = 16;
/// Threads whose process is remembered (the memo is cleared when it grows past this).
const MAX_THREADS: usize = 8192;
/// How often exited processes are looked for at most (their groups are closed then).
pub const SWEEP_INTERVAL: Duration = Duration::from_secs(1);
/// Clock ticks per second of `/proc/PID/stat`'s start time (Linux's `USER_HZ`).
const USER_HZ: u64 = 100;

/// A process: its pid and start time (clock ticks since boot).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcKey {
    /// The thread-group id.
    pub pid: u32,
    /// When it started.
    pub start: u64,
}

/// What `/proc/PID/stat` says of a task.
struct Stat {
    ppid: u32,
    start: u64,
    /// Neither a zombie nor dead.
    alive: bool,
}

fn read_stat(pid: u32) -> Option<Stat> {
    let s = std::fs::read(format!("/proc/{pid}/stat")).ok()?;
    let s = String::from_utf8_lossy(&s);
    // The command name, in parentheses, may hold anything: the fields follow the last ')'.
    let rest = s.get(s.rfind(')')? + 1..)?;
    let f: Vec<&str> = rest.split_ascii_whitespace().collect();
    Some(Stat {
        alive: !matches!(*f.first()?, "Z" | "X" | "x"),
        ppid: f.get(1)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

fn read_tgid(tid: u32) -> Option<u32> {
    let s = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    s.lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// A moment of a change: children forked before it have started before its tick, or in the
/// same tick with a pid handed out before it.
#[derive(Debug, Clone, Copy)]
struct Moment {
    tick: u64,
    last_pid: u32,
}

impl Moment {
    fn now() -> Moment {
        let t = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
        let tick = t.tv_sec as u64 * USER_HZ + t.tv_nsec as u64 / (1_000_000_000 / USER_HZ);
        let last_pid = std::fs::read_to_string("/proc/sys/kernel/ns_last_pid")
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        Moment { tick, last_pid }
    }

    /// Whether `child` was forked before this moment (pids are handed out cyclically below
    /// `pid_max`).
    fn after_fork_of(&self, child: ProcKey, pid_max: u32) -> bool {
        if child.start != self.tick {
            return child.start < self.tick;
        }
        let distance =
            (i64::from(self.last_pid) - i64::from(child.pid)).rem_euclid(i64::from(pid_max));
        distance < i64::from(pid_max / 2)
    }
}

/// A tracked process.
struct Proc {
    /// Where its requests are served while it has groups engaged.
    ctx: Arc<PatchContext>,
    /// Its engaged set.
    engaged: Vec<Gid>,
    /// The set before each of its last changes, oldest first.
    history: VecDeque<(Moment, Vec<Gid>)>,
}

impl Proc {
    fn new() -> Proc {
        Proc {
            ctx: PatchContext::new(),
            engaged: Vec::new(),
            history: VecDeque::new(),
        }
    }

    /// Its engaged set as of the fork of `child`.
    fn set_at_fork(&self, child: ProcKey, pid_max: u32) -> &[Gid] {
        self.history
            .iter()
            .find(|(m, _)| m.after_fork_of(child, pid_max))
            .map_or(&self.engaged, |(_, before)| before)
    }

    /// Notes a change of the engaged set about to be made.
    fn note_change(&mut self) {
        let m = Moment::now();
        // No pid handed out since the last change: no child can tell the two apart.
        if self
            .history
            .back()
            .is_some_and(|(last, _)| last.last_pid == m.last_pid && m.last_pid != 0)
        {
            return;
        }
        if self.history.len() == MAX_HISTORY {
            self.history.pop_front();
        }
        self.history.push_back((m, self.engaged.clone()));
    }
}

/// A group made through the control file.
struct GroupInfo {
    /// The process it closes with; `None`: detached, open until closed.
    owner: Option<ProcKey>,
    /// Who made it: only they (and root) may use it.
    uid: u32,
    /// The groups it depends on.
    after: Vec<Gid>,
    /// Another group depends on it.
    sealed: bool,
}

/// The groups and processes of one mount.
pub struct Tracker {
    groups: BTreeMap<Gid, GroupInfo>,
    procs: HashMap<ProcKey, Proc>,
    /// Thread → its process if tracked: saves the reads of `/proc` a request would make.
    /// A thread's answer changes only when its process starts being tracked (its own
    /// command re-asks) or is forgotten; an untracked answer stays right, as a parent's
    /// later engagements are not inherited by children forked before them. The memo is
    /// trusted until the next sweep (within [`SWEEP_INTERVAL`]), which clears it: only a
    /// thread id handed to another process within that time (the kernel's pids wrapping
    /// around `pid_max` in under a second) could be mistaken.
    threads: HashMap<u32, Option<ProcKey>>,
    pid_max: u32,
    last_sweep: Instant,
}

impl Default for Tracker {
    fn default() -> Self {
        Tracker {
            groups: BTreeMap::new(),
            procs: HashMap::new(),
            threads: HashMap::new(),
            pid_max: std::fs::read_to_string("/proc/sys/kernel/pid_max")
                .ok()
                .and_then(|s| s.trim().parse().ok())
                .unwrap_or(1 << 22),
            last_sweep: Instant::now(),
        }
    }
}

fn unknown(g: Gid) -> CommandError {
    CommandError::new(libc::ENOENT, format!("no patchgroup {g}"))
}

impl Tracker {
    /// Whether some process has a group engaged.
    pub fn any_engaged(&self) -> bool {
        self.procs.values().any(|p| !p.engaged.is_empty())
    }

    /// The context to serve thread `tid`'s request in: its process's, if that has groups
    /// engaged.
    pub fn context(&mut self, db: &Db, tid: u32) -> Option<Arc<PatchContext>> {
        // Requests are what keeps coming while a process holds a group: its exit is noticed
        // here too, within a second, and then no request pays for it any more.
        self.sweep_if_due(db);
        let key = self.resolve(db, tid, false)?;
        let p = self.procs.get(&key)?;
        (!p.engaged.is_empty()).then(|| p.ctx.clone())
    }

    /// Thread `tid`'s process, tracked (made so if `track`, or if it inherits groups).
    fn resolve(&mut self, db: &Db, tid: u32, track: bool) -> Option<ProcKey> {
        if let Some(&key) = self.threads.get(&tid) {
            if key.is_some() || !track {
                return key;
            }
        }
        let st = read_stat(tid)?;
        let tgid = read_tgid(tid)?;
        let (key, ppid) = if tgid == tid {
            (
                ProcKey {
                    pid: tid,
                    start: st.start,
                },
                st.ppid,
            )
        } else {
            let lead = read_stat(tgid)?;
            (
                ProcKey {
                    pid: tgid,
                    start: lead.start,
                },
                lead.ppid,
            )
        };
        let tracked = self.inherit(db, key, ppid, MAX_ANCESTORS);
        if !tracked && track {
            if self.procs.len() >= MAX_PROCESSES {
                self.sweep(db);
            }
            if self.procs.len() >= MAX_PROCESSES {
                return None;
            }
            self.procs.insert(key, Proc::new());
        }
        if self.threads.len() >= MAX_THREADS {
            self.threads.clear();
        }
        let key = (tracked || track).then_some(key);
        self.threads.insert(tid, key);
        key
    }

    /// Whether `key` is tracked, tracking it first if it inherits a set from its parent
    /// `ppid` (looked up the same way, `depth` generations at most).
    fn inherit(&mut self, db: &Db, key: ProcKey, ppid: u32, depth: usize) -> bool {
        if self.procs.contains_key(&key) {
            return true;
        }
        if depth == 0 || ppid <= 1 {
            return false;
        }
        let Some(pst) = read_stat(ppid) else {
            return false;
        };
        let parent = ProcKey {
            pid: ppid,
            start: pst.start,
        };
        if !self.inherit(db, parent, pst.ppid, depth - 1) {
            return false;
        }
        let set = match self.procs.get(&parent) {
            Some(p) => p.set_at_fork(key, self.pid_max).to_vec(),
            None => return false,
        };
        if set.is_empty() || self.procs.len() >= MAX_PROCESSES {
            if !set.is_empty() {
                tracing::warn!(
                    pid = key.pid,
                    "too many processes tracked: inherits no patchgroups"
                );
            }
            return false;
        }
        let mut p = Proc::new();
        for g in set {
            // A group closed or sealed since the fork is not engaged (docs/kvfs.md).
            if self.groups.contains_key(&g) && db.pg_engage(&p.ctx, GroupId(g)).is_ok() {
                p.engaged.push(g);
            }
        }
        self.procs.insert(key, p);
        true
    }

    /// Looks for exited processes if none was looked for within [`SWEEP_INTERVAL`].
    pub fn sweep_if_due(&mut self, db: &Db) {
        if self.last_sweep.elapsed() >= SWEEP_INTERVAL {
            self.sweep(db);
        }
    }

    /// Forgets exited processes: ends their engagements and closes the groups they own.
    pub fn sweep(&mut self, db: &Db) {
        self.last_sweep = Instant::now();
        // The memo of threads is trusted only between sweeps (see `threads`).
        self.threads.clear();
        let dead: Vec<ProcKey> = self
            .procs
            .keys()
            .filter(|k| !read_stat(k.pid).is_some_and(|s| s.alive && s.start == k.start))
            .copied()
            .collect();
        if dead.is_empty() {
            return;
        }
        for key in &dead {
            if let Some(p) = self.procs.remove(key) {
                for g in p.engaged {
                    let _ = db.pg_disengage(&p.ctx, GroupId(g));
                }
            }
        }
        let owned: Vec<Gid> = self
            .groups
            .iter()
            .filter(|(_, i)| i.owner.is_some_and(|o| dead.contains(&o)))
            .map(|(g, _)| *g)
            .collect();
        for g in owned {
            self.close_group(db, g);
        }
    }

    fn group(&self, g: Gid, uid: u32) -> Result<&GroupInfo, CommandError> {
        let info = self.groups.get(&g).ok_or_else(|| unknown(g))?;
        if uid != 0 && uid != info.uid {
            return Err(CommandError::new(
                libc::EPERM,
                format!("patchgroup {g} belongs to another user"),
            ));
        }
        Ok(info)
    }

    /// `pg create`.
    pub fn create(
        &mut self,
        db: &Db,
        uid: u32,
        tid: u32,
        detached: bool,
    ) -> Result<Gid, CommandError> {
        if self.groups.len() >= MAX_GROUPS {
            self.sweep(db);
            if self.groups.len() >= MAX_GROUPS {
                return Err(CommandError::new(
                    libc::ENFILE,
                    format!("{MAX_GROUPS} patchgroups are open on this mount"),
                ));
            }
        }
        let owner = if detached {
            None
        } else {
            let key = self.resolve(db, tid, true).ok_or_else(|| {
                CommandError::new(libc::ENFILE, "the calling process cannot be tracked")
            })?;
            let owned = self
                .groups
                .values()
                .filter(|i| i.owner == Some(key))
                .count();
            if owned >= MAX_GROUPS_PER_PROCESS {
                return Err(CommandError::new(
                    libc::EMFILE,
                    format!("a process may own {MAX_GROUPS_PER_PROCESS} patchgroups"),
                ));
            }
            Some(key)
        };
        let g = db.pg_create().0;
        self.groups.insert(
            g,
            GroupInfo {
                owner,
                uid,
                after: Vec::new(),
                sealed: false,
            },
        );
        Ok(g)
    }

    /// `pg depend AFTER BEFORE`.
    pub fn depend(
        &mut self,
        db: &Db,
        uid: u32,
        after: Gid,
        before: Gid,
    ) -> Result<(), CommandError> {
        self.group(after, uid)?;
        self.group(before, uid)?;
        db.pg_depend(GroupId(after), GroupId(before))
            .map_err(|e| CommandError::from_engine(&e))?;
        if let Some(i) = self.groups.get_mut(&after) {
            i.after.push(before);
        }
        if let Some(i) = self.groups.get_mut(&before) {
            i.sealed = true;
        }
        Ok(())
    }

    /// `pg engage G` by thread `tid`'s process.
    pub fn engage(&mut self, db: &Db, uid: u32, tid: u32, g: Gid) -> Result<(), CommandError> {
        self.group(g, uid)?;
        let key = self.resolve(db, tid, true).ok_or_else(|| {
            CommandError::new(libc::ENFILE, "the calling process cannot be tracked")
        })?;
        let Some(p) = self.procs.get_mut(&key) else {
            return Err(CommandError::new(
                libc::ESRCH,
                "the calling process is gone",
            ));
        };
        if p.engaged.contains(&g) {
            return Ok(());
        }
        db.pg_engage(&p.ctx, GroupId(g))
            .map_err(|e| CommandError::from_engine(&e))?;
        p.note_change();
        p.engaged.push(g);
        Ok(())
    }

    /// `pg disengage G` by thread `tid`'s process.
    pub fn disengage(&mut self, db: &Db, uid: u32, tid: u32, g: Gid) -> Result<(), CommandError> {
        self.group(g, uid)?;
        let not_engaged = || {
            CommandError::new(
                libc::EINVAL,
                format!("patchgroup {g} is not engaged by this process"),
            )
        };
        let key = self.resolve(db, tid, false).ok_or_else(not_engaged)?;
        let p = self.procs.get_mut(&key).ok_or_else(not_engaged)?;
        let at = p
            .engaged
            .iter()
            .position(|&e| e == g)
            .ok_or_else(not_engaged)?;
        p.note_change();
        p.engaged.remove(at);
        db.pg_disengage(&p.ctx, GroupId(g))
            .map_err(|e| CommandError::from_engine(&e))?;
        Ok(())
    }

    /// `pg sync G`'s check (the sync itself runs outside the tracker's lock).
    pub fn may_sync(&self, uid: u32, g: Gid) -> Result<(), CommandError> {
        self.group(g, uid).map(|_| ())
    }

    /// `pg close G`.
    pub fn close(&mut self, db: &Db, uid: u32, g: Gid) -> Result<(), CommandError> {
        self.group(g, uid)?;
        self.close_group(db, g);
        Ok(())
    }

    /// Ends every engagement of `g` and closes it.
    fn close_group(&mut self, db: &Db, g: Gid) {
        for p in self.procs.values_mut() {
            if let Some(at) = p.engaged.iter().position(|&e| e == g) {
                p.engaged.remove(at);
                let _ = db.pg_disengage(&p.ctx, GroupId(g));
            }
        }
        if let Err(e) = db.pg_close(GroupId(g)) {
            tracing::warn!("closing patchgroup {g}: {e}");
        }
        self.groups.remove(&g);
    }

    /// The `groups` file: a line per open group (docs/kvfs.md).
    pub fn listing(&self) -> Vec<u8> {
        let mut out = String::new();
        for (g, i) in &self.groups {
            let owner = i
                .owner
                .map_or("detached".to_string(), |o| o.pid.to_string());
            let state = if i.sealed { "sealed" } else { "open" };
            let engaged: Vec<String> = self
                .procs
                .iter()
                .filter(|(_, p)| p.engaged.contains(g))
                .map(|(k, _)| k.pid.to_string())
                .collect();
            let after: Vec<String> = i.after.iter().map(|a| a.to_string()).collect();
            out.push_str(&format!(
                "{g} owner={owner} uid={} state={state} engaged-by={} after={}\n",
                i.uid,
                dash_if_empty(engaged.join(",")),
                dash_if_empty(after.join(",")),
            ));
        }
        out.into_bytes()
    }
}

fn dash_if_empty(s: String) -> String {
    if s.is_empty() {
        "-".into()
    } else {
        s
    }
}
