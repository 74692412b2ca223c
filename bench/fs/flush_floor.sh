#!/usr/bin/env bash
# The most any file system can gain over the host's ext4 on compare.sh's durable random-write
# phase (fio, 4 KiB random writes, fdatasync after each, one at a time) on this device. Every
# such write must reach the device and be flushed before the next begins; the best a log can
# do is to turn the random write into a sequential one. So this times, on the host file
# system under WORKDIR, fio's random 4 KiB writes with an fdatasync after each (the phase as
# ext4 runs it) against sequential ones with an fdatasync after each (a log's appends into
# space already allocated, with no work of its own), alternating, ROUNDS pairs, and prints
# the ratio of each pair. Needs fio, not root.
#
#   bash bench/fs/flush_floor.sh [WORKDIR]
#
# WORKDIR defaults to target/bench-fs/flush-floor (emptied at the end); SIZE (1G, the span
# of compare.sh's random writes), RUNTIME (10, seconds a measurement) and ROUNDS (3) come
# from the environment.
set -euo pipefail

WORK=${1:-target/bench-fs/flush-floor}
SIZE=${SIZE:-1G}
RUNTIME=${RUNTIME:-10}
ROUNDS=${ROUNDS:-3}

command -v fio >/dev/null || { echo "flush_floor.sh: needs fio" >&2; exit 1; }
mkdir -p "$WORK"
WORK=$(realpath "$WORK")
FILE=$WORK/fio.dat
trap 'rm -f "$FILE"' EXIT

# The file laid out and durable first, so that both patterns overwrite allocated blocks (as
# the phase does, after the sequential write phase, and as a log does in its segments).
fio --name=layout --filename="$FILE" --rw=write --bs=1M --size="$SIZE" --ioengine=psync \
    --end_fsync=1 --output-format=json >/dev/null

iops() {
    fio --name="$1" --filename="$FILE" --rw="$1" --bs=4k --size="$SIZE" --ioengine=psync \
        --fallocate=none --randrepeat=1 --fdatasync=1 --runtime="$RUNTIME" --time_based \
        --output-format=json |
        python3 -c 'import json, sys; t = sys.stdin.read(); print(round(json.loads(t[t.index("{"):])["jobs"][0]["write"]["iops"]))'
}

echo "| round | random 4 KiB + fdatasync (IOPS) | sequential 4 KiB + fdatasync (IOPS) | sequential / random |"
echo "| --- | ---: | ---: | ---: |"
for round in $(seq "$ROUNDS"); do
    random=$(iops randwrite)
    sequential=$(iops write)
    echo "| $round | $random | $sequential | $(python3 -c "print(f'{$sequential / $random:.2f}x')") |"
done
