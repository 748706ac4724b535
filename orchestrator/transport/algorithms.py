"""The SSH algorithms orch's connections prefer: the same set paramiko offers, cheapest secure first.

SSH takes the first algorithm of the client's list that the server also offers, so
the order is the choice. paramiko (read in its `Transport`: `_preferred_kex`,
`_preferred_ciphers`, `_preferred_macs`) already puts the key exchanges in the
right order: mlkem768x25519-sha256 (post-quantum hybrid, with OpenSSH >= 9.9)
when its `cryptography` has ML-KEM, then curve25519-sha256@libssh.org (OpenSSH's
default before 9.9), then the NIST curves and the finite-field groups (a
diffie-hellman-group14 exchange costs the controller about 5 times the CPU of
curve25519). Its ciphers, though, start with aes128-ctr plus a separate HMAC, and
its MACs with the encrypt-and-MAC variants. orch moves AES-GCM to the front (one
AEAD pass per packet, no MAC: the cheapest cipher paramiko has, with AES-NI; it has
no chacha20-poly1305) and the encrypt-then-MAC variants before their older forms.
Nothing is added or removed, so every server paramiko reached is still reached,
and host keys are checked exactly as before (hostkeys.py).
"""

from __future__ import annotations

from functools import lru_cache

FIRST_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")
FIRST_MACS = ("hmac-sha2-256-etm@openssh.com", "hmac-sha2-512-etm@openssh.com")


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

    class OrderedTransport(Transport):
        _preferred_ciphers = _first(ciphers, FIRST_CIPHERS)
        _preferred_macs = _first(macs, FIRST_MACS)

    return OrderedTransport
