"""Playbook validation and the command lines rungs become (pure: no worker is touched)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.cli import main
from orchestrator.cli.play_cmd import command_shapes
from orchestrator.errors import ConfigError
from orchestrator.play import build_argv, build_playbook, load_playbook, summarize
from orchestrator.yamlsrc import loads

ROOT = Path(__file__).resolve().parent.parent
SHAPES = command_shapes(main)


def book(text: str):
    return build_playbook(loads(text, Path("ladder.yaml")), SHAPES)


def problems(text: str) -> list[str]:
    with pytest.raises(ConfigError) as info:
        book(text)
    return info.value.problems


def test_the_shipped_playbooks_validate_against_the_real_commands():
    for path in sorted((ROOT / "playbooks").glob("*.yaml")):
        pb = load_playbook(path, SHAPES)
        assert pb.steps, path


def test_a_misspelled_option_names_file_line_step_and_suggests():
    [problem] = problems("lane: cpu\nsteps:\n  - probe: {shallow: true}\n  - launch: {workdri: x, argv: [a.py]}\n")
    assert problem.startswith(
        "ladder.yaml:4 steps[1].launch.workdri: `orch launch` has no option 'workdri'; "
        "did you mean 'workdir'? (options: argv, backoff, detach, dry_run, env, "
    )


def test_an_unknown_verb_is_suggested():
    assert problems("steps:\n  - prbe: {}\n")[0].startswith(
        "ladder.yaml:2 steps[0].prbe: unknown verb 'prbe'; did you mean 'probe'? (verbs: "
    )
    assert problems("steps:\n  - {probe: {}, deploy: {}}\n")[0].startswith(
        "ladder.yaml:2 steps[0]: a step names exactly one verb, got probe, deploy"
    )


def test_a_flag_needs_a_boolean_and_step_names_are_unique():
    assert problems("steps:\n  - probe: {shallow: yes please}\n") == [
        "ladder.yaml:2 steps[0].probe.shallow: 'shallow' is a flag; expected true or false, got 'yes please'"
    ]
    assert problems("steps:\n  - {name: a, probe: {}}\n  - {name: a, deploy: {}}\n") == [
        "ladder.yaml:3 steps[1].name: duplicate step name 'a' (also steps[0])"
    ]


def test_steps_become_orch_command_lines_with_lane_json_and_run_references():
    pb = book(
        "lane: cpu\nsteps:\n  - probe: {shallow: true, timeout: 20}\n  - probe: {}\n"
        "  - {name: smoke, launch: {workdir: ex, env: [A=1, B=2], argv: [t.py, --steps, 3]}}\n"
        "  - {lane: other, deploy: {no_relay: true}}\n"
    )
    probe, probe2, smoke, deploy = pb.steps
    assert probe2.name == "probe-2"
    assert build_argv(probe, SHAPES["probe"], "cpu", Path("/pb"), {}) == [
        "probe",
        "--lane",
        "cpu",
        "--json",
        "--shallow",
        "--timeout",
        "20",
    ]
    assert build_argv(smoke, SHAPES["launch"], "cpu", Path("/pb"), {}) == [
        "launch",
        "--lane",
        "cpu",
        "--json",
        "--workdir",
        "/pb/ex",
        "--env",
        "A=1",
        "--env",
        "B=2",
        "--",
        "t.py",
        "--steps",
        "3",
    ]
    assert build_argv(deploy, SHAPES["deploy"], deploy.lane, Path("/pb"), {}) == [
        "deploy",
        "--lane",
        "other",
        "--json",
        "--no-relay",
    ]


def test_from_accepts_a_step_name_or_position():
    pb = book("steps:\n  - probe: {}\n  - {name: smoke, deploy: {}}\n")
    assert pb.start_index("smoke") == 1 and pb.start_index("1") == 0
    with pytest.raises(ConfigError, match="--from smok: no such step; did you mean 'smoke'"):
        pb.start_index("smok")


def test_a_restart_rung_summary_says_per_process_what_was_reused_and_what_was_expected():
    from orchestrator.restart_check import RestartCheck, RunSummary, Verdict

    def verdict(pid, v, expected, ratio, hits):
        return Verdict(
            worker=f"slice-w{pid}",
            process_id=pid,
            frontend="jax",
            role="writer" if pid == 0 else "reader",
            verdict=v,
            expected=expected,
            expectation="",
            cause="",
            cold_compile_sec=10.0,
            warm_compile_sec=None if ratio is None else 10.0 * ratio,
            ratio=ratio,
            hits=hits,
            misses=0,
            compiles=(1, 1),
            entries_written=None,
            entries_at_warm_start=3,
            deserialize_failures=0,
            saved_sec=None,
        )

    check = RestartCheck(
        check_id="restart-check-x",
        lane="cpu",
        platform="cpu",
        policy="shared",
        mode="single-writer",
        threshold=0.5,
        num_processes=2,
        roots={},
        runs=[
            RunSummary("cold", "rc-cold", "succeeded", "", 1.0, "/r/c"),
            RunSummary("warm", "rc-warm", "succeeded", "", 1.0, "/r/w"),
        ],
        verdicts=[verdict(0, "reused", True, 0.06, 10), verdict(1, "written-not-reused", False, 0.7, 0)],
    )
    assert summarize("restart-check", check.to_dict()) == [
        "reused by every process expected to reuse (1 of 2: process 0; warm/cold compile ratio 0.06 <= 0.5)",
        "process 0 (slice-w0) jax: reused, warm/cold 0.06, 10 hits; expected to reuse: yes",
        "process 1 (slice-w1) jax: written-not-reused, warm/cold 0.70, 0 hits; expected to reuse: no",
    ]


def test_probe_and_deploy_rung_summaries_count_workers_and_name_failing_layers():
    probe = {
        "deep": True,
        "summary": {"workers": 4, "ok": 3, "warn": 0, "fail": 1, "layers": {"device-ownership": ["slice-w2"]}},
        "rows": [{"answered": "cpu"}, {"answered": "cpu"}, {"answered": None}, {"answered": "cpu"}],
    }
    assert summarize("probe", probe) == [
        "3/4 workers ok, 0 warn, 1 fail (deep); device answered: cpu",
        "device-ownership: slice-w2",
    ]
    deploy = {
        "bundle": "jax-cpu",
        "bundle_id": "5748b3c35b095645",
        "controller_bytes": 0,
        "bundle_bytes": 150 * 2**20,
        "workers": {"w0": {"status": "unchanged"}, "w1": {"status": "unchanged"}},
    }
    assert summarize("deploy", deploy) == [
        "bundle jax-cpu@5748b3c3: 2 unchanged; controller sent 0.0 MiB for a 150.0 MiB bundle"
    ]
    assert summarize("launch", {"message": "all 4 processes exited 0"}) == ["all 4 processes exited 0"]
    assert summarize("exec", None) == []
    assert summarize("deploy", {"workers": [{"name": "w0"}], "wheels": []}) == []  # a --dry-run's plan
