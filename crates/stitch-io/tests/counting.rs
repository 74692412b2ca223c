//! CountingDisk: counts what succeeds, one request per call whatever its buffers, calls the hook
//! after each request (not again for the hook's own requests), passes the rest on uncounted.

use parking_lot::Mutex;
use std::sync::Arc;
use stitch_io::{CountingDisk, Disk, DiskRequest, MemDisk};

#[test]
fn counts_requests_and_calls_the_hook_after_each() -> stitch_io::Result<()> {
    let counting = Arc::new(CountingDisk::new(Arc::new(MemDisk::new(8192))));
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let (seen, disk) = (seen.clone(), Arc::downgrade(&counting));
        counting.set_hook(move |request| {
            seen.lock().push(request);
            // A request of the hook's own is passed on and counted, but does not call it.
            if let (DiskRequest::Sync, Some(disk)) = (request, disk.upgrade()) {
                let mut buf = [0; 1];
                disk.read_at(0, &mut buf).expect("read from the hook");
            }
        });
    }
    counting.write_at(10, &[1; 20])?;
    counting.write_parts_at(100, &[&[2; 3], &[3; 4]])?;
    counting.sync()?;
    assert_eq!(counting.read_vec_at(100, 7)?, [2, 2, 2, 3, 3, 3, 3]);
    let pieces = counting.read_vecs_at(100, &[3, 4])?;
    assert_eq!(pieces, [vec![2; 3], vec![3; 4]]);
    // Failures are neither counted nor seen by the hook.
    assert!(counting.write_at(8190, &[0; 4]).is_err());
    counting.grow(1 << 20)?;
    counting.punch_hole(0, 4096)?;

    assert_eq!(
        (counting.reads(), counting.writes(), counting.syncs()),
        (3, 2, 1)
    );
    assert_eq!(
        *seen.lock(),
        [
            DiskRequest::Write {
                offset: 10,
                len: 20
            },
            DiskRequest::Write {
                offset: 100,
                len: 7
            },
            DiskRequest::Sync,
            DiskRequest::Read {
                offset: 100,
                len: 7
            },
            DiskRequest::Read {
                offset: 100,
                len: 7
            },
        ]
    );
    assert_eq!(counting.len(), 1 << 20);
    assert_eq!(counting.inner().len(), 1 << 20);
    Ok(())
}

#[test]
fn a_sync_delay_makes_each_sync_take_at_least_that_long() -> stitch_io::Result<()> {
    let delay = std::time::Duration::from_millis(20);
    let counting = CountingDisk::new(Arc::new(MemDisk::new(0))).with_sync_delay(delay);
    let started = std::time::Instant::now();
    counting.sync()?;
    counting.sync()?;
    assert!(started.elapsed() >= 2 * delay);
    assert_eq!(counting.syncs(), 2);
    Ok(())
}
