"""Reports the sandbox's identity and privileges, and tries to gain more; prints JSON."""
import errno
import json
import os
import subprocess


def outcome(action):
    try:
        action()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e.errno))


with open("/proc/self/status") as f:
    status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)


def setuid_binary(argv):
    """Runs a setuid-root binary and reads the ids it ran with from /proc while it is a
    zombie (ended but not yet reaped), so its ids after the execve are what is read."""
    if not os.path.exists(argv[0]):
        return None
    mode = os.stat(argv[0]).st_mode
    p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)
    with open(f"/proc/{p.pid}/status") as f:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
    output = p.stdout.read().decode("utf-8", "replace")
    p.wait()
    return {
        "setuid_bit": bool(mode & 0o4000),
        "name": fields["Name"],
        "uid": fields["Uid"].split(),
        "gid": fields["Gid"].split(),
        "exit": p.returncode,
        "output": output,
    }


with open("/proc/self/uid_map") as f:
    uid_map = f.read().split()
with open("/proc/self/gid_map") as f:
    gid_map = f.read().split()

print(json.dumps({
    "status": {k: status.get(k) for k in ["Uid", "Gid", "Groups", "CapInh", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp"]},
    "resuid": list(os.getresuid()),
    "resgid": list(os.getresgid()),
    "groups": os.getgroups(),
    "id": subprocess.run(["id"], capture_output=True, text=True).stdout.strip(),
    "uid_map": uid_map,
    "gid_map": gid_map,
    "setuid0": outcome(lambda: os.setuid(0)),
    "setgid0": outcome(lambda: os.setgid(0)),
    "seteuid0": outcome(lambda: os.seteuid(0)),
    "setresuid0": outcome(lambda: os.setresuid(0, 0, 0)),
    "setgroups0": outcome(lambda: os.setgroups([0])),
    "setuid65534": outcome(lambda: os.setuid(65534)),
    "su": setuid_binary(["/usr/bin/su", "-c", "id"]),
    "passwd": setuid_binary(["/usr/bin/passwd", "-S", "root"]),
    "mount": setuid_binary(["/usr/bin/mount", "-t", "tmpfs", "none", "/tmp"]),
}))
