#!/bin/bash
# fio on a KVFS mount and on the host's file system directly, the two sides alternating and
# caches dropped before each job. Run as root from the repository after
# `cargo build --release -p stitchdb-cli`, with fio installed:
#   bench/kvfs/fio.sh [WORKDIR]        (default /tmp/kvfio; must be on the file system compared)
# Prints one line per job and side: bandwidth in KiB/s and IOPS (fio's terse output).
set -u
B=${STITCHDB:-target/release/stitchdb}
W=${1:-/tmp/kvfio}
rm -rf $W; mkdir -p $W/mnt $W/ext4
$B init $W/s.store >/dev/null
$B mount $W/s.store $W/mnt
trap 'fusermount3 -u -z $W/mnt' EXIT
job() { # name dir args...
  local name=$1 dir=$2; shift 2
  sync; echo 3 > /proc/sys/vm/drop_caches
  fio --name=$name --directory=$dir --output-format=terse --terse-version=3 "$@" 2>&1 | \
    awk -F';' -v n=$name -v d=$dir '{printf "%s %s read_bw_KiB=%s read_iops=%s write_bw_KiB=%s write_iops=%s\n", n, d, $7, $8, $48, $49}'
}
for side in ext4 mnt; do
  job seqwrite $W/$side --rw=write --bs=1M --size=1G --end_fsync=1 --filename=seq
done
for side in ext4 mnt; do
  job seqread $W/$side --rw=read --bs=1M --size=1G --filename=seq
done
for side in ext4 mnt; do
  job randread $W/$side --rw=randread --bs=4k --size=1G --filename=seq --runtime=15 --time_based
done
for side in ext4 mnt; do
  job randwrite_buffered $W/$side --rw=randwrite --bs=4k --size=256M --end_fsync=1 --filename=rw
done
for side in ext4 mnt; do
  job randwrite_fdatasync $W/$side --rw=randwrite --bs=4k --size=256M --fdatasync=1 --filename=rw --runtime=15 --time_based
done
