//! The fuzz targets on the stable toolchain, without libFuzzer: each target runs over its
//! corpus (`corpus/<target>/`: the committed seeds, and whatever `cargo fuzz` added), then over random and mutated inputs for
//! `STITCHDB_FUZZ_SECONDS` seconds (default 10). Mutations start from the corpus: bit flips,
//! byte overwrites, truncations, insertions, and splices of two inputs.
//!
//! `STITCHDB_FUZZ_SEED` fixes the random inputs (the seed used is printed either way). An input
//! that panics is written to `artifacts/<target>/` and fails the test with its path, which
//! `cargo fuzz run <target> <path>` or `STITCHDB_FUZZ_REPLAY=<path>` replays.

#![allow(clippy::unwrap_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stitchdb_fuzz::{Target, TARGETS};

/// The longest random input: the libFuzzer default.
const MAX_LEN: usize = 4096;

fn fuzz_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn seconds() -> f64 {
    std::env::var("STITCHDB_FUZZ_SECONDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(10.0)
}

fn seed() -> u64 {
    std::env::var("STITCHDB_FUZZ_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| {
            let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH);
            now.map_or(0, |d| d.as_nanos() as u64)
        })
}

/// The target's corpus, in name order.
fn corpus(name: &str) -> Vec<Vec<u8>> {
    let dir = fuzz_dir().join("corpus").join(name);
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("the seed corpus {}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    paths.sort();
    paths.iter().map(|p| std::fs::read(p).unwrap()).collect()
}

/// Runs `target` on `input`; on a panic, saves the input and fails naming it.
fn run_one(name: &str, target: Target, input: &[u8], seed: u64) {
    if catch_unwind(AssertUnwindSafe(|| target(input))).is_ok() {
        return;
    }
    let dir = fuzz_dir().join("artifacts").join(name);
    std::fs::create_dir_all(&dir).unwrap();
    let hash = input.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    let path = dir.join(format!("crash-{hash:016x}"));
    std::fs::write(&path, input).unwrap();
    panic!(
        "fuzz target {name} panicked (seed {seed}) on the input saved as {}; replay it with \
         STITCHDB_FUZZ_REPLAY={} cargo test --manifest-path fuzz/Cargo.toml \
         --no-default-features --test stable {name}",
        path.display(),
        path.display()
    );
}

/// A new input: random bytes, or a corpus input mutated.
fn next_input(rng: &mut ChaCha8Rng, pool: &[Vec<u8>]) -> Vec<u8> {
    if pool.is_empty() || rng.gen_ratio(1, 8) {
        let longest = MAX_LEN.min(1 << rng.gen_range(0..13));
        let len = rng.gen_range(0..=longest);
        return (0..len).map(|_| rng.gen()).collect();
    }
    let mut input = pool[rng.gen_range(0..pool.len())].clone();
    for _ in 0..rng.gen_range(1..=4) {
        let len = input.len();
        match rng.gen_range(0..6) {
            0 if len > 0 => {
                let at = rng.gen_range(0..len);
                input[at] ^= 1 << rng.gen_range(0..8);
            }
            1 if len > 0 => {
                let at = rng.gen_range(0..len);
                let random = rng.gen();
                input[at] = *[0, 1, 0x7f, 0x80, 0xff]
                    .get(rng.gen_range(0..6))
                    .unwrap_or(&random);
            }
            2 if len > 0 => input.truncate(rng.gen_range(0..len)),
            3 if len < MAX_LEN => {
                let at = rng.gen_range(0..=len);
                let bytes: Vec<u8> = (0..rng.gen_range(1..=16)).map(|_| rng.gen()).collect();
                input.splice(at..at, bytes);
            }
            4 => {
                let other = &pool[rng.gen_range(0..pool.len())];
                let (cut, from) = (rng.gen_range(0..=len), rng.gen_range(0..=other.len()));
                input.truncate(cut);
                input.extend_from_slice(&other[from..]);
                input.truncate(MAX_LEN);
            }
            _ if len > 1 => {
                // Repeat a piece: lengths and counts that run past the end.
                let (a, b) = (rng.gen_range(0..len), rng.gen_range(0..len));
                let piece = input[a.min(b)..a.max(b)].to_vec();
                input.extend_from_slice(&piece);
                input.truncate(MAX_LEN);
            }
            _ => input.push(rng.gen()),
        }
    }
    input
}

fn fuzz(name: &str) {
    let target = TARGETS.iter().find(|(n, _)| *n == name).unwrap().1;
    if let Ok(path) = std::env::var("STITCHDB_FUZZ_REPLAY") {
        let input = std::fs::read(Path::new(&path)).unwrap();
        target(&input);
        return;
    }
    let seed = seed();
    let pool = corpus(name);
    assert!(!pool.is_empty(), "the corpus of {name} is empty");
    for input in &pool {
        run_one(name, target, input, seed);
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let budget = Duration::from_secs_f64(seconds());
    let started = Instant::now();
    let mut runs = 0u64;
    while started.elapsed() < budget {
        let input = next_input(&mut rng, &pool);
        run_one(name, target, &input, seed);
        runs += 1;
    }
    println!(
        "{name}: {} corpus inputs, then {runs} random and mutated inputs in {:.1} s (seed {seed})",
        pool.len(),
        started.elapsed().as_secs_f64()
    );
}

#[test]
fn every_target_is_run_here() {
    let here = include_str!("stable.rs");
    for (name, _) in TARGETS {
        assert!(
            here.contains(&format!("fn {name}() {{")),
            "no test runs {name}"
        );
    }
}

#[test]
fn superblock() {
    fuzz("superblock");
}

#[test]
fn extent() {
    fuzz("extent");
}

#[test]
fn manifest() {
    fuzz("manifest");
}

#[test]
fn run_block() {
    fuzz("run_block");
}

#[test]
fn run_index() {
    fuzz("run_index");
}

#[test]
fn btree_node() {
    fuzz("btree_node");
}

#[test]
fn large_reference() {
    fuzz("large_reference");
}

#[test]
fn filter() {
    fuzz("filter");
}

#[test]
fn bloom() {
    fuzz("bloom");
}

#[test]
fn log_record() {
    fuzz("log_record");
}

#[test]
fn log_segment() {
    fuzz("log_segment");
}

#[test]
fn model() {
    fuzz("model");
}

#[test]
fn resp() {
    fuzz("resp");
}
