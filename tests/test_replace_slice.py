"""A re-created worker on the local slice: refused by its new host key, trusted on purpose, repaired by deploy.

`orch sandbox replace` does to a worker what the cloud does to a preempted TPU
VM: same address, a new host key, an empty disk. It runs on a private
2-worker sandbox, so the shared slice's deployed lanes stay as they are.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytestmark = [pytest.mark.ssh, pytest.mark.e2e]

HELLO = "import jax\nprint('HELLO', jax.process_index(), jax.process_count())\n"


def test_a_replaced_worker_is_refused_until_trusted_then_deploy_sends_it_only_what_it_lacks(
    make_sandbox, slice4, jax_cpu_lane, tmp_path
):
    sb = make_sandbox(2)
    (sb.dir / "locks").mkdir()
    shutil.copy(Path(slice4.dir) / "locks" / "jax-cpu.lock.json", sb.dir / "locks")
    sb.orch("deploy", "--lane", "cpu", timeout=1200)
    (tmp_path / "hello.py").write_text(HELLO)
    env = {"ORCH_RUNS_DIR": str(tmp_path / "runs")}
    launch = ("launch", "--lane", "cpu", "--workdir", str(tmp_path), "--", "hello.py")

    replaced = sb.orch("sandbox", "replace", "1")
    assert "slice-w1 replaced: new host key" in replaced.stdout

    refused = sb.orch(*launch, env=env, check=False, timeout=300)
    assert refused.returncode != 0
    assert "slice-w1" in refused.stderr and "HOST KEY CHANGED" in refused.stderr
    assert "orch fleet trust slice-w1" in refused.stderr
    assert "HELLO" not in refused.stdout

    unasked = sb.orch("fleet", "trust", "1", input="n\n", check=False)
    assert unasked.returncode != 0 and "nothing recorded" in unasked.stderr
    assert "CHANGED" in unasked.stdout
    wrong = sb.orch("fleet", "trust", "1", "--fingerprint", "SHA256:notTheOneOffered", check=False)
    assert wrong.returncode != 0 and "refusing to record" in wrong.stderr
    new_key = sb.orch("fleet", "trust", "1", "--yes")
    assert "recorded 1 key(s)" in new_key.stderr
    lines = (sb.dir / "known_hosts").read_text().splitlines()
    assert len(lines) == 2 and sum(line.startswith(sb.state.workers[1].address + " ") for line in lines) == 1

    repaired = sb.orch("deploy", "--lane", "cpu", timeout=1200)
    assert "slice-w0: unchanged" in repaired.stderr + repaired.stdout
    assert "slice-w1: installed" in repaired.stderr + repaired.stdout

    ran = sb.orch(*launch, env=env, timeout=300)
    assert sorted(line.split("| ", 1)[1] for line in ran.stdout.splitlines() if "HELLO" in line) == [
        "HELLO 0 2",
        "HELLO 1 2",
    ]
