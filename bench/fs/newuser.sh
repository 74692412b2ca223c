#!/usr/bin/env bash
# KVFS tried as a new user would (issue 21's check): mount, untar Debian's linux-source-6.1,
# build something in it (`make defconfig`, then a few kernel objects, which builds kconfig,
# objtool and the generated headers first), `sync -f` (syncfs, which fails on any write-back
# error), read every file back, unmount, check, remount, read it all again and compare: with
# what was read before unmounting, and with the same steps on the host's file system (diff -r
# of the two trees, contents, modes and symlinks).
#
#   bench/fs/newuser.sh STITCHDB WORKDIR [TARBALL]
#
# STITCHDB is the stitchdb binary; WORKDIR a directory on the host's ext4 (made, and emptied
# at the end); TARBALL the source (default /usr/src/linux-source-6.1.tar.xz, from Debian's
# linux-source-6.1 package; an uncompressed .tar is used as it is). Needs root (mounting),
# gcc, make, flex, bison, bc and the libelf and libssl headers. Prints the time of each step
# on each side; exits non-zero on any difference, a failed step or a failed `stitchdb check`.
# The mount is unmounted on every exit.
set -euo pipefail

STITCHDB=$(realpath "${1:?usage: newuser.sh STITCHDB WORKDIR [TARBALL]}")
WORK=${2:?usage: newuser.sh STITCHDB WORKDIR [TARBALL]}
TARBALL=${3:-/usr/src/linux-source-6.1.tar.xz}
TARGETS=(kernel/fork.o fs/namei.o lib/sort.o)
JOBS=$(nproc)

mkdir -p "$WORK"
WORK=$(realpath "$WORK")
# Both sides build at the same path (some build outputs hold absolute paths): the host's tree
# is built in $MNT and moved to $HOST before the store is mounted there.
HOST=$WORK/ext4
MNT=$WORK/tree
STORE=$WORK/kvfs.store

unmount() {
    if mountpoint -q "$MNT" 2>/dev/null; then
        fusermount3 -u "$MNT" 2>/dev/null || umount "$MNT" 2>/dev/null || umount -l "$MNT"
    fi
}
cleanup() {
    unmount
    rm -rf "$HOST" "$MNT" "$STORE" "$WORK/tree.tar"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

step() { # step SIDE NAME COMMAND...: runs COMMAND, prints its wall time
    local side=$1 name=$2
    shift 2
    local t0=$(date +%s.%N)
    local log=$WORK/$side-${name//[^a-zA-Z0-9]/-}.log
    "$@" >"$log" 2>&1 || {
        echo "$side: $name failed; the end of $log:" >&2
        tail -20 "$log" >&2
        exit 1
    }
    local t1=$(date +%s.%N)
    printf '%-6s %-28s %8.1f s\n' "$side" "$name" "$(echo "$t1 - $t0" | bc)"
}

# Contents, modes and link targets of every file under $1, sorted, paths relative.
manifest() {
    (cd "$1" && find . -printf '%y %m %l %p\n' | LC_ALL=C sort &&
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0 sha256sum)
}

drop_caches() { # as bench/fs/compare.py: creating many files soon after deleting many is
    # far slower on this machine's ext4 unless caches are dropped first
    sync
    echo 3 >/proc/sys/vm/drop_caches
}

build() { # build DIR: the steps a user takes in the source tree
    local side=$1 dir=$2
    drop_caches
    step "$side" untar tar -xf "$TAR" -C "$dir"
    local src
    src=$(echo "$dir"/linux-source-*)
    step "$side" "make defconfig" make -C "$src" defconfig
    step "$side" "make ${TARGETS[*]}" make -C "$src" -j"$JOBS" "${TARGETS[@]}"
    # syncfs reports every write-back error the kernel met since (a write-back refused for
    # a file the build deleted failed it once), where `sync` reports none.
    step "$side" "sync -f" sync -f "$dir"
    step "$side" "read back (manifest)" bash -c "$(declare -f manifest); manifest '$dir' > '$WORK/$side.manifest'"
}

rm -rf "$HOST" "$MNT" "$STORE"
mkdir -p "$MNT"
# Decompressed once, outside the timings: the untar measures the file system, not xz.
if [[ $TARBALL == *.xz ]]; then
    TAR=$WORK/tree.tar
    xz -dc "$TARBALL" >"$TAR"
else
    TAR=$(realpath "$TARBALL")
fi

echo "files in the tarball: $(tar -tf "$TAR" | grep -vc '/$')"
build ext4 "$MNT"
mv "$MNT" "$HOST"
mkdir "$MNT"

"$STITCHDB" init "$STORE" >/dev/null
step kvfs mount "$STITCHDB" mount "$STORE" "$MNT"
build kvfs "$MNT"
step kvfs unmount unmount
step kvfs "stitchdb check" "$STITCHDB" check "$STORE"
step kvfs remount "$STITCHDB" mount "$STORE" "$MNT"
step kvfs "read back after remount" bash -c "$(declare -f manifest); manifest '$MNT' > '$WORK/kvfs-remounted.manifest'"

cmp "$WORK/kvfs.manifest" "$WORK/kvfs-remounted.manifest" ||
    { echo "the tree changed across the remount" >&2; exit 1; }
cmp "$WORK/ext4.manifest" "$WORK/kvfs.manifest" ||
    { diff "$WORK/ext4.manifest" "$WORK/kvfs.manifest" | head -20 >&2 || true; exit 1; }
step both "diff -r ext4 kvfs" diff -r --no-dereference "$HOST" "$MNT"
echo "the same tree on both: $(grep -c '^f ' "$WORK/ext4.manifest") files, $(grep -c '^d ' "$WORK/ext4.manifest") directories, $(grep -c '^l ' "$WORK/ext4.manifest") symlinks"
unmount
du -sh --apparent-size "$STORE"
