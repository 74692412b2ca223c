//! Pipelined commands that share one commit. A run of plain data commands that arrived
//! together (`-P 16`, a client's pipeline) takes the locks of all their keys at once, runs
//! in one view of the keyspace, each seeing the ones before it, and commits once: as if run
//! one by one with nothing else in between, which their locks guarantee, and at the cost of
//! one commit instead of one each. A command's failure is its own reply, as alone; only
//! conflicts with an interactive transaction run the whole run again.

use super::{Conn, RETRIES};
use crate::cmd::{self, Failure, Keys, Run, Spec};
use crate::keyspace::ctx::Slot;
use crate::keyspace::Ctx;
use crate::resp::reply::Reply;
use crate::shared::Shared;

/// The most commands one run holds.
pub(super) const GROUP_MAX: usize = 64;

impl<'s> Conn<'s> {
    /// The command `args` names if it may join a run: a known data command with the right
    /// arity, naming its keys (not a whole database), not blocking, not reading server-wide
    /// counts a run's own commits have not reached yet (`DBSIZE`), on a connection that is
    /// authenticated and in no transaction, snapshot or `MULTI`.
    pub(super) fn groupable(&self, args: &[Vec<u8>]) -> Option<&'static Spec> {
        if !self.authenticated
            || self.multi.is_some()
            || self.open.is_some()
            || self.read_at.is_some()
        {
            return None;
        }
        let spec = cmd::lookup(&args[0])?;
        let plain = matches!(spec.run, Run::Data(_))
            && !matches!(spec.keys, Keys::All)
            && !spec.flags.contains(&"blocking")
            && spec.name != "dbsize"
            && cmd::check_arity(spec, args.len()).is_ok();
        plain.then_some(spec)
    }

    /// Runs `run` (from `groupable`) and queues its replies, in order.
    pub(super) fn run_group(&mut self, run: Vec<(&'static Spec, Vec<Vec<u8>>)>) {
        let shared: &'s Shared = self.shared;
        shared.count(&shared.stats.commands, run.len() as u64);
        if let Some((spec, _)) = run.last() {
            let mut info = self.info.lock();
            info.active = std::time::Instant::now();
            info.last_cmd.clear();
            info.last_cmd.push_str(spec.name);
        }
        let ks = &shared.ks;
        let db = self.db;
        let _whole = ks.whole.read();
        let _held = ks.locks.lock(run.iter().flat_map(|(spec, args)| {
            spec.key_positions(args)
                .into_iter()
                .map(move |i| (db, args[i].as_slice()))
        }));
        let replies = self.run_once(&run);
        for r in replies {
            self.reply(r);
        }
    }

    /// The run's replies, after one commit of all it wrote (run again after a conflict).
    fn run_once(&mut self, run: &[(&'static Spec, Vec<Vec<u8>>)]) -> Vec<Reply> {
        let shared: &'s Shared = self.shared;
        let mut last = None;
        for _ in 0..RETRIES {
            let mut ctx = match Ctx::new(&shared.ks, self.db, Slot::Own(None)) {
                Ok(c) => c,
                Err(e) => return vec![Failure::from(e).reply(); run.len()],
            };
            let mut replies = Vec::with_capacity(run.len());
            let mut conflict = None;
            for (spec, args) in run {
                let Run::Data(f) = spec.run else {
                    continue;
                };
                match f(&mut ctx, args) {
                    Ok(r) => replies.push(r),
                    Err(e) if e.is_conflict() => {
                        conflict = Some(e);
                        break;
                    }
                    Err(e) => replies.push(e.reply()),
                }
            }
            let committed = match conflict {
                Some(c) => Err(c),
                None => self.commit(ctx),
            };
            match committed {
                Ok(()) => return replies,
                Err(e) if e.is_conflict() => {
                    shared.count(&shared.stats.retries, 1);
                    last = Some(e);
                }
                Err(e) => return vec![e.reply(); run.len()],
            }
        }
        let reply = last.map_or(Reply::Ok, Failure::reply);
        vec![reply; run.len()]
    }
}
