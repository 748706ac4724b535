"""What orch writes down never holds a credential: environment values, URLs, connection strings,
webhooks, well-known token formats, and program arguments (plan.json, run.json, the receipt's
target, the report). The process itself still gets the real values."""

from __future__ import annotations

import pytest

from hostside import redact
from hostside.launcher import _recorded_target

R = redact.REDACTED


@pytest.mark.parametrize(
    ("given", "written"),
    [
        ("https://x.example/data?api_key=abc123&x=1", f"https://x.example/data?api_key={R}&x=1"),
        ("https://h/p?apikey=abc", f"https://h/p?apikey={R}"),
        ("https://h/p?access_key=AK&b=2", f"https://h/p?access_key={R}&b=2"),
        ("--opt auth=abc123", f"--opt auth={R}"),
        (
            "DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=abc/def==;EndpointSuffix=core.windows.net",
            f"DefaultEndpointsProtocol=https;AccountName=acct;AccountKey={R};EndpointSuffix=core.windows.net",
        ),
        ("https://hooks.slack.com/services/T000/B000/XXXXXXXX", f"https://hooks.slack.com/services/{R}"),
        ("https://discord.com/api/webhooks/123/abcDEF", f"https://discord.com/api/webhooks/{R}"),
        ("https://ci.example/hooks/webhook/abc123", f"https://ci.example/hooks/webhook/{R}"),
        ("https://user:pa/ss@host.example/simple", f"https://{R}@host.example/simple"),
        ("https://u:p@ss@host/simple", f"https://{R}@host/simple"),
        ("https://TOKEN@github.com/org/repo", f"https://{R}@github.com/org/repo"),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123", R),
        ("use hf_abcdefghijklmnopqrstuvwxyz now", f"use {R} now"),
        ("AKIAABCDEFGHIJKLMNOP", R),
        # not credentials: kept as they are
        ("https://host/npm/@scope/pkg", "https://host/npm/@scope/pkg"),
        ("s3://bucket/key@v1", "s3://bucket/key@v1"),
        ("plain value", "plain value"),
    ],
)
def test_credential_shaped_text_is_cut_out_and_the_rest_kept(given, written):
    assert redact.text(given) == written


def test_environment_names_for_tokens_pats_and_account_keys_are_recorded_by_name_only():
    env = {"GITHUB_PAT": "x", "MY_PAT": "y", "AZURE_ACCOUNT_KEY": "z", "PATH": "/usr/bin", "PATTERN": "a*"}
    assert redact.env(env) == {
        "GITHUB_PAT": R,
        "MY_PAT": R,
        "AZURE_ACCOUNT_KEY": R,
        "PATH": "/usr/bin",
        "PATTERN": "a*",
    }


def test_arguments_named_as_credentials_lose_their_values_and_hyperparameters_keep_theirs():
    given = [
        "train.py", "--hf-token", "abc", "--password=xyz", "--max-tokens", "100", "--tokenizer", "t5",
        "db.password=pw", "--lr", "0.1", "--key", "k", "--sort-key", "name", "API_KEY=2", "--api-key=1",
        "--webhook", "https://hooks.slack.com/services/a/b/c", "--data", "https://u:p@host/x",
    ]  # fmt: skip
    assert redact.argv(given, extra=()) == [
        "train.py", "--hf-token", R, f"--password={R}", "--max-tokens", "100", "--tokenizer", "t5",
        f"db.password={R}", "--lr", "0.1", "--key", R, "--sort-key", "name", f"API_KEY={R}", f"--api-key={R}",
        "--webhook", f"https://hooks.slack.com/services/{R}", "--data", f"https://{R}@host/x",
    ]  # fmt: skip


def test_more_argument_names_can_be_marked_in_the_environment(monkeypatch):
    monkeypatch.setenv(redact.EXTRA_ARGS_ENV, "wandb-entity, license")
    assert redact.argv(["--wandb-entity", "team", "license=L-123", "--epochs", "3"]) == [
        "--wandb-entity", R, f"license={R}", "--epochs", "3",
    ]  # fmt: skip


def test_the_plan_records_redacted_arguments_and_the_worker_gets_the_real_ones():
    from orchestrator.launch.plan import Target

    target = Target(kind="script", path="train.py", module=None, args=("--hf-token", "abc", "--lr", "0.1"))
    assert target.to_dict()["args"] == ["--hf-token", R, "--lr", "0.1"]
    assert target.shown_argv() == ["train.py", "--hf-token", R, "--lr", "0.1"]
    assert target.to_dict(redacted=False)["args"] == ["--hf-token", "abc", "--lr", "0.1"]
    launch_target = {**target.to_dict(redacted=False), "shown_args": redact.argv(target.args)}
    assert _recorded_target(launch_target) == target.to_dict()  # what the receipt records
    assert _recorded_target(target.to_dict(redacted=False)) == target.to_dict()  # an older launch file
