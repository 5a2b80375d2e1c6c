"""Tries to change the sandbox's read-only root and reach devices, and prints what it got,
as JSON. argv[1] is a unique name to create, so the host can check it never appeared."""
import errno
import json
import os
import stat
import sys

name = sys.argv[1]


def outcome(action):
    try:
        result = action()
        return "ok:" + result if isinstance(result, str) else "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def create(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.close(fd)


def write(path, data=b"x\n"):
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)


def read(path):
    with open(path, "rb") as f:
        return f.read(64).decode("utf-8", "replace")


def flags(path):
    f = os.statvfs(path).f_flag
    return {"read_only": bool(f & os.ST_RDONLY), "nosuid": bool(f & os.ST_NOSUID), "nodev": bool(f & os.ST_NODEV)}


def describe(path):
    st = os.lstat(path)
    if stat.S_ISCHR(st.st_mode):
        return f"char:{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    if stat.S_ISBLK(st.st_mode):
        return f"block:{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    if stat.S_ISLNK(st.st_mode):
        return "link:" + os.readlink(path)
    if stat.S_ISDIR(st.st_mode):
        return "dir"
    return "file"


report = {
    "create": {p: outcome(lambda: create(p)) for p in [f"/usr/{name}", f"/{name}", f"/etc/{name}", f"/dev/{name}", f"/proc/{name}", f"/workspace/{name}", f"/tmp/{name}", f"/dev/shm/{name}"]},
    "mkdir": {p: outcome(lambda: os.mkdir(p)) for p in [f"/usr/lib/{name}", f"/{name}-dir", "/sys", "/root"]},
    "write": {p: outcome(lambda: write(p)) for p in ["/etc/passwd", "/etc/hostname", "/usr/bin/python3", "/proc/sys/kernel/core_pattern", "/proc/sysrq-trigger", "/proc/sys/kernel/hostname", "/proc/sys/vm/drop_caches"]},
    "chmod": {p: outcome(lambda: os.chmod(p, 0o777)) for p in ["/usr/bin/python3", "/etc/passwd", "/"]},
    "rename": {p: outcome(lambda: os.rename(p, p + ".moved")) for p in ["/etc/passwd", "/usr/bin/python3", "/workspace"]},
    "unlink": {p: outcome(lambda: os.unlink(p)) for p in ["/etc/passwd", "/dev/null"]},
    "stat": {p: outcome(lambda: describe(p)) for p in ["/sys", "/sys/fs/cgroup", "/dev/tty", "/dev/console", "/dev/mem", "/dev/kmem", "/dev/port", "/dev/kmsg", "/dev/vda", "/dev/sda", "/dev/loop0", "/dev/net/tun", "/dev/fuse", "/dev/ptmx", "/dev/pts", "/root", "/home", "/var", "/run", "/boot"]},
    "open": {p: outcome(lambda: read(p)) for p in ["/dev/tty", "/dev/mem", "/dev/kmsg", "/proc/kcore", "/proc/kmsg"]},
    "dev": {entry: describe(os.path.join("/dev", entry)) for entry in sorted(os.listdir("/dev"))},
    "flags": {p: flags(p) for p in ["/", "/usr", "/etc/passwd", "/proc", "/workspace", "/tmp", "/dev/shm"]},
    "passwd": read("/etc/passwd"),
}
print(json.dumps(report))
