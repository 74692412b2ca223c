#!/usr/bin/env bash
# pjdfstest (the POSIX file-system test suite, the `pjdfstest` crate on crates.io) on a
# directory, as root; prints the passed, failed and skipped counts and the failing cases:
#
#   bash bench/fs/pjdfstest.sh DIR [options] [-- TEST_PATTERNS...]
#
#   --secondary DIR       a directory on another file system, for the EXDEV cases
#                         (rename and link across file systems); skipped without it
#   --allow-remount       DIR is a mount point the erofs cases may remount read-only and back
#                         (never the host's root); skipped without it
#   --features LIST       comma-separated opt-in features of the file system (`pjdfstest -l`);
#                         default: Linux's posix_fallocate,rename_ctime,utime_now,utimensat
#   --expected-failures FILE
#                         case names (one per line, # comments) expected to fail: reported as
#                         such and not counted as failures
#   --naptime S           seconds between changes whose timestamps must differ (default 0.01;
#                         more than the file system's timestamp granularity)
#   --log FILE            the full output (default: a temporary file, named at the end)
#
# Exit status: 0 when no case failed other than the expected ones, 1 otherwise, 2 on a usage
# or setup error. The suite is installed once with `cargo install pjdfstest` into
# $PJDFSTEST_ROOT (default target/pjdfstest); the users it switches to are nobody, daemon and
# bin, which every Debian system has.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PJDFSTEST_VERSION=0.2.2

usage() { sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 2; }
[ $# -ge 1 ] || usage
case "$1" in -h|--help) usage ;; esac
DIR=$1
shift
secondary=
allow_remount=false
features=posix_fallocate,rename_ctime,utime_now,utimensat
expected=
naptime=0.01
log=
patterns=()
while [ $# -gt 0 ]; do
    case "$1" in
        --secondary) secondary=$2; shift 2 ;;
        --allow-remount) allow_remount=true; shift ;;
        --features) features=$2; shift 2 ;;
        --expected-failures) expected=$2; shift 2 ;;
        --naptime) naptime=$2; shift 2 ;;
        --log) log=$2; shift 2 ;;
        --) shift; patterns=("$@"); break ;;
        *) echo "pjdfstest.sh: unknown argument $1" >&2; usage ;;
    esac
done

if [ "$(id -u)" -ne 0 ]; then
    echo "pjdfstest.sh: must run as root (pjdfstest switches users, makes devices, chowns)" >&2
    exit 2
fi
if [ ! -d "$DIR" ]; then
    echo "pjdfstest.sh: $DIR is not a directory" >&2
    exit 2
fi
# The cases switch to other users, who must be able to reach DIR.
d=$(realpath "$DIR")
while [ "$d" != / ]; do
    d=$(dirname "$d")
    if [ $((8#$(stat -c %a "$d") & 1)) -eq 0 ]; then
        echo "pjdfstest.sh: $d is not searchable by other users (chmod o+x it), whom the cases switch to" >&2
        exit 2
    fi
done
fstype_opts=$(findmnt -n -o FSTYPE,OPTIONS -T "$DIR")
case "$fstype_opts" in
    fuse*allow_other*) ;;
    fuse*) echo "pjdfstest.sh: $DIR is a FUSE mount without allow_other, which keeps out the other users the cases switch to; mount it with -o allow_other" >&2
           exit 2 ;;
esac
if [ -n "$secondary" ] && [ "$(stat -c %d "$secondary")" = "$(stat -c %d "$DIR")" ]; then
    echo "pjdfstest.sh: $secondary is on the same file system as $DIR" >&2
    exit 2
fi
if $allow_remount && ! mountpoint -q "$DIR"; then
    echo "pjdfstest.sh: --allow-remount needs $DIR to be a mount point" >&2
    exit 2
fi

# ---- the suite -------------------------------------------------------------------------------
INSTALL="${PJDFSTEST_ROOT:-$ROOT/target/pjdfstest}"
BIN="$INSTALL/bin/pjdfstest"
if [ ! -x "$BIN" ] || [ "$("$BIN" --version 2>/dev/null)" != "pjdfstest $PJDFSTEST_VERSION" ]; then
    echo "pjdfstest.sh: installing pjdfstest $PJDFSTEST_VERSION into $INSTALL" >&2
    nice -n 10 cargo install --locked --quiet --version "$PJDFSTEST_VERSION" --root "$INSTALL" pjdfstest
fi

# ---- its configuration -----------------------------------------------------------------------
conf=$(mktemp --suffix=.toml)
out=${log:-$(mktemp --suffix=.log)}
trap 'rm -f "$conf"' EXIT
{
    echo "[features]"
    for f in ${features//,/ }; do echo "$f = {}"; done
    echo
    echo "[dummy_auth]"
    echo 'entries = [["nobody", "nogroup"], ["daemon", "daemon"], ["bin", "bin"]]'
    echo
    echo "[settings]"
    echo "naptime = $naptime"
    echo "allow_remount = $allow_remount"
    echo "expected_failures = ["
    if [ -n "$expected" ]; then
        sed 's/#.*//; s/[[:space:]]//g; /^$/d; s/.*/    "&",/' "$expected"
    fi
    echo "]"
} >"$conf"

# ---- the run ---------------------------------------------------------------------------------
args=(-c "$conf" -p "$DIR")
[ -z "$secondary" ] || args+=(-s "$secondary")
echo "pjdfstest.sh: pjdfstest ${args[*]} ${patterns[*]:-} (log: $out)" >&2
set +e
NO_COLOR=1 "$BIN" "${args[@]}" "${patterns[@]}" >"$out" 2>&1
status=$?
set -e

# Lines are "NAME   ok", "NAME   skipped" (then tab-indented reasons), "NAME   FAILED" (then
# the tab-indented panic message), "NAME   failed as expected", "NAME   PASSED UNEXPECTEDLY".
sed 's/\x1b\[[0-9;]*m//g' "$out" >"$out.plain"
mv "$out.plain" "$out"
count() { grep -cE "^[^[:space:]]+ +$1\$" "$out" || true; }
passed=$(count ok)
failed=$(count FAILED)
skipped=$(count skipped)
xfail=$(count 'failed as expected')
xpass=$(count 'PASSED UNEXPECTEDLY')
summary=$(grep '^Summary:' "$out" || true)
if [ -z "$summary" ]; then
    echo "pjdfstest.sh: pjdfstest stopped before its summary (exit $status); the end of $out:" >&2
    tail -n 20 "$out" >&2
    exit 2
fi

echo "pjdfstest on $DIR ($(stat -f -c %T "$DIR")): $passed passed, $failed failed, $skipped skipped, $xfail failed as expected, $xpass passed unexpectedly"
echo "($summary)"
if [ "$failed" -gt 0 ] || [ "$xpass" -gt 0 ]; then
    echo "Failed:"
    # Each failing case with the first line of its message.
    awk '/ FAILED$/ { name = $1; getline msg; sub(/^\t/, "", msg); print "  " name ": " msg }
         / PASSED UNEXPECTEDLY$/ { print "  " $1 ": passed, but is listed as expected to fail" }' "$out"
fi
if [ "$skipped" -gt 0 ]; then
    echo "Skipped, by reason:"
    awk '/ skipped$/ { getline reason; sub(/^\t/, "", reason); n[reason]++ }
         END { for (r in n) printf "  %4d  %s\n", n[r], r }' "$out" | sort -rn
fi
echo "Full output: $out"
[ "$failed" -eq 0 ] && [ "$xpass" -eq 0 ]
