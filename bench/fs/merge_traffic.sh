#!/usr/bin/env bash
# What KVFS's merges write while files are written, phase by phase: compare.sh's fio writes
# (a sequential file, fdatasync'd random 4 KiB writes over part of it, then buffered random
# 4 KiB writes over the same part, flushed at the end) on a fresh store, and after each
# phase the bytes its merges (including those it left running, waited for) stitched and
# copied, read off the daemon's debug log. As root:
#
#   bash bench/fs/merge_traffic.sh [STITCHDB] [WORKDIR]
#
# STITCHDB defaults to target/release/stitchdb, WORKDIR (on the disk to test; emptied at
# the end) to target/bench-fs/merges. SIZE (2G), RAND_SIZE (1G) and RUNTIME (30, seconds of
# durable writes) come from the environment. Needs fio and fuse3.
set -euo pipefail

STITCHDB=$(realpath "${1:-target/release/stitchdb}")
WORK=${2:-target/bench-fs/merges}
SIZE=${SIZE:-2G}
RAND_SIZE=${RAND_SIZE:-1G}
RUNTIME=${RUNTIME:-30}

mkdir -p "$WORK"
WORK=$(realpath "$WORK")
MNT=$WORK/mnt
STORE=$WORK/kvfs.store
LOG=$WORK/daemon.log
cleanup() {
    if mountpoint -q "$MNT" 2>/dev/null; then
        fusermount3 -u "$MNT" 2>/dev/null || umount -l "$MNT"
    fi
    rm -rf "$MNT" "$STORE" "$LOG"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$MNT"
"$STITCHDB" init "$STORE" >/dev/null
"$STITCHDB" mount "$STORE" "$MNT" -f --log stitchdb=debug 2>"$LOG" &
for _ in $(seq 100); do
    mountpoint -q "$MNT" && break
    sleep 0.1
done
mountpoint -q "$MNT" || { echo "merge_traffic.sh: the mount did not come up" >&2; exit 1; }
DAEMON=$!

cpu_ticks() { awk '{print $14 + $15}' "/proc/$DAEMON/stat"; }
settle() { # until the daemon's merges are done: under 2 ticks of CPU in a second
    sync
    echo 3 >/proc/sys/vm/drop_caches
    local before after
    for _ in $(seq 120); do
        before=$(cpu_ticks)
        sleep 1
        after=$(cpu_ticks)
        [ $((after - before)) -lt 2 ] && return
    done
}
merged_since() { # bytes stitched and copied by merges logged after line $1 of the log
    tail -n +"$(($1 + 1))" "$LOG" | sed 's/\x1b\[[0-9;]*m//g' | awk '
        / merged table / {
            for (i = 1; i <= NF; i++) {
                if ($i == "stitched,") s += $(i - 2)
                if ($i == "copied") c += $(i - 1)
            }
        }
        END { printf "%8.0f MB stitched %7.0f MB copied", s / 1e6, c / 1e6 }'
}
phase() { # phase NAME FIO-ARGS...: runs fio, waits for the merges, prints rate and merges
    local name=$1
    shift
    local mark t0 t1
    mark=$(wc -l <"$LOG")
    t0=$(date +%s.%N)
    fio --name="$name" --filename="$MNT/fio.dat" --ioengine=psync --fallocate=none \
        --randrepeat=1 --output=/dev/null "$@"
    t1=$(date +%s.%N)
    settle
    printf '%-28s %7.1f s   merges: %s\n' "$name" "$(echo "$t1 - $t0" | bc)" "$(merged_since "$mark")"
}

settle
phase "sequential write $SIZE" --rw=write --bs=1M --size="$SIZE" --end_fsync=1
phase "durable random ${RUNTIME} s" --rw=randwrite --bs=4k --size="$RAND_SIZE" --fdatasync=1 \
    --runtime="$RUNTIME"
phase "buffered random $RAND_SIZE" --rw=randwrite --bs=4k --size="$RAND_SIZE" --end_fsync=1
