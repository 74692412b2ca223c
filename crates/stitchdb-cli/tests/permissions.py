"""permissions.py DIR SEED ROUNDS [--no-special-opens]: permission decisions, call by call.

Run as root. Each round makes a small tree in DIR (as root) with random owners, groups and
modes (set-user-id, set-group-id and sticky bits among them), then makes random calls on it,
each from a forked child that first drops to one of several credential sets (uid, gid and
supplementary groups, some of them with no name on this machine). It prints one line per
call: the call, who made it, its errno (0 for success), and for a successful change the
owner, group and mode of what it changed. Two runs with the same seed on two directories
print the same lines exactly when the two file systems decide alike: the mount must answer
as the host's ext4.

--no-special-opens leaves out opens of FIFOs: a FUSE file system without the kernel's
default_permissions is never asked about them (the kernel opens special files itself).
"""

import ctypes
import errno
import os
import random
import stat
import sys

top = sys.argv[1]
seed = int(sys.argv[2])
rounds = int(sys.argv[3])
special_opens = "--no-special-opens" not in sys.argv[4:]
rng = random.Random(seed)

libc = ctypes.CDLL(None, use_errno=True)
UTIME_NOW = (1 << 30) - 1
UTIME_OMIT = (1 << 30) - 2
AT_FDCWD = -100


class Timespec(ctypes.Structure):
    _fields_ = [("sec", ctypes.c_long), ("nsec", ctypes.c_long)]


def utimensat(path, atime, mtime):
    times = (Timespec * 2)(Timespec(5, atime), Timespec(7, mtime))
    if libc.utimensat(AT_FDCWD, path.encode(), times, 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


# Who calls: (uid, gid, supplementary groups). 4242 and 4343 have no passwd or group entry.
CALLERS = [
    (0, 0, [0]),
    (1000, 1000, []),
    (1000, 1000, [2000]),
    (1001, 1001, [1000, 2000]),
    (1002, 2000, []),
    (4242, 4343, [1000]),
]
UIDS = [0, 1000, 1001, 4242]
GIDS = [0, 1000, 1001, 2000, 4343]
MODES = [0o755, 0o700, 0o750, 0o705, 0o711, 0o777, 0o1777, 0o2775, 0o2755, 0o604, 0o640,
         0o460, 0o066, 0o000, 0o644, 0o666, 0o4755, 0o6750, 0o2644, 0o1770, 0o300, 0o500]


PREFIX = {"dir": "d", "file": "f", "fifo": "p", "symlink": "l"}


def rand_mode():
    return rng.choice(MODES)


def build(root):
    """A fresh tree under root: directories, files, FIFOs and symlinks, random owners and
    modes. Returns the paths it made (relative to root)."""
    paths = []
    os.mkdir(root)
    os.chmod(root, 0o777)
    dirs = [""]
    for i in range(rng.randint(4, 8)):
        parent = rng.choice(dirs)
        kind = rng.choice(["dir", "dir", "file", "file", "file", "fifo", "symlink"])
        rel = os.path.join(parent, f"{PREFIX[kind]}{i}")
        full = os.path.join(root, rel)
        if kind == "dir":
            os.mkdir(full)
            dirs.append(rel)
        elif kind == "file":
            with open(full, "wb") as f:
                f.write(b"data")
        elif kind == "fifo":
            os.mkfifo(full)
        else:
            os.symlink(rng.choice(["f9", "../x", rel]), full)
        paths.append(rel)
    # Owners and modes last, deepest first, so that making the tree needed no permission.
    for rel in sorted(paths, key=lambda p: -p.count("/")):
        full = os.path.join(root, rel)
        os.lchown(full, rng.choice(UIDS), rng.choice(GIDS))
        if not os.path.islink(full):
            os.chmod(full, rand_mode())
    return paths


def set_id_file(path, follow):
    """Whether path (as root sees it) is a non-directory with a set-user-id or set-group-id
    bit."""
    try:
        st = os.stat(path) if follow else os.lstat(path)
    except OSError:
        return False
    return not stat.S_ISDIR(st.st_mode) and st.st_mode & (stat.S_ISUID | stat.S_ISGID) != 0


def describe(path):
    try:
        st = os.lstat(path)
    except OSError as e:
        return f"gone({errno.errorcode[e.errno]})"
    return f"{st.st_uid}:{st.st_gid}:{stat.S_IMODE(st.st_mode):o}"


def random_path(paths):
    """An existing path, a new name in an existing directory, or a path through a file."""
    r = rng.random()
    if r < 0.75 and paths:
        return rng.choice(paths)
    dirs = [""] + [p for p in paths if os.path.basename(p).startswith("d")]
    return os.path.join(rng.choice(dirs), f"n{rng.randint(0, 3)}")


def make_call(paths):
    """A random call: its name and arguments, the path it changes, the function that makes
    it on a root, and (if some cases are left out) the function that tells, as root, whether
    it is left out."""
    p = random_path(paths)
    q = random_path(paths)
    kind = rng.randrange(22)
    if kind == 0:
        flags = rng.choice([os.O_RDONLY, os.O_WRONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC,
                            os.O_RDONLY | os.O_NONBLOCK, os.O_RDWR | os.O_APPEND])

        def skip(r):
            try:
                fifo = stat.S_ISFIFO(os.lstat(os.path.join(r, p)).st_mode)
            except OSError:
                return False
            # Without O_NONBLOCK or O_RDWR, opening a FIFO waits for the other end.
            blocks = flags & (os.O_NONBLOCK | os.O_RDWR) == 0
            return fifo and (blocks or not special_opens)
        return f"open {p} {flags:o}", p, lambda r: os.close(
            os.open(os.path.join(r, p), flags | os.O_NOFOLLOW)), skip
    if kind == 1:
        mode = rand_mode()
        return f"create {p} {mode:o}", p, lambda r: os.close(
            os.open(os.path.join(r, p), os.O_CREAT | os.O_EXCL | os.O_WRONLY, mode))
    if kind == 2:
        mode = rand_mode()
        return f"mkdir {p} {mode:o}", p, lambda r: os.mkdir(os.path.join(r, p), mode)
    if kind == 3:
        return f"rmdir {p}", p, lambda r: os.rmdir(os.path.join(r, p))
    if kind == 4:
        return f"unlink {p}", p, lambda r: os.unlink(os.path.join(r, p))
    if kind == 5:
        return f"rename {p} {q}", q, lambda r: os.rename(os.path.join(r, p), os.path.join(r, q))
    if kind == 6:
        return f"link {p} {q}", q, lambda r: os.link(os.path.join(r, p), os.path.join(r, q),
                                                      follow_symlinks=False)
    if kind == 7:
        return f"symlink {q}", q, lambda r: os.symlink("target", os.path.join(r, q))
    if kind == 8:
        mode = rand_mode()
        return f"mkfifo {p} {mode:o}", p, lambda r: os.mkfifo(os.path.join(r, p), mode)
    if kind == 9:
        mode = rand_mode()
        return f"chmod {p} {mode:o}", p, lambda r: os.chmod(os.path.join(r, p), mode)
    if kind in (10, 11):
        uid = rng.choice(UIDS + [-1, -1])
        gid = rng.choice(GIDS + [-1, -1])
        follow = kind == 10
        name = "chown" if follow else "lchown"

        def skip(r):
            # Linux takes the set-id bits away (and so refuses a non-owner), but over FUSE
            # the file system cannot tell this call from the kernel's own privilege drop
            # before a write (docs/kvfs.md, "Permissions").
            return uid == -1 and gid == -1 and set_id_file(os.path.join(r, p), follow)
        return f"{name} {p} {uid} {gid}", p, lambda r: os.chown(
            os.path.join(r, p), uid, gid, follow_symlinks=follow), skip
    if kind == 12:
        size = rng.choice([0, 2, 10])
        return f"truncate {p} {size}", p, lambda r: os.truncate(os.path.join(r, p), size)
    if kind == 13:
        times = rng.choice([(UTIME_NOW, UTIME_NOW), (UTIME_OMIT, UTIME_NOW),
                            (UTIME_NOW, UTIME_OMIT), (0, 0), (UTIME_NOW, 0)])
        return f"utimensat {p} {times}", p, lambda r: utimensat(os.path.join(r, p), *times)
    if kind == 14:
        mask = rng.choice([os.F_OK, os.R_OK, os.W_OK, os.X_OK, os.R_OK | os.W_OK])

        def access(r):
            # access(2) itself, for its errno (os.access only says yes or no).
            if libc.access(os.path.join(r, p).encode(), mask) != 0:
                e = ctypes.get_errno()
                raise OSError(e, os.strerror(e))
        return f"access {p} {mask}", p, access
    if kind == 15:
        return f"stat {p}", p, lambda r: os.stat(os.path.join(r, p))
    if kind == 16:
        return f"listdir {p}", p, lambda r: os.listdir(os.path.join(r, p))
    if kind == 17:
        def write(r):
            fd = os.open(os.path.join(r, p), os.O_WRONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    os.write(fd, b"w")
            finally:
                os.close(fd)
        def skip(r):
            try:
                fifo = stat.S_ISFIFO(os.lstat(os.path.join(r, p)).st_mode)
            except OSError:
                return False
            return fifo and not special_opens
        return f"write {p}", p, write, skip
    if kind == 18:
        name = rng.choice(["user.a", "user.b", "trusted.t"])
        return f"setxattr {p} {name}", p, lambda r: os.setxattr(
            os.path.join(r, p), name, b"v", follow_symlinks=False)
    if kind == 19:
        name = rng.choice(["user.a", "trusted.t"])
        return f"getxattr {p} {name}", p, lambda r: os.getxattr(
            os.path.join(r, p), name, follow_symlinks=False)
    if kind == 20:
        name = rng.choice(["user.a", "trusted.t"])
        return f"removexattr {p} {name}", p, lambda r: os.removexattr(
            os.path.join(r, p), name, follow_symlinks=False)
    return f"readlink {p}", p, lambda r: os.readlink(os.path.join(r, p))


def as_caller(caller, call, root):
    """Makes call(root) in a child with the caller's credentials; returns its errno (0 for
    success)."""
    uid, gid, groups = caller
    rd, wr = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(rd)
        result = "0"
        try:
            os.setgroups(groups)
            os.setegid(gid)
            os.seteuid(uid)
            call(root)
        except OSError as e:
            result = errno.errorcode.get(e.errno, str(e.errno))
        os.write(wr, result.encode())
        os._exit(0)
    os.close(wr)
    out = b""
    while chunk := os.read(rd, 64):
        out += chunk
    os.close(rd)
    os.waitpid(pid, 0)
    return out.decode()


def main():
    os.chmod(top, 0o755)
    for n in range(rounds):
        root = os.path.join(top, f"r{n}")
        paths = build(root)
        for _ in range(rng.randint(15, 30)):
            caller = rng.choice(CALLERS)
            line, target, call, *skip = make_call(paths)
            if skip and skip[0](root):
                continue
            result = as_caller(caller, call, root)
            after = describe(os.path.join(root, target)) if result == "0" else ""
            print(f"r{n} {line} as {caller[0]}:{caller[1]}:{caller[2]} -> {result} {after}",
                  flush=True)
            if result == "0":
                paths = sorted({os.path.relpath(os.path.join(d, f), root)
                                for d, subdirs, files in os.walk(root)
                                for f in subdirs + files})


main()
