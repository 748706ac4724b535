"""Shell completion: the script `orch completion bash` prints, run by a real bash.

bash sources the script and calls its completion function with COMP_WORDS and
COMP_CWORD as bash itself sets them on TAB; the function asks `orch` through
click's `_ORCH_COMPLETE=bash_complete` mechanism. Lane and worker names come
from the fleet, run ids from the run records.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess

import pytest
from conftest import orch_executable

from orchestrator.fleet import load_fleet
from orchestrator.launch import plan_launch
from orchestrator.runs import RunRecord

FLEET = """\
version: 1
slices:
  s:
    workers:
      - {index: 0, address: 10.0.0.1}
      - {index: 1, address: 10.0.0.2}
      - {index: 2, address: 10.0.0.3}
bundles:
  jax-cpu: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2]}
lanes:
  cpu: {workers: 0-1, bundle: jax-cpu, platform: cpu}
  tpu-v6e: {workers: [2], bundle: jax-cpu, platform: cpu}
"""

RUN_IDS = ("smoke-20261124-101500-ab12", "train-20261124-111500-cd34")

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture
def world(tmp_path) -> dict[str, str]:
    """A fleet with two lanes and a runs directory with two recorded runs; the environment naming them."""
    fleet_path = tmp_path / "fleet.yaml"
    fleet_path.write_text(FLEET)
    fleet = load_fleet(fleet_path)
    for run_id in RUN_IDS:
        RunRecord.create(plan_launch(fleet, "cpu", ["train.py"], run_id=run_id), fleet_path, root=tmp_path / "runs")
    return {"ORCH_FLEET": str(fleet_path), "ORCH_RUNS_DIR": str(tmp_path / "runs")}


def complete(line: str, env: dict[str, str]) -> list[str]:
    """What bash offers for TAB at the end of `line`, through the script `orch completion bash` prints."""
    orch = orch_executable()
    words = shlex.split(line) + ([""] if line.endswith(" ") else [])
    script = subprocess.run([orch, "completion", "bash"], capture_output=True, text=True, check=True).stdout
    driver = (
        f"{script}\n"
        f"COMP_WORDS=({' '.join(shlex.quote(w) for w in words)})\n"
        f"COMP_CWORD={len(words) - 1}\n"
        f"_orch_completion {shlex.quote(orch)}\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    proc = subprocess.run(
        ["bash", "--norc", "--noprofile", "-c", driver],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=60,
    )
    assert proc.returncode == 0 and not proc.stderr, proc.stderr
    return [w for w in proc.stdout.splitlines() if w]


def test_bash_completes_lane_names_from_the_fleet(world):
    assert complete("orch launch --lane ", world) == ["cpu", "tpu-v6e"]
    assert complete("orch deploy --lane t", world) == ["tpu-v6e"]
    assert complete("orch --fleet /nowhere/fleet.yaml probe --lane ", world) == []  # a fleet that does not load


def test_bash_completes_run_ids_from_the_run_records(world):
    assert sorted(complete("orch stop ", world)) == sorted(RUN_IDS)
    assert complete("orch report tr", world) == [RUN_IDS[1]]
    assert complete("orch compare smoke-20261124-101500-ab12 t", world) == [RUN_IDS[1]]


def test_bash_completes_verbs_options_and_worker_names(world):
    assert complete("orch sta", world) == ["status"]
    assert "--lane" in complete("orch probe --l", world)
    assert complete("orch probe --workers s-w", world) == ["s-w0", "s-w1", "s-w2"]
    assert complete("orch exec --workers s-w0,s-w", world) == ["s-w0,s-w0", "s-w0,s-w1", "s-w0,s-w2"]
    assert complete(f"orch logs {RUN_IDS[0]} --worker s-w2", world) == ["s-w2"]


@pytest.mark.parametrize("shell, marker", [("zsh", "#compdef orch"), ("fish", "complete --no-files --command orch")])
def test_zsh_and_fish_scripts_are_generated(shell, marker):
    proc = subprocess.run([orch_executable(), "completion", shell], capture_output=True, text=True, check=True)
    assert marker in proc.stdout and "_ORCH_COMPLETE" in proc.stdout
