#!/bin/sh
# Large values against the device: 1 GiB (or BYTES) written and read sequentially through
# the API (`Db::put_from`, `Db::value_reader`) and by fio (1 MiB requests, buffered, the write
# ending in an fsync, each read after the file's pages are dropped from the page cache), on
# the same file system in the same run; then 4 KiB range reads of the value counted in device
# reads. Figures: docs/benchmarks.md, "Large values".
#
#   bench/large/run.sh [DIR] [BYTES]
set -eu
DIR=${1:-/tmp/stitchdb-large-bench}
SIZE=${2:-1073741824}
mkdir -p "$DIR"
cargo build --quiet --release -p stitchdb --example large_values
BIN=${CARGO_TARGET_DIR:-target}/release/examples/large_values
STORE="$DIR/large.store"
DATA="$DIR/fio.dat"
# Drops a file's pages from the page cache: as root every clean page (advice for one file,
# GNU dd's nocache, left a cold fio read at a third of its speed after the page cache dropped
# everything), else advice for the whole file.
uncache() {
    if [ -w /proc/sys/vm/drop_caches ]; then
        sync
        echo 3 >/proc/sys/vm/drop_caches
    else
        dd if="$1" iflag=nocache count=0 status=none
    fi
}

echo "== fio sequential write, $SIZE bytes"
rm -f "$DATA"
fio --name=seqwrite --filename="$DATA" --rw=write --bs=1M --size="$SIZE" --ioengine=psync \
    --end_fsync=1 | grep -E "WRITE: bw="
echo "== stitchdb put_from"
"$BIN" write "$STORE" "$SIZE"
sync
uncache "$DATA"
echo "== fio sequential read"
fio --name=seqread --filename="$DATA" --rw=read --bs=1M --size="$SIZE" --ioengine=psync \
    --invalidate=1 | grep -E "READ: bw="
uncache "$STORE"
echo "== stitchdb value_reader"
"$BIN" read "$STORE"
echo "== 4 KiB get_range, device reads"
uncache "$STORE"
"$BIN" range "$STORE"
rm -f "$DATA" "$STORE"
