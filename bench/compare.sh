#!/usr/bin/env bash
# StitchDB against RocksDB on the same workloads, on this machine:
#
#   bash bench/compare.sh --num 200000
#   bash bench/compare.sh --num 25000 --value_size 4096 --out results.md
#
# Installs what it needs (Debian: rocksdb-tools for db_bench, librocksdb-dev and g++ for
# bench/rocksdb_driver.cc, python3), builds `stitchdb` in release mode and the driver, then
# runs bench/compare.py with the arguments given (see `bash bench/compare.sh --help` and
# docs/benchmarks.md).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"

# ---- system packages ---------------------------------------------------------------------
missing=()
command -v db_bench >/dev/null 2>&1 || missing+=(rocksdb-tools)
[ -e /usr/include/rocksdb/db.h ] || missing+=(librocksdb-dev)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q "${missing[@]}"
    else
        echo "compare.sh: missing ${missing[*]}; install them (sudo apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi
if ! command -v cargo >/dev/null 2>&1; then
    echo "compare.sh: cargo not found; install Rust (https://rustup.rs)" >&2
    exit 1
fi

# ---- builds ------------------------------------------------------------------------------
TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
cargo build --release -q -p stitchdb-cli
DRIVER="$TARGET/bench/rocksdb_driver"
mkdir -p "$TARGET/bench"
if [ ! -x "$DRIVER" ] || [ bench/rocksdb_driver.cc -nt "$DRIVER" ]; then
    g++ -O2 -std=c++17 -Wall -o "$DRIVER" bench/rocksdb_driver.cc -lrocksdb
fi

exec python3 bench/compare.py \
    --stitchdb "$TARGET/release/stitchdb" \
    --driver "$DRIVER" \
    --db_bench "$(command -v db_bench)" \
    --workdir "$TARGET/bench" \
    "$@"
