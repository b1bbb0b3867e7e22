"""What a node of the allocation says of itself, asked on the node (one Slurm step over the
nodes that run servers): its hostname, the address the other nodes reach it at, the
machine it is on (the kernel's boot id: two "nodes" with one boot id share their cores),
its CPUs, and free ports for its servers. topology=disagg across nodes (launcher.node.disagg)
uses these for each server's URL, NIXL side-channel host and core set.

`python -m launcher.node.node_facts --ports N` prints one JSON line (stdlib only).
"""
from __future__ import annotations

import argparse
import fcntl
import ipaddress
import json
import os
import random
import socket
import struct
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from typing import Optional

SIOCGIFADDR = 0x8915
PROBE_STEP_NAME = "specdec-node-facts"


@dataclass(frozen=True)
class NodeFacts:
    hostname: str
    address: str  # where the other nodes reach this one (not loopback)
    boot_id: str = ""
    cpus: list[int] = field(default_factory=list)
    ports: list[int] = field(default_factory=list)


def _interface_addresses() -> list[tuple[str, str]]:
    """(interface, IPv4 address) of every interface that has one."""
    out = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for _, name in socket.if_nameindex():
            try:
                raw = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
            out.append((name, socket.inet_ntoa(raw[20:24])))
    return out


def node_address(hostname: Optional[str] = None) -> str:
    """This node's address for the others: its hostname's, where that resolves to a
    non-loopback address (/etc/hosts or DNS), else the first non-loopback IPv4 of its
    interfaces; 127.0.0.1 only when it has no other."""
    hostname = hostname or socket.gethostname()
    try:
        addr = socket.gethostbyname(hostname)
        if not ipaddress.ip_address(addr).is_loopback:
            return addr
    except (OSError, ValueError):
        pass
    for name, addr in _interface_addresses():
        if name != "lo" and not ipaddress.ip_address(addr).is_loopback:
            return addr
    return "127.0.0.1"


def ephemeral_range() -> tuple[int, int]:
    """The ports this node's outgoing connections take their source port from."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return 32768, 60999


def free_ports(host: str, n: int, rng: Optional[random.Random] = None) -> list[int]:
    """``n`` distinct ports free on ``host`` now, below the ephemeral range where there is
    room (a port picked by the OS from that range was taken by one of the job's own
    outgoing connections before the server bound it: measured, "Address already in use")."""
    lo = ephemeral_range()[0]
    rng = rng or random.Random()
    socks: list[socket.socket] = []
    try:
        tries = 0
        while len(socks) < n and lo > 12000 and tries < 200:
            tries += 1
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                s.bind((host, rng.randrange(10000, lo)))
                socks.append(s)
            except OSError:
                s.close()
        while len(socks) < n:  # no room below the ephemeral range: the OS picks
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def this_node(ports: int = 0) -> NodeFacts:
    hostname = socket.gethostname()
    address = node_address(hostname)
    try:
        with open("/proc/sys/kernel/random/boot_id") as f:
            boot_id = f.read().strip()
    except OSError:
        boot_id = ""
    return NodeFacts(hostname=hostname, address=address, boot_id=boot_id, cpus=sorted(os.sched_getaffinity(0)),
                     ports=free_ports("0.0.0.0", ports))


def probe_argv(python: str, nodes: list[str], ports: int) -> list[str]:
    """One Slurm step over ``nodes`` (a task each) that prints each node's facts."""
    return ["srun", "--overlap", f"--nodes={len(nodes)}", f"--ntasks={len(nodes)}", "--ntasks-per-node=1",
            f"--nodelist={','.join(nodes)}", f"--job-name={PROBE_STEP_NAME}", "--export=ALL", "--kill-on-bad-exit=1",
            python, "-m", "launcher.node.node_facts", "--ports", str(ports)]


def parse_facts(stdout: str) -> dict[str, NodeFacts]:
    """hostname -> facts, from the probe's JSON lines (other lines ignored)."""
    out = {}
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            d = json.loads(line)
            f = NodeFacts(**d)
        except (ValueError, TypeError):
            continue
        out[f.hostname] = f
    return out


def probe_nodes(python: str, nodes: list[str], ports: int, timeout_s: float = 120) -> dict[str, NodeFacts]:
    """Each node's facts, asked on the node itself (the head's view of another node's
    address may differ from the address that node binds)."""
    r = subprocess.run(probe_argv(python, nodes, ports), capture_output=True, text=True, timeout=timeout_s)
    facts = parse_facts(r.stdout)
    missing = [n for n in nodes if n not in facts]
    if missing:
        raise RuntimeError(f"no facts from node(s) {', '.join(missing)} (srun exit {r.returncode}): "
                           f"{(r.stderr or r.stdout).strip()[-500:]}")
    return facts


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ports", type=int, default=0, help="free ports to pick on this node")
    a = ap.parse_args(argv)
    print(json.dumps(asdict(this_node(a.ports))), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
