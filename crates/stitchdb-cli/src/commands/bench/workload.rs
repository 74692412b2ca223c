//! The benchmarks `stitchdb bench` knows: their db_bench names and what kind of work each is.

use std::fmt;
use stitchdb::Stitching;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Benchmark {
    FillSeq,
    FillRandom,
    Overwrite,
    ReadRandom,
    SeekRandom,
    ReadSeq,
    ReadReverse,
    DeleteRandom,
    RandomAppend,
    SeqInsert,
}

use Benchmark::*;

const ALL: [Benchmark; 10] = [
    FillSeq,
    FillRandom,
    Overwrite,
    ReadRandom,
    SeekRandom,
    ReadSeq,
    ReadReverse,
    DeleteRandom,
    RandomAppend,
    SeqInsert,
];

/// What runs when `--benchmarks` is not given: every benchmark db_bench also has, in
/// db_bench's order.
pub const DEFAULT_BENCHMARKS: &str =
    "fillseq,fillrandom,overwrite,readrandom,seekrandom,readseq,readreverse,deleterandom";

impl Benchmark {
    pub fn name(self) -> &'static str {
        match self {
            FillSeq => "fillseq",
            FillRandom => "fillrandom",
            Overwrite => "overwrite",
            ReadRandom => "readrandom",
            SeekRandom => "seekrandom",
            ReadSeq => "readseq",
            ReadReverse => "readreverse",
            DeleteRandom => "deleterandom",
            RandomAppend => "randomappend",
            SeqInsert => "seqinsert",
        }
    }

    /// Starts from an empty store (db_bench's `fresh_db`); skipped with `--use_existing_db`.
    pub fn needs_fresh_db(self) -> bool {
        matches!(self, FillSeq | FillRandom | RandomAppend | SeqInsert)
    }
}

impl fmt::Display for Benchmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The `--benchmarks` list, in the order given (a name may repeat, as in db_bench).
#[derive(Clone, Debug)]
pub struct BenchmarkList(pub Vec<Benchmark>);

/// Parses `--benchmarks=a,b,c`; empty items (a trailing comma) are ignored as db_bench does.
pub fn parse_benchmarks(list: &str) -> Result<BenchmarkList, String> {
    let mut out = Vec::new();
    for name in list.split(',').map(str::trim).filter(|n| !n.is_empty()) {
        match ALL.iter().find(|b| b.name() == name) {
            Some(b) => out.push(*b),
            None => {
                let known: Vec<&str> = ALL.iter().map(|b| b.name()).collect();
                return Err(format!(
                    "unknown benchmark {name:?} (known: {})",
                    known.join(", ")
                ));
            }
        }
    }
    if out.is_empty() {
        return Err("no benchmarks named".into());
    }
    Ok(BenchmarkList(out))
}

/// Parses `--stitch_threshold`: a byte count, or `never`.
pub fn parse_stitching(value: &str) -> Result<Stitching, String> {
    if value.eq_ignore_ascii_case("never") {
        return Ok(Stitching::Never);
    }
    value
        .parse()
        .map(Stitching::Threshold)
        .map_err(|_| format!("{value:?} is neither a byte count nor `never`"))
}

/// Parses a gflags-style boolean: `--sync`, `--sync=1`, `--sync=true`, `--sync=0`, ...
pub fn parse_flag_bool(value: &str) -> Result<bool, String> {
    match value.to_ascii_lowercase().as_str() {
        "1" | "true" | "t" | "yes" | "y" => Ok(true),
        "0" | "false" | "f" | "no" | "n" => Ok(false),
        _ => Err(format!("{value:?} is not a boolean (use 0 or 1)")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn benchmark_lists_parse_like_db_bench() {
        let list = parse_benchmarks("fillseq,readrandom,").unwrap();
        assert_eq!(list.0, vec![FillSeq, ReadRandom]);
        assert!(parse_benchmarks("fillseq,compact").is_err());
        assert!(parse_benchmarks(",").is_err());
        assert!(parse_benchmarks(DEFAULT_BENCHMARKS).is_ok());
    }

    #[test]
    fn stitch_thresholds_are_byte_counts_or_never() {
        assert_eq!(parse_stitching("0"), Ok(Stitching::Threshold(0)));
        assert_eq!(parse_stitching("65536"), Ok(Stitching::Threshold(65536)));
        assert_eq!(parse_stitching("Never"), Ok(Stitching::Never));
        assert!(parse_stitching("64k").is_err());
    }

    #[test]
    fn names_round_trip() {
        for b in ALL {
            assert_eq!(parse_benchmarks(b.name()).unwrap().0, vec![b]);
        }
    }
}
