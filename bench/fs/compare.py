#!/usr/bin/env python3
"""KVFS against the host's ext4 and a FUSE passthrough (bindfs), side by side in one run.

Run through bench/fs/compare.sh, which installs fio, bindfs and the Linux source and builds
`stitchdb`; see docs/benchmarks.md ("KVFS") for what each phase does and the figures.

Every phase runs on every side before the next phase starts, the sides taking turns at going
first, so load from other processes on the machine falls on all of them alike; caches are
dropped before each phase on each side. Mounts made here are unmounted on every exit path.
"""

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import datetime, timezone

MIB = 1 << 20
GIB = 1 << 30


def parse_size(text):
    """Bytes from '2G', '512M', '64K' or a plain number."""
    units = {"K": 1 << 10, "M": MIB, "G": GIB}
    text = text.strip().upper()
    for suffix in ("IB", "B"):
        if text.endswith(suffix) and len(text) > len(suffix) and not text[-len(suffix) - 1].isdigit():
            text = text[: -len(suffix)]
            break
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


def log(msg):
    print(f"[{datetime.now(timezone.utc).strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd, **kw):
    log("$ " + " ".join(cmd))
    return subprocess.run(cmd, check=True, **kw)


def drop_caches():
    """Write back dirty pages, then drop the page, dentry and inode caches (needs root)."""
    os.sync()
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def is_mounted(path):
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == real for line in f)


def unmount(path):
    """Unmount a FUSE mount, falling back to umount(8), then to a lazy unmount."""
    for cmd in (["fusermount3", "-u", path], ["fusermount", "-u", path], ["umount", path], ["umount", "-l", path]):
        if not is_mounted(path):
            return
        if shutil.which(cmd[0]):
            subprocess.run(cmd, stderr=subprocess.DEVNULL)
            for _ in range(50):
                if not is_mounted(path):
                    return
                time.sleep(0.1)
    if is_mounted(path):
        log(f"WARNING: {path} is still mounted")


class Side:
    """One file system under test: a directory the phases work in."""

    def __init__(self, name, workdir):
        self.name = name
        self.root = os.path.join(workdir, name)
        self.dir = self.root
        self.mountpoint = None

    def setup(self, args):
        shutil.rmtree(self.root, ignore_errors=True)
        os.makedirs(self.dir, exist_ok=True)

    def teardown(self):
        if self.mountpoint:
            unmount(self.mountpoint)
        shutil.rmtree(self.root, ignore_errors=True)


class Bindfs(Side):
    def setup(self, args):
        shutil.rmtree(self.root, ignore_errors=True)
        src = os.path.join(self.root, "src")
        self.dir = os.path.join(self.root, "mnt")
        os.makedirs(src)
        os.makedirs(self.dir)
        self.mountpoint = self.dir
        run(["bindfs", src, self.dir])


class Kvfs(Side):
    def setup(self, args):
        shutil.rmtree(self.root, ignore_errors=True)
        self.store = os.path.join(self.root, "kvfs.store")
        self.dir = os.path.join(self.root, "mnt")
        os.makedirs(self.dir)
        run([args.stitchdb, "init", self.store], stdout=subprocess.DEVNULL)
        self.mountpoint = self.dir
        # The daemon's log, kept beside the side's directory: at unmount it says how much
        # the merges stitched and how long writers waited for the background work.
        self.log = self.root + "-daemon.log"
        with open(self.log, "w"):
            pass
        cmd = [args.stitchdb, "--log", "stitchdb_fuse=info", "mount", self.store, self.dir,
               "--log-file", self.log]
        if args.kvfs_options:
            cmd += ["-o", args.kvfs_options]
        run(cmd)

    def teardown(self):
        super().teardown()
        # The daemon writes its last line once it has closed the store.
        for _ in range(300):
            with open(self.log) as f:
                text = f.read()
            if "unmounted" in text:
                break
            time.sleep(0.1)
        for line in text.splitlines():
            if "unmounted" in line or "ERROR" in line or "WARN" in line:
                log(f"kvfs daemon: {line.split(': ', 1)[-1]}")

    def daemon_pid(self):
        """The pid of the daemon serving this mount (its command line names the store)."""
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    argv = f.read().split(b"\0")
            except OSError:
                continue
            if b"mount" in argv and self.store.encode() in argv:
                return int(pid)
        return None

    def settle(self):
        """Waits (up to two minutes) until the daemon's background work (merges after a
        phase's writes) is done: less than 2% of a CPU and less than 1 MiB read from or
        written to the disk over a second (a merge waiting for its direct writes uses little
        CPU). Returns the seconds waited, so no phase runs beside this side's deferred work,
        as none runs beside ext4's: `drop_caches` syncs first."""
        pid = self.daemon_pid()
        if pid is None:
            return 0.0
        tick = os.sysconf("SC_CLK_TCK")

        def usage():
            """(CPU seconds, bytes read and written by the disk) of the daemon so far."""
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                with open(f"/proc/{pid}/io") as f:
                    io = dict(line.split(": ") for line in f.read().splitlines())
                return ((int(fields[11]) + int(fields[12])) / tick,
                        int(io["read_bytes"]) + int(io["write_bytes"]))
            except (OSError, KeyError, ValueError):
                return None

        start = time.monotonic()
        while time.monotonic() - start < 120:
            before = usage()
            time.sleep(1)
            after = usage()
            if before is None or after is None:
                break
            if after[0] - before[0] < 0.02 and after[1] - before[1] < MIB:
                break
        return time.monotonic() - start


def fio(side, args, name, rw, bs, size, extra=()):
    """One fio job on side's file 'fio.dat'; returns (fio's JSON for the job, wall seconds)."""
    cmd = [
        "fio", f"--name={name}", f"--filename={os.path.join(side.dir, 'fio.dat')}",
        f"--rw={rw}", f"--bs={bs}", f"--size={size}", "--ioengine=psync", "--fallocate=none",
        "--randrepeat=1", "--output-format=json", *extra,
    ]
    start = time.monotonic()
    out = run(cmd, stdout=subprocess.PIPE, text=True).stdout
    wall = time.monotonic() - start
    # fio may print warnings before the JSON document.
    job = json.loads(out[out.index("{"):])["jobs"][0]
    return job, wall


def phase_seq_write(side, args):
    job, _ = fio(side, args, "seqwrite", "write", "1M", args.size, ["--end_fsync=1"])
    return job["write"]["bw_bytes"] / MIB


def phase_seq_read(side, args):
    job, _ = fio(side, args, "seqread", "read", "1M", args.size)
    return job["read"]["bw_bytes"] / MIB


def phase_rand_write_durable(side, args):
    job, _ = fio(side, args, "randwrite-fdatasync", "randwrite", "4k", args.rand_size,
                 ["--fdatasync=1", f"--runtime={args.runtime}"])
    return job["write"]["iops"]


def phase_rand_write_buffered(side, args):
    # Wall time, so the final fsync (the write-back of everything written) is counted.
    job, wall = fio(side, args, "randwrite-buffered", "randwrite", "4k", args.rand_size, ["--end_fsync=1"])
    return job["write"]["total_ios"] / wall


def phase_rand_read(side, args):
    job, _ = fio(side, args, "randread", "randread", "4k", args.size, [f"--runtime={args.runtime}"])
    return job["read"]["iops"]


def file_paths(side, args):
    per_dir = 1000
    for i in range(args.files):
        yield os.path.join(side.dir, "files", f"d{i // per_dir:04d}", f"f{i:06d}")


def phase_files_create(side, args):
    payload = b"x" * args.file_bytes
    start = time.monotonic()
    os.mkdir(os.path.join(side.dir, "files"))
    made = set()
    for path in file_paths(side, args):
        parent = os.path.dirname(path)
        if parent not in made:
            os.mkdir(parent)
            made.add(parent)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        if payload:
            os.write(fd, payload)
        os.close(fd)
    return time.monotonic() - start


def phase_files_stat(side, args):
    start = time.monotonic()
    for path in file_paths(side, args):
        os.stat(path)
    return time.monotonic() - start


def phase_files_delete(side, args):
    start = time.monotonic()
    parents = []
    for path in file_paths(side, args):
        parent = os.path.dirname(path)
        if not parents or parents[-1] != parent:
            parents.append(parent)
        os.unlink(path)
    for parent in parents:
        os.rmdir(parent)
    os.rmdir(os.path.join(side.dir, "files"))
    return time.monotonic() - start


def timed(cmd, shell=False):
    start = time.monotonic()
    log("$ " + (cmd if shell else " ".join(cmd)))
    subprocess.run(cmd, check=True, shell=shell)
    return time.monotonic() - start


def phase_untar(side, args):
    os.mkdir(os.path.join(side.dir, "src"))
    # The tarball lies on the host's disk: read it into the page cache first, so the phase
    # measures the side's writes, not the host's cold read of the tarball.
    with open(args.tarball, "rb") as f:
        while f.read(16 * MIB):
            pass
    return timed(["tar", "-xf", args.tarball, "-C", os.path.join(side.dir, "src")])


def phase_find(side, args):
    return timed(f"find {side.dir}/src | wc -l >/dev/null", shell=True)


def phase_read_all(side, args):
    return timed(f"find {side.dir}/src -type f -print0 | xargs -0 cat >/dev/null", shell=True)


def phase_rm(side, args):
    return timed(["rm", "-rf", os.path.join(side.dir, "src")])


def remove_fio_file(side, args):
    os.unlink(os.path.join(side.dir, "fio.dat"))


# (key, description, unit, function, clean-up after the phase on each side)
PHASES = [
    ("seqwrite", "fio sequential write, 1 MiB blocks, fsync at the end", "MiB/s", phase_seq_write, None),
    ("seqread", "fio sequential read, 1 MiB blocks, cold", "MiB/s", phase_seq_read, None),
    ("randwrite-durable", "fio random 4 KiB writes, fdatasync after each", "IOPS", phase_rand_write_durable, None),
    ("randwrite-buffered", "fio random 4 KiB writes, fsync at the end", "IOPS", phase_rand_write_buffered, None),
    ("randread", "fio random 4 KiB reads, cold", "IOPS", phase_rand_read, remove_fio_file),
    ("create", "files created", "s", phase_files_create, None),
    ("stat", "files stated, cold", "s", phase_files_stat, None),
    ("delete", "files deleted, cold", "s", phase_files_delete, None),
    ("untar", "untar of the Linux source", "s", phase_untar, None),
    ("find", "find over the tree, cold", "s", phase_find, None),
    ("readall", "every file read, cold", "s", phase_read_all, None),
    ("rm", "rm -rf of the tree, cold", "s", phase_rm, None),
]
FIO_PHASES = {"seqwrite", "seqread", "randwrite-durable", "randwrite-buffered", "randread"}
FILE_PHASES = {"create", "stat", "delete"}
TREE_PHASES = {"untar", "find", "readall", "rm"}


def fmt(value, unit):
    if value is None:
        return "-"
    if unit == "s":
        return f"{value:.2f}"
    return f"{value:,.0f}"


def table(results, sides, args):
    names = [s.name for s in sides]
    others = [n for n in names if n != "ext4"]
    head = ["phase", "unit"] + names + [f"{n} / ext4" for n in others if "ext4" in names]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for key, desc, unit, _, _ in PHASES:
        if key not in results:
            continue
        row = results[key]
        if key in FILE_PHASES:
            desc = f"{args.files:,} {desc}"
        cells = [desc, unit] + [fmt(row.get(n), unit) for n in names]
        if "ext4" in names:
            base = row.get("ext4")
            for n in others:
                v = row.get(n)
                cells.append(f"{v / base:.2f}x" if v is not None and base else "-")
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sides", default="ext4,bindfs,kvfs", help="comma-separated: ext4, bindfs, kvfs")
    p.add_argument("--workdir", required=True, help="a directory on the host's ext4")
    p.add_argument("--size", default="2G", help="fio sequential file size (default 2G)")
    p.add_argument("--rand-size", default="1G", help="span of the random writes (default 1G)")
    p.add_argument("--runtime", type=int, default=30, help="seconds cap of the durable writes and random reads")
    p.add_argument("--files", type=int, default=100_000, help="small files created, stated, deleted")
    p.add_argument("--file-bytes", type=int, default=0, help="bytes written into each small file")
    p.add_argument("--tarball", help="an uncompressed tar to untar (compare.sh makes one from linux-source-6.1)")
    p.add_argument("--phases", default="all", help="comma-separated subset: fio, files, tree or phase names")
    p.add_argument("--stitchdb", default="stitchdb", help="the stitchdb binary (for kvfs)")
    p.add_argument("--kvfs-options", default="", help="-o options for stitchdb mount")
    p.add_argument("--out", help="also write the table and the commands to this file")
    args = p.parse_args()

    if os.geteuid() != 0:
        sys.exit("compare.py: must run as root (drop_caches, mounts)")
    args.size = parse_size(args.size)
    args.rand_size = min(parse_size(args.rand_size), args.size)
    wanted = set()
    for item in args.phases.split(","):
        item = item.strip()
        wanted |= {"all": FIO_PHASES | FILE_PHASES | TREE_PHASES, "fio": FIO_PHASES,
                   "files": FILE_PHASES, "tree": TREE_PHASES}.get(item, {item})
    unknown = wanted - {k for k, *_ in PHASES}
    if unknown:
        sys.exit(f"compare.py: unknown phases {sorted(unknown)}")
    if wanted & TREE_PHASES and not args.tarball:
        sys.exit("compare.py: the tree phases need --tarball")
    if wanted & TREE_PHASES and not wanted >= {"untar", "rm"}:
        sys.exit("compare.py: the tree phases need untar and rm")
    if wanted & FILE_PHASES and not wanted >= {"create", "delete"}:
        sys.exit("compare.py: the file phases need create and delete")
    if wanted & (FIO_PHASES - {"seqwrite"}) and "seqwrite" not in wanted:
        sys.exit("compare.py: the fio phases need seqwrite (it writes their file)")
    if wanted & FIO_PHASES and "randread" not in wanted:
        wanted.add("randread")  # it removes the fio file
    phases = [ph for ph in PHASES if ph[0] in wanted]

    workdir = os.path.abspath(args.workdir)
    os.makedirs(workdir, exist_ok=True)
    kinds = {"ext4": Side, "bindfs": Bindfs, "kvfs": Kvfs}
    sides = []
    for name in args.sides.split(","):
        name = name.strip()
        if name not in kinds:
            sys.exit(f"compare.py: unknown side {name!r} (ext4, bindfs, kvfs)")
        sides.append(kinds[name](name, workdir))

    # Turn SIGTERM/SIGHUP into an exception so the finally below unmounts.
    def stop(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)

    started = datetime.now(timezone.utc)
    load_before = os.getloadavg()
    results = {}
    ready = []  # the sides set up, the only ones to tear down
    try:
        for side in sides:
            side.setup(args)
            ready.append(side)
        for i, (key, _desc, unit, func, cleanup) in enumerate(phases):
            order = sides[i % len(sides):] + sides[: i % len(sides)]
            results[key] = {}
            for side in order:
                for other in sides:
                    if isinstance(other, Kvfs):
                        waited = other.settle()
                        if waited > 1.5:
                            log(f"kvfs background work settled after {waited:.0f} s")
                drop_caches()
                value = func(side, args)
                results[key][side.name] = value
                log(f"{key} on {side.name}: {fmt(value, unit)} {unit}")
                if cleanup:
                    cleanup(side, args)
    finally:
        for side in ready:
            side.teardown()
    load_after = os.getloadavg()

    out = table(results, sides, args)
    setup = []
    if wanted & FIO_PHASES:
        setup.append(f"fio file {args.size // MIB} MiB, random writes over {args.rand_size // MIB} MiB, "
                     f"runtime cap {args.runtime} s")
    if wanted & FILE_PHASES:
        setup.append(f"{args.files:,} files of {args.file_bytes} bytes")
    header = (
        f"Run {started.strftime('%Y-%m-%d %H:%M UTC')}, kernel {os.uname().release}, "
        f"load average {load_before[0]:.1f} before and {load_after[0]:.1f} after"
        + "".join("; " + part for part in setup) + ".\n"
        f"Ratios: the side's figure divided by ext4's (MiB/s and IOPS: higher is better; "
        f"seconds: lower is better).\n"
    )
    print(header)
    print(out)
    if args.out:
        with open(args.out, "w") as f:
            f.write(header + "\n" + out + "\n\nCommand: `" + " ".join(sys.argv) + "`\n")


if __name__ == "__main__":
    main()
