"""Where a log stops (orchestrator/diagnose_stall.py) and how verdict() uses it, last."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator import diagnose as diag
from orchestrator import diagnose_words
from orchestrator.cli import main
from orchestrator.diagnose_stall import stall_layer

# torch's JIT extension loader, as a run prints it before it waits on the build cache's lock
ROOT = "Using /home/user/.cache/torch_extensions/py310_cu118 as PyTorch extensions root..."
BUILT = [
    ROOT,
    "Detected CUDA files, patching ldflags",
    "Emitting ninja build file /home/user/.cache/torch_extensions/py310_cu118/fused_adam/build.ninja...",
    "Building extension module fused_adam...",
    "ninja: no work to do.",
    "Loading extension module fused_adam...",
]


@pytest.fixture(autouse=True)
def no_words(monkeypatch):
    """The word model decides before the stall rule: without it, these tests see the rule alone."""
    monkeypatch.setattr(diagnose_words, "model", lambda: None)


@pytest.mark.parametrize(
    "lines",
    [
        ["[rank0] starting", ROOT],
        BUILT,
        [*BUILT, "", "   "],  # blank lines after the last one do not count
        ["Loading extension module dvr..."],
        ["Using  .cache/torch_extensions/py310_cu118 as PyTorch extensions root..."],  # a relative root
    ],
)
def test_a_log_that_stops_at_a_torch_extension_waits_on_its_cache(lines):
    assert stall_layer("\n".join(lines)) == "cache"


@pytest.mark.parametrize(
    "lines",
    [
        # the loader went on: the extension loaded, whatever happened next
        [*BUILT, "Time to load fused_adam op: 0.52 seconds"],
        [ROOT, "Emitting ninja build file /tmp/ext/build.ninja..."],
        # a line that quotes the announcement is not the announcement
        [f"echo '{ROOT}'"],
        [],
    ],
)
def test_a_log_that_goes_on_or_names_no_wait_names_no_layer(lines):
    assert stall_layer("\n".join(lines)) is None


def test_a_stalled_log_answers_cache_with_low_confidence():
    v = diag.verdict("\n".join(BUILT))
    assert (v.layer, v.confidence, v.basis) == ("cache", "low", "stall")
    assert v.to_dict()["basis"] == "stall" and v.remedy == diag.layer_remedy("cache")


def test_a_confident_signature_decides_before_the_stall():
    text = "\n".join(["OSError: [Errno 28] No space left on device", ROOT])
    v = diag.verdict(text)
    assert (v.layer, v.confidence) == ("disk", "high")


def test_cli_says_when_the_layer_rests_on_where_the_log_stops(tmp_path):
    log = tmp_path / "run.log"
    log.write_text("\n".join(BUILT) + "\n")
    res = CliRunner().invoke(main, ["diagnose", str(log)])
    assert res.exit_code == 0, res.output
    assert "cache (low confidence: its log stops where that layer's wait begins, no known message)" in res.output
