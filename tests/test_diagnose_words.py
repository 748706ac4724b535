"""Word evidence for an unrecognised log (orchestrator/diagnose_words.py) and how verdict() uses it."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator import diagnose as diag
from orchestrator import diagnose_words
from orchestrator.cli import main
from orchestrator.diagnose_corpus import load_tune, words_model

SSH_TRACE = (
    "Traceback (most recent call last):\n"
    '  File "x.py", line 3, in <module>\n'
    "    client.connect(host, port=22, username=user, key_filename=key)\n"
    "paramiko.ssh_exception.SSHException: unexpected reply from sshd on worker 3\n"
)


def test_the_committed_model_is_what_the_tune_part_builds():
    committed = diagnose_words.MODEL_PATH.read_text()
    assert committed == words_model(load_tune()).to_json(), (
        f"{diagnose_words.MODEL_PATH.name} is stale: rebuild it with .venv/bin/python bench/diagnose.py --write-doc"
    )


def test_the_posterior_is_a_distribution_that_follows_the_words():
    model = diagnose_words.build(
        [("disk", "No space left on device"), ("disk", "device full no space"), ("memory", "out of memory")]
    )
    assert model.seen == {"device": {"disk": 2}, "space": {"disk": 2}}  # words in one entry only are left out
    p = model.posterior("no space left")
    assert abs(sum(p.values()) - 1) < 1e-9 and p["disk"] > p["memory"]
    assert model.posterior("nothing known here") == pytest.approx({"disk": 2 / 3, "memory": 1 / 3})


def test_words_that_agree_with_the_first_hint_name_it_with_low_confidence():
    v = diag.verdict(SSH_TRACE)
    assert (v.layer, v.confidence, v.basis) == ("transport", "low", "words")
    assert v.to_dict()["basis"] == "words" and v.remedy == diag.layer_remedy("transport")


def test_words_alone_never_name_a_layer_without_a_hint():
    v = diag.verdict("RuntimeError: something went wrong\n")
    assert v.layer == diag.UNKNOWN and v.candidates == ()


def test_without_its_model_the_words_say_nothing(monkeypatch, tmp_path):
    for text in ("", "{not json", json.dumps({"entries": {}, "seen": {}}), json.dumps({"entries": {"disk": "x"}})):
        (tmp_path / "words.json").write_text(text)
        monkeypatch.setattr(diagnose_words, "MODEL_PATH", tmp_path / "words.json")
        diagnose_words.model.cache_clear()
        assert diagnose_words.model() is None, text
        assert diag.verdict(SSH_TRACE).layer == diag.UNKNOWN
    diagnose_words.model.cache_clear()


def test_cli_says_when_the_layer_rests_on_the_logs_words(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(SSH_TRACE)
    res = CliRunner().invoke(main, ["diagnose", str(log)])
    assert res.exit_code == 0, res.output
    assert "transport (low confidence: the log's words agree with its keywords, no known message)" in res.output


def test_a_worker_whose_log_only_words_point_at_is_still_running_not_failed(tmp_path):
    from test_diagnose import make_run

    from orchestrator.diagnose_run import diagnose_run

    words_only = "client.connect(host, port=22, username=user) to the sshd of worker 3 over paramiko\n"
    assert diag.verdict(words_only).basis == "words"
    run = diagnose_run(make_run(tmp_path, {"w0": {"log": words_only}}))
    (worker,) = run.workers
    assert worker.status == "running" and run.failed == []
