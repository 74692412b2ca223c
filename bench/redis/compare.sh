#!/usr/bin/env bash
# StitchDB's Redis surface (`stitchdb serve`) against redis-server 7.0 from Debian, side by
# side in one run with the same redis-benchmark; prints a markdown table with ratios.
#
#   bash bench/redis/compare.sh                         # the issue's run: -c 50 -n 200000, -P 1 and 16
#   bash bench/redis/compare.sh --rounds 3 --keyspace 100000 --keys 0
#   bash bench/redis/compare.sh --stitchdb /path/to/stitchdb --sides redis-always,stitchdb-sync
#
# Options are bench/redis/compare.py's (`--help`). Installs redis-server and redis-tools if
# missing; builds target/release/stitchdb unless --stitchdb names a binary.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$ROOT"
for a in "$@"; do
    case "$a" in -h|--help) exec python3 bench/redis/compare.py --help ;; esac
done
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v redis-benchmark >/dev/null 2>&1 || missing+=(redis-tools)
if [ "${#missing[@]}" -gt 0 ]; then
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q "${missing[@]}"
fi
case " $* " in
    *" --stitchdb "*) ;;
    *) cargo build --release -q -p stitchdb-cli ;;
esac
exec python3 bench/redis/compare.py "$@"
