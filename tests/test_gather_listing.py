"""Gather trusts nothing a worker lists: names that would escape the run record are refused
(naming the worker) and every copy's sha256 is checked against the listing."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator import receipts
from orchestrator.errors import OrchError
from orchestrator.receipts.listing import is_plain_name, parse_listing
from tests.fakes import exits, worker
from tests.fakes import scripted_transport as scripted_transport  # noqa: F401  (the fixture)

RUN_DIR = "/var/lib/orch/runs/r1"


@dataclass(frozen=True)
class _Process:
    worker: str
    process_id: int
    run_dir: str = RUN_DIR


@dataclass(frozen=True)
class _Target:
    def argv(self) -> list[str]:
        return ["train.py"]


@dataclass(frozen=True)
class _Plan:
    workers: tuple[str, ...]
    run_id: str = "r1"
    lane: str = "cpu"
    bundle: str | None = None
    platform: str | None = None
    target: _Target = _Target()

    @property
    def processes(self) -> list[_Process]:
        return [_Process(w, i) for i, w in enumerate(self.workers)]

    def process(self, name: str) -> _Process:
        return _Process(name, self.workers.index(name))


@dataclass(frozen=True)
class _Record:
    dir: Path
    workers: tuple[str, ...]

    def plan(self) -> _Plan:
        return _Plan(self.workers)

    def info(self) -> dict:
        return {}


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def listing(files: dict, live: bool = False) -> dict:
    return {"ok": True, "job": "gather", "run_dir": RUN_DIR, "exists": True, "files": files, "live": live}


def writes(data: bytes):
    """A get reply that writes `data` where the controller asked for the file."""

    def reply(call):
        Path(call.argv[2]).write_bytes(data)
        return exits(0)(call)

    return reply


@pytest.mark.parametrize(
    "name",
    ["../../../../.bashrc", "/etc/passwd", "..", ".", ".hidden", "a/b", "", "x\ny", "a\\b", "nul\x00", "x" * 256],
)
def test_a_listing_with_a_name_that_is_not_one_plain_component_is_refused_naming_the_worker(
    name, tmp_path, scripted_transport
):
    run = tmp_path / "run"
    w0 = worker(0)
    fake = scripted_transport([w0])
    fake.expect_job("w0", "gather", [RUN_DIR], answer=listing({name: {"size": 3, "sha256": sha(b"bad")}}))
    result = receipts.gather(_Record(run, ("w0",)), fake)
    got = result.workers["w0"]
    assert got.status == "missing"
    assert "refused the worker's run-directory listing" in (got.error or "")
    assert not fake.calls_to("w0", "get")  # nothing was copied
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["gather.json", "run"]


def test_a_listing_of_the_wrong_shape_is_refused_naming_the_worker():
    for doc in ({"exists": "yes"}, {"exists": True, "files": []}, {"exists": True, "files": {"a": {"size": -1}}}):
        with pytest.raises(OrchError) as err:
            parse_listing(doc, "w3")
        assert err.value.host == "w3"
    with pytest.raises(OrchError):
        parse_listing({"exists": True, "files": {"a": {"sha256": "../x"}}}, "w3")


def test_plain_names_are_the_files_a_run_directory_holds():
    for name in ("record.json", "output.log", "supervisor.log", "exit.json", "profile-1.trace.gz", "a..b"):
        assert is_plain_name(name)


def test_every_copy_is_checked_against_the_listed_sha256_and_a_bad_copy_is_not_kept(tmp_path, scripted_transport):
    run = tmp_path / "run"
    good, bad = b'{"phase": "done"}', b"tampered"
    fake = scripted_transport([worker(0)])
    fake.expect_job("w0", "gather", [RUN_DIR], answer=listing({"record.json": {"size": 17, "sha256": sha(good)}}))
    fake.expect_get("w0", f"{RUN_DIR}/record.json", writes(bad))
    fake.expect_get("w0", f"{RUN_DIR}/record.json", writes(bad))
    got = receipts.gather(_Record(run, ("w0",)), fake).workers["w0"]
    assert got.status == "partial"
    assert "sha256 differs" in got.failed["record.json"]
    assert not (run / "w0" / "record.json").exists()
    assert not list((run / "w0").glob(".*.part"))


def test_a_live_runs_copy_that_differs_from_the_listing_is_kept_but_named_unverified(tmp_path, scripted_transport):
    run = tmp_path / "run"
    receipt, log = b'{"phase": "running"}', b"line 1\nline 2\n"
    files = {"record.json": {"size": 20, "sha256": sha(receipt)}, "output.log": {"size": 7, "sha256": sha(b"line 1\n")}}
    fake = scripted_transport([worker(0)])
    fake.expect_job("w0", "gather", [RUN_DIR], answer=listing(files, live=True))
    fake.expect_get("w0", f"{RUN_DIR}/output.log", writes(log))
    fake.expect_get("w0", f"{RUN_DIR}/record.json", writes(receipt))
    got = receipts.gather(_Record(run, ("w0",)), fake).workers["w0"]
    assert got.status == "live"
    assert got.unverified == ("output.log",)
    assert (run / "w0" / "output.log").read_bytes() == log
    assert json.loads((run / "gather.json").read_text())["workers"]["w0"]["unverified"] == ["output.log"]
