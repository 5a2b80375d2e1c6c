"""Lists the processes the sandbox can see and tries to reach a host pid; prints JSON.
argv[1] is a host pid (the test's own)."""
import errno
import json
import os
import subprocess
import sys

host_pid = int(sys.argv[1])


def status(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            fields = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        return {"name": fields.get("Name"), "ppid": int(fields.get("PPid", "-1"))}
    except OSError:
        return None


def kill(pid):
    try:
        os.kill(pid, 0)
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


pids = sorted(int(d) for d in os.listdir("/proc") if d.isdigit())
ps = subprocess.run(["ps", "-e", "-o", "pid=,comm="], capture_output=True, text=True)
with open("/proc/1/cmdline", "rb") as f:
    init_cmdline = f.read().split(b"\0")[0].decode("utf-8", "replace")
print(json.dumps({
    "self": os.getpid(),
    "parent": os.getppid(),
    "pids": pids,
    "processes": {pid: status(pid) for pid in pids},
    "ps": [line.split() for line in ps.stdout.splitlines()],
    "init_argv0": init_cmdline,
    "host_pid_exists": os.path.exists(f"/proc/{host_pid}"),
    "kill_host_pid": kill(host_pid),
    "kill_init": kill(1),
}))
