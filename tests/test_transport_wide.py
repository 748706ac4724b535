"""What a wide, cheap fan-out rests on: connections prefer the cheapest secure algorithms (the set
paramiko offers, reordered: AES-GCM first; checked against real sshd workers of the local slice),
and the controller makes room for a socket per worker."""

from __future__ import annotations

import pytest
from paramiko import Transport

from orchestrator.fleet import load_fleet
from orchestrator.transport import for_fleet
from orchestrator.transport.algorithms import transport_class


def test_the_offer_is_paramikos_own_set_with_aes_gcm_and_etm_macs_first():
    ordered = transport_class()
    assert set(ordered._preferred_ciphers) == set(Transport._preferred_ciphers)
    assert set(ordered._preferred_macs) == set(Transport._preferred_macs)
    assert ordered._preferred_kex == Transport._preferred_kex
    assert "25519" in " ".join(ordered._preferred_kex[:2])  # x25519, alone or in the ML-KEM hybrid, first
    assert ordered._preferred_ciphers[0] == "aes128-gcm@openssh.com"
    assert ordered._preferred_macs[0] == "hmac-sha2-256-etm@openssh.com"


@pytest.mark.ssh
def test_a_worker_connection_negotiates_aes_gcm(slice4):
    fleet = load_fleet(slice4.fleet_path)
    with for_fleet(fleet, fleet.workers[:1]) as t:
        [result] = t.run(["true"]).values()
        assert result.ok, result.describe()
        transport = t._connection(fleet.workers[0].name).client.get_transport()
        assert transport.local_cipher == transport.remote_cipher == "aes128-gcm@openssh.com"


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
