#!/usr/bin/env python3
"""StitchDB's Redis surface (`stitchdb serve`) against redis-server, side by side in one run.

Each side is started on a fresh directory, measured with `redis-benchmark` (the same binary
for every side), and stopped; sides alternate round by round. Prints a markdown table of
requests per second and the ratios the issue's targets name, then peak memory after loading
`--keys` keys through `redis-cli --pipe`.

Sides (durability pairs):
  redis-mem       redis-server, no persistence (`--save '' --appendonly no`)
  redis-everysec  `appendonly yes, appendfsync everysec`: up to a second of writes lost
  redis-always    `appendonly yes, appendfsync always`: every acknowledged write durable
  stitchdb-sync   `stitchdb serve` at its default: every acknowledged write durable
  stitchdb-written `stitchdb serve --durability written`: a process crash loses nothing,
                  power loss may lose the newest writes (fewer than everysec's second)
"""

import argparse
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

SIDES = ["redis-mem", "redis-everysec", "redis-always", "stitchdb-sync", "stitchdb-written"]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_ready(port, proc, timeout=60):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode}")
        try:
            out = subprocess.run(["redis-cli", "-p", str(port), "PING"], capture_output=True,
                                 text=True, timeout=5)
            if "PONG" in out.stdout:
                return
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.1)
    raise RuntimeError("server did not answer PING")


class Side:
    def __init__(self, name, stitchdb, workdir):
        self.name, self.stitchdb = name, stitchdb
        self.dir = tempfile.mkdtemp(prefix=name + "-", dir=workdir)
        self.port = free_port()
        self.proc = None

    def start(self):
        if self.name.startswith("redis"):
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1",
                   "--dir", self.dir, "--save", "", "--daemonize", "no", "--logfile", ""]
            if self.name == "redis-mem":
                cmd += ["--appendonly", "no"]
            else:
                fsync = "always" if self.name == "redis-always" else "everysec"
                cmd += ["--appendonly", "yes", "--appendfsync", fsync]
        else:
            cmd = [self.stitchdb, "serve", os.path.join(self.dir, "store"), "--create",
                   "--port", str(self.port)]
            if self.name == "stitchdb-written":
                cmd += ["--durability", "written"]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(self.port, self.proc)

    def peak_kib(self):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
        return 0

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.dir, ignore_errors=True)


def bench(port, tests, requests, clients, pipeline, keyspace, size):
    cmd = ["redis-benchmark", "-p", str(port), "-t", ",".join(tests), "-n", str(requests),
           "-c", str(clients), "-P", str(pipeline), "-d", str(size), "--csv"]
    if keyspace:
        cmd += ["-r", str(keyspace)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    rps = {}
    for line in out.splitlines():
        m = re.match(r'"([^"]+)","([0-9.]+)"', line)
        if m:
            # "LPUSH (needed to benchmark LPOP)" and the like: the command is the first word.
            rps[m.group(1).split()[0]] = float(m.group(2))
    return rps


def load_keys(port, keys, size):
    """Loads `keys` distinct keys of `size`-byte values through `redis-cli --pipe`."""
    value = "v" * size
    data = "".join(
        f"*3\r\n$3\r\nSET\r\n${len(k)}\r\n{k}\r\n${size}\r\n{value}\r\n"
        for k in (f"key:{i:010d}" for i in range(keys)))
    out = subprocess.run(["redis-cli", "-p", str(port), "--pipe"], input=data.encode(),
                         capture_output=True, check=True).stdout.decode()
    if "errors: 0" not in out:
        raise RuntimeError(f"--pipe load failed: {out}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--stitchdb", default="target/release/stitchdb")
    p.add_argument("--sides", default=",".join(SIDES))
    p.add_argument("--tests", default="set,get,incr,lpush,hset,zadd")
    p.add_argument("--requests", type=int, default=200000)
    p.add_argument("--clients", type=int, default=50)
    p.add_argument("--pipelines", default="1,16")
    p.add_argument("--keyspace", type=int, default=0,
                   help="redis-benchmark -r: random keys (0: its fixed keys, as the issue's command)")
    p.add_argument("--size", type=int, default=3, help="value bytes (redis-benchmark -d)")
    p.add_argument("--rounds", type=int, default=1)
    p.add_argument("--keys", type=int, default=1000000, help="keys loaded for peak memory (0: skip)")
    p.add_argument("--key-size", type=int, default=100, help="value bytes of the loaded keys")
    p.add_argument("--workdir", default="target/bench-redis")
    a = p.parse_args()
    os.makedirs(a.workdir, exist_ok=True)
    sides = a.sides.split(",")
    tests = a.tests.split(",")
    pipelines = [int(x) for x in a.pipelines.split(",")]
    results = {}  # (side, test, pipeline) -> [rps]
    for r in range(a.rounds):
        for side in (sides if r % 2 == 0 else list(reversed(sides))):
            for pl in pipelines:
                s = Side(side, a.stitchdb, a.workdir)
                try:
                    s.start()
                    got = bench(s.port, tests, a.requests, a.clients, pl, a.keyspace, a.size)
                finally:
                    s.stop()
                for t, v in got.items():
                    results.setdefault((side, t, pl), []).append(v)
                print(f"round {r + 1} {side} -P {pl}: " +
                      ", ".join(f"{t} {v:,.0f}" for t, v in got.items()), file=sys.stderr)
    med = {k: statistics.median(v) for k, v in results.items()}
    names = sorted({t for (_, t, _) in med}, key=lambda t: [x.upper() for x in tests].index(t)
                   if t in [x.upper() for x in tests] else 99)
    print(f"\nredis-benchmark -c {a.clients} -n {a.requests} -d {a.size}"
          + (f" -r {a.keyspace}" if a.keyspace else "") + f", median of {a.rounds} round(s), requests/s\n")
    print("| test | -P | " + " | ".join(sides) + " | sync/always | written/everysec | sync/mem |")
    print("|---|---|" + "---|" * (len(sides) + 3))
    for t in names:
        for pl in pipelines:
            row = [med.get((s, t, pl)) for s in sides]

            def ratio(x, y):
                vx, vy = med.get((x, t, pl)), med.get((y, t, pl))
                return f"{vx / vy:.2f}x" if vx and vy else "-"
            cells = [f"{v:,.0f}" if v else "-" for v in row]
            print(f"| {t} | {pl} | " + " | ".join(cells) + " | "
                  + " | ".join([ratio("stitchdb-sync", "redis-always"),
                                ratio("stitchdb-written", "redis-everysec"),
                                ratio("stitchdb-sync", "redis-mem")]) + " |")
    if a.keys:
        print(f"\nPeak memory (VmHWM) after loading {a.keys:,} keys of {a.key_size} B "
              "with `redis-cli --pipe`:\n")
        print("| side | MiB | load s |")
        print("|---|---|---|")
        for side in sides:
            s = Side(side, a.stitchdb, a.workdir)
            try:
                s.start()
                t0 = time.time()
                load_keys(s.port, a.keys, a.key_size)
                took = time.time() - t0
                print(f"| {side} | {s.peak_kib() / 1024:,.0f} | {took:.1f} |")
            finally:
                s.stop()


if __name__ == "__main__":
    main()
