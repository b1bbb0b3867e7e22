"""The node's addresses and command lines: where a client reaches a server, free ports,
and an argv as the job's log shows it; a plain GET of a server's endpoint."""
from __future__ import annotations

import fcntl
import http.client
import shlex
import socket
import struct
from typing import Optional, Sequence


def client_host(bind_host: str) -> str:
    """Where a client on this node reaches a server bound to ``bind_host``."""
    h = bind_host.strip().strip("[]")
    if h in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if h == "::":
        return "::1"
    return h


def pick_free_port(host: str) -> int:
    """A port that is free on ``host`` now (the OS picks it: bind to port 0)."""
    h = client_host(host) if host.strip() in ("", "*") else host.strip().strip("[]")
    family = socket.AF_INET6 if ":" in h else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((h, 0))
        return s.getsockname()[1]


def port_is_free(host: str, port: int) -> bool:
    h = host.strip().strip("[]") or "0.0.0.0"
    family = socket.AF_INET6 if ":" in h else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as vLLM binds
        try:
            s.bind((h, port))
        except OSError:
            return False
    return True


def subprocess_line(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def http_get(host: str, port: int, path: str, timeout: float,
             headers: Optional[dict] = None) -> tuple[Optional[int], bytes]:
    """(status, body) of a GET, or (None, b"") when it cannot connect or times out.

    http.client directly: no proxy from the environment applies to a probe of
    our own server."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request("GET", path, headers={"Connection": "close", **(headers or {})})
        resp = conn.getresponse()
        return resp.status, resp.read()
    except (OSError, http.client.HTTPException):
        return None, b""
    finally:
        conn.close()


def _interface_addresses() -> list[tuple[str, str]]:
    """(interface, IPv4) of this network namespace's interfaces that have one (Linux ioctl)."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name.encode()[:15]))  # SIOCGIFADDR
            except OSError:
                continue
            out.append((name, socket.inet_ntoa(raw[20:24])))
    return out


def node_address(hostname: Optional[str] = None) -> tuple[str, Optional[str]]:
    """(address, interface) by which other nodes reach this node, resolved here: the
    hostname's IPv4 (/etc/hosts, DNS) when it is not a loopback address, else the first
    non-loopback IPv4 of this node's interfaces; ("127.0.0.1", "lo") when it has none."""
    host = hostname or socket.gethostname()
    ifaces = []
    try:
        ifaces = _interface_addresses()
    except (OSError, ImportError):
        pass
    try:
        addrs = [a[4][0] for a in socket.getaddrinfo(host, None, socket.AF_INET)]
    except OSError:
        addrs = []
    for a in addrs:
        if not a.startswith("127."):
            return a, next((n for n, ip in ifaces if ip == a), None)
    for n, ip in ifaces:
        if not ip.startswith("127."):
            return ip, n
    return "127.0.0.1", "lo"
