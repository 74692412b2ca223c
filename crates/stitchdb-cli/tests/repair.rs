//! `check` and `repair` on damaged stores, through the built binary: check lists every
//! damaged structure (a damaged superblock slot too, though the other slot is good) and a cut
//! file; repair salvages every key whose block is intact and keeps the damaged file.

#![allow(clippy::unwrap_used)]

mod support;

use std::io::Write;
use std::path::Path;
use support::run_with_input;
use tempfile::TempDir;

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const KEYS: usize = 20_000;
/// Exit statuses (README, "Exit statuses").
const FAILED: i32 = 3;
const CORRUPT: i32 = 4;

/// A store holding `key000000..` in runs (imported, so checkpointed at close).
fn store(dir: &TempDir) -> String {
    let path = dir.path().join("s.db").to_str().unwrap().to_string();
    assert!(run_with_input(&["init", &path], b"").status.success());
    let mut input = Vec::new();
    for i in 0..KEYS {
        writeln!(input, "key{i:06}\tvalue-{i:06}-{}", "y".repeat(60)).unwrap();
    }
    let out = run_with_input(&["import", &path, "-"], &input);
    assert!(out.status.success(), "{}", text(&out.stderr));
    path
}

/// The byte offset of the superblock slot holding the older superblock (sequence number at
/// bytes 12..20 of each).
fn older_slot(path: &str) -> u64 {
    let bytes = std::fs::read(path).unwrap();
    let seq = |at: usize| u64::from_le_bytes(bytes[at + 12..at + 20].try_into().unwrap());
    if seq(0) < seq(4096) {
        0
    } else {
        4096
    }
}

fn overwrite(path: &str, at: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, at).unwrap();
}

/// The file offsets of every copy of `needle` past the superblock zone (its run block, and
/// stale log records, so the block is hit whatever the layout).
fn find(path: &str, needle: &[u8]) -> Vec<u64> {
    let bytes = std::fs::read(path).unwrap();
    (8 << 20..bytes.len() - needle.len())
        .filter(|&at| bytes[at..].starts_with(needle))
        .map(|at| at as u64)
        .collect()
}

#[test]
fn check_lists_every_damaged_structure_and_repair_salvages_the_rest() {
    let dir = TempDir::new().unwrap();
    let path = store(&dir);
    // A store that passes check is left alone.
    let out = run_with_input(&["repair", &path], b"");
    assert!(
        text(&out.stdout).contains("nothing to repair"),
        "{}",
        text(&out.stdout)
    );
    assert!(!Path::new(&format!("{path}.damaged")).exists());
    // Three damaged structures: the older superblock slot, two data blocks far apart.
    let older = older_slot(&path);
    overwrite(&path, older + 20, &[0xFF; 8]);
    for key in ["value-002000", "value-015000"] {
        for at in find(&path, key.as_bytes()) {
            overwrite(&path, at, b"DAMAGED!");
        }
    }
    let out = run_with_input(&["check", &path], b"");
    assert_eq!(out.status.code(), Some(CORRUPT));
    let report = text(&out.stdout);
    assert!(
        report.contains(&format!("damaged superblock slot at byte {older}")),
        "{report}"
    );
    assert_eq!(report.matches("damaged run block").count(), 2, "{report}");
    assert_eq!(report.matches("lost: ").count(), 2, "{report}");
    assert!(text(&out.stderr).contains("3 structures found damaged"));

    let out = run_with_input(&["repair", &path], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("repaired: 3 damaged structures, 2 key ranges lost"),
        "{said}"
    );
    assert!(Path::new(&format!("{path}.damaged")).exists());
    let out = run_with_input(&["check", &path], b"");
    assert!(out.status.success(), "{}", text(&out.stdout));
    // Every key outside the two lost blocks is there with its value.
    let out = run_with_input(&["scan", &path], b"");
    let pairs = text(&out.stdout);
    let held = pairs.lines().count();
    assert!(held < KEYS && held > KEYS - 400, "{held}");
    for line in pairs.lines() {
        let (key, value) = line.split_once('\t').unwrap();
        assert_eq!(&value[6..12], &key[3..9], "{line}");
    }
    for key in ["key000000", "key010000", "key019999"] {
        assert!(
            run_with_input(&["get", &path, key], b"").status.success(),
            "{key}"
        );
    }
    // A second repair finds nothing more to do but refuses to overwrite the kept copy.
    let out = run_with_input(&["repair", &path], b"");
    assert_eq!(out.status.code(), Some(FAILED));
    assert!(
        text(&out.stderr).contains(".damaged exists"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn check_reports_a_cut_file() {
    let dir = TempDir::new().unwrap();
    let path = store(&dir);
    let len = std::fs::metadata(&path).unwrap().len();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(len - 5000).unwrap();
    let out = run_with_input(&["check", &path], b"");
    assert_eq!(out.status.code(), Some(CORRUPT));
    let report = text(&out.stdout);
    assert!(
        report.contains("the store is 5000 bytes shorter than its zones: truncated?"),
        "{report}"
    );
    // Opening refuses it too.
    let out = run_with_input(&["get", &path, "key000001"], b"");
    assert_eq!(out.status.code(), Some(CORRUPT));
    assert!(
        text(&out.stderr).contains("truncated?"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_damaged_newest_superblock_refuses_open_and_repair_keeps_every_key() {
    let dir = TempDir::new().unwrap();
    let path = store(&dir);
    let newer = 4096 - older_slot(&path);
    overwrite(&path, newer + 20, &[0xFF; 8]);
    // Opening from the older slot alone could go back a checkpoint without a word.
    let out = run_with_input(&["get", &path, "key000001"], b"");
    assert_eq!(out.status.code(), Some(CORRUPT));
    let err = text(&out.stderr);
    assert!(
        err.contains(&format!("superblock slot at byte {newer}")),
        "{err}"
    );
    let out = run_with_input(&["check", &path], b"");
    assert_eq!(out.status.code(), Some(CORRUPT));
    let out = run_with_input(&["repair", &path], b"");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = run_with_input(&["check", &path], b"");
    assert!(out.status.success(), "{}", text(&out.stdout));
    // The older checkpoint is kept whole until the superblock after the newest is durable,
    // and its log runs on into the newest's: every imported key is there, each value its
    // key's.
    let out = run_with_input(&["scan", &path], b"");
    let mut keys = 0;
    for line in text(&out.stdout).lines() {
        let (key, value) = line.split_once('\t').unwrap();
        assert_eq!(&value[6..12], &key[3..9], "{line}");
        keys += 1;
    }
    assert_eq!(keys, KEYS, "repair lost keys");
}
