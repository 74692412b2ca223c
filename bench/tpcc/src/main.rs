//! TPC-C's new-order transaction, single-threaded, through GlueSQL over StitchDB (default
//! layouts, and layouts chosen per table) and through SQLite, every commit durable, the
//! stores taking turns by slices of transactions. See README.md and docs/sql.md.
//!
//!     cargo run --release -- [--engines stitchdb,stitchdb-layouts,sqlite] [--txns N]
//!         [--slice N] [--items N] [--customers N] [--dir DIR] [--seed N] [--no-pushdown]
//!         [--no-parse-cache] [--no-sync]

mod client;
mod tpcc;

use client::{Client, Glue, Result, Sqlite};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use stitchdb_sql::gluesql_core::data::Value;
use tpcc::{Inputs, Scale};

const ENGINES: [&str; 3] = ["stitchdb", "stitchdb-layouts", "sqlite"];

struct Args {
    engines: Vec<String>,
    txns: usize,
    scale: Scale,
    dir: PathBuf,
    seed: u64,
    pushdown: bool,
    parse_cache: bool,
    sync: bool,
    slice: usize,
}

fn parse_args() -> Result<Args> {
    let mut args = Args {
        engines: ENGINES.iter().map(|e| e.to_string()).collect(),
        txns: 2000,
        scale: Scale {
            items: 100_000,
            customers: 3000,
        },
        dir: PathBuf::from("target/tpcc-bench"),
        seed: 42,
        pushdown: true,
        parse_cache: true,
        sync: true,
        slice: 100,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let number = |v: String| v.parse::<i64>().map_err(|e| format!("{flag}: {e}"));
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
            "--txns" => args.txns = number(value()?)?.max(1) as usize,
            "--slice" => args.slice = number(value()?)?.max(1) as usize,
            "--items" => args.scale.items = number(value()?)?.clamp(100, 100_000),
            "--customers" => args.scale.customers = number(value()?)?.clamp(10, 3000),
            "--dir" => args.dir = value()?.into(),
            "--seed" => args.seed = number(value()?)? as u64,
            "--no-pushdown" => args.pushdown = false,
            "--no-sync" => args.sync = false,
            "--no-parse-cache" => args.parse_cache = false,
            "--help" | "-h" => {
                println!(
                    "usage: tpcc-bench [--engines {}] [--txns N (default 2000)] \
                     [--slice N (transactions per turn; default 100)] \
                     [--items N (default 100000)] [--customers N (per district, default \
                     3000)] [--dir DIR (stores; default target/tpcc-bench)] [--seed N] \
                     [--no-pushdown (GlueSQL's own full-table UPDATE)] [--no-parse-cache \
                     (GlueSQL parses every statement it runs)] [--no-sync (commits \
                     not synced: StitchDB Durability::Written, SQLite synchronous=NORMAL)]",
                    ENGINES.join(",")
                );
                std::process::exit(0);
            }
            _ => return Err(format!("unknown flag {flag} (see --help)")),
        }
    }
    Ok(args)
}

/// The layouts of the `stitchdb-layouts` run: the tables whose rows are all one size (every
/// column a number, or text of fixed length) and keyed by 8-byte integers get `array`, with
/// `exception -> ... -> linear` for any row of another size; the others keep the default.
fn layouts() -> Vec<(&'static str, String)> {
    let int = Value::I64(0);
    let orders = [
        vec![int.clone(); 6],
        vec![Value::Null],
        vec![int.clone(); 2],
    ]
    .concat();
    let new_order = vec![int.clone(); 4];
    let order_line = [
        vec![int.clone(); 7],
        vec![Value::Null, int.clone(), Value::F64(0.0)],
        vec![Value::Str("x".repeat(24))],
    ]
    .concat();
    [
        ("orders", orders),
        ("new_order", new_order),
        ("order_line", order_line),
    ]
    .into_iter()
    .map(|(table, row)| {
        let layout = format!(
            "managed -> quotient -> btree(node=4096) -> exception -> array(size={}) -> linear",
            stitchdb_sql::row_len(&row)
        );
        (table, layout)
    })
    .collect()
}

/// Bytes the files under `dir` take on disk (allocated blocks, as `du` counts them), and
/// their lengths.
fn disk_bytes(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => {
                    let (a, l) = disk_bytes(&e.path());
                    total = (total.0 + a, total.1 + l);
                }
                Ok(m) => total = (total.0 + m.blocks() * 512, total.1 + m.len()),
                Err(_) => {}
            }
        }
    }
    total
}

/// One store's run.
struct Side {
    engine: String,
    dir: PathBuf,
    client: Option<Box<dyn Client>>,
    inputs: Inputs,
    load: Duration,
    committed: usize,
    rolled_back: usize,
    lines: usize,
    /// Time in transactions, summed over the slices.
    elapsed: Duration,
    latencies: Vec<Duration>,
    scanned: Option<u64>,
    size: (u64, u64),
}

impl Side {
    fn tps(&self) -> f64 {
        (self.committed + self.rolled_back) as f64 / self.elapsed.as_secs_f64()
    }
    fn percentile(&self, p: f64) -> f64 {
        let mut l = self.latencies.clone();
        l.sort();
        let i = ((l.len() as f64 * p) as usize).min(l.len() - 1);
        l[i].as_secs_f64() * 1e3
    }

    fn client(&mut self) -> Result<&mut dyn Client> {
        Ok(self.client.as_mut().ok_or("closed")?.as_mut())
    }

    /// A fresh store for `engine`, loaded.
    fn load(engine: &str, args: &Args) -> Result<Side> {
        let dir = args.dir.join(engine);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let layouts = match engine {
            "stitchdb-layouts" => layouts(),
            _ => Vec::new(),
        };
        let mut client: Box<dyn Client> = match engine {
            "sqlite" => Box::new(Sqlite::create(&dir, args.sync)?),
            _ => Box::new(Glue::create(
                &dir,
                &layouts,
                args.pushdown,
                args.parse_cache,
                args.sync,
            )?),
        };
        let start = Instant::now();
        tpcc::load(client.as_mut(), args.scale, args.seed)?;
        let load = start.elapsed();
        eprintln!("{engine}: loaded in {:.1} s", load.as_secs_f64());
        let scanned = client.rows_scanned();
        Ok(Side {
            engine: engine.to_owned(),
            dir,
            client: Some(client),
            // The same transactions for every store.
            inputs: Inputs::new(args.seed ^ 0x1234, args.scale),
            load,
            committed: 0,
            rolled_back: 0,
            lines: 0,
            elapsed: Duration::ZERO,
            latencies: Vec::with_capacity(args.txns),
            scanned,
            size: (0, 0),
        })
    }

    /// Runs `n` new-order transactions.
    fn run(&mut self, n: usize) -> Result<()> {
        let start = Instant::now();
        for _ in 0..n {
            let order = self.inputs.next();
            let t = Instant::now();
            let client = self.client.as_mut().ok_or("closed")?.as_mut();
            match tpcc::new_order(client, &order)? {
                true => {
                    self.committed += 1;
                    self.lines += order.lines.len();
                }
                false => self.rolled_back += 1,
            }
            self.latencies.push(t.elapsed());
        }
        self.elapsed += start.elapsed();
        Ok(())
    }

    /// Checks the outcome, closes the store and measures it.
    fn finish(&mut self) -> Result<()> {
        let (committed, lines) = (self.committed, self.lines);
        let engine = self.engine.clone();
        let client = self.client()?;
        // Rows read by whole-table scans: none when UPDATE by key reads only its row.
        let scanned = client.rows_scanned();
        tpcc::verify(client, committed, lines)?;
        if let Some(report) = client.report()? {
            eprintln!("{engine}: after the run, written out: {report}");
        }
        self.scanned = scanned
            .zip(self.scanned)
            .map(|(after, before)| after - before);
        self.client.take().ok_or("closed")?.close()?;
        self.size = disk_bytes(&self.dir);
        Ok(())
    }
}

fn main() {
    if let Err(e) = parse_args().and_then(|args| bench(&args)) {
        eprintln!("tpcc-bench: {e}");
        std::process::exit(1);
    }
}

fn bench(args: &Args) -> Result<()> {
    println!(
        "TPC-C new-order, 1 warehouse, 10 districts, {} customers per district, {} items and \
         stock rows; {} transactions, single-threaded, in slices of {} taking turns; {}{}",
        args.scale.customers,
        args.scale.items,
        args.txns,
        args.slice,
        if args.sync {
            "every commit durable"
        } else {
            "commits not synced"
        },
        match (args.pushdown, args.parse_cache) {
            (true, true) => "",
            (false, true) => "; GlueSQL UPDATEs scan their table",
            (true, false) => "; GlueSQL parses every statement",
            (false, false) => "; GlueSQL UPDATEs scan their table, and it parses every statement",
        }
    );
    let mut sides = Vec::new();
    for engine in &args.engines {
        sides.push(Side::load(engine, args).map_err(|e| format!("{engine}: {e}"))?);
    }
    // The stores take turns, a slice of transactions each, the first of a turn rotating:
    // every store sees the disk (shared, its sync latency moving by the minute) at the
    // same times.
    let mut done = 0;
    let mut turn = 0;
    while done < args.txns {
        let n = args.slice.min(args.txns - done);
        let count = sides.len();
        for k in 0..count {
            let side = &mut sides[(turn + k) % count];
            side.run(n).map_err(|e| format!("{}: {e}", side.engine))?;
        }
        done += n;
        turn += 1;
    }
    for side in &mut sides {
        side.finish().map_err(|e| format!("{}: {e}", side.engine))?;
        eprintln!(
            "{}: {:.0} txn/s ({} committed, {} rolled back{})",
            side.engine,
            side.tps(),
            side.committed,
            side.rolled_back,
            side.scanned
                .map(|n| format!(", {n} rows read by table scans"))
                .unwrap_or_default()
        );
    }
    println!();
    println!(
        "| store | load (s) | new-order txn/s | p50 ms | p99 ms | committed / rolled back \
         | size on disk (MiB, allocated / length) |"
    );
    println!("| --- | ---: | ---: | ---: | ---: | ---: | ---: |");
    for o in &sides {
        println!(
            "| {} | {:.1} | {:.0} | {:.2} | {:.2} | {} / {} | {:.1} / {:.1} |",
            o.engine,
            o.load.as_secs_f64(),
            o.tps(),
            o.percentile(0.5),
            o.percentile(0.99),
            o.committed,
            o.rolled_back,
            o.size.0 as f64 / (1 << 20) as f64,
            o.size.1 as f64 / (1 << 20) as f64,
        );
    }
    if let Some(sqlite) = sides.iter().find(|o| o.engine == "sqlite") {
        println!();
        for o in sides.iter().filter(|o| o.engine != "sqlite") {
            println!(
                "{} / sqlite: {:.2}x the transactions per second",
                o.engine,
                o.tps() / sqlite.tps()
            );
        }
    }
    Ok(())
}
