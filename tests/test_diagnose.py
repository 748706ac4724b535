"""Failure signatures: real log excerpts land in their owning layer; the most specific line wins."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import diagnose as diag
from orchestrator.cli import main

REPO = Path(__file__).resolve().parent.parent
DATA = Path(__file__).resolve().parent / "data" / "diagnose"
EXCERPTS = sorted(DATA.glob("*.log"))


def read_excerpt(path: Path) -> tuple[dict[str, str], str]:
    """(header fields, log text) of a test excerpt; the header is its leading `# key: value` lines."""
    header, body = {}, []
    lines = path.read_text().splitlines(keepends=True)
    i = 0
    while i < len(lines) and lines[i].startswith("#"):
        key, _, value = lines[i][1:].partition(":")
        header[key.strip()] = value.strip()
        i += 1
    body = "".join(lines[i:])
    return header, body


@pytest.mark.parametrize("path", EXCERPTS, ids=[p.stem for p in EXCERPTS])
def test_each_real_excerpt_is_diagnosed_as_its_cited_layer(path):
    header, text = read_excerpt(path)
    finding = diag.diagnose(text)
    assert finding is not None, f"{path.name}: no signature matched"
    assert finding.layer == header["layer"], (
        f"{path.name}: {finding.layer} via {finding.signature_id} on line {finding.line_number}: {finding.line}"
    )
    assert finding.line == text.splitlines()[finding.line_number - 1]


@pytest.mark.parametrize("path", EXCERPTS, ids=[p.stem for p in EXCERPTS])
def test_each_excerpt_cites_a_public_source_and_a_known_layer(path):
    header, text = read_excerpt(path)
    assert re.match(r"https://\S+$", header.get("source", "")), f"{path.name}: no '# source: URL' header"
    assert header.get("layer") in diag.LAYERS
    assert text.strip(), f"{path.name}: no log lines after the header"


def test_most_layers_have_at_least_three_real_excerpts():
    per_layer = {layer: 0 for layer in diag.LAYERS}
    for path in EXCERPTS:
        per_layer[read_excerpt(path)[0]["layer"]] += 1
    assert all(count >= 3 for count in per_layer.values()), per_layer


def test_a_cpu_fallback_warning_after_the_tpu_is_already_in_use_is_device_ownership():
    _, text = read_excerpt(DATA / "device-ownership-pid-then-cpu-fallback.log")
    all_layers = {f.layer for f in diag.classify(text)}
    assert {"device-ownership", "runtime-proof"} <= all_layers
    finding = diag.diagnose(text)
    assert (finding.layer, finding.signature_id) == ("device-ownership", "tpu-in-use-by-pid")
    assert "pid 176028" in finding.line


def test_an_absl_fallback_warning_after_libtpu_already_in_use_is_device_ownership():
    _, text = read_excerpt(DATA / "device-ownership-libtpu-in-use-then-fallback.log")
    finding = diag.diagnose(text)
    assert (finding.layer, finding.signature_id) == ("device-ownership", "libtpu-already-in-use")
    assert finding.line_number == 1


def test_the_specific_cause_wins_even_when_it_comes_after_the_symptom():
    text = (
        "WARNING:absl:No GPU/TPU found, falling back to CPU. (Set TF_CPP_MIN_LOG_LEVEL=0 and rerun for "
        "more info.)\n"
        "INFO:jax._src.xla_bridge:Unable to initialize backend 'tpu': ABORTED: Internal error when "
        'accessing libtpu multi-process lockfile. Run "$ sudo rm /tmp/libtpu_lockfile".\n'
    )
    finding = diag.diagnose(text)
    assert (finding.layer, finding.line_number) == ("device-ownership", 2)


def test_a_generic_runtime_error_never_beats_a_specific_line_before_or_after_it():
    specific = "jaxlib.xla_extension.XlaRuntimeError: UNAVAILABLE: No TPU Platform available."
    generic = "RuntimeError: something went wrong"
    for text in (f"{generic}\n{specific}\n", f"{specific}\n{generic}\n"):
        assert diag.diagnose(text).signature_id == "no-tpu-platform"
    assert diag.diagnose(generic).layer == "other"


def test_a_line_takes_its_most_specific_signature_not_the_generic_backend_failure():
    line = (
        "RuntimeError: Unable to initialize backend 'tpu': ABORTED: The TPU is already in use by process "
        "with pid 4242. Not attempting to load libtpu.so in this process."
    )
    assert diag.match_line(line).id == "tpu-in-use-by-pid"
    findings = diag.classify(line)
    assert len(findings) == 1 and findings[0].layer == "device-ownership"


def test_on_equal_priority_the_earliest_line_wins():
    text = (
        "ssh: connect to host 10.0.0.5 port 22: Connection refused\n"
        "ssh: connect to host 10.0.0.6 port 22: Connection timed out\n"
    )
    finding = diag.diagnose(text)
    assert (finding.signature_id, finding.line_number) == ("ssh-connection-refused", 1)


def test_a_peer_crash_outranks_the_heartbeat_failure_it_causes():
    text = (
        "jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Error allocating device buffer: "
        "Attempting to allocate 15.65G. That was not possible. There are 11.08G free.; (0x0x0_HBM0)\n"
        "absl::Status: UNAVAILABLE: The following tasks are unhealthy (stopped sending heartbeats):\n"
    )
    assert diag.diagnose(text).layer == "memory"


def test_the_measured_libtpu_messages_on_a_host_without_a_tpu_are_classified():
    assert (
        diag.match_line(
            "INFO:jax._src.xla_bridge:Unable to initialize backend 'tpu': NOT_FOUND: TPU "
            "initialization failed: No jellyfish device found."
        ).layer
        == "runtime-proof"
    )
    assert diag.match_line("OSError: libtpu not found").layer == "runtime-proof"
    assert (
        diag.match_line(
            "Failed to deserialize executable: UNIMPLEMENTED: Deserializing serialized executable not supported."
        ).layer
        == "cache"
    )


def test_orchs_own_transport_errors_are_transport():
    for line in (
        "worker-3: connection to 127.0.1.3:22 refused (sshd not running?)",
        "worker-3: connect to 127.0.1.3:22 timed out after 5s",
        "worker-3: HOST KEY CHANGED for 127.0.1.3: known_hosts has ssh-ed25519 ...",
    ):
        assert diag.match_line(line).layer == "transport", line


def test_text_without_a_known_signature_gives_no_finding():
    assert diag.diagnose("all good\nstep 10 loss 1.23\n") is None
    assert diag.classify("") == []


def test_every_signature_has_a_source_a_remedy_a_known_layer_and_a_unique_id():
    ids = [s.id for s in diag.SIGNATURES]
    assert len(ids) == len(set(ids))
    assert 30 <= len(ids) <= 70
    for s in diag.SIGNATURES:
        assert s.layer in diag.LAYERS, s.id
        assert re.match(r"https://\S+$", s.source), s.id
        assert s.remedy.strip() and "\n" not in s.remedy, s.id
        assert 0 < s.priority < 100, s.id
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", s.id), s.id


def test_every_signature_is_the_best_match_for_its_own_real_example():
    for s in diag.SIGNATURES:
        assert diag.match_line(s.example) is s, (s.id, diag.match_line(s.example))


def test_every_layer_has_signatures_and_a_default_remedy():
    for layer in diag.LAYERS:
        assert any(s.layer == layer for s in diag.SIGNATURES), layer
        assert diag.layer_remedy(layer)
    with pytest.raises(ValueError):
        diag.layer_remedy("nope")


def test_the_committed_troubleshooting_doc_is_generated_from_the_table():
    committed = (REPO / "docs" / "troubleshooting.md").read_text()
    assert committed == diag.render_troubleshooting_markdown(), (
        "docs/troubleshooting.md is stale: regenerate it with "
        "python -c 'from orchestrator.diagnose import render_troubleshooting_markdown as r; "
        'open("docs/troubleshooting.md", "w").write(r())\''
    )


def test_the_troubleshooting_doc_starts_with_the_debugging_order_and_lists_every_signature():
    doc = diag.render_troubleshooting_markdown()
    assert doc.startswith("# Troubleshooting by owning layer\n")
    assert doc.index("## Debugging order") < doc.index("## transport")
    for s in diag.SIGNATURES:
        assert f"`{s.id}`" in doc


# ---------------------------------------------------------------------- CLI


def run_cli(*args, input=None):
    return CliRunner().invoke(main, ["diagnose", *args], input=input)


def test_cli_prints_layer_line_remedy_and_source_for_a_log_file():
    path = DATA / "device-ownership-pid-then-cpu-fallback.log"
    result = run_cli(str(path))
    assert result.exit_code == 0, result.output
    assert "layer:     device-ownership" in result.output
    assert "line 12:" in result.output  # the file's header lines count as lines
    assert "pid 176028" in result.output
    assert "remedy:" in result.output and "source:    https://github.com/jax-ml/jax/issues/22070" in result.output


def test_cli_json_has_layer_signature_line_and_remedy():
    path = DATA / "cache-torch-xla-never-reads.log"
    result = run_cli(str(path), "--json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["layer"] == "cache"
    assert doc["signature"].startswith("W torch_xla/csrc/runtime/pjrt_computation_client.cc:680]")
    assert doc["remedy"] and doc["id"] == "xla-deserialize-unimplemented"
    assert doc["line"] == 3 and doc["source"].startswith("https://")
    assert "matches" not in doc


def test_cli_reads_stdin_with_a_dash_and_lists_every_match_with_all():
    _, text = read_excerpt(DATA / "device-ownership-pid-then-cpu-fallback.log")
    result = run_cli("-", "--json", "--all", input=text)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["layer"] == "device-ownership" and doc["line"] == 9
    assert [(m["line"], m["layer"]) for m in doc["matches"]] == [(9, "device-ownership"), (10, "runtime-proof")]
    plain = run_cli("--all", input=text)
    assert plain.exit_code == 0
    assert "*      9  device-ownership" in plain.output and "      10  runtime-proof" in plain.output


def test_cli_reports_no_known_signature_and_still_exits_zero():
    result = run_cli("-", input="step 1 ok\nstep 2 ok\n")
    assert result.exit_code == 0
    assert "no known signature" in result.output
    doc = json.loads(run_cli("--json", input="fine\n").output)
    assert doc["layer"] is None and doc["signature"] is None and doc["remedy"] is None


def test_cli_names_an_unreadable_file_and_exits_2(tmp_path):
    missing = tmp_path / "nope.log"
    result = run_cli(str(missing))
    assert result.exit_code == 2
    assert f"cannot read log {missing}" in result.output
    assert run_cli(str(tmp_path)).exit_code == 2  # a directory is not a log


def test_cli_tolerates_undecodable_bytes(tmp_path):
    log = tmp_path / "binary.log"
    log.write_bytes(b"\xff\xfe garbage\nOut of memory: Killed process 4242 (python3)\n")
    result = run_cli(str(log), "--json")
    assert result.exit_code == 0
    assert json.loads(result.output)["layer"] == "memory"
