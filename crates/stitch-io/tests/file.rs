//! FileDisk on a temporary file: round trips, range checks, locking, error messages.

#![allow(clippy::unwrap_used)]

use stitch_io::{Disk, FileDisk, IoErrorKind, IoOp, LockMode};

fn store() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a.store");
    (dir, path)
}

#[test]
fn round_trip_survives_reopen() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    assert_eq!(d.path(), path);
    assert!(d.is_empty());
    d.grow(1 << 20).unwrap();
    d.grow(10).unwrap(); // shrinking is a no-op
    assert_eq!(d.len(), 1 << 20);
    let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8 + 1).collect();
    d.write_at(12_345, &data).unwrap();
    d.sync().unwrap();
    drop(d);

    let d = FileDisk::open(&path, LockMode::Exclusive).unwrap();
    assert_eq!(d.len(), 1 << 20);
    let mut buf = vec![0; data.len()];
    d.read_at(12_345, &mut buf).unwrap();
    assert_eq!(buf, data);
    // Into a new vector: the same bytes, also ending at the disk's last byte.
    assert_eq!(d.read_vec_at(12_345, data.len()).unwrap(), data);
    assert_eq!(d.read_vec_at(12_345, 0).unwrap(), Vec::<u8>::new());
    let end = d.read_vec_at((1 << 20) - 5, 5).unwrap();
    assert_eq!(end, [0; 5]);
    // Writeback hints change nothing readable, in range or not.
    d.start_writeback(12_345, data.len() as u64);
    d.start_writeback(1 << 30, 1 << 20);
    d.start_writeback(0, 0);
    assert_eq!(d.read_vec_at(12_345, data.len()).unwrap(), data);
}

#[test]
fn gathered_writes_land_back_to_back() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(1 << 20).unwrap();
    // More parts than one `pwritev` takes, of uneven sizes, some empty.
    let parts: Vec<Vec<u8>> = (0..2500u32)
        .map(|i| vec![(i % 251) as u8 + 1; (i % 7 * 50) as usize])
        .collect();
    let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    d.write_parts_at(777, &slices).unwrap();
    let whole = parts.concat();
    let mut buf = vec![0; whole.len()];
    d.read_at(777, &mut buf).unwrap();
    assert_eq!(buf, whole);
    // Past the end it is an error, and nothing is written.
    let err = d
        .write_parts_at((1 << 20) - 10, &[&[9; 8], &[9; 8]])
        .unwrap_err();
    assert_eq!(err.op, IoOp::Write);
    let mut tail = [0u8; 10];
    d.read_at((1 << 20) - 10, &mut tail).unwrap();
    assert_eq!(tail, [0; 10]);
}

#[test]
fn scattered_reads_split_one_read_into_pieces() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(1 << 20).unwrap();
    let data: Vec<u8> = (0..600_000u32).map(|i| (i % 253) as u8).collect();
    d.write_at(0, &data).unwrap();
    // More pieces than one `preadv` takes, of uneven sizes, some empty.
    let lens: Vec<usize> = (0..2500).map(|i| i % 9 * 40).collect();
    let pieces = d.read_vecs_at(333, &lens).unwrap();
    assert_eq!(pieces.len(), lens.len());
    let mut at = 333;
    for (piece, &len) in pieces.iter().zip(&lens) {
        assert_eq!(piece.as_slice(), &data[at..at + len]);
        at += len;
    }
    // Past the end it is an error.
    let err = d.read_vecs_at((1 << 20) - 10, &[8, 8]).unwrap_err();
    assert_eq!(err.op, IoOp::Read);
    assert!(matches!(err.kind, IoErrorKind::OutOfRange { .. }), "{err}");
}

#[test]
fn punched_hole_reads_zeros() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(64 * 1024).unwrap();
    d.write_at(0, &[7; 64 * 1024]).unwrap();
    d.punch_hole(1000, 20_000).unwrap();
    let mut buf = vec![0; 64 * 1024];
    d.read_at(0, &mut buf).unwrap();
    assert!(buf[..1000].iter().all(|&b| b == 7));
    assert!(buf[1000..21_000].iter().all(|&b| b == 0));
    assert!(buf[21_000..].iter().all(|&b| b == 7));
    assert_eq!(d.len(), 64 * 1024, "punching keeps the size");
}

#[test]
fn create_refuses_an_existing_file() {
    let (_dir, path) = store();
    drop(FileDisk::create(&path).unwrap());
    let e = FileDisk::create(&path).unwrap_err();
    assert_eq!(e.op, IoOp::Open);
}

#[test]
fn out_of_range_is_an_error() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(4096).unwrap();
    let mut buf = [0; 100];
    for (op, result) in [
        (IoOp::Read, d.read_at(4000, &mut buf)),
        (IoOp::Write, d.write_at(4000, &[1; 100])),
        (IoOp::PunchHole, d.punch_hole(4000, 100)),
        (IoOp::Read, d.read_at(u64::MAX, &mut buf)),
        (IoOp::Read, d.read_vec_at(4000, 100).map(drop)),
        (IoOp::Read, d.read_vec_at(u64::MAX, 1).map(drop)),
        (IoOp::PunchHole, d.punch_hole(1, u64::MAX)),
    ] {
        let e = result.unwrap_err();
        assert_eq!((e.op, e.kind), (op, IoErrorKind::OutOfRange { len: 4096 }));
    }
}

#[test]
fn exclusive_lock_excludes_every_other_opener() {
    let (_dir, path) = store();
    let held = FileDisk::create(&path).unwrap();
    for mode in [LockMode::Exclusive, LockMode::Shared] {
        let e = FileDisk::open(&path, mode).unwrap_err();
        assert_eq!(
            (e.op, e.kind),
            (IoOp::Lock, IoErrorKind::Locked),
            "{mode:?}"
        );
    }
    drop(held);
    FileDisk::open(&path, LockMode::Exclusive).unwrap();
}

#[test]
fn shared_locks_coexist_and_exclude_a_writer() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(4096).unwrap();
    d.write_at(0, b"hello").unwrap();
    drop(d);

    let a = FileDisk::open(&path, LockMode::Shared).unwrap();
    let b = FileDisk::open(&path, LockMode::Shared).unwrap();
    let mut buf = [0; 5];
    b.read_at(0, &mut buf).unwrap();
    assert_eq!(&buf, b"hello");
    assert!(a.write_at(0, b"x").is_err(), "a shared opener is read-only");
    let e = FileDisk::open(&path, LockMode::Exclusive).unwrap_err();
    assert_eq!(e.kind, IoErrorKind::Locked);
}

#[test]
fn error_messages_say_what_and_where() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(4096).unwrap();
    let msg = d.read_at(4000, &mut [0; 100]).unwrap_err().to_string();
    let expected = format!(
        "read of 100 bytes at offset 4000 of file {} failed: range outside the disk (disk is 4096 bytes)",
        path.display()
    );
    assert_eq!(msg, expected);

    let msg = FileDisk::open(&path, LockMode::Exclusive)
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with(&format!("lock of file {} failed:", path.display())),
        "{msg}"
    );
    assert!(msg.contains("locked"), "{msg}");

    let missing = path.with_file_name("missing.store");
    let msg = FileDisk::open(&missing, LockMode::Shared)
        .unwrap_err()
        .to_string();
    assert!(
        msg.starts_with(&format!("open of file {} failed:", missing.display())),
        "{msg}"
    );
}

/// A vector of `len` bytes of `fill` whose start is a multiple of `align`, as a slice of a
/// larger allocation.
fn aligned(storage: &mut Vec<u8>, align: usize, len: usize, fill: u8) -> &[u8] {
    storage.clear();
    storage.resize(len + align, fill);
    let skip = storage.as_ptr().align_offset(align);
    &storage[skip..skip + len]
}

#[test]
fn direct_and_buffered_writes_of_one_range_read_back_the_latest() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(1 << 20).unwrap();
    // Where the file system has direct I/O (ext4, xfs; not tmpfs), this thread's aligned
    // writes bypass the page cache; either way every write must be what the next read sees,
    // whichever path it took and whatever the page cache held of the range before.
    stitch_io::write_direct(true);
    let align = d.direct_write_alignment().unwrap_or(512);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    let block = 4 * align;
    for round in 0..20u8 {
        let at = (round as u64 % 5) * block as u64;
        // Read first, so the page cache holds the range's old bytes.
        let _ = d.read_vec_at(at, 3 * block).unwrap();
        let first = aligned(&mut a, align, block, round * 2 + 1);
        let second = aligned(&mut b, align, 2 * block, round * 2 + 2);
        // Aligned parts (direct where it exists), then an unaligned write over part of them.
        d.write_parts_at(at, &[first, second]).unwrap();
        let mut want = [first, second].concat();
        assert_eq!(d.read_vec_at(at, 3 * block).unwrap(), want);
        d.write_at(at + 100, &[0xEE; 700]).unwrap();
        want[100..800].fill(0xEE);
        assert_eq!(d.read_vec_at(at, 3 * block).unwrap(), want);
        // And an aligned write over the range the buffered one left dirty.
        let third = aligned(&mut a, align, block, 0xD0 + round);
        d.write_at(at, third).unwrap();
        want[..block].copy_from_slice(third);
        assert_eq!(d.read_vec_at(at, 3 * block).unwrap(), want);
    }
    d.sync().unwrap();
    stitch_io::write_direct(false);
    drop(d);
    // A read-only opener never writes, so it opens no direct descriptor.
    let d = FileDisk::open(&path, LockMode::Shared).unwrap();
    assert_eq!(d.direct_write_alignment(), None);
}

#[test]
fn reads_polling_for_the_device_return_what_sleeping_reads_do() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(4 << 20).unwrap();
    let data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 253) as u8 + 1).collect();
    d.write_at(0, &data).unwrap();
    d.sync().unwrap();
    // Drop the file's cached pages (written back by the sync), so reads go to the device.
    let f = std::fs::File::open(&path).unwrap();
    rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
    let cases = [
        (0, 4096),
        (12_345, 4_135),
        (1 << 20, 65_536),
        (2 << 20, 65_537),       // past the polling limit: read as usual
        ((3 << 20) - 100, 4096), // half written, half never written (zeros)
        ((4 << 20) - 10, 10),
        (777, 0),
    ];
    for limit in [
        std::time::Duration::from_millis(5),
        std::time::Duration::ZERO,
    ] {
        stitch_io::spin_for_reads(limit);
        for &(at, len) in &cases {
            let mut want = vec![0u8; len];
            let from = (at as usize).min(data.len());
            let written = (data.len() - from).min(len);
            want[..written].copy_from_slice(&data[from..from + written]);
            assert_eq!(
                d.read_vec_at(at, len).unwrap(),
                want,
                "{len} at {at}, {limit:?}"
            );
        }
        // Out of range is still refused.
        assert!(d.read_vec_at((4 << 20) - 10, 11).is_err());
    }
}

#[test]
fn direct_reads_return_what_buffered_reads_do_dirty_pages_included() {
    let (_dir, path) = store();
    let d = FileDisk::create(&path).unwrap();
    d.grow(4 << 20).unwrap();
    let mut data: Vec<u8> = (0..(3u32 << 20)).map(|i| (i % 251) as u8 + 1).collect();
    d.write_at(0, &data).unwrap();
    data.resize(4 << 20, 0);
    // Offsets and lengths that meet no alignment, one piece or many, up to the file's end,
    // and larger than any read before (the thread's buffer grows).
    let cases: [(u64, &[usize]); 7] = [
        (0, &[4096]),
        (12_345, &[4_135]),
        (333, &[100, 0, 7_000, 65_536, 1]),
        ((1 << 20) - 1, &[2, 1 << 20]),
        ((3 << 20) - 100, &[50, 4096]),
        ((4 << 20) - 10, &[3, 7]),
        (777, &[]),
    ];
    let check = |d: &FileDisk, data: &[u8], when: &str| {
        for (at, lens) in cases {
            let pieces = d.read_vecs_at(at, lens).unwrap();
            let mut from = at as usize;
            for (piece, &len) in pieces.iter().zip(lens) {
                assert_eq!(
                    piece.as_slice(),
                    &data[from..from + len],
                    "{lens:?} at {at}, {when}"
                );
                from += len;
            }
            if let [len] = lens {
                assert_eq!(
                    d.read_vec_at(at, *len).unwrap(),
                    &data[at as usize..][..*len]
                );
            }
        }
        assert!(
            d.read_vecs_at((4 << 20) - 10, &[5, 6]).is_err(),
            "out of range, {when}"
        );
    };
    for direct in [true, false] {
        stitch_io::read_direct(direct);
        // Not yet written back: a direct read must see the page cache's dirty bytes.
        check(&d, &data, "dirty");
        // Written again over part of the range, then synced and dropped from the page cache.
        d.write_at(5_000, &[0xAB; 300_000]).unwrap();
        data[5_000..305_000].fill(0xAB);
        check(&d, &data, "rewritten");
        d.sync().unwrap();
        let f = std::fs::File::open(&path).unwrap();
        rustix::fs::fadvise(&f, 0, None, rustix::fs::Advice::DontNeed).unwrap();
        check(&d, &data, "from the device");
    }
    stitch_io::read_direct(false);
}
