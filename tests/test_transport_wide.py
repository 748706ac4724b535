"""What a wide, cheap fan-out rests on: connections prefer the cheapest secure algorithms (the set
paramiko offers, reordered: AES-GCM first, P-256 key exchange before X25519 where no post-quantum
hybrid is offered; checked against real sshd workers of the local slice),
and the controller makes room for a socket per worker."""

from __future__ import annotations

import logging

import pytest
from paramiko import Transport

from orchestrator.fleet import load_fleet
from orchestrator.transport import for_fleet
from orchestrator.transport.algorithms import transport_class


def test_the_offer_is_paramikos_own_set_with_aes_gcm_and_etm_macs_first():
    ordered = transport_class()
    assert set(ordered._preferred_ciphers) == set(Transport._preferred_ciphers)
    assert set(ordered._preferred_macs) == set(Transport._preferred_macs)
    assert set(ordered._preferred_kex) == set(Transport._preferred_kex)
    kex = list(ordered._preferred_kex)
    if "mlkem768x25519-sha256" in kex:  # the post-quantum hybrid stays first wherever paramiko has it
        assert kex[0] == "mlkem768x25519-sha256"
        kex = kex[1:]
    assert kex[:2] == ["ecdh-sha2-nistp256", "curve25519-sha256@libssh.org"]
    assert ordered._preferred_ciphers[0] == "aes128-gcm@openssh.com"
    assert ordered._preferred_macs[0] == "hmac-sha2-256-etm@openssh.com"


@pytest.mark.ssh
def test_a_worker_connection_negotiates_aes_gcm_and_p256(slice4, caplog):
    caplog.set_level(logging.DEBUG, logger="paramiko.transport")
    fleet = load_fleet(slice4.fleet_path)
    with for_fleet(fleet, fleet.workers[:1]) as t:
        [result] = t.run(["true"]).values()
        assert result.ok, result.describe()
        transport = t._connection(fleet.workers[0].name).client.get_transport()
        assert transport.local_cipher == transport.remote_cipher == "aes128-gcm@openssh.com"
    # paramiko keeps no record of the key exchange once it is done, but logs the one it agreed on
    # (the sandbox's OpenSSH 9.2 has no ML-KEM).
    assert "Kex: ecdh-sha2-nistp256" in caplog.messages


def test_a_wide_fan_out_raises_the_soft_open_files_limit_up_to_the_hard_one():
    import resource

    from orchestrator.transport.limits import FILES_BASE, FILES_PER_WORKER, ensure_open_files

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, hard))
        now = ensure_open_files(256)
        needed = FILES_BASE + FILES_PER_WORKER * 256
        expected = needed if hard == resource.RLIM_INFINITY else min(needed, hard)
        assert now == expected == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        assert ensure_open_files(1) == now  # never lowered
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
