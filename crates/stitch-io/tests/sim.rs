//! SimDisk: reads, sync, the crash model, fault injection, capacity.

#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use stitch_io::{Disk, IoErrorKind, IoOp, SimConfig, SimDisk, SimStats, SECTOR_SIZE};

const SECTOR: usize = SECTOR_SIZE as usize;

fn disk(len: u64) -> SimDisk {
    SimDisk::new(SimConfig {
        seed: 7,
        len,
        capacity: None,
    })
}

fn image(disk: &impl Disk) -> Vec<u8> {
    let mut buf = vec![0; disk.len() as usize];
    disk.read_at(0, &mut buf).unwrap();
    buf
}

/// Bytes that differ from write to write and from offset to offset.
fn pattern(tag: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| tag.wrapping_mul(31).wrapping_add(i as u8) | 1)
        .collect()
}

#[test]
fn new_disk_reads_zeros() {
    let d = disk(10_000);
    assert_eq!(d.len(), 10_000);
    assert!(image(&d).iter().all(|&b| b == 0));
}

#[test]
fn reads_see_pending_writes_in_order() {
    let d = disk(20_000);
    d.write_at(100, &[1; 9000]).unwrap();
    d.write_at(4000, &[2; 300]).unwrap();
    d.punch_hole(8000, 50).unwrap();
    let mut expected = vec![0u8; 20_000];
    expected[100..9100].fill(1);
    expected[4000..4300].fill(2);
    expected[8000..8050].fill(0);
    assert_eq!(image(&d), expected);
}

#[test]
fn crash_without_pending_writes_equals_durable_image() {
    let d = disk(50_000);
    d.write_at(1234, &pattern(1, 20_000)).unwrap();
    d.punch_hole(5000, 3000).unwrap();
    d.sync().unwrap();
    let durable = image(&d);
    for seed in 0..100 {
        let c = d.crash(seed);
        assert_eq!(c.len(), d.len());
        assert_eq!(image(&c), durable, "seed {seed}");
    }
}

#[test]
fn nothing_synced_is_lost() {
    let d = disk(50_000);
    d.write_at(0, &pattern(1, 30_000)).unwrap();
    d.sync().unwrap();
    let synced = image(&d);
    d.write_at(40_000, &pattern(2, 5000)).unwrap();
    for seed in 0..100 {
        let c = d.crash(seed);
        assert_eq!(image(&c)[..40_000], synced[..40_000], "seed {seed}");
    }
}

#[test]
fn same_seed_gives_identical_crash_image() {
    let make = || {
        let d = disk(64 * 1024);
        for i in 0..20u8 {
            d.write_at(u64::from(i) * 2000 + 7, &pattern(i, 3000))
                .unwrap();
        }
        d
    };
    let (a, b) = (make(), make());
    for seed in 0..50 {
        let first = image(&a.crash(seed));
        assert_eq!(image(&a.crash(seed)), first, "seed {seed}, same disk");
        assert_eq!(image(&b.crash(seed)), first, "seed {seed}, twin disk");
    }
}

#[test]
fn crash_outcomes_vary_with_seed() {
    let d = disk(64 * 1024);
    d.write_at(0, &pattern(1, 64 * 1024)).unwrap();
    d.sync().unwrap();
    let durable = image(&d);
    for i in 0..8u8 {
        d.write_at(u64::from(i) * 8192, &pattern(i + 2, 8192))
            .unwrap();
    }
    let current = image(&d);
    let (mut all, mut none, mut torn) = (0, 0, 0);
    for seed in 0..200 {
        let crashed = image(&d.crash(seed));
        if crashed == current {
            all += 1;
        } else if crashed == durable {
            none += 1;
        }
        // A write torn: some of its sectors new, some old.
        let torn_write = crashed
            .chunks(8192)
            .zip(current.chunks(8192))
            .any(|(got, new)| {
                let new_sectors = got
                    .chunks(SECTOR)
                    .zip(new.chunks(SECTOR))
                    .filter(|(g, n)| g == n)
                    .count();
                new_sectors > 0 && new_sectors < 8192 / SECTOR
            });
        torn += usize::from(torn_write);
    }
    assert!(
        all > 0 && none > 0 && torn > 0,
        "all {all}, none {none}, torn {torn}"
    );
}

#[test]
fn crashed_disk_is_independent_of_the_original() {
    let d = disk(8192);
    d.write_at(0, &[1; 8192]).unwrap();
    d.sync().unwrap();
    d.write_at(0, &[2; 100]).unwrap();
    let c = d.crash(3);
    assert_eq!(c.stats().pending_writes, 0);
    let crashed = image(&c);

    d.write_at(200, &[3; 100]).unwrap();
    assert_eq!(
        image(&c),
        crashed,
        "the original's writes do not reach the crashed disk"
    );
    c.write_at(1000, &[4; 100]).unwrap();
    c.grow(10_000).unwrap();
    let mut buf = [0; 100];
    d.read_at(1000, &mut buf).unwrap();
    assert_eq!(
        buf, [1; 100],
        "the crashed disk's writes do not reach the original"
    );
    assert_eq!(d.len(), 8192);

    // The crashed disk is a full SimDisk: it syncs and crashes in turn.
    c.sync().unwrap();
    assert_eq!(image(&c.crash(9)), image(&c));
}

#[test]
fn grow_is_durable_at_once() {
    let d = disk(1000);
    d.grow(5000).unwrap();
    d.grow(10).unwrap(); // shrinking is a no-op
    assert_eq!(d.crash(1).len(), 5000);
}

#[test]
fn punch_hole_reads_zeros_and_can_be_lost() {
    let d = disk(16 * 1024);
    d.write_at(0, &[9; 16 * 1024]).unwrap();
    d.sync().unwrap();
    d.punch_hole(1000, 10_000).unwrap();
    let mut buf = vec![1; 10_000];
    d.read_at(1000, &mut buf).unwrap();
    assert!(buf.iter().all(|&b| b == 0));
    // Across seeds the hole survives, is lost, and is torn (some sectors zero, some not).
    let (mut kept, mut lost, mut torn) = (false, false, false);
    for seed in 0..100 {
        let mut hole = vec![0; 10_000];
        d.crash(seed).read_at(1000, &mut hole).unwrap();
        let zero_sectors = hole
            .chunks(SECTOR)
            .filter(|s| s.iter().all(|&b| b == 0))
            .count();
        assert!(hole.iter().all(|&b| b == 0 || b == 9));
        kept |= zero_sectors == hole.chunks(SECTOR).count();
        lost |= zero_sectors == 0;
        torn |= zero_sectors > 0 && zero_sectors < hole.chunks(SECTOR).count();
    }
    assert!(
        kept && lost && torn,
        "kept {kept}, lost {lost}, torn {torn}"
    );
}

#[test]
fn huge_sparse_punch_is_cheap() {
    let d = disk(1 << 50);
    d.write_at(1 << 40, &[5; 4096]).unwrap();
    d.sync().unwrap();
    d.punch_hole(0, 1 << 50).unwrap();
    let mut buf = [1; 4096];
    d.read_at(1 << 40, &mut buf).unwrap();
    assert_eq!(buf, [0; 4096]);
    for seed in 0..20 {
        let c = d.crash(seed);
        c.read_at(1 << 40, &mut buf).unwrap();
        assert!(buf
            .chunks(SECTOR)
            .all(|s| s == [0; SECTOR] || s == [5; SECTOR]));
    }
}

#[test]
fn out_of_range_is_an_error() {
    let d = disk(1000);
    let mut buf = [0; 10];
    for (op, result) in [
        (IoOp::Read, d.read_at(995, &mut buf)),
        (IoOp::Write, d.write_at(995, &[0; 10])),
        (IoOp::PunchHole, d.punch_hole(995, 10)),
        (IoOp::Read, d.read_at(u64::MAX, &mut buf)),
        (IoOp::Write, d.write_at(u64::MAX - 1, &[0; 10])),
        (IoOp::PunchHole, d.punch_hole(10, u64::MAX)),
    ] {
        let e = result.unwrap_err();
        assert_eq!((e.op, e.kind), (op, IoErrorKind::OutOfRange { len: 1000 }));
        assert_eq!(e.disk, "simdisk");
    }
    assert_eq!(d.stats(), SimStats::default());
}

#[test]
fn capacity_limits_grow_and_writes() {
    let d = SimDisk::new(SimConfig {
        seed: 1,
        len: 1000,
        capacity: Some(4096),
    });
    let e = d.grow(4097).unwrap_err();
    assert_eq!(
        (e.op, e.offset, e.len, e.kind),
        (IoOp::Grow, 1000, 3097, IoErrorKind::NoSpace)
    );
    assert_eq!(d.len(), 1000);
    d.grow(4096).unwrap();

    d.set_capacity(Some(2048));
    let e = d.write_at(2000, &[1; 100]).unwrap_err();
    assert_eq!(
        (e.op, e.offset, e.len, e.kind),
        (IoOp::Write, 2000, 100, IoErrorKind::NoSpace)
    );
    d.write_at(1948, &[1; 100]).unwrap();

    d.set_capacity(None);
    d.write_at(2000, &[1; 100]).unwrap();
    d.grow(1 << 40).unwrap();
}

#[test]
fn failed_write_happens_once_and_writes_nothing() {
    let d = disk(4096);
    d.fail_nth_write(2);
    d.write_at(0, &[1; 10]).unwrap();
    let e = d.write_at(100, &[2; 10]).unwrap_err();
    assert_eq!(
        (e.op, e.offset, e.len, e.kind),
        (IoOp::Write, 100, 10, IoErrorKind::Eio)
    );
    assert_eq!(e.disk, "simdisk");
    let mut buf = [9; 10];
    d.read_at(100, &mut buf).unwrap();
    assert_eq!(buf, [0; 10]);
    assert_eq!(d.stats().pending_writes, 1);
    d.write_at(100, &[2; 10]).unwrap();
    d.write_at(200, &[3; 10]).unwrap();
    assert_eq!(d.stats().writes, 3);
}

#[test]
fn failed_read_happens_once() {
    let d = disk(4096);
    d.fail_nth_read(1);
    let mut buf = [0; 10];
    let e = d.read_at(5, &mut buf).unwrap_err();
    assert_eq!(
        (e.op, e.offset, e.len, e.kind),
        (IoOp::Read, 5, 10, IoErrorKind::Eio)
    );
    d.read_at(5, &mut buf).unwrap();
    d.read_at(5, &mut buf).unwrap();
}

#[test]
fn failed_sync_keeps_writes_pending() {
    let d = disk(4096);
    d.write_at(0, &[1; 4096]).unwrap();
    d.fail_nth_sync(1);
    let e = d.sync().unwrap_err();
    assert_eq!((e.op, e.kind), (IoOp::Sync, IoErrorKind::Eio));
    assert_eq!(d.stats().pending_writes, 1);
    assert!(
        (0..100).any(|seed| image(&d.crash(seed)) == [0; 4096]),
        "the write can still be lost"
    );
    d.sync().unwrap();
    assert_eq!(d.stats().pending_writes, 0);
    assert_eq!(image(&d.crash(0)), [1; 4096]);
}

#[test]
fn fault_countdown_zero_cancels() {
    let d = disk(4096);
    d.fail_nth_sync(2);
    d.fail_nth_sync(0);
    for _ in 0..3 {
        d.sync().unwrap();
    }
}

#[test]
fn stats_count_successful_operations() {
    let d = disk(4096);
    d.write_at(0, &[1; 100]).unwrap();
    d.write_at(0, &[1; 28]).unwrap();
    d.punch_hole(0, 10).unwrap();
    d.read_at(0, &mut [0; 4]).unwrap();
    assert_eq!(
        d.stats(),
        SimStats {
            reads: 1,
            writes: 2,
            syncs: 0,
            bytes_written: 128,
            pending_writes: 3
        }
    );
    d.sync().unwrap();
    assert_eq!(
        d.stats(),
        SimStats {
            reads: 1,
            writes: 2,
            syncs: 1,
            bytes_written: 128,
            pending_writes: 0
        }
    );
}

#[test]
fn concurrent_use_from_threads() {
    let d = disk(64 * 1024);
    std::thread::scope(|s| {
        for t in 0..4u8 {
            let d = &d;
            s.spawn(move || {
                for i in 0..100u64 {
                    d.write_at(u64::from(t) * 16 * 1024 + i * 100, &[t + 1; 100])
                        .unwrap();
                    if i % 10 == 0 {
                        d.sync().unwrap();
                        let _ = d.crash(i);
                    }
                }
            });
        }
    });
    assert_eq!(d.stats().writes, 400);
}

/// Not a benchmark: keeps the cost of crashing a big disk in view (seconds, not minutes).
#[test]
fn crash_of_a_large_disk_is_cheap() {
    let d = disk(64 << 20);
    let block = pattern(3, 64 * 1024);
    for i in 0..64u64 {
        d.write_at(i * 1024 * 1024 + 777, &block).unwrap();
    }
    d.sync().unwrap();
    for i in 0..32u64 {
        d.write_at(i * 2 * 1024 * 1024, &block).unwrap();
    }
    for seed in 0..1000 {
        let c = d.crash(seed);
        if seed % 100 == 0 {
            let mut buf = vec![0; 64 * 1024];
            c.read_at(63 * 1024 * 1024 + 777, &mut buf).unwrap();
            assert_eq!(buf, block);
        }
    }
}

#[derive(Debug, Clone)]
enum Op {
    Write { offset: u64, len: usize, tag: u8 },
    Punch { offset: u64, len: u64 },
    Sync,
}

const MODEL_LEN: u64 = 16 * 1024;

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (0..MODEL_LEN, 0..3000usize, any::<u8>()).prop_map(|(offset, len, tag)| Op::Write {
            offset,
            len: len.min((MODEL_LEN - offset) as usize),
            tag
        }),
        1 => (0..MODEL_LEN, 0..6000u64).prop_map(|(offset, len)| Op::Punch { offset, len: len.min(MODEL_LEN - offset) }),
        1 => Just(Op::Sync),
    ]
}

proptest! {
    /// Against a brute-force model: every sector of a crashed disk holds its durable content
    /// or its content after one of the pending writes; reads see the newest data.
    #[test]
    fn crashed_sectors_are_allowed_versions(ops in prop::collection::vec(op(), 0..40), seed in any::<u64>()) {
        let d = SimDisk::new(SimConfig { seed, len: MODEL_LEN, capacity: None });
        let mut durable = vec![0u8; MODEL_LEN as usize];
        // The image after each pending write, in order.
        let mut versions: Vec<Vec<u8>> = Vec::new();
        for op in &ops {
            let mut next = versions.last().unwrap_or(&durable).clone();
            match *op {
                Op::Write { offset, len, tag } => {
                    let data = pattern(tag, len);
                    d.write_at(offset, &data).unwrap();
                    next[offset as usize..offset as usize + len].copy_from_slice(&data);
                }
                Op::Punch { offset, len } => {
                    d.punch_hole(offset, len).unwrap();
                    next[offset as usize..(offset + len) as usize].fill(0);
                }
                Op::Sync => {
                    d.sync().unwrap();
                    durable = versions.pop().unwrap_or(durable);
                    versions.clear();
                    continue;
                }
            }
            versions.push(next);
        }
        prop_assert_eq!(&image(&d), versions.last().unwrap_or(&durable));
        prop_assert_eq!(d.stats().pending_writes, versions.len() as u64);
        for crash_seed in 0..16 {
            let crashed = image(&d.crash(crash_seed));
            for (s, got) in crashed.chunks(SECTOR).enumerate() {
                let at = s * SECTOR..(s * SECTOR + got.len());
                prop_assert!(
                    got == &durable[at.clone()] || versions.iter().any(|v| got == &v[at.clone()]),
                    "crash seed {} sector {} holds none of its versions", crash_seed, s
                );
            }
        }
    }
}

#[test]
fn a_modelled_file_system_counts_blocks_and_runs_out() {
    let d = disk(64 * 1024);
    assert_eq!(d.space(), None, "no file system modelled");
    assert_eq!(d.allocated_bytes(), None);
    d.write_at(0, &[1; 100]).unwrap();
    // Room for four 4 KiB blocks; the chunk written before takes one.
    d.set_file_system(Some(4 * 4096));
    let room = |d: &SimDisk| d.space().unwrap().available;
    assert_eq!((d.allocated_bytes(), room(&d)), (Some(4096), 3 * 4096));
    // Writing into a taken block takes nothing; a write across two new blocks takes both.
    d.write_at(200, &[2; 100]).unwrap();
    d.write_at(4096 + 4000, &[3; 200]).unwrap();
    assert_eq!(room(&d), 4096);
    // An allocation needing more than is left fails with nothing taken; one that fits takes.
    let e = d.allocate(16 * 1024, 2 * 4096).unwrap_err();
    assert_eq!(e.kind, IoErrorKind::NoSpace);
    assert_eq!(room(&d), 4096);
    d.allocate(16 * 1024, 4096).unwrap();
    assert_eq!(room(&d), 0);
    // A write into an allocated block fits; one into a hole does not, and writes nothing.
    d.write_at(16 * 1024, &[4; 4096]).unwrap();
    let e = d.write_at(32 * 1024, &[5; 10]).unwrap_err();
    assert_eq!(e.kind, IoErrorKind::NoSpace);
    let mut buf = [9u8; 10];
    d.read_at(32 * 1024, &mut buf).unwrap();
    assert_eq!(buf, [0; 10]);
    // Punching gives back whole blocks only; other files take room too; a crash keeps it.
    d.punch_hole(4096 + 100, 4096).unwrap();
    assert_eq!(room(&d), 0, "no block wholly punched");
    d.punch_hole(0, 3 * 4096).unwrap();
    assert_eq!(room(&d), 3 * 4096);
    d.set_others_on_file_system(4096);
    assert_eq!(room(&d), 2 * 4096);
    assert_eq!(d.crash(1).space(), d.space());
    assert_eq!(d.allocated_bytes(), Some(4096));
}
