"""The SSH algorithms orch's connections prefer: the same set paramiko offers, cheapest secure first.

SSH takes the first algorithm of the client's list that the server also offers, so
the order is the choice. paramiko (read in its `Transport`: `_preferred_kex`,
`_preferred_ciphers`, `_preferred_macs`) offers its key exchanges in this order:
mlkem768x25519-sha256 (post-quantum hybrid, with OpenSSH >= 9.9) when its
`cryptography` has ML-KEM, then curve25519-sha256@libssh.org, ecdh-sha2-nistp256,
the other NIST curves and the finite-field groups (a diffie-hellman-group14
exchange costs the controller about 5 times the CPU of an elliptic curve). orch
keeps the hybrid first wherever both sides have it, and puts ecdh-sha2-nistp256
before curve25519: both are 128-bit elliptic-curve Diffie-Hellman, equal on the
controller (OpenSSL under `cryptography` either way), but OpenSSH's sshd computes
X25519 with its own portable reference code and P-256 with OpenSSL's optimised
constant-time code, and a worker spent about 5 ms less CPU per new connection
with P-256 (64 connections each way, alternated, on the local slice). Its ciphers
start with aes128-ctr plus a separate HMAC, and its MACs with the
encrypt-and-MAC variants. orch moves AES-GCM to the front (one AEAD pass per
packet, no MAC: the cheapest cipher paramiko has, with AES-NI; it has no
chacha20-poly1305) and the encrypt-then-MAC variants before their older forms.
Nothing is added or removed, so every server paramiko reached is still reached,
and host keys are checked exactly as before (hostkeys.py).

The same `Transport` subclass sets the connection's TCP options (`QuickAckSocket`).
SSH is a conversation of small packets, and two TCP defaults made each early
round trip wait 40 ms on the other side's delayed ACK: Nagle's algorithm (a
small packet waits for the ACK of the previous one) and delayed ACKs (that ACK
waits up to 40 ms for data to ride on). OpenSSH's sshd, for instance, sends a
host-key announcement right after authentication and then holds the answer to
the first channel open until the client ACKs it. Measured on the local slice:
connect 80-130 ms -> 32-39 ms, the first command's session 44 ms -> 1-2 ms.
orch turns Nagle off (TCP_NODELAY, as OpenSSH's client does for interactive
sessions) and asks Linux to ACK at once after every read (TCP_QUICKACK, which
the kernel resets, hence after every read). Nothing changes on the wire but timing.
"""

from __future__ import annotations

import socket
from functools import lru_cache
from typing import Any

# How often an idle connection's reader thread wakes (paramiko's default: every 0.1 s, to see
# whether it was closed, needs a keepalive or a rekey). A holder keeps hundreds of connections:
# 256 of them woke 2,560 times a second, 17 % of a core while idle and GIL contention in every
# fan-out. Closing, keepalives (every 15 s) and rekeys still happen, within this many seconds.
ACTIVE_CHECK = 1.0
FIRST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
FIRST_MACS = ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com")
# The post-quantum hybrid where the server has it, then P-256 before X25519 (see the module docstring).
FIRST_KEX = ("mlkem768x25519-sha256", "ecdh-sha2-nistp256")


def _first(preferred: tuple[str, ...], first: tuple[str, ...]) -> tuple[str, ...]:
    """`preferred` with the members of `first` it has moved to its front (nothing added or removed)."""
    front = tuple(a for a in first if a in preferred)
    return front + tuple(a for a in preferred if a not in front)


@lru_cache(maxsize=1)
def transport_class() -> type:
    """paramiko's `Transport` with orch's order (for `SSHClient.connect(transport_factory=...)`)."""
    from paramiko import Transport

    ciphers: tuple[str, ...] = getattr(Transport, "_preferred_ciphers")  # noqa: B009  (private: not in the stubs)
    macs: tuple[str, ...] = getattr(Transport, "_preferred_macs")  # noqa: B009
    kex: tuple[str, ...] = getattr(Transport, "_preferred_kex")  # noqa: B009

    class OrderedTransport(Transport):
        _preferred_ciphers = _first(ciphers, FIRST_CIPHERS)
        _preferred_macs = _first(macs, FIRST_MACS)
        _preferred_kex = _first(kex, FIRST_KEX)
        _active_check_timeout = ACTIVE_CHECK

        def __init__(self, sock: Any, *args: Any, **kwargs: Any) -> None:
            super().__init__(quick_ack(sock), *args, **kwargs)

    return OrderedTransport


class QuickAckSocket(socket.socket):
    """A TCP socket that asks for an immediate ACK after every read (see the module docstring)."""

    def recv(self, bufsize: int, flags: int = 0) -> bytes:
        data = super().recv(bufsize, flags)
        try:
            self.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        except OSError:
            pass
        return data


QUICKACK = getattr(socket, "TCP_QUICKACK", 0)


def quick_ack(sock: Any) -> Any:
    """`sock`, when it is a connected TCP socket, as a `QuickAckSocket` without Nagle (the same file
    descriptor and timeout); anything else (a ProxyJump channel, a ProxyCommand) as it is."""
    if type(sock) is not socket.socket or sock.family not in (socket.AF_INET, socket.AF_INET6) or not QUICKACK:
        return sock
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except OSError:
        return sock
    timeout = sock.gettimeout()
    quick = QuickAckSocket(sock.family, sock.type, sock.proto, fileno=sock.detach())
    quick.settimeout(timeout)
    return quick
