#!/usr/bin/env bash
# StitchDB against a release RocksDB on the same workloads, on this machine:
#
#   bash bench/compare.sh --num 1000000 --durability async,written --rounds 3
#   bash bench/compare.sh --num 250000 --value_size 4096 --out results.md
#
# Builds (once, into ~/.cache/stitchdb-bench, with bench/build-rocksdb.sh) RocksDB's db_bench
# and static library with DEBUG_LEVEL=0 from the source the librocksdb-sys crate ships,
# builds `stitchdb` in release mode and bench/rocksdb_driver.cc against that library, then
# runs bench/compare.py with the arguments given (see `bash bench/compare.sh --help` and
# docs/benchmarks.md). Every row names its durability pair.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

# ---- system packages ---------------------------------------------------------------------
command -v python3 >/dev/null 2>&1 || {
    echo "compare.sh: python3 not found; install it (sudo apt-get install python3)" >&2
    exit 1
}
if ! command -v cargo >/dev/null 2>&1; then
    echo "compare.sh: cargo not found; install Rust (https://rustup.rs)" >&2
    exit 1
fi

# ---- builds ------------------------------------------------------------------------------
ROCKSDB="$(bash bench/build-rocksdb.sh | tail -n 1)"
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
cargo build --release -q -p stitchdb-cli
DRIVER="$TARGET/bench/rocksdb_driver"
mkdir -p "$TARGET/bench"
if [ ! -x "$DRIVER" ] || [ bench/rocksdb_driver.cc -nt "$DRIVER" ] || [ "$ROCKSDB/librocksdb.a" -nt "$DRIVER" ]; then
    # -fno-rtti: a release RocksDB is built without RTTI, so its classes have no typeinfo.
    g++ -O2 -DNDEBUG -fno-rtti -std=c++20 -Wall -I"$ROCKSDB/include" -o "$DRIVER" bench/rocksdb_driver.cc \
        "$ROCKSDB/librocksdb.a" -lpthread -ldl
fi

exec python3 bench/compare.py \
    --stitchdb "$TARGET/release/stitchdb" \
    --driver "$DRIVER" \
    --db_bench "$ROCKSDB/db_bench" \
    --workdir "$TARGET/bench" \
    "$@"
