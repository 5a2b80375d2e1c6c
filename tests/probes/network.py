"""Tries to reach the host over the network and prints what it got, as JSON.
argv: PORT HOST_IP ABSTRACT_NAME UNIX_PATH -- a TCP port the host listens on (all
addresses), the host's own non-loopback address, an abstract unix socket name and a unix
socket path the host listens on."""
import errno
import json
import socket
import sys
import time

port, host_ip, abstract, unix_path = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]


def attempt(family, kind, address, send=None):
    s = socket.socket(family, kind)
    s.settimeout(1.0)
    begun = time.monotonic()
    try:
        if send is None:
            s.connect(address)
        else:
            s.sendto(send, address)
        result = "ok"
    except socket.timeout:
        result = "timeout"
    except OSError as e:
        result = errno.errorcode.get(e.errno, str(e.errno))
    finally:
        s.close()
    return {"result": result, "ms": round((time.monotonic() - begun) * 1000)}


def own_loopback():
    """A listener of the sandbox's own, on the port the host holds: a shared network
    namespace would answer EADDRINUSE."""
    server = socket.socket()
    server.bind(("127.0.0.1", port))
    server.listen(1)
    client = socket.create_connection(("127.0.0.1", port), timeout=1.0)
    conn, _ = server.accept()
    client.sendall(b"ping")
    got = conn.recv(4)
    for s in (conn, client, server):
        s.close()
    return got.decode()


try:
    loopback = own_loopback()
except OSError as e:
    loopback = errno.errorcode.get(e.errno, str(e.errno))

with open("/proc/net/dev") as f:
    proc_net_dev = sorted(line.split(":")[0].strip() for line in f.readlines()[2:])
with open("/proc/net/route") as f:
    routes = len(f.readlines()) - 1

print(json.dumps({
    "tcp_loopback": attempt(socket.AF_INET, socket.SOCK_STREAM, ("127.0.0.1", port)),
    "tcp_loopback6": attempt(socket.AF_INET6, socket.SOCK_STREAM, ("::1", port)),
    "tcp_host_ip": attempt(socket.AF_INET, socket.SOCK_STREAM, (host_ip, port)),
    "tcp_unrouted": attempt(socket.AF_INET, socket.SOCK_STREAM, ("10.255.255.1", port)),
    "udp_public": attempt(socket.AF_INET, socket.SOCK_DGRAM, ("8.8.8.8", 53), send=b"x"),
    "unix_abstract": attempt(socket.AF_UNIX, socket.SOCK_STREAM, "\0" + abstract),
    "unix_path": attempt(socket.AF_UNIX, socket.SOCK_STREAM, unix_path),
    "own_loopback": loopback,
    "interfaces": sorted(name for _, name in socket.if_nameindex()),
    "proc_net_dev": proc_net_dev,
    "ipv4_routes": routes,
}))
