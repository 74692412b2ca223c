//! MemDisk: the plain in-memory disk.

use stitch_io::{Disk, IoErrorKind, IoOp, MemDisk};

#[test]
fn round_trip() {
    let d = MemDisk::new(1000);
    assert_eq!(d.len(), 1000);
    d.write_at(10, &[1, 2, 3]).unwrap();
    d.sync().unwrap();
    d.grow(2000).unwrap();
    d.write_at(1500, &[4; 100]).unwrap();
    d.punch_hole(11, 1).unwrap();
    let mut buf = [9; 4];
    d.read_at(10, &mut buf).unwrap();
    assert_eq!(buf, [1, 0, 3, 0]);
    d.read_at(1996, &mut buf).unwrap();
    assert_eq!(buf, [0; 4]);
    assert_eq!(d.len(), 2000);
}

#[test]
fn errors_instead_of_panics() {
    let d = MemDisk::new(100);
    let e = d.write_at(u64::MAX, &[1]).unwrap_err();
    assert_eq!(
        (e.op, e.kind),
        (IoOp::Write, IoErrorKind::OutOfRange { len: 100 })
    );
    assert_eq!(e.disk, "memdisk");
    let e = d.grow(u64::MAX).unwrap_err();
    assert_eq!((e.op, e.kind), (IoOp::Grow, IoErrorKind::NoSpace));
    assert_eq!(d.len(), 100);
}
