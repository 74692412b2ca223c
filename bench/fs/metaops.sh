#!/usr/bin/env bash
# metaops.sh STITCHDB [N]: mounts a fresh store with the given stitchdb binary and times N (default
# 20,000) empty files created, stated and unlinked through it (directories of 1,000; caches
# dropped before the stat and unlink phases), in microseconds per file. As root. Two binaries
# timed alternately show what a change does to the round trips of metadata operations.
set -euo pipefail
BIN=$1; N=${2:-20000}; ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; mkdir -p "$ROOT/target"; W=$(mktemp -d "$ROOT/target/metaops.XXXX")
mkdir -p $W/mnt; $BIN init $W/s.store >/dev/null
$BIN mount $W/s.store $W/mnt
trap 'fusermount3 -u $W/mnt 2>/dev/null; sleep 0.5; rm -rf $W' EXIT
python3 - $W/mnt $N <<'PY'
import os, sys, time
root, n = sys.argv[1], int(sys.argv[2])
paths = [os.path.join(root, "files", f"d{i//1000:04d}", f"f{i:06d}") for i in range(n)]
t = time.monotonic(); os.mkdir(os.path.join(root, "files")); made = set()
for p in paths:
    d = os.path.dirname(p)
    if d not in made: os.mkdir(d); made.add(d)
    os.close(os.open(p, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))
c = time.monotonic() - t
os.system("echo 3 > /proc/sys/vm/drop_caches")
t = time.monotonic()
for p in paths: os.stat(p)
s = time.monotonic() - t
os.system("echo 3 > /proc/sys/vm/drop_caches")
t = time.monotonic()
for p in paths: os.unlink(p)
for d in sorted(made): os.rmdir(d)
u = time.monotonic() - t
print(f"create {c*1e6/n:.0f} us  stat {s*1e6/n:.0f} us  unlink {u*1e6/n:.0f} us")
PY
