"""The deepest traceback frame (orchestrator/diagnose_frames.py) and how verdict() uses it, last."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator import diagnose as diag
from orchestrator import diagnose_words
from orchestrator.cli import main
from orchestrator.diagnose_frames import frame_layer


def trace(*frames: str, last: str) -> str:
    lines = ["Traceback (most recent call last):"]
    for path in frames:
        lines += [f'  File "{path}", line 42, in f', "    call()"]
    return "\n".join([*lines, last, ""])


SITE = "/usr/lib/python3.10/site-packages"
# a paramiko failure whose last line no signature knows (a made-up message, in paramiko's own code)
PARAMIKO = trace("deploy.py", f"{SITE}/paramiko/client.py", f"{SITE}/paramiko/transport.py", last="EOFError")
# torchrun's own frames end every failed worker's report, whatever failed in it: not the gang's code
TORCHRUN = trace(
    "/usr/local/bin/torchrun",
    f"{SITE}/torch/distributed/run.py",
    f"{SITE}/torch/distributed/launcher/api.py",
    last="torch.distributed.elastic.multiprocessing.errors.ChildFailedError:",
)


@pytest.fixture(autouse=True)
def no_words(monkeypatch):
    """The word model decides before the frame: without it, these tests see the frame rule alone."""
    monkeypatch.setattr(diagnose_words, "model", lambda: None)


@pytest.mark.parametrize(
    ("path", "layer"),
    [
        (f"{SITE}/paramiko/transport.py", "transport"),
        ("C:\\Python27\\lib\\site-packages\\paramiko\\client.py", "transport"),
        (f"{SITE}/fabric/connection.py", "transport"),
        (f"{SITE}/torch/distributed/rendezvous.py", "collective"),
        (f"{SITE}/torch/distributed/distributed_c10d.py", "collective"),
        (f"{SITE}/torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py", "collective"),
        # paramiko's SFTP file operations fail on the remote path, the agent's and launcher's frames on any failure
        (f"{SITE}/paramiko/sftp_client.py", None),
        (f"{SITE}/torch/distributed/elastic/agent/server/api.py", None),
        (f"{SITE}/torch/distributed/launcher/api.py", None),
        (f"{SITE}/jax/_src/distributed.py", "collective"),
        (f"{SITE}/jax/_src/clusters/cluster.py", "collective"),
        # the TPU VM asking its metadata server who it is: the runtime's own start, not the gang's
        (f"{SITE}/jax/_src/clusters/cloud_tpu_cluster.py", "runtime-proof"),
        (f"{SITE}/jax/_src/lru_cache.py", "cache"),
        (f"{SITE}/jax/_src/compilation_cache.py", "cache"),
        (f"{SITE}/jax/_src/lib/__init__.py", "bundle-skew"),
        (f"{SITE}/jax/_src/lib/mlir/dialects/__init__.py", None),
        # the rest of jax: any failure runs through its dispatch and compile frames
        (f"{SITE}/jax/_src/dispatch.py", None),
        (f"{SITE}/pip/_internal/resolution/resolvelib/resolver.py", None),
        ("train.py", None),
    ],
)
def test_the_deepest_frame_names_the_layer_whose_code_it_runs(path, layer):
    assert frame_layer(trace("main.py", path, last="Exception: boom")) == layer


@pytest.mark.parametrize(
    ("function", "layer"), [("_rendezvous", "collective"), ("_invoke_run", None), ("_restart_workers", None)]
)
def test_the_elastic_agents_own_rendezvous_is_the_gangs_code(function, layer):
    # the agent's frames carry any worker's failure, except its own rendezvous (pytorch/pytorch#67616)
    text = trace("main.py", f"{SITE}/torch/distributed/elastic/agent/server/api.py", last="Exception: boom")
    assert (
        frame_layer(text.replace(", in f\n    call()\nException", f", in {function}\n    call()\nException")) == layer
    )


def test_only_the_deepest_frame_counts():
    assert frame_layer(trace(f"{SITE}/paramiko/client.py", "my_code.py", last="ValueError: bad")) is None
    assert frame_layer("paramiko.ssh_exception.SSHException: Error reading SSH protocol banner\n") is None


@pytest.mark.parametrize(
    "last",
    [
        "ImportError: No module named Crypto.Cipher",
        "ModuleNotFoundError: No module named 'cryptography'",
        "AttributeError: 'EllipticCurvePublicNumbers' object has no attribute 'encode_point'",
        "NameError: name 'temp_path' is not defined",
        "TypeError: connect() got an unexpected keyword argument 'disabled_algorithms'",
        "builtins.AttributeError: 'NoneType' object has no attribute 'send'",
        # the program asking for the default process group it never created (lightly-ai/lightly#1590)
        "RuntimeError: Default process group has not been initialized, please make sure to call init_process_group.",
    ],
)
def test_a_python_error_in_a_librarys_frame_is_not_that_librarys_layer(last):
    # a missing module or name, or a program's bug, raised in an SSH client's (or the gang's) code
    assert frame_layer(trace("deploy.py", f"{SITE}/paramiko/transport.py", last=last)) is None
    assert frame_layer(trace("main.py", f"{SITE}/torch/distributed/rendezvous.py", last=last)) is None
    assert frame_layer(trace("main.py", f"{SITE}/torch/distributed/distributed_c10d.py", last=last)) is None


def test_the_gangs_own_error_in_its_frame_still_names_the_gang():
    last = "RuntimeError: The server socket has failed to listen on any local network address."
    assert frame_layer(trace("main.py", f"{SITE}/torch/distributed/distributed_c10d.py", last=last)) == "collective"


def test_an_error_named_like_a_python_error_elsewhere_still_counts():
    # the exception line is an OS error; a Python error's name in the text before the frame is not it
    text = "TypeError earlier, retried\n" + trace(
        f"{SITE}/paramiko/client.py", last="paramiko.ssh_exception.NoValidConnectionsError: [Errno None] Unable"
    )
    assert frame_layer(text) == "transport"


def test_a_traceback_in_an_ssh_library_answers_transport_with_low_confidence():
    v = diag.verdict(PARAMIKO)
    assert (v.layer, v.confidence, v.basis) == ("transport", "low", "frame")
    assert v.to_dict()["basis"] == "frame" and v.remedy == diag.layer_remedy("transport")


def test_torchruns_own_frames_name_no_layer():
    assert diag.verdict(TORCHRUN).layer == diag.UNKNOWN


def test_a_confident_signature_decides_before_the_frame():
    text = trace(f"{SITE}/paramiko/client.py", last="OSError: [Errno 28] No space left on device")
    v = diag.verdict(text)
    assert (v.layer, v.confidence) == ("disk", "high")


def test_cli_says_when_the_layer_rests_on_the_deepest_frame(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(PARAMIKO)
    res = CliRunner().invoke(main, ["diagnose", str(log)])
    assert res.exit_code == 0, res.output
    assert "transport (low confidence: its traceback's deepest frame is that layer's code, no known message)" in (
        res.output
    )
