//! Crash tests on SimDisk: random workloads of autocommit and multi-record transactions with
//! `sync_to`, background flushes and checkpoints (that release old segments), a crash at a
//! random moment, recovery, and a new log started after it, for several generations.
//!
//! After every crash the recovered log must be exactly a prefix of what was appended (so the
//! recovered winners are a prefix of the commit order), contain every record a returned
//! `sync_to` covered, and redo exactly the winners' records.

#![allow(clippy::unwrap_used)]

mod common;

use parking_lot::Mutex;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use stitch_io::{Disk, SimConfig, SimDisk};
use stitch_patch::{BlockCache, CacheConfig};
use stitch_wal::*;
use stitch_zone::{ZoneConfig, ZoneId, ZoneStore};

const ZONE: u64 = common::SMALL_ZONE;

/// A SimDisk that crashes (takes [`SimDisk::crash`]) just before its `n`th write or sync once
/// armed: the crash lands inside a flush, with writes pending, torn or reordered.
#[derive(Debug)]
struct CrashDisk {
    sim: SimDisk,
    /// Writes and syncs left before the crash (0: not armed).
    countdown: AtomicU64,
    seed: AtomicU64,
    crashed: Mutex<Option<SimDisk>>,
}

impl CrashDisk {
    fn new(sim: SimDisk) -> Self {
        CrashDisk {
            sim,
            countdown: AtomicU64::new(0),
            seed: AtomicU64::new(0),
            crashed: Mutex::new(None),
        }
    }
    fn arm(&self, ops: u64, seed: u64) {
        self.seed.store(seed, Ordering::SeqCst);
        self.countdown.store(ops, Ordering::SeqCst);
    }
    fn fired(&self) -> bool {
        self.crashed.lock().is_some()
    }
    /// The crashed disk: from the armed moment, or now if it never came.
    fn crash(&self) -> SimDisk {
        self.crashed
            .lock()
            .take()
            .unwrap_or_else(|| self.sim.crash(self.seed.load(Ordering::SeqCst)))
    }
    fn tick(&self) {
        if self
            .countdown
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            == Ok(1)
        {
            *self.crashed.lock() = Some(self.sim.crash(self.seed.load(Ordering::SeqCst)));
        }
    }
}

impl Disk for CrashDisk {
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> stitch_io::Result<()> {
        self.sim.read_at(offset, buf)
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> stitch_io::Result<()> {
        self.tick();
        self.sim.write_at(offset, data)
    }
    fn sync(&self) -> stitch_io::Result<()> {
        self.tick();
        self.sim.sync()
    }
    fn len(&self) -> u64 {
        self.sim.len()
    }
    fn grow(&self, new_len: u64) -> stitch_io::Result<()> {
        self.sim.grow(new_len)
    }
    fn punch_hole(&self, offset: u64, len: u64) -> stitch_io::Result<()> {
        self.tick();
        self.sim.punch_hole(offset, len)
    }
    fn describe(&self) -> String {
        self.sim.describe()
    }
}
const OP_PUT: OpId = 1;

/// What the crashes covered, printed at the end so a weak run shows.
#[derive(Debug, Default)]
struct Coverage {
    crashes: u64,
    no_log_yet: u64,
    records_recovered: u64,
    records_lost: u64,
    torn_ends: u64,
    multi_segment_logs: u64,
    from_checkpoint: u64,
    old_log_again: u64,
    losers: u64,
}

/// One log (one generation of the store) as the test wrote it.
struct Generation {
    epoch: u64,
    first_lsn: Lsn,
    /// Every record appended, in LSN order.
    appended: Vec<LogRecord>,
    /// The newest LSN a returned `sync_to` covered.
    synced: Lsn,
}

/// The checkpoint each superblock seq names: (generation, where its log starts), or `None`
/// for the superblocks of the new store, before any log.
type Checkpoints = HashMap<u64, Option<(usize, LogPosition)>>;

fn registry(redone: Arc<Mutex<Vec<LogRecord>>>) -> OpRegistry {
    let mut r = OpRegistry::new();
    r.register(
        OP_PUT,
        "put",
        Box::new(move |rec: &LogRecord| {
            redone.lock().push(rec.clone());
            Ok(())
        }),
        None,
    )
    .unwrap();
    r
}

/// What a generation's workload works on.
struct Run<'a> {
    disk: &'a CrashDisk,
    zones: &'a Arc<ZoneStore>,
    wal: &'a Wal,
    gen: &'a mut Generation,
    gen_index: usize,
    checkpoints: &'a mut Checkpoints,
    next_txn: &'a mut u64,
}

impl Run<'_> {
    fn append(&mut self, txn: TxnId, op: OpId, flags: Flags, len: usize) -> LogPosition {
        let payload: Vec<u8> = (0..len).map(|i| (txn as usize + i) as u8).collect();
        // Every third record waits in the log's buffer until a later append, flush or
        // segment change writes it.
        let (lsn, pos) = if self.gen.appended.len() % 3 == 0 {
            self.wal.append_buffered(txn, op, flags, &payload)
        } else {
            self.wal.append(txn, op, flags, &payload)
        }
        .unwrap();
        self.gen.appended.push(LogRecord {
            lsn,
            txn,
            op,
            flags,
            payload,
        });
        pos
    }

    fn new_txn(&mut self) -> TxnId {
        *self.next_txn += 1;
        *self.next_txn
    }

    /// Random steps until the disk crashes (or 250 steps).
    fn workload(&mut self, rng: &mut ChaCha8Rng, superblock: stitch_patch::PatchId) {
        // The db never appends before the superblock naming the log is durable.
        self.zones.cache().flush_patch(superblock).unwrap();
        // Open multi-record transactions: txn -> position of its first record.
        let mut open: Vec<(TxnId, Option<LogPosition>)> = Vec::new();
        for _ in 0..250 {
            if self.disk.fired() {
                return;
            }
            let len = if rng.gen_bool(0.1) {
                rng.gen_range(2000..12000)
            } else {
                rng.gen_range(0..400)
            };
            match rng.gen_range(0..100) {
                0..=29 => {
                    let txn = self.new_txn();
                    self.append(txn, OP_PUT, Flags::AUTOCOMMIT, len);
                }
                30..=59 => {
                    if open.is_empty() || (open.len() < 3 && rng.gen_bool(0.3)) {
                        let txn = self.new_txn();
                        open.push((txn, None));
                    }
                    let i = rng.gen_range(0..open.len());
                    let pos = self.append(open[i].0, OP_PUT, Flags::NONE, len);
                    open[i].1.get_or_insert(pos);
                }
                60..=74 if !open.is_empty() => {
                    let (txn, _) = open.swap_remove(rng.gen_range(0..open.len()));
                    match rng.gen_range(0..4) {
                        0 => self.append(txn, OP_PUT, Flags::COMMIT, len),
                        1 | 2 => self.append(txn, OP_NOOP, Flags::COMMIT, 0),
                        _ => self.append(txn, OP_NOOP, Flags::ABORT, 0),
                    };
                }
                75..=89 if self.wal.last_lsn() >= self.gen.first_lsn => {
                    let lsn = rng.gen_range(self.gen.first_lsn..=self.wal.last_lsn());
                    self.wal.sync_to(lsn).unwrap();
                    // Acknowledged only if the crash did not come during the sync.
                    if !self.disk.fired() {
                        self.gen.synced = self.gen.synced.max(lsn);
                    }
                }
                90..=94 => self.wal.flush_async().unwrap(),
                95..=99 => {
                    // A checkpoint keeps the log from the first record of every open transaction.
                    let (mut pos, header) = self.wal.position();
                    for p in open.iter().filter_map(|(_, p)| *p) {
                        if p.lsn < pos.lsn {
                            pos = p;
                        }
                    }
                    let sb = self.zones.write_superblock(None, &[header]).unwrap();
                    self.checkpoints
                        .insert(self.zones.superblock().seq, Some((self.gen_index, pos)));
                    self.wal.release_before(pos, sb).unwrap();
                }
                _ => {}
            }
        }
    }
}

/// Recovers the crashed store and checks it against the model. Returns the opened store,
/// the old log's zones and the next lsn.
fn recover_and_check(
    disk: Arc<CrashDisk>,
    gens: &[Generation],
    checkpoints: &Checkpoints,
    seen: &mut HashMap<(usize, u64), RecoveryReport>,
    seed: u64,
    cov: &mut Coverage,
) -> (Arc<ZoneStore>, Vec<ZoneId>, Lsn) {
    cov.crashes += 1;
    let cache = Arc::new(BlockCache::new(
        disk.clone() as Arc<dyn Disk>,
        CacheConfig::default(),
    ));
    let (store, sb) = ZoneStore::open(cache, ZoneConfig::default()).unwrap();
    let Some((g, start)) = checkpoints[&sb.seq] else {
        // The crash came before the first log's superblock was durable: a store with no log.
        cov.no_log_yet += 1;
        store.finish_open().unwrap();
        return (Arc::new(store), Vec::new(), 1);
    };
    let gen = &gens[g];
    let redone = Arc::new(Mutex::new(Vec::new()));
    let report = Wal::recover(&store, start, gen.epoch, &registry(redone.clone()))
        .unwrap_or_else(|e| panic!("seed {seed}: recovery failed: {e}"));

    // Exactly a prefix of what was appended, from the checkpoint on.
    let mut reader = LogReader::open(&store, start, gen.epoch).unwrap();
    let mut read = Vec::new();
    while let Some((_, rec)) = reader.next_record().unwrap() {
        read.push(rec);
    }
    let from = (start.lsn - gen.first_lsn) as usize;
    assert!(
        read.len() <= gen.appended.len() - from,
        "seed {seed}: more records than appended"
    );
    for (got, want) in read.iter().zip(&gen.appended[from..]) {
        assert_eq!(got, want, "seed {seed}: recovered record differs");
    }
    let last = start.lsn + read.len() as u64 - 1;
    assert_eq!(report.next_lsn, last + 1, "seed {seed}");
    // Every record a returned sync_to covered.
    assert!(
        last >= gen.synced,
        "seed {seed}: lost synced records: recovered up to {last}, synced {} ({})",
        gen.synced,
        report.end_reason
    );

    // Winners in commit order, and the records recovery had to redo.
    let mut committed = HashSet::new();
    let mut txns = HashSet::new();
    let mut autocommits = 0;
    for r in &read {
        if r.flags == Flags::AUTOCOMMIT {
            autocommits += 1;
        } else {
            txns.insert(r.txn);
            if r.flags == Flags::COMMIT {
                committed.insert(r.txn);
            }
        }
    }
    let expected_redo: Vec<LogRecord> = read
        .iter()
        .filter(|r| r.op == OP_PUT && (r.flags == Flags::AUTOCOMMIT || committed.contains(&r.txn)))
        .cloned()
        .collect();
    assert_eq!(*redone.lock(), expected_redo, "seed {seed}: redo set");
    assert_eq!(report.winners, autocommits + committed.len() as u64);
    assert_eq!(report.losers, (txns.len() - committed.len()) as u64);

    cov.records_recovered += read.len() as u64;
    cov.records_lost += (gen.appended.len() - from - read.len()) as u64;
    cov.torn_ends += u64::from(!report.end_reason.is_clean());
    cov.multi_segment_logs += u64::from(report.zones.len() > 2);
    cov.from_checkpoint +=
        u64::from(start.offset as usize != SEGMENT_HEADER_LEN || start.lsn != gen.first_lsn);
    cov.losers += report.losers;
    // A log recovered again (the new log's superblock never became durable) reads the same.
    if let Some(before) = seen.get(&(g, sb.seq)) {
        cov.old_log_again += 1;
        assert_eq!(
            before, &report,
            "seed {seed}: second recovery of the same log differs"
        );
    }
    seen.insert((g, sb.seq), report.clone());
    store.finish_open().unwrap();
    (Arc::new(store), report.zones, report.next_lsn)
}

fn one_seed(seed: u64, cov: &mut Coverage) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut disk = Arc::new(CrashDisk::new(SimDisk::new(SimConfig {
        seed,
        len: 0,
        capacity: None,
    })));
    let cache = Arc::new(BlockCache::new(
        disk.clone() as Arc<dyn Disk>,
        CacheConfig::default(),
    ));
    let mut zones = Arc::new(
        ZoneStore::create(
            cache,
            ZoneConfig {
                zone_size: ZONE,
                max_size: None,
                ..ZoneConfig::default()
            },
        )
        .unwrap(),
    );
    let mut gens: Vec<Generation> = Vec::new();
    let mut checkpoints = Checkpoints::from([(zones.superblock().seq, None)]);
    let mut seen = HashMap::new();
    let mut old_zones: Vec<ZoneId> = Vec::new();
    let (mut next_lsn, mut next_txn) = (1, 0);
    for _ in 0..3 {
        // Crash at the nth disk write or sync from now: often early, while the new log's
        // superblock is being made durable; else anywhere in the workload.
        let ops = if rng.gen_bool(0.15) {
            rng.gen_range(1..6)
        } else {
            rng.gen_range(1..400)
        };
        disk.arm(ops, rng.gen());
        // Start a new log, as the db does after creating or recovering a store.
        let epoch = zones.superblock().seq + 1;
        let wal = Wal::create(zones.clone(), epoch, next_lsn).unwrap();
        let superblock = zones.write_superblock(None, &[wal.start_patch()]).unwrap();
        assert_eq!(zones.superblock().seq, epoch);
        for z in old_zones.drain(..) {
            zones.release_zone(z, superblock).unwrap();
        }
        gens.push(Generation {
            epoch,
            first_lsn: next_lsn,
            appended: Vec::new(),
            synced: 0,
        });
        let gen_index = gens.len() - 1;
        checkpoints.insert(epoch, Some((gen_index, wal.start_position())));
        let mut run = Run {
            disk: &disk,
            zones: &zones,
            wal: &wal,
            gen: &mut gens[gen_index],
            gen_index,
            checkpoints: &mut checkpoints,
            next_txn: &mut next_txn,
        };
        run.workload(&mut rng, superblock);
        let crashed = disk.crash();
        drop(wal);
        disk = Arc::new(CrashDisk::new(crashed));
        let (store, zones_of_log, next) =
            recover_and_check(disk.clone(), &gens, &checkpoints, &mut seen, seed, cov);
        zones = store;
        old_zones = zones_of_log;
        next_lsn = next;
    }
}

#[test]
fn crashes_keep_a_prefix_with_every_synced_commit() {
    let seeds: u64 = std::env::var("WAL_CRASH_SEEDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(300);
    let mut cov = Coverage::default();
    for seed in 0..seeds {
        one_seed(seed, &mut cov);
    }
    println!("{cov:#?}");
    assert!(
        cov.torn_ends > 0
            && cov.old_log_again > 0
            && cov.from_checkpoint > 0
            && cov.records_lost > 0
    );
}
