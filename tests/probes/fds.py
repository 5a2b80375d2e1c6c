"""Lists the descriptors the program starts with and tries the host ones it might have
inherited; prints JSON. argv: [--hold] descriptor numbers to try. With --hold it first
creates /workspace/started and waits for the host to create /workspace/stop."""
import errno
import json
import os
import sys
import time

if sys.argv[1:2] == ["--hold"]:
    del sys.argv[1]
    open("/workspace/started", "w").close()
    deadline = time.monotonic() + 20
    while not os.path.exists("/workspace/stop") and time.monotonic() < deadline:
        time.sleep(0.02)


def outcome(action):
    try:
        result = action()
        return "ok:" + result if isinstance(result, str) else "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


def target(fd):
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        return None  # the descriptor of the listing itself, closed by now


listing = os.listdir("/proc/self/fd")
fds = {fd: target(fd) for fd in listing}
report = {"fds": {fd: t for fd, t in fds.items() if t is not None}, "listed": sorted(int(fd) for fd in listing), "tries": {}}
for fd in (int(a) for a in sys.argv[1:]):
    report["tries"][fd] = {
        "fstat": outcome(lambda: str(os.fstat(fd).st_ino)),
        "read": outcome(lambda: os.pread(fd, 256, 0).decode("utf-8", "replace")),
        "proc_self": outcome(lambda: open(f"/proc/self/fd/{fd}", "rb").read(256).decode("utf-8", "replace")),
        "proc_init": outcome(lambda: open(f"/proc/1/fd/{fd}", "rb").read(256).decode("utf-8", "replace")),
    }
report["proc_init_fds"] = outcome(lambda: ",".join(os.listdir("/proc/1/fd")))
print(json.dumps(report))
