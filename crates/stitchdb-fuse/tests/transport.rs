//! Which way requests reach the file system: the io_uring queues where the kernel offers
//! them, `/dev/fuse` otherwise or when asked.

#![allow(clippy::unwrap_used)]

mod support;

use support::Mounted;

/// The `/proc` directories of this process's io_uring queue threads.
fn queue_tasks() -> Vec<std::path::PathBuf> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|t| {
            let t = t.ok()?.path();
            let comm = std::fs::read_to_string(t.join("comm")).ok()?;
            comm.starts_with("fuse-queue-").then_some(t)
        })
        .collect()
}

fn queue_threads() -> usize {
    queue_tasks().len()
}

/// The CPU time the queue threads of this process have used, in clock ticks.
fn queue_ticks() -> u64 {
    queue_tasks()
        .iter()
        .filter_map(|t| {
            let stat = std::fs::read_to_string(t.join("stat")).ok()?;
            // After the command name (in parentheses): state is field 3, utime 14, stime 15.
            let rest = stat.rsplit_once(')')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
        })
        .sum()
}

/// Whether this kernel can serve FUSE over io_uring and this process may turn it on.
fn uring_available() -> Option<String> {
    let param = "/sys/module/fuse/parameters/enable_uring";
    if std::fs::metadata(param).is_err() {
        return Some(format!("{param} does not exist (a kernel before 6.14)"));
    }
    if !rustix::process::geteuid().is_root() {
        return Some("not root: cannot turn on FUSE over io_uring".into());
    }
    None
}

#[test]
fn a_root_mount_serves_through_per_cpu_queues_and_no_io_uring_through_the_device() {
    require_fuse!();
    if let Some(why) = uring_available() {
        eprintln!("SKIPPED: {why}");
        return;
    }
    // The only test of this binary: the queue threads of this process are this mount's.
    let m = Mounted::with_options("writeback_cache");
    let path = m.dir.join("f");
    std::fs::write(&path, b"through the queues").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"through the queues");
    std::fs::remove_file(&path).unwrap();
    // A queue thread whose registration the kernel refused ends; these are serving.
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let queues = queue_threads();
    assert!(
        queues >= cpus,
        "{queues} queue threads serving for {cpus} CPUs"
    );
    // They poll only while requests keep coming: an idle mount costs no CPU. (A thread
    // that kept polling would use a whole second of CPU, 100 ticks, in this one.)
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = queue_ticks();
    std::thread::sleep(std::time::Duration::from_secs(1));
    let used = queue_ticks() - before;
    assert!(
        used <= 10,
        "idle queue threads used {used} ticks in a second"
    );
    m.unmount();
    // Gone with the mount.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while queue_threads() > 0 && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert_eq!(queue_threads(), 0, "queue threads left after unmount");

    let m = Mounted::with_options("writeback_cache,no_io_uring");
    let path = m.dir.join("f");
    std::fs::write(&path, b"through /dev/fuse").unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"through /dev/fuse");
    assert_eq!(queue_threads(), 0);
    m.unmount();
}
