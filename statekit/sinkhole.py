"""Where an application process behind the boundary tries to go outside it: named, then refused.

A network namespace with only a loopback refuses every outbound connection, but silently: the process
sees "network unreachable" and statekit never learns where it tried to go. So the boundary routes
every address to its loopback and its packet filter (nftables, ``NAT_RULES``) redirects each DNS query
to statekit's resolver and each TCP connection to a non-loopback address to statekit's sink, both on
sockets bound inside the namespace and handed to statekit (``AppProcess``):

- the resolver (dnspython) answers every name with an address of its own from 198.18.0.0/15 (set
  aside for benchmarks, routed nowhere), one per name from a hash of it, and remembers which name it
  gave it to; it answers no IPv6 address, so a client falls back to IPv4;
- the sink accepts the connection, reads where it was going (``SO_ORIGINAL_DST``), resets it and
  reports ``name:port`` (or the address, for a literal one), which statekit's egress guard makes the
  step's ``egress_blocked`` error observation, as for a Python application's refused connection.

The process sees its connection reset at its first read: the TCP handshake is the kernel's, done
before the sink accepts. Not covered: UDP to other ports (refused by the kernel, unnamed) and IPv6
literals (unreachable, unnamed).
"""

from __future__ import annotations

import hashlib
import ipaddress
import logging
import selectors
import socket
import struct
import threading
from collections.abc import Callable

from statekit.determinism.egress import unjudged

log = logging.getLogger(__name__)

SINK_PORT = 9
"""The sink's port on the namespace's loopback (9 is "discard")."""
RESOLVER_PORT = 53
NAT_RULES = f"""table ip statekit {{
  chain out {{
    type nat hook output priority -100; policy accept;
    udp dport 53 redirect to :{RESOLVER_PORT}
    ip daddr != 127.0.0.0/8 meta l4proto tcp redirect to :{SINK_PORT}
  }}
}}
"""
"""The boundary's packet filter (``nft -f``): every DNS query to the resolver, every TCP connection
that would leave the loopback to the sink."""
ADDRESSES = ipaddress.ip_network("198.18.0.0/15")
SO_ORIGINAL_DST = 80  # linux/netfilter_ipv4.h


class Sinkhole:
    """The resolver on ``udp`` and the sink on ``tcp`` (both bound inside the namespace), served on a
    thread of their own; ``report`` is called with ``host:port`` for each connection the sink ends."""

    def __init__(self, tcp: socket.socket, udp: socket.socket, report: Callable[[str], None]) -> None:
        self._tcp, self._udp, self._report = tcp, udp, report
        self._names: dict[str, str] = {}
        self._addresses: dict[str, str] = {}
        self._wake, self._woken = socket.socketpair()
        self._selector = selectors.DefaultSelector()
        for sock in (tcp, udp, self._woken):
            sock.setblocking(False)
            self._selector.register(sock, selectors.EVENT_READ)
        self._thread = threading.Thread(target=self._serve, name="statekit-sinkhole", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while True:
            for key, _ in self._selector.select():
                if key.fileobj is self._woken:
                    return
                try:
                    if key.fileobj is self._udp:
                        self._resolve()
                    else:
                        self._sink()
                except BlockingIOError:
                    continue
                except Exception:  # one bad packet must not end the thread
                    log.exception("the boundary's sinkhole failed on one request")

    def _address(self, name: str) -> str:
        """The address this resolver gives ``name``: from a hash of the name, so the same in every
        process and episode whatever was asked before (the next free one after a collision)."""
        if name not in self._addresses:
            size = ADDRESSES.num_addresses - 2  # neither the network's address nor its broadcast
            start = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % size
            for offset in range(size):
                address = str(ADDRESSES[1 + (start + offset) % size])
                if address not in self._names:
                    break
            else:
                raise RuntimeError("the boundary's resolver has given out every address it has")
            self._addresses[name], self._names[address] = address, name
        return self._addresses[name]

    def _resolve(self) -> None:
        # imported at the first query, not with statekit.kit, whose users mostly run no app process
        import dns.message
        import dns.rdataclass
        import dns.rdatatype
        import dns.rrset

        query_bytes, sender = self._udp.recvfrom(4096)
        query = dns.message.from_wire(query_bytes)
        answer = dns.message.make_response(query)
        for question in query.question:
            if question.rdtype == dns.rdatatype.A and question.rdclass == dns.rdataclass.IN:
                name = question.name.to_text(omit_final_dot=True).lower()
                answer.answer.append(
                    dns.rrset.from_text(
                        question.name, 0, dns.rdataclass.IN, dns.rdatatype.A, self._address(name)
                    )
                )
        with unjudged():  # a reply into the process's namespace, whose addresses the guard cannot judge
            self._udp.sendto(answer.to_wire(), sender)

    def _sink(self) -> None:
        connection, _ = self._tcp.accept()
        with connection:
            original = connection.getsockopt(socket.SOL_IP, SO_ORIGINAL_DST, 16)
            port, packed = struct.unpack("!2xH4s8x", original)
            address = socket.inet_ntoa(packed)
            # reported before the reset: the process learns of the refusal only after statekit does,
            # so the step that made the attempt is the one that reports it
            self._report(f"{self._names.get(address, address)}:{port}")
            connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))

    def close(self) -> None:
        """Stop the thread and close its sockets. Safe to call twice."""
        if self._wake.fileno() == -1:
            return
        self._wake.send(b"x")
        self._thread.join(10)
        self._selector.close()
        for sock in (self._tcp, self._udp, self._wake, self._woken):
            sock.close()
