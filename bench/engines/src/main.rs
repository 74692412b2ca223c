//! The same workloads through StitchDB, RocksDB, fjall, redb, LMDB and SQLite, each engine in
//! a process of its own (so its peak memory is its own), and a Markdown table and an SVG
//! chart of the results. See README.md.
//!
//!     cargo run --release -- [--engines stitchdb,rocksdb,...] [--dir DIR] [--out DIR] [--scale F]

mod engine;
mod fjall_engine;
mod lmdb;
mod redb_engine;
#[cfg(feature = "rocksdb")]
mod rocks;
mod sqlite;
mod stitch;
mod svg;
mod workloads;

use engine::{Engine, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

const ENGINES: [&str; 7] = [
    "stitchdb",
    "stitchdb-cow",
    "rocksdb",
    "fjall",
    "redb",
    "lmdb",
    "sqlite",
];

struct Args {
    engines: Vec<String>,
    dir: PathBuf,
    out: PathBuf,
    scale: f64,
    /// Set in the child process: the one engine it runs.
    child: Option<String>,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        engines: ENGINES
            .iter()
            .filter(|e| cfg!(feature = "rocksdb") || **e != "rocksdb")
            .map(|e| e.to_string())
            .collect(),
        dir: PathBuf::from("target/engines-bench"),
        out: PathBuf::from("results"),
        scale: 1.0,
        child: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--engines" => {
                args.engines = value()?.split(',').map(str::to_string).collect();
                if let Some(bad) = args.engines.iter().find(|e| !ENGINES.contains(&e.as_str())) {
                    return Err(format!(
                        "unknown engine {bad}; known: {}",
                        ENGINES.join(",")
                    ));
                }
            }
            "--dir" => args.dir = value()?.into(),
            "--out" => args.out = value()?.into(),
            "--scale" => {
                args.scale = value()?.parse().map_err(|e| format!("--scale: {e}"))?;
                if !(args.scale > 0.0) {
                    return Err("--scale must be positive".into());
                }
            }
            "--child" => args.child = Some(value()?),
            "--help" | "-h" => {
                println!(
                    "usage: engines-bench [--engines {}] [--dir DIR (stores; default \
                     target/engines-bench, on the disk to measure)] [--out DIR (table and \
                     chart; default results)] [--scale F (operations x F; default 1)]",
                    ENGINES.join(",")
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown flag {flag} (see --help)")),
        }
    }
    Ok(args)
}

fn main() {
    let result = parse_args().and_then(|args| match &args.child {
        Some(engine) => child(engine, &args),
        None => parent(&args),
    });
    if let Err(e) = result {
        eprintln!("engines-bench: {e}");
        std::process::exit(1);
    }
}

fn open(name: &str, dir: &Path) -> Result<Box<dyn Engine>> {
    Ok(match name {
        "stitchdb" => Box::new(stitch::Stitch::create(dir, None)?),
        "stitchdb-cow" => Box::new(stitch::Stitch::create(dir, Some("cow-btree"))?),
        #[cfg(feature = "rocksdb")]
        "rocksdb" => Box::new(rocks::Rocks::create(dir)?),
        #[cfg(not(feature = "rocksdb"))]
        "rocksdb" => return Err("built without the rocksdb feature".into()),
        "fjall" => Box::new(fjall_engine::Fjall::create(dir)?),
        "redb" => Box::new(redb_engine::Redb::create(dir)?),
        "lmdb" => Box::new(lmdb::Lmdb::create(dir)?),
        "sqlite" => Box::new(sqlite::Sqlite::create(dir)?),
        other => return Err(format!("unknown engine {other}")),
    })
}

/// Runs every workload on one engine, printing `result\t<name>\t<ops/s>`, `size\t<bytes>`,
/// `durability\t<text>` and, last, `peak\t<bytes>` lines for the parent.
fn child(name: &str, args: &Args) -> Result<()> {
    let dir = args.dir.join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    }
    std::fs::create_dir_all(&dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    let engine = open(name, &dir)?;
    println!("durability\t{}", engine.durability());
    workloads::run(
        engine.as_ref(),
        workloads::Sizes::scaled(args.scale),
        &mut |m| println!("result\t{}\t{:.0}", m.name, m.ops_per_sec),
        &mut || println!("size\t{}", allocated_bytes(&dir)),
    )?;
    drop(engine);
    println!("peak\t{}", peak_rss()?);
    std::fs::remove_dir_all(&dir).map_err(|e| format!("removing {}: {e}", dir.display()))?;
    Ok(())
}

/// Bytes the files under `dir` take on disk (allocated blocks, as `du` counts them).
fn allocated_bytes(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|e| match e.metadata() {
            Ok(m) if m.is_dir() => allocated_bytes(&e.path()),
            Ok(m) => m.blocks() * 512,
            Err(_) => 0,
        })
        .sum()
}

/// This process's peak resident set (VmHWM), in bytes.
fn peak_rss() -> Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").map_err(|e| e.to_string())?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .map(|kb| kb * 1024)
        .ok_or_else(|| "no VmHWM in /proc/self/status".into())
}

/// One engine's results, from its child's output.
#[derive(Default)]
struct Results {
    ops: BTreeMap<String, f64>,
    order: Vec<String>,
    size: Option<u64>,
    peak: Option<u64>,
    durability: String,
}

fn parent(args: &Args) -> Result<()> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    std::fs::create_dir_all(&args.out)
        .map_err(|e| format!("creating {}: {e}", args.out.display()))?;
    let mut all: Vec<(String, Results)> = Vec::new();
    for name in &args.engines {
        eprintln!("# {name}");
        let out = Command::new(&exe)
            .args(["--child", name, "--dir"])
            .arg(&args.dir)
            .args(["--scale", &args.scale.to_string()])
            .output()
            .map_err(|e| format!("starting the {name} run: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "the {name} run failed ({}):\n{stdout}{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        let mut r = Results::default();
        for line in stdout.lines() {
            let fields: Vec<&str> = line.split('\t').collect();
            match fields.as_slice() {
                ["result", bench, ops] => {
                    let ops: f64 = ops.parse().map_err(|e| format!("{line}: {e}"))?;
                    eprintln!("  {bench:<52} {ops:>12.0} ops/s");
                    r.order.push(bench.to_string());
                    r.ops.insert(bench.to_string(), ops);
                }
                ["size", bytes] => r.size = bytes.parse().ok(),
                ["peak", bytes] => r.peak = bytes.parse().ok(),
                ["durability", text] => r.durability = text.to_string(),
                _ => {}
            }
        }
        all.push((name.clone(), r));
    }
    let table = markdown(args, &all);
    println!("{table}");
    let md = args.out.join("engines.md");
    std::fs::write(&md, &table).map_err(|e| format!("writing {}: {e}", md.display()))?;
    let panels: Vec<svg::Panel> = rows(&all)
        .into_iter()
        .map(|row| svg::Panel {
            title: row.clone(),
            unit: "ops/s",
            bars: all
                .iter()
                .map(|(n, r)| (label(n), r.ops.get(&row).copied().unwrap_or(0.0)))
                .collect(),
        })
        .chain([
            svg::Panel {
                title: "store size after bulk load".into(),
                unit: "MiB",
                bars: all.iter().map(|(n, r)| (label(n), mib(r.size))).collect(),
            },
            svg::Panel {
                title: "peak memory (resident)".into(),
                unit: "MiB",
                bars: all.iter().map(|(n, r)| (label(n), mib(r.peak))).collect(),
            },
        ])
        .collect();
    let chart = args.out.join("engines.svg");
    std::fs::write(&chart, svg::chart(&panels))
        .map_err(|e| format!("writing {}: {e}", chart.display()))?;
    eprintln!("written {} and {}", md.display(), chart.display());
    Ok(())
}

fn label(engine: &str) -> String {
    match engine {
        "stitchdb" => "StitchDB",
        "stitchdb-cow" => "StitchDB cow-btree",
        "rocksdb" => "RocksDB",
        "fjall" => "fjall",
        "redb" => "redb",
        "lmdb" => "LMDB (heed)",
        "sqlite" => "SQLite",
        other => other,
    }
    .to_string()
}

fn mib(bytes: Option<u64>) -> f64 {
    bytes.map_or(0.0, |b| b as f64 / (1 << 20) as f64)
}

/// The workloads, in the order they ran.
fn rows(all: &[(String, Results)]) -> Vec<String> {
    all.first()
        .map(|(_, r)| r.order.clone())
        .unwrap_or_default()
}

fn human(ops: f64) -> String {
    if ops >= 1e6 {
        format!("{:.2}M", ops / 1e6)
    } else if ops >= 1e3 {
        format!("{:.1}K", ops / 1e3)
    } else {
        format!("{ops:.0}")
    }
}

fn markdown(args: &Args, all: &[(String, Results)]) -> String {
    let sizes = workloads::Sizes::scaled(args.scale);
    let mut out = format!(
        "Operations per second (more is better), {} keys of {} B and values of {} B loaded; \
         {} individual writes, {} batches of 1,000, {} random reads, {} scans of 100 entries, \
         {} removals (split between the threads where there are 2).\n\n",
        sizes.load,
        workloads::KEY_LEN,
        workloads::VALUE_LEN,
        sizes.single_writes,
        sizes.batches,
        sizes.reads,
        sizes.scans,
        sizes.removals,
    );
    out.push_str("| workload |");
    for (name, _) in all {
        out.push_str(&format!(" {} |", label(name)));
    }
    out.push_str("\n| --- |");
    out.push_str(&" ---: |".repeat(all.len()));
    out.push('\n');
    for row in rows(all) {
        out.push_str(&format!("| {row} |"));
        for (_, r) in all {
            out.push_str(&format!(
                " {} |",
                r.ops.get(&row).map_or("–".into(), |&o| human(o))
            ));
        }
        out.push('\n');
    }
    for (title, get) in [
        (
            "store size after bulk load (MiB)",
            (|r: &Results| r.size) as fn(&Results) -> Option<u64>,
        ),
        ("peak memory, resident (MiB)", |r: &Results| r.peak),
    ] {
        out.push_str(&format!("| {title} |"));
        for (_, r) in all {
            out.push_str(&format!(" {:.0} |", mib(get(r))));
        }
        out.push('\n');
    }
    out.push_str("\nDurability of each engine's writes:\n\n");
    for (name, r) in all {
        out.push_str(&format!("- {}: {}\n", label(name), r.durability));
    }
    out
}
