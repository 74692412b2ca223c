#!/usr/bin/env bash
# The FUSE requests the kernel sends to a KVFS mount, by opcode, per phase: an untar, a cold
# rm -rf of it, and N files created, stated cold and deleted cold as bench/fs/compare.py's file
# phases do. Counted by the kernel's `fuse:fuse_request_send` tracepoint in a tracing instance
# of its own (FORGETs do not pass it). As root:
#
#   bash bench/fs/requests.sh TARBALL [N] [-- MOUNT_OPTIONS]
#
# TARBALL: an uncompressed tar (a part of the Linux source is enough); N: files (default 2000).
# Uses $STITCHDB, else target/release/stitchdb. The mount is unmounted on every exit.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
TARBALL=$(realpath "$1"); shift
N=2000
if [ $# -gt 0 ] && [ "$1" != -- ]; then N=$1; shift; fi
[ "${1:-}" = -- ] && shift
OPTS=${1:-}
BIN=${STITCHDB:-${CARGO_TARGET_DIR:-$ROOT/target}/release/stitchdb}
[ "$(id -u)" -eq 0 ] || { echo "requests.sh: must run as root (tracing, drop_caches)" >&2; exit 1; }
TRACE=/sys/kernel/tracing
[ -d $TRACE/events/fuse ] || { echo "requests.sh: the kernel has no fuse tracepoints" >&2; exit 1; }
W=$(mktemp -d)
I=$TRACE/instances/kvfs-requests-$$
mkdir $I
echo 65536 > $I/buffer_size_kb
cleanup() {
    echo 0 > $I/events/fuse/fuse_request_send/enable 2>/dev/null || true
    fusermount3 -u $W/mnt 2>/dev/null || umount $W/mnt 2>/dev/null || true
    rmdir $I 2>/dev/null || true
    rm -rf "$W"
}
trap cleanup EXIT
mkdir $W/mnt
"$BIN" init $W/store >/dev/null
"$BIN" mount $W/store $W/mnt --log-file $W/daemon.log ${OPTS:+-o "$OPTS"}
echo "connection == $(stat -c %d $W/mnt)" > $I/events/fuse/fuse_request_send/filter

phase() { # phase NAME UNITS CMD...: the requests CMD makes, cold, and per unit
    local name=$1 units=$2; shift 2
    sync; echo 3 > /proc/sys/vm/drop_caches
    echo > $I/trace
    echo 1 > $I/events/fuse/fuse_request_send/enable
    "$@"
    sync
    echo 0 > $I/events/fuse/fuse_request_send/enable
    local total
    total=$(grep -c 'fuse_request_send:' $I/trace || true)
    echo "== $name: $total requests, $(echo "scale=2; $total / $units" | bc) per unit ($units units)"
    grep -o 'opcode [0-9]* ([A-Z_0-9]*)' $I/trace | sort | uniq -c | sort -rn |
        awk -v u="$units" '{ printf "  %-20s %8d  %6.2f\n", $4, $1, $1 / u }'
    grep -q 'entries-in-buffer/entries-written: \([0-9]*\)/\1' $I/trace ||
        echo "  (the trace buffer overflowed: counts are short)"
}
files=$(tar -tvf "$TARBALL" | grep -c '^-' || true)
mkdir $W/mnt/src
phase "untar ($TARBALL)" "$files" tar -xf "$TARBALL" -C $W/mnt/src
phase "rm -rf of it, cold" "$files" rm -rf $W/mnt/src
py() { python3 -c "
import os, sys
root, n = '$W/mnt/files', $N
paths = [os.path.join(root, f'd{i // 1000:04d}', f'f{i:06d}') for i in range(n)]
if sys.argv[1] == 'create':
    os.mkdir(root)
    made = set()
    for p in paths:
        if os.path.dirname(p) not in made:
            os.mkdir(os.path.dirname(p))
            made.add(os.path.dirname(p))
        os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
elif sys.argv[1] == 'stat':
    for p in paths: os.stat(p)
else:
    for p in paths: os.unlink(p)
    for d in sorted({os.path.dirname(p) for p in paths}): os.rmdir(d)
    os.rmdir(root)
" "$1"; }
phase "$N files created" "$N" py create
phase "$N files stated, cold" "$N" py stat
phase "$N files deleted, cold" "$N" py delete
