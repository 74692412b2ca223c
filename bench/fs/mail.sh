#!/usr/bin/env bash
# mail.sh [ROUNDS] [MESSAGES]: Featherstitch's mail benchmark (§8.5) with the `mailbench`
# program (crates/stitchdb-pg): moves MESSAGES (default 1,000) messages of 2 KiB between two
# maildir-style directories, each move crash-safe, by fsync and by patchgroups on a fresh
# StitchDB mount, with no ordering at all on it (the floor), and by fsync on the ext4 (or
# whatever) file system under target/, in alternating rounds (default 3). Prints each run's
# time per move and the ratio of the medians fsync/patchgroups on the mount. Builds the release binaries first. As root.
set -euo pipefail
ROUNDS=${1:-3}; N=${2:-1000}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cargo build --release -q -p stitchdb-cli -p stitchdb-pg --manifest-path "$ROOT/Cargo.toml"
BIN="${CARGO_TARGET_DIR:-$ROOT/target}/release"
mkdir -p "$ROOT/target"; W=$(mktemp -d "$ROOT/target/mail.XXXX")
mkdir -p $W/mnt $W/ext; $BIN/stitchdb init $W/s.store >/dev/null
$BIN/stitchdb mount $W/s.store $W/mnt
trap 'fusermount3 -u $W/mnt 2>/dev/null || umount -l $W/mnt; sleep 0.5; rm -rf $W' EXIT
per_move() { sed -n 's/.*us_per_move=\([0-9.]*\).*/\1/p'; }
for r in $(seq 1 $ROUNDS); do
  f=$($BIN/mailbench $W/mnt/fsync$r --messages $N --mode fsync | per_move)
  p=$($BIN/mailbench $W/mnt/pg$r --messages $N --mode patchgroups | per_move)
  n=$($BIN/mailbench $W/mnt/none$r --messages $N --mode none | per_move)
  e=$($BIN/mailbench $W/ext/fsync$r --messages $N --mode fsync | per_move)
  $BIN/mailbench $W/mnt/pg$r --messages $N --verify >/dev/null
  echo "round $r: us/move  kvfs fsync $f  kvfs patchgroups $p  kvfs none $n  ext4 fsync $e"
  echo "$f $p $n $e" >> $W/runs
done
python3 - $W/runs <<'PY'
import sys, statistics as st
rows = [list(map(float, l.split())) for l in open(sys.argv[1])]
f, p, n, e = (st.median(c) for c in zip(*rows))
print(f"median us/move: kvfs fsync {f:.0f}, kvfs patchgroups {p:.0f}, kvfs none {n:.0f}, ext4 fsync {e:.0f}")
print(f"fsync/patchgroups on kvfs: {f/p:.1f}x (at most fsync/none: {f/n:.1f}x); ext4 fsync/kvfs patchgroups: {e/p:.1f}x")
PY
