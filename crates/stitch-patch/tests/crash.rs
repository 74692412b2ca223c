//! Crash safety: random patch graphs flushed on a SimDisk that is crashed after every write
//! and every sync. On each crashed image, a write whose bytes are present must find the
//! bytes of everything it depends on present too, unless a later write overwrote them.

mod support;

use parking_lot::Mutex;
use proptest::prelude::*;
use std::collections::HashMap;
use std::sync::Arc;
use stitch_io::{CountingDisk, DiskRequest, SimDisk};
use stitch_patch::{BlockCache, PatchId};
use support::{cache_on, read_cache, read_disk, sim_disk, BLOCK};

const BLOCKS: u64 = 4;
/// Crash images taken at each write and sync.
const CRASHES_PER_POINT: u64 = 2;

/// Chooses among the patches made so far: the one at this position, modulo their number.
type Pick = usize;

#[derive(Debug, Clone)]
enum Op {
    /// Writes `units` two-byte units at unit `start` of `block` (on into the next blocks),
    /// after the chosen earlier patches.
    Write {
        block: u64,
        start: u64,
        units: u64,
        deps: Vec<Pick>,
    },
    /// An empty patch on the chosen earlier patches.
    Join {
        deps: Vec<Pick>,
    },
    /// Makes a join (if still pending) also depend on another patch.
    AddDep {
        join: Pick,
        dep: Pick,
    },
    Flush {
        target: Pick,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let units_per_block = BLOCK / 2;
    let disk_units = BLOCKS * units_per_block;
    // Mostly small writes (merges, one sector), some crossing sectors, a few crossing blocks.
    let units = prop_oneof![4 => 1..8u64, 4 => 8..400u64, 1 => 400..3000u64];
    let write = (
        0..BLOCKS,
        0..units_per_block,
        units,
        prop::collection::vec(any::<usize>(), 0..3),
    )
        .prop_map(move |(block, start, units, deps)| Op::Write {
            block,
            start,
            units: units.min(disk_units - block * units_per_block - start),
            deps,
        });
    prop_oneof![
        6 => write,
        1 => prop::collection::vec(any::<usize>(), 1..4).prop_map(|deps| Op::Join { deps }),
        1 => (any::<usize>(), any::<usize>()).prop_map(|(join, dep)| Op::AddDep { join, dep }),
        1 => any::<usize>().prop_map(|target| Op::Flush { target }),
    ]
}

/// Something a patch id stands for (a merged patch stands for several writes).
#[derive(Debug, Clone, Copy)]
enum Producer {
    Write(usize),
    Join(usize),
}

/// A dependency as the caller declared it: on patch `id`, as it stood at op `time`.
type Edge = (PatchId, usize);

#[derive(Debug, Default)]
struct Model {
    /// Per write: its disk byte range (two-byte aligned) and its dependencies.
    writes: Vec<(u64, u64, Vec<Edge>)>,
    joins: Vec<Vec<Edge>>,
    /// Per patch id, what it stands for, with the op time it came to.
    producers: HashMap<PatchId, Vec<(usize, Producer)>>,
    /// Patch ids of writes and joins, for choosing dependencies.
    handles: Vec<(PatchId, Producer)>,
}

impl Model {
    /// The patch chosen by `pick`, if any patch was made yet.
    fn pick(&self, pick: Pick) -> Option<(PatchId, Producer)> {
        (!self.handles.is_empty()).then(|| self.handles[pick % self.handles.len()])
    }

    fn chosen(&self, picks: &[Pick]) -> Vec<PatchId> {
        picks
            .iter()
            .filter_map(|&p| self.pick(p))
            .map(|(id, _)| id)
            .collect()
    }

    /// Records that op `time` made (or merged into) patch `id`.
    fn made(&mut self, id: PatchId, time: usize, producer: Producer) {
        self.producers.entry(id).or_default().push((time, producer));
        self.handles.push((id, producer));
    }

    fn tag(write: usize) -> u16 {
        write as u16 + 1
    }

    /// The writes that must be durable before a patch whose dependencies are `edges`.
    fn required(&self, edges: &[Edge]) -> Vec<bool> {
        let mut required = vec![false; self.writes.len()];
        let mut joins_seen = vec![false; self.joins.len()];
        let mut stack: Vec<Edge> = edges.to_vec();
        while let Some((id, time)) = stack.pop() {
            for &(made, producer) in self.producers.get(&id).into_iter().flatten() {
                if made >= time {
                    continue;
                }
                match producer {
                    Producer::Write(w) if !required[w] => {
                        required[w] = true;
                        stack.extend(&self.writes[w].2);
                    }
                    Producer::Join(j) if !joins_seen[j] => {
                        joins_seen[j] = true;
                        stack.extend(&self.joins[j]);
                    }
                    _ => {}
                }
            }
        }
        required
    }

    /// Per write: are some of its bytes on `image`; are all of them (or overwritten by later writes)?
    fn presence(&self, image: &[u8]) -> Vec<(bool, bool)> {
        let unit = |at: u64| u16::from_le_bytes([image[at as usize], image[at as usize + 1]]);
        (0..self.writes.len())
            .map(|w| {
                let (start, end, _) = self.writes[w];
                let mut some = false;
                let mut all = true;
                for at in (start..end).step_by(2) {
                    let v = unit(at);
                    if v == Self::tag(w) {
                        some = true;
                    } else {
                        let later = (v as usize)
                            .checked_sub(1)
                            .filter(|&m| m > w && m < self.writes.len());
                        all &= later
                            .is_some_and(|m| (self.writes[m].0..self.writes[m].1).contains(&at));
                    }
                }
                (some, all)
            })
            .collect()
    }

    /// Checks the dependency rule on a crashed image.
    fn check(&self, image: &[u8]) -> Result<(), String> {
        let presence = self.presence(image);
        for (w, &(some, _)) in presence.iter().enumerate() {
            if !some {
                continue;
            }
            for (j, needed) in self.required(&self.writes[w].2).into_iter().enumerate() {
                if needed && !presence[j].1 {
                    return Err(format!(
                        "write {w} is on the disk but write {j}, which it follows, is not"
                    ));
                }
            }
        }
        Ok(())
    }

    /// The bytes every write leaves, applied in order.
    fn final_image(&self) -> Vec<u8> {
        let mut image = vec![0; (BLOCKS * BLOCK) as usize];
        for (w, &(start, end, _)) in self.writes.iter().enumerate() {
            for at in (start..end).step_by(2) {
                image[at as usize..at as usize + 2].copy_from_slice(&Self::tag(w).to_le_bytes());
            }
        }
        image
    }
}

fn crashed_image(sim: &SimDisk, seed: u64) -> Vec<u8> {
    read_disk(&sim.crash(seed), 0, (BLOCKS * BLOCK) as usize)
}

/// Runs `ops` against a cache on a SimDisk crashed after every write and sync; returns the
/// first violation found.
fn run(ops: &[Op], seed: u64) -> Result<(), String> {
    let sim = sim_disk(BLOCKS, seed);
    let counting = Arc::new(CountingDisk::new(sim.clone()));
    let cache = cache_on(counting.clone());
    let model = Arc::new(Mutex::new(Model::default()));
    let violation = Arc::new(Mutex::new(None::<String>));
    {
        let (sim, model, violation) = (sim.clone(), model.clone(), violation.clone());
        let mut crashes = 0;
        counting.set_hook(move |op| {
            // Crash after every write and sync (reads change nothing).
            if matches!(op, DiskRequest::Read { .. }) {
                return;
            }
            let model = model.lock();
            for _ in 0..CRASHES_PER_POINT {
                crashes += 1;
                if let Err(e) = model.check(&crashed_image(&sim, crashes)) {
                    violation
                        .lock()
                        .get_or_insert(format!("after disk request {crashes}: {e}"));
                }
            }
        });
    }
    for (time, op) in ops.iter().enumerate() {
        apply(&cache, &sim, &model, time, op)?;
        if let Some(v) = violation.lock().take() {
            return Err(v);
        }
    }
    cache.flush_all().map_err(|e| e.to_string())?;
    if let Some(v) = violation.lock().take() {
        return Err(v);
    }
    let expect = model.lock().final_image();
    let len = expect.len();
    if read_cache(&cache, 0, len) != expect
        || read_disk(&*sim, 0, len) != expect
        || crashed_image(&sim, 0) != expect
    {
        return Err("final bytes differ from the writes applied in order".into());
    }
    Ok(())
}

fn apply(
    cache: &BlockCache,
    sim: &SimDisk,
    model: &Mutex<Model>,
    time: usize,
    op: &Op,
) -> Result<(), String> {
    match op {
        Op::Write {
            block,
            start,
            units,
            deps,
        } => {
            let mut m = model.lock();
            let deps = m.chosen(deps);
            let w = m.writes.len();
            let offset = block * BLOCK + start * 2;
            let bytes: Vec<u8> = std::iter::repeat_n(Model::tag(w).to_le_bytes(), *units as usize)
                .flatten()
                .collect();
            let id = cache
                .write(offset, &bytes, &deps)
                .map_err(|e| e.to_string())?;
            m.writes.push((
                offset,
                offset + bytes.len() as u64,
                deps.iter().map(|&d| (d, time)).collect(),
            ));
            m.made(id, time, Producer::Write(w));
        }
        Op::Join { deps } => {
            let mut m = model.lock();
            let deps = m.chosen(deps);
            let id = cache.empty(&deps).map_err(|e| e.to_string())?;
            let j = m.joins.len();
            m.joins.push(deps.iter().map(|&d| (d, time)).collect());
            m.made(id, time, Producer::Join(j));
        }
        Op::AddDep { join, dep } => {
            let mut m = model.lock();
            let joins: Vec<(PatchId, usize)> = m
                .handles
                .iter()
                .filter_map(|&(id, p)| match p {
                    Producer::Join(j) => Some((id, j)),
                    Producer::Write(_) => None,
                })
                .collect();
            let (Some(&(after, j)), Some((before, _))) =
                (joins.get(*join % joins.len().max(1)), m.pick(*dep))
            else {
                return Ok(());
            };
            // Refusals (the join committed, or a cycle) add no edge.
            if cache.add_dependency(after, before).is_ok() {
                m.joins[j].push((before, time));
            }
        }
        Op::Flush { target } => {
            let Some((id, _)) = model.lock().pick(*target) else {
                return Ok(());
            };
            cache.flush_patch(id).map_err(|e| e.to_string())?;
            // Durable now: every crash keeps it and what it follows.
            let m = model.lock();
            let required = m.required(&[(id, time)]);
            for seed in 0..CRASHES_PER_POINT {
                let presence = m.presence(&crashed_image(sim, 1_000_000 + seed));
                if let Some(w) = (0..m.writes.len()).find(|&w| required[w] && !presence[w].1) {
                    return Err(format!(
                        "write {w} is missing after flush_patch({id:?}) returned"
                    ));
                }
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn crashed_images_respect_every_dependency(ops in prop::collection::vec(op(), 1..60), seed in any::<u64>()) {
        if let Err(violation) = run(&ops, seed) {
            return Err(TestCaseError::fail(violation));
        }
    }
}

#[test]
fn a_dependency_chain_through_sectors_and_blocks_survives_every_crash() {
    // A fixed, hand-made case: a chain zig-zagging between two blocks and across sectors.
    let mut ops = Vec::new();
    for i in 0..12u64 {
        let deps = if i == 0 { vec![] } else { vec![i as usize - 1] };
        ops.push(Op::Write {
            block: i % 2,
            start: (i * 300) % 2000,
            units: 200,
            deps,
        });
    }
    for seed in 0..20 {
        run(&ops, seed).unwrap();
    }
}
