#!/usr/bin/env python3
"""Run StitchDB (`stitchdb bench`) and RocksDB (db_bench, or bench/rocksdb_driver for the
VT-tree paper's randomappend and seqinsert) on the same workloads, one process after the
other, and print a Markdown table of throughput, write amplification and peak memory. With
--rounds N every process runs N times (round after round, the two tools alternating) and the
table gives medians: on a shared virtual machine one run can be far off the next.

Every row names its durability pair (--durability): both tools are given the same db_bench
flags, which `stitchdb bench` maps to the StitchDB level that loses what RocksDB loses:
  async    StitchDB Async   / RocksDB --disable_wal=1   (a process crash may lose recent writes)
  written  StitchDB Written / RocksDB --sync=0, WAL on  (a process crash loses nothing; power
                                                         loss may lose recent writes)
  sync     StitchDB Sync    / RocksDB --sync=1          (nothing acknowledged is ever lost)
A db_bench that warns "Assertions are enabled" (a debug build) is refused.

Write amplification is given twice: from /proc/PID/io (what the kernel charged the process,
which is a whole page-cache folio when one block of it is dirtied, so rewriting cached files
overcounts), and from the block device's own counter (bytes written while the process ran, and
by a sync after it; every writer on the machine counts, so run it on an otherwise idle one).

Normally started by bench/compare.sh, which installs and builds what this needs. Python 3
standard library only. See docs/benchmarks.md.
"""

import argparse
import datetime
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass, field

# Benchmarks each tool runs in a process of its own on an empty store.
FILLS = ("fillseq", "fillrandom")
VT_TREE = ("randomappend", "seqinsert")
# Need a filled store: run after `fillrandom` in the same process, as db_bench users do.
READS = ("readrandom", "seekrandom", "readseq", "readreverse")
UPDATES = ("overwrite", "deleterandom")
KNOWN = FILLS + VT_TREE + READS + UPDATES
DEFAULT_BENCHMARKS = ",".join(FILLS + UPDATES[:1] + READS[:3] + UPDATES[1:] + VT_TREE)

# --durability name -> (the db_bench flags both tools get, the pair as the table names it).
DURABILITY = {
    "async": (["--sync=0", "--disable_wal=1"], "Async / --disable_wal=1"),
    "written": (["--sync=0", "--disable_wal=0"], "Written / --sync=0 (WAL written)"),
    "sync": (["--sync=1", "--disable_wal=0"], "Sync / --sync=1"),
}

# db_bench's result line: `name : 1.234 micros/op 5678 ops/sec 1.000 seconds 5678 operations;...`
RESULT = re.compile(r"^(\w+)\s+:\s+[\d.]+ micros/op (\d+) ops/sec [\d.]+ seconds (\d+) operations;")
MIB = 1 << 20


@dataclass
class Process:
    """One run of one tool: what it was asked to do and what it cost."""

    tool: str
    benchmarks: list
    command: list = field(default_factory=list)
    ops_per_sec: dict = field(default_factory=dict)  # benchmark -> ops/s (None: not run)
    device_bytes: int = 0
    block_bytes: int = None  # bytes the block layer wrote meanwhile (None: no block device)
    peak_bytes: int = 0


@dataclass
class Group:
    """The benchmarks both tools run in one process each, and which rows they report."""

    name: str
    benchmarks: list
    reported: list
    inserted_bytes: int  # logical bytes the process writes (W-amp's denominator)
    durability: str = "written"
    uses_driver: bool = False
    runs: dict = field(default_factory=dict)  # tool -> [Process], one per round


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--num", type=int, default=1_000_000, help="keys per benchmark (default 1000000)")
    p.add_argument("--value_size", type=int, default=100, help="bytes per value (default 100)")
    p.add_argument("--key_size", type=int, default=16, help="bytes per key (default 16)")
    p.add_argument("--benchmarks", default=DEFAULT_BENCHMARKS,
                   help=f"comma-separated, from: {', '.join(KNOWN)}\n(default {DEFAULT_BENCHMARKS})")
    p.add_argument("--write_buffer_size", type=int, default=8 * MIB,
                   help="memtable bytes, both tools (default 8 MiB, the VT-tree paper's)")
    p.add_argument("--cache_size", type=int, default=8 * MIB,
                   help="bytes of cached blocks, both tools (default 8 MiB, db_bench's)")
    p.add_argument("--bloom_bits", type=int, default=10,
                   help="RocksDB only: Bloom filter bits per key (default 10, about 1%% false\n"
                        "positives, as StitchDB's quotient filters; 0: none, db_bench's default)")
    p.add_argument("--durability", default="written",
                   help="comma-separated durability pairs to run the write benchmarks with, from\n"
                        "async, written, sync (see above; default written). Read benchmarks run\n"
                        "once, after a fill with the first")
    p.add_argument("--seed", type=int, default=42, help="random seed, both tools (default 42)")
    p.add_argument("--stitch_threshold",
                   help="StitchDB only (RocksDB has no counterpart): the VT-tree stitching threshold,\n"
                        "bytes or 'never' (default StitchDB's, 64 KiB)")
    p.add_argument("--level_runs", type=int,
                   help="StitchDB only: runs a level holds before they merge, the fan-out\n"
                        "(default StitchDB's, 2)")
    p.add_argument("--rounds", type=int, default=1,
                   help="run every process this many times and report medians (default 1)")
    p.add_argument("--out", help="also write the table (with the command and date) to this file")
    p.add_argument("--workdir", default="target/bench",
                   help="where the stores, logs and plots go; must be on the disk being measured,\n"
                        "not tmpfs (default target/bench)")
    p.add_argument("--stitchdb", default="target/release/stitchdb", help="the stitchdb binary")
    p.add_argument("--db_bench", default=shutil.which("db_bench") or "db_bench", help="RocksDB's db_bench")
    p.add_argument("--driver", default="target/bench/rocksdb_driver", help="the built bench/rocksdb_driver.cc")
    args = p.parse_args(argv)
    args.benchmarks = [b for b in args.benchmarks.split(",") if b]
    args.durability = [d for d in args.durability.split(",") if d]
    if not args.durability or any(d not in DURABILITY for d in args.durability):
        p.error(f"--durability: a list from {', '.join(DURABILITY)}")
    unknown = [b for b in args.benchmarks if b not in KNOWN]
    if unknown or not args.benchmarks:
        p.error(f"unknown benchmarks {unknown}; known: {', '.join(KNOWN)}")
    if args.num < 1 or args.rounds < 1 or args.value_size < 0 or args.key_size < 8:
        p.error("--num and --rounds must be positive, --value_size non-negative, "
                "--key_size at least 8")
    return args


def plan(args):
    """Groups the benchmarks into processes: fills and VT-tree workloads alone on an empty
    store, every read after one fillrandom, each update after its own fillrandom."""
    entry = args.key_size + args.value_size
    fill = args.num * entry
    groups, reads = [], None
    for d in args.durability:
        for b in args.benchmarks:
            name = f"{b}-{d}"
            if b in FILLS or b in VT_TREE:
                groups.append(Group(name, [b], [b], fill, d, uses_driver=b in VT_TREE))
            elif b == "overwrite":
                groups.append(Group(name, ["fillrandom", b], [b], 2 * fill, d))
            elif b == "deleterandom":
                groups.append(Group(name, ["fillrandom", b], [b], fill + args.num * args.key_size, d))
            elif d != args.durability[0]:
                continue
            elif reads is None:
                reads = Group(f"reads-{d}", ["fillrandom", b], [b], fill, d)
                groups.append(reads)
            elif b not in reads.reported:
                reads.benchmarks.append(b)
                reads.reported.append(b)
    return groups


def common_flags(args, group, db):
    """The db_bench flags both tools get, identically."""
    benchmarks = group.benchmarks
    return DURABILITY[group.durability][0] + [
        f"--benchmarks={','.join(benchmarks)}",
        f"--num={args.num}",
        f"--value_size={args.value_size}",
        f"--key_size={args.key_size}",
        f"--write_buffer_size={args.write_buffer_size}",
        f"--cache_size={args.cache_size}",
        f"--seed={args.seed}",
        f"--db={db}",
    ]


def commands(args, group):
    """(tool, command line) for each side of `group`, each on a fresh store."""
    base = os.path.join(args.workdir, group.name)
    stitch = [args.stitchdb, "bench"] + common_flags(args, group, base + ".stitchdb")
    stitch.append(f"--plot={base}-figure5.svg")
    if args.stitch_threshold is not None:
        stitch.append(f"--stitch_threshold={args.stitch_threshold}")
    if args.level_runs is not None:
        stitch.append(f"--level_runs={args.level_runs}")
    if group.uses_driver:
        rocks = [args.driver] + common_flags(args, group, base + ".rocksdb")
    else:
        # db_bench compresses with snappy by default; StitchDB does not compress at all.
        rocks = [args.db_bench] + common_flags(args, group, base + ".rocksdb")
        rocks.append("--compression_type=none")
    # StitchDB's runs always have filters; without one RocksDB would search every level.
    rocks.append(f"--bloom_bits={args.bloom_bits}")
    return [("StitchDB", stitch), ("RocksDB", rocks)]


def remove_store(path):
    if os.path.isdir(path):
        shutil.rmtree(path)
    elif os.path.exists(path):
        os.remove(path)


def run_measured(command, log_path):
    """Runs `command`; returns (stdout, device bytes written, peak RSS bytes).

    The exited child is inspected before it is reaped (waitid with WNOWAIT), while
    /proc/PID/io still holds its totals; wait4 then reaps it and gives its peak RSS
    (ru_maxrss, the kernel's high-water mark, i.e. VmHWM at exit)."""
    with open(log_path, "wb") as log:
        child = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log)
        out = child.stdout.read().decode(errors="replace")
        child.stdout.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)
        device = device_bytes(child.pid)
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        log.write(out.encode())
    if child.returncode != 0:
        sys.exit(f"compare: {shlex.join(command)} failed with status {child.returncode}; see {log_path}")
    return out, device, usage.ru_maxrss * 1024


def device_bytes(pid):
    """Bytes the process sent toward the device: write_bytes less cancelled_write_bytes
    (dirty page-cache data of files deleted or truncated before writeback never lands)."""
    fields = {}
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = int(value)
    return fields["write_bytes"] - fields["cancelled_write_bytes"]


def block_stat_path(path):
    """The kernel's I/O counters of the block device holding `path` (None on tmpfs and other
    file systems without one)."""
    st = os.stat(path)
    stat = f"/sys/dev/block/{os.major(st.st_dev)}:{os.minor(st.st_dev)}/stat"
    return stat if os.path.exists(stat) else None


def block_bytes_written(stat):
    """Bytes written to the block device so far (field 7 counts 512-byte sectors)."""
    with open(stat) as f:
        return int(f.read().split()[6]) * 512


def parse_results(out):
    """benchmark -> ops/s from db_bench-style result lines (not-supported lines have none)."""
    results = {}
    for line in out.splitlines():
        m = RESULT.match(line)
        if m:
            results[m.group(1)] = int(m.group(2))
    return results


def run_all(args, groups):
    os.makedirs(args.workdir, exist_ok=True)
    for round_no in range(1, args.rounds + 1):
        if args.rounds > 1:
            print(f"# round {round_no} of {args.rounds}", flush=True)
        for group in groups:
            for tool, command in commands(args, group):
                group.runs.setdefault(tool, []).append(run_process(args, group, tool, command))


def run_process(args, group, tool, command):
    """Runs one tool's process of `group` on a fresh store and measures it."""
    db = next(a for a in command if a.startswith("--db=")).split("=", 1)[1]
    remove_store(db)
    # Start each process with no one else's dirty data waiting for writeback.
    os.sync()
    stat = block_stat_path(args.workdir)
    before = block_bytes_written(stat) if stat else None
    print(f"# {shlex.join(command)}", flush=True)
    log = os.path.join(args.workdir, f"{group.name}.{tool.lower()}.log")
    out, device, peak = run_measured(command, log)
    # What the process left dirty lands too: it would, after any run.
    os.sync()
    block = block_bytes_written(stat) - before if stat else None
    for line in out.splitlines():
        if RESULT.match(line) or "not supported" in line:
            print(f"  {tool:<9} {line}", flush=True)
    remove_store(db)
    return Process(tool, group.benchmarks, command, parse_results(out), device, block, peak)


def median(values):
    """The median of the values that are not None (None if there are none)."""
    values = sorted(v for v in values if v is not None)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def table(args, groups):
    ranges = args.rounds > 1
    rows = [
        "| benchmark | durability (StitchDB / RocksDB) | StitchDB ops/s | RocksDB ops/s | ratio "
        + ("| ratio range " if ranges else "")
        + "| StitchDB W-amp | RocksDB W-amp "
        "| StitchDB W-amp (block) | RocksDB W-amp (block) | StitchDB peak MiB | RocksDB peak MiB |",
        "| --- | --- | ---: | ---: | ---: " + ("| ---: " if ranges else "") + "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for group in groups:
        s, r = group.runs["StitchDB"], group.runs["RocksDB"]
        for b in group.reported:
            so = median(p.ops_per_sec.get(b) for p in s)
            ro = median(p.ops_per_sec.get(b) for p in r)
            # Each round's ratio (its two processes ran back to back), then their median.
            ratios = [p.ops_per_sec[b] / q.ops_per_sec[b] for p, q in zip(s, r)
                      if p.ops_per_sec.get(b) and q.ops_per_sec.get(b)]
            ratio = f"{median(ratios):.2f}" if ratios else "–"
            spread = f"{min(ratios):.2f}–{max(ratios):.2f}" if ratios else "–"
            writes = b not in READS

            def amp(runs, attr):
                return wamp(median(getattr(p, attr) for p in runs), group) if writes else "–"

            rows.append(
                f"| {b} | {DURABILITY[group.durability][1]} "
                f"| {round(so) if so is not None else 'not supported'} "
                f"| {round(ro) if ro is not None else '–'} | {ratio} "
                + (f"| {spread} " if ranges else "")
                + f"| {amp(s, 'device_bytes')} | {amp(r, 'device_bytes')} "
                f"| {amp(s, 'block_bytes')} | {amp(r, 'block_bytes')} "
                f"| {max(p.peak_bytes for p in s) / MIB:.0f} | {max(p.peak_bytes for p in r) / MIB:.0f} |"
            )
    return "\n".join(rows)


def wamp(written, group):
    """Bytes written per byte inserted ("–" when not measured)."""
    return "–" if written is None else f"{written / group.inserted_bytes:.3f}"


def describe(args, groups):
    """What was run, for the record above the table."""
    when = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    rerun = (f"bash bench/compare.sh --num {args.num} --value_size {args.value_size} "
             f"--key_size {args.key_size} --write_buffer_size {args.write_buffer_size} "
             f"--cache_size {args.cache_size} --bloom_bits {args.bloom_bits} "
             f"--durability {','.join(args.durability)} --seed {args.seed} "
             f"--benchmarks {','.join(args.benchmarks)} "
             f"--rounds {args.rounds}")
    for flag in ("stitch_threshold", "level_runs"):
        if getattr(args, flag) is not None:
            rerun += f" --{flag} {getattr(args, flag)}"
    lines = [
        f"Measured {when} on {platform.node()} ({os.cpu_count()} CPUs, "
        f"{platform.system()} {platform.release()}), {args.rocksdb_version} "
        "(release build), with:",
        "",
        f"    {rerun}",
        "",
        f"Processes (one after the other, each on a fresh store; {args.rounds} round(s), "
        "medians reported):",
        "",
    ]
    for group in groups:
        for process in (runs[0] for runs in group.runs.values()):
            shown = [os.path.basename(process.command[0])]
            shown += [a.replace(args.workdir, "WORKDIR") for a in process.command[1:]]
            lines.append(f"- {process.tool}: `{shlex.join(shown)}`")
    return "\n".join(lines)


def release_build(args):
    """The version line of db_bench's header; exits if db_bench is a debug build (it warns
    "Assertions are enabled; benchmarks unnecessarily slow"), which is slower than a release
    build and says nothing about RocksDB's speed."""
    probe = os.path.join(args.workdir, "db_bench-probe")
    remove_store(probe)
    os.makedirs(args.workdir, exist_ok=True)
    run = subprocess.run([args.db_bench, "--benchmarks=fillseq", "--num=10", f"--db={probe}",
                          "--compression_type=none"],
                         capture_output=True, text=True)
    remove_store(probe)
    out = run.stdout + run.stderr
    if run.returncode != 0:
        sys.exit(f"compare: {args.db_bench} failed (status {run.returncode}):\n{out}")
    if "Assertions are enabled" in out:
        sys.exit(f"compare: {args.db_bench} is a debug build (\"Assertions are enabled\"); "
                 "build a release one with bench/build-rocksdb.sh")
    version = next((line.strip() for line in out.splitlines() if line.startswith("RocksDB:")), None)
    return version or "RocksDB: version unknown"


def main(argv):
    args = parse_args(argv)
    args.rocksdb_version = release_build(args)
    print(f"# db_bench: {args.db_bench} ({args.rocksdb_version})", flush=True)
    groups = plan(args)
    run_all(args, groups)
    result = table(args, groups)
    if all(p.device_bytes == 0 for g in groups for runs in g.runs.values() for p in runs):
        print(f"compare: no process wrote to a device: is {args.workdir} on tmpfs?", file=sys.stderr)
    print()
    print(result)
    if args.out:
        with open(args.out, "w") as f:
            f.write(describe(args, groups) + "\n\n" + result + "\n")
        print(f"\n(written to {args.out})")


if __name__ == "__main__":
    main(sys.argv[1:])
