"""Tries to reach host files from inside the sandbox and prints what it got, as JSON.

argv: MARKER CONTROL PATH... -- MARKER is a string only the host canaries hold, CONTROL
one that only /workspace/control.txt holds (to show the search works); each PATH is a
canary's host path. For every path it tries direct reads, reads through /proc/1/root and
through `..` from /workspace, writes and creates next to it (and, where it can make the
parent directory in its own filesystem, in that); it plants symlinks in /workspace pointing
at it, for runbox's artifact walk on the host; and it searches every readable file outside
/proc, /sys and /usr for MARKER and CONTROL.
"""
import errno
import json
import os
import sys

marker, control, paths = sys.argv[1], sys.argv[2], sys.argv[3:]


def outcome(action):
    try:
        result = action()
        return "ok:" + result if isinstance(result, str) else "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def read(path):
    with open(path, "rb") as f:
        return f.read(4096).decode("utf-8", "replace")


def append(path):
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"written by the sandbox\n")
    os.close(fd)


def create(path):
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    os.write(fd, b"created by the sandbox\n")
    os.close(fd)


report = {"paths": {}, "marker_found_in": [], "control_found_in": [], "proc1_root": outcome(lambda: ",".join(sorted(os.listdir("/proc/1/root"))))}
for i, path in enumerate(paths):
    parent = os.path.dirname(path)
    report["paths"][path] = {
        "read": outcome(lambda: read(path)),
        "read_proc1_root": outcome(lambda: read("/proc/1/root" + path)),
        "read_proc_self_root": outcome(lambda: read("/proc/self/root" + path)),
        "read_dotdot": outcome(lambda: read("/workspace/" + "../" * 12 + path.lstrip("/"))),
        "list_parent": outcome(lambda: ",".join(sorted(os.listdir(parent)))),
        "append": outcome(lambda: append(path)),
        "create_beside": outcome(lambda: create(os.path.join(parent, "sandbox-was-here"))),
        "mkdir_parent": outcome(lambda: os.makedirs(parent)),
        "create_after_mkdir": outcome(lambda: create(os.path.join(parent, "sandbox-was-here"))),
    }
    # Left for runbox's artifact walk, which runs on the host after the program.
    os.symlink(path, f"/workspace/link-abs-{i}")
    os.symlink("../" * 12 + path.lstrip("/"), f"/workspace/link-rel-{i}")
    os.symlink(parent, f"/workspace/link-dir-{i}")

for root, dirs, files in os.walk("/"):
    if root == "/":
        dirs[:] = [d for d in dirs if d not in ("proc", "sys", "usr")]
    for name in files:
        path = os.path.join(root, name)
        try:
            if not os.path.isfile(path) or os.path.islink(path) or os.path.getsize(path) > 1 << 20:
                continue
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if marker.encode() in data:
            report["marker_found_in"].append(path)
        if control.encode() in data:
            report["control_found_in"].append(path)

print(json.dumps(report))
