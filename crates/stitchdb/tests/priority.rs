//! Compaction threads run `Options::compaction_nice` nicer than the thread that opened the
//! store (Linux). Alone in its own test binary: the check reads every thread of the process,
//! and another test's store would add compaction threads of its own.

#![allow(clippy::unwrap_used)]
#![cfg(target_os = "linux")]

use std::sync::Arc;
use std::time::{Duration, Instant};
use stitchdb::{Db, Error, MemDisk, Options};

/// The nice value of each of this process's threads whose name starts with `prefix`.
fn nice_of_threads(prefix: &str) -> Vec<i64> {
    let mut nice = Vec::new();
    for task in std::fs::read_dir("/proc/self/task").unwrap() {
        let Ok(stat) = std::fs::read_to_string(task.unwrap().path().join("stat")) else {
            continue; // the thread ended meanwhile
        };
        // The name is in parentheses and may hold spaces; the other fields follow it.
        let close = stat.rfind(')').unwrap();
        let name = &stat[stat.find('(').unwrap() + 1..close];
        let fields: Vec<&str> = stat[close + 2..].split(' ').collect();
        if name.starts_with(prefix) {
            // Field 19 of the stat line, the 17th after the name.
            nice.push(fields[16].parse().unwrap());
        }
    }
    nice
}

#[test]
fn compaction_threads_run_nicer_than_the_opener_by_compaction_nice() {
    // The calling thread's nice value (Linux's getpriority(PRIO_PROCESS, 0)).
    let opener = i64::from(rustix::process::getpriority_process(None).unwrap());
    let opts = Options {
        compaction_nice: 3,
        ..Options::default()
    };
    let db = Db::create_on(Arc::new(MemDisk::new(0)), opts).unwrap();
    // The threads start, and lower their own priority, in their own time.
    let expected = (opener + 3).min(19);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let nice = nice_of_threads("stitchdb-compac");
        // The flusher, which writers wait for, keeps the opener's priority.
        let flusher = nice_of_threads("stitchdb-flush");
        // Two compaction threads by default.
        if nice.len() == 2 && nice.iter().all(|&n| n == expected) && flusher == [opener] {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "compaction threads' nice values {nice:?} (expected two at {expected}), \
             the flusher's {flusher:?} (expected {opener})"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    db.close().unwrap();

    let too_nice = Options {
        compaction_nice: 20,
        ..Options::default()
    };
    let refused = Db::create_on(Arc::new(MemDisk::new(0)), too_nice);
    assert!(
        matches!(refused, Err(Error::Config(_))),
        "{:?}",
        refused.err()
    );
}
