"""The test cluster is real (two raylets, two object stores) and keeps all its traffic on loopback."""

from __future__ import annotations

import ipaddress
import os
from pathlib import Path

import ray

from statekit.ray import LocalCluster

LISTEN = "0A"


def _address(hex_address: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    """/proc/net/tcp* write addresses as hex, each 32-bit word in host (little-endian) order."""
    raw = bytes.fromhex(hex_address)
    words = b"".join(raw[i : i + 4][::-1] for i in range(0, len(raw), 4))
    return ipaddress.ip_address(words)


def _is_loopback(hex_address: str) -> bool:
    address = _address(hex_address)
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped.is_loopback
    return address.is_loopback


def _listeners() -> dict[int, list[str]]:
    """Listening TCP sockets of this machine: inode -> local address (IPv4 and IPv6)."""
    found: dict[int, list[str]] = {}
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == LISTEN:
                address = fields[1].split(":")[0]
                found.setdefault(int(fields[9]), []).append(address)
    return found


def _ray_processes() -> dict[int, str]:
    """pid -> command line of every process of the Ray cluster (raylets, GCS, workers, agents)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            raw = Path(f"/proc/{entry}/cmdline").read_bytes()
            cmdline = raw.replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ray" in cmdline and ("/ray/" in cmdline or "ray::" in cmdline or "raylet" in cmdline):
            found[int(entry)] = cmdline
    return found


def test_two_real_nodes_listening_on_loopback_only(ray_cluster: LocalCluster) -> None:
    nodes = [n for n in ray.nodes() if n.get("Alive")]
    assert len(nodes) == 2
    assert {n["NodeManagerAddress"] for n in nodes} == {"127.0.0.1"}
    listeners = _listeners()
    ray_sockets = []
    for pid, cmdline in _ray_processes().items():
        try:
            links = [os.readlink(f"/proc/{pid}/fd/{fd}") for fd in os.listdir(f"/proc/{pid}/fd")]
        except OSError:
            continue
        for link in links:
            if link.startswith("socket:["):
                inode = int(link[8:-1])
                for address in listeners.get(inode, []):
                    ray_sockets.append((cmdline[:60], address))
    assert ray_sockets, "found the cluster's listening sockets"
    assert _address("0100007F") == ipaddress.ip_address("127.0.0.1"), "decoding /proc's addresses"
    assert _address("0000000000000000FFFF00000100007F") == ipaddress.ip_address("::ffff:127.0.0.1")
    assert [(what, str(_address(a))) for what, a in ray_sockets if not _is_loopback(a)] == []
