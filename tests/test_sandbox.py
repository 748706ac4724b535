"""The local pod slice: fleet it writes, the rules it enforces, and real sshd workers."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from pathlib import Path

import pytest
from conftest import orch_executable

from orchestrator import sandbox
from orchestrator.errors import SandboxError
from orchestrator.fleet import load_fleet

# ---------------------------------------------------------------------------
# The generated fleet (no sshd needed)


def write_fleet(tmp_path: Path, workers: int, lanes=None) -> Path:
    addresses = sandbox.worker_addresses("127.0.1.1", workers)
    path = tmp_path / "fleet.yaml"
    path.write_text(sandbox.render_fleet(tmp_path, addresses, sandbox.plan_lanes(workers, lanes)))
    return path


def test_the_default_fleet_has_one_cpu_lane_over_all_workers_and_validates(tmp_path):
    fleet = load_fleet(write_fleet(tmp_path, 4))
    m = fleet.model
    assert [w.name for w in fleet.workers] == ["slice-w0", "slice-w1", "slice-w2", "slice-w3"]
    assert [w.host for w in fleet.workers] == ["127.0.1.1", "127.0.1.2", "127.0.1.3", "127.0.1.4"]
    assert fleet.lane_members == {"cpu": ("slice-w0", "slice-w1", "slice-w2", "slice-w3")}
    lane = m.lanes["cpu"]
    assert (lane.platform, lane.bundle, lane.runtime, lane.cache) == ("cpu", "jax-cpu", "cpu", "per-host")
    sl = m.slices["slice"]
    assert (
        sl.accelerator_type,
        sl.root,
        sl.shared_dir,
        sl.python,
        sl.user,
        sl.identity_file,
        sl.skip_metadata_query,
    ) == ("v6e-16", "/var/lib/orch", "/mnt/orch-shared", "python3", "root", "id_ed25519", True)
    assert (m.ssh.known_hosts, m.ssh.host_key_policy, m.ssh.connect_timeout) == ("known_hosts", "strict", 5)
    assert {n: (b.python, b.pins) for n, b in m.bundles.items()} == {
        "jax-cpu": ("3.11", ["jax==0.10.2", "jaxlib==0.10.2"]),
        "jax-libtpu": ("3.11", ["jax==0.10.2", "jaxlib==0.10.2", "libtpu==0.0.42.1"]),
        "torch-cpu": ("3.11", ["torch==2.13.0+cpu"]),
    }
    assert all(b.provenance.get("note") and not b.source.find_links for b in m.bundles.values())
    assert m.runtime_profiles["cpu"].env == {"JAX_PLATFORMS": "cpu", "PJRT_DEVICE": "CPU"}
    assert m.runtime_profiles["tpu"].env == {"PJRT_DEVICE": "TPU"}
    assert all(p.forbid == ["XLA_USE_BF16", "XLA_USE_SPMD"] for p in m.runtime_profiles.values())
    assert m.cache_policies["per-host"].mode == "per-host"
    assert (m.cache_policies["shared"].mode, m.cache_policies["shared"].root) == (
        "single-writer",
        "/mnt/orch-shared/cache",
    )


def test_six_workers_split_in_order_into_a_cpu_and_a_tpu_lane(tmp_path):
    fleet = load_fleet(write_fleet(tmp_path, 6, ["cpu:4:cpu:jax-cpu", "tpu:2:tpu:jax-libtpu"]))
    assert fleet.lane_members == {
        "cpu": ("slice-w0", "slice-w1", "slice-w2", "slice-w3"),
        "tpu": ("slice-w4", "slice-w5"),
    }
    tpu = fleet.model.lanes["tpu"]
    assert (tpu.platform, tpu.bundle, tpu.runtime, tpu.cache) == ("tpu", "jax-libtpu", "tpu", "per-host")
    assert fleet.runtime_profile("tpu").env == {"PJRT_DEVICE": "TPU"}
    assert fleet.model.slices["slice"].accelerator_type == "v6e-24"
    assert [w.lane for w in fleet.workers] == ["cpu"] * 4 + ["tpu"] * 2


def test_a_one_worker_lane_is_written_as_a_single_index(tmp_path):
    fleet = load_fleet(write_fleet(tmp_path, 3, ["a:2:cpu:torch-cpu", "b:1:tpu:jax-libtpu"]))
    assert fleet.lane_members == {"a": ("slice-w0", "slice-w1"), "b": ("slice-w2",)}


@pytest.mark.parametrize(
    "workers, lanes, message",
    [
        (4, ["cpu:4:cpu"], "--lane 'cpu:4:cpu': expected NAME:COUNT:PLATFORM:BUNDLE, e.g. cpu:4:cpu:jax-cpu"),
        (
            4,
            ["cpu:four:cpu:jax-cpu"],
            "--lane 'cpu:four:cpu:jax-cpu': COUNT 'four' must be a whole number of workers, at least 1",
        ),
        (
            4,
            ["cpu:0:cpu:jax-cpu", "b:4:cpu:jax-cpu"],
            "--lane 'cpu:0:cpu:jax-cpu': COUNT '0' must be a whole number of workers, at least 1",
        ),
        (
            4,
            ["cpu:4:gpu:jax-cpu"],
            "--lane 'cpu:4:gpu:jax-cpu': PLATFORM 'gpu' must be one of: cpu, tpu; did you mean 'tpu'?",
        ),
        (
            4,
            ["cpu:4:cpu:jax-cpux"],
            "--lane 'cpu:4:cpu:jax-cpux': no bundle 'jax-cpux'; did you mean 'jax-cpu'? "
            "(sandbox bundles: jax-cpu, jax-libtpu, torch-cpu)",
        ),
        (
            4,
            ["c/pu:4:cpu:jax-cpu"],
            "--lane 'c/pu:4:cpu:jax-cpu': lane name 'c/pu' must be letters, digits, '.', '_' or '-'",
        ),
        (
            6,
            ["cpu:4:cpu:jax-cpu", "tpu:1:tpu:jax-libtpu"],
            "--lane counts add up to 5 (4 + 1) but --workers is 6; every worker belongs to exactly one lane",
        ),
        (4, ["a:2:cpu:jax-cpu", "a:2:cpu:jax-cpu"], "--lane: lane 'a' is given twice; each lane needs its own name"),
    ],
)
def test_bad_lane_specs_are_refused_with_a_clear_message(workers, lanes, message):
    with pytest.raises(SandboxError) as err:
        sandbox.plan_lanes(workers, lanes)
    assert err.value.message == message


@pytest.mark.parametrize(
    "directory, rebound",
    [
        ("/tmp/orch-sbx", "/tmp"),
        ("/tmp", "/tmp"),
        ("/root/sbx", "/root"),
        ("/var/lib/orch/sbx", "/var/lib/orch"),
        ("/mnt/orch-shared", "/mnt/orch-shared"),
    ],
)
def test_a_sandbox_dir_that_workers_rebind_is_refused(directory, rebound):
    with pytest.raises(SandboxError) as err:
        sandbox.check_dir(directory)
    assert err.value.message == (
        f"sandbox dir {directory} is under {rebound}, which every worker replaces with "
        "its own private copy, so a worker's sshd could not read its config and keys there"
    )
    assert err.value.hint == "use a directory elsewhere, e.g. --dir /var/tmp/orch-sandbox"


def test_worker_addresses_count_up_from_the_base_and_stay_on_loopback():
    assert sandbox.worker_addresses("127.0.1.254", 3) == ["127.0.1.254", "127.0.1.255", "127.0.2.0"]
    for base, workers in (("10.0.0.1", 2), ("127.255.255.254", 2), ("127.0.0.0", 1)):
        with pytest.raises(SandboxError, match="must stay inside 127.0.0.1-127.255.255.254"):
            sandbox.worker_addresses(base, workers)
    with pytest.raises(SandboxError, match="is not an IPv4 address"):
        sandbox.worker_addresses("localhost", 1)


def test_a_missing_sshd_names_the_package_to_install(monkeypatch):
    monkeypatch.setattr(sandbox.sshd, "SSHD", "/nonexistent/sshd")
    with pytest.raises(SandboxError) as err:
        sandbox.preflight()
    assert (err.value.message, err.value.hint) == (
        "no OpenSSH server: /nonexistent/sshd is missing",
        "apt-get install openssh-server",
    )


def test_not_being_root_says_how_to_run_it(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    with pytest.raises(SandboxError) as err:
        sandbox.preflight()
    assert err.value.hint == "run it as root, e.g. `sudo orch sandbox up ...`"


def run_orch(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [orch_executable(), *args], capture_output=True, text=True, timeout=60, env={**os.environ, **(env or {})}
    )


def test_the_cli_refuses_a_dir_under_tmp_before_touching_anything():
    proc = run_orch("sandbox", "up", "--workers", "2", "--dir", "/tmp/orch-sbx-refused")
    assert proc.returncode == 2
    assert "orch: error: sandbox dir /tmp/orch-sbx-refused is under /tmp" in proc.stderr
    assert "hint: use a directory elsewhere, e.g. --dir /var/tmp/orch-sandbox" in proc.stderr
    assert not Path("/tmp/orch-sbx-refused").exists()


def test_the_cli_refuses_lane_counts_that_do_not_add_up():
    proc = run_orch(
        "sandbox", "up", "--workers", "3", "--dir", "/var/tmp/orch-sbx-never-made", "--lane", "cpu:2:cpu:jax-cpu"
    )
    assert proc.returncode == 2
    assert "orch: error: --lane counts add up to 2 (2) but --workers is 3" in proc.stderr
    assert not Path("/var/tmp/orch-sbx-never-made").exists()


def test_down_and_status_on_nothing_are_fine(tmp_path):
    directory = f"/var/tmp/orch-sbx-nothing-{os.getpid()}"
    assert sandbox.down(directory).stopped == ()
    assert sandbox.status(directory).up is False
    proc = run_orch("sandbox", "status", "--json", env={sandbox.DIR_ENV: directory})
    assert proc.returncode == 0 and json.loads(proc.stdout)["up"] is False


# ---------------------------------------------------------------------------
# Real workers


@pytest.mark.ssh
def test_every_worker_answers_orch_exec_with_its_own_hostname(slice4):
    proc = slice4.orch("exec", "--", "hostname")
    lines = sorted(line.split(" | ") for line in proc.stdout.splitlines())
    assert [(host.strip(), out) for host, out in lines] == [(w, w) for w in slice4.workers]
    assert "4/4 hosts ok" in proc.stderr


@pytest.mark.ssh
def test_workers_have_private_roots_tmp_and_homes_but_share_one_dir(slice4):
    w0, w1 = slice4.workers[:2]
    token = f"t{os.getpid()}-{time.monotonic_ns()}"
    slice4.ssh(
        w0,
        "sh",
        "-c",
        f"echo {token} > /var/lib/orch/{token} && echo {token} > /tmp/{token} && "
        f"echo {token} > ~/{token} && echo {token} > /mnt/orch-shared/{token}",
        check=True,
    )
    assert (
        slice4.ssh(w0, "cat", f"/var/lib/orch/{token}", f"/tmp/{token}", f"/root/{token}").stdout.split() == [token] * 3
    )
    other = slice4.ssh(w1, "ls", f"/var/lib/orch/{token}", f"/tmp/{token}", f"/root/{token}")
    assert other.returncode != 0 and other.stderr.count("No such file") == 3
    shared = slice4.orch("exec", "--json", "--", "cat", f"/mnt/orch-shared/{token}")
    assert [r["stdout_tail"] for r in json.loads(shared.stdout)["results"]] == [token] * 4
    # A fresh home: no startup files that cost every remote command time.
    rc = slice4.ssh(w1, "cat", "/root/.bashrc", check=True).stdout
    assert rc == f"# {w1}: sandbox worker home\n"
    assert (
        slice4.ssh(w1, "python3", "-c", "import sys, venv; print(sys.executable)", check=True).stdout.strip()
        == "/usr/bin/python3"
    )
    # The controller sees the same files through the sandbox directory.
    assert (slice4.dir / "workers" / w0 / "root" / token).read_text() == token + "\n"
    assert not (slice4.dir / "workers" / w1 / "tmp" / token).exists()


@pytest.mark.ssh
def test_status_reports_every_worker_running_with_its_sshd(slice4):
    doc = json.loads(slice4.orch("sandbox", "status", "--json").stdout)
    assert doc["up"] and doc["fleet_path"] == str(slice4.fleet_path)
    assert [(w["name"], w["address"], w["hostname"], w["state"]) for w in doc["workers"]] == [
        (w, slice4.address(w), w, "running") for w in slice4.workers
    ]
    for w in doc["workers"]:
        assert Path(f"/proc/{w['pid']}/cmdline").read_bytes().startswith(b"sshd: /usr/sbin/sshd -D -e -f ")


@pytest.mark.ssh
def test_a_paused_worker_times_out_while_the_others_answer_and_resume_restores_it(slice4):
    target, other = slice4.workers[1], slice4.workers[0]
    slice4.orch("sandbox", "pause", target)
    try:
        assert [w.state for w in sandbox.status(slice4.dir).workers] == ["running", "paused", "running", "running"]
        hung = subprocess.Popen(
            [*slice4.ssh_argv(target, connect_timeout=2), "true"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        start = time.monotonic()
        assert slice4.ssh(other, "hostname", check=True).stdout.strip() == other
        _, err = hung.communicate(timeout=30)
        assert hung.returncode == 255 and "timed out" in err
        assert 1.5 < time.monotonic() - start < 15
        # TCP still connects (the kernel accepts); nothing answers.
        with socket.create_connection((slice4.address(target), 22), timeout=2) as sock:
            sock.settimeout(0.5)
            with pytest.raises(socket.timeout):
                sock.recv(64)
    finally:
        slice4.orch("sandbox", "resume", target)
    assert slice4.ssh(target, "hostname", check=True).stdout.strip() == target
    assert sandbox.status(slice4.dir).workers[1].state == "running"


@pytest.mark.ssh
def test_a_killed_worker_refuses_connections_and_up_starts_it_again(make_sandbox):
    sbx = make_sandbox(2)
    sbx.orch("sandbox", "kill", "1")
    refused = sbx.ssh(1, "true")
    assert refused.returncode == 255 and "Connection refused" in refused.stderr
    assert [w.state for w in sandbox.status(sbx.dir).workers] == ["running", "dead"]
    paused = sbx.orch("sandbox", "pause", "slice-w1", check=False)
    assert paused.returncode == 2 and "slice-w1 is dead" in paused.stderr
    again = sbx.orch("sandbox", "up", "--workers", "2", "--base-address", sbx.state.base_address)
    assert "started again: slice-w1" in again.stdout
    assert sbx.ssh(1, "hostname", check=True).stdout.strip() == "slice-w1"


@pytest.mark.ssh
def test_up_with_the_same_shape_changes_nothing_and_another_shape_is_refused(make_sandbox):
    sbx = make_sandbox(2)
    keys_before = (sbx.dir / "known_hosts").read_text()
    state = sandbox.up(sbx.dir, 2, None, sbx.state.base_address)
    assert state.already_running and not state.restarted
    assert [w.pid for w in state.workers] == [w.pid for w in sbx.state.workers]
    assert (sbx.dir / "known_hosts").read_text() == keys_before
    with pytest.raises(SandboxError) as err:
        sandbox.up(sbx.dir, 3, None, sbx.state.base_address)
    assert err.value.message.startswith(f"a sandbox is already running in {sbx.dir} (2 worker(s) from ")
    assert err.value.hint == f"run `orch sandbox down --dir {sbx.dir}` first"


@pytest.mark.ssh
def test_up_status_down_through_the_cli_leave_nothing_behind(make_sandbox):
    directory, base = make_sandbox.slot(2)
    env = {sandbox.DIR_ENV: str(directory)}
    up = run_orch("sandbox", "up", "--workers", "2", "--base-address", base, env=env)
    assert up.returncode == 0, up.stderr
    assert up.stdout.splitlines()[-2:] == [
        f"fleet: {directory}/fleet.yaml",
        f"export ORCH_FLEET={directory}/fleet.yaml",
    ]
    table = run_orch("sandbox", "status", env=env)
    assert table.returncode == 0 and table.stdout.count("running") == 2
    fleet_env = {**env, "ORCH_FLEET": str(directory / "fleet.yaml")}
    # Something left running on a worker, outside its ssh session's process tree.
    started = run_orch("exec", "--", "sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & echo $!", env=fleet_env)
    assert started.returncode == 0, started.stderr
    pids = [int(sbx_pid) for sbx_pid in sandbox_pids(directory)]
    assert len(pids) >= 4  # two sshd listeners and two orphaned sleeps
    down = run_orch("sandbox", "down", env=env)
    assert down.returncode == 0 and "stopped 2 worker(s)" in down.stdout
    assert not any(alive(pid) for pid in pids)
    assert not directory.exists()
    assert run_orch("sandbox", "down", env=env).stdout.strip() == f"no sandbox in {directory}; nothing to do"


def sandbox_pids(directory: Path) -> set[int]:
    """Every process on the sandbox's workers (by namespace), read from /proc."""
    state = sandbox.load_state(directory)
    found = set()
    for w in state.workers:
        found |= sandbox.worker_processes(w)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2] not in "ZX"


@pytest.mark.ssh
def test_an_address_in_use_is_refused_with_a_free_alternative(make_sandbox):
    directory, base = make_sandbox.slot(2)
    second = sandbox.worker_addresses(base, 2)[1]
    with socket.socket() as listener:
        listener.bind((second, 22))
        listener.listen()
        with pytest.raises(SandboxError) as err:
            sandbox.up(directory, 2, None, base)
    assert err.value.message == f"{second}:22 already in use (another sandbox or sshd listens there)"
    assert "--base-address 127." in err.value.hint and "ss -ltnp" in err.value.hint
    assert not directory.exists() or not (directory / "state.json").exists()


@pytest.mark.ssh
def test_a_regenerated_host_key_is_refused_under_strict_host_keys(make_sandbox):
    sbx = make_sandbox(2)
    old = sandbox.host_key(sbx.dir, 1)
    known = (sbx.dir / "known_hosts").read_text()
    new = sandbox.regenerate_host_key(sbx.dir, "slice-w1")
    assert new != old and sandbox.host_key(sbx.dir, 1) == new
    assert (sbx.dir / "known_hosts").read_text() == known
    changed = sbx.ssh(1, "true")
    assert changed.returncode == 255 and "REMOTE HOST IDENTIFICATION HAS CHANGED" in changed.stderr
    assert sbx.ssh(0, "hostname", check=True).stdout.strip() == "slice-w0"


@pytest.mark.ssh
def test_down_without_state_still_stops_the_workers_of_its_dir(make_sandbox):
    sbx = make_sandbox(2)
    pids = [w.pid for w in sbx.state.workers]
    (sbx.dir / "state.json").unlink()  # as after an `up` interrupted before it wrote its state
    assert sandbox.status(sbx.dir).up is False
    result = sandbox.down(sbx.dir)
    assert result.killed == 2 and not any(alive(pid) for pid in pids)
    assert not sbx.dir.exists()


@pytest.mark.ssh
def test_every_worker_resolves_every_workers_hostname_to_its_address(slice4):
    code = "import socket; print(*(socket.gethostbyname(f'slice-w{i}') for i in range(4)))"
    out = slice4.orch("exec", "--", "python3", "-c", code).stdout
    expected = " ".join(slice4.address(i) for i in range(4))
    assert sorted(out.splitlines()) == sorted(f"{w} | {expected}" for w in slice4.workers)
