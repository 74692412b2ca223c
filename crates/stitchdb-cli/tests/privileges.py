"""privileges.py DIR: what writes, truncates and chown take away from a file in DIR.

Run as root. For each case a file gets a mode, a group and a security.capability attribute
(as root), then a writer (root, or uid/gid 65534 in or out of the file's group) writes or
truncates it, or root chowns it; the script prints the mode and whether the capability is
left. The output of two directories is compared: the mount must answer as the host's ext4.
"""

import os
import struct
import sys

root = sys.argv[1]
path = os.path.join(root, "priv")
# A valid (empty) VFS_CAP_REVISION_2 capability set: the kernel checks the format.
CAPS = struct.pack("<IIIII", 0x02000000, 0, 0, 0, 0)
NOBODY = 65534


def prepare(mode, gid):
    if not os.path.exists(path):
        os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))
    os.chown(path, 0, gid)
    os.chmod(path, mode)
    os.setxattr(path, "security.capability", CAPS)


def as_user(uid, gid, groups, action):
    """Runs action() in a child with these credentials; returns its exit status."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups(groups)
            os.setgid(gid)
            os.setuid(uid)
            action()
            os._exit(0)
        except OSError as e:
            print(f"  child error: {e.strerror}", flush=True)
            os._exit(1)
    return os.waitpid(pid, 0)[1]


def write():
    fd = os.open(path, os.O_WRONLY)
    os.write(fd, b"x")
    os.close(fd)


def truncate():
    os.truncate(path, 1)


def state():
    mode = os.stat(path).st_mode & 0o7777
    try:
        os.getxattr(path, "security.capability")
        caps = "caps kept"
    except OSError:
        caps = "caps gone"
    return f"{mode:04o} {caps}"


writers = {
    "root": (0, 0, []),
    "other in group": (NOBODY, NOBODY, [1000]),
    "other outside": (NOBODY, NOBODY, []),
}
for mode in (0o6777, 0o6767, 0o4757):
    for gid in (1000, 2000):
        for who, (uid, wgid, groups) in writers.items():
            for name, action in (("write", write), ("truncate", truncate)):
                prepare(mode, gid)
                status = as_user(uid, wgid, groups, action)
                print(f"{name} by {who} of {mode:04o} group {gid}: exit {status}, {state()}")
for mode in (0o6777, 0o6767):
    prepare(mode, 1000)
    os.chown(path, NOBODY, -1)
    print(f"chown by root of {mode:04o}: {state()}")
