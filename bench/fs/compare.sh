#!/usr/bin/env bash
# KVFS (`stitchdb mount`) against the host's ext4 and a FUSE passthrough (bindfs), side by
# side in one run; prints a markdown table with ratios against ext4. As root:
#
#   bash bench/fs/compare.sh                                  # every side, every phase
#   bash bench/fs/compare.sh --sides ext4,bindfs --out fs.md  # without KVFS
#   bash bench/fs/compare.sh --size 512M --files 20000 --phases fio,files
#
# Options are bench/fs/compare.py's (`--help`); --workdir defaults to target/bench-fs, which
# must be on the file system to compare against (the host's ext4). Installs what it needs
# (Debian: fio, bindfs, fuse3, xz-utils, linux-source-6.1) and unpacks the Linux source's
# .tar.xz once into an uncompressed tar in the work directory, so the untar phase measures
# the file system rather than xz. The kvfs side uses $STITCHDB if set, else builds
# target/release/stitchdb; it is left out, with a message, when `stitchdb mount` does not exist.
# --size defaults to 2G, less when the disk is short. Every mount is unmounted on every exit.
# One comparison per work directory at a time: a second one is refused.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"

if [ "$(id -u)" -ne 0 ]; then
    echo "compare.sh: must run as root (it mounts and drops caches)" >&2
    exit 1
fi

args=("$@")
opt() { # opt NAME DEFAULT: the value of --NAME among the arguments, else DEFAULT
    local name=$1 value=$2 i
    for ((i = 0; i < ${#args[@]}; i++)); do
        case "${args[$i]}" in
            "--$name") value="${args[$((i + 1))]:-}" ;;
            "--$name="*) value="${args[$i]#--$name=}" ;;
        esac
    done
    printf '%s' "$value"
}
for a in "$@"; do
    case "$a" in -h|--help) exec python3 bench/fs/compare.py --help ;; esac
done
WORKDIR="$(opt workdir target/bench-fs)"
SIDES="$(opt sides ext4,bindfs,kvfs)"
PHASES="$(opt phases all)"
mkdir -p "$WORKDIR"
WORKDIR="$(cd "$WORKDIR" && pwd)"

# ---- system packages ---------------------------------------------------------------------
TARXZ=/usr/src/linux-source-6.1.tar.xz
missing=()
command -v fio >/dev/null 2>&1 || missing+=(fio)
command -v bindfs >/dev/null 2>&1 || missing+=(bindfs)
command -v fusermount3 >/dev/null 2>&1 || missing+=(fuse3)
command -v xz >/dev/null 2>&1 || missing+=(xz-utils)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
[ -e "$TARXZ" ] || missing+=(linux-source-6.1)
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi

# ---- one comparison per work directory ----------------------------------------------------
# A second one would tear down the first's mounts when it ends (the cleanup below), and the
# first would go on measuring plain directories. Held until this script exits.
exec 9>"$WORKDIR/.lock"
if ! flock -n 9; then
    echo "compare.sh: another comparison is using $WORKDIR; wait for it to end or pass --workdir" >&2
    exit 1
fi

# ---- unmount whatever is still mounted under the work directory, on any exit ---------------
cleanup() {
    local mnt
    # Deepest first; /proc/self/mounts escapes spaces as \040, which the paths here do not have.
    for mnt in $(awk -v w="$WORKDIR/" 'index($2, w) == 1 { print $2 }' /proc/self/mounts | sort -r); do
        echo "compare.sh: unmounting $mnt" >&2
        fusermount3 -u "$mnt" 2>/dev/null || umount "$mnt" 2>/dev/null || umount -l "$mnt" || true
    done
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
trap 'exit 129' HUP

# ---- the kvfs side: stitchdb with a mount subcommand ---------------------------------------
extra=()
case ",$SIDES," in
*,kvfs,*)
    if [ -z "${STITCHDB:-}" ]; then
        nice -n 10 cargo build --release -q -p stitchdb-cli
        TARGET="${CARGO_TARGET_DIR:-$ROOT/target}"
        case "$TARGET" in /*) ;; *) TARGET="$ROOT/$TARGET" ;; esac
        STITCHDB="$TARGET/release/stitchdb"
    fi
    if ! "$STITCHDB" mount --help >/dev/null 2>&1; then
        echo "compare.sh: $STITCHDB has no mount subcommand; leaving out the kvfs side" >&2
        SIDES="$(echo ",$SIDES," | sed 's/,kvfs,/,/; s/^,//; s/,$//')"
        extra+=(--sides "$SIDES")
    fi
    extra+=(--stitchdb "$STITCHDB")
    ;;
esac
nsides=$(echo "$SIDES" | tr ',' '\n' | grep -c .)

# ---- the fio file's size: 2G unless the disk is short ----------------------------------------
if [ -z "$(opt size '')" ]; then
    avail=$(df -B1 --output=avail "$WORKDIR" | tail -n 1)
    # Every side holds the file at once, a FUSE store may hold up to twice it, and half the
    # disk stays free for the trees and everyone else.
    size=$((2 << 30))
    while [ $size -gt $((64 << 20)) ] && [ $((size * 2 * nsides)) -gt $((avail / 2)) ]; do
        size=$((size / 2))
    done
    [ $size -eq $((2 << 30)) ] || echo "compare.sh: $((avail >> 20)) MiB free; fio file $((size >> 20)) MiB" >&2
    extra+=(--size "$((size >> 20))M")
fi

# ---- the Linux source as a plain tar, made once ----------------------------------------------
case ",$PHASES," in
*,all,*|*,tree,*|*,untar,*)
    TARBALL="$WORKDIR/linux-source-6.1.tar"
    if [ ! -s "$TARBALL" ] || [ "$TARXZ" -nt "$TARBALL" ]; then
        echo "compare.sh: unpacking $TARXZ into $TARBALL" >&2
        nice -n 10 xz -dc "$TARXZ" >"$TARBALL.tmp"
        mv "$TARBALL.tmp" "$TARBALL"
    fi
    extra+=(--tarball "$TARBALL")
    ;;
esac

python3 bench/fs/compare.py --workdir "$WORKDIR" "$@" "${extra[@]}"
