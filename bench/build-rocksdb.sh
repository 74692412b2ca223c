#!/usr/bin/env bash
# Builds a release RocksDB (db_bench and the static library librocksdb.a) once, into a cache
# outside the repository, from the source the `librocksdb-sys` crate ships (fetched through
# cargo, so the RocksDB here is the one the `rocksdb` Rust crate links):
#
#   bash bench/build-rocksdb.sh            # prints the install directory when done
#
# Build: `make DEBUG_LEVEL=0 DISABLE_WARNING_AS_ERROR=1 db_bench static_lib` (no assertions:
# db_bench's "Assertions are enabled" warning is absent), PORTABLE left at RocksDB's default
# (0: -march=native, as a user building RocksDB for their own machine gets), no compression
# libraries (snappy, lz4, zstd, zlib, bzip2 disabled): StitchDB does not compress, and
# bench/compare.py runs db_bench with --compression_type=none, so both sides store the same
# bytes.
#
# Result: $ROCKSDB_CACHE/rocksdb-<version>/{db_bench,librocksdb.a,include/}; skipped when
# present. ROCKSDB_CACHE defaults to ~/.cache/stitchdb-bench. LIBROCKSDB_SYS pins the crate
# version (default below); JOBS the parallel make jobs (default: the number of cores).
set -euo pipefail

CRATE_VERSION="${LIBROCKSDB_SYS:-0.19.0+11.8.1}"
ROCKSDB_VERSION="${CRATE_VERSION#*+}"
CACHE="${ROCKSDB_CACHE:-$HOME/.cache/stitchdb-bench}"
OUT="$CACHE/rocksdb-$ROCKSDB_VERSION"
JOBS="${JOBS:-$(nproc)}"

if [ -x "$OUT/db_bench" ] && [ -f "$OUT/librocksdb.a" ] && [ -f "$OUT/include/rocksdb/db.h" ]; then
    echo "$OUT"
    exit 0
fi

# ---- system packages ---------------------------------------------------------------------
missing=()
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v perl >/dev/null 2>&1 || missing+=(perl)
[ -e /usr/include/gflags/gflags.h ] || missing+=(libgflags-dev)
if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null 2>&1; then
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -q
        apt-get install -y -q "${missing[@]}"
    else
        echo "build-rocksdb.sh: missing ${missing[*]}; install them (sudo apt-get install ${missing[*]})" >&2
        exit 1
    fi
fi

# ---- the source, through cargo -----------------------------------------------------------
FETCH="$CACHE/fetch-librocksdb-sys-$CRATE_VERSION"
mkdir -p "$FETCH/src"
cat >"$FETCH/Cargo.toml" <<TOML
[package]
name = "fetch-librocksdb-sys"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
librocksdb-sys = { version = "=$CRATE_VERSION", default-features = false }

[workspace]
TOML
echo "fn main() {}" >"$FETCH/src/main.rs"
(cd "$FETCH" && cargo fetch -q)
CARGO_HOME_DIR="${CARGO_HOME:-$HOME/.cargo}"
SRC=""
for dir in "$CARGO_HOME_DIR"/registry/src/*/librocksdb-sys-"$CRATE_VERSION"/rocksdb; do
    [ -f "$dir/Makefile" ] && SRC="$dir"
done
if [ -z "$SRC" ]; then
    echo "build-rocksdb.sh: librocksdb-sys-$CRATE_VERSION/rocksdb not found under $CARGO_HOME_DIR/registry/src" >&2
    exit 1
fi

# ---- the build, in a copy (the registry's source stays pristine) -------------------------
BUILD="$CACHE/build-rocksdb-$ROCKSDB_VERSION"
if [ ! -f "$BUILD/Makefile" ]; then
    rm -rf "$BUILD"
    cp -r "$SRC" "$BUILD"
fi
cd "$BUILD"
export ROCKSDB_DISABLE_SNAPPY=1 ROCKSDB_DISABLE_LZ4=1 ROCKSDB_DISABLE_ZSTD=1 \
    ROCKSDB_DISABLE_ZLIB=1 ROCKSDB_DISABLE_BZIP=1 ROCKSDB_USE_IO_URING=0 \
    ROCKSDB_DISABLE_JEMALLOC=1 ROCKSDB_DISABLE_TCMALLOC=1
# Warnings are not errors: with every compression library off, RocksDB 11.8's
# util/compression.cc has an unused parameter, which -Werror would stop the build for.
# A compile killed midway leaves an empty object that make takes as built (and the link then
# fails on its missing symbols): such objects are compiled again.
find . -name '*.o' -size 0 -delete
make DEBUG_LEVEL=0 DISABLE_WARNING_AS_ERROR=1 -j"$JOBS" db_bench static_lib

# ---- install into the cache --------------------------------------------------------------
if ./db_bench --benchmarks=fillseq --num=10 --db="$BUILD/probe-db" 2>&1 | grep -q "Assertions are enabled"; then
    echo "build-rocksdb.sh: the built db_bench has assertions enabled" >&2
    exit 1
fi
rm -rf "$BUILD/probe-db"
mkdir -p "$OUT.tmp"
cp db_bench librocksdb.a "$OUT.tmp/"
cp -r include "$OUT.tmp/include"
rm -rf "$OUT"
mv "$OUT.tmp" "$OUT"
echo "$OUT"
