#!/usr/bin/env bash
# metaops.sh STITCHDB [N] [MOUNT_OPTIONS]: mounts a fresh store with the given stitchdb binary
# (with `-o MOUNT_OPTIONS` if given) and times, in microseconds per file, N (default 20,000)
# empty files created, stated cold (caches dropped), stated again warm, stated through a path
# eight directories deep, and unlinked (caches dropped), in directories of 1,000. As root.
# Two binaries, or two option sets (`default_permissions` against `no_default_permissions`),
# timed alternately show what a change does to the round trips of metadata operations.
set -euo pipefail
BIN=$1; N=${2:-20000}; OPTS=${3:-}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; mkdir -p "$ROOT/target"; W=$(mktemp -d "$ROOT/target/metaops.XXXX")
mkdir -p $W/mnt; $BIN init $W/s.store >/dev/null
$BIN mount $W/s.store $W/mnt ${OPTS:+-o "$OPTS"}
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
t = time.monotonic()
for p in paths: os.stat(p)
w = time.monotonic() - t
deep = os.path.join(root, *[f"level{i}" for i in range(8)])
os.makedirs(deep); leaf = os.path.join(deep, "leaf"); open(leaf, "w").close()
t = time.monotonic()
for _ in range(n): os.stat(leaf)
d = time.monotonic() - t
os.system("echo 3 > /proc/sys/vm/drop_caches")
t = time.monotonic()
for p in paths: os.unlink(p)
for dd in sorted(made): os.rmdir(dd)
u = time.monotonic() - t
print(f"create {c*1e6/n:.0f} us  stat {s*1e6/n:.0f} us  warm stat {w*1e6/n:.1f} us  "
      f"deep stat {d*1e6/n:.1f} us  unlink {u*1e6/n:.0f} us")
PY
