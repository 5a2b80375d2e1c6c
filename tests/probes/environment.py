"""Prints the environment the program was started with, from /proc/self/environ (exactly
what execve got), and what it can see of its supervisor's (pid 1) environment, as JSON."""
import errno
import json

with open("/proc/self/environ", "rb") as f:
    entries = [e.decode() for e in f.read().split(b"\0") if e]
try:
    with open("/proc/1/environ", "rb") as f:
        init = "ok:" + f.read().decode("utf-8", "replace")
except OSError as e:
    init = errno.errorcode.get(e.errno, str(e.errno))
print(json.dumps({"environ": dict(e.split("=", 1) for e in entries), "count": len(entries), "init_environ": init}))
