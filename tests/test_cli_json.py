"""`--json` on every verb: each prints one JSON document on stdout (docs/cli-reference.md has the shapes).

The unit tests walk the command tree (a new verb without `--json` fails here) and
run the verbs that need no worker; the slice test runs every other verb with
`--json` against real sshd workers and parses what each printed.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import click
import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from orchestrator.cli import VERBS, main
from tests.test_bundle_interpreter import fake_prefix

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"
GCLOUD = Path(__file__).resolve().parent / "data" / "gcloud"
FLEET_SCHEMA = ROOT / "orchestrator" / "schema" / "fleet.schema.json"

# Commands whose output is not a result to wrap in JSON, and why.
NO_JSON = {
    "completion": "prints a shell script",
    "fleet schema": "prints a JSON Schema already",
    "export jobset": "prints a Kubernetes manifest (YAML; -o writes it to a file)",
}


def leaf_commands() -> dict[str, click.Command]:
    """Every runnable command by its path ("fleet validate"), groups walked."""
    out: dict[str, click.Command] = {}

    def walk(path: str, cmd: click.Command) -> None:
        if isinstance(cmd, click.Group):
            for name in cmd.list_commands(click.Context(cmd)):
                sub = cmd.get_command(click.Context(cmd), name)
                assert sub is not None
                walk(f"{path} {name}".strip(), sub)
        else:
            out[path] = cmd

    for verb in VERBS:
        cmd = main.get_command(click.Context(main), verb)
        assert cmd is not None
        walk(verb, cmd)
    return out


def has_json(cmd: click.Command) -> bool:
    return any("--json" in p.opts for p in cmd.params if isinstance(p, click.Option))


def test_every_command_that_produces_a_result_takes_json():
    lacking = sorted(p for p, c in leaf_commands().items() if not has_json(c) and p not in NO_JSON)
    assert lacking == [], f"commands without --json: {lacking}"
    assert set(NO_JSON) <= set(leaf_commands()), "an exemption names a command that no longer exists"


def invoke(*args: str, env: dict | None = None) -> tuple[int, object]:
    res = CliRunner().invoke(main, list(args), env=env)
    assert not isinstance(res.exception, json.JSONDecodeError)
    return res.exit_code, json.loads(res.stdout)


def test_fleet_validate_json_gives_the_counts_and_fleet_show_json_validates_against_the_fleet_schema(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text(
        "version: 1\nslices:\n  s:\n    workers:\n"
        "      - {index: 0, address: 10.0.0.1}\n      - {index: 1, address: 10.0.0.2}\n"
        'bundles:\n  b: {python: "3.11", pins: [jax==0.10.2, jaxlib==0.10.2]}\n'
        "lanes:\n  cpu: {workers: 0-1, bundle: b, platform: cpu}\n"
    )
    code, doc = invoke("--fleet", str(fleet), "fleet", "validate", "--json")
    assert code == 0
    assert doc == {
        "schema_version": 1,
        "ok": True,
        "path": str(fleet),
        "slices": {"s": ["s-w0", "s-w1"]},
        "workers": ["s-w0", "s-w1"],
        "lanes": {"cpu": ["s-w0", "s-w1"]},
    }
    code, shown = invoke("--fleet", str(fleet), "fleet", "show", "--json")
    assert code == 0
    model = {k: v for k, v in shown.items() if k not in ("resolved_workers", "lane_members")}
    jsonschema.validate(model, json.loads(FLEET_SCHEMA.read_text()))


def test_fleet_validate_json_lists_every_problem_with_its_line_and_exits_2(tmp_path):
    fleet = tmp_path / "fleet.yaml"
    fleet.write_text("version: 1\nslices:\n  s:\n    workers: [{index: 0, address: 10.0.0.1}]\n    colour: red\n")
    code, doc = invoke("--fleet", str(fleet), "fleet", "validate", "--json")
    assert code == 2
    assert doc["ok"] is False and doc["path"] == str(fleet)
    assert any("fleet.yaml:5 slices.s.colour" in p in p for p in doc["problems"]), doc["problems"]


def test_runs_diagnose_and_import_gcloud_answer_json_without_any_worker(tmp_path):
    code, doc = invoke("runs", "--json", env={"ORCH_RUNS_DIR": str(tmp_path / "runs")})
    assert code == 0 and doc["runs"] == []
    log = ROOT / "tests" / "data" / "diagnose" / "bundle-skew-jaxlib-newer.log"
    code, doc = invoke("diagnose", str(log), "--json")
    assert doc["layer"] == "bundle-skew"
    describe = GCLOUD / "v6e-8-single-host.json"
    code, doc = invoke("fleet", "import-gcloud", str(describe), "--json")
    assert code == 0 and doc["snippet"].startswith("slices:") and len(doc["slice"]["workers"]) == 1
    target = tmp_path / "new-fleet.yaml"
    code, doc = invoke("fleet", "import-gcloud", str(describe), "--write", "--fleet", str(target), "--json")
    assert code == 0 and doc["written"] == {"path": str(target), "created": True, "workers": 1}


def test_a_verb_that_fails_with_json_prints_an_error_document_and_keeps_its_exit_code(tmp_path):
    missing = tmp_path / "nowhere.yaml"
    res = CliRunner().invoke(main, ["--fleet", str(missing), "probe", "--json"])
    assert res.exit_code == 2
    doc = json.loads(res.stdout)
    assert doc["ok"] is False
    assert doc["error"]["type"] == "ConfigError" and str(missing) in doc["error"]["message"]
    # `--json` after `--` belongs to the remote command, not to orch
    res = CliRunner().invoke(main, ["--fleet", str(missing), "exec", "--", "echo", "--json"])
    assert res.exit_code == 2 and res.stdout == ""


# -- every other verb, on the local slice ------------------------------------------------


@pytest.mark.ssh
@pytest.mark.e2e
def test_every_verb_answers_one_json_document_on_the_local_slice(slice4, jax_cpu_lane, make_sandbox, tmp_path):
    env = {"ORCH_RUNS_DIR": str(tmp_path / "runs")}
    ran: dict[str, tuple[int, object]] = {}

    def run(path: str, *args: str, fleet: str | None = None, timeout: float = 300) -> object:
        """`orch <path> --json <args>`: the document it printed (the exit code is kept too)."""
        pre = ("--fleet", fleet) if fleet else ()
        proc = slice4.orch(*pre, *path.split(), "--json", *args, check=False, timeout=timeout, env=env)
        try:
            doc = json.loads(proc.stdout)
        except json.JSONDecodeError as exc:
            raise AssertionError(
                f"orch {path} {' '.join(args)} --json printed no JSON document ({exc}); exit {proc.returncode}\n"
                f"--- stdout\n{proc.stdout}--- stderr\n{proc.stderr}"
            ) from None
        ran[path] = (proc.returncode, doc)
        return doc

    run("fleet validate")
    run("fleet show")
    run("fleet import-gcloud", str(GCLOUD / "v6e-8-single-host.json"))
    run("sandbox status")
    refused = run("sandbox up", "--workers", "4")  # a different sandbox already runs there: an error document
    assert ran["sandbox up"][0] == 2 and refused["error"]["hint"].startswith("run `orch sandbox down"), refused
    run("probe", "--shallow")
    run("exec", "--", "true")
    run("bundle lock", "jax-cpu")
    run("bundle check", "--lane", "cpu")
    run("bundle status")
    packed = run("bundle interpreter pack", str(fake_prefix(tmp_path)), "-o", str(tmp_path / "cpython.tar.gz"))
    assert packed["version"] == "3.13.0" and len(packed["sha256"]) == 64, packed
    run("deploy", "--lane", "cpu")  # already active: unchanged everywhere
    run("cache status", "--lane", "cpu")
    run("runs")

    finished = run("launch", "--lane", "cpu", "--workdir", str(EXAMPLES), "--", "jax_spmd.py", "--steps", "2")
    assert finished["ok"], finished
    run_id = finished["run_id"]
    run("gather", run_id)
    run("report", run_id)
    run("compare", run_id, run_id)
    run("diagnose", str(tmp_path / "runs" / run_id))
    logs = run("logs", run_id, "--tail", "5")
    assert set(logs["workers"]) == set(slice4.workers)

    detached = run(
        "launch", "--lane", "cpu", "--detach", "--workdir", str(EXAMPLES), "--", "jax_spmd.py", "--steps", "3"
    )
    assert detached["status"] == "detached", detached
    attached = run("attach", detached["run_id"], timeout=180)
    assert attached["run_id"] == detached["run_id"] and attached["ok"], attached
    run("status", detached["run_id"])

    sleeping = run(
        "launch",
        "--lane",
        "cpu",
        "--detach",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_spmd.py",
        "--steps",
        "1000",
        "--step-sleep",
        "0.2",
    )
    stopped = run("stop", sleeping["run_id"], "--grace", "1")
    assert stopped["ok"] and set(stopped["workers"]) == set(slice4.workers), stopped

    playbook = tmp_path / "reachable.yaml"
    playbook.write_text(yaml.safe_dump({"name": "reachable", "lane": "cpu", "steps": [{"probe": {"shallow": True}}]}))
    run("play", str(playbook))
    run(
        "restart-check",
        "--lane",
        "cpu",
        "--workdir",
        str(EXAMPLES),
        "--",
        "jax_compile_heavy.py",
        "--layers",
        "2",
        timeout=600,
    )
    run("cache clear", "--lane", "cpu", "--yes")
    # Connection holders of the session's own directory (ORCH_TEST_WARM=1), else of an empty one: never the user's.
    env["ORCH_PERSIST_DIR"] = os.environ.get("ORCH_PERSIST_DIR") or str(tmp_path / "holders")
    assert isinstance(run("connections stop")["stopped"], list)
    del env["ORCH_PERSIST_DIR"]

    # What changes a slice runs on one of its own: up, faults, rollback (nothing to roll back to), down.
    directory, base = make_sandbox.slot(2)
    up = run("sandbox up", "--workers", "2", "--dir", str(directory), "--base-address", base, timeout=120)
    assert up["already_running"] is False and len(up["workers"]) == 2
    for fault, done in (("pause", "paused"), ("resume", "resumed"), ("kill", "killed")):
        assert run(f"sandbox {fault}", "1", "--dir", str(directory))["action"] == done
    assert run("sandbox replace", "1", "--dir", str(directory))["action"] == "replaced"
    trusted = run("fleet trust", "1", "--yes", fleet=up["fleet_path"])
    assert trusted["recorded"] == ["slice-w1"], trusted
    rollback = run("rollback", "--lane", "cpu", fleet=up["fleet_path"], timeout=120)
    assert ran["rollback"][0] == 1 and not any(w.get("ok") for w in rollback.values())  # nothing to roll back to
    down = run("sandbox down", "--dir", str(directory))
    assert down["stopped"], down

    expected = {p for p, c in leaf_commands().items() if has_json(c)}
    assert set(ran) == expected, f"not run with --json here: {sorted(expected - set(ran))}"


def test_connections_answers_json_without_any_holder(tmp_path):
    env = {"ORCH_PERSIST_DIR": str(tmp_path / "holders")}
    assert invoke("connections", "--json", env=env) == (0, {"schema_version": 1, "holders": []})
    assert invoke("connections", "stop", "--json", env=env) == (0, {"schema_version": 1, "stopped": []})
