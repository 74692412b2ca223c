#!/usr/bin/env bash
# Concurrent fsync throughput (issue 43): P processes, each in its own directory, create a
# 4 KiB file, write it, fsync it (and, with --dirsync, fsync its directory) and close it, over
# and over for SECONDS; prints fsyncs/s in all and each iteration's latency (p50, p99, over
# every process's iterations) for the host's ext4 and for KVFS (a fresh store mounted by each
# binary given), side by side, with each one's ratio to ext4 and to the first binary. Sides
# alternate, ROUNDS rounds; the summary is each side's median. As root:
#
#   bash bench/fs/fsync_concurrent.sh                          # $STITCHDB or target/release
#   bash bench/fs/fsync_concurrent.sh -r 3 /work/base-stitchdb target/release/stitchdb
#   bash bench/fs/fsync_concurrent.sh -p 8 -t 10 --dirsync -o no_io_uring BIN
#
# -p P (8), -t SECONDS (10), -r ROUNDS (1), -o mount options (`stitchdb mount -o`), --dirsync.
# Without binaries it uses $STITCHDB if set, else builds target/release/stitchdb (under
# $CARGO_TARGET_DIR if set). The work directory (ext4's side and the stores) is a fresh one
# under target/ (WORKDIR overrides; it must be on the host's ext4: see `df -T`); every mount is
# unmounted and the directory removed on every exit. Workers are python3 processes: an
# iteration's own cost (tens of microseconds) is small against a device flush.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"

P=8 SECS=10 ROUNDS=1 OPTS="" DIRSYNC=0 BINS=()
while [ $# -gt 0 ]; do
    case "$1" in
        -p) P=$2; shift 2 ;;
        -t) SECS=$2; shift 2 ;;
        -r) ROUNDS=$2; shift 2 ;;
        -o) OPTS=$2; shift 2 ;;
        --dirsync) DIRSYNC=1; shift ;;
        -h|--help) sed -n '2,19p' "$0"; exit 0 ;;
        *) BINS+=("$(realpath "$1")"); shift ;;
    esac
done
if [ "$(id -u)" -ne 0 ]; then
    echo "fsync_concurrent.sh: must run as root (it mounts)" >&2
    exit 1
fi
if [ ${#BINS[@]} -eq 0 ]; then
    if [ -z "${STITCHDB:-}" ]; then
        nice -n 10 cargo build --release -q -p stitchdb-cli
        TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
        case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
        STITCHDB="$TARGET/release/stitchdb"
    fi
    BINS=("$(realpath "$STITCHDB")")
fi

mkdir -p "${WORKDIR:-$ROOT/target}"
W=$(mktemp -d "${WORKDIR:-$ROOT/target}/fsync-concurrent.XXXX")
cleanup() {
    local mnt
    for mnt in $(awk -v w="$W/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
        fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || umount -l "$mnt" || true
    done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP
echo "fsync_concurrent.sh: $P processes, ${SECS}s, dirsync=$DIRSYNC, -o '${OPTS}', in $W ($(df -T "$W" | awk 'NR == 2 { print $2 }'))" >&2

# run DIR: one measurement in DIR; prints "fsyncs_per_s p50_ms p99_ms".
run() {
    python3 - "$1" "$P" "$SECS" "$DIRSYNC" <<'PY'
import os, sys, time, multiprocessing as mp
root, procs, secs, dirsync = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4] == "1"
data = b"x" * 4096

def worker(i, start, out):
    d = os.path.join(root, f"p{i}")
    os.mkdir(d)
    dfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    lat, n = [], 0
    start.wait()
    end = time.monotonic() + secs
    while True:
        t = time.monotonic()
        if t >= end:
            break
        fd = os.open(os.path.join(d, f"f{n}"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.write(fd, data)
        os.fsync(fd)
        os.close(fd)
        if dirsync:
            os.fsync(dfd)
        lat.append(time.monotonic() - t)
        n += 1
    out.put(lat)

start, out = mp.Event(), mp.Queue()
ps = [mp.Process(target=worker, args=(i, start, out)) for i in range(procs)]
for p in ps:
    p.start()
time.sleep(0.5)  # every worker made its directory and waits
start.set()
lats = sorted(l for _ in ps for l in out.get())
for p in ps:
    p.join()
q = lambda f: lats[min(len(lats) - 1, int(f * len(lats)))] * 1e3
print(f"{len(lats) / secs:.0f} {q(0.5):.2f} {q(0.99):.2f}")
PY
}

# kvfs BIN N: one measurement on a fresh store mounted by BIN.
kvfs() {
    local d=$W/kvfs$2
    mkdir -p "$d/mnt"
    "$1" init "$d/s.store" >/dev/null
    "$1" mount "$d/s.store" "$d/mnt" ${OPTS:+-o "$OPTS"}
    run "$d/mnt"
    fusermount3 -u "$d/mnt"
    # The daemon ends after the unmount's last sync; its store goes with the next round.
    while pgrep -f -- "mount $d/s.store" >/dev/null; do sleep 0.1; done
    rm -rf "$d"
}

ext4() {
    mkdir -p "$W/ext4"
    run "$W/ext4"
    rm -rf "$W/ext4"
}

sides=(ext4)
for i in "${!BINS[@]}"; do sides+=("kvfs$i"); done
declare -A results
echo "| round | side | fsyncs/s | p50 ms | p99 ms |"
echo "| --- | --- | ---: | ---: | ---: |"
for round in $(seq "$ROUNDS"); do
    for s in "${sides[@]}"; do
        if [ "$s" = ext4 ]; then r=$(ext4); else i=${s#kvfs}; r=$(kvfs "${BINS[$i]}" "$i"); fi
        results[$s]+="${r// /,};"
        echo "| $round | $s | ${r// / | } |"
    done
done
echo
for i in "${!BINS[@]}"; do echo "kvfs$i: ${BINS[$i]}"; done
summary=""
for s in "${sides[@]}"; do summary+="$s=${results[$s]} "; done
python3 - $summary <<'PY'
import statistics, sys
sides = {}
for a in sys.argv[1:]:
    name, runs = a.split("=")
    rows = [list(map(float, r.split(","))) for r in runs.split(";") if r]
    sides[name] = [statistics.median(c) for c in zip(*rows)]
ext4 = sides["ext4"][0]
first = sides.get("kvfs0", [None])[0]
print("\n| side (median) | fsyncs/s | p50 ms | p99 ms | / ext4 | / kvfs0 |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
for name, (rate, p50, p99) in sides.items():
    vs0 = f"{rate / first:.2f}x" if first and name != "ext4" else ""
    print(f"| {name} | {rate:.0f} | {p50:.2f} | {p99:.2f} | {rate / ext4:.2f}x | {vs0} |")
PY
