#!/usr/bin/env bash
# txn_build.sh STITCHDB [ROUNDS]: what `stitchdb txn run` costs on real work. Unpacks Redis's
# source (Debian's redis_*.orig.tar.gz, fetched once with `apt-get source --download-only`
# into ~/.cache/stitchdb-bench) and builds it (`make -j2`), on a fresh KVFS mount: outside a
# transaction, inside `txn run --isolation snapshot`, and inside `txn run --isolation
# serializable`, in turns, ROUNDS (default 3) times each; then prints each one's median time
# and its ratio to the plain run. Each run commits (or, plain, syncs) before its clock stops,
# so the three are timed to the same durability. As root.
set -euo pipefail
BIN=$(realpath "$1"); ROUNDS=${2:-3}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
CACHE=~/.cache/stitchdb-bench/redis-src
if ! ls $CACHE/redis_*.orig.tar.gz >/dev/null 2>&1; then
    mkdir -p $CACHE
    if ! grep -rqs deb-src /etc/apt/sources.list /etc/apt/sources.list.d; then
        cat > /etc/apt/sources.list.d/stitchdb-bench-src.sources <<'EOF'
Types: deb-src
URIs: http://deb.debian.org/debian
Suites: bookworm
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
        apt-get update -qq
    fi
    (cd $CACHE && apt-get source --download-only redis >/dev/null 2>&1)
fi
TARBALL=$(ls $CACHE/redis_*.orig.tar.gz | head -1)
mkdir -p "$ROOT/target"; W=$(mktemp -d "$ROOT/target/txnbuild.XXXX")
mkdir -p $W/mnt; $BIN init $W/s.store >/dev/null
$BIN mount $W/s.store $W/mnt
trap 'cd /; fusermount3 -u $W/mnt 2>/dev/null; sleep 0.5; rm -rf $W' EXIT
# One build in directory $1 of the mount: unpack, make, then make it durable.
cat > $W/build.sh <<EOF
set -e
mkdir -p $W/mnt/\$1 && cd $W/mnt/\$1
tar xzf $TARBALL
cd redis-*/ && make -j2 >/dev/null 2>&1
EOF
run() { # mode round; a run that fails is reported, not timed
    local t0=$EPOCHREALTIME rc=0
    case $1 in
        plain) bash $W/build.sh $1-$2 && sync -f $W/mnt || rc=$? ;;
        snapshot|serializable) $BIN txn run --isolation $1 $W/mnt -- bash $W/build.sh $1-$2 || rc=$? ;;
    esac
    if [ $rc = 0 ]; then echo "$1 $t0 $EPOCHREALTIME"; else echo "$1 failed $rc"; fi
}
for r in $(seq 1 $ROUNDS); do
    for m in plain snapshot serializable; do run $m $r; done
done | tee $W/times
python3 - $W/times <<'PY'
import sys, statistics
t = {}
for line in open(sys.argv[1]):
    m, a, b = line.split()
    if a == "failed":
        print(f"{m}: a run failed (exit status {b})"); continue
    t.setdefault(m, []).append(float(b) - float(a))
base = statistics.median(t["plain"])
for m in ("plain", "snapshot", "serializable"):
    med = statistics.median(t[m])
    print(f"{m:13} median {med:7.1f} s  ({len(t[m])} runs)  {med / base:5.3f}x plain")
PY
