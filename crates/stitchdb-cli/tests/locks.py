#!/usr/bin/env python3
"""Lock contention in a directory: prints one line per observation, to compare two file systems.

Usage: locks.py DIR. Two processes (this one and a forked child) contend for POSIX record locks
(F_SETLK, F_SETLKW, F_GETLK), open-file-description locks (F_OFD_*) and flock(2) locks on a
file in DIR, and the `flock` command contends with them. Every line is deterministic: the
process ids in F_GETLK answers are printed as "holder" or "other", never as numbers.
"""

import errno
import fcntl
import os
import struct
import subprocess
import sys
import time

FLOCK = "hhqqi"  # struct flock on Linux x86_64/aarch64: type, whence, start, len, pid


def flock_struct(kind, start, length, pid=0):
    return struct.pack(FLOCK, kind, os.SEEK_SET, start, length, pid)


def setlk(fd, cmd, kind, start, length):
    """An F_SETLK-like call: 'ok' or the errno's name."""
    try:
        fcntl.fcntl(fd, cmd, flock_struct(kind, start, length))
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def getlk(fd, cmd, kind, start, length, holder_pid):
    """An F_GETLK-like call: what blocks the lock, with the holder named by role."""
    out = fcntl.fcntl(fd, cmd, flock_struct(kind, start, length))
    t, _, s, n, pid = struct.unpack(FLOCK, out)
    if t == fcntl.F_UNLCK:
        return "unlocked"
    who = {holder_pid: "holder", -1: "ofd"}.get(pid, "other")
    return f"type={t} start={s} len={n} by={who}"


def flock_try(fd, op):
    try:
        fcntl.flock(fd, op | fcntl.LOCK_NB)
        return "ok"
    except OSError as e:
        return errno.errorcode[e.errno]


def flock_command(path):
    """The flock(1) command's exit status when trying the lock without waiting."""
    return subprocess.run(["flock", "-n", path, "true"]).returncode


def waiter(path, kind):
    """Whether /proc/locks shows a process blocked on a `kind` lock of the file (10 s at most):
    the kernel lists the locks it keeps, waiters marked '->'."""
    ino = os.stat(path).st_ino
    for _ in range(1000):
        with open("/proc/locks") as f:
            for line in f:
                fields = line.split()
                if "->" in fields and kind in fields and any(x.endswith(f":{ino}") for x in fields):
                    return "yes"
        time.sleep(0.01)
    return "no"


def main():
    d = sys.argv[1]
    path = os.path.join(d, "locked")
    with open(path, "wb") as f:
        f.write(b"x" * 4096)
    lines = []
    say = lines.append
    to_child_r, to_child_w = os.pipe()
    to_parent_r, to_parent_w = os.pipe()

    def wait_for(r):
        """Reads one message (see `send`)."""
        got = b""
        while len(got) < 16:
            part = os.read(r, 16 - len(got))
            if not part:
                break
            got += part
        return got.decode().strip()

    def send(w, msg):
        os.write(w, msg.ljust(16))

    parent_pid = os.getpid()
    pid = os.fork()
    if pid == 0:
        # The child: contends with what the parent holds, reporting to the parent.
        os.close(to_child_w)
        os.close(to_parent_r)
        fd = os.open(path, os.O_RDWR)
        report = []
        wait_for(to_child_r)  # the parent holds a write lock on 0..100
        report.append("posix write 50..60: " + setlk(fd, fcntl.F_SETLK, fcntl.F_WRLCK, 50, 10))
        report.append("posix read 50..60: " + setlk(fd, fcntl.F_SETLK, fcntl.F_RDLCK, 50, 10))
        report.append("posix getlk 50..60: " + getlk(fd, fcntl.F_GETLK, fcntl.F_WRLCK, 50, 10, parent_pid))
        report.append("posix write 200..300: " + setlk(fd, fcntl.F_SETLK, fcntl.F_WRLCK, 200, 100))
        report.append("posix getlk whole file: " + getlk(fd, fcntl.F_GETLK, fcntl.F_RDLCK, 0, 0, parent_pid))
        report.append("ofd write 0..10: " + setlk(fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, 0, 10))
        report.append("flock ex: " + flock_try(fd, fcntl.LOCK_EX))
        report.append("flock sh: " + flock_try(fd, fcntl.LOCK_SH))
        send(to_parent_w, b"tried")
        wait_for(to_child_r)  # the parent is about to release everything
        # Blocks until the parent's unlock: the parent said so before unlocking.
        report.append("posix setlkw 0..100: " + setlk(fd, fcntl.F_SETLKW, fcntl.F_WRLCK, 0, 100))
        fcntl.flock(fd, fcntl.LOCK_EX)
        report.append("flock ex (waiting): ok")
        send(to_parent_w, b"holding")
        wait_for(to_child_r)  # the parent tries while the child holds
        os.close(fd)  # closing releases the child's POSIX and flock locks
        send(to_parent_w, b"closed")
        os.write(to_parent_w, ("\n".join(report)).encode().ljust(4096))
        os._exit(0)

    os.close(to_child_r)
    os.close(to_parent_w)
    fd = os.open(path, os.O_RDWR)
    say("posix write 0..100: " + setlk(fd, fcntl.F_SETLK, fcntl.F_WRLCK, 0, 100))
    say("flock ex: " + flock_try(fd, fcntl.LOCK_EX))
    # A second description of the file in this process: OFD locks conflict across
    # descriptions, POSIX locks of one process never conflict.
    fd2 = os.open(path, os.O_RDWR)
    say("ofd write 500..600 (first open): " + setlk(fd, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, 500, 100))
    say("ofd write 550..560 (second open): " + setlk(fd2, fcntl.F_OFD_SETLK, fcntl.F_WRLCK, 550, 10))
    say("ofd getlk 550..560 (second open): " + getlk(fd2, fcntl.F_OFD_GETLK, fcntl.F_WRLCK, 550, 10, parent_pid))
    say("posix write 50..60 (second open, same process): " + setlk(fd2, fcntl.F_SETLK, fcntl.F_WRLCK, 50, 10))
    say("flock ex (second open): " + flock_try(fd2, fcntl.LOCK_EX))
    say("flock command while held: exit " + str(flock_command(path)))
    send(to_child_w, b"go")
    wait_for(to_parent_r)
    send(to_child_w, b"releasing")
    say("child waits for the posix lock: " + waiter(path, "POSIX"))
    setlk(fd, fcntl.F_SETLK, fcntl.F_UNLCK, 0, 0)
    setlk(fd, fcntl.F_OFD_SETLK, fcntl.F_UNLCK, 0, 0)
    os.close(fd2)
    say("child waits for the flock lock: " + waiter(path, "FLOCK"))
    fcntl.flock(fd, fcntl.LOCK_UN)
    wait_for(to_parent_r)
    say("posix write 0..10 while the child holds: " + setlk(fd, fcntl.F_SETLK, fcntl.F_WRLCK, 0, 10))
    say("flock ex while the child holds: " + flock_try(fd, fcntl.LOCK_EX))
    say("flock command while the child holds: exit " + str(flock_command(path)))
    send(to_child_w, b"close")
    wait_for(to_parent_r)
    child = b""
    while len(child) < 4096:
        part = os.read(to_parent_r, 4096 - len(child))
        if not part:
            break
        child += part
    os.waitpid(pid, 0)
    say("posix write 0..10 after the child closed: " + setlk(fd, fcntl.F_SETLK, fcntl.F_WRLCK, 0, 10))
    say("flock ex after the child closed: " + flock_try(fd, fcntl.LOCK_EX))
    os.close(fd)
    say("flock command after all closed: exit " + str(flock_command(path)))
    for line in child.decode().rstrip().splitlines():
        say("child " + line)
    print("\n".join(lines))


main()
